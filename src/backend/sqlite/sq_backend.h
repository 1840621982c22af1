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
#include "sqlite.h"

/* ---- Open-addressing hash map from a 64-bit hash to a pointer (sq_holds.c).
 * The caller owns the values; match() tells equal keys apart on collisions. */
struct map_slot {
    uint64_t hash;
    void *value; /* NULL: empty slot */
};

struct map {
    struct map_slot *slots;
    uint32_t capacity; /* 0 or a power of two */
    uint32_t count;
};

typedef bool (*map_match_fn)(const void *value, const void *key);

/* Makes room for `extra` more inserts. 0, or -1 when out of memory. */
int map_reserve(struct map *map, uint32_t extra);
void *map_find(const struct map *map, uint64_t hash, map_match_fn match, const void *key);
/* Room must have been reserved. */
void map_insert(struct map *map, uint64_t hash, void *value);
bool map_remove(struct map *map, uint64_t hash, map_match_fn match, const void *key);
void map_free(struct map *map);
uint64_t hash_bytes(const void *data, size_t length);
uint64_t hash_i64(int64_t value);

/* ---- What an expiring hold needs to know of its lease (for the audit
 * event and the caller's counters) without reading the lease row: shared by
 * the lease's holds, freed with the last. */
struct lease_ref {
    uint32_t refs;
    uint32_t caller_offset; /* text: lease_id, NUL, caller, NUL */
    char text[];
};

struct lease_ref *lease_ref_new(const char *lease_id, const char *caller);
struct lease_ref *lease_ref_keep(struct lease_ref *ref);
void lease_ref_drop(struct lease_ref *ref);
static inline const char *lease_ref_caller(const struct lease_ref *ref)
{
    return ref->text + ref->caller_offset;
}

/* ---- Live holds: an AVL tree per limit period ordered by (expiry, row id),
 * each node carrying the sum of the amounts below it, so the earliest expiry,
 * a removal and "when will `need` units have expired" are all O(log n). */
struct hold {
    struct hold *left;
    struct hold *right;
    uint64_t amount_sum; /* of this subtree, saturating */
    int64_t row_min;     /* least row_id of this subtree */
    int64_t expires_at_ms;
    int64_t row_id;  /* hold_row_id(lease seq, item index): the reservations view's id */
    uint64_t amount; /* held now: reserved, or (rolling) the completed actual */
    uint64_t debt;   /* rolling overage debt carried until expiry */
    struct lease_ref *lease;
    int32_t height;
    bool completed; /* rolling: completed (counts as used, not reserved) */
};

/* Deepest AVL tree we can ever build (1.44 log2 of 2^64 nodes). */
#define HOLDS_HEIGHT_MAX 96

struct hold *holds_insert(struct hold *root, struct hold *node);
/* Removes the node with this key; *removed gets it (NULL if absent). */
struct hold *holds_remove(struct hold *root, int64_t expires_at_ms, int64_t row_id,
                          struct hold **removed);
struct hold *holds_find(struct hold *root, int64_t expires_at_ms, int64_t row_id);
struct hold *holds_first(struct hold *root);
/* The hold at which the running sum of amounts, in expiry order, first
 * reaches `need`; NULL if the whole tree holds less. */
struct hold *holds_reaching(const struct hold *root, uint64_t need);
uint64_t holds_sum(const struct hold *root);
int64_t holds_row_min(const struct hold *root); /* INT64_MAX for an empty tree */

/* A hold is one item of one lease: row ids are seq * SQLITE_LEASE_ITEMS + index. */
#define SQLITE_LEASE_ITEMS REQUIREMENTS_PER_RESERVE_MAX
static inline int64_t hold_row_id(int64_t seq, uint32_t index)
{
    return seq * SQLITE_LEASE_ITEMS + (int64_t)index;
}
void holds_free_all(struct hold *root);
/* Frees one hold (and drops its lease_ref). */
void hold_free(struct hold *h);

/* ---- The mirror (sq_mirror.c). */

/* Counters of one limit in one period (budgets) or in its window (rolling,
 * concurrency: start_ms 0). Stored in the limit_usage table. */
struct period {
    struct limit *limit;
    int64_t start_ms;
    struct hold *holds;
    uint64_t hold_count;
    uint64_t reserved; /* holds of leases not completed */
    uint64_t used;     /* rolling: completed holds in window; budget: committed */
    uint64_t debt;
    struct period *dirty_next; /* in mirror.dirty while unwritten */
    bool dirty;
};

