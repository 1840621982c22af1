/* Internals of the sqlite backend shared by its files: the write queue, the
 * in-memory mirror of limits and live holds (owned by the writer thread, the
 * only mutator), the prepared statements. Not a public interface. */
#ifndef LLMLIMIT_BACKEND_SQLITE_BACKEND_H
#define LLMLIMIT_BACKEND_SQLITE_BACKEND_H

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "sq_bounds.h"
#include "sqlite.h"

/* ---- Open-addressing hash map from a 64-bit hash to a pointer (sq_holds.c).
 * The caller owns the values; match() tells equal keys apart on collisions. */
struct sq_map_slot {
    uint64_t hash;
    void *value; /* NULL: empty slot */
};

struct sq_map {
    struct sq_map_slot *slots;
    uint32_t capacity; /* 0 or a power of two */
    uint32_t count;
};

typedef bool (*sq_map_match_fn)(const void *value, const void *key);

/* Makes room for `extra` more inserts. 0, or -1 when out of memory. */
int sq_map_reserve(struct sq_map *map, uint32_t extra);
void *sq_map_find(const struct sq_map *map, uint64_t hash, sq_map_match_fn match, const void *key);
/* Room must have been reserved. */
void sq_map_insert(struct sq_map *map, uint64_t hash, void *value);
bool sq_map_remove(struct sq_map *map, uint64_t hash, sq_map_match_fn match, const void *key);
void sq_map_free(struct sq_map *map);
uint64_t sq_hash_bytes(const void *data, size_t length);
uint64_t sq_hash_i64(int64_t value);

/* ---- What an expiring hold needs to know of its lease (for the audit
 * event and the caller's counters) without reading the lease row: shared by
 * the lease's holds, freed with the last. */
struct sq_lease_ref {
    uint32_t refs;
    uint32_t caller_offset; /* text: lease_id, NUL, caller, NUL */
    char text[];
};

struct sq_lease_ref *sq_lease_ref_new(const char *lease_id, const char *caller);
struct sq_lease_ref *sq_lease_ref_keep(struct sq_lease_ref *ref);
void sq_lease_ref_drop(struct sq_lease_ref *ref);
static inline const char *sq_lease_ref_caller(const struct sq_lease_ref *ref)
{
    return ref->text + ref->caller_offset;
}

/* ---- Live holds: an AVL tree per limit period ordered by (expiry, row id),
 * each node carrying the sum of the amounts below it, so the earliest expiry,
 * a removal and "when will `need` units have expired" are all O(log n). */
struct sq_hold {
    struct sq_hold *left;
    struct sq_hold *right;
    uint64_t amount_sum; /* of this subtree, saturating */
    int64_t row_min;     /* least row_id of this subtree */
    int64_t expires_at_ms;
    int64_t row_id;  /* sq_hold_row_id(lease seq, item index): the reservations view's id */
    uint64_t amount; /* held now: reserved, or (rolling) the completed actual */
    uint64_t debt;   /* rolling overage debt carried until expiry */
    struct sq_lease_ref *lease;
    int32_t height;
    bool completed; /* rolling: completed (counts as used, not reserved) */
};

/* Deepest AVL tree we can ever build (1.44 log2 of 2^64 nodes). */
#define SQ_HOLDS_HEIGHT_MAX 96

struct sq_hold *sq_holds_insert(struct sq_hold *root, struct sq_hold *node);
/* Removes the node with this key; *removed gets it (NULL if absent). */
struct sq_hold *sq_holds_remove(struct sq_hold *root, int64_t expires_at_ms, int64_t row_id,
                                struct sq_hold **removed);
struct sq_hold *sq_holds_find(struct sq_hold *root, int64_t expires_at_ms, int64_t row_id);
struct sq_hold *sq_holds_first(struct sq_hold *root);
/* The hold at which the running sum of amounts, in expiry order, first
 * reaches `need`; NULL if the whole tree holds less. */
struct sq_hold *sq_holds_reaching(const struct sq_hold *root, uint64_t need);
uint64_t sq_holds_sum(const struct sq_hold *root);
int64_t sq_holds_row_min(const struct sq_hold *root); /* INT64_MAX for an empty tree */

/* A hold is one item of one lease: row ids are seq * SQ_LEASE_ITEMS + index. */
#define SQ_LEASE_ITEMS REQUIREMENTS_PER_RESERVE_MAX
static inline int64_t sq_hold_row_id(int64_t seq, uint32_t index)
{
    return seq * SQ_LEASE_ITEMS + (int64_t)index;
}
void sq_holds_free_all(struct sq_hold *root);
/* Frees one hold (and drops its lease_ref). */
void sq_hold_free(struct sq_hold *h);

