/* The one interface every backend implements (memory, sqlite, tigerbeetle).
 * The HTTP layer talks only to this; the conformance suite in
 * tests/conformance/ holds every backend to the same expectations.
 *
 * Rules every backend follows (docs/semantics.md); those that read the same
 * on every backend are written once in backend.c, over a view the backend
 * fills (struct limit_view, struct lease_view):
 * - The backend owns the live limit states (definition + status); the server
 *   persists them to limits.json from list_limits() after each change.
 * - reserve is all-or-nothing across its requirements. A known lease is
 *   answered as before (reserve_replay): the same lease_id with the same
 *   requirements gets the same answer again, except a released one:
 *   BACKEND_ALREADY_FINALIZED, as it holds nothing; "same requirements" means
 *   the same set of (key, amount) pairs, in any order; a different set is
 *   BACKEND_LEASE_CONFLICT. A capacity denial is recorded against the lease.
 *   Errors found before any capacity is touched are not recorded:
 *   BACKEND_UNKNOWN_LIMIT_KEY, then BACKEND_LIMIT_DECREASING, then
 *   BACKEND_EXCEEDS_CAPACITY, in that order of precedence
 *   (reserve_definitive_check).
 * - complete: concurrency holds are freed; rolling holds shrink (or grow, per
 *   overage) to the actual amount until their original expiry; budget holds
 *   commit the actual amount into the period they were reserved in, any part
 *   that does not fit is debt. Keys left out of the actuals settle at their
 *   reserved amount. A budget commit after the hold expired is charged and
 *   warned BACKEND_WARNING_COMMIT_AFTER_EXPIRY. Completing twice is a no-op
 *   success; an unknown lease is success with reconciled=false; a released
 *   lease is BACKEND_ALREADY_FINALIZED; an actual whose key is not in the
 *   lease is BACKEND_ACTUAL_KEY_NOT_IN_LEASE and changes nothing.
 * - release frees every hold of the lease. Twice (or an unknown lease) is a
 *   no-op success; after complete it is BACKEND_ALREADY_FINALIZED.
 * - On any doubt (I/O error, lost connection) the answer is
 *   BACKEND_UNAVAILABLE and nothing is freed.
 * - Admin calls answer an enum backend_admin_result; a put that would change
 *   the kind or period of a live limit is refused (limit_reshape_check).
 * The wire text of every error and warning is written in one place,
 * src/wire/encode.c.
 *
 * Threading: every op may be called from any thread at the same time. */
#ifndef LLMLIMIT_BACKEND_H
#define LLMLIMIT_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/clock.h"
#include "core/flag.h"
#include "core/limits.h"

/* The common head of every backend object: each implementation's own struct
 * starts with it (struct mem_backend, struct sq_backend, struct tb_backend),
 * the way every libuv handle starts with uv_handle_t, so one pointer type
 * reaches any backend and its ops. */
struct backend {
    const struct backend_ops *ops;
};

/* What every backend takes. A backend's own settings are its options struct
 * (struct sq_options in backend/sqlite/sqlite.h, struct tb_options in
 * backend/tigerbeetle/tigerbeetle.h), passed to open() beside this. */
struct backend_config {
    struct clock *clock; /* all accounting time comes from here */
    const char *data_dir;
    uint32_t lease_cache_entries; /* bound of the lease cache (memory, tigerbeetle) */
    int64_t lease_retention_ms;   /* how long a finished lease answers retries */
    int64_t concurrency_poll_ms;  /* cap of a concurrency retry_after (docs/semantics.md) */
    int64_t decrease_retry_ms;    /* retry_after of limit_decreasing */
};

/* Fills a config with the documented defaults (system clock, ./data). */
void backend_config_defaults(struct backend_config *config);

/* The checks every backend makes of the common config at open. 0, or -1
 * with the field named in error. */
int backend_config_check(const struct backend_config *config, char *error, size_t error_size);

/* Why a data-path call did not give a plain answer. The wire text of each
 * (docs/api.md) is written in one place, src/wire/encode.c. */
enum backend_error {
    BACKEND_OK = 0,
    /* Definitive reserve denials, found before any capacity is looked at and
     * not recorded against the lease; error_index names the requirement. */
    BACKEND_UNKNOWN_LIMIT_KEY,
    BACKEND_LIMIT_DECREASING,  /* retry_after_ms is the decrease retry */
    BACKEND_EXCEEDS_CAPACITY,  /* the amount can never fit */
    BACKEND_LEASE_CONFLICT,    /* reserve: a known lease id with other requirements (409) */
    BACKEND_ALREADY_FINALIZED, /* complete or reserve of a released lease, release of a completed
                                  one (409) */
    /* complete: error_index names an actual whose key is not in the lease (400). */
    BACKEND_ACTUAL_KEY_NOT_IN_LEASE,
    BACKEND_UNAVAILABLE, /* backend_error: outcome unknown (503); nothing was freed */
};

/* Does error_index name a requirement (reserve) or an actual (complete)? */
static inline bool backend_error_names_key(enum backend_error error)
{
    return error == BACKEND_UNKNOWN_LIMIT_KEY || error == BACKEND_LIMIT_DECREASING ||
           error == BACKEND_EXCEEDS_CAPACITY || error == BACKEND_ACTUAL_KEY_NOT_IN_LEASE;
}