struct limit {
    int64_t id; /* limits.id: one per incarnation of a key */
    struct limit_state state;
    bool deleted;
    struct period **periods; /* rolling/concurrency: exactly one */
    uint32_t period_count;
    uint32_t period_capacity;
};

struct mirror {
    struct map limits_by_key; /* live (not deleted) limits */
    struct map limits_by_id;  /* every incarnation */
    int64_t next_limit_id;
    int64_t next_seq; /* leases.seq of the next new lease */
    uint64_t hold_count;
    struct period *dirty; /* periods changed and not yet written */
};

/* ---- Prepared statements of the write connection (sq_schema.c). */
enum statement {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_LEASE_INSERT,
    STMT_LEASE_UPDATE,
    STMT_LEASE_BY_ID,
    STMT_LEASE_BY_SEQ,
    STMT_LEASE_RENAME,
    STMT_EVENT_INSERT,
    STMT_EVENT_KEY,
    STMT_EXPIRATION_INSERT,
    STMT_EXPIRATION_GET,
    STMT_META_PUT,
    STMT_USAGE_PUT,
    STMT_USAGE_GET,
    STMT_CALLER_ADD,
    STMT_LIMIT_INSERT,
    STMT_LIMIT_UPDATE,
    STMT_LIMIT_DELETE,
    STMT_COUNT
};

/* ---- Leases as the writer works on them (sq_leases.c). A lease is one
 * row of the leases table with its reservations packed in `items`; the
 * writer loads it once per transaction, changes it in memory and writes it
 * (and one event_log row with its new audit events) when the transaction
 * ends, so a reserve costs one row and a complete one update. */
/* A ring of SQLITE_QUEUE_ITEMS_MAX calls handed from one thread to the next
 * (sq_sync.c), under its owner's mutex. */
struct item_ring {
    struct item *items;
    uint32_t head;
    uint32_t count;
};

/* A request left out of a redone transaction. */
struct skip {
    uint32_t item;
    uint32_t request;
};

enum lease_state { LEASE_ALLOWED, LEASE_DENIED, LEASE_COMPLETED, LEASE_RELEASED };

enum item_state {
    ITEM_RESERVED,
    ITEM_COMMITTED,
    ITEM_RELEASED,
    ITEM_EXPIRED,
    ITEM_COMMITTED_POST_EXPIRY,
};

/* One reservation: one requirement of an allowed lease. */
struct lease_item {
    int64_t limit_id;
    uint64_t amount;
    int64_t actual; /* -1: not completed */
    uint64_t held;  /* what it holds in the mirror while live */
    uint64_t debt;  /* rolling overage debt carried while live */
    int64_t period_start_ms;
    int64_t expires_at_ms;
    int64_t committed_at_ms; /* 0: not committed */
    enum item_state state;
    bool live; /* holds capacity (or rolling debt) in the mirror */
};

/* One audit event, buffered until the lease is written. type and detail
 * are string constants. */
struct lease_event {
    int64_t at_ms;
    const char *type;
    int64_t limit_id;
    uint64_t amount;
    uint64_t actual;
    const char *detail;
};

/* Room kept inside each record, so that most leases need no allocation. */
#define LEASE_INLINE_ITEMS 4
#define LEASE_INLINE_EVENTS 8
#define LEASE_INLINE_TEXT 96

struct lease_rec {
    struct lease_rec *next_free; /* in lease_cache.free_recs */
    int64_t seq;
    enum lease_state state;
    bool is_new;           /* not in the table yet */
    bool dirty;            /* changed since loaded or written */
    bool pinned;           /* in use by the current request: a flush keeps it */
    struct lease_ref *ref; /* new leases: shared with their holds */
    struct skip origin;    /* the request that last touched it (to skip if it cannot be written) */
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    char *fingerprint; /* the requirement set, canonical text */
    char *denied;      /* the keys that did not fit, one per line */
    char *event_rows;  /* its event_log rows, "id,id,..." */
    char inline_fingerprint[LEASE_INLINE_TEXT];
    char inline_denied[LEASE_INLINE_TEXT];
    char inline_event_rows[LEASE_INLINE_TEXT];
    int64_t reserved_at_ms;
    int64_t expires_at_ms;
    int64_t retry_after_ms;
    int64_t created_at_ms;
    int64_t finished_at_ms; /* 0: not finished */
    uint32_t item_count;
    uint32_t item_capacity;
    struct lease_item *items;
    uint32_t event_count;
    uint32_t event_capacity;
    struct lease_event *events;
    struct lease_item inline_items[LEASE_INLINE_ITEMS];
    struct lease_event inline_events[LEASE_INLINE_EVENTS];
};

