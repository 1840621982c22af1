/* The sqlite backend's leases within one transaction: each lease the writer
 * touches is loaded once (or made new), changed in memory by reserve,
 * complete, release and expiry, and written once when the transaction ends,
 * with one event_log row holding the audit events it gathered. The items
 * columns are JSON arrays (sq_schema.c) written and read by sq_json.c. */
#include "sq_leases.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sq_backend.h"
#include "sq_holds.h"
#include "sq_json.h"
#include "sq_map.h"
#include "sq_mirror.h"
#include "sq_schema.h"

/* The names the leases table stores. */
static const struct {
    enum sq_lease_state state;
    const char *name;
} lease_states[] = {{SQ_LEASE_ALLOWED, "allowed"},
                    {SQ_LEASE_DENIED, "denied"},
                    {SQ_LEASE_COMPLETED, "completed"},
                    {SQ_LEASE_RELEASED, "released"}};
#define LEASE_STATES (sizeof lease_states / sizeof lease_states[0])

static const char *lease_state_name(enum sq_lease_state state)
{
    for (size_t i = 0; i < LEASE_STATES; i++) {
        if (lease_states[i].state == state)
            return lease_states[i].name;
    }
    assert(!"a lease state has a name");
    return "";
}

static int lease_state_parse(const char *name, enum sq_lease_state *out)
{
    for (size_t i = 0; i < LEASE_STATES; i++) {
        if (strcmp(name, lease_states[i].name) == 0) {
            *out = lease_states[i].state;
            return 0;
        }
    }
    return -1;
}

static bool lease_live(const struct sq_lease_rec *rec)
{
    for (uint32_t i = 0; i < rec->item_count; i++) {
        if (rec->items[i].live)
            return true;
    }
    return false;
}

/* ---- Records. */

static void rec_clear(struct sq_lease_rec *rec)
{
    sq_lease_ref_drop(rec->ref);
    if (rec->fingerprint != rec->inline_fingerprint)
        free(rec->fingerprint);
    if (rec->denied != rec->inline_denied)
        free(rec->denied);
    if (rec->event_rows != rec->inline_event_rows)
        free(rec->event_rows);
    if (rec->items != rec->inline_items)
        free(rec->items);
    if (rec->events != rec->inline_events)
        free(rec->events);
    free(rec->mcp_server);
    free(rec->tool);
}

/* A blank record, reused when one is free. */
static struct sq_lease_rec *rec_alloc(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    struct sq_lease_rec *rec = c->free_recs;
    if (rec != NULL) {
        c->free_recs = rec->next_free;
        c->free_count--;
    } else if ((rec = malloc(sizeof *rec)) == NULL) {
        return NULL;
    }
    memset(rec, 0, offsetof(struct sq_lease_rec, inline_items));
    rec->items = rec->inline_items;
    rec->item_capacity = SQ_LEASE_INLINE_ITEMS;
    rec->events = rec->inline_events;
    rec->event_capacity = SQ_LEASE_INLINE_EVENTS;
    rec->fingerprint = rec->inline_fingerprint;
    rec->denied = rec->inline_denied;
    rec->event_rows = rec->inline_event_rows;
    return rec;
}

static void rec_free(struct sq_backend *backend, struct sq_lease_rec *rec)
{
    if (rec == NULL)
        return;
    assert(!rec->pinned); /* no request holds it any more */
    rec_clear(rec);
    struct sq_lease_cache *c = &backend->leases;
    if (c->free_count < SQ_LEASE_CACHE_MAX) {
        rec->next_free = c->free_recs;
        c->free_recs = rec;
        c->free_count++;
    } else {
        free(rec);
    }
}

int sq_lease_set_text(struct sq_lease_rec *rec, char **field, const char *text)
{
    char *inline_buffer = field == &rec->fingerprint ? rec->inline_fingerprint
                          : field == &rec->denied    ? rec->inline_denied
                                                     : rec->inline_event_rows;
    size_t length = strlen(text);
    if (*field != inline_buffer)
        free(*field);
    *field = length < SQ_LEASE_INLINE_TEXT ? inline_buffer : malloc(length + 1);
    if (*field == NULL) {
        *field = inline_buffer;
        (*field)[0] = '\0';
        return SQLITE_NOMEM;
    }
    memcpy(*field, text, length + 1);
    return SQLITE_DONE;
}

