/* Limits of the memory backend: creation and capacity changes (with the
 * decreasing state), deletion, usage, budget periods, hold expiry and the
 * periodic tick. Callers hold the backend mutex. */
#include "mem_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cheap spread of a key over the memo: its length and its first and
 * last (up to) 8 bytes. Keys that share them only share a slot. */
uint32_t mem_limit_memo_slot(const char *key, uint32_t key_length)
{
    _Static_assert(MEM_LIMIT_MEMO_SLOTS == 64, "the slot is the top 6 bits");
    uint64_t first = 0, last = 0;
    if (key_length >= 8) {
        memcpy(&first, key, 8);
        memcpy(&last, key + key_length - 8, 8);
    } else {
        memcpy(&first, key, key_length);
    }
    uint64_t x =
        (first ^ (last * UINT64_C(0x9e3779b97f4a7c15)) ^ key_length) * UINT64_C(0xff51afd7ed558ccd);
    return (uint32_t)(x >> 58);
}

struct mem_limit *mem_limit_find_slow(struct mem_backend *b, const char *key, uint32_t key_length,
                                      struct mem_limit_memo *memo)
{
    struct mem_node *node = mem_table_find(&b->limits, mem_hash(key, key_length), key, key_length);
    struct mem_limit *limit = (struct mem_limit *)node;
    if (limit != NULL)
        *memo = (struct mem_limit_memo){limit, b->limits_version};
    return limit;
}

/* Every change of the limits table goes through these two (memo validity). */
static int limits_insert(struct mem_backend *b, struct mem_limit *limit)
{
    b->limits_version++;
    return mem_table_insert(&b->limits, &limit->node);
}

static void limits_remove(struct mem_backend *b, struct mem_limit *limit)
{
    b->limits_version++;
    mem_table_remove(&b->limits, &limit->node);
}

static struct mem_limit *find_live(struct mem_backend *b, const char *key)
{
    struct mem_limit *limit =
        mem_limit_find(b, key, (uint32_t)strnlen(key, LIMIT_KEY_LENGTH_MAX + 1));
    return limit == NULL || limit->deleted ? NULL : limit;
}

/* ---- budget periods ------------------------------------------------------ */

static struct mem_period *period_at_age(struct mem_limit *limit, uint32_t age)
{
    assert(age < limit->period_count);
    return &limit->periods[(limit->period_newest + MEM_BUDGET_PERIODS_KEPT - age) %
                           MEM_BUDGET_PERIODS_KEPT];
}

static struct mem_period *period_containing(struct mem_limit *limit, int64_t unix_ms)
{
    for (uint32_t age = 0; age < limit->period_count; age++) {
        struct mem_period *period = period_at_age(limit, age);
        if (unix_ms >= period->start_ms && unix_ms < period->end_ms)
            return period;
    }
    return NULL;
}

struct mem_period *mem_limit_period_find(struct mem_limit *limit, int64_t start_ms)
{
    for (uint32_t age = 0; age < limit->period_count; age++) {
        struct mem_period *period = period_at_age(limit, age);
        if (period->start_ms == start_ms)
            return period;
    }
    return NULL;
}

struct mem_period *mem_limit_period_now(struct mem_limit *limit, int64_t now_ms)
{
    assert(limit->kind == LIMIT_BUDGET);
    if (limit->period_count > 0) {
        struct mem_period *newest = &limit->periods[limit->period_newest];
        if (now_ms >= newest->start_ms && now_ms < newest->end_ms)
            return newest;
        if (now_ms < newest->start_ms) {
            /* The clock stepped back: charge the period it points at if we
             * still keep it, else the newest one (never a fresh, empty one). */
            struct mem_period *older = period_containing(limit, now_ms);
            return older != NULL ? older : newest;
        }
    }
    /* Computed once per period: every other call found it above. */
    struct period_span span = period_span_at(&limit->state.definition, now_ms);
    if (limit->period_count > 0 && limit->periods[limit->period_newest].start_ms == span.start_ms)
        return &limit->periods[limit->period_newest]; /* prepaid, on a clock past its end */
    /* A new period starts from zero; the oldest kept one is dropped. */
    uint32_t slot =
        limit->period_count == 0 ? 0 : (limit->period_newest + 1) % MEM_BUDGET_PERIODS_KEPT;
    if (limit->period_count < MEM_BUDGET_PERIODS_KEPT)
        limit->period_count++;
    mem_period_spend_free(&limit->periods[slot]); /* the oldest kept one, or an unused slot */
    limit->periods[slot] = (struct mem_period){.start_ms = span.start_ms, .end_ms = span.end_ms};
    limit->period_newest = slot;
    return &limit->periods[slot];
}

