/* The server on the HTTP layer (src/http): the exchange pool, routing and
 * the checks a request's head allows (route, method, token), the answers
 * in the route's shape, and the hand-off to the asynchronous backend (the
 * exchange waits, and done wakes it on its worker). */
#include "exchange.h"
#include "services.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/decode.h"
#include "wire/encode.h"
#include "gateway/gw_error.h"
#include "gateway/gw_dialect.h"
#include "util/log.h"
#include "wire/wire_text.h"

static void log_answer(struct exchange *ex, unsigned status, const char *body, size_t length)
{
    enum log_level level = status >= 500 ? LOG_ERROR : LOG_DEBUG;
    if (!log_enabled(level))
        return;
    char status_text[8], body_text[256];
    snprintf(status_text, sizeof status_text, "%u", status);
    snprintf(body_text, sizeof body_text, "%.*s", (int)(length < 255 ? length : 255),
             body != NULL ? body : "");
    log_write(level, status >= 500 ? "request failed" : "request", "route", ex->route->name,
              "status", status_text, "answer", body_text, NULL);
}

/* ---- answers ------------------------------------------------------------- */

int exchange_answer_raw(struct exchange *ex, unsigned status, const struct http_header *headers,
                        size_t count, const char *body, size_t length)
{
    /* One answer per exchange: every path that answers returns at once. */
    assert(!exchange_answered(ex));
    log_answer(ex, status, body, length);
    http_answer(&ex->http, status, headers, count, body, length);
    return 0;
}

/* on_wake of a paced answer: its pump. */
static void pump_wake(struct http_exchange *hx)
{
    struct exchange *ex = (struct exchange *)hx;
    ex->pump(ex);
}

int exchange_answer_begin(struct exchange *ex, unsigned status, const struct http_header *headers,
                          size_t count, const char *body, size_t length,
                          void (*pump)(struct exchange *exchange))
{
    assert(!exchange_answered(ex));
    log_answer(ex, status, body, length);
    http_answer_begin(&ex->http, status, headers, count, length);
    ex->pump = pump;
    ex->http.on_wake = pump_wake;
    pump(ex);
    return 0;
}

int exchange_stream_begin(struct exchange *ex, unsigned status, const struct http_header *headers,
                          size_t count, void (*pump)(struct exchange *exchange))
{
    assert(!exchange_answered(ex));
    http_stream_begin(&ex->http, status, headers, count);
    ex->pump = pump;
    ex->http.on_wake = pump_wake;
    pump(ex);
    return 0;
}

bool exchange_streaming(const struct exchange *ex)
{
    return ex->http.streaming;
}

size_t exchange_stream_room(const struct exchange *ex)
{
    size_t pending = http_stream_pending(&ex->http);
    return pending < HTTP_STREAM_HIGH_WATER ? HTTP_STREAM_HIGH_WATER - pending : 0;
}

void exchange_stream_write(struct exchange *ex, const char *bytes, size_t length)
{
    http_stream_write(&ex->http, bytes, length);
}

void exchange_stream_end(struct exchange *ex)
{
    http_stream_end(&ex->http);
}

/* Whether a route's answer is JSON (else Prometheus text). */
static bool answer_is_json(const struct exchange *ex, unsigned status)
{
    return (ex->route->flags & ROUTE_TEXT) == 0 || status != 200;
}

/* The gateway's routes answer in an SDK's shape, and say which answers a
 * retry cannot change (gw_should_not_retry). */
static bool gateway_route(const struct route *route)
{
    return route->gateway != NULL;
}

/* The headers of a route's answer besides the transport's. Values are
 * static text or point at the caller's seconds and allow. */
