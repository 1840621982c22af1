/* What the console reads from the tigerbeetle backend (docs/console.md):
 * a page of limits, each with its usage read from the cluster's balances.
 * The cluster does not list pending transfers by account, so the live holds
 * and the next expiry are what this llmlimitd knows: the open leases of its
 * lease cache and its notes of recent holds (holds_seen_here_only). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "tb_backend.h"
#include "tb_console.h"

/* Leases of the cache one page looks at, newest first. */
#define TB_CONSOLE_LEASES_MAX 100000

struct page_entry {
    struct tb_limit *limit; /* never freed while the backend is open */
    struct limit_report *report;
};

static int compare_keys(const void *a, const void *b)
{
    const struct tb_limit *x = *(const struct tb_limit *const *)a;
    const struct tb_limit *y = *(const struct tb_limit *const *)b;
    return strcmp(x->key, y->key);
}

static int compare_limit_pointers(const void *a, const void *b)
{
    const struct page_entry *x = a, *y = b;
    return x->limit < y->limit ? -1 : x->limit > y->limit;
}

/* Under the registry lock: the page's limits in key order. -2 when out of memory. */
static int choose_page(struct tb_backend *b, const struct limits_query *query,
                       struct tb_limit **page, size_t *count, bool *more)
{
    pthread_rwlock_rdlock(&b->registry_lock);
    struct tb_limit **chosen = malloc((b->live_limit_count + 1) * sizeof *chosen);
    size_t n = 0, prefix_length = strlen(query->prefix);
    for (uint32_t i = 0; chosen != NULL && i < TB_LIMIT_BUCKETS; i++) {
        for (struct tb_limit *limit = b->limit_buckets[i]; limit != NULL;
             limit = limit->next_in_bucket) {
            const struct limit_definition *d = &limit->state.definition;
            if (!limit->deleted && (query->kind == LIMIT_KIND_NONE || d->kind == query->kind) &&
                strncmp(limit->key, query->prefix, prefix_length) == 0 &&
                strcmp(limit->key, query->after) > 0)
                chosen[n++] = limit;
        }
    }
    pthread_rwlock_unlock(&b->registry_lock);
    if (chosen == NULL)
        return -2;
    qsort(chosen, n, sizeof *chosen, compare_keys);
    *more = n > query->limit;
    *count = *more ? query->limit : n;
    memcpy(page, chosen, *count * sizeof *page);
    free(chosen);
    return 0;
}

static void count_hold(struct holds_summary *summary, int64_t expires_at_ms, int64_t taken_at_ms,
                       int64_t soon_until_ms)
{
    summary->count++;
    if (expires_at_ms <= soon_until_ms)
        summary->expiring_soon++;
    if (summary->oldest_expires_at_unix_ms == 0 ||
        expires_at_ms < summary->oldest_expires_at_unix_ms) {
        summary->oldest_expires_at_unix_ms = expires_at_ms;
        summary->oldest_at_unix_ms = taken_at_ms;
    }
}

/* One walk of the lease cache, newest first: the open leases' holds on the
 * page's limits (entries sorted by limit pointer). */
static void summarize_leases(struct tb_backend *b, struct page_entry *entries, size_t count,
                             int64_t now_ms, int64_t soon_ms)
{
    for (size_t i = 0; i < count; i++)
        entries[i].report->holds.exact = true;
    pthread_mutex_lock(&b->lease_lock);
    uint32_t visited = 0;
    const struct tb_lease *lease = b->newest;
    for (; lease != NULL && visited < TB_CONSOLE_LEASES_MAX; lease = lease->older, visited++) {
        if (lease->state != TB_LEASE_ALLOWED)
            continue;
        for (uint32_t h = 0; h < lease->hold_count; h++) {
            const struct tb_lease_hold *hold = &lease->holds[h];
            struct page_entry key = {.limit = hold->limit};
            struct page_entry *entry =
                bsearch(&key, entries, count, sizeof *entries, compare_limit_pointers);
            if (hold->denied || entry == NULL)
                continue;
            int64_t taken_at_ms = (int64_t)(hold->timestamp_ns / 1000000);
            int64_t expires_at_ms = taken_at_ms + (int64_t)hold->timeout_seconds * 1000;
            if (expires_at_ms > now_ms)
                count_hold(&entry->report->holds, expires_at_ms, taken_at_ms, now_ms + soon_ms);
        }
    }
    bool stopped = lease != NULL;
    pthread_mutex_unlock(&b->lease_lock);
    for (size_t i = 0; stopped && i < count; i++)
        entries[i].report->holds.exact = false;
}

