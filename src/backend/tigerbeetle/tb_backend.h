/* Internal types of the tigerbeetle backend, shared by its files only: the
 * limit registry (each limit's accounts in the cluster), the lease cache,
 * the asynchronous jobs that carry a reserve, complete or release through
 * one or more TigerBeetle requests, and the maintenance thread.
 *
 * A file calls only the files listed below it, so the calls go one way:
 *
 *   tigerbeetle.c  the ops table, open and close, the maintenance thread;
 *                  makes each request's job with its first step
 *   tb_console     the console's reads
 *   tb_usage       usage_batch: balances in packed lookups
 *   tb_reserve     the reserve's steps
 *   tb_complete    the complete's and release's steps
 *   tb_registry    limit states and their account ids
 *   tb_provision   the blocking admin conversations with the cluster
 *   tb_ledger      the account model: labels, ids, shapes
 *   tb_jobs        calls and jobs: the pool, a lease's waiting jobs,
 *                  parking, submitting, finishing; it starts a job again
 *                  through the job's first step (struct tb_job's start),
 *                  never by naming a step
 *   tb_leases      the lease cache and the reserves in doubt
 *   tb_backend     the backend's identity: the name its ops table carries
 *
 * tb_backend_of() knows a backend's ops for tigerbeetle.c's table by the
 * name the table carries, tb_backend_name (tb_backend.c), not by the
 * table's address, so that no file reaches up to the ops table. */
#ifndef LLMLIMIT_TB_BACKEND_H
#define LLMLIMIT_TB_BACKEND_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "tbclient/tbc_submitter.h"
#include "util/slab.h"
#include "tb_bounds.h"
#include "tbclient/tbc_types.h"

/* One ledger; transfer codes tell what a transfer is for (docs/tigerbeetle.md
 * "Account model"). */
#define TB_LEDGER 1
enum tb_code {
    TB_CODE_RESERVE = 1,   /* a lease's hold (pending) */
    TB_CODE_CAPACITY = 2,  /* operator <-> limit: capacity top-up or decrease */
    TB_CODE_RERESERVE = 3, /* rolling: what a completed lease keeps for the window */
    TB_CODE_USED = 4,      /* rolling: the same amount on the used account (reporting) */
    TB_CODE_DEBT = 5,      /* overage recorded as debt */
    TB_CODE_SPEND = 6,     /* budget: an amount owed to the period */
    TB_CODE_SETTLE = 7,    /* budget: free capacity paying what is owed */
    TB_CODE_CUT = 8,       /* budget: a capacity decrease owed to the period */
    TB_CODE_FINAL = 9,     /* a lease finalized after all its holds expired */
};
/* Account codes. */
enum tb_account_code {
    TB_ACCOUNT_CODE_OPERATOR = 1,
    TB_ACCOUNT_CODE_LIMIT = 2,
    TB_ACCOUNT_CODE_USED = 3,
    TB_ACCOUNT_CODE_DEBT = 4,
    TB_ACCOUNT_CODE_BUDGET = 5,
    TB_ACCOUNT_CODE_SPEND = 6,
    TB_ACCOUNT_CODE_CUT = 7,
    TB_ACCOUNT_CODE_FINALIZED = 8,
    TB_ACCOUNT_CODE_ALERT_CLAIM = 9, /* an alert one front end delivers (tb_provision_claim) */
};
/* user_data_32 of a void says who voided: a complete or a release. A void
 * of the other kind then fails with exists_with_different_user_data_32,
 * which is how any front end knows a lease was finalized the other way. */
#define TB_VOID_BY_COMPLETE 1u
#define TB_VOID_BY_RELEASE 2u

/* A lease's id, and the timestamp that leads the ids made from it (-1:
 * none, label ids), read once per job (tb_ledger_lease_name). */
struct tb_lease_name {
    const char *id;
    uint32_t length;
    int64_t unix_ms;
};