static bool match_id(const void *value, const void *key)
{
    return strcmp(((const struct sq_lease_rec *)value)->lease_id, key) == 0;
}

static bool match_seq(const void *value, const void *key)
{
    return ((const struct sq_lease_rec *)value)->seq == *(const int64_t *)key;
}

static int cache_add(struct sq_backend *backend, struct sq_lease_rec *rec)
{
    struct sq_lease_cache *c = &backend->leases;
    if (c->count == c->capacity) {
        uint32_t capacity = c->capacity == 0 ? 64 : c->capacity * 2;
        struct sq_lease_rec **recs = realloc(c->recs, capacity * sizeof *recs);
        if (recs == NULL)
            return SQLITE_NOMEM;
        c->recs = recs;
        c->capacity = capacity;
    }
    if (sq_map_reserve(&c->by_id, 1) != 0 || sq_map_reserve(&c->by_seq, 1) != 0)
        return SQLITE_NOMEM;
    assert(c->count < c->capacity);
    c->recs[c->count++] = rec;
    sq_map_insert(&c->by_id, sq_hash_bytes(rec->lease_id, strlen(rec->lease_id)), rec);
    sq_map_insert(&c->by_seq, sq_hash_i64(rec->seq), rec);
    rec->origin = backend->current;
    return SQLITE_DONE;
}

static void column_copy(sqlite3_stmt *stmt, int column, char *out, size_t size)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);
    snprintf(out, size, "%s", text ? (const char *)text : "");
}

static const char *column_text(sqlite3_stmt *stmt, int column)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);
    return text != NULL ? (const char *)text : "";
}

/* Builds a record from a SQ_STMT_LEASE_BY_* row. */
static int rec_from_row(struct sq_backend *backend, sqlite3_stmt *stmt, struct sq_lease_rec **out)
{
    struct sq_lease_rec *rec = rec_alloc(backend);
    if (rec == NULL)
        return SQLITE_NOMEM;
    if (sq_lease_set_text(rec, &rec->fingerprint, column_text(stmt, 3)) != SQLITE_DONE ||
        sq_lease_set_text(rec, &rec->denied, column_text(stmt, 8)) != SQLITE_DONE ||
        sq_lease_set_text(rec, &rec->event_rows, column_text(stmt, 12)) != SQLITE_DONE) {
        rec_free(backend, rec);
        return SQLITE_NOMEM;
    }
    char state[16];
    rec->seq = sqlite3_column_int64(stmt, 0);
    column_copy(stmt, 1, rec->lease_id, sizeof rec->lease_id);
    column_copy(stmt, 2, state, sizeof state);
    column_copy(stmt, 4, rec->caller, sizeof rec->caller);
    rec->reserved_at_ms = sqlite3_column_int64(stmt, 5);
    rec->expires_at_ms = sqlite3_column_int64(stmt, 6);
    rec->retry_after_ms = sqlite3_column_int64(stmt, 7);
    rec->created_at_ms = sqlite3_column_int64(stmt, 9);
    rec->finished_at_ms = sqlite3_column_int64(stmt, 10);
    if (lease_state_parse(state, &rec->state) != 0 ||
        sq_lease_items_parse(rec, column_text(stmt, 11)) != 0) {
        rec_free(backend, rec);
        return SQLITE_CORRUPT;
    }
    *out = rec;
    return SQLITE_ROW;
}

/* Steps a bound SQ_STMT_LEASE_BY_* and caches what it finds: SQLITE_ROW with
 * *out, SQLITE_DONE when there is no such lease, or an error. */
