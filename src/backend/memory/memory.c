/* The memory backend (docs/architecture.md, docs/semantics.md): limits,
 * holds and leases live in this process under one mutex, one critical
 * section per reserve/complete/release. Usage state is lost on restart; the
 * server keeps the registry. */
#include "memory.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/retry.h"
#include "mem_internal.h"

static struct mem_backend *mem_backend_of(struct backend *base)
{
    assert(base->ops == &mem_backend_ops);
    return (struct mem_backend *)base;
}

/* ---- reserve ------------------------------------------------------------- */

static bool key_is(const struct mem_limit *limit, const char *key, uint32_t key_length)
{
    return limit->node.key_length == key_length && memcmp(limit->node.key, key, key_length) == 0;
}

/* A known lease answers as before (backend.c holds the rule). */
static void replay(const struct mem_lease *lease, const struct reserve_request *request,
                   struct reserve_result *result)
{
    assert(lease->state >= LEASE_VIEW_ALLOWED);
    assert(lease->state <= LEASE_VIEW_DENIED);
    struct lease_item_key items[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t j = 0; j < lease->item_count; j++) {
        const struct mem_limit *limit = lease->items[j].limit;
        items[j] = (struct lease_item_key){limit->node.key, limit->node.key_length,
                                           lease->items[j].amount};
    }
    bool denied = lease->state == MEM_LEASE_DENIED;
    struct lease_view view = {
        .state = (enum lease_view_state)lease->state, /* the same values */
        .items = items,
        .item_count = lease->item_count,
        .denied_items = lease->denied_items,
        .reserved_at_unix_ms = lease->reserved_at_ms,
        .expires_at_unix_ms = denied ? 0 : lease->expires_at_ms, /* a union with retry_after */
        .retry_after_ms = denied ? lease->retry_after_ms : 0,
    };
    reserve_replay(request, &view, result);
}

/* Finds the request's limits (a deleted one is NULL to reserves) and
 * decides the definitive errors (backend.c), before any capacity is looked
 * at. */
static bool resolve(struct mem_backend *b, const struct reserve_request *request,
                    struct mem_limit **limits, struct reserve_result *result)
{
    uint32_t n = request->requirement_count;
    struct limit_view views[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < n; i++) {
        const struct requirement *r = &request->requirements[i];
        struct mem_limit *limit = mem_limit_find(b, r->key, r->key_length);
        if (limit != NULL && limit->deleted)
            limit = NULL;
        limits[i] = limit;
        views[i] = (struct limit_view){.found = limit != NULL};
        if (limit == NULL)
            continue;
        views[i].decreasing = limit->status == LIMIT_DECREASING;
        views[i].capacity = limit->capacity;
        for (uint32_t j = 0; j < i; j++)
            assert(limits[j] != limit); /* keys are unique (the caller checks) */
    }
    return reserve_definitive_check(request, views, b->decrease_retry_ms, result);
}

static uint64_t budget_taken(const struct mem_period *period)
{
    return amount_add_saturating(amount_add_saturating(period->committed, period->debt),
                                 period->reserved);
}

static bool fits(struct mem_limit *limit, uint64_t amount, struct mem_period *period)
{
    if (limit->kind == LIMIT_BUDGET)
        return amount_add_saturating(budget_taken(period), amount) <= limit->capacity;
    /* reserved + used <= capacity < 2^63 and amount < 2^63: no overflow. */
    return limit->reserved + limit->used + amount <= limit->capacity;
}

/* The expiry at which the expiry-ordered holds (of one budget period, or
 * all: INT64_MIN) add up to need; bounded walks answer the latest expiry,
 * which is never too early. */
static int64_t expiry_covering(struct mem_backend *b, struct mem_limit *limit, uint64_t need,
                               int64_t period_start_ms, int64_t otherwise_ms)
{
    int64_t expires_at_ms = otherwise_ms;
    enum mem_walk_result walk = mem_hold_set_walk(&b->pool, &limit->holds, need, period_start_ms,
                                                  b->walk_scratch, &expires_at_ms);
    if (walk == MEM_WALK_BOUNDED)
        return limit->holds.expires_at_ms_max;
    return walk == MEM_WALK_FOUND ? expires_at_ms : otherwise_ms;
}