/* A reserve denied by a definitive error is still a 200 answer. */
static inline bool backend_error_is_denial(enum backend_error error)
{
    return error == BACKEND_UNKNOWN_LIMIT_KEY || error == BACKEND_LIMIT_DECREASING ||
           error == BACKEND_EXCEEDS_CAPACITY;
}

/* How an admin call went (put_limit ... holds_scan in struct backend_ops),
 * as the data path's enum backend_error says how a reserve went. The wire
 * text and status of each (docs/api.md) are written in one place,
 * src/wire/encode.c. */
enum backend_admin_result {
    BACKEND_ADMIN_OK = 0,
    BACKEND_ADMIN_UNKNOWN_KEY, /* no live limit has the key (404 unknown_limit_key) */
    /* put, restore: the definition (or state) breaks a rule of
     * limit_definition_validate (core), whose text names the field (400). */
    BACKEND_ADMIN_INVALID,
    /* put: the live limit is of another kind, or a budget of another period
     * (400); state_out is the limit in force. */
    BACKEND_ADMIN_KIND_CHANGED,
    BACKEND_ADMIN_PERIOD_CHANGED,
    BACKEND_ADMIN_TOO_MANY_LIMITS, /* put, restore: LIMITS_COUNT_MAX live limits (400) */
    BACKEND_ADMIN_ALREADY_LOADED,  /* restore: the key is live already (memory, tigerbeetle) */
    BACKEND_ADMIN_UNAVAILABLE,     /* the backend's storage failed: nothing changed (503) */
};

struct requirement {
    const char *key; /* NUL-terminated; length known valid */
    uint32_t key_length;
    uint64_t amount; /* 1..AMOUNT_MAX */
};

/* What a limit has left once a reserve is allowed: what a caller's
 * rate-limit headers report (the gateway's x-ratelimit-*). */
struct requirement_state {
    bool known;               /* false: the backend cannot tell without asking further */
    enum limit_kind kind;     /* always filled in */
    uint64_t capacity;        /* in force */
    int64_t available;        /* after this reserve, as limit_available counts it */
    int64_t reset_at_unix_ms; /* rolling, concurrency: when the earliest hold expires;
                                 budget: the end of the period; 0 when nothing is held */
};

struct reserve_request {
    const char *lease_id; /* NUL-terminated, valid syntax */
    uint32_t lease_id_length;
    const char *caller; /* may be NULL */
    uint32_t caller_length;
    const struct requirement *requirements; /* 1..REQUIREMENTS_PER_RESERVE_MAX, keys unique */
    uint32_t requirement_count;
    /* NULL, or room for requirement_count states that the backend fills,
     * one per requirement, when this reserve is newly allowed (not on a
     * replay). Owned by the caller, like the result. */
    struct requirement_state *states;
    /* For the wait layer (src/wait); both 0 in a plain reserve.
     * wait_until_unix_ms: the caller will wait until then. A capacity
     * denial that may turn into a fit by then (may_fit_at_unix_ms <=
     * wait_until_unix_ms) is not recorded against the lease: the caller
     * asks again with the same lease id. yield_mask: bit i set treats
     * requirement i as not fitting whatever its limit has left (others wait
     * ahead of this request on it); such a denial is not recorded either.
     * Neither changes a known lease's replay or the definitive errors,
     * which come first. */
    int64_t wait_until_unix_ms;
    uint64_t yield_mask;
    /* A gateway's MCP tool call (docs/mcp.md): its server's name and the
     * tool's, each NUL-terminated and at most AUDIT_NAME_LENGTH_MAX bytes,
     * kept with the lease for the audit log (GET /v1/events); both NULL for
     * any other lease. Backends without an audit log ignore them. */
    const char *mcp_server;
    const char *tool;
};

_Static_assert(REQUIREMENTS_PER_RESERVE_MAX <= 64, "yield_mask has a bit per requirement");

/* How a reserve went through the wait layer (src/wait/wait.h); a backend
 * always answers RESERVE_WAIT_NONE. */
enum reserve_wait_outcome {
    RESERVE_WAIT_NONE = 0,  /* did not wait: answered as a plain reserve */
    RESERVE_WAIT_ADMITTED,  /* waited, then allowed */
    RESERVE_WAIT_DEADLINE,  /* waited wait_ms: denied, retry_after_ms recomputed */
    RESERVE_WAIT_CANCELLED, /* the caller went away (wait_cancel): nothing held */
    RESERVE_WAIT_FULL,      /* max_waiters were waiting: answered at once */
    RESERVE_WAIT_CLOSED,    /* shutdown: denied with retry_after_ms */
    RESERVE_WAIT_FAILED,    /* waited, then an error: the limit was deleted or cut
                               below the amount, or the backend failed */
};

