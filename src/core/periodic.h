/* A thread that calls one function at a fixed interval until stopped: the
 * server's backend and registry tick, the console's spend sampler. The wait
 * runs on CLOCK_MONOTONIC, so a step of the wall clock neither skips nor
 * doubles a call. */
#ifndef LLMLIMIT_PERIODIC_H
#define LLMLIMIT_PERIODIC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef void (*periodic_fn)(void *context);

/* Zeroed before periodic_start; owned by whoever embeds it. */
struct periodic {
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    bool started;
    bool stopping; /* under mutex */
    int64_t interval_ms;
    periodic_fn call;
    void *context;
};

/* Starts the thread, which calls call(context) every interval_ms (the first
 * time one interval after the start), never while holding the mutex.
 * Returns 0, or -1 when the thread cannot be created (nothing to stop). */
int periodic_start(struct periodic *p, int64_t interval_ms, periodic_fn call, void *context);

/* Stops the thread after its current call and joins it; a no-op when it was
 * never started. It can be started again after. */
void periodic_stop(struct periodic *p);

#endif
