/* The sqlite backend's own struct, which every one of its files works on,
 * and the order in which its modules may call each other. Not a public
 * interface (that is sqlite.h).
 *
 * A module calls only the modules listed below it, so the calls go one way:
 *
 *   sqlite.c   the ops table, open and close, the writer thread (group
 *              commit) and the checkpointer
 *   sq_admin   the synchronous ops, each run as a call on the writer
 *   sq_console the console's reads (a page of limits, one limit's holds),
 *              each run as a call on the writer
 *   sq_sync    the syncer and the answerer: fsync of the WAL, then answers
 *   sq_ledger  reserve, complete, release; the expiry of holds, which
 *              frees the hold in the mirror and records it with its lease
 *   sq_leases  this transaction's leases, their audit events, the
 *              expiries and callers' counters to write when it ends
 *   sq_mirror  limits, their counters and live holds in memory; loading
 *   sq_queue   the writer's queue; answering its items
 *   sq_json    the JSON items columns of leases and of the audit log
 *   sq_schema  connections, schema and migrations, prepared statements
 *   sq_holds   the AVL tree of a period's holds; lease references
 *   sq_map     the hash map
 *   sq_backend the backend's identity: the name its ops table carries
 *
 * The backend's state is struct sq_backend below, which every module works
 * on (a field's comment says which thread may touch it). sq_backend_of()
 * knows a backend's ops for sqlite.c's table by the name the table carries,
 * sq_backend_name (sq_backend.c), not by the table's address, so that no
 * file reaches up to the ops table. This header includes the module headers
 * whose types the struct embeds, whose files include it back: an include
 * circle tests/layers/test_layers.py lists as waiting for its fix. */
#ifndef LLMLIMIT_BACKEND_SQLITE_BACKEND_H
#define LLMLIMIT_BACKEND_SQLITE_BACKEND_H

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "sq_bounds.h"
#include "sq_json.h"
#include "sq_leases.h"
#include "sq_mirror.h"
#include "sq_queue.h"
#include "sq_schema.h"
#include "sq_sync.h"
#include "sqlite.h"

struct sq_ledger_scratch;

struct sq_backend {
    struct backend base; /* first: the ops see a struct backend */
    struct backend_config config;
    struct sq_options options;
    char data_dir[PATH_MAX];
    int lock_fd;
    sqlite3 *db; /* the write connection, writer thread only */
    sqlite3_stmt *statements[SQ_STMT_COUNT];
    sqlite3 *read_db;       /* audit-log reads, under read_mutex */
    sqlite3 *checkpoint_db; /* the checkpointer thread's */
    pthread_t checkpointer;
    bool checkpointer_started;
    atomic_int wal_pages;        /* WAL size after the last commit */
    atomic_int wal_checkpointed; /* WAL frames the last background checkpoint got through */
    pthread_mutex_t read_mutex;
    struct sq_mirror mirror; /* writer thread only */
    bool mirror_stale;       /* reload before the next transaction */
    uint64_t random_state;

    pthread_mutex_t queue_mutex;
    pthread_cond_t queue_cond;
    pthread_cond_t checkpoint_cond;   /* with queue_mutex */
    pthread_mutex_t checkpoint_mutex; /* held while a checkpoint runs */
    struct sq_item *queue;            /* ring of SQ_QUEUE_ITEMS_MAX */
    uint32_t queue_head;
    uint32_t queue_count;
    bool stopping;
    pthread_t writer;
    atomic_uint group_commit_max;
    struct sq_item *batch;              /* writer thread only: the calls of one transaction */
    struct sq_ledger_scratch *scratch;  /* writer thread only */
    struct sq_lease_cache leases;       /* writer thread only: this transaction's leases */
    struct sq_skip current;             /* writer thread only: the request running */
    bool write_failed;                  /* a lease could not be written: ... */
    struct sq_skip write_failed_origin; /* ... the request that touched it last */
    struct sq_text json;                /* writer thread only */
    struct sq_skip skips[SQ_SKIPS_MAX]; /* writer thread only */
    uint32_t skip_count;

    /* The syncer (sq_sync.c): committed calls waiting for their fsync. */
    bool syncing; /* false with sqlite_synchronous_normal: answer at commit */
    bool sync_deferred; /* the writer handed the syncer a batch without waking it */
    pthread_mutex_t sync_mutex;
    pthread_cond_t sync_cond;
    pthread_cond_t sync_space_cond;
    struct sq_item_ring sync_ring;
    struct sq_item *sync_batch; /* syncer thread only */
    /* The answerer: resumes the callers of synced batches, so that the
     * syncer can start the next fsync at once. */
    pthread_mutex_t answer_mutex;
    pthread_cond_t answer_cond;
    struct sq_item_ring answer_ring;
    struct sq_item *answer_batch; /* answerer thread only */
    bool answer_stopping;
    pthread_t answerer;
    bool answerer_started;
    bool sync_stopping;
    pthread_t syncer;
    bool syncer_started;
    sqlite3_file *wal_file;      /* writer thread only */
    sqlite3_file *sync_wal_file; /* under sync_mutex */
    atomic_bool failed;          /* a WAL fsync failed: 503 until restart */
    atomic_uint_fast64_t syncs;

    atomic_bool ready;
    atomic_uint_fast64_t batches;
    atomic_uint_fast64_t batched_items;
    atomic_uint_fast64_t overage_denied;
    atomic_uint_fast64_t expired_holds;
    atomic_uint_fast64_t live_holds;
    atomic_uint_fast64_t queue_full;

    /* Told of freed capacity after each commit (backend.h, watch); the
     * writer calls it under watch_mutex. */
    pthread_mutex_t watch_mutex;
    struct backend_watch watch;
};

/* "sqlite": the name of sq_backend_ops, whose address tells its table. */
extern const char sq_backend_name[];

static inline struct sq_backend *sq_backend_of(struct backend *base)
{
    assert(base->ops->name == sq_backend_name);
    return (struct sq_backend *)base;
}

#endif
