/* Reply encoders. Field names and order follow docs/api.md exactly; every
 * amount is a JSON integer. */
#include "encode.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

unsigned encode_http_status(enum backend_error error)
{
    switch (error) {
    case BACKEND_OK:
    case BACKEND_UNKNOWN_LIMIT_KEY:
    case BACKEND_LIMIT_DECREASING:
    case BACKEND_EXCEEDS_CAPACITY:
        return 200; /* a definitive reserve answer, even a denial */
    case BACKEND_ACTUAL_KEY_NOT_IN_LEASE:
        return 400;
    case BACKEND_LEASE_CONFLICT:
    case BACKEND_ALREADY_FINALIZED:
        return 409;
    case BACKEND_UNAVAILABLE:
        return 503;
    }
    assert(false);
    return 500;
}

/* The wire text of every backend error and warning (docs/api.md), here and
 * nowhere else. Errors that name a key end with it. */
static const char *const error_texts[] = {
    [BACKEND_OK] = "",
    [BACKEND_UNKNOWN_LIMIT_KEY] = "unknown_limit_key: ",
    [BACKEND_LIMIT_DECREASING] = "limit_decreasing:",
    [BACKEND_EXCEEDS_CAPACITY] = "exceeds_capacity:",
    [BACKEND_LEASE_CONFLICT] = "lease_conflict",
    [BACKEND_ALREADY_FINALIZED] = "already_finalized",
    [BACKEND_ACTUAL_KEY_NOT_IN_LEASE] = "actual_key_not_in_lease:",
    [BACKEND_UNAVAILABLE] = "backend_error",
};

static const char *const warning_texts[] = {
    [BACKEND_WARNING_COMMIT_AFTER_EXPIRY] = "commit_after_expiry:",
    [BACKEND_WARNING_OVERAGE_DEBT] = "overage_debt:",
    [BACKEND_WARNING_OVERAGE_DENIED] = "overage_denied:",
};

/* A JSON string: the text, then the key when there is one. */
static void text_with_key(struct buffer *b, const char *text, const char *key, uint32_t key_length)
{
    size_t n = strlen(text);
    char joined[64 + LIMIT_KEY_LENGTH_MAX];
    assert(n < 64);
    assert(key_length <= LIMIT_KEY_LENGTH_MAX);
    assert(key != NULL || key_length == 0);
    memcpy(joined, text, n);
    if (key != NULL)
        memcpy(joined + n, key, key_length);
    buffer_append_json_string(b, joined, n + (key != NULL ? key_length : 0));
}

void encode_backend_error(struct buffer *b, enum backend_error error, const char *key,
                          uint32_t key_length)
{
    assert((size_t)error < sizeof error_texts / sizeof error_texts[0]);
    assert(backend_error_names_key(error) == (key != NULL));
    text_with_key(b, error_texts[error], key, key_length);
}

const char *encode_backend_error_text(enum backend_error error)
{
    assert((size_t)error < sizeof error_texts / sizeof error_texts[0]);
    return error_texts[error];
}

unsigned encode_admin_status(enum backend_admin_result result)
{
    switch (result) {
    case BACKEND_ADMIN_OK:
        return 200;
    case BACKEND_ADMIN_UNKNOWN_KEY:
        return 404;
    case BACKEND_ADMIN_INVALID:
    case BACKEND_ADMIN_KIND_CHANGED:
    case BACKEND_ADMIN_PERIOD_CHANGED:
    case BACKEND_ADMIN_TOO_MANY_LIMITS:
    case BACKEND_ADMIN_ALREADY_LOADED:
        return 400;
    case BACKEND_ADMIN_UNAVAILABLE:
        return 503;
    }
    assert(false);
    return 500;
}