static int load(struct sq_backend *backend, sqlite3_stmt *stmt, struct sq_lease_rec **out)
{
    *out = NULL;
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        rc = rec_from_row(backend, stmt, out);
    sqlite3_reset(stmt);
    if (rc != SQLITE_ROW)
        return rc;
    if ((rc = cache_add(backend, *out)) != SQLITE_DONE) {
        rec_free(backend, *out);
        *out = NULL;
        return rc;
    }
    return SQLITE_ROW;
}

int sq_leases_find(struct sq_backend *backend, const char *lease_id, struct sq_lease_rec **out)
{
    *out = sq_map_find(&backend->leases.by_id, sq_hash_bytes(lease_id, strlen(lease_id)), match_id,
                       lease_id);
    if (*out != NULL) {
        (*out)->origin = backend->current;
        return SQLITE_ROW;
    }
    sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_LEASE_BY_ID);
    sqlite3_bind_text(stmt, 1, lease_id, -1, SQLITE_STATIC);
    return load(backend, stmt, out);
}

int sq_leases_by_seq(struct sq_backend *backend, int64_t seq, struct sq_lease_rec **out)
{
    *out = sq_map_find(&backend->leases.by_seq, sq_hash_i64(seq), match_seq, &seq);
    if (*out != NULL) {
        (*out)->origin = backend->current;
        return SQLITE_ROW;
    }
    sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_LEASE_BY_SEQ);
    sqlite3_bind_int64(stmt, 1, seq);
    int rc = load(backend, stmt, out);
    return rc == SQLITE_DONE ? SQLITE_CORRUPT : rc;
}

int sq_leases_new(struct sq_backend *backend, const char *lease_id, uint32_t item_count,
                  struct sq_lease_rec **out)
{
    struct sq_lease_rec *rec = rec_alloc(backend);
    if (rec == NULL)
        return SQLITE_NOMEM;
    if (item_count > rec->item_capacity) {
        rec->items = malloc(item_count * sizeof *rec->items);
        if (rec->items == NULL) {
            rec->items = rec->inline_items;
            rec_free(backend, rec);
            return SQLITE_NOMEM;
        }
        rec->item_capacity = item_count;
    }
    rec->seq = backend->mirror.next_seq;
    size_t length = strlen(lease_id);
    assert(length < sizeof rec->lease_id);
    memcpy(rec->lease_id, lease_id, length + 1);
    rec->is_new = true;
    rec->dirty = true;
    int rc = cache_add(backend, rec);
    if (rc != SQLITE_DONE) {
        rec_free(backend, rec);
        return rc;
    }
    backend->mirror.next_seq++;
    *out = rec;
    return SQLITE_DONE;
}

static void cache_remove(struct sq_backend *backend, struct sq_lease_rec *rec)
{
    struct sq_lease_cache *c = &backend->leases;
    sq_map_remove(&c->by_id, sq_hash_bytes(rec->lease_id, strlen(rec->lease_id)), match_id,
                  rec->lease_id);
    sq_map_remove(&c->by_seq, sq_hash_i64(rec->seq), match_seq, &rec->seq);
    uint32_t count = c->count;
    for (uint32_t i = 0; i < c->count; i++) {
        if (c->recs[i] == rec) {
            c->recs[i] = c->recs[--c->count];
            break;
        }
    }
    assert(c->count + 1 == count); /* it was in the cache */
    (void)count;
}

static int write_events(struct sq_backend *backend, struct sq_lease_rec *rec);
static int write_rec(struct sq_backend *backend, struct sq_lease_rec *rec);

int sq_leases_forget(struct sq_backend *backend, struct sq_lease_rec *rec)
{
    assert(!rec->is_new);
    int rc = write_rec(backend, rec);
    if (rc != SQLITE_DONE)
        return rc;
    char renamed[LEASE_ID_LENGTH_MAX + 32];
    snprintf(renamed, sizeof renamed, "%s#%lld", rec->lease_id, (long long)rec->seq);
    sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_LEASE_RENAME);
    sqlite3_bind_text(stmt, 1, renamed, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, rec->seq);
    rc = sq_statement_run(stmt);
    if (rc != SQLITE_DONE)
        return rc;
    cache_remove(backend, rec);
    rec_free(backend, rec);
    return SQLITE_DONE;
}

