/* The generated text of a whole answer, per surface, fed to one counter
 * (each piece a text of its own, as the input estimate counts them), and
 * what the answer used. */
#include "gw_answer.h"

#include <string.h>

#include "gw_dialect.h"
#include "gw_estimate_internal.h"
#include "gw_usage.h"

static void text_of(struct gw_walk *w, const struct jdoc_value *object, const char *name)
{
    const struct jdoc_value *value = gw_walk_member(object, name);
    if (jdoc_is(value, JDOC_STRING))
        gw_walk_string(w, value);
}

static void chat_output(struct gw_walk *w, const struct jdoc_value *answer)
{
    static const char *const texts[] = {"content", "refusal", "reasoning_content"};
    const struct jdoc_value *choices = gw_walk_member(answer, "choices");
    for (uint32_t i = 0; jdoc_is(choices, JDOC_ARRAY) && i < choices->count; i++) {
        const struct jdoc_value *choice = &choices->as.items[i];
        text_of(w, choice, "text");
        const struct jdoc_value *message = gw_walk_member(choice, "message");
        for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
            text_of(w, message, texts[k]);
        const struct jdoc_value *calls = gw_walk_member(message, "tool_calls");
        for (uint32_t c = 0; jdoc_is(calls, JDOC_ARRAY) && c < calls->count; c++) {
            const struct jdoc_value *function = gw_walk_member(&calls->as.items[c], "function");
            text_of(w, function, "name");
            text_of(w, function, "arguments");
        }
    }
}

static void messages_output(struct gw_walk *w, const struct jdoc_value *answer)
{
    const struct jdoc_value *content = gw_walk_member(answer, "content");
    for (uint32_t i = 0; jdoc_is(content, JDOC_ARRAY) && i < content->count; i++) {
        const struct jdoc_value *block = &content->as.items[i];
        text_of(w, block, "text");
        text_of(w, block, "thinking");
        text_of(w, block, "name");
        const struct jdoc_value *input = gw_walk_member(block, "input");
        if (input != NULL)
            gw_walk_json(w, input);
    }
}

/* Each item's texts: its own (call names, arguments, input) and those of
 * its content and summary parts. */
static void responses_output(struct gw_walk *w, const struct jdoc_value *answer)
{
    static const char *const item_texts[] = {"name", "arguments", "input"};
    static const char *const lists[] = {"content", "summary"};
    const struct jdoc_value *output = gw_walk_member(answer, "output");
    for (uint32_t i = 0; jdoc_is(output, JDOC_ARRAY) && i < output->count; i++) {
        const struct jdoc_value *item = &output->as.items[i];
        for (size_t k = 0; k < sizeof item_texts / sizeof item_texts[0]; k++)
            text_of(w, item, item_texts[k]);
        for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
            const struct jdoc_value *parts = gw_walk_member(item, lists[l]);
            for (uint32_t p = 0; jdoc_is(parts, JDOC_ARRAY) && p < parts->count; p++) {
                text_of(w, &parts->as.items[p], "text");
                text_of(w, &parts->as.items[p], "refusal");
            }
        }
    }
}

/* The tokens of what one of the walks above counts. */
static uint64_t counted(void (*walk)(struct gw_walk *w, const struct jdoc_value *answer),
                        const struct jdoc_value *answer)
{
    char error[8];
    struct gw_walk w = {.error = error, .error_size = sizeof error};
    gw_text_counter_init(&w.text);
    walk(&w, answer);
    return gw_text_counter_tokens(&w.text);
}

uint64_t gw_answer_chat_output(const struct jdoc_value *answer)
{
    return counted(chat_output, answer);
}

uint64_t gw_answer_messages_output(const struct jdoc_value *answer)
{
    return counted(messages_output, answer);
}

uint64_t gw_answer_responses_output(const struct jdoc_value *answer)
{
    return counted(responses_output, answer);
}

uint64_t gw_answer_output_with(const struct gw_surface *surface, const struct jdoc_value *answer)
{
    if (!jdoc_is(answer, JDOC_OBJECT) || surface->output_tokens == NULL)
        return 0; /* no model's answer, or not one to read */
    return surface->output_tokens(answer);
}

bool gw_answer_tokens_with(const struct gw_dialect *dialect, const struct gw_surface *surface,
                           const struct jdoc_value *root, const char *body, size_t length,
                           uint64_t input_estimate, struct gw_tokens *out)
{
    if (dialect->answer_tokens != NULL) /* Gemini: an object, or a stream's array */
        return dialect->answer_tokens(root, body, length, input_estimate, out);
    *out = (struct gw_tokens){.input = input_estimate};
    if (surface->no_output && !jdoc_is(root, JDOC_OBJECT))
        return false; /* no output to count: the input estimate */
    if (!jdoc_is(root, JDOC_OBJECT)) {
        out->output = gw_estimate_text(body, length);
        return false;
    }
    struct gw_usage usage;
    char error[GW_USAGE_ERROR_SIZE];
    if (gw_usage_read_with(dialect->usage, surface->endpoint, root, &usage, error, sizeof error) ==
            0 &&
        usage.present) {
        *out = gw_usage_tokens(&usage);
        return true;
    }
    out->output = gw_answer_output_with(surface, root);
    return false;
}

int gw_answer_response_id(const struct jdoc_value *answer, const char **id, size_t *length)
{
    const struct jdoc_value *value = jdoc_get(answer, "id");
    if (!jdoc_is(value, JDOC_STRING) || value->count == 0)
        return -1;
    *id = value->as.string;
    *length = value->count;
    return 0;
}

void gw_answer_item_ids(const struct jdoc_value *answer,
                        void (*fn)(void *context, const char *id, size_t length), void *context)
{
    static const char *const lists[] = {"output", "data"};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        const struct jdoc_value *items = jdoc_get(answer, lists[l]);
        for (uint32_t i = 0; jdoc_is(items, JDOC_ARRAY) && i < items->count; i++) {
            const struct jdoc_value *id = jdoc_get(&items->as.items[i], "id");
            if (jdoc_is(id, JDOC_STRING) && id->count > 0)
                fn(context, id->as.string, id->count);
        }
    }
}
