/* The writer's in-memory mirror of the database: limits, their running
 * counters and their live holds. Loaded at startup (and again after a failed
 * transaction) from the tables, checked against them, and kept equal to them
 * by writing every change in the same transaction. */
#include "sq_mirror.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sq_backend.h"
#include "sq_holds.h"
#include "sq_json.h"
#include "sq_leases.h"
#include "sq_map.h"
#include "sq_schema.h"

static bool limit_match_key(const void *value, const void *key)
{
    const struct sq_limit *limit = value;
    return strcmp(limit->state.definition.key, (const char *)key) == 0;
}

static bool limit_match_id(const void *value, const void *key)
{
    return ((const struct sq_limit *)value)->id == *(const int64_t *)key;
}

static uint64_t key_hash(const char *key)
{
    return sq_hash_bytes(key, strlen(key));
}

struct sq_limit *sq_mirror_limit_by_key(struct sq_mirror *mirror, const char *key)
{
    return sq_map_find(&mirror->limits_by_key, key_hash(key), limit_match_key, key);
}

struct sq_limit *sq_mirror_limit_for_admin(struct sq_mirror *mirror, const char *key,
                                           enum backend_admin_result *result)
{
    struct sq_limit *limit = sq_mirror_limit_by_key(mirror, key);
    *result = limit == NULL ? BACKEND_ADMIN_UNKNOWN_KEY : BACKEND_ADMIN_OK;
    return limit;
}

struct sq_limit *sq_mirror_limit_by_id(struct sq_mirror *mirror, int64_t id)
{
    return sq_map_find(&mirror->limits_by_id, sq_hash_i64(id), limit_match_id, &id);
}

struct sq_limit *sq_limit_new(int64_t id, const struct limit_state *state)
{
    struct sq_limit *limit = calloc(1, sizeof *limit);
    if (limit == NULL)
        return NULL;
    limit->id = id;
    limit->state = *state;
    return limit;
}

void sq_limit_free(struct sq_limit *limit)
{
    if (limit == NULL)
        return;
    for (uint32_t i = 0; i < limit->period_count; i++) {
        sq_holds_free_all(limit->periods[i]->holds);
        free(limit->periods[i]);
    }
    free(limit->periods);
    free(limit);
}

/* Adds a limit to both maps (to the key map only when not deleted). */
int sq_mirror_add_limit(struct sq_mirror *mirror, struct sq_limit *limit)
{
    if (sq_map_reserve(&mirror->limits_by_id, 1) != 0 ||
        sq_map_reserve(&mirror->limits_by_key, 1) != 0)
        return -1;
    sq_map_insert(&mirror->limits_by_id, sq_hash_i64(limit->id), limit);
    if (!limit->deleted) {
        assert(sq_mirror_limit_by_key(mirror, limit->state.definition.key) == NULL);
        sq_map_insert(&mirror->limits_by_key, key_hash(limit->state.definition.key), limit);
    }
    if (limit->id >= mirror->next_limit_id)
        mirror->next_limit_id = limit->id + 1;
    return 0;
}

void sq_mirror_unlink_key(struct sq_mirror *mirror, struct sq_limit *limit)
{
    bool removed = sq_map_remove(&mirror->limits_by_key, key_hash(limit->state.definition.key),
                                 limit_match_key, limit->state.definition.key);
    assert(removed);
    (void)removed;
}

void sq_mirror_free(struct sq_mirror *mirror)
{
    for (uint32_t i = 0; i < mirror->limits_by_id.capacity; i++)
        sq_limit_free(mirror->limits_by_id.slots[i].value);
    sq_map_free(&mirror->limits_by_id);
    sq_map_free(&mirror->limits_by_key);
    memset(mirror, 0, sizeof *mirror);
}

void sq_mirror_touch(struct sq_mirror *mirror, struct sq_period *period)
{
    assert(period->limit != NULL);
    if (period->dirty)
        return;
    period->dirty = true;
    period->dirty_next = mirror->dirty;
    mirror->dirty = period;
}