struct reserve_result {
    enum backend_error error; /* BACKEND_OK when allowed or denied for capacity */
    uint8_t error_index;      /* the requirement a definitive denial names */
    bool allowed;
    int64_t retry_after_ms;      /* on a denial (capacity or decreasing) */
    int64_t reserved_at_unix_ms; /* when allowed */
    int64_t expires_at_unix_ms;  /* earliest expiry among the holds */
    /* The answer repeats that of an earlier reserve of the same lease (a
     * retry, or the same id used twice); finished: that lease has since
     * been completed or released (a backend that cannot tell says false);
     * released: released, so nothing of it was ever charged. */
    bool replayed;
    bool finished;
    bool released;
    uint32_t denied_count; /* indices into the request's requirements */
    uint8_t denied_index[REQUIREMENTS_PER_RESERVE_MAX];
    /* A capacity denial of a new lease, for the wait layer (0 otherwise):
     * fits_at: when the request fits if only time passes (holds expire,
     * windows roll, a period starts), uncapped (retry_after_ms is capped
     * for concurrency limits); may_fit_at: the earliest it could fit at
     * all, counting that a complete or release may free any live
     * reservation at once (then it is now). The latest over the denied
     * requirements. waitable: the denial was not recorded (wait_until or
     * yield_mask), so the same lease id may be asked again. */
    int64_t fits_at_unix_ms;
    int64_t may_fit_at_unix_ms;
    bool waitable;
    /* Set by the wait layer; 0 from a backend. */
    uint8_t wait_outcome; /* enum reserve_wait_outcome */
    int64_t waited_ms;    /* in the wait layer's queue, on its clock */
};

struct actual {
    const char *key;
    uint32_t key_length;
    uint64_t actual_amount; /* 0..AMOUNT_MAX */
};

struct complete_request {
    const char *lease_id;
    uint32_t lease_id_length;
    const struct actual *actuals; /* 0..REQUIREMENTS_PER_RESERVE_MAX, keys unique */
    uint32_t actual_count;
};

enum backend_warning {
    BACKEND_WARNING_COMMIT_AFTER_EXPIRY = 1, /* a budget hold had expired: charged anyway */
    BACKEND_WARNING_OVERAGE_DEBT,            /* the part over the room left became debt */
    BACKEND_WARNING_OVERAGE_DENIED,          /* rolling overage dropped (overage=deny) */
};

/* One warning of a complete, about one limit of the lease. */
struct complete_warning {
    enum backend_warning kind;
    uint32_t key_length;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
};

struct complete_result {
    enum backend_error
        error;           /* BACKEND_OK, ALREADY_FINALIZED, ACTUAL_KEY_NOT_IN_LEASE, UNAVAILABLE */
    uint8_t error_index; /* the actual ACTUAL_KEY_NOT_IN_LEASE names */
    bool reconciled;     /* false: the lease was unknown, nothing was done */
    uint32_t warning_count;
    /* warning_count warnings, malloc'd by the backend (NULL when none); the
     * caller frees it with free(). */
    struct complete_warning *warnings;
};

struct release_request {
    const char *lease_id;
    uint32_t lease_id_length;
};

struct release_result {
    enum backend_error error; /* BACKEND_OK, ALREADY_FINALIZED or UNAVAILABLE */
};

struct limit_usage {
    struct limit_state state;
    uint64_t reserved;            /* held by leases not yet completed */
    uint64_t used;                /* rolling: completed, in window; budget: committed this period */
    uint64_t debt;                /* overage recorded this window/period */
    int64_t available;            /* may be negative for a budget; saturates at INT64_MIN */
    int64_t period_start_unix_ms; /* budgets; else 0 */
    int64_t period_end_unix_ms;
};

/* One limit whose usage usage_batch reads. */
struct usage_request {
    const char *key; /* NUL-terminated; length known valid */
    int64_t at_unix_ms;
};

struct usage_result {
    enum backend_admin_result result; /* OK, UNKNOWN_KEY or UNAVAILABLE */
    struct limit_usage usage;         /* when OK */
};

/* Limits one usage_batch call reads at most (/metrics reads its
 * METRICS_LIMITS_MAX in one). */
#define USAGE_BATCH_MAX 1000

/* One figure a backend adds to /metrics: name, type ("counter" or "gauge")
 * and help are static strings of the backend's. */
struct backend_metric {
    const char *name;
    const char *type;
    const char *help;
    uint64_t value;
};

#define BACKEND_OWN_METRICS_MAX 16

struct backend_stats {
    uint64_t lease_cache_entries;
    uint64_t batches;        /* backend transactions/requests sent */
    uint64_t batched_items;  /* items in them (fill = batched_items / batches) */
    uint64_t overage_denied; /* rolling overage dropped under overage=deny */
    uint64_t expired_holds;  /* holds that expired without complete/release */
    /* Figures of the backend's own (a cluster's round trips, say), rendered in
     * /metrics after the shared ones, in this order. */
    uint32_t own_count;
    struct backend_metric own[BACKEND_OWN_METRICS_MAX];
};

/* One audit-log entry (backends with an audit log: sqlite). */
struct backend_event {
    int64_t id; /* increasing; the pagination cursor */
    int64_t at_unix_ms;
    char type[32]; /* reserved, committed, committed_post_expiry, overrun, released,
                      expired, debt, limit_changed */
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    uint64_t amount;        /* reserved amount */
    uint64_t actual_amount; /* committed/overrun/debt amount, else 0 */
    char detail[128];
    char mcp_server[AUDIT_NAME_LENGTH_MAX + 1]; /* a tool call's lease: its MCP server, else "" */
    char tool[AUDIT_NAME_LENGTH_MAX + 1];       /* and its tool */
};

