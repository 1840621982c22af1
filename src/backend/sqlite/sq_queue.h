/* The sqlite backend's queue to its writer (sq_queue.c): the data path and
 * the synchronous calls put items in (a full queue answers at once), the
 * writer takes them out a batch at a time, and whoever answers an item
 * (the writer, the syncer's answerer) does it here. */
#ifndef LLMLIMIT_BACKEND_SQLITE_QUEUE_H
#define LLMLIMIT_BACKEND_SQLITE_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

struct sq_backend;

enum sq_item_kind {
    SQ_ITEM_RESERVE,
    SQ_ITEM_COMPLETE,
    SQ_ITEM_RELEASE,
    SQ_ITEM_CALL,
};

struct sq_call;
/* Runs on the writer thread inside the batch transaction. Returns
 * SQLITE_DONE, or an SQLite error code (the transaction is redone without it). */
typedef int (*sq_call_fn)(struct sq_backend *backend, struct sq_call *call);

/* An operation (admin, reads, tick) run by the writer: synchronous
 * (sq_writer_call waits for it), or asynchronous (sq_writer_submit: done
 * runs once it is answered, on the writer's or the answerer's thread). */
struct sq_call {
    sq_call_fn run;
    void *args;
    bool failed; /* the transaction did not commit: outcome unknown */
    bool finished;
    backend_done_fn done; /* NULL: synchronous */
    void *context;
    pthread_mutex_t mutex; /* synchronous only */
    pthread_cond_t cond;
};

struct sq_item {
    enum sq_item_kind kind;
    uint32_t count;
    const void *requests;
    void *results;
    backend_done_fn done;
    void *context;
    struct sq_call *call;
};

/* A request of a batch (its item, its index in the item): one left out of a
 * redone transaction, or the one that touched a lease last. */
struct sq_skip {
    uint32_t item;
    uint32_t request;
};

/* Hands an item to the writer; false when the queue is full or closing. */
bool sq_queue_put(struct sq_backend *backend, const struct sq_item *item);
/* Takes up to group_commit_max requests (at least one call) off the queue,
 * under queue_mutex. */
uint32_t sq_queue_take(struct sq_backend *backend, struct sq_item *out);
/* Hands a call to the writer and waits. 0 when it committed. */
int sq_writer_call(struct sq_backend *backend, sq_call_fn run, void *args);
/* Hands an asynchronous call (done set) to the writer; false, without
 * calling done, when the queue is full or closing. The call stays the
 * caller's, valid until done runs. */
bool sq_writer_submit(struct sq_backend *backend, struct sq_call *call);
/* Results of one request whose outcome is unknown (backend_error). */
void sq_request_unavailable(struct sq_item *item, uint32_t i);
/* Results of every request of an item whose outcome is unknown. */
void sq_item_unavailable(struct sq_item *item);
/* Answers: the done callback, or wakes the caller of a call. */
void sq_item_finish(struct sq_item *item);

#endif