static size_t route_headers(const struct exchange *ex, unsigned status, int64_t retry_after_ms,
                            char seconds[24], char allow[64],
                            struct http_header out[EXCHANGE_HEADERS_MAX])
{
    size_t n = 0;
    out[n++] = (struct http_header){
        "Content-Type", answer_is_json(ex, status) ? "application/json"
                                                   : "text/plain; version=0.0.4; charset=utf-8"};
    if (retry_after_ms > 0) {
        *buffer_put_i64(seconds, (retry_after_ms + 999) / 1000) = '\0';
        out[n++] = (struct http_header){"Retry-After", seconds};
    }
    if (status == 405) {
        route_allow(ex->route, allow, 64);
        out[n++] = (struct http_header){"Allow", allow};
    }
    if (status == 401)
        out[n++] = (struct http_header){"WWW-Authenticate", "Bearer"};
    if (gateway_route(ex->route) && gw_should_not_retry(status, retry_after_ms))
        out[n++] = (struct http_header){GW_SHOULD_RETRY_HEADER, "false"};
    if ((ex->route->flags & ROUTE_NO_STORE) != 0) {
        out[n++] = (struct http_header){"Cache-Control", "no-store"};
        out[n++] = (struct http_header){"X-Content-Type-Options", "nosniff"};
    }
    assert(n <= EXCHANGE_HEADERS_MAX);
    return n;
}

int exchange_answer(struct exchange *ex, unsigned status, struct buffer *body,
                    int64_t retry_after_ms)
{
    return exchange_answer_with(ex, status, body, retry_after_ms, NULL, NULL);
}

int exchange_answer_with(struct exchange *ex, unsigned status, struct buffer *body,
                         int64_t retry_after_ms, const char *name, const char *value)
{
    assert(status >= 200);
    assert(status <= 599);
    assert(retry_after_ms >= 0);
    assert(body->length <= body->capacity);
    char fallback[64];
    struct buffer spare;
    /* A JSON answer is one line, ended as a line is (curl prints answers
     * one after another, a shell's prompt comes after it). */
    if (answer_is_json(ex, status))
        buffer_append_char(body, '\n');
    if (body->failed) { /* out of memory while writing the answer */
        buffer_free(body);
        buffer_init(&spare, fallback, sizeof fallback);
        encode_error(&spare, "out_of_memory", (ex->route->flags & ROUTE_ERROR_HAS_OK) != 0);
        buffer_append_char(&spare, '\n');
        assert(!spare.failed); /* the fallback holds it */
        body = &spare;
        status = 503;
    }
    char seconds[24], allow[64];
    struct http_header headers[EXCHANGE_HEADERS_MAX];
    size_t count = route_headers(ex, status, retry_after_ms, seconds, allow, headers);
    if (name != NULL) {
        assert(count < EXCHANGE_HEADERS_MAX);
        headers[count++] = (struct http_header){name, value};
    }
    exchange_answer_raw(ex, status, headers, count, body->data, body->length);
    buffer_free(body);
    return 0;
}

void exchange_reply_buffer(struct exchange *ex, struct buffer *buffer)
{
    buffer_init(buffer, ex->reply_inline, sizeof ex->reply_inline);
    buffer->stable = true;
}

int exchange_error(struct exchange *ex, unsigned status, const char *error)
{
    struct buffer b;
    exchange_reply_buffer(ex, &b);
    if (ex->route->gateway != NULL) /* in the shape of the route's dialect */
        ex->route->gateway->dialect->plain_error(&b, status, error, NULL);
    else
        encode_error(&b, error, (ex->route->flags & ROUTE_ERROR_HAS_OK) != 0);
    return exchange_answer(ex, status, &b, 0);
}

/* ---- the request --------------------------------------------------------- */

const char *exchange_header(struct exchange *ex, const char *name)
{
    size_t length;
    const char *value = http_field(&ex->http, name, &length);
    if (value == NULL)
        return NULL;
    /* The head is the exchange's copy, parsed already: the byte after a
     * value (a blank or the CR) may become its end. */
    ((char *)value)[length] = '\0';
    return value;
}

int exchange_query(struct exchange *ex, const char *name, char *out, size_t out_size)
{
    size_t length;
    const char *query = http_query(&ex->http, &length);
    size_t name_length = strlen(name);
    const char *end = query + length;
    for (const char *at = query; at < end;) {
        const char *amp = memchr(at, '&', (size_t)(end - at));
        const char *stop = amp != NULL ? amp : end;
        const char *equals = memchr(at, '=', (size_t)(stop - at));
        const char *key_end = equals != NULL ? equals : stop;
        if ((size_t)(key_end - at) == name_length && memcmp(at, name, name_length) == 0) {
            const char *value = equals != NULL ? equals + 1 : stop;
            char raw[4096];
            size_t raw_length = (size_t)(stop - value);
            size_t decoded;
            if (raw_length >= sizeof raw)
                raw_length = sizeof raw - 1; /* too long: refused below as such */
            memcpy(raw, value, raw_length);
            raw[raw_length] = '\0';
            if ((size_t)(stop - value) >= sizeof raw ||
                percent_decode(raw, out, out_size, &decoded) != 0) {
                char error[128];
                snprintf(error, sizeof error, "%s: invalid percent-encoding or too long", name);
                exchange_error(ex, 400, error);
                return -1;
            }
            return 1;
        }
        at = stop + 1;
    }
    return 0;
}