int sq_lease_event(struct sq_backend *backend, struct sq_lease_rec *rec, int64_t at_ms,
                   const char *type, int64_t limit_id, uint64_t amount, uint64_t actual,
                   const char *detail)
{
    assert(type != NULL);
    assert(detail != NULL);
    if (rec->event_count == SQ_EVENT_ITEMS) {
        int rc = write_events(backend, rec);
        if (rc != SQLITE_DONE)
            return rc;
        assert(rec->event_count == 0); /* written out, the row is new */
    }
    if (rec->event_count == rec->event_capacity) {
        uint32_t capacity = rec->event_capacity * 2;
        struct sq_lease_event *events = malloc(capacity * sizeof *events);
        if (events == NULL)
            return SQLITE_NOMEM;
        memcpy(events, rec->events, rec->event_count * sizeof *events);
        if (rec->events != rec->inline_events)
            free(rec->events);
        rec->events = events;
        rec->event_capacity = capacity;
    }
    assert(rec->event_count < rec->event_capacity);
    rec->events[rec->event_count++] = (struct sq_lease_event){.at_ms = at_ms,
                                                              .type = type,
                                                              .limit_id = limit_id,
                                                              .amount = amount,
                                                              .actual = actual,
                                                              .detail = detail};
    rec->dirty = true;
    return SQLITE_DONE;
}

/* ---- Writing. */

/* ---- Key ranges of the audit log. */

static bool match_range(const void *value, const void *key)
{
    return strcmp(((const struct sq_key_range *)value)->key, key) == 0;
}

static const char *limit_key_of(struct sq_backend *backend, int64_t limit_id)
{
    const struct sq_limit *limit = sq_mirror_limit_by_id(&backend->mirror, limit_id);
    return limit != NULL ? limit->state.definition.key : "";
}

/* event_log row event_id holds events of the limit's key. */
static int key_range_note(struct sq_backend *backend, int64_t limit_id, int64_t event_id)
{
    struct sq_lease_cache *c = &backend->leases;
    const char *key = limit_key_of(backend, limit_id);
    uint64_t hash = sq_hash_bytes(key, strlen(key));
    struct sq_key_range *r = sq_map_find(&c->ranges_by_key, hash, match_range, key);
    if (r != NULL) {
        if (event_id > r->last_event)
            r->last_event = event_id;
        return SQLITE_DONE;
    }
    if (c->range_count == c->range_capacity) {
        uint32_t capacity = c->range_capacity == 0 ? 16 : c->range_capacity * 2;
        struct sq_key_range *ranges = malloc(capacity * sizeof *ranges);
        if (ranges == NULL)
            return SQLITE_NOMEM;
        if (c->range_count > 0)
            memcpy(ranges, c->ranges, c->range_count * sizeof *ranges);
        free(c->ranges);
        c->ranges = ranges;
        c->range_capacity = capacity;
        sq_map_free(&c->ranges_by_key); /* it pointed into the old array */
        if (sq_map_reserve(&c->ranges_by_key, c->range_count + 1) != 0)
            return SQLITE_NOMEM;
        for (uint32_t i = 0; i < c->range_count; i++)
            sq_map_insert(&c->ranges_by_key, sq_hash_bytes(ranges[i].key, strlen(ranges[i].key)),
                          &ranges[i]);
    }
    if (sq_map_reserve(&c->ranges_by_key, 1) != 0)
        return SQLITE_NOMEM;
    r = &c->ranges[c->range_count++];
    *r = (struct sq_key_range){.key = key, .first_event = event_id, .last_event = event_id};
    sq_map_insert(&c->ranges_by_key, hash, r);
    return SQLITE_DONE;
}

