/* One connection on its worker (see http.h): reading heads and bodies,
 * handing each whole request to the server, one at a time and in order,
 * writing what the socket does not take at once as it drains, and closing
 * the way HTTP servers do (RFC 9112 section 9.6: shut down writing, read
 * what the client still sends, then close). */
#include "http_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/buffer.h"

static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

static struct http_server *server_of(const struct http_conn *conn)
{
    return conn->worker->server;
}

struct http_conn *http_conn_new(struct http_worker *w, int fd)
{
    struct http_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL)
        return NULL;
    conn->fd = fd;
    conn->worker = w;
    conn->state = CONN_HEAD;
    return conn;
}

void http_exchange_init(struct http_exchange *ex)
{
    /* Not the head's table of fields (1.6 KB, most of a reused exchange's
     * lines): http_head_parse sets what it uses. */
    memset(ex, 0, offsetof(struct http_exchange, head.fields));
    ex->head_bytes = ex->head_inline;
    ex->body = ex->body_inline;
    ex->body_capacity = sizeof ex->body_inline;
    ex->body_inline[0] = '\0';
}

/* ---- timers */

static void reading_begin(struct http_conn *conn)
{
    struct http_worker *w = conn->worker;
    int64_t now = http_now_ms();
    http_list_push(&w->reading, &conn->reading, now);
    http_list_push(&w->activity, &conn->activity, now);
}

static void reading_end(struct http_conn *conn)
{
    http_list_remove(&conn->worker->reading, &conn->reading);
    http_list_remove(&conn->worker->activity, &conn->activity);
}

static bool output_waiting(const struct http_conn *conn)
{
    return conn->out_length > conn->out_start;
}

/* ---- closing */

static void free_exchange(struct http_conn *conn)
{
    struct http_exchange *ex = conn->exchange;
    struct http_server *server = server_of(conn);
    conn->exchange = NULL;
    if (ex->receiving) {
        ex->receiving = false;
        __atomic_sub_fetch(&server->receiving_exchanges, 1, __ATOMIC_SEQ_CST);
    }
    int64_t open = __atomic_sub_fetch(&server->open_exchanges, 1, __ATOMIC_SEQ_CST);
    assert(open >= 0);
    /* The server's close runs first: a producer on another thread stops
     * waking the exchange there, so a wake it queued before is known here. */
    if (http_worker_release(conn->worker, ex))
        server->config.handlers->close(server->config.context, ex);
}

static void notify_gone(struct http_conn *conn)
{
    struct http_exchange *ex = conn->exchange;
    if (ex == NULL || ex->gone || conn->state != CONN_RUNNING)
        return;
    ex->gone = true;
    if (ex->on_gone != NULL && !ex->answered)
        ex->on_gone(ex);
}

void http_conn_discard(struct http_conn *conn)
{
    struct http_worker *w = conn->worker;
    if (conn->exchange != NULL)
        free_exchange(conn);
    http_list_remove(&w->all, &conn->all);
    close(conn->fd);
    if (conn->in != w->scratch)
        free(conn->in);
    free(conn->out);
    http_listener_closed_one(&server_of(conn)->listener);
    free(conn);
}

void http_conn_close(struct http_conn *conn)
{
    if (conn->dead)
        return;
    struct http_worker *w = conn->worker;
    reading_end(conn);
    http_list_remove(&w->stalled, &conn->stalled);
    http_list_remove(&w->linger, &conn->linger);
    if (conn->exchange != NULL && conn->state == CONN_RUNNING) {
        /* The server still has the exchange: cut the socket now, and close
         * the connection once the exchange has its answer. */
        conn->write_failed = true;
        conn->peer_closed = true;
        conn->out_start = conn->out_length = 0;
        epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
        shutdown(conn->fd, SHUT_RDWR);
        notify_gone(conn);
        return;
    }
    if (conn->exchange != NULL)
        free_exchange(conn); /* its body was still coming */
    conn->dead = true;
    http_list_remove(&w->all, &conn->all);
    close(conn->fd); /* leaves the epoll set with it */
    if (conn->in != w->scratch)
        free(conn->in);
    free(conn->out);
    conn->in = conn->out = NULL;
    http_listener_closed_one(&server_of(conn)->listener);
    conn->dead_next = w->dead;
    w->dead = conn;
}

