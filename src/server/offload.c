/* The offload thread's queue: a ring of jobs allocated at start, a mutex
 * and a condition. A job may block as long as it likes (it holds only the
 * jobs behind it); the HTTP worker that handed it over is free meanwhile. */
#include "offload.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct offload_job {
    offload_fn run;
    void *context;
};

struct offload {
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    bool stopping;
    uint32_t jobs_max;
    uint32_t head;  /* the oldest job */
    uint32_t count; /* jobs waiting */
    struct offload_job *jobs;
};

static void *offload_main(void *argument)
{
    struct offload *o = argument;
    pthread_mutex_lock(&o->mutex);
    for (;;) {
        while (o->count == 0 && !o->stopping)
            pthread_cond_wait(&o->wake, &o->mutex);
        if (o->count == 0)
            break; /* stopping, and nothing is left */
        assert(o->count <= o->jobs_max);
        struct offload_job job = o->jobs[o->head];
        o->head = (o->head + 1) % o->jobs_max;
        o->count--;
        pthread_mutex_unlock(&o->mutex);
        job.run(job.context);
        pthread_mutex_lock(&o->mutex);
    }
    pthread_mutex_unlock(&o->mutex);
    return NULL;
}

int offload_start(uint32_t jobs_max, struct offload **out)
{
    assert(jobs_max >= 1);
    struct offload *o = calloc(1, sizeof *o);
    struct offload_job *jobs = calloc(jobs_max, sizeof *jobs);
    if (o == NULL || jobs == NULL) {
        free(o);
        free(jobs);
        errno = ENOMEM;
        return -1;
    }
    o->jobs = jobs;
    o->jobs_max = jobs_max;
    pthread_mutex_init(&o->mutex, NULL);
    pthread_cond_init(&o->wake, NULL);
    int rc = pthread_create(&o->thread, NULL, offload_main, o);
    if (rc != 0) {
        pthread_cond_destroy(&o->wake);
        pthread_mutex_destroy(&o->mutex);
        free(jobs);
        free(o);
        errno = rc;
        return -1;
    }
    *out = o;
    return 0;
}

bool offload_submit(struct offload *o, offload_fn run, void *context)
{
    assert(run != NULL);
    pthread_mutex_lock(&o->mutex);
    assert(o->count <= o->jobs_max);
    bool accepted = !o->stopping && o->count < o->jobs_max;
    if (accepted) {
        o->jobs[(o->head + o->count) % o->jobs_max] = (struct offload_job){run, context};
        o->count++;
        pthread_cond_signal(&o->wake);
    }
    pthread_mutex_unlock(&o->mutex);
    return accepted;
}

void offload_stop(struct offload *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&o->mutex);
    o->stopping = true;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->mutex);
    pthread_join(o->thread, NULL);
    assert(o->count == 0);
    pthread_cond_destroy(&o->wake);
    pthread_mutex_destroy(&o->mutex);
    free(o->jobs);
    free(o);
}