static struct denial_times denial_times(struct mem_backend *b, struct mem_limit *limit,
                                        uint64_t amount, struct mem_period *period, int64_t now_ms)
{
    struct denial_times t;
    if (limit->kind == LIMIT_ROLLING) {
        /* Exact: when enough of the expiry-ordered holds are gone. */
        assert(limit->reserved + limit->used + amount > limit->capacity); /* it did not fit */
        uint64_t need = limit->reserved + limit->used + amount - limit->capacity;
        t.fits_at_ms = expiry_covering(b, limit, need, INT64_MIN, limit->holds.expires_at_ms_max);
        t.retry_ms = t.fits_at_ms - now_ms;
        t.may_fit_at_ms = limit->reserved >= need ? now_ms : t.fits_at_ms;
    } else if (limit->kind == LIMIT_CONCURRENCY) {
        /* Holds are usually released long before they expire: poll. */
        assert(limit->reserved + amount > limit->capacity);
        uint64_t need = limit->reserved + amount - limit->capacity;
        uint32_t first = mem_hold_set_first(&b->pool, &limit->holds);
        assert(first != MEM_HOLD_NONE); /* amount <= capacity, so something is held */
        t.retry_ms = mem_hold_get(&b->pool, first)->expires_at_ms - now_ms;
        int64_t poll_ms = retry_jitter_ms(b->concurrency_poll_ms, &b->random_state);
        if (t.retry_ms > poll_ms)
            t.retry_ms = poll_ms;
        t.fits_at_ms = expiry_covering(b, limit, need, INT64_MIN, limit->holds.expires_at_ms_max);
        t.may_fit_at_ms = now_ms; /* every hold is a live reservation */
    } else {
        /* Reservations of this period expiring may make room; the next
         * period always does (amount <= capacity). */
        assert(amount_add_saturating(budget_taken(period), amount) > limit->capacity);
        uint64_t need = amount_add_saturating(budget_taken(period), amount) - limit->capacity;
        t.fits_at_ms = period->end_ms;
        if (period->reserved >= need) {
            t.fits_at_ms = expiry_covering(b, limit, need, period->start_ms, period->end_ms);
            if (t.fits_at_ms > period->end_ms)
                t.fits_at_ms = period->end_ms;
        }
        t.retry_ms = t.fits_at_ms - now_ms;
        t.may_fit_at_ms = period->reserved >= need ? now_ms : period->end_ms;
    }
    if (t.retry_ms < 1)
        t.retry_ms = 1;
    if (t.fits_at_ms <= now_ms)
        t.fits_at_ms = now_ms + 1;
    return t;
}

/* The times of a requirement denied because others wait ahead for it
 * (yield_mask) although it fits: it may fit now, once they are through. */
static struct denial_times yield_times(struct mem_backend *b, int64_t now_ms)
{
    int64_t poll_ms = retry_jitter_ms(b->concurrency_poll_ms, &b->random_state);
    return (struct denial_times){
        .retry_ms = poll_ms, .fits_at_ms = now_ms + 1, .may_fit_at_ms = now_ms};
}

/* The denial's times: the latest over the denied requirements. */
static void denial_fill(struct mem_backend *b, const struct reserve_request *request,
                        struct mem_limit **limits, struct mem_period **periods, int64_t now_ms,
                        struct reserve_result *result)
{
    result->retry_after_ms = 1;
    for (uint32_t k = 0; k < result->denied_count; k++) {
        uint32_t i = result->denied_index[k];
        uint64_t amount = request->requirements[i].amount;
        reserve_denial_add(result, fits(limits[i], amount, periods[i])
                                       ? yield_times(b, now_ms)
                                       : denial_times(b, limits[i], amount, periods[i], now_ms));
    }
    result->waitable = reserve_denial_waitable(request, result);
}

/* A capacity denial is recorded against the lease, so a retry gets it
 * again, unless the caller waits for it (result->waitable). */
