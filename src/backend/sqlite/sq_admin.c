/* The sqlite backend's synchronous operations: limit definitions (put,
 * restore, delete, get, list), usage, the tick (expiry sweeper and pending
 * decreases), and the audit-log reads. Everything that touches the mirror
 * runs on the writer thread as a call inside a transaction. */
#include "sq_admin.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sq_backend.h"
#include "sq_holds.h"
#include "sq_json.h"
#include "sq_ledger.h"
#include "sq_leases.h"
#include "sq_mirror.h"
#include "sq_queue.h"
#include "sq_schema.h"

#define DETAIL_BYTES_MAX 128
#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- Writing a limit. */

static void bind_state(sqlite3_stmt *stmt, const struct sq_limit *limit, int64_t now_ms)
{
    char alerts[LIMIT_ALERTS_TEXT_SIZE];
    const struct limit_definition *d = &limit->state.definition;
    assert(d->capacity >= 1);
    assert(d->capacity <= AMOUNT_MAX); /* fits the column's int64 */
    assert(limit->state.pending_decrease_to < d->capacity);
    sqlite3_bind_int64(stmt, 1, limit->id);
    sqlite3_bind_text(stmt, 2, d->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 3, limit_kind_name(d->kind), -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 4, (int64_t)d->capacity);
    sqlite3_bind_int64(stmt, 5, d->window_seconds);
    sqlite3_bind_int64(stmt, 6, d->timeout_seconds);
    sqlite3_bind_text(stmt, 7, limit_period_name(d->period), -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 8, d->unit, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 9, d->description, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 10, limit_overage_name(d->overage), -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 11, limit_status_name(limit->state.status), -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 12, (int64_t)limit->state.pending_decrease_to);
    sqlite3_bind_int64(stmt, 13, now_ms);
    sqlite3_bind_int64(stmt, 14, d->period_anchor_day);
    sqlite3_bind_text(stmt, 15, d->time_zone, -1, SQLITE_STATIC);
    limit_alerts_text(d, alerts);
    sqlite3_bind_text(stmt, 16, alerts, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 17, d->webhook, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 18, alert_format_name(d->webhook_format), -1, SQLITE_STATIC);
}

static int limit_write(struct sq_backend *backend, const struct sq_limit *limit,
                       enum sq_statement which, int64_t now_ms, const char *detail)
{
    sqlite3_stmt *stmt = sq_statement(backend, which);
    bind_state(stmt, limit, now_ms);
    int rc = sq_statement_run(stmt);
    if (rc == SQLITE_DONE)
        rc =
            sq_leases_limit_event(backend, now_ms, limit, limit->state.definition.capacity, detail);
    return rc;
}

static bool state_equal(const struct limit_state *a, const struct limit_state *b)
{
    const struct limit_definition *x = &a->definition, *y = &b->definition;
    return x->kind == y->kind && x->capacity == y->capacity &&
           x->window_seconds == y->window_seconds && x->timeout_seconds == y->timeout_seconds &&
           x->period == y->period && x->period_anchor_day == y->period_anchor_day &&
           strcmp(x->time_zone, y->time_zone) == 0 && x->overage == y->overage &&
           strcmp(x->unit, y->unit) == 0 && strcmp(x->description, y->description) == 0 &&
           limit_alerts_same(x, y) && a->status == b->status &&
           a->pending_decrease_to == b->pending_decrease_to;
}

static int limit_create(struct sq_backend *backend, const struct limit_state *state, int64_t now_ms,
                        struct sq_limit **out)
{
    struct sq_limit *limit = sq_limit_new(backend->mirror.next_limit_id, state);
    if (limit == NULL || sq_mirror_add_limit(&backend->mirror, limit) != 0) {
        sq_limit_free(limit);
        return SQLITE_NOMEM;
    }
    *out = limit;
    if (state->definition.kind != LIMIT_BUDGET && sq_mirror_period(backend, limit, 0) == NULL)
        return SQLITE_NOMEM;
    char detail[DETAIL_BYTES_MAX];
    assert(sq_mirror_limit_by_key(&backend->mirror, state->definition.key) == limit);
    snprintf(detail, sizeof detail, "created: %s, capacity %llu%s",
             limit_kind_name(state->definition.kind),
             (unsigned long long)state->definition.capacity,
             state->status == LIMIT_DECREASING ? ", decreasing" : "");
    return limit_write(backend, limit, SQ_STMT_LIMIT_INSERT, now_ms, detail);
}

static int limit_retire(struct sq_backend *backend, struct sq_limit *limit, int64_t now_ms)
{
    assert(!limit->deleted); /* a live limit, found by its key */
    sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_LIMIT_DELETE);
    sqlite3_bind_int64(stmt, 1, now_ms);
    sqlite3_bind_int64(stmt, 2, limit->id);
    int rc = sq_statement_run(stmt);
    if (rc == SQLITE_DONE)
        rc = sq_leases_limit_event(backend, now_ms, limit, limit->state.definition.capacity,
                                   "deleted");
    if (rc == SQLITE_DONE) {
        sq_mirror_unlink_key(&backend->mirror, limit);
        limit->deleted = true;
        sq_mirror_freed(&backend->mirror, limit); /* its waiters learn it is gone by asking */
    }
    return rc;
}

