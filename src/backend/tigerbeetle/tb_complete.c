/* Complete and release (docs/tigerbeetle.md "Flows"; the rules are those of
 * docs/semantics.md).
 *
 * Every hold of the lease is voided, with user_data_32 saying by whom
 * (TB_VOID_BY_COMPLETE / TB_VOID_BY_RELEASE); what a complete keeps is
 * booked in the same request:
 * - concurrency: the void alone;
 * - rolling: [void, re-reserve actual for the rest of the window, the same
 *   on the used account] as one chain; an overage that does not fit falls
 *   back to re-reserving the reserved amount plus debt (or nothing);
 * - budget: [void, owe actual to the period's spend account] as one chain,
 *   then a settle that pays what is owed from free capacity; what cannot
 *   be paid stays owed: debt. A void that finds the hold expired means the
 *   call ran late: the actual is still owed (commit_after_expiry).
 * Budgets are never posted from the pending transfer: a late post on
 * 0.15.3 leaves a phantom record, and the amount-0 "post everything"
 * sentinel means the opposite on 0.17 (docs/tigerbeetle-protocol.md,
 * "Where 0.15.3 and 0.17 differ" and "Pending transfers and expiry").
 *
 * A void that already exists means an earlier attempt finished (complete
 * twice is a no-op); one that exists with the other user_data_32 means
 * the lease was finalized the other way (already_finalized). Once every
 * hold has expired there is nothing to void: the lease is then marked by
 * a transfer of its own (see "finalization after expiry" below). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "tbclient/tbc_ids.h"
#include "tb_backend.h"

enum {
    STEP_SCAN = 1,
    STEP_SETTLE = 2,
    STEP_FOLLOW = 3,
    STEP_DEBT_CHECK = 4,
    STEP_VOID_CHECK = 5,
};

/* hold_flags bits of a complete */
#define HOLD_LATE 0x01           /* budget: the hold had expired */
#define HOLD_OVERAGE 0x02        /* rolling: the overage did not fit */
#define HOLD_CHECK_DEBT 0x04     /* budget: debt may remain */
#define HOLD_CHECK_VOID 0x08     /* its void exists with other flags: whose is it? */
#define HOLD_FOLLOW_PENDING 0x10 /* (on hold 0) follow-ups wait for the void check */

/* ---- answers ------------------------------------------------------------- */

/* error_index: the actual that BACKEND_ACTUAL_KEY_NOT_IN_LEASE names. */
/* A complete or release that freed the lease's holds here tells the wait
 * layer at once (another front end's are not seen: docs/tigerbeetle.md). */
static void tell_freed(struct tb_job *job)
{
    struct tb_backend *b = job->call->backend;
    pthread_mutex_lock(&b->watch_lock);
    for (uint32_t i = 0; backend_watch_wanted(&b->watch) && i < job->hold_count; i++) {
        const struct tb_limit *limit = job->holds[i].limit;
        struct backend_freed freed = {.key = limit->key, .key_length = limit->key_length};
        b->watch.freed(b->watch.context, &freed);
    }
    pthread_mutex_unlock(&b->watch_lock);
}

static void complete_answer(struct tb_job *job, enum backend_error error, uint32_t error_index,
                            bool reconciled)
{
    struct complete_result *result = job->result;
    complete_result_clear(result);
    if (error != BACKEND_OK) {
        complete_result_fail(result, error, error_index);
    } else {
        result->reconciled = reconciled;
        if (reconciled)
            tell_freed(job);
        result->warnings = job->pending.warnings; /* the caller frees them */
        result->warning_count = job->pending.warning_count;
        complete_result_clear(&job->pending);
    }
    tb_job_finish(job);
}

static void release_answer(struct tb_job *job, enum backend_error error)
{
    if (error == BACKEND_OK)
        tell_freed(job);
    struct release_result *result = job->result;
    result->error = error;
    tb_job_finish(job);
}

static void answer(struct tb_job *job, enum backend_error error, bool reconciled)
{
    if (job->kind == TB_JOB_COMPLETE)
        complete_answer(job, error, 0, reconciled);
    else
        release_answer(job, error);
}

static void set_state(struct tb_job *job, uint8_t state)
{
    struct tb_backend *b = job->call->backend;
    pthread_mutex_lock(&b->lease_lock);
    if (job->lease != NULL)
        job->lease->state = state;
    pthread_mutex_unlock(&b->lease_lock);
}

/* ---- the lease's holds --------------------------------------------------- */

/* Names the request's lease (job->name), once the cluster's id scheme is
 * known. */
static void name_lease(struct tb_job *job)
{
    struct tb_backend *b = job->call->backend;
    if (job->kind == TB_JOB_COMPLETE) {
        const struct complete_request *r = job->request;
        job->name = tb_ledger_lease_name(b, r->lease_id, r->lease_id_length);
    } else {
        const struct release_request *r = job->request;
        job->name = tb_ledger_lease_name(b, r->lease_id, r->lease_id_length);
    }
}

static bool key_is(const struct tb_limit *limit, const char *key, uint32_t length)
{
    return limit->key_length == length && memcmp(limit->key, key, length) == 0;
}