static void deny(struct mem_backend *b, const struct reserve_request *request,
                 const struct mem_lease_key *key, struct mem_limit **limits,
                 struct mem_period **periods, int64_t now_ms, struct reserve_result *result)
{
    assert(result->denied_count >= 1);
    assert(result->denied_count <= request->requirement_count);
    denial_fill(b, request, limits, periods, now_ms, result);
    if (result->waitable)
        return;
    struct mem_lease *lease =
        mem_lease_alloc(b, request->requirement_count, request->lease_id_length);
    if (lease == NULL) {
        reserve_result_unavailable(result);
        return;
    }
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        lease->items[i] = (struct mem_lease_item){
            .limit = limits[i],
            .amount = request->requirements[i].amount,
            .hold_id = MEM_HOLD_NONE,
        };
    }
    lease->denied_items = 0;
    lease->caller_id = MEM_CALLER_NONE; /* a denied lease holds nothing to attribute */
    for (uint32_t k = 0; k < result->denied_count; k++)
        lease->denied_items |= UINT64_C(1) << result->denied_index[k];
    lease->state = MEM_LEASE_DENIED;
    lease->retry_after_ms = result->retry_after_ms;
    mem_lease_insert(b, lease, key, now_ms);
}

/* Everything that can fail is done before the first hold is taken: room
 * for the holds, and each budget's entry for the caller (spends[i]). */
static int prepare(struct mem_backend *b, struct mem_limit **limits, struct mem_period **periods,
                   uint32_t count, uint16_t caller_id, struct mem_caller_spend **spends)
{
    if (mem_hold_pool_ensure(&b->pool, count) != 0)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        if (mem_hold_set_ensure(&limits[i]->holds) != 0)
            return -1;
    }
    /* An entry made for a reserve that then fails holds zeros: harmless. */
    for (uint32_t i = 0; i < count; i++) {
        spends[i] = NULL;
        if (limits[i]->kind == LIMIT_BUDGET &&
            (spends[i] = mem_period_spend_add(periods[i], caller_id)) == NULL)
            return -1;
    }
    return 0;
}

static void hold_all(struct mem_backend *b, const struct reserve_request *request,
                     struct mem_limit **limits, struct mem_period **periods,
                     struct mem_caller_spend **spends, struct mem_lease *lease, int64_t now_ms)
{
    int64_t expires_at_ms = INT64_MAX;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        struct mem_limit *limit = limits[i];
        uint64_t amount = request->requirements[i].amount;
        uint32_t id = mem_hold_alloc(&b->pool);
        struct mem_hold *hold = mem_hold_get(&b->pool, id);
        hold->amount = amount;
        hold->state = MEM_HOLD_RESERVED;
        hold->caller_id = lease->caller_id;
        hold->limit = limit;
        hold->expires_at_ms = now_ms + limit->hold_duration_ms;
        assert(hold->expires_at_ms > now_ms); /* every kind holds a while */
        if (limit->kind == LIMIT_BUDGET) {
            hold->period_start_ms = periods[i]->start_ms;
            periods[i]->reserved += amount; /* fits: <= capacity */
            spends[i]->reserved += amount;  /* <= the period's reserved */
        } else {
            limit->reserved += amount;
        }
        limit->reserved_holds++;
        mem_hold_set_insert(&b->pool, &limit->holds, id);
        lease->items[i] = (struct mem_lease_item){
            .limit = limit,
            .amount = amount,
            .period_start_ms = hold->period_start_ms,
            .hold_id = id,
            .hold_generation = hold->generation,
        };
        if (hold->expires_at_ms < expires_at_ms)
            expires_at_ms = hold->expires_at_ms;
    }
    lease->state = MEM_LEASE_ACTIVE;
    lease->expires_at_ms = expires_at_ms;
    lease->denied_items = 0;
}

/* What each limit has left now that the reserve holds it. */
static void fill_states(struct mem_backend *b, const struct reserve_request *request,
                        struct mem_limit **limits, struct mem_period **periods)
{
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct mem_limit *limit = limits[i];
        struct requirement_state *state = &request->states[i];
        state->known = true;
        state->kind = limit->kind;
        state->capacity = limit->capacity;
        if (limit->kind == LIMIT_BUDGET) {
            const struct mem_period *period = periods[i];
            state->available = limit_available(LIMIT_BUDGET, limit->capacity, period->reserved,
                                               period->committed, period->debt);
            state->reset_at_unix_ms = period->end_ms;
            continue;
        }
        state->available = limit_available(limit->kind, limit->capacity, limit->reserved,
                                           limit->used, limit->debt);
        uint32_t first = mem_hold_set_first(&b->pool, &limit->holds);
        assert(first != MEM_HOLD_NONE); /* this reserve holds one */
        state->reset_at_unix_ms = mem_hold_get(&b->pool, first)->expires_at_ms;
    }
}