/* ---- holds of a limit ---------------------------------------------------- */

/* Inlined into the expiry loop, where most holds end. */
static inline __attribute__((always_inline)) void
drop_hold(struct mem_backend *b, struct mem_limit *limit, uint32_t id, struct mem_hold *hold)
{
    assert(hold->limit == limit);
    mem_hold_set_remove(&b->pool, &limit->holds, id);
    if (hold->state == MEM_HOLD_RESERVED) {
        assert(limit->reserved_holds > 0);
        limit->reserved_holds--;
    }
    if (hold->state == MEM_HOLD_RESERVED && limit->kind == LIMIT_BUDGET) {
        struct mem_period *period = mem_limit_period_find(limit, hold->period_start_ms);
        if (period != NULL) {
            assert(period->reserved >= hold->amount);
            period->reserved -= hold->amount;
            struct mem_caller_spend *spend = mem_period_spend_find(period, hold->caller_id);
            assert(spend != NULL);
            assert(spend->reserved >= hold->amount);
            spend->reserved -= hold->amount;
        }
    } else if (hold->state == MEM_HOLD_RESERVED) {
        assert(limit->reserved >= hold->amount);
        limit->reserved -= hold->amount;
    } else {
        assert(hold->state == MEM_HOLD_USED);
        assert(limit->used >= hold->amount);
        limit->used -= hold->amount;
    }
    /* A saturated debt sum stays saturated until the last hold is gone. */
    if (limit->debt != UINT64_MAX) {
        assert(limit->debt >= hold->debt);
        limit->debt -= hold->debt;
    }
    mem_hold_release(&b->pool, id);
    if (limit->holds.count == 0)
        limit->debt = 0;
}

void mem_limit_drop_hold(struct mem_backend *b, struct mem_limit *limit, uint32_t id)
{
    drop_hold(b, limit, id, mem_hold_get(&b->pool, id));
}

void mem_limit_expire(struct mem_backend *b, struct mem_limit *limit, int64_t now_ms)
{
    /* Bounded by the holds of this limit (at most MEM_HOLDS_MAX). */
    for (;;) {
        uint32_t id = mem_hold_set_first(&b->pool, &limit->holds);
        if (id == MEM_HOLD_NONE)
            break;
        struct mem_hold *hold = mem_hold_get(&b->pool, id);
        if (hold->expires_at_ms > now_ms)
            break;
        if (hold->state == MEM_HOLD_RESERVED)
            b->expired_holds++;
        drop_hold(b, limit, id, hold);
    }
    /* Under a steady load the next calls expire the head and its successor:
     * start loading them. The head was loaded this way by the call before,
     * so reading its link rarely waits. */
    if (limit->holds.head != MEM_HOLD_NONE) {
        const struct mem_hold *head = mem_hold_get(&b->pool, limit->holds.head);
        __builtin_prefetch(head);
        if (head->next != MEM_HOLD_NONE)
            __builtin_prefetch(mem_hold_get(&b->pool, head->next));
    }
    if (limit->kind == LIMIT_BUDGET)
        (void)mem_limit_period_now(limit, now_ms);
}

/* ---- capacity changes ---------------------------------------------------- */

static bool decrease_fits(const struct mem_limit *limit, uint64_t capacity)
{
    /* free >= current - new  <=>  reserved + used <= new */
    return limit->kind == LIMIT_BUDGET || limit->reserved + limit->used <= capacity;
}

