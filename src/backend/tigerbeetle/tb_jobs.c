/* Jobs: the per-request state machines of the data path. A call of
 * `count` requests makes `count` jobs and answers when the last finishes.
 * A job that talks to the cluster about a lease makes the lease busy;
 * other jobs for the same lease wait behind it and run when it is done, so
 * one front end never races itself over a lease. Jobs whose limits have no
 * accounts in the cluster yet park until the maintenance thread made them.
 * A job starts through its first step (job->start, given by who made it),
 * so this file sits below the steps that finish jobs. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "tb_backend.h"
#include "util/queue.h"

struct tb_call *tb_call_new(struct tb_backend *b, uint32_t count, backend_done_fn done,
                            void *context)
{
    assert(count >= 1); /* run_call adds one of its own */
    struct tb_call *call = malloc(sizeof *call);
    if (call == NULL)
        return NULL;
    call->backend = b;
    call->remaining = count;
    call->done = done;
    call->context = context;
    return call;
}

struct tb_job *tb_job_new(struct tb_call *call, enum tb_job_kind kind, tb_job_step_fn start,
                          const void *request, void *result)
{
    assert(kind == TB_JOB_RESERVE || kind == TB_JOB_COMPLETE || kind == TB_JOB_RELEASE);
    assert(start != NULL);
    assert(request != NULL);
    assert(result != NULL);
    struct tb_backend *b = call->backend;
    pthread_mutex_lock(&b->job_pool_lock);
    struct tb_job *job = b->job_pool;
    if (job != NULL) {
        assert(b->job_pool_count > 0);
        b->job_pool = job->next;
        b->job_pool_count--;
    }
    pthread_mutex_unlock(&b->job_pool_lock);
    if (job == NULL)
        job = malloc(sizeof *job);
    if (job == NULL)
        return NULL;
    memset(job, 0, offsetof(struct tb_job, item)); /* the buffers need no clearing */
    job->kind = kind;
    job->start = start;
    job->call = call;
    job->request = request;
    job->result = result;
    __atomic_add_fetch(&call->backend->jobs_in_flight, 1, __ATOMIC_RELAXED);
    return job;
}

/* A finished job goes back to the pool, or to free() when it is full. */
static void job_recycle(struct tb_backend *b, struct tb_job *job)
{
    pthread_mutex_lock(&b->job_pool_lock);
    assert(b->job_pool_count <= TB_JOB_POOL_MAX);
    bool keep = b->job_pool_count < TB_JOB_POOL_MAX;
    if (keep) {
        job->next = b->job_pool;
        b->job_pool = job;
        b->job_pool_count++;
    }
    pthread_mutex_unlock(&b->job_pool_lock);
    if (!keep)
        free(job);
}

void tb_job_pool_free(struct tb_backend *b)
{
    while (b->job_pool != NULL) {
        struct tb_job *next = b->job_pool->next;
        free(b->job_pool);
        b->job_pool = next;
    }
    b->job_pool_count = 0;
}

void tb_job_warn(struct tb_job *job, enum backend_warning kind, const struct tb_limit *limit)
{
    /* On failure the accounting stands; only the warning is lost. */
    (void)complete_result_warn(&job->pending, kind, limit->key, limit->key_length);
}

void tb_job_wait_behind(struct tb_lease *lease, struct tb_job *job)
{
    assert(lease->busy);
    assert((lease->waiting == NULL) == (lease->waiting_tail == NULL));
    assert(job->lease != lease); /* the job that made it busy does not wait on it */
    FIFO_PUSH(lease->waiting, lease->waiting_tail, job, next);
}

void tb_job_unbusy(struct tb_job *job)
{
    struct tb_lease *lease = job->lease;
    if (lease == NULL)
        return;
    struct tb_backend *b = job->call->backend;
    pthread_mutex_lock(&b->lease_lock);
    assert(lease->busy);
    assert((lease->waiting == NULL) == (lease->waiting_tail == NULL));
    lease->busy = false;
    lease->touched_ms = clock_now_ms(b->clock);
    struct tb_job *waiting = lease->waiting;
    lease->waiting = lease->waiting_tail = NULL;
    /* A lease nobody learned anything about is forgotten (it was not
     * recorded: an error, or unknown in the cluster); the jobs behind it
     * start afresh. */
    if (lease->state == TB_LEASE_PENDING)
        tb_leases_remove(b, lease);
    pthread_mutex_unlock(&b->lease_lock);
    job->lease = NULL;
    while (waiting != NULL) {
        struct tb_job *next = waiting->next;
        waiting->next = NULL;
        tb_job_start(waiting);
        waiting = next;
    }
}

void tb_job_finish(struct tb_job *job)
{
    tb_job_unbusy(job);
    assert(job->lease == NULL);
    struct tb_call *call = job->call;
    /* This job is still counted in both until it leaves. */
    assert(__atomic_load_n(&call->remaining, __ATOMIC_ACQUIRE) > 0);
    assert(__atomic_load_n(&call->backend->jobs_in_flight, __ATOMIC_RELAXED) > 0);
    __atomic_sub_fetch(&call->backend->jobs_in_flight, 1, __ATOMIC_RELAXED);
    free(job->pending.warnings); /* NULL unless the result took them */
    free(job->scan);
    job_recycle(call->backend, job);
    if (__atomic_sub_fetch(&call->remaining, 1, __ATOMIC_ACQ_REL) == 0) {
        if (call->done != NULL)
            call->done(call->context);
        free(call);
    }
}

void tb_job_start(struct tb_job *job)
{
    job->start(job);
}

void tb_job_park(struct tb_job *job)
{
    /* Parked once at most, and before it takes its lease. */
    assert(!job->parked);
    assert(job->lease == NULL);
    struct tb_backend *b = job->call->backend;
    pthread_mutex_lock(&b->maintenance_lock);
    job->next = b->parked;
    b->parked = job;
    __atomic_store_n(&b->provision_wanted, true, __ATOMIC_RELEASE);
    pthread_cond_signal(&b->maintenance_wake);
    pthread_mutex_unlock(&b->maintenance_lock);
}

void tb_jobs_unpark_all(struct tb_backend *b, bool fail)
{
    pthread_mutex_lock(&b->maintenance_lock);
    struct tb_job *parked = b->parked;
    b->parked = NULL;
    pthread_mutex_unlock(&b->maintenance_lock);
    while (parked != NULL) {
        struct tb_job *next = parked->next;
        parked->next = NULL;
        parked->parked = true; /* parked once: next time it fails instead */
        if (fail)
            parked->failed = true;
        tb_job_start(parked);
        parked = next;
    }
}

void tb_job_submit(struct tb_job *job, uint8_t operation, uint32_t event_count,
                   tb_item_done_fn done)
{
    struct tbc_item *item = &job->item;
    memset(item, 0, sizeof *item);
    item->operation = operation;
    item->event_count = event_count;
    if (operation == TBC_OPERATION_CREATE_TRANSFERS) {
        assert(event_count <= TB_JOB_EVENTS_MAX);
        item->events = job->events;
        item->codes = job->codes;
    } else {
        assert(operation == TBC_OPERATION_LOOKUP_ACCOUNTS ||
               operation == TBC_OPERATION_LOOKUP_TRANSFERS);
        assert(event_count <= TB_JOB_LOOKUP_MAX);
        item->events = job->ids;
        item->objects = job->objects;
        item->found = job->found;
    }
    item->deadline_ms = clock_monotonic_ms() + job->call->backend->item_deadline_ms;
    item->done = done;
    item->context = job;
    tbc_submitter_submit(job->call->backend->submitter, item);
}