/* Applies a put to a live limit of the same kind (docs/semantics.md, "Capacity
 * changes"). */
static int limit_change(struct sq_backend *backend, struct sq_limit *limit,
                        const struct limit_definition *definition, int64_t now_ms)
{
    assert(limit_reshape_check(&limit->state.definition, definition) == BACKEND_ADMIN_OK);
    struct limit_state next = limit->state;
    uint64_t in_force = limit->state.definition.capacity;
    next.definition = *definition;
    next.definition.capacity = in_force;
    bool apply = definition->capacity >= in_force || definition->kind == LIMIT_BUDGET;
    if (!apply) {
        int rc = sq_ledger_expire(backend, limit, now_ms, NULL);
        if (rc != SQLITE_DONE)
            return rc;
        const struct sq_period *p = limit->periods[0];
        apply = p->reserved + p->used <= definition->capacity; /* what is free covers it */
    }
    if (apply) {
        next.definition.capacity = definition->capacity;
        next.status = LIMIT_ACTIVE;
        next.pending_decrease_to = 0;
    } else {
        next.status = LIMIT_DECREASING;
        next.pending_decrease_to = definition->capacity;
        assert(next.pending_decrease_to < in_force); /* only a decrease waits */
    }
    if (state_equal(&next, &limit->state))
        return SQLITE_DONE;
    char detail[DETAIL_BYTES_MAX];
    if (apply)
        snprintf(detail, sizeof detail, "capacity %llu -> %llu", (unsigned long long)in_force,
                 (unsigned long long)definition->capacity);
    else
        snprintf(detail, sizeof detail, "capacity %llu, decreasing to %llu",
                 (unsigned long long)in_force, (unsigned long long)definition->capacity);
    limit->state = next;
    sq_mirror_freed(&backend->mirror, limit); /* an increase frees capacity */
    return limit_write(backend, limit, SQ_STMT_LIMIT_UPDATE, now_ms, detail);
}

struct put_args {
    const struct limit_definition *definition;
    const struct limit_state *restore; /* restore_limit: the state as it was */
    struct limit_state *state_out;
    enum backend_admin_result result;
};

static int put_run(struct sq_backend *backend, struct sq_call *call)
{
    struct put_args *args = call->args;
    const struct limit_definition *d = args->definition;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    struct sq_limit *limit = sq_mirror_limit_by_key(&backend->mirror, d->key);
    args->result = BACKEND_ADMIN_OK;
    if (limit == NULL) {
        struct limit_state state = {.definition = *d, .status = LIMIT_ACTIVE};
        int rc = limit_create(backend, &state, now_ms, &limit);
        if (rc == SQLITE_DONE)
            *args->state_out = limit->state;
        return rc;
    }
    args->result = limit_reshape_check(&limit->state.definition, d);
    if (args->result != BACKEND_ADMIN_OK) {
        *args->state_out = limit->state;
        return SQLITE_DONE;
    }
    int rc = limit_change(backend, limit, d, now_ms);
    if (rc == SQLITE_DONE)
        *args->state_out = limit->state;
    return rc;
}