struct event_query {
    const char *key;      /* NULL: any */
    const char *lease_id; /* NULL: any */
    int64_t after_id;     /* events with id > after_id */
    uint32_t limit;       /* 1..EVENTS_PAGE_MAX */
};

#define EVENTS_PAGE_DEFAULT 100
#define EVENTS_PAGE_MAX 1000

/* Spend of one caller on one limit in one period (budgets) or window. */
struct caller_usage {
    char caller[CALLER_LENGTH_MAX + 1]; /* "" for leases without a caller */
    uint64_t reserved;
    uint64_t used;
    uint64_t debt;
    /* Budgets: leases completed in the period; rolling and concurrency:
     * leases whose holds are live in the window. */
    uint64_t calls;
};

/* ---- What the console reads (docs/console.md). */

/* The live holds of one limit: amounts reserved by leases not yet
 * completed, released or expired (a rolling hold that was completed still
 * counts in `used` until its window ends, but is no longer live here). */
struct holds_summary {
    uint64_t count;
    /* The live hold that expires first: its expiry, and when it was taken
     * (that expiry minus the limit's hold duration). 0 when count is 0. */
    int64_t oldest_expires_at_unix_ms;
    int64_t oldest_at_unix_ms;
    uint64_t expiring_soon; /* live holds expiring within the query's soon_ms */
    /* false: oldest and expiring_soon were read from the first holds in
     * expiry order only (the memory backend walks MEM_CONSOLE_HOLDS_WALK_MAX,
     * src/backend/memory/mem_bounds.h): expiring_soon is then a lower
     * bound, and the oldest may be unknown (0). */
    bool exact;
};

/* One limit as the console lists it: usage now and its live holds. */
struct limit_report {
    struct limit_usage usage;
    /* Rolling and concurrency: the earliest expiry of anything the limit
     * holds, when capacity next comes back by itself (0: it holds nothing).
     * Budgets: the end of the current period. */
    int64_t reset_at_unix_ms;
    struct holds_summary holds;
};

struct limits_query {
    const char *prefix;   /* keys starting with this ("": every key) */
    const char *after;    /* keys sorting (strcmp) after this ("": from the first) */
    enum limit_kind kind; /* LIMIT_KIND_NONE: every kind */
    uint32_t limit;       /* 1..CONSOLE_LIMITS_PAGE_MAX reports */
    int64_t soon_ms;      /* the window of holds_summary.expiring_soon */
};

/* One live hold, as holds_scan shows it. The strings live only during the
 * visit. */
struct hold_view {
    const char *caller; /* "" when the lease named none */
    uint32_t caller_length;
    uint64_t amount;
    int64_t expires_at_unix_ms;
};

/* Called once per hold, under the backend's lock (or on its writer
 * thread): it must be quick and must not call the backend. */
typedef void (*hold_visit_fn)(void *context, const struct hold_view *hold);

/* What a backend tells the wait layer (src/wait) when capacity may have
 * come back on a limit: a complete or release freed holds, a pending
 * decrease applied, the limit was put or deleted. Hold expiry and period
 * roll-over are not told: they happen at times the denial reported
 * (fits_at_unix_ms). */
struct backend_freed {
    const char *key; /* valid during the call only */
    uint32_t key_length;
    bool available_known;
    int64_t available; /* what the limit has left now (usage's available), when known */
};

/* Called by a backend from any of its threads, possibly under its lock: it
 * must be quick, must not block and must not call the backend. */
typedef void (*backend_freed_fn)(void *context, const struct backend_freed *freed);

/* Who a backend tells of freed capacity (backend_ops.watch). */
struct backend_watch {
    backend_freed_fn freed; /* NULL: nobody */
    void *context;
    /* NULL, or read before each call: 0 means nobody needs to be told now,
     * so the backend skips the call and the work of preparing it. */
    const atomic_uint *listening;
    /* NULL, or called around the freed calls of one commit by a backend
     * that tells them on a thread of its own (sqlite's writer), with no
     * lock of the backend's held but the one that guards its watch: after
     * tell_end the listener may make backend calls on that thread (the wait
     * layer asks for its next waiters there, so that a hand-over crosses no
     * other thread before it is queued). Such calls must not wait for that
     * thread: the sqlite backend's data path only queues them. tell_end
     * returns whether it made any (sqlite then syncs the commit that freed
     * room together with the one that hands it over). */
    void (*tell_begin)(void *context);
    bool (*tell_end)(void *context);
    /* NULL, or asked by a backend that can hand freed room over in the
     * critical section that freed it (memory): under the backend's lock, in
     * place of freed, the reserve to make now for the first waiter of that
     * limit (*request, *result; *cookie, not NULL, for claimed_done), or
     * false with nothing written (then freed is told as usual). The backend
     * makes that reserve before it lets its lock go, and runs
     * claimed_done(cookie) once it has; freed is still told when room is
     * left beyond the claimed request's amount (its single requirement's).
     * At most one claim per complete or release; it must be quick. */
    bool (*claim)(void *context, const struct backend_freed *freed,
                  const struct reserve_request **request, struct reserve_result **result,
                  void **cookie);
    void (*claimed_done)(void *cookie);
};

static inline bool backend_watch_wanted(const struct backend_watch *watch)
{
    return watch->freed != NULL &&
           (watch->listening == NULL ||
            atomic_load_explicit(watch->listening, memory_order_relaxed) != 0);
}