/* Maps every actual to a hold; false (with the key) if one is not in the lease. */
static bool match_actuals(struct tb_job *job, const struct actual **missing)
{
    const struct complete_request *request = job->request;
    assert(job->hold_count <= REQUIREMENTS_PER_RESERVE_MAX);
    assert(request->actual_count <= REQUIREMENTS_PER_RESERVE_MAX);
    for (uint32_t i = 0; i < job->hold_count; i++)
        job->actual[i] = job->holds[i].amount; /* left out: settled at the reserved amount */
    for (uint32_t a = 0; a < request->actual_count; a++) {
        const struct actual *actual = &request->actuals[a];
        uint32_t i = 0;
        while (i < job->hold_count && !key_is(job->holds[i].limit, actual->key, actual->key_length))
            i++;
        if (i == job->hold_count) {
            *missing = actual;
            return false;
        }
        job->actual[i] = actual->actual_amount;
    }
    return true;
}

/* The pending transfer a hold is, field for field as reserve made it. */
static struct tbc_transfer reserve_shape(const struct tb_job *job, const struct tb_lease_hold *hold)
{
    struct tb_backend *b = job->call->backend;
    tbc_u128 gate = tb_limit_gate(hold->limit, hold->kind);
    if (hold->kind == LIMIT_BUDGET) {
        struct tb_period_accounts period;
        tb_ledger_period_accounts(hold->limit, hold->period_start_ms, &period);
        gate = period.gate;
    }
    struct tbc_transfer t =
        tb_ledger_transfer(tb_ledger_reserve_id(&job->name, hold->limit), gate, b->operator_id,
                           hold->amount, TB_CODE_RESERVE, TBC_TRANSFER_PENDING);
    t.timeout = hold->timeout_seconds;
    t.user_data_128 = tb_ledger_lease_tag(&job->name);
    t.user_data_64 = (uint64_t)hold->period_start_ms;
    return t;
}

static tbc_u128 lease_transfer_id(const struct tb_job *job, const char *prefix,
                                  const struct tb_lease_hold *hold)
{
    return tb_ledger_transfer_id(prefix, &job->name, hold->limit);
}

/* ---- building the requests ----------------------------------------------- */

static uint64_t cluster_now_ns(struct tb_backend *b)
{
    uint64_t now = tbc_submitter_cluster_time_ns(b->submitter);
    if (now != 0)
        return now;
    struct timespec ts; /* no reply yet: the local wall clock */
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A rolling hold whose window has ended by the cluster's clock: its
 * complete keeps nothing (a keep of at least a second would outlive the
 * window, docs/tigerbeetle.md). The hold itself may not have expired yet:
 * the cluster expires holds a little after their deadline. */
static bool window_over(const struct tb_lease_hold *hold, uint64_t now_ns)
{
    assert(hold->timestamp_ns != 0); /* a lease that is completed was reserved */
    uint64_t end_ns = hold->timestamp_ns + (uint64_t)hold->timeout_seconds * 1000000000ull;
    return hold->kind == LIMIT_ROLLING && end_ns <= now_ns;
}

/* What is left of a hold's window, in whole seconds rounded up (at least
 * 1: TigerBeetle timeouts are seconds, and holding a little longer is the
 * pessimistic side). */
static uint32_t remaining_seconds(const struct tb_lease_hold *hold, uint64_t now_ns)
{
    uint64_t end_ns = hold->timestamp_ns + (uint64_t)hold->timeout_seconds * 1000000000ull;
    if (end_ns <= now_ns)
        return 1;
    uint64_t seconds = (end_ns - now_ns + 999999999ull) / 1000000000ull;
    return seconds > hold->timeout_seconds ? hold->timeout_seconds : (uint32_t)seconds;
}

static void push(struct tb_job *job, struct tbc_transfer t)
{
    assert(job->event_count < TB_JOB_EVENTS_MAX);
    job->events[job->event_count++] = t;
}

/* Pending transfer `amount` from the limit account (and the same from
 * `shadow`) for the rest of the window. */
static void push_rolling_keep(struct tb_job *job, const struct tb_lease_hold *hold, uint64_t amount,
                              uint32_t seconds, const char *gate_prefix, const char *shadow_prefix,
                              bool link_last)
{
    struct tb_backend *b = job->call->backend;
    struct tbc_transfer keep = tb_ledger_transfer(
        lease_transfer_id(job, gate_prefix, hold), hold->limit->rolling_gate_id, b->operator_id,
        amount, TB_CODE_RERESERVE, TBC_TRANSFER_PENDING | TBC_TRANSFER_LINKED);
    keep.timeout = seconds;
    push(job, keep);
    struct tbc_transfer used = tb_ledger_transfer(
        lease_transfer_id(job, shadow_prefix, hold), hold->limit->used_id, b->operator_id, amount,
        TB_CODE_USED, TBC_TRANSFER_PENDING | (link_last ? TBC_TRANSFER_LINKED : 0));
    used.timeout = seconds;
    push(job, used);
}

static void push_settles(struct tb_job *job, const struct tb_lease_hold *hold)
{
    struct tb_period_accounts period;
    tb_ledger_period_accounts(hold->limit, hold->period_start_ms, &period);
    push(job, tb_ledger_settle(tbc_id_random(), period.gate, period.cut));
    push(job, tb_ledger_settle(tbc_id_random(), period.gate, period.spend));
}

static void push_owe(struct tb_job *job, const struct tb_lease_hold *hold, const char *prefix,
                     uint64_t amount, uint16_t flags)
{
    struct tb_backend *b = job->call->backend;
    struct tb_period_accounts period;
    tb_ledger_period_accounts(hold->limit, hold->period_start_ms, &period);
    push(job, tb_ledger_transfer(lease_transfer_id(job, prefix, hold), period.spend, b->operator_id,
                                 amount, TB_CODE_SPEND, flags));
}

/* One request for the whole lease: a chain per hold, settles at the end. */
static void build_complete(struct tb_job *job)
{
    struct tb_backend *b = job->call->backend;
    uint64_t now_ns = cluster_now_ns(b);
    job->event_count = 0;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        const struct tb_lease_hold *hold = &job->holds[i];
        uint64_t actual = job->actual[i];
        struct tbc_transfer shape = reserve_shape(job, hold);
        struct tbc_transfer cancel =
            tb_ledger_void(lease_transfer_id(job, "xfer:void:", hold), &shape, TB_VOID_BY_COMPLETE);
        assert(job->event_count <= UINT8_MAX); /* 3 events a hold, 64 holds: fits hold_event */
        job->hold_event[i] = (uint8_t)job->event_count;
        job->hold_flags[i] = 0;
        if (hold->kind == LIMIT_CONCURRENCY || actual == 0 || window_over(hold, now_ns)) {
            push(job, cancel);
        } else if (hold->kind == LIMIT_ROLLING) {
            cancel.flags |= TBC_TRANSFER_LINKED;
            push(job, cancel);
            push_rolling_keep(job, hold, actual, remaining_seconds(hold, now_ns),
                              "xfer:rereserve:", "xfer:used:", false);
        } else {
            cancel.flags |= TBC_TRANSFER_LINKED;
            push(job, cancel);
            push_owe(job, hold, "xfer:owe:", actual, 0);
        }
        job->hold_length[i] = (uint8_t)(job->event_count - job->hold_event[i]);
        assert(job->hold_length[i] >= 1); /* the void, then what is kept */
        assert(job->hold_length[i] <= 3);
    }
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (job->holds[i].kind == LIMIT_BUDGET)
            push_settles(job, &job->holds[i]);
    }
}

