/* The console (docs/console.md): the page, script and style sheet embedded
 * in the binary, served with a strict Content-Security-Policy, and the JSON
 * routes the page reads under /v1/console/ (docs/api.md). Every figure the
 * page shows comes from here or from the other routes; none is guessed in
 * the page. */
#include "exchange.h"
#include "services.h"
#include "control.h"
#include "keys_control.h"
#include "gateway.h"
#include "handlers.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activity.h"
#include "core/hash.h"
#include "console_assets.h"
#include "wire/decode.h"
#include "wire/encode.h"
#include "spend.h"
#include "wire/wire_text.h"

/* The page holds no data, loads nothing from elsewhere, runs no inline
 * script or style, and may not be framed. */
#define CONSOLE_CSP                                                                                \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "                \
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

#define HOLD_CALLERS_DEFAULT 20
#define HOLD_CALLERS_MAX 100
#define HOLD_CALLERS_TRACKED_MAX 4096 /* distinct callers one holds answer tells apart */
#define DENIALS_PAGE_DEFAULT 50

/* ---- the page ------------------------------------------------------------ */

static int queue_asset(struct exchange *ex, unsigned status, const struct console_asset *asset)
{
    const struct http_header headers[] = {
        {"Content-Type", asset->content_type}, {"Content-Security-Policy", CONSOLE_CSP},
        {"X-Content-Type-Options", "nosniff"}, {"Referrer-Policy", "no-referrer"},
        {"Cache-Control", "no-cache"},         {"ETag", asset->etag},
    };
    return exchange_answer_raw(ex, status, headers, sizeof headers / sizeof headers[0],
                               status == 200 ? (const char *)asset->data : NULL,
                               status == 200 ? asset->size : 0);
}

int handle_console_asset(struct exchange *ex)
{
    const struct console_asset *asset = NULL;
    for (size_t i = 0; i < CONSOLE_ASSET_COUNT && asset == NULL; i++) {
        if (strcmp(console_assets[i].path, ex->route->path) == 0)
            asset = &console_assets[i];
    }
    if (asset == NULL)
        return exchange_error(ex, 404, WIRE_NOT_FOUND);
    const char *seen = exchange_header(ex, "if-none-match");
    bool unchanged = seen != NULL && strcmp(seen, asset->etag) == 0;
    return queue_asset(ex, unchanged ? 304 : 200, asset);
}

/* ---- request arguments --------------------------------------------------- */

/* An integer query argument in min..max (default when absent); 0, or -1
 * answered 400. */
static int query_u32(struct exchange *ex, const char *name, uint32_t min, uint32_t max,
                     uint32_t *out)
{
    int64_t value;
    int found = exchange_query_i64(ex, name, min, max, &value);
    if (found > 0)
        *out = (uint32_t)value;
    return found < 0 ? -1 : 0;
}

/* A key-shaped query argument: "" when absent or empty, else a valid key
 * prefix. 0, or -1 answered 400. */
static int query_key(struct exchange *ex, const char *name, char *out)
{
    out[0] = '\0';
    int found = exchange_query(ex, name, out, LIMIT_KEY_LENGTH_MAX + 1);
    if (found < 0)
        return -1;
    if (found > 0 && out[0] != '\0' && !limit_key_valid(out, strlen(out))) {
        char error[128];
        snprintf(error, sizeof error,
                 "%s: must be at most 256 bytes of printable ASCII without whitespace", name);
        exchange_error(ex, 400, error);
        return -1;
    }
    return 0;
}

/* ---- JSON writing -------------------------------------------------------- */

/* A time, or null when 0 (never, none). */
static void member_time(struct buffer *b, const char *name, int64_t unix_ms)
{
    buffer_member(b, name);
    if (unix_ms == 0)
        buffer_append_str(b, "null");
    else
        buffer_append_i64(b, unix_ms);
}

static void member_bool(struct buffer *b, const char *name, bool value)
{
    buffer_member(b, name);
    buffer_append_str(b, value ? "true" : "false");
}

/* count per second over `seconds`, with one decimal (rounded down). */
static void member_rate(struct buffer *b, const char *name, uint64_t count, uint32_t seconds)
{
    buffer_member(b, name);
    uint64_t tenths = count * 10 / seconds;
    buffer_printf(b, "%" PRIu64 ".%" PRIu64, tenths / 10, tenths % 10);
}

/* ---- GET /v1/console/status ---------------------------------------------- */

