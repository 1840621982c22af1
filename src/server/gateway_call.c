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
#include "gateway/gw_answer.h"
#include "gateway/gw_cost.h"
#include "gateway/gw_endpoint.h"
#include "gateway/gw_secret.h"
#include "server.h"
#include "util/log.h"
#include "util/queue.h"

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
    free(call->complete_result.warnings);
    buffer_free(&call->upstream_body);
    buffer_free(&call->answer);
    buffer_free(&call->held);
    gw_sse_free(&call->sse);
    gw_config_release(call->config);
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
    struct gateway_call *call = ex->gateway_call;
    if (call == NULL)
        return;
    ex->gateway_call = NULL;
    gateway_call_exchange_gone(call);
    gateway_call_release(call);
}

struct gateway_call *gateway_call_new(struct exchange *ex, struct gw_config *config,
                                      const struct gw_key *key, enum gw_endpoint endpoint)
{
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
    ex->gateway_call = call;
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
    struct exchange *wake = NULL;
    if (call->stream && status == 200 && is_event_stream(content_type)) {
        call->mode = GATEWAY_MODE_STREAM;
        wake = take_waiter(call); /* the head goes out now; events follow */
    } else {
        call->mode = GATEWAY_MODE_BUFFER;
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
    gw_sse_output_add(&call->output, event);
    if (event->response_id != NULL)
        remember_response(call, event->response_id, event->response_id_length);
    if (event->item_id != NULL)
        remember_item(call, event->item_id, event->item_id_length);
    if (!event->complete)
        return 0; /* an unfinished tail: a client would drop it too */
    /* The end ([DONE], message_stop, response.completed, ...) and anything
     * after it wait until the lease is completed. */
    if (event->stream_end || call->held.length > 0) {
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
        return GW_DATA_ABORT;
    }
    return GW_DATA_MORE;
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
    } else if (length > GW_ANSWER_BYTES_MAX - call->answer.length) {
        call->answer_too_large = true;
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
    struct gateway_call *call = ex->gateway_call;
    pthread_mutex_lock(&call->mutex);
    bool gone = call->client_gone;
    pthread_mutex_unlock(&call->mutex);
    if (gone || !calls_link(call)) { /* shutting down, or no one to answer: give it back */
        pthread_mutex_lock(&call->mutex);
        call->waiting = true;
        gateway_call_advance(call, GATEWAY_CALL_ANSWERED);
        call->upstream_result = GW_FORWARD_CANCELLED;
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
        .key_header = upstream->api == GW_API_ANTHROPIC ? GW_KEY_X_API_KEY : GW_KEY_BEARER,
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

/* The answer is in (or a stream's head): give it, or say why not. */
static int after_answer(struct exchange *ex)
{
    struct gateway_call *call = ex->gateway_call;
    pthread_mutex_lock(&call->mutex);
    enum gateway_call_mode mode = call->mode;
    bool too_large = call->answer_too_large;
    enum gw_forward_result result = call->upstream_result;
    long status = call->upstream_status;
    char reason[GW_FORWARD_ERROR_SIZE];
    snprintf(reason, sizeof reason, "%s", call->upstream_error);
    pthread_mutex_unlock(&call->mutex);
    if (mode == GATEWAY_MODE_STREAM)
        return gateway_reply_stream(ex, call);
    if (too_large)
        return gateway_reply_error(ex, 502, "server_error", "upstream_answer_too_large", 0,
                                   "The upstream's answer is larger than %u bytes.",
                                   (unsigned)GW_ANSWER_BYTES_MAX);
    /* A redirect is not followed (docs/gateway.md, "Forwarding"), and
     * passed on without its Location it tells a client nothing. */
    if (mode == GATEWAY_MODE_BUFFER && result == GW_FORWARD_OK && status >= 300 && status < 400)
        return gateway_reply_error(
            ex, 502, "server_error", "upstream_error", 0,
            "The upstream answered %ld, a redirect, which the gateway does not "
            "follow: check the upstream's base_url.",
            status);
    if (mode == GATEWAY_MODE_BUFFER && result == GW_FORWARD_OK)
        return gateway_reply_answer(ex, call);
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
    assert(ex->gateway_call == call);
    return exchange_call_backend(ex, forward_start, after_answer);
}

/* ---- settling the lease -------------------------------------------------- */

/* What a whole answer used: its usage, else its counted text (the input
 * estimate with it). A Responses answer's id is remembered on the way. */
static void answer_used(struct gateway_call *call)
{
    call->used = (struct gw_tokens){.input = call->estimate.input_tokens};
    char *copy = malloc(call->answer.length + 1);
    if (copy == NULL)
        return;
    memcpy(copy, call->answer.data, call->answer.length);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[GW_USAGE_ERROR_SIZE];
    struct gw_usage usage = {0};
    if (jdoc_parse_nested(copy, call->answer.length, GW_JSON_DEPTH_MAX, &arena, &root, error,
                          sizeof error) == 0) {
        const char *id;
        size_t id_length;
        if (call->endpoint == GW_ENDPOINT_RESPONSES &&
            gw_answer_response_id(root, &id, &id_length) == 0)
            remember_response(call, id, id_length);
        if (call->endpoint == GW_ENDPOINT_RESPONSES)
            gw_answer_item_ids(root, remember_item, call);
        if (!call->charged) {
            /* forwarded only: nothing to measure */
        } else if (gw_usage_read_answer(call->endpoint, root, &usage, error, sizeof error) == 0 &&
                   usage.present) {
            call->used = gw_usage_tokens(&usage);
            call->used_from_usage = true;
        } else {
            call->used.output = gw_answer_output_tokens(call->endpoint, root);
        }
    }
    arena_free(&arena);
    free(copy);
}

/* What the call used, from what came back (call->mutex held). */
static void measure(struct gateway_call *call)
{
    if (call->mode == GATEWAY_MODE_STREAM) {
        call->used_from_usage = gw_sse_stream_tokens(&call->sse, &call->output,
                                                     call->estimate.input_tokens, &call->used) &&
                                gw_sse_ended(&call->sse);
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
        buffer_append(&call->answer, call->held.data, call->held.length); /* the end */
        call->stream_ended = true;
        wake_stream(call);
    } else {
        wake = take_waiter(call);
    }
    pthread_mutex_unlock(&call->mutex);
    if (call->charged) {
        gateway_stats_add(&call->gateway->stats, call->model->name, call->key->caller,
                          call->key->team, &delta);
        observe(call);
    }
    if (wake != NULL)
        exchange_backend_done(wake);
    if (call->linked)
        calls_unlink(call);
    gateway_call_release(call); /* the settle's reference */
}

/* Does the call count as made? A stream that started, a whole answer, a
 * call the gateway cut once it was sent (its client left, or the server is
 * shutting down: the upstream has the input either way); not one the
 * upstream refused or never answered, nor one never sent. */
static bool call_was_made(const struct gateway_call *call)
{
    if (call->mode == GATEWAY_MODE_STREAM)
        return true;
    if (call->mode == GATEWAY_MODE_BUFFER)
        return call->upstream_status >= 200 && call->upstream_status < 300 &&
               !call->answer_too_large;
    return call->upstream_result == GW_FORWARD_CANCELLED && call->forwarded_ns > 0;
}

/* Completes or releases the lease, once; `settled` follows (maybe at once). */
static void settle(struct gateway_call *call)
{
    pthread_mutex_lock(&call->mutex);
    gateway_call_advance(call, GATEWAY_CALL_SETTLING);
    gateway_call_retain(call); /* the settle's */
    bool made = call_was_made(call);
    if (made)
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
    uint32_t count = 0;
    char error[GW_PLAN_ERROR_SIZE];
    if (gw_plan_complete(&call->plan, &call->used, call->actuals, &count, error, sizeof error) !=
        0) {
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
    struct gateway_call *call = ex->gateway_call;
    if (call == NULL)
        return;
    pthread_mutex_lock(&call->mutex);
    call->client_gone = true;
    if (call->transfer != NULL)
        gw_forward_cancel(call->gateway->engine, call->transfer);
    bool waiting = call->reserving && call->state == GATEWAY_CALL_PLANNED;
    pthread_mutex_unlock(&call->mutex);
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
