/* The estimate of the agent surfaces: what an Anthropic Messages request
 * and an OpenAI Responses request give the model to read (their types
 * checked on the way), the output they may produce, and whether a Messages
 * request may write the provider's cache. Nesting is bounded by the
 * parser's depth (GW_JSON_DEPTH_MAX), which the walks also check. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "gw_estimate_internal.h"
#include "gw_references.h"

#define PATH_SIZE 128

/* "<path>[i]" or "<path>.<name>" into out. */
static void path_index(char *out, const char *path, const char *name, uint32_t i)
{
    snprintf(out, PATH_SIZE, "%s%s%s[%u]", path, path[0] != '\0' ? "." : "", name, i);
}

static bool type_is(const struct jdoc_value *type, const char *name)
{
    return jdoc_is(type, JDOC_STRING) && strcmp(type->as.string, name) == 0;
}

/* A required string member, counted. */
static int required_string(struct gw_walk *w, const struct jdoc_value *object, const char *name,
                           const char *path)
{
    const struct jdoc_value *value = gw_walk_member(object, name);
    if (!jdoc_is(value, JDOC_STRING))
        return gw_walk_fail(w, "%s.%s: must be a string", path, name);
    gw_walk_string(w, value);
    return 0;
}

/* ---- Anthropic Messages ---- */

static int count_blocks(struct gw_walk *w, const struct jdoc_value *content, const char *path,
                        int depth);

/* A document: text sources by their text, content sources by their
 * blocks, a PDF (base64, URL, file) by the flat amount. */
static int count_document(struct gw_walk *w, const struct jdoc_value *block, const char *path,
                          int depth)
{
    const struct jdoc_value *source = gw_walk_member(block, "source");
    if (!jdoc_is(source, JDOC_OBJECT))
        return gw_walk_fail(w, "%s.source: must be an object", path);
    if (gw_walk_string_member(w, block, "title", path) != 0 ||
        gw_walk_string_member(w, block, "context", path) != 0)
        return -1;
    const struct jdoc_value *type = gw_walk_member(source, "type");
    char source_path[PATH_SIZE];
    snprintf(source_path, sizeof source_path, "%s.source", path);
    if (type_is(type, "text"))
        return required_string(w, source, "data", source_path);
    if (type_is(type, "content"))
        return count_blocks(w, gw_walk_member(source, "content"), source_path, depth + 1);
    w->fixed_tokens += GW_DOCUMENT_TOKENS;
    return 0;
}

/* One content block. Blocks of a type not known here count as their JSON
 * text: more than they take, most likely, never nothing. */
