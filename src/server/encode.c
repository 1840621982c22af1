/* Reply encoders. Field names and order follow SPEC section 6 exactly; every
 * amount is a JSON integer. */
#include "encode.h"

#include <assert.h>
#include <string.h>

static void member_name(struct buffer *b, const char *name)
{
    buffer_append_char(b, '"');
    buffer_append_str(b, name);
    buffer_append_str(b, "\":");
}

static void member_string(struct buffer *b, const char *name, const char *value)
{
    member_name(b, name);
    buffer_append_json_string(b, value, strlen(value));
}

static void member_u64(struct buffer *b, const char *name, uint64_t value)
{
    member_name(b, name);
    buffer_append_u64(b, value);
}

static void member_i64(struct buffer *b, const char *name, int64_t value)
{
    member_name(b, name);
    buffer_append_i64(b, value);
}

unsigned encode_http_status(enum result_status status)
{
    switch (status) {
    case RESULT_OK:
        return 200;
    case RESULT_INVALID:
        return 400;
    case RESULT_CONFLICT:
        return 409;
    case RESULT_UNAVAILABLE:
        return 503;
    }
    return 500;
}

/* The error text of a non-OK result; 503 is always "backend_error" (the
 * outcome is unknown, whatever the backend saw). */
static const char *error_of(enum result_status status, const char *error)
{
    if (status == RESULT_UNAVAILABLE)
        return "backend_error";
    if (error[0] != '\0')
        return error;
    return status == RESULT_CONFLICT ? "lease_conflict" : "invalid_request";
}

/* The key named by a definitive denial ("unknown_limit_key: k",
 * "limit_decreasing:k", "exceeds_capacity:k"), for a backend that reports the
 * error without a denied index. */
static const char *error_key(const char *error)
{
    static const char *const prefixes[] = {
        "unknown_limit_key: ", "limit_decreasing:", "exceeds_capacity:"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(error, prefixes[i], n) == 0)
            return error + n;
    }
    return NULL;
}

static void denied_keys(struct buffer *b, const struct reserve_request *request,
                        const struct reserve_result *result)
{
    member_name(b, "denied_keys");
    buffer_append_char(b, '[');
    if (!result->allowed && result->denied_count == 0 && error_key(result->error) != NULL) {
        const char *key = error_key(result->error);
        buffer_append_json_string(b, key, strlen(key));
    }
    assert(result->denied_count <= REQUIREMENTS_PER_RESERVE_MAX);
    bool first = true;
    for (uint32_t i = 0; !result->allowed && i < result->denied_count; i++) {
        uint32_t index = result->denied_index[i];
        if (index >= request->requirement_count)
            continue; /* a backend bug must not read past the request */
        if (!first)
            buffer_append_char(b, ',');
        first = false;
        const struct requirement *r = &request->requirements[index];
        buffer_append_json_string(b, r->key, r->key_length);
    }
    buffer_append_char(b, ']');
}

#define LITERAL(out, text) (memcpy(out, text, sizeof(text) - 1), (out) + sizeof(text) - 1)

#define ALLOWED_HEAD "\"allowed\":true,\"retry_after_ms\":0,\"reserved_at_unix_ms\":"
#define ALLOWED_MIDDLE ",\"expires_at_unix_ms\":"
#define ALLOWED_TAIL ",\"error\":\"\",\"denied_keys\":[]"

/* The answer of nearly every reserve, allowed, in one write: the same bytes
 * the member writers below give it. */
static void reserve_allowed(struct buffer *b, const struct reserve_result *result)
{
    char *out =
        buffer_room(b, sizeof ALLOWED_HEAD + sizeof ALLOWED_MIDDLE + sizeof ALLOWED_TAIL + 2 * 21);
    if (out == NULL)
        return; /* failed is set: the caller answers out_of_memory */
    out = LITERAL(out, ALLOWED_HEAD);
    out = buffer_put_i64(out, result->reserved_at_unix_ms);
    out = LITERAL(out, ALLOWED_MIDDLE);
    out = buffer_put_i64(out, result->expires_at_unix_ms);
    out = LITERAL(out, ALLOWED_TAIL);
    buffer_wrote(b, out);
}

