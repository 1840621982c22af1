/* The gateway's answers (docs/gateway.md, "A call, step by step" and
 * "Rate-limit headers"): OpenAI-shaped errors, the upstream's answer passed
 * on as it came, a stream's head and events,
 * and the headers every answer of a reserved call carries: its lease id and
 * the x-ratelimit-* figures of the limits it reserved, in OpenAI's form. */
#include "gateway_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/encode.h"
#include "gateway/gw_error.h"
#include "server.h"
#include "wire/wire_text.h"

void gw_headers_add(struct gw_headers *h, const char *name, const char *value)
{
    assert(h->count < GW_HEADERS_MAX);
    size_t length = strlen(value);
    assert(length < sizeof h->values[0]);
    memcpy(h->values[h->count], value, length + 1);
    h->list[h->count] = (struct http_header){name, h->values[h->count]};
    h->count++;
}

static void add_retry_headers(struct gw_headers *h, int64_t retry_after_ms)
{
    char seconds[24], milliseconds[24];
    *buffer_put_i64(seconds, (retry_after_ms + 999) / 1000) = '\0';
    *buffer_put_i64(milliseconds, retry_after_ms) = '\0';
    gw_headers_add(h, "Retry-After", seconds);
    gw_headers_add(h, "retry-after-ms", milliseconds);
}

int gw_reply_error(struct exchange *ex, unsigned status, const char *type, const char *code,
                   int64_t retry_after_ms, const char *format, ...)
{
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_error_openai(&b, message, type, NULL, code);
    struct gw_headers h = {.count = 0};
    gw_headers_add(&h, "Content-Type", "application/json");
    if (retry_after_ms > 0)
        add_retry_headers(&h, retry_after_ms);
    struct gw_call *call = ex->gateway_call;
    if (call != NULL && call->lease_id[0] != '\0')
        gw_headers_add(&h, "x-llmlimit-lease-id", call->lease_id);
    if (b.failed) {
        buffer_free(&b);
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    }
    exchange_answer_raw(ex, status, h.list, h.count, b.data, b.length);
    buffer_free(&b);
    return 0;
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

static void add_limit_headers(struct gw_headers *h, const struct limit_header_names *names,
                              const struct requirement_state *state, int64_t now_unix_ms)
{
    char value[80]; /* every answer has these: no printf */
    *buffer_put_u64(value, state->capacity) = '\0';
    gw_headers_add(h, names->limit, value);
    if (!state->known)
        return; /* the backend cannot tell what is left (docs/gateway.md) */
    *buffer_put_i64(value, state->available > 0 ? state->available : 0) = '\0';
    gw_headers_add(h, names->remaining, value);
    duration_text(state->reset_at_unix_ms > 0 ? state->reset_at_unix_ms - now_unix_ms : 0, value,
                  sizeof value);
    gw_headers_add(h, names->reset, value);
}

void gw_reply_headers(struct gw_headers *h, const struct gw_call *call, int64_t now_unix_ms)
{
    if (call->lease_id[0] != '\0')
        gw_headers_add(h, "x-llmlimit-lease-id", call->lease_id);
    if (call->plan.requirement_count == 0 || call->reserve_result.replayed)
        return; /* nothing reserved, or the states are not this call's */
    const struct requirement_state *requests = tightest(call, 1u << GW_AMOUNT_REQUESTS);
    const struct requirement_state *tokens =
        tightest(call, (1u << GW_AMOUNT_TOKENS) | (1u << GW_AMOUNT_INPUT_TOKENS) |
                           (1u << GW_AMOUNT_OUTPUT_TOKENS));
    if (requests != NULL)
        add_limit_headers(h, &requests_headers, requests, now_unix_ms);
    if (tokens != NULL)
        add_limit_headers(h, &tokens_headers, tokens, now_unix_ms);
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

int gw_reply_answer(struct exchange *ex, struct gw_call *call)
{
    struct gw_headers h = {.count = 0};
    pthread_mutex_lock(&call->mutex);
    unsigned status = (unsigned)call->upstream_status;
    if (call->upstream_content_type[0] != '\0')
        gw_headers_add(&h, "Content-Type", call->upstream_content_type);
    /* An upstream's refusal keeps its advice on when to try again: the
     * OpenAI SDK waits for it before it retries. */
    if (status >= 400 && header_value_plain(call->upstream_retry_after))
        gw_headers_add(&h, "Retry-After", call->upstream_retry_after);
    if (status >= 400 && header_value_plain(call->upstream_retry_after_ms))
        gw_headers_add(&h, "retry-after-ms", call->upstream_retry_after_ms);
    pthread_mutex_unlock(&call->mutex);
    gw_reply_headers(&h, call, clock_now_ms(ex->server->clock));
    /* The transfer is over: nothing else touches the answer now. */
    exchange_answer_raw(ex, status, h.list, h.count, call->answer.data, call->answer.length);
    return 0;
}

/* on_wake of a streaming exchange: gives the client what has come, as far
 * as its socket keeps up, and the end once the lease is settled. */
static void stream_pump(struct http_exchange *hx)
{
    struct exchange *ex = (struct exchange *)hx;
    struct gw_call *call = ex->gateway_call;
    if (!hx->streaming)
        return; /* ended already */
    pthread_mutex_lock(&call->mutex);
    size_t ready = call->answer.length - call->answer_sent;
    while (ready > 0 && http_stream_pending(hx) < HTTP_STREAM_HIGH_WATER) {
        size_t room = HTTP_STREAM_HIGH_WATER - http_stream_pending(hx);
        size_t n = ready < room ? ready : room;
        http_stream_write(hx, call->answer.data + call->answer_sent, n);
        call->answer_sent += n;
        ready -= n;
    }
    if (ready == 0) {
        call->answer.length = 0; /* all given: start over at the front */
        call->answer_sent = 0;
    }
    bool unpause = call->upstream_paused && call->transfer != NULL &&
                   call->answer.length - call->answer_sent <= GW_STREAM_BUFFER_BYTES / 2;
    if (unpause) {
        call->upstream_paused = false;
        gw_forward_unpause(call->gateway->engine, call->transfer);
    }
    bool end = call->stream_ended && ready == 0;
    pthread_mutex_unlock(&call->mutex);
    if (end)
        http_stream_end(hx);
}

int gw_reply_stream(struct exchange *ex, struct gw_call *call)
{
    struct gw_headers h = {.count = 0};
    pthread_mutex_lock(&call->mutex);
    gw_headers_add(&h, "Content-Type", call->upstream_content_type);
    call->streaming = true; /* from now on, what comes wakes the exchange */
    pthread_mutex_unlock(&call->mutex);
    gw_headers_add(&h, "Cache-Control", "no-cache");
    gw_reply_headers(&h, call, clock_now_ms(ex->server->clock));
    http_stream_begin(&ex->http, 200, h.list, h.count);
    ex->http.on_wake = stream_pump;
    stream_pump(&ex->http);
    return 0;
}
