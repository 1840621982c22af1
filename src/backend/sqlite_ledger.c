/* The sqlite backend's data path: reserve, complete and release of one
 * request, decided on the writer's mirror and written to the tables (rows,
 * audit events; counters once per transaction). A return other than
 * SQLITE_DONE is an SQL or memory error: the writer redoes the transaction
 * without this request. */
#include "sqlite_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FINGERPRINT_BYTES_MAX (REQUIREMENTS_PER_RESERVE_MAX * (LIMIT_KEY_LENGTH_MAX + 24))
#define DENIED_TEXT_BYTES_MAX (REQUIREMENTS_PER_RESERVE_MAX * (LIMIT_KEY_LENGTH_MAX + 1) + 1)
#define WARNING_BYTES_MAX (LIMIT_KEY_LENGTH_MAX + 32)
#define WARNINGS_BYTES_MAX (REQUIREMENTS_PER_RESERVE_MAX * 2 * WARNING_BYTES_MAX)

/* A lease row as read back. */
struct lease {
    char state[16];
    char fingerprint[FINGERPRINT_BYTES_MAX];
    char caller[CALLER_LENGTH_MAX + 1];
    int64_t reserved_at_ms;
    int64_t expires_at_ms;
    int64_t first_row;
    int64_t row_count;
    int64_t retry_after_ms;
    char denied[DENIED_TEXT_BYTES_MAX];
    bool forgotten; /* known, but older than lease_retention_ms */
};

/* A reservation row as read back. */
struct row {
    int64_t id;
    int64_t limit_id;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    uint64_t amount;
    char state[32];
    int64_t period_start_ms;
    int64_t expires_at_ms;
};

static uint64_t add_capped(uint64_t a, uint64_t b)
{
    uint64_t sum;
    if (!amount_add(a, b, &sum) || sum > AMOUNT_MAX)
        return AMOUNT_MAX;
    return sum;
}

static int64_t i64(uint64_t amount)
{
    assert(amount <= AMOUNT_MAX);
    return (int64_t)amount;
}

static void bind_text(sqlite3_stmt *stmt, int index, const char *text)
{
    sqlite3_bind_text(stmt, index, text, -1, SQLITE_STATIC);
}

int ledger_event(struct backend *backend, int64_t at_ms, const char *type, const char *lease_id,
                 const struct limit *limit, const char *caller, uint64_t amount,
                 uint64_t actual_amount, const char *detail)
{
    sqlite3_stmt *stmt = statement(backend, STMT_EVENT_INSERT);
    sqlite3_bind_int64(stmt, 1, at_ms);
    bind_text(stmt, 2, type);
    if (lease_id != NULL)
        bind_text(stmt, 3, lease_id);
    else
        sqlite3_bind_null(stmt, 3);
    sqlite3_bind_int64(stmt, 4, limit->id);
    bind_text(stmt, 5, limit->state.definition.key);
    bind_text(stmt, 6, caller != NULL ? caller : "");
    sqlite3_bind_int64(stmt, 7, i64(amount));
    sqlite3_bind_int64(stmt, 8, i64(actual_amount));
    bind_text(stmt, 9, detail != NULL ? detail : "");
    return statement_run(stmt);
}

static int caller_add(struct backend *backend, const struct limit *limit, int64_t period_start_ms,
                      const char *caller, int64_t reserved, int64_t used, int64_t debt)
{
    if (limit->state.definition.kind != LIMIT_BUDGET)
        return SQLITE_DONE;
    sqlite3_stmt *stmt = statement(backend, STMT_CALLER_ADD);
    sqlite3_bind_int64(stmt, 1, limit->id);
    sqlite3_bind_int64(stmt, 2, period_start_ms);
    bind_text(stmt, 3, caller);
    sqlite3_bind_int64(stmt, 4, reserved);
    sqlite3_bind_int64(stmt, 5, used);
    sqlite3_bind_int64(stmt, 6, debt);
    return statement_run(stmt);
}

static void column_copy(sqlite3_stmt *stmt, int column, char *out, size_t size)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);
    snprintf(out, size, "%s", text ? (const char *)text : "");
}

/* True while one of the lease's rows (ids first..last) still holds capacity. */
static bool lease_holding(struct backend *backend, int64_t first_row, int64_t row_count,
                          int64_t now_ms)
{
    if (row_count <= 0)
        return false;
    sqlite3_stmt *stmt = statement(backend, STMT_LEASE_HOLDING);
    sqlite3_bind_int64(stmt, 1, first_row);
    sqlite3_bind_int64(stmt, 2, first_row + row_count - 1);
    sqlite3_bind_int64(stmt, 3, now_ms);
    bool holding = sqlite3_step(stmt) == SQLITE_ROW;
    sqlite3_reset(stmt);
    return holding;
}

