/* Reserve (docs/tigerbeetle.md "Flows"): one linked chain of
 * pending transfers, limit account -> operator, one per requirement, so
 * the cluster admits all or none. The chain's result decides:
 * - all created: allowed, timestamps from the cluster;
 * - exceeds_credits (or 0.17's id_already_failed for a lease denied
 *   before): denied; the accounts are read to name every limit that did
 *   not fit and to compute retry_after;
 * - exists: a retry of a lease reserved before (perhaps by another front
 *   end): the transfers are read to tell "same requirements" (allowed,
 *   with the original timestamps) from a conflict. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/retry.h"
#include "tbclient/tbc_ids.h"
#include "tb_backend.h"

enum { STEP_CHAIN = 1, STEP_DENIAL = 2, STEP_CLASSIFY = 3 };

static void answer_unavailable(struct tb_job *job)
{
    reserve_result_unavailable(job->result);
    tb_job_finish(job);
}

static void answer_conflict(struct tb_job *job)
{
    reserve_result_fail(job->result, BACKEND_LEASE_CONFLICT, 0);
    tb_job_finish(job);
}

/* A known lease answers as before (lease lock held; backend.c holds the
 * rule). */
static void replay(const struct tb_lease *lease, const struct reserve_request *request,
                   struct reserve_result *result)
{
    /* A lease nobody learned anything about is never left in the cache. */
    assert(lease->state != TB_LEASE_PENDING);
    assert(lease->state <= TB_LEASE_DENIED); /* the last of the view's values */
    assert(!lease->busy);
    struct lease_item_key items[REQUIREMENTS_PER_RESERVE_MAX];
    uint64_t denied_items = 0;
    for (uint32_t j = 0; j < lease->hold_count; j++) {
        const struct tb_lease_hold *hold = &lease->holds[j];
        items[j] = (struct lease_item_key){hold->limit->key, hold->limit->key_length, hold->amount};
        if (hold->denied)
            denied_items |= UINT64_C(1) << j;
    }
    struct lease_view view = {
        .state = (enum lease_view_state)lease->state, /* the same values */
        .items = items,
        .item_count = lease->hold_count,
        .denied_items = denied_items,
        .reserved_at_unix_ms = lease->reserved_at_ms,
        .expires_at_unix_ms = lease->expires_at_ms,
        .retry_after_ms = lease->retry_after_ms,
    };
    reserve_replay(request, &view, result);
}

/* Definitive errors, before any capacity is touched and not recorded
 * (decided in backend.c). Fills the job's holds, in request order (sorted
 * by key later). Returns false with the error in result, or *park when a
 * limit's accounts are not in the cluster yet. */
static bool resolve(struct tb_backend *b, struct tb_job *job, int64_t now_ms, bool *park)
{
    const struct reserve_request *request = job->request;
    uint32_t n = request->requirement_count;
    assert(n >= 1);
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    struct tb_limit *limits[REQUIREMENTS_PER_RESERVE_MAX];
    struct limit_view views[REQUIREMENTS_PER_RESERVE_MAX];
    *park = false;
    pthread_rwlock_rdlock(&b->registry_lock);
    for (uint32_t i = 0; i < n; i++) {
        const struct requirement *r = &request->requirements[i];
        limits[i] = tb_registry_find(b, r->key, r->key_length);
        bool found = limits[i] != NULL && !limits[i]->deleted;
        views[i] = (struct limit_view){.found = found};
        if (found) {
            views[i].decreasing = limits[i]->state.status == LIMIT_DECREASING;
            views[i].capacity = limits[i]->state.definition.capacity;
        }
    }
    bool ok = reserve_definitive_check(request, views, b->decrease_retry_ms, job->result);
    for (uint32_t i = 0; ok && i < n; i++) {
        const struct limit_definition *d = &limits[i]->state.definition;
        struct tb_lease_hold *hold = &job->holds[i];
        hold->limit = limits[i];
        hold->amount = request->requirements[i].amount;
        hold->kind = (uint8_t)d->kind;
        hold->timestamp_ns = 0; /* the cluster's, once the reserve is made */
        hold->timeout_seconds = d->kind == LIMIT_ROLLING ? d->window_seconds : d->timeout_seconds;
        hold->period_start_ms =
            d->kind == LIMIT_BUDGET ? tb_limit_period_now(limits[i], now_ms).start_ms : 0;
        hold->note_sequence = 0;
        hold->denied = false;
        job->request_index[i] = (uint8_t)i;
        if (d->kind == LIMIT_BUDGET ? !tb_limit_period_ready(limits[i], hold->period_start_ms)
                                    : !limits[i]->provisioned)
            *park = true;
        /* hold_flags: whether to settle this budget's period first */
        job->hold_flags[i] =
            d->kind == LIMIT_BUDGET && limits[i]->budget_owes_ms == hold->period_start_ms;
    }
    pthread_rwlock_unlock(&b->registry_lock);
    job->hold_count = ok ? n : 0;
    return ok;
}