int exchange_query_i64(struct exchange *ex, const char *name, int64_t min, int64_t max,
                       int64_t *out)
{
    char text[32];
    int found = exchange_query(ex, name, text, sizeof text);
    if (found <= 0)
        return found;
    if (decode_i64(text, out) != 0 || *out < min || *out > max) {
        char error[128];
        snprintf(error, sizeof error, "%s: must be an integer %" PRId64 "..%" PRId64, name, min,
                 max);
        exchange_error(ex, 400, error);
        return -1;
    }
    return 1;
}

int exchange_path_key(struct exchange *ex, char *key, size_t key_size)
{
    assert(ex->key_encoded != NULL); /* item routes always match a {key} */
    assert(key_size > LIMIT_KEY_LENGTH_MAX);
    size_t length = 0;
    int decoded = percent_decode(ex->key_encoded, key, key_size, &length);
    if (decoded == -1) {
        exchange_error(ex, 400, WIRE_KEY_BAD_ESCAPE);
        return -1;
    }
    if (decoded != 0 || !limit_key_valid(key, length)) {
        exchange_error(ex, 400, WIRE_KEY_INVALID);
        return -1;
    }
    return 0;
}

int exchange_unknown_key(struct exchange *ex, const char *key)
{
    char error[64 + LIMIT_KEY_LENGTH_MAX];
    snprintf(error, sizeof error, "%s%s", encode_backend_error_text(BACKEND_UNKNOWN_LIMIT_KEY),
             key);
    return exchange_error(ex, 404, error);
}

const struct jdoc_value *exchange_parse_body(struct exchange *ex)
{
    char error[DECODE_ERROR_SIZE];
    /* The transport's copy of the body is the exchange's to parse in place. */
    if (decode_parse(ex->body, ex->body_length, &ex->arena, &ex->document, error, sizeof error) !=
        0) {
        exchange_error(ex, 400, error);
        return NULL;
    }
    return ex->document;
}

/* ---- the backend --------------------------------------------------------- */

/* Counts a backend call in, unless shutdown has closed the backend door. */
static bool backend_enter(struct server *server)
{
    __atomic_add_fetch(&server->backend_calls, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&server->closing, __ATOMIC_SEQ_CST)) {
        __atomic_sub_fetch(&server->backend_calls, 1, __ATOMIC_SEQ_CST);
        return false;
    }
    return true;
}

void exchange_backend_done(void *context)
{
    struct exchange *ex = context;
    /* Read before publishing DONE: once it is published the worker may
     * answer and free the exchange. */
    struct server *server = ex->server;
    int previous = __atomic_exchange_n(&ex->phase, PHASE_DONE, __ATOMIC_SEQ_CST);
    /* done runs once per call, and only after the call was made. */
    assert(previous != PHASE_RECEIVING);
    assert(previous != PHASE_DONE);
    if (previous == PHASE_SUSPENDED)
        http_wake(&ex->http); /* its worker answers it */
    /* Last: shutdown stops the server only after every call has left. */
    int64_t calls = __atomic_sub_fetch(&server->backend_calls, 1, __ATOMIC_SEQ_CST);
    assert(calls >= 0);
}

/* on_wake of an exchange waiting for its backend call. */
static void backend_woken(struct http_exchange *hx)
{
    struct exchange *ex = (struct exchange *)hx;
    assert(__atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) == PHASE_DONE);
    ex->reply(ex);
}