/* SQLITE_ROW when found (filled), SQLITE_DONE when unknown, else an error.
 * A lease is forgotten, as in every backend, once it is older than
 * lease_retention_ms and none of its holds is live any more (a retry while a
 * hold lives must never reserve twice): SQLITE_DONE with out->forgotten set. */
static int lease_get(struct backend *backend, const char *lease_id, struct lease *out)
{
    sqlite3_stmt *stmt = statement(backend, STMT_LEASE_GET);
    bind_text(stmt, 1, lease_id);
    int rc = sqlite3_step(stmt);
    out->forgotten = false;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    if (rc == SQLITE_ROW && backend->config.lease_retention_ms > 0 &&
        sqlite3_column_int64(stmt, 9) <= now_ms - backend->config.lease_retention_ms &&
        !lease_holding(backend, sqlite3_column_int64(stmt, 5), sqlite3_column_int64(stmt, 6),
                       now_ms)) {
        out->forgotten = true;
        rc = SQLITE_DONE;
    }
    if (rc == SQLITE_ROW) {
        column_copy(stmt, 0, out->state, sizeof out->state);
        column_copy(stmt, 1, out->fingerprint, sizeof out->fingerprint);
        column_copy(stmt, 2, out->caller, sizeof out->caller);
        out->reserved_at_ms = sqlite3_column_int64(stmt, 3);
        out->expires_at_ms = sqlite3_column_int64(stmt, 4);
        out->first_row = sqlite3_column_int64(stmt, 5);
        out->row_count = sqlite3_column_int64(stmt, 6);
        out->retry_after_ms = sqlite3_column_int64(stmt, 7);
        column_copy(stmt, 8, out->denied, sizeof out->denied);
    }
    sqlite3_reset(stmt);
    return rc;
}

static int lease_finish(struct backend *backend, const char *lease_id, const char *state,
                        int64_t now_ms)
{
    sqlite3_stmt *stmt = statement(backend, STMT_LEASE_FINISH);
    bind_text(stmt, 1, state);
    sqlite3_bind_int64(stmt, 2, now_ms);
    bind_text(stmt, 3, lease_id);
    return statement_run(stmt);
}

/* Reads the lease's reservation rows (at most REQUIREMENTS_PER_RESERVE_MAX). */
static int rows_get(struct backend *backend, const struct lease *lease, struct row *rows,
                    uint32_t *count)
{
    assert(lease->row_count >= 0 && lease->row_count <= REQUIREMENTS_PER_RESERVE_MAX);
    sqlite3_stmt *stmt = statement(backend, STMT_ROWS_GET);
    sqlite3_bind_int64(stmt, 1, lease->first_row);
    sqlite3_bind_int64(stmt, 2, lease->first_row + lease->row_count - 1);
    int rc;
    *count = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW && *count < REQUIREMENTS_PER_RESERVE_MAX) {
        struct row *r = &rows[(*count)++];
        r->id = sqlite3_column_int64(stmt, 0);
        r->limit_id = sqlite3_column_int64(stmt, 1);
        column_copy(stmt, 2, r->key, sizeof r->key);
        r->amount = (uint64_t)sqlite3_column_int64(stmt, 3);
        column_copy(stmt, 4, r->state, sizeof r->state);
        r->period_start_ms = sqlite3_column_int64(stmt, 5);
        r->expires_at_ms = sqlite3_column_int64(stmt, 6);
    }
    sqlite3_reset(stmt);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = (int64_t)*count == lease->row_count ? SQLITE_DONE : SQLITE_CORRUPT;
    return rc;
}

static int row_settle(struct backend *backend, int64_t row_id, const char *state,
                      const uint64_t *actual, uint64_t held, uint64_t debt, int64_t committed_at)
{
    sqlite3_stmt *stmt = statement(backend, STMT_ROW_SETTLE);
    bind_text(stmt, 1, state);
    if (actual != NULL)
        sqlite3_bind_int64(stmt, 2, i64(*actual));
    else
        sqlite3_bind_null(stmt, 2);
    sqlite3_bind_int64(stmt, 3, i64(held));
    sqlite3_bind_int64(stmt, 4, i64(debt));
    sqlite3_bind_int(stmt, 5, held > 0 || debt > 0);
    if (committed_at != 0)
        sqlite3_bind_int64(stmt, 6, committed_at);
    else
        sqlite3_bind_null(stmt, 6);
    sqlite3_bind_int64(stmt, 7, row_id);
    return statement_run(stmt);
}

/* The live hold of a row, NULL when it expired or was freed. A hold that is
 * due but not yet expired is expired here first, so the row's story in the
 * audit log (expired, then committed_post_expiry) is the true one. */
