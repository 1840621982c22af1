/* The limit registry of the tigerbeetle backend: the live limit states
 * (definition, status) by key, each limit's account ids, the admin ops of
 * backend.h, usage read from the cluster's balances, and the per-limit
 * notes of recent holds that retry_after is computed from. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbclient/tbc_ids.h"
#include "tb_backend.h"

#include "core/hash.h"
#include "core/retry.h"
#include "tb_provision.h"

static uint64_t key_hash(const char *key, uint32_t length)
{
    return hash_fnv1a(key, length);
}

struct tb_limit *tb_registry_find(struct tb_backend *b, const char *key, uint32_t key_length)
{
    assert(key_length >= 1);
    assert(key_length <= LIMIT_KEY_LENGTH_MAX);
    uint64_t hash = key_hash(key, key_length);
    struct tb_limit *limit = b->limit_buckets[hash % TB_LIMIT_BUCKETS];
    for (; limit != NULL; limit = limit->next_in_bucket) {
        if (limit->hash == hash && limit->key_length == key_length &&
            memcmp(limit->key, key, key_length) == 0)
            return limit;
    }
    return NULL;
}

/* Under the write lock. NULL when out of memory; the caller checked the
 * bound of entries, deleted ones included. */
static struct tb_limit *limit_create(struct tb_backend *b,
                                     const struct limit_definition *definition)
{
    assert(b->limit_count < 2 * LIMITS_COUNT_MAX);
    struct tb_limit *limit = calloc(1, sizeof *limit);
    if (limit == NULL)
        return NULL;
    limit->key_length = (uint32_t)strlen(definition->key);
    assert(limit->key_length >= 1); /* a validated definition */
    assert(limit->key_length <= LIMIT_KEY_LENGTH_MAX);
    memcpy(limit->key, definition->key, limit->key_length);
    limit->hash = key_hash(limit->key, limit->key_length);
    limit->state.definition = *definition;
    limit->budget_periods[0] = limit->budget_periods[1] = INT64_MIN;
    limit->budget_owes_ms = INT64_MIN;
    limit->rolling_gate_id = tbc_id1("acct:limit:", limit->key, limit->key_length);
    limit->slots_gate_id = tbc_id1("acct:limit-concurrency:", limit->key, limit->key_length);
    limit->used_id = tbc_id1("acct:used:", limit->key, limit->key_length);
    limit->debt_id = tbc_id1("acct:debt:", limit->key, limit->key_length);
    pthread_mutex_init(&limit->notes_lock, NULL);
    uint32_t bucket = (uint32_t)(limit->hash % TB_LIMIT_BUCKETS);
    limit->next_in_bucket = b->limit_buckets[bucket];
    b->limit_buckets[bucket] = limit;
    b->limit_count++;
    b->live_limit_count++;
    assert(b->live_limit_count <= b->limit_count);
    return limit;
}

/* Finds or creates the entry a put or restore applies to (write lock
 * held): a live one of the same kind and period, a deleted one (back with
 * its accounts), or a new one. BACKEND_ADMIN_OK with *out set, or why not
 * (a live entry of another shape is *out too). */
static enum backend_admin_result
entry_for_put(struct tb_backend *b, const struct limit_definition *d, struct tb_limit **out)
{
    uint32_t length = (uint32_t)strlen(d->key);
    struct tb_limit *limit = tb_registry_find(b, d->key, length);
    *out = limit;
    if (limit != NULL && !limit->deleted)
        return limit_reshape_check(&limit->state.definition, d);
    if (b->live_limit_count >= LIMITS_COUNT_MAX ||
        (limit == NULL && b->limit_count >= 2 * LIMITS_COUNT_MAX))
        return BACKEND_ADMIN_TOO_MANY_LIMITS;
    if (limit != NULL) {
        /* A deleted limit comes back; its accounts are the same ones. */
        limit->deleted = false;
        limit->state.definition = *d;
        limit->state.status = LIMIT_ACTIVE;
        limit->state.pending_decrease_to = 0;
        limit->provisioned = false;
        limit->budget_periods[0] = limit->budget_periods[1] = INT64_MIN;
        period_memo_reset(&limit->period_memo);
        b->live_limit_count++;
        assert(b->live_limit_count <= LIMITS_COUNT_MAX);
        return BACKEND_ADMIN_OK;
    }
    *out = limit_create(b, d);
    return *out != NULL ? BACKEND_ADMIN_OK : BACKEND_ADMIN_UNAVAILABLE;
}

