/* The HTTP layer on libmicrohttpd: one exchange per request, body
 * accumulation under --max-body-bytes, routing, auth, and the hand-off to
 * the asynchronous backend (suspend/resume when done comes later). */
#include "server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "encode.h"
#include "lane.h"
#include "lane_head.h"
#include "util/log.h"

static void log_answer(struct exchange *ex, unsigned status, const struct buffer *body)
{
    enum log_level level = status >= 500 ? LOG_ERROR : LOG_DEBUG;
    if (!log_enabled(level))
        return;
    char status_text[8], body_text[256];
    snprintf(status_text, sizeof status_text, "%u", status);
    snprintf(body_text, sizeof body_text, "%.*s", (int)(body->length < 255 ? body->length : 255),
             body->data != NULL ? body->data : "");
    log_write(level, status >= 500 ? "request failed" : "request", "route", ex->route->name,
              "status", status_text, "answer", body_text, NULL);
}

/* An HTTP date for now; the text is kept per thread for the second. */
static const char *http_date(void)
{
    static __thread time_t cached = -1;
    static __thread char text[40];
    time_t now = time(NULL);
    if (now != cached) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached = now;
    }
    return text;
}

struct answer_header {
    const char *name;
    const char *value;
};

#define ANSWER_HEADERS_MAX 7

/* The headers of an answer besides Content-Length and Date, the same on
 * both paths. Values are static text or point at the caller's seconds and
 * allow. Returns how many were written to out. */
