/* The Keys API (docs/api.md "Keys"): POST and GET /v1/admin/keys, GET,
 * PATCH and DELETE /v1/admin/keys/{id}, POST /v1/admin/keys/{id}/rotate.
 * Bodies are checked on the worker; every change runs on the offload
 * thread, where keys.log (and limits.json, for the limits a key is made
 * with) is written; the answer waits for the fdatasync of keys.log that
 * covers it, one for all the changes written meanwhile (keys.h).
 * gateway.json's keys are listed too, read-only. */
#include "handlers.h"
#include "keys.h"
#include "exchange.h"
#include "services.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "gateway.h"
#include "gateway_internal.h"
#include "registry.h"
#include "router.h"
#include "util/log.h"
#include "wire/decode.h"
#include "wire/wire_text.h"

#define KEYS_ERROR_SIZE 512

/* What a change carries to the offload thread and back. */
struct key_change {
    struct exchange *ex;
    struct keys_ticket ticket; /* while the change waits for its batch's sync */
    char id[KEYS_ID_SIZE];
    struct keys_draft *draft;         /* a create's */
    struct registry_creation *limits; /* a create's, in the arena */
    uint32_t limit_count;
    const struct jdoc_value *body; /* an update's */
    uint32_t grace_seconds;        /* a rotation's */
    enum keys_outcome outcome;
    struct keys_record *record;  /* the key after the change (retained) */
    char secret[GW_SECRET_SIZE]; /* a create's and a rotation's */
    char error[KEYS_ERROR_SIZE]; /* a failed create's limits: why */
    unsigned error_status;       /* ... and the status */
};

static void change_cleanup(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    if (change != NULL) {
        keys_record_release(change->record);
        change->record = NULL;
        memset(change->secret, 0, sizeof change->secret);
    }
}

static void change_done(struct keys_ticket *ticket);

static struct key_change *change_new(struct exchange *ex)
{
    struct key_change *change = arena_alloc(&ex->arena, sizeof *change);
    if (change == NULL)
        return NULL;
    memset(change, 0, sizeof *change);
    change->ex = ex;
    change->ticket.done = change_done;
    ex->handler_state = change;
    ex->cleanup = change_cleanup;
    return change;
}

static int64_t now_ms(struct exchange *ex)
{
    return clock_now_ms(ex->server->clock);
}

/* Each model and MCP server a key names must be one of gateway.json's
 * (when the gateway runs): 0, or -1 answered 400. */
static int check_models(struct exchange *ex, const struct keys_draft *draft)
{
    struct gateway *g = ex->server->gateway;
    if (g == NULL)
        return 0;
    struct gw_config *config = gateway_config_get(g);
    int result = 0;
    for (uint32_t i = 0; i < draft->model_count && result == 0; i++) {
        if (gw_config_find_model(config, draft->models[i], strlen(draft->models[i])) != NULL)
            continue;
        char error[KEYS_ERROR_SIZE];
        snprintf(error, sizeof error, "models: unknown model '%.128s'", draft->models[i]);
        exchange_error(ex, 400, error);
        result = -1;
    }
    for (uint32_t i = 0; i < draft->mcp_server_count && result == 0; i++) {
        const char *name = draft->mcp_servers[i];
        if (gw_config_find_mcp_server(config, name, strlen(name)) != NULL)
            continue;
        char error[KEYS_ERROR_SIZE];
        snprintf(error, sizeof error, "mcp_servers: unknown MCP server '%.128s'", name);
        exchange_error(ex, 400, error);
        result = -1;
    }
    gw_config_release(config);
    return result;
}