/* Sorts the holds by key, so a retry builds the same chain in any order. */
static void sort_holds(struct tb_job *job)
{
    for (uint32_t i = 1; i < job->hold_count; i++) {
        for (uint32_t j = i; j > 0; j--) {
            const struct tb_limit *x = job->holds[j - 1].limit, *y = job->holds[j].limit;
            if (strcmp(x->key, y->key) <= 0)
                break;
            struct tb_lease_hold hold = job->holds[j];
            job->holds[j] = job->holds[j - 1];
            job->holds[j - 1] = hold;
            uint8_t index = job->request_index[j];
            job->request_index[j] = job->request_index[j - 1];
            job->request_index[j - 1] = index;
            uint8_t flag = job->hold_flags[j];
            job->hold_flags[j] = job->hold_flags[j - 1];
            job->hold_flags[j - 1] = flag;
        }
    }
}

static tbc_u128 hold_gate(const struct tb_lease_hold *hold)
{
    if (hold->kind != LIMIT_BUDGET)
        return tb_limit_gate(hold->limit, hold->kind);
    return tb_ledger_period_gate(hold->limit, hold->period_start_ms);
}

static void build_chain(struct tb_backend *b, struct tb_job *job)
{
    uint32_t n = job->hold_count;
    assert(n >= 1);
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    uint32_t count = 0;
    /* A budget period that owes gets its free capacity paid in first, so
     * this reserve cannot take what the debt is owed (docs/tigerbeetle.md
     * "Budgets: debt that blocks"). */
    for (uint32_t i = 0; i < n; i++) {
        if (!job->hold_flags[i])
            continue;
        struct tb_period_accounts period;
        tb_ledger_period_accounts(job->holds[i].limit, job->holds[i].period_start_ms, &period);
        job->events[count++] = tb_ledger_settle(tbc_id_random(), period.gate, period.cut);
        job->events[count++] = tb_ledger_settle(tbc_id_random(), period.gate, period.spend);
    }
    job->prefix_count = count;
    tbc_u128 lease_tag = tb_ledger_lease_tag(&job->name);
    for (uint32_t i = 0; i < n; i++) {
        const struct tb_lease_hold *hold = &job->holds[i];
        uint16_t flags = TBC_TRANSFER_PENDING | (i + 1 < n ? TBC_TRANSFER_LINKED : 0);
        struct tbc_transfer t =
            tb_ledger_transfer(tb_ledger_reserve_id(&job->name, hold->limit), hold_gate(hold),
                               b->operator_id, hold->amount, TB_CODE_RESERVE, flags);
        t.timeout = hold->timeout_seconds;
        t.user_data_128 = lease_tag;
        t.user_data_64 = (uint64_t)hold->period_start_ms;
        /* Enough for another front end to complete it: kind and how many
         * requirements the lease has. */
        t.user_data_32 = (uint32_t)hold->kind << 8 | n;
        job->events[count++] = t;
    }
    /* At most two settles per hold before the chain, one transfer per hold. */
    assert(count == job->prefix_count + n);
    assert(count <= TB_JOB_EVENTS_MAX);
    job->event_count = count;
}

