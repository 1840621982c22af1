/* The memory backend (SPEC section 8): limits, holds and leases live in this
 * process under one mutex, one critical section per reserve/complete/release.
 * Usage state is lost on restart; the server keeps the registry. */
#include "memory_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIMITS_TABLE_CAPACITY_MAX (UINT32_C(1) << 20) /* live limits and deleted ones */

static void set_error(char *error, size_t size, const char *prefix, const char *key,
                      uint32_t key_length)
{
    snprintf(error, size, "%s%.*s", prefix, (int)key_length, key);
}

static uint64_t add_saturating(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- reserve ------------------------------------------------------------- */

static void reserve_unavailable(struct reserve_result *result)
{
    reserve_result_clear(result);
    result->status = RESULT_UNAVAILABLE;
    snprintf(result->error, sizeof result->error, "backend_error");
}

static bool key_is(const struct mem_limit *limit, const char *key, uint32_t key_length)
{
    return limit->node.key_length == key_length && memcmp(limit->node.key, key, key_length) == 0;
}

/* Same set of (key, amount) in any order; item_of maps request index to
 * lease item. Keys are unique on both sides, so this is a bijection. */
static bool same_requirements(const struct mem_lease *lease, const struct reserve_request *request,
                              uint8_t *item_of)
{
    if (lease->item_count != request->requirement_count)
        return false;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[i];
        uint32_t j = 0;
        while (j < lease->item_count && !key_is(lease->items[j].limit, r->key, r->key_length))
            j++;
        if (j == lease->item_count || lease->items[j].amount != r->amount)
            return false;
        item_of[i] = (uint8_t)j;
    }
    return true;
}

static void replay(const struct mem_lease *lease, const uint8_t *item_of, uint32_t count,
                   struct reserve_result *result)
{
    if (lease->state == LEASE_DENIED) {
        result->retry_after_ms = lease->retry_after_ms;
        for (uint32_t i = 0; i < count; i++) {
            if (lease->denied_items & (UINT64_C(1) << item_of[i]))
                result->denied_index[result->denied_count++] = (uint8_t)i;
        }
        return;
    }
    result->allowed = true;
    result->reserved_at_unix_ms = lease->reserved_at_ms;
    result->expires_at_unix_ms = lease->expires_at_ms;
}

/* Definitive errors, found before any capacity is looked at; not recorded
 * against the lease. Unknown keys first, then decreasing limits, then
 * amounts that can never fit. */