static int live_hold(struct backend *backend, const struct limit *limit, const struct row *row,
                     int64_t now_ms, struct period **period, struct hold **out)
{
    *out = NULL;
    *period = mirror_period_find(limit, row->period_start_ms);
    if (*period == NULL)
        return SQLITE_DONE;
    struct hold *h = holds_find((*period)->holds, row->expires_at_ms, row->id);
    if (h != NULL && h->expires_at_ms <= now_ms)
        return mirror_expire_hold(backend, *period, h, now_ms);
    *out = h;
    return SQLITE_DONE;
}

static void hold_drop(struct backend *backend, struct period *p, struct hold *h)
{
    struct hold *removed = NULL;
    p->holds = holds_remove(p->holds, h->expires_at_ms, h->row_id, &removed);
    assert(removed == h);
    p->hold_count--;
    backend->mirror.hold_count--;
    mirror_touch(&backend->mirror, p);
}

/* ---- Reserve. */

struct reserve_plan {
    struct limit *limits[REQUIREMENTS_PER_RESERVE_MAX];
    struct period *periods[REQUIREMENTS_PER_RESERVE_MAX];
    char fingerprint[FINGERPRINT_BYTES_MAX];
    char denied[DENIED_TEXT_BYTES_MAX];
};

/* Buffers too large for the stack, used by the writer thread only. */
struct ledger_scratch {
    struct reserve_plan plan;
    struct lease lease;
    struct row rows[REQUIREMENTS_PER_RESERVE_MAX];
    char warnings[WARNINGS_BYTES_MAX];
};

struct ledger_scratch *ledger_scratch_new(void)
{
    return malloc(sizeof(struct ledger_scratch));
}

static const struct reserve_request *sort_request;

static int requirement_order(const void *a, const void *b)
{
    const struct requirement *r = sort_request->requirements;
    return strcmp(r[*(const uint8_t *)a].key, r[*(const uint8_t *)b].key);
}

/* The set of (key, amount) pairs in one canonical text, for lease_conflict. */
static void fingerprint(const struct reserve_request *request, char *out, size_t size)
{
    uint8_t order[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < request->requirement_count; i++)
        order[i] = (uint8_t)i;
    sort_request = request; /* writer thread only */
    qsort(order, request->requirement_count, sizeof order[0], requirement_order);
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[order[i]];
        int n =
            snprintf(out + used, size - used, "%llu %s\n", (unsigned long long)r->amount, r->key);
        assert(n > 0 && (size_t)n < size - used);
        used += (size_t)n;
    }
}

/* Errors that are not recorded against the lease (backend.h). */
static bool definitive_error(struct backend *backend, const struct reserve_request *request,
                             struct reserve_plan *plan, struct reserve_result *result)
{
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[i];
        struct limit *limit = mirror_limit_by_key(&backend->mirror, r->key);
        plan->limits[i] = limit;
        if (limit == NULL) {
            snprintf(result->error, sizeof result->error, "unknown_limit_key: %s", r->key);
            return true;
        }
        if (limit->state.status == LIMIT_DECREASING) {
            snprintf(result->error, sizeof result->error, "limit_decreasing:%s", r->key);
            result->retry_after_ms = backend->config.decrease_retry_ms;
            return true;
        }
        if (r->amount > limit->state.definition.capacity) {
            snprintf(result->error, sizeof result->error, "exceeds_capacity:%s", r->key);
            return true;
        }
    }
    return false;
}

static uint64_t period_total(const struct period *p)
{
    return add_capped(add_capped(p->reserved, p->used), p->debt);
}

static int64_t jittered(struct backend *backend, int64_t ms)
{
    /* xorshift64: retry jitter only, never accounting. */
    uint64_t x = backend->random_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    backend->random_state = x;
    int64_t spread = ms / 5; /* +-20% */
    if (spread == 0)
        return ms;
    return ms - spread + (int64_t)(x % (uint64_t)(2 * spread + 1));
}

/* SPEC section 5, for one requirement that does not fit. */
static int64_t retry_after(struct backend *backend, const struct limit *limit,
                           const struct period *p, uint64_t amount, int64_t now_ms)
{
    const struct limit_definition *d = &limit->state.definition;
    uint64_t blocking = d->kind == LIMIT_BUDGET ? period_total(p) : p->reserved + p->used;
    uint64_t need = add_capped(blocking, amount) - d->capacity;
    if (d->kind == LIMIT_CONCURRENCY) {
        const struct hold *first = holds_first(p->holds);
        int64_t poll = jittered(backend, backend->config.concurrency_poll_ms);
        if (first == NULL)
            return poll;
        int64_t wait = first->expires_at_ms - now_ms;
        return wait < poll ? wait : poll;
    }
    const struct hold *reaching = holds_reaching(p->holds, need);
    if (reaching != NULL)
        return reaching->expires_at_ms - now_ms;
    if (d->kind == LIMIT_BUDGET)
        return period_end_ms(d->period, now_ms) - now_ms;
    return limit_hold_duration_ms(d); /* not reached: rolling holds cover the excess */
}