static void build_release(struct tb_job *job)
{
    job->event_count = 0;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        const struct tb_lease_hold *hold = &job->holds[i];
        struct tbc_transfer shape = reserve_shape(job, hold);
        assert(job->event_count <= UINT8_MAX);
        job->hold_event[i] = (uint8_t)job->event_count;
        push(job, tb_ledger_void(lease_transfer_id(job, "xfer:void:", hold), &shape,
                                 TB_VOID_BY_RELEASE));
        job->hold_length[i] = 1;
    }
    /* Freed budget capacity pays what the period owes first. */
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (job->holds[i].kind == LIMIT_BUDGET)
            push_settles(job, &job->holds[i]);
    }
}

/* The code of a hold's chain: the first event that failed for a reason of
 * its own (0 if none), and at which offset in the chain. */
static uint32_t chain_code(const struct tb_job *job, uint32_t i, uint32_t length, uint32_t *offset)
{
    assert(i < job->hold_count);
    assert(job->hold_event[i] + length <= job->event_count);
    for (uint32_t e = 0; e < length; e++) {
        uint32_t code = job->codes[job->hold_event[i] + e];
        if (code != TBC_TRANSFER_OK && code != TBC_TRANSFER_LINKED_EVENT_FAILED) {
            *offset = e;
            return code;
        }
    }
    *offset = 0;
    return TBC_TRANSFER_OK;
}

/* ---- finalization after expiry ---------------------------------------------
 * A void records who finalized a lease. Once every hold has expired there
 * is nothing left to void, so a complete or release that finds them all
 * expired marks the lease with one transfer, xfer:final:<lease_id>
 * (operator -> acct:finalized, amount 1, user_data_32 = who). Finalizing
 * the other way later, through any front end, finds it: already_finalized.
 * A late complete's budget charges are linked to it, so a lease released
 * first is never charged. */

static void log_failure(const struct tb_job *job, const struct tb_lease_hold *hold, uint32_t code);

static bool every_hold_expired(const struct tb_job *job)
{
    assert(job->hold_count >= 1);
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (job->codes[job->hold_event[i]] != TBC_TRANSFER_PENDING_TRANSFER_EXPIRED)
            return false;
    }
    return true;
}

/* The marker is never linked onward (it ends its chain), so every attempt
 * of either kind makes it with the same flags. */
static void push_final(struct tb_job *job, uint32_t by)
{
    struct tb_backend *b = job->call->backend;
    struct tbc_transfer t = tb_ledger_transfer(tb_ledger_final_id(&job->name), b->operator_id,
                                               b->finalized_id, 1, TB_CODE_FINAL, 0);
    t.user_data_128 = tb_ledger_lease_tag(&job->name);
    t.user_data_32 = by;
    push(job, t);
}

/* A budget hold whose late complete still owes its actual. */
static bool late_charge(const struct tb_job *job, uint32_t i)
{
    return (job->hold_flags[i] & HOLD_LATE) && job->actual[i] > 0;
}

static uint32_t late_charges(const struct tb_job *job)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < job->hold_count; i++)
        count += late_charge(job, i) ? 1 : 0;
    return count;
}

/* Every hold expired: [owe-late..., marker] as one chain, then settles. */
static void build_final_follow(struct tb_job *job)
{
    job->event_count = 0;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (late_charge(job, i))
            push_owe(job, &job->holds[i], "xfer:owe-late:", job->actual[i], TBC_TRANSFER_LINKED);
    }
    assert(job->event_count == late_charges(job)); /* the marker comes next */
    push_final(job, TB_VOID_BY_COMPLETE);
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (late_charge(job, i))
            push_settles(job, &job->holds[i]);
    }
}