static bool resolve(struct backend *b, const struct reserve_request *request,
                    struct mem_limit **limits, struct reserve_result *result)
{
    uint32_t n = request->requirement_count;
    for (uint32_t i = 0; i < n; i++) {
        const struct requirement *r = &request->requirements[i];
        limits[i] = mem_limit_find(b, r->key, r->key_length);
        if (limits[i] == NULL || limits[i]->deleted) {
            set_error(result->error, sizeof result->error, "unknown_limit_key: ", r->key,
                      r->key_length);
            return false;
        }
        for (uint32_t j = 0; j < i; j++)
            assert(limits[j] != limits[i]); /* keys are unique (the caller checks) */
    }
    for (uint32_t i = 0; i < n; i++) {
        if (limits[i]->status == LIMIT_DECREASING) {
            const struct requirement *r = &request->requirements[i];
            set_error(result->error, sizeof result->error, "limit_decreasing:", r->key,
                      r->key_length);
            result->retry_after_ms = b->decrease_retry_ms;
            return false;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct requirement *r = &request->requirements[i];
        assert(r->amount >= 1);
        assert(r->amount <= AMOUNT_MAX);
        if (r->amount > limits[i]->capacity) {
            set_error(result->error, sizeof result->error, "exceeds_capacity:", r->key,
                      r->key_length);
            return false;
        }
    }
    return true;
}

static uint64_t budget_taken(const struct mem_period *period)
{
    return add_saturating(add_saturating(period->committed, period->debt), period->reserved);
}

static bool fits(struct mem_limit *limit, uint64_t amount, struct mem_period *period)
{
    if (limit->kind == LIMIT_BUDGET)
        return add_saturating(budget_taken(period), amount) <= limit->capacity;
    /* reserved + used <= capacity < 2^63 and amount < 2^63: no overflow. */
    return limit->reserved + limit->used + amount <= limit->capacity;
}

static int64_t jittered_poll_ms(struct backend *b)
{
    uint64_t x = b->random_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b->random_state = x;
    int64_t percent = 80 + (int64_t)(x % 41); /* +-20% */
    int64_t poll_ms = b->concurrency_poll_ms * percent / 100;
    return poll_ms < 1 ? 1 : poll_ms;
}

/* SPEC section 5, for one requirement that did not fit. */
static int64_t retry_after_ms(struct backend *b, struct mem_limit *limit, uint64_t amount,
                              struct mem_period *period, int64_t now_ms)
{
    int64_t retry_ms = 1;
    int64_t expires_at_ms;
    if (limit->kind == LIMIT_ROLLING) {
        /* Exact: when enough of the expiry-ordered holds are gone. */
        uint64_t need = limit->reserved + limit->used + amount - limit->capacity;
        if (mem_hold_set_walk(&b->pool, &limit->holds, need, INT64_MIN, b->walk_scratch,
                              &expires_at_ms) != WALK_FOUND)
            expires_at_ms = limit->holds.expires_at_ms_max;
        retry_ms = expires_at_ms - now_ms;
    } else if (limit->kind == LIMIT_CONCURRENCY) {
        /* Holds are usually released long before they expire: poll. */
        uint32_t first = mem_hold_set_first(&b->pool, &limit->holds);
        assert(first != HOLD_NONE); /* amount <= capacity, so something is held */
        retry_ms = mem_hold_get(&b->pool, first)->expires_at_ms - now_ms;
        int64_t poll_ms = jittered_poll_ms(b);
        if (retry_ms > poll_ms)
            retry_ms = poll_ms;
    } else {
        /* Reservations of this period expiring may make room; the next
         * period always does (amount <= capacity). */
        uint64_t need = add_saturating(budget_taken(period), amount) - limit->capacity;
        int64_t period_end_ms = period->end_ms;
        expires_at_ms = period_end_ms;
        if (period->reserved >= need) {
            enum walk_result walk = mem_hold_set_walk(
                &b->pool, &limit->holds, need, period->start_ms, b->walk_scratch, &expires_at_ms);
            if (walk == WALK_BOUNDED)
                expires_at_ms = limit->holds.expires_at_ms_max;
            else if (walk == WALK_EXHAUSTED)
                expires_at_ms = period_end_ms;
            if (expires_at_ms > period_end_ms)
                expires_at_ms = period_end_ms;
        }
        retry_ms = expires_at_ms - now_ms;
    }
    return retry_ms < 1 ? 1 : retry_ms;
}

/* Records a capacity denial against the lease, so a retry gets it again. */
static void deny(struct backend *b, const struct reserve_request *request,
                 const struct mem_lease_key *key, struct mem_limit **limits,
                 struct mem_period **periods, int64_t now_ms, struct reserve_result *result)
{
    int64_t retry_ms = 1;
    for (uint32_t k = 0; k < result->denied_count; k++) {
        uint32_t i = result->denied_index[k];
        int64_t r =
            retry_after_ms(b, limits[i], request->requirements[i].amount, periods[i], now_ms);
        if (r > retry_ms)
            retry_ms = r;
    }
    struct mem_lease *lease =
        mem_lease_alloc(b, request->requirement_count, request->lease_id_length);
    if (lease == NULL) {
        reserve_unavailable(result);
        return;
    }
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        lease->items[i] = (struct mem_lease_item){
            .limit = limits[i],
            .amount = request->requirements[i].amount,
            .hold_id = HOLD_NONE,
        };
    }
    lease->denied_items = 0;
    for (uint32_t k = 0; k < result->denied_count; k++)
        lease->denied_items |= UINT64_C(1) << result->denied_index[k];
    lease->state = LEASE_DENIED;
    lease->retry_after_ms = retry_ms;
    mem_lease_insert(b, lease, key, now_ms);
    result->retry_after_ms = retry_ms;
}

/* Everything that can fail is done before the first hold is taken. */
static int prepare(struct backend *b, struct mem_limit **limits, uint32_t count)
{
    if (mem_hold_pool_ensure(&b->pool, count) != 0)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        if (mem_hold_set_ensure(&limits[i]->holds) != 0)
            return -1;
    }
    return 0;
}