static int keys_failed(struct exchange *ex, enum keys_outcome outcome, const char *id)
{
    char error[KEYS_ERROR_SIZE];
    switch (outcome) {
    case KEYS_UNKNOWN:
        snprintf(error, sizeof error, "key_not_found: %s", id);
        return exchange_error(ex, 404, error);
    case KEYS_FULL:
        snprintf(error, sizeof error, "too_many_keys: at most %d keys", KEYS_COUNT_MAX);
        return exchange_error(ex, 409, error);
    case KEYS_IS_GONE:
        snprintf(error, sizeof error, "key_revoked: %s is revoked and cannot be changed", id);
        return exchange_error(ex, 409, error);
    case KEYS_WRITE_FAILED:
        return exchange_error(ex, 503, "keys_write_failed");
    case KEYS_NO_RANDOMNESS:
        return exchange_error(ex, 503, "no_randomness");
    case KEYS_STORE_UNAVAILABLE:
        return exchange_error(ex, 503, "control_store_unavailable");
    case KEYS_CHANGED_ELSEWHERE:
        snprintf(error, sizeof error,
                 "key_changed_elsewhere: %s was changed through another front end at the same "
                 "time; try again",
                 id);
        return exchange_error(ex, 409, error);
    case KEYS_NO_MEMORY:
    case KEYS_PENDING: /* never answered: the ticket's outcome replaces it */
    case KEYS_OK:
        break;
    }
    return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
}

/* The key after a change: 200 (201 for a create) with its fields, and
 * the secret and its sha256 when one was made. */
static int reply_key(struct exchange *ex, unsigned status)
{
    struct key_change *change = ex->handler_state;
    if (change->outcome != KEYS_OK)
        return keys_failed(ex, change->outcome, change->id);
    const struct keys_record *r = change->record;
    int64_t last_used = 0;
    struct keys_record *now = keys_get(ex->server->keys, r->id, &last_used);
    keys_record_release(now);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    keys_record_encode(&b, r, now_ms(ex), last_used);
    if (change->secret[0] != '\0' && !b.failed) {
        char hex[GW_SHA256_HEX_SIZE];
        gw_hex_encode(r->sha256, GW_SHA256_BYTES, hex);
        b.length--; /* the record's closing brace */
        buffer_append_str(&b, ",\"secret\":");
        buffer_append_json_string(&b, change->secret, strlen(change->secret));
        buffer_append_str(&b, ",\"sha256\":");
        buffer_append_json_string(&b, hex, strlen(hex));
        if (change->draft != NULL) {
            buffer_append_str(&b, ",\"limits\":[");
            for (uint32_t i = 0; i < change->limit_count; i++) {
                const char *key = change->limits[i].definition.key;
                if (i > 0)
                    buffer_append_char(&b, ',');
                buffer_append_json_string(&b, key, strlen(key));
            }
            buffer_append_char(&b, ']');
        }
        buffer_append_char(&b, '}');
    }
    memset(change->secret, 0, sizeof change->secret);
    if (b.failed) {
        buffer_free(&b);
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    }
    int rc = exchange_answer(ex, status, &b, 0);
    buffer_free(&b);
    return rc;
}

/* ---- POST /v1/admin/keys -------------------------------------------------------- */

/* Deletes the limits a create made before it failed. */
static void undo_limits(struct exchange *ex, struct key_change *change)
{
    for (uint32_t i = 0; i < change->limit_count; i++) {
        if (change->limits[i].outcome != REGISTRY_OK)
            continue;
        const char *key = change->limits[i].definition.key;
        if (registry_delete(ex->server->registry, key) != REGISTRY_OK)
            log_write(LOG_ERROR, "a key's limit could not be undone", "key", key, NULL);
    }
}

/* The sync the store asked for (keys_sync_claim), on the offload thread. */
static void sync_job(void *context)
{
    keys_sync(context);
}

/* A change's batch synced (keys.h): its outcome, its limits undone if it
 * failed, and its answer let go. */
static void change_done(struct keys_ticket *ticket)
{
    struct key_change *change =
        (struct key_change *)(void *)((char *)ticket - offsetof(struct key_change, ticket));
    change->outcome = ticket->outcome;
    change->record = ticket->record;
    if (change->outcome != KEYS_OK)
        undo_limits(change->ex, change);
    exchange_offload_resume(change->ex);
}