/* Stores the outcome in the lease entry (lease lock taken here). */
static void record(struct tb_backend *b, struct tb_job *job, uint8_t state, int64_t reserved_at_ms,
                   int64_t expires_at_ms, int64_t retry_after_ms)
{
    pthread_mutex_lock(&b->lease_lock);
    struct tb_lease *lease = job->lease;
    assert(lease != NULL); /* the job that asked the cluster owns the entry */
    assert(lease->busy);
    assert(lease->hold_count == job->hold_count);
    memcpy(lease->holds, job->holds, job->hold_count * sizeof job->holds[0]);
    lease->state = state;
    lease->reserved_at_ms = reserved_at_ms;
    lease->expires_at_ms = expires_at_ms;
    lease->retry_after_ms = retry_after_ms;
    pthread_mutex_unlock(&b->lease_lock);
}

/* The cluster does not say what a limit has left after a reserve (that
 * would take a lookup per limit): only the capacity is reported. */
static void fill_states(struct tb_job *job)
{
    const struct reserve_request *request = job->request;
    struct tb_backend *b = job->call->backend;
    pthread_rwlock_rdlock(&b->registry_lock);
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[i];
        struct requirement_state *state = &request->states[i];
        *state = (struct requirement_state){.known = false};
        for (uint32_t j = 0; j < job->hold_count; j++) {
            const struct tb_limit *limit = job->holds[j].limit;
            if (limit->key_length == r->key_length &&
                memcmp(limit->key, r->key, r->key_length) == 0) {
                state->kind = limit->state.definition.kind;
                state->capacity = limit->state.definition.capacity;
            }
        }
    }
    pthread_rwlock_unlock(&b->registry_lock);
}

/* replayed: the lease's transfers were in the cluster already (a retry,
 * perhaps through another front end, whose completion is not known here). */
static void allowed(struct tb_backend *b, struct tb_job *job, bool replayed)
{
    int64_t reserved_at_ms = INT64_MAX, expires_at_ms = INT64_MAX;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        const struct tb_lease_hold *hold = &job->holds[i];
        int64_t at_ms = (int64_t)(hold->timestamp_ns / 1000000);
        int64_t until_ms = at_ms + (int64_t)hold->timeout_seconds * 1000;
        if (at_ms < reserved_at_ms)
            reserved_at_ms = at_ms;
        if (until_ms < expires_at_ms)
            expires_at_ms = until_ms;
    }
    record(b, job, TB_LEASE_ALLOWED, reserved_at_ms, expires_at_ms, 0);
    struct reserve_result *result = job->result;
    reserve_result_clear(result);
    result->allowed = true;
    result->reserved_at_unix_ms = reserved_at_ms;
    result->expires_at_unix_ms = expires_at_ms;
    result->replayed = replayed;
    const struct reserve_request *request = job->request;
    if (!replayed && request->states != NULL)
        fill_states(job);
    tb_job_finish(job);
}

static void note_holds(struct tb_backend *b, struct tb_job *job)
{
    int64_t now_ms = clock_now_ms(b->clock);
    for (uint32_t i = 0; i < job->hold_count; i++) {
        struct tb_lease_hold *hold = &job->holds[i];
        hold->note_sequence =
            tb_registry_note_hold(b, hold->limit, now_ms + (int64_t)hold->timeout_seconds * 1000,
                                  hold->period_start_ms, hold->amount);
    }
}

static void denial_read(struct tbc_item *item);
static void classify_read(struct tbc_item *item);

