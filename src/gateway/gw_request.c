/* A small scanner finds each member's bytes in the client's text: the
 * parsed tree says what the members are (in document order), the scanner
 * where they are. It only walks text the strict parser already accepted,
 * and every loop advances, so it runs in one pass over the body. */
#include "gw_request.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "gw_dialect.h"
#include "gw_gemini.h"

struct span {
    size_t start, end; /* [start, end) in the text */
};

struct scanner {
    const char *text;
    size_t end; /* of the object being walked (its closing '}' excluded) */
    size_t pos;
};

static void skip_space(struct scanner *s)
{
    while (s->pos < s->end && (s->text[s->pos] == ' ' || s->text[s->pos] == '\t' ||
                               s->text[s->pos] == '\n' || s->text[s->pos] == '\r'))
        s->pos++;
}

/* At a '"': past the closing quote. */
static void skip_string(struct scanner *s)
{
    assert(s->text[s->pos] == '"');
    for (s->pos++; s->pos < s->end && s->text[s->pos] != '"'; s->pos++) {
        if (s->text[s->pos] == '\\')
            s->pos++; /* the escaped character, whatever it is */
    }
    s->pos++;
}

/* Past one value: a string, a nested object or array (strings inside are
 * skipped whole, so their brackets do not count), or a literal. */
static void skip_value(struct scanner *s)
{
    char c = s->text[s->pos];
    if (c == '"') {
        skip_string(s);
        return;
    }
    if (c != '{' && c != '[') {
        while (s->pos < s->end && strchr(",}] \t\r\n", s->text[s->pos]) == NULL)
            s->pos++;
        return;
    }
    size_t depth = 0;
    while (s->pos < s->end) {
        c = s->text[s->pos];
        if (c == '"') {
            skip_string(s);
            continue;
        }
        depth += c == '{' || c == '[';
        depth -= c == '}' || c == ']';
        s->pos++;
        if (depth == 0)
            return;
    }
}

/* Opens the object whose '{' is the first non-space byte of span. */
static void scanner_open(struct scanner *s, const char *text, struct span object)
{
    s->text = text;
    s->end = object.end;
    s->pos = object.start;
    skip_space(s);
    assert(s->pos < s->end && text[s->pos] == '{');
    s->pos++;
    while (s->end > s->pos && text[s->end - 1] != '}')
        s->end--; /* trailing space of the span */
    s->end--;
}

/* The next member: its whole text ("key": value) and its value's. */
static void scanner_next(struct scanner *s, struct span *member, struct span *value)
{
    skip_space(s);
    if (s->pos < s->end && s->text[s->pos] == ',')
        s->pos++;
    skip_space(s);
    member->start = s->pos;
    skip_string(s);
    skip_space(s);
    assert(s->text[s->pos] == ':');
    s->pos++;
    skip_space(s);
    value->start = s->pos;
    skip_value(s);
    value->end = member->end = s->pos;
}

static void append_span(struct buffer *out, const char *text, struct span span)
{
    buffer_append(out, text + span.start, span.end - span.start);
}

/* The client's stream_options with include_usage set to true. */
static void write_stream_options(struct buffer *out, const char *body,
                                 const struct jdoc_value *options, struct span where)
{
    buffer_append_str(out, "\"stream_options\":{");
    if (options != NULL) {
        struct scanner s;
        scanner_open(&s, body, where);
        for (uint32_t i = 0; i < options->count; i++) {
            struct span member, value;
            scanner_next(&s, &member, &value);
            if (strcmp(options->as.members[i].key, "include_usage") == 0)
                continue;
            append_span(out, body, member);
            buffer_append_char(out, ',');
        }
    }
    buffer_append_str(out, "\"include_usage\":true}");
}

static int fail(char *error, size_t error_size, const char *message)
{
    snprintf(error, error_size, "%s", message);
    return -1;
}

/* Reads stream and, when the gateway asks for usage, stream_options; -1
 * on a type the upstream would refuse in a way the client could not see
 * coming. */
static int read_info(const struct jdoc_value *root, bool ask_usage, struct gw_request_info *info,
                     const struct jdoc_value **options, char *error, size_t error_size)
{
    const struct jdoc_value *stream = jdoc_get(root, "stream");
    if (stream != NULL && stream->kind != JDOC_NULL && stream->kind != JDOC_TRUE &&
        stream->kind != JDOC_FALSE)
        return fail(error, error_size, "stream: must be a boolean");
    info->stream = jdoc_is(stream, JDOC_TRUE);
    *options = jdoc_get(root, "stream_options");
    if (!info->stream || !ask_usage)
        return 0;
    if (*options != NULL && (*options)->kind == JDOC_NULL)
        *options = NULL;
    if (*options != NULL && !jdoc_is(*options, JDOC_OBJECT))
        return fail(error, error_size, "stream_options: must be an object");
    const struct jdoc_value *include = jdoc_get(*options, "include_usage");
    if (include != NULL && include->kind != JDOC_NULL && include->kind != JDOC_TRUE &&
        include->kind != JDOC_FALSE)
        return fail(error, error_size, "stream_options.include_usage: must be a boolean");
    info->client_include_usage = jdoc_is(include, JDOC_TRUE);
    return 0;
}

static bool is_bound_field(const char *const *fields, const char *name)
{
    for (; fields != NULL && *fields != NULL; fields++) {
        if (strcmp(*fields, name) == 0)
            return true;
    }
    return false;
}

