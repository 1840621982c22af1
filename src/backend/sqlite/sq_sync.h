/* The sqlite backend's syncer and answerer (sq_sync.c): committed batches
 * wait here for the fsync of the WAL, then for their answers. */
#ifndef LLMLIMIT_BACKEND_SQLITE_SYNC_H
#define LLMLIMIT_BACKEND_SQLITE_SYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "sq_queue.h"

struct sq_backend;

/* A ring of SQ_QUEUE_ITEMS_MAX calls handed from one thread to the next,
 * under its owner's mutex. */
struct sq_item_ring {
    struct sq_item *items;
    uint32_t head;
    uint32_t count;
};

int sq_syncer_start(struct sq_backend *backend);
/* Answers every call handed so far, then stops. */
void sq_syncer_stop(struct sq_backend *backend);
/* Hands committed calls over; they are answered once the WAL is synced.
 * Blocks while SQ_QUEUE_ITEMS_MAX calls are waiting. Without `wake` an idle
 * syncer does not start on them before the next hand that wakes it (a busy
 * one takes them after its fsync). */
void sq_syncer_hand(struct sq_backend *backend, struct sq_item *items, uint32_t count, bool wake);

#endif