static int key_ranges_write(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    for (uint32_t i = 0; i < c->range_count; i++) {
        sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_EVENT_KEY);
        sqlite3_bind_text(stmt, 1, c->ranges[i].key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 2, c->ranges[i].first_event);
        sqlite3_bind_int64(stmt, 3, c->ranges[i].last_event);
        int rc = sq_statement_run(stmt);
        if (rc != SQLITE_DONE)
            return rc;
    }
    c->range_count = 0;
    sq_map_free(&c->ranges_by_key);
    return SQLITE_DONE;
}

/* One event_log row for the events gathered; its id joins the lease's
 * event_rows and the key ranges. */
static int write_events(struct sq_backend *backend, struct sq_lease_rec *rec)
{
    if (rec->event_count == 0)
        return SQLITE_DONE;
    if (!sq_events_json(rec, &backend->json))
        return SQLITE_NOMEM;
    sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_EVENT_INSERT);
    sqlite3_bind_int64(stmt, 1, rec->seq);
    sqlite3_bind_text(stmt, 2, rec->lease_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 3, rec->caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 4, backend->json.data, (int)backend->json.length, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 5, rec->events[0].at_ms);
    int rc = sq_statement_run(stmt);
    if (rc != SQLITE_DONE)
        return rc;
    int64_t event_id = sqlite3_last_insert_rowid(backend->db);
    for (uint32_t i = 0; i < rec->event_count; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = rec->events[j].limit_id == rec->events[i].limit_id;
        if (!seen &&
            (rc = key_range_note(backend, rec->events[i].limit_id, event_id)) != SQLITE_DONE)
            return rc;
    }
    size_t size = strlen(rec->event_rows) + 24;
    char *rows = malloc(size);
    if (rows == NULL)
        return SQLITE_NOMEM;
    snprintf(rows, size, "%s%s%lld", rec->event_rows, rec->event_rows[0] != '\0' ? "," : "",
             (long long)event_id);
    rc = sq_lease_set_text(rec, &rec->event_rows, rows);
    free(rows);
    if (rc != SQLITE_DONE)
        return rc;
    rec->event_count = 0;
    rec->dirty = true;
    return SQLITE_DONE;
}

/* One event_log row with the `expired` events of the holds expired so far
 * in this transaction (each item names its lease and caller), its key
 * index entries, and one expirations row per hold. */
static int expiries_write(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    struct sq_text *t = &backend->json;
    uint32_t audited = 0;
    if (!sq_expiries_json(c->expiries, c->expiry_count, t, &audited))
        return SQLITE_NOMEM;
    int64_t event_id = 0;
    int rc = SQLITE_DONE;
    if (audited > 0) {
        sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_EVENT_INSERT);
        sqlite3_bind_null(stmt, 1);
        sqlite3_bind_null(stmt, 2);
        sqlite3_bind_text(stmt, 3, "", -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 4, t->data, (int)t->length, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 5, c->expiries[0].at_ms);
        if ((rc = sq_statement_run(stmt)) != SQLITE_DONE)
            return rc;
        event_id = sqlite3_last_insert_rowid(backend->db);
    }
    for (uint32_t i = 0; i < c->expiry_count; i++) {
        const struct sq_expiry *e = &c->expiries[i];
        if (e->audited && (rc = key_range_note(backend, e->limit_id, event_id)) != SQLITE_DONE)
            return rc;
        sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_EXPIRATION_INSERT);
        sqlite3_bind_int64(stmt, 1, e->row_id);
        if (e->audited)
            sqlite3_bind_int64(stmt, 2, event_id);
        else
            sqlite3_bind_null(stmt, 2);
        if ((rc = sq_statement_run(stmt)) != SQLITE_DONE)
            return rc;
    }
    for (uint32_t i = 0; i < c->expiry_count; i++)
        sq_lease_ref_drop(c->expiries[i].lease);
    c->expiry_count = 0;
    return SQLITE_DONE;
}

/* ---- Callers' budget counters. */

struct caller_key {
    int64_t limit_id;
    int64_t period_start_ms;
    const char *caller;
};

static bool match_caller(const void *value, const void *key)
{
    const struct sq_caller_delta *d = value;
    const struct caller_key *k = key;
    return d->limit_id == k->limit_id && d->period_start_ms == k->period_start_ms &&
           strcmp(d->caller, k->caller) == 0;
}