static void encode_throughput(struct buffer *b, struct activity *activity, int64_t now_ms)
{
    struct activity_second seconds[ACTIVITY_SECONDS_REPORTED];
    activity_seconds(activity, now_ms, seconds, ACTIVITY_SECONDS_REPORTED);
    uint64_t reserves_10 = 0, denials_10 = 0, reserves_60 = 0, denials_60 = 0;
    for (uint32_t i = 0; i < ACTIVITY_SECONDS_REPORTED; i++) {
        reserves_60 += seconds[i].reserves;
        denials_60 += seconds[i].denials;
        if (i >= ACTIVITY_SECONDS_REPORTED - 10) {
            reserves_10 += seconds[i].reserves;
            denials_10 += seconds[i].denials;
        }
    }
    buffer_append_str(b, "\"throughput\":{");
    buffer_member_u64(b, "reserves_10s", reserves_10);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "denials_10s", denials_10);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "reserves_60s", reserves_60);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "denials_60s", denials_60);
    buffer_append_char(b, ',');
    member_rate(b, "reserves_per_second_10s", reserves_10, 10);
    buffer_append_char(b, ',');
    member_rate(b, "denials_per_second_10s", denials_10, 10);
    buffer_append_char(b, ',');
    member_rate(b, "reserves_per_second_60s", reserves_60, 60);
    buffer_append_char(b, ',');
    member_rate(b, "denials_per_second_60s", denials_60, 60);
    /* The last whole seconds, oldest first: two arrays, not 60 objects. */
    buffer_append_str(b, ",\"seconds\":{");
    buffer_member_i64(b, "from_unix_ms", seconds[0].at_unix_ms);
    buffer_append_str(b, ",\"reserves\":[");
    for (uint32_t i = 0; i < ACTIVITY_SECONDS_REPORTED; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_u64(b, seconds[i].reserves);
    }
    buffer_append_str(b, "],\"denials\":[");
    for (uint32_t i = 0; i < ACTIVITY_SECONDS_REPORTED; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_u64(b, seconds[i].denials);
    }
    buffer_append_str(b, "]}}");
}

int handle_console_status(struct exchange *ex)
{
    struct server *server = ex->server;
    int64_t now_ms = clock_now_ms(server->clock);
    const char *authorization = exchange_header(ex, "authorization");
    bool admin = auth_check(&server->auth, AUTH_ADMIN, authorization) == AUTH_OK;
    uint64_t denials_total = 0;
    (void)activity_denials(server->activity, NULL, 0, &denials_total);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_char(&b, '{');
    buffer_member_i64(&b, "now_unix_ms", now_ms);
    buffer_append_char(&b, ',');
    buffer_member_i64(&b, "started_at_unix_ms", server->started_at_unix_ms);
    buffer_append_char(&b, ',');
    buffer_member_string(&b, "version", LLMLIMIT_VERSION);
    buffer_append_char(&b, ',');
    buffer_member_string(&b, "backend", server->backend->ops->name);
    buffer_append_char(&b, ',');
    member_bool(&b, "admin", admin);
    buffer_append_char(&b, ',');
    member_bool(&b, "holds_seen_here_only", server->backend->ops->holds_seen_here_only);
    buffer_append_char(&b, ',');
    member_bool(&b, "holds_by_caller", server->backend->ops->holds_scan != NULL);
    buffer_append_char(&b, ',');
    member_bool(&b, "usage_by_caller", server->backend->ops->usage_by_caller != NULL);
    buffer_append_char(&b, ',');
    member_bool(&b, "gateway_enabled",
                server->gateway != NULL); /* GET /v1/console/gateway answers */
    buffer_append_char(&b, ',');
    buffer_member_u64(&b, "denials_total", denials_total);
    buffer_append_char(&b, ',');
    if (server->control != NULL) { /* --control: is the shared view current? */
        bool connected;
        int64_t revision;
        control_status(server->control, &connected, &revision);
        bool keys_connected = true;
        int64_t keys_revision = 0;
        if (server->keys_control != NULL)
            keys_control_status(server->keys_control, &keys_connected, &keys_revision);
        buffer_append_str(&b, "\"control\":{");
        member_bool(&b, "connected", connected && keys_connected);
        buffer_append_char(&b, ',');
        buffer_member_i64(&b, "revision", revision);
        buffer_append_char(&b, ',');
        member_bool(&b, "keys_connected", keys_connected);
        buffer_append_char(&b, ',');
        buffer_member_i64(&b, "keys_revision", keys_revision);
        buffer_append_str(&b, "},");
    }
    encode_throughput(&b, server->activity, now_ms);
    buffer_append_char(&b, '}');
    return exchange_answer(ex, 200, &b, 0);
}