int exchange_call_backend(struct exchange *ex, void (*call)(struct exchange *), exchange_fn reply)
{
    assert(call != NULL);
    assert(reply != NULL);
    /* Made before any answer: the first once the body is in, or the next
     * one from the reply of the one before (a gateway call reserves, then
     * forwards, then settles). */
    assert(!exchange_answered(ex));
    int phase = __atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST);
    assert(phase == PHASE_RECEIVING || phase == PHASE_DONE);
    if (!backend_enter(ex->server))
        return exchange_error(ex, 503, WIRE_SHUTTING_DOWN);
    ex->reply = reply;
    ex->called = true;
    ex->http.on_wake = backend_woken;
    __atomic_store_n(&ex->phase, PHASE_WAITING, __ATOMIC_SEQ_CST);
    call(ex);
    /* A synchronous backend has answered on this call; else publish
     * SUSPENDED, and done wakes the exchange. If done ran in between, the
     * exchange below fails and this thread answers. */
    int expected = PHASE_WAITING;
    if (__atomic_compare_exchange_n(&ex->phase, &expected, PHASE_SUSPENDED, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        return 0;
    assert(expected == PHASE_DONE); /* only done moves the phase on */
    return reply(ex);
}

/* ---- the offload thread --------------------------------------------------- */

/* The work's end and a deferred finish: the last of the two wakes the
 * exchange (after that, ex may be answered and reused). */
void exchange_offload_resume(struct exchange *ex)
{
    int left = __atomic_sub_fetch(&ex->offload.holds, 1, __ATOMIC_ACQ_REL);
    assert(left >= 0);
    if (left == 0)
        exchange_backend_done(ex);
}

void exchange_offload_defer(struct exchange *ex)
{
    int holds = __atomic_add_fetch(&ex->offload.holds, 1, __ATOMIC_ACQ_REL);
    assert(holds == 2); /* during the work, once */
    (void)holds;
}

static void offload_job(void *context)
{
    struct exchange *ex = context;
    __atomic_store_n(&ex->offload.holds, 1, __ATOMIC_RELEASE);
    ex->offload.work(ex);
    exchange_offload_resume(ex);
}

static void offload_begin(struct exchange *ex)
{
    if (offload_submit(ex->server->offload, offload_job, ex))
        return;
    ex->offload.refused = true;
    exchange_backend_done(ex);
}

static int offload_reply(struct exchange *ex)
{
    if (ex->offload.refused)
        return exchange_error(ex, 503, WIRE_ADMIN_QUEUE_FULL);
    return ex->offload.reply(ex);
}

int exchange_call_offload(struct exchange *ex, void (*work)(struct exchange *), exchange_fn reply)
{
    assert(work != NULL);
    assert(reply != NULL);
    ex->offload.work = work;
    ex->offload.reply = reply;
    ex->offload.refused = false;
    /* The offload thread counts as the backend's: shutdown waits for it
     * before the backend closes. */
    return exchange_call_backend(ex, offload_begin, offload_reply);
}

/* ---- the transport's callbacks ------------------------------------------- */

/* Request objects are reused: a fresh malloc of one (several KiB) per request
 * made glibc consolidate its small-chunk bins on every request. */
static struct http_exchange *exchange_open(void *context)
{
    struct server *server = context;
    pthread_mutex_lock(&server->pool_mutex);
    struct exchange *ex = server->pool;
    if (ex != NULL) {
        assert(server->pool_count > 0);
        server->pool = ex->next_free;
        server->pool_count--;
    }
    pthread_mutex_unlock(&server->pool_mutex);
    bool reused = ex != NULL;
    if (ex == NULL) {
        ex = malloc(sizeof *ex);
        if (ex == NULL)
            return NULL;
    }
    /* The reply and arena storage are written before they are read; zero
     * only the bookkeeping. A reused exchange keeps its arena (and the heap
     * block it may hold). */
    struct arena arena;
    if (reused)
        arena = ex->arena;
    memset((char *)ex + sizeof ex->http, 0,
           offsetof(struct exchange, reply_inline) - sizeof ex->http);
    ex->server = server;
    ex->started_ns = clock_monotonic_ns();
    if (reused)
        ex->arena = arena;
    else
        arena_init(&ex->arena, ex->arena_storage, sizeof ex->arena_storage);
    return &ex->http;
}

static void exchange_close(void *context, struct http_exchange *hx)
{
    struct server *server = context;
    struct exchange *ex = (struct exchange *)hx;
    if (exchange_answered(ex) && ex->route != NULL)
        metrics_request(server->metrics, router_index(server->router, ex->route), hx->status,
                        clock_monotonic_ns() - ex->started_ns);
    if (ex->cleanup != NULL)
        ex->cleanup(ex);
    ex->document = NULL; /* it lives in the arena */
    arena_reset(&ex->arena);
    if (hx->body != hx->body_inline)
        free(hx->body);
    if (hx->head_bytes != hx->head_inline)
        free(hx->head_bytes);
    hx->body = hx->body_inline;
    hx->head_bytes = hx->head_inline;
    pthread_mutex_lock(&server->pool_mutex);
    assert(server->pool_count <= EXCHANGE_POOL_MAX);
    bool keep = server->pool_count < EXCHANGE_POOL_MAX;
    if (keep) {
        ex->next_free = server->pool;
        server->pool = ex;
        server->pool_count++;
    }
    pthread_mutex_unlock(&server->pool_mutex);
    if (!keep) {
        arena_free(&ex->arena);
        free(ex);
    }
}

void exchange_pool_free(struct server *server)
{
    while (server->pool != NULL) {
        struct exchange *next = server->pool->next_free;
        arena_free(&server->pool->arena);
        free(server->pool);
        server->pool = next;
    }
    server->pool_count = 0;
}

/* Remembers an answer to give once the request is fully received (its body
 * is read and dropped), so a keep-alive client keeps its connection. */
static void exchange_refuse(struct exchange *ex, unsigned status, const char *error)
{
    assert(status >= 400);
    assert(status <= 499);
    assert(error != NULL);
    assert(ex->refused_status == 0);
    ex->refused_status = status;
    ex->refused_error = error;
    ex->http.discard_body = true;
}

/* The route's token against the Authorization header. */
static void exchange_authorize(struct exchange *ex)
{
    enum auth_outcome auth =
        auth_check(&ex->server->auth, ex->route->auth, exchange_header(ex, "authorization"));
    if (auth == AUTH_ADMIN_REQUIRED)
        exchange_refuse(ex, 401, WIRE_ADMIN_TOKEN_REQUIRED);
    else if (auth != AUTH_OK)
        exchange_refuse(ex, 401, WIRE_UNAUTHORIZED);
}

/* The head is whole: route, method, token. */
static void exchange_begin(void *context, struct http_exchange *hx)
{
    struct server *server = context;
    struct exchange *ex = (struct exchange *)hx;
    char *target = hx->head_bytes + hx->head.target_offset;
    target[hx->head.path_length] = '\0'; /* the '?' or the blank after it */
    /* A path of 0 bytes: http://host, an absolute-form target without one. */
    const char *path = hx->head.path_length > 0 ? target : "/";
    ex->route = router_find(server->router, path, &ex->key_encoded);
    assert(ex->route != NULL); /* unknown paths get the not-found route */
    if ((ex->route->flags & ROUTE_TEST_CLOCK_ONLY) != 0 && !server->config.test_clock)
        ex->route = router_not_found(server->router);
    ex->method = hx->head.method;
    if (ex->route->handler == NULL)
        exchange_refuse(ex, 404, WIRE_NOT_FOUND);
    else if ((ex->route->methods & ex->method) == 0)
        exchange_refuse(ex, 405, WIRE_METHOD_NOT_ALLOWED);
    else
        exchange_authorize(ex);
}

static void exchange_run(void *context, struct http_exchange *hx)
{
    (void)context;
    struct exchange *ex = (struct exchange *)hx;
    ex->body = hx->body;
    ex->body_length = hx->body_length;
    if (ex->refused_status != 0) {
        exchange_error(ex, ex->refused_status, ex->refused_error);
        return;
    }
    if (hx->body_too_large) {
        exchange_error(ex, 413, WIRE_BODY_TOO_LARGE);
        return;
    }
    if (hx->body_alloc_failed) {
        exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
        return;
    }
    assert(ex->route->handler != NULL); /* else refused as not_found */
    if (ex->route->handler(ex) != 0 && !exchange_answered(ex) &&
        __atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) != PHASE_SUSPENDED)
        exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
}