/* The first event of the chain that failed for a reason of its own. */
static uint32_t first_failure(const struct tb_job *job, uint32_t *code)
{
    for (uint32_t i = 0; i < job->hold_count; i++) {
        uint32_t c = job->codes[job->prefix_count + i];
        if (c != TBC_TRANSFER_OK && c != TBC_TRANSFER_LINKED_EVENT_FAILED) {
            *code = c;
            return i;
        }
    }
    *code = TBC_TRANSFER_OK;
    return UINT32_MAX;
}

static void mark_unprovisioned(struct tb_backend *b, struct tb_limit *limit)
{
    pthread_rwlock_wrlock(&b->registry_lock);
    limit->provisioned = false;
    limit->budget_periods[0] = limit->budget_periods[1] = INT64_MIN;
    __atomic_store_n(&b->provision_wanted, true, __ATOMIC_RELEASE);
    pthread_rwlock_unlock(&b->registry_lock);
}

static void chain_done(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    struct tb_backend *b = job->call->backend;
    assert(item == &job->item);
    assert(job->step == STEP_CHAIN);
    const struct reserve_request *request = job->request;
    if (item->status != TBC_ITEM_OK) {
        if (item->status == TBC_ITEM_INVALID)
            fprintf(stderr, "tigerbeetle: reserve event %u refused locally (result %u)\n",
                    item->invalid_index, item->invalid_code);
        else
            tb_leases_doubt_note(b, request->lease_id, request->lease_id_length);
        answer_unavailable(job);
        return;
    }
    uint32_t code;
    uint32_t failed = first_failure(job, &code);
    if (failed == UINT32_MAX) {
        for (uint32_t i = 0; i < job->hold_count; i++)
            job->holds[i].timestamp_ns = item->timestamp + job->prefix_count + i;
        note_holds(b, job);
        allowed(b, job, false);
        return;
    }
    job->failed_hold = failed;
    /* On 0.15.3 a denial records nothing, so an earlier attempt still in
     * flight could hold the lease after it: not a denial yet (0.17 burns
     * the ids, and the earlier attempt then fails). */
    if (code == TBC_TRANSFER_EXCEEDS_CREDITS &&
        tbc_submitter_dialect(b->submitter) == TBC_DIALECT_0_15 &&
        tb_leases_in_doubt(b, request->lease_id, request->lease_id_length)) {
        answer_unavailable(job);
        return;
    }
    if (code == TBC_TRANSFER_EXCEEDS_CREDITS || code == TBC_TRANSFER_ID_ALREADY_FAILED) {
        for (uint32_t i = 0; i < job->hold_count; i++)
            job->ids[i] = hold_gate(&job->holds[i]);
        job->step = STEP_DENIAL;
        tb_job_submit(job, TBC_OPERATION_LOOKUP_ACCOUNTS, job->hold_count, denial_read);
        return;
    }
    if (code == TBC_TRANSFER_EXISTS || code == 37 /* debit account: another period */ ||
        code == 42 /* user_data_64: another period */) {
        for (uint32_t i = 0; i < job->hold_count; i++)
            job->ids[i] = tb_ledger_reserve_id(&job->name, job->holds[i].limit);
        job->step = STEP_CLASSIFY;
        tb_job_submit(job, TBC_OPERATION_LOOKUP_TRANSFERS, job->hold_count, classify_read);
        return;
    }
    if (tbc_transfer_result_exists_different(code)) {
        answer_conflict(job);
        return;
    }
    if (code == TBC_TRANSFER_DEBIT_ACCOUNT_NOT_FOUND ||
        code == TBC_TRANSFER_CREDIT_ACCOUNT_NOT_FOUND)
        mark_unprovisioned(b, job->holds[failed].limit);
    fprintf(stderr, "tigerbeetle: reserve of %s failed on %s with result %u\n", request->lease_id,
            job->holds[failed].limit->key, code);
    answer_unavailable(job);
}

/* A denied hold's times, the latest of each in the result. pending: what
 * the limit's account holds in pending transfers (cluster-wide), which a
 * complete or release anywhere may free. */