/* ---- GET /v1/console/limits ---------------------------------------------- */

static void encode_holds(struct buffer *b, const struct holds_summary *holds)
{
    buffer_append_str(b, "\"holds\":{");
    buffer_member_u64(b, "count", holds->count);
    buffer_append_char(b, ',');
    member_time(b, "oldest_at_unix_ms", holds->oldest_at_unix_ms);
    buffer_append_char(b, ',');
    member_time(b, "oldest_expires_at_unix_ms", holds->oldest_expires_at_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "expiring_soon", holds->expiring_soon);
    buffer_append_char(b, ',');
    member_bool(b, "exact", holds->exact);
    buffer_append_char(b, '}');
}

/* Reserves waiting on the limit now (wait_ms), and when the oldest began. */
static void encode_waiters(struct buffer *b, struct wait *wait, const char *key)
{
    uint32_t count = 0;
    int64_t oldest_started_ms = 0;
    wait_key_waiters(wait, key, &count, &oldest_started_ms);
    buffer_append_str(b, "\"waiters\":{");
    buffer_member_u64(b, "count", count);
    buffer_append_char(b, ',');
    member_time(b, "oldest_started_at_unix_ms", count > 0 ? oldest_started_ms : 0);
    buffer_append_char(b, '}');
}

static void encode_report(struct buffer *b, const struct limit_report *r, struct wait *wait)
{
    const struct limit_state *state = &r->usage.state;
    buffer_append_char(b, '{');
    encode_definition_members(b, &state->definition);
    buffer_append_char(b, ',');
    buffer_member_string(b, "status", limit_status_name(state->status));
    buffer_append_char(b, ',');
    buffer_member_u64(b, "pending_decrease_to", state->pending_decrease_to);
    buffer_append_char(b, ',');
    encode_usage_amounts(b, &r->usage);
    buffer_append_char(b, ',');
    member_time(b, "reset_at_unix_ms", r->reset_at_unix_ms);
    buffer_append_char(b, ',');
    encode_holds(b, &r->holds);
    buffer_append_char(b, ',');
    encode_waiters(b, wait, state->definition.key);
    buffer_append_char(b, '}');
}

/* The query of GET /v1/console/limits; 0, or -1 answered 400. */
static int limits_query(struct exchange *ex, char *prefix, char *after, struct limits_query *query)
{
    *query = (struct limits_query){.prefix = prefix,
                                   .after = after,
                                   .kind = LIMIT_KIND_NONE,
                                   .limit = CONSOLE_LIMITS_PAGE_DEFAULT,
                                   .soon_ms = CONSOLE_HOLDS_SOON_MS};
    char kind[16];
    int found = exchange_query(ex, "kind", kind, sizeof kind);
    if (found < 0 || query_key(ex, "prefix", prefix) != 0 || query_key(ex, "after", after) != 0 ||
        query_u32(ex, "limit", 1, CONSOLE_LIMITS_PAGE_MAX, &query->limit) != 0)
        return -1;
    if (found > 0 && limit_kind_parse(kind, &query->kind) != 0) {
        exchange_error(ex, 400, WIRE_KIND_INVALID);
        return -1;
    }
    return 0;
}

int handle_console_limits(struct exchange *ex)
{
    struct server *server = ex->server;
    char prefix[LIMIT_KEY_LENGTH_MAX + 1], after[LIMIT_KEY_LENGTH_MAX + 1];
    struct limits_query query;
    if (limits_query(ex, prefix, after, &query) != 0)
        return 0;
    struct limit_report *reports = NULL;
    size_t count = 0;
    bool more = false;
    int64_t now_ms = clock_now_ms(server->clock);
    if (server->backend->ops->limits_report(server->backend, &query, &reports, &count, &more) != 0)
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_char(&b, '{');
    buffer_member_i64(&b, "now_unix_ms", now_ms);
    buffer_append_char(&b, ',');
    buffer_member_i64(&b, "soon_ms", query.soon_ms);
    buffer_append_char(&b, ',');
    member_bool(&b, "holds_seen_here_only", server->backend->ops->holds_seen_here_only);
    buffer_append_str(&b, ",\"limits\":[");
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            buffer_append_char(&b, ',');
        encode_report(&b, &reports[i], server->wait);
    }
    buffer_append_str(&b, "],");
    buffer_member(&b, "next_after");
    if (more && count > 0) {
        const char *last = reports[count - 1].usage.state.definition.key;
        buffer_append_json_string(&b, last, strlen(last));
    } else {
        buffer_append_str(&b, "null");
    }
    buffer_append_char(&b, '}');
    free(reports);
    return exchange_answer(ex, 200, &b, 0);
}

