/* Gateway mode's routes up to the reserve (docs/gateway.md): the config and
 * its reload, the virtual key, the request's estimate and plan, the lease
 * id, and the reserve's verdict. What follows an allowed reserve is
 * gateway_call.c. */
#include "gateway_internal.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "activity.h"
#include "keys.h"
#include "core/uuid.h"
#include "gateway/gw_references.h"
#include "gateway/gw_secret.h"
#include "exchange.h"
#include "services.h"
#include "util/log.h"

/* ---- the config ---------------------------------------------------------- */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int gateway_open(struct server *server, struct gateway **out, char *error, size_t error_size)
{
    *out = NULL;
    char path[sizeof((struct gateway *)0)->config_path];
    if (server->config.gateway_config != NULL) {
        snprintf(path, sizeof path, "%s", server->config.gateway_config);
    } else {
        snprintf(path, sizeof path, "%s/gateway.json", server->config.data_dir);
        if (!file_exists(path))
            return 0; /* gateway mode is off */
    }
    struct gw_config *config = NULL;
    if (gw_config_load(path, &config, error, error_size) != 0)
        return -1;
    struct gateway *g = calloc(1, sizeof *g);
    if (g == NULL || gateway_stats_init(&g->stats) != 0) {
        free(g);
        gw_config_release(config);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    g->observed = gw_observed_new(GW_OBSERVED_PAIRS_MAX, GW_OBSERVED_WINDOW, GW_OBSERVED_PERCENTILE,
                                  GW_OBSERVED_MIN_CALLS);
    g->owners = gw_owners_new(GW_RESPONSE_OWNERS_MAX);
    g->items = gw_owners_new(GW_RESPONSE_ITEM_OWNERS_MAX);
    g->mcp_sessions = gw_owners_new(GW_MCP_SESSIONS_MAX);
    if (g->observed == NULL || g->owners == NULL || g->items == NULL || g->mcp_sessions == NULL) {
        gw_observed_free(g->observed);
        gw_owners_free(g->owners);
        gw_owners_free(g->items);
        gw_owners_free(g->mcp_sessions);
        gateway_stats_free(&g->stats);
        free(g);
        gw_config_release(config);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    g->server = server;
    g->answer_bytes_max = server->config.max_gateway_answer_bytes;
    snprintf(g->config_path, sizeof g->config_path, "%s", path);
    g->config = config;
    pthread_mutex_init(&g->config_mutex, NULL);
    pthread_mutex_init(&g->calls_mutex, NULL);
    pthread_cond_init(&g->calls_idle, NULL);
    pthread_mutex_init(&g->pool_mutex, NULL);
    gateway_defaults_init(g);
    if (gw_forward_start(&g->engine, NULL, NULL, 0, error, error_size) != 0) {
        gateway_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

void gateway_quiesce(struct gateway *g)
{
    pthread_mutex_lock(&g->calls_mutex);
    g->quiescing = true;
    for (struct gateway_call *call = g->calls; call != NULL; call = call->next_active) {
        pthread_mutex_lock(&call->mutex);
        if (call->transfer != NULL)
            gw_forward_cancel(g->engine, call->transfer);
        pthread_mutex_unlock(&call->mutex);
    }
    while (g->calls != NULL)
        pthread_cond_wait(&g->calls_idle, &g->calls_mutex);
    pthread_mutex_unlock(&g->calls_mutex);
}

void gateway_close(struct gateway *g)
{
    if (g == NULL)
        return;
    if (g->engine != NULL)
        gw_forward_stop(g->engine);
    assert(g->calls == NULL);
    while (g->pool != NULL) {
        struct gateway_call *next = g->pool->next_free;
        free(g->pool);
        g->pool = next;
    }
    pthread_mutex_destroy(&g->pool_mutex);
    gateway_defaults_free(g);
    gw_config_release(g->config);
    gw_observed_free(g->observed);
    gw_owners_free(g->owners);
    gw_owners_free(g->items);
    gw_owners_free(g->mcp_sessions);
    gateway_stats_free(&g->stats);
    pthread_cond_destroy(&g->calls_idle);
    pthread_mutex_destroy(&g->calls_mutex);
    pthread_mutex_destroy(&g->config_mutex);
    free(g);
}

int gateway_reload(struct gateway *g, char *error, size_t error_size)
{
    struct gw_config *config = NULL;
    if (gw_config_load(g->config_path, &config, error, error_size) != 0)
        return -1;
    pthread_mutex_lock(&g->config_mutex);
    struct gw_config *old = g->config;
    g->config = config;
    pthread_mutex_unlock(&g->config_mutex);
    gw_config_release(old); /* calls in flight hold their own reference */
    return 0;
}

const char *gateway_config_path(const struct gateway *g)
{
    return g->config_path;
}

void gateway_config_counts(struct gateway *g, uint32_t *models, uint32_t *keys, uint32_t *upstreams,
                           uint32_t *limits)
{
    struct gw_config *config = gateway_config_get(g);
    *models = config->model_count;
    *keys = config->key_count;
    *upstreams = config->upstream_count;
    *limits = config->limit_count;
    gw_config_release(config);
}

void gateway_templates_json(struct gateway *g, struct buffer *out)
{
    struct gw_config *config = gateway_config_get(g);
    buffer_append_str(out, "{\"limits\":[");
    for (uint32_t i = 0; i < config->limit_count; i++) {
        const struct gw_limit *limit = &config->limits[i];
        buffer_append_str(out, i > 0 ? ",{\"key\":" : "{\"key\":");
        buffer_append_json_string(out, limit->key_template, strlen(limit->key_template));
        buffer_append_str(out, ",\"amount\":");
        buffer_append_json_string(out, gw_amount_name(limit->amount),
                                  strlen(gw_amount_name(limit->amount)));
        buffer_append_str(out, limit->model_calls_only  ? ",\"calls\":\"model\""
                               : limit->tool_calls_only ? ",\"calls\":\"tool\""
                                                        : ",\"calls\":\"all\"");
        const struct limit_definition *made = limit->default_definition;
        buffer_append_str(out, ",\"default_kind\":");
        if (made == NULL)
            buffer_append_str(out, "null}");
        else
            buffer_printf(out, "\"%s\"}", limit_kind_name(made->kind));
    }
    buffer_append_str(out, "]}");
    gw_config_release(config);
}

struct gw_config *gateway_config_get(struct gateway *g)
{
    pthread_mutex_lock(&g->config_mutex);
    struct gw_config *config = gw_config_retain(g->config);
    pthread_mutex_unlock(&g->config_mutex);
    return config;
}

/* ---- before the reserve -------------------------------------------------- */

/* The key of "Authorization: Bearer <secret>", else of a dialect's key
 * header (each route takes every dialect's: x-api-key, ...), else of the
 * route's query argument (query_key, NULL when none): one of
 * gateway.json's, else one of the Keys API's (*record: retained, the
 * caller's to release). NULL with *verdict saying why: not found, or a key
 * refused (revoked, blocked, expired). */
static const struct gw_key *authenticate(struct exchange *ex, const struct gw_config *config,
                                         const char *query_key, struct keys_record **record,
                                         enum keys_verdict *verdict)
{
    *record = NULL;
    *verdict = KEYS_NOT_FOUND;
    const char *header = exchange_header(ex, "authorization");
    static const char bearer[] = "Bearer ";
    const char *secret = NULL;
    if (header != NULL && strncasecmp(header, bearer, sizeof bearer - 1) == 0)
        secret = header + sizeof bearer - 1;
    for (uint32_t d = 0; header == NULL && secret == NULL && d < gw_dialect_count(); d++) {
        const char *name = gw_dialect_at(d)->key_header;
        if (name != NULL)
            secret = exchange_header(ex, name);
    }
    if (header == NULL && secret == NULL)
        secret = query_key;
    if (secret == NULL)
        return NULL;
    uint8_t digest[GW_SHA256_BYTES];
    if (sha256_digest(secret, strlen(secret), digest) != 0)
        return NULL;
    const struct gw_key *key = gw_config_find_key(config, digest);
    if (key != NULL) {
        *verdict = KEYS_FOUND;
        return key;
    }
    *verdict = keys_lookup(ex->server->keys, digest, clock_now_ms(ex->server->clock), record);
    return *verdict == KEYS_FOUND ? &(*record)->key : NULL;
}

/* Who owns a Responses id: the key that created it on that upstream, as
 * one digest (gw_owners remembers digests), so that the routes of a
 * stored response know where to send it as well as whom to serve. */
int gateway_owner_digest(const struct gw_key *key, const struct gw_upstream *upstream,
                         uint8_t out[GW_SHA256_BYTES])
{
    char text[GW_SHA256_BYTES + 1 + GW_NAME_LENGTH_MAX];
    size_t name_length = strlen(upstream->name);
    assert(name_length <= GW_NAME_LENGTH_MAX);
    memcpy(text, key->sha256, GW_SHA256_BYTES);
    text[GW_SHA256_BYTES] = '\n';
    memcpy(text + GW_SHA256_BYTES + 1, upstream->name, name_length);
    return sha256_digest(text, GW_SHA256_BYTES + 1 + name_length, out);
}

static const char *request_id_of(struct exchange *ex)
{
    const char *id = exchange_header(ex, "x-request-id");
    return id != NULL && id[0] != '\0' ? id : NULL;
}

/* Whether "gw:<caller>:<id>" can name the caller's call: the caller holds
 * no ':' (so the first ':' after the prefix ends it) and is not "h" (the
 * hashed form's tag), so no two (caller, id) pairs give one text. */
static bool caller_readable(const char *caller)
{
    return strchr(caller, ':') == NULL && strcmp(caller, "h") != 0;
}

/* Attempt 0 of an X-Request-Id: "gw:<caller>:<id>" when that is a valid
 * lease id and the caller is readable in it, else "gw:h:" and the hash of
 * caller and id. Attempt n > 0 (a retry after a denial or a released
 * failure): "gw:h:" and the hash of caller, id and n. Without the header:
 * "gw:" and a new UUIDv7 (no ':' after the prefix: none of the others).
 * Every one is in the gateway's namespace (LEASE_ID_GATEWAY_PREFIX), which
 * the data routes refuse, and one (caller, id, attempt) gives one lease id
 * and no other. 0, or -1 (no randomness, libcrypto failed). */
static int lease_id_of(struct exchange *ex, const char *caller, uint32_t attempt, char *out,
                       size_t out_size)
{
    assert(out_size >= LEASE_ID_LENGTH_MAX + 1);
    assert(attempt <= GW_ATTEMPTS_MAX);
    const char *request_id = request_id_of(ex);
    if (request_id == NULL) {
        assert(attempt == 0);
        char uuid[UUID_TEXT_SIZE];
        if (uuid_v7(clock_now_ms(ex->server->clock), uuid) != 0)
            return -1;
        snprintf(out, out_size, "%s%s", LEASE_ID_GATEWAY_PREFIX, uuid);
        return 0;
    }
    int n = snprintf(out, out_size, "%s%s:%s", LEASE_ID_GATEWAY_PREFIX, caller, request_id);
    if (attempt == 0 && caller_readable(caller) && n > 0 && (size_t)n < out_size &&
        lease_id_valid(out, (size_t)n))
        return 0;
    /* An id (or caller) outside the lease-id alphabet, too long, a caller
     * not readable, or a later attempt: the hash of the caller, the whole
     * id's own hash and the attempt (neither the caller nor a hash holds a
     * newline, so no two of them hash one text). */
    uint8_t digest[GW_SHA256_BYTES];
    char id_hex[GW_SHA256_HEX_SIZE], hex[GW_SHA256_HEX_SIZE];
    if (sha256_digest(request_id, strlen(request_id), digest) != 0)
        return -1;
    gw_hex_encode(digest, GW_SHA256_BYTES, id_hex);
    char text[CALLER_LENGTH_MAX + GW_SHA256_HEX_SIZE + 16];
    int length = attempt == 0
                     ? snprintf(text, sizeof text, "%s\n%s", caller, id_hex)
                     : snprintf(text, sizeof text, "%s\n%s\n%" PRIu32, caller, id_hex, attempt);
    if (length < 0 || (size_t)length >= sizeof text ||
        sha256_digest(text, (size_t)length, digest) != 0)
        return -1;
    gw_hex_encode(digest, GW_SHA256_BYTES, hex);
    snprintf(out, out_size, "%sh:%.40s", LEASE_ID_GATEWAY_PREFIX, hex);
    return 0;
}

/* Parses a copy of the body into the exchange's arena (the body itself
 * stays as the client sent it: the upstream body is rewritten from it). */
static const struct jdoc_value *parse_request(struct exchange *ex, char *error, size_t error_size)
{
    char *copy = arena_alloc(&ex->arena, ex->body_length + 1);
    if (copy == NULL) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    memcpy(copy, ex->body, ex->body_length);
    copy[ex->body_length] = '\0';
    struct jdoc_value *root = NULL;
    if (jdoc_parse_nested(copy, ex->body_length, GW_JSON_DEPTH_MAX, &ex->arena, &root, error,
                          error_size) != 0)
        return NULL;
    if (root->kind != JDOC_OBJECT) {
        snprintf(error, error_size, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* The request's model, checked against the config and the key. NULL with
 * the answer given. */
static const struct gw_model *request_model(struct exchange *ex, const struct gw_config *config,
                                            const struct gw_key *key, const struct jdoc_value *root)
{
    const struct jdoc_value *name = jdoc_get(root, "model");
    if (!jdoc_is(name, JDOC_STRING)) {
        gateway_reply_error(ex, 400, "invalid_request_error", "missing_model", 0,
                            "model: required, a string naming one of the gateway's models");
        return NULL;
    }
    const struct gw_model *model = gw_config_find_model(config, name->as.string, name->count);
    if (model == NULL || !gw_key_allows_model(key, model)) {
        gateway_reply_error(ex, 404, "invalid_request_error", "model_not_found", 0,
                            "The model '%.*s' does not exist or you do not have access to it.",
                            (int)(name->count < 256 ? name->count : 256), name->as.string);
        return NULL;
    }
    return model;
}

/* ---- the reserve --------------------------------------------------------- */

/* Every gateway reserve goes through the waiting queue (src/wait): it
 * waits when Prefer: wait asked and the key allows, and never overtakes
 * those who wait. */
static void reserve_start(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    call->reserving = true;
    wait_reserve(ex->server->wait, &call->ticket, &call->reserve, &call->reserve_result,
                 call->wait_ms, call->priority, exchange_backend_done, ex);
}

/* The delta-seconds of a "wait" preference in a Prefer value (RFC 7240:
 * comma-separated preferences, each a token, maybe "=" and a value, maybe
 * ";" parameters), or -1 when none is there (an unreadable one is ignored,
 * as the RFC says). */
static int64_t preferred_wait_seconds(const char *value)
{
    for (const char *at = value; at != NULL && *at != '\0';) {
        while (*at == ' ' || *at == '\t' || *at == ',')
            at++;
        const char *end = strchr(at, ',');
        size_t length = end != NULL ? (size_t)(end - at) : strlen(at);
        if (length >= 4 && strncasecmp(at, "wait", 4) == 0) {
            const char *v = at + 4;
            while (*v == ' ' || *v == '\t')
                v++;
            if (*v == '=') {
                v++;
                while (*v == ' ' || *v == '\t')
                    v++;
                int64_t seconds = 0;
                const char *digits = v;
                while (*v >= '0' && *v <= '9' && seconds <= WAIT_MS_MAX / 1000)
                    seconds = seconds * 10 + (*v++ - '0');
                if (v > digits)
                    return seconds;
            }
        }
        at = end != NULL ? end + 1 : NULL;
    }
    return -1;
}

/* How long the call may wait for capacity and at which priority: Prefer:
 * wait=N capped by the key's max_wait_seconds (without one, the key's
 * default_wait_seconds), x-llmlimit-priority (0..9)
 * capped by its priority_floor (docs/gateway.md, "Waiting for capacity").
 * 0, or -1 with the 400 given. */
static int call_wait(struct exchange *ex, struct gateway_call *call)
{
    const char *prefer = exchange_header(ex, "prefer");
    int64_t asked = prefer != NULL ? preferred_wait_seconds(prefer) : -1;
    uint32_t seconds = gw_key_wait_seconds(call->key, asked);
    call->wait_ms = (int64_t)seconds * 1000 > WAIT_MS_MAX ? WAIT_MS_MAX : (int64_t)seconds * 1000;
    const char *priority = exchange_header(ex, "x-llmlimit-priority");
    uint32_t wanted = WAIT_PRIORITY_DEFAULT;
    if (priority != NULL) {
        if (priority[0] < '0' || priority[0] > '9' || priority[1] != '\0') {
            gateway_reply_error(ex, 400, "invalid_request_error", "invalid_priority", 0,
                                "x-llmlimit-priority: must be an integer 0..9 (0 first).");
            return -1;
        }
        wanted = (uint32_t)(priority[0] - '0');
    }
    call->priority = (uint8_t)gw_key_priority(call->key, wanted);
    assert(call->priority < WAIT_PRIORITIES);
    return 0;
}

static void note_denial(struct gateway_call *call)
{
    struct gateway_stats_delta delta = {.denied = true, .latency_us = -1};
    gateway_stats_add(&call->gateway->stats, call->model->name, call->key->caller, call->key->team,
                      &delta);
}

/* A wait in words, for the person who reads a denial: "250 ms", "42 s",
 * "59 min 59 s", "5 h 3 min", "28 days 5 h" (whole seconds, rounded up). */
static void wait_in_words(int64_t ms, char *out, size_t size)
{
    if (ms < 1000) {
        snprintf(out, size, "%lld ms", (long long)(ms > 0 ? ms : 0));
        return;
    }
    long long seconds = (long long)(ms / 1000 + (ms % 1000 != 0));
    long long days = seconds / 86400, hours = seconds % 86400 / 3600;
    long long minutes = seconds % 3600 / 60, rest = seconds % 60;
    if (days > 0)
        snprintf(out, size, "%lld day%s %lld h", days, days == 1 ? "" : "s", hours);
    else if (hours > 0)
        snprintf(out, size, "%lld h %lld min", hours, minutes);
    else if (minutes > 0)
        snprintf(out, size, "%lld min %lld s", minutes, rest);
    else
        snprintf(out, size, "%lld s", rest);
}

/* A time in UTC, as a person reads it: "2027-01-01 00:00 UTC", or with
 * seconds ("2026-12-03 21:53:37 UTC"), rounded up to the second. */
static void utc_in_words(int64_t unix_ms, bool with_seconds, char *out, size_t size)
{
    time_t seconds = (time_t)(unix_ms / 1000 + (unix_ms % 1000 > 0));
    struct tm tm;
    gmtime_r(&seconds, &tm);
    strftime(out, size, with_seconds ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M UTC", &tm);
}

/* The end of a budget's period as a person reads it: in UTC, or for a
 * budget in a time zone its local time there first ("2027-01-01 00:00
 * Europe/Berlin (2026-12-31 23:00 UTC)"), since its period starts at
 * local midnight. */
static void period_end_in_words(const struct limit_definition *d, int64_t unix_ms, char *out,
                                size_t size)
{
    char utc[40], local[PERIOD_LOCAL_TEXT_SIZE];
    utc_in_words(unix_ms, false, utc, sizeof utc);
    /* "YYYY-MM-DDTHH:MM:SS+hh:mm": the period's end is a whole local minute. */
    if (d->time_zone[0] == '\0' || !period_local_text(d, unix_ms, local) || strlen(local) < 16) {
        snprintf(out, size, "%s", utc);
        return;
    }
    local[10] = ' ';
    snprintf(out, size, "%.16s %s (%s)", local, d->time_zone, utc);
}

/* The end of the current period of the first budget among the limits that
 * did not fit, with its definition; 0 when none of them is a budget. */
static int64_t denied_budget_period_end(struct exchange *ex, const struct gateway_call *call,
                                        int64_t now_unix_ms, struct limit_definition *budget)
{
    const struct reserve_result *r = &call->reserve_result;
    for (uint32_t i = 0; i < r->denied_count; i++) {
        const struct requirement *req = &call->reserve.requirements[r->denied_index[i]];
        struct limit_state state;
        if (backend_get_limit(ex->server->backend, req->key, &state) == 0 &&
            state.definition.kind == LIMIT_BUDGET) {
            *budget = state.definition;
            return period_span_at(&state.definition, now_unix_ms).end_ms;
        }
    }
    return 0;
}

/* 429: what did not fit, and when to try again, in words: a budget names
 * the moment it resets (a prepaid one that it never does), or (when calls
 * in flight hold the rest of it) the latest moment their holds free it; a
 * rate limit how long to wait. */
static int reply_denied(struct exchange *ex, struct gateway_call *call)
{
    const struct reserve_result *r = &call->reserve_result;
    char names[1024] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < r->denied_count; i++) {
        const struct requirement *req = &call->reserve.requirements[r->denied_index[i]];
        int n = snprintf(names + used, sizeof names - used, "%s'%s'", i > 0 ? ", " : "", req->key);
        if (n < 0 || (size_t)n >= sizeof names - used)
            break;
        used += (size_t)n;
    }
    note_denial(call);
    int64_t now = clock_now_ms(ex->server->clock);
    struct limit_definition budget;
    int64_t period_end = denied_budget_period_end(ex, call, now, &budget);
    char wait[64], when[128];
    wait_in_words(r->retry_after_ms, wait, sizeof wait);
    if (period_end >= PERIOD_PREPAID_END_MS && now + r->retry_after_ms >= period_end)
        return gateway_reply_denied(ex, call, "insufficient_quota", "insufficient_quota",
                                    "Budget exhausted: %s is prepaid and cannot take this call; "
                                    "it never resets: an operator tops it up by raising its "
                                    "capacity.",
                                    names);
    if (period_end > 0 && now + r->retry_after_ms >= period_end) {
        period_end_in_words(&budget, period_end, when, sizeof when);
        return gateway_reply_denied(ex, call, "insufficient_quota", "insufficient_quota",
                                    "Budget exhausted: %s cannot take this call; it resets %s "
                                    "(in %s).",
                                    names, when, wait);
    }
    if (period_end > 0) {
        utc_in_words(now + r->retry_after_ms, true, when, sizeof when);
        return gateway_reply_denied(ex, call, "insufficient_quota", "insufficient_quota",
                                    "Budget exhausted: %s cannot take this call now: calls in "
                                    "flight hold the rest of it, and it has room again by %s at "
                                    "the latest (in %s).",
                                    names, when, wait);
    }
    return gateway_reply_denied(ex, call, "requests", "rate_limit_exceeded",
                                "Rate limit reached: %s cannot take this call now; retry in %s.",
                                names, wait);
}

/* 400: the call's worst case needs more than the whole capacity of a
 * limit, so no wait makes it fit. */
static int reply_too_large(struct exchange *ex, struct gateway_call *call, const char *key)
{
    uint64_t amount = 0, capacity = 0;
    for (uint32_t i = 0; i < call->reserve.requirement_count; i++) {
        if (strcmp(call->reserve.requirements[i].key, key) == 0)
            amount = call->reserve.requirements[i].amount;
    }
    struct limit_state state;
    const char *unit = "";
    if (backend_get_limit(ex->server->backend, key, &state) == 0) {
        capacity = state.definition.capacity;
        unit = state.definition.unit;
    }
    return gateway_reply_error(
        ex, 400, "invalid_request_error", "request_too_large", 0,
        "This call can never fit '%s': at worst it needs %" PRIu64 "%s%s, more than the limit's "
        "whole capacity (%" PRIu64 "). %s. Or an operator can raise the limit, or give the model "
        "\"output_reservation\": \"observed\" in the gateway's config, which reserves what this "
        "caller's calls usually write instead of all that max_tokens allows.",
        key, amount, unit[0] != '\0' ? " " : "", unit, capacity,
        gw_dialect_of(call->endpoint)->too_large_advice);
}

/* 400 (not 500: Codex retries every 5xx, x-should-retry or not, and shows
 * none of its text; docs/gateway.md, "Answers a retry cannot change"): a
 * limit the call needs is not in the registry, and its template has no
 * default (or the one created was deleted before the call reserved). */
static int reply_limit_missing(struct exchange *ex, const char *key)
{
    return gateway_reply_error(
        ex, 400, "invalid_request_error", "unknown_limit_key", 0,
        "The gateway's limit '%s' is not defined: an operator must create it "
        "(PUT /v1/admin/limits), or give its template in gateway.json a \"default\".",
        key);
}

/* Definitive errors: the reserve named a key the registry lacks, an amount
 * that can never fit, or a limit being decreased. */
static int reply_definitive(struct exchange *ex, struct gateway_call *call)
{
    const struct reserve_result *r = &call->reserve_result;
    const char *key = call->reserve.requirements[r->error_index].key;
    switch (r->error) {
    case BACKEND_UNKNOWN_LIMIT_KEY:
        return reply_limit_missing(ex, key);
    case BACKEND_EXCEEDS_CAPACITY:
        return reply_too_large(ex, call, key);
    case BACKEND_LIMIT_DECREASING: {
        note_denial(call);
        char wait[64];
        wait_in_words(r->retry_after_ms, wait, sizeof wait);
        return gateway_reply_error(ex, 429, "requests", "rate_limit_exceeded", r->retry_after_ms,
                                   "The limit '%s' is being lowered; retry in %s.", key, wait);
    }
    default:
        assert(false);
        return -1;
    }
}

static void reserve_set_lease_id(struct gateway_call *call)
{
    call->reserve.lease_id = call->lease_id;
    call->reserve.lease_id_length = (uint32_t)strlen(call->lease_id);
}

/* A replay that took nothing: the attempt before was denied, or released
 * (its upstream failed). The retry is then a new call, with the next
 * attempt's lease; a retry of a call that is running or was answered is
 * not. */
static bool replay_took_nothing(const struct gateway_call *call)
{
    const struct reserve_result *r = &call->reserve_result;
    return r->replayed && ((r->error == BACKEND_OK && !r->allowed) || r->released);
}

static int after_reserve(struct exchange *ex);

/* After the creation of the call's missing limits from their defaults. */
static int after_defaults(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    const char *key = call->plan.key_text[call->defaults_key];
    switch (call->defaults_outcome) {
    case GATEWAY_DEFAULTS_READY:
        return exchange_call_backend(ex, reserve_start, after_reserve);
    case GATEWAY_DEFAULTS_MISSING:
        return reply_limit_missing(ex, key);
    case GATEWAY_DEFAULTS_REJECTED:
        return gateway_reply_error(ex, 400, "invalid_request_error", "limit_default_error", 0,
                                   "The gateway's limit '%s' could not be created from its "
                                   "template's default: %s",
                                   key, call->defaults_error);
    case GATEWAY_DEFAULTS_WRITE_FAILED:
        return gateway_reply_error(ex, 503, "server_error", "registry_write_failed", 1000,
                                   "The gateway's limit '%s' could not be created: the registry "
                                   "file could not be written; retry the call.",
                                   key);
    case GATEWAY_DEFAULTS_BUSY:
        return gateway_reply_error(ex, 503, "server_error", "admin_queue_full", 1000,
                                   "The gateway's limit '%s' could not be created now (too many "
                                   "limit changes wait); retry the call.",
                                   key);
    default:
        assert(call->defaults_outcome == GATEWAY_DEFAULTS_UNAVAILABLE);
        return gateway_reply_error(ex, 503, "server_error", "backend_error", 1000,
                                   "The gateway's limit '%s' could not be created: the limit "
                                   "backend is unavailable; retry the call.",
                                   key);
    }
}

static int after_reserve(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    const struct reserve_result *r = &call->reserve_result;
    if (replay_took_nothing(call) && request_id_of(ex) != NULL) {
        if (call->attempt == GW_ATTEMPTS_MAX)
            return gateway_reply_error(
                ex, 409, "invalid_request_error", "request_attempts_exhausted", 0,
                "This X-Request-Id was tried %d times already; send the call "
                "with a new one.",
                GW_ATTEMPTS_MAX + 1);
        call->attempt++;
        if (lease_id_of(ex, call->key->caller, call->attempt, call->lease_id,
                        sizeof call->lease_id) != 0)
            return gateway_reply_error(ex, 503, "server_error", "no_randomness", 1000,
                                       "No lease id could be made.");
        reserve_set_lease_id(call);
        return exchange_call_backend(ex, reserve_start, after_reserve);
    }
    if (r->wait_outcome == RESERVE_WAIT_CANCELLED) /* its client left while it waited */
        return gateway_reply_error(ex, 503, "server_error", "cancelled", 1000,
                                   "The call was cancelled: its client left while it waited.");
    /* A limit missing whose template has a default: created, then reserved
     * again under the same lease id (the missing key was found before any
     * capacity was touched, so the lease holds nothing and is not known). */
    if (r->error == BACKEND_UNKNOWN_LIMIT_KEY && gateway_defaults_apply(call))
        return exchange_call_backend(ex, gateway_defaults_create, after_defaults);
    if (r->waited_ms > 0) {
        struct gateway_stats_delta delta = {.latency_us = -1, .waited_ms = r->waited_ms};
        gateway_stats_add(&call->gateway->stats, call->model->name, call->key->caller,
                          call->key->team, &delta);
    }
    activity_reserve(ex->server->activity, clock_now_ms(ex->server->clock), ACTIVITY_SOURCE_GATEWAY,
                     &call->reserve, r);
    if (r->error == BACKEND_UNAVAILABLE)
        return gateway_reply_error(
            ex, 503, "server_error", "backend_error", 1000,
            "The limit backend is unavailable; retry the call (with the same "
            "X-Request-Id, it is reserved at most once).");
    if (r->error == BACKEND_LEASE_CONFLICT)
        return gateway_reply_error(ex, 409, "invalid_request_error", "request_id_conflict", 0,
                                   "X-Request-Id was used for another request.");
    if (backend_error_is_denial(r->error))
        return reply_definitive(ex, call);
    assert(r->error == BACKEND_OK);
    if (r->replayed && r->allowed)
        return r->finished ? gateway_reply_error(
                                 ex, 409, "invalid_request_error", "request_already_completed", 0,
                                 "This X-Request-Id was answered already; not forwarded again.")
                           : gateway_reply_error(
                                 ex, 409, "invalid_request_error", "request_in_progress", 0,
                                 "A call with this X-Request-Id is in progress; not forwarded "
                                 "twice.");
    if (!r->allowed)
        return reply_denied(ex, call);
    return gateway_call_forward(ex, call);
}

/* ---- the routes ---------------------------------------------------------- */

static int reply_unauthorized(struct exchange *ex, enum keys_verdict verdict)
{
    switch (verdict) {
    case KEYS_IS_REVOKED:
        return gateway_reply_error(ex, 401, "invalid_request_error", "key_revoked", 0,
                                   "This API key has been revoked.");
    case KEYS_IS_BLOCKED:
        return gateway_reply_error(ex, 401, "invalid_request_error", "key_blocked", 0,
                                   "This API key is blocked.");
    case KEYS_IS_EXPIRED:
        return gateway_reply_error(ex, 401, "invalid_request_error", "key_expired", 0,
                                   "This API key has expired.");
    case KEYS_FOUND:
    case KEYS_NOT_FOUND:
        break;
    }
    return gateway_reply_error(ex, 401, "invalid_request_error", "invalid_api_key", 0, "%s",
                               ex->route->gateway->dialect->unknown_key_message);
}

/* The config in force (retained: the caller releases it) and the
 * caller's key (a Keys API key's record retained in *record: the caller
 * releases it, or hands it to its call); NULL with the answer given. */
static const struct gw_key *route_start(struct exchange *ex, struct gw_config **config_out,
                                        struct keys_record **record)
{
    struct gateway *g = ex->server->gateway;
    *config_out = NULL;
    *record = NULL;
    if (g == NULL) {
        gateway_reply_error(ex, 404, "invalid_request_error", "gateway_not_enabled", 0,
                            "Gateway mode is not enabled on this server (no gateway config).");
        return NULL;
    }
    /* A dialect's clients may send the key in the query: read here, never
     * logged and never sent upstream (that dialect's upstream query is its
     * own, passes_query false). */
    char query_key[GW_QUERY_KEY_LENGTH_MAX + 1];
    int found = 0;
    const char *query_name = ex->route->gateway->dialect->key_query;
    if (query_name != NULL &&
        (found = exchange_query(ex, query_name, query_key, sizeof query_key)) < 0)
        return NULL; /* answered: 400 */
    struct gw_config *config = gateway_config_get(g);
    enum keys_verdict verdict;
    const struct gw_key *key =
        authenticate(ex, config, found == 1 ? query_key : NULL, record, &verdict);
    if (key == NULL) {
        gw_config_release(config);
        reply_unauthorized(ex, verdict);
        return NULL;
    }
    *config_out = config;
    return key;
}

/* Adds "name: value" to what goes upstream. 0, or -1 with the 400 given
 * (a value that is not printable ASCII, or too long). */
static int add_upstream_header(struct exchange *ex, struct gateway_call *call, const char *name,
                               const char *value)
{
    assert(call->header_count < GW_FORWARD_HEADERS_MAX);
    bool plain = true;
    for (const char *c = value; *c != '\0' && plain; c++)
        plain = *c >= 0x20 && *c <= 0x7e;
    char *line = call->header_lines[call->header_count];
    int n = snprintf(line, GW_FORWARD_HEADER_LENGTH_MAX + 1, "%s: %s", name, value);
    if (!plain || n < 0 || n > GW_FORWARD_HEADER_LENGTH_MAX) {
        gateway_reply_error(ex, 400, "invalid_request_error", "invalid_header", 0,
                            "%s: must be printable ASCII, at most %d bytes.", name,
                            GW_FORWARD_HEADER_LENGTH_MAX - (int)strlen(name) - 2);
        return -1;
    }
    call->header_count++;
    return 0;
}

/* Where the call goes upstream: path (after base_url) with the client's
 * query as it came (Claude Code's ?beta=true, a list's ?limit=...) unless
 * the upstream's dialect carries its own, and the client headers that
 * dialect passes on (or their defaults). 0, or -1 with the 400 given. */
static int upstream_request(struct exchange *ex, struct gateway_call *call, const char *path)
{
    const struct gw_dialect *dialect = gw_dialect_for_api(call->upstream->api);
    size_t query_length;
    const char *query = http_query(&ex->http, &query_length);
    if (!dialect->passes_query)
        query_length = 0; /* its path has its query; the client's may hold its key */
    int n = snprintf(call->upstream_path, sizeof call->upstream_path, "%s%s%.*s", path,
                     query_length > 0 ? "?" : "", (int)query_length, query);
    if (n < 0 || (size_t)n >= sizeof call->upstream_path) {
        gateway_reply_error(ex, 400, "invalid_request_error", "invalid_request", 0,
                            "The query string is too long (at most %d bytes with the path).",
                            GW_UPSTREAM_PATH_LENGTH_MAX);
        return -1;
    }
    call->header_count = 0;
    for (size_t i = 0; i < GW_PASSED_HEADERS_MAX && dialect->passed_headers[i].name != NULL; i++) {
        const struct gw_passed_header *passed = &dialect->passed_headers[i];
        const char *value = exchange_header(ex, passed->name);
        if (value == NULL || value[0] == '\0')
            value = passed->value_default;
        if (value != NULL && add_upstream_header(ex, call, passed->name, value) != 0)
            return -1;
    }
    return 0;
}

/* A model called on a route of the other dialect: same-dialect
 * pass-through only (docs/gateway.md, "Surfaces"). */
static int reply_wrong_surface(struct exchange *ex, const struct gw_model *model,
                               enum gw_endpoint endpoint)
{
    return gateway_reply_error(
        ex, 400, "invalid_request_error", "wrong_surface", 0,
        "The model '%s' is served by an %s upstream: call it on %s, not on %s.", model->name,
        gw_api_name(model->upstream->api), gw_model_routes(model), gw_endpoint_route(endpoint));
}

/* The output a call reserves: what the request allows, or less under the
 * model's "observed" policy (docs/gateway.md, "Output reservation"): until
 * enough of the caller's calls are seen, the model's default output for
 * each choice. */
static uint64_t output_reservation(const struct gateway_call *call)
{
    uint64_t allowed = call->estimate.output_tokens;
    if (call->model->output_reservation != GW_OUTPUT_RESERVATION_OBSERVED)
        return allowed;
    uint64_t unseen = (uint64_t)call->model->default_max_output_tokens * call->estimate.choices;
    return gw_observed_reserve_or(call->gateway->observed, call->model->name, call->key->caller,
                                  allowed, unseen);
}

/* A Responses call remembers the id it creates for its key, unless the
 * response is not stored ("store": false, as Codex asks): nothing could
 * read it later, and it would push other keys' ids out. */
static int note_response_owner(struct exchange *ex, struct gateway_call *call,
                               const struct jdoc_value *root)
{
    const struct jdoc_value *store = jdoc_get(root, "store");
    if (store != NULL && store->kind == JDOC_FALSE)
        return 0;
    if (gateway_owner_digest(call->key, call->upstream, call->owner_digest) != 0)
        return gateway_reply_error(ex, 503, "server_error", "digest_failed", 1000,
                                   "The gateway could not hash the key.");
    call->remember_response = true;
    return 0;
}

/* The first reference of a Responses request (gw_references.h) that is not
 * its key's, if any. */
struct reference_check {
    struct gateway *gateway;
    uint8_t digest[GW_SHA256_BYTES]; /* the key's, on the model's upstream */
    enum gw_reference kind;
    const char *id;
    size_t length;
};

static int reference_owned(void *context, enum gw_reference kind, const char *id, size_t length)
{
    struct reference_check *check = context;
    struct gw_owners *owners =
        kind == GW_REFERENCE_RESPONSE ? check->gateway->owners : check->gateway->items;
    if (length > 0 && gw_owners_lookup(owners, id, length, check->digest) == GW_OWNER_THIS_KEY)
        return 0;
    check->kind = kind;
    check->id = id;
    check->length = length;
    return 1;
}

/* A Responses request may continue a stored response (previous_response_id)
 * or reference stored items only when its key created them, as the routes
 * of a stored response are served to that key alone: another key's, an
 * unknown or a forgotten one is a 400, nothing reserved or forwarded (the
 * same answer for all, so ids cannot be probed). Whether they are its own;
 * false with the answer given. */
static bool references_owned(struct exchange *ex, struct gateway_call *call,
                             const struct jdoc_value *root)
{
    struct reference_check check = {.gateway = call->gateway};
    if (gateway_owner_digest(call->key, call->upstream, check.digest) != 0) {
        gateway_reply_error(ex, 503, "server_error", "digest_failed", 1000,
                            "The gateway could not hash the key.");
        return false;
    }
    if (gw_references_each(root, reference_owned, &check) == 0)
        return true;
    int shown =
        check.length < GW_RESPONSE_ID_LENGTH_MAX ? (int)check.length : GW_RESPONSE_ID_LENGTH_MAX;
    if (check.kind == GW_REFERENCE_RESPONSE)
        gateway_reply_error(ex, 400, "invalid_request_error", "previous_response_not_found", 0,
                            "Previous response with id '%.*s' not found for this key.", shown,
                            check.id);
    else
        gateway_reply_error(ex, 400, "invalid_request_error", "item_not_found", 0,
                            "Item with id '%.*s' not found for this key.", shown, check.id);
    return false;
}

/* The plan and the reserve of a charged call; the exchange then waits. */
static int reserve_call(struct exchange *ex, struct gateway_call *call)
{
    char error[GW_PLAN_ERROR_SIZE];
    struct gw_tokens estimate = gw_estimate_tokens(&call->estimate, output_reservation(call));
    call->reserved = estimate; /* what an answer that cannot be read is charged */
    if (gw_plan_reserve(&call->plan, call->config, call->key, call->model, &estimate, error,
                        sizeof error) != 0)
        return gateway_reply_error(ex, 400, "invalid_request_error", "limit_template_error", 0,
                                   "%s", error);
    if (lease_id_of(ex, call->key->caller, 0, call->lease_id, sizeof call->lease_id) != 0)
        return gateway_reply_error(ex, 503, "server_error", "no_randomness", 1000,
                                   "No lease id could be made.");
    call->reserve = (struct reserve_request){
        .caller = call->key->caller,
        .caller_length = (uint32_t)strlen(call->key->caller),
        .requirements = call->plan.requirements,
        .requirement_count = call->plan.requirement_count,
        .states = call->states,
    };
    reserve_set_lease_id(call);
    if (call->plan.requirement_count == 0) /* nothing to reserve: every amount was 0 */
        return gateway_call_forward(ex, call);
    if (call_wait(ex, call) != 0)
        return 0;
    return exchange_call_backend(ex, reserve_start, after_reserve);
}

/* A call of model on endpoint, once its body is parsed: estimated and
 * reserved when the endpoint is charged, forwarded only when not. */
static int start_call(struct exchange *ex, struct gateway_call *call, const struct jdoc_value *root,
                      const char *upstream_path)
{
    char error[GW_PLAN_ERROR_SIZE];
    if (upstream_request(ex, call, upstream_path) != 0)
        return 0;
    const struct gw_surface *surface = gw_surface_of(call->endpoint);
    if (surface->checks_references && !references_owned(ex, call, root))
        return 0;
    if (call->charged && gw_estimate_request(root, call->endpoint, call->model, &call->estimate,
                                             error, sizeof error) != 0)
        return gateway_reply_error(ex, 400, "invalid_request_error", "invalid_request", 0, "%s",
                                   error);
    struct gw_request_info info = {0};
    /* A call that sets no output bound goes with the one it reserved per
     * choice: the model's default, also under "observed" (whose lower
     * reservation is not a bound: an output past it is charged in full). */
    uint64_t bound = call->charged ? call->estimate.output_tokens_per_choice : 0;
    if (gw_request_rewrite_for(call->endpoint, ex->body, ex->body_length, root, call->model, bound,
                               &call->upstream_body, &info, error, sizeof error) != 0)
        return gateway_reply_error(ex, 400, "invalid_request_error", "invalid_request", 0, "%s",
                                   error);
    call->stream =
        call->stream || info.stream; /* a call may stream by its method (a model in the path) */
    call->client_include_usage = info.client_include_usage;
    if (surface->stores_answer &&
        (note_response_owner(ex, call, root) != 0 || exchange_answered(ex)))
        return 0;
    if (!call->charged)
        return gateway_call_forward(ex, call);
    return reserve_call(ex, call);
}

/* Everything before the reserve; the exchange then waits for it. */
static int handle_call(struct exchange *ex, enum gw_endpoint endpoint)
{
    struct gw_config *config;
    struct keys_record *record;
    const struct gw_key *key = route_start(ex, &config, &record);
    if (key == NULL)
        return 0;
    char error[GW_PLAN_ERROR_SIZE];
    const struct jdoc_value *root = parse_request(ex, error, sizeof error);
    if (root == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_reply_error(ex, 400, "invalid_request_error", "invalid_json", 0, "%s%s",
                                   ex->route->gateway->dialect->invalid_json_prefix, error);
    }
    const struct gw_model *model = request_model(ex, config, key, root);
    if (model == NULL || !gw_model_serves(model, endpoint)) {
        gw_config_release(config);
        keys_record_release(record);
        return model == NULL ? 0 : reply_wrong_surface(ex, model, endpoint);
    }
    /* takes the config and the record */
    struct gateway_call *call = gateway_call_new(ex, config, key, record, endpoint);
    if (call == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_reply_error(ex, 503, "server_error", "out_of_memory", 1000,
                                   "Out of memory.");
    }
    call->model = model;
    call->upstream = model->upstream;
    call->charged = gw_endpoint_charged(endpoint);
    return start_call(ex, call, root, gw_endpoint_upstream_path(endpoint));
}

/* ---- a model named in the path ({item} = "<model>:<method>") ------------ */

/* The model and surface the path names, checked against the config and the
 * key; NULL with the answer given (404: a path the gateway does not serve,
 * an unknown model or one the key may not call). */
static const struct gw_model *path_model(struct exchange *ex, const struct gw_config *config,
                                         const struct gw_key *key, enum gw_endpoint *endpoint,
                                         bool *stream)
{
    const struct gw_dialect *dialect = ex->route->gateway->dialect;
    char target[GW_PATH_TARGET_LENGTH_MAX + 1], error[192];
    size_t length, name_length;
    const char *name;
    if (percent_decode(ex->key_encoded, target, sizeof target, &length) != 0) {
        gateway_reply_error(ex, 404, NULL, "not_found", 0,
                            "The path must be %s, the model's name at most %d bytes and validly "
                            "escaped.",
                            dialect->item_pattern, GW_NAME_LENGTH_MAX);
        return NULL;
    }
    if (dialect->target(target, length, &name, &name_length, endpoint, stream, error,
                        sizeof error) != 0) {
        gateway_reply_error(ex, 404, NULL, "not_found", 0, "Not found: %s.", error);
        return NULL;
    }
    const struct gw_model *model = gw_config_find_model(config, name, name_length);
    if (model == NULL || !gw_key_allows_model(key, model)) {
        gateway_reply_error(ex, 404, NULL, "model_not_found", 0,
                            "models/%.*s is not found: it is not one of the gateway's models, or "
                            "this key may not call it.",
                            (int)(name_length < 256 ? name_length : 256), name);
        return NULL;
    }
    return model;
}

/* Where such a call goes (the dialect's path), with events when a stream
 * asked for them in the query (its stream_query). 0, or -1 with the
 * answer given. */
static int path_upstream(struct exchange *ex, const struct gw_model *model,
                         enum gw_endpoint endpoint, bool stream, char *path, size_t size)
{
    const struct gw_dialect *dialect = ex->route->gateway->dialect;
    char value[16], error[256];
    int found = 0;
    if (dialect->stream_query_name != NULL &&
        (found = exchange_query(ex, dialect->stream_query_name, value, sizeof value)) < 0)
        return -1; /* answered: 400 */
    bool events = found == 1 && strcmp(value, dialect->stream_query_value) == 0;
    if (dialect->upstream_path(model, endpoint, stream, events, path, size, error, sizeof error) ==
        0)
        return 0;
    gateway_reply_error(ex, 400, NULL, "invalid_upstream_model", 0, "%s", error);
    return -1;
}

static int handle_model_in_path(struct exchange *ex)
{
    struct gw_config *config;
    struct keys_record *record;
    const struct gw_key *key = route_start(ex, &config, &record);
    if (key == NULL)
        return 0;
    enum gw_endpoint endpoint = ex->route->gateway->endpoint;
    bool stream = false;
    const struct gw_model *model = path_model(ex, config, key, &endpoint, &stream);
    if (model == NULL || !gw_model_serves(model, endpoint)) {
        gw_config_release(config);
        keys_record_release(record);
        return model == NULL ? 0 : reply_wrong_surface(ex, model, endpoint);
    }
    char error[GW_PLAN_ERROR_SIZE], path[GW_UPSTREAM_PATH_LENGTH_MAX + 1];
    const struct jdoc_value *root = parse_request(ex, error, sizeof error);
    if (root == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_reply_error(ex, 400, NULL, "invalid_json", 0, "%s%s",
                                   ex->route->gateway->dialect->invalid_json_prefix, error);
    }
    if (path_upstream(ex, model, endpoint, stream, path, sizeof path) != 0) {
        gw_config_release(config);
        keys_record_release(record);
        return 0;
    }
    /* takes the config and the record */
    struct gateway_call *call = gateway_call_new(ex, config, key, record, endpoint);
    if (call == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_reply_error(ex, 503, "server_error", "out_of_memory", 1000,
                                   "Out of memory.");
    }
    call->model = model;
    call->upstream = model->upstream;
    call->charged = gw_endpoint_charged(endpoint);
    call->stream = stream;
    return start_call(ex, call, root, path);
}

/* ---- a stored object: GET, DELETE <route>{id}, GET .../input_items, POST
 * .../cancel -------------------------------------------------------------- */

/* Splits the item path "<id>[/input_items|/cancel]" and checks it against
 * the method. The id is 1..GW_RESPONSE_ID_LENGTH_MAX bytes of
 * [A-Za-z0-9_-] (what OpenAI's ids are made of, so it goes into the
 * upstream URL as it is). false: not a route of a stored response. */
static bool response_item(const char *item, enum http_method method, char *id, size_t id_size,
                          const char **tail)
{
    size_t n = 0;
    while (n < id_size - 1 && (isalnum((unsigned char)item[n]) || item[n] == '_' || item[n] == '-'))
        n++;
    if (n == 0 || (item[n] != '\0' && item[n] != '/'))
        return false;
    memcpy(id, item, n);
    id[n] = '\0';
    *tail = item + n;
    bool get = method == HTTP_GET || method == HTTP_HEAD; /* HEAD: a GET, its body not sent */
    if (strcmp(*tail, "") == 0)
        return get || method == HTTP_DELETE;
    if (strcmp(*tail, "/input_items") == 0)
        return get;
    return strcmp(*tail, "/cancel") == 0 && method == HTTP_POST;
}

/* The upstream (of the route's dialect) of the object id that key created,
 * or NULL (unknown, or another key's: the same answer, so that ids cannot
 * be probed). */
static const struct gw_upstream *response_upstream(struct exchange *ex,
                                                   const struct gw_config *config,
                                                   const struct gw_key *key, const char *id)
{
    struct gateway *g = ex->server->gateway;
    for (uint32_t i = 0; i < config->upstream_count; i++) {
        const struct gw_upstream *upstream = &config->upstreams[i];
        uint8_t digest[GW_SHA256_BYTES];
        if (upstream->api != ex->route->gateway->dialect->api ||
            gateway_owner_digest(key, upstream, digest) != 0)
            continue;
        if (gw_owners_lookup(g->owners, id, strlen(id), digest) == GW_OWNER_THIS_KEY)
            return upstream;
    }
    return NULL;
}

static int handle_stored(struct exchange *ex)
{
    struct gw_config *config;
    struct keys_record *record;
    const struct gw_key *key = route_start(ex, &config, &record);
    if (key == NULL)
        return 0;
    char item[GW_RESPONSE_ID_LENGTH_MAX + 32], id[GW_RESPONSE_ID_LENGTH_MAX + 1];
    size_t item_length;
    const char *tail = NULL;
    const struct gw_upstream *upstream = NULL;
    if (percent_decode(ex->key_encoded, item, sizeof item, &item_length) != 0)
        snprintf(item, sizeof item, "(too long or badly escaped)");
    else if (response_item(item, ex->method, id, sizeof id, &tail))
        upstream = response_upstream(ex, config, key, id);
    if (upstream == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_reply_error(ex, 404, "invalid_request_error", NULL, 0,
                                   "No response with id '%.*s' was found for this key.",
                                   GW_RESPONSE_ID_LENGTH_MAX, item);
    }
    enum gw_endpoint endpoint = ex->route->gateway->endpoint;
    struct gateway_call *call = gateway_call_new(ex, config, key, record, endpoint);
    if (call == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_reply_error(ex, 503, "server_error", "out_of_memory", 1000,
                                   "Out of memory.");
    }
    call->upstream = upstream;
    call->method = ex->method == HTTP_GET || ex->method == HTTP_HEAD ? GW_METHOD_GET
                   : ex->method == HTTP_DELETE                       ? GW_METHOD_DELETE
                                                                     : GW_METHOD_POST;
    /* A read tells the key its response's item ids (the input items'
     * first): remembered for it, so that it may reference them. */
    if (ex->method == HTTP_GET && gateway_owner_digest(key, upstream, call->owner_digest) == 0)
        call->remember_response = true;
    char path[GW_RESPONSE_ID_LENGTH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s%s", gw_endpoint_upstream_path(endpoint), id, tail);
    if (upstream_request(ex, call, path) != 0)
        return 0;
    return gateway_call_forward(ex, call);
}

/* The models the key may call, as the list route's dialect writes them. */
static int handle_models(struct exchange *ex)
{
    struct gw_config *config;
    struct keys_record *record;
    const struct gw_key *key = route_start(ex, &config, &record);
    if (key == NULL)
        return 0;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    ex->route->gateway->dialect->model_list(&b, config, key);
    gw_config_release(config);
    keys_record_release(record);
    return exchange_answer(ex, 200, &b, 0);
}

int handle_gateway(struct exchange *ex)
{
    const struct gw_route *route = ex->route->gateway;
    switch (route->kind) {
    case GW_ROUTE_CALL:
        return handle_call(ex, route->endpoint);
    case GW_ROUTE_MODEL_IN_PATH:
        return handle_model_in_path(ex);
    case GW_ROUTE_STORED:
        return handle_stored(ex);
    case GW_ROUTE_MODELS:
        return handle_models(ex);
    case GW_ROUTE_TOOLS: /* routes.c gives it handle_gateway_mcp */
        break;
    }
    return gateway_reply_error(ex, 404, NULL, "not_found", 0, "Not found.");
}

/* ---- shared with the other routes' files (gateway_internal.h) ----------- */

const struct gw_key *gateway_route_start(struct exchange *ex, struct gw_config **config_out,
                                         struct keys_record **record)
{
    return route_start(ex, config_out, record);
}

int gateway_lease_id(struct exchange *ex, const char *caller, char *out, size_t out_size)
{
    return lease_id_of(ex, caller, 0, out, out_size);
}

int gateway_call_wait(struct exchange *ex, struct gateway_call *call)
{
    return call_wait(ex, call);
}

void gateway_reserve_start(struct exchange *ex)
{
    reserve_start(ex);
}

void gateway_wait_in_words(int64_t ms, char *out, size_t size)
{
    wait_in_words(ms, out, size);
}
