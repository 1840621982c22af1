/* The sqlite backend: durable state in one SQLite database (WAL) owned by one
 * process. Data-path calls queue up for a single writer thread, which runs
 * as many as are waiting in one BEGIN IMMEDIATE transaction (group commit)
 * and answers each only once that transaction is durable. */
#include "sqlite.h"

#include <assert.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/retry.h"
#include "sq_bounds.h"
#include "sq_admin.h"
#include "sq_console.h"
#include "sq_backend.h"
#include "sq_ledger.h"
#include "sq_leases.h"
#include "sq_mirror.h"
#include "sq_queue.h"
#include "sq_schema.h"
#include "sq_sync.h"

#define LOCK_FILE_NAME "llmlimit.db.lock"
#define DATABASE_FILE_NAME "llmlimit.db"

void sq_options_defaults(struct sq_options *options)
{
    options->synchronous_normal = false;
    options->retention_ms = 0;
}

/* ---- The writer. */

static int request_run(struct sq_backend *backend, struct sq_item *item, uint32_t i)
{
    assert(i < item->count);
    switch (item->kind) {
    case SQ_ITEM_RESERVE:
        return sq_ledger_reserve(backend, &((const struct reserve_request *)item->requests)[i],
                                 &((struct reserve_result *)item->results)[i]);
    case SQ_ITEM_COMPLETE:
        return sq_ledger_complete(backend, &((const struct complete_request *)item->requests)[i],
                                  &((struct complete_result *)item->results)[i]);
    case SQ_ITEM_RELEASE:
        return sq_ledger_release(backend, &((const struct release_request *)item->requests)[i],
                                 &((struct release_result *)item->results)[i]);
    case SQ_ITEM_CALL:
        return item->call->run(backend, item->call);
    }
    return SQLITE_MISUSE;
}

static void log_sql_error(struct sq_backend *backend, const char *what, int rc)
{
    fprintf(stderr, "llmlimitd: sqlite backend: %s: %s (%d)\n", what, sqlite3_errmsg(backend->db),
            rc);
}

static bool request_skipped(const struct sq_backend *backend, uint32_t k, uint32_t i)
{
    for (uint32_t s = 0; s < backend->skip_count; s++) {
        if (backend->skips[s].item == k && backend->skips[s].request == i)
            return true;
    }
    return false;
}

enum batch_outcome {
    BATCH_COMMITTED,
    BATCH_FAILED,         /* the transaction failed: every request is unknown */
    BATCH_REQUEST_FAILED, /* one request failed alone: redo the batch without it */
};

/* Runs every request not skipped in one transaction and commits it. A
 * request whose error is its own (a constraint, a memory shortage) makes the
 * transaction roll back and is recorded in `skips`, so that the batch can be
 * redone without it: the other requests never see its error. */
static enum batch_outcome batch_transaction(struct sq_backend *backend, struct sq_item *items,
                                            uint32_t count)
{
    assert(count >= 1);
    assert(backend->skip_count <= SQ_SKIPS_MAX);
    assert(sqlite3_get_autocommit(backend->db)); /* no transaction left open */
    int rc = sq_statement_run(sq_statement(backend, SQ_STMT_BEGIN));
    if (rc != SQLITE_DONE) {
        log_sql_error(backend, "begin", rc);
        return BATCH_FAILED;
    }
    backend->write_failed = false;
    bool attributable = false; /* to one request: redo without it */
    for (uint32_t k = 0; k < count; k++) {
        for (uint32_t i = 0; i < items[k].count; i++) {
            if (request_skipped(backend, k, i))
                continue;
            backend->current = (struct sq_skip){.item = k, .request = i};
            rc = request_run(backend, &items[k], i);
            if (rc == SQLITE_DONE)
                rc = sq_leases_flush_if_full(backend);
            if (rc != SQLITE_DONE) {
                log_sql_error(backend, "request", rc);
                attributable = true;
                goto abandon;
            }
        }
    }
    rc = sq_leases_flush(backend);
    attributable = rc != SQLITE_DONE;
    if (rc == SQLITE_DONE)
        rc = sq_mirror_flush(backend);
    if (rc == SQLITE_DONE)
        rc = sq_statement_run(sq_statement(backend, SQ_STMT_COMMIT));
    if (rc == SQLITE_DONE) {
        assert(sqlite3_get_autocommit(backend->db));
        return BATCH_COMMITTED;
    }
    log_sql_error(backend, "commit", rc);
abandon:;
    enum batch_outcome outcome = BATCH_FAILED;
    /* The request at fault: the one running, or the last one to touch the
     * lease that could not be written. */
    struct sq_skip fault = backend->write_failed ? backend->write_failed_origin : backend->current;
    if (attributable && (!sq_sql_error_is_fatal(rc) || rc == SQLITE_NOMEM) &&
        backend->skip_count < SQ_SKIPS_MAX &&
        !request_skipped(backend, fault.item, fault.request)) {
        assert(fault.item < count);
        assert(fault.request < items[fault.item].count);
        backend->skips[backend->skip_count++] = fault;
        outcome = BATCH_REQUEST_FAILED;
    }
    sq_leases_discard(backend);
    if (!sqlite3_get_autocommit(backend->db))
        sq_statement_run(sq_statement(backend, SQ_STMT_ROLLBACK));
    backend->mirror_stale = true;
    return outcome;
}