/* UNAVAILABLE when the writer could not commit the change: nothing changed. */
enum backend_admin_result sq_admin_put_limit(struct backend *base,
                                             const struct limit_definition *definition,
                                             struct limit_state *state_out)
{
    struct sq_backend *backend = sq_backend_of(base);
    assert(state_out != NULL);
    struct put_args args = {.definition = definition, .state_out = state_out};
    if (sq_writer_call(backend, put_run, &args) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    return args.result;
}

/* The registry wins for definitions; the counters stay. A key whose kind or
 * period changed in the registry gets a new incarnation. */
static int restore_run(struct sq_backend *backend, struct sq_call *call)
{
    struct put_args *args = call->args;
    const struct limit_state *state = args->restore;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    struct sq_limit *limit = sq_mirror_limit_by_key(&backend->mirror, state->definition.key);
    if (limit != NULL &&
        limit_reshape_check(&limit->state.definition, &state->definition) != BACKEND_ADMIN_OK) {
        int rc = limit_retire(backend, limit, now_ms);
        if (rc != SQLITE_DONE)
            return rc;
        limit = NULL;
    }
    args->result = BACKEND_ADMIN_OK;
    if (limit == NULL)
        return limit_create(backend, state, now_ms, &limit);
    if (state_equal(state, &limit->state))
        return SQLITE_DONE;
    limit->state = *state;
    return limit_write(backend, limit, SQ_STMT_LIMIT_UPDATE, now_ms, "restored from the registry");
}

enum backend_admin_result sq_admin_restore_limit(struct backend *base,
                                                 const struct limit_state *state)
{
    struct sq_backend *backend = sq_backend_of(base);
    assert(state->status == LIMIT_DECREASING || state->pending_decrease_to == 0);
    struct put_args args = {.restore = state};
    if (sq_writer_call(backend, restore_run, &args) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    return args.result;
}

struct key_args {
    const char *key;
    enum backend_admin_result result;
    struct limit_state *state_out;
};

static int delete_run(struct sq_backend *backend, struct sq_call *call)
{
    struct key_args *args = call->args;
    struct sq_limit *limit = sq_mirror_limit_for_admin(&backend->mirror, args->key, &args->result);
    if (limit == NULL)
        return SQLITE_DONE;
    return limit_retire(backend, limit, clock_now_ms(backend->config.clock));
}

enum backend_admin_result sq_admin_delete_limit(struct backend *base, const char *key)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct key_args args = {.key = key};
    if (sq_writer_call(backend, delete_run, &args) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    return args.result;
}

static int get_run(struct sq_backend *backend, struct sq_call *call)
{
    struct key_args *args = call->args;
    struct sq_limit *limit = sq_mirror_limit_for_admin(&backend->mirror, args->key, &args->result);
    if (limit != NULL)
        *args->state_out = limit->state;
    return SQLITE_DONE;
}

enum backend_admin_result sq_admin_get_limit(struct backend *base, const char *key,
                                             struct limit_state *out)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct key_args args = {.key = key, .state_out = out};
    if (sq_writer_call(backend, get_run, &args) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    return args.result;
}

struct list_args {
    struct limit_state *states;
    size_t count;
};

static int state_order(const void *a, const void *b)
{
    return strcmp(((const struct limit_state *)a)->definition.key,
                  ((const struct limit_state *)b)->definition.key);
}

static int list_run(struct sq_backend *backend, struct sq_call *call)
{
    struct list_args *args = call->args;
    const struct sq_map *keys = &backend->mirror.limits_by_key;
    free(args->states);
    args->count = 0;
    args->states = malloc((keys->count > 0 ? keys->count : 1) * sizeof *args->states);
    if (args->states == NULL)
        return SQLITE_NOMEM;
    for (uint32_t i = 0; i < keys->capacity; i++) {
        const struct sq_limit *limit = keys->slots[i].value;
        if (limit != NULL)
            args->states[args->count++] = limit->state;
    }
    qsort(args->states, args->count, sizeof *args->states, state_order);
    return SQLITE_DONE;
}

enum backend_admin_result sq_admin_list_limits(struct backend *base, struct limit_state **out,
                                               size_t *count)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct list_args args = {0};
    if (sq_writer_call(backend, list_run, &args) != 0) {
        free(args.states);
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    *out = args.states;
    *count = args.count;
    return BACKEND_ADMIN_OK;
}

/* ---- Usage. */

/* One limit's usage, on the writer: result is OK or UNKNOWN_KEY; the
 * return is SQLITE_DONE or an SQLite error. */
static int usage_read(struct sq_backend *backend, const char *key, int64_t at_unix_ms,
                      struct limit_usage *out, enum backend_admin_result *result)
{
    struct sq_limit *limit = sq_mirror_limit_for_admin(&backend->mirror, key, result);
    if (limit == NULL)
        return SQLITE_DONE;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    int rc = sq_ledger_expire(backend, limit, now_ms, NULL);
    if (rc != SQLITE_DONE)
        return rc;
    const struct limit_definition *d = &limit->state.definition;
    memset(out, 0, sizeof *out);
    out->state = limit->state;
    int64_t start = 0;
    if (d->kind == LIMIT_BUDGET) {
        struct period_span span = period_span_at(d, at_unix_ms);
        start = span.start_ms;
        out->period_start_unix_ms = span.start_ms;
        out->period_end_unix_ms = span.end_ms;
    }
    const struct sq_period *p = sq_mirror_period(backend, limit, start);
    if (p == NULL)
        return SQLITE_NOMEM;
    out->reserved = p->reserved;
    out->used = p->used;
    out->debt = p->debt;
    out->available = limit_available(d->kind, d->capacity, p->reserved, p->used, p->debt);
    return SQLITE_DONE;
}

struct usage_args {
    const char *key;
    int64_t at_unix_ms;
    struct limit_usage *out;
    enum backend_admin_result result;
};

static int usage_run(struct sq_backend *backend, struct sq_call *call)
{
    struct usage_args *args = call->args;
    return usage_read(backend, args->key, args->at_unix_ms, args->out, &args->result);
}

enum backend_admin_result sq_admin_usage(struct backend *base, const char *key, int64_t at_unix_ms,
                                         struct limit_usage *out)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct usage_args args = {.key = key, .at_unix_ms = at_unix_ms, .out = out};
    if (sq_writer_call(backend, usage_run, &args) != 0)
        return BACKEND_ADMIN_UNAVAILABLE;
    return args.result;
}

/* One usage_batch call: one call of the writer for every limit, so a
 * scrape waits for one transaction (and its sync), and nobody waits on
 * the caller's thread. */
struct usage_batch {
    struct sq_call call;
    const struct usage_request *requests;
    struct usage_result *results;
    uint32_t count;
    backend_done_fn done;
    void *context;
};

static int usage_batch_run(struct sq_backend *backend, struct sq_call *call)
{
    struct usage_batch *batch = call->args;
    for (uint32_t i = 0; i < batch->count; i++) {
        const struct usage_request *request = &batch->requests[i];
        struct usage_result *result = &batch->results[i];
        int rc =
            usage_read(backend, request->key, request->at_unix_ms, &result->usage, &result->result);
        if (rc != SQLITE_DONE)
            return rc;
    }
    return SQLITE_DONE;
}

static void usage_batch_answer(void *context)
{
    struct usage_batch *batch = context;
    for (uint32_t i = 0; batch->call.failed && i < batch->count; i++)
        batch->results[i].result = BACKEND_ADMIN_UNAVAILABLE;
    backend_done_fn done = batch->done;
    void *done_context = batch->context;
    free(batch);
    done(done_context);
}

void sq_admin_usage_batch(struct backend *base, const struct usage_request *requests,
                          struct usage_result *results, uint32_t count, backend_done_fn done,
                          void *context)
{
    assert(count <= USAGE_BATCH_MAX);
    struct usage_batch *batch = count > 0 ? calloc(1, sizeof *batch) : NULL;
    if (batch == NULL) { /* nothing to read, or out of memory */
        for (uint32_t i = 0; i < count; i++)
            results[i].result = BACKEND_ADMIN_UNAVAILABLE;
        done(context);
        return;
    }
    *batch = (struct usage_batch){
        .requests = requests, .results = results, .count = count, .done = done, .context = context};
    batch->call = (struct sq_call){
        .run = usage_batch_run, .args = batch, .done = usage_batch_answer, .context = batch};
    if (!sq_writer_submit(sq_backend_of(base), &batch->call)) {
        batch->call.failed = true; /* the queue is full, or the backend closing */
        usage_batch_answer(batch);
    }
}

/* ---- Tick: the expiry sweeper and pending decreases. */

struct tick_args {
    bool limits_changed;
};

static int decrease_if_covered(struct sq_backend *backend, struct sq_limit *limit, int64_t now_ms,
                               bool *changed)
{
    if (limit->deleted || limit->state.status != LIMIT_DECREASING)
        return SQLITE_DONE;
    const struct sq_period *p = limit->periods[0];
    uint64_t target = limit->state.pending_decrease_to;
    if (p->reserved + p->used > target)
        return SQLITE_DONE;
    assert(target >= 1);
    assert(target < limit->state.definition.capacity);
    char detail[DETAIL_BYTES_MAX];
    snprintf(detail, sizeof detail, "decrease applied: capacity %llu -> %llu",
             (unsigned long long)limit->state.definition.capacity, (unsigned long long)target);
    limit->state.definition.capacity = target;
    limit->state.status = LIMIT_ACTIVE;
    limit->state.pending_decrease_to = 0;
    *changed = true;
    sq_mirror_freed(&backend->mirror, limit); /* reserves may wait no more for it */
    return limit_write(backend, limit, SQ_STMT_LIMIT_UPDATE, now_ms, detail);
}

/* ---- Retention (--sqlite-retention-days). */

/* Runs a statement with up to three integer parameters; SQLITE_DONE or an error. */
static int exec_ints(sqlite3 *db, const char *sql, int64_t a, int64_t b, int64_t c)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return sqlite3_errcode(db);
    int params = sqlite3_bind_parameter_count(stmt);
    const int64_t values[3] = {a, b, c};
    for (int i = 0; i < params && i < 3; i++)
        sqlite3_bind_int64(stmt, i + 1, values[i]);
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

/* The last id of the oldest run of rows (at most SQ_PRUNE_ROWS_PER_TICK)
 * whose time is before cutoff and id below `below`; 0 when there is none. A
 * run stops at the first young row, so a clock that stepped back never gets
 * a young row deleted. */
static int prune_prefix(sqlite3 *db, const char *sql, int64_t cutoff_ms, int64_t below,
                        int64_t *last)
{
    sqlite3_stmt *stmt = NULL;
    *last = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return sqlite3_errcode(db);
    sqlite3_bind_int(stmt, 1, SQ_PRUNE_ROWS_PER_TICK);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(stmt, 0);
        if (sqlite3_column_int64(stmt, 1) >= cutoff_ms || id >= below) {
            rc = SQLITE_DONE;
            break;
        }
        *last = id;
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* Deletes leases and audit rows older than the retention, oldest first, a
 * bounded number per tick: never a lease that may still hold capacity (seq
 * at or above the live watermark) or answer retries (lease_retention_ms). */
static int prune(struct sq_backend *backend, int64_t now_ms)
{
    int64_t keep = backend->options.retention_ms;
    if (keep <= 0)
        return SQLITE_DONE;
    if (keep < backend->config.lease_retention_ms)
        keep = backend->config.lease_retention_ms;
    int64_t cutoff = now_ms - keep;
    assert(cutoff < now_ms);
    int rc = sq_leases_flush(backend); /* nothing of this transaction stays cached */
    int64_t last_lease = 0, last_event = 0;
    if (rc == SQLITE_DONE)
        rc = prune_prefix(backend->db, "SELECT seq, created_at FROM leases ORDER BY seq LIMIT ?",
                          cutoff, sq_mirror_live_from(&backend->mirror), &last_lease);
    if (rc == SQLITE_DONE && last_lease > 0)
        rc = exec_ints(backend->db, "DELETE FROM leases WHERE seq <= ?", last_lease, 0, 0);
    if (rc == SQLITE_DONE && last_lease > 0)
        rc = exec_ints(backend->db, "DELETE FROM expirations WHERE row_id < ?",
                       sq_hold_row_id(last_lease + 1, 0), 0, 0);
    if (rc == SQLITE_DONE)
        rc = prune_prefix(backend->db, "SELECT id, at FROM event_log ORDER BY id LIMIT ?", cutoff,
                          INT64_MAX, &last_event);
    if (rc == SQLITE_DONE && last_event > 0)
        rc = exec_ints(backend->db, "DELETE FROM event_log WHERE id <= ?", last_event, 0, 0);
    /* Key ranges wholly below the first event row left (key by key: the
     * table is ordered by key, then first row). */
    if (rc == SQLITE_DONE && last_event > 0)
        rc = exec_ints(backend->db,
                       "DELETE FROM event_keys WHERE (key, first_event) IN ("
                       " SELECT k.key, k.first_event FROM (SELECT DISTINCT key FROM limits) l"
                       " JOIN event_keys k ON k.key = l.key AND k.first_event <= ?1"
                       " WHERE k.last_event <= ?1)",
                       last_event, 0, 0);
    return rc;
}

static int tick_run(struct sq_backend *backend, struct sq_call *call)
{
    struct tick_args *args = call->args;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    uint64_t budget = SQ_EXPIRIES_PER_TICK_MAX;
    const struct sq_map *ids = &backend->mirror.limits_by_id;
    for (uint32_t i = 0; i < ids->capacity; i++) {
        struct sq_limit *limit = ids->slots[i].value;
        if (limit == NULL)
            continue;
        int rc = sq_ledger_expire(backend, limit, now_ms, &budget);
        if (rc == SQLITE_DONE)
            rc = sq_mirror_flush(backend);
        if (rc == SQLITE_DONE)
            rc = decrease_if_covered(backend, limit, now_ms, &args->limits_changed);
        if (rc != SQLITE_DONE)
            return rc;
        sq_mirror_trim_periods(limit, now_ms);
    }
    assert(budget <= SQ_EXPIRIES_PER_TICK_MAX);
    /* Loading starts from here: no lease below it holds anything. */
    int rc = sq_leases_flush(backend);
    if (rc == SQLITE_DONE)
        rc = prune(backend, now_ms);
    if (rc != SQLITE_DONE)
        return rc;
    sqlite3_stmt *meta = sq_statement(backend, SQ_STMT_META_PUT);
    sqlite3_bind_text(meta, 1, "live_from_seq", -1, SQLITE_STATIC);
    sqlite3_bind_int64(meta, 2, sq_mirror_live_from(&backend->mirror));
    return sq_statement_run(meta);
}

int sq_admin_tick(struct backend *base, bool *limits_changed)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct tick_args args = {0};
    *limits_changed = false;
    if (sq_writer_call(backend, tick_run, &args) != 0)
        return -1;
    *limits_changed = args.limits_changed;
    return 0;
}

static void text_copy(sqlite3_stmt *stmt, int column, char *out, size_t size)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);
    snprintf(out, size, "%s", text ? (const char *)text : "");
}