static void denial_add(struct tb_backend *b, const struct tb_lease_hold *hold, uint64_t shortfall,
                       uint64_t pending, bool short_now, int64_t now_ms,
                       struct reserve_result *result)
{
    int64_t fits_at_ms;
    int64_t r = tb_registry_retry_after(b, hold->limit, shortfall, hold->period_start_ms, now_ms,
                                        &fits_at_ms);
    /* Budgets: what is committed comes back only with the next period. A
     * hold that fits by the accounts read after the chain failed (a
     * release landed in between) may fit now. */
    int64_t may_fit_at_ms = !short_now || pending >= shortfall ? now_ms : fits_at_ms;
    if (!short_now)
        fits_at_ms = now_ms + 1;
    reserve_denial_add(result, (struct denial_times){r, fits_at_ms, may_fit_at_ms});
}

/* Not recorded when the caller waits for it; on 0.17 the chain's ids are
 * burnt by the denial, so the same lease can never be admitted later: it is
 * recorded, and the caller does not wait (docs/tigerbeetle.md). */
static bool denial_waitable(const struct tb_backend *b, const struct reserve_request *request,
                            const struct reserve_result *result)
{
    assert(request->yield_mask == 0); /* yield_deny answered those */
    return reserve_denial_waitable(request, result) &&
           tbc_submitter_dialect(b->submitter) == TBC_DIALECT_0_15;
}

/* Every limit that does not fit now is denied, the one the chain failed on
 * always; retry_after is the largest of theirs. */
static void denial_read(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    struct tb_backend *b = job->call->backend;
    struct reserve_result *result = job->result;
    uint32_t failed = job->failed_hold;
    assert(failed < job->hold_count);
    assert(job->step == STEP_DENIAL);
    int64_t now_ms = clock_now_ms(b->clock);
    reserve_result_clear(result);
    result->retry_after_ms = 1;
    for (uint32_t i = 0; i < job->hold_count; i++) {
        struct tb_lease_hold *hold = &job->holds[i];
        int64_t available = 0;
        uint64_t pending = 0;
        if (item->status == TBC_ITEM_OK && job->found[i]) {
            struct tbc_account account;
            memcpy(&account, job->objects[i], sizeof account);
            available = tb_ledger_available(&account);
            pending = account.debits_pending.high != 0 ? UINT64_MAX : account.debits_pending.low;
        }
        bool short_now = available < 0 || hold->amount > (uint64_t)available;
        hold->denied = i == failed || (item->status == TBC_ITEM_OK && short_now);
        if (!hold->denied)
            continue;
        uint64_t shortfall =
            short_now ? hold->amount - (uint64_t)(available > 0 ? available : 0) : hold->amount;
        denial_add(b, hold, shortfall, pending, short_now, now_ms, result);
    }
    /* denied_index counts request positions, in request order */
    for (uint32_t r = 0; r < job->hold_count; r++) {
        for (uint32_t i = 0; i < job->hold_count; i++) {
            if (job->request_index[i] == r && job->holds[i].denied)
                result->denied_index[result->denied_count++] = (uint8_t)r;
        }
    }
    /* The hold the chain failed on is always among them. */
    assert(result->denied_count >= 1);
    assert(result->denied_count <= job->hold_count);
    result->waitable = denial_waitable(b, job->request, result);
    if (!result->waitable) /* else the lease stays unknown: forgotten when the job ends */
        record(b, job, TB_LEASE_DENIED, 0, 0, result->retry_after_ms);
    tb_job_finish(job);
}

/* Others wait ahead of this reserve for some of its limits (yield_mask):
 * denied without asking the cluster, and not recorded. */