/* Before a redo: complete results may hold warnings of the abandoned run. */
static void results_reset(struct sq_item *items, uint32_t count)
{
    for (uint32_t k = 0; k < count; k++) {
        if (items[k].kind != SQ_ITEM_COMPLETE)
            continue;
        struct complete_result *results = items[k].results;
        for (uint32_t i = 0; i < items[k].count; i++) {
            free(results[i].warnings);
            results[i].warnings = NULL;
            results[i].warning_count = 0;
        }
    }
}

static bool mirror_fresh(struct sq_backend *backend)
{
    if (!backend->mirror_stale)
        return true;
    char error[512];
    if (sq_mirror_load(backend, error, sizeof error) != 0) {
        fprintf(stderr, "llmlimitd: sqlite backend: %s\n", error);
        atomic_store(&backend->ready, false);
        return false;
    }
    backend->mirror_stale = false;
    atomic_store(&backend->ready, true);
    return true;
}

/* Capacity the limit has left now, as usage reports it (budgets: the
 * current period, when the mirror has it). */
static bool freed_available(struct sq_limit *limit, int64_t now_ms, int64_t *available)
{
    const struct limit_definition *d = &limit->state.definition;
    int64_t start = d->kind == LIMIT_BUDGET ? sq_limit_period_now(limit, now_ms).start_ms : 0;
    const struct sq_period *p = sq_mirror_period_find(limit, start);
    if (p == NULL)
        return false;
    *available = limit_available(d->kind, d->capacity, p->reserved, p->used, p->debt);
    return true;
}

/* Tells the wait layer which limits may have capacity back, once the
 * transaction that freed it committed (a waiter asking again is then
 * decided after it); the wait layer then asks for its next waiters on this
 * thread (tell_end), which queues those reserves for the next batch. */
static bool freed_tell(struct sq_backend *backend)
{
    struct sq_mirror *mirror = &backend->mirror;
    assert(mirror->freed_count <= SQ_FREED_LIMITS_MAX);
    assert(!mirror->freed_any || mirror->freed_count == SQ_FREED_LIMITS_MAX);
    if (mirror->freed_count == 0 && !mirror->freed_any)
        return false;
    bool called = false;
    pthread_mutex_lock(&backend->watch_mutex);
    if (backend_watch_wanted(&backend->watch)) {
        bool around = backend->watch.tell_begin != NULL && backend->watch.tell_end != NULL;
        if (around)
            backend->watch.tell_begin(backend->watch.context);
        int64_t now_ms = clock_now_ms(backend->config.clock);
        for (uint32_t i = 0; i < mirror->freed_count; i++) {
            struct sq_limit *limit = sq_mirror_limit_by_id(mirror, mirror->freed_ids[i]);
            if (limit == NULL)
                continue;
            struct backend_freed freed = {.key = limit->state.definition.key};
            freed.key_length = (uint32_t)strlen(freed.key);
            freed.available_known =
                !limit->deleted && freed_available(limit, now_ms, &freed.available);
            backend->watch.freed(backend->watch.context, &freed);
        }
        if (mirror->freed_any) {
            struct backend_freed any = {.key = NULL}; /* too many to tell apart: any limit */
            backend->watch.freed(backend->watch.context, &any);
        }
        /* Under the watch's mutex: a listener going away (sq_watch) waits
         * for this call's end. */
        if (around)
            called = backend->watch.tell_end(backend->watch.context);
    }
    pthread_mutex_unlock(&backend->watch_mutex);
    mirror->freed_count = 0;
    mirror->freed_any = false;
    return called;
}