/* Retry-after memory of one limit: its holds made here, oldest first. */
struct tb_hold_note {
    int64_t expires_at_ms; /* local clock */
    int64_t period_start_ms;
    uint64_t amount; /* what it still holds until then: 0 once released */
};

/* Notes are numbered in the order they are made (from 1), so a complete
 * or release finds its hold's note in one step while it is still kept. */
struct tb_hold_ring {
    struct tb_hold_note *notes; /* TB_HOLD_TRACK_MAX, allocated on first use */
    uint32_t head;
    uint32_t count;
    uint64_t head_sequence; /* the number of notes[head] */
};

struct tb_limit {
    struct tb_limit *next_in_bucket;
    uint64_t hash;
    uint32_t key_length;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    /* under the registry lock */
    struct limit_state state;
    bool deleted;
    bool provisioned;          /* accounts exist, capacity in force is in the cluster */
    int64_t budget_periods[2]; /* budgets: periods provisioned (INT64_MIN: none) */
    int64_t budget_owes_ms;    /* budgets: a period that may owe (debt, cut), or INT64_MIN */
    uint32_t decrease_attempt; /* 0.17: which decrease id to try next */
    /* Budgets: the period of now (tb_limit_period_now); read and filled
     * under the read lock, reset under the write lock when the limit comes
     * back with other periods. */
    struct period_memo period_memo;
    /* fixed once created */
    /* The limit account depends on the kind, so a key deleted and put
     * again as another kind is a new limit (its old holds stay with the
     * old account until they expire or their leases finish). */
    tbc_u128 rolling_gate_id; /* acct:limit:<key> */
    tbc_u128 slots_gate_id;   /* acct:limit-concurrency:<key> */
    tbc_u128 used_id;         /* acct:used:<key> (rolling) */
    tbc_u128 debt_id;         /* acct:debt:<key> (rolling) */
    /* under notes_lock */
    pthread_mutex_t notes_lock;
    struct tb_hold_ring notes;
};

/* Budget-period accounts of a limit. */
struct tb_period_accounts {
    tbc_u128 gate;  /* acct:budget:<start>:<key>: capacity, holds, spend */
    tbc_u128 spend; /* acct:spend:<start>:<key>: what the period owes / has paid */
    tbc_u128 cut;   /* acct:cut:<start>:<key>: capacity decreases owed */
};

/* One hold of a lease, as the cache remembers it. */
struct tb_lease_hold {
    struct tb_limit *limit; /* never freed while the backend is open */
    uint64_t amount;
    uint64_t timestamp_ns; /* the reserve transfer's cluster timestamp */
    uint32_t timeout_seconds;
    int64_t period_start_ms; /* budgets */
    uint64_t note_sequence;  /* its retry-after note here, 0: none */
    uint8_t kind;
    bool denied;
};

/* Past PENDING, the values of enum lease_view_state (backend.h), so that a
 * lease's state is its view's. */
enum tb_lease_state {
    TB_LEASE_PENDING = 0, /* a first operation is finding out */
    TB_LEASE_ALLOWED = LEASE_VIEW_ALLOWED,
    TB_LEASE_DENIED = LEASE_VIEW_DENIED,
    TB_LEASE_COMPLETED = LEASE_VIEW_COMPLETED,
    TB_LEASE_RELEASED = LEASE_VIEW_RELEASED,
};
_Static_assert(LEASE_VIEW_ALLOWED > 0, "PENDING is none of the view's states");

struct tb_job;
struct tb_scan;

struct tb_lease {
    struct tb_lease *next_in_bucket;
    struct tb_lease *older; /* cache order */
    struct tb_lease *newer;
    uint64_t hash;
    int64_t touched_ms; /* local clock: retention counts from here */
    uint8_t state;
    bool busy;              /* an operation on it is in flight */
    struct tb_job *waiting; /* operations queued behind it */
    struct tb_job *waiting_tail;
    uint8_t id_length;
    uint8_t size_class;     /* of lease_pool */
    int64_t reserved_at_ms; /* cluster clock */
    int64_t expires_at_ms;
    int64_t retry_after_ms;
    uint8_t hold_count;
    struct tb_lease_hold holds[]; /* then the id, id_length bytes */
};