static size_t answer_headers(const struct exchange *ex, unsigned status, int64_t retry_after_ms,
                             bool close, char seconds[24], char allow[64],
                             struct answer_header out[ANSWER_HEADERS_MAX])
{
    size_t n = 0;
    out[n++] = (struct answer_header){MHD_HTTP_HEADER_CONTENT_TYPE,
                                      (ex->route->flags & ROUTE_TEXT) != 0 && status == 200
                                          ? "text/plain; version=0.0.4; charset=utf-8"
                                          : "application/json"};
    if (retry_after_ms > 0) {
        *buffer_put_i64(seconds, (retry_after_ms + 999) / 1000) = '\0';
        out[n++] = (struct answer_header){MHD_HTTP_HEADER_RETRY_AFTER, seconds};
    }
    if (status == 405) {
        route_allow(ex->route, allow, 64);
        out[n++] = (struct answer_header){MHD_HTTP_HEADER_ALLOW, allow};
    }
    if (status == 401)
        out[n++] = (struct answer_header){MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer"};
    if ((ex->route->flags & ROUTE_NO_STORE) != 0) {
        out[n++] = (struct answer_header){MHD_HTTP_HEADER_CACHE_CONTROL, "no-store"};
        out[n++] = (struct answer_header){"X-Content-Type-Options", "nosniff"};
    }
    if (close)
        out[n++] = (struct answer_header){MHD_HTTP_HEADER_CONNECTION, "close"};
    assert(n <= ANSWER_HEADERS_MAX);
    return n;
}

/* exchange_answer on the direct path: the same status and headers,
 * written on the connection by its worker, piece by piece (snprintf was 3%
 * of a reserve's CPU here). */
static void answer_direct(struct exchange *ex, unsigned status, struct buffer *body,
                          int64_t retry_after_ms)
{
    bool close = ex->direct_close || __atomic_load_n(&ex->server->draining, __ATOMIC_SEQ_CST);
    char seconds[24], allow[64];
    struct answer_header headers[ANSWER_HEADERS_MAX];
    size_t count = answer_headers(ex, status, retry_after_ms, close, seconds, allow, headers);
    const char *reason = MHD_get_reason_phrase_for(status);
    char storage[640];
    struct buffer head;
    buffer_init(&head, storage, sizeof storage);
    buffer_append_str(&head, "HTTP/1.1 ");
    buffer_append_u64(&head, status);
    buffer_append_char(&head, ' ');
    buffer_append_str(&head, reason != NULL && reason[0] != '\0' ? reason : "Unknown");
    buffer_append_str(&head, "\r\nDate: ");
    buffer_append_str(&head, http_date());
    buffer_append_str(&head, "\r\nContent-Length: ");
    buffer_append_u64(&head, body->length);
    buffer_append_str(&head, "\r\n");
    for (size_t i = 0; i < count; i++) {
        buffer_append_str(&head, headers[i].name);
        buffer_append_str(&head, ": ");
        buffer_append_str(&head, headers[i].value);
        buffer_append_str(&head, "\r\n");
    }
    buffer_append_str(&head, "\r\n");
    assert(!head.failed); /* the fixed lines fit the storage */
    assert(!head.heap);
    ex->status = status;
    lane_send(ex, head.data, head.length, body->data, body->length, close);
    buffer_free(body);
}

enum MHD_Result exchange_answer(struct exchange *ex, unsigned status, struct buffer *body,
                                int64_t retry_after_ms)
{
    /* One answer per exchange: every path that answers returns at once. */
    assert(ex->status == 0);
    assert(status >= 200);
    assert(status <= 599);
    assert(retry_after_ms >= 0);
    assert(body->length <= body->capacity);
    char fallback[64];
    struct buffer spare;
    if (body->failed) { /* out of memory while writing the answer */
        buffer_free(body);
        buffer_init(&spare, fallback, sizeof fallback);
        encode_error(&spare, "out_of_memory", (ex->route->flags & ROUTE_ERROR_HAS_OK) != 0);
        body = &spare;
        status = 503;
    }
    log_answer(ex, status, body);
    if (ex->lane != NULL) {
        answer_direct(ex, status, body, retry_after_ms);
        return MHD_YES;
    }
    struct MHD_Response *response;
    size_t length = body->length;
    if (body->heap) {
        char *data = buffer_detach(body);
        response = MHD_create_response_from_buffer(length, data, MHD_RESPMEM_MUST_FREE);
        if (response == NULL)
            free(data);
    } else {
        /* Stable storage is freed or reused only once the request has
         * completed, after MHD has sent (or given up on) the answer. */
        response = MHD_create_response_from_buffer(
            length, body->data, body->stable ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_COPY);
    }
    if (response == NULL)
        return MHD_NO;
    char seconds[24], allow[64];
    struct answer_header headers[ANSWER_HEADERS_MAX];
    size_t count = answer_headers(ex, status, retry_after_ms,
                                  __atomic_load_n(&ex->server->draining, __ATOMIC_SEQ_CST), seconds,
                                  allow, headers);
    for (size_t i = 0; i < count; i++)
        MHD_add_response_header(response, headers[i].name, headers[i].value);
    ex->status = status;
    enum MHD_Result queued = MHD_queue_response(ex->connection, status, response);
    MHD_destroy_response(response);
    return queued;
}

void exchange_reply_buffer(struct exchange *ex, struct buffer *buffer)
{
    buffer_init(buffer, ex->reply_inline, sizeof ex->reply_inline);
    buffer->stable = true;
}

int exchange_query(struct exchange *ex, const char *name, char *out, size_t out_size)
{
    if (ex->lane != NULL)
        return 0; /* direct requests have no query (lane_head.h) */
    const char *raw = MHD_lookup_connection_value(ex->connection, MHD_GET_ARGUMENT_KIND, name);
    if (raw == NULL)
        return 0;
    size_t length;
    if (percent_decode(raw, out, out_size, &length) != 0) {
        char error[128];
        snprintf(error, sizeof error, "%s: invalid percent-encoding or too long", name);
        exchange_error(ex, 400, error);
        return -1;
    }
    return 1;
}

enum MHD_Result exchange_error(struct exchange *ex, unsigned status, const char *error)
{
    struct buffer b;
    exchange_reply_buffer(ex, &b);
    if ((ex->route->flags & ROUTE_ERROR_OPENAI) != 0)
        encode_openai_error(&b, status, error);
    else
        encode_error(&b, error, (ex->route->flags & ROUTE_ERROR_HAS_OK) != 0);
    return exchange_answer(ex, status, &b, 0);
}

const struct jdoc_value *exchange_parse_body(struct exchange *ex)
{
    char error[DECODE_ERROR_SIZE];
    if (decode_parse(ex->body, ex->body_length, &ex->arena, &ex->document, error, sizeof error) !=
        0) {
        exchange_error(ex, 400, error);
        return NULL;
    }
    return ex->document;
}

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
    /* Read before publishing DONE: once it is published the MHD thread may
     * answer and free the exchange. */
    struct server *server = ex->server;
    struct MHD_Connection *connection = ex->connection;
    bool direct = ex->lane != NULL;
    int previous = __atomic_exchange_n(&ex->phase, PHASE_DONE, __ATOMIC_SEQ_CST);
    /* done runs once per call, and only after the call was made. */
    assert(previous != PHASE_RECEIVING);
    assert(previous != PHASE_DONE);
    /* A direct exchange is freed only by its worker, after this queues it. */
    if (previous == PHASE_SUSPENDED && direct)
        lane_resume(ex);
    else if (previous == PHASE_SUSPENDED)
        MHD_resume_connection(connection);
    /* Last: shutdown stops the daemon only after every call has left. */
    int64_t calls = __atomic_sub_fetch(&server->backend_calls, 1, __ATOMIC_SEQ_CST);
    assert(calls >= 0);
}