static bool fits(const struct period *p, const struct limit_definition *d, uint64_t amount)
{
    uint64_t blocking = d->kind == LIMIT_BUDGET ? period_total(p) : p->reserved + p->used;
    return add_capped(blocking, amount) <= d->capacity;
}

/* Finds which requirements do not fit; fills denied_index and retry_after. */
static int decide(struct backend *backend, const struct reserve_request *request,
                  struct reserve_plan *plan, struct reserve_result *result, int64_t now_ms)
{
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        struct limit *limit = plan->limits[i];
        const struct limit_definition *d = &limit->state.definition;
        /* Due holds still counted only make the check stricter: expire a
         * few to keep up, and all of them only when the request does not
         * fit without it (a backlog after a pause never stalls a batch). */
        uint64_t few = SQLITE_EXPIRIES_PER_REQUEST;
        int rc = mirror_expire(backend, limit, now_ms, &few);
        if (rc != SQLITE_DONE)
            return rc;
        int64_t start = d->kind == LIMIT_BUDGET ? period_start_ms(d->period, now_ms) : 0;
        struct period *p = mirror_period(backend, limit, start);
        if (p == NULL)
            return SQLITE_NOMEM;
        plan->periods[i] = p;
        if (fits(p, d, request->requirements[i].amount))
            continue;
        if ((rc = mirror_expire(backend, limit, now_ms, NULL)) != SQLITE_DONE)
            return rc;
        if (fits(p, d, request->requirements[i].amount))
            continue;
        result->denied_index[result->denied_count++] = (uint8_t)i;
        int64_t wait = retry_after(backend, limit, p, request->requirements[i].amount, now_ms);
        if (wait > result->retry_after_ms)
            result->retry_after_ms = wait;
    }
    return SQLITE_DONE;
}

/* The denied keys, one per line: a retry may list its requirements in
 * another order, and its denied_index must follow that order. */
static void denied_text(const struct reserve_request *request, const struct reserve_result *result,
                        char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < result->denied_count; i++) {
        int n = snprintf(out + used, size - used, "%s\n",
                         request->requirements[result->denied_index[i]].key);
        assert(n > 0 && (size_t)n < size - used);
        used += (size_t)n;
    }
}

static void denied_parse(const char *text, const struct reserve_request *request,
                         struct reserve_result *result)
{
    result->denied_count = 0;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const char *key = request->requirements[i].key;
        size_t length = strlen(key);
        for (const char *line = text; *line != '\0';) {
            const char *end = strchr(line, '\n');
            size_t line_length = end != NULL ? (size_t)(end - line) : strlen(line);
            if (line_length == length && memcmp(line, key, length) == 0) {
                result->denied_index[result->denied_count++] = (uint8_t)i;
                break;
            }
            line = end != NULL ? end + 1 : line + line_length;
        }
    }
}

/* Answers a known lease (just read into `lease`) again, or lease_conflict. */
static int replay(const struct lease *lease, const struct reserve_request *request,
                  const char *fingerprint_text, struct reserve_result *result)
{
    memset(result, 0, sizeof *result);
    if (strcmp(lease->fingerprint, fingerprint_text) != 0) {
        result->status = RESULT_CONFLICT;
        snprintf(result->error, sizeof result->error, "lease_conflict");
        return SQLITE_DONE;
    }
    result->status = RESULT_OK;
    if (strcmp(lease->state, "denied") == 0) {
        result->retry_after_ms = lease->retry_after_ms;
        denied_parse(lease->denied, request, result);
        return SQLITE_DONE;
    }
    result->allowed = true;
    result->reserved_at_unix_ms = lease->reserved_at_ms;
    result->expires_at_unix_ms = lease->expires_at_ms;
    return SQLITE_DONE;
}

/* Inserts the lease record; *inserted false when the lease was known. */
static int lease_insert(struct backend *backend, const struct reserve_request *request,
                        const struct reserve_plan *plan, const struct reserve_result *result,
                        int64_t now_ms, bool *inserted)
{
    sqlite3_stmt *stmt = statement(backend, STMT_LEASE_INSERT);
    bind_text(stmt, 1, request->lease_id);
    bind_text(stmt, 2, result->allowed ? "allowed" : "denied");
    bind_text(stmt, 3, plan->fingerprint);
    bind_text(stmt, 4, request->caller != NULL ? request->caller : "");
    sqlite3_bind_int64(stmt, 5, result->reserved_at_unix_ms);
    sqlite3_bind_int64(stmt, 6, result->expires_at_unix_ms);
    sqlite3_bind_int64(stmt, 7, backend->mirror.next_row_id);
    sqlite3_bind_int64(stmt, 8, result->allowed ? request->requirement_count : 0);
    sqlite3_bind_int64(stmt, 9, result->retry_after_ms);
    bind_text(stmt, 10, plan->denied);
    sqlite3_bind_int64(stmt, 11, now_ms);
    int rc = statement_run(stmt);
    *inserted = rc == SQLITE_DONE && sqlite3_changes(backend->db) == 1;
    return rc;
}