/* Holds that expired in this transaction: written at its end as rows of
 * the expirations table and one event_log row of `expired` events. */
struct expiry {
    int64_t row_id;
    int64_t limit_id;
    int64_t at_ms;
    uint64_t amount;
    struct lease_ref *lease; /* kept until written */
    bool audited;            /* a reservation that was never completed */
};

/* A caller's budget counters changed in this transaction, added to
 * caller_usage once when it ends. */
struct caller_delta {
    int64_t limit_id;
    int64_t period_start_ms;
    int64_t reserved;
    int64_t used;
    int64_t debt;
    char caller[CALLER_LENGTH_MAX + 1];
};

/* The event_log rows written in this transaction that hold events of a
 * key: one event_keys entry when it ends. */
struct key_range {
    const char *key; /* the limit's (limits are never freed while the mirror lives) */
    int64_t first_event;
    int64_t last_event;
};

struct lease_cache {
    struct map by_id;  /* hash of lease_id */
    struct map by_seq; /* hash of seq */
    struct lease_rec **recs;
    uint32_t count;
    uint32_t capacity;
    struct lease_rec *free_recs; /* records to reuse, at most SQLITE_LEASE_CACHE_MAX */
    uint32_t free_count;
    struct expiry *expiries;
    uint32_t expiry_count;
    uint32_t expiry_capacity;
    struct map ranges_by_key; /* key_range by hash of key */
    struct key_range *ranges;
    uint32_t range_count;
    uint32_t range_capacity;
    struct map callers_by_key; /* caller_delta by hash of (limit, period, caller) */
    struct caller_delta *callers;
    uint32_t caller_count;
    uint32_t caller_capacity;
};

/* A growable text buffer (JSON of items and events). */
struct text {
    char *data;
    size_t length;
    size_t capacity;
};

/* ---- Queue items. */
enum item_kind {
    ITEM_RESERVE,
    ITEM_COMPLETE,
    ITEM_RELEASE,
    ITEM_CALL,
};

struct sq_backend;
struct call;
/* Runs on the writer thread inside the batch transaction. Returns
 * SQLITE_DONE, or an SQLite error code (the transaction is redone without it). */
typedef int (*call_fn)(struct sq_backend *backend, struct call *call);

/* A synchronous operation (admin, reads, tick) run by the writer. */
struct call {
    call_fn run;
    void *args;
    bool failed; /* the transaction did not commit: outcome unknown */
    bool finished;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
};

struct item {
    enum item_kind kind;
    uint32_t count;
    const void *requests;
    void *results;
    backend_done_fn done;
    void *context;
    struct call *call;
};

struct sq_backend {
    struct backend base; /* first: the ops see a struct backend */
    struct backend_config config;
    struct sq_options options;
    char data_dir[PATH_MAX];
    int lock_fd;
    sqlite3 *db; /* the write connection, writer thread only */
    sqlite3_stmt *statements[STMT_COUNT];
    sqlite3 *read_db;       /* audit-log reads, under read_mutex */
    sqlite3 *checkpoint_db; /* the checkpointer thread's */
    pthread_t checkpointer;
    bool checkpointer_started;
    atomic_int wal_pages;        /* WAL size after the last commit */
    atomic_int wal_checkpointed; /* WAL frames the last background checkpoint got through */
    pthread_mutex_t read_mutex;
    struct mirror mirror; /* writer thread only */
    bool mirror_stale;    /* reload before the next transaction */
    uint64_t random_state;

    pthread_mutex_t queue_mutex;
    pthread_cond_t queue_cond;
    pthread_cond_t checkpoint_cond;   /* with queue_mutex */
    pthread_mutex_t checkpoint_mutex; /* held while a checkpoint runs */
    struct item *queue;               /* ring of SQLITE_QUEUE_ITEMS_MAX */
    uint32_t queue_head;
    uint32_t queue_count;
    bool stopping;
    pthread_t writer;
    atomic_uint group_commit_max;
    struct item *batch;                  /* writer thread only: the calls of one transaction */
    struct ledger_scratch *scratch;      /* writer thread only */
    struct lease_cache leases;           /* writer thread only: this transaction's leases */
    struct skip current;                 /* writer thread only: the request running */
    bool write_failed;                   /* a lease could not be written: ... */
    struct skip write_failed_origin;     /* ... the request that touched it last */
    struct text json;                    /* writer thread only */
    struct skip skips[SQLITE_SKIPS_MAX]; /* writer thread only */
    uint32_t skip_count;

