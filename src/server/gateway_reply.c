/* The gateway's answers (docs/gateway.md, "A call, step by step" and
 * "Rate-limit headers"): errors in the shape of the route's surface (OpenAI's
 * or Anthropic's), the upstream's answer passed on as it came, a stream's
 * head and events, and the headers every answer of a reserved call carries:
 * its lease id and the figures of the limits it reserved, in OpenAI's form
 * (x-ratelimit-*) and on the Messages surface in Anthropic's too
 * (anthropic-ratelimit-*), concurrency limits in headers of their own
 * (x-llmlimit-concurrency-*); a denial's 429 carries those of the limits
 * that did not fit. */
#include "gateway_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/encode.h"
#include "gateway/gw_error.h"
#include "gateway/gw_secret.h"
#include "exchange.h"
#include "services.h"
#include "wire/wire_text.h"

void gateway_headers_add(struct gateway_headers *h, const char *name, const char *value)
{
    assert(h->count < GATEWAY_HEADERS_MAX);
    size_t name_length = strlen(name), length = strlen(value);
    assert(name_length < sizeof h->names[0]);
    assert(length < sizeof h->values[0]);
    memcpy(h->names[h->count], name, name_length + 1);
    memcpy(h->values[h->count], value, length + 1);
    h->list[h->count] = (struct http_header){h->names[h->count], h->values[h->count]};
    h->count++;
}

static void add_retry_headers(struct gateway_headers *h, int64_t retry_after_ms)
{
    char seconds[24], milliseconds[24];
    *buffer_put_i64(seconds, (retry_after_ms + 999) / 1000) = '\0';
    *buffer_put_i64(milliseconds, retry_after_ms) = '\0';
    gateway_headers_add(h, "Retry-After", seconds);
    gateway_headers_add(h, "retry-after-ms", milliseconds);
}

/* x-should-retry: false on an answer a retry cannot change (gw_error.h's
 * rule), so that the SDKs and Claude Code give up at once instead of
 * trying again for minutes. */
static void add_should_retry(struct gateway_headers *h, unsigned status, int64_t retry_after_ms)
{
    if (gw_should_not_retry(status, retry_after_ms))
        gateway_headers_add(h, GW_SHOULD_RETRY_HEADER, "false");
}

/* The keys of the limits a denied call did not fit, into keys (at most
 * `most`): Google's error names them in a QuotaFailure. */
static uint32_t denied_keys(const struct exchange *ex, unsigned status, const char **keys,
                            uint32_t most)
{
    const struct gateway_call *call = gateway_call_of(ex);
    if (status != 429 || call == NULL)
        return 0;
    const struct reserve_result *r = &call->reserve_result;
    uint32_t n = 0;
    for (uint32_t i = 0; r->error == BACKEND_OK && !r->allowed && i < r->denied_count && n < most;
         i++)
        keys[n++] = call->reserve.requirements[r->denied_index[i]].key;
    return n;
}

/* An error body in the shape of the route's dialect, with the wait and
 * the limits that did not fit (a shape may carry them as details). */
static void error_body(struct buffer *b, const struct exchange *ex, unsigned status,
                       const char *type, const char *code, int64_t retry_after_ms,
                       const char *message)
{
    const char *keys[GW_LIMITS_MAX];
    const struct gw_error_args args = {
        .status = status,
        .type = type,
        .code = code,
        .message = message,
        .retry_after_ms = retry_after_ms,
        .denied_keys = keys,
        .denied_count = denied_keys(ex, status, keys, GW_LIMITS_MAX),
    };
    ex->route->gateway->dialect->error(b, &args);
}

/* An error with the headers h already holds (beyond Content-Type and the
 * retry's), in the route's surface's shape; its message from format and
 * args, as vsnprintf. */