/* Adds the requirements others wait ahead for (yield_mask) to those that
 * did not fit, in request order. Off the common path: a plain reserve has
 * no yield_mask. */
static void yield_merge(const struct reserve_request *request, struct reserve_result *result)
{
    uint64_t denied = request->yield_mask;
    for (uint32_t k = 0; k < result->denied_count; k++)
        denied |= UINT64_C(1) << result->denied_index[k];
    result->denied_count = 0;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        if ((denied >> i & 1) != 0)
            result->denied_index[result->denied_count++] = (uint8_t)i;
    }
}

/* key: the request's lease id (mem_leases_prefetch has been called on it). */
static void reserve_one(struct mem_backend *b, const struct reserve_request *request,
                        const struct mem_lease_key *lease_key, int64_t now_ms,
                        struct reserve_result *result)
{
    uint32_t n = request->requirement_count;
    assert(n >= 1);
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    assert(lease_key->id == request->lease_id);
    reserve_result_clear(result);
    const struct mem_lease_key key = *lease_key;
    struct mem_limit *limits[REQUIREMENTS_PER_RESERVE_MAX];
    struct mem_period *periods[REQUIREMENTS_PER_RESERVE_MAX];
    /* Limits first (in cache) and their lazy expiry, so the lease's table
     * slot has time to load. */
    bool resolved = resolve(b, request, limits, result);
    for (uint32_t i = 0; resolved && i < n; i++)
        mem_limit_expire(b, limits[i], now_ms);
    struct mem_lease *lease = mem_lease_find(b, &key, now_ms);
    if (lease != NULL) {
        replay(lease, request, result); /* whatever resolve found */
        return;
    }
    if (!resolved)
        return;
    for (uint32_t i = 0; i < n; i++) {
        periods[i] =
            limits[i]->kind == LIMIT_BUDGET ? mem_limit_period_now(limits[i], now_ms) : NULL;
        if (!fits(limits[i], request->requirements[i].amount, periods[i]))
            result->denied_index[result->denied_count++] = (uint8_t)i;
    }
    if (__builtin_expect(request->yield_mask != 0, 0))
        yield_merge(request, result);
    if (result->denied_count > 0) {
        deny(b, request, &key, limits, periods, now_ms, result);
        return;
    }
    lease = mem_lease_alloc(b, n, request->lease_id_length);
    if (lease == NULL) {
        reserve_result_unavailable(result);
        return;
    }
    lease->caller_id = mem_caller_intern(&b->callers, request->caller, request->caller_length);
    struct mem_caller_spend *spends[REQUIREMENTS_PER_RESERVE_MAX];
    if (prepare(b, limits, periods, n, lease->caller_id, spends) != 0) {
        mem_lease_discard(b, lease);
        reserve_result_unavailable(result);
        return;
    }
    hold_all(b, request, limits, periods, spends, lease, now_ms);
    if (request->states != NULL)
        fill_states(b, request, limits, periods);
    assert(lease->state == MEM_LEASE_ACTIVE);
    mem_lease_insert(b, lease, &key, now_ms);
    result->allowed = true;
    result->reserved_at_unix_ms = now_ms;
    result->expires_at_unix_ms = lease->expires_at_ms;
}

/* ---- complete ------------------------------------------------------------ */

static void warn(struct complete_result *result, enum backend_warning kind,
                 const struct mem_limit *limit)
{
    (void)complete_result_warn(result, kind, limit->node.key, limit->node.key_length);
}

static struct mem_hold *live_hold(struct mem_backend *b, const struct mem_lease_item *item)
{
    struct mem_hold *hold = mem_hold_get(&b->pool, item->hold_id);
    if (hold->generation != item->hold_generation || hold->state == MEM_HOLD_FREE)
        return NULL;
    assert(hold->limit == item->limit);
    return hold;
}