/* Which of a budget's period fields a put would change, first that differs. */
static void encode_period_change(char *out, size_t out_size, const struct limit_definition *from,
                                 const struct limit_definition *to)
{
    if (from->period != to->period)
        snprintf(out, out_size, "period: cannot change %s to %s; delete the limit first",
                 limit_period_name(from->period), limit_period_name(to->period));
    else if (strcmp(from->time_zone, to->time_zone) != 0)
        snprintf(out, out_size, "time_zone: cannot change %s to %s; delete the limit first",
                 from->time_zone[0] != '\0' ? from->time_zone : "UTC",
                 to->time_zone[0] != '\0' ? to->time_zone : "UTC");
    else
        snprintf(out, out_size, "period_anchor_day: cannot change %d to %d; delete the limit first",
                 from->period_anchor_day == 0 ? 1 : from->period_anchor_day,
                 to->period_anchor_day == 0 ? 1 : to->period_anchor_day);
}

void encode_admin_error(char *out, size_t out_size, enum backend_admin_result result,
                        const char *key, const struct limit_definition *wanted,
                        const struct limit_state *in_force)
{
    assert(out_size > 0);
    assert(key != NULL);
    switch (result) {
    case BACKEND_ADMIN_UNKNOWN_KEY:
        snprintf(out, out_size, "%s%s", error_texts[BACKEND_UNKNOWN_LIMIT_KEY], key);
        return;
    case BACKEND_ADMIN_KIND_CHANGED:
        snprintf(out, out_size, "kind: cannot change %s to %s; delete the limit first",
                 limit_kind_name(in_force->definition.kind), limit_kind_name(wanted->kind));
        return;
    case BACKEND_ADMIN_PERIOD_CHANGED:
        encode_period_change(out, out_size, &in_force->definition, wanted);
        return;
    case BACKEND_ADMIN_TOO_MANY_LIMITS:
        snprintf(out, out_size, "key: at most %d limits", LIMITS_COUNT_MAX);
        return;
    case BACKEND_ADMIN_ALREADY_LOADED:
        snprintf(out, out_size, "key: %s is already loaded", key);
        return;
    case BACKEND_ADMIN_UNAVAILABLE:
        snprintf(out, out_size, "%s", error_texts[BACKEND_UNAVAILABLE]);
        return;
    case BACKEND_ADMIN_OK:
    case BACKEND_ADMIN_INVALID: /* its text is the validator's (src/core/limits.c) */
        break;
    }
    assert(false);
}

static void denied_keys(struct buffer *b, const struct reserve_request *request,
                        const struct reserve_result *result)
{
    buffer_member(b, "denied_keys");
    buffer_append_char(b, '[');
    if (!result->allowed && result->denied_count == 0 && backend_error_is_denial(result->error)) {
        assert(result->error_index < request->requirement_count);
        const struct requirement *r = &request->requirements[result->error_index];
        buffer_append_json_string(b, r->key, r->key_length);
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
    /* Every hold lives at least a second past its reserve. */
    assert(result->expires_at_unix_ms > result->reserved_at_unix_ms);
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

/* The error's text with the key of the requirement it names. */
static void reserve_error(struct buffer *b, const struct reserve_request *request,
                          const struct reserve_result *result)
{
    if (!backend_error_names_key(result->error)) {
        encode_backend_error(b, result->error, NULL, 0);
        return;
    }
    assert(result->error_index < request->requirement_count);
    const struct requirement *r = &request->requirements[result->error_index];
    encode_backend_error(b, result->error, r->key, r->key_length);
}

unsigned encode_reserve_members(struct buffer *b, const struct reserve_request *request,
                                const struct reserve_result *result)
{
    if (result->error == BACKEND_OK && result->allowed) {
        reserve_allowed(b, result);
        return 200;
    }
    unsigned status = encode_http_status(result->error);
    if (status != 200) {
        buffer_member(b, "error");
        reserve_error(b, request, result);
        return status;
    }
    assert(!result->allowed); /* allowed with an error is not an answer */
    assert(result->retry_after_ms >= 0);
    buffer_member(b, "allowed");
    buffer_append_str(b, result->allowed ? "true," : "false,");
    buffer_member_i64(b, "retry_after_ms", result->allowed ? 0 : result->retry_after_ms);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "reserved_at_unix_ms", result->allowed ? result->reserved_at_unix_ms : 0);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "expires_at_unix_ms", result->allowed ? result->expires_at_unix_ms : 0);
    buffer_append_char(b, ',');
    buffer_member(b, "error");
    reserve_error(b, request, result);
    buffer_append_char(b, ',');
    denied_keys(b, request, result);
    return 200;
}