static void release_final_done(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    assert(job->kind == TB_JOB_RELEASE);
    assert(job->step == STEP_FOLLOW);
    uint32_t code = item->status == TBC_ITEM_OK ? job->codes[0] : UINT32_MAX;
    if (code == TBC_TRANSFER_OK || code == TBC_TRANSFER_EXISTS) {
        set_state(job, TB_LEASE_RELEASED);
        release_answer(job, BACKEND_OK);
    } else if (code == TBC_TRANSFER_EXISTS_WITH_DIFFERENT_USER_DATA_32) {
        set_state(job, TB_LEASE_COMPLETED); /* completed after its holds expired */
        release_answer(job, BACKEND_ALREADY_FINALIZED);
    } else {
        if (code != UINT32_MAX)
            log_failure(job, &job->holds[0], code);
        release_answer(job, BACKEND_UNAVAILABLE);
    }
}

/* ---- complete: results and follow-ups ------------------------------------ */

static void follow_done(struct tbc_item *item);
static void debt_read(struct tbc_item *item);

static void log_failure(const struct tb_job *job, const struct tb_lease_hold *hold, uint32_t code)
{
    fprintf(stderr, "tigerbeetle: %s of %.*s on %s failed with result %u\n",
            job->kind == TB_JOB_COMPLETE ? "complete" : "release", (int)job->name.length,
            job->name.id, hold->limit->key, code);
}

static void finish_complete(struct tb_job *job)
{
    set_state(job, TB_LEASE_COMPLETED);
    complete_answer(job, BACKEND_OK, 0, true);
}

/* Budgets that may be left owing: read their spend accounts to warn. */
static void check_debt_or_finish(struct tb_job *job)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (job->hold_flags[i] & HOLD_CHECK_DEBT) {
            struct tb_period_accounts period;
            tb_ledger_period_accounts(job->holds[i].limit, job->holds[i].period_start_ms, &period);
            job->ids[count++] = period.spend;
        }
    }
    if (count == 0) {
        finish_complete(job);
        return;
    }
    job->step = STEP_DEBT_CHECK;
    tb_job_submit(job, TBC_OPERATION_LOOKUP_ACCOUNTS, count, debt_read);
}

static void debt_read(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    struct tb_backend *b = job->call->backend;
    uint32_t k = 0;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (!(job->hold_flags[i] & HOLD_CHECK_DEBT))
            continue;
        struct tbc_account spend;
        memcpy(&spend, job->objects[k], sizeof spend);
        bool owed = item->status == TBC_ITEM_OK && job->found[k] && tb_ledger_owed(&spend) > 0;
        k++;
        if (!owed)
            continue;
        tb_job_warn(job, BACKEND_WARNING_OVERAGE_DEBT, job->holds[i].limit);
        pthread_rwlock_wrlock(&b->registry_lock);
        job->holds[i].limit->budget_owes_ms = job->holds[i].period_start_ms;
        pthread_rwlock_unlock(&b->registry_lock);
    }
    assert(k == item->event_count); /* one spend account read per flagged hold */
    finish_complete(job);           /* the accounting is done; only a warning could be missing */
}

/* Overage that did not fit (rolling) and late commits (budget). */
static void build_follow(struct tb_job *job)
{
    if (job->final_marker) {
        build_final_follow(job);
        return;
    }
    struct tb_backend *b = job->call->backend;
    uint64_t now_ns = cluster_now_ns(b);
    job->event_count = 0;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        const struct tb_lease_hold *hold = &job->holds[i];
        if (job->hold_flags[i] & HOLD_OVERAGE) {
            struct tbc_transfer shape = reserve_shape(job, hold);
            struct tbc_transfer cancel = tb_ledger_void(lease_transfer_id(job, "xfer:void:", hold),
                                                        &shape, TB_VOID_BY_COMPLETE);
            cancel.flags |= TBC_TRANSFER_LINKED;
            push(job, cancel);
            uint32_t seconds = remaining_seconds(hold, now_ns);
            push_rolling_keep(job, hold, hold->amount, seconds,
                              "xfer:rereserve-fit:", "xfer:used-fit:", false);
            pthread_rwlock_rdlock(&b->registry_lock);
            enum limit_overage overage = hold->limit->state.definition.overage;
            pthread_rwlock_unlock(&b->registry_lock);
            if (overage == OVERAGE_DEBT) {
                /* Debt rides with the window: a pending transfer on the debt
                 * account that expires with it (reported, never blocks). */
                struct tbc_transfer debt = tb_ledger_transfer(
                    lease_transfer_id(job, "xfer:debt:", hold), hold->limit->debt_id,
                    b->operator_id, job->actual[i] - hold->amount, TB_CODE_DEBT,
                    TBC_TRANSFER_PENDING);
                debt.timeout = seconds;
                push(job, debt);
                tb_job_warn(job, BACKEND_WARNING_OVERAGE_DEBT, hold->limit);
            } else {
                __atomic_add_fetch(&b->overage_denied, 1, __ATOMIC_RELAXED);
                tb_job_warn(job, BACKEND_WARNING_OVERAGE_DENIED, hold->limit);
            }
        }
        if ((job->hold_flags[i] & HOLD_LATE) && job->actual[i] > 0) {
            push_owe(job, hold, "xfer:owe-late:", job->actual[i], 0);
            push_settles(job, hold);
        }
    }
}