static void settle_rolling(struct mem_backend *b, const struct mem_lease_item *item,
                           uint64_t actual, struct complete_result *w)
{
    struct mem_hold *hold = live_hold(b, item);
    if (hold == NULL)
        return; /* the window is over: nothing left to account */
    struct mem_limit *limit = item->limit;
    assert(hold->state == MEM_HOLD_RESERVED);
    uint64_t reserved = hold->amount;
    assert(limit->reserved >= reserved);
    limit->reserved -= reserved;
    assert(limit->reserved_holds > 0);
    limit->reserved_holds--;
    hold->state = MEM_HOLD_USED;
    if (actual <= reserved) {
        hold->amount = actual;
        limit->used += actual;
        if (actual == 0)
            mem_limit_drop_hold(b, limit, item->hold_id);
        return;
    }
    /* Overage: grow the hold (same expiry) if the difference fits. */
    uint64_t over = actual - reserved;
    if (limit->reserved + limit->used + actual <= limit->capacity) {
        hold->amount = actual;
        limit->used += actual;
        return;
    }
    limit->used += reserved;
    if (limit->state.definition.overage == OVERAGE_DEBT) {
        hold->debt = amount_add_saturating(hold->debt, over);
        limit->debt = amount_add_saturating(limit->debt, over);
        warn(w, BACKEND_WARNING_OVERAGE_DEBT, limit);
    } else {
        b->overage_denied++;
        warn(w, BACKEND_WARNING_OVERAGE_DENIED, limit);
    }
}

/* docs/semantics.md, "Budgets": the part of the actual up to the live
 * reservation had room when it was reserved, so it is always used; only the
 * excess is tested against the room left, and what does not fit is debt (the
 * overrunning lease's, not a later one's). A commit after expiry has no
 * reservation: it is tested whole. */
static void settle_budget(struct mem_backend *b, const struct mem_lease_item *item, uint64_t actual,
                          uint16_t caller_id, struct complete_result *w)
{
    struct mem_limit *limit = item->limit;
    bool after_expiry = live_hold(b, item) == NULL;
    if (!after_expiry)
        mem_limit_drop_hold(b, limit, item->hold_id);
    else
        warn(w, BACKEND_WARNING_COMMIT_AFTER_EXPIRY, limit);
    /* Charged to the period it was reserved in, even one that has ended. */
    struct mem_period *period = mem_limit_period_find(limit, item->period_start_ms);
    if (period == NULL)
        return; /* older than every kept period: nobody can see it any more */
    uint64_t covered = after_expiry ? 0 : (actual < item->amount ? actual : item->amount);
    period->committed = amount_add_saturating(period->committed, covered);
    uint64_t excess = actual - covered;
    uint64_t taken = budget_taken(period);
    uint64_t room = taken >= limit->capacity ? 0 : limit->capacity - taken;
    uint64_t fit = excess < room ? excess : room;
    period->committed += fit; /* fit <= room: within capacity */
    if (excess > fit) {
        period->debt = amount_add_saturating(period->debt, excess - fit);
        warn(w, BACKEND_WARNING_OVERAGE_DEBT, limit);
    }
    /* Made by the reserve in this period; kept as long as the period. */
    struct mem_caller_spend *spend = mem_period_spend_find(period, caller_id);
    assert(spend != NULL);
    spend->used = amount_add_saturating(spend->used, covered + fit);
    spend->debt = amount_add_saturating(spend->debt, excess - fit);
    spend->calls++;
}

static void settle(struct mem_backend *b, const struct mem_lease_item *item, uint64_t actual,
                   uint16_t caller_id, int64_t now_ms, struct complete_result *w)
{
    mem_limit_expire(b, item->limit, now_ms);
    switch (item->limit->kind) {
    case LIMIT_ROLLING:
        settle_rolling(b, item, actual, w);
        break;
    case LIMIT_CONCURRENCY:
        if (live_hold(b, item) != NULL)
            mem_limit_drop_hold(b, item->limit, item->hold_id);
        break;
    case LIMIT_BUDGET:
        settle_budget(b, item, actual, caller_id, w);
        break;
    default:
        assert(false);
    }
}