static int hold_one(struct backend *backend, const struct reserve_request *request, uint32_t i,
                    struct reserve_plan *plan, int64_t now_ms)
{
    const struct requirement *r = &request->requirements[i];
    struct limit *limit = plan->limits[i];
    struct period *p = plan->periods[i];
    struct hold *h = calloc(1, sizeof *h);
    if (h == NULL)
        return SQLITE_NOMEM;
    h->row_id = backend->mirror.next_row_id++;
    h->amount = r->amount;
    h->expires_at_ms = now_ms + limit_hold_duration_ms(&limit->state.definition);
    const char *caller = request->caller != NULL ? request->caller : "";
    sqlite3_stmt *stmt = statement(backend, STMT_ROW_INSERT);
    sqlite3_bind_int64(stmt, 1, h->row_id);
    bind_text(stmt, 2, request->lease_id);
    sqlite3_bind_int64(stmt, 3, limit->id);
    bind_text(stmt, 4, r->key);
    bind_text(stmt, 5, caller);
    sqlite3_bind_int64(stmt, 6, i64(r->amount));
    sqlite3_bind_int64(stmt, 7, i64(r->amount));
    sqlite3_bind_int64(stmt, 8, p->start_ms);
    sqlite3_bind_int64(stmt, 9, now_ms);
    sqlite3_bind_int64(stmt, 10, h->expires_at_ms);
    int rc = statement_run(stmt);
    if (rc == SQLITE_DONE)
        rc = ledger_event(backend, now_ms, "reserved", request->lease_id, limit, caller, r->amount,
                          0, "");
    if (rc == SQLITE_DONE)
        rc = caller_add(backend, limit, p->start_ms, caller, i64(r->amount), 0, 0);
    if (rc != SQLITE_DONE) {
        free(h);
        return rc;
    }
    p->holds = holds_insert(p->holds, h);
    p->hold_count++;
    p->reserved += r->amount;
    backend->mirror.hold_count++;
    mirror_touch(&backend->mirror, p);
    return SQLITE_DONE;
}

static int64_t earliest_expiry(const struct reserve_request *request,
                               const struct reserve_plan *plan, int64_t now_ms)
{
    int64_t earliest = INT64_MAX;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        int64_t at = now_ms + limit_hold_duration_ms(&plan->limits[i]->state.definition);
        if (at < earliest)
            earliest = at;
    }
    return earliest;
}

/* Not-yet-known lease: decide, record, hold. */
static int reserve_new(struct backend *backend, const struct reserve_request *request,
                       struct reserve_plan *plan, struct reserve_result *result, int64_t now_ms)
{
    int rc = decide(backend, request, plan, result, now_ms);
    if (rc != SQLITE_DONE)
        return rc;
    result->allowed = result->denied_count == 0;
    if (result->allowed) {
        result->retry_after_ms = 0;
        result->reserved_at_unix_ms = now_ms;
        result->expires_at_unix_ms = earliest_expiry(request, plan, now_ms);
    }
    denied_text(request, result, plan->denied, sizeof plan->denied);
    bool inserted = false;
    rc = lease_insert(backend, request, plan, result, now_ms, &inserted);
    if (rc != SQLITE_DONE)
        return rc;
    if (!inserted) {
        rc = lease_get(backend, request->lease_id, &backend->scratch->lease);
        if (rc == SQLITE_ROW)
            return replay(&backend->scratch->lease, request, plan->fingerprint, result);
        if (rc != SQLITE_DONE || !backend->scratch->lease.forgotten)
            return rc == SQLITE_DONE ? SQLITE_CORRUPT : rc;
        /* The id of a forgotten lease is free again: a new lease. */
        sqlite3_stmt *forget = statement(backend, STMT_LEASE_FORGET);
        bind_text(forget, 1, request->lease_id);
        if ((rc = statement_run(forget)) != SQLITE_DONE ||
            (rc = lease_insert(backend, request, plan, result, now_ms, &inserted)) != SQLITE_DONE)
            return rc;
        if (!inserted)
            return SQLITE_CORRUPT;
    }
    for (uint32_t i = 0; result->allowed && i < request->requirement_count; i++) {
        if ((rc = hold_one(backend, request, i, plan, now_ms)) != SQLITE_DONE)
            return rc;
    }
    return SQLITE_DONE;
}