/* The short code of a status the transport answers itself. */
static const char *transport_code(unsigned status)
{
    switch (status) {
    case 413:
        return "body_too_large";
    case 417:
        return "expectation_failed";
    case 431:
        return "header_fields_too_large";
    case 501:
        return "not_implemented";
    case 505:
        return "http_version_not_supported";
    default:
        return "bad_request";
    }
}

/* The transport's own refusals, in the shape of the route the path names:
 * {"error":"<code>: <reason>"}, or OpenAI's (Anthropic's) error object on
 * the gateway's routes, with x-should-retry: false there (none of these
 * changes on a retry). */
static size_t exchange_error_body(void *context, const char *path, size_t path_length,
                                  unsigned status, const char *reason, char *out, size_t out_size,
                                  const char **content_type, struct http_header *header)
{
    struct server *server = context;
    const char *code = transport_code(status);
    const struct route *route = router_not_found(server->router);
    char copy[256];
    if (path != NULL && path_length > 0 && path_length < sizeof copy) {
        const char *key;
        memcpy(copy, path, path_length);
        copy[path_length] = '\0';
        route = router_find(server->router, copy, &key);
    }
    struct buffer b;
    buffer_init(&b, out, out_size);
    b.capacity_max = out_size;
    char text[192];
    snprintf(text, sizeof text, "%s%s%s", code, reason != NULL ? ": " : "",
             reason != NULL ? reason : "");
    if (route->gateway != NULL)
        route->gateway->dialect->plain_error(&b, status, code, reason);
    else
        encode_error(&b, text, (route->flags & ROUTE_ERROR_HAS_OK) != 0);
    buffer_append_char(&b, '\n'); /* as every JSON answer (exchange_answer_with) */
    *content_type = "application/json";
    if (gateway_route(route) && gw_should_not_retry(status, 0))
        *header = (struct http_header){GW_SHOULD_RETRY_HEADER, "false"};
    if (b.failed || b.heap) {
        buffer_free(&b);
        return 0;
    }
    return b.length;
}

