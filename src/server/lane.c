/* The direct path (see lane.h): worker threads, their connections, and the
 * hand-over to libmicrohttpd. */
#include "lane.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lane_head.h"
#include "server.h"
#include "util/log.h"

/* What one look at a socket reads: a direct request must fit, head and
 * body (a single reserve is a few hundred bytes). */
#define LANE_PEEK_BYTES 4096
#define LANE_EVENTS 64
#define LANE_SWEEP_MS 1000
#define LANE_PATH_MAX 64
/* How long a request may sit partly arrived before libmicrohttpd takes the
 * connection. Its pieces come close together; but unread bytes hold the
 * socket's receive memory, and a client pipelining large writes can find the
 * window shut until they are read, so the wait must be short. */
#define LANE_PARTIAL_MS 20

struct lane_conn {
    int fd;
    struct lane_worker *worker;
    struct lane_conn *previous; /* the worker's list, under its mutex */
    struct lane_conn *next;
    struct lane_conn *dead_next; /* freed once this round of events is done */
    struct exchange *exchange;   /* the request being answered, or NULL */
    bool input;                  /* bytes came while one was being answered */
    bool close;                  /* close once the answer is out */
    bool dead;                   /* closed or handed over */
    bool peer_closed;            /* the client will send nothing more */
    int64_t idle_since_ms;
    int64_t partial_since_ms;           /* waiting for the rest of a request; 0: not */
    struct lane_conn *partial_previous; /* the worker's partial list (its thread's) */
    struct lane_conn *partial_next;
    char *out; /* answer bytes the socket did not take yet */
    size_t out_length;
    size_t out_sent;
    int64_t out_moved_ms; /* when the socket last took some of them */
    socklen_t address_length;
    struct sockaddr_storage address;
};

struct lane_worker {
    struct lane *lane;
    int epoll_fd;
    int wake_fd;
    pthread_t thread;
    bool started;
    pthread_mutex_t mutex; /* conns and the queue */
    struct lane_conn *conns;
    struct exchange *queue; /* answered by the backend, linked by lane_next */
    struct exchange *queue_tail;
    struct lane_conn *dead;    /* this thread's only */
    struct lane_conn *partial; /* this thread's only: waiting for the rest */
};

struct lane {
    struct server *server;
    int64_t idle_ms;  /* a connection with no request in hand */
    int64_t stall_ms; /* an answer the client does not read */
    uint32_t count;
    uint32_t next; /* atomic: the next worker to adopt */
    int stopping;  /* atomic */
    uint64_t served;
    uint64_t handed;
    struct lane_worker workers[];
};

static int64_t now_ms(void)
{
    return clock_monotonic_ms();
}

static void unlink_conn(struct lane_conn *conn)
{
    struct lane_worker *w = conn->worker;
    pthread_mutex_lock(&w->mutex);
    if (conn->previous != NULL)
        conn->previous->next = conn->next;
    else
        w->conns = conn->next;
    if (conn->next != NULL)
        conn->next->previous = conn->previous;
    conn->previous = conn->next = NULL;
    pthread_mutex_unlock(&w->mutex);
}

/* Waiting for the rest of a request: true while it may still come. */
static bool partial_wait(struct lane_conn *conn)
{
    int64_t now = now_ms();
    if (conn->partial_since_ms != 0)
        return now - conn->partial_since_ms < LANE_PARTIAL_MS;
    struct lane_worker *w = conn->worker;
    conn->partial_since_ms = now;
    conn->partial_next = w->partial;
    if (conn->partial_next != NULL)
        conn->partial_next->partial_previous = conn;
    w->partial = conn;
    return true;
}

static void partial_done(struct lane_conn *conn)
{
    if (conn->partial_since_ms == 0)
        return;
    struct lane_worker *w = conn->worker;
    if (conn->partial_previous != NULL)
        conn->partial_previous->partial_next = conn->partial_next;
    else
        w->partial = conn->partial_next;
    if (conn->partial_next != NULL)
        conn->partial_next->partial_previous = conn->partial_previous;
    conn->partial_previous = conn->partial_next = NULL;
    conn->partial_since_ms = 0;
}