static void complete_one(struct mem_backend *b, const struct complete_request *request,
                         struct complete_result *result)
{
    complete_result_clear(result);
    assert(request->actual_count <= REQUIREMENTS_PER_RESERVE_MAX);
    int64_t now_ms = clock_now_ms(b->clock);
    struct mem_lease_key key = mem_lease_key(request->lease_id, request->lease_id_length);
    struct mem_lease *lease = mem_lease_find(b, &key, now_ms);
    if (lease == NULL || lease->state == MEM_LEASE_DENIED)
        return; /* nothing held, nothing to reconcile */
    if (lease->state == MEM_LEASE_RELEASED) {
        complete_result_fail(result, BACKEND_ALREADY_FINALIZED, 0);
        return;
    }
    int8_t actual_of[REQUIREMENTS_PER_RESERVE_MAX];
    memset(actual_of, -1, sizeof actual_of);
    for (uint32_t a = 0; a < request->actual_count; a++) {
        const struct actual *actual = &request->actuals[a];
        uint32_t j = 0;
        while (j < lease->item_count &&
               !key_is(lease->items[j].limit, actual->key, actual->key_length))
            j++;
        if (j == lease->item_count) {
            complete_result_fail(result, BACKEND_ACTUAL_KEY_NOT_IN_LEASE, a);
            return;
        }
        assert(actual->actual_amount <= AMOUNT_MAX);
        actual_of[j] = (int8_t)a;
    }
    if (lease->state == MEM_LEASE_COMPLETED) {
        result->reconciled = true; /* completing twice is a no-op */
        return;
    }
    for (uint32_t j = 0; j < lease->item_count; j++) {
        /* A key left out settles at its reserved amount (pessimistic). */
        uint64_t amount = actual_of[j] >= 0 ? request->actuals[actual_of[j]].actual_amount
                                            : lease->items[j].amount;
        settle(b, &lease->items[j], amount, lease->caller_id, now_ms, result);
    }
    lease->state = MEM_LEASE_COMPLETED;
    result->reconciled = true;
    mem_lease_notify(b, lease, now_ms);
}

/* ---- release ------------------------------------------------------------- */

static void release_one(struct mem_backend *b, const struct release_request *request,
                        struct release_result *result)
{
    result->error = BACKEND_OK;
    int64_t now_ms = clock_now_ms(b->clock);
    struct mem_lease_key key = mem_lease_key(request->lease_id, request->lease_id_length);
    struct mem_lease *lease = mem_lease_find(b, &key, now_ms);
    if (lease == NULL || lease->state != MEM_LEASE_ACTIVE) {
        if (lease != NULL && lease->state == MEM_LEASE_COMPLETED)
            result->error = BACKEND_ALREADY_FINALIZED;
        return; /* unknown, denied or released already: nothing to free */
    }
    for (uint32_t j = 0; j < lease->item_count; j++) {
        const struct mem_lease_item *item = &lease->items[j];
        mem_limit_expire(b, item->limit, now_ms);
        if (live_hold(b, item) != NULL)
            mem_limit_drop_hold(b, item->limit, item->hold_id);
    }
    lease->state = MEM_LEASE_RELEASED;
    mem_lease_notify(b, lease, now_ms);
}

/* ---- the ops ------------------------------------------------------------- */

static void mem_free(struct mem_backend *b)
{
    mem_leases_free_all(b); /* first: leases refer to limits */
    if (b->limits.entries != NULL) {
        for (uint32_t i = 0; i < b->limits.capacity; i++) {
            struct mem_limit *limit = (struct mem_limit *)b->limits.entries[i].node;
            if (limit != NULL && limit->holds.count <= 4096)
                mem_limit_check(b, limit);
        }
        mem_limits_free_all(b);
    }
    mem_hold_pool_free(&b->pool);
    mem_callers_free(&b->callers);
    free(b->walk_scratch);
    pthread_mutex_destroy(&b->mutex);
    free(b);
}