unsigned encode_reserve_members(struct buffer *b, const struct reserve_request *request,
                                const struct reserve_result *result)
{
    if (result->status == RESULT_OK && result->allowed && result->error[0] == '\0') {
        reserve_allowed(b, result);
        return 200;
    }
    if (result->status != RESULT_OK) {
        member_string(b, "error", error_of(result->status, result->error));
        return encode_http_status(result->status);
    }
    member_name(b, "allowed");
    buffer_append_str(b, result->allowed ? "true," : "false,");
    member_i64(b, "retry_after_ms", result->allowed ? 0 : result->retry_after_ms);
    buffer_append_char(b, ',');
    member_i64(b, "reserved_at_unix_ms", result->allowed ? result->reserved_at_unix_ms : 0);
    buffer_append_char(b, ',');
    member_i64(b, "expires_at_unix_ms", result->allowed ? result->expires_at_unix_ms : 0);
    buffer_append_char(b, ',');
    member_string(b, "error", result->error);
    buffer_append_char(b, ',');
    denied_keys(b, request, result);
    return 200;
}

unsigned encode_complete_members(struct buffer *b, const struct complete_result *result)
{
    if (result->status != RESULT_OK) {
        buffer_append_str(b, "\"ok\":false,");
        member_string(b, "error", error_of(result->status, result->error));
        return encode_http_status(result->status);
    }
    buffer_append_str(b, result->reconciled ? "\"ok\":true,\"reconciled\":true,"
                                            : "\"ok\":true,\"reconciled\":false,");
    member_name(b, "warnings");
    buffer_append_char(b, '[');
    const char *warning = result->warnings;
    for (uint32_t i = 0; warning != NULL && i < result->warning_count; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        size_t n = strlen(warning);
        buffer_append_json_string(b, warning, n);
        warning += n + 1;
    }
    buffer_append_char(b, ']');
    return 200;
}

unsigned encode_release_members(struct buffer *b, const struct release_result *result)
{
    if (result->status != RESULT_OK) {
        buffer_append_str(b, "\"ok\":false,");
        member_string(b, "error", error_of(result->status, result->error));
        return encode_http_status(result->status);
    }
    buffer_append_str(b, "\"ok\":true");
    return 200;
}

void encode_limit_state(struct buffer *b, const struct limit_state *state)
{
    const struct limit_definition *d = &state->definition;
    buffer_append_str(b, "{\"definition\":{");
    member_string(b, "key", d->key);
    buffer_append_char(b, ',');
    member_string(b, "kind", limit_kind_name(d->kind));
    buffer_append_char(b, ',');
    member_u64(b, "capacity", d->capacity);
    buffer_append_char(b, ',');
    member_u64(b, "window_seconds", d->window_seconds);
    buffer_append_char(b, ',');
    member_u64(b, "timeout_seconds", d->timeout_seconds);
    buffer_append_char(b, ',');
    member_string(b, "period", limit_period_name(d->period));
    buffer_append_char(b, ',');
    member_string(b, "unit", d->unit);
    buffer_append_char(b, ',');
    member_string(b, "description", d->description);
    buffer_append_char(b, ',');
    member_string(b, "overage", limit_overage_name(d->overage));
    buffer_append_str(b, "},");
    member_string(b, "status", limit_status_name(state->status));
    buffer_append_char(b, ',');
    member_u64(b, "pending_decrease_to", state->pending_decrease_to);
    buffer_append_char(b, '}');
}

void encode_usage(struct buffer *b, const struct limit_usage *usage)
{
    const struct limit_definition *d = &usage->state.definition;
    buffer_append_char(b, '{');
    member_string(b, "key", d->key);
    buffer_append_char(b, ',');
    member_string(b, "kind", limit_kind_name(d->kind));
    buffer_append_char(b, ',');
    member_string(b, "status", limit_status_name(usage->state.status));
    buffer_append_char(b, ',');
    member_u64(b, "capacity", d->capacity);
    buffer_append_char(b, ',');
    member_u64(b, "reserved", usage->reserved);
    buffer_append_char(b, ',');
    member_u64(b, "used", usage->used);
    buffer_append_char(b, ',');
    member_u64(b, "debt", usage->debt);
    buffer_append_char(b, ',');
    member_i64(b, "available", usage->available);
    buffer_append_char(b, ',');
    member_i64(b, "period_start_unix_ms",
               d->kind == LIMIT_BUDGET ? usage->period_start_unix_ms : 0);
    buffer_append_char(b, ',');
    member_i64(b, "period_end_unix_ms", d->kind == LIMIT_BUDGET ? usage->period_end_unix_ms : 0);
    buffer_append_char(b, '}');
}

void encode_error(struct buffer *b, const char *error, bool with_ok)
{
    buffer_append_str(b, with_ok ? "{\"ok\":false," : "{");
    member_string(b, "error", error);
    buffer_append_char(b, '}');
}
