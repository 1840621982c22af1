/* The one interface every backend implements (memory, sqlite, tigerbeetle).
 * The HTTP layer talks only to this; the conformance suite in
 * tests/conformance/ holds every backend to the same expectations.
 *
 * Rules every backend follows (SPEC sections 3-5; docs/semantics.md):
 * - The backend owns the live limit states (definition + status); the server
 *   persists them to limits.json from list_limits() after each change.
 * - reserve is all-or-nothing across its requirements. A capacity denial is
 *   recorded against the lease: the same lease_id with the same requirements
 *   gets the same denial again. Errors found before any capacity is touched
 *   (unknown_limit_key, limit_decreasing, exceeds_capacity) are not recorded.
 *   "Same requirements" means the same set of (key, amount) pairs, in any
 *   order; a different set for a known lease is RESULT_CONFLICT
 *   "lease_conflict".
 * - complete: concurrency holds are freed; rolling holds shrink (or grow, per
 *   overage) to the actual amount until their original expiry; budget holds
 *   commit the actual amount into the period they were reserved in, any part
 *   that does not fit is debt. Keys left out of the actuals settle at their
 *   reserved amount. A budget commit after the hold expired is charged and
 *   warned "commit_after_expiry:<key>". Completing twice is a no-op success;
 *   an unknown lease is success with reconciled=false; a released lease is
 *   RESULT_CONFLICT "already_finalized"; an actual whose key is not in the
 *   lease is RESULT_INVALID "actual_key_not_in_lease:<key>" and changes
 *   nothing.
 * - release frees every hold of the lease. Twice (or an unknown lease) is a
 *   no-op success; after complete it is RESULT_CONFLICT "already_finalized".
 * - On any doubt (I/O error, lost connection) the answer is
 *   RESULT_UNAVAILABLE "backend_error" and nothing is freed.
 *
 * Threading: every op may be called from any thread at the same time. */
#ifndef LLMLIMIT_BACKEND_H
#define LLMLIMIT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/clock.h"
#include "core/limits.h"

struct backend; /* opaque, one per implementation */

struct backend_config {
    struct clock *clock; /* all accounting time comes from here */
    const char *data_dir;
    uint32_t lease_cache_entries; /* bound of the lease cache (memory, tigerbeetle) */
    int64_t lease_retention_ms;   /* how long a finished lease answers retries */
    int64_t concurrency_poll_ms;  /* cap of a concurrency retry_after (SPEC 5) */
    int64_t decrease_retry_ms;    /* retry_after of limit_decreasing */
    /* sqlite */
    bool sqlite_synchronous_normal; /* false: synchronous=FULL (default) */
    int64_t sqlite_retention_ms;    /* 0: keep finished leases and the audit log for ever */
    /* tigerbeetle */
    const char *tb_cluster;   /* decimal u128 */
    const char *tb_addresses; /* HOST:PORT[,...] */
    uint32_t tb_sessions;
};

/* Fills a config with the documented defaults (system clock, ./data). */
void backend_config_defaults(struct backend_config *config);

/* The checks every backend with a lease cache makes at open. 0, or -1 with
 * the field named in error. */
static inline int backend_config_check(const struct backend_config *config, char *error,
                                       size_t error_size)
{
    if (config->clock == NULL)
        snprintf(error, error_size, "clock: required");
    else if (config->lease_cache_entries < 1 ||
             config->lease_cache_entries > MEMORY_LEASE_CACHE_ENTRIES_MAX)
        snprintf(error, error_size, "lease_cache_entries: must be 1..%u",
                 (unsigned)MEMORY_LEASE_CACHE_ENTRIES_MAX);
    else if (config->lease_retention_ms < 1)
        snprintf(error, error_size, "lease_retention_ms: must be > 0");
    else if (config->concurrency_poll_ms < 1)
        snprintf(error, error_size, "concurrency_poll_ms: must be > 0");
    else if (config->decrease_retry_ms < 1)
        snprintf(error, error_size, "decrease_retry_ms: must be > 0");
    else
        return 0;
    return -1;
}

enum result_status {
    RESULT_OK = 0,          /* definitive answer (a reserve may be allowed or denied) */
    RESULT_INVALID = 1,     /* HTTP 400: the request cannot apply to this state */
    RESULT_CONFLICT = 2,    /* HTTP 409: lease_conflict / already_finalized */
    RESULT_UNAVAILABLE = 3, /* HTTP 503: backend_error, outcome unknown */
};

#define RESULT_ERROR_SIZE (LIMIT_KEY_LENGTH_MAX + 64)

struct requirement {
    const char *key; /* NUL-terminated; length known valid */
    uint32_t key_length;
    uint64_t amount; /* 1..AMOUNT_MAX */
};

struct reserve_request {
    const char *lease_id; /* NUL-terminated, valid syntax */
    uint32_t lease_id_length;
    const char *caller; /* may be NULL */
    uint32_t caller_length;
    const struct requirement *requirements; /* 1..REQUIREMENTS_PER_RESERVE_MAX, keys unique */
    uint32_t requirement_count;
};