/* Called once per reserve/complete/release call, when every result is
 * written. May run before the call returns (synchronous backends) or on a
 * backend thread; it must not block. */
typedef void (*backend_done_fn)(void *context);

/* The types of the ops that backends also declare in their own headers
 * (`backend_usage_op sq_admin_usage;`), so that each declaration is checked
 * against the table it fills; what each op does is said in struct backend_ops. */
typedef enum backend_admin_result backend_put_limit_op(struct backend *backend,
                                                       const struct limit_definition *definition,
                                                       struct limit_state *state_out);
typedef enum backend_admin_result backend_restore_limit_op(struct backend *backend,
                                                           const struct limit_state *state);
typedef enum backend_admin_result backend_delete_limit_op(struct backend *backend, const char *key);
typedef enum backend_admin_result backend_get_limit_op(struct backend *backend, const char *key,
                                                       struct limit_state *out);
typedef enum backend_admin_result backend_list_limits_op(struct backend *backend,
                                                         struct limit_state **out, size_t *count);
/* A live limit's key (malloc'd) and kind: what a start needs of every
 * limit, without a copy of each whole state. */
struct limit_name {
    char *key;
    enum limit_kind kind;
};
typedef enum backend_admin_result backend_list_names_op(struct backend *backend,
                                                        struct limit_name **out, size_t *count);
typedef enum backend_admin_result backend_usage_op(struct backend *backend, const char *key,
                                                   int64_t at_unix_ms, struct limit_usage *out);
typedef void backend_usage_batch_op(struct backend *backend, const struct usage_request *requests,
                                    struct usage_result *results, uint32_t count,
                                    backend_done_fn done, void *context);
typedef enum backend_admin_result backend_limits_report_op(struct backend *backend,
                                                           const struct limits_query *query,
                                                           struct limit_report **out, size_t *count,
                                                           bool *more);
typedef enum backend_admin_result backend_holds_scan_op(struct backend *backend, const char *key,
                                                        uint64_t max_holds, hold_visit_fn visit,
                                                        void *context, bool *complete);

typedef enum backend_admin_result backend_events_op(struct backend *backend,
                                                    const struct event_query *query,
                                                    struct backend_event **out, size_t *count);
typedef enum backend_admin_result backend_usage_by_caller_op(struct backend *backend,
                                                             const char *key, int64_t at_unix_ms,
                                                             struct caller_usage **out,
                                                             size_t *count);

struct backend_ops {
    const char *name;
    /* A budget's debt is one pool per period, paid down by capacity freed
     * later (a release, an unused reservation), which then reports as used:
     * available is the same as with per-lease debt, the used/debt split is
     * not, and debt cannot be told per caller (tigerbeetle:
     * docs/tigerbeetle.md, "Budgets: debt that blocks"). */
    bool budget_debt_pooled;

    /* options: the backend's own options struct (see struct backend_config),
     * or NULL for its defaults. Sets (*out)->ops to this table. Returns 0, or
     * -1 with a reason in error. */
    int (*open)(const struct backend_config *config, const void *options, struct backend **out,
                char *error, size_t error_size);
    /* Finishes in-flight work, flushes, frees. */
    void (*close)(struct backend *backend);

    /* Admin, synchronous; each answers an enum backend_admin_result, whose
     * wire text is written in src/wire/encode.c. Callers go through the
     * backend_* wrappers below, which check a definition or state first.
     *
     * put_limit creates or changes a definition (valid and normalised:
     * limit_definition_validate) and reports the resulting state in
     * state_out (never NULL): an increase applies at once; a
     * rolling/concurrency decrease applies at once if what is free covers
     * it, else the limit becomes LIMIT_DECREASING with pending_decrease_to
     * (a later put at or above the capacity in force cancels it); a budget
     * decrease applies at once. BACKEND_ADMIN_OK; KIND_CHANGED or
     * PERIOD_CHANGED for a live limit of another kind or period
     * (limit_reshape_check; state_out is the limit in force; delete it
     * first); TOO_MANY_LIMITS; UNAVAILABLE when the backend's storage did
     * not take the change (nothing changed). */
    backend_put_limit_op *put_limit;
    /* Loads a state (valid and normalised: limit_state_validate, and
     * pending_decrease_to 0 unless decreasing) from the registry at
     * startup, as it was. OK, TOO_MANY_LIMITS, ALREADY_LOADED (a backend
     * that does not keep limits across restarts, for a key loaded twice) or
     * UNAVAILABLE. */
    backend_restore_limit_op *restore_limit;
    /* OK, UNKNOWN_KEY, or UNAVAILABLE when the backend's storage did not
     * take the change (the limit stays). Existing leases still complete. */
    backend_delete_limit_op *delete_limit;
    /* OK, UNKNOWN_KEY or UNAVAILABLE. */
    backend_get_limit_op *get_limit;
    /* A new array of every live limit sorted by key; caller frees with
     * free(). OK or UNAVAILABLE. */
    backend_list_limits_op *list_limits;
    /* Optional (NULL: backend_list_names takes list_limits'). A new array
     * of every live limit's name sorted by key; caller frees with
     * limit_names_free. OK or UNAVAILABLE. */
    backend_list_names_op *list_names;
    /* Usage at at_unix_ms (budgets: the period containing it; others: now).
     * OK, UNKNOWN_KEY or UNAVAILABLE. */
    backend_usage_op *usage;
    /* Optional (NULL: backend_usage_batch calls usage for each, on the
     * caller's thread, which is right for a backend that answers from
     * memory under a lock). usage of count (0..USAGE_BATCH_MAX) limits,
     * asynchronously like the data path, for a backend whose usage waits
     * on I/O (a writer thread, a cluster): results[i] answers requests[i];
     * done(context) runs once every result is written, maybe before the
     * call returns, else on a backend thread. requests and results are
     * the caller's and stay valid until then. */
    backend_usage_batch_op *usage_batch;