static void hold_all(struct backend *b, const struct reserve_request *request,
                     struct mem_limit **limits, struct mem_period **periods,
                     struct mem_lease *lease, int64_t now_ms)
{
    int64_t expires_at_ms = INT64_MAX;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        struct mem_limit *limit = limits[i];
        uint64_t amount = request->requirements[i].amount;
        uint32_t id = mem_hold_alloc(&b->pool);
        struct mem_hold *hold = mem_hold_get(&b->pool, id);
        hold->amount = amount;
        hold->state = HOLD_RESERVED;
        hold->limit = limit;
        hold->expires_at_ms = now_ms + limit->hold_duration_ms;
        if (limit->kind == LIMIT_BUDGET) {
            hold->period_start_ms = periods[i]->start_ms;
            periods[i]->reserved += amount; /* fits: <= capacity */
        } else {
            limit->reserved += amount;
        }
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
    lease->state = LEASE_ACTIVE;
    lease->expires_at_ms = expires_at_ms;
    lease->denied_items = 0;
}

/* key: the request's lease id (mem_leases_prefetch has been called on it). */
static void reserve_one(struct backend *b, const struct reserve_request *request,
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
        reserve_result_clear(result); /* a known lease answers as before */
        uint8_t item_of[REQUIREMENTS_PER_RESERVE_MAX];
        if (same_requirements(lease, request, item_of)) {
            replay(lease, item_of, n, result);
        } else {
            result->status = RESULT_CONFLICT;
            snprintf(result->error, sizeof result->error, "lease_conflict");
        }
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
    if (result->denied_count > 0) {
        deny(b, request, &key, limits, periods, now_ms, result);
        return;
    }
    lease = mem_lease_alloc(b, n, request->lease_id_length);
    if (lease == NULL) {
        reserve_unavailable(result);
        return;
    }
    if (prepare(b, limits, n) != 0) {
        mem_lease_discard(b, lease);
        reserve_unavailable(result);
        return;
    }
    hold_all(b, request, limits, periods, lease, now_ms);
    mem_lease_insert(b, lease, &key, now_ms);
    result->allowed = true;
    result->reserved_at_unix_ms = now_ms;
    result->expires_at_unix_ms = lease->expires_at_ms;
}

/* ---- complete ------------------------------------------------------------ */

static void warn(struct mem_warnings *w, const char *prefix, const struct mem_limit *limit)
{
    int n = snprintf(w->bytes + w->length, sizeof w->bytes - w->length, "%s%s", prefix,
                     limit->node.key);
    assert(n > 0);
    assert((size_t)n < sizeof w->bytes - w->length);
    w->length += (size_t)n + 1; /* keep the NUL */
    w->count++;
}

static struct mem_hold *live_hold(struct backend *b, const struct mem_lease_item *item)
{
    struct mem_hold *hold = mem_hold_get(&b->pool, item->hold_id);
    if (hold->generation != item->hold_generation || hold->state == HOLD_FREE)
        return NULL;
    assert(hold->limit == item->limit);
    return hold;
}

static void settle_rolling(struct backend *b, const struct mem_lease_item *item, uint64_t actual,
                           struct mem_warnings *w)
{
    struct mem_hold *hold = live_hold(b, item);
    if (hold == NULL)
        return; /* the window is over: nothing left to account */
    struct mem_limit *limit = item->limit;
    assert(hold->state == HOLD_RESERVED);
    uint64_t reserved = hold->amount;
    assert(limit->reserved >= reserved);
    limit->reserved -= reserved;
    hold->state = HOLD_USED;
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
        hold->debt = add_saturating(hold->debt, over);
        limit->debt = add_saturating(limit->debt, over);
        warn(w, "overage_debt:", limit);
    } else {
        b->overage_denied++;
        warn(w, "overage_denied:", limit);
    }
}

static void settle_budget(struct backend *b, const struct mem_lease_item *item, uint64_t actual,
                          struct mem_warnings *w)
{
    struct mem_limit *limit = item->limit;
    bool after_expiry = live_hold(b, item) == NULL;
    if (!after_expiry)
        mem_limit_drop_hold(b, limit, item->hold_id);
    else
        warn(w, "commit_after_expiry:", limit);
    /* Charged to the period it was reserved in, even one that has ended. */
    struct mem_period *period = mem_limit_period_find(limit, item->period_start_ms);
    if (period == NULL)
        return; /* older than every kept period: nobody can see it any more */
    uint64_t taken = budget_taken(period);
    uint64_t room = taken >= limit->capacity ? 0 : limit->capacity - taken;
    uint64_t fit = actual < room ? actual : room;
    period->committed += fit; /* <= capacity */
    if (actual > fit) {
        period->debt = add_saturating(period->debt, actual - fit);
        warn(w, "overage_debt:", limit);
    }
}