/* Whether the request sets none of the fields (absent, or null). */
static bool bound_missing(const struct jdoc_value *root, const char *const *fields)
{
    for (; *fields != NULL; fields++) {
        const struct jdoc_value *value = jdoc_get(root, *fields);
        if (value != NULL && value->kind != JDOC_NULL)
            return false;
    }
    return true;
}

/* A Gemini request names its model in the path, and streams by its method:
 * the body goes as it came, but for generationConfig.maxOutputTokens when
 * a generateContent call sets none (output_bound > 0; countTokens gets
 * nothing). */
int gw_request_rewrite_gemini(const struct gw_surface *surface, const char *body, size_t length,
                              const struct jdoc_value *root, const struct gw_model *model,
                              uint64_t output_bound, struct buffer *out,
                              struct gw_request_info *info, char *error, size_t error_size)
{
    (void)model;
    (void)info;
    if (output_bound == 0 || surface->bound_fields == NULL || gw_gemini_bound_given(root)) {
        buffer_append(out, body, length);
        return out->failed ? fail(error, error_size, "out of memory") : 0;
    }
    struct scanner s;
    scanner_open(&s, body, (struct span){0, length});
    buffer_append_char(out, '{');
    bool config_seen = false;
    for (uint32_t i = 0; i < root->count; i++) {
        struct span member, value;
        scanner_next(&s, &member, &value);
        if (i > 0)
            buffer_append_char(out, ',');
        if (strcmp(root->as.members[i].key, "generationConfig") == 0 && !config_seen) {
            config_seen = true; /* an object without the bound, or null */
            gw_gemini_write_generation_config(out, body + value.start, value.end - value.start,
                                              output_bound);
        } else {
            append_span(out, body, member);
        }
    }
    if (!config_seen) {
        if (root->count > 0)
            buffer_append_char(out, ',');
        gw_gemini_write_generation_config(out, "null", 4, output_bound);
    }
    buffer_append_char(out, '}');
    return out->failed ? fail(error, error_size, "out of memory") : 0;
}

/* A body that names its model: renamed, usage asked for, the bound
 * written (gw_request_rewrite_for). */
static int rewrite_json(const struct gw_surface *surface, const char *body, size_t length,
                        const struct jdoc_value *root, const struct gw_model *model,
                        uint64_t output_bound, struct buffer *out, struct gw_request_info *info,
                        char *error, size_t error_size)
{
    if (!jdoc_is(jdoc_get(root, "model"), JDOC_STRING))
        return fail(error, error_size, "model: must be a string");
    /* Messages and Responses streams carry their usage anyway: nothing to
     * ask for, nothing to strip. */
    bool ask_usage = surface->asks_stream_usage;
    const struct jdoc_value *options;
    if (read_info(root, ask_usage, info, &options, error, error_size) != 0)
        return -1;
    info->stream = info->stream && !surface->never_streams;
    bool add_usage = ask_usage && info->stream;
    /* No bound given (or only nulls): the one reserved goes upstream, the
     * nulls do not (docs/gateway.md, "What goes upstream"). */
    const char *const *bounds = output_bound > 0 ? surface->bound_fields : NULL;
    bool add_bound = bounds != NULL && bound_missing(root, bounds);
    struct scanner s;
    scanner_open(&s, body, (struct span){0, length});
    buffer_append_char(out, '{');
    bool first = true;
    for (uint32_t i = 0; i < root->count; i++) {
        const char *name = root->as.members[i].key;
        struct span member, value;
        scanner_next(&s, &member, &value);
        if (add_bound && is_bound_field(bounds, name))
            continue; /* a null: the bound is written below */
        if (!first)
            buffer_append_char(out, ',');
        first = false;
        if (strcmp(name, "model") == 0) {
            buffer_append_str(out, "\"model\":");
            buffer_append_json_string(out, model->upstream_model, strlen(model->upstream_model));
        } else if (strcmp(name, "stream_options") == 0 && add_usage) {
            write_stream_options(out, body, options, value);
        } else {
            append_span(out, body, member);
        }
    }
    if (add_usage && jdoc_get(root, "stream_options") == NULL)
        buffer_append_str(out, ",\"stream_options\":{\"include_usage\":true}");
    if (add_bound) { /* "model" was written: never the first member */
        buffer_append_str(out, ",\"");
        buffer_append_str(out, bounds[0]);
        buffer_append_str(out, "\":");
        buffer_append_u64(out, output_bound);
    }
    buffer_append_char(out, '}');
    return out->failed ? fail(error, error_size, "out of memory") : 0;
}

int gw_request_rewrite_with(const struct gw_dialect *dialect, const struct gw_surface *surface,
                            const char *body, size_t length, const struct jdoc_value *root,
                            const struct gw_model *model, uint64_t output_bound, struct buffer *out,
                            struct gw_request_info *info, char *error, size_t error_size)
{
    assert(body != NULL && root != NULL && model != NULL && out != NULL && info != NULL);
    *info = (struct gw_request_info){0};
    if (!jdoc_is(root, JDOC_OBJECT))
        return fail(error, error_size, "body: must be a JSON object");
    gw_request_rewrite_fn rewrite = dialect->rewrite != NULL ? dialect->rewrite : rewrite_json;
    return rewrite(surface, body, length, root, model, output_bound, out, info, error, error_size);
}