static uint64_t caller_hash(const struct caller_key *k)
{
    return sq_hash_bytes(k->caller, strlen(k->caller)) ^
           sq_hash_i64(k->limit_id * 1000003 + k->period_start_ms);
}

static int callers_write(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    for (uint32_t i = 0; i < c->caller_count; i++) {
        const struct sq_caller_delta *d = &c->callers[i];
        if (d->reserved == 0 && d->used == 0 && d->debt == 0 && d->calls == 0)
            continue;
        sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_CALLER_ADD);
        sqlite3_bind_int64(stmt, 1, d->limit_id);
        sqlite3_bind_int64(stmt, 2, d->period_start_ms);
        sqlite3_bind_text(stmt, 3, d->caller, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 4, d->reserved);
        sqlite3_bind_int64(stmt, 5, d->used);
        sqlite3_bind_int64(stmt, 6, d->debt);
        sqlite3_bind_int64(stmt, 7, d->calls);
        int rc = sq_statement_run(stmt);
        if (rc != SQLITE_DONE)
            return rc;
    }
    c->caller_count = 0;
    sq_map_free(&c->callers_by_key);
    return SQLITE_DONE;
}

int sq_leases_caller_add(struct sq_backend *backend, const struct sq_limit *limit,
                         int64_t period_start_ms, const char *caller, int64_t reserved,
                         int64_t used, int64_t debt, int64_t calls)
{
    if (limit->state.definition.kind != LIMIT_BUDGET)
        return SQLITE_DONE;
    struct sq_lease_cache *c = &backend->leases;
    struct caller_key key = {limit->id, period_start_ms, caller};
    uint64_t hash = caller_hash(&key);
    struct sq_caller_delta *d = sq_map_find(&c->callers_by_key, hash, match_caller, &key);
    if (d == NULL) {
        if (c->caller_count == c->caller_capacity) {
            /* The map points into the array: write what is gathered first. */
            if (c->caller_capacity >= SQ_LEASE_CACHE_MAX) {
                int rc = callers_write(backend);
                if (rc != SQLITE_DONE)
                    return rc;
            } else {
                uint32_t capacity = c->caller_capacity == 0 ? 16 : c->caller_capacity * 2;
                struct sq_caller_delta *callers = malloc(capacity * sizeof *callers);
                if (callers == NULL)
                    return SQLITE_NOMEM;
                if (c->caller_count > 0)
                    memcpy(callers, c->callers, c->caller_count * sizeof *callers);
                free(c->callers);
                c->callers = callers;
                c->caller_capacity = capacity;
                sq_map_free(&c->callers_by_key); /* rebuilt below */
                if (sq_map_reserve(&c->callers_by_key, c->caller_count + 1) != 0)
                    return SQLITE_NOMEM;
                for (uint32_t i = 0; i < c->caller_count; i++) {
                    struct sq_caller_delta *e = &c->callers[i];
                    struct caller_key k = {e->limit_id, e->period_start_ms, e->caller};
                    sq_map_insert(&c->callers_by_key, caller_hash(&k), e);
                }
            }
        }
        if (sq_map_reserve(&c->callers_by_key, 1) != 0)
            return SQLITE_NOMEM;
        d = &c->callers[c->caller_count++];
        *d = (struct sq_caller_delta){.limit_id = limit->id, .period_start_ms = period_start_ms};
        size_t length = strlen(caller);
        assert(length < sizeof d->caller);
        memcpy(d->caller, caller, length + 1);
        sq_map_insert(&c->callers_by_key, hash, d);
    }
    d->reserved += reserved;
    d->used += used;
    d->debt += debt;
    d->calls += calls;
    return SQLITE_DONE;
}