int ledger_reserve(struct backend *backend, const struct reserve_request *request,
                   struct reserve_result *result)
{
    struct reserve_plan *plan = &backend->scratch->plan;
    assert(request->requirement_count >= 1);
    assert(request->requirement_count <= REQUIREMENTS_PER_RESERVE_MAX);
    int64_t now_ms = clock_now_ms(backend->config.clock);
    memset(result, 0, sizeof *result);
    result->status = RESULT_OK;
    fingerprint(request, plan->fingerprint, sizeof plan->fingerprint);
    if (definitive_error(backend, request, plan, result)) {
        /* A known lease is answered as it was, whatever the limits are now. */
        int rc = lease_get(backend, request->lease_id, &backend->scratch->lease);
        if (rc == SQLITE_ROW)
            return replay(&backend->scratch->lease, request, plan->fingerprint, result);
        return rc;
    }
    return reserve_new(backend, request, plan, result, now_ms);
}

/* ---- Complete. */

struct settle {
    struct backend *backend;
    const char *lease_id;
    const char *caller;
    int64_t now_ms;
    char *warnings; /* WARNINGS_BYTES_MAX scratch */
    size_t warnings_used;
    uint32_t warning_count;
};

static void warn(struct settle *s, const char *what, const char *key)
{
    int n = snprintf(s->warnings + s->warnings_used, WARNINGS_BYTES_MAX - s->warnings_used, "%s:%s",
                     what, key);
    assert(n > 0 && (size_t)n < WARNINGS_BYTES_MAX - s->warnings_used);
    s->warnings_used += (size_t)n + 1; /* keep the NUL: strings back to back */
    s->warning_count++;
}

/* Whether a rolling hold of `amount` (out of the counters) can grow by extra. */
static bool grows(const struct period *p, uint64_t amount, uint64_t extra,
                  const struct limit *limit)
{
    return add_capped(p->reserved + p->used + amount, extra) <= limit->state.definition.capacity;
}

/* Rolling: the hold shrinks (or grows, per overage) to the actual amount
 * until its original expiry. */
static int settle_rolling(struct settle *s, struct limit *limit, const struct row *row,
                          uint64_t actual)
{
    struct period *p = NULL;
    struct hold *h = NULL;
    int rc = live_hold(s->backend, limit, row, s->now_ms, &p, &h);
    if (rc != SQLITE_DONE)
        return rc;
    if (h == NULL)
        return row_settle(s->backend, row->id, "committed", &actual, 0, 0, s->now_ms);
    hold_drop(s->backend, p, h);
    p->reserved -= h->amount;
    uint64_t held = actual, debt = 0;
    if (actual > h->amount) {
        uint64_t extra = actual - h->amount;
        /* Decide the overage on counters free of due holds. */
        if (!grows(p, h->amount, extra, limit) &&
            (rc = mirror_expire(s->backend, limit, s->now_ms, NULL)) != SQLITE_DONE) {
            free(h);
            return rc;
        }
        if (!grows(p, h->amount, extra, limit)) {
            held = h->amount;
            if (limit->state.definition.overage == OVERAGE_DEBT) {
                debt = extra;
                p->debt = add_capped(p->debt, debt);
                warn(s, "overage_debt", row->key);
                rc = ledger_event(s->backend, s->now_ms, "debt", s->lease_id, limit, s->caller,
                                  row->amount, debt, "rolling overage held as debt");
            } else {
                atomic_fetch_add(&s->backend->overage_denied, 1);
                warn(s, "overage_denied", row->key);
            }
        }
        if (rc == SQLITE_DONE)
            rc = ledger_event(s->backend, s->now_ms, "overrun", s->lease_id, limit, s->caller,
                              row->amount, actual, "");
    }
    p->used += held;
    if (held > 0 || debt > 0) {
        h->amount = held;
        h->debt = debt;
        h->completed = true;
        p->holds = holds_insert(p->holds, h);
        p->hold_count++;
        s->backend->mirror.hold_count++;
    } else {
        free(h);
    }
    if (rc == SQLITE_DONE)
        rc = row_settle(s->backend, row->id, "committed", &actual, held, debt, s->now_ms);
    return rc;
}

static int settle_concurrency(struct settle *s, struct limit *limit, const struct row *row,
                              uint64_t actual)
{
    struct period *p = NULL;
    struct hold *h = NULL;
    int rc = live_hold(s->backend, limit, row, s->now_ms, &p, &h);
    if (rc != SQLITE_DONE)
        return rc;
    if (h != NULL) {
        hold_drop(s->backend, p, h);
        p->reserved -= h->amount;
        free(h);
    }
    return row_settle(s->backend, row->id, "committed", &actual, 0, 0, s->now_ms);
}

static uint64_t budget_room(const struct period *p, const struct limit *limit)
{
    uint64_t total = period_total(p), capacity = limit->state.definition.capacity;
    return total < capacity ? capacity - total : 0;
}

/* Budget: the actual amount is charged to the period the lease was reserved
 * in; what does not fit is debt there. Late commits are charged and warned. */