unsigned encode_complete_members(struct buffer *b, const struct complete_request *request,
                                 const struct complete_result *result)
{
    if (result->error != BACKEND_OK) {
        buffer_append_str(b, "\"ok\":false,");
        buffer_member(b, "error");
        if (result->error == BACKEND_ACTUAL_KEY_NOT_IN_LEASE) {
            assert(result->error_index < request->actual_count);
            const struct actual *a = &request->actuals[result->error_index];
            encode_backend_error(b, result->error, a->key, a->key_length);
        } else {
            encode_backend_error(b, result->error, NULL, 0);
        }
        return encode_http_status(result->error);
    }
    buffer_append_str(b, result->reconciled ? "\"ok\":true,\"reconciled\":true,"
                                            : "\"ok\":true,\"reconciled\":false,");
    buffer_member(b, "warnings");
    buffer_append_char(b, '[');
    assert(result->warning_count == 0 || result->warnings != NULL);
    for (uint32_t i = 0; i < result->warning_count; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        const struct complete_warning *w = &result->warnings[i];
        assert((size_t)w->kind < sizeof warning_texts / sizeof warning_texts[0]);
        assert(warning_texts[w->kind] != NULL);
        text_with_key(b, warning_texts[w->kind], w->key, w->key_length);
    }
    buffer_append_char(b, ']');
    return 200;
}

unsigned encode_release_members(struct buffer *b, const struct release_result *result)
{
    if (result->error != BACKEND_OK) {
        buffer_append_str(b, "\"ok\":false,");
        buffer_member(b, "error");
        encode_backend_error(b, result->error, NULL, 0);
        return encode_http_status(result->error);
    }
    buffer_append_str(b, "\"ok\":true");
    return 200;
}

/* ,"alerts":[...],"webhook":... when set: a definition without them reads
 * as before them. */
static void encode_alerts_members(struct buffer *b, const struct limit_definition *d)
{
    if (d->alert_count > 0) {
        buffer_append_str(b, ",\"alerts\":[");
        for (uint32_t i = 0; i < d->alert_count; i++) {
            buffer_append_str(b, i > 0 ? ",{" : "{");
            if (d->alerts[i].runout)
                buffer_append_str(b, "\"runout_before_period_end\":true");
            else
                buffer_member_u64(b, "at_percent", d->alerts[i].at_percent);
            buffer_append_char(b, '}');
        }
        buffer_append_char(b, ']');
    }
    if (d->webhook[0] == '\0')
        return;
    buffer_append_char(b, ',');
    if (d->webhook_format == ALERT_FORMAT_JSON) {
        buffer_member_string(b, "webhook", d->webhook);
        return;
    }
    buffer_append_str(b, "\"webhook\":{");
    buffer_member_string(b, "url", d->webhook);
    buffer_append_char(b, ',');
    buffer_member_string(b, "format", alert_format_name(d->webhook_format));
    buffer_append_char(b, '}');
}