static void settle(struct backend *b, const struct mem_lease_item *item, uint64_t actual,
                   int64_t now_ms, struct mem_warnings *w)
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
        settle_budget(b, item, actual, w);
        break;
    default:
        assert(false);
    }
}

static void complete_finish(struct complete_result *result, const struct mem_warnings *w)
{
    result->reconciled = true;
    if (w->count == 0)
        return;
    result->warnings = malloc(w->length);
    if (result->warnings == NULL)
        return; /* the accounting is done; only the warnings are lost */
    memcpy(result->warnings, w->bytes, w->length);
    result->warning_count = w->count;
}

static void complete_one(struct backend *b, const struct complete_request *request,
                         struct complete_result *result, struct mem_warnings *w)
{
    result->status = RESULT_OK;
    result->reconciled = false;
    result->error[0] = '\0';
    result->warning_count = 0;
    result->warnings = NULL;
    assert(request->actual_count <= REQUIREMENTS_PER_RESERVE_MAX);
    int64_t now_ms = clock_now_ms(b->clock);
    struct mem_lease_key key = mem_lease_key(request->lease_id, request->lease_id_length);
    struct mem_lease *lease = mem_lease_find(b, &key, now_ms);
    if (lease == NULL || lease->state == LEASE_DENIED)
        return; /* nothing held, nothing to reconcile */
    if (lease->state == LEASE_RELEASED) {
        result->status = RESULT_CONFLICT;
        snprintf(result->error, sizeof result->error, "already_finalized");
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
            result->status = RESULT_INVALID;
            set_error(result->error, sizeof result->error, "actual_key_not_in_lease:", actual->key,
                      actual->key_length);
            return;
        }
        assert(actual->actual_amount <= AMOUNT_MAX);
        actual_of[j] = (int8_t)a;
    }
    if (lease->state == LEASE_COMPLETED) {
        result->reconciled = true; /* completing twice is a no-op */
        return;
    }
    w->length = 0;
    w->count = 0;
    for (uint32_t j = 0; j < lease->item_count; j++) {
        /* A key left out settles at its reserved amount (pessimistic). */
        uint64_t amount = actual_of[j] >= 0 ? request->actuals[actual_of[j]].actual_amount
                                            : lease->items[j].amount;
        settle(b, &lease->items[j], amount, now_ms, w);
    }
    lease->state = LEASE_COMPLETED;
    complete_finish(result, w);
}

/* ---- release ------------------------------------------------------------- */

static void release_one(struct backend *b, const struct release_request *request,
                        struct release_result *result)
{
    result->status = RESULT_OK;
    result->error[0] = '\0';
    int64_t now_ms = clock_now_ms(b->clock);
    struct mem_lease_key key = mem_lease_key(request->lease_id, request->lease_id_length);
    struct mem_lease *lease = mem_lease_find(b, &key, now_ms);
    if (lease == NULL || lease->state != LEASE_ACTIVE) {
        if (lease != NULL && lease->state == LEASE_COMPLETED) {
            result->status = RESULT_CONFLICT;
            snprintf(result->error, sizeof result->error, "already_finalized");
        }
        return; /* unknown, denied or released already: nothing to free */
    }
    for (uint32_t j = 0; j < lease->item_count; j++) {
        const struct mem_lease_item *item = &lease->items[j];
        mem_limit_expire(b, item->limit, now_ms);
        if (live_hold(b, item) != NULL)
            mem_limit_drop_hold(b, item->limit, item->hold_id);
    }
    lease->state = LEASE_RELEASED;
}

/* ---- the ops ------------------------------------------------------------- */

static void memory_close(struct backend *b);

