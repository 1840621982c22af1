/* The request side of the estimate: which members of an OpenAI chat,
 * completions or embeddings request carry text the model reads (the agent
 * surfaces are in gw_estimate_agents.c), their types checked on the way, and the
 * output reservation. Text is counted with the estimator of
 * gw_estimate_text.c; JSON that the model reads as text (tools, schemas)
 * is counted as its compact serialisation. */
#include "gw_estimate.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gw_estimate_internal.h"
#include "gw_dialect.h"

int gw_walk_fail(struct gw_walk *w, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(w->error, w->error_size, format, ap);
    va_end(ap);
    return -1;
}

/* A member that is absent or null counts as absent (OpenAI's own rule). */
const struct jdoc_value *gw_walk_member(const struct jdoc_value *object, const char *name)
{
    const struct jdoc_value *value = jdoc_get(object, name);
    return value == NULL || value->kind == JDOC_NULL ? NULL : value;
}

void gw_walk_text(struct gw_walk *w, const char *text, size_t length)
{
    gw_text_counter_add(&w->text, text, length);
    gw_text_counter_break(&w->text);
}

void gw_walk_string(struct gw_walk *w, const struct jdoc_value *string)
{
    assert(jdoc_is(string, JDOC_STRING));
    gw_walk_text(w, string->as.string, string->count);
}

static void json_piece(struct gw_walk *w, const char *text, size_t length)
{
    gw_text_counter_add(&w->text, text, length);
}

/* Feeds value as compact JSON text. A real number's digits are not kept by
 * the parser: it counts as a short fraction. Depth is bounded by the
 * parser's JSON_DEPTH_MAX. */
static void count_json(struct gw_walk *w, const struct jdoc_value *value, int depth)
{
    assert(depth <= GW_JSON_DEPTH_MAX);
    char digits[24];
    switch (value->kind) {
    case JDOC_NULL:
        json_piece(w, "null", 4);
        break;
    case JDOC_FALSE:
        json_piece(w, "false", 5);
        break;
    case JDOC_TRUE:
        json_piece(w, "true", 4);
        break;
    case JDOC_INTEGER:
        json_piece(w, digits,
                   (size_t)snprintf(digits, sizeof digits, "%lld", (long long)value->as.integer));
        break;
    case JDOC_REAL:
        json_piece(w, "0.0001", 6);
        break;
    case JDOC_STRING:
        json_piece(w, "\"", 1);
        json_piece(w, value->as.string, value->count);
        json_piece(w, "\"", 1);
        break;
    case JDOC_ARRAY:
        json_piece(w, "[", 1);
        for (uint32_t i = 0; i < value->count; i++) {
            if (i > 0)
                json_piece(w, ",", 1);
            count_json(w, &value->as.items[i], depth + 1);
        }
        json_piece(w, "]", 1);
        break;
    case JDOC_OBJECT:
        json_piece(w, "{", 1);
        for (uint32_t i = 0; i < value->count; i++) {
            const struct jdoc_member *m = &value->as.members[i];
            json_piece(w, i > 0 ? ",\"" : "\"", i > 0 ? 2 : 1);
            json_piece(w, m->key, m->key_length);
            json_piece(w, "\":", 2);
            count_json(w, &m->value, depth + 1);
        }
        json_piece(w, "}", 1);
        break;
    }
}

void gw_walk_json(struct gw_walk *w, const struct jdoc_value *value)
{
    count_json(w, value, 0);
    gw_text_counter_break(&w->text);
}

/* An optional string member counted as text; -1 when it is not a string.
 * path is the object's ("" for the body). */
int gw_walk_string_member(struct gw_walk *w, const struct jdoc_value *object, const char *name,
                          const char *path)
{
    const struct jdoc_value *value = gw_walk_member(object, name);
    if (value == NULL)
        return 0;
    if (!jdoc_is(value, JDOC_STRING))
        return gw_walk_fail(w, "%s%s%s: must be a string", path, path[0] != '\0' ? "." : "", name);
    gw_walk_string(w, value);
    return 0;
}

