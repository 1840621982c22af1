/* The workers (see http.h): each runs one epoll loop over its connections,
 * its queue of exchanges woken from other threads, its ready list (the
 * connections whose turn ended with work left) and its timer lists. Also
 * the server's start, quiesce and stop. */
#include "http_internal.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define WORKER_EVENTS 64
#define WORKER_SLEEP_MS_MAX 1000

#define CONN_OF(link, member)                                                                      \
    ((struct http_conn *)((char *)(link)-offsetof(struct http_conn, member)))

/* Closes the connections of one list whose deadline has passed. Each list
 * is in time order, so this stops at the first that has not. */
static uint64_t expire(struct http_list *list, size_t member, int64_t timeout_ms, int64_t now)
{
    uint64_t closed = 0;
    while (list->head != NULL && now - list->head->at_ms >= timeout_ms) {
        struct http_conn *conn = (struct http_conn *)((char *)list->head - member);
        http_list_remove(list, list->head);
        http_conn_close(conn);
        closed++;
    }
    return closed;
}

static void sweep(struct http_worker *w, int64_t now)
{
    const struct http_config *c = &w->server->config;
    uint64_t idle = expire(&w->reading, offsetof(struct http_conn, reading), c->request_ms, now);
    idle += expire(&w->activity, offsetof(struct http_conn, activity), c->idle_ms, now);
    uint64_t stalled = expire(&w->stalled, offsetof(struct http_conn, stalled), c->stall_ms, now);
    expire(&w->linger, offsetof(struct http_conn, linger), HTTP_LINGER_MS, now);
    __atomic_add_fetch(&w->server->stats_closed_idle, idle, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->server->stats_closed_stalled, stalled, __ATOMIC_RELAXED);
}

/* How long the loop may sleep: until the first deadline. */
static int sleep_ms(const struct http_worker *w, int64_t now)
{
    if (w->ready_head != NULL)
        return 0;
    const struct http_config *c = &w->server->config;
    int64_t next = now + WORKER_SLEEP_MS_MAX;
    const struct {
        const struct http_list *list;
        int64_t timeout_ms;
    } lists[] = {{&w->reading, c->request_ms},
                 {&w->activity, c->idle_ms},
                 {&w->stalled, c->stall_ms},
                 {&w->linger, HTTP_LINGER_MS}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const struct http_link *head = lists[i].list->head;
        if (head != NULL && head->at_ms + lists[i].timeout_ms < next)
            next = head->at_ms + lists[i].timeout_ms;
    }
    return next <= now ? 0 : (int)(next - now);
}

/* One more turn for each connection that was ready when this began. */
static void run_ready(struct http_worker *w)
{
    struct http_conn *conn = w->ready_head;
    w->ready_head = w->ready_tail = NULL;
    while (conn != NULL) {
        struct http_conn *next = conn->ready_next;
        conn->in_ready = false;
        conn->ready_next = NULL;
        if (!conn->dead)
            http_conn_serve(conn);
        conn = next;
    }
}

/* The exchanges woken so far, on_wake each. */
static void take_wakes(struct http_worker *w)
{
    pthread_mutex_lock(&w->mutex);
    struct http_exchange *ex = w->wake_head;
    w->wake_head = w->wake_tail = NULL;
    pthread_mutex_unlock(&w->mutex);
    while (ex != NULL) {
        pthread_mutex_lock(&w->mutex);
        struct http_exchange *next = ex->wake_next;
        ex->wake_queued = false;
        bool freeing = ex->freeing;
        pthread_mutex_unlock(&w->mutex);
        struct http_server *server = w->server;
        if (freeing) {
            server->config.handlers->close(server->config.context, ex);
        } else {
            struct http_conn *conn = ex->conn;
            assert(conn->exchange == ex);
            assert(ex->on_wake != NULL);
            ex->on_wake(ex);
            http_conn_after(conn);
        }
        ex = next;
    }
}

/* The eventfd's event: read it, then take the queue. */
static void run_wakes(struct http_worker *w)
{
    uint64_t count;
    while (read(w->wake_fd, &count, sizeof count) < 0 && errno == EINTR)
        ;
    take_wakes(w);
}

_Static_assert(HTTP_WORKERS_MAX <= 64, "a wake owed is a bit of a uint64_t");

/* Pays the wakes this worker's thread owes other workers (http_wake): a
 * worker asleep in epoll_wait has its woken exchanges answered here, on
 * this thread, under its run_lock, as its own loop would (no eventfd
 * write, no thread woken, the answer out sooner); it is woken only if what
 * was done leaves it work or a timer sooner than it sleeps. A worker that
 * is running gets the eventfd write. Wakes owed meanwhile (answering
 * one exchange may wake others) are paid in the same call. */
