/* The sqlite backend's mirror (sq_mirror.c): the limits, their counters and
 * their live holds in memory, owned by the writer thread (the only
 * mutator), kept equal to the tables by writing every change in the same
 * transaction. */
#ifndef LLMLIMIT_BACKEND_SQLITE_MIRROR_H
#define LLMLIMIT_BACKEND_SQLITE_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/limits.h"
#include "sq_bounds.h"
#include "sq_holds.h"
#include "sq_map.h"

struct sq_backend;
struct sq_limit;

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
    struct period_memo period_memo; /* budgets: the period of now (sq_limit_period_now) */
};

/* The budget period containing now_ms, its bounds computed once per period
 * (an incarnation's periods never change: limit_reshape_check). */
static inline struct period_span sq_limit_period_now(struct sq_limit *limit, int64_t now_ms)
{
    return period_memo_span(&limit->state.definition, &limit->period_memo, now_ms);
}

struct sq_mirror {
    struct sq_map limits_by_key; /* live (not deleted) limits */
    struct sq_map limits_by_id;  /* every incarnation */
    int64_t next_limit_id;
    int64_t next_seq; /* leases.seq of the next new lease */
    uint64_t hold_count;
    struct sq_period *dirty; /* periods changed and not yet written */
    /* Limits whose capacity may have come back in this transaction (a
     * complete, release, put, delete or applied decrease), told to the
     * wait layer once it commits; past SQ_FREED_LIMITS_MAX, any limit. */
    int64_t freed_ids[SQ_FREED_LIMITS_MAX];
    uint32_t freed_count;
    bool freed_any;
};

/* (Re)loads the mirror from the tables and checks it against them. 0, or -1
 * with a reason in error. */
int sq_mirror_load(struct sq_backend *backend, char *error, size_t error_size);
void sq_mirror_free(struct sq_mirror *mirror);
struct sq_limit *sq_mirror_limit_by_key(struct sq_mirror *mirror, const char *key);
/* The admin ops' lookup: the limit of key with *result BACKEND_ADMIN_OK, or
 * NULL with *result BACKEND_ADMIN_UNKNOWN_KEY. */
struct sq_limit *sq_mirror_limit_for_admin(struct sq_mirror *mirror, const char *key,
                                           enum backend_admin_result *result);
struct sq_limit *sq_mirror_limit_by_id(struct sq_mirror *mirror, int64_t id);
/* The period entry of a budget (loaded from limit_usage on first use) or the
 * single entry of a rolling/concurrency limit. NULL on an error. */
struct sq_period *sq_mirror_period(struct sq_backend *backend, struct sq_limit *limit,
                                   int64_t start_ms);
/* The period entry if it is in the mirror (it is whenever it has live holds). */
struct sq_period *sq_mirror_period_find(const struct sq_limit *limit, int64_t start_ms);
void sq_mirror_touch(struct sq_mirror *mirror, struct sq_period *period);
/* Notes that capacity may have come back on the limit (sq_mirror.freed_ids). */
void sq_mirror_freed(struct sq_mirror *mirror, const struct sq_limit *limit);
/* Writes every dirty period. SQLITE_DONE or an error code. */
int sq_mirror_flush(struct sq_backend *backend);
int sq_mirror_add_limit(struct sq_mirror *mirror, struct sq_limit *limit);
void sq_mirror_unlink_key(struct sq_mirror *mirror, struct sq_limit *limit);
struct sq_limit *sq_limit_new(int64_t id, const struct limit_state *state);
void sq_limit_free(struct sq_limit *limit);
/* Drops budget periods that hold nothing and are not current. */
void sq_mirror_trim_periods(struct sq_limit *limit, int64_t now_ms);
/* The live-lease watermark: no lease below this seq holds anything. */
int64_t sq_mirror_live_from(const struct sq_mirror *mirror);

#endif