uint64_t gw_walk_audio_tokens(const struct jdoc_value *data, const struct jdoc_value *format)
{
    uint64_t bytes = (uint64_t)data->count / 4 * 3; /* base64 */
    bool wav = jdoc_is(format, JDOC_STRING) && strcmp(format->as.string, "wav") == 0;
    uint64_t per_second = wav ? GW_AUDIO_WAV_BYTES_PER_SECOND : GW_AUDIO_OTHER_BYTES_PER_SECOND;
    uint64_t tokens = (bytes * GW_AUDIO_TOKENS_PER_SECOND + per_second - 1) / per_second;
    return tokens > GW_AUDIO_MIN_TOKENS ? tokens : GW_AUDIO_MIN_TOKENS;
}

static int count_image_part(struct gw_walk *w, const struct jdoc_value *part, const char *path)
{
    const struct jdoc_value *image = gw_walk_member(part, "image_url");
    const struct jdoc_value *url =
        jdoc_is(image, JDOC_OBJECT) ? gw_walk_member(image, "url") : image;
    if (!jdoc_is(url, JDOC_STRING))
        return gw_walk_fail(w, "%s.image_url: must be an object with a url string", path);
    const struct jdoc_value *detail =
        jdoc_is(image, JDOC_OBJECT) ? gw_walk_member(image, "detail") : NULL;
    if (detail != NULL && !jdoc_is(detail, JDOC_STRING))
        return gw_walk_fail(w, "%s.image_url.detail: must be a string", path);
    bool low = detail != NULL && strcmp(detail->as.string, "low") == 0;
    w->fixed_tokens += low ? GW_IMAGE_LOW_DETAIL_TOKENS : GW_IMAGE_TOKENS;
    return 0;
}

static int count_audio_part(struct gw_walk *w, const struct jdoc_value *part, const char *path)
{
    const struct jdoc_value *audio = gw_walk_member(part, "input_audio");
    const struct jdoc_value *data =
        jdoc_is(audio, JDOC_OBJECT) ? gw_walk_member(audio, "data") : NULL;
    if (!jdoc_is(data, JDOC_STRING))
        return gw_walk_fail(w, "%s.input_audio: must be an object with a data string", path);
    w->fixed_tokens += gw_walk_audio_tokens(data, gw_walk_member(audio, "format"));
    return 0;
}

/* One part of a message's content array. Parts of a type not known here
 * (files, new kinds) count as their JSON text: more than they take, most
 * likely, never nothing. */