/* After a change on the offload thread: one written but not yet durable
 * holds its answer until its batch's sync; the first of a batch queues
 * that sync behind the jobs waiting (so the changes they carry join the
 * batch), or syncs at once when the queue is full. */
static void change_wait(struct exchange *ex, struct key_change *change)
{
    if (change->outcome != KEYS_PENDING)
        return;
    exchange_offload_defer(ex);
    struct keys *keys = ex->server->keys;
    if (keys_sync_claim(keys) && !offload_submit(ex->server->offload, sync_job, keys))
        keys_sync(keys);
}

/* The limits first (all or none), then the key; a key that cannot be
 * written takes its limits back. */
static void create_work(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    change->outcome = KEYS_OK;
    if (change->limit_count > 0)
        registry_create_absent(ex->server->registry, change->limits, change->limit_count);
    for (uint32_t i = 0; i < change->limit_count && change->error_status == 0; i++) {
        const struct registry_creation *item = &change->limits[i];
        const char *key = item->definition.key;
        if (item->outcome == REGISTRY_OK)
            continue;
        change->error_status = item->outcome == REGISTRY_EXISTS     ? 409
                               : item->outcome == REGISTRY_REJECTED ? 400
                                                                    : 503;
        if (item->outcome == REGISTRY_EXISTS)
            snprintf(change->error, sizeof change->error, "limit_exists: %.300s", key);
        else if (item->outcome == REGISTRY_REJECTED)
            snprintf(change->error, sizeof change->error, "limits[%u]: %.400s", i, item->error);
        else
            snprintf(change->error, sizeof change->error, "%s",
                     item->outcome == REGISTRY_BACKEND_FAILED ? WIRE_BACKEND_ERROR
                                                              : WIRE_REGISTRY_WRITE_FAILED);
    }
    if (change->error_status == 0)
        change->outcome = keys_create(ex->server->keys, change->draft, now_ms(ex), change->secret,
                                      &change->record, &change->ticket);
    if (change->error_status != 0 ||
        (change->outcome != KEYS_OK && change->outcome != KEYS_PENDING))
        undo_limits(ex, change);
    else if (ex->server->control != NULL && change->limit_count > 0)
        control_publish(ex->server->control, change->limits, change->limit_count);
    change_wait(ex, change);
}

static int create_reply(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    if (change->error_status != 0)
        return exchange_error(ex, change->error_status, change->error);
    if (change->outcome == KEYS_OK) {
        for (uint32_t i = 0; i < change->limit_count; i++)
            wait_limit_changed(ex->server->wait, change->limits[i].definition.key);
        log_write(LOG_INFO, "key created", "id", change->record->id, "caller",
                  change->record->caller, "team", change->record->team, NULL);
    }
    return reply_key(ex, 201);
}

/* "limits": definitions created with the key, each checked as PUT
 * /v1/admin/limits checks one, no key twice. 0 or -1 answered 400. */
static int read_limits(struct exchange *ex, struct key_change *change,
                       const struct jdoc_value *limits)
{
    char error[KEYS_ERROR_SIZE];
    if (limits == NULL)
        return 0;
    if (!jdoc_is(limits, JDOC_ARRAY) || limits->count > KEYS_LIMITS_MAX) {
        snprintf(error, sizeof error, "limits: must be an array of at most %d limit definitions",
                 KEYS_LIMITS_MAX);
        return exchange_error(ex, 400, error), -1;
    }
    change->limits = arena_alloc(&ex->arena, (limits->count + 1) * sizeof *change->limits);
    if (change->limits == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY), -1;
    for (uint32_t i = 0; i < limits->count; i++) {
        char path[32];
        snprintf(path, sizeof path, "limits[%u].", i);
        struct limit_definition *d = &change->limits[i].definition;
        if (decode_definition(&limits->as.items[i], path, d, error, sizeof error) != 0)
            return exchange_error(ex, 400, error), -1;
        for (uint32_t k = 0; k < i; k++) {
            if (strcmp(change->limits[k].definition.key, d->key) == 0) {
                snprintf(error, sizeof error, "limits[%u].key: duplicate key", i);
                return exchange_error(ex, 400, error), -1;
            }
        }
    }
    change->limit_count = limits->count;
    return 0;
}