/* ---- GET /v1/console/holds/{key} ----------------------------------------- */

struct caller_holds {
    char caller[CALLER_LENGTH_MAX + 1];
    uint32_t caller_length;
    uint64_t hash;
    uint64_t holds;
    uint64_t amount;
    int64_t oldest_expires_at_ms;
};

/* What the scan saw: callers in an open-addressing table (twice the bound,
 * so probes end), and everything past the bound counted apart. */
struct holds_tally {
    struct caller_holds *table; /* 2 * HOLD_CALLERS_TRACKED_MAX slots; holds == 0: empty */
    uint32_t callers;
    uint64_t holds;
    uint64_t amount;
    uint64_t untracked_holds;
    uint64_t untracked_amount;
};

static uint64_t caller_hash(const char *caller, uint32_t length)
{
    return hash_fnv1a(caller, length);
}

static struct caller_holds *tally_slot(struct holds_tally *t, const struct hold_view *hold)
{
    uint64_t hash = caller_hash(hold->caller, hold->caller_length);
    uint32_t mask = 2 * HOLD_CALLERS_TRACKED_MAX - 1;
    for (uint32_t i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
        struct caller_holds *slot = &t->table[i];
        if (slot->holds == 0) {
            if (t->callers == HOLD_CALLERS_TRACKED_MAX)
                return NULL;
            t->callers++;
            memcpy(slot->caller, hold->caller, hold->caller_length);
            slot->caller[hold->caller_length] = '\0';
            slot->caller_length = hold->caller_length;
            slot->hash = hash;
            slot->oldest_expires_at_ms = INT64_MAX;
            return slot;
        }
        if (slot->hash == hash && slot->caller_length == hold->caller_length &&
            memcmp(slot->caller, hold->caller, hold->caller_length) == 0)
            return slot;
    }
}

static void tally_hold(void *context, const struct hold_view *hold)
{
    struct holds_tally *t = context;
    assert(hold->caller_length <= CALLER_LENGTH_MAX);
    t->holds++;
    t->amount = amount_add_saturating(t->amount, hold->amount);
    struct caller_holds *slot = tally_slot(t, hold);
    if (slot == NULL) {
        t->untracked_holds++;
        t->untracked_amount = amount_add_saturating(t->untracked_amount, hold->amount);
        return;
    }
    slot->holds++;
    slot->amount = amount_add_saturating(slot->amount, hold->amount);
    if (hold->expires_at_unix_ms < slot->oldest_expires_at_ms)
        slot->oldest_expires_at_ms = hold->expires_at_unix_ms;
}

/* Most holds first, then most held, then by name: a leak shows on top. */
static int compare_callers(const void *a, const void *b)
{
    const struct caller_holds *x = a, *y = b;
    if (x->holds != y->holds)
        return x->holds > y->holds ? -1 : 1;
    if (x->amount != y->amount)
        return x->amount > y->amount ? -1 : 1;
    return strcmp(x->caller, y->caller);
}

static void encode_callers(struct buffer *b, struct holds_tally *t, uint32_t top)
{
    uint32_t n = 0; /* pack the used slots, then sort them */
    for (uint32_t i = 0; i < 2 * HOLD_CALLERS_TRACKED_MAX; i++) {
        if (t->table[i].holds > 0)
            t->table[n++] = t->table[i];
    }
    assert(n == t->callers);
    qsort(t->table, n, sizeof *t->table, compare_callers);
    uint64_t other_holds = t->untracked_holds, other_amount = t->untracked_amount;
    buffer_append_str(b, "\"callers\":[");
    for (uint32_t i = 0; i < n; i++) {
        if (i >= top) {
            other_holds += t->table[i].holds;
            other_amount = amount_add_saturating(other_amount, t->table[i].amount);
            continue;
        }
        buffer_append_str(b, i > 0 ? ",{" : "{");
        buffer_member_string(b, "caller", t->table[i].caller);
        buffer_append_char(b, ',');
        buffer_member_u64(b, "holds", t->table[i].holds);
        buffer_append_char(b, ',');
        buffer_member_u64(b, "amount", t->table[i].amount);
        buffer_append_char(b, ',');
        buffer_member_i64(b, "oldest_expires_at_unix_ms", t->table[i].oldest_expires_at_ms);
        buffer_append_char(b, '}');
    }
    buffer_append_str(b, "],\"others\":{");
    buffer_member_u64(b, "holds", other_holds);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "amount", other_amount);
    buffer_append_char(b, '}');
}