/* The answer is out and no other request may follow: shut down writing,
 * then read and drop what the client still sends until it closes, so that
 * the kernel never resets the connection over unread bytes while the
 * answer may still be on its way. */
static void linger_begin(struct http_conn *conn)
{
    reading_end(conn);
    conn->state = CONN_LINGER;
    shutdown(conn->fd, SHUT_WR);
    conn->in_start = conn->in_length = 0;
    http_list_push(&conn->worker->linger, &conn->linger, http_now_ms());
}

static void linger_read(struct http_conn *conn)
{
    for (;;) {
        ssize_t n = recv(conn->fd, conn->worker->scratch, HTTP_READ_BYTES, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        conn->linger_bytes += n > 0 ? (uint64_t)n : 0;
        if (n <= 0 || conn->linger_bytes > HTTP_LINGER_BYTES_MAX) {
            http_conn_close(conn);
            return;
        }
    }
}

/* ---- writing */

static void out_append(struct http_conn *conn, const char *bytes, size_t length)
{
    if (conn->write_failed || length == 0)
        return;
    if (conn->out_start > 0 && conn->out_start == conn->out_length)
        conn->out_start = conn->out_length = 0;
    if (length > conn->out_capacity - conn->out_length) {
        if (conn->out_start > 0) {
            memmove(conn->out, conn->out + conn->out_start, conn->out_length - conn->out_start);
            conn->out_length -= conn->out_start;
            conn->out_start = 0;
        }
        size_t capacity = conn->out_capacity > 0 ? conn->out_capacity : 4096;
        while (capacity - conn->out_length < length)
            capacity *= 2;
        char *grown = realloc(conn->out, capacity);
        if (grown == NULL) {
            conn->write_failed = true; /* the client cannot get the whole answer: cut it */
            return;
        }
        conn->out = grown;
        conn->out_capacity = capacity;
    }
    memcpy(conn->out + conn->out_length, bytes, length);
    conn->out_length += length;
}

static void send_failed(struct http_conn *conn)
{
    conn->write_failed = true;
    conn->out_start = conn->out_length = 0;
    http_list_remove(&conn->worker->stalled, &conn->stalled);
}

void http_conn_send(struct http_conn *conn, const struct iovec *parts, int count)
{
    assert(count >= 1);
    assert(count <= 4);
    if (conn->write_failed)
        return;
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += parts[i].iov_len;
    size_t sent = 0;
    if (!output_waiting(conn)) {
        struct msghdr message = {.msg_iov = (struct iovec *)parts, .msg_iovlen = (size_t)count};
        ssize_t n;
        do
            n = sendmsg(conn->fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            send_failed(conn);
            return;
        }
        sent = n > 0 ? (size_t)n : 0;
        if (sent == total)
            return;
    }
    /* The socket is full: keep the rest, sent as it drains. */
    bool was_waiting = output_waiting(conn);
    for (int i = 0; i < count; i++) {
        size_t length = parts[i].iov_len;
        if (sent >= length) {
            sent -= length;
            continue;
        }
        out_append(conn, (const char *)parts[i].iov_base + sent, length - sent);
        sent = 0;
    }
    if (!was_waiting && output_waiting(conn))
        http_list_push(&conn->worker->stalled, &conn->stalled, http_now_ms());
}

bool http_conn_flush(struct http_conn *conn)
{
    bool moved = false;
    while (output_waiting(conn)) {
        ssize_t n = send(conn->fd, conn->out + conn->out_start, conn->out_length - conn->out_start,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (moved)
                http_list_touch(&conn->worker->stalled, &conn->stalled, http_now_ms());
            return false;
        }
        if (n <= 0) {
            send_failed(conn);
            return true;
        }
        conn->out_start += (size_t)n;
        moved = true;
    }
    conn->out_start = conn->out_length = 0;
    http_list_remove(&conn->worker->stalled, &conn->stalled);
    if (conn->out_capacity > HTTP_READ_BYTES) { /* a large answer's room goes back */
        free(conn->out);
        conn->out = NULL;
        conn->out_capacity = 0;
    }
    return true;
}

/* ---- reading */

/* Room to read into: the worker's scratch when nothing is kept, else the
 * connection's own buffer, compacted and grown up to `limit` bytes held. */
static bool in_room(struct http_conn *conn, size_t limit)
{
    struct http_worker *w = conn->worker;
    if (conn->in == NULL) {
        conn->in = w->scratch;
        conn->in_capacity = HTTP_READ_BYTES;
        conn->in_start = conn->in_length = 0;
    }
    if (conn->in_start > 0 && conn->in_start == conn->in_length)
        conn->in_start = conn->in_length = 0;
    if (conn->in_length < conn->in_capacity)
        return true;
    if (conn->in_start > 0) {
        memmove(conn->in, conn->in + conn->in_start, conn->in_length - conn->in_start);
        conn->in_length -= conn->in_start;
        conn->in_start = 0;
        conn->head_scanned = 0;
        return true;
    }
    if (conn->in_capacity >= limit)
        return false;
    size_t capacity = conn->in_capacity * 2 < limit ? conn->in_capacity * 2 : limit;
    char *grown = malloc(capacity);
    if (grown == NULL)
        return false;
    memcpy(grown, conn->in, conn->in_length);
    if (conn->in != w->scratch)
        free(conn->in);
    conn->in = grown;
    conn->in_capacity = capacity;
    return true;
}

/* Leaving the worker's hands: bytes kept in the scratch move to the
 * connection's own buffer, and an empty own buffer is freed. */
static void in_park(struct http_conn *conn)
{
    struct http_worker *w = conn->worker;
    if (conn->in == NULL || conn->dead)
        return;
    size_t kept = conn->in_length - conn->in_start;
    if (conn->in == w->scratch) {
        char *own = kept > 0 ? malloc(kept) : NULL;
        if (kept > 0 && own == NULL) {
            http_conn_close(conn);
            return;
        }
        if (kept > 0)
            memcpy(own, conn->in + conn->in_start, kept);
        conn->in = own;
        conn->in_capacity = kept;
        conn->in_length = kept;
        conn->in_start = 0;
        conn->head_scanned = 0;
    } else if (kept == 0) {
        free(conn->in);
        conn->in = NULL;
        conn->in_capacity = conn->in_start = conn->in_length = 0;
    }
}

enum fill_result { FILL_MORE, FILL_WAIT, FILL_END };

/* Reads what the socket has into the input. */
static enum fill_result fill(struct http_conn *conn, size_t limit)
{
    if (!conn->readable)
        return conn->peer_closed ? FILL_END : FILL_WAIT;
    if (!in_room(conn, limit))
        return FILL_END;
    size_t room = conn->in_capacity - conn->in_length;
    ssize_t n;
    do
        n = recv(conn->fd, conn->in + conn->in_length, room, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        conn->readable = false;
        return FILL_WAIT;
    }
    if (n <= 0) {
        conn->readable = false;
        conn->peer_closed = true;
        return FILL_END;
    }
    conn->in_length += (size_t)n;
    /* A short read emptied the socket: the next bytes bring a new event. */
    conn->readable = (size_t)n == room;
    if (conn->activity.linked)
        http_list_touch(&conn->worker->activity, &conn->activity, http_now_ms());
    return FILL_MORE;
}

/* ---- requests */

/* Where the head ends in the input (http_head_end, the parser's own rule):
 * its length, or 0 while it has not. */
static size_t head_end(struct http_conn *conn)
{
    return http_head_end(conn->in + conn->in_start, conn->in_length - conn->in_start,
                         &conn->head_scanned);
}

/* The body goes to the exchange, or is dropped. 0, or -1 when a dropped
 * body passes twice the limit: the connection is then closed unanswered. */
static int body_take(void *context, const char *bytes, size_t length)
{
    struct http_exchange *ex = context;
    struct http_conn *conn = ex->conn;
    uint64_t limit = server_of(conn)->config.max_body_bytes;
    if (!ex->discard_body && !ex->body_too_large && !ex->body_alloc_failed &&
        length > limit - ex->body_length)
        ex->body_too_large = true;
    if (ex->discard_body || ex->body_too_large || ex->body_alloc_failed) {
        ex->dropped_bytes += length;
        return ex->dropped_bytes > limit ? -1 : 0;
    }
    if (ex->body_length + length + 1 > ex->body_capacity) {
        size_t capacity = ex->body_capacity;
        while (capacity < ex->body_length + length + 1)
            capacity *= 2;
        char *grown = ex->body == ex->body_inline ? malloc(capacity) : realloc(ex->body, capacity);
        if (grown == NULL) {
            ex->body_alloc_failed = true;
            return 0;
        }
        if (ex->body == ex->body_inline)
            memcpy(grown, ex->body_inline, ex->body_length);
        ex->body = grown;
        ex->body_capacity = capacity;
    }
    memcpy(ex->body + ex->body_length, bytes, length);
    ex->body_length += length;
    ex->body[ex->body_length] = '\0';
    return 0;
}

/* The head at the front of the input, parsed into a new exchange. */
static bool open_exchange(struct http_conn *conn, size_t length)
{
    struct http_server *server = server_of(conn);
    const struct http_handlers *h = server->config.handlers;
    struct http_exchange *ex = h->open(server->config.context);
    if (ex == NULL) {
        http_conn_close(conn); /* out of memory: dropped */
        return false;
    }
    http_exchange_init(ex);
    ex->conn = conn;
    const char *data = conn->in + conn->in_start;
    unsigned status = 0;
    const char *reason = NULL;
    enum http_head_result r = http_head_parse(data, length, &ex->head, &status, &reason);
    assert(r != HTTP_HEAD_PARTIAL); /* the parser reads the same end (http_head_end) */
    if (r == HTTP_HEAD_BAD) {
        h->close(server->config.context, ex);
        size_t path_length = ex->head.target_length > 0 ? ex->head.path_length : 0;
        http_conn_refuse(conn, data + ex->head.target_offset, path_length, status, reason);
        return false;
    }
    if (length >= sizeof ex->head_inline) {
        ex->head_bytes = malloc(length + 1);
        if (ex->head_bytes == NULL) {
            ex->head_bytes = ex->head_inline;
            h->close(server->config.context, ex);
            http_conn_close(conn);
            return false;
        }
    }
    memcpy(ex->head_bytes, data, length);
    ex->head_bytes[length] = '\0';
    conn->in_start += length;
    conn->turn_bytes += length;
    conn->head_scanned = 0;
    conn->exchange = ex;
    ex->receiving = true;
    __atomic_add_fetch(&server->open_exchanges, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&server->receiving_exchanges, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&server->stats_requests, 1, __ATOMIC_RELAXED);
    return true;
}

/* A whole head came: refuse what can never be read, then let the server
 * look at it; the body comes next. */
static bool head_taken(struct http_conn *conn)
{
    struct http_server *server = server_of(conn);
    struct http_exchange *ex = conn->exchange;
    const struct http_head *head = &ex->head;
    if (head->close)
        conn->close_after = true;
    if (head->has_content_length && head->content_length > server->config.max_body_bytes) {
        /* Announced over the limit: answered at once, the body never read. */
        conn->exchange = NULL;
        ex->receiving = false;
        __atomic_sub_fetch(&server->receiving_exchanges, 1, __ATOMIC_SEQ_CST);
        __atomic_sub_fetch(&server->open_exchanges, 1, __ATOMIC_SEQ_CST);
        http_conn_refuse(conn, ex->head_bytes + head->target_offset, head->path_length, 413, NULL);
        server->config.handlers->close(server->config.context, ex);
        return false;
    }
    server->config.handlers->begin(server->config.context, ex);
    conn->state = CONN_BODY;
    conn->body_chunked = head->chunked;
    conn->body_left = head->chunked ? 0 : head->content_length;
    if (head->chunked)
        http_chunked_init(&conn->chunked);
    if (head->expect_continue && (head->chunked || head->content_length > 0)) {
        if (ex->discard_body) { /* refused: answered without asking for the body */
            conn->close_after = true;
            conn->body_left = 0;
            conn->body_chunked = false;
        } else if (conn->in_length == conn->in_start) {
            struct iovec part = {(void *)continue_line, sizeof continue_line - 1};
            http_conn_send(conn, &part, 1);
        }
    }
    return true;
}

enum body_result { BODY_MORE, BODY_WHOLE, BODY_CUT };

static enum body_result body_step(struct http_conn *conn)
{
    struct http_exchange *ex = conn->exchange;
    const char *data = conn->in + conn->in_start;
    size_t length = conn->in_length - conn->in_start;
    if (!conn->body_chunked) {
        size_t n = length < conn->body_left ? length : (size_t)conn->body_left;
        if (n > 0 && body_take(ex, data, n) != 0)
            return BODY_CUT;
        conn->in_start += n;
        conn->turn_bytes += n;
        conn->body_left -= n;
        return conn->body_left == 0 ? BODY_WHOLE : BODY_MORE;
    }
    size_t consumed = 0;
    const char *reason = NULL;
    enum http_chunked_result r =
        http_chunked_feed(&conn->chunked, data, length, &consumed, body_take, ex, &reason);
    conn->in_start += consumed;
    conn->turn_bytes += consumed;
    if (r == HTTP_CHUNKED_BAD && reason == NULL)
        return BODY_CUT; /* past twice the limit */
    if (r == HTTP_CHUNKED_BAD) {
        struct http_server *server = server_of(conn);
        conn->exchange = NULL;
        ex->receiving = false;
        __atomic_sub_fetch(&server->receiving_exchanges, 1, __ATOMIC_SEQ_CST);
        __atomic_sub_fetch(&server->open_exchanges, 1, __ATOMIC_SEQ_CST);
        http_conn_refuse(conn, ex->head_bytes + ex->head.target_offset, ex->head.path_length, 400,
                         reason);
        server->config.handlers->close(server->config.context, ex);
        return BODY_CUT;
    }
    return r == HTTP_CHUNKED_END ? BODY_WHOLE : BODY_MORE;
}

/* The request is whole: the server has it from now on. */
static void run(struct http_conn *conn)
{
    struct http_server *server = server_of(conn);
    struct http_exchange *ex = conn->exchange;
    reading_end(conn);
    conn->state = CONN_RUNNING;
    ex->receiving = false;
    __atomic_sub_fetch(&server->receiving_exchanges, 1, __ATOMIC_SEQ_CST);
    if (ex->body == ex->body_inline)
        ex->body[ex->body_length] = '\0';
    server->config.handlers->run(server->config.context, ex);
}

/* The exchange's answer is given: free it; the connection waits for the
 * next request (its timers start once the answer is out). */
static void exchange_done(struct http_conn *conn)
{
    free_exchange(conn);
    conn->state = CONN_HEAD;
    if (conn->write_failed)
        http_conn_close(conn);
}

static void finish_if_answered(struct http_conn *conn)
{
    struct http_exchange *ex = conn->exchange;
    if (ex != NULL && ex->answered && conn->state == CONN_RUNNING)
        exchange_done(conn);
}

void http_conn_after(struct http_conn *conn)
{
    finish_if_answered(conn);
    if (!conn->dead && conn->state != CONN_RUNNING)
        http_conn_serve(conn);
}

/* One step with the head: false when the turn must end here. */
static bool serve_head(struct http_conn *conn)
{
    size_t length = head_end(conn);
    if (length == 0) {
        size_t held = conn->in_length - conn->in_start;
        if (held >= HTTP_HEAD_BYTES_MAX) {
            http_conn_refuse(conn, NULL, 0, 431, "the request head is larger than 16 KiB");
            return true;
        }
        enum fill_result r = fill(conn, HTTP_HEAD_BYTES_MAX);
        if (r == FILL_END) {
            http_conn_close(conn); /* the client is done, or cut a request short */
            return false;
        }
        return r == FILL_MORE;
    }
    if (open_exchange(conn, length))
        head_taken(conn);
    return !conn->dead;
}

static bool serve_body(struct http_conn *conn)
{
    enum body_result r = body_step(conn);
    if (r == BODY_CUT) {
        if (!conn->dead && conn->exchange != NULL)
            http_conn_close(conn); /* a dropped body past twice the limit */
        return !conn->dead;
    }
    if (r == BODY_WHOLE) {
        run(conn);
        if (conn->peer_closed)
            notify_gone(conn); /* it closed before (or as) the request was read */
        finish_if_answered(conn);
        return !conn->dead;
    }
    enum fill_result f = fill(conn, HTTP_READ_BYTES);
    if (f == FILL_END) {
        http_conn_close(conn); /* cut short: dropped unanswered */
        return false;
    }
    return f == FILL_MORE;
}

void http_conn_serve(struct http_conn *conn)
{
    struct http_worker *w = conn->worker;
    uint32_t opened = 0;
    conn->turn_bytes = 0;
    while (!conn->dead) {
        if (conn->state == CONN_LINGER) {
            linger_read(conn);
            return;
        }
        if (conn->state == CONN_RUNNING || output_waiting(conn))
            break; /* one request at a time; the next once this answer is out */
        if (conn->state == CONN_HEAD && conn->close_after) {
            linger_begin(conn);
            continue;
        }
        if (conn->state == CONN_HEAD && !conn->reading.linked)
            reading_begin(conn); /* a new connection, or the last answer is out */
        if (conn->state == CONN_HEAD) {
            if (opened == HTTP_TURN_REQUESTS_MAX || conn->turn_bytes >= HTTP_TURN_BYTES_MAX) {
                http_worker_ready(w, conn); /* the others first; this one next turn */
                break;
            }
            if (!serve_head(conn))
                break;
            if (conn->state == CONN_BODY)
                opened++;
            continue;
        }
        assert(conn->state == CONN_BODY);
        if (!serve_body(conn))
            break;
    }
    in_park(conn);
}

void http_conn_event(struct http_conn *conn, uint32_t events)
{
    if (conn->dead)
        return;
    if (!conn->started) {
        conn->started = true;
        http_list_push(&conn->worker->all, &conn->all, 0);
    }
    if ((events & (EPOLLIN | EPOLLRDHUP)) != 0)
        conn->readable = true;
    if ((events & EPOLLRDHUP) != 0)
        conn->peer_closed = true;
    if ((events & (EPOLLERR | EPOLLHUP)) != 0) {
        conn->readable = true; /* a recv says how it ended */
        conn->peer_closed = true;
        conn->write_failed = true;
        conn->out_start = conn->out_length = 0;
        http_list_remove(&conn->worker->stalled, &conn->stalled);
    }
    bool drained = false;
    if ((events & EPOLLOUT) != 0 && output_waiting(conn))
        drained = http_conn_flush(conn);
    if (conn->state == CONN_RUNNING) {
        struct http_exchange *ex = conn->exchange;
        if (conn->peer_closed)
            notify_gone(conn);
        bool room = drained || (conn->out_length - conn->out_start < HTTP_STREAM_HIGH_WATER / 2);
        if ((events & EPOLLOUT) != 0 && ex->streaming && ex->on_wake != NULL && room)
            ex->on_wake(ex); /* room again: the producer may go on */
        http_conn_after(conn);
        return;
    }
    if (output_waiting(conn))
        return; /* the rest once the socket drains */
    if (conn->write_failed && conn->state != CONN_LINGER) {
        http_conn_close(conn);
        return;
    }
    http_conn_serve(conn);
}

/* ---- the transport's own refusals */

void http_conn_refuse(struct http_conn *conn, const char *path, size_t path_length, unsigned status,
                      const char *reason)
{
    struct http_server *server = conn->worker->server;
    __atomic_add_fetch(&server->stats_bad_requests, 1, __ATOMIC_RELAXED);
    char body[1024];
    const char *content_type = "application/json";
    struct http_header header = {NULL, NULL};
    size_t length =
        server->config.handlers->error_body(server->config.context, path, path_length, status,
                                            reason, body, sizeof body, &content_type, &header);
    assert(length <= sizeof body);
    char storage[HTTP_ANSWER_HEAD_BYTES];
    struct buffer head;
    buffer_init(&head, storage, sizeof storage);
    buffer_append_str(&head, "HTTP/1.1 ");
    buffer_append_u64(&head, status);
    buffer_append_char(&head, ' ');
    buffer_append_str(&head, http_reason_phrase(status));
    buffer_append_str(&head, "\r\nDate: ");
    buffer_append_str(&head, http_date_now());
    buffer_append_str(&head, "\r\nContent-Length: ");
    buffer_append_u64(&head, length);
    buffer_append_str(&head, "\r\nContent-Type: ");
    buffer_append_str(&head, content_type);
    if (header.name != NULL) {
        buffer_append_str(&head, "\r\n");
        buffer_append_str(&head, header.name);
        buffer_append_str(&head, ": ");
        buffer_append_str(&head, header.value);
    }
    buffer_append_str(&head, "\r\nConnection: close\r\n\r\n");
    assert(!head.failed);
    struct iovec parts[2] = {{head.data, head.length}, {body, length}};
    http_conn_send(conn, parts, 2);
    conn->close_after = true;
    conn->state = CONN_HEAD;
}