static void pay_wakes(struct http_worker *home)
{
    uint64_t owed;
    while ((owed = http_wakes_owed_take()) != 0) {
        for (; owed != 0; owed &= owed - 1) {
            struct http_worker *w = &home->server->workers[__builtin_ctzll(owed)];
            if (w == home) {
                home->wakes_local = true; /* the loop takes them before it sleeps */
                continue;
            }
            if (pthread_mutex_trylock(&w->run_lock) != 0) {
                http_worker_signal(w); /* it runs: it reads the eventfd next */
                continue;
            }
            bool signal = w->loop_done;
            if (!signal) {
                http_worker_become(w);
                take_wakes(w);
                while (w->wakes_local) {
                    w->wakes_local = false;
                    take_wakes(w);
                }
                http_worker_become(home);
                int64_t now = http_now_ms();
                signal = now + sleep_ms(w, now) < w->sleep_until_ms;
                __atomic_add_fetch(&home->server->stats_wakes_taken_over, 1, __ATOMIC_RELAXED);
            }
            pthread_mutex_unlock(&w->run_lock);
            if (signal)
                http_worker_signal(w);
        }
    }
}

/* ---- the loop */

static void bury_round(struct http_worker *w)
{
    while (w->dead != NULL) {
        struct http_conn *next = w->dead->dead_next;
        free(w->dead);
        w->dead = next;
    }
}

/* Once the server quiesces: idle connections close now. */
static void quiesce_round(struct http_worker *w)
{
    w->quiesced = true;
    struct http_link *link = w->activity.head;
    while (link != NULL) {
        struct http_link *next = link->next;
        struct http_conn *conn = CONN_OF(link, activity);
        if (conn->state == CONN_HEAD && conn->in_length == conn->in_start)
            http_conn_close(conn);
        link = next;
    }
}

static void *worker_main(void *argument)
{
    struct http_worker *w = argument;
    struct epoll_event events[WORKER_EVENTS];
    http_worker_enter(w);
    pthread_mutex_lock(&w->run_lock);
    while (!__atomic_load_n(&w->server->stopping, __ATOMIC_ACQUIRE)) {
        int64_t now = http_now_ms();
        int timeout_ms = sleep_ms(w, now);
        w->sleep_until_ms = now + timeout_ms;
        pthread_mutex_unlock(&w->run_lock); /* others may answer its wakes meanwhile */
        int n = epoll_wait(w->epoll_fd, events, WORKER_EVENTS, timeout_ms);
        pthread_mutex_lock(&w->run_lock);
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL)
                run_wakes(w);
            else
                http_conn_event(events[i].data.ptr, events[i].events);
            pay_wakes(w);
        }
        if (w->ready_head != NULL) {
            run_ready(w);
            pay_wakes(w);
        }
        while (w->wakes_local) { /* queued by this thread, with no eventfd write to read */
            w->wakes_local = false;
            take_wakes(w);
            if (w->ready_head != NULL)
                run_ready(w);
            pay_wakes(w);
        }
        if (!w->quiesced && __atomic_load_n(&w->server->quiescing, __ATOMIC_ACQUIRE))
            quiesce_round(w);
        sweep(w, http_now_ms());
        pay_wakes(w);
        bury_round(w);
    }
    w->loop_done = true;
    pthread_mutex_unlock(&w->run_lock);
    run_wakes(w);
    pay_wakes(w);
    bury_round(w);
    return NULL;
}

/* The listener's hand-over, on its thread: the worker's epoll set takes
 * the socket; the worker owns the connection from its first event. */
static void adopt(void *context, int fd)
{
    struct http_server *server = context;
    uint32_t index =
        __atomic_fetch_add(&server->next_worker, 1, __ATOMIC_RELAXED) % server->worker_count;
    struct http_worker *w = &server->workers[index];
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct http_conn *conn = http_conn_new(w, fd);
    struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                .data.ptr = conn};
    if (conn == NULL || epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        free(conn);
        close(fd);
        http_listener_closed_one(&server->listener);
        return;
    }
    __atomic_add_fetch(&server->stats_connections, 1, __ATOMIC_RELAXED);
}

static void worker_free(struct http_worker *w)
{
    if (w->epoll_fd >= 0)
        close(w->epoll_fd);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    pthread_mutex_destroy(&w->mutex);
    pthread_mutex_destroy(&w->run_lock);
}

static int workers_start(struct http_server *server)
{
    for (uint32_t i = 0; i < server->worker_count; i++) {
        struct http_worker *w = &server->workers[i];
        w->server = server;
        pthread_mutex_init(&w->mutex, NULL);
        pthread_mutex_init(&w->run_lock, NULL);
        w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    }
    for (uint32_t i = 0; i < server->worker_count; i++) {
        struct http_worker *w = &server->workers[i];
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
        int error = 0;
        if (w->epoll_fd < 0 || w->wake_fd < 0 ||
            epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->wake_fd, &event) != 0)
            error = errno;
        else
            error = pthread_create(&w->thread, NULL, worker_main, w);
        if (error != 0) {
            errno = error;
            return -1;
        }
        w->started = true;
    }
    return 0;
}