/* What to do once every hold's first result is understood. */
static void after_settle(struct tb_job *job, bool conflict, bool failed, bool follow)
{
    if (conflict) {
        set_state(job, TB_LEASE_RELEASED);
        complete_answer(job, BACKEND_ALREADY_FINALIZED, 0, false);
    } else if (failed) {
        complete_answer(job, BACKEND_UNAVAILABLE, 0, false);
    } else if (follow) {
        build_follow(job);
        job->step = STEP_FOLLOW;
        tb_job_submit(job, TBC_OPERATION_CREATE_TRANSFERS, job->event_count, follow_done);
    } else {
        check_debt_or_finish(job);
    }
}

static void void_check_read(struct tbc_item *item);

/* Reads one hold's result; sets its flags. Returns false on a failure. */
static bool understand(struct tb_job *job, uint32_t i, bool *conflict, bool *follow)
{
    const struct tb_lease_hold *hold = &job->holds[i];
    uint32_t offset;
    uint32_t code = chain_code(job, i, job->hold_length[i], &offset);
    bool budget = hold->kind == LIMIT_BUDGET;
    if (code == TBC_TRANSFER_OK) {
        if (budget && job->actual[i] > hold->amount)
            job->hold_flags[i] |= HOLD_CHECK_DEBT;
    } else if (offset == 0 && code == TBC_TRANSFER_EXISTS_WITH_DIFFERENT_USER_DATA_32) {
        *conflict = true; /* voided by a release */
    } else if (offset == 0 && code == TBC_TRANSFER_EXISTS_WITH_DIFFERENT_FLAGS) {
        /* A void without the link (a release, or a complete that kept
         * nothing): its user_data_32 tells which. */
        job->hold_flags[i] |= HOLD_CHECK_VOID;
    } else if (offset == 0 && code == TBC_TRANSFER_PENDING_TRANSFER_EXPIRED) {
        if (budget) { /* the call happened: charge it (docs/semantics.md) */
            job->hold_flags[i] |= HOLD_LATE | HOLD_CHECK_DEBT;
            *follow = *follow || job->actual[i] > 0;
            tb_job_warn(job, BACKEND_WARNING_COMMIT_AFTER_EXPIRY, hold->limit);
        } /* rolling/concurrency: the window is over, nothing left */
    } else if (offset == 0 &&
               (code == TBC_TRANSFER_EXISTS || code == TBC_TRANSFER_PENDING_TRANSFER_NOT_FOUND ||
                code == TBC_TRANSFER_PENDING_TRANSFER_ALREADY_VOIDED ||
                code == TBC_TRANSFER_PENDING_TRANSFER_ALREADY_POSTED)) {
        /* completed by an earlier attempt, or nothing to void */
    } else if (offset == 1 && hold->kind == LIMIT_ROLLING && code == TBC_TRANSFER_EXCEEDS_CREDITS &&
               job->actual[i] > hold->amount) {
        job->hold_flags[i] |= HOLD_OVERAGE;
        *follow = true;
    } else {
        log_failure(job, hold, code);
        return false;
    }
    return true;
}

/* Retry-after notes of the holds this attempt voided: what each still
 * holds until its expiry (a rolling complete keeps the actual; everything
 * else frees at once). A void that failed changed nothing; one whose
 * chain failed on an overage keeps the reserved amount, as noted. */
static void renote_voided(const struct tb_job *job)
{
    for (uint32_t i = 0; i < job->hold_count; i++) {
        const struct tb_lease_hold *hold = &job->holds[i];
        if (job->codes[job->hold_event[i]] != TBC_TRANSFER_OK)
            continue;
        bool kept = job->kind == TB_JOB_COMPLETE && hold->kind == LIMIT_ROLLING;
        tb_registry_renote_hold(hold->limit, hold->note_sequence, kept ? job->actual[i] : 0);
    }
}

static void settle_done(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    assert(job->step == STEP_SETTLE);
    assert(job->kind == TB_JOB_COMPLETE);
    if (item->status != TBC_ITEM_OK) {
        complete_answer(job, BACKEND_UNAVAILABLE, 0, false);
        return;
    }
    bool conflict = false, failed = false, follow = false;
    uint32_t checks = 0;
    renote_voided(job);
    for (uint32_t i = 0; i < job->hold_count; i++) {
        if (!understand(job, i, &conflict, &follow))
            failed = true;
        if (job->hold_flags[i] & HOLD_CHECK_VOID)
            job->ids[checks++] = lease_transfer_id(job, "xfer:void:", &job->holds[i]);
    }
    assert(checks <= job->hold_count);
    if (checks == 0 && !conflict && !failed && every_hold_expired(job)) {
        job->final_marker = true; /* nothing voided: mark the lease as completed */
        follow = true;
    }
    if (checks > 0 && !conflict && !failed) {
        job->hold_flags[0] |= follow ? HOLD_FOLLOW_PENDING : 0;
        job->step = STEP_VOID_CHECK;
        tb_job_submit(job, TBC_OPERATION_LOOKUP_TRANSFERS, checks, void_check_read);
        return;
    }
    after_settle(job, conflict, failed, follow);
}

