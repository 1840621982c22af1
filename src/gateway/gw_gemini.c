/* The Gemini dialect of the gateway in one file: what its routes name, what
 * its requests give the model to read, what its answers say they used, and
 * how its errors look (Google's google.rpc.Status with details). */
#include "gw_gemini.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/bounds.h"
#include "gw_error.h"
#include "gw_estimate_internal.h"
#include "gw_sse.h"

#define PATH_SIZE 128

static const char *const method_names[] = {
    [GW_GEMINI_GENERATE] = "generateContent",
    [GW_GEMINI_STREAM] = "streamGenerateContent",
    [GW_GEMINI_COUNT_TOKENS] = "countTokens",
};

const char *gw_gemini_method_name(enum gw_gemini_method method)
{
    assert(method >= GW_GEMINI_GENERATE && method <= GW_GEMINI_COUNT_TOKENS);
    return method_names[method];
}

int gw_gemini_target(const char *target, size_t length, const char **model, size_t *model_length,
                     enum gw_gemini_method *method, char *error, size_t error_size)
{
    size_t colon = length;
    while (colon > 0 && target[colon - 1] != ':')
        colon--;
    if (colon == 0) {
        snprintf(error, error_size,
                 "the path must be /v1beta/models/{model}:{method}, with a method after ':'");
        return -1;
    }
    if (colon == 1) {
        snprintf(error, error_size, "the path names no model before ':'");
        return -1;
    }
    const char *name = target + colon;
    size_t name_length = length - colon;
    for (uint32_t m = GW_GEMINI_GENERATE; m <= GW_GEMINI_COUNT_TOKENS; m++) {
        if (strlen(method_names[m]) == name_length &&
            memcmp(method_names[m], name, name_length) == 0) {
            *model = target;
            *model_length = colon - 1;
            *method = (enum gw_gemini_method)m;
            return 0;
        }
    }
    snprintf(error, error_size,
             "the method '%.*s' is not served by the gateway: it serves generateContent, "
             "streamGenerateContent and countTokens",
             (int)(name_length < 64 ? name_length : 64), name);
    return -1;
}