    /* The syncer (sq_sync.c): committed calls waiting for their fsync. */
    bool syncing; /* false with sqlite_synchronous_normal: answer at commit */
    pthread_mutex_t sync_mutex;
    pthread_cond_t sync_cond;
    pthread_cond_t sync_space_cond;
    struct item_ring sync_ring;
    struct item *sync_batch; /* syncer thread only */
    /* The answerer: resumes the callers of synced batches, so that the
     * syncer can start the next fsync at once. */
    pthread_mutex_t answer_mutex;
    pthread_cond_t answer_cond;
    struct item_ring answer_ring;
    struct item *answer_batch; /* answerer thread only */
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
    assert(base->ops == &sqlite_backend_ops);
    return (struct sq_backend *)base;
}

/* sq_schema.c: pragmas, schema creation and migration, statements. */
int schema_open(struct sq_backend *backend, const char *path, char *error, size_t error_size);
void schema_close(struct sq_backend *backend);
sqlite3_stmt *statement(struct sq_backend *backend, enum statement which);
/* Steps a statement that returns no row and resets it. SQLITE_DONE or an error code. */
int statement_run(sqlite3_stmt *stmt);
/* True for errors after which the transaction cannot go on (I/O, full, busy...). */
bool sql_error_is_fatal(int code);

/* sq_mirror.c */
int mirror_load(struct sq_backend *backend, char *error, size_t error_size);
void mirror_free(struct mirror *mirror);
struct limit *mirror_limit_by_key(struct mirror *mirror, const char *key);
struct limit *mirror_limit_by_id(struct mirror *mirror, int64_t id);
/* The period entry of a budget (loaded from limit_usage on first use) or the
 * single entry of a rolling/concurrency limit. NULL on an error. */
struct period *mirror_period(struct sq_backend *backend, struct limit *limit, int64_t start_ms);
/* The period entry if it is in the mirror (it is whenever it has live holds). */
struct period *mirror_period_find(const struct limit *limit, int64_t start_ms);
void mirror_touch(struct mirror *mirror, struct period *period);
/* Writes every dirty period. SQLITE_DONE or an error code. */
int mirror_flush(struct sq_backend *backend);
/* Expires the holds of `limit` due at now_ms, in expiry order: all of them,
 * or at most *budget_left (decremented). SQLITE_DONE or an error code. */
int mirror_expire(struct sq_backend *backend, struct limit *limit, int64_t now_ms,
                  uint64_t *budget_left);
/* Expires one hold (due or not): its row, event and counters. */
int mirror_expire_hold(struct sq_backend *backend, struct period *p, struct hold *h,
                       int64_t now_ms);
int mirror_add_limit(struct mirror *mirror, struct limit *limit);
void mirror_unlink_key(struct mirror *mirror, struct limit *limit);
struct limit *limit_new(int64_t id, const struct limit_state *state);
void limit_free(struct limit *limit);
/* Drops budget periods that hold nothing and are not current. */
void mirror_trim_periods(struct limit *limit, int64_t now_ms);

/* sq_leases.c. Each returns SQLITE_DONE/SQLITE_ROW as said, or an
 * SQLite error code (SQLITE_NOMEM for memory). */
/* SQLITE_ROW with *out (from this transaction's cache or the table),
 * SQLITE_DONE when the lease id is unknown. */
int leases_find(struct sq_backend *backend, const char *lease_id, struct lease_rec **out);
/* SQLITE_ROW with *out; SQLITE_CORRUPT when no lease has this seq. */
int leases_by_seq(struct sq_backend *backend, int64_t seq, struct lease_rec **out);
/* A new lease (is_new, dirty) with room for item_count items, in the cache. */
int leases_new(struct sq_backend *backend, const char *lease_id, uint32_t item_count,
               struct lease_rec **out);
/* Renames a lease that is forgotten (lease_retention_ms) to lease_id#seq,
 * so its id can name a new lease; its rows and events stay. */
int leases_forget(struct sq_backend *backend, struct lease_rec *rec);
int lease_event(struct sq_backend *backend, struct lease_rec *rec, int64_t at_ms, const char *type,
                int64_t limit_id, uint64_t amount, uint64_t actual, const char *detail);
/* Records a hold's expiry, written when the transaction ends. */
int leases_expired(struct sq_backend *backend, const struct expiry *expiry);
bool lease_live(const struct lease_rec *rec);
const char *lease_state_name(enum lease_state state);
const char *item_state_name(enum item_state state);
/* Writes every changed lease and its events; keeps pinned leases cached,
 * frees the others. */