/* ---- jobs ---------------------------------------------------------------- */

/* One backend call (reserve/complete/release of `count` requests): done()
 * runs when its last job finishes. */
struct tb_call {
    struct tb_backend *backend;
    uint32_t remaining; /* atomic */
    backend_done_fn done;
    void *context;
};

enum tb_job_kind {
    TB_JOB_RESERVE = 1,
    TB_JOB_COMPLETE = 2,
    TB_JOB_RELEASE = 3,
};

struct tb_job;
/* A job's first step: tb_reserve_start, tb_complete_start or tb_release_start. */
typedef void (*tb_job_step_fn)(struct tb_job *job);

/* One request's journey. Steps submit TigerBeetle items and continue in
 * the item's done callback (a session thread). */
struct tb_job {
    struct tb_job *next; /* waiting behind a busy lease, or parked */
    enum tb_job_kind kind;
    tb_job_step_fn start; /* its kind's first step, run by tb_job_start */
    struct tb_call *call;
    const void *request; /* reserve_request / complete_request / release_request */
    void *result;
    struct tb_lease *lease; /* the cache entry this job made busy, or NULL */
    uint8_t step;
    bool parked; /* waiting for provisioning */
    /* the request's lease, named once the cluster's id scheme is known */
    struct tb_lease_name name;

    /* the lease's holds as this job sees them (sorted by key for reserve);
     * holds[] itself is below, with what is not cleared */
    uint32_t hold_count;
    uint8_t request_index[REQUIREMENTS_PER_RESERVE_MAX]; /* hold -> requirement */
    uint64_t actual[REQUIREMENTS_PER_RESERVE_MAX];       /* complete */
    uint8_t hold_event[REQUIREMENTS_PER_RESERVE_MAX];    /* first event of each hold */
    uint8_t hold_flags[REQUIREMENTS_PER_RESERVE_MAX];
    uint8_t hold_length[REQUIREMENTS_PER_RESERVE_MAX]; /* events in each hold's chain */
    struct tb_scan
        *scan; /* complete/release that missed the cache; one block, freed with the job */

    /* complete: warnings gathered so far, handed to the result on success */
    struct complete_result pending;
    uint32_t failed_hold; /* reserve: the hold the chain failed on */
    bool failed;          /* a step failed: answer backend_error */
    bool conflict;        /* released before: already_finalized */
    bool final_marker;    /* every hold had expired: the finalization is marked */

    /* the current TigerBeetle item and its buffers; everything from here
     * on is not cleared when a job is made */
    struct tbc_item item;
    /* every field of holds[0, hold_count) is written before hold_count
     * counts it (tb_reserve.c, tb_complete.c) */
    struct tb_lease_hold holds[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t event_count;
    uint32_t prefix_count; /* reserve: settle events before the chain */
    uint32_t codes[TB_JOB_EVENTS_MAX];
    tbc_u128 ids[TB_JOB_LOOKUP_MAX];
    uint8_t found[TB_JOB_LOOKUP_MAX];
    /* a step either creates events or reads objects, never both at once */
    union {
        struct tbc_transfer events[TB_JOB_EVENTS_MAX];
        uint8_t objects[TB_JOB_LOOKUP_MAX][TBC_EVENT_SIZE];
    };
};

/* ---- the backend --------------------------------------------------------- */

/* How a cluster derives the ids of a lease's transfers (docs/tigerbeetle.md
 * "Account model"), fixed by its operator account's user_data_32 when the
 * first front end made it: TB_OPERATOR_TIME_ORDERED_IDS, or 0 (an older
 * llmlimitd). No id of a lease is made before it is known. */
enum tb_id_scheme {
    TB_IDS_UNKNOWN = 0,
    TB_IDS_LABELS = 1,       /* SHA-256 of the label only */
    TB_IDS_TIME_ORDERED = 2, /* led by a UUIDv7 lease id's timestamp */
};
#define TB_OPERATOR_TIME_ORDERED_IDS 1

extern const struct backend_ops tb_backend_ops;

#define TB_LIMIT_BUCKETS 65536
#define TB_LEASE_BUCKETS_MIN 1024

struct tb_backend {
    struct backend base; /* first: the ops see a struct backend */
    struct clock *clock;
    uint32_t lease_cache_entries;
    int64_t lease_retention_ms;
    int64_t concurrency_poll_ms;
    int64_t decrease_retry_ms;
    int64_t item_deadline_ms; /* --tb-deadline-ms: an operation's wait for the cluster */
    uint64_t random_state;    /* retry jitter, under the registry lock */