void sq_mirror_freed(struct sq_mirror *mirror, const struct sq_limit *limit)
{
    for (uint32_t i = mirror->freed_count; i > 0; i--) {
        if (mirror->freed_ids[i - 1] == limit->id)
            return; /* the latest first: a batch often frees the same few limits */
    }
    if (mirror->freed_count == SQ_FREED_LIMITS_MAX)
        mirror->freed_any = true;
    else
        mirror->freed_ids[mirror->freed_count++] = limit->id;
    assert(mirror->freed_count <= SQ_FREED_LIMITS_MAX);
}

static int64_t amount_i64(uint64_t amount)
{
    assert(amount <= AMOUNT_MAX);
    return (int64_t)amount;
}

int sq_mirror_flush(struct sq_backend *backend)
{
    sqlite3_stmt *put = sq_statement(backend, SQ_STMT_USAGE_PUT);
    while (backend->mirror.dirty != NULL) {
        struct sq_period *p = backend->mirror.dirty;
        sqlite3_bind_int64(put, 1, p->limit->id);
        sqlite3_bind_int64(put, 2, p->start_ms);
        sqlite3_bind_int64(put, 3, amount_i64(p->reserved));
        sqlite3_bind_int64(put, 4, amount_i64(p->used));
        sqlite3_bind_int64(put, 5, amount_i64(p->debt));
        int rc = sq_statement_run(put);
        if (rc != SQLITE_DONE)
            return rc;
        backend->mirror.dirty = p->dirty_next;
        p->dirty = false;
        p->dirty_next = NULL;
    }
    assert(backend->mirror.dirty == NULL); /* every counter written */
    return SQLITE_DONE;
}

struct sq_period *sq_mirror_period_find(const struct sq_limit *limit, int64_t start_ms)
{
    for (uint32_t i = 0; i < limit->period_count; i++) {
        if (limit->periods[i]->start_ms == start_ms)
            return limit->periods[i];
    }
    return NULL;
}

/* Reads a period's stored counters (zero when it has no row yet). */
static int usage_read(struct sq_backend *backend, int64_t limit_id, int64_t start_ms,
                      struct sq_period *out)
{
    sqlite3_stmt *get = sq_statement(backend, SQ_STMT_USAGE_GET);
    sqlite3_bind_int64(get, 1, limit_id);
    sqlite3_bind_int64(get, 2, start_ms);
    int rc = sqlite3_step(get);
    if (rc == SQLITE_ROW) {
        out->reserved = (uint64_t)sqlite3_column_int64(get, 0);
        out->used = (uint64_t)sqlite3_column_int64(get, 1);
        out->debt = (uint64_t)sqlite3_column_int64(get, 2);
        rc = SQLITE_DONE;
    }
    sqlite3_reset(get);
    return rc;
}

