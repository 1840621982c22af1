/* The sqlite backend's syncer: the writer commits with synchronous=NORMAL
 * (the WAL frames are written, not yet synced) and hands each committed batch
 * here; one fdatasync of the WAL then makes every batch handed so far durable
 * and only then are they answered. The writer meanwhile runs the next batch,
 * so a batch's CPU overlaps the previous batch's fsync. The answers (waking
 * each caller's connection, about 2 us each) go to an answerer thread, so
 * that the syncer can start the next fsync at once. */
#include "sq_sync.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "sq_backend.h"
#include "sq_queue.h"

/* The writer's WAL file, once SQLite has opened it. */
static sqlite3_file *wal_file_of(struct sq_backend *backend)
{
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(backend->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) !=
            SQLITE_OK ||
        file == NULL || file->pMethods == NULL)
        return NULL;
    return file;
}

/* Appends calls to a ring whose mutex the caller holds, waiting on `space`
 * while it is full. */
static void ring_put(struct sq_item_ring *ring, pthread_mutex_t *mutex, pthread_cond_t *space,
                     const struct sq_item *items, uint32_t count)
{
    assert(ring->items != NULL);
    assert(count <= SQ_QUEUE_ITEMS_MAX); /* one batch of the writer's queue */
    for (uint32_t k = 0; k < count; k++) {
        while (ring->count == SQ_QUEUE_ITEMS_MAX)
            pthread_cond_wait(space, mutex);
        ring->items[(ring->head + ring->count) % SQ_QUEUE_ITEMS_MAX] = items[k];
        ring->count++;
        assert(ring->count <= SQ_QUEUE_ITEMS_MAX);
    }
}

/* Takes up to `most` calls off a ring whose mutex the caller holds. */
static uint32_t ring_take(struct sq_item_ring *ring, struct sq_item *out, uint32_t most)
{
    assert(most >= 1);
    assert(most <= SQ_QUEUE_ITEMS_MAX); /* out has room for a whole ring */
    assert(ring->head < SQ_QUEUE_ITEMS_MAX);
    uint32_t count = 0;
    while (ring->count > 0 && count < most) {
        out[count++] = ring->items[ring->head];
        ring->head = (ring->head + 1) % SQ_QUEUE_ITEMS_MAX;
        ring->count--;
    }
    return count;
}

void sq_syncer_hand(struct sq_backend *backend, struct sq_item *items, uint32_t count, bool wake)
{
    if (backend->wal_file == NULL)
        backend->wal_file = wal_file_of(backend); /* written before it is read: the mutex */
    pthread_mutex_lock(&backend->sync_mutex);
    ring_put(&backend->sync_ring, &backend->sync_mutex, &backend->sync_space_cond, items, count);
    backend->sync_wal_file = backend->wal_file;
    if (wake)
        pthread_cond_signal(&backend->sync_cond);
    pthread_mutex_unlock(&backend->sync_mutex);
}

/* Everything waiting, or one call when group commit is off (one fsync per
 * transaction, the cost a design without group commit pays). */
static uint32_t sync_take(struct sq_backend *backend, struct sq_item *out, sqlite3_file **wal_file)
{
    uint32_t most = atomic_load(&backend->group_commit_max) == 1 ? 1 : SQ_QUEUE_ITEMS_MAX;
    uint32_t count = ring_take(&backend->sync_ring, out, most);
    *wal_file = backend->sync_wal_file;
    pthread_cond_broadcast(&backend->sync_space_cond);
    return count;
}

/* After a failed fsync the kernel may have dropped pages that later commits
 * build on, so nothing more is acknowledged until the server restarts and
 * SQLite recovers the WAL from what really is on disk. */
static void sync_failed(struct sq_backend *backend, int rc)
{
    if (!atomic_exchange(&backend->failed, true))
        fprintf(stderr,
                "llmlimitd: sqlite backend: fsync of the WAL failed (%s): answering 503 to "
                "everything until restart\n",
                sqlite3_errstr(rc));
    atomic_store(&backend->ready, false);
}

/* Queues synced calls for the answerer (waits while its queue is full). */
static void answer_hand(struct sq_backend *backend, struct sq_item *items, uint32_t count)
{
    pthread_mutex_lock(&backend->answer_mutex);
    ring_put(&backend->answer_ring, &backend->answer_mutex, &backend->answer_cond, items, count);
    pthread_cond_broadcast(&backend->answer_cond);
    pthread_mutex_unlock(&backend->answer_mutex);
}