static void bury(struct lane_conn *conn)
{
    assert(!conn->dead);
    assert(conn->exchange == NULL);
    partial_done(conn);
    conn->dead = true;
    conn->dead_next = conn->worker->dead;
    conn->worker->dead = conn;
}

static void conn_close(struct lane_conn *conn)
{
    struct server *server = conn->worker->lane->server;
    unlink_conn(conn);
    close(conn->fd); /* leaves the epoll set with it */
    free(conn->out);
    conn->out = NULL;
    listener_connection_closed(&server->listener);
    bury(conn);
}

/* The request at the head of the socket is not ours: libmicrohttpd serves
 * this connection from now on, from its first unread byte. */
static void hand_over(struct lane_conn *conn)
{
    struct lane *lane = conn->worker->lane;
    struct server *server = lane->server;
    epoll_ctl(conn->worker->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    unlink_conn(conn);
    listener_connection_handed_back(&server->listener);
    __atomic_add_fetch(&lane->handed, 1, __ATOMIC_RELAXED);
    /* libmicrohttpd owns the socket now, and closes it on failure. */
    if (MHD_add_connection(server->daemon, conn->fd, (struct sockaddr *)&conn->address,
                           conn->address_length) != MHD_YES)
        listener_connection_not_started(&server->listener);
    bury(conn);
}

static void serve(struct lane_conn *conn);

/* After an answer went out whole. */
static void answered(struct lane_conn *conn)
{
    assert(conn->exchange == NULL);
    assert(conn->out == NULL);
    if (conn->close) {
        conn_close(conn);
        return;
    }
    conn->idle_since_ms = now_ms();
    if (conn->input) {
        conn->input = false;
        serve(conn);
    }
}

static void watch_output(struct lane_conn *conn, bool writable)
{
    struct epoll_event event = {
        .events = EPOLLIN | EPOLLRDHUP | EPOLLET | (writable ? EPOLLOUT : 0), .data.ptr = conn};
    if (epoll_ctl(conn->worker->epoll_fd, EPOLL_CTL_MOD, conn->fd, &event) != 0)
        conn->close = true;
}

/* Sends what is left of an answer; true when it is all out (or the
 * connection failed: then it is closing). */
static bool flush(struct lane_conn *conn)
{
    while (conn->out_sent < conn->out_length) {
        ssize_t n = send(conn->fd, conn->out + conn->out_sent, conn->out_length - conn->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (n <= 0) {
            conn->close = true;
            break;
        }
        conn->out_sent += (size_t)n;
        conn->out_moved_ms = now_ms();
    }
    free(conn->out);
    conn->out = NULL;
    watch_output(conn, false);
    return true;
}

void lane_send(struct exchange *ex, const char *head, size_t head_length, const char *body,
               size_t body_length, bool close_after)
{
    struct lane_conn *conn = ex->lane;
    assert(conn != NULL);
    assert(conn->exchange == ex);
    assert(conn->out == NULL);
    if (close_after)
        conn->close = true;
    struct iovec parts[2] = {{(void *)head, head_length}, {(void *)body, body_length}};
    struct msghdr message = {.msg_iov = parts, .msg_iovlen = body_length > 0 ? 2 : 1};
    size_t total = head_length + body_length;
    ssize_t n;
    do
        n = sendmsg(conn->fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n >= 0 && (size_t)n == total)
        return;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        conn->close = true; /* the client is gone */
        return;
    }
    /* The socket is full (a client that does not read): keep the rest and
     * send it as the socket drains. */
    size_t sent = n > 0 ? (size_t)n : 0;
    size_t left = total - sent;
    conn->out = malloc(left);
    if (conn->out == NULL) {
        conn->close = true;
        return;
    }
    if (sent < head_length) {
        memcpy(conn->out, head + sent, head_length - sent);
        if (body_length > 0)
            memcpy(conn->out + (head_length - sent), body, body_length);
    } else {
        memcpy(conn->out, body + (sent - head_length), left);
    }
    conn->out_length = left;
    conn->out_sent = 0;
    conn->out_moved_ms = now_ms();
    watch_output(conn, true);
}

/* The exchange is answered: free it, and go on with the connection. */
static void finish(struct lane_conn *conn)
{
    struct exchange *ex = conn->exchange;
    assert(ex != NULL);
    assert(ex->status != 0);
    conn->exchange = NULL;
    exchange_complete(ex);
    if (conn->out == NULL)
        answered(conn);
}

/* The route of a direct request, or NULL. */
static const struct route *direct_route(struct server *server, const char *data,
                                        const struct lane_head *head)
{
    if (head->path_length >= LANE_PATH_MAX)
        return NULL;
    char path[LANE_PATH_MAX];
    memcpy(path, data + head->path_offset, head->path_length);
    path[head->path_length] = '\0';
    const char *key = NULL;
    const struct route *route = router_find(server->router, path, &key);
    if ((route->flags & ROUTE_DIRECT) == 0 || route->handler == NULL ||
        (route->methods & METHOD_POST) == 0 || key != NULL)
        return NULL;
    return route;
}

/* Takes requests off the socket while they are whole and ours. */
static void serve(struct lane_conn *conn)
{
    struct server *server = conn->worker->lane->server;
    while (!conn->dead && conn->exchange == NULL && conn->out == NULL) {
        char data[LANE_PEEK_BYTES];
        ssize_t n = recv(conn->fd, data, sizeof data, MSG_PEEK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            conn_close(conn); /* the client closed, or the connection failed */
            return;
        }
        struct lane_head head;
        int parsed = lane_head_parse(data, (size_t)n, &head);
        if (parsed == LANE_HEAD_WHOLE && (head.content_length > server->config.max_body_bytes ||
                                          head.content_length > sizeof data - head.length))
            parsed = LANE_HEAD_REFUSED; /* libmicrohttpd refuses it, or it is too big here */
        else if (parsed == LANE_HEAD_WHOLE && head.content_length > (size_t)n - head.length)
            parsed = LANE_HEAD_PARTIAL; /* the body is on its way */
        if (parsed == LANE_HEAD_PARTIAL && conn->peer_closed) {
            conn_close(conn); /* a request cut short: dropped unanswered, as MHD does */
            return;
        }
        if (parsed == LANE_HEAD_PARTIAL && (size_t)n < sizeof data) {
            if (partial_wait(conn))
                return;                 /* the rest wakes the worker */
            parsed = LANE_HEAD_REFUSED; /* late: libmicrohttpd waits for it */
        }
        partial_done(conn);
        const struct route *route =
            parsed == LANE_HEAD_WHOLE ? direct_route(server, data, &head) : NULL;
        if (route == NULL) {
            hand_over(conn);
            return;
        }
        size_t total = head.length + (size_t)head.content_length;
        ssize_t taken;
        do
            taken = recv(conn->fd, data, total, 0);
        while (taken < 0 && errno == EINTR);
        if (taken < 0 || (size_t)taken != total) {
            conn_close(conn); /* peeked bytes are there to take: never */
            return;
        }
        if (head.close)
            conn->close = true;
        if ((size_t)n > total)
            conn->input = true; /* a pipelined request is waiting */
        struct exchange *ex = exchange_direct(server, conn, route, data, &head);
        if (ex == NULL) {
            conn_close(conn); /* out of memory: dropped, as libmicrohttpd does */
            return;
        }
        conn->exchange = ex;
        /* Counted before its answer can go out: a client that has the
         * answer finds it counted. */
        __atomic_add_fetch(&conn->worker->lane->served, 1, __ATOMIC_RELAXED);
        exchange_direct_run(ex);
        if (ex->status == 0)
            return; /* the backend answers later (lane_resume) */
        bool more = conn->input;
        conn->input = false;
        finish(conn);
        if (!more || conn->dead)
            return;
        if (conn->out != NULL) {
            conn->input = true; /* served once the answer is out */
            return;
        }
    }
}

void lane_resume(struct exchange *ex)
{
    struct lane_worker *w = ex->lane->worker;
    pthread_mutex_lock(&w->mutex);
    bool wake = w->queue == NULL;
    ex->lane_next = NULL;
    if (w->queue_tail != NULL)
        w->queue_tail->lane_next = ex;
    else
        w->queue = ex;
    w->queue_tail = ex;
    pthread_mutex_unlock(&w->mutex);
    if (wake) {
        uint64_t one = 1;
        while (write(w->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
}

static void answer_queue(struct lane_worker *w)
{
    uint64_t count;
    while (read(w->wake_fd, &count, sizeof count) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&w->mutex);
    struct exchange *ex = w->queue;
    w->queue = w->queue_tail = NULL;
    pthread_mutex_unlock(&w->mutex);
    while (ex != NULL) {
        struct exchange *next = ex->lane_next;
        struct lane_conn *conn = ex->lane;
        assert(conn->exchange == ex);
        exchange_direct_resumed(ex);
        assert(ex->status != 0);
        finish(conn);
        ex = next;
    }
}

static void on_event(struct lane_conn *conn, uint32_t events)
{
    if (conn->dead)
        return;
    if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0)
        conn->peer_closed = true;
    if (conn->out != NULL) {
        if ((events & EPOLLIN) != 0)
            conn->input = true;
        if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0 && flush(conn) &&
            conn->exchange == NULL)
            answered(conn);
        return;
    }
    if (conn->exchange != NULL) {
        conn->input = true; /* served once the answer is out */
        return;
    }
    serve(conn);
}

/* Closes connections idle past the request deadline, and those whose
 * client has not read its answer for the connection timeout; never one
 * whose answer is being prepared. */
static void sweep(struct lane_worker *w, int64_t now)
{
    for (;;) {
        struct lane_conn *idle = NULL;
        pthread_mutex_lock(&w->mutex);
        for (struct lane_conn *c = w->conns; c != NULL; c = c->next) {
            if (c->exchange == NULL &&
                (c->out != NULL ? now - c->out_moved_ms >= w->lane->stall_ms
                                : now - c->idle_since_ms >= w->lane->idle_ms)) {
                idle = c;
                break;
            }
        }
        pthread_mutex_unlock(&w->mutex);
        if (idle == NULL)
            return;
        conn_close(idle);
    }
}

/* Hands over the connections whose request is late in coming whole. */
static void partial_sweep(struct lane_worker *w, int64_t now)
{
    struct lane_conn *conn = w->partial;
    while (conn != NULL) {
        struct lane_conn *next = conn->partial_next;
        if (now - conn->partial_since_ms >= LANE_PARTIAL_MS)
            hand_over(conn);
        conn = next;
    }
}

static void bury_round(struct lane_worker *w)
{
    while (w->dead != NULL) {
        struct lane_conn *next = w->dead->dead_next;
        free(w->dead);
        w->dead = next;
    }
}

static void *worker_main(void *argument)
{
    struct lane_worker *w = argument;
    struct epoll_event events[LANE_EVENTS];
    int64_t next_sweep = now_ms() + LANE_SWEEP_MS;
    while (!__atomic_load_n(&w->lane->stopping, __ATOMIC_ACQUIRE)) {
        int n = epoll_wait(w->epoll_fd, events, LANE_EVENTS,
                           w->partial != NULL ? LANE_PARTIAL_MS : LANE_SWEEP_MS);
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL)
                answer_queue(w);
            else
                on_event(events[i].data.ptr, events[i].events);
        }
        int64_t now = now_ms();
        if (w->partial != NULL)
            partial_sweep(w, now);
        if (now >= next_sweep) {
            sweep(w, now);
            next_sweep = now + LANE_SWEEP_MS;
        }
        bury_round(w);
    }
    answer_queue(w); /* none is left: every backend call has finished */
    bury_round(w);
    return NULL;
}