int handle_console_holds(struct exchange *ex)
{
    struct server *server = ex->server;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    uint32_t top = HOLD_CALLERS_DEFAULT;
    if (exchange_path_key(ex, key, sizeof key) != 0 ||
        query_u32(ex, "limit", 1, HOLD_CALLERS_MAX, &top) != 0)
        return 0;
    if (server->backend->ops->holds_scan == NULL)
        return exchange_error(ex, 404, WIRE_NOT_SUPPORTED_BY_BACKEND);
    struct holds_tally tally = {.table = calloc(2 * HOLD_CALLERS_TRACKED_MAX, sizeof *tally.table)};
    if (tally.table == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    bool complete = false;
    int64_t now_ms = clock_now_ms(server->clock);
    enum backend_admin_result rc = server->backend->ops->holds_scan(
        server->backend, key, CONSOLE_HOLDS_SCAN_MAX, tally_hold, &tally, &complete);
    if (rc != BACKEND_ADMIN_OK) {
        free(tally.table);
        return rc == BACKEND_ADMIN_UNKNOWN_KEY ? exchange_unknown_key(ex, key)
                                               : exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    }
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_char(&b, '{');
    buffer_member_string(&b, "key", key);
    buffer_append_char(&b, ',');
    buffer_member_i64(&b, "now_unix_ms", now_ms);
    buffer_append_char(&b, ',');
    buffer_member_u64(&b, "holds", tally.holds);
    buffer_append_char(&b, ',');
    buffer_member_u64(&b, "amount", tally.amount);
    buffer_append_char(&b, ',');
    member_bool(&b, "complete", complete);
    buffer_append_char(&b, ',');
    encode_callers(&b, &tally, top);
    buffer_append_char(&b, '}');
    free(tally.table);
    return exchange_answer(ex, 200, &b, 0);
}

/* ---- GET /v1/console/denials --------------------------------------------- */

/* The unit a denied key has now, so that the page can say an amount in it
 * (money in dollars): "" for none; not known when no limit has the key
 * any more (or the backend could not say). */
struct denied_unit {
    const char *key;
    bool known;
    char unit[UNIT_LENGTH_MAX + 1];
};

static int compare_denied_units(const void *a, const void *b)
{
    const struct denied_unit *x = *(const struct denied_unit *const *)a;
    const struct denied_unit *y = *(const struct denied_unit *const *)b;
    return strcmp(x->key, y->key);
}

static uint32_t denial_keys_kept(const struct activity_denial *d)
{
    return d->key_count < ACTIVITY_DENIAL_KEYS_MAX ? d->key_count : ACTIVITY_DENIAL_KEYS_MAX;
}

/* The units of the keys the denials name, looked up once per distinct key
 * (in key order, so that equal keys are neighbours): a new array the caller
 * frees, with key k of denial i at i * ACTIVITY_DENIAL_KEYS_MAX + k; NULL
 * when out of memory. */
static struct denied_unit *denied_units(struct backend *backend,
                                        const struct activity_denial *denials, size_t count)
{
    size_t slots = count > 0 ? count * ACTIVITY_DENIAL_KEYS_MAX : 1;
    struct denied_unit *units = calloc(slots, sizeof *units);
    struct denied_unit **order = calloc(slots, sizeof *order);
    if (units == NULL || order == NULL) {
        free(units);
        free(order);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        for (uint32_t k = 0; k < denial_keys_kept(&denials[i]); k++) {
            struct denied_unit *u = &units[i * ACTIVITY_DENIAL_KEYS_MAX + k];
            u->key = denials[i].keys[k];
            order[n++] = u;
        }
    }
    assert(n <= slots);
    qsort(order, n, sizeof *order, compare_denied_units);
    for (size_t j = 0; j < n; j++) {
        struct denied_unit *u = order[j];
        if (j > 0 && strcmp(order[j - 1]->key, u->key) == 0) {
            u->known = order[j - 1]->known;
            memcpy(u->unit, order[j - 1]->unit, sizeof u->unit);
            continue;
        }
        struct limit_state state;
        u->known = backend_get_limit(backend, u->key, &state) == BACKEND_ADMIN_OK;
        if (u->known)
            memcpy(u->unit, state.definition.unit, sizeof u->unit);
    }
    free(order);
    return units;
}

/* d's keys with their units at units[0..] (denied_units). */
static void encode_denial(struct buffer *b, const struct activity_denial *d,
                          const struct denied_unit *units)
{
    buffer_append_char(b, '{');
    buffer_member_u64(b, "id", d->id);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "at_unix_ms", d->at_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_string(b, "source", d->source == ACTIVITY_SOURCE_GATEWAY ? "gateway" : "api");
    buffer_append_char(b, ',');
    buffer_member_string(b, "lease_id", d->lease_id);
    buffer_append_char(b, ',');
    buffer_member_string(b, "caller", d->caller);
    buffer_append_char(b, ',');
    buffer_member(b, "error"); /* as the reserve answered it: the text, then its key */
    char error[ACTIVITY_ERROR_BYTES_MAX + LIMIT_KEY_LENGTH_MAX];
    snprintf(error, sizeof error, "%s%s", d->error,
             d->error[0] != '\0' && d->key_count > 0 ? d->keys[0] : "");
    buffer_append_json_string(b, error, strlen(error));
    buffer_append_char(b, ',');
    buffer_member_i64(b, "retry_after_ms", d->retry_after_ms);
    buffer_append_str(b, ",\"keys\":[");
    for (uint32_t i = 0; i < denial_keys_kept(d); i++) {
        assert(units[i].key == d->keys[i]);
        buffer_append_str(b, i > 0 ? ",{" : "{");
        buffer_member_string(b, "key", d->keys[i]);
        buffer_append_char(b, ',');
        buffer_member_u64(b, "amount", d->amounts[i]);
        buffer_append_char(b, ',');
        buffer_member(b, "unit");
        if (units[i].known)
            buffer_append_json_string(b, units[i].unit, strlen(units[i].unit));
        else
            buffer_append_str(b, "null");
        buffer_append_char(b, '}');
    }
    buffer_append_str(b, "],");
    buffer_member_u64(b, "keys_total", d->key_count);
    buffer_append_char(b, '}');
}

int handle_console_denials(struct exchange *ex)
{
    struct server *server = ex->server;
    uint32_t limit = DENIALS_PAGE_DEFAULT;
    if (query_u32(ex, "limit", 1, ACTIVITY_DENIALS_MAX, &limit) != 0)
        return 0;
    struct activity_denial *denials = malloc(limit * sizeof *denials);
    if (denials == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    uint64_t total = 0;
    size_t count = activity_denials(server->activity, denials, limit, &total);
    struct denied_unit *units = denied_units(server->backend, denials, count);
    if (units == NULL) {
        free(denials);
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    }
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_char(&b, '{');
    buffer_member_i64(&b, "now_unix_ms", clock_now_ms(server->clock));
    buffer_append_char(&b, ',');
    buffer_member_u64(&b, "denials_total", total);
    buffer_append_str(&b, ",\"denials\":[");
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            buffer_append_char(&b, ',');
        encode_denial(&b, &denials[i], &units[i * ACTIVITY_DENIAL_KEYS_MAX]);
    }
    buffer_append_str(&b, "]}");
    free(units);
    free(denials);
    return exchange_answer(ex, 200, &b, 0);
}

/* ---- GET /v1/console/spend/{key} ----------------------------------------- */

/* A figure of the projection, or null when the rate is unknown. */
static void member_known_u64(struct buffer *b, const char *name, bool known, uint64_t value)
{
    buffer_member(b, name);
    if (known)
        buffer_append_u64(b, value);
    else
        buffer_append_str(b, "null");
}

static void encode_projection(struct buffer *b, const struct spend_projection *p)
{
    buffer_member_i64(b, "rate_window_min_ms", SPEND_RATE_WINDOW_MS);
    buffer_append_char(b, ',');
    member_known_u64(b, "rate_window_ms", p->rate_known, (uint64_t)p->rate_window_ms);
    buffer_append_char(b, ',');
    member_known_u64(b, "rate_window_spent", p->rate_known, p->rate_window_spent);
    buffer_append_char(b, ',');
    member_known_u64(b, "rate_per_hour", p->rate_known, p->rate_per_hour);
    buffer_append_char(b, ',');
    member_time(b, "runs_out_at_unix_ms", p->runs_out ? p->runs_out_at_unix_ms : 0);
    buffer_append_char(b, ',');
    member_known_u64(b, "projected_at_period_end", p->rate_known, p->projected_at_period_end);
}

static void encode_points(struct buffer *b, const struct spend_point *points, uint32_t count)
{
    buffer_append_str(b, "\"points\":[");
    for (uint32_t i = 0; i < count; i++) {
        buffer_append_str(b, i > 0 ? ",{" : "{");
        buffer_member_i64(b, "at_unix_ms", points[i].at_unix_ms);
        buffer_append_char(b, ',');
        buffer_member_u64(b, "used", points[i].used);
        buffer_append_char(b, ',');
        buffer_member_u64(b, "debt", points[i].debt);
        buffer_append_char(b, ',');
        buffer_member_u64(b, "spent", amount_add_saturating(points[i].used, points[i].debt));
        buffer_append_char(b, '}');
    }
    buffer_append_char(b, ']');
}

static void encode_spend(struct buffer *b, const struct limit_usage *u, int64_t now_ms,
                         const struct spend_history *h)
{
    const struct limit_definition *d = &u->state.definition;
    buffer_append_char(b, '{');
    buffer_member_string(b, "key", d->key);
    buffer_append_char(b, ',');
    buffer_member_string(b, "unit", d->unit);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "capacity", d->capacity);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "period_start_unix_ms", u->period_start_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "period_end_unix_ms", u->period_end_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "now_unix_ms", now_ms);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "reserved", u->reserved);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "used", u->used);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "debt", u->debt);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "available", u->available);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "spent", amount_add_saturating(u->used, u->debt));
    buffer_append_char(b, ',');
    member_bool(b, "tracked", h->tracked);
    buffer_append_char(b, ',');
    member_time(b, "history_since_unix_ms", h->count > 0 ? h->points[0].at_unix_ms : 0);
    buffer_append_char(b, ',');
    encode_points(b, h->points, h->count);
    buffer_append_char(b, ',');
    struct spend_projection projection;
    spend_project(h->recent, h->recent_count, u, now_ms, &projection);
    encode_projection(b, &projection);
    buffer_append_char(b, '}');
}