int gw_gemini_upstream_path(const char *upstream_model, enum gw_gemini_method method, bool alt_sse,
                            char *out, size_t size)
{
    for (const char *c = upstream_model; *c != '\0'; c++) {
        if (!isalnum((unsigned char)*c) && strchr("._-", *c) == NULL)
            return -1; /* it would need escaping in a URL path: not a Gemini model name */
    }
    int n = snprintf(out, size, "/models/%s:%s%s", upstream_model, gw_gemini_method_name(method),
                     alt_sse ? "?alt=sse" : "");
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* ---- the estimate ---- */

/* One part of a Content: its text, a function call's or response's JSON,
 * media at a flat amount; a part of a kind not known here as its JSON. */
static int count_part(struct gw_walk *w, const struct jdoc_value *part, const char *path)
{
    if (!jdoc_is(part, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object", path);
    const struct jdoc_value *text = gw_walk_member(part, "text");
    if (text != NULL) {
        if (!jdoc_is(text, JDOC_STRING))
            return gw_walk_fail(w, "%s.text: must be a string", path);
        gw_walk_string(w, text);
        return 0;
    }
    if (gw_walk_member(part, "inlineData") != NULL || gw_walk_member(part, "fileData") != NULL) {
        w->fixed_tokens += GW_GEMINI_MEDIA_TOKENS;
        return 0;
    }
    gw_walk_json(w, part); /* functionCall, functionResponse, executableCode, ... */
    return 0;
}

/* A Content: {"role":..., "parts":[...]}; path names it. */
static int count_content(struct gw_walk *w, const struct jdoc_value *content, const char *path)
{
    if (!jdoc_is(content, JDOC_OBJECT))
        return gw_walk_fail(w, "%s: must be an object with parts", path);
    const struct jdoc_value *parts = gw_walk_member(content, "parts");
    if (parts == NULL)
        return 0;
    if (!jdoc_is(parts, JDOC_ARRAY))
        return gw_walk_fail(w, "%s.parts: must be an array", path);
    for (uint32_t i = 0; i < parts->count; i++) {
        char part_path[PATH_SIZE];
        snprintf(part_path, sizeof part_path, "%s.parts[%u]", path, i);
        if (count_part(w, &parts->as.items[i], part_path) != 0)
            return -1;
    }
    return 0;
}

static int count_input(struct gw_walk *w, const struct jdoc_value *body)
{
    const struct jdoc_value *system = gw_walk_member(body, "systemInstruction");
    if (jdoc_is(system, JDOC_STRING))
        gw_walk_string(w, system);
    else if (system != NULL && count_content(w, system, "systemInstruction") != 0)
        return -1;
    const struct jdoc_value *contents = gw_walk_member(body, "contents");
    if (!jdoc_is(contents, JDOC_ARRAY))
        return gw_walk_fail(w, "contents: required, an array of contents");
    for (uint32_t i = 0; i < contents->count; i++) {
        char path[PATH_SIZE];
        snprintf(path, sizeof path, "contents[%u]", i);
        if (count_content(w, &contents->as.items[i], path) != 0)
            return -1;
    }
    static const char *const read_as_json[] = {"tools", "toolConfig"};
    for (size_t i = 0; i < sizeof read_as_json / sizeof read_as_json[0]; i++) {
        const struct jdoc_value *value = gw_walk_member(body, read_as_json[i]);
        if (value != NULL)
            gw_walk_json(w, value);
    }
    return 0;
}

/* An optional integer of generationConfig in 1..most; null is refused (the
 * gateway writes its bound in place of an absent one). */
static int config_integer(struct gw_walk *w, const struct jdoc_value *config, const char *name,
                          uint64_t most, uint64_t *out)
{
    const struct jdoc_value *value = jdoc_get(config, name);
    if (value == NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 1 ||
        (uint64_t)value->as.integer > most)
        return gw_walk_fail(w, "generationConfig.%s: must be an integer 1..%llu", name,
                            (unsigned long long)most);
    *out = (uint64_t)value->as.integer;
    return 0;
}

int gw_gemini_estimate(struct gw_walk *w, const struct jdoc_value *body,
                       const struct gw_model *model, struct gw_estimate *out)
{
    if (count_input(w, body) != 0)
        return -1;
    out->input_tokens = gw_text_counter_tokens(&w->text) + w->fixed_tokens;
    const struct jdoc_value *config = gw_walk_member(body, "generationConfig");
    if (config != NULL && !jdoc_is(config, JDOC_OBJECT))
        return gw_walk_fail(w, "generationConfig: must be an object");
    uint64_t per_candidate = model->default_max_output_tokens, candidates = 1;
    if (config != NULL &&
        (config_integer(w, config, "maxOutputTokens", model->max_output_tokens, &per_candidate) !=
             0 ||
         config_integer(w, config, "candidateCount", GW_GEMINI_CANDIDATES_MAX, &candidates) != 0))
        return -1;
    out->choices = (uint32_t)candidates;
    out->output_tokens_per_choice = per_candidate;
    out->output_tokens = per_candidate * candidates; /* 2^24 * 8: no overflow */
    return 0;
}

bool gw_gemini_bound_given(const struct jdoc_value *body)
{
    return jdoc_get(jdoc_get(body, "generationConfig"), "maxOutputTokens") != NULL;
}

void gw_gemini_write_generation_config(struct buffer *out, const char *value_text,
                                       size_t value_length, uint64_t bound)
{
    buffer_append_str(out, "\"generationConfig\":{\"maxOutputTokens\":");
    buffer_append_u64(out, bound);
    size_t at = 0;
    while (at < value_length && value_text[at] != '{')
        at++;
    if (at == value_length) { /* null */
        buffer_append_char(out, '}');
        return;
    }
    size_t next = at + 1;
    while (next < value_length && strchr(" \t\r\n", value_text[next]) != NULL)
        next++;
    if (next < value_length && value_text[next] != '}')
        buffer_append_char(out, ',');
    buffer_append(out, value_text + at + 1, value_length - at - 1);
}

/* ---- usage ---- */

static int usage_fail(char *error, size_t error_size, const char *field, const char *reason)
{
    snprintf(error, error_size, "usageMetadata.%s: %s", field, reason);
    return -1;
}

/* 1 read, 0 absent (or null), -1 malformed. */
static int count_of(const struct jdoc_value *usage, const char *name, uint64_t *out, char *error,
                    size_t error_size)
{
    const struct jdoc_value *value = jdoc_get(usage, name);
    if (value == NULL || value->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 0)
        return usage_fail(error, error_size, name, "must be an integer 0..9223372036854775807");
    *out = (uint64_t)value->as.integer;
    return 1;
}

/* The usageMetadata of one response object: NULL when it has none. */
static const struct jdoc_value *usage_of(const struct jdoc_value *answer)
{
    const struct jdoc_value *usage = jdoc_get(answer, "usageMetadata");
    return usage == NULL || usage->kind == JDOC_NULL ? NULL : usage;
}

static int read_metadata(const struct jdoc_value *usage, struct gw_usage *out, char *error,
                         size_t error_size)
{
    uint64_t prompt = 0, cached = 0, candidates = 0, thoughts = 0, tool_use = 0;
    if (!jdoc_is(usage, JDOC_OBJECT)) {
        snprintf(error, error_size, "usageMetadata: must be an object");
        return -1;
    }
    int has_prompt = count_of(usage, "promptTokenCount", &prompt, error, error_size);
    if (has_prompt == 0)
        return usage_fail(error, error_size, "promptTokenCount", "required");
    int has_candidates = 0;
    if (has_prompt < 0 ||
        count_of(usage, "cachedContentTokenCount", &cached, error, error_size) < 0 ||
        (has_candidates = count_of(usage, "candidatesTokenCount", &candidates, error, error_size)) <
            0 ||
        count_of(usage, "thoughtsTokenCount", &thoughts, error, error_size) < 0 ||
        count_of(usage, "toolUsePromptTokenCount", &tool_use, error, error_size) < 0)
        return -1;
    if (cached > prompt)
        return usage_fail(error, error_size, "cachedContentTokenCount",
                          "more than promptTokenCount");
    if (tool_use > AMOUNT_MAX - prompt || thoughts > AMOUNT_MAX - candidates)
        return usage_fail(error, error_size, "promptTokenCount", "the counts add up past 2^63 - 1");
    *out = (struct gw_usage){.present = true,
                             .has_completion_tokens = has_candidates == 1,
                             .prompt_tokens = prompt + tool_use,
                             .completion_tokens = candidates + thoughts,
                             .cached_tokens = cached,
                             .reasoning_tokens = thoughts};
    out->total_tokens = out->prompt_tokens > AMOUNT_MAX - out->completion_tokens
                            ? AMOUNT_MAX
                            : out->prompt_tokens + out->completion_tokens;
    return 0;
}

int gw_gemini_usage_read(const struct jdoc_value *answer, struct gw_usage *out, char *error,
                         size_t error_size)
{
    memset(out, 0, sizeof *out);
    const struct jdoc_value *usage = NULL;
    if (jdoc_is(answer, JDOC_ARRAY)) { /* the last chunk that tells it: counts are cumulative */
        for (uint32_t i = answer->count; i > 0 && usage == NULL; i--)
            usage = usage_of(&answer->as.items[i - 1]);
    } else if (jdoc_is(answer, JDOC_OBJECT)) {
        usage = usage_of(answer);
    } else {
        snprintf(error, error_size, "answer: must be a JSON object or array");
        return -1;
    }
    if (usage == NULL)
        return 0;
    if (read_metadata(usage, out, error, error_size) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

/* ---- the text of answers and chunks ---- */

/* The parts of a candidate, or NULL. */
static const struct jdoc_value *candidate_parts(const struct jdoc_value *candidate)
{
    const struct jdoc_value *parts = gw_walk_member(gw_walk_member(candidate, "content"), "parts");
    return jdoc_is(parts, JDOC_ARRAY) ? parts : NULL;
}

static const struct jdoc_value *candidates_of(const struct jdoc_value *response)
{
    const struct jdoc_value *candidates = gw_walk_member(response, "candidates");
    return jdoc_is(candidates, JDOC_ARRAY) ? candidates : NULL;
}

static void response_output(struct gw_walk *w, const struct jdoc_value *response)
{
    const struct jdoc_value *candidates = candidates_of(response);
    for (uint32_t c = 0; candidates != NULL && c < candidates->count; c++) {
        const struct jdoc_value *parts = candidate_parts(&candidates->as.items[c]);
        for (uint32_t p = 0; parts != NULL && p < parts->count; p++) {
            const struct jdoc_value *part = &parts->as.items[p];
            const struct jdoc_value *text = gw_walk_member(part, "text");
            if (jdoc_is(text, JDOC_STRING))
                gw_walk_string(w, text);
            const struct jdoc_value *call = gw_walk_member(part, "functionCall");
            if (call != NULL)
                gw_walk_json(w, call);
        }
    }
}

uint64_t gw_gemini_output_tokens(const struct jdoc_value *answer)
{
    char error[8];
    struct gw_walk w = {.error = error, .error_size = sizeof error};
    gw_text_counter_init(&w.text);
    if (jdoc_is(answer, JDOC_ARRAY)) {
        for (uint32_t i = 0; i < answer->count; i++)
            response_output(&w, &answer->as.items[i]);
    } else if (jdoc_is(answer, JDOC_OBJECT)) {
        response_output(&w, answer);
    }
    return gw_text_counter_tokens(&w.text);
}

bool gw_gemini_answer_tokens(const struct jdoc_value *root, const char *body, size_t length,
                             uint64_t input_estimate, struct gw_tokens *out)
{
    *out = (struct gw_tokens){.input = input_estimate};
    if (!jdoc_is(root, JDOC_OBJECT) && !jdoc_is(root, JDOC_ARRAY)) {
        out->output = gw_estimate_text(body, length);
        return false;
    }
    struct gw_usage usage;
    char error[GW_USAGE_ERROR_SIZE];
    uint64_t counted = gw_gemini_output_tokens(root);
    if (gw_gemini_usage_read(root, &usage, error, sizeof error) != 0 || !usage.present) {
        out->output = counted;
        return false;
    }
    *out = gw_usage_tokens(&usage);
    if (!usage.has_completion_tokens) /* never read as 0: what it wrote, counted */
        out->output = counted > AMOUNT_MAX - out->output ? AMOUNT_MAX : out->output + counted;
    return true;
}

uint32_t gw_gemini_chunk_texts_max(const struct jdoc_value *chunk)
{
    uint32_t most = 0;
    const struct jdoc_value *candidates = candidates_of(chunk);
    for (uint32_t c = 0; candidates != NULL && c < candidates->count; c++) {
        const struct jdoc_value *parts = candidate_parts(&candidates->as.items[c]);
        most += parts != NULL ? 2 * parts->count : 0; /* at most 2^28 each: no overflow */
    }
    return most;
}

static uint32_t candidate_index(const struct jdoc_value *candidate, uint32_t position)
{
    const struct jdoc_value *index = gw_walk_member(candidate, "index");
    return jdoc_is(index, JDOC_INTEGER) && index->as.integer >= 0 && index->as.integer <= UINT32_MAX
               ? (uint32_t)index->as.integer
               : position;
}

static void add_text(struct gw_sse_text *items, uint32_t *count, uint32_t choice,
                     const struct jdoc_value *value)
{
    if (jdoc_is(value, JDOC_STRING) && value->count > 0)
        items[(*count)++] = (struct gw_sse_text){
            .choice = choice, .text = value->as.string, .length = value->count};
}

uint32_t gw_gemini_chunk_texts(const struct jdoc_value *chunk, struct gw_sse_text *items)
{
    uint32_t count = 0;
    const struct jdoc_value *candidates = candidates_of(chunk);
    for (uint32_t c = 0; candidates != NULL && c < candidates->count; c++) {
        const struct jdoc_value *parts = candidate_parts(&candidates->as.items[c]);
        uint32_t choice = candidate_index(&candidates->as.items[c], c);
        for (uint32_t p = 0; parts != NULL && p < parts->count; p++) {
            const struct jdoc_value *part = &parts->as.items[p];
            add_text(items, &count, choice, gw_walk_member(part, "text"));
            add_text(items, &count, choice,
                     gw_walk_member(gw_walk_member(part, "functionCall"), "name"));
        }
    }
    return count;
}

bool gw_gemini_chunk_final(const struct jdoc_value *chunk)
{
    const struct jdoc_value *candidates = candidates_of(chunk);
    for (uint32_t c = 0; candidates != NULL && c < candidates->count; c++) {
        const struct jdoc_value *reason = gw_walk_member(&candidates->as.items[c], "finishReason");
        if (jdoc_is(reason, JDOC_STRING) && reason->count > 0 &&
            strcmp(reason->as.string, "FINISH_REASON_UNSPECIFIED") != 0)
            return true;
    }
    return false;
}

/* ---- errors ---- */

const char *gw_gemini_status(unsigned status)
{
    switch (status) {
    case 400:
    case 411:
    case 413:
    case 414:
    case 415:
    case 422:
        return "INVALID_ARGUMENT";
    case 401:
        return "UNAUTHENTICATED";
    case 403:
        return "PERMISSION_DENIED";
    case 404:
        return "NOT_FOUND";
    case 405:
    case 501:
        return "UNIMPLEMENTED";
    case 409:
        return "ABORTED";
    case 429:
        return "RESOURCE_EXHAUSTED";
    case 499:
        return "CANCELLED";
    case 502:
    case 503:
        return "UNAVAILABLE";
    case 504:
        return "DEADLINE_EXCEEDED";
    default:
        return status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION";
    }
}

static void write_details(struct buffer *b, int64_t retry_after_ms, const char *const *limits,
                          uint32_t limit_count, const char *reason)
{
    buffer_append_str(b, ",\"details\":[");
    if (reason != NULL) {
        buffer_append_str(b, "{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":");
        gw_json_string(b, reason, strlen(reason));
        buffer_append_str(b, ",\"domain\":\"llmlimit\"}");
        if (retry_after_ms > 0 || limit_count > 0)
            buffer_append_char(b, ',');
    }
    if (retry_after_ms > 0) {
        buffer_append_str(b, "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
                             "\"retryDelay\":\"");
        buffer_append_i64(b, retry_after_ms / 1000 + (retry_after_ms % 1000 != 0));
        buffer_append_str(b, "s\"}");
    }
    if (limit_count > 0) {
        if (retry_after_ms > 0)
            buffer_append_char(b, ',');
        buffer_append_str(b, "{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\","
                             "\"violations\":[");
        for (uint32_t i = 0; i < limit_count; i++) {
            buffer_append_str(b, i > 0 ? ",{\"subject\":" : "{\"subject\":");
            gw_json_string(b, limits[i], strlen(limits[i]));
            buffer_append_str(b, ",\"description\":\"a limit of the gateway that this call "
                                 "does not fit\"}");
        }
        buffer_append_char(b, ']');
        buffer_append_char(b, '}');
    }
    buffer_append_char(b, ']');
}

void gw_gemini_error(struct buffer *b, unsigned status, const char *message, int64_t retry_after_ms,
                     const char *const *limits, uint32_t limit_count, const char *reason)
{
    assert(message != NULL);
    assert(retry_after_ms >= 0);
    assert(limits != NULL || limit_count == 0);
    buffer_append_str(b, "{\"error\":{\"code\":");
    buffer_append_u64(b, status);
    buffer_append_str(b, ",\"message\":");
    gw_json_string(b, message, strlen(message));
    buffer_append_str(b, ",\"status\":\"");
    buffer_append_str(b, gw_gemini_status(status));
    buffer_append_char(b, '"');
    if (retry_after_ms > 0 || limit_count > 0 || reason != NULL)
        write_details(b, retry_after_ms, limits, limit_count, reason);
    buffer_append_str(b, "}}");
}