bool mem_limit_try_decrease(struct mem_limit *limit)
{
    if (limit->status != LIMIT_DECREASING)
        return false;
    if (!decrease_fits(limit, limit->state.pending_decrease_to))
        return false;
    limit->capacity = limit->state.pending_decrease_to;
    limit->state.definition.capacity = limit->capacity;
    limit->status = LIMIT_ACTIVE;
    limit->state.status = LIMIT_ACTIVE;
    limit->state.pending_decrease_to = 0;
    return true;
}

/* Takes a new definition of the same kind and period: every field at once,
 * but a capacity decrease that does not fit yet waits in the decreasing
 * state, keeping the capacity in force. */
static void apply_definition(struct mem_limit *limit, const struct limit_definition *definition)
{
    uint64_t in_force = limit->capacity;
    limit->state.definition = *definition;
    limit->hold_duration_ms = limit_hold_duration_ms(definition);
    limit->state.status = LIMIT_ACTIVE;
    limit->state.pending_decrease_to = 0;
    if (definition->capacity < in_force && !decrease_fits(limit, definition->capacity)) {
        limit->state.definition.capacity = in_force;
        limit->state.status = LIMIT_DECREASING;
        limit->state.pending_decrease_to = definition->capacity;
    }
    limit->capacity = limit->state.definition.capacity;
    limit->status = limit->state.status;
}

/* A new live limit; NULL when out of memory (the caller checked the bound
 * of live limits). */
static struct mem_limit *limit_create(struct mem_backend *b,
                                      const struct limit_definition *definition)
{
    assert(b->live_limit_count < LIMITS_COUNT_MAX);
    struct mem_limit *limit = calloc(1, sizeof *limit);
    if (limit == NULL)
        return NULL;
    mem_hold_set_init(&limit->holds);
    limit->kind = definition->kind;
    limit->capacity = definition->capacity;
    limit->state.definition = *definition;
    limit->hold_duration_ms = limit_hold_duration_ms(definition);
    limit->node.key = limit->state.definition.key;
    limit->node.key_length = (uint32_t)strlen(definition->key);
    limit->node.hash = mem_hash(limit->node.key, limit->node.key_length);
    if (limits_insert(b, limit) != 0) {
        free(limit);
        return NULL;
    }
    b->live_limit_count++;
    return limit;
}

bool mem_limit_unused(const struct mem_backend *b, const struct mem_limit *limit)
{
    return limit->deleted && limit->holds.count == 0 &&
           b->ring_head >= limit->deleted_at_ring_position;
}

/* Frees a limit's own blocks and the limit. */
static void limit_free(struct mem_limit *limit)
{
    for (uint32_t i = 0; i < MEM_BUDGET_PERIODS_KEPT; i++)
        mem_period_spend_free(&limit->periods[i]);
    mem_hold_set_free(&limit->holds);
    free(limit);
}

void mem_limit_destroy(struct mem_backend *b, struct mem_limit *limit)
{
    assert(mem_limit_unused(b, limit));
    limit_free(limit);
}

/* A deleted limit makes way for a new one of another kind or period; leases
 * and holds that point at it keep it alive on the retired list. */
static void retire(struct mem_backend *b, struct mem_limit *limit)
{
    assert(limit->deleted);
    limits_remove(b, limit);
    if (mem_limit_unused(b, limit)) {
        mem_limit_destroy(b, limit);
        return;
    }
    limit->next_retired = b->retired;
    b->retired = limit;
}

/* A deleted limit of the same kind and periods comes back with its holds
 * and periods (pessimistic); of another, a fresh limit replaces it. The
 * limit the put applies to (NULL: create one). */
static struct mem_limit *revive(struct mem_backend *b, struct mem_limit *limit,
                                const struct limit_definition *d)
{
    assert(limit->deleted);
    if (limit->kind != d->kind || !limit_period_same(&limit->state.definition, d)) {
        retire(b, limit);
        return NULL;
    }
    limit->deleted = false;
    b->live_limit_count++;
    return limit;
}