int sq_leases_expired(struct sq_backend *backend, const struct sq_expiry *expiry)
{
    struct sq_lease_cache *c = &backend->leases;
    if (c->expiry_count == SQ_EVENT_ITEMS) {
        int rc = expiries_write(backend);
        if (rc != SQLITE_DONE)
            return rc;
    }
    if (c->expiry_count == c->expiry_capacity) {
        uint32_t capacity = c->expiry_capacity == 0 ? 256 : c->expiry_capacity * 2;
        struct sq_expiry *expiries = realloc(c->expiries, capacity * sizeof *expiries);
        if (expiries == NULL)
            return SQLITE_NOMEM;
        c->expiries = expiries;
        c->expiry_capacity = capacity;
    }
    c->expiries[c->expiry_count] = *expiry;
    sq_lease_ref_keep(expiry->lease);
    c->expiry_count++;
    return SQLITE_DONE;
}

int sq_leases_limit_event(struct sq_backend *backend, int64_t at_ms, const struct sq_limit *limit,
                          uint64_t amount, const char *detail)
{
    struct sq_lease_event e = {.at_ms = at_ms,
                               .type = "limit_changed",
                               .limit_id = limit->id,
                               .amount = amount,
                               .detail = detail};
    struct sq_lease_rec rec = {.event_count = 1, .events = &e};
    if (!sq_events_json(&rec, &backend->json))
        return SQLITE_NOMEM;
    sqlite3_stmt *stmt = sq_statement(backend, SQ_STMT_EVENT_INSERT);
    sqlite3_bind_null(stmt, 1);
    sqlite3_bind_null(stmt, 2);
    sqlite3_bind_text(stmt, 3, "", -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 4, backend->json.data, (int)backend->json.length, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 5, at_ms);
    int rc = sq_statement_run(stmt);
    if (rc != SQLITE_DONE)
        return rc;
    return key_range_note(backend, limit->id, sqlite3_last_insert_rowid(backend->db));
}