struct sq_period *sq_mirror_period(struct sq_backend *backend, struct sq_limit *limit,
                                   int64_t start_ms)
{
    if (limit->state.definition.kind != LIMIT_BUDGET)
        start_ms = 0;
    struct sq_period *p = sq_mirror_period_find(limit, start_ms);
    if (p != NULL)
        return p;
    if (limit->period_count == limit->period_capacity) {
        uint32_t capacity = limit->period_capacity == 0 ? 2 : limit->period_capacity * 2;
        struct sq_period **periods = realloc(limit->periods, capacity * sizeof *periods);
        if (periods == NULL)
            return NULL;
        limit->periods = periods;
        limit->period_capacity = capacity;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->limit = limit;
    p->start_ms = start_ms;
    if (usage_read(backend, limit->id, start_ms, p) != SQLITE_DONE) {
        free(p);
        return NULL;
    }
    limit->periods[limit->period_count++] = p;
    assert(limit->period_count <= limit->period_capacity);
    /* Rolling and concurrency limits keep one window: period 0. */
    assert(limit->state.definition.kind == LIMIT_BUDGET || limit->period_count == 1);
    return p;
}

void sq_mirror_trim_periods(struct sq_limit *limit, int64_t now_ms)
{
    if (limit->state.definition.kind != LIMIT_BUDGET)
        return;
    int64_t current = sq_limit_period_now(limit, now_ms).start_ms;
    for (uint32_t i = 0; i < limit->period_count;) {
        struct sq_period *p = limit->periods[i];
        assert(p->limit == limit);
        if (p->hold_count == 0 && p->start_ms != current && !p->dirty) {
            assert(p->holds == NULL); /* nothing held: the tree is empty */
            free(p);
            limit->periods[i] = limit->periods[--limit->period_count];
        } else {
            i++;
        }
    }
}

int64_t sq_mirror_live_from(const struct sq_mirror *mirror)
{
    int64_t least = INT64_MAX;
    const struct sq_map *ids = &mirror->limits_by_id;
    for (uint32_t i = 0; i < ids->capacity; i++) {
        const struct sq_limit *limit = ids->slots[i].value;
        for (uint32_t j = 0; limit != NULL && j < limit->period_count; j++) {
            int64_t row = sq_holds_row_min(limit->periods[j]->holds);
            if (row < least)
                least = row;
        }
    }
    if (least == INT64_MAX)
        return mirror->next_seq;
    return least / SQ_LEASE_ITEMS;
}

/* ---- Loading. */

static int load_fail(struct sq_backend *backend, char *error, size_t error_size, const char *what)
{
    snprintf(error, error_size, "loading %s: %s", what, sqlite3_errmsg(backend->db));
    return -1;
}

static void column_text(sqlite3_stmt *stmt, int column, char *out, size_t size)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);
    snprintf(out, size, "%s", text ? (const char *)text : "");
}

static void limit_state_from_row(sqlite3_stmt *stmt, struct limit_state *state)
{
    memset(state, 0, sizeof *state);
    struct limit_definition *d = &state->definition;
    char name[32];
    column_text(stmt, 1, d->key, sizeof d->key);
    column_text(stmt, 3, name, sizeof name);
    limit_kind_parse(name, &d->kind);
    d->capacity = (uint64_t)sqlite3_column_int64(stmt, 4);
    d->window_seconds = (uint32_t)sqlite3_column_int64(stmt, 5);
    d->timeout_seconds = (uint32_t)sqlite3_column_int64(stmt, 6);
    column_text(stmt, 7, name, sizeof name);
    if (d->kind == LIMIT_BUDGET) /* other kinds have none, whatever the row says */
        limit_period_parse(name, &d->period);
    column_text(stmt, 8, d->unit, sizeof d->unit);
    column_text(stmt, 9, d->description, sizeof d->description);
    column_text(stmt, 10, name, sizeof name);
    limit_overage_parse(name, &d->overage);
    column_text(stmt, 11, name, sizeof name);
    limit_status_parse(name, &state->status);
    state->pending_decrease_to = (uint64_t)sqlite3_column_int64(stmt, 12);
    int64_t anchor_day = sqlite3_column_int64(stmt, 13);
    d->period_anchor_day = (uint8_t)(anchor_day >= 0 && anchor_day <= UINT8_MAX ? anchor_day : 255);
    column_text(stmt, 14, d->time_zone, sizeof d->time_zone);
    char alerts[LIMIT_ALERTS_TEXT_SIZE];
    column_text(stmt, 15, alerts, sizeof alerts);
    if (limit_alerts_parse_text(alerts, d) != 0)
        d->alert_count = LIMIT_ALERTS_MAX + 1; /* refused by limit_definition_validate */
    column_text(stmt, 16, d->webhook, sizeof d->webhook);
    column_text(stmt, 17, name, sizeof name);
    if (alert_format_parse(name, &d->webhook_format) != 0)
        d->alert_count = LIMIT_ALERTS_MAX + 1;
}