static void sq_watch(struct backend *base, const struct backend_watch *watch)
{
    struct sq_backend *backend = sq_backend_of(base);
    pthread_mutex_lock(&backend->watch_mutex);
    backend->watch = *watch;
    pthread_mutex_unlock(&backend->watch_mutex);
}

static bool queue_waiting(struct sq_backend *backend)
{
    pthread_mutex_lock(&backend->queue_mutex);
    bool waiting = backend->queue_count > 0;
    pthread_mutex_unlock(&backend->queue_mutex);
    return waiting;
}

/* A batch handed to the syncer without waking it is woken for now. */
static void sync_deferred_kick(struct sq_backend *backend)
{
    if (backend->sync_deferred) {
        sq_syncer_hand(backend, NULL, 0, true);
        backend->sync_deferred = false;
    }
}

static void batch_run(struct sq_backend *backend, struct sq_item *items, uint32_t count)
{
    assert(count >= 1);
    assert(count <= SQ_QUEUE_ITEMS_MAX);
    enum batch_outcome outcome = BATCH_FAILED;
    backend->skip_count = 0;
    while (!atomic_load(&backend->failed) && mirror_fresh(backend)) {
        outcome = batch_transaction(backend, items, count);
        if (outcome != BATCH_REQUEST_FAILED)
            break;
        /* Each redo leaves one more request out: at most SQ_SKIPS_MAX. */
        assert(backend->skip_count >= 1);
        results_reset(items, count);
    }
    if (outcome != BATCH_COMMITTED) {
        /* Nothing of this transaction is acknowledged: every request in it
         * gets backend_error, the client retries with the same lease_id. */
        for (uint32_t k = 0; k < count; k++)
            sq_item_unavailable(&items[k]);
        mirror_fresh(backend);
    }
    for (uint32_t s = 0; s < backend->skip_count; s++)
        sq_request_unavailable(&items[backend->skips[s].item], backend->skips[s].request);
    uint64_t requests = 0;
    for (uint32_t k = 0; k < count; k++)
        requests += items[k].count;
    atomic_fetch_add(&backend->batches, 1);
    atomic_fetch_add(&backend->batched_items, requests);
    atomic_store(&backend->live_holds, backend->mirror.hold_count);
    bool handing_over = outcome == BATCH_COMMITTED && freed_tell(backend);
    if (outcome == BATCH_COMMITTED && backend->syncing) {
        /* The wait layer queued its next waiters' reserves on this thread:
         * the syncer is not woken for this commit, so that an idle one syncs
         * it with the next (theirs), one fsync for the release and its
         * hand-over; a busy one takes it after its fsync anyway. Never twice
         * in a row, and only when that next batch is sure to run now (the
         * queue is the writer's alone to take from). */
        bool defer = handing_over && !backend->sync_deferred && queue_waiting(backend);
        sq_syncer_hand(backend, items, count, !defer); /* answered once durable */
        backend->sync_deferred = defer;
        return;
    }
    sync_deferred_kick(backend);
    for (uint32_t k = 0; k < count; k++)
        sq_item_finish(&items[k]);
}