void encode_definition_members(struct buffer *b, const struct limit_definition *d)
{
    buffer_member_string(b, "key", d->key);
    buffer_append_char(b, ',');
    buffer_member_string(b, "kind", limit_kind_name(d->kind));
    buffer_append_char(b, ',');
    buffer_member_u64(b, "capacity", d->capacity);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "window_seconds", d->window_seconds);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "timeout_seconds", d->timeout_seconds);
    buffer_append_char(b, ',');
    buffer_member_string(b, "period", limit_period_name(d->period));
    buffer_append_char(b, ',');
    /* Only when set: a definition without them reads as before them. */
    if (d->period_anchor_day != 0) {
        buffer_member_u64(b, "period_anchor_day", d->period_anchor_day);
        buffer_append_char(b, ',');
    }
    if (d->time_zone[0] != '\0') {
        buffer_member_string(b, "time_zone", d->time_zone);
        buffer_append_char(b, ',');
    }
    buffer_member_string(b, "unit", d->unit);
    buffer_append_char(b, ',');
    buffer_member_string(b, "description", d->description);
    buffer_append_char(b, ',');
    buffer_member_string(b, "overage", limit_overage_name(d->overage));
    encode_alerts_members(b, d);
}

void encode_usage_amounts(struct buffer *b, const struct limit_usage *usage)
{
    const struct limit_definition *d = &usage->state.definition;
    assert(d->kind != LIMIT_BUDGET || usage->period_start_unix_ms < usage->period_end_unix_ms);
    buffer_member_u64(b, "reserved", usage->reserved);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "used", usage->used);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "debt", usage->debt);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "available", usage->available);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "period_start_unix_ms",
                      d->kind == LIMIT_BUDGET ? usage->period_start_unix_ms : 0);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "period_end_unix_ms",
                      d->kind == LIMIT_BUDGET ? usage->period_end_unix_ms : 0);
    /* The period in its own zone's wall time (a prepaid budget has none). */
    char start[PERIOD_LOCAL_TEXT_SIZE], end[PERIOD_LOCAL_TEXT_SIZE];
    if (d->kind == LIMIT_BUDGET && d->period != PERIOD_PREPAID &&
        period_local_text(d, usage->period_start_unix_ms, start) &&
        period_local_text(d, usage->period_end_unix_ms, end)) {
        buffer_append_char(b, ',');
        buffer_member_string(b, "period_start_local", start);
        buffer_append_char(b, ',');
        buffer_member_string(b, "period_end_local", end);
    }
}

void encode_limit_state(struct buffer *b, const struct limit_state *state)
{
    const struct limit_definition *d = &state->definition;
    assert(d->capacity >= 1);
    assert(d->capacity <= AMOUNT_MAX);
    /* pending_decrease_to is set exactly while a decrease waits, below the
     * capacity still in force. */
    assert(state->status == LIMIT_DECREASING || state->pending_decrease_to == 0);
    assert(state->status == LIMIT_ACTIVE || state->pending_decrease_to >= 1);
    assert(state->status == LIMIT_ACTIVE || state->pending_decrease_to < d->capacity);
    buffer_append_str(b, "{\"definition\":{");
    encode_definition_members(b, d);
    buffer_append_str(b, "},");
    buffer_member_string(b, "status", limit_status_name(state->status));
    buffer_append_char(b, ',');
    buffer_member_u64(b, "pending_decrease_to", state->pending_decrease_to);
    buffer_append_char(b, '}');
}

void encode_usage(struct buffer *b, const struct limit_usage *usage)
{
    const struct limit_definition *d = &usage->state.definition;
    buffer_append_char(b, '{');
    buffer_member_string(b, "key", d->key);
    buffer_append_char(b, ',');
    buffer_member_string(b, "kind", limit_kind_name(d->kind));
    buffer_append_char(b, ',');
    buffer_member_string(b, "status", limit_status_name(usage->state.status));
    buffer_append_char(b, ',');
    buffer_member_u64(b, "capacity", d->capacity);
    buffer_append_char(b, ',');
    encode_usage_amounts(b, usage);
    buffer_append_char(b, '}');
}

void encode_error(struct buffer *b, const char *error, bool with_ok)
{
    buffer_append_str(b, with_ok ? "{\"ok\":false," : "{");
    buffer_member_string(b, "error", error);
    buffer_append_char(b, '}');
}