    /* Background work, called at least once a second: expire holds, apply
     * pending decreases. Sets *limits_changed when a limit state changed (the
     * registry must be rewritten). 0 or -1. */
    int (*tick)(struct backend *backend, bool *limits_changed);

    /* Data path. requests/results are owned by the caller and stay valid
     * until done(context) runs; results[i] answers requests[i]. */
    void (*reserve)(struct backend *backend, const struct reserve_request *requests,
                    struct reserve_result *results, uint32_t count, backend_done_fn done,
                    void *context);
    void (*complete)(struct backend *backend, const struct complete_request *requests,
                     struct complete_result *results, uint32_t count, backend_done_fn done,
                     void *context);
    void (*release)(struct backend *backend, const struct release_request *requests,
                    struct release_result *results, uint32_t count, backend_done_fn done,
                    void *context);

    /* Readiness (backend reachable). true when ready. */
    bool (*ready)(struct backend *backend);
    void (*stats)(struct backend *backend, struct backend_stats *out);

    /* Optional (NULL when the backend keeps no audit log). A new array,
     * oldest first; caller frees with free(). OK or UNAVAILABLE. */
    backend_events_op *events;
    /* Optional. Per-caller usage of one limit at at_unix_ms (the period
     * containing it for budgets), sorted by used + debt descending (then
     * reserved descending, then caller); a new array the caller frees. OK,
     * UNKNOWN_KEY or UNAVAILABLE. */
    backend_usage_by_caller_op *usage_by_caller;

    /* The console (docs/console.md). limits_report: usage now of the
     * limits matching the query, sorted by key, at most query->limit of
     * them, each with its live holds; a new array the caller frees with
     * free(); *more is set when further limits match. A limit deleted while
     * the page is read may be left out. OK or UNAVAILABLE. */
    backend_limits_report_op *limits_report;
    /* Optional (NULL: the backend does not know who holds what). Calls
     * visit once for each live hold of the limit, at most max_holds times
     * (*complete is false when holds were left unvisited). OK, UNKNOWN_KEY
     * or UNAVAILABLE. */
    backend_holds_scan_op *holds_scan;
    /* true when limits_report's holds are only those made through this
     * llmlimitd (tigerbeetle: the cluster does not list pending transfers
     * by account), false when they are every hold of the limit. */
    bool holds_seen_here_only;
    /* Optional (NULL: the backend tells nobody; waiters then find freed
     * capacity only by asking again). Sets who is told of freed capacity
     * (copied; freed NULL: nobody). When it returns, no call of the
     * previous one is running or will start. */
    void (*watch)(struct backend *backend, const struct backend_watch *watch);
    /* Optional (NULL: a backend no other llmlimitd shares, nothing to agree
     * on). Claims `name` (32 bytes, a SHA-256) for `owner` (16 bytes naming
     * this front end, the same across its restarts) in the store every front
     * end on it shares, once: *mine is true when the claim is owner's (made
     * now or before), false when another owner made it. 0, or -1 when the
     * store did not answer (try again later). Blocking; never called on the
     * data path (the alerts' scanner: each alert is delivered by one front
     * end). */
    int (*claim)(struct backend *backend, const uint8_t name[32], const uint8_t owner[16],
                 bool *mine);

    /* The backend's own settings (docs/configuration.md, "Backends"): its
     * options struct (what open() takes), options_size bytes, at most
     * BACKEND_OPTIONS_BYTES_MAX, filled with its defaults by
     * options_defaults, and the flags that set it (--sqlite-*, --tb-*), rows
     * whose offsets are into that struct. A backend without settings has 0
     * and NULLs. The server finds a flag among every backend's rows, as
     * SQLite finds a VFS by name and lets it own its parameters. */
    size_t options_size;
    void (*options_defaults)(void *options);
    const struct flag *flags;
    uint32_t flag_count;
};

#define BACKEND_OPTIONS_BYTES_MAX 256
#define BACKENDS_MAX 8

/* ---- Calls through the ops (the server, tests and tools use these). */

/* The backends compiled in, by name; NULL if unknown. */
const struct backend_ops *backend_find(const char *name);
/* ... by position, 0..backend_count()-1, in the order --help lists them. */
uint32_t backend_count(void);
const struct backend_ops *backend_at(uint32_t index);
/* Comma-separated names, for --help. Static storage. */
const char *backend_names(void);
/* The backend --backend names when not given: the durable one (sqlite)
 * when it is built in (docs/configuration.md). Static storage. */
const char *backend_default_name(void);

