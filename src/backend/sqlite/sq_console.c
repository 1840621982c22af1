/* What the console reads from the sqlite backend (docs/console.md): a page
 * of limits with their usage and live holds, and the live holds of one
 * limit with their callers. Both run as one call on the writer thread and
 * read the mirror, whose hold trees count their reserved holds, so a
 * limit's summary costs O(log n) whatever it holds. */
#include "sq_console.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sq_backend.h"
#include "sq_holds.h"
#include "sq_ledger.h"
#include "sq_mirror.h"
#include "sq_queue.h"

/* ---- a page of limits ---------------------------------------------------- */

struct report_args {
    const struct limits_query *query;
    struct limit_report *reports; /* query->limit of them */
    size_t count;
    bool more;
};

static bool matches(const struct sq_limit *limit, const struct limits_query *query,
                    size_t prefix_length)
{
    const struct limit_definition *d = &limit->state.definition;
    return !limit->deleted && (query->kind == LIMIT_KIND_NONE || d->kind == query->kind) &&
           strncmp(d->key, query->prefix, prefix_length) == 0 && strcmp(d->key, query->after) > 0;
}

static int compare_limit_keys(const void *a, const void *b)
{
    const struct sq_limit *x = *(const struct sq_limit *const *)a;
    const struct sq_limit *y = *(const struct sq_limit *const *)b;
    return strcmp(x->state.definition.key, y->state.definition.key);
}

/* The live holds of every period of the limit (budgets keep reservations
 * in the period they were made in). */
static void summarize(const struct sq_limit *limit, int64_t now_ms, int64_t soon_ms,
                      struct holds_summary *summary)
{
    memset(summary, 0, sizeof *summary);
    summary->exact = true;
    for (uint32_t i = 0; i < limit->period_count; i++) {
        const struct sq_hold *root = limit->periods[i]->holds;
        summary->count += sq_holds_live(root);
        summary->expiring_soon += sq_holds_live_until(root, now_ms + soon_ms);
        const struct sq_hold *first = sq_holds_first_live(root);
        if (first != NULL && (summary->oldest_expires_at_unix_ms == 0 ||
                              first->expires_at_ms < summary->oldest_expires_at_unix_ms))
            summary->oldest_expires_at_unix_ms = first->expires_at_ms;
    }
    if (summary->count > 0)
        summary->oldest_at_unix_ms =
            summary->oldest_expires_at_unix_ms - limit_hold_duration_ms(&limit->state.definition);
}

static int report_one(struct sq_backend *backend, struct sq_limit *limit, int64_t now_ms,
                      int64_t soon_ms, struct limit_report *report)
{
    int rc = sq_ledger_expire(backend, limit, now_ms, NULL);
    if (rc != SQLITE_DONE)
        return rc;
    const struct limit_definition *d = &limit->state.definition;
    struct limit_usage *usage = &report->usage;
    memset(report, 0, sizeof *report);
    usage->state = limit->state;
    int64_t start = 0;
    if (d->kind == LIMIT_BUDGET) {
        struct period_span span = sq_limit_period_now(limit, now_ms);
        start = span.start_ms;
        usage->period_start_unix_ms = span.start_ms;
        usage->period_end_unix_ms = span.end_ms;
    }
    const struct sq_period *p = sq_mirror_period(backend, limit, start);
    if (p == NULL)
        return SQLITE_NOMEM;
    usage->reserved = p->reserved;
    usage->used = p->used;
    usage->debt = p->debt;
    usage->available = limit_available(d->kind, d->capacity, p->reserved, p->used, p->debt);
    if (d->kind == LIMIT_BUDGET) {
        report->reset_at_unix_ms = usage->period_end_unix_ms;
    } else {
        const struct sq_hold *first = sq_holds_first(p->holds);
        report->reset_at_unix_ms = first != NULL ? first->expires_at_ms : 0;
    }
    summarize(limit, now_ms, soon_ms, &report->holds);
    return SQLITE_DONE;
}