static void void_check_read(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    assert(job->step == STEP_VOID_CHECK);
    if (item->status != TBC_ITEM_OK) {
        complete_answer(job, BACKEND_UNAVAILABLE, 0, false);
        return;
    }
    bool conflict = false;
    for (uint32_t k = 0; k < item->event_count; k++) {
        struct tbc_transfer t;
        memcpy(&t, job->objects[k], sizeof t);
        if (job->found[k] && t.user_data_32 == TB_VOID_BY_RELEASE)
            conflict = true;
    }
    bool follow = (job->hold_flags[0] & HOLD_FOLLOW_PENDING) != 0;
    after_settle(job, conflict, false, follow);
}

static void follow_done(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    assert(job->step == STEP_FOLLOW);
    if (item->status != TBC_ITEM_OK) {
        complete_answer(job, BACKEND_UNAVAILABLE, 0, false);
        return;
    }
    if (job->final_marker &&
        job->codes[late_charges(job)] == TBC_TRANSFER_EXISTS_WITH_DIFFERENT_USER_DATA_32) {
        set_state(job, TB_LEASE_RELEASED); /* released after its holds expired: nothing owed */
        complete_answer(job, BACKEND_ALREADY_FINALIZED, 0, false);
        return;
    }
    for (uint32_t e = 0; e < job->event_count; e++) {
        uint32_t code = job->codes[e];
        /* settles may find nothing to move; an expired hold needs nothing */
        bool fine = code == TBC_TRANSFER_OK || code == TBC_TRANSFER_LINKED_EVENT_FAILED ||
                    code == TBC_TRANSFER_EXISTS || code == TBC_TRANSFER_PENDING_TRANSFER_EXPIRED ||
                    job->events[e].code == TB_CODE_SETTLE;
        if (!fine) {
            fprintf(stderr, "tigerbeetle: complete follow-up event %u failed with result %u\n", e,
                    code);
            complete_answer(job, BACKEND_UNAVAILABLE, 0, false);
            return;
        }
    }
    check_debt_or_finish(job);
}

static void release_done(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    assert(job->step == STEP_SETTLE);
    assert(job->kind == TB_JOB_RELEASE);
    if (item->status != TBC_ITEM_OK) {
        release_answer(job, BACKEND_UNAVAILABLE);
        return;
    }
    bool conflict = false, failed = false;
    renote_voided(job);
    for (uint32_t i = 0; i < job->hold_count; i++) {
        uint32_t code = job->codes[job->hold_event[i]];
        if (code == TBC_TRANSFER_EXISTS_WITH_DIFFERENT_USER_DATA_32 ||
            code == TBC_TRANSFER_EXISTS_WITH_DIFFERENT_FLAGS) {
            conflict = true; /* voided by a complete (its voids may be linked) */
        } else if (code != TBC_TRANSFER_OK && code != TBC_TRANSFER_EXISTS &&
                   code != TBC_TRANSFER_PENDING_TRANSFER_EXPIRED &&
                   code != TBC_TRANSFER_PENDING_TRANSFER_NOT_FOUND &&
                   code != TBC_TRANSFER_PENDING_TRANSFER_ALREADY_VOIDED &&
                   code != TBC_TRANSFER_PENDING_TRANSFER_ALREADY_POSTED) {
            log_failure(job, &job->holds[i], code);
            failed = true;
        }
    }
    if (conflict) {
        set_state(job, TB_LEASE_COMPLETED);
        release_answer(job, BACKEND_ALREADY_FINALIZED);
    } else if (failed) {
        release_answer(job, BACKEND_UNAVAILABLE);
    } else if (every_hold_expired(job)) { /* nothing voided: mark the lease as released */
        job->event_count = 0;
        push_final(job, TB_VOID_BY_RELEASE);
        job->step = STEP_FOLLOW;
        tb_job_submit(job, TBC_OPERATION_CREATE_TRANSFERS, job->event_count, release_final_done);
    } else {
        set_state(job, TB_LEASE_RELEASED);
        release_answer(job, BACKEND_OK);
    }
}

/* The lease's holds are known and the lease is ours (busy): go. */
static void proceed(struct tb_job *job)
{
    assert(job->lease != NULL);
    assert(job->hold_count >= 1);
    if (job->kind == TB_JOB_COMPLETE) {
        const struct actual *missing = NULL;
        if (!match_actuals(job, &missing)) {
            const struct complete_request *request = job->request;
            complete_answer(job, BACKEND_ACTUAL_KEY_NOT_IN_LEASE,
                            (uint32_t)(missing - request->actuals), false);
            return;
        }
        build_complete(job);
        job->step = STEP_SETTLE;
        tb_job_submit(job, TBC_OPERATION_CREATE_TRANSFERS, job->event_count, settle_done);
        return;
    }
    build_release(job);
    job->step = STEP_SETTLE;
    tb_job_submit(job, TBC_OPERATION_CREATE_TRANSFERS, job->event_count, release_done);
}

/* ---- a lease this process does not know: find it in the cluster --------- */

struct tb_scan {
    uint32_t count;     /* candidate limits */
    uint32_t next;      /* the next one to look up */
    uint32_t first_end; /* [0, first_end): the actuals' keys (complete) */
    uint32_t expected;  /* the lease's requirement count, once a hold told it */
    uint32_t chunk;     /* ids per lookup */
    struct tb_limit **limits;
    tbc_u128 *ids;
    uint8_t (*objects)[TBC_EVENT_SIZE];
    uint8_t *found;
};

