/* A gateway call after its reserve (docs/gateway.md, "A call, step by step"):
 * forwarded by the engine thread, its answer read whole or relayed event by
 * event, and the lease settled exactly once: completed with what the call
 * used, or released when the upstream refused it or never answered. A
 * stream's closing [DONE] is held until the lease is completed, so usage
 * reflects the call before the client sees the end of it.
 *
 * Threads: the handler and the stream's pump run on the exchange's worker,
 * the transfer's callbacks on the engine thread, a backend's done on
 * whatever thread it calls from. call->mutex guards what they share; the
 * engine wakes the exchange (http_wake) under it, which is safe because the
 * exchange is freed only after gateway_call_exchange_gone has taken it. */
#include "gateway_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "keys.h"
#include "gateway/gw_answer.h"
#include "gateway/gw_cost.h"
#include "gateway/gw_endpoint.h"
#include "gateway/gw_error.h"
#include "gateway/gw_secret.h"
#include "exchange.h"
#include "services.h"
#include "util/log.h"
#include "util/queue.h"

/* ---- the memory whole answers hold (gateway.answer_bytes_held) ---------- */

/* Takes length bytes of the answers' memory for the call (call->mutex
 * held): false when that would pass the gateway's answer_bytes_max. */
static bool answer_bytes_take(struct gateway_call *call, uint64_t length)
{
    struct gateway *g = call->gateway;
    uint64_t held = __atomic_load_n(&g->answer_bytes_held, __ATOMIC_RELAXED);
    do {
        if (length > g->answer_bytes_max || held > g->answer_bytes_max - length)
            return false;
    } while (!__atomic_compare_exchange_n(&g->answer_bytes_held, &held, held + length, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    call->answer_bytes_counted += length;
    return true;
}

/* Gives `length` bytes of the call's part back (call->mutex held, or its
 * last reference). */
static void answer_bytes_give(struct gateway_call *call, uint64_t length)
{
    assert(length <= call->answer_bytes_counted);
    __atomic_sub_fetch(&call->gateway->answer_bytes_held, length, __ATOMIC_RELAXED);
    call->answer_bytes_counted -= length;
}

/* Gives the call's whole part back. */
static void answer_bytes_return(struct gateway_call *call)
{
    answer_bytes_give(call, call->answer_bytes_counted);
}

/* No answer has room while the answers held fill the memory given them:
 * a call is then not forwarded. */
static bool answer_memory_full(const struct gateway *g)
{
    return __atomic_load_n(&g->answer_bytes_held, __ATOMIC_RELAXED) >= g->answer_bytes_max;
}

/* ---- calls: made and freed ----------------------------------------------- */

void gateway_call_retain(struct gateway_call *call)
{
    __atomic_add_fetch(&call->references, 1, __ATOMIC_RELAXED);
}

void gateway_call_release(struct gateway_call *call)
{
    uint32_t left = __atomic_sub_fetch(&call->references, 1, __ATOMIC_ACQ_REL);
    if (left > 0)
        return;
    assert(call->transfer == NULL);
    assert(call->previous_active == NULL && call->next_active == NULL);
    answer_bytes_return(call);
    free(call->complete_result.warnings);
    buffer_free(&call->upstream_body);
    buffer_free(&call->answer);
    buffer_free(&call->held);
    gw_sse_free(&call->sse);
    gw_config_release(call->config);
    keys_record_release(call->key_record);
    pthread_mutex_destroy(&call->mutex);
    struct gateway *g = call->gateway;
    pthread_mutex_lock(&g->pool_mutex);
    if (g->pool_count < GW_CALLS_KEPT) {
        call->next_free = g->pool;
        g->pool = call;
        g->pool_count++;
        call = NULL;
    }
    pthread_mutex_unlock(&g->pool_mutex);
    free(call);
}

static void exchange_cleanup(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    if (call == NULL)
        return;
    ex->handler_state = NULL;
    gateway_call_exchange_gone(call);
    gateway_call_release(call);
}

struct gateway_call *gateway_call_new(struct exchange *ex, struct gw_config *config,
                                      const struct gw_key *key, struct keys_record *key_record,
                                      enum gw_endpoint endpoint)
{
    assert(gateway_call_of(ex) == NULL); /* one call per exchange */
    struct gateway *g = ex->server->gateway;
    pthread_mutex_lock(&g->pool_mutex);
    struct gateway_call *call = g->pool;
    if (call != NULL) {
        g->pool = call->next_free;
        g->pool_count--;
    }
    pthread_mutex_unlock(&g->pool_mutex);
    if (call == NULL)
        call = malloc(sizeof *call);
    if (call == NULL)
        return NULL;
    memset(call, 0, offsetof(struct gateway_call, plan));
    memset(&call->stream, 0, sizeof *call - offsetof(struct gateway_call, stream));
    pthread_mutex_init(&call->mutex, NULL);
    call->references = 1; /* the exchange's */
    call->gateway = g;
    call->config = config;
    call->key = key;
    call->key_record = key_record;
    call->endpoint = endpoint;
    call->exchange = ex;
    call->upstream_result = GW_FORWARD_OK;
    buffer_init(&call->upstream_body, NULL, 0);
    buffer_init(&call->answer, NULL, 0);
    call->answer.capacity_max = GW_ANSWER_BYTES_MAX;
    buffer_init(&call->held, NULL, 0);
    call->plan.requirement_count = 0; /* the plan is not zeroed: a call never charged has none */
    call->plan.template_count = 0;
    gw_sse_init_for(&call->sse, endpoint);
    gw_sse_output_init(&call->output);
    ex->handler_state = call;
    ex->cleanup = exchange_cleanup;
    ex->http.on_gone = gateway_call_client_gone;
    return call;
}

static void settle(struct gateway_call *call);

/* ---- the list of calls in flight (for the client checks and quiesce) ---- */

static bool calls_link(struct gateway_call *call)
{
    struct gateway *g = call->gateway;
    pthread_mutex_lock(&g->calls_mutex);
    bool open = !g->quiescing;
    if (open) {
        call->linked = true;
        DLIST_PUSH_FRONT(g->calls, call, previous_active, next_active);
        g->call_count++;
    }
    pthread_mutex_unlock(&g->calls_mutex);
    return open;
}

static void calls_unlink(struct gateway_call *call)
{
    struct gateway *g = call->gateway;
    pthread_mutex_lock(&g->calls_mutex);
    assert(call->linked);
    call->linked = false;
    DLIST_REMOVE_NO_TAIL(g->calls, call, previous_active, next_active);
    assert(g->call_count > 0);
    g->call_count--;
    if (g->calls == NULL)
        pthread_cond_broadcast(&g->calls_idle);
    pthread_mutex_unlock(&g->calls_mutex);
}

/* ---- waking the exchange (call->mutex held; the caller wakes after) ----- */

/* The exchange waiting for the answer, now to be woken; NULL when it is not
 * waiting (a stream already has its head, or it was woken). */
static struct exchange *take_waiter(struct gateway_call *call)
{
    if (!call->waiting || call->woken)
        return NULL;
    call->woken = true;
    call->waiting = false;
    assert(call->exchange != NULL); /* a suspended exchange is never completed */
    return call->exchange;
}

/* The stream's pump has more to give (call->mutex held). */
static void wake_stream(struct gateway_call *call)
{
    if (call->streaming && call->exchange != NULL)
        http_wake(&call->exchange->http);
}

/* ---- the engine's callbacks (engine thread) ------------------------------ */

static bool is_event_stream(const char *content_type)
{
    static const char type[] = "text/event-stream";
    return strncasecmp(content_type, type, sizeof type - 1) == 0;
}

/* Grows the whole answer's block to exactly `capacity` bytes, the growth
 * taken from the answers' memory first: what the budget counts is what is
 * allocated. false when the memory has no room (answer_memory_full set) or
 * out of memory (the buffer failed). (call->mutex held.) */
static bool answer_capacity(struct gateway_call *call, size_t capacity)
{
    struct buffer *b = &call->answer;
    assert(capacity > b->capacity && capacity <= GW_ANSWER_BYTES_MAX);
    assert(call->answer_bytes_counted <= capacity);
    uint64_t more = capacity - call->answer_bytes_counted;
    if (!answer_bytes_take(call, more)) {
        call->answer_memory_full = true;
        return false;
    }
    b->capacity_max = capacity; /* buffer_grow stops there: exactly this */
    bool grown = buffer_grow(b, capacity - b->length);
    b->capacity_max = GW_ANSWER_BYTES_MAX;
    if (!grown)
        answer_bytes_give(call, more);
    return grown;
}

/* Room for `more` bytes of the whole answer: false when they would pass
 * GW_ANSWER_BYTES_MAX (answer_too_large set) or the answers' memory, or
 * out of memory. Without an announced length the block doubles as it
 * fills. (call->mutex held.) */
static bool answer_room(struct gateway_call *call, size_t more)
{
    struct buffer *b = &call->answer;
    if (more > GW_ANSWER_BYTES_MAX - b->length) {
        call->answer_too_large = true;
        return false;
    }
    size_t needed = b->length + more;
    if (needed <= b->capacity)
        return true;
    size_t capacity = b->capacity < 4096 ? 4096 : b->capacity;
    while (capacity < needed)
        capacity = capacity > GW_ANSWER_BYTES_MAX / 2 ? GW_ANSWER_BYTES_MAX : capacity * 2;
    return answer_capacity(call, capacity);
}

/* A whole answer whose length the head announces is read into one block of
 * that size, taken from the answers' memory before any of it is read:
 * growing by doubling would hold up to twice its bytes, and an answer that
 * cannot fit is refused before its body is read. An announced length past
 * GW_ANSWER_BYTES_MAX is refused the same way. (call->mutex held.) */
static void answer_presize(struct gateway_call *call, int64_t length)
{
    if (length > (int64_t)GW_ANSWER_BYTES_MAX)
        call->answer_too_large = true;
    else if (length > 0 && !answer_capacity(call, (size_t)length))
        call->answer.failed = false; /* out of memory changed nothing: it grows as it comes */
}

static void on_head(void *context, const struct gw_head *head)
{
    struct gateway_call *call = context;
    long status = head->status;
    const char *content_type = head->content_type;
    pthread_mutex_lock(&call->mutex);
    call->upstream_status = status;
    snprintf(call->upstream_content_type, sizeof call->upstream_content_type, "%s", content_type);
    snprintf(call->upstream_retry_after, sizeof call->upstream_retry_after, "%s",
             head->retry_after);
    snprintf(call->upstream_retry_after_ms, sizeof call->upstream_retry_after_ms, "%s",
             head->retry_after_ms);
    call->first_byte_ns = clock_monotonic_ns();
    snprintf(call->upstream_session_id, sizeof call->upstream_session_id, "%s",
             head->mcp_session_id != NULL ? head->mcp_session_id : "");
    if (call->endpoint == GW_ENDPOINT_MCP && status >= 200 && status < 300 &&
        call->upstream_session_id[0] != '\0')
        gateway_mcp_session_made(call, call->upstream_session_id);
    struct exchange *wake = NULL;
    if (call->stream && status == 200 && is_event_stream(content_type)) {
        call->mode = GATEWAY_MODE_STREAM;
        wake = take_waiter(call); /* the head goes out now; events follow */
    } else {
        call->mode = GATEWAY_MODE_BUFFER;
        answer_presize(call, head->content_length);
    }
    pthread_mutex_unlock(&call->mutex);
    if (wake != NULL)
        exchange_backend_done(wake);
}

/* A Responses id the call created, remembered for its key (call->mutex
 * held, or the transfer over). */
static void remember_response(struct gateway_call *call, const char *id, size_t length)
{
    if (!call->remember_response || call->response_remembered)
        return;
    call->response_remembered = true;
    (void)gw_owners_remember(call->gateway->owners, id, length, call->owner_digest);
}

/* An item id of a Responses answer, remembered for the call's key (the
 * same rules). */
static void remember_item(void *context, const char *id, size_t length)
{
    struct gateway_call *call = context;
    if (call->remember_response)
        (void)gw_owners_remember(call->gateway->items, id, length, call->owner_digest);
}

/* Adds an event's bytes to what the client gets (the answer, or the held
 * end), the provider key starred out: an event is whole here, so a key
 * the upstream cut across two reads is whole in it too. */
static void relay_event(struct gateway_call *call, struct buffer *to,
                        const struct gw_sse_event *event)
{
    size_t at = to->length;
    buffer_append(to, event->raw, event->raw_length);
    if (!to->failed)
        gw_secret_redact(to->data + at, to->length - at, call->upstream->api_key);
}

/* One event of the stream (call->mutex held). */
static int on_event(void *context, const struct gw_sse_event *event)
{
    struct gateway_call *call = context;
    gw_sse_output_add(&call->output, event); /* an event too large too: what came of it */
    call->event_too_large |= event->oversized;
    if (event->response_id != NULL)
        remember_response(call, event->response_id, event->response_id_length);
    if (event->item_id != NULL)
        remember_item(call, event->item_id, event->item_id_length);
    if (!event->complete)
        return 0; /* an unfinished tail: a client would drop it too */
    /* The end ([DONE], message_stop, response.completed, ...) and anything
     * after it wait until the lease is completed. */
    bool end =
        call->endpoint == GW_ENDPOINT_MCP ? gateway_mcp_event(call, event) : event->stream_end;
    if (end || call->held.length > 0) {
        relay_event(call, &call->held, event);
        return 0;
    }
    if (event->usage_only && !call->client_include_usage)
        return 0; /* asked for by the gateway, not by the client */
    relay_event(call, &call->answer, event);
    return 0;
}

static enum gw_data_verdict take_stream(struct gateway_call *call, const char *bytes, size_t length)
{
    if (call->answer.length - call->answer_sent > GW_STREAM_BUFFER_BYTES) {
        call->upstream_paused = true; /* the client reads slower than the upstream writes */
        return GW_DATA_PAUSE;
    }
    char error[GW_SSE_ERROR_SIZE];
    if (gw_sse_feed(&call->sse, bytes, length, on_event, call, error, sizeof error) != 0 ||
        call->answer.failed || call->held.failed) {
        snprintf(call->upstream_error, sizeof call->upstream_error, "stream: %s",
                 call->answer.failed || call->held.failed ? "out of memory" : error);
        /* The client learns that the stream broke, in its dialect, rather
         * than reading an end that looks like a short answer; after the
         * stream's own end nothing is added. */
        if (call->event_too_large && call->held.length == 0)
            gw_error_event(&call->answer, call->endpoint, "upstream_event_too_large",
                           "The upstream sent an event larger than the gateway takes (1 MiB); "
                           "the stream was cut there.");
        return GW_DATA_ABORT;
    }
    return GW_DATA_MORE;
}

/* A whole answer that will not be given (call->mutex held): its memory
 * goes back at once. */
static void answer_drop(struct gateway_call *call)
{
    buffer_free(&call->answer);
    buffer_init(&call->answer, NULL, 0);
    call->answer.capacity_max = GW_ANSWER_BYTES_MAX;
    answer_bytes_return(call);
}

static enum gw_data_verdict on_data(void *context, const char *bytes, size_t length)
{
    struct gateway_call *call = context;
    pthread_mutex_lock(&call->mutex);
    enum gw_data_verdict verdict = GW_DATA_MORE;
    if (call->client_gone) {
        verdict = GW_DATA_ABORT;
    } else if (call->mode == GATEWAY_MODE_STREAM) {
        verdict = take_stream(call, bytes, length);
        if (call->answer.length > call->answer_sent)
            wake_stream(call);
    } else if (call->answer_too_large || call->answer_memory_full || !answer_room(call, length)) {
        answer_drop(call); /* refused: none of it is kept */
        verdict = GW_DATA_ABORT;
    } else {
        buffer_append(&call->answer, bytes, length);
        if (call->answer.failed)
            verdict = GW_DATA_ABORT;
    }
    pthread_mutex_unlock(&call->mutex);
    return verdict;
}

void gateway_call_advance(struct gateway_call *call, enum gateway_call_state to)
{
    assert(to > call->state); /* forward only, each step once */
    assert(to == call->state + 1 || (call->state == GATEWAY_CALL_PLANNED &&
                                     to == GATEWAY_CALL_ANSWERED)); /* cut before it went */
    call->state = to;
}

static void on_done(void *context, enum gw_forward_result result, const char *error)
{
    struct gateway_call *call = context;
    pthread_mutex_lock(&call->mutex);
    call->transfer = NULL;
    gateway_call_advance(call, GATEWAY_CALL_ANSWERED);
    call->upstream_result = result;
    if (result != GW_FORWARD_OK && call->upstream_error[0] == '\0')
        snprintf(call->upstream_error, sizeof call->upstream_error, "%s", error);
    if (call->mode == GATEWAY_MODE_STREAM)
        gw_sse_finish(&call->sse, on_event, call);
    pthread_mutex_unlock(&call->mutex);
    settle(call);
    gateway_call_release(call); /* the transfer's reference */
}

static const struct gw_transfer_ops transfer_ops = {on_head, on_data, on_done};

/* ---- forwarding (the exchange's worker) ---------------------------------- */

static void forward_start(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    pthread_mutex_lock(&call->mutex);
    bool gone = call->client_gone;
    pthread_mutex_unlock(&call->mutex);
    /* Shutting down, no one to answer, or no room for a whole answer (a
     * stream's events are not held: it needs none): give it back. */
    bool full = !gone && !call->stream && answer_memory_full(call->gateway);
    if (gone || full || !calls_link(call)) {
        pthread_mutex_lock(&call->mutex);
        call->waiting = true;
        gateway_call_advance(call, GATEWAY_CALL_ANSWERED);
        call->upstream_result = GW_FORWARD_CANCELLED;
        call->memory_full_before = full;
        pthread_mutex_unlock(&call->mutex);
        settle(call); /* its end wakes the exchange: 503 */
        return;
    }
    const struct gw_upstream *upstream = call->upstream;
    char url[GW_BASE_URL_LENGTH_MAX + GW_UPSTREAM_PATH_LENGTH_MAX + 1];
    snprintf(url, sizeof url, "%s%s", upstream->base_url, call->upstream_path);
    struct gw_transfer_spec spec = {
        .url = url,
        .method = call->method,
        .api_key = upstream->api_key,
        .key_header = gw_dialect_for_api(upstream->api)->upstream_key,
        .header_count = call->header_count,
        .body = call->upstream_body.data,
        .body_length = call->upstream_body.length,
        .timeout_ms = upstream->timeout_seconds * 1000u,
        .connect_timeout_ms = upstream->connect_timeout_seconds * 1000u,
    };
    for (uint32_t i = 0; i < call->header_count; i++)
        spec.headers[i] = call->header_lines[i];
    gateway_call_retain(call); /* the transfer's */
    /* Held across the submit: a callback waits until `transfer` is set. */
    pthread_mutex_lock(&call->mutex);
    call->waiting = true;
    call->forwarded_ns = clock_monotonic_ns();
    gateway_call_advance(call, GATEWAY_CALL_FORWARDED);
    call->transfer = gw_forward_submit(call->gateway->engine, &spec, &transfer_ops, call);
    bool failed = call->transfer == NULL;
    if (failed) {
        gateway_call_advance(call, GATEWAY_CALL_ANSWERED);
        call->upstream_result = GW_FORWARD_FAILED;
        snprintf(call->upstream_error, sizeof call->upstream_error, "out of memory");
    }
    pthread_mutex_unlock(&call->mutex);
    if (failed) {
        settle(call); /* released: it never went out */
        gateway_call_release(call);
    }
}

/* Whether the answer was refused for memory: past its size bound or the
 * answers' memory while it came (the upstream answered it), or the call
 * held back before it went because the answers' memory was full
 * (call->mutex held). */
static bool refused_for_memory(const struct gateway_call *call)
{
    return call->memory_full_before || call->answer_too_large || call->answer_memory_full;
}

/* The answer to a call refused_for_memory. charged: the upstream's 2xx
 * was refused and the call charged its reservation, so an SDK's automatic
 * retry would be charged again (x-should-retry: false); else (not sent, or
 * the upstream's refusal was too large) nothing was charged. */
static int reply_refused_for_memory(struct exchange *ex, const struct gateway_call *call,
                                    bool charged)
{
    unsigned long long most = (unsigned long long)call->gateway->answer_bytes_max;
    if (call->memory_full_before)
        return gateway_reply_error(ex, 503, "server_error", "answer_memory_full", 1000,
                                   "The gateway holds as many bytes of answers not yet taken by "
                                   "their clients as it may (--max-gateway-answer-bytes %llu); "
                                   "the call was not sent: retry shortly.",
                                   most);
    if (call->answer_too_large && charged)
        return gateway_reply_error_no_retry(
            ex, 502, "server_error", "upstream_answer_too_large",
            "The upstream's answer is larger than %u bytes, the most the gateway takes; the "
            "upstream answered it, so the call was charged its reservation. Ask for less "
            "(fewer inputs or choices) rather than retrying.",
            (unsigned)GW_ANSWER_BYTES_MAX);
    if (call->answer_too_large)
        return gateway_reply_error(ex, 502, "server_error", "upstream_answer_too_large", 0,
                                   "The upstream's answer is larger than %u bytes, the most the "
                                   "gateway takes; nothing was charged.",
                                   (unsigned)GW_ANSWER_BYTES_MAX);
    if (charged)
        return gateway_reply_error_no_retry(
            ex, 503, "server_error", "answer_memory_full",
            "This answer did not fit in the memory the gateway gives answers not yet taken by "
            "their clients (--max-gateway-answer-bytes %llu); the upstream answered it, so the "
            "call was charged its reservation.",
            most);
    return gateway_reply_error(ex, 503, "server_error", "answer_memory_full", 1000,
                               "The upstream's answer did not fit in the memory the gateway "
                               "gives answers not yet taken by their clients "
                               "(--max-gateway-answer-bytes %llu); nothing was charged: retry "
                               "shortly.",
                               most);
}

/* The answer is in (or a stream's head): give it, or say why not. */
static int after_answer(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    pthread_mutex_lock(&call->mutex);
    enum gateway_call_mode mode = call->mode;
    enum gw_forward_result result = call->upstream_result;
    long status = call->upstream_status;
    bool at_reservation = call->at_reservation;
    bool refused = refused_for_memory(call);
    char reason[GW_FORWARD_ERROR_SIZE];
    snprintf(reason, sizeof reason, "%s", call->upstream_error);
    pthread_mutex_unlock(&call->mutex);
    if (mode == GATEWAY_MODE_STREAM)
        return gateway_reply_stream(ex, call);
    if (refused)
        return reply_refused_for_memory(ex, call, at_reservation);
    /* A redirect is not followed (docs/gateway.md, "Forwarding"), and
     * passed on without its Location it tells a client nothing. */
    if (mode == GATEWAY_MODE_BUFFER && result == GW_FORWARD_OK && status >= 300 && status < 400)
        return gateway_reply_error(
            ex, 502, "server_error", "upstream_error", 0,
            "The upstream answered %ld, a redirect, which the gateway does not "
            "follow: check the upstream's base_url.",
            status);
    if (mode == GATEWAY_MODE_BUFFER && result == GW_FORWARD_OK &&
        gateway_mcp_reply_unanswered(ex, call))
        return 0;
    if (mode == GATEWAY_MODE_BUFFER && result == GW_FORWARD_OK)
        return gateway_reply_answer(ex, call);
    if (result == GW_FORWARD_INVALID) { /* the reason names no address: it may go out */
        log_write(LOG_WARN, "gateway: the upstream's answer was refused", "lease", call->lease_id,
                  "reason", reason, NULL);
        if (at_reservation)
            return gateway_reply_error_no_retry(
                ex, 502, "server_error", "upstream_error",
                "The upstream's answer cannot be used: %s. The upstream answered, so the call "
                "was charged its reservation.",
                reason);
        return gateway_reply_error(ex, 502, "server_error", "upstream_error", 0,
                                   "The upstream's answer cannot be used: %s.", reason);
    }
    if (result == GW_FORWARD_TIMEOUT)
        return gateway_reply_error(ex, 504, "server_error", "upstream_timeout", 0,
                                   "The upstream did not answer in time.");
    if (result == GW_FORWARD_CANCELLED)
        return gateway_reply_error(ex, 503, "server_error", "cancelled", 1000,
                                   "The call was cancelled (shutting down, or the client left).");
    /* The detail (libcurl's text names the upstream's address) is for the
     * log; the client learns only that the upstream failed. */
    log_write(LOG_WARN, "gateway: the upstream failed before answering", "lease", call->lease_id,
              "reason", reason, NULL);
    if (result == GW_FORWARD_CONNECT)
        return gateway_reply_error(ex, 502, "server_error", "upstream_error", 0,
                                   "The upstream could not be reached.");
    return gateway_reply_error(ex, 502, "server_error", "upstream_error", 0,
                               "The upstream failed before answering.");
}

int gateway_call_forward(struct exchange *ex, struct gateway_call *call)
{
    assert(gateway_call_of(ex) == call);
    return exchange_call_backend(ex, forward_start, after_answer);
}

/* ---- settling the lease -------------------------------------------------- */

/* What a whole answer used: its usage, else its counted text (the input
 * estimate with it; gw_answer_tokens). A Responses answer's id is
 * remembered on the way. */
static void answer_used(struct gateway_call *call)
{
    char *copy = malloc(call->answer.length + 1);
    if (copy == NULL) { /* it cannot be read: the most it may have cost */
        call->at_reservation = call->charged;
        call->used = call->reserved;
        return;
    }
    memcpy(copy, call->answer.data, call->answer.length);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[GW_USAGE_ERROR_SIZE];
    if (jdoc_parse_nested(copy, call->answer.length, GW_JSON_DEPTH_MAX, &arena, &root, error,
                          sizeof error) != 0)
        root = NULL;
    const char *id;
    size_t id_length;
    if (root != NULL && gw_surface_of(call->endpoint)->stores_answer) {
        if (gw_answer_response_id(root, &id, &id_length) == 0)
            remember_response(call, id, id_length);
        gw_answer_item_ids(root, remember_item, call);
    }
    if (call->charged) /* else forwarded only: nothing to measure */
        call->used_from_usage =
            gw_answer_tokens(call->endpoint, root, call->answer.data, call->answer.length,
                             call->estimate.input_tokens, &call->used);
    arena_free(&arena);
    free(copy);
}

/* An answer the upstream gave (2xx) that cannot be read: cut at a bound,
 * or in an encoding that was not decoded. */
static bool answer_unreadable(const struct gateway_call *call)
{
    return call->answer_too_large || call->answer_memory_full ||
           call->upstream_result == GW_FORWARD_INVALID;
}

/* What the call used, from what came back (call->mutex held). */
static void measure(struct gateway_call *call)
{
    if (call->mode == GATEWAY_MODE_STREAM) {
        call->used_from_usage = gw_sse_stream_tokens(&call->sse, &call->output,
                                                     call->estimate.input_tokens, &call->used) &&
                                gw_sse_ended(&call->sse);
    } else if (call->mode == GATEWAY_MODE_BUFFER && answer_unreadable(call)) {
        call->at_reservation = call->charged; /* the most it may have cost */
        call->used = call->reserved;
    } else if (call->mode == GATEWAY_MODE_BUFFER) {
        if (call->charged || call->remember_response) /* else nothing to read in it */
            answer_used(call);
    } else { /* cut before the answer (call_was_made): the input was sent */
        call->used = (struct gw_tokens){.input = call->estimate.input_tokens};
    }
    if (!call->charged ||
        gw_cost_usd_micros(call->model, &call->used, &call->cost_usd_micros) != GW_COST_OK)
        call->cost_usd_micros = 0;
}

/* An observed model learns the output of a call that ended properly (a
 * cut call's output says nothing of how long its answers run). */
static void observe(struct gateway_call *call)
{
    if (call->model->output_reservation != GW_OUTPUT_RESERVATION_OBSERVED || !call->used_from_usage)
        return;
    (void)gw_observed_record(call->gateway->observed, call->model->name, call->key->caller,
                             call->used.output);
}

static void settled(void *context)
{
    struct gateway_call *call = context;
    struct gateway_stats_delta delta = {.forwarded = true, .latency_us = -1};
    pthread_mutex_lock(&call->mutex);
    gateway_call_advance(call, GATEWAY_CALL_SETTLED);
    delta.upstream_error = call->upstream_result != GW_FORWARD_OK || call->upstream_status >= 300;
    if (call->first_byte_ns > 0)
        delta.latency_us = (call->first_byte_ns - call->forwarded_ns) / 1000;
    if (call->complete.lease_id != NULL) {
        delta.input_tokens = call->used.input;
        delta.output_tokens = call->used.output;
        delta.cost_usd_micros = call->cost_usd_micros;
    }
    struct exchange *wake = NULL;
    if (call->mode == GATEWAY_MODE_STREAM) {
        gateway_mcp_stream_unanswered(call); /* a tools/call's stream that never answered it */
        buffer_append(&call->answer, call->held.data, call->held.length); /* the end */
        call->stream_ended = true;
        wake_stream(call);
    } else {
        wake = take_waiter(call);
    }
    pthread_mutex_unlock(&call->mutex);
    if (call->charged && call->model != NULL) {
        gateway_stats_add(&call->gateway->stats, call->model->name, call->key->caller,
                          call->key->team, &delta);
        observe(call);
    }
    if (call->mcp.tool_call)
        gateway_mcp_note_settled(call);
    if (wake != NULL)
        exchange_backend_done(wake);
    if (call->linked)
        calls_unlink(call);
    gateway_call_release(call); /* the settle's reference */
}

/* Does the call count as made? A stream that started, a whole answer (also
 * one refused for its size or the answers' memory, or in an encoding not
 * decoded: the upstream answered it), a call the gateway cut once it was
 * sent (its client left, or the server is shutting down: the upstream has
 * the input either way); not one the upstream refused or never answered,
 * nor one never sent. */
static bool call_was_made(const struct gateway_call *call)
{
    if (call->mode == GATEWAY_MODE_STREAM)
        return true;
    if (call->mode == GATEWAY_MODE_BUFFER)
        return call->upstream_status >= 200 && call->upstream_status < 300;
    return call->upstream_result == GW_FORWARD_CANCELLED && call->forwarded_ns > 0;
}

/* Completes or releases the lease, once; `settled` follows (maybe at once). */
static void settle(struct gateway_call *call)
{
    pthread_mutex_lock(&call->mutex);
    gateway_call_advance(call, GATEWAY_CALL_SETTLING);
    gateway_call_retain(call); /* the settle's */
    bool mcp = call->endpoint == GW_ENDPOINT_MCP;
    bool made = mcp ? gateway_mcp_charged(call) : call_was_made(call);
    if (made && mcp)
        call->at_reservation = true; /* a tool call costs its price: what it reserved */
    else if (made)
        measure(call);
    pthread_mutex_unlock(&call->mutex);
    struct wait *wait = call->gateway->server->wait;
    if (call->plan.requirement_count == 0) { /* nothing was reserved */
        settled(call);
        return;
    }
    if (!made) {
        call->release =
            (struct release_request){call->reserve.lease_id, call->reserve.lease_id_length};
        wait_release(wait, &call->release, &call->release_result, 1, settled, call);
        return;
    }
    uint32_t count = 0; /* none: every key settles at its reserved amount */
    char error[GW_PLAN_ERROR_SIZE];
    if (!call->at_reservation && gw_plan_complete(&call->plan, &call->used, call->actuals, &count,
                                                  error, sizeof error) != 0) {
        log_write(LOG_WARN, "gateway: settling at the reserved amounts", "lease", call->lease_id,
                  "reason", error, NULL);
        count = 0; /* every key settles at its reserved amount */
    }
    call->complete = (struct complete_request){call->reserve.lease_id,
                                               call->reserve.lease_id_length, call->actuals, count};
    wait_complete(wait, &call->complete, &call->complete_result, 1, settled, call);
}

/* ---- the client ---------------------------------------------------------- */

void gateway_call_client_gone(struct http_exchange *hx)
{
    struct exchange *ex = (struct exchange *)hx;
    struct gateway_call *call = gateway_call_of(ex);
    if (call == NULL)
        return;
    pthread_mutex_lock(&call->mutex);
    call->client_gone = true;
    if (call->transfer != NULL)
        gw_forward_cancel(call->gateway->engine, call->transfer);
    bool tell_server = call->transfer != NULL && call->mcp.tool_call;
    bool waiting = call->reserving && call->state == GATEWAY_CALL_PLANNED;
    bool pumping = call->pumping_answer;
    pthread_mutex_unlock(&call->mutex);
    if (pumping) /* the rest of a whole answer goes nowhere: let it end */
        http_wake(hx);
    if (tell_server)
        gateway_mcp_cancel_upstream(call);
    /* A reserve still waiting leaves the queue; one answered meanwhile is a
     * no-op here, and its forward finds the client gone. */
    if (waiting)
        wait_cancel(call->gateway->server->wait, &call->ticket);
}

static void unforwarded_released(void *context)
{
    struct gateway_call *call = context;
    calls_unlink(call);
    gateway_call_release(call); /* the release's reference */
}

/* The reservation of a call that will never be forwarded goes back at
 * once. In the calls list while the release runs, so that shutdown waits
 * for it; once shutdown has begun, the holds are left to expire. */
static void release_unforwarded(struct gateway_call *call)
{
    if (!calls_link(call))
        return;
    gateway_call_retain(call); /* the release's */
    call->release = (struct release_request){call->reserve.lease_id, call->reserve.lease_id_length};
    wait_release(call->gateway->server->wait, &call->release, &call->release_result, 1,
                 unforwarded_released, call);
}

void gateway_call_exchange_gone(struct gateway_call *call)
{
    pthread_mutex_lock(&call->mutex);
    assert(!call->waiting || call->woken); /* an exchange is freed only once answered */
    call->exchange = NULL;
    answer_bytes_return(call); /* the client has taken its answer, or left */
    if (call->transfer != NULL) {
        call->client_gone = true;
        gw_forward_cancel(call->gateway->engine, call->transfer);
    }
    /* An allowed reserve (this call's own, not a replay of another's) that
     * was never forwarded: a safety net, since every reserve's answer
     * forwards or releases. */
    const struct reserve_result *r = &call->reserve_result;
    bool unforwarded =
        call->state == GATEWAY_CALL_PLANNED && r->error == BACKEND_OK && r->allowed && !r->replayed;
    pthread_mutex_unlock(&call->mutex);
    if (unforwarded)
        release_unforwarded(call);
}