enum backend_admin_result mem_put_limit(struct mem_backend *b, const struct limit_definition *d,
                                        struct limit_state *state_out)
{
    int64_t now_ms = clock_now_ms(b->clock);
    struct mem_limit *limit = mem_limit_find(b, d->key, (uint32_t)strlen(d->key));
    if (limit != NULL && !limit->deleted) {
        enum backend_admin_result shape = limit_reshape_check(&limit->state.definition, d);
        if (shape != BACKEND_ADMIN_OK) {
            *state_out = limit->state;
            return shape;
        }
    } else if (b->live_limit_count >= LIMITS_COUNT_MAX) {
        return BACKEND_ADMIN_TOO_MANY_LIMITS;
    } else if (limit != NULL) {
        limit = revive(b, limit, d);
    }
    if (limit == NULL) {
        limit = limit_create(b, d);
        if (limit == NULL)
            return BACKEND_ADMIN_UNAVAILABLE; /* out of memory: nothing changed */
    } else {
        mem_limit_expire(b, limit, now_ms);
        apply_definition(limit, d);
    }
    mem_limit_notify(b, limit, now_ms); /* an increase frees capacity */
    *state_out = limit->state;
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result mem_restore_limit(struct mem_backend *b, const struct limit_state *state)
{
    const struct limit_definition *d = &state->definition;
    struct mem_limit *limit = mem_limit_find(b, d->key, (uint32_t)strlen(d->key));
    if (limit != NULL && !limit->deleted)
        return BACKEND_ADMIN_ALREADY_LOADED;
    if (b->live_limit_count >= LIMITS_COUNT_MAX)
        return BACKEND_ADMIN_TOO_MANY_LIMITS;
    if (limit != NULL)
        retire(b, limit);
    limit = limit_create(b, d);
    if (limit == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    if (state->status == LIMIT_DECREASING) {
        assert(state->pending_decrease_to < d->capacity);
        limit->status = LIMIT_DECREASING;
        limit->state.status = LIMIT_DECREASING;
        limit->state.pending_decrease_to = state->pending_decrease_to;
    }
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result mem_delete_limit(struct mem_backend *b, const char *key)
{
    struct mem_limit *limit = find_live(b, key);
    if (limit == NULL)
        return BACKEND_ADMIN_UNKNOWN_KEY;
    limit->deleted = true;
    limit->deleted_at_ring_position = b->ring_tail;
    assert(b->live_limit_count > 0);
    b->live_limit_count--;
    if (backend_watch_wanted(&b->watch)) { /* its waiters learn it is gone by asking */
        struct backend_freed freed = {.key = limit->node.key, .key_length = limit->node.key_length};
        b->watch.freed(b->watch.context, &freed);
    }
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result mem_get_limit(struct mem_backend *b, const char *key,
                                        struct limit_state *out)
{
    struct mem_limit *limit = find_live(b, key);
    if (limit == NULL)
        return BACKEND_ADMIN_UNKNOWN_KEY;
    *out = limit->state;
    return BACKEND_ADMIN_OK;
}

static int compare_states(const void *a, const void *b)
{
    const struct limit_state *x = a, *y = b;
    return strcmp(x->definition.key, y->definition.key);
}

enum backend_admin_result mem_list_limits(struct mem_backend *b, struct limit_state **out,
                                          size_t *count)
{
    struct limit_state *states = malloc((b->live_limit_count + 1) * sizeof *states);
    if (states == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    size_t n = 0;
    for (uint32_t i = 0; i < b->limits.capacity; i++) {
        struct mem_limit *limit = (struct mem_limit *)b->limits.entries[i].node;
        if (limit != NULL && !limit->deleted)
            states[n++] = limit->state;
    }
    assert(n == b->live_limit_count);
    qsort(states, n, sizeof *states, compare_states);
    *out = states;
    *count = n;
    return BACKEND_ADMIN_OK;
}

static int compare_names(const void *a, const void *b)
{
    const struct limit_name *x = a, *y = b;
    return strcmp(x->key, y->key);
}

enum backend_admin_result mem_list_names(struct mem_backend *b, struct limit_name **out,
                                         size_t *count)
{
    struct limit_name *names = malloc((b->live_limit_count + 1) * sizeof *names);
    if (names == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    size_t n = 0;
    for (uint32_t i = 0; i < b->limits.capacity; i++) {
        struct mem_limit *limit = (struct mem_limit *)b->limits.entries[i].node;
        if (limit == NULL || limit->deleted)
            continue;
        names[n].key = malloc(limit->node.key_length + 1);
        if (names[n].key == NULL) {
            limit_names_free(names, n);
            return BACKEND_ADMIN_UNAVAILABLE;
        }
        memcpy(names[n].key, limit->node.key, limit->node.key_length + 1);
        names[n++].kind = limit->state.definition.kind;
    }
    assert(n == b->live_limit_count);
    qsort(names, n, sizeof *names, compare_names);
    *out = names;
    *count = n;
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result mem_usage(struct mem_backend *b, const char *key, int64_t at_unix_ms,
                                    struct limit_usage *out)
{
    struct mem_limit *limit = find_live(b, key);
    if (limit == NULL)
        return BACKEND_ADMIN_UNKNOWN_KEY;
    mem_limit_expire(b, limit, clock_now_ms(b->clock));
    memset(out, 0, sizeof *out);
    out->state = limit->state;
    if (limit->kind != LIMIT_BUDGET) {
        out->reserved = limit->reserved;
        out->used = limit->used;
        out->debt = limit->debt;
        out->available = limit_available(limit->kind, limit->capacity, limit->reserved, limit->used,
                                         limit->debt);
        return BACKEND_ADMIN_OK;
    }
    struct period_span span = period_span_at(&limit->state.definition, at_unix_ms);
    out->period_start_unix_ms = span.start_ms;
    out->period_end_unix_ms = span.end_ms;
    const struct mem_period *period = mem_limit_period_find(limit, out->period_start_unix_ms);
    if (period != NULL) {
        out->reserved = period->reserved;
        out->used = period->committed;
        out->debt = period->debt;
    }
    out->available =
        limit_available(LIMIT_BUDGET, limit->capacity, out->reserved, out->used, out->debt);
    return BACKEND_ADMIN_OK;
}

void mem_limit_notify(struct mem_backend *b, struct mem_limit *limit, int64_t now_ms)
{
    if (limit->deleted || !backend_watch_wanted(&b->watch))
        return;
    struct backend_freed freed = {
        .key = limit->node.key,
        .key_length = limit->node.key_length,
        .available_known = true,
    };
    if (limit->kind == LIMIT_BUDGET) {
        const struct mem_period *period = mem_limit_period_now(limit, now_ms);
        freed.available = limit_available(LIMIT_BUDGET, limit->capacity, period->reserved,
                                          period->committed, period->debt);
    } else {
        freed.available = limit_available(limit->kind, limit->capacity, limit->reserved,
                                          limit->used, limit->debt);
    }
    if (b->claim_open && b->watch.claim != NULL &&
        b->watch.claim(b->watch.context, &freed, &b->claim_request, &b->claim_result,
                       &b->claim_cookie)) {
        /* One claim per complete or release; its reserve is made before
         * the lock is let go (claim_cookie set until then). */
        b->claim_open = false;
        freed.available -= (int64_t)b->claim_request->requirements[0].amount;
        if (freed.available <= 0)
            return; /* all it freed is handed over */
    }
    b->watch.freed(b->watch.context, &freed);
}

/* ---- tick and invariants ------------------------------------------------- */

/* Each period's split by caller adds up to the period's own counters. */
static void check_period_spend(const struct mem_period *period)
{
    uint64_t reserved = 0, used = 0, debt = 0;
    uint32_t entries = 0;
    for (uint32_t i = 0; i < period->caller_capacity; i++) {
        const struct mem_caller_spend *spend = &period->callers[i];
        if (spend->key == 0)
            continue;
        entries++;
        reserved += spend->reserved; /* each <= capacity < 2^63, fewer than 2^17 entries */
        used += spend->used;
        debt = amount_add_saturating(debt, spend->debt);
    }
    assert(entries == period->caller_count);
    assert(reserved == period->reserved);
    assert(used == period->committed);
    assert(period->debt == UINT64_MAX || debt == period->debt);
}

void mem_limit_check(struct mem_backend *b, struct mem_limit *limit)
{
    uint64_t reserved, used, debt, reserved_count;
    mem_hold_set_check(&b->pool, &limit->holds, limit, &reserved, &used, &debt, &reserved_count);
    assert(reserved_count == limit->reserved_holds);
    assert(used == limit->used);
    assert(limit->debt == UINT64_MAX || debt == limit->debt);
    assert(limit->capacity == limit->state.definition.capacity);
    assert(limit->status == limit->state.status);
    if (limit->kind == LIMIT_BUDGET) {
        uint64_t period_reserved = 0;
        for (uint32_t age = 0; age < limit->period_count; age++) {
            period_reserved += period_at_age(limit, age)->reserved;
            check_period_spend(period_at_age(limit, age));
        }
        assert(period_reserved == reserved);
        assert(limit->reserved == 0);
        assert(limit->used == 0);
    } else {
        assert(reserved == limit->reserved);
        /* Reserves and overage only grow holds that fit, and a decrease
         * only applies once it fits. */
        assert(limit->reserved + limit->used <= limit->capacity);
    }
    if (limit->kind == LIMIT_CONCURRENCY)
        assert(limit->used == 0);
    if (limit->kind != LIMIT_ROLLING)
        assert(limit->debt == 0);
}

/* Full checks cost O(holds); the tick runs them on small limits only. */
#define TICK_CHECK_HOLDS_MAX 1024

static void tick_one(struct mem_backend *b, struct mem_limit *limit, int64_t now_ms, bool *changed)
{
    mem_limit_expire(b, limit, now_ms);
    if (mem_limit_try_decrease(limit) && !limit->deleted) {
        *changed = true;
        mem_limit_notify(b, limit, now_ms); /* reserves may wait no more for it */
    }
    if (limit->holds.count <= TICK_CHECK_HOLDS_MAX)
        mem_limit_check(b, limit);
}

void mem_limits_tick(struct mem_backend *b, int64_t now_ms, bool *limits_changed)
{
    /* A removal shifts a later entry into slot i, so i is looked at again;
     * entries never move past i, so none is skipped. */
    for (uint32_t i = 0; i < b->limits.capacity;) {
        struct mem_limit *limit = (struct mem_limit *)b->limits.entries[i].node;
        if (limit == NULL) {
            i++;
            continue;
        }
        tick_one(b, limit, now_ms, limits_changed);
        if (mem_limit_unused(b, limit)) {
            limits_remove(b, limit);
            mem_limit_destroy(b, limit);
            continue;
        }
        i++;
    }
    struct mem_limit **link = &b->retired;
    while (*link != NULL) {
        struct mem_limit *limit = *link;
        tick_one(b, limit, now_ms, limits_changed);
        if (mem_limit_unused(b, limit)) {
            *link = limit->next_retired;
            mem_limit_destroy(b, limit);
        } else {
            link = &limit->next_retired;
        }
    }
}

void mem_limits_free_all(struct mem_backend *b)
{
    for (uint32_t i = 0; i < b->limits.capacity; i++) {
        struct mem_limit *limit = (struct mem_limit *)b->limits.entries[i].node;
        if (limit != NULL)
            limit_free(limit);
    }
    while (b->retired != NULL) {
        struct mem_limit *limit = b->retired;
        b->retired = limit->next_retired;
        limit_free(limit);
    }
    b->limits_version++;
    mem_table_free(&b->limits);
}