enum backend_admin_result tb_registry_put(struct backend *base, const struct limit_definition *d,
                                          struct limit_state *state_out)
{
    struct tb_backend *b = tb_backend_of(base);
    pthread_mutex_lock(&b->admin_lock);
    pthread_rwlock_wrlock(&b->registry_lock);
    struct tb_limit *limit = NULL;
    enum backend_admin_result result = entry_for_put(b, d, &limit);
    if (result == BACKEND_ADMIN_KIND_CHANGED || result == BACKEND_ADMIN_PERIOD_CHANGED)
        *state_out = limit->state;
    struct limit_state before = limit != NULL ? limit->state : (struct limit_state){0};
    bool fresh = limit != NULL && !limit->provisioned;
    pthread_rwlock_unlock(&b->registry_lock);
    if (result != BACKEND_ADMIN_OK) {
        pthread_mutex_unlock(&b->admin_lock);
        return result;
    }
    /* The conversation with the cluster runs without the registry lock,
     * so reserves keep flowing. */
    struct limit_state after;
    tb_provision_apply(b, limit, fresh ? NULL : &before, d, clock_now_ms(b->clock), &after);
    /* The definition put is the one in force (a decrease may still wait). */
    assert(after.definition.kind == d->kind);
    assert(after.status == LIMIT_ACTIVE || after.pending_decrease_to < after.definition.capacity);
    pthread_rwlock_wrlock(&b->registry_lock);
    limit->state = after;
    pthread_rwlock_unlock(&b->registry_lock);
    pthread_mutex_unlock(&b->admin_lock);
    *state_out = after;
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result tb_registry_restore(struct backend *base, const struct limit_state *state)
{
    struct tb_backend *b = tb_backend_of(base);
    const struct limit_definition *d = &state->definition;
    pthread_rwlock_wrlock(&b->registry_lock);
    struct tb_limit *limit = tb_registry_find(b, d->key, (uint32_t)strlen(d->key));
    enum backend_admin_result result = BACKEND_ADMIN_ALREADY_LOADED;
    if (limit == NULL || limit->deleted)
        result = entry_for_put(b, d, &limit);
    if (result == BACKEND_ADMIN_OK) {
        /* As it was; the maintenance thread makes the cluster agree. */
        limit->state = *state;
        limit->provisioned = false;
        __atomic_store_n(&b->provision_wanted, true, __ATOMIC_RELEASE);
    }
    pthread_rwlock_unlock(&b->registry_lock);
    if (result == BACKEND_ADMIN_OK) {
        pthread_mutex_lock(&b->maintenance_lock);
        pthread_cond_signal(&b->maintenance_wake);
        pthread_mutex_unlock(&b->maintenance_lock);
    }
    return result;
}

enum backend_admin_result tb_registry_delete(struct backend *base, const char *key)
{
    struct tb_backend *b = tb_backend_of(base);
    pthread_rwlock_wrlock(&b->registry_lock);
    struct tb_limit *limit = tb_registry_find(b, key, (uint32_t)strlen(key));
    enum backend_admin_result rc = BACKEND_ADMIN_UNKNOWN_KEY;
    if (limit != NULL && !limit->deleted) {
        /* Kept (with its accounts) so existing leases still complete. */
        limit->deleted = true;
        assert(b->live_limit_count > 0);
        b->live_limit_count--;
        rc = BACKEND_ADMIN_OK;
    }
    pthread_rwlock_unlock(&b->registry_lock);
    return rc;
}

enum backend_admin_result tb_registry_get(struct backend *base, const char *key,
                                          struct limit_state *out)
{
    struct tb_backend *b = tb_backend_of(base);
    pthread_rwlock_rdlock(&b->registry_lock);
    struct tb_limit *limit = tb_registry_find(b, key, (uint32_t)strlen(key));
    enum backend_admin_result rc = BACKEND_ADMIN_UNKNOWN_KEY;
    if (limit != NULL && !limit->deleted) {
        *out = limit->state;
        rc = BACKEND_ADMIN_OK;
    }
    pthread_rwlock_unlock(&b->registry_lock);
    return rc;
}

static int compare_states(const void *a, const void *b)
{
    const struct limit_state *x = a, *y = b;
    return strcmp(x->definition.key, y->definition.key);
}

enum backend_admin_result tb_registry_list(struct backend *base, struct limit_state **out,
                                           size_t *count)
{
    struct tb_backend *b = tb_backend_of(base);
    pthread_rwlock_rdlock(&b->registry_lock);
    struct limit_state *states = malloc((b->live_limit_count + 1) * sizeof *states);
    size_t n = 0;
    for (uint32_t i = 0; states != NULL && i < TB_LIMIT_BUCKETS; i++) {
        for (struct tb_limit *limit = b->limit_buckets[i]; limit != NULL;
             limit = limit->next_in_bucket) {
            if (!limit->deleted)
                states[n++] = limit->state;
        }
    }
    assert(states == NULL || n == b->live_limit_count);
    pthread_rwlock_unlock(&b->registry_lock);
    if (states == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    qsort(states, n, sizeof *states, compare_states);
    *out = states;
    *count = n;
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result tb_registry_usage(struct backend *base, const char *key,
                                            int64_t at_unix_ms, struct limit_usage *out)
{
    struct tb_backend *b = tb_backend_of(base);
    pthread_rwlock_rdlock(&b->registry_lock);
    struct tb_limit *limit = tb_registry_find(b, key, (uint32_t)strlen(key));
    struct limit_state state = limit != NULL ? limit->state : (struct limit_state){0};
    bool live = limit != NULL && !limit->deleted;
    pthread_rwlock_unlock(&b->registry_lock);
    if (!live)
        return BACKEND_ADMIN_UNKNOWN_KEY;
    memset(out, 0, sizeof *out);
    out->state = state;
    struct tb_balances balances;
    int64_t period_ms = INT64_MIN;
    if (state.definition.kind == LIMIT_BUDGET) {
        struct period_span span = period_span_at(&state.definition, at_unix_ms);
        period_ms = span.start_ms;
        out->period_start_unix_ms = span.start_ms;
        out->period_end_unix_ms = span.end_ms;
    }
    if (tb_provision_balances(b, limit, state.definition.kind, period_ms, &balances) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    out->reserved = balances.reserved;
    out->used = balances.used;
    out->debt = balances.debt;
    out->available = limit_available(state.definition.kind, state.definition.capacity,
                                     out->reserved, out->used, out->debt);
    return BACKEND_ADMIN_OK;
}

void tb_registry_free(struct tb_backend *b)
{
    for (uint32_t i = 0; i < TB_LIMIT_BUCKETS; i++) {
        struct tb_limit *limit = b->limit_buckets[i];
        while (limit != NULL) {
            struct tb_limit *next = limit->next_in_bucket;
            pthread_mutex_destroy(&limit->notes_lock);
            free(limit->notes.notes);
            free(limit);
            limit = next;
        }
        b->limit_buckets[i] = NULL;
    }
}

/* ---- retry_after (docs/semantics.md) from the holds made here ----------- */

/* Drops the oldest note (notes lock held). */
static void ring_drop_head(struct tb_hold_ring *ring)
{
    assert(ring->count > 0);
    ring->head = (ring->head + 1) % TB_HOLD_TRACK_MAX;
    ring->count--;
    ring->head_sequence++;
}

uint64_t tb_registry_note_hold(struct tb_backend *b, struct tb_limit *limit, int64_t expires_at_ms,
                               int64_t period_start_ms, uint64_t amount)
{
    (void)b;
    assert(amount >= 1);
    uint64_t sequence = 0;
    pthread_mutex_lock(&limit->notes_lock);
    struct tb_hold_ring *ring = &limit->notes;
    assert(ring->count <= TB_HOLD_TRACK_MAX);
    if (ring->notes == NULL) {
        ring->notes = malloc(TB_HOLD_TRACK_MAX * sizeof *ring->notes);
        ring->head_sequence = 1;
    }
    if (ring->notes != NULL) {
        if (ring->count == TB_HOLD_TRACK_MAX) /* forget the oldest */
            ring_drop_head(ring);
        uint32_t slot = (ring->head + ring->count) % TB_HOLD_TRACK_MAX;
        ring->notes[slot] = (struct tb_hold_note){expires_at_ms, period_start_ms, amount};
        sequence = ring->head_sequence + ring->count;
        ring->count++;
        assert(ring->count <= TB_HOLD_TRACK_MAX);
    }
    pthread_mutex_unlock(&limit->notes_lock);
    return sequence;
}

void tb_registry_renote_hold(struct tb_limit *limit, uint64_t sequence, uint64_t amount)
{
    if (sequence == 0)
        return;
    pthread_mutex_lock(&limit->notes_lock);
    struct tb_hold_ring *ring = &limit->notes;
    if (ring->notes != NULL && sequence >= ring->head_sequence &&
        sequence - ring->head_sequence < ring->count) {
        uint32_t offset = (uint32_t)(sequence - ring->head_sequence);
        ring->notes[(ring->head + offset) % TB_HOLD_TRACK_MAX].amount = amount;
    }
    pthread_mutex_unlock(&limit->notes_lock);
}

/* Callers hold the registry lock shared, so the state is read and written
 * atomically: two callers may draw the same jitter, never a torn state. */
static int64_t jittered_poll_ms(struct tb_backend *b)
{
    uint64_t state = __atomic_load_n(&b->random_state, __ATOMIC_RELAXED);
    int64_t poll_ms = retry_jitter_ms(b->concurrency_poll_ms, &state);
    __atomic_store_n(&b->random_state, state, __ATOMIC_RELAXED);
    return poll_ms;
}

/* When the noted holds expiring (oldest first) add up to `need`; INT64_MAX
 * if they never do. Notes of other periods count only when period_ms is
 * INT64_MIN. Expired notes are dropped on the way. */
static int64_t notes_cover(struct tb_hold_ring *ring, uint64_t need, int64_t period_ms,
                           int64_t now_ms, int64_t *earliest_ms)
{
    assert(need >= 1);
    assert(ring->count <= TB_HOLD_TRACK_MAX);
    assert(ring->head < TB_HOLD_TRACK_MAX);
    while (ring->count > 0 && ring->notes[ring->head].expires_at_ms <= now_ms)
        ring_drop_head(ring);
    *earliest_ms = ring->count > 0 ? ring->notes[ring->head].expires_at_ms : INT64_MAX;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < ring->count; i++) {
        const struct tb_hold_note *note = &ring->notes[(ring->head + i) % TB_HOLD_TRACK_MAX];
        if (period_ms != INT64_MIN && note->period_start_ms != period_ms)
            continue;
        sum = amount_add_saturating(sum, note->amount);
        if (sum >= need)
            return note->expires_at_ms;
    }
    return INT64_MAX;
}

int64_t tb_registry_retry_after(struct tb_backend *b, struct tb_limit *limit, uint64_t shortfall,
                                int64_t period_start_ms, int64_t now_ms, int64_t *fits_at_ms)
{
    pthread_rwlock_rdlock(&b->registry_lock);
    struct limit_definition d = limit->state.definition;
    /* The end of the hold's period: nearly always that of now (memoised). */
    int64_t end_ms = 0;
    if (d.kind == LIMIT_BUDGET) {
        struct period_span now_span = tb_limit_period_now(limit, now_ms);
        end_ms = now_span.start_ms == period_start_ms ? now_span.end_ms
                                                      : period_span_at(&d, period_start_ms).end_ms;
    }
    pthread_rwlock_unlock(&b->registry_lock);
    int64_t earliest_ms = INT64_MAX, covered_ms = INT64_MAX;
    pthread_mutex_lock(&limit->notes_lock);
    if (limit->notes.notes != NULL)
        covered_ms =
            notes_cover(&limit->notes, shortfall,
                        d.kind == LIMIT_BUDGET ? period_start_ms : INT64_MIN, now_ms, &earliest_ms);
    pthread_mutex_unlock(&limit->notes_lock);
    int64_t retry_ms;
    if (d.kind == LIMIT_ROLLING) {
        /* Holds made elsewhere are not noted here: at worst, the window. */
        retry_ms = covered_ms != INT64_MAX ? covered_ms - now_ms : (int64_t)d.window_seconds * 1000;
        *fits_at_ms = now_ms + retry_ms;
    } else if (d.kind == LIMIT_CONCURRENCY) {
        retry_ms = jittered_poll_ms(b);
        if (earliest_ms != INT64_MAX && earliest_ms - now_ms < retry_ms)
            retry_ms = earliest_ms - now_ms;
        /* Uncapped, for the wait layer: at worst, a whole timeout. */
        *fits_at_ms =
            covered_ms != INT64_MAX ? covered_ms : now_ms + (int64_t)d.timeout_seconds * 1000;
    } else {
        retry_ms = (covered_ms < end_ms ? covered_ms : end_ms) - now_ms;
        *fits_at_ms = now_ms + retry_ms;
    }
    if (*fits_at_ms <= now_ms)
        *fits_at_ms = now_ms + 1;
    return retry_ms < 1 ? 1 : retry_ms;
}