    struct tbc_submitter *submitter;
    tbc_u128 operator_id;
    tbc_u128 finalized_id; /* acct:finalized: the other side of finalization markers */
    bool operator_created;
    uint8_t id_scheme; /* atomic: enum tb_id_scheme, known once operator_created */

    /* registry */
    pthread_rwlock_t registry_lock;
    struct tb_limit *limit_buckets[TB_LIMIT_BUCKETS];
    uint32_t live_limit_count;
    uint32_t limit_count; /* live and deleted */

    /* lease cache, and the reserves in doubt (tb_leases_doubt_*) */
    pthread_mutex_t lease_lock;
    struct {
        uint64_t hash; /* of the lease id; 0: free */
        int64_t at_ms; /* monotonic: when it was answered 503 */
    } doubts[TB_DOUBT_SLOTS];
    struct tb_lease **lease_buckets;
    uint32_t lease_bucket_mask;
    uint32_t lease_count;
    struct tb_lease *oldest;
    struct tb_lease *newest;
    struct slab_pool lease_pool; /* every entry lives in one of its slabs */

    /* maintenance */
    pthread_mutex_t admin_lock; /* one admin conversation with the cluster at a time */
    pthread_mutex_t maintenance_lock;
    pthread_cond_t maintenance_wake;
    pthread_t maintenance;
    bool maintenance_started;
    bool stopping;
    bool provision_wanted; /* atomic */
    struct tb_job *parked; /* reserves waiting for their limits' accounts */
    bool limits_changed;   /* a decrease applied since the last tick */

    /* finished jobs kept for reuse (tb_job_new), at most TB_JOB_POOL_MAX */
    pthread_mutex_t job_pool_lock;
    struct tb_job *job_pool;
    uint32_t job_pool_count;

    /* counters (atomic) */
    uint64_t overage_denied;
    uint64_t jobs_in_flight;