int backend_open(const struct backend_ops *ops, const struct backend_config *config,
                 const void *options, struct backend **out, char *error, size_t error_size);

static inline void backend_close(struct backend *backend)
{
    backend->ops->close(backend);
}

/* put_limit of the definition once limit_definition_validate took it
 * (normalised); state_out may be NULL. BACKEND_ADMIN_INVALID with the
 * field and rule in error (always NUL-terminated), or put_limit's result
 * (error untouched). */
enum backend_admin_result backend_put_limit(struct backend *backend,
                                            const struct limit_definition *definition,
                                            struct limit_state *state_out, char *error,
                                            size_t error_size);

/* restore_limit of the state once limit_state_validate took it:
 * BACKEND_ADMIN_INVALID with the reason in error, or restore_limit's
 * result. */
enum backend_admin_result backend_restore_limit(struct backend *backend,
                                                const struct limit_state *state, char *error,
                                                size_t error_size);

static inline enum backend_admin_result backend_delete_limit(struct backend *backend,
                                                             const char *key)
{
    return backend->ops->delete_limit(backend, key);
}

static inline enum backend_admin_result backend_get_limit(struct backend *backend, const char *key,
                                                          struct limit_state *out)
{
    return backend->ops->get_limit(backend, key, out);
}

static inline enum backend_admin_result backend_list_limits(struct backend *backend,
                                                            struct limit_state **out, size_t *count)
{
    return backend->ops->list_limits(backend, out, count);
}

/* list_names, or list_limits' keys and kinds. */
enum backend_admin_result backend_list_names(struct backend *backend, struct limit_name **out,
                                             size_t *count);
void limit_names_free(struct limit_name *names, size_t count);

static inline enum backend_admin_result backend_usage(struct backend *backend, const char *key,
                                                      int64_t at_unix_ms, struct limit_usage *out)
{
    return backend->ops->usage(backend, key, at_unix_ms, out);
}

/* usage_batch, or usage of each limit in turn when the backend has no
 * usage_batch (done then runs before this returns). */
void backend_usage_batch(struct backend *backend, const struct usage_request *requests,
                         struct usage_result *results, uint32_t count, backend_done_fn done,
                         void *context);

static inline int backend_tick(struct backend *backend, bool *limits_changed)
{
    return backend->ops->tick(backend, limits_changed);
}

static inline void backend_reserve(struct backend *backend, const struct reserve_request *requests,
                                   struct reserve_result *results, uint32_t count,
                                   backend_done_fn done, void *context)
{
    backend->ops->reserve(backend, requests, results, count, done, context);
}

static inline void backend_complete(struct backend *backend,
                                    const struct complete_request *requests,
                                    struct complete_result *results, uint32_t count,
                                    backend_done_fn done, void *context)
{
    backend->ops->complete(backend, requests, results, count, done, context);
}

static inline void backend_release(struct backend *backend, const struct release_request *requests,
                                   struct release_result *results, uint32_t count,
                                   backend_done_fn done, void *context)
{
    backend->ops->release(backend, requests, results, count, done, context);
}

static inline bool backend_ready(struct backend *backend)
{
    return backend->ops->ready(backend);
}

static inline void backend_stats(struct backend *backend, struct backend_stats *out)
{
    backend->ops->stats(backend, out);
}

/* Blocking wrappers over the asynchronous data path, for tests, the CLI
 * tools and benchmarks. */
void backend_reserve_wait(struct backend *backend, const struct reserve_request *requests,
                          struct reserve_result *results, uint32_t count);
void backend_complete_wait(struct backend *backend, const struct complete_request *requests,
                           struct complete_result *results, uint32_t count);
void backend_release_wait(struct backend *backend, const struct release_request *requests,
                          struct release_result *results, uint32_t count);

/* ---- Rules every backend shares (backend.c): one copy, called by all. */

/* Resets every field a reader of the result looks at (denied indexes past
 * denied_count are never read). */
static inline void reserve_result_clear(struct reserve_result *result)
{
    result->error = BACKEND_OK;
    result->error_index = 0;
    result->allowed = false;
    result->retry_after_ms = 0;
    result->reserved_at_unix_ms = 0;
    result->expires_at_unix_ms = 0;
    result->replayed = false;
    result->finished = false;
    result->released = false;
    result->denied_count = 0;
    result->fits_at_unix_ms = 0;
    result->may_fit_at_unix_ms = 0;
    result->waitable = false;
    result->wait_outcome = RESERVE_WAIT_NONE;
    result->waited_ms = 0;
}

/* A definitive error (cleared result, then error and index set). */
void reserve_result_fail(struct reserve_result *result, enum backend_error error,
                         uint32_t requirement_index);
/* Outcome unknown: BACKEND_UNAVAILABLE and nothing else. */
void reserve_result_unavailable(struct reserve_result *result);

static inline void complete_result_clear(struct complete_result *result)
{
    result->error = BACKEND_OK;
    result->error_index = 0;
    result->reconciled = false;
    result->warning_count = 0;
    result->warnings = NULL;
}

/* Frees the warnings and clears the result, then sets the error. */
void complete_result_fail(struct complete_result *result, enum backend_error error,
                          uint32_t actual_index);