int http_start(const struct http_config *config, struct http_server **out, char *error,
               size_t error_size)
{
    assert(config->workers >= 1);
    assert(config->workers <= HTTP_WORKERS_MAX);
    assert(config->idle_ms > 0);
    assert(config->request_ms > 0);
    assert(config->stall_ms > 0);
    *out = NULL;
    struct http_server *server =
        calloc(1, sizeof *server + config->workers * sizeof server->workers[0]);
    if (server == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    server->config = *config;
    server->worker_count = config->workers;
    for (uint32_t i = 0; i < config->workers; i++)
        server->workers[i].epoll_fd = server->workers[i].wake_fd = -1;
    if (http_listener_open(&server->listener, config->address, config->address_length,
                           config->max_connections) != 0) {
        snprintf(error, error_size, "%s", strerror(errno));
        http_listener_destroy(&server->listener);
        free(server);
        return -1;
    }
    server->listener.adopt = adopt;
    server->listener.adopt_context = server;
    if (workers_start(server) != 0 || http_listener_start(&server->listener) != 0) {
        snprintf(error, error_size, "cannot start the HTTP threads: %s", strerror(errno));
        http_stop(server);
        return -1;
    }
    *out = server;
    return 0;
}

uint16_t http_port(const struct http_server *server)
{
    return server->listener.port;
}

void http_quiesce(struct http_server *server)
{
    /* Draining before the listener closes: a client that sees its connect
     * refused must find every answer after it closing its connection. */
    __atomic_store_n(&server->quiescing, 1, __ATOMIC_RELEASE);
    http_listener_close(&server->listener);
    for (uint32_t i = 0; i < server->worker_count; i++) {
        if (server->workers[i].started)
            http_worker_signal(&server->workers[i]);
    }
}

void http_counts(const struct http_server *server, int64_t *open, int64_t *receiving)
{
    *open = __atomic_load_n(&server->open_exchanges, __ATOMIC_SEQ_CST);
    *receiving = __atomic_load_n(&server->receiving_exchanges, __ATOMIC_SEQ_CST);
}

void http_stats(const struct http_server *server, struct http_stats *out)
{
    out->connections = __atomic_load_n(&server->stats_connections, __ATOMIC_RELAXED);
    out->requests = __atomic_load_n(&server->stats_requests, __ATOMIC_RELAXED);
    out->bad_requests = __atomic_load_n(&server->stats_bad_requests, __ATOMIC_RELAXED);
    out->closed_idle = __atomic_load_n(&server->stats_closed_idle, __ATOMIC_RELAXED);
    out->closed_stalled = __atomic_load_n(&server->stats_closed_stalled, __ATOMIC_RELAXED);
    out->wakes_taken_over = __atomic_load_n(&server->stats_wakes_taken_over, __ATOMIC_RELAXED);
}

/* Closes what a stopped worker still holds. Every exchange has finished its
 * work by now (http_stop's rule): an answer not yet out is dropped. */
static void worker_close_all(struct http_worker *w)
{
    /* A connection adopted after the worker's last turn is not in `all`
     * yet: its first event is still in the epoll set. Taken here, so that
     * it is closed with the rest (a few rounds: sockets whose peers still
     * write report new events). */
    struct epoll_event events[WORKER_EVENTS];
    for (int round = 0; round < 8; round++) {
        int n = epoll_wait(w->epoll_fd, events, WORKER_EVENTS, 0);
        for (int i = 0; i < n; i++) {
            struct http_conn *conn = events[i].data.ptr;
            if (conn != NULL && !conn->started) {
                conn->started = true;
                http_list_push(&w->all, &conn->all, 0);
            }
        }
        if (n < WORKER_EVENTS)
            break;
    }
    while (w->all.head != NULL)
        http_conn_discard(CONN_OF(w->all.head, all));
}

void http_stop(struct http_server *server)
{
    if (server == NULL)
        return;
    http_listener_close(&server->listener);
    __atomic_store_n(&server->stopping, 1, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < server->worker_count; i++) {
        struct http_worker *w = &server->workers[i];
        if (!w->started)
            continue;
        http_worker_signal(w);
        pthread_join(w->thread, NULL);
    }
    for (uint32_t i = 0; i < server->worker_count; i++) {
        worker_close_all(&server->workers[i]);
        worker_free(&server->workers[i]);
    }
    http_listener_destroy(&server->listener);
    free(server);
}
