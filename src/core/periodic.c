/* periodic.h: one thread waking at a fixed interval on CLOCK_MONOTONIC,
 * and its stop; the caller's function runs outside the thread's mutex so a
 * slow call never delays periodic_stop more than that call. */
#include "periodic.h"

#include <assert.h>

#include "core/clock.h"

static void *periodic_main(void *context)
{
    struct periodic *p = context;
    pthread_mutex_lock(&p->mutex);
    while (!p->stopping) {
        struct timespec deadline = clock_deadline(CLOCK_MONOTONIC, p->interval_ms * 1000);
        pthread_cond_timedwait(&p->cond, &p->mutex, &deadline);
        if (p->stopping)
            break;
        pthread_mutex_unlock(&p->mutex);
        p->call(p->context);
        pthread_mutex_lock(&p->mutex);
    }
    pthread_mutex_unlock(&p->mutex);
    return NULL;
}

int periodic_start(struct periodic *p, int64_t interval_ms, periodic_fn call, void *context)
{
    assert(!p->started);
    assert(interval_ms > 0);
    assert(call != NULL);
    p->interval_ms = interval_ms;
    p->call = call;
    p->context = context;
    p->stopping = false;
    pthread_mutex_init(&p->mutex, NULL);
    clock_cond_init_monotonic(&p->cond);
    if (pthread_create(&p->thread, NULL, periodic_main, p) != 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->mutex);
        return -1;
    }
    p->started = true;
    return 0;
}

void periodic_stop(struct periodic *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mutex);
    p->stopping = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mutex);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mutex);
    p->started = false;
}