/* ---- The mirror (sq_mirror.c). */

/* Counters of one limit in one period (budgets) or in its window (rolling,
 * concurrency: start_ms 0). Stored in the limit_usage table. */
struct sq_period {
    struct sq_limit *limit;
    int64_t start_ms;
    struct sq_hold *holds;
    uint64_t hold_count;
    uint64_t reserved; /* holds of leases not completed */
    uint64_t used;     /* rolling: completed holds in window; budget: committed */
    uint64_t debt;
    struct sq_period *dirty_next; /* in mirror.dirty while unwritten */
    bool dirty;
};

struct sq_limit {
    int64_t id; /* limits.id: one per incarnation of a key */
    struct limit_state state;
    bool deleted;
    struct sq_period **periods; /* rolling/concurrency: exactly one */
    uint32_t period_count;
    uint32_t period_capacity;
};

struct sq_mirror {
    struct sq_map limits_by_key; /* live (not deleted) limits */
    struct sq_map limits_by_id;  /* every incarnation */
    int64_t next_limit_id;
    int64_t next_seq; /* leases.seq of the next new lease */
    uint64_t hold_count;
    struct sq_period *dirty; /* periods changed and not yet written */
};

/* ---- Prepared statements of the write connection (sq_schema.c). */
enum sq_statement {
    SQ_STMT_BEGIN,
    SQ_STMT_COMMIT,
    SQ_STMT_ROLLBACK,
    SQ_STMT_LEASE_INSERT,
    SQ_STMT_LEASE_UPDATE,
    SQ_STMT_LEASE_BY_ID,
    SQ_STMT_LEASE_BY_SEQ,
    SQ_STMT_LEASE_RENAME,
    SQ_STMT_EVENT_INSERT,
    SQ_STMT_EVENT_KEY,
    SQ_STMT_EXPIRATION_INSERT,
    SQ_STMT_EXPIRATION_GET,
    SQ_STMT_META_PUT,
    SQ_STMT_USAGE_PUT,
    SQ_STMT_USAGE_GET,
    SQ_STMT_CALLER_ADD,
    SQ_STMT_LIMIT_INSERT,
    SQ_STMT_LIMIT_UPDATE,
    SQ_STMT_LIMIT_DELETE,
    SQ_STMT_COUNT
};

/* ---- Leases as the writer works on them (sq_leases.c). A lease is one
 * row of the leases table with its reservations packed in `items`; the
 * writer loads it once per transaction, changes it in memory and writes it
 * (and one event_log row with its new audit events) when the transaction
 * ends, so a reserve costs one row and a complete one update. */
/* A ring of SQ_QUEUE_ITEMS_MAX calls handed from one thread to the next
 * (sq_sync.c), under its owner's mutex. */
struct sq_item_ring {
    struct sq_item *items;
    uint32_t head;
    uint32_t count;
};

/* A request left out of a redone transaction. */
struct sq_skip {
    uint32_t item;
    uint32_t request;
};

enum sq_lease_state { SQ_LEASE_ALLOWED, SQ_LEASE_DENIED, SQ_LEASE_COMPLETED, SQ_LEASE_RELEASED };

enum sq_item_state {
    SQ_ITEM_RESERVED,
    SQ_ITEM_COMMITTED,
    SQ_ITEM_RELEASED,
    SQ_ITEM_EXPIRED,
    SQ_ITEM_COMMITTED_POST_EXPIRY,
};

/* One reservation: one requirement of an allowed lease. */
struct sq_lease_item {
    int64_t limit_id;
    uint64_t amount;
    int64_t actual; /* -1: not completed */
    uint64_t held;  /* what it holds in the mirror while live */
    uint64_t debt;  /* rolling overage debt carried while live */
    int64_t period_start_ms;
    int64_t expires_at_ms;
    int64_t committed_at_ms; /* 0: not committed */
    enum sq_item_state state;
    bool live; /* holds capacity (or rolling debt) in the mirror */
};

/* One audit event, buffered until the lease is written. type and detail
 * are string constants. */
struct sq_lease_event {
    int64_t at_ms;
    const char *type;
    int64_t limit_id;
    uint64_t amount;
    uint64_t actual;
    const char *detail;
};

/* Room kept inside each record, so that most leases need no allocation. */
#define SQ_LEASE_INLINE_ITEMS 4
#define SQ_LEASE_INLINE_EVENTS 8
#define SQ_LEASE_INLINE_TEXT 96