/* ---- Per-caller usage. */

struct callers_args {
    const char *key;
    int64_t at_unix_ms;
    struct caller_usage *rows;
    size_t count;
    enum backend_admin_result result;
};

static const char callers_budget_sql[] =
    "SELECT caller,reserved,used,debt,calls FROM caller_usage WHERE limit_id=?1 AND "
    "period_start=?2 AND (reserved<>0 OR used<>0 OR debt<>0 OR calls<>0) "
    "ORDER BY used+debt DESC, reserved DESC, caller LIMIT ?3";
static const char callers_window_sql[] =
    "SELECT caller, SUM(CASE WHEN state='reserved' THEN held ELSE 0 END) AS reserved_sum,"
    " SUM(CASE WHEN state='reserved' THEN 0 ELSE held END) AS used_sum, SUM(debt) AS debt_sum,"
    " COUNT(*) FROM ("
    "  SELECT l.caller AS caller, json_extract(j.value,'$[2]') AS state,"
    "   json_extract(j.value,'$[4]') AS held, json_extract(j.value,'$[5]') AS debt"
    "  FROM leases l, json_each(l.items) j WHERE l.seq >= ?2 AND l.live = 1"
    "   AND json_extract(j.value,'$[0]') = ?1 AND json_extract(j.value,'$[6]') = 1"
    "   AND NOT EXISTS (SELECT 1 FROM expirations x WHERE x.row_id = l.seq * " STR(
        REQUIREMENTS_PER_RESERVE_MAX) " + j.key))"
                                      " GROUP BY caller ORDER BY used_sum+debt_sum DESC,"
                                      " reserved_sum DESC, caller LIMIT ?3";