enum MHD_Result exchange_call_backend(struct exchange *ex, void (*call)(struct exchange *),
                                      exchange_fn reply)
{
    assert(call != NULL);
    assert(reply != NULL);
    /* Made before any answer: the first once the body is in, or the next
     * one from the reply of the one before (a gateway call reserves, then
     * forwards, then settles). */
    assert(ex->status == 0);
    int phase = __atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST);
    assert(phase == PHASE_RECEIVING || phase == PHASE_DONE);
    if (!backend_enter(ex->server))
        return exchange_error(ex, 503, "shutting_down");
    ex->reply = reply;
    ex->called = true;
    __atomic_store_n(&ex->phase, PHASE_WAITING, __ATOMIC_SEQ_CST);
    call(ex);
    if (__atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) == PHASE_DONE)
        return reply(ex); /* synchronous backend: answer on this call */
    /* Suspend first, then publish SUSPENDED: done resumes only a connection
     * that is already suspended. If done ran in between, the exchange below
     * fails and this thread resumes the connection itself. A direct
     * exchange has nothing to suspend: its worker answers it when done
     * queues it, or here. */
    bool direct = ex->lane != NULL;
    if (!direct)
        MHD_suspend_connection(ex->connection);
    int expected = PHASE_WAITING;
    if (!__atomic_compare_exchange_n(&ex->phase, &expected, PHASE_SUSPENDED, false,
                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        assert(expected == PHASE_DONE); /* only done moves the phase on */
        if (direct)
            return reply(ex);
        MHD_resume_connection(ex->connection);
    }
    return MHD_YES;
}

/* Remembers an answer to give once the request is fully received. */
static enum MHD_Result exchange_refuse(struct exchange *ex, unsigned status, const char *error)
{
    assert(status >= 400);
    assert(status <= 499);
    assert(error != NULL);
    assert(ex->refused_status == 0);
    ex->refused_status = status;
    ex->refused_error = error;
    return MHD_YES;
}

/* Request objects are reused: a fresh malloc of one (several KiB) per request
 * made glibc consolidate its small-chunk bins on every request. */
static struct exchange *exchange_new(struct server *server, struct MHD_Connection *connection)
{
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
    /* The op union, the inline body and the arena storage are written
     * before they are read; zero only the bookkeeping. A reused exchange
     * keeps its arena (and the heap block it may hold). */
    struct arena arena;
    if (reused)
        arena = ex->arena;
    memset(ex, 0, offsetof(struct exchange, op));
    ex->server = server;
    ex->connection = connection;
    ex->watch = connection != NULL ? watch_of(connection) : NULL;
    ex->started_ns = clock_monotonic_ns();
    ex->body = ex->body_inline;
    ex->body_capacity = sizeof ex->body_inline;
    if (reused)
        ex->arena = arena;
    else
        arena_init(&ex->arena, ex->arena_storage, sizeof ex->arena_storage);
    return ex;
}

