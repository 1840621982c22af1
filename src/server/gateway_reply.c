/* The gateway's answers (docs/gateway.md, "Answers"): OpenAI-shaped errors,
 * the upstream's answer passed on as it came, a stream's head, and the
 * headers every answer of a reserved call carries: its lease id and the
 * x-ratelimit-* figures of the limits it reserved, in OpenAI's form. */
#include "gateway_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static void add_retry_headers(struct MHD_Response *response, int64_t retry_after_ms)
{
    char seconds[24], milliseconds[24];
    snprintf(seconds, sizeof seconds, "%" PRId64, (retry_after_ms + 999) / 1000);
    snprintf(milliseconds, sizeof milliseconds, "%" PRId64, retry_after_ms);
    MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER, seconds);
    MHD_add_response_header(response, "retry-after-ms", milliseconds);
}

static enum MHD_Result queue(struct exchange *ex, unsigned status, struct MHD_Response *response)
{
    if (__atomic_load_n(&ex->server->draining, __ATOMIC_SEQ_CST))
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    ex->status = status;
    enum MHD_Result queued = MHD_queue_response(ex->connection, status, response);
    MHD_destroy_response(response);
    return queued;
}

enum MHD_Result gw_reply_error(struct exchange *ex, unsigned status, const char *type,
                               const char *code, int64_t retry_after_ms, const char *format, ...)
{
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "{\"error\":{\"message\":");
    buffer_append_json_string(&b, message, strlen(message));
    buffer_append_str(&b, ",\"type\":");
    buffer_append_json_string(&b, type, strlen(type));
    buffer_append_str(&b, ",\"param\":null,\"code\":");
    buffer_append_json_string(&b, code, strlen(code));
    buffer_append_str(&b, "}}");
    if (b.failed) {
        buffer_free(&b);
        return MHD_NO;
    }
    size_t length = b.length;
    char *data = buffer_detach(&b);
    struct MHD_Response *response =
        data != NULL ? MHD_create_response_from_buffer(length, data, MHD_RESPMEM_MUST_FREE) : NULL;
    if (response == NULL) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (retry_after_ms > 0)
        add_retry_headers(response, retry_after_ms);
    struct gw_call *call = ex->gateway_call;
    if (call != NULL && call->lease_id[0] != '\0')
        MHD_add_response_header(response, "x-llmlimit-lease-id", call->lease_id);
    return queue(ex, status, response);
}

/* OpenAI writes a reset as a duration: "20ms", "6s", "1m30s". */
static void duration_text(int64_t ms, char *out, size_t size)
{
    assert(size >= 3 * 21 + 4); /* "<h>h<m>m<s>s" */
    if (ms < 0)
        ms = 0;
    char *at = out;
    if (ms < 1000) {
        at = buffer_put_i64(at, ms);
        memcpy(at, "ms", 3);
        return;
    }
    int64_t seconds = ms / 1000 + (ms % 1000 != 0);
    int64_t hours = seconds / 3600, minutes = seconds % 3600 / 60, rest = seconds % 60;
    if (hours > 0) {
        at = buffer_put_i64(at, hours);
        *at++ = 'h';
    }
    if (hours > 0 || minutes > 0) {
        at = buffer_put_i64(at, minutes);
        *at++ = 'm';
    }
    at = buffer_put_i64(at, rest);
    memcpy(at, "s", 2);
}

/* The most constrained of the reserved limits that count `what`: the one
 * with the least left, among those whose template amount is in `amounts`. */
static const struct requirement_state *tightest(const struct gw_call *call, unsigned amounts)
{
    const struct gw_plan *plan = &call->plan;
    const struct requirement_state *best = NULL;
    for (uint32_t t = 0; t < plan->template_count; t++) {
        if ((amounts & (1u << plan->template_amount[t])) == 0)
            continue;
        uint8_t requirement = plan->key_requirement[plan->template_key[t]];
        if (requirement == GW_PLAN_NOT_RESERVED)
            continue;
        const struct requirement_state *state = &call->states[requirement];
        if (best == NULL || (state->known && (!best->known || state->available < best->available)))
            best = state;
    }
    return best;
}

struct limit_header_names {
    const char *limit, *remaining, *reset;
};