static int create_key(struct exchange *ex)
{
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return 0;
    struct key_change *change = change_new(ex);
    struct keys_draft *draft = arena_alloc(&ex->arena, sizeof *draft);
    if (change == NULL || draft == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    change->draft = draft;
    char error[KEYS_ERROR_SIZE];
    if (keys_draft_apply(draft, body, KEYS_FIELDS_CREATE, error, sizeof error) != 0)
        return exchange_error(ex, 400, error);
    if (check_models(ex, draft) != 0 || read_limits(ex, change, jdoc_get(body, "limits")) != 0)
        return 0;
    return exchange_call_offload(ex, create_work, create_reply);
}

/* ---- GET /v1/admin/keys --------------------------------------------------------- */

struct key_filter {
    char team[GW_TEAM_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    bool has_team, has_caller, has_status;
    enum keys_status status;
    int64_t now_unix_ms;
    struct buffer *out;
    uint32_t limit;   /* keys in the page */
    uint32_t written; /* so far */
    size_t position;  /* of the key looked at, in the whole list */
    bool more;        /* a key past the page matches: next_cursor is position */
};

static bool filter_matches(const struct key_filter *f, const char *caller, const char *team,
                           enum keys_status status)
{
    if (f->has_caller && strcmp(f->caller, caller) != 0)
        return false;
    if (f->has_team && (team == NULL || strcmp(f->team, team) != 0))
        return false;
    return !f->has_status || f->status == status;
}

/* Whether to go on; the key is written when it matches and fits. */
static bool take(struct key_filter *f)
{
    if (f->written == f->limit) {
        f->more = true;
        return false;
    }
    if (f->written > 0)
        buffer_append_char(f->out, ',');
    f->written++;
    return true;
}

static bool list_api_key(const struct keys_record *r, int64_t last_used, void *context)
{
    struct key_filter *f = context;
    enum keys_status status = keys_record_status(r, f->now_unix_ms);
    if (filter_matches(f, r->caller, r->team, status)) {
        if (!take(f))
            return false;
        keys_record_encode(f->out, r, f->now_unix_ms, last_used);
    }
    f->position++;
    return true;
}

static void list_file_keys(struct exchange *ex, struct key_filter *f, size_t cursor,
                           size_t *file_count)
{
    *file_count = 0;
    if (ex->server->gateway == NULL)
        return;
    struct gw_config *config = gateway_config_get(ex->server->gateway);
    *file_count = config->key_count;
    for (f->position = cursor; f->position < config->key_count && !f->more; f->position++) {
        const struct gw_key *key = &config->keys[f->position];
        if (!filter_matches(f, key->caller, key->team, KEYS_ACTIVE))
            continue;
        if (!take(f))
            break;
        keys_file_key_encode(f->out, config, key);
    }
    gw_config_release(config);
}

/* team, caller, status: 0, or -1 answered 400. */
static int read_filter(struct exchange *ex, struct key_filter *f)
{
    char status[16];
    int found = exchange_query(ex, "team", f->team, sizeof f->team);
    if (found < 0)
        return -1;
    f->has_team = found > 0;
    if ((found = exchange_query(ex, "caller", f->caller, sizeof f->caller)) < 0)
        return -1;
    f->has_caller = found > 0;
    if ((found = exchange_query(ex, "status", status, sizeof status)) < 0)
        return -1;
    f->has_status = found > 0;
    if (f->has_status && keys_status_of(status, &f->status) != 0) {
        exchange_error(ex, 400, "status: must be active, blocked, expired or revoked");
        return -1;
    }
    return 0;
}

static int list_keys(struct exchange *ex)
{
    struct key_filter f = {.now_unix_ms = now_ms(ex), .limit = KEYS_PAGE_DEFAULT};
    int64_t cursor = 0, limit = KEYS_PAGE_DEFAULT;
    if (read_filter(ex, &f) != 0 || exchange_query_i64(ex, "limit", 1, KEYS_PAGE_MAX, &limit) < 0 ||
        exchange_query_i64(ex, "cursor", 0, INT32_MAX, &cursor) < 0)
        return 0;
    f.limit = (uint32_t)limit;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    f.out = &b;
    buffer_append_str(&b, "{\"keys\":[");
    size_t file_count = 0;
    list_file_keys(ex, &f, (size_t)cursor, &file_count);
    if (!f.more) {
        size_t from = (size_t)cursor > file_count ? (size_t)cursor - file_count : 0;
        f.position = file_count + from;
        keys_each(ex->server->keys, from, list_api_key, &f);
    }
    buffer_append_str(&b, "],\"next_cursor\":");
    if (f.more) {
        char text[24];
        snprintf(text, sizeof text, "%zu", f.position);
        buffer_append_json_string(&b, text, strlen(text));
    } else {
        buffer_append_str(&b, "null");
    }
    buffer_append_char(&b, '}');
    if (b.failed) {
        buffer_free(&b);
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    }
    int rc = exchange_answer(ex, 200, &b, 0);
    buffer_free(&b);
    return rc;
}

int handle_admin_keys(struct exchange *ex)
{
    return ex->method == HTTP_POST ? create_key(ex) : list_keys(ex);
}

/* ---- /v1/admin/keys/{id}[/rotate] ----------------------------------------------- */

/* The id of the item path ([a-z0-9_], at most KEYS_ID_SIZE - 1 bytes) and
 * whether "/rotate" follows; false: no such route of a key. */
static bool key_item(const char *item, char id[KEYS_ID_SIZE], bool *rotate)
{
    size_t n = 0;
    while (n < KEYS_ID_SIZE - 1 && ((item[n] >= 'a' && item[n] <= 'z') ||
                                    (item[n] >= '0' && item[n] <= '9') || item[n] == '_'))
        n++;
    if (n == 0)
        return false;
    memcpy(id, item, n);
    id[n] = '\0';
    *rotate = strcmp(item + n, "/rotate") == 0;
    return item[n] == '\0' || *rotate;
}

/* A gateway.json key with this id, encoded into b; false: none. */
static bool file_key(struct exchange *ex, const char *id, struct buffer *b)
{
    if (strncmp(id, KEYS_FILE_ID_PREFIX, strlen(KEYS_FILE_ID_PREFIX)) != 0 ||
        ex->server->gateway == NULL)
        return false;
    struct gw_config *config = gateway_config_get(ex->server->gateway);
    bool found = false;
    for (uint32_t i = 0; i < config->key_count && !found; i++) {
        char key_id[KEYS_ID_SIZE];
        keys_file_key_id(&config->keys[i], key_id);
        if (strcmp(key_id, id) == 0) {
            found = true;
            if (b != NULL)
                keys_file_key_encode(b, config, &config->keys[i]);
        }
    }
    gw_config_release(config);
    return found;
}

static int show_key(struct exchange *ex, const char *id)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    int64_t last_used = 0;
    struct keys_record *r = NULL;
    if (!file_key(ex, id, &b)) {
        r = keys_get(ex->server->keys, id, &last_used);
        if (r == NULL) {
            buffer_free(&b);
            return keys_failed(ex, KEYS_UNKNOWN, id);
        }
        keys_record_encode(&b, r, now_ms(ex), last_used);
        keys_record_release(r);
    }
    if (b.failed) {
        buffer_free(&b);
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    }
    int rc = exchange_answer(ex, 200, &b, 0);
    buffer_free(&b);
    return rc;
}

static void update_work(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    change->outcome =
        keys_update(ex->server->keys, change->id, change->body, &change->record, &change->ticket);
    change_wait(ex, change);
}

static void revoke_work(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    change->outcome =
        keys_revoke(ex->server->keys, change->id, now_ms(ex), &change->record, &change->ticket);
    change_wait(ex, change);
}

static void rotate_work(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    change->outcome = keys_rotate(ex->server->keys, change->id, change->grace_seconds, now_ms(ex),
                                  change->secret, &change->record, &change->ticket);
    change_wait(ex, change);
}

static int change_reply(struct exchange *ex)
{
    struct key_change *change = ex->handler_state;
    if (change->outcome == KEYS_OK)
        log_write(LOG_INFO, "key changed", "id", change->id, "status",
                  keys_status_name(keys_record_status(change->record, now_ms(ex))), NULL);
    return reply_key(ex, 200);
}

static int update_key(struct exchange *ex, struct key_change *change)
{
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return 0;
    struct keys_draft *scratch = arena_alloc(&ex->arena, sizeof *scratch);
    if (scratch == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    char error[KEYS_ERROR_SIZE];
    if (keys_draft_apply(scratch, body, KEYS_FIELDS_UPDATE, error, sizeof error) != 0)
        return exchange_error(ex, 400, error);
    if (check_models(ex, scratch) != 0)
        return 0;
    change->body = body;
    return exchange_call_offload(ex, update_work, change_reply);
}

/* {"grace_seconds": 0..KEYS_GRACE_SECONDS_MAX}, or no body (0). */
static int rotate_key(struct exchange *ex, struct key_change *change)
{
    change->grace_seconds = 0;
    if (ex->body_length > 0) {
        const struct jdoc_value *body = exchange_parse_body(ex);
        if (body == NULL)
            return 0;
        char error[KEYS_ERROR_SIZE];
        snprintf(error, sizeof error, "grace_seconds: must be an integer 0..%d",
                 KEYS_GRACE_SECONDS_MAX);
        if (!jdoc_is(body, JDOC_OBJECT))
            return exchange_error(ex, 400, WIRE_BODY_NOT_OBJECT);
        for (uint32_t i = 0; i < body->count; i++) {
            const struct jdoc_member *m = &body->as.members[i];
            if (strcmp(m->key, "grace_seconds") != 0) {
                snprintf(error, sizeof error, "%.200s: unknown field", m->key);
                return exchange_error(ex, 400, error);
            }
            if (!jdoc_is(&m->value, JDOC_INTEGER) || m->value.as.integer < 0 ||
                m->value.as.integer > KEYS_GRACE_SECONDS_MAX)
                return exchange_error(ex, 400, error);
            change->grace_seconds = (uint32_t)m->value.as.integer;
        }
    }
    return exchange_call_offload(ex, rotate_work, change_reply);
}

int handle_admin_key(struct exchange *ex)
{
    char item[KEYS_ID_SIZE + 16], id[KEYS_ID_SIZE];
    size_t item_length = 0;
    bool rotate = false;
    if (percent_decode(ex->key_encoded, item, sizeof item, &item_length) != 0 ||
        !key_item(item, id, &rotate) || rotate != (ex->method == HTTP_POST))
        return exchange_error(ex, 404, WIRE_NOT_FOUND);
    if (ex->method == HTTP_GET || ex->method == HTTP_HEAD)
        return show_key(ex, id);
    if (file_key(ex, id, NULL)) {
        char error[KEYS_ERROR_SIZE];
        snprintf(error, sizeof error,
                 "key_read_only: %s is a key of gateway.json; change it in that file", id);
        return exchange_error(ex, 409, error);
    }
    struct key_change *change = change_new(ex);
    if (change == NULL)
        return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    snprintf(change->id, sizeof change->id, "%s", id);
    if (ex->method == HTTP_PATCH)
        return update_key(ex, change);
    if (ex->method == HTTP_DELETE)
        return exchange_call_offload(ex, revoke_work, change_reply);
    return rotate_key(ex, change);
}