static void exchange_free(struct exchange *ex)
{
    struct server *server = ex->server;
    if (ex->cleanup != NULL)
        ex->cleanup(ex);
    ex->document = NULL; /* it lives in the arena */
    arena_reset(&ex->arena);
    if (ex->body != ex->body_inline)
        free(ex->body);
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

void http_pool_free(struct server *server)
{
    while (server->pool != NULL) {
        struct exchange *next = server->pool->next_free;
        arena_free(&server->pool->arena);
        free(server->pool);
        server->pool = next;
    }
    server->pool_count = 0;
}

/* The body is complete (or the request ended): no longer an upload that a
 * shutdown would wait for. */
static void exchange_received(struct exchange *ex)
{
    if (!ex->receiving)
        return;
    ex->receiving = false;
    int64_t left = __atomic_sub_fetch(&ex->server->receiving_requests, 1, __ATOMIC_SEQ_CST);
    assert(left >= 0);
}

/* Appends body bytes. A body that is refused or over the limit is dropped
 * (answered at the end), but only up to another --max-body-bytes: past
 * that the connection is closed without an answer, so a client cannot keep
 * a worker busy forever with a chunked body. */
static enum MHD_Result exchange_receive(struct exchange *ex, const char *data, size_t size)
{
    uint64_t limit = ex->server->config.max_body_bytes;
    assert(ex->body_length <= ex->body_capacity);
    assert(ex->body_length <= limit);
    if (!ex->body_too_large && !ex->body_alloc_failed && ex->refused_status == 0 &&
        size > limit - ex->body_length)
        ex->body_too_large = true;
    if (ex->body_too_large || ex->body_alloc_failed || ex->refused_status != 0) {
        ex->dropped_bytes += size;
        return ex->dropped_bytes > limit ? MHD_NO : MHD_YES;
    }
    if (ex->body_length + size > ex->body_capacity) {
        size_t capacity = ex->body_capacity;
        while (capacity < ex->body_length + size)
            capacity *= 2;
        if (capacity > limit)
            capacity = (size_t)limit;
        char *grown = ex->body == ex->body_inline ? malloc(capacity) : realloc(ex->body, capacity);
        if (grown == NULL) {
            ex->body_alloc_failed = true;
            return MHD_YES;
        }
        if (ex->body == ex->body_inline)
            memcpy(grown, ex->body_inline, ex->body_length);
        ex->body = grown;
        ex->body_capacity = capacity;
    }
    assert(ex->body_length + size <= ex->body_capacity);
    memcpy(ex->body + ex->body_length, data, size);
    ex->body_length += size;
    return MHD_YES;
}

/* A Content-Length over limit, read as "%" SCNu64 reads it (blanks, a
 * sign, digits; a negative value wraps around, so it is over) without
 * sscanf's cost. A value with no digits is left to MHD, which refuses it. */
static bool announced_length_over(const char *text, uint64_t limit)
{
    while (*text == ' ' || (*text >= '\t' && *text <= '\r'))
        text++;
    bool negative = *text == '-';
    if (*text == '-' || *text == '+')
        text++;
    uint64_t length = 0;
    for (; *text >= '0' && *text <= '9'; text++) {
        uint64_t digit = (uint64_t)(*text - '0');
        if (length > (UINT64_MAX - digit) / 10)
            return true; /* beyond any limit */
        length = length * 10 + digit;
    }
    if (negative && length > 0)
        return true;
    return length > limit;
}

/* The route's token against the Authorization header (NULL: none); a
 * refusal is remembered, to be answered after the body. */
static enum MHD_Result exchange_authorize(struct exchange *ex, const char *authorization)
{
    enum auth_outcome auth = auth_check(&ex->server->auth, ex->route->auth, authorization);
    if (auth == AUTH_ADMIN_REQUIRED)
        return exchange_refuse(ex, 401, "admin_token_required");
    if (auth != AUTH_OK)
        return exchange_refuse(ex, 401, "unauthorized");
    return MHD_YES;
}

/* A new exchange, counted open and receiving; NULL when out of memory.
 * connection is NULL on the direct path. */
static struct exchange *exchange_open(struct server *server, struct MHD_Connection *connection)
{
    struct exchange *ex = exchange_new(server, connection);
    if (ex == NULL)
        return NULL;
    __atomic_add_fetch(&server->open_requests, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&server->receiving_requests, 1, __ATOMIC_SEQ_CST);
    ex->receiving = true;
    return ex;
}

/* Checks that need only the request line and headers. A failure is
 * answered after the body (which is dropped unread), because MHD 0.9.75
 * closes the connection after any answer queued before the body: keep-alive
 * clients keep their connection. Only an announced body over the limit is
 * refused at once (and the connection closed), so it is never read. */
static enum MHD_Result exchange_begin(struct exchange *ex, const char *url, const char *method)
{
    struct server *server = ex->server;
    ex->route = router_find(server->router, url, &ex->key_encoded);
    assert(ex->route != NULL); /* unknown paths get the not-found route */
    if ((ex->route->flags & ROUTE_TEST_CLOCK_ONLY) != 0 && !server->config.test_clock)
        ex->route = router_not_found(server->router);
    ex->method = method_parse(method);
    const char *length_text = MHD_lookup_connection_value(ex->connection, MHD_HEADER_KIND,
                                                          MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length_text != NULL && announced_length_over(length_text, server->config.max_body_bytes))
        return exchange_error(ex, 413, "body_too_large");
    if (ex->route->handler == NULL)
        return exchange_refuse(ex, 404, "not_found");
    if ((ex->route->methods & ex->method) == 0)
        return exchange_refuse(ex, 405, "method_not_allowed");
    return exchange_authorize(ex, MHD_lookup_connection_value(ex->connection, MHD_HEADER_KIND,
                                                              MHD_HTTP_HEADER_AUTHORIZATION));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct server *server = cls;
    struct exchange *ex = *con_cls;
    if (ex == NULL) {
        ex = exchange_open(server, connection);
        if (ex == NULL)
            return MHD_NO; /* out of memory: drop the connection */
        *con_cls = ex;
        return exchange_begin(ex, url, method);
    }
    if (*upload_data_size > 0) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        return exchange_receive(ex, upload_data, size);
    }
    exchange_received(ex);
    if (ex->status != 0)
        return MHD_YES; /* answered already (a body came after an early answer) */
    int phase = __atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST);
    if (phase == PHASE_DONE)
        return ex->reply(ex);
    if (phase != PHASE_RECEIVING)
        return MHD_YES; /* not expected while suspended; wait for done */
    if (ex->refused_status != 0)
        return exchange_error(ex, ex->refused_status, ex->refused_error);
    if (ex->body_too_large)
        return exchange_error(ex, 413, "body_too_large");
    if (ex->body_alloc_failed)
        return exchange_error(ex, 503, "out_of_memory");
    assert(ex->route->handler != NULL); /* else refused as not_found */
    watch_request_received(ex->watch);
    return ex->route->handler(ex);
}