static int mem_open(const struct backend_config *config, const void *options, struct backend **out,
                    char *error, size_t error_size)
{
    (void)options; /* the memory backend has none */
    struct mem_backend *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    b->base.ops = &mem_backend_ops;
    pthread_mutex_init(&b->mutex, NULL);
    b->clock = config->clock;
    b->lease_cache_entries = config->lease_cache_entries;
    b->lease_retention_ms = config->lease_retention_ms;
    b->concurrency_poll_ms = config->concurrency_poll_ms;
    b->decrease_retry_ms = config->decrease_retry_ms;
    b->random_state = retry_jitter_seed();
    b->limits_version = 1; /* memo entries start at 0: none is good */
    b->pool.free_head = MEM_HOLD_NONE;
    b->walk_scratch = malloc((MEM_RETRY_WALK_HOLDS_MAX + 1) * sizeof *b->walk_scratch);
    if (b->walk_scratch == NULL ||
        mem_table_init(&b->limits, 64, MEM_LIMITS_TABLE_CAPACITY_MAX) != 0 ||
        mem_leases_init(b, config->lease_cache_entries) != 0 ||
        mem_callers_init(&b->callers) != 0) {
        mem_free(b);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    *out = &b->base;
    return 0;
}

static void mem_close(struct backend *base)
{
    mem_free(mem_backend_of(base));
}

#define LOCKED(b, expression)                                                                      \
    do {                                                                                           \
        pthread_mutex_lock(&(b)->mutex);                                                           \
        expression;                                                                                \
        pthread_mutex_unlock(&(b)->mutex);                                                         \
    } while (0)

static enum backend_admin_result mem_op_put_limit(struct backend *base,
                                                  const struct limit_definition *definition,
                                                  struct limit_state *state_out)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_put_limit(b, definition, state_out));
    return rc;
}

static enum backend_admin_result mem_op_restore_limit(struct backend *base,
                                                      const struct limit_state *state)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_restore_limit(b, state));
    return rc;
}

static enum backend_admin_result mem_op_delete_limit(struct backend *base, const char *key)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_delete_limit(b, key));
    return rc;
}

static enum backend_admin_result mem_op_get_limit(struct backend *base, const char *key,
                                                  struct limit_state *out)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_get_limit(b, key, out));
    return rc;
}

static enum backend_admin_result mem_op_list_limits(struct backend *base, struct limit_state **out,
                                                    size_t *count)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_list_limits(b, out, count));
    return rc;
}

static enum backend_admin_result mem_op_list_names(struct backend *base, struct limit_name **out,
                                                   size_t *count)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_list_names(b, out, count));
    return rc;
}

static enum backend_admin_result mem_op_usage(struct backend *base, const char *key,
                                              int64_t at_unix_ms, struct limit_usage *out)
{
    struct mem_backend *b = mem_backend_of(base);
    enum backend_admin_result rc;
    LOCKED(b, rc = mem_usage(b, key, at_unix_ms, out));
    return rc;
}

static int mem_op_tick(struct backend *base, bool *limits_changed)
{
    struct mem_backend *b = mem_backend_of(base);
    bool changed = false;
    pthread_mutex_lock(&b->mutex);
    int64_t now_ms = clock_now_ms(b->clock);
    mem_limits_tick(b, now_ms, &changed);
    mem_leases_expire(b, now_ms);
    pthread_mutex_unlock(&b->mutex);
    if (limits_changed != NULL)
        *limits_changed = changed;
    return 0;
}

/* A batch is reserved in runs of this many per critical section: one lock
 * and one clock read per run, while another thread waits at most a run. */
#define RESERVES_PER_LOCK 16

static void mem_op_reserve(struct backend *base, const struct reserve_request *requests,
                           struct reserve_result *results, uint32_t count, backend_done_fn done,
                           void *context)
{
    struct mem_backend *b = mem_backend_of(base);
    struct mem_lease_key next = {0};
    if (count > 0)
        next = mem_lease_key(requests[0].lease_id, requests[0].lease_id_length);
    for (uint32_t i = 0; i < count;) {
        uint32_t end = count - i > RESERVES_PER_LOCK ? i + RESERVES_PER_LOCK : count;
        pthread_mutex_lock(&b->mutex);
        mem_leases_prefetch(b, next.hash);
        int64_t now_ms = clock_now_ms(b->clock);
        for (; i < end; i++) {
            /* The next lease's table slot loads while this one is reserved. */
            struct mem_lease_key key = next;
            if (i + 1 < count) {
                next = mem_lease_key(requests[i + 1].lease_id, requests[i + 1].lease_id_length);
                if (i + 1 < end)
                    mem_leases_prefetch(b, next.hash);
            }
            reserve_one(b, &requests[i], &key, now_ms, &results[i]);
        }
        pthread_mutex_unlock(&b->mutex);
    }
    if (done != NULL)
        done(context);
}

/* The reserve of a waiter the watch claimed while a complete or release
 * freed its room (lock held): the room goes to it in the same critical
 * section. Returns its cookie for claimed_done, or NULL. */
