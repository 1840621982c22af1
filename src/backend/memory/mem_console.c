/* What the console reads from the memory backend (docs/console.md): a page
 * of limits with their usage and live holds, the live holds of one limit,
 * and usage by caller. A page is chosen under one lock and each limit is
 * then read under its own, so the data path never waits for a whole page. */
#include "mem_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a page of limits ---------------------------------------------------- */

static bool matches(const struct mem_limit *limit, const struct limits_query *query,
                    size_t prefix_length)
{
    const char *key = limit->state.definition.key;
    return !limit->deleted && (query->kind == LIMIT_KIND_NONE || limit->kind == query->kind) &&
           strncmp(key, query->prefix, prefix_length) == 0 && strcmp(key, query->after) > 0;
}

static int compare_limit_keys(const void *a, const void *b)
{
    const struct mem_limit *x = *(const struct mem_limit *const *)a;
    const struct mem_limit *y = *(const struct mem_limit *const *)b;
    return strcmp(x->state.definition.key, y->state.definition.key);
}

/* Under the lock: the keys of the page, in order, into reports[i]'s
 * usage.state (the rest is filled per limit). OK or UNAVAILABLE. */
static enum backend_admin_result choose_page(struct mem_backend *b,
                                             const struct limits_query *query,
                                             struct limit_report *reports, size_t *count,
                                             bool *more)
{
    struct mem_limit **chosen = malloc((b->live_limit_count + 1) * sizeof *chosen);
    if (chosen == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    size_t n = 0, prefix_length = strlen(query->prefix);
    for (uint32_t i = 0; i < b->limits.capacity; i++) {
        struct mem_limit *limit = (struct mem_limit *)b->limits.entries[i].node;
        if (limit != NULL && matches(limit, query, prefix_length))
            chosen[n++] = limit;
    }
    assert(n <= b->live_limit_count);
    qsort(chosen, n, sizeof *chosen, compare_limit_keys);
    *more = n > query->limit;
    *count = *more ? query->limit : n;
    for (size_t i = 0; i < *count; i++)
        reports[i].usage.state = chosen[i]->state;
    free(chosen);
    return BACKEND_ADMIN_OK;
}

struct summary_walk {
    int64_t soon_until_ms;
    struct holds_summary *summary;
    bool oldest_found;
};

static bool summary_visit(void *context, const struct mem_hold *hold)
{
    struct summary_walk *w = context;
    if (w->oldest_found && hold->expires_at_ms > w->soon_until_ms)
        return false; /* expiry order: nothing later is soon */
    if (hold->state != MEM_HOLD_RESERVED)
        return true;
    if (!w->oldest_found) {
        w->oldest_found = true;
        w->summary->oldest_expires_at_unix_ms = hold->expires_at_ms;
    }
    if (hold->expires_at_ms <= w->soon_until_ms)
        w->summary->expiring_soon++;
    return true;
}

/* Under the lock, after the limit's due holds expired. */
static void summarize(struct mem_backend *b, const struct mem_limit *limit, int64_t now_ms,
                      int64_t soon_ms, struct limit_report *report)
{
    struct holds_summary *summary = &report->holds;
    memset(summary, 0, sizeof *summary);
    summary->count = limit->reserved_holds;
    summary->exact = true;
    if (limit->kind == LIMIT_BUDGET) {
        report->reset_at_unix_ms = report->usage.period_end_unix_ms;
    } else {
        uint32_t first = mem_hold_set_first(&b->pool, &limit->holds);
        report->reset_at_unix_ms =
            first == MEM_HOLD_NONE ? 0 : mem_hold_get(&b->pool, first)->expires_at_ms;
    }
    if (summary->count == 0)
        return;
    struct summary_walk w = {.soon_until_ms = now_ms + soon_ms, .summary = summary};
    summary->exact = mem_hold_set_each(&b->pool, &limit->holds, MEM_CONSOLE_HOLDS_WALK_MAX,
                                       b->walk_scratch, summary_visit, &w);
    if (w.oldest_found)
        summary->oldest_at_unix_ms = summary->oldest_expires_at_unix_ms - limit->hold_duration_ms;
}

/* One limit of the page under its own lock; false when it is gone. */
static bool report_one(struct mem_backend *b, int64_t soon_ms, struct limit_report *report)
{
    const char *key = report->usage.state.definition.key;
    pthread_mutex_lock(&b->mutex);
    int64_t now_ms = clock_now_ms(b->clock);
    /* expires due holds */
    bool live = mem_usage(b, key, now_ms, &report->usage) == BACKEND_ADMIN_OK;
    if (live) {
        struct mem_limit *limit = mem_limit_find(b, key, (uint32_t)strlen(key));
        summarize(b, limit, now_ms, soon_ms, report);
    }
    pthread_mutex_unlock(&b->mutex);
    return live;
}

enum backend_admin_result mem_limits_report(struct mem_backend *b, const struct limits_query *query,
                                            struct limit_report **out, size_t *count, bool *more)
{
    assert(query->limit >= 1);
    assert(query->limit <= CONSOLE_LIMITS_PAGE_MAX);
    struct limit_report *reports = calloc(query->limit, sizeof *reports);
    if (reports == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    size_t chosen = 0;
    pthread_mutex_lock(&b->mutex);
    enum backend_admin_result rc = choose_page(b, query, reports, &chosen, more);
    pthread_mutex_unlock(&b->mutex);
    if (rc != BACKEND_ADMIN_OK) {
        free(reports);
        return rc;
    }
    size_t kept = 0;
    for (size_t i = 0; i < chosen; i++) {
        if (i != kept)
            reports[kept] = reports[i];
        if (report_one(b, query->soon_ms, &reports[kept]))
            kept++; /* a limit deleted meanwhile is left out */
    }
    *out = reports;
    *count = kept;
    return BACKEND_ADMIN_OK;
}

/* ---- live holds of one limit --------------------------------------------- */

static struct mem_limit *live_limit(struct mem_backend *b, const char *key)
{
    struct mem_limit *limit =
        mem_limit_find(b, key, (uint32_t)strnlen(key, LIMIT_KEY_LENGTH_MAX + 1));
    return limit == NULL || limit->deleted ? NULL : limit;
}

static void visit_hold(struct mem_backend *b, const struct mem_hold *hold, hold_visit_fn visit,
                       void *context)
{
    const char *caller = mem_caller_name(&b->callers, hold->caller_id);
    struct hold_view view = {.caller = caller,
                             .caller_length = (uint32_t)strlen(caller),
                             .amount = hold->amount,
                             .expires_at_unix_ms = hold->expires_at_ms};
    visit(context, &view);
}

/* The list in order, then the heap array: every hold once, order aside. */
static bool scan_set(struct mem_backend *b, const struct mem_hold_set *set, uint64_t max_holds,
                     hold_visit_fn visit, void *context)
{
    uint64_t visited = 0;
    for (uint32_t id = set->head; id != MEM_HOLD_NONE; id = mem_hold_get(&b->pool, id)->next) {
        const struct mem_hold *hold = mem_hold_get(&b->pool, id);
        if (hold->state != MEM_HOLD_RESERVED)
            continue;
        if (visited++ == max_holds)
            return false;
        visit_hold(b, hold, visit, context);
    }
    for (uint32_t i = 0; i < set->heap_count; i++) {
        const struct mem_hold *hold = mem_hold_get(&b->pool, set->heap[i].hold_id);
        if (hold->state != MEM_HOLD_RESERVED)
            continue;
        if (visited++ == max_holds)
            return false;
        visit_hold(b, hold, visit, context);
    }
    return true;
}

enum backend_admin_result mem_holds_scan(struct mem_backend *b, const char *key, uint64_t max_holds,
                                         hold_visit_fn visit, void *context, bool *complete)
{
    pthread_mutex_lock(&b->mutex);
    struct mem_limit *limit = live_limit(b, key);
    if (limit != NULL) {
        mem_limit_expire(b, limit, clock_now_ms(b->clock));
        *complete = scan_set(b, &limit->holds, max_holds, visit, context);
    }
    pthread_mutex_unlock(&b->mutex);
    return limit == NULL ? BACKEND_ADMIN_UNKNOWN_KEY : BACKEND_ADMIN_OK;
}

/* ---- usage by caller ----------------------------------------------------- */

/* Most spent (used + debt) first: an overrun's debt is spent too. */
static int compare_caller_usage(const void *a, const void *b)
{
    const struct caller_usage *x = a, *y = b;
    uint64_t x_spent = amount_add_saturating(x->used, x->debt);
    uint64_t y_spent = amount_add_saturating(y->used, y->debt);
    if (x_spent != y_spent)
        return x_spent > y_spent ? -1 : 1;
    if (x->reserved != y->reserved)
        return x->reserved > y->reserved ? -1 : 1;
    return strcmp(x->caller, y->caller);
}

static void name_row(const struct mem_backend *b, uint16_t id, struct caller_usage *row)
{
    snprintf(row->caller, sizeof row->caller, "%s", mem_caller_name(&b->callers, id));
}

/* Budgets: the split kept per period (empty when the period is not kept). */
static size_t budget_rows(const struct mem_backend *b, const struct mem_period *period,
                          struct caller_usage *rows)
{
    size_t n = 0;
    for (uint32_t i = 0; period != NULL && i < period->caller_capacity; i++) {
        const struct mem_caller_spend *spend = &period->callers[i];
        if (spend->key == 0 ||
            (spend->reserved == 0 && spend->used == 0 && spend->debt == 0 && spend->calls == 0))
            continue;
        struct caller_usage *row = &rows[n++];
        name_row(b, (uint16_t)(spend->key - 1), row);
        row->reserved = spend->reserved;
        row->used = spend->used;
        row->debt = spend->debt;
        row->calls = spend->calls;
    }
    return n;
}

/* Rolling and concurrency: what the limit's live holds carry, by caller
 * (rows indexed by caller id, then packed). Every hold of the limit is
 * visited once: at most MEM_HOLDS_MAX. */
static size_t window_rows(const struct mem_backend *b, const struct mem_limit *limit,
                          struct caller_usage *rows)
{
    const struct mem_hold_set *set = &limit->holds;
    uint32_t id = set->head;
    for (uint32_t heap_i = 0; id != MEM_HOLD_NONE || heap_i < set->heap_count;) {
        const struct mem_hold *hold;
        if (id != MEM_HOLD_NONE) {
            hold = mem_hold_get(&b->pool, id);
            id = hold->next;
        } else {
            hold = mem_hold_get(&b->pool, set->heap[heap_i++].hold_id);
        }
        struct caller_usage *row = &rows[hold->caller_id];
        if (hold->state == MEM_HOLD_RESERVED)
            row->reserved = amount_add_saturating(row->reserved, hold->amount);
        else
            row->used = amount_add_saturating(row->used, hold->amount);
        row->debt = amount_add_saturating(row->debt, hold->debt);
        row->calls++; /* a hold is one lease's */
    }
    size_t n = 0;
    for (uint32_t caller = 0; caller <= MEM_CALLER_OTHERS; caller++) {
        if (rows[caller].calls == 0)
            continue;
        rows[n] = rows[caller];
        name_row(b, (uint16_t)caller, &rows[n++]);
    }
    return n;
}

enum backend_admin_result mem_usage_by_caller(struct mem_backend *b, const char *key,
                                              int64_t at_unix_ms, struct caller_usage **out,
                                              size_t *count)
{
    /* One row per possible caller id: the window split is indexed by id. */
    struct caller_usage *rows = calloc(MEM_CALLER_OTHERS + 1, sizeof *rows);
    if (rows == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    size_t n = 0;
    pthread_mutex_lock(&b->mutex);
    struct mem_limit *limit = live_limit(b, key);
    if (limit != NULL) {
        mem_limit_expire(b, limit, clock_now_ms(b->clock));
        if (limit->kind == LIMIT_BUDGET) {
            int64_t start_ms = period_span_at(&limit->state.definition, at_unix_ms).start_ms;
            n = budget_rows(b, mem_limit_period_find(limit, start_ms), rows);
        } else {
            n = window_rows(b, limit, rows);
        }
    }
    pthread_mutex_unlock(&b->mutex);
    if (limit == NULL) {
        free(rows);
        return BACKEND_ADMIN_UNKNOWN_KEY;
    }
    qsort(rows, n, sizeof *rows, compare_caller_usage);
    *out = rows;
    *count = n;
    return BACKEND_ADMIN_OK;
}