__attribute__((format(printf, 7, 0))) static int
reply_error_with(struct exchange *ex, struct gateway_headers *h, unsigned status, const char *type,
                 const char *code, int64_t retry_after_ms, const char *format, va_list args)
{
    char message[1024];
    vsnprintf(message, sizeof message, format, args);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    struct gateway_call *mcp_call = gateway_call_of(ex);
    if (ex->route->gateway->kind == GW_ROUTE_TOOLS && mcp_call != NULL && mcp_call->mcp.id.present)
        gateway_mcp_error_body(&b, mcp_call, status, code, message); /* answers its request */
    else
        error_body(&b, ex, status, type, code, retry_after_ms, message);
    buffer_append_char(&b, '\n'); /* as every JSON answer of llmlimitd's own */
    gateway_headers_add(h, "Content-Type", "application/json");
    if (retry_after_ms > 0)
        add_retry_headers(h, retry_after_ms);
    add_should_retry(h, status, retry_after_ms);
    struct gateway_call *call = gateway_call_of(ex);
    if (call != NULL && call->lease_id[0] != '\0')
        gateway_headers_add(h, "x-llmlimit-lease-id", call->lease_id);
    if (b.failed) {
        buffer_free(&b);
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    }
    exchange_answer_raw(ex, status, h->list, h->count, b.data, b.length);
    buffer_free(&b);
    return 0;
}

int gateway_reply_error(struct exchange *ex, unsigned status, const char *type, const char *code,
                        int64_t retry_after_ms, const char *format, ...)
{
    struct gateway_headers h = {.count = 0};
    va_list args;
    va_start(args, format);
    int rc = reply_error_with(ex, &h, status, type, code, retry_after_ms, format, args);
    va_end(args);
    return rc;
}