void lane_adopt(void *context, int fd, const struct sockaddr *address, socklen_t address_length)
{
    struct lane *lane = context;
    struct server *server = lane->server;
    struct lane_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL || address_length > sizeof conn->address) {
        free(conn);
        close(fd);
        listener_connection_not_started(&server->listener);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn->fd = fd;
    memcpy(&conn->address, address, address_length);
    conn->address_length = address_length;
    conn->idle_since_ms = now_ms();
    uint32_t index = __atomic_fetch_add(&lane->next, 1, __ATOMIC_RELAXED) % lane->count;
    struct lane_worker *w = &lane->workers[index];
    conn->worker = w;
    listener_connection_started(&server->listener);
    pthread_mutex_lock(&w->mutex);
    conn->next = w->conns;
    if (w->conns != NULL)
        w->conns->previous = conn;
    w->conns = conn;
    pthread_mutex_unlock(&w->mutex);
    struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = conn};
    if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        unlink_conn(conn);
        close(fd);
        listener_connection_closed(&server->listener);
        free(conn);
    }
}

void lane_counts(const struct lane *lane, uint64_t *served, uint64_t *handed)
{
    *served = __atomic_load_n(&lane->served, __ATOMIC_RELAXED);
    *handed = __atomic_load_n(&lane->handed, __ATOMIC_RELAXED);
}