static void *claim_reserve(struct mem_backend *b)
{
    void *cookie = b->claim_cookie;
    if (cookie == NULL)
        return NULL;
    const struct reserve_request *request = b->claim_request;
    struct mem_lease_key key = mem_lease_key(request->lease_id, request->lease_id_length);
    mem_leases_prefetch(b, key.hash);
    reserve_one(b, request, &key, clock_now_ms(b->clock), b->claim_result);
    b->claim_cookie = NULL;
    return cookie;
}

/* complete and release walk their batch the same way: one request at a time, each
 * under the lock so a long batch never holds it for the whole walk. */
#define MEM_OP_EACH(name, one, kind)                                                               \
    static void name(struct backend *base, const struct kind##_request *requests,                  \
                     struct kind##_result *results, uint32_t count, backend_done_fn done,          \
                     void *context)                                                                \
    {                                                                                              \
        struct mem_backend *b = mem_backend_of(base);                                              \
        for (uint32_t i = 0; i < count; i++) {                                                     \
            pthread_mutex_lock(&b->mutex);                                                         \
            b->claim_open = true;                                                                  \
            one(b, &requests[i], &results[i]);                                                     \
            b->claim_open = false;                                                                 \
            void (*claimed_done)(void *) = b->watch.claimed_done;                                  \
            void *claimed = claim_reserve(b);                                                      \
            pthread_mutex_unlock(&b->mutex);                                                       \
            if (claimed != NULL)                                                                   \
                claimed_done(claimed);                                                             \
        }                                                                                          \
        if (done != NULL)                                                                          \
            done(context);                                                                         \
    }

MEM_OP_EACH(mem_op_complete, complete_one, complete)
MEM_OP_EACH(mem_op_release, release_one, release)

static enum backend_admin_result mem_op_usage_by_caller(struct backend *base, const char *key,
                                                        int64_t at_unix_ms,
                                                        struct caller_usage **out, size_t *count)
{
    return mem_usage_by_caller(mem_backend_of(base), key, at_unix_ms, out, count);
}

static enum backend_admin_result mem_op_limits_report(struct backend *base,
                                                      const struct limits_query *query,
                                                      struct limit_report **out, size_t *count,
                                                      bool *more)
{
    return mem_limits_report(mem_backend_of(base), query, out, count, more);
}

static enum backend_admin_result mem_op_holds_scan(struct backend *base, const char *key,
                                                   uint64_t max_holds, hold_visit_fn visit,
                                                   void *context, bool *complete)
{
    return mem_holds_scan(mem_backend_of(base), key, max_holds, visit, context, complete);
}

static bool mem_op_ready(struct backend *base)
{
    (void)mem_backend_of(base);
    return true;
}

static void mem_op_stats(struct backend *base, struct backend_stats *out)
{
    struct mem_backend *b = mem_backend_of(base);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->mutex);
    out->lease_cache_entries = b->lease_count;
    out->overage_denied = b->overage_denied;
    out->expired_holds = b->expired_holds;
    pthread_mutex_unlock(&b->mutex);
}

static void mem_op_watch(struct backend *base, const struct backend_watch *watch)
{
    struct mem_backend *b = mem_backend_of(base);
    /* Told under the mutex: once this returns, no call of the old one runs. */
    pthread_mutex_lock(&b->mutex);
    b->watch = *watch;
    pthread_mutex_unlock(&b->mutex);
}

const struct backend_ops mem_backend_ops = {
    .name = "memory",
    .open = mem_open,
    .close = mem_close,
    .put_limit = mem_op_put_limit,
    .restore_limit = mem_op_restore_limit,
    .delete_limit = mem_op_delete_limit,
    .get_limit = mem_op_get_limit,
    .list_limits = mem_op_list_limits,
    .list_names = mem_op_list_names,
    .usage = mem_op_usage,
    .tick = mem_op_tick,
    .reserve = mem_op_reserve,
    .complete = mem_op_complete,
    .release = mem_op_release,
    .ready = mem_op_ready,
    .stats = mem_op_stats,
    .events = NULL,
    .usage_by_caller = mem_op_usage_by_caller,
    .limits_report = mem_op_limits_report,
    .holds_scan = mem_op_holds_scan,
    .holds_seen_here_only = false,
    .watch = mem_op_watch,
};