static int settle_budget(struct settle *s, struct limit *limit, const struct row *row,
                         uint64_t actual)
{
    struct period *p = NULL;
    struct hold *h = NULL;
    int rc = live_hold(s->backend, limit, row, s->now_ms, &p, &h);
    if (rc != SQLITE_DONE)
        return rc;
    bool expired = h == NULL;
    int64_t released = 0;
    if (h != NULL) {
        hold_drop(s->backend, p, h);
        p->reserved -= h->amount;
        released = i64(h->amount);
        free(h);
    } else if ((p = mirror_period(s->backend, limit, row->period_start_ms)) == NULL) {
        return SQLITE_NOMEM;
    }
    /* What does not fit is debt: decide it on counters free of due holds. */
    if (budget_room(p, limit) < actual &&
        (rc = mirror_expire(s->backend, limit, s->now_ms, NULL)) != SQLITE_DONE)
        return rc;
    uint64_t room = budget_room(p, limit);
    uint64_t fit = actual < room ? actual : room;
    uint64_t debt = actual - fit;
    p->used += fit;
    p->debt = add_capped(p->debt, debt);
    mirror_touch(&s->backend->mirror, p);
    const char *state = expired ? "committed_post_expiry" : "committed";
    if (expired)
        warn(s, "commit_after_expiry", row->key);
    if (debt > 0)
        warn(s, "overage_debt", row->key);
    rc = ledger_event(s->backend, s->now_ms, state, s->lease_id, limit, s->caller, row->amount,
                      actual, "");
    if (rc == SQLITE_DONE && actual > row->amount)
        rc = ledger_event(s->backend, s->now_ms, "overrun", s->lease_id, limit, s->caller,
                          row->amount, actual, "");
    if (rc == SQLITE_DONE && debt > 0)
        rc = ledger_event(s->backend, s->now_ms, "debt", s->lease_id, limit, s->caller, row->amount,
                          debt, "over the budget of the period");
    if (rc == SQLITE_DONE)
        rc = caller_add(s->backend, limit, p->start_ms, s->caller, -released, i64(fit), i64(debt));
    if (rc == SQLITE_DONE)
        rc = row_settle(s->backend, row->id, state, &actual, 0, debt, s->now_ms);
    return rc;
}

static int settle_row(struct settle *s, const struct row *row, uint64_t actual)
{
    struct limit *limit = mirror_limit_by_id(&s->backend->mirror, row->limit_id);
    if (limit == NULL)
        return SQLITE_CORRUPT;
    switch (limit->state.definition.kind) {
    case LIMIT_ROLLING: {
        int rc = settle_rolling(s, limit, row, actual);
        if (rc == SQLITE_DONE)
            rc = ledger_event(s->backend, s->now_ms, "committed", s->lease_id, limit, s->caller,
                              row->amount, actual, "");
        return rc;
    }
    case LIMIT_CONCURRENCY: {
        int rc = settle_concurrency(s, limit, row, actual);
        if (rc == SQLITE_DONE)
            rc = ledger_event(s->backend, s->now_ms, "committed", s->lease_id, limit, s->caller,
                              row->amount, actual, "");
        return rc;
    }
    case LIMIT_BUDGET:
        return settle_budget(s, limit, row, actual);
    default:
        return SQLITE_CORRUPT;
    }
}

/* Keeps expiry going on the lease's limits, a few holds each (the lease's
 * own holds are checked one by one in live_hold). */
static int expire_rows(struct backend *backend, const struct row *rows, uint32_t count,
                       int64_t now_ms)
{
    for (uint32_t i = 0; i < count; i++) {
        struct limit *limit = mirror_limit_by_id(&backend->mirror, rows[i].limit_id);
        if (limit == NULL)
            return SQLITE_CORRUPT;
        uint64_t few = SQLITE_EXPIRIES_PER_REQUEST;
        int rc = mirror_expire(backend, limit, now_ms, &few);
        if (rc != SQLITE_DONE)
            return rc;
    }
    return SQLITE_DONE;
}

static const struct actual *actual_for(const struct complete_request *request, const char *key)
{
    for (uint32_t i = 0; i < request->actual_count; i++) {
        if (strcmp(request->actuals[i].key, key) == 0)
            return &request->actuals[i];
    }
    return NULL;
}

static bool actuals_valid(const struct complete_request *request, const struct row *rows,
                          uint32_t count, struct complete_result *result)
{
    for (uint32_t i = 0; i < request->actual_count; i++) {
        bool found = false;
        for (uint32_t j = 0; j < count && !found; j++)
            found = strcmp(rows[j].key, request->actuals[i].key) == 0;
        if (!found) {
            result->status = RESULT_INVALID;
            snprintf(result->error, sizeof result->error, "actual_key_not_in_lease:%s",
                     request->actuals[i].key);
            return false;
        }
    }
    return true;
}

static int warnings_publish(const struct settle *s, struct complete_result *result)
{
    if (s->warning_count == 0)
        return SQLITE_DONE;
    result->warnings = malloc(s->warnings_used);
    if (result->warnings == NULL)
        return SQLITE_NOMEM;
    memcpy(result->warnings, s->warnings, s->warnings_used);
    result->warning_count = s->warning_count;
    return SQLITE_DONE;
}