static void worker_free(struct lane_worker *w)
{
    while (w->conns != NULL) {
        struct lane_conn *conn = w->conns;
        assert(conn->exchange == NULL);
        w->conns = conn->next;
        close(conn->fd);
        free(conn->out);
        listener_connection_closed(&w->lane->server->listener);
        free(conn);
    }
    if (w->epoll_fd >= 0)
        close(w->epoll_fd);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    pthread_mutex_destroy(&w->mutex);
}

void lane_stop(struct lane *lane)
{
    if (lane == NULL)
        return;
    __atomic_store_n(&lane->stopping, 1, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < lane->count; i++) {
        struct lane_worker *w = &lane->workers[i];
        if (!w->started)
            continue;
        uint64_t one = 1;
        while (write(w->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
            ;
        pthread_join(w->thread, NULL);
    }
    for (uint32_t i = 0; i < lane->count; i++)
        worker_free(&lane->workers[i]);
    free(lane);
}

struct lane *lane_start(struct server *server, uint32_t workers, int64_t idle_ms, int64_t stall_ms)
{
    assert(workers >= 1);
    assert(idle_ms > 0);
    assert(stall_ms > 0);
    struct lane *lane = calloc(1, sizeof *lane + workers * sizeof lane->workers[0]);
    if (lane == NULL)
        return NULL;
    lane->server = server;
    lane->idle_ms = idle_ms;
    lane->stall_ms = stall_ms;
    lane->count = workers;
    for (uint32_t i = 0; i < workers; i++) {
        struct lane_worker *w = &lane->workers[i];
        w->lane = lane;
        pthread_mutex_init(&w->mutex, NULL);
        w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    }
    for (uint32_t i = 0; i < workers; i++) {
        struct lane_worker *w = &lane->workers[i];
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
        int error = 0;
        if (w->epoll_fd < 0 || w->wake_fd < 0 ||
            epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->wake_fd, &event) != 0)
            error = errno;
        else
            error = pthread_create(&w->thread, NULL, worker_main, w);
        if (error != 0) {
            lane_stop(lane);
            errno = error;
            return NULL;
        }
        w->started = true;
    }
    return lane;
}