int handle_console_spend(struct exchange *ex)
{
    struct server *server = ex->server;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    if (exchange_path_key(ex, key, sizeof key) != 0)
        return 0;
    int64_t now_ms = clock_now_ms(server->clock);
    struct limit_usage usage;
    enum backend_admin_result found = backend_usage(server->backend, key, now_ms, &usage);
    if (found == BACKEND_ADMIN_UNKNOWN_KEY)
        return exchange_unknown_key(ex, key);
    if (found != 0)
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    if (usage.state.definition.kind != LIMIT_BUDGET)
        return exchange_error(ex, 400, WIRE_KEY_NOT_A_BUDGET);
    struct spend_history *history = malloc(sizeof *history);
    if (history == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    spend_history(server->spend, key, usage.period_start_unix_ms, history);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    encode_spend(&b, &usage, now_ms, history);
    free(history);
    return exchange_answer(ex, 200, &b, 0);
}

/* ---- GET /v1/console/gateway --------------------------------------------- */

/* Spend and calls by virtual key and model, from the gateway's own counters
 * (src/server/gateway_stats.c); 404 when gateway mode is off. */
int handle_console_gateway(struct exchange *ex)
{
    struct gateway *gateway = ex->server->gateway;
    if (gateway == NULL)
        return exchange_error(ex, 404, WIRE_GATEWAY_NOT_ENABLED);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gateway_stats_json(gateway, &b);
    return exchange_answer(ex, 200, &b, 0);
}

/* The gateway's limit templates, as written (the console's Keys panel
 * instantiates them for each key: the budgets its calls spend from); 404
 * when gateway mode is off. */
int handle_console_gateway_limits(struct exchange *ex)
{
    struct gateway *gateway = ex->server->gateway;
    if (gateway == NULL)
        return exchange_error(ex, 404, WIRE_GATEWAY_NOT_ENABLED);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gateway_templates_json(gateway, &b);
    return exchange_answer(ex, 200, &b, 0);
}