static int count_part(struct gw_walk *w, const struct jdoc_value *part, const char *path)
{
    if (!jdoc_is(part, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    const struct jdoc_value *type = gw_walk_member(part, "type");
    if (!jdoc_is(type, JDOC_STRING))
        return gw_walk_fail(w, "%s.type: must be a string", path);
    const char *name = type->as.string;
    if (strcmp(name, "text") == 0 || strcmp(name, "refusal") == 0) {
        const struct jdoc_value *text = gw_walk_member(part, name);
        if (!jdoc_is(text, JDOC_STRING))
            return gw_walk_fail(w, "%s.%s: must be a string", path, name);
        gw_walk_string(w, text);
        return 0;
    }
    if (strcmp(name, "image_url") == 0)
        return count_image_part(w, part, path);
    if (strcmp(name, "input_audio") == 0)
        return count_audio_part(w, part, path);
    gw_walk_json(w, part);
    return 0;
}

static int count_content(struct gw_walk *w, const struct jdoc_value *content, const char *path)
{
    if (content == NULL)
        return 0; /* an assistant message with tool calls only */
    if (jdoc_is(content, JDOC_STRING)) {
        gw_walk_string(w, content);
        return 0;
    }
    if (!jdoc_is(content, JDOC_ARRAY))
        return gw_walk_fail(w, "%s.content: must be a string, an array of parts or null", path);
    for (uint32_t i = 0; i < content->count; i++) {
        char part_path[96];
        snprintf(part_path, sizeof part_path, "%s.content[%u]", path, i);
        if (count_part(w, &content->as.items[i], part_path) != 0)
            return -1;
    }
    return 0;
}

/* A function call: its name and its arguments (what the model wrote). */
static int count_function(struct gw_walk *w, const struct jdoc_value *function, const char *path)
{
    if (!jdoc_is(function, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    if (gw_walk_string_member(w, function, "name", path) != 0)
        return -1;
    return gw_walk_string_member(w, function, "arguments", path);
}

static int count_tool_calls(struct gw_walk *w, const struct jdoc_value *calls, const char *path)
{
    if (calls == NULL)
        return 0;
    if (!jdoc_is(calls, JDOC_ARRAY))
        return gw_walk_fail(w, "%s.tool_calls: must be an array", path);
    for (uint32_t i = 0; i < calls->count; i++) {
        const struct jdoc_value *call = &calls->as.items[i];
        char call_path[96];
        snprintf(call_path, sizeof call_path, "%s.tool_calls[%u]", path, i);
        if (!jdoc_is(call, JDOC_OBJECT))
            return gw_walk_fail(w, "%s: must be an object", call_path);
        const struct jdoc_value *function = gw_walk_member(call, "function");
        if (function == NULL) {
            gw_walk_json(w, call); /* a kind of tool call not known here */
            continue;
        }
        strncat(call_path, ".function", sizeof call_path - strlen(call_path) - 1);
        if (count_function(w, function, call_path) != 0)
            return -1;
    }
    return 0;
}

static bool is_message_member(const char *name)
{
    static const char *const known[] = {"role",         "content",       "name",   "tool_calls",
                                        "tool_call_id", "function_call", "refusal"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(name, known[i]) == 0)
            return true;
    }
    return false;
}

static int count_message(struct gw_walk *w, const struct jdoc_value *message, const char *path)
{
    if (!jdoc_is(message, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    const struct jdoc_value *role = gw_walk_member(message, "role");
    if (!jdoc_is(role, JDOC_STRING))
        return gw_walk_fail(w, "%s.role: must be a string", path);
    gw_walk_string(w, role);
    w->fixed_tokens += GW_MESSAGE_OVERHEAD_TOKENS;
    if (gw_walk_member(message, "name") != NULL)
        w->fixed_tokens += GW_NAME_OVERHEAD_TOKENS;
    if (count_content(w, gw_walk_member(message, "content"), path) != 0 ||
        gw_walk_string_member(w, message, "name", path) != 0 ||
        gw_walk_string_member(w, message, "tool_call_id", path) != 0 ||
        gw_walk_string_member(w, message, "refusal", path) != 0 ||
        count_tool_calls(w, gw_walk_member(message, "tool_calls"), path) != 0)
        return -1;
    const struct jdoc_value *call = gw_walk_member(message, "function_call");
    if (call != NULL) {
        char call_path[96];
        snprintf(call_path, sizeof call_path, "%s.function_call", path);
        if (count_function(w, call, call_path) != 0)
            return -1;
    }
    /* Members not known here (audio references, new fields) count as text. */
    for (uint32_t i = 0; i < message->count; i++) {
        const struct jdoc_member *m = &message->as.members[i];
        if (!is_message_member(m->key) && m->value.kind != JDOC_NULL)
            gw_walk_json(w, &m->value);
    }
    return 0;
}

static int count_messages(struct gw_walk *w, const struct jdoc_value *body)
{
    const struct jdoc_value *messages = gw_walk_member(body, "messages");
    if (!jdoc_is(messages, JDOC_ARRAY) || messages->count == 0)
        return gw_walk_fail(w, "messages: must be a non-empty array");
    for (uint32_t i = 0; i < messages->count; i++) {
        char path[32];
        snprintf(path, sizeof path, "messages[%u]", i);
        if (count_message(w, &messages->as.items[i], path) != 0)
            return -1;
    }
    w->fixed_tokens += GW_REPLY_OVERHEAD_TOKENS;
    return 0;
}

/* Members whose JSON the model reads as text. */
static int count_json_members(struct gw_walk *w, const struct jdoc_value *body)
{
    static const struct {
        const char *name;
        enum jdoc_kind kind;
        const char *what;
    } members[] = {
        {"tools", JDOC_ARRAY, "an array"},
        {"functions", JDOC_ARRAY, "an array"},
        {"response_format", JDOC_OBJECT, "an object"},
        {"prediction", JDOC_OBJECT, "an object"},
    };
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        const struct jdoc_value *value = gw_walk_member(body, members[i].name);
        if (value == NULL)
            continue;
        if (value->kind != members[i].kind)
            return gw_walk_fail(w, "%s: must be %s", members[i].name, members[i].what);
        gw_walk_json(w, value);
    }
    const struct jdoc_value *choice = gw_walk_member(body, "tool_choice");
    if (jdoc_is(choice, JDOC_OBJECT))
        gw_walk_json(w, choice); /* a named tool; the plain strings add nothing */
    return 0;
}

/* An array of token ids: counted exactly. */
static int count_token_ids(struct gw_walk *w, const struct jdoc_value *ids, const char *path)
{
    for (uint32_t i = 0; i < ids->count; i++) {
        const struct jdoc_value *id = &ids->as.items[i];
        if (!jdoc_is(id, JDOC_INTEGER) || id->as.integer < 0)
            return gw_walk_fail(w, "%s[%u]: must be a token id (an integer >= 0)", path, i);
    }
    w->fixed_tokens += ids->count;
    return 0;
}

/* prompt (completions) or input (embeddings): a string, an array of
 * strings, an array of token ids, or an array of such arrays. Sets
 * *prompts to the number of separate prompts. */
static int count_prompt(struct gw_walk *w, const struct jdoc_value *value, const char *name,
                        uint32_t *prompts)
{
    if (jdoc_is(value, JDOC_STRING)) {
        gw_walk_string(w, value);
        *prompts = 1;
        return 0;
    }
    if (!jdoc_is(value, JDOC_ARRAY))
        return gw_walk_fail(w, "%s: must be a string or an array", name);
    if (value->count == 0 || value->count > GW_PROMPTS_MAX)
        return gw_walk_fail(w, "%s: must have 1..%d items", name, GW_PROMPTS_MAX);
    if (value->count > 0 && jdoc_is(&value->as.items[0], JDOC_INTEGER)) {
        *prompts = 1;
        return count_token_ids(w, value, name);
    }
    *prompts = value->count;
    for (uint32_t i = 0; i < value->count; i++) {
        const struct jdoc_value *item = &value->as.items[i];
        char path[48];
        snprintf(path, sizeof path, "%s[%u]", name, i);
        if (jdoc_is(item, JDOC_STRING)) {
            gw_walk_string(w, item);
            continue;
        }
        if (!jdoc_is(item, JDOC_ARRAY))
            return gw_walk_fail(w, "%s: must be a string or an array of token ids", path);
        if (count_token_ids(w, item, path) != 0)
            return -1;
    }
    return 0;
}

/* An optional integer member in min..max; *out keeps its default when the
 * member is absent or null. */
static int integer_member(struct gw_walk *w, const struct jdoc_value *body, const char *name,
                          uint64_t min, uint64_t max, uint64_t *out)
{
    const struct jdoc_value *value = gw_walk_member(body, name);
    if (value == NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 0 ||
        (uint64_t)value->as.integer < min || (uint64_t)value->as.integer > max)
        return gw_walk_fail(w, "%s: must be an integer %llu..%llu", name, (unsigned long long)min,
                            (unsigned long long)max);
    *out = (uint64_t)value->as.integer;
    return 0;
}

int gw_walk_output_tokens(struct gw_walk *w, const struct jdoc_value *body, const char *name,
                          const struct gw_model *model, uint64_t *out)
{
    const struct jdoc_value *value = gw_walk_member(body, name);
    if (value == NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 0)
        return gw_walk_fail(w, "%s: must be an integer >= 0", name);
    if ((uint64_t)value->as.integer > model->max_output_tokens)
        return gw_walk_fail(w, "%s: must be at most %llu for model %s", name,
                            (unsigned long long)model->max_output_tokens, model->name);
    *out = (uint64_t)value->as.integer;
    return 0;
}

/* The output the call may produce per choice: max_completion_tokens, else
 * max_tokens, else the model's default; never more than the model allows. */
static int output_per_choice(struct gw_walk *w, const struct jdoc_value *body,
                             const struct gw_model *model, uint64_t *out)
{
    const char *name = gw_walk_member(body, "max_completion_tokens") != NULL
                           ? "max_completion_tokens"
                           : "max_tokens";
    *out = model->default_max_output_tokens;
    return gw_walk_output_tokens(w, body, name, model, out);
}

/* n choices per prompt; a completion's best_of makes that many server-side. */
static int choices_per_prompt(struct gw_walk *w, const struct jdoc_value *body,
                              enum gw_endpoint endpoint, uint32_t *out)
{
    uint64_t n = 1, best_of = 1;
    if (integer_member(w, body, "n", 1, GW_N_MAX, &n) != 0)
        return -1;
    if (endpoint == GW_ENDPOINT_COMPLETIONS) {
        best_of = n;
        if (integer_member(w, body, "best_of", 1, GW_N_MAX, &best_of) != 0)
            return -1;
        if (best_of < n)
            return gw_walk_fail(w, "best_of: must be at least n");
    }
    *out = (uint32_t)(best_of > n ? best_of : n);
    return 0;
}

static int estimate_input(struct gw_walk *w, const struct jdoc_value *body,
                          enum gw_endpoint endpoint, uint32_t *prompts)
{
    *prompts = 1;
    if (endpoint == GW_ENDPOINT_CHAT_COMPLETIONS) {
        if (count_messages(w, body) != 0)
            return -1;
        return count_json_members(w, body);
    }
    const char *name = endpoint == GW_ENDPOINT_COMPLETIONS ? "prompt" : "input";
    const struct jdoc_value *prompt = gw_walk_member(body, name);
    if (prompt == NULL && endpoint == GW_ENDPOINT_EMBEDDINGS)
        return gw_walk_fail(w, "input: required");
    if (prompt == NULL)
        w->fixed_tokens += GW_PROMPT_DEFAULT_TOKENS;
    else if (count_prompt(w, prompt, name, prompts) != 0)
        return -1;
    return endpoint == GW_ENDPOINT_COMPLETIONS ? gw_walk_string_member(w, body, "suffix", "") : 0;
}

int gw_estimate_openai(struct gw_walk *w, const struct jdoc_value *body, enum gw_endpoint endpoint,
                       const struct gw_model *model, struct gw_estimate *out)
{
    uint32_t prompts = 1;
    if (estimate_input(w, body, endpoint, &prompts) != 0)
        return -1;
    out->input_tokens = gw_text_counter_tokens(&w->text) + w->fixed_tokens;
    if (endpoint == GW_ENDPOINT_EMBEDDINGS)
        return 0; /* no output */
    uint32_t choices = 1;
    if (choices_per_prompt(w, body, endpoint, &choices) != 0 ||
        output_per_choice(w, body, model, &out->output_tokens_per_choice) != 0)
        return -1;
    /* At most GW_PROMPTS_MAX * GW_N_MAX * GW_OUTPUT_TOKENS_MAX: no overflow. */
    out->choices = prompts * choices;
    out->output_tokens = out->output_tokens_per_choice * out->choices;
    return 0;
}

int gw_estimate_request_with(const struct gw_dialect *dialect, const struct jdoc_value *body,
                             enum gw_endpoint endpoint, const struct gw_model *model,
                             struct gw_estimate *out, char *error, size_t error_size)
{
    assert(model != NULL && out != NULL && error != NULL && error_size > 0);
    memset(out, 0, sizeof *out);
    struct gw_walk w = {.error = error, .error_size = error_size};
    gw_text_counter_init(&w.text);
    error[0] = '\0';
    if (!jdoc_is(body, JDOC_OBJECT))
        return gw_walk_fail(&w, "body: must be a JSON object");
    return dialect->estimate != NULL ? dialect->estimate(&w, body, endpoint, model, out) : 0;
}

struct gw_tokens gw_estimate_tokens(const struct gw_estimate *estimate, uint64_t output_tokens)
{
    struct gw_tokens tokens = {.input = estimate->input_tokens, .output = output_tokens};
    if (estimate->cache_write == GW_CACHE_WRITE_1H)
        tokens.cache_write_1h = estimate->input_tokens;
    else if (estimate->cache_write == GW_CACHE_WRITE_5M)
        tokens.cache_write_5m = estimate->input_tokens;
    return tokens;
}