static int load_limits(struct sq_backend *backend, char *error, size_t error_size)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT id,key,deleted,kind,capacity,window_seconds,timeout_seconds,"
                      "period,unit,description,overage,status,pending_decrease_to,"
                      "period_anchor_day,time_zone,alerts,webhook,webhook_format FROM limits "
                      "ORDER BY id";
    if (sqlite3_prepare_v2(backend->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return load_fail(backend, error, error_size, "limits");
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct limit_state state;
        limit_state_from_row(stmt, &state);
        /* Its time zone is looked up (the zone a period needs) and the
         * fields checked as a put would. */
        char reason[256];
        bool alerting = state.definition.alert_count > 0 || state.definition.webhook[0] != '\0';
        if ((state.definition.kind == LIMIT_BUDGET || alerting) &&
            limit_definition_validate(&state.definition, reason, sizeof reason) != 0) {
            sqlite3_finalize(stmt);
            snprintf(error, error_size, "loading limit %s: %s", state.definition.key, reason);
            return -1;
        }
        struct sq_limit *limit = sq_limit_new(sqlite3_column_int64(stmt, 0), &state);
        if (limit != NULL)
            limit->deleted = sqlite3_column_int64(stmt, 2) != 0;
        if (limit == NULL || sq_mirror_add_limit(&backend->mirror, limit) != 0) {
            sq_limit_free(limit);
            sqlite3_finalize(stmt);
            snprintf(error, error_size, "loading limits: out of memory");
            return -1;
        }
        if (state.definition.kind != LIMIT_BUDGET && sq_mirror_period(backend, limit, 0) == NULL) {
            sqlite3_finalize(stmt);
            return load_fail(backend, error, error_size, "limit_usage");
        }
    }
    sqlite3_finalize(stmt);
    return rc == SQLITE_DONE ? 0 : load_fail(backend, error, error_size, "limits");
}

/* Rebuilds the live holds of one lease row and adds them to the sums they
 * are checked against. */
static int load_lease_holds(struct sq_backend *backend, sqlite3_stmt *stmt,
                            struct sq_lease_item *items, char *error, size_t error_size)
{
    int64_t seq = sqlite3_column_int64(stmt, 0);
    struct sq_lease_rec rec = {
        .seq = seq, .items = items, .item_capacity = REQUIREMENTS_PER_RESERVE_MAX};
    const unsigned char *json = sqlite3_column_text(stmt, 1);
    if (json == NULL || sq_lease_items_parse(&rec, (const char *)json) != 0) {
        snprintf(error, error_size, "loading lease %lld: malformed items", (long long)seq);
        return -1;
    }
    struct sq_lease_ref *ref = NULL;
    for (uint32_t i = 0; i < rec.item_count; i++) {
        const struct sq_lease_item *item = &items[i];
        if (!item->live)
            continue;
        sqlite3_stmt *expired = sq_statement(backend, SQ_STMT_EXPIRATION_GET);
        sqlite3_bind_int64(expired, 1, sq_hold_row_id(seq, i));
        int rc = sqlite3_step(expired);
        sqlite3_reset(expired);
        if (rc == SQLITE_ROW)
            continue; /* expired since its lease was written */
        if (rc != SQLITE_DONE) {
            sq_lease_ref_drop(ref);
            return load_fail(backend, error, error_size, "expirations");
        }
        if (ref == NULL) {
            const unsigned char *id = sqlite3_column_text(stmt, 2);
            const unsigned char *caller = sqlite3_column_text(stmt, 3);
            ref = sq_lease_ref_new(id != NULL ? (const char *)id : "",
                                   caller != NULL ? (const char *)caller : "");
            if (ref == NULL) {
                snprintf(error, error_size, "loading lease %lld: out of memory", (long long)seq);
                return -1;
            }
        }
        struct sq_limit *limit = sq_mirror_limit_by_id(&backend->mirror, item->limit_id);
        struct sq_period *p =
            limit == NULL ? NULL : sq_mirror_period(backend, limit, item->period_start_ms);
        struct sq_hold *h = calloc(1, sizeof *h);
        if (p == NULL || h == NULL) {
            sq_hold_free(h);
            sq_lease_ref_drop(ref);
            snprintf(error, error_size, "loading lease %lld: no limit or out of memory",
                     (long long)seq);
            return -1;
        }
        h->row_id = sq_hold_row_id(seq, i);
        h->lease = sq_lease_ref_keep(ref);
        h->amount = item->held;
        h->debt = item->debt;
        h->completed = item->state != SQ_ITEM_RESERVED;
        h->expires_at_ms = item->expires_at_ms;
        p->holds = sq_holds_insert(p->holds, h);
        p->hold_count++;
        backend->mirror.hold_count++;
    }
    sq_lease_ref_drop(ref);
    return 0;
}