static int memory_open(const struct backend_config *config, struct backend **out, char *error,
                       size_t error_size)
{
    if (backend_config_check(config, error, error_size) != 0)
        return -1;
    struct backend *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&b->mutex, NULL);
    b->clock = config->clock;
    b->lease_cache_entries = config->lease_cache_entries;
    b->lease_retention_ms = config->lease_retention_ms;
    b->concurrency_poll_ms = config->concurrency_poll_ms;
    b->decrease_retry_ms = config->decrease_retry_ms;
    b->random_state = (uint64_t)clock_monotonic_ns() | 1;
    b->limits_version = 1; /* memo entries start at 0: none is good */
    b->pool.free_head = HOLD_NONE;
    b->walk_scratch = malloc((RETRY_WALK_HOLDS_MAX + 1) * sizeof *b->walk_scratch);
    if (b->walk_scratch == NULL || mem_table_init(&b->limits, 64, LIMITS_TABLE_CAPACITY_MAX) != 0 ||
        mem_leases_init(b, config->lease_cache_entries) != 0) {
        memory_close(b);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    *out = b;
    return 0;
}

static void memory_close(struct backend *b)
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
    free(b->walk_scratch);
    pthread_mutex_destroy(&b->mutex);
    free(b);
}

#define LOCKED(b, expression)                                                                      \
    do {                                                                                           \
        pthread_mutex_lock(&(b)->mutex);                                                           \
        expression;                                                                                \
        pthread_mutex_unlock(&(b)->mutex);                                                         \
    } while (0)

static int memory_put_limit(struct backend *b, const struct limit_definition *definition,
                            struct limit_state *state_out, char *error, size_t error_size)
{
    int rc;
    LOCKED(b, rc = mem_put_limit(b, definition, state_out, error, error_size));
    return rc;
}

static int memory_restore_limit(struct backend *b, const struct limit_state *state, char *error,
                                size_t error_size)
{
    int rc;
    LOCKED(b, rc = mem_restore_limit(b, state, error, error_size));
    return rc;
}

static int memory_delete_limit(struct backend *b, const char *key)
{
    int rc;
    LOCKED(b, rc = mem_delete_limit(b, key));
    return rc;
}

static int memory_get_limit(struct backend *b, const char *key, struct limit_state *out)
{
    int rc;
    LOCKED(b, rc = mem_get_limit(b, key, out));
    return rc;
}

static int memory_list_limits(struct backend *b, struct limit_state **out, size_t *count)
{
    int rc;
    LOCKED(b, rc = mem_list_limits(b, out, count));
    return rc;
}

static int memory_usage(struct backend *b, const char *key, int64_t at_unix_ms,
                        struct limit_usage *out)
{
    int rc;
    LOCKED(b, rc = mem_usage(b, key, at_unix_ms, out));
    return rc;
}

static int memory_tick(struct backend *b, bool *limits_changed)
{
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

static void memory_reserve(struct backend *b, const struct reserve_request *requests,
                           struct reserve_result *results, uint32_t count, backend_done_fn done,
                           void *context)
{
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

static void memory_complete(struct backend *b, const struct complete_request *requests,
                            struct complete_result *results, uint32_t count, backend_done_fn done,
                            void *context)
{
    for (uint32_t i = 0; i < count; i++)
        LOCKED(b, complete_one(b, &requests[i], &results[i], &b->warnings));
    if (done != NULL)
        done(context);
}

static void memory_release(struct backend *b, const struct release_request *requests,
                           struct release_result *results, uint32_t count, backend_done_fn done,
                           void *context)
{
    for (uint32_t i = 0; i < count; i++)
        LOCKED(b, release_one(b, &requests[i], &results[i]));
    if (done != NULL)
        done(context);
}

static bool memory_ready(struct backend *b)
{
    (void)b;
    return true;
}

static void memory_stats(struct backend *b, struct backend_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->mutex);
    out->lease_cache_entries = b->lease_count;
    out->overage_denied = b->overage_denied;
    out->expired_holds = b->expired_holds;
    pthread_mutex_unlock(&b->mutex);
}

const struct backend_ops memory_backend_ops = {
    .name = "memory",
    .open = memory_open,
    .close = memory_close,
    .put_limit = memory_put_limit,
    .restore_limit = memory_restore_limit,
    .delete_limit = memory_delete_limit,
    .get_limit = memory_get_limit,
    .list_limits = memory_list_limits,
    .usage = memory_usage,
    .tick = memory_tick,
    .reserve = memory_reserve,
    .complete = memory_complete,
    .release = memory_release,
    .ready = memory_ready,
    .stats = memory_stats,
    .events = NULL,
    .usage_by_caller = NULL,
};