int leases_flush(struct sq_backend *backend);
/* Flushes when the cache holds more than SQLITE_LEASE_CACHE_MAX leases. */
int leases_flush_if_full(struct sq_backend *backend);
/* Forgets the cache without writing (the transaction rolled back). */
void leases_discard(struct sq_backend *backend);
void leases_free(struct sq_backend *backend);
/* Parses the items column into rec (item_count, items; the items array
 * must have room for REQUIREMENTS_PER_RESERVE_MAX, or rec->item_capacity
 * is grown from the inline room). 0 or -1. */
int lease_items_parse(struct lease_rec *rec, const char *json);
/* Sets rec->fingerprint, rec->denied or rec->event_rows to a copy of text
 * (inline when it fits). */
int lease_set_text(struct lease_rec *rec, char **field, const char *text);
/* An event_log row's items, one at a time: 1 with *out filled (type and
 * detail copied into the buffers), 0 at the end, -1 on a malformed row. */
struct event_reader {
    const char *at;
};
struct event_item_text {
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
void event_reader_start(struct event_reader *reader, const char *json);
int event_reader_next(struct event_reader *reader, struct event_item_text *out);
/* The live-lease watermark: no lease below this seq holds anything. */
int64_t leases_live_from(struct sq_backend *backend);

/* sq_ledger.c: the data path, one request at a time, inside the batch
 * transaction. Each returns SQLITE_DONE (the result is filled) or an SQLite
 * error code (SQLITE_NOMEM for memory), after which the writer rolls the
 * transaction back and redoes it without that request. */
struct ledger_scratch *ledger_scratch_new(void); /* free() it */
int ledger_reserve(struct sq_backend *backend, const struct reserve_request *request,
                   struct reserve_result *result);
int ledger_complete(struct sq_backend *backend, const struct complete_request *request,
                    struct complete_result *result);
int ledger_release(struct sq_backend *backend, const struct release_request *request,
                   struct release_result *result);
/* A limit's own event (limit_changed), written at once as its own row. */
int ledger_limit_event(struct sq_backend *backend, int64_t at_ms, const struct limit *limit,
                       uint64_t amount, const char *detail);
/* Adds to a caller's counters of a budget period (nothing for other kinds),
 * written when the transaction ends. */
int ledger_caller_add(struct sq_backend *backend, const struct limit *limit,
                      int64_t period_start_ms, const char *caller, int64_t reserved, int64_t used,
                      int64_t debt);
/* The lease side of one hold's expiry: its item, its audit event and the
 * caller's budget counters (the mirror side is mirror_expire_hold's). */
int ledger_expire_item(struct sq_backend *backend, const struct period *p, const struct hold *h,
                       int64_t now_ms);

/* sqlite.c: hands a call to the writer and waits. 0 when it committed. */
int writer_call(struct sq_backend *backend, call_fn run, void *args);
/* Results of a request whose outcome is unknown (backend_error). */
void item_unavailable(struct item *item);
/* Answers: the done callback, or wakes the caller of a call. */
void item_finish(struct item *item);

/* sq_sync.c */
int syncer_start(struct sq_backend *backend);
/* Answers every call handed so far, then stops. */
void syncer_stop(struct sq_backend *backend);
/* Hands committed calls over; they are answered once the WAL is synced.
 * Blocks while SQLITE_QUEUE_ITEMS_MAX calls are waiting. */
void syncer_hand(struct sq_backend *backend, struct item *items, uint32_t count);

/* sq_admin.c: the synchronous ops of backend.h. */
int sqlite_admin_put_limit(struct backend *base, const struct limit_definition *definition,
                           struct limit_state *state_out, char *error, size_t error_size);
int sqlite_admin_restore_limit(struct backend *base, const struct limit_state *state, char *error,
                               size_t error_size);
int sqlite_admin_delete_limit(struct backend *base, const char *key);
int sqlite_admin_get_limit(struct backend *base, const char *key, struct limit_state *out);
int sqlite_admin_list_limits(struct backend *base, struct limit_state **out, size_t *count);
int sqlite_admin_usage(struct backend *base, const char *key, int64_t at_unix_ms,
                       struct limit_usage *out);
int sqlite_admin_tick(struct backend *base, bool *limits_changed);
int sqlite_admin_events(struct backend *base, const struct event_query *query,
                        struct backend_event **out, size_t *count);
int sqlite_admin_usage_by_caller(struct backend *base, const char *key, int64_t at_unix_ms,
                                 struct caller_usage **out, size_t *count);

#endif