static int count_block(struct gw_walk *w, const struct jdoc_value *block, const char *path,
                       int depth)
{
    if (!jdoc_is(block, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    const struct jdoc_value *type = gw_walk_member(block, "type");
    if (!jdoc_is(type, JDOC_STRING))
        return gw_walk_fail(w, "%s.type: must be a string", path);
    if (type_is(type, "text"))
        return required_string(w, block, "text", path);
    if (type_is(type, "thinking"))
        return required_string(w, block, "thinking", path);
    if (type_is(type, "redacted_thinking"))
        return 0; /* encrypted, and dropped from the context of later turns */
    if (type_is(type, "image")) {
        w->fixed_tokens += GW_MESSAGES_IMAGE_TOKENS;
        return 0;
    }
    if (type_is(type, "document"))
        return count_document(w, block, path, depth);
    if (type_is(type, "tool_use") || type_is(type, "server_tool_use")) {
        if (required_string(w, block, "name", path) != 0)
            return -1;
        const struct jdoc_value *input = gw_walk_member(block, "input");
        if (input != NULL)
            gw_walk_json(w, input);
        return 0;
    }
    if (type_is(type, "tool_result"))
        return count_blocks(w, gw_walk_member(block, "content"), path, depth + 1);
    gw_walk_json(w, block);
    return 0;
}

/* How one item of a content array counts: a block (at its nesting depth)
 * or a Responses part. */
typedef int (*count_item_fn)(struct gw_walk *w, const struct jdoc_value *item, const char *path,
                             int depth);

/* A content that is absent, a string, or an array of items (`what`:
 * "blocks" or "parts") at path.name, each counted by count_item. */
static int count_content(struct gw_walk *w, const struct jdoc_value *content, const char *path,
                         const char *name, const char *what, count_item_fn count_item, int depth)
{
    if (content == NULL)
        return 0;
    if (jdoc_is(content, JDOC_STRING)) {
        gw_walk_string(w, content);
        return 0;
    }
    if (!jdoc_is(content, JDOC_ARRAY))
        return gw_walk_fail(w, "%s.%s: must be a string or an array of %s", path, name, what);
    for (uint32_t i = 0; i < content->count; i++) {
        char item_path[PATH_SIZE];
        path_index(item_path, path, name, i);
        if (count_item(w, &content->as.items[i], item_path, depth) != 0)
            return -1;
    }
    return 0;
}

/* A content: absent, a string, or an array of blocks. */
static int count_blocks(struct gw_walk *w, const struct jdoc_value *content, const char *path,
                        int depth)
{
    if (depth > GW_JSON_DEPTH_MAX)
        return gw_walk_fail(w, "%s: nested deeper than %d levels", path, GW_JSON_DEPTH_MAX);
    return count_content(w, content, path, "content", "blocks", count_block, depth);
}

static int count_system(struct gw_walk *w, const struct jdoc_value *system)
{
    if (system == NULL || jdoc_is(system, JDOC_STRING)) {
        if (system != NULL)
            gw_walk_string(w, system);
        return 0;
    }
    if (!jdoc_is(system, JDOC_ARRAY))
        return gw_walk_fail(w, "system: must be a string or an array of text blocks");
    for (uint32_t i = 0; i < system->count; i++) {
        char path[PATH_SIZE];
        path_index(path, "", "system", i);
        if (count_block(w, &system->as.items[i], path, 0) != 0)
            return -1;
    }
    return 0;
}

static int count_anthropic_messages(struct gw_walk *w, const struct jdoc_value *body)
{
    const struct jdoc_value *messages = gw_walk_member(body, "messages");
    if (!jdoc_is(messages, JDOC_ARRAY) || messages->count == 0)
        return gw_walk_fail(w, "messages: must be a non-empty array");
    for (uint32_t i = 0; i < messages->count; i++) {
        const struct jdoc_value *message = &messages->as.items[i];
        char path[PATH_SIZE];
        path_index(path, "", "messages", i);
        if (!jdoc_is(message, JDOC_OBJECT))
            return gw_walk_fail(w, "%s: must be an object", path);
        if (required_string(w, message, "role", path) != 0)
            return -1;
        const struct jdoc_value *content = gw_walk_member(message, "content");
        if (content == NULL)
            return gw_walk_fail(w, "%s.content: required", path);
        if (count_blocks(w, content, path, 0) != 0)
            return -1;
        w->fixed_tokens += GW_MESSAGE_OVERHEAD_TOKENS;
    }
    w->fixed_tokens += GW_REPLY_OVERHEAD_TOKENS;
    return 0;
}

/* tools by their JSON text, with the system prompt that comes with them. */
static int count_tools(struct gw_walk *w, const struct jdoc_value *body, uint64_t overhead)
{
    const struct jdoc_value *tools = gw_walk_member(body, "tools");
    if (tools != NULL && !jdoc_is(tools, JDOC_ARRAY))
        return gw_walk_fail(w, "tools: must be an array");
    if (tools != NULL && tools->count > 0) {
        gw_walk_json(w, tools);
        w->fixed_tokens += overhead;
    }
    const struct jdoc_value *choice = gw_walk_member(body, "tool_choice");
    if (jdoc_is(choice, JDOC_OBJECT))
        gw_walk_json(w, choice);
    return 0;
}

/* The longest cache_control in value: any breakpoint may write the input
 * before it to the cache, for 5 minutes unless its ttl says 1 hour. */
static enum gw_cache_write cache_write_in(const struct jdoc_value *value, int depth)
{
    enum gw_cache_write found = GW_CACHE_WRITE_NONE;
    if (depth > GW_JSON_DEPTH_MAX)
        return found;
    if (jdoc_is(value, JDOC_ARRAY)) {
        for (uint32_t i = 0; i < value->count && found != GW_CACHE_WRITE_1H; i++) {
            enum gw_cache_write inner = cache_write_in(&value->as.items[i], depth + 1);
            found = inner > found ? inner : found;
        }
        return found;
    }
    if (!jdoc_is(value, JDOC_OBJECT))
        return found;
    for (uint32_t i = 0; i < value->count && found != GW_CACHE_WRITE_1H; i++) {
        const struct jdoc_member *m = &value->as.members[i];
        enum gw_cache_write inner = GW_CACHE_WRITE_NONE;
        if (strcmp(m->key, "cache_control") == 0 && jdoc_is(&m->value, JDOC_OBJECT))
            inner =
                type_is(jdoc_get(&m->value, "ttl"), "1h") ? GW_CACHE_WRITE_1H : GW_CACHE_WRITE_5M;
        else
            inner = cache_write_in(&m->value, depth + 1);
        found = inner > found ? inner : found;
    }
    return found;
}

/* max_tokens: required by the API, never above the model's maximum;
 * thinking's budget_tokens is a part of it, not added to it. */
static int messages_output(struct gw_walk *w, const struct jdoc_value *body,
                           const struct gw_model *model, uint64_t *out)
{
    if (gw_walk_member(body, "max_tokens") == NULL)
        return gw_walk_fail(w, "max_tokens: required");
    const struct jdoc_value *thinking = gw_walk_member(body, "thinking");
    if (thinking != NULL && !jdoc_is(thinking, JDOC_OBJECT))
        return gw_walk_fail(w, "thinking: must be an object");
    return gw_walk_output_tokens(w, body, "max_tokens", model, out);
}

int gw_estimate_messages(struct gw_walk *w, const struct jdoc_value *body,
                         enum gw_endpoint endpoint, const struct gw_model *model,
                         struct gw_estimate *out)
{
    if (count_system(w, gw_walk_member(body, "system")) != 0 ||
        count_anthropic_messages(w, body) != 0 ||
        count_tools(w, body, GW_MESSAGES_TOOLS_OVERHEAD_TOKENS) != 0)
        return -1;
    out->input_tokens = gw_text_counter_tokens(&w->text) + w->fixed_tokens;
    if (endpoint == GW_ENDPOINT_MESSAGES_COUNT_TOKENS)
        return 0; /* counted upstream, never charged: no output */
    out->cache_write = cache_write_in(body, 0);
    out->choices = 1;
    if (messages_output(w, body, model, &out->output_tokens_per_choice) != 0)
        return -1;
    out->output_tokens = out->output_tokens_per_choice;
    return 0;
}

/* ---- OpenAI Responses ---- */

static int count_parts(struct gw_walk *w, const struct jdoc_value *content, const char *path,
                       const char *name);

static int count_response_part(struct gw_walk *w, const struct jdoc_value *part, const char *path,
                               int depth)
{
    assert(depth == 0); /* parts hold no blocks: there is no nesting to bound */
    if (!jdoc_is(part, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    const struct jdoc_value *type = gw_walk_member(part, "type");
    if (!jdoc_is(type, JDOC_STRING))
        return gw_walk_fail(w, "%s.type: must be a string", path);
    if (type_is(type, "input_text") || type_is(type, "output_text") ||
        type_is(type, "summary_text") || type_is(type, "reasoning_text"))
        return required_string(w, part, "text", path);
    if (type_is(type, "refusal"))
        return required_string(w, part, "refusal", path);
    if (type_is(type, "input_image")) {
        const struct jdoc_value *detail = gw_walk_member(part, "detail");
        w->fixed_tokens += type_is(detail, "low") ? GW_IMAGE_LOW_DETAIL_TOKENS : GW_IMAGE_TOKENS;
        return 0;
    }
    if (type_is(type, "input_file")) {
        w->fixed_tokens += GW_DOCUMENT_TOKENS;
        return gw_walk_string_member(w, part, "filename", path);
    }
    if (type_is(type, "input_audio")) {
        const struct jdoc_value *audio = gw_walk_member(part, "input_audio");
        const struct jdoc_value *data = gw_walk_member(audio, "data");
        if (!jdoc_is(data, JDOC_STRING))
            return gw_walk_fail(w, "%s.input_audio: must be an object with a data string", path);
        w->fixed_tokens += gw_walk_audio_tokens(data, gw_walk_member(audio, "format"));
        return 0;
    }
    gw_walk_json(w, part);
    return 0;
}

/* A string, or an array of parts, or absent. */
static int count_parts(struct gw_walk *w, const struct jdoc_value *content, const char *path,
                       const char *name)
{
    return count_content(w, content, path, name, "parts", count_response_part, 0);
}

/* name, and what the model wrote of the call (arguments or input). */
static int count_call(struct gw_walk *w, const struct jdoc_value *item, const char *path)
{
    return gw_walk_string_member(w, item, "name", path) != 0 ||
                   gw_walk_string_member(w, item, "arguments", path) != 0 ||
                   gw_walk_string_member(w, item, "input", path) != 0
               ? -1
               : 0;
}

static int count_item(struct gw_walk *w, const struct jdoc_value *item, const char *path)
{
    if (!jdoc_is(item, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    const struct jdoc_value *type = gw_walk_member(item, "type");
    if (type != NULL && !jdoc_is(type, JDOC_STRING))
        return gw_walk_fail(w, "%s.type: must be a string", path);
    if (gw_item_is_reference(item))
        return 0; /* an item stored upstream: not visible here */
    if (type == NULL || type_is(type, "message")) {
        if (required_string(w, item, "role", path) != 0)
            return -1;
        w->fixed_tokens += GW_MESSAGE_OVERHEAD_TOKENS;
        return count_parts(w, gw_walk_member(item, "content"), path, "content");
    }
    if (type_is(type, "function_call") || type_is(type, "custom_tool_call"))
        return count_call(w, item, path);
    if (type_is(type, "function_call_output") || type_is(type, "custom_tool_call_output"))
        return count_parts(w, gw_walk_member(item, "output"), path, "output");
    if (type_is(type, "reasoning")) /* its summary and text; encrypted content is not read */
        return count_parts(w, gw_walk_member(item, "summary"), path, "summary") != 0 ||
                       count_parts(w, gw_walk_member(item, "content"), path, "content") != 0
                   ? -1
                   : 0;
    gw_walk_json(w, item);
    return 0;
}

static int count_input(struct gw_walk *w, const struct jdoc_value *input, const char *name)
{
    if (input == NULL)
        return 0; /* a previous_response_id or a prompt template may carry it */
    if (jdoc_is(input, JDOC_STRING)) {
        gw_walk_string(w, input);
        w->fixed_tokens += GW_MESSAGE_OVERHEAD_TOKENS;
        return 0;
    }
    if (!jdoc_is(input, JDOC_ARRAY))
        return gw_walk_fail(w, "%s: must be a string or an array of items", name);
    for (uint32_t i = 0; i < input->count; i++) {
        char path[PATH_SIZE];
        path_index(path, "", name, i);
        if (count_item(w, &input->as.items[i], path) != 0)
            return -1;
    }
    return 0;
}

/* Members whose JSON the model reads as text. */
static int count_responses_json(struct gw_walk *w, const struct jdoc_value *body)
{
    static const char *const objects[] = {"text", "prompt"};
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) {
        const struct jdoc_value *value = gw_walk_member(body, objects[i]);
        if (value != NULL && !jdoc_is(value, JDOC_OBJECT))
            return gw_walk_fail(w, "%s: must be an object", objects[i]);
        if (value != NULL)
            gw_walk_json(w, value);
    }
    return count_tools(w, body, 0);
}

/* background: true is refused: its usage comes after the call has been
 * answered, so it could not be charged exactly. */
static int check_background(struct gw_walk *w, const struct jdoc_value *body)
{
    const struct jdoc_value *background = gw_walk_member(body, "background");
    if (background == NULL || background->kind == JDOC_FALSE)
        return 0;
    if (background->kind != JDOC_TRUE)
        return gw_walk_fail(w, "background: must be a boolean");
    return gw_walk_fail(w, "background: not supported: a background response is billed after "
                           "the call is answered, so the gateway cannot charge it exactly; call "
                           "without background");
}

int gw_estimate_responses(struct gw_walk *w, const struct jdoc_value *body,
                          enum gw_endpoint endpoint, const struct gw_model *model,
                          struct gw_estimate *out)
{
    if (check_background(w, body) != 0)
        return -1;
    const struct jdoc_value *instructions = gw_walk_member(body, "instructions");
    if (jdoc_is(instructions, JDOC_ARRAY)) {
        if (count_input(w, instructions, "instructions") != 0)
            return -1;
    } else if (gw_walk_string_member(w, body, "instructions", "") != 0) {
        return gw_walk_fail(w, "instructions: must be a string or an array of items");
    }
    if (count_input(w, gw_walk_member(body, "input"), "input") != 0 ||
        count_responses_json(w, body) != 0)
        return -1;
    w->fixed_tokens += GW_REPLY_OVERHEAD_TOKENS;
    out->input_tokens = gw_text_counter_tokens(&w->text) + w->fixed_tokens;
    if (endpoint == GW_ENDPOINT_RESPONSES_INPUT_TOKENS)
        return 0; /* counted upstream, never charged: no output */
    out->choices = 1;
    out->output_tokens_per_choice = model->default_max_output_tokens;
    if (gw_walk_output_tokens(w, body, "max_output_tokens", model,
                              &out->output_tokens_per_choice) != 0)
        return -1;
    out->output_tokens = out->output_tokens_per_choice;
    return 0;
}