static int callers_fill(sqlite3_stmt *stmt, struct callers_args *args)
{
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW && args->count < SQ_CALLERS_MAX) {
        struct caller_usage *u = &args->rows[args->count++];
        memset(u, 0, sizeof *u);
        text_copy(stmt, 0, u->caller, sizeof u->caller);
        u->reserved = (uint64_t)sqlite3_column_int64(stmt, 1);
        u->used = (uint64_t)sqlite3_column_int64(stmt, 2);
        u->debt = (uint64_t)sqlite3_column_int64(stmt, 3);
        u->calls = (uint64_t)sqlite3_column_int64(stmt, 4);
    }
    assert(args->count <= SQ_CALLERS_MAX); /* the room made for the rows */
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

static int callers_run(struct sq_backend *backend, struct sq_call *call)
{
    struct callers_args *args = call->args;
    struct sq_limit *limit = sq_mirror_limit_for_admin(&backend->mirror, args->key, &args->result);
    if (limit == NULL)
        return SQLITE_DONE;
    int rc = sq_ledger_expire(backend, limit, clock_now_ms(backend->config.clock), NULL);
    if (rc != SQLITE_DONE || (rc = sq_leases_flush(backend)) != SQLITE_DONE ||
        (rc = sq_mirror_flush(backend)) != SQLITE_DONE)
        return rc;
    const struct limit_definition *d = &limit->state.definition;
    bool budget = d->kind == LIMIT_BUDGET;
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(backend->db, budget ? callers_budget_sql : callers_window_sql, -1, &stmt,
                           NULL) != SQLITE_OK)
        return sqlite3_errcode(backend->db);
    sqlite3_bind_int64(stmt, 1, limit->id);
    sqlite3_bind_int64(stmt, 2,
                       budget ? period_span_at(d, args->at_unix_ms).start_ms
                              : sq_mirror_live_from(&backend->mirror));
    sqlite3_bind_int(stmt, 3, SQ_CALLERS_MAX);
    free(args->rows);
    args->count = 0;
    args->rows = malloc(SQ_CALLERS_MAX * sizeof *args->rows);
    rc = args->rows == NULL ? SQLITE_NOMEM : callers_fill(stmt, args);
    sqlite3_finalize(stmt);
    return rc;
}