void exchange_complete(struct exchange *ex)
{
    struct server *server = ex->server;
    if (ex->status != 0)
        metrics_request(server->metrics, router_index(server->router, ex->route), ex->status,
                        clock_monotonic_ns() - ex->started_ns);
    exchange_received(ex);
    watch_request_finished(ex->watch);
    exchange_free(ex);
    int64_t open = __atomic_sub_fetch(&server->open_requests, 1, __ATOMIC_SEQ_CST);
    assert(open >= 0);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls;
    (void)connection;
    (void)code;
    struct exchange *ex = *con_cls;
    if (ex == NULL)
        return;
    *con_cls = NULL;
    /* A suspended exchange is never completed: shutdown waits for every
     * backend call before it stops the daemon. */
    assert(__atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) != PHASE_WAITING);
    assert(__atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) != PHASE_SUSPENDED);
    exchange_complete(ex);
}

struct exchange *exchange_direct(struct server *server, struct lane_conn *conn,
                                 const struct route *route, char *data,
                                 const struct lane_head *head)
{
    struct exchange *ex = exchange_open(server, NULL);
    if (ex == NULL)
        return NULL;
    ex->lane = conn;
    ex->route = route;
    ex->method = METHOD_POST;
    ex->direct_close = head->close;
    const char *authorization = NULL;
    if (head->has_authorization) {
        /* The value ends before its line's CRLF, inside the head. */
        data[head->authorization_offset + head->authorization_length] = '\0';
        authorization = data + head->authorization_offset;
    }
    exchange_authorize(ex, authorization);
    if (head->content_length > 0)
        exchange_receive(ex, data + head->length, (size_t)head->content_length);
    exchange_received(ex);
    return ex;
}

void exchange_direct_run(struct exchange *ex)
{
    assert(ex->lane != NULL);
    if (ex->refused_status != 0) {
        exchange_error(ex, ex->refused_status, ex->refused_error);
        return;
    }
    assert(!ex->body_too_large); /* the direct path takes only bodies within the bound */
    if (ex->body_alloc_failed) {
        exchange_error(ex, 503, "out_of_memory");
        return;
    }
    watch_request_received(ex->watch);
    ex->route->handler(ex);
    /* Answered, or waiting for done; never neither. */
    assert(ex->status != 0 || __atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) == PHASE_SUSPENDED);
}