/* The earliest expiry among the holds noted here (retry_after's notes). */
static int64_t noted_expiry_ms(struct tb_limit *limit, int64_t now_ms)
{
    int64_t earliest = 0;
    pthread_mutex_lock(&limit->notes_lock);
    const struct tb_hold_ring *ring = &limit->notes;
    for (uint32_t i = 0; ring->notes != NULL && i < ring->count; i++) {
        int64_t at = ring->notes[(ring->head + i) % TB_HOLD_TRACK_MAX].expires_at_ms;
        if (at > now_ms && (earliest == 0 || at < earliest))
            earliest = at;
    }
    pthread_mutex_unlock(&limit->notes_lock);
    return earliest;
}

static void reset_at(struct tb_limit *limit, int64_t now_ms, struct limit_report *report)
{
    enum limit_kind kind = report->usage.state.definition.kind;
    if (kind == LIMIT_BUDGET)
        report->reset_at_unix_ms = report->usage.period_end_unix_ms;
    else if (kind == LIMIT_CONCURRENCY)
        report->reset_at_unix_ms = report->holds.oldest_expires_at_unix_ms;
    else
        report->reset_at_unix_ms = noted_expiry_ms(limit, now_ms);
}

/* Usage from the cluster, one limit at a time; a limit deleted meanwhile
 * is left out. Returns the reports kept, or -2 on a backend error. */
static long read_usage(struct tb_backend *b, struct tb_limit **page, size_t count, int64_t now_ms,
                       struct limit_report *reports, struct page_entry *entries)
{
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        enum backend_admin_result rc =
            tb_registry_usage(&b->base, page[i]->key, now_ms, &reports[kept].usage);
        if (rc == BACKEND_ADMIN_UNKNOWN_KEY)
            continue;
        if (rc != BACKEND_ADMIN_OK)
            return -2;
        entries[kept] = (struct page_entry){.limit = page[i], .report = &reports[kept]};
        kept++;
    }
    return (long)kept;
}

enum backend_admin_result tb_console_limits_report(struct backend *base,
                                                   const struct limits_query *query,
                                                   struct limit_report **out, size_t *count,
                                                   bool *more)
{
    struct tb_backend *b = tb_backend_of(base);
    assert(query->limit >= 1);
    assert(query->limit <= CONSOLE_LIMITS_PAGE_MAX);
    struct limit_report *reports = calloc(query->limit, sizeof *reports);
    struct tb_limit **page = malloc(query->limit * sizeof *page);
    struct page_entry *entries = malloc(query->limit * sizeof *entries);
    size_t chosen = 0;
    int rc = reports == NULL || page == NULL || entries == NULL
                 ? -2
                 : choose_page(b, query, page, &chosen, more);
    long kept =
        rc == 0 ? read_usage(b, page, chosen, clock_now_ms(b->clock), reports, entries) : -2;
    if (kept >= 0) {
        int64_t now_ms = clock_now_ms(b->clock);
        qsort(entries, (size_t)kept, sizeof *entries, compare_limit_pointers);
        summarize_leases(b, entries, (size_t)kept, now_ms, query->soon_ms);
        for (long i = 0; i < kept; i++)
            reset_at(entries[i].limit, now_ms, entries[i].report);
    }
    free(page);
    free(entries);
    if (kept < 0) {
        free(reports);
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    assert((size_t)kept <= chosen);
    *out = reports;
    *count = (size_t)kept;
    return BACKEND_ADMIN_OK;
}