static void scan_next(struct tb_job *job);

static bool candidate_taken(struct tb_limit **limits, uint32_t count, const struct tb_limit *limit)
{
    for (uint32_t i = 0; i < count; i++) {
        if (limits[i] == limit)
            return true;
    }
    return false;
}

/* Candidates: the actuals' keys first, then every other limit this process
 * knows (deleted ones too: their leases still complete). */
static struct tb_scan *scan_new(struct tb_backend *b, struct tb_job *job)
{
    pthread_rwlock_rdlock(&b->registry_lock);
    uint32_t total = b->limit_count;
    uint32_t chunk = total < TB_SCAN_IDS_MAX ? total : TB_SCAN_IDS_MAX;
    uint32_t events_max = tbc_submitter_events_max(b->submitter, TBC_OPERATION_LOOKUP_TRANSFERS);
    if (chunk > events_max)
        chunk = events_max;
    if (chunk == 0)
        chunk = 1;
    size_t size = sizeof(struct tb_scan) + total * sizeof(struct tb_limit *) +
                  chunk * (sizeof(tbc_u128) + TBC_EVENT_SIZE + 1) + 16;
    struct tb_scan *scan = malloc(size);
    if (scan == NULL) {
        pthread_rwlock_unlock(&b->registry_lock);
        return NULL;
    }
    memset(scan, 0, sizeof *scan);
    scan->chunk = chunk;
    scan->limits = (struct tb_limit **)(scan + 1);
    uint8_t *after = (uint8_t *)(scan->limits + total);
    after += (16 - (uintptr_t)after % 16) % 16;
    scan->objects = (uint8_t(*)[TBC_EVENT_SIZE])after;
    scan->ids = (tbc_u128 *)(after + (size_t)chunk * TBC_EVENT_SIZE);
    scan->found = (uint8_t *)(scan->ids + chunk);
    if (job->kind == TB_JOB_COMPLETE) {
        const struct complete_request *request = job->request;
        for (uint32_t a = 0; a < request->actual_count; a++) {
            struct tb_limit *limit =
                tb_registry_find(b, request->actuals[a].key, request->actuals[a].key_length);
            if (limit != NULL && !candidate_taken(scan->limits, scan->count, limit))
                scan->limits[scan->count++] = limit;
        }
    }
    scan->first_end = scan->count;
    for (uint32_t i = 0; i < TB_LIMIT_BUCKETS; i++) {
        for (struct tb_limit *limit = b->limit_buckets[i]; limit != NULL;
             limit = limit->next_in_bucket) {
            if (!candidate_taken(scan->limits, scan->first_end, limit))
                scan->limits[scan->count++] = limit;
        }
    }
    assert(scan->count <= total);
    pthread_rwlock_unlock(&b->registry_lock);
    return scan;
}

static void scan_unknown(struct tb_job *job)
{
    /* Nothing of this lease in the cluster: nothing held, nothing to do. */
    if (job->kind == TB_JOB_COMPLETE)
        complete_answer(job, BACKEND_OK, 0, false);
    else
        release_answer(job, BACKEND_OK);
}

static void scan_finished(struct tb_job *job)
{
    struct tb_backend *b = job->call->backend;
    if (job->hold_count == 0) {
        scan_unknown(job);
        return;
    }
    pthread_mutex_lock(&b->lease_lock);
    struct tb_lease *lease = tb_leases_resize(b, job->lease, job->hold_count);
    if (lease != NULL) {
        job->lease = lease;
        memcpy(lease->holds, job->holds, job->hold_count * sizeof job->holds[0]);
        /* Whether it is still live, completed or released, the voids will
         * tell; until then it is remembered as allowed. */
        lease->state = TB_LEASE_ALLOWED;
    }
    pthread_mutex_unlock(&b->lease_lock);
    if (lease == NULL) {
        answer(job, BACKEND_UNAVAILABLE, false);
        return;
    }
    proceed(job);
}

static void scan_add(struct tb_job *job, struct tb_limit *limit, const struct tbc_transfer *t)
{
    uint8_t kind = (uint8_t)(t->user_data_32 >> 8);
    uint32_t count = t->user_data_32 & 0xff;
    if (kind < LIMIT_ROLLING || kind > LIMIT_BUDGET || (t->flags & TBC_TRANSFER_PENDING) == 0 ||
        job->hold_count == REQUIREMENTS_PER_RESERVE_MAX)
        return; /* not a reserve transfer of ours */
    struct tb_lease_hold *hold = &job->holds[job->hold_count++];
    hold->limit = limit;
    hold->amount = t->amount.low;
    hold->timestamp_ns = t->timestamp;
    hold->timeout_seconds = t->timeout;
    hold->period_start_ms = (int64_t)t->user_data_64;
    hold->note_sequence = 0; /* made elsewhere, or forgotten here */
    hold->kind = kind;
    hold->denied = false;
    job->scan->expected = count;
}