void exchange_direct_resumed(struct exchange *ex)
{
    assert(ex->lane != NULL);
    assert(__atomic_load_n(&ex->phase, __ATOMIC_SEQ_CST) == PHASE_DONE);
    ex->reply(ex);
}

/* Paths and query arguments reach the routes still percent-encoded: the
 * routes decode them strictly (bad escapes and NUL are a 400, never
 * silently kept or cut). */
static size_t unescape_none(void *cls, struct MHD_Connection *connection, char *text)
{
    (void)cls;
    (void)connection;
    return strlen(text);
}

static void mhd_log(void *cls, const char *format, va_list ap)
{
    (void)cls;
    char text[512];
    vsnprintf(text, sizeof text, format, ap);
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    log_write(LOG_WARN, "http", "detail", text, NULL);
}

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

/* MHD_OPTION_NOTIFY_CONNECTION: the request deadline's watch, and the
 * listener's count for --max-connections. */
static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct server *server = cls;
    watch_on_connection(&server->watches, connection, socket_context, code);
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        listener_connection_started(&server->listener);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        listener_connection_closed(&server->listener);
}

static struct MHD_Daemon *start_daemon(struct server *server)
{
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
    /* A pool of 1 is MHD's single internal thread. */
    unsigned pool = server->config.threads > 1 ? server->config.threads : 0;
    /* The listener keeps --max-connections. MHD splits its own bound among
     * its workers and refuses a connection given to a full worker, so each
     * worker may take them all. */
    unsigned limit = server->config.max_connections * (pool > 1 ? pool : 1);
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, server, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY_BYTES,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)server->config.connection_timeout_seconds,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, server, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, server, MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, NULL, MHD_OPTION_END);
}

int http_start(struct server *server, char *error, size_t error_size)
{
    union listen_address address;
    if (listen_address(&server->config, &address, &server->auth.loopback) != 0) {
        snprintf(error, error_size, "--listen: '%s' is not a numeric IP address or localhost",
                 server->config.listen_host);
        return -1;
    }
    socklen_t address_length =
        address.sa.sa_family == AF_INET6 ? sizeof address.v6 : sizeof address.v4;
    if (listener_open(&server->listener, &address.sa, address_length) != 0) {
        snprintf(error, error_size, "%s:%u: %s", server->config.listen_host,
                 (unsigned)server->config.listen_port, strerror(errno));
        return -1;
    }
    server->daemon = start_daemon(server);
    if (server->daemon == NULL) {
        listener_close(&server->listener);
        snprintf(error, error_size, "cannot start the HTTP server (see the log above)");
        return -1;
    }
    /* The direct path's workers close connections idle past the request
     * deadline or libmicrohttpd's idle timeout, whichever comes first, as
     * libmicrohttpd's connections are. */
    int64_t timeout_ms = (int64_t)server->config.connection_timeout_seconds * 1000;
    int64_t idle_ms =
        server->watches.timeout_ms < timeout_ms ? server->watches.timeout_ms : timeout_ms;
    server->lane = lane_start(server, server->config.threads > 1 ? server->config.threads : 1,
                              idle_ms, timeout_ms);
    if (server->lane == NULL) {
        snprintf(error, error_size, "cannot start the direct path: %s", strerror(errno));
        return -1; /* the caller stops the daemon */
    }
    server->listener.adopt = lane_adopt;
    server->listener.adopt_context = server->lane;
    if (listener_start(&server->listener, server->daemon) != 0) {
        snprintf(error, error_size, "cannot start the accepting thread: %s", strerror(errno));
        return -1; /* the caller stops the daemon */
    }
    return 0;
}

void http_quiesce(struct server *server)
{
    listener_close(&server->listener);
}

void http_stop(struct server *server)
{
    listener_close(&server->listener); /* before the daemon its thread hands to */
    lane_stop(server->lane);           /* its workers hand over to the daemon too */
    server->lane = NULL;
    MHD_stop_daemon(server->daemon);
    server->daemon = NULL;
}