void complete_result_unavailable(struct complete_result *result);
/* Adds a warning about one limit (the array grows by one). 0, or -1 when
 * out of memory: the accounting is done, only the warning is lost. */
int complete_result_warn(struct complete_result *result, enum backend_warning kind, const char *key,
                         uint32_t key_length);

void release_result_unavailable(struct release_result *result);

/* One limit a reserve names, as the backend found it under its lock: what
 * the definitive errors are decided on. */
struct limit_view {
    bool found;        /* a live limit has the key (a deleted one is not found) */
    bool decreasing;   /* LIMIT_DECREASING: a capacity decrease waits to apply */
    uint64_t capacity; /* in force */
};

/* reserve_definitive_check's answer once it found something wrong: the
 * error that comes first, into result. */
void reserve_definitive_fail(const struct reserve_request *request, const struct limit_view *views,
                             int64_t decrease_retry_ms, struct reserve_result *result);

/* The definitive errors of a new reserve (docs/semantics.md, "Leases and
 * idempotency"), views[i] being the limit of requirement i: an unknown key,
 * then a decreasing limit (retry_after_ms is decrease_retry_ms), then an
 * amount over the capacity; each names the first such requirement in
 * request order. Returns true when none applies (result untouched), false
 * with the error in result. Never looks at what is held. Inline, so that a
 * reserve with nothing wrong (nearly all of them) pays one pass and no
 * call; the precedence is written in reserve_definitive_fail (backend.c). */
static inline bool reserve_definitive_check(const struct reserve_request *request,
                                            const struct limit_view *views,
                                            int64_t decrease_retry_ms,
                                            struct reserve_result *result)
{
    /* Without branches: nearly every reserve has nothing wrong. */
    unsigned wrong = 0;
    for (uint32_t i = 0; i < request->requirement_count; i++)
        wrong |= (unsigned)!views[i].found | (unsigned)views[i].decreasing |
                 (unsigned)(request->requirements[i].amount > views[i].capacity);
    if (wrong == 0)
        return true;
    reserve_definitive_fail(request, views, decrease_retry_ms, result);
    return false;
}

/* When one requirement that did not fit could: retry_after_ms
 * (docs/semantics.md; capped for concurrency limits), and for the wait
 * layer the uncapped time it fits by expiry alone and the earliest it may
 * fit if live reservations are freed. */
struct denial_times {
    int64_t retry_ms;
    int64_t fits_at_ms;
    int64_t may_fit_at_ms;
};

/* Adds one denied requirement's times to a capacity denial: each the
 * latest so far (the request fits once every requirement does). */
void reserve_denial_add(struct reserve_result *result, struct denial_times times);

/* Whether a capacity denial goes unrecorded, so the caller may ask again
 * with the same lease id: others wait ahead on one of its limits
 * (yield_mask), or it may fit by the time the caller waits until. */
bool reserve_denial_waitable(const struct reserve_request *request,
                             const struct reserve_result *result);

/* One requirement of a known lease, as the backend stored it. */
struct lease_item_key {
    const char *key; /* key_length bytes, not necessarily NUL-terminated */
    uint32_t key_length;
    uint64_t amount;
};

/* Is the request's requirement set the lease's, the same (key, amount)
 * pairs in any order? When it is, item_of[i] is the lease item of
 * requirement i. Keys are unique on both sides, so this is a bijection. */
bool requirements_match(const struct reserve_request *request, const struct lease_item_key *items,
                        uint32_t item_count, uint8_t *item_of);

enum lease_view_state {
    LEASE_VIEW_ALLOWED = 1, /* holds live or expired, not yet completed or released */
    LEASE_VIEW_COMPLETED,
    LEASE_VIEW_RELEASED,
    LEASE_VIEW_DENIED, /* denied for capacity (recorded) */
};

/* A known lease as the backend stored it: all a retry of its reserve is
 * answered from. The items stay the backend's; they must outlive the call. */
struct lease_view {
    enum lease_view_state state;
    const struct lease_item_key *items; /* its requirements, in any order */
    uint32_t item_count;                /* 1..REQUIREMENTS_PER_RESERVE_MAX */
    uint64_t denied_items;              /* DENIED: bit j set when items[j] did not fit */
    int64_t reserved_at_unix_ms;        /* not DENIED */
    int64_t expires_at_unix_ms;         /* not DENIED */
    int64_t retry_after_ms;             /* DENIED */
};

/* Answers a reserve of a known lease (docs/semantics.md): the same set of
 * (key, amount) pairs, in any order, gets the lease's answer again, marked
 * replayed (denied_index in this request's order); another set is
 * BACKEND_LEASE_CONFLICT. Clears the result first. */
void reserve_replay(const struct reserve_request *request, const struct lease_view *lease,
                    struct reserve_result *result);

/* ---- Admin calls. */

/* The refusal of a put that would change what a live limit is: its kind,
 * or a budget's periods (period, period_anchor_day, time_zone:
 * limit_period_same; docs/semantics.md, "Capacity changes": delete it
 * first). BACKEND_ADMIN_OK, BACKEND_ADMIN_KIND_CHANGED or
 * BACKEND_ADMIN_PERIOD_CHANGED. Each backend calls it under its lock. */
enum backend_admin_result limit_reshape_check(const struct limit_definition *in_force,
                                              const struct limit_definition *wanted);

#endif