static int report_run(struct sq_backend *backend, struct sq_call *call)
{
    struct report_args *args = call->args;
    const struct limits_query *query = args->query;
    const struct sq_map *keys = &backend->mirror.limits_by_key;
    args->count = 0;
    struct sq_limit **chosen = malloc((keys->count > 0 ? keys->count : 1) * sizeof *chosen);
    if (chosen == NULL)
        return SQLITE_NOMEM;
    size_t n = 0, prefix_length = strlen(query->prefix);
    for (uint32_t i = 0; i < keys->capacity; i++) {
        struct sq_limit *limit = keys->slots[i].value;
        if (limit != NULL && matches(limit, query, prefix_length))
            chosen[n++] = limit;
    }
    qsort(chosen, n, sizeof *chosen, compare_limit_keys);
    args->more = n > query->limit;
    size_t count = args->more ? query->limit : n;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    int rc = SQLITE_DONE;
    for (size_t i = 0; i < count && rc == SQLITE_DONE; i++)
        rc = report_one(backend, chosen[i], now_ms, query->soon_ms, &args->reports[i]);
    free(chosen);
    if (rc == SQLITE_DONE)
        args->count = count;
    return rc;
}

enum backend_admin_result sq_console_limits_report(struct backend *base,
                                                   const struct limits_query *query,
                                                   struct limit_report **out, size_t *count,
                                                   bool *more)
{
    struct sq_backend *backend = sq_backend_of(base);
    assert(query->limit >= 1);
    assert(query->limit <= CONSOLE_LIMITS_PAGE_MAX);
    struct report_args args = {.query = query,
                               .reports = calloc(query->limit, sizeof *args.reports)};
    if (args.reports == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    if (sq_writer_call(backend, report_run, &args) != 0) {
        free(args.reports);
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    assert(args.count <= query->limit);
    *out = args.reports;
    *count = args.count;
    *more = args.more;
    return BACKEND_ADMIN_OK;
}

/* ---- live holds of one limit --------------------------------------------- */

struct scan_args {
    const char *key;
    uint64_t max_holds;
    hold_visit_fn visit;
    void *context;
    uint64_t visited;
    bool complete;
    enum backend_admin_result result;
};

static bool scan_visit(void *context, const struct sq_hold *hold)
{
    struct scan_args *args = context;
    if (args->visited == args->max_holds)
        return false;
    args->visited++;
    const char *caller = hold->lease != NULL ? sq_lease_ref_caller(hold->lease) : "";
    struct hold_view view = {.caller = caller,
                             .caller_length = (uint32_t)strlen(caller),
                             .amount = hold->amount,
                             .expires_at_unix_ms = hold->expires_at_ms};
    args->visit(args->context, &view);
    return true;
}

static int scan_run(struct sq_backend *backend, struct sq_call *call)
{
    struct scan_args *args = call->args;
    struct sq_limit *limit = sq_mirror_limit_for_admin(&backend->mirror, args->key, &args->result);
    if (limit == NULL)
        return SQLITE_DONE;
    int rc = sq_ledger_expire(backend, limit, clock_now_ms(backend->config.clock), NULL);
    if (rc != SQLITE_DONE)
        return rc;
    /* A redone transaction runs this again: the visitor must not count twice. */
    if (args->visited > 0)
        return SQLITE_DONE;
    args->complete = true;
    for (uint32_t i = 0; i < limit->period_count && args->complete; i++)
        args->complete = sq_holds_each_live(limit->periods[i]->holds, scan_visit, args);
    return SQLITE_DONE;
}

enum backend_admin_result sq_console_holds_scan(struct backend *base, const char *key,
                                                uint64_t max_holds, hold_visit_fn visit,
                                                void *context, bool *complete)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct scan_args args = {
        .key = key, .max_holds = max_holds, .visit = visit, .context = context};
    if (sq_writer_call(backend, scan_run, &args) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    if (args.result == BACKEND_ADMIN_OK)
        *complete = args.complete;
    return args.result;
}