int gateway_reply_error_no_retry(struct exchange *ex, unsigned status, const char *type,
                                 const char *code, const char *format, ...)
{
    struct gateway_headers h = {.count = 0};
    gateway_headers_add(&h, "x-should-retry", "false");
    va_list args;
    va_start(args, format);
    int rc = reply_error_with(ex, &h, status, type, code, 0, format, args);
    va_end(args);
    return rc;
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

/* ---- rate-limit headers (what they say of one limit: struct
 * gw_limit_figure) ---- */

#define AMOUNT_BIT(amount) (1u << (amount))

/* A family of headers and the template amounts whose limits it reports:
 * x-ratelimit-<verb>-<name> on every surface (name NULL: none), and the
 * family in a dialect's own headers (its limit_headers). */
struct limit_family {
    unsigned amounts;
    const char *name;
    enum gw_limit_family family;
};

static const struct limit_family families[] = {
    {AMOUNT_BIT(GW_AMOUNT_REQUESTS), "requests", GW_FAMILY_REQUESTS},
    {AMOUNT_BIT(GW_AMOUNT_TOKENS) | AMOUNT_BIT(GW_AMOUNT_INPUT_TOKENS) |
         AMOUNT_BIT(GW_AMOUNT_UNCACHED_INPUT_TOKENS) | AMOUNT_BIT(GW_AMOUNT_OUTPUT_TOKENS),
     "tokens", GW_FAMILY_TOKENS},
    {AMOUNT_BIT(GW_AMOUNT_INPUT_TOKENS) | AMOUNT_BIT(GW_AMOUNT_UNCACHED_INPUT_TOKENS), NULL,
     GW_FAMILY_INPUT_TOKENS},
    {AMOUNT_BIT(GW_AMOUNT_OUTPUT_TOKENS), NULL, GW_FAMILY_OUTPUT_TOKENS},
};

#define FAMILIES (sizeof families / sizeof families[0])

/* x-ratelimit-limit-<name>, -remaining-<name> and -reset-<name> (reset as
 * a duration: "1m30s"). */
static void add_common_headers(struct gateway_headers *h, const char *family,
                               const struct gw_limit_figure *figure, int64_t now_unix_ms)
{
    char name[64], value[24]; /* every answer has these: no printf for the values */
    *buffer_put_u64(value, figure->capacity) = '\0';
    snprintf(name, sizeof name, "x-ratelimit-limit-%s", family);
    gateway_headers_add(h, name, value);
    if (figure->remaining_known) {
        *buffer_put_i64(value, figure->remaining > 0 ? figure->remaining : 0) = '\0';
        snprintf(name, sizeof name, "x-ratelimit-remaining-%s", family);
        gateway_headers_add(h, name, value);
    }
    if (figure->reset_known) {
        char reset[80] = "";
        int64_t reset_ms =
            figure->reset_at_unix_ms > now_unix_ms ? figure->reset_at_unix_ms : now_unix_ms;
        duration_text(reset_ms - now_unix_ms, reset, sizeof reset);
        snprintf(name, sizeof name, "x-ratelimit-reset-%s", family);
        gateway_headers_add(h, name, reset);
    }
}

static void add_header(void *context, const char *name, const char *value)
{
    gateway_headers_add(context, name, value);
}

static void add_limit_headers(struct gateway_headers *h, const struct limit_family *family,
                              const struct gw_dialect *dialect,
                              const struct gw_limit_figure *figure, int64_t now_unix_ms)
{
    if (family->name != NULL)
        add_common_headers(h, family->name, figure, now_unix_ms);
    if (dialect->limit_headers == NULL)
        return;
    dialect->limit_headers(family->family, figure, now_unix_ms, add_header, h);
}

/* Whether a template of the plan whose amount is in `amounts` gives the
 * requirement at index r. */
static bool requirement_in(const struct gw_plan *plan, uint32_t r, unsigned amounts)
{
    for (uint32_t t = 0; t < plan->template_count; t++) {
        if ((amounts & AMOUNT_BIT(plan->template_amount[t])) != 0 &&
            plan->template_key[t] != GW_PLAN_NOT_RESERVED &&
            plan->key_requirement[plan->template_key[t]] == r)
            return true;
    }
    return false;
}

/* Whether a is more constrained than b: a known state before an unknown
 * one; among known ones the least left, among unknown ones (the
 * tigerbeetle backend's) the smallest capacity. */
static bool tighter(const struct requirement_state *a, const struct requirement_state *b)
{
    if (a->known != b->known)
        return a->known;
    return a->known ? a->available < b->available : a->capacity < b->capacity;
}

/* Whether a goes before b in a family's headers: a rolling limit before a
 * budget (OpenAI's clients read x-ratelimit-* as per-minute figures), then
 * the tighter. */
static bool reported_before(const struct requirement_state *a, const struct requirement_state *b)
{
    bool a_rolling = a->kind == LIMIT_ROLLING, b_rolling = b->kind == LIMIT_ROLLING;
    if (a_rolling != b_rolling)
        return a_rolling;
    return tighter(a, b);
}

/* The limit a family reports among the reserved limits whose template
 * amount is in `amounts`: of the concurrency limits when `concurrency`
 * (their own headers), else of the others. false when the plan reserves
 * none of them. */
static bool tightest(const struct gateway_call *call, unsigned amounts, bool concurrency,
                     struct gw_limit_figure *out)
{
    const struct requirement_state *best = NULL;
    for (uint32_t r = 0; r < call->plan.requirement_count; r++) {
        const struct requirement_state *state = &call->states[r];
        if (!requirement_in(&call->plan, r, amounts) ||
            (state->kind == LIMIT_CONCURRENCY) != concurrency)
            continue;
        if (best == NULL || reported_before(state, best))
            best = state;
    }
    if (best == NULL)
        return false;
    /* The tigerbeetle backend cannot tell what is left (docs/gateway.md). */
    *out = (struct gw_limit_figure){.capacity = best->capacity,
                                    .remaining_known = best->known,
                                    .remaining = best->available,
                                    .reset_known = best->known,
                                    .reset_at_unix_ms = best->reset_at_unix_ms};
    return true;
}

/* x-llmlimit-waited-ms: how long a call that asked to wait (Prefer: wait)
 * waited for its reserve. */
static void waited_header(struct gateway_headers *h, const struct gateway_call *call)
{
    if (call->wait_ms == 0 || !call->reserving)
        return;
    char value[24];
    *buffer_put_i64(value, call->reserve_result.waited_ms) = '\0';
    gateway_headers_add(h, "x-llmlimit-waited-ms", value);
}

/* x-llmlimit-concurrency-limit and -remaining: the calls a concurrency
 * limit lets run at once, and how many more may start now (no reset: a
 * slot frees when a call ends, not at a time). */
static void add_concurrency_headers(struct gateway_headers *h, const struct gw_limit_figure *figure)
{
    char value[24];
    *buffer_put_u64(value, figure->capacity) = '\0';
    gateway_headers_add(h, "x-llmlimit-concurrency-limit", value);
    if (figure->remaining_known) {
        *buffer_put_i64(value, figure->remaining > 0 ? figure->remaining : 0) = '\0';
        gateway_headers_add(h, "x-llmlimit-concurrency-remaining", value);
    }
}

void gateway_reply_headers(struct gateway_headers *h, const struct gateway_call *call,
                           int64_t now_unix_ms)
{
    if (call->lease_id[0] != '\0')
        gateway_headers_add(h, "x-llmlimit-lease-id", call->lease_id);
    waited_header(h, call);
    if (call->plan.requirement_count == 0 || call->reserve_result.replayed)
        return; /* nothing reserved, or the states are not this call's */
    struct gw_limit_figure figure;
    for (size_t f = 0; f < FAMILIES; f++) {
        if (tightest(call, families[f].amounts, false, &figure))
            add_limit_headers(h, &families[f], gw_dialect_of(call->endpoint), &figure, now_unix_ms);
    }
    if (tightest(call, AMOUNT_BIT(GW_AMOUNT_REQUESTS), true, &figure))
        add_concurrency_headers(h, &figure);
}

/* The first limit that did not fit among those whose template amount is
 * in `amounts`, concurrency limits or the others; false when none. */
static bool first_denied(struct exchange *ex, const struct gateway_call *call, unsigned amounts,
                         bool concurrency, struct limit_state *out)
{
    const struct reserve_result *r = &call->reserve_result;
    for (uint32_t i = 0; i < r->denied_count; i++) {
        uint32_t index = r->denied_index[i];
        if (requirement_in(&call->plan, index, amounts) &&
            backend_get_limit(ex->server->backend, call->reserve.requirements[index].key, out) ==
                0 &&
            (out->definition.kind == LIMIT_CONCURRENCY) == concurrency)
            return true;
    }
    return false;
}

/* A 429 after a denial: the limits that did not fit, each family's first
 * with its capacity (from the registry) and when this call would fit
 * (retry_after_ms, as the backend reported), and a concurrency limit's
 * capacity in its own header; what is left is not reported on a denial. */
static void denial_headers(struct gateway_headers *h, struct exchange *ex,
                           const struct gateway_call *call, int64_t now_unix_ms)
{
    const struct reserve_result *r = &call->reserve_result;
    struct limit_state state;
    for (size_t f = 0; f < FAMILIES; f++) {
        if (!first_denied(ex, call, families[f].amounts, false, &state))
            continue;
        struct gw_limit_figure figure = {.capacity = state.definition.capacity,
                                         .reset_known = true,
                                         .reset_at_unix_ms = now_unix_ms + r->retry_after_ms};
        add_limit_headers(h, &families[f], gw_dialect_of(call->endpoint), &figure, now_unix_ms);
    }
    if (first_denied(ex, call, AMOUNT_BIT(GW_AMOUNT_REQUESTS), true, &state))
        add_concurrency_headers(h,
                                &(struct gw_limit_figure){.capacity = state.definition.capacity});
    if (r->wait_outcome == RESERVE_WAIT_FULL) /* --max-waiters were waiting: it could not */
        gateway_headers_add(h, "x-llmlimit-queue", "full");
    waited_header(h, call);
}

int gateway_reply_denied(struct exchange *ex, struct gateway_call *call, const char *type,
                         const char *code, const char *format, ...)
{
    struct gateway_headers h = {.count = 0};
    denial_headers(&h, ex, call, clock_now_ms(ex->server->clock));
    va_list args;
    va_start(args, format);
    int rc = reply_error_with(ex, &h, 429, type, code, call->reserve_result.retry_after_ms, format,
                              args);
    va_end(args);
    return rc;
}

/* A header value the upstream sent that may go out again: printable ASCII
 * only (a bare CR or another control byte would let a client that splits
 * on it read fields of the upstream's making). */
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

/* Relays an upstream header when its value is plain, the provider key
 * starred out of it. Whether it went out. */
static bool relay_header(struct gateway_headers *h, const struct gateway_call *call,
                         const char *name, const char *value)
{
    if (!header_value_plain(value))
        return false;
    char copy[sizeof h->values[0]];
    snprintf(copy, sizeof copy, "%s", value);
    gw_secret_redact(copy, strlen(copy), call->upstream->api_key);
    gateway_headers_add(h, name, copy);
    return true;
}

/* The pump of a whole answer being given: as much as the client's socket
 * takes, and the end once all of it is out (a client that left takes it
 * all at once: the transport drops it). */
static void answer_pump(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    if (!exchange_streaming(ex))
        return; /* ended already */
    pthread_mutex_lock(&call->mutex);
    size_t ready = call->answer.length - call->answer_sent;
    size_t room;
    while (ready > 0 && (room = exchange_stream_room(ex)) > 0) {
        size_t n = ready < room ? ready : room;
        exchange_stream_write(ex, call->answer.data + call->answer_sent, n);
        call->answer_sent += n;
        ready -= n;
    }
    pthread_mutex_unlock(&call->mutex);
    if (ready == 0)
        exchange_stream_end(ex);
}

int gateway_reply_answer(struct exchange *ex, struct gateway_call *call)
{
    struct gateway_headers h = {.count = 0};
    pthread_mutex_lock(&call->mutex);
    unsigned status = (unsigned)call->upstream_status;
    relay_header(&h, call, "Content-Type", call->upstream_content_type);
    relay_header(&h, call, "Mcp-Session-Id", call->upstream_session_id);
    /* An upstream's refusal keeps its advice on when to try again: the
     * OpenAI SDK waits for it before it retries. */
    if (status >= 400) {
        relay_header(&h, call, "Retry-After", call->upstream_retry_after);
        relay_header(&h, call, "retry-after-ms", call->upstream_retry_after_ms);
        add_should_retry(&h, status, 0); /* an upstream's 429 says when itself */
    }
    pthread_mutex_unlock(&call->mutex);
    gateway_reply_headers(&h, call, clock_now_ms(ex->server->clock));
    /* The transfer is over: nothing else writes the answer now. An error
     * body may echo the key the gateway sent: starred out first. It is given
     * from its own bytes as the client's socket takes them (never a second
     * copy of a large answer in the transport), and stays counted in the
     * gateway's answer_bytes_held until the exchange is freed. */
    gw_secret_redact(call->answer.data, call->answer.length, call->upstream->api_key);
    if (call->answer.length <= GW_ANSWER_ONE_WRITE_BYTES) /* small: with its head, at once */
        return exchange_answer_raw(ex, status, h.list, h.count, call->answer.data,
                                   call->answer.length);
    pthread_mutex_lock(&call->mutex);
    call->answer_sent = 0;
    call->pumping_answer = true;
    pthread_mutex_unlock(&call->mutex);
    return exchange_answer_begin(ex, status, h.list, h.count, call->answer.data,
                                 call->answer.length, answer_pump);
}

/* The pump of a streaming exchange: gives the client what has come, as far
 * as its socket keeps up, and the end once the lease is settled. */
static void stream_pump(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    if (!exchange_streaming(ex))
        return; /* ended already */
    pthread_mutex_lock(&call->mutex);
    size_t ready = call->answer.length - call->answer_sent;
    size_t room;
    while (ready > 0 && (room = exchange_stream_room(ex)) > 0) {
        size_t n = ready < room ? ready : room;
        exchange_stream_write(ex, call->answer.data + call->answer_sent, n);
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
        exchange_stream_end(ex);
}

int gateway_reply_stream(struct exchange *ex, struct gateway_call *call)
{
    struct gateway_headers h = {.count = 0};
    pthread_mutex_lock(&call->mutex);
    if (!relay_header(&h, call, "Content-Type", call->upstream_content_type))
        gateway_headers_add(&h, "Content-Type", "text/event-stream"); /* what it began with */
    relay_header(&h, call, "Mcp-Session-Id", call->upstream_session_id);
    call->streaming = true; /* from now on, what comes wakes the exchange */
    pthread_mutex_unlock(&call->mutex);
    gateway_headers_add(&h, "Cache-Control", "no-cache");
    gateway_reply_headers(&h, call, clock_now_ms(ex->server->clock));
    return exchange_stream_begin(ex, 200, h.list, h.count, stream_pump);
}