struct sq_lease_rec {
    struct sq_lease_rec *next_free; /* in lease_cache.free_recs */
    int64_t seq;
    enum sq_lease_state state;
    bool is_new;              /* not in the table yet */
    bool dirty;               /* changed since loaded or written */
    bool pinned;              /* in use by the current request: a flush keeps it */
    struct sq_lease_ref *ref; /* new leases: shared with their holds */
    struct sq_skip origin; /* the request that last touched it (to skip if it cannot be written) */
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    char *fingerprint; /* the requirement set, canonical text */
    char *denied;      /* the keys that did not fit, one per line */
    char *event_rows;  /* its event_log rows, "id,id,..." */
    char inline_fingerprint[SQ_LEASE_INLINE_TEXT];
    char inline_denied[SQ_LEASE_INLINE_TEXT];
    char inline_event_rows[SQ_LEASE_INLINE_TEXT];
    int64_t reserved_at_ms;
    int64_t expires_at_ms;
    int64_t retry_after_ms;
    int64_t created_at_ms;
    int64_t finished_at_ms; /* 0: not finished */
    uint32_t item_count;
    uint32_t item_capacity;
    struct sq_lease_item *items;
    uint32_t event_count;
    uint32_t event_capacity;
    struct sq_lease_event *events;
    struct sq_lease_item inline_items[SQ_LEASE_INLINE_ITEMS];
    struct sq_lease_event inline_events[SQ_LEASE_INLINE_EVENTS];
};

/* Holds that expired in this transaction: written at its end as rows of
 * the expirations table and one event_log row of `expired` events. */
struct sq_expiry {
    int64_t row_id;
    int64_t limit_id;
    int64_t at_ms;
    uint64_t amount;
    struct sq_lease_ref *lease; /* kept until written */
    bool audited;               /* a reservation that was never completed */
};

/* A caller's budget counters changed in this transaction, added to
 * caller_usage once when it ends. */
struct sq_caller_delta {
    int64_t limit_id;
    int64_t period_start_ms;
    int64_t reserved;
    int64_t used;
    int64_t debt;
    char caller[CALLER_LENGTH_MAX + 1];
};

/* The event_log rows written in this transaction that hold events of a
 * key: one event_keys entry when it ends. */
struct sq_key_range {
    const char *key; /* the limit's (limits are never freed while the mirror lives) */
    int64_t first_event;
    int64_t last_event;
};

struct sq_lease_cache {
    struct sq_map by_id;  /* hash of lease_id */
    struct sq_map by_seq; /* hash of seq */
    struct sq_lease_rec **recs;
    uint32_t count;
    uint32_t capacity;
    struct sq_lease_rec *free_recs; /* records to reuse, at most SQ_LEASE_CACHE_MAX */
    uint32_t free_count;
    struct sq_expiry *expiries;
    uint32_t expiry_count;
    uint32_t expiry_capacity;
    struct sq_map ranges_by_key; /* key_range by hash of key */
    struct sq_key_range *ranges;
    uint32_t range_count;
    uint32_t range_capacity;
    struct sq_map callers_by_key; /* caller_delta by hash of (limit, period, caller) */
    struct sq_caller_delta *callers;
    uint32_t caller_count;
    uint32_t caller_capacity;
};

/* A growable text buffer (JSON of items and events). */
struct sq_text {
    char *data;
    size_t length;
    size_t capacity;
};

/* ---- Queue items. */
enum sq_item_kind {
    SQ_ITEM_RESERVE,
    SQ_ITEM_COMPLETE,
    SQ_ITEM_RELEASE,
    SQ_ITEM_CALL,
};

struct sq_backend;
struct sq_call;
/* Runs on the writer thread inside the batch transaction. Returns
 * SQLITE_DONE, or an SQLite error code (the transaction is redone without it). */
typedef int (*sq_call_fn)(struct sq_backend *backend, struct sq_call *call);

/* A synchronous operation (admin, reads, tick) run by the writer. */
struct sq_call {
    sq_call_fn run;
    void *args;
    bool failed; /* the transaction did not commit: outcome unknown */
    bool finished;
    pthread_mutex_t mutex;
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
};

static inline struct sq_backend *sq_backend_of(struct backend *base)
{
    assert(base->ops == &sq_backend_ops);
    return (struct sq_backend *)base;
}

