/* The sqlite backend's queue to its writer: the data path and the
 * synchronous calls put items in (a full queue answers 503 at once, never
 * blocks), the writer takes a batch at a time, and the writer or the
 * answerer answers each item here, with its results or as unknown. */
#include "sq_queue.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sq_backend.h"

/* ---- Results when the outcome is unknown. */

void sq_request_unavailable(struct sq_item *item, uint32_t i)
{
    assert(i < item->count);
    switch (item->kind) {
    case SQ_ITEM_RESERVE:
        reserve_result_unavailable(&((struct reserve_result *)item->results)[i]);
        break;
    case SQ_ITEM_COMPLETE:
        complete_result_unavailable(&((struct complete_result *)item->results)[i]);
        break;
    case SQ_ITEM_RELEASE:
        release_result_unavailable(&((struct release_result *)item->results)[i]);
        break;
    case SQ_ITEM_CALL:
        assert(item->count == 1); /* a call is one request */
        item->call->failed = true;
        break;
    }
}

void sq_item_unavailable(struct sq_item *item)
{
    for (uint32_t i = 0; i < item->count; i++)
        sq_request_unavailable(item, i);
}

void sq_item_finish(struct sq_item *item)
{
    if (item->kind != SQ_ITEM_CALL) {
        assert(item->done != NULL); /* the data path always says when it is done */
        item->done(item->context);
        return;
    }
    struct sq_call *call = item->call;
    if (call->done != NULL) {
        call->done(call->context);
        return;
    }
    pthread_mutex_lock(&call->mutex);
    assert(!call->finished); /* answered once */
    call->finished = true;
    pthread_cond_signal(&call->cond);
    pthread_mutex_unlock(&call->mutex);
}

/* ---- The queue. */

/* Takes up to group_commit_max requests (at least one call) off the queue. */
uint32_t sq_queue_take(struct sq_backend *backend, struct sq_item *out)
{
    uint32_t count = 0;
    uint64_t requests = 0;
    assert(backend->queue_count <= SQ_QUEUE_ITEMS_MAX);
    assert(backend->queue_head < SQ_QUEUE_ITEMS_MAX);
    while (backend->queue_count > 0) {
        struct sq_item *next = &backend->queue[backend->queue_head];
        if (count > 0 && requests + next->count > atomic_load(&backend->group_commit_max))
            break;
        out[count++] = *next;
        requests += next->count;
        backend->queue_head = (backend->queue_head + 1) % SQ_QUEUE_ITEMS_MAX;
        backend->queue_count--;
    }
    /* What a batch holds: at least one item when any waited, and no more
     * requests than a group commit takes unless one item alone has more. */
    assert(count <= SQ_QUEUE_ITEMS_MAX);
    assert(count <= 1 || requests <= atomic_load(&backend->group_commit_max));
    return count;
}

/* Hands an item to the writer; false when the queue is full or closing. */
bool sq_queue_put(struct sq_backend *backend, const struct sq_item *item)
{
    assert(item->count >= 1);
    assert(item->kind == SQ_ITEM_CALL ? item->call != NULL : item->results != NULL);
    pthread_mutex_lock(&backend->queue_mutex);
    bool accepted = !backend->stopping && backend->queue_count < SQ_QUEUE_ITEMS_MAX;
    if (accepted) {
        uint32_t tail = (backend->queue_head + backend->queue_count) % SQ_QUEUE_ITEMS_MAX;
        backend->queue[tail] = *item;
        backend->queue_count++;
        pthread_cond_signal(&backend->queue_cond);
    }
    pthread_mutex_unlock(&backend->queue_mutex);
    if (!accepted)
        atomic_fetch_add(&backend->queue_full, 1);
    return accepted;
}

bool sq_writer_submit(struct sq_backend *backend, struct sq_call *call)
{
    assert(call->done != NULL);
    struct sq_item item = {.kind = SQ_ITEM_CALL, .count = 1, .call = call};
    return sq_queue_put(backend, &item);
}

int sq_writer_call(struct sq_backend *backend, sq_call_fn run, void *args)
{
    struct sq_call call = {.run = run, .args = args};
    pthread_mutex_init(&call.mutex, NULL);
    pthread_cond_init(&call.cond, NULL);
    struct sq_item item = {.kind = SQ_ITEM_CALL, .count = 1, .call = &call};
    bool accepted = sq_queue_put(backend, &item);
    pthread_mutex_lock(&call.mutex);
    while (accepted && !call.finished)
        pthread_cond_wait(&call.cond, &call.mutex);
    pthread_mutex_unlock(&call.mutex);
    pthread_cond_destroy(&call.cond);
    pthread_mutex_destroy(&call.mutex);
    return accepted && !call.failed ? 0 : -1;
}