struct reserve_result {
    enum result_status status;
    bool allowed;
    int64_t retry_after_ms;      /* on a denial (capacity or decreasing) */
    int64_t reserved_at_unix_ms; /* when allowed */
    int64_t expires_at_unix_ms;  /* earliest expiry among the holds */
    /* "" when allowed or denied for capacity; else "unknown_limit_key: <key>",
     * "limit_decreasing:<key>", "exceeds_capacity:<key>", "lease_conflict",
     * "backend_error". */
    char error[RESULT_ERROR_SIZE];
    uint32_t denied_count; /* indices into the request's requirements */
    uint8_t denied_index[REQUIREMENTS_PER_RESERVE_MAX];
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

struct complete_result {
    enum result_status status;
    bool reconciled; /* false: the lease was unknown, nothing was done */
    char error[RESULT_ERROR_SIZE];
    uint32_t warning_count;
    /* warning_count NUL-terminated strings back to back ("commit_after_expiry:<key>",
     * "overage_debt:<key>", "overage_denied:<key>"); malloc'd by the backend or
     * NULL; the caller frees it with free(). */
    char *warnings;
};

struct release_request {
    const char *lease_id;
    uint32_t lease_id_length;
};

struct release_result {
    enum result_status status;
    char error[RESULT_ERROR_SIZE];
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

struct backend_stats {
    uint64_t lease_cache_entries;
    uint64_t batches;        /* backend transactions/requests sent */
    uint64_t batched_items;  /* items in them (fill = batched_items / batches) */
    uint64_t overage_denied; /* rolling overage dropped under overage=deny */
    uint64_t expired_holds;  /* holds that expired without complete/release */
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
};

/* Called once per reserve/complete/release call, when every result is
 * written. May run before the call returns (synchronous backends) or on a
 * backend thread; it must not block. */
typedef void (*backend_done_fn)(void *context);

struct backend_ops {
    const char *name;

    /* Returns 0, or -1 with a reason in error. */
    int (*open)(const struct backend_config *config, struct backend **out, char *error,
                size_t error_size);
    /* Finishes in-flight work, flushes, frees. */
    void (*close)(struct backend *backend);

    /* Admin, synchronous. put_limit creates or changes a validated
     * definition and reports the resulting state: an increase applies at
     * once; a rolling/concurrency decrease applies at once if what is free
     * covers it, else the limit becomes LIMIT_DECREASING with
     * pending_decrease_to (a later put at or above the capacity in force
     * cancels it); a budget decrease applies at once. Changing the kind or
     * the period of a live limit is -1 with "kind: ..."/"period: ..." in
     * error (delete it first). Returns 0 or -1. */
    int (*put_limit)(struct backend *backend, const struct limit_definition *definition,
                     struct limit_state *state_out, char *error, size_t error_size);
    /* Loads a state from the registry at startup, as it was. 0 or -1. */
    int (*restore_limit)(struct backend *backend, const struct limit_state *state, char *error,
                         size_t error_size);
    /* 0, or -1 if the key is unknown. Existing leases still complete. */
    int (*delete_limit)(struct backend *backend, const char *key);
    /* 0, or -1 if unknown. */
    int (*get_limit)(struct backend *backend, const char *key, struct limit_state *out);
    /* A new array of every live limit sorted by key; caller frees with free(). 0 or -1. */
    int (*list_limits)(struct backend *backend, struct limit_state **out, size_t *count);
    /* Usage at at_unix_ms (budgets: the period containing it; others: now).
     * 0, -1 unknown key, -2 backend error. */
    int (*usage)(struct backend *backend, const char *key, int64_t at_unix_ms,
                 struct limit_usage *out);

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
     * oldest first; caller frees with free(). 0, or -2 backend error. */
    int (*events)(struct backend *backend, const struct event_query *query,
                  struct backend_event **out, size_t *count);
    /* Optional. Per-caller usage of one limit at at_unix_ms (the period
     * containing it for budgets), sorted by used descending; a new array the
     * caller frees. 0, -1 unknown key, -2 backend error. */
    int (*usage_by_caller)(struct backend *backend, const char *key, int64_t at_unix_ms,
                           struct caller_usage **out, size_t *count);
};

/* Resets every field a reader of the result looks at (the error text past
 * its end and denied indexes past denied_count are never read). */
static inline void reserve_result_clear(struct reserve_result *result)
{
    result->status = RESULT_OK;
    result->allowed = false;
    result->retry_after_ms = 0;
    result->reserved_at_unix_ms = 0;
    result->expires_at_unix_ms = 0;
    result->error[0] = '\0';
    result->denied_count = 0;
}

/* The backends compiled in, by name; NULL if unknown. */
const struct backend_ops *backend_find(const char *name);
/* Comma-separated names, for --help. Static storage. */
const char *backend_names(void);

/* Blocking wrappers over the asynchronous data path, for tests, the CLI
 * tools and benchmarks. */
void backend_reserve_wait(const struct backend_ops *ops, struct backend *backend,
                          const struct reserve_request *requests, struct reserve_result *results,
                          uint32_t count);
void backend_complete_wait(const struct backend_ops *ops, struct backend *backend,
                           const struct complete_request *requests, struct complete_result *results,
                           uint32_t count);
void backend_release_wait(const struct backend_ops *ops, struct backend *backend,
                          const struct release_request *requests, struct release_result *results,
                          uint32_t count);

#endif