static int write_rec(struct sq_backend *backend, struct sq_lease_rec *rec)
{
    if (!rec->dirty)
        return SQLITE_DONE;
    int rc = write_events(backend, rec); /* first: the lease row lists its id */
    if (rc != SQLITE_DONE)
        return rc;
    if (!sq_items_json(rec, &backend->json))
        return SQLITE_NOMEM;
    sqlite3_stmt *stmt =
        sq_statement(backend, rec->is_new ? SQ_STMT_LEASE_INSERT : SQ_STMT_LEASE_UPDATE);
    sqlite3_bind_int64(stmt, 1, rec->seq);
    sqlite3_bind_text(stmt, 3, lease_state_name(rec->state), -1, SQLITE_STATIC);
    if (rec->is_new) {
        sqlite3_bind_text(stmt, 2, rec->lease_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 4, rec->fingerprint != NULL ? rec->fingerprint : "", -1,
                          SQLITE_STATIC);
        sqlite3_bind_text(stmt, 5, rec->caller, -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 6, rec->reserved_at_ms);
        sqlite3_bind_int64(stmt, 7, rec->expires_at_ms);
        sqlite3_bind_int64(stmt, 8, rec->retry_after_ms);
        sqlite3_bind_text(stmt, 9, rec->denied != NULL ? rec->denied : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(stmt, 10, rec->created_at_ms);
        if (rec->mcp_server != NULL) {
            sqlite3_bind_text(stmt, 15, rec->mcp_server, -1, SQLITE_STATIC);
            sqlite3_bind_text(stmt, 16, rec->tool, -1, SQLITE_STATIC);
        } else {
            sqlite3_bind_null(stmt, 15);
            sqlite3_bind_null(stmt, 16);
        }
    }
    if (rec->finished_at_ms != 0)
        sqlite3_bind_int64(stmt, 11, rec->finished_at_ms);
    else
        sqlite3_bind_null(stmt, 11);
    sqlite3_bind_int(stmt, 12, lease_live(rec));
    sqlite3_bind_text(stmt, 13, backend->json.data, (int)backend->json.length, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 14, rec->event_rows, -1, SQLITE_STATIC);
    rc = sq_statement_run(stmt);
    if (rc == SQLITE_DONE && !rec->is_new && sqlite3_changes(backend->db) != 1)
        rc = SQLITE_CORRUPT;
    if (rc != SQLITE_DONE)
        return rc;
    rec->is_new = false;
    rec->dirty = false;
    return SQLITE_DONE;
}

/* Writes what the transaction gathered: expiries, callers' counters, every
 * lease record, the audit log's key ranges. On an error, notes the request
 * at fault (backend->write_failed_origin). */
static int write_all(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    int rc = expiries_write(backend);
    if (rc == SQLITE_DONE)
        rc = callers_write(backend);
    for (uint32_t i = 0; rc == SQLITE_DONE && i < c->count; i++) {
        rc = write_rec(backend, c->recs[i]);
        if (rc != SQLITE_DONE) {
            backend->write_failed = true;
            backend->write_failed_origin = c->recs[i]->origin;
            return rc;
        }
    }
    if (rc == SQLITE_DONE)
        rc = key_ranges_write(backend);
    if (rc != SQLITE_DONE) {
        backend->write_failed = true;
        backend->write_failed_origin = backend->current;
    }
    return rc;
}

int sq_leases_flush(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    int rc = write_all(backend);
    if (rc != SQLITE_DONE)
        return rc;
    /* Free what is not pinned; index the rest again. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < c->count; i++) {
        assert(!c->recs[i]->dirty); /* written */
        if (c->recs[i]->pinned)
            c->recs[kept++] = c->recs[i];
        else
            rec_free(backend, c->recs[i]);
    }
    c->count = kept;
    if (c->by_id.capacity > 0) {
        memset(c->by_id.slots, 0, c->by_id.capacity * sizeof *c->by_id.slots);
        memset(c->by_seq.slots, 0, c->by_seq.capacity * sizeof *c->by_seq.slots);
    }
    c->by_id.count = 0;
    c->by_seq.count = 0;
    for (uint32_t i = 0; i < kept; i++) {
        struct sq_lease_rec *rec = c->recs[i];
        sq_map_insert(&c->by_id, sq_hash_bytes(rec->lease_id, strlen(rec->lease_id)), rec);
        sq_map_insert(&c->by_seq, sq_hash_i64(rec->seq), rec);
    }
    assert(c->by_id.count == kept);
    return SQLITE_DONE;
}

int sq_leases_flush_if_full(struct sq_backend *backend)
{
    if (backend->leases.count <= SQ_LEASE_CACHE_MAX)
        return SQLITE_DONE;
    return sq_leases_flush(backend);
}

void sq_leases_discard(struct sq_backend *backend)
{
    struct sq_lease_cache *c = &backend->leases;
    for (uint32_t i = 0; i < c->expiry_count; i++)
        sq_lease_ref_drop(c->expiries[i].lease);
    c->expiry_count = 0;
    c->caller_count = 0;
    sq_map_free(&c->callers_by_key);
    c->range_count = 0;
    sq_map_free(&c->ranges_by_key);
    for (uint32_t i = 0; i < c->count; i++)
        rec_free(backend, c->recs[i]);
    c->count = 0;
    sq_map_free(&c->by_id);
    sq_map_free(&c->by_seq);
}

void sq_leases_free(struct sq_backend *backend)
{
    sq_leases_discard(backend);
    while (backend->leases.free_recs != NULL) {
        struct sq_lease_rec *rec = backend->leases.free_recs;
        backend->leases.free_recs = rec->next_free;
        free(rec);
    }
    backend->leases.free_count = 0;
    free(backend->leases.expiries);
    free(backend->leases.callers);
    free(backend->leases.ranges);
    backend->leases.ranges = NULL;
    backend->leases.range_capacity = 0;
    backend->leases.callers = NULL;
    backend->leases.caller_capacity = 0;
    backend->leases.expiries = NULL;
    backend->leases.expiry_capacity = 0;
    free(backend->leases.recs);
    backend->leases.recs = NULL;
    backend->leases.capacity = 0;
    free(backend->json.data);
    backend->json = (struct sq_text){0};
}