static int complete_live(struct backend *backend, const struct complete_request *request,
                         const struct lease *lease, struct complete_result *result, int64_t now_ms)
{
    struct row *rows = backend->scratch->rows;
    char *warnings = backend->scratch->warnings;
    uint32_t count = 0;
    int rc = rows_get(backend, lease, rows, &count);
    if (rc != SQLITE_DONE)
        return rc;
    if (!actuals_valid(request, rows, count, result))
        return SQLITE_DONE;
    if ((rc = expire_rows(backend, rows, count, now_ms)) != SQLITE_DONE)
        return rc;
    struct settle s = {.backend = backend,
                       .lease_id = request->lease_id,
                       .caller = lease->caller,
                       .now_ms = now_ms,
                       .warnings = warnings};
    for (uint32_t i = 0; i < count; i++) {
        const struct actual *a = actual_for(request, rows[i].key);
        /* A key left out settles at its reserved amount (pessimistic). */
        rc = settle_row(&s, &rows[i], a != NULL ? a->actual_amount : rows[i].amount);
        if (rc != SQLITE_DONE)
            return rc;
    }
    if ((rc = lease_finish(backend, request->lease_id, "completed", now_ms)) != SQLITE_DONE)
        return rc;
    result->reconciled = true;
    return warnings_publish(&s, result);
}

int ledger_complete(struct backend *backend, const struct complete_request *request,
                    struct complete_result *result)
{
    struct lease *lease = &backend->scratch->lease;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    memset(result, 0, sizeof *result);
    result->status = RESULT_OK;
    int rc = lease_get(backend, request->lease_id, lease);
    if (rc == SQLITE_DONE || (rc == SQLITE_ROW && strcmp(lease->state, "denied") == 0))
        return SQLITE_DONE; /* nothing held: reconciled=false */
    if (rc != SQLITE_ROW)
        return rc;
    if (strcmp(lease->state, "released") == 0) {
        result->status = RESULT_CONFLICT;
        snprintf(result->error, sizeof result->error, "already_finalized");
        return SQLITE_DONE;
    }
    if (strcmp(lease->state, "completed") == 0) {
        result->reconciled = true; /* completing twice is a no-op success */
        return SQLITE_DONE;
    }
    return complete_live(backend, request, lease, result, now_ms);
}

/* ---- Release. */

static int release_row(struct backend *backend, const struct row *row, const char *lease_id,
                       const char *caller, int64_t now_ms)
{
    struct limit *limit = mirror_limit_by_id(&backend->mirror, row->limit_id);
    if (limit == NULL)
        return SQLITE_CORRUPT;
    struct period *p = NULL;
    struct hold *h = NULL;
    int rc = live_hold(backend, limit, row, now_ms, &p, &h);
    if (rc != SQLITE_DONE || h == NULL)
        return rc; /* an expired hold has nothing left to free */
    hold_drop(backend, p, h);
    p->reserved -= h->amount;
    int64_t amount = i64(h->amount);
    free(h);
    rc = ledger_event(backend, now_ms, "released", lease_id, limit, caller, row->amount, 0, "");
    if (rc == SQLITE_DONE)
        rc = caller_add(backend, limit, p->start_ms, caller, -amount, 0, 0);
    if (rc == SQLITE_DONE)
        rc = row_settle(backend, row->id, "released", NULL, 0, 0, 0);
    return rc;
}

int ledger_release(struct backend *backend, const struct release_request *request,
                   struct release_result *result)
{
    struct lease *lease = &backend->scratch->lease;
    struct row *rows = backend->scratch->rows;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    memset(result, 0, sizeof *result);
    result->status = RESULT_OK;
    int rc = lease_get(backend, request->lease_id, lease);
    if (rc == SQLITE_DONE)
        return SQLITE_DONE; /* unknown: no-op success */
    if (rc != SQLITE_ROW)
        return rc;
    if (strcmp(lease->state, "completed") == 0) {
        result->status = RESULT_CONFLICT;
        snprintf(result->error, sizeof result->error, "already_finalized");
        return SQLITE_DONE;
    }
    if (strcmp(lease->state, "allowed") != 0)
        return SQLITE_DONE; /* released twice, or denied: nothing held */
    uint32_t count = 0;
    if ((rc = rows_get(backend, lease, rows, &count)) != SQLITE_DONE ||
        (rc = expire_rows(backend, rows, count, now_ms)) != SQLITE_DONE)
        return rc;
    for (uint32_t i = 0; i < count; i++) {
        if ((rc = release_row(backend, &rows[i], request->lease_id, lease->caller, now_ms)) !=
            SQLITE_DONE)
            return rc;
    }
    return lease_finish(backend, request->lease_id, "released", now_ms);
}
