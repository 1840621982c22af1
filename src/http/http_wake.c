/* What other parts of the server hand a worker: exchanges woken from any
 * thread (the wake queue, under the worker's mutex, with one eventfd write
 * for all queued while it was busy; from another worker's thread, that
 * thread answers them itself when this worker sleeps) and connections
 * whose turn ended with work left (the ready list, the worker's thread
 * only). The worker's loop (http_worker.c) takes both. */
#include "http_internal.h"

#include <assert.h>
#include <errno.h>
#include <unistd.h>

#include "util/queue.h"

void http_worker_ready(struct http_worker *w, struct http_conn *conn)
{
    if (conn->in_ready || conn->dead)
        return;
    conn->in_ready = true;
    FIFO_PUSH(w->ready_head, w->ready_tail, conn, ready_next);
}

/* The worker whose state this thread runs now (its own loop's, or one it
 * took over while that one slept), if any; the worker whose loop it runs;
 * and the workers it owes a wake, one bit per index. */
static _Thread_local struct http_worker *this_worker;
static _Thread_local struct http_worker *home_worker;
static _Thread_local uint64_t owed;

void http_worker_enter(struct http_worker *w)
{
    this_worker = home_worker = w;
}

void http_worker_become(struct http_worker *w)
{
    this_worker = w;
}

uint64_t http_wakes_owed_take(void)
{
    uint64_t taken = owed;
    owed = 0;
    return taken;
}

void http_worker_signal(struct http_worker *w)
{
    uint64_t one = 1;
    while (write(w->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

void http_wake(struct http_exchange *ex)
{
    struct http_worker *w = ex->conn->worker;
    pthread_mutex_lock(&w->mutex);
    bool signal = false;
    if (!ex->wake_queued) {
        assert(!ex->freeing);
        ex->wake_queued = true;
        signal = w->wake_head == NULL;
        FIFO_PUSH(w->wake_head, w->wake_tail, ex, wake_next);
    }
    pthread_mutex_unlock(&w->mutex);
    if (signal && this_worker == w) {
        /* Woken by its own thread (a complete on this worker handed the
         * slot to a waiter on it): the loop takes the queue before it
         * sleeps again, with no eventfd round. Wakes from other threads
         * meanwhile find the queue not empty: they rely on the same. */
        w->wakes_local = true;
        return;
    }
    if (signal && home_worker != NULL) {
        /* Woken by another worker's thread (a complete there handed the
         * slot to a waiter here): that thread's loop pays the wake at its
         * next step, answering the exchange itself if this worker sleeps
         * (pay_wakes, http_worker.c). */
        owed |= UINT64_C(1) << (w - w->server->workers);
        return;
    }
    if (signal)
        http_worker_signal(w);
}

/* Frees an exchange now, or once it leaves the wake queue. */
bool http_worker_release(struct http_worker *w, struct http_exchange *ex)
{
    pthread_mutex_lock(&w->mutex);
    bool queued = ex->wake_queued;
    if (queued)
        ex->freeing = true;
    pthread_mutex_unlock(&w->mutex);
    return !queued;
}

bool http_draining(const struct http_exchange *ex)
{
    return __atomic_load_n(&ex->conn->worker->server->quiescing, __ATOMIC_ACQUIRE) != 0;
}