/* sq_schema.c: pragmas, schema creation and migration, statements. */
int sq_schema_open(struct sq_backend *backend, const char *path, char *error, size_t error_size);
void sq_schema_close(struct sq_backend *backend);
sqlite3_stmt *sq_statement(struct sq_backend *backend, enum sq_statement which);
/* Steps a statement that returns no row and resets it. SQLITE_DONE or an error code. */
int sq_statement_run(sqlite3_stmt *stmt);
/* True for errors after which the transaction cannot go on (I/O, full, busy...). */
bool sq_sql_error_is_fatal(int code);

/* sq_mirror.c */
int sq_mirror_load(struct sq_backend *backend, char *error, size_t error_size);
void sq_mirror_free(struct sq_mirror *mirror);
struct sq_limit *sq_mirror_limit_by_key(struct sq_mirror *mirror, const char *key);
struct sq_limit *sq_mirror_limit_by_id(struct sq_mirror *mirror, int64_t id);
/* The period entry of a budget (loaded from limit_usage on first use) or the
 * single entry of a rolling/concurrency limit. NULL on an error. */
struct sq_period *sq_mirror_period(struct sq_backend *backend, struct sq_limit *limit,
                                   int64_t start_ms);
/* The period entry if it is in the mirror (it is whenever it has live holds). */
struct sq_period *sq_mirror_period_find(const struct sq_limit *limit, int64_t start_ms);
void sq_mirror_touch(struct sq_mirror *mirror, struct sq_period *period);
/* Writes every dirty period. SQLITE_DONE or an error code. */
int sq_mirror_flush(struct sq_backend *backend);
/* Expires the holds of `limit` due at now_ms, in expiry order: all of them,
 * or at most *budget_left (decremented). SQLITE_DONE or an error code. */
int sq_mirror_expire(struct sq_backend *backend, struct sq_limit *limit, int64_t now_ms,
                     uint64_t *budget_left);
/* Expires one hold (due or not): its row, event and counters. */
int sq_mirror_expire_hold(struct sq_backend *backend, struct sq_period *p, struct sq_hold *h,
                          int64_t now_ms);
int sq_mirror_add_limit(struct sq_mirror *mirror, struct sq_limit *limit);
void sq_mirror_unlink_key(struct sq_mirror *mirror, struct sq_limit *limit);
struct sq_limit *sq_limit_new(int64_t id, const struct limit_state *state);
void sq_limit_free(struct sq_limit *limit);
/* Drops budget periods that hold nothing and are not current. */
void sq_mirror_trim_periods(struct sq_limit *limit, int64_t now_ms);

/* sq_leases.c. Each returns SQLITE_DONE/SQLITE_ROW as said, or an
 * SQLite error code (SQLITE_NOMEM for memory). */
/* SQLITE_ROW with *out (from this transaction's cache or the table),
 * SQLITE_DONE when the lease id is unknown. */
int sq_leases_find(struct sq_backend *backend, const char *lease_id, struct sq_lease_rec **out);
/* SQLITE_ROW with *out; SQLITE_CORRUPT when no lease has this seq. */
int sq_leases_by_seq(struct sq_backend *backend, int64_t seq, struct sq_lease_rec **out);
/* A new lease (is_new, dirty) with room for item_count items, in the cache. */
int sq_leases_new(struct sq_backend *backend, const char *lease_id, uint32_t item_count,
                  struct sq_lease_rec **out);
/* Renames a lease that is forgotten (lease_retention_ms) to lease_id#seq,
 * so its id can name a new lease; its rows and events stay. */
int sq_leases_forget(struct sq_backend *backend, struct sq_lease_rec *rec);
int sq_lease_event(struct sq_backend *backend, struct sq_lease_rec *rec, int64_t at_ms,
                   const char *type, int64_t limit_id, uint64_t amount, uint64_t actual,
                   const char *detail);
/* Records a hold's expiry, written when the transaction ends. */
int sq_leases_expired(struct sq_backend *backend, const struct sq_expiry *expiry);
bool sq_lease_live(const struct sq_lease_rec *rec);
const char *sq_lease_state_name(enum sq_lease_state state);
const char *sq_item_state_name(enum sq_item_state state);
/* Writes every changed lease and its events; keeps pinned leases cached,
 * frees the others. */
int sq_leases_flush(struct sq_backend *backend);
/* Flushes when the cache holds more than SQ_LEASE_CACHE_MAX leases. */
int sq_leases_flush_if_full(struct sq_backend *backend);
/* Forgets the cache without writing (the transaction rolled back). */
void sq_leases_discard(struct sq_backend *backend);
void sq_leases_free(struct sq_backend *backend);
/* Parses the items column into rec (item_count, items; the items array
 * must have room for REQUIREMENTS_PER_RESERVE_MAX, or rec->item_capacity
 * is grown from the inline room). 0 or -1. */