enum backend_admin_result sq_admin_usage_by_caller(struct backend *base, const char *key,
                                                   int64_t at_unix_ms, struct caller_usage **out,
                                                   size_t *count)
{
    struct sq_backend *backend = sq_backend_of(base);
    struct callers_args args = {.key = key, .at_unix_ms = at_unix_ms};
    if (sq_writer_call(backend, callers_run, &args) != 0) {
        free(args.rows);
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    if (args.result != BACKEND_ADMIN_OK) {
        free(args.rows);
        return args.result;
    }
    *out = args.rows;
    *count = args.count;
    return BACKEND_ADMIN_OK;
}

/* ---- Audit log reads: committed events only, on the read connection. */

/* The audit log: event_log rows (id, lease_id, caller, items) in id order,
 * each packing up to SQ_EVENT_ITEMS events (event id = row id *
 * SQ_EVENT_ITEMS + index), with the MCP server and tool of a tool call's
 * lease (rows of one lease; the `expired` rows of several name none). A
 * key's rows are found through its event_keys ranges, a lease's through its
 * event_rows list and the expirations of its holds. */
static const char events_rows_sql[] =
    "SELECT e.id, e.lease_id, e.caller, e.items, l.mcp_server, l.tool FROM event_log e"
    " LEFT JOIN leases l ON l.seq = e.lease_seq WHERE e.id BETWEEN ?1 AND ?2 ORDER BY e.id";
static const char events_ranges_sql[] =
    "SELECT first_event, last_event FROM event_keys WHERE key = ?1 AND last_event >= ?2"
    " ORDER BY first_event";
static const char events_lease_sql[] = "SELECT seq, event_rows FROM leases WHERE lease_id = ?1";
static const char events_expired_sql[] =
    "SELECT DISTINCT event_id FROM expirations WHERE row_id BETWEEN ?1 AND ?2"
    " AND event_id IS NOT NULL ORDER BY event_id";

#define EVENT_KEYS_CACHED 16

struct events_read {
    sqlite3 *db;
    const struct event_query *query;
    struct backend_event *out;
    size_t count;
    sqlite3_stmt *rows;
    sqlite3_stmt *key_of; /* a limit's key by id */
    /* The keys of the last limits seen (events store the limit's id). */
    int64_t cached_ids[EVENT_KEYS_CACHED];
    char cached_keys[EVENT_KEYS_CACHED][LIMIT_KEY_LENGTH_MAX + 1];
    uint32_t cached;
    uint32_t next_slot;
};

/* The key of a limit (every incarnation keeps its row), "" if unknown. */
static const char *event_key(struct events_read *r, int64_t limit_id)
{
    for (uint32_t i = 0; i < r->cached; i++) {
        if (r->cached_ids[i] == limit_id)
            return r->cached_keys[i];
    }
    uint32_t slot = r->next_slot;
    r->next_slot = (r->next_slot + 1) % EVENT_KEYS_CACHED;
    if (r->cached < EVENT_KEYS_CACHED)
        r->cached++;
    r->cached_ids[slot] = limit_id;
    r->cached_keys[slot][0] = '\0';
    sqlite3_reset(r->key_of);
    sqlite3_bind_int64(r->key_of, 1, limit_id);
    if (sqlite3_step(r->key_of) == SQLITE_ROW)
        text_copy(r->key_of, 0, r->cached_keys[slot], sizeof r->cached_keys[slot]);
    sqlite3_reset(r->key_of);
    return r->cached_keys[slot];
}

/* Appends the row's events after after_id (of the key and lease, if asked). */
static int events_expand(struct events_read *r)
{
    const struct event_query *query = r->query;
    sqlite3_stmt *stmt = r->rows;
    int64_t row = sqlite3_column_int64(stmt, 0);
    const unsigned char *items = sqlite3_column_text(stmt, 3);
    const unsigned char *row_lease = sqlite3_column_text(stmt, 1);
    struct sq_event_reader reader;
    sq_event_reader_start(&reader, items != NULL ? (const char *)items : "");
    struct sq_event_item_text item;
    int got;
    for (int64_t index = 0; (got = sq_event_reader_next(&reader, &item)) == 1; index++) {
        int64_t id = row * SQ_EVENT_ITEMS + index;
        const char *lease_id = item.has_lease      ? item.lease_id
                               : row_lease != NULL ? (const char *)row_lease
                                                   : "";
        if (id <= query->after_id ||
            (query->lease_id != NULL && strcmp(lease_id, query->lease_id) != 0))
            continue;
        const char *key = event_key(r, item.limit_id);
        if (query->key != NULL && strcmp(key, query->key) != 0)
            continue;
        if (r->count == query->limit)
            return 0;
        assert(r->count < query->limit); /* out has room for a page */
        struct backend_event *e = &r->out[r->count++];
        memset(e, 0, sizeof *e);
        e->id = id;
        e->at_unix_ms = item.at_ms;
        snprintf(e->type, sizeof e->type, "%s", item.type);
        snprintf(e->lease_id, sizeof e->lease_id, "%s", lease_id);
        snprintf(e->key, sizeof e->key, "%s", key);
        if (item.has_lease)
            snprintf(e->caller, sizeof e->caller, "%s", item.caller);
        else
            text_copy(stmt, 2, e->caller, sizeof e->caller);
        e->amount = item.amount;
        e->actual_amount = item.actual;
        snprintf(e->detail, sizeof e->detail, "%s", item.detail);
        if (!item.has_lease) {
            text_copy(stmt, 4, e->mcp_server, sizeof e->mcp_server);
            text_copy(stmt, 5, e->tool, sizeof e->tool);
        }
    }
    return got == 0 ? 0 : -2;
}

/* Expands rows first..last (ids) until the page is full. */
static int events_from_rows(struct events_read *r, int64_t first, int64_t last)
{
    int64_t from = r->query->after_id < 0 ? 0 : r->query->after_id / SQ_EVENT_ITEMS;
    if (first < from)
        first = from;
    if (first > last)
        return 0;
    sqlite3_reset(r->rows);
    sqlite3_bind_int64(r->rows, 1, first);
    sqlite3_bind_int64(r->rows, 2, last);
    int rc;
    while (r->count < r->query->limit && (rc = sqlite3_step(r->rows)) == SQLITE_ROW) {
        if (events_expand(r) != 0)
            return -2;
    }
    return r->count == r->query->limit || rc == SQLITE_DONE ? 0 : -2;
}

static int events_by_key(struct events_read *r)
{
    sqlite3_stmt *ranges = NULL;
    if (sqlite3_prepare_v2(r->db, events_ranges_sql, -1, &ranges, NULL) != SQLITE_OK)
        return -2;
    sqlite3_bind_text(ranges, 1, r->query->key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ranges, 2, r->query->after_id < 0 ? 0 : r->query->after_id / SQ_EVENT_ITEMS);
    int rc = 0, step;
    while (rc == 0 && r->count < r->query->limit && (step = sqlite3_step(ranges)) == SQLITE_ROW)
        rc = events_from_rows(r, sqlite3_column_int64(ranges, 0), sqlite3_column_int64(ranges, 1));
    if (rc == 0 && r->count < r->query->limit && step != SQLITE_DONE)
        rc = -2;
    sqlite3_finalize(ranges);
    return rc;
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

struct ids {
    int64_t *ids;
    size_t count;
    size_t capacity;
};

static bool ids_push(struct ids *list, int64_t id)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity == 0 ? 8 : list->capacity * 2;
        int64_t *grown = realloc(list->ids, capacity * sizeof *grown);
        if (grown == NULL)
            return false;
        list->ids = grown;
        list->capacity = capacity;
    }
    list->ids[list->count++] = id;
    return true;
}