static const struct http_handlers handlers = {
    .open = exchange_open,
    .begin = exchange_begin,
    .run = exchange_run,
    .close = exchange_close,
    .error_body = exchange_error_body,
};

union listen_address {
    struct sockaddr sa;
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
};

/* Numeric IPv4/IPv6 or "localhost". 0 or -1. */
static int listen_address(const struct server_config *config, union listen_address *address,
                          bool *loopback)
{
    memset(address, 0, sizeof *address);
    const char *host =
        strcmp(config->listen_host, "localhost") == 0 ? "127.0.0.1" : config->listen_host;
    if (inet_pton(AF_INET, host, &address->v4.sin_addr) == 1) {
        address->v4.sin_family = AF_INET;
        address->v4.sin_port = htons(config->listen_port);
        *loopback = (ntohl(address->v4.sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &address->v6.sin6_addr) == 1) {
        address->v6.sin6_family = AF_INET6;
        address->v6.sin6_port = htons(config->listen_port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&address->v6.sin6_addr);
        return 0;
    }
    return -1;
}

int server_http_start(struct server *server, char *error, size_t error_size)
{
    union listen_address address;
    if (listen_address(&server->config, &address, &server->auth.loopback) != 0) {
        snprintf(error, error_size, "--listen: '%s' is not a numeric IP address or localhost",
                 server->config.listen_host);
        return -1;
    }
    uint32_t request_timeout_seconds = server->config.request_timeout_seconds != 0
                                           ? server->config.request_timeout_seconds
                                           : server->config.connection_timeout_seconds;
    struct http_config config = {
        .address = &address.sa,
        .address_length = address.sa.sa_family == AF_INET6 ? sizeof address.v6 : sizeof address.v4,
        .workers = server->config.threads,
        .max_connections = server->config.max_connections,
        .max_body_bytes = server->config.max_body_bytes,
        .idle_ms = (int64_t)server->config.connection_timeout_seconds * 1000,
        .request_ms = (int64_t)request_timeout_seconds * 1000,
        .stall_ms = (int64_t)server->config.connection_timeout_seconds * 1000,
        .handlers = &handlers,
        .context = server,
    };
    char reason[256];
    if (http_start(&config, &server->http, reason, sizeof reason) != 0) {
        snprintf(error, error_size, "%s:%u: %s", server->config.listen_host,
                 (unsigned)server->config.listen_port, reason);
        return -1;
    }
    return 0;
}