int sq_lease_items_parse(struct sq_lease_rec *rec, const char *json);
/* Sets rec->fingerprint, rec->denied or rec->event_rows to a copy of text
 * (inline when it fits). */
int sq_lease_set_text(struct sq_lease_rec *rec, char **field, const char *text);
/* An event_log row's items, one at a time: 1 with *out filled (type and
 * detail copied into the buffers), 0 at the end, -1 on a malformed row. */
struct sq_event_reader {
    const char *at;
};
struct sq_event_item_text {
    bool has_lease; /* an expiry row's item names its lease and caller */
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    int64_t at_ms;
    char type[32];
    int64_t limit_id; /* the key is the limit's (limits.key) */
    uint64_t amount;
    uint64_t actual;
    char detail[128];
};
void sq_event_reader_start(struct sq_event_reader *reader, const char *json);
int sq_event_reader_next(struct sq_event_reader *reader, struct sq_event_item_text *out);
/* The live-lease watermark: no lease below this seq holds anything. */
int64_t sq_leases_live_from(struct sq_backend *backend);

/* sq_ledger.c: the data path, one request at a time, inside the batch
 * transaction. Each returns SQLITE_DONE (the result is filled) or an SQLite
 * error code (SQLITE_NOMEM for memory), after which the writer rolls the
 * transaction back and redoes it without that request. */
struct sq_ledger_scratch *sq_ledger_scratch_new(void); /* free() it */
int sq_ledger_reserve(struct sq_backend *backend, const struct reserve_request *request,
                      struct reserve_result *result);
int sq_ledger_complete(struct sq_backend *backend, const struct complete_request *request,
                       struct complete_result *result);
int sq_ledger_release(struct sq_backend *backend, const struct release_request *request,
                      struct release_result *result);
/* A limit's own event (limit_changed), written at once as its own row. */
int sq_ledger_limit_event(struct sq_backend *backend, int64_t at_ms, const struct sq_limit *limit,
                          uint64_t amount, const char *detail);
/* Adds to a caller's counters of a budget period (nothing for other kinds),
 * written when the transaction ends. */
int sq_ledger_caller_add(struct sq_backend *backend, const struct sq_limit *limit,
                         int64_t period_start_ms, const char *caller, int64_t reserved,
                         int64_t used, int64_t debt);
/* The lease side of one hold's expiry: its item, its audit event and the
 * caller's budget counters (the mirror side is sq_mirror_expire_hold's). */
int sq_ledger_expire_item(struct sq_backend *backend, const struct sq_period *p,
                          const struct sq_hold *h, int64_t now_ms);

/* sqlite.c: hands a call to the writer and waits. 0 when it committed. */
int sq_writer_call(struct sq_backend *backend, sq_call_fn run, void *args);
/* Results of a request whose outcome is unknown (backend_error). */
void sq_item_unavailable(struct sq_item *item);
/* Answers: the done callback, or wakes the caller of a call. */
void sq_item_finish(struct sq_item *item);

/* sq_sync.c */
int sq_syncer_start(struct sq_backend *backend);
/* Answers every call handed so far, then stops. */
void sq_syncer_stop(struct sq_backend *backend);
/* Hands committed calls over; they are answered once the WAL is synced.
 * Blocks while SQ_QUEUE_ITEMS_MAX calls are waiting. */
void sq_syncer_hand(struct sq_backend *backend, struct sq_item *items, uint32_t count);

/* sq_admin.c: the synchronous ops of backend.h. */
int sq_admin_put_limit(struct backend *base, const struct limit_definition *definition,
                       struct limit_state *state_out, char *error, size_t error_size);
int sq_admin_restore_limit(struct backend *base, const struct limit_state *state, char *error,
                           size_t error_size);
int sq_admin_delete_limit(struct backend *base, const char *key);
int sq_admin_get_limit(struct backend *base, const char *key, struct limit_state *out);
int sq_admin_list_limits(struct backend *base, struct limit_state **out, size_t *count);
int sq_admin_usage(struct backend *base, const char *key, int64_t at_unix_ms,
                   struct limit_usage *out);
int sq_admin_tick(struct backend *base, bool *limits_changed);
int sq_admin_events(struct backend *base, const struct event_query *query,
                    struct backend_event **out, size_t *count);
int sq_admin_usage_by_caller(struct backend *base, const char *key, int64_t at_unix_ms,
                             struct caller_usage **out, size_t *count);

#endif