/* After each commit: the WAL's size, for the checkpointer and the restart. */
static int wal_hook(void *context, sqlite3 *db, const char *name, int pages)
{
    (void)db;
    (void)name;
    struct sq_backend *backend = context;
    atomic_store(&backend->wal_pages, pages);
    if (pages >= SQ_CHECKPOINT_PAGES) {
        pthread_mutex_lock(&backend->queue_mutex);
        pthread_cond_broadcast(&backend->checkpoint_cond);
        pthread_mutex_unlock(&backend->queue_mutex);
    }
    return SQLITE_OK;
}

/* Copies the WAL back into the database each time SQ_CHECKPOINT_PAGES
 * more frames have been written (SQ_RESTART_LAG_PAGES once the WAL is
 * due to start over), on its own connection: a passive checkpoint never
 * blocks the writer, and the writer's commits never wait for one. */
static void *checkpointer_main(void *arg)
{
    struct sq_backend *backend = arg;
    int copied = 0; /* WAL frames the last checkpoint got through */
    pthread_mutex_lock(&backend->queue_mutex);
    while (!backend->stopping) {
        int pages = atomic_load(&backend->wal_pages);
        if (pages < copied)
            copied = 0; /* the WAL started over */
        int step = pages >= SQ_WAL_PAGES_MAX ? SQ_RESTART_LAG_PAGES : SQ_CHECKPOINT_PAGES;
        if (pages - copied < step) {
            pthread_cond_wait(&backend->checkpoint_cond, &backend->queue_mutex);
            continue;
        }
        pthread_mutex_unlock(&backend->queue_mutex);
        int log_pages = 0, done_pages = 0;
        pthread_mutex_lock(&backend->checkpoint_mutex);
        int rc = sqlite3_wal_checkpoint_v2(backend->checkpoint_db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                           &log_pages, &done_pages);
        copied = rc == SQLITE_OK && done_pages >= 0 ? done_pages : pages;
        atomic_store(&backend->wal_checkpointed, copied); /* before the writer may restart */
        pthread_mutex_unlock(&backend->checkpoint_mutex);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            fprintf(stderr, "llmlimitd: sqlite backend: checkpoint: %s\n",
                    sqlite3_errmsg(backend->checkpoint_db));
        pthread_mutex_lock(&backend->queue_mutex);
    }
    pthread_mutex_unlock(&backend->queue_mutex);
    return NULL;
}

/* Background checkpoints cannot finish while the writer keeps appending, so
 * the WAL would never start over. Past SQ_WAL_PAGES_MAX the writer
 * checkpoints itself between two batches, once the background checkpoint
 * has caught up to within SQ_RESTART_LAG_PAGES (copying and syncing
 * the rest stalls the writer, so the less the better; past twice the bound
 * it does not wait any more), so that its next commit writes the WAL from
 * the start. */