/* Every period's stored counters must equal the sums of its live holds. */
static int check_sums(struct sq_backend *backend, char *error, size_t error_size)
{
    struct sq_map *ids = &backend->mirror.limits_by_id;
    for (uint32_t i = 0; i < ids->capacity; i++) {
        struct sq_limit *limit = ids->slots[i].value;
        if (limit == NULL)
            continue;
        for (uint32_t j = 0; j < limit->period_count; j++) {
            struct sq_period *p = limit->periods[j];
            uint64_t expect =
                limit->state.definition.kind == LIMIT_ROLLING ? p->reserved + p->used : p->reserved;
            if (sq_holds_sum(p->holds) != expect) {
                snprintf(error, error_size,
                         "database inconsistent: limit %s (id %lld) counts %llu held, its live "
                         "reservations hold %llu",
                         limit->state.definition.key, (long long)limit->id,
                         (unsigned long long)expect, (unsigned long long)sq_holds_sum(p->holds));
                return -1;
            }
        }
    }
    return 0;
}

/* Live leases are found from the watermark the tick keeps in meta
 * (live_from_seq): no lease below it holds anything. */
static int load_holds(struct sq_backend *backend, char *error, size_t error_size)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT seq, items, lease_id, caller FROM leases WHERE seq >= "
                      "COALESCE((SELECT value FROM meta WHERE name='live_from_seq'), 0) "
                      "AND live = 1";
    struct sq_lease_item *items = calloc(REQUIREMENTS_PER_RESERVE_MAX, sizeof *items);
    if (items == NULL) {
        snprintf(error, error_size, "loading leases: out of memory");
        return -1;
    }
    if (sqlite3_prepare_v2(backend->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        free(items);
        return load_fail(backend, error, error_size, "leases");
    }
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (load_lease_holds(backend, stmt, items, error, error_size) != 0) {
            sqlite3_finalize(stmt);
            free(items);
            return -1;
        }
    }
    sqlite3_finalize(stmt);
    free(items);
    if (rc != SQLITE_DONE)
        return load_fail(backend, error, error_size, "leases");
    return check_sums(backend, error, error_size);
}

static int load_next_seq(struct sq_backend *backend, char *error, size_t error_size)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(backend->db, "SELECT COALESCE(MAX(seq),0)+1 FROM leases", -1, &stmt,
                           NULL) != SQLITE_OK)
        return load_fail(backend, error, error_size, "leases");
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        backend->mirror.next_seq = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? 0 : load_fail(backend, error, error_size, "leases");
}

int sq_mirror_load(struct sq_backend *backend, char *error, size_t error_size)
{
    sq_mirror_free(&backend->mirror);
    backend->mirror.next_limit_id = 1;
    if (load_limits(backend, error, error_size) != 0 ||
        load_holds(backend, error, error_size) != 0 ||
        load_next_seq(backend, error, error_size) != 0) {
        sq_mirror_free(&backend->mirror);
        return -1;
    }
    atomic_store(&backend->live_holds, backend->mirror.hold_count);
    return 0;
}