static void yield_deny(struct tb_backend *b, struct tb_job *job, int64_t now_ms)
{
    const struct reserve_request *request = job->request;
    struct reserve_result *result = job->result;
    uint64_t state = __atomic_load_n(&b->random_state, __ATOMIC_RELAXED);
    int64_t poll_ms = retry_jitter_ms(b->concurrency_poll_ms, &state);
    __atomic_store_n(&b->random_state, state, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        if ((request->yield_mask >> i & 1) != 0)
            result->denied_index[result->denied_count++] = (uint8_t)i;
    }
    result->retry_after_ms = poll_ms;
    result->fits_at_unix_ms = now_ms + 1;
    result->may_fit_at_unix_ms = now_ms;
    result->waitable = true;
    tb_job_finish(job);
}

/* The lease's transfers exist: the same requirements replay as allowed
 * (timestamps as the cluster recorded them), others conflict. */
static void classify_read(struct tbc_item *item)
{
    struct tb_job *job = item->context;
    struct tb_backend *b = job->call->backend;
    if (item->status != TBC_ITEM_OK) {
        answer_unavailable(job);
        return;
    }
    for (uint32_t i = 0; i < job->hold_count; i++) {
        struct tbc_transfer t;
        memcpy(&t, job->objects[i], sizeof t);
        struct tb_lease_hold *hold = &job->holds[i];
        if (!job->found[i] || !tbc_u128_equal(t.amount, tbc_u128_from_u64(hold->amount)) ||
            (t.flags & TBC_TRANSFER_PENDING) == 0) {
            answer_conflict(job);
            return;
        }
        hold->timestamp_ns = t.timestamp;
        hold->timeout_seconds = t.timeout;
        hold->period_start_ms = (int64_t)t.user_data_64;
    }
    allowed(b, job, true);
}

void tb_reserve_start(struct tb_job *job)
{
    struct tb_backend *b = job->call->backend;
    const struct reserve_request *request = job->request;
    if (job->failed) { /* parked, and the cluster did not come back */
        answer_unavailable(job);
        return;
    }
    int64_t now_ms = clock_now_ms(b->clock);
    pthread_mutex_lock(&b->lease_lock);
    struct tb_lease *lease = tb_leases_find(b, request->lease_id, request->lease_id_length, now_ms);
    if (lease != NULL && lease->busy) {
        tb_job_wait_behind(lease, job);
        pthread_mutex_unlock(&b->lease_lock);
        return;
    }
    if (lease != NULL) {
        replay(lease, request, job->result);
        pthread_mutex_unlock(&b->lease_lock);
        tb_job_finish(job);
        return;
    }
    pthread_mutex_unlock(&b->lease_lock);

    bool park;
    reserve_result_clear(job->result);
    if (!resolve(b, job, now_ms, &park)) {
        tb_job_finish(job);
        return;
    }
    if (request->yield_mask != 0) {
        yield_deny(b, job, now_ms);
        return;
    }
    /* The lease's ids wait for the cluster's scheme as its holds wait for
     * their accounts. */
    if (park || !tb_ledger_ids_known(b)) {
        if (job->parked)
            answer_unavailable(job);
        else
            tb_job_park(job);
        return;
    }
    job->name = tb_ledger_lease_name(b, request->lease_id, request->lease_id_length);
    sort_holds(job);

    pthread_mutex_lock(&b->lease_lock);
    lease = tb_leases_find(b, request->lease_id, request->lease_id_length, now_ms);
    if (lease != NULL) { /* another job got there first: go round again */
        pthread_mutex_unlock(&b->lease_lock);
        tb_reserve_start(job);
        return;
    }
    lease =
        tb_leases_insert(b, request->lease_id, request->lease_id_length, job->hold_count, now_ms);
    pthread_mutex_unlock(&b->lease_lock);
    if (lease == NULL) {
        answer_unavailable(job);
        return;
    }
    job->lease = lease;
    build_chain(b, job);
    job->step = STEP_CHAIN;
    tb_job_submit(job, TBC_OPERATION_CREATE_TRANSFERS, job->event_count, chain_done);
}