static const struct limit_header_names requests_headers = {
    "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"};
static const struct limit_header_names tokens_headers = {
    "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"};

static void add_limit_headers(struct MHD_Response *response, const struct limit_header_names *names,
                              const struct requirement_state *state, int64_t now_unix_ms)
{
    char value[80]; /* every answer has these: no printf */
    *buffer_put_u64(value, state->capacity) = '\0';
    MHD_add_response_header(response, names->limit, value);
    if (!state->known)
        return; /* the backend cannot tell what is left (docs/gateway.md) */
    *buffer_put_i64(value, state->available > 0 ? state->available : 0) = '\0';
    MHD_add_response_header(response, names->remaining, value);
    duration_text(state->reset_at_unix_ms > 0 ? state->reset_at_unix_ms - now_unix_ms : 0, value,
                  sizeof value);
    MHD_add_response_header(response, names->reset, value);
}

void gw_reply_headers(struct MHD_Response *response, const struct gw_call *call,
                      int64_t now_unix_ms)
{
    if (call->lease_id[0] != '\0')
        MHD_add_response_header(response, "x-llmlimit-lease-id", call->lease_id);
    if (call->plan.requirement_count == 0 || call->reserve_result.replayed)
        return; /* nothing reserved, or the states are not this call's */
    const struct requirement_state *requests = tightest(call, 1u << GW_AMOUNT_REQUESTS);
    const struct requirement_state *tokens =
        tightest(call, (1u << GW_AMOUNT_TOKENS) | (1u << GW_AMOUNT_INPUT_TOKENS) |
                           (1u << GW_AMOUNT_OUTPUT_TOKENS));
    if (requests != NULL)
        add_limit_headers(response, &requests_headers, requests, now_unix_ms);
    if (tokens != NULL)
        add_limit_headers(response, &tokens_headers, tokens, now_unix_ms);
}

/* A header value the upstream sent that may go out again as it is. */
static bool header_value_plain(const char *value)
{
    if (value[0] == '\0')
        return false;
    for (const char *c = value; *c != '\0'; c++) {
        if (*c < 0x20 || *c > 0x7e)
            return false;
    }
    return true;
}

enum MHD_Result gw_reply_answer(struct exchange *ex, struct gw_call *call)
{
    pthread_mutex_lock(&call->mutex);
    unsigned status = (unsigned)call->upstream_status;
    char content_type[GW_CONTENT_TYPE_LENGTH_MAX + 1];
    snprintf(content_type, sizeof content_type, "%s", call->upstream_content_type);
    /* An upstream's refusal keeps its advice on when to try again: the
     * OpenAI SDK waits for it before it retries. */
    char retry_after[GW_RETRY_AFTER_LENGTH_MAX + 1] = "";
    char retry_after_ms[GW_RETRY_AFTER_LENGTH_MAX + 1] = "";
    if (status >= 400) {
        snprintf(retry_after, sizeof retry_after, "%s", call->upstream_retry_after);
        snprintf(retry_after_ms, sizeof retry_after_ms, "%s", call->upstream_retry_after_ms);
    }
    size_t length = call->answer.length;
    char *data = buffer_detach(&call->answer);
    pthread_mutex_unlock(&call->mutex);
    if (data == NULL && length > 0)
        return MHD_NO;
    struct MHD_Response *response =
        MHD_create_response_from_buffer(length, data, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(data);
        return MHD_NO;
    }
    if (content_type[0] != '\0')
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (header_value_plain(retry_after))
        MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
    if (header_value_plain(retry_after_ms))
        MHD_add_response_header(response, "retry-after-ms", retry_after_ms);
    gw_reply_headers(response, call, clock_now_ms(ex->server->clock));
    return queue(ex, status, response);
}

enum MHD_Result gw_reply_stream(struct exchange *ex, struct gw_call *call)
{
    gw_call_retain(call); /* the response's, dropped by gw_call_stream_free */
    struct MHD_Response *response = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, GW_STREAM_BLOCK_BYTES, gw_call_stream_read, call, gw_call_stream_free);
    if (response == NULL) {
        gw_call_release(call);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, call->upstream_content_type);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    gw_reply_headers(response, call, clock_now_ms(ex->server->clock));
    return queue(ex, 200, response);
}