    /* Told when a complete or release here freed capacity (backend.h,
     * watch); called under watch_lock. */
    pthread_mutex_t watch_lock;
    struct backend_watch watch;
};

/* "tigerbeetle": the name of tb_backend_ops, whose address tells its table. */
extern const char tb_backend_name[];

static inline struct tb_backend *tb_backend_of(struct backend *base)
{
    assert(base->ops->name == tb_backend_name);
    return (struct tb_backend *)base;
}

/* tb_ledger.c: account and transfer ids, events. The ids of a lease follow
 * the cluster's scheme, which must be known (tb_ledger_ids_known) before a
 * lease is named. */
bool tb_ledger_ids_known(const struct tb_backend *b);
struct tb_lease_name tb_ledger_lease_name(const struct tb_backend *b, const char *id,
                                          uint32_t length);
tbc_u128 tb_ledger_reserve_id(const struct tb_lease_name *lease, const struct tb_limit *limit);
tbc_u128 tb_ledger_transfer_id(const char *prefix, const struct tb_lease_name *lease,
                               const struct tb_limit *limit);
/* user_data_128 of the lease's transfers: the id of "lease:<lease_id>". */
tbc_u128 tb_ledger_lease_tag(const struct tb_lease_name *lease);
/* The mark of a lease finalized after every hold expired. */
tbc_u128 tb_ledger_final_id(const struct tb_lease_name *lease);
void tb_ledger_period_accounts(const struct tb_limit *limit, int64_t period_start_ms,
                               struct tb_period_accounts *out);
/* The gate alone (one hash instead of three: a reserve needs no more). */
tbc_u128 tb_ledger_period_gate(const struct tb_limit *limit, int64_t period_start_ms);
struct tbc_account tb_ledger_account(tbc_u128 id, uint16_t code, uint16_t flags,
                                     const struct tb_limit *limit);
struct tbc_transfer tb_ledger_transfer(tbc_u128 id, tbc_u128 debit, tbc_u128 credit,
                                       uint64_t amount, uint16_t code, uint16_t flags);
/* A void of `pending` (its exact amount: never the amount-0 sentinel). */
struct tbc_transfer tb_ledger_void(tbc_u128 id, const struct tbc_transfer *pending_shape,
                                   uint32_t by);
/* A budget settle: free capacity of gate pays what account `owed` is owed. */
struct tbc_transfer tb_ledger_settle(tbc_u128 id, tbc_u128 gate, tbc_u128 owed);
/* available = credits_posted - debits_posted - debits_pending, saturating. */
int64_t tb_ledger_available(const struct tbc_account *account);
/* credits_posted - debits_posted (a limit account's capacity in force). */
uint64_t tb_ledger_capacity(const struct tbc_account *account);
uint64_t tb_ledger_owed(const struct tbc_account *account); /* debits - credits posted */

/* Budget periods provisioned (registry lock held). */
/* The budget period containing now_ms, its bounds computed once per period.
 * Under the registry lock (read or write). */
static inline struct period_span tb_limit_period_now(struct tb_limit *limit, int64_t now_ms)
{
    return period_memo_span(&limit->state.definition, &limit->period_memo, now_ms);
}

static inline bool tb_limit_period_ready(const struct tb_limit *limit, int64_t period_ms)
{
    return limit->budget_periods[0] == period_ms || limit->budget_periods[1] == period_ms;
}

static inline void tb_limit_period_mark(struct tb_limit *limit, int64_t period_ms)
{
    if (tb_limit_period_ready(limit, period_ms))
        return;
    int older = limit->budget_periods[0] < limit->budget_periods[1] ? 0 : 1;
    limit->budget_periods[older] = period_ms;
}

static inline tbc_u128 tb_limit_gate(const struct tb_limit *limit, uint8_t kind)
{
    return kind == LIMIT_CONCURRENCY ? limit->slots_gate_id : limit->rolling_gate_id;
}

/* tb_registry.c */
struct tb_limit *tb_registry_find(struct tb_backend *b, const char *key, uint32_t key_length);
/* The admin ops (backend.h); definitions and states come checked by
 * backend.c. */
backend_put_limit_op tb_registry_put;
backend_restore_limit_op tb_registry_restore;
backend_delete_limit_op tb_registry_delete;
backend_get_limit_op tb_registry_get;
backend_list_limits_op tb_registry_list;
backend_usage_op tb_registry_usage;
void tb_registry_free(struct tb_backend *b);
/* Adds a hold note, returning its number (0 when out of memory) /
 * computes retry_after for a denied requirement. */
uint64_t tb_registry_note_hold(struct tb_backend *b, struct tb_limit *limit, int64_t expires_at_ms,
                               int64_t period_start_ms, uint64_t amount);
/* A complete or release changed what a noted hold keeps until its expiry:
 * amount (0: nothing). A note already forgotten (or 0) is left alone. */
void tb_registry_renote_hold(struct tb_limit *limit, uint64_t sequence, uint64_t amount);
/* ... and, for the wait layer, when the shortfall is covered by the holds
 * noted here expiring, uncapped (fits_at_ms). */
int64_t tb_registry_retry_after(struct tb_backend *b, struct tb_limit *limit, uint64_t shortfall,
                                int64_t period_start_ms, int64_t now_ms, int64_t *fits_at_ms);

/* tb_usage.c: the usage_batch op (backend.h), answered on the sessions'
 * threads. */
backend_usage_batch_op tb_usage_batch;

/* tb_leases.c (every function takes the lease lock itself unless noted) */
int tb_leases_init(struct tb_backend *b);
void tb_leases_free(struct tb_backend *b);
/* Under lease_lock: find (dropping it when past retention). */
struct tb_lease *tb_leases_find(struct tb_backend *b, const char *id, uint32_t id_length,
                                int64_t now_ms);
/* Under lease_lock: a new busy PENDING entry for hold_count holds; NULL when
 * out of memory. Evicts the oldest idle entry when the cache is full. */
struct tb_lease *tb_leases_insert(struct tb_backend *b, const char *id, uint32_t id_length,
                                  uint32_t hold_count, int64_t now_ms);
/* Under lease_lock: unlink and free. */
void tb_leases_remove(struct tb_backend *b, struct tb_lease *lease);
/* Under lease_lock: an entry with room for hold_count holds replacing `lease`. */
struct tb_lease *tb_leases_resize(struct tb_backend *b, struct tb_lease *lease,
                                  uint32_t hold_count);
/* Drops entries past retention (bounded work). */
void tb_leases_expire(struct tb_backend *b, int64_t now_ms);
/* A reserve of the lease was answered 503: its request may still land
 * (docs/tigerbeetle.md "Deadlines"). */
void tb_leases_doubt_note(struct tb_backend *b, const char *id, uint32_t id_length);
/* Whether an earlier reserve of the lease answered 503 may still land, so
 * a denial now could be contradicted by holds made after it. */
bool tb_leases_in_doubt(struct tb_backend *b, const char *id, uint32_t id_length);

/* tb_jobs.c: lease busy/waiting, calls, parking. */
/* Frees the jobs kept for reuse (at close, none in flight). */
void tb_job_pool_free(struct tb_backend *b);
/* A new job of the call, whose first step (the kind's) is start; NULL
 * when out of memory. */
struct tb_job *tb_job_new(struct tb_call *call, enum tb_job_kind kind, tb_job_step_fn start,
                          const void *request, void *result);
/* Adds a warning about the limit to the job's pending ones. */
void tb_job_warn(struct tb_job *job, enum backend_warning kind, const struct tb_limit *limit);
struct tb_call *tb_call_new(struct tb_backend *b, uint32_t count, backend_done_fn done,
                            void *context);
void tb_job_finish(struct tb_job *job);
/* Under lease_lock: queues the job behind the busy lease's operation;
 * tb_job_unbusy starts it again. */
void tb_job_wait_behind(struct tb_lease *lease, struct tb_job *job);
/* Releases the job's lease (busy = false) and re-runs the jobs queued
 * behind it. */
void tb_job_unbusy(struct tb_job *job);
/* Runs the job's first step (job->start), afresh or again. */
void tb_job_start(struct tb_job *job);
void tb_job_park(struct tb_job *job);
void tb_jobs_unpark_all(struct tb_backend *b, bool fail);
void tb_job_submit(struct tb_job *job, uint8_t operation, uint32_t event_count,
                   tb_item_done_fn done);

/* tb_reserve.c, tb_complete.c: the first steps, given to tb_job_new. */
void tb_reserve_start(struct tb_job *job);
void tb_complete_start(struct tb_job *job);
void tb_release_start(struct tb_job *job);

#endif