static void scan_read(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    struct tb_scan *scan = job->scan;
    assert(job->step == STEP_SCAN);
    assert(scan->next + item->event_count <= scan->count);
    if (item->status != TBC_ITEM_OK) {
        answer(job, BACKEND_UNAVAILABLE, false);
        return;
    }
    for (uint32_t k = 0; k < item->event_count; k++) {
        if (!scan->found[k])
            continue;
        struct tbc_transfer t;
        memcpy(&t, scan->objects[k], sizeof t);
        scan_add(job, scan->limits[scan->next + k], &t);
    }
    scan->next += item->event_count;
    bool complete_seen = scan->expected != 0 && job->hold_count >= scan->expected;
    /* A complete whose own keys find nothing is about an unknown lease. */
    bool unknown = job->kind == TB_JOB_COMPLETE && scan->next >= scan->first_end &&
                   scan->first_end > 0 && job->hold_count == 0;
    if (unknown) {
        scan_unknown(job);
    } else if (complete_seen || scan->next == scan->count) {
        scan_finished(job);
    } else {
        scan_next(job);
    }
}

static void scan_next(struct tb_job *job)
{
    struct tb_backend *b = job->call->backend;
    struct tb_scan *scan = job->scan;
    uint32_t n = scan->count - scan->next;
    /* the actuals' keys on their own first: often they are the whole lease */
    if (scan->next < scan->first_end && n > scan->first_end - scan->next)
        n = scan->first_end - scan->next;
    if (n > scan->chunk)
        n = scan->chunk;
    assert(n <= TB_SCAN_IDS_MAX);
    if (n == 0) {
        scan_finished(job);
        return;
    }
    for (uint32_t k = 0; k < n; k++)
        scan->ids[k] = tb_ledger_reserve_id(&job->name, scan->limits[scan->next + k]);
    struct tbc_item *item = &job->item;
    memset(item, 0, sizeof *item);
    item->operation = TBC_OPERATION_LOOKUP_TRANSFERS;
    item->event_count = n;
    item->events = scan->ids;
    item->objects = scan->objects;
    item->found = scan->found;
    item->deadline_ms = clock_monotonic_ms() + job->call->backend->item_deadline_ms;
    item->done = scan_read;
    item->context = job;
    job->step = STEP_SCAN;
    tbc_submitter_submit(b->submitter, item);
}

/* ---- entry points -------------------------------------------------------- */

/* Finds the lease in the cache and acts on what it knows; returns true when
 * the job continues (made the lease busy), false when it was answered or
 * queued. Lease lock taken here. */
static bool claim(struct tb_job *job, bool *miss)
{
    struct tb_backend *b = job->call->backend;
    const char *id = job->name.id;
    uint32_t length = job->name.length;
    int64_t now_ms = clock_now_ms(b->clock);
    *miss = false;
    pthread_mutex_lock(&b->lease_lock);
    struct tb_lease *lease = tb_leases_find(b, id, length, now_ms);
    if (lease != NULL && lease->busy) {
        tb_job_wait_behind(lease, job);
        pthread_mutex_unlock(&b->lease_lock);
        return false;
    }
    if (lease == NULL) {
        lease = tb_leases_insert(b, id, length, 0, now_ms);
        *miss = true;
    } else {
        assert(lease->state != TB_LEASE_PENDING); /* only ever in the cache while busy */
        job->hold_count = lease->hold_count;
        memcpy(job->holds, lease->holds, lease->hold_count * sizeof lease->holds[0]);
        job->step = lease->state; /* read below, outside the lock */
        if (lease->state == TB_LEASE_ALLOWED)
            lease->busy = true;
    }
    if (lease != NULL && (*miss || lease->busy))
        job->lease = lease;
    pthread_mutex_unlock(&b->lease_lock);
    if (lease == NULL) {
        answer(job, BACKEND_UNAVAILABLE, false);
        return false;
    }
    return true;
}

static void start(struct tb_job *job)
{
    if (job->failed) {
        answer(job, BACKEND_UNAVAILABLE, false);
        return;
    }
    if (!tb_ledger_ids_known(job->call->backend)) {
        /* The cluster has not been reached yet: its ids are not known. */
        if (job->parked)
            answer(job, BACKEND_UNAVAILABLE, false);
        else
            tb_job_park(job);
        return;
    }
    name_lease(job);
    bool miss;
    if (!claim(job, &miss))
        return;
    if (miss) {
        job->scan = scan_new(job->call->backend, job);
        if (job->scan == NULL) {
            answer(job, BACKEND_UNAVAILABLE, false);
            return;
        }
        scan_next(job);
        return;
    }
    uint8_t state = job->step;
    job->step = 0;
    if (state == TB_LEASE_ALLOWED) {
        proceed(job);
    } else if (job->kind == TB_JOB_RELEASE) {
        /* denied or released: nothing held; completed: too late */
        if (state == TB_LEASE_COMPLETED)
            release_answer(job, BACKEND_ALREADY_FINALIZED);
        else
            release_answer(job, BACKEND_OK);
    } else if (state == TB_LEASE_RELEASED) {
        complete_answer(job, BACKEND_ALREADY_FINALIZED, 0, false);
    } else if (state == TB_LEASE_COMPLETED) {
        const struct actual *missing = NULL;
        if (!match_actuals(job, &missing)) {
            const struct complete_request *request = job->request;
            complete_answer(job, BACKEND_ACTUAL_KEY_NOT_IN_LEASE,
                            (uint32_t)(missing - request->actuals), false);
        } else {
            complete_answer(job, BACKEND_OK, 0, true); /* completing twice: no-op */
        }
    } else {
        complete_answer(job, BACKEND_OK, 0, false); /* denied: nothing held */
    }
}

void tb_complete_start(struct tb_job *job)
{
    start(job);
}

void tb_release_start(struct tb_job *job)
{
    start(job);
}