static void *answerer_main(void *arg)
{
    struct sq_backend *backend = arg;
    struct sq_item *items = backend->answer_batch;
    pthread_mutex_lock(&backend->answer_mutex);
    for (;;) {
        while (backend->answer_ring.count == 0 && !backend->answer_stopping)
            pthread_cond_wait(&backend->answer_cond, &backend->answer_mutex);
        if (backend->answer_ring.count == 0)
            break; /* stopping and drained */
        uint32_t count = ring_take(&backend->answer_ring, items, SQ_QUEUE_ITEMS_MAX);
        assert(count >= 1);
        pthread_cond_broadcast(&backend->answer_cond);
        pthread_mutex_unlock(&backend->answer_mutex);
        for (uint32_t k = 0; k < count; k++)
            sq_item_finish(&items[k]);
        pthread_mutex_lock(&backend->answer_mutex);
    }
    pthread_mutex_unlock(&backend->answer_mutex);
    return NULL;
}

static void *syncer_main(void *arg)
{
    struct sq_backend *backend = arg;
    struct sq_item *items = backend->sync_batch;
    pthread_mutex_lock(&backend->sync_mutex);
    for (;;) {
        while (backend->sync_ring.count == 0 && !backend->sync_stopping)
            pthread_cond_wait(&backend->sync_cond, &backend->sync_mutex);
        if (backend->sync_ring.count == 0)
            break; /* stopping and drained */
        sqlite3_file *wal_file = NULL;
        uint32_t count = sync_take(backend, items, &wal_file);
        assert(count >= 1);
        pthread_mutex_unlock(&backend->sync_mutex);
        int rc = SQLITE_IOERR;
        if (!atomic_load(&backend->failed) && wal_file != NULL)
            rc = wal_file->pMethods->xSync(wal_file, SQLITE_SYNC_NORMAL);
        if (rc != SQLITE_OK)
            sync_failed(backend, rc);
        for (uint32_t k = 0; k < count; k++) {
            if (rc != SQLITE_OK)
                sq_item_unavailable(&items[k]);
        }
        answer_hand(backend, items, count);
        atomic_fetch_add(&backend->syncs, 1);
        pthread_mutex_lock(&backend->sync_mutex);
    }
    pthread_mutex_unlock(&backend->sync_mutex);
    return NULL;
}

int sq_syncer_start(struct sq_backend *backend)
{
    assert(backend->syncing); /* synchronous=NORMAL answers at commit, without it */
    assert(!backend->syncer_started);
    assert(!backend->answerer_started);
    backend->sync_ring.items = calloc(SQ_QUEUE_ITEMS_MAX, sizeof *backend->sync_ring.items);
    backend->sync_batch = calloc(SQ_QUEUE_ITEMS_MAX, sizeof *backend->sync_batch);
    backend->answer_ring.items = calloc(SQ_QUEUE_ITEMS_MAX, sizeof *backend->answer_ring.items);
    backend->answer_batch = calloc(SQ_QUEUE_ITEMS_MAX, sizeof *backend->answer_batch);
    if (backend->sync_ring.items == NULL || backend->sync_batch == NULL ||
        backend->answer_ring.items == NULL || backend->answer_batch == NULL)
        return -1;
    pthread_mutex_init(&backend->answer_mutex, NULL);
    pthread_cond_init(&backend->answer_cond, NULL);
    if (pthread_create(&backend->answerer, NULL, answerer_main, backend) != 0)
        return -1;
    backend->answerer_started = true;
    if (pthread_create(&backend->syncer, NULL, syncer_main, backend) != 0)
        return -1;
    backend->syncer_started = true;
    return 0;
}

void sq_syncer_stop(struct sq_backend *backend)
{
    if (backend->syncer_started) {
        pthread_mutex_lock(&backend->sync_mutex);
        backend->sync_stopping = true;
        pthread_cond_signal(&backend->sync_cond);
        pthread_mutex_unlock(&backend->sync_mutex);
        pthread_join(backend->syncer, NULL); /* syncs every batch handed to it first */
        backend->syncer_started = false;
    }
    if (backend->answerer_started) {
        pthread_mutex_lock(&backend->answer_mutex);
        backend->answer_stopping = true;
        pthread_cond_broadcast(&backend->answer_cond);
        pthread_mutex_unlock(&backend->answer_mutex);
        pthread_join(backend->answerer, NULL); /* answers everything first */
        backend->answerer_started = false;
        pthread_mutex_destroy(&backend->answer_mutex);
        pthread_cond_destroy(&backend->answer_cond);
    }
    free(backend->answer_ring.items);
    free(backend->answer_batch);
    backend->answer_ring.items = NULL;
    backend->answer_batch = NULL;
    free(backend->sync_ring.items);
    free(backend->sync_batch);
    backend->sync_ring.items = NULL;
    backend->sync_batch = NULL;
}