static void wal_restart_if_large(struct sq_backend *backend)
{
    int pages = atomic_load(&backend->wal_pages);
    if (pages < SQ_WAL_PAGES_MAX ||
        (pages - atomic_load(&backend->wal_checkpointed) > SQ_RESTART_LAG_PAGES &&
         pages < 2 * SQ_WAL_PAGES_MAX))
        return;
    /* Never wait (the write connection has no busy timeout): not for the
     * checkpointer (try again after the next batch), not for a reader. */
    if (pthread_mutex_trylock(&backend->checkpoint_mutex) != 0)
        return;
    int rc = sqlite3_wal_checkpoint_v2(backend->db, NULL, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
    pthread_mutex_unlock(&backend->checkpoint_mutex);
    if (rc == SQLITE_OK) {
        atomic_store(&backend->wal_pages, 0); /* the next commit reports it anew */
        atomic_store(&backend->wal_checkpointed, 0);
    } else if (rc != SQLITE_BUSY)
        log_sql_error(backend, "checkpoint", rc);
}

static void *writer_main(void *arg)
{
    struct sq_backend *backend = arg;
    struct sq_item *batch = backend->batch;
    sqlite3_wal_hook(backend->db, wal_hook, backend);
    for (;;) {
        pthread_mutex_lock(&backend->queue_mutex);
        while (backend->queue_count == 0 && !backend->stopping)
            pthread_cond_wait(&backend->queue_cond, &backend->queue_mutex);
        uint32_t count = sq_queue_take(backend, batch);
        pthread_mutex_unlock(&backend->queue_mutex);
        if (count == 0)
            break; /* stopping and drained */
        batch_run(backend, batch, count);
        wal_restart_if_large(backend);
    }
    return NULL;
}

/* ---- Data path: queue and return; the writer answers after the commit. */

static void data_call(struct sq_backend *backend, enum sq_item_kind kind, const void *requests,
                      void *results, uint32_t count, backend_done_fn done, void *context)
{
    assert(done != NULL);
    assert(count == 0 || requests != NULL);
    struct sq_item item = {.kind = kind,
                           .count = count,
                           .requests = requests,
                           .results = results,
                           .done = done,
                           .context = context};
    if (count == 0 || !sq_queue_put(backend, &item)) {
        sq_item_unavailable(&item); /* full queue: 503 at once, never block */
        done(context);
    }
}

static void sq_reserve(struct backend *base, const struct reserve_request *requests,
                       struct reserve_result *results, uint32_t count, backend_done_fn done,
                       void *context)
{
    data_call(sq_backend_of(base), SQ_ITEM_RESERVE, requests, results, count, done, context);
}

static void sq_complete(struct backend *base, const struct complete_request *requests,
                        struct complete_result *results, uint32_t count, backend_done_fn done,
                        void *context)
{
    /* Cleared so that a redone transaction or a failure may free warnings
     * an earlier try set. */
    for (uint32_t i = 0; i < count; i++)
        complete_result_clear(&results[i]);
    data_call(sq_backend_of(base), SQ_ITEM_COMPLETE, requests, results, count, done, context);
}

static void sq_release(struct backend *base, const struct release_request *requests,
                       struct release_result *results, uint32_t count, backend_done_fn done,
                       void *context)
{
    data_call(sq_backend_of(base), SQ_ITEM_RELEASE, requests, results, count, done, context);
}

/* ---- Open and close. */

/* One owner per database: an exclusive flock held for the process's life. */
static int lock_data_dir(struct sq_backend *backend, char *error, size_t error_size)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", backend->data_dir, LOCK_FILE_NAME);
    backend->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (backend->lock_fd < 0) {
        snprintf(error, error_size, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(backend->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "unknown";
        ssize_t n = pread(backend->lock_fd, pid, sizeof pid - 1, 0);
        if (n > 0)
            pid[n] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        snprintf(error, error_size, "data directory %s is in use by another llmlimitd (pid %s)",
                 backend->data_dir, pid);
        close(backend->lock_fd);
        backend->lock_fd = -1;
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(backend->lock_fd, 0) != 0 || pwrite(backend->lock_fd, pid, (size_t)n, 0) != n) {
        snprintf(error, error_size, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Makes the directory entries of new files durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void backend_stop_checkpointer(struct sq_backend *backend)
{
    pthread_mutex_lock(&backend->queue_mutex);
    backend->stopping = true;
    pthread_cond_broadcast(&backend->checkpoint_cond);
    pthread_mutex_unlock(&backend->queue_mutex);
    if (backend->checkpointer_started)
        pthread_join(backend->checkpointer, NULL);
    backend->checkpointer_started = false;
}

static void backend_free(struct sq_backend *backend)
{
    sq_schema_close(backend);
    sq_mirror_free(&backend->mirror);
    sq_leases_free(backend);
    if (backend->lock_fd >= 0)
        close(backend->lock_fd);
    free(backend->queue);
    free(backend->batch);
    free(backend->scratch);
    pthread_mutex_destroy(&backend->queue_mutex);
    pthread_cond_destroy(&backend->queue_cond);
    pthread_cond_destroy(&backend->checkpoint_cond);
    pthread_mutex_destroy(&backend->checkpoint_mutex);
    pthread_mutex_destroy(&backend->sync_mutex);
    pthread_cond_destroy(&backend->sync_cond);
    pthread_cond_destroy(&backend->sync_space_cond);
    pthread_mutex_destroy(&backend->read_mutex);
    pthread_mutex_destroy(&backend->watch_mutex);
    free(backend);
}

static int open_storage(struct sq_backend *backend, char *error, size_t error_size)
{
    if (mkdir(backend->data_dir, 0750) != 0 && errno != EEXIST) {
        snprintf(error, error_size, "cannot create data directory %s: %s", backend->data_dir,
                 strerror(errno));
        return -1;
    }
    if (lock_data_dir(backend, error, error_size) != 0)
        return -1;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", backend->data_dir, DATABASE_FILE_NAME);
    if (sq_schema_open(backend, path, error, error_size) != 0)
        return -1;
    sync_dir(backend->data_dir);
    return sq_mirror_load(backend, error, error_size);
}

/* Process-wide SQLite settings, before SQLite initialises: no global memory
 * statistics (they take a mutex on every allocation). Harmless no-op when
 * something already initialised SQLite. */
static void sq_configure_once(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* A backend struct with its locks and buffers, not yet on disk; NULL
 * with the reason in error. */
static struct sq_backend *backend_new(const struct backend_config *config,
                                      const struct sq_options *options, char *error,
                                      size_t error_size)
{
    assert(options->retention_ms >= 0);
    struct sq_backend *backend = calloc(1, sizeof *backend);
    if (backend == NULL) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    backend->base.ops = &sq_backend_ops;
    backend->config = *config;
    backend->options = *options;
    backend->lock_fd = -1;
    atomic_store(&backend->group_commit_max, SQ_GROUP_COMMIT_MAX);
    backend->random_state = retry_jitter_seed();
    pthread_mutex_init(&backend->queue_mutex, NULL);
    pthread_cond_init(&backend->queue_cond, NULL);
    pthread_cond_init(&backend->checkpoint_cond, NULL);
    pthread_mutex_init(&backend->checkpoint_mutex, NULL);
    pthread_mutex_init(&backend->sync_mutex, NULL);
    pthread_cond_init(&backend->sync_cond, NULL);
    pthread_cond_init(&backend->sync_space_cond, NULL);
    backend->syncing = !backend->options.synchronous_normal;
    pthread_mutex_init(&backend->read_mutex, NULL);
    pthread_mutex_init(&backend->watch_mutex, NULL);
    int n = snprintf(backend->data_dir, sizeof backend->data_dir, "%s", config->data_dir);
    backend->config.data_dir = backend->data_dir;
    if (n <= 0 || (size_t)n >= sizeof backend->data_dir) {
        snprintf(error, error_size, "data directory: path too long");
        backend_free(backend);
        return NULL;
    }
    backend->queue = calloc(SQ_QUEUE_ITEMS_MAX, sizeof *backend->queue);
    backend->batch = calloc(SQ_QUEUE_ITEMS_MAX, sizeof *backend->batch);
    backend->scratch = sq_ledger_scratch_new();
    if (backend->queue == NULL || backend->batch == NULL || backend->scratch == NULL) {
        snprintf(error, error_size, "out of memory");
        backend_free(backend);
        return NULL;
    }
    return backend;
}

/* The checkpointer, the syncer and answerer (unless synchronous=NORMAL),
 * then the writer. 0, or -1 with every thread started stopped again. */
static int threads_start(struct sq_backend *backend, char *error, size_t error_size)
{
    if (pthread_create(&backend->checkpointer, NULL, checkpointer_main, backend) != 0) {
        snprintf(error, error_size, "cannot start the checkpointer thread");
        return -1;
    }
    backend->checkpointer_started = true;
    if ((backend->syncing && sq_syncer_start(backend) != 0) ||
        pthread_create(&backend->writer, NULL, writer_main, backend) != 0) {
        snprintf(error, error_size, "cannot start the writer and syncer threads");
        sq_syncer_stop(backend);
        backend_stop_checkpointer(backend);
        return -1;
    }
    return 0;
}

static int sq_open(const struct backend_config *config, const void *options, struct backend **out,
                   char *error, size_t error_size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sq_configure_once);
    struct sq_options chosen;
    if (options != NULL)
        chosen = *(const struct sq_options *)options;
    else
        sq_options_defaults(&chosen);
    if (chosen.retention_ms < 0) {
        snprintf(error, error_size, "retention_ms: must be >= 0");
        return -1;
    }
    struct sq_backend *backend = backend_new(config, &chosen, error, error_size);
    if (backend == NULL)
        return -1;
    if (open_storage(backend, error, error_size) != 0 ||
        threads_start(backend, error, error_size) != 0) {
        backend_free(backend);
        return -1;
    }
    assert(backend->lock_fd >= 0); /* the data directory is ours */
    atomic_store(&backend->ready, true);
    *out = &backend->base;
    return 0;
}

static void sq_close(struct backend *base)
{
    struct sq_backend *backend = sq_backend_of(base);
    assert(backend->checkpointer_started); /* opened whole */
    pthread_mutex_lock(&backend->queue_mutex);
    backend->stopping = true;
    pthread_cond_signal(&backend->queue_cond);
    pthread_mutex_unlock(&backend->queue_mutex);
    pthread_join(backend->writer, NULL); /* drains the queue first */
    assert(backend->queue_count == 0);
    sq_syncer_stop(backend);
    backend_stop_checkpointer(backend);
    backend_free(backend);
}

void sq_backend_set_group_commit_max(struct backend *base, uint32_t requests)
{
    assert(requests >= 1);
    atomic_store(&sq_backend_of(base)->group_commit_max, requests);
}

uint64_t sq_backend_fsyncs(struct backend *base)
{
    return atomic_load(&sq_backend_of(base)->syncs);
}

static bool sq_ready(struct backend *base)
{
    struct sq_backend *backend = sq_backend_of(base);
    return atomic_load(&backend->ready) && !atomic_load(&backend->failed);
}

static void sq_stats(struct backend *base, struct backend_stats *out)
{
    struct sq_backend *backend = sq_backend_of(base);
    memset(out, 0, sizeof *out);
    out->lease_cache_entries = atomic_load(&backend->live_holds);
    out->batches = atomic_load(&backend->batches);
    out->batched_items = atomic_load(&backend->batched_items);
    out->overage_denied = atomic_load(&backend->overage_denied);
    out->expired_holds = atomic_load(&backend->expired_holds);
}

static void options_defaults(void *options)
{
    sq_options_defaults(options);
}

static const char *const synchronous_choices[] = {"full", "normal"};

/* The flags of --backend sqlite (docs/configuration.md). */
static const struct flag flags[] = {
    {"--sqlite-synchronous", "full|normal", FLAG_CHOICE,
     offsetof(struct sq_options, synchronous_normal), 0, 0,
     "sqlite durability: full survives power loss", 0, synchronous_choices},
    {"--sqlite-retention-days", "N", FLAG_I64_SCALED, offsetof(struct sq_options, retention_ms), 0,
     SQ_RETENTION_DAYS_MAX,
     "sqlite: delete finished leases and audit events older than this (0: keep all)",
     INT64_C(86400000), NULL},
};

_Static_assert(sizeof(struct sq_options) <= BACKEND_OPTIONS_BYTES_MAX,
               "options fit the server's room");

const struct backend_ops sq_backend_ops = {
    .name = sq_backend_name,
    .options_size = sizeof(struct sq_options),
    .options_defaults = options_defaults,
    .flags = flags,
    .flag_count = sizeof flags / sizeof flags[0],
    .open = sq_open,
    .close = sq_close,
    .put_limit = sq_admin_put_limit,
    .restore_limit = sq_admin_restore_limit,
    .delete_limit = sq_admin_delete_limit,
    .get_limit = sq_admin_get_limit,
    .list_limits = sq_admin_list_limits,
    .usage = sq_admin_usage,
    .usage_batch = sq_admin_usage_batch,
    .tick = sq_admin_tick,
    .reserve = sq_reserve,
    .complete = sq_complete,
    .release = sq_release,
    .ready = sq_ready,
    .stats = sq_stats,
    .events = sq_admin_events,
    .usage_by_caller = sq_admin_usage_by_caller,
    .limits_report = sq_console_limits_report,
    .holds_scan = sq_console_holds_scan,
    .holds_seen_here_only = false,
    .watch = sq_watch,
};