/* A lease's rows: its own (event_rows) and its expiries' shared ones. */
static int events_by_lease(struct events_read *r)
{
    sqlite3_stmt *lease = NULL, *expired = NULL;
    struct ids list = {0};
    int rc = -2;
    if (sqlite3_prepare_v2(r->db, events_lease_sql, -1, &lease, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(r->db, events_expired_sql, -1, &expired, NULL) != SQLITE_OK)
        goto done;
    sqlite3_bind_text(lease, 1, r->query->lease_id, -1, SQLITE_STATIC);
    int step = sqlite3_step(lease);
    if (step == SQLITE_DONE) {
        rc = 0; /* unknown lease: no events */
        goto done;
    }
    if (step != SQLITE_ROW)
        goto done;
    int64_t seq = sqlite3_column_int64(lease, 0);
    const unsigned char *text = sqlite3_column_text(lease, 1);
    for (const char *at = text != NULL ? (const char *)text : ""; *at != '\0';) {
        char *end = NULL;
        long long id = strtoll(at, &end, 10);
        if (end == at || !ids_push(&list, id))
            goto done;
        at = *end == ',' ? end + 1 : end;
    }
    sqlite3_bind_int64(expired, 1, sq_hold_row_id(seq, 0));
    sqlite3_bind_int64(expired, 2, sq_hold_row_id(seq, SQ_LEASE_ITEMS - 1));
    while ((step = sqlite3_step(expired)) == SQLITE_ROW) {
        if (!ids_push(&list, sqlite3_column_int64(expired, 0)))
            goto done;
    }
    if (step != SQLITE_DONE)
        goto done;
    if (list.count > 0)
        qsort(list.ids, list.count, sizeof *list.ids, compare_i64);
    rc = 0;
    for (size_t i = 0; rc == 0 && i < list.count && r->count < r->query->limit; i++) {
        if (i > 0 && list.ids[i] == list.ids[i - 1])
            continue;
        rc = events_from_rows(r, list.ids[i], list.ids[i]);
    }
done:
    free(list.ids);
    sqlite3_finalize(lease);
    sqlite3_finalize(expired);
    return rc;
}

static int events_query(sqlite3 *db, const struct event_query *query, struct backend_event *out,
                        size_t *count)
{
    struct events_read r = {.db = db, .query = query, .out = out};
    if (sqlite3_prepare_v2(db, events_rows_sql, -1, &r.rows, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT key FROM limits WHERE id = ?", -1, &r.key_of, NULL) !=
            SQLITE_OK) {
        sqlite3_finalize(r.rows);
        return -2;
    }
    int rc = query->lease_id != NULL ? events_by_lease(&r)
             : query->key != NULL    ? events_by_key(&r)
                                     : events_from_rows(&r, 0, INT64_MAX);
    sqlite3_finalize(r.rows);
    sqlite3_finalize(r.key_of);
    *count = r.count;
    return rc;
}

enum backend_admin_result sq_admin_events(struct backend *base, const struct event_query *query,
                                          struct backend_event **out, size_t *count)
{
    struct sq_backend *backend = sq_backend_of(base);
    assert(query->limit >= 1);
    assert(query->limit <= EVENTS_PAGE_MAX);
    struct backend_event *events = malloc(query->limit * sizeof *events);
    if (events == NULL)
        return BACKEND_ADMIN_UNAVAILABLE;
    pthread_mutex_lock(&backend->read_mutex);
    int rc = events_query(backend->read_db, query, events, count);
    pthread_mutex_unlock(&backend->read_mutex);
    if (rc != 0) {
        free(events);
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    assert(*count <= query->limit);
    *out = events;
    return BACKEND_ADMIN_OK;
}
