/* One gateway key of the Keys API: its fields read from an API body or a
 * keys.json entry (each against its bound), packed into one immutable,
 * reference-counted block, and written as the API shows it. The store
 * (keys.c) keeps the records; this file knows their fields. */
#include "keys.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {"active", "blocked", "expired", "revoked"};

const char *keys_status_name(enum keys_status status)
{
    assert((unsigned)status < sizeof status_names / sizeof status_names[0]);
    return status_names[status];
}

int keys_status_of(const char *text, enum keys_status *out)
{
    for (unsigned i = 0; i < sizeof status_names / sizeof status_names[0]; i++) {
        if (strcmp(text, status_names[i]) == 0) {
            *out = (enum keys_status)i;
            return 0;
        }
    }
    return -1;
}

/* ---- reading fields -------------------------------------------------------- */

/* Latest instant a key may name: 9999-12-31T23:59:59.999Z. */
#define KEYS_UNIX_MS_MAX INT64_C(253402300799999)

/* 1..length_max bytes of printable ASCII without white space: what a limit
 * key's {caller} and {team} may hold. */
static bool key_text(const struct jdoc_value *v, size_t length_max)
{
    if (!jdoc_is(v, JDOC_STRING) || v->count == 0 || v->count > length_max)
        return false;
    for (uint32_t i = 0; i < v->count; i++) {
        if (v->as.string[i] <= 0x20 || v->as.string[i] > 0x7e)
            return false;
    }
    return true;
}

static int fail(char *error, size_t error_size, const char *field, const char *reason)
{
    snprintf(error, error_size, "%s: %s", field, reason);
    return -1;
}

static int read_models(struct keys_draft *d, const struct jdoc_value *v, char *error,
                       size_t error_size)
{
    char reason[160];
    if (v->kind == JDOC_NULL) {
        d->model_count = 0;
        return 0;
    }
    snprintf(reason, sizeof reason, "must be null or an array of at most %d model names",
             KEYS_MODELS_MAX);
    if (!jdoc_is(v, JDOC_ARRAY) || v->count > KEYS_MODELS_MAX)
        return fail(error, error_size, "models", reason);
    for (uint32_t i = 0; i < v->count; i++) {
        const struct jdoc_value *name = &v->as.items[i];
        if (!key_text(name, GW_NAME_LENGTH_MAX))
            return fail(error, error_size, "models",
                        "each must be a model name (1-128 bytes, no white space)");
        for (uint32_t k = 0; k < i; k++) {
            if (strcmp(d->models[k], name->as.string) == 0)
                return fail(error, error_size, "models", "duplicate model");
        }
        memcpy(d->models[i], name->as.string, name->count + 1);
    }
    d->model_count = v->count;
    return 0;
}

/* null: every server; an array of names: only those (none when empty). */
static int read_mcp_servers(struct keys_draft *d, const struct jdoc_value *v, char *error,
                            size_t error_size)
{
    d->mcp_server_count = 0;
    d->mcp_servers_listed = v->kind != JDOC_NULL;
    if (!d->mcp_servers_listed)
        return 0;
    char reason[160];
    snprintf(reason, sizeof reason, "must be null or an array of at most %d MCP server names",
             KEYS_MCP_SERVERS_MAX);
    if (!jdoc_is(v, JDOC_ARRAY) || v->count > KEYS_MCP_SERVERS_MAX)
        return fail(error, error_size, "mcp_servers", reason);
    for (uint32_t i = 0; i < v->count; i++) {
        const struct jdoc_value *name = &v->as.items[i];
        if (!key_text(name, GW_NAME_LENGTH_MAX))
            return fail(error, error_size, "mcp_servers",
                        "each must be an MCP server name (1-128 bytes, no white space)");
        for (uint32_t k = 0; k < i; k++) {
            if (strcmp(d->mcp_servers[k], name->as.string) == 0)
                return fail(error, error_size, "mcp_servers", "duplicate MCP server");
        }
        memcpy(d->mcp_servers[i], name->as.string, name->count + 1);
    }
    d->mcp_server_count = v->count;
    return 0;
}

static int read_metadata(struct keys_draft *d, const struct jdoc_value *v, char *error,
                         size_t error_size)
{
    char reason[160];
    snprintf(reason, sizeof reason, "must be an object of at most %d strings", KEYS_METADATA_MAX);
    if (!jdoc_is(v, JDOC_OBJECT) || v->count > KEYS_METADATA_MAX)
        return fail(error, error_size, "metadata", reason);
    for (uint32_t i = 0; i < v->count; i++) {
        const struct jdoc_member *m = &v->as.members[i];
        if (m->key_length == 0 || m->key_length > KEYS_METADATA_NAME_LENGTH_MAX) {
            snprintf(reason, sizeof reason, "a name must be 1-%d bytes",
                     KEYS_METADATA_NAME_LENGTH_MAX);
            return fail(error, error_size, "metadata", reason);
        }
        if (!jdoc_is(&m->value, JDOC_STRING) || m->value.count > KEYS_METADATA_VALUE_LENGTH_MAX) {
            snprintf(reason, sizeof reason, "%.64s: must be a string of at most %d bytes", m->key,
                     KEYS_METADATA_VALUE_LENGTH_MAX);
            return fail(error, error_size, "metadata", reason);
        }
        for (uint32_t k = 0; k < i; k++) {
            if (strcmp(d->metadata_names[k], m->key) == 0)
                return fail(error, error_size, "metadata", "duplicate name");
        }
        memcpy(d->metadata_names[i], m->key, m->key_length + 1);
        memcpy(d->metadata_values[i], m->value.as.string, m->value.count + 1);
    }
    d->metadata_count = v->count;
    return 0;
}

static int read_integer(const struct jdoc_value *v, const char *field, int64_t min, int64_t max,
                        int64_t *out, char *error, size_t error_size)
{
    if (!jdoc_is(v, JDOC_INTEGER) || v->as.integer < min || v->as.integer > max) {
        char reason[96];
        snprintf(reason, sizeof reason, "must be an integer %lld..%lld", (long long)min,
                 (long long)max);
        return fail(error, error_size, field, reason);
    }
    *out = v->as.integer;
    return 0;
}

static int read_digest(const struct jdoc_value *v, const char *field, uint8_t *out, char *error,
                       size_t error_size)
{
    if (!jdoc_is(v, JDOC_STRING) || gw_hex_decode(v->as.string, v->count, out, GW_SHA256_BYTES))
        return fail(error, error_size, field, "must be 64 lower-case hex digits");
    return 0;
}

/* Fields every kind of body may set. 1: not one of them. */
static int common_field(struct keys_draft *d, const struct jdoc_member *m, char *error,
                        size_t error_size)
{
    const struct jdoc_value *v = &m->value;
    int64_t n = 0;
    if (strcmp(m->key, "models") == 0)
        return read_models(d, v, error, error_size);
    if (strcmp(m->key, "metadata") == 0)
        return read_metadata(d, v, error, error_size);
    if (strcmp(m->key, "mcp_servers") == 0)
        return read_mcp_servers(d, v, error, error_size);
    if (strcmp(m->key, "expires_at_unix_ms") == 0) {
        if (v->kind == JDOC_NULL) {
            d->expires_at_unix_ms = 0;
            return 0;
        }
        int rc = read_integer(v, m->key, 1, KEYS_UNIX_MS_MAX, &n, error, error_size);
        d->expires_at_unix_ms = n;
        return rc;
    }
    if (strcmp(m->key, "max_wait_seconds") == 0) {
        int rc = read_integer(v, m->key, 0, GW_KEY_WAIT_SECONDS_MAX, &n, error, error_size);
        d->max_wait_seconds = (uint32_t)n;
        return rc;
    }
    if (strcmp(m->key, "priority_floor") == 0) {
        int rc = read_integer(v, m->key, 0, GW_PRIORITY_MAX, &n, error, error_size);
        d->priority_floor = (uint32_t)n;
        return rc;
    }
    return 1;
}

static int read_text(const struct jdoc_value *v, const char *field, char *out, size_t length_max,
                     char *error, size_t error_size)
{
    if (!key_text(v, length_max)) {
        char reason[96];
        snprintf(reason, sizeof reason, "must be 1-%zu bytes of printable ASCII, no white space",
                 length_max);
        return fail(error, error_size, field, reason);
    }
    memcpy(out, v->as.string, v->count + 1);
    return 0;
}

/* The fields only keys.json holds. 1: not one of them. */
static int file_field(struct keys_draft *d, const struct jdoc_member *m, char *error,
                      size_t error_size)
{
    const struct jdoc_value *v = &m->value;
    if (strcmp(m->key, "id") == 0) {
        size_t prefix = strlen(KEYS_ID_PREFIX);
        uint8_t bytes[8];
        if (!jdoc_is(v, JDOC_STRING) || v->count != prefix + 16 ||
            strncmp(v->as.string, KEYS_ID_PREFIX, prefix) != 0 ||
            gw_hex_decode(v->as.string + prefix, 16, bytes, sizeof bytes) != 0)
            return fail(error, error_size, "id", "must be key_ and 16 lower-case hex digits");
        memcpy(d->id, v->as.string, v->count + 1);
        return 0;
    }
    if (strcmp(m->key, "sha256") == 0)
        return read_digest(v, m->key, d->sha256, error, error_size);
    if (strcmp(m->key, "first_sha256") == 0)
        return read_digest(v, m->key, d->first_sha256, error, error_size);
    if (strcmp(m->key, "previous_sha256") == 0) {
        d->has_previous = v->kind != JDOC_NULL;
        return d->has_previous ? read_digest(v, m->key, d->previous_sha256, error, error_size) : 0;
    }
    int64_t *at = strcmp(m->key, "previous_until_unix_ms") == 0 ? &d->previous_until_unix_ms
                  : strcmp(m->key, "created_at_unix_ms") == 0   ? &d->created_at_unix_ms
                  : strcmp(m->key, "revoked_at_unix_ms") == 0   ? &d->revoked_at_unix_ms
                  : strcmp(m->key, "last_used_unix_ms") == 0    ? &d->last_used_unix_ms
                                                                : NULL;
    if (at != NULL)
        return read_integer(v, m->key, 0, KEYS_UNIX_MS_MAX, at, error, error_size);
    return 1;
}

static int one_field(struct keys_draft *d, const struct jdoc_member *m, enum keys_fields which,
                     char *error, size_t error_size)
{
    int rc = common_field(d, m, error, error_size);
    if (rc <= 0)
        return rc;
    const struct jdoc_value *v = &m->value;
    if (which != KEYS_FIELDS_UPDATE && strcmp(m->key, "caller") == 0)
        return read_text(v, m->key, d->caller, CALLER_LENGTH_MAX, error, error_size);
    if (which != KEYS_FIELDS_UPDATE && strcmp(m->key, "team") == 0)
        return read_text(v, m->key, d->team, GW_TEAM_LENGTH_MAX, error, error_size);
    if (which != KEYS_FIELDS_CREATE && strcmp(m->key, "blocked") == 0) {
        if (v->kind != JDOC_TRUE && v->kind != JDOC_FALSE)
            return fail(error, error_size, m->key, "must be true or false");
        d->blocked = v->kind == JDOC_TRUE;
        return 0;
    }
    if (which == KEYS_FIELDS_FILE) {
        rc = file_field(d, m, error, error_size);
        if (rc <= 0)
            return rc;
    }
    if (which == KEYS_FIELDS_CREATE && strcmp(m->key, "limits") == 0)
        return 0; /* the handler's */
    char name[72];
    snprintf(name, sizeof name, "%.64s", m->key);
    return fail(error, error_size, name,
                which == KEYS_FIELDS_UPDATE &&
                        (strcmp(m->key, "caller") == 0 || strcmp(m->key, "team") == 0)
                    ? "cannot be changed: create a new key"
                    : "unknown field");
}

int keys_draft_apply(struct keys_draft *draft, const struct jdoc_value *object,
                     enum keys_fields which, char *error, size_t error_size)
{
    if (!jdoc_is(object, JDOC_OBJECT))
        return fail(error, error_size, "body", "must be a JSON object");
    for (uint32_t i = 0; i < object->count; i++) {
        if (one_field(draft, &object->as.members[i], which, error, error_size) != 0)
            return -1;
    }
    if (which == KEYS_FIELDS_UPDATE)
        return 0;
    if (draft->caller[0] == '\0')
        return fail(error, error_size, "caller", "required");
    if (draft->team[0] == '\0')
        return fail(error, error_size, "team", "required");
    if (which == KEYS_FIELDS_FILE && (draft->id[0] == '\0' || draft->created_at_unix_ms == 0))
        return fail(error, error_size, draft->id[0] == '\0' ? "id" : "created_at_unix_ms",
                    "required");
    return 0;
}

/* ---- packing --------------------------------------------------------------- */

void keys_draft_from(struct keys_draft *d, const struct keys_record *r)
{
    memset(d, 0, sizeof *d);
    memcpy(d->id, r->id, sizeof d->id);
    memcpy(d->sha256, r->sha256, sizeof d->sha256);
    memcpy(d->first_sha256, r->key.sha256, sizeof d->first_sha256);
    d->has_previous = r->has_previous;
    memcpy(d->previous_sha256, r->previous_sha256, sizeof d->previous_sha256);
    d->previous_until_unix_ms = r->previous_until_unix_ms;
    snprintf(d->caller, sizeof d->caller, "%s", r->caller);
    snprintf(d->team, sizeof d->team, "%s", r->team);
    assert(r->model_count <= KEYS_MODELS_MAX);
    for (uint32_t i = 0; i < r->model_count; i++)
        snprintf(d->models[i], sizeof d->models[i], "%s", r->models[i]);
    d->model_count = r->model_count;
    assert(r->metadata_count <= KEYS_METADATA_MAX);
    for (uint32_t i = 0; i < r->metadata_count; i++) {
        snprintf(d->metadata_names[i], sizeof d->metadata_names[i], "%s", r->metadata_names[i]);
        snprintf(d->metadata_values[i], sizeof d->metadata_values[i], "%s", r->metadata_values[i]);
    }
    d->metadata_count = r->metadata_count;
    assert(r->mcp_server_count <= KEYS_MCP_SERVERS_MAX);
    for (uint32_t i = 0; i < r->mcp_server_count; i++)
        snprintf(d->mcp_servers[i], sizeof d->mcp_servers[i], "%s", r->mcp_servers[i]);
    d->mcp_server_count = r->mcp_server_count;
    d->mcp_servers_listed = r->mcp_servers_listed;
    d->created_at_unix_ms = r->created_at_unix_ms;
    d->expires_at_unix_ms = r->expires_at_unix_ms;
    d->revoked_at_unix_ms = r->revoked_at_unix_ms;
    d->blocked = r->blocked;
    d->max_wait_seconds = r->max_wait_seconds;
    d->priority_floor = r->priority_floor;
}

/* Copies text into the block at *at; returns the copy. */
static const char *pack(char **at, const char *text)
{
    size_t n = strlen(text) + 1;
    char *copy = *at;
    memcpy(copy, text, n);
    *at += n;
    return copy;
}

struct keys_record *keys_record_new(const struct keys_draft *d)
{
    assert(d->model_count <= KEYS_MODELS_MAX);
    assert(d->metadata_count <= KEYS_METADATA_MAX);
    assert(d->mcp_server_count <= KEYS_MCP_SERVERS_MAX);
    size_t pointers = d->model_count + 2 * (size_t)d->metadata_count + d->mcp_server_count;
    size_t text = strlen(d->caller) + strlen(d->team) + 2;
    for (uint32_t i = 0; i < d->model_count; i++)
        text += strlen(d->models[i]) + 1;
    for (uint32_t i = 0; i < d->mcp_server_count; i++)
        text += strlen(d->mcp_servers[i]) + 1;
    for (uint32_t i = 0; i < d->metadata_count; i++)
        text += strlen(d->metadata_names[i]) + strlen(d->metadata_values[i]) + 2;
    struct keys_record *r = calloc(1, sizeof *r + pointers * sizeof(char *) + text);
    if (r == NULL)
        return NULL;
    const char **slots = (const char **)(r + 1);
    char *at = (char *)(slots + pointers);
    r->references = 1;
    memcpy(r->id, d->id, sizeof r->id);
    memcpy(r->sha256, d->sha256, sizeof r->sha256);
    r->has_previous = d->has_previous;
    memcpy(r->previous_sha256, d->previous_sha256, sizeof r->previous_sha256);
    r->previous_until_unix_ms = d->previous_until_unix_ms;
    r->caller = pack(&at, d->caller);
    r->team = pack(&at, d->team);
    for (uint32_t i = 0; i < d->model_count; i++)
        slots[i] = pack(&at, d->models[i]);
    r->models = slots;
    r->model_count = d->model_count;
    const char **names = slots + d->model_count, **values = names + d->metadata_count;
    for (uint32_t i = 0; i < d->metadata_count; i++) {
        names[i] = pack(&at, d->metadata_names[i]);
        values[i] = pack(&at, d->metadata_values[i]);
    }
    r->metadata_names = names;
    r->metadata_values = values;
    r->metadata_count = d->metadata_count;
    const char **servers = values + d->metadata_count;
    for (uint32_t i = 0; i < d->mcp_server_count; i++)
        servers[i] = pack(&at, d->mcp_servers[i]);
    r->mcp_servers = servers;
    r->mcp_server_count = d->mcp_server_count;
    r->mcp_servers_listed = d->mcp_servers_listed;
    r->created_at_unix_ms = d->created_at_unix_ms;
    r->expires_at_unix_ms = d->expires_at_unix_ms;
    r->revoked_at_unix_ms = d->revoked_at_unix_ms;
    r->blocked = d->blocked;
    r->max_wait_seconds = d->max_wait_seconds;
    r->priority_floor = d->priority_floor;
    assert(at == (char *)(slots + pointers) + text);
    memcpy(r->key.sha256, d->first_sha256, sizeof r->key.sha256);
    r->key.caller = r->caller;
    r->key.team = r->team;
    r->key.model_names = r->models;
    r->key.model_name_count = r->model_count;
    r->key.max_wait_seconds = r->max_wait_seconds;
    r->key.priority_floor = r->priority_floor;
    r->key.mcp_servers_listed = r->mcp_servers_listed;
    r->key.mcp_server_names = r->mcp_servers;
    r->key.mcp_server_name_count = r->mcp_server_count;
    return r;
}

void keys_record_retain(struct keys_record *record)
{
    __atomic_add_fetch(&record->references, 1, __ATOMIC_RELAXED);
}

void keys_record_release(struct keys_record *record)
{
    if (record == NULL)
        return;
    uint32_t left = __atomic_sub_fetch(&record->references, 1, __ATOMIC_ACQ_REL);
    if (left == 0)
        free(record);
}

enum keys_status keys_record_status(const struct keys_record *r, int64_t now_unix_ms)
{
    if (r->revoked_at_unix_ms != 0)
        return KEYS_REVOKED;
    if (r->blocked)
        return KEYS_BLOCKED;
    if (r->expires_at_unix_ms != 0 && now_unix_ms >= r->expires_at_unix_ms)
        return KEYS_EXPIRED;
    return KEYS_ACTIVE;
}

/* ---- the API's shape --------------------------------------------------------- */

static void append_i64_or_null(struct buffer *b, int64_t value)
{
    if (value == 0)
        buffer_append_str(b, "null");
    else
        buffer_append_i64(b, value);
}

static void append_models(struct buffer *b, const char *const *models, uint32_t count)
{
    if (count == 0) {
        buffer_append_str(b, "null");
        return;
    }
    buffer_append_char(b, '[');
    for (uint32_t i = 0; i < count; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_json_string(b, models[i], strlen(models[i]));
    }
    buffer_append_char(b, ']');
}

void keys_append_mcp_servers(struct buffer *b, const struct keys_record *r)
{
    if (!r->mcp_servers_listed) {
        buffer_append_str(b, "null");
        return;
    }
    buffer_append_char(b, '[');
    for (uint32_t i = 0; i < r->mcp_server_count; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_json_string(b, r->mcp_servers[i], strlen(r->mcp_servers[i]));
    }
    buffer_append_char(b, ']');
}

void keys_record_encode(struct buffer *b, const struct keys_record *r, int64_t now_unix_ms,
                        int64_t last_used_unix_ms)
{
    char hex[GW_SHA256_HEX_SIZE];
    gw_hex_encode(r->sha256, GW_SHA256_BYTES, hex);
    buffer_append_str(b, "{\"id\":");
    buffer_append_json_string(b, r->id, strlen(r->id));
    buffer_append_str(b, ",\"sha256_prefix\":");
    buffer_append_json_string(b, hex, 8);
    buffer_append_str(b, ",\"caller\":");
    buffer_append_json_string(b, r->caller, strlen(r->caller));
    buffer_append_str(b, ",\"team\":");
    buffer_append_json_string(b, r->team, strlen(r->team));
    buffer_append_str(b, ",\"models\":");
    append_models(b, r->models, r->model_count);
    buffer_append_str(b, ",\"mcp_servers\":");
    keys_append_mcp_servers(b, r);
    buffer_append_str(b, ",\"status\":\"");
    buffer_append_str(b, keys_status_name(keys_record_status(r, now_unix_ms)));
    buffer_append_str(b, "\",\"source\":\"api\",\"blocked\":");
    buffer_append_str(b, r->blocked ? "true" : "false");
    buffer_append_str(b, ",\"created_at_unix_ms\":");
    buffer_append_i64(b, r->created_at_unix_ms);
    buffer_append_str(b, ",\"expires_at_unix_ms\":");
    append_i64_or_null(b, r->expires_at_unix_ms);
    buffer_append_str(b, ",\"revoked_at_unix_ms\":");
    append_i64_or_null(b, r->revoked_at_unix_ms);
    buffer_append_str(b, ",\"last_used_unix_ms\":");
    append_i64_or_null(b, last_used_unix_ms);
    buffer_append_str(b, ",\"max_wait_seconds\":");
    buffer_append_u64(b, r->max_wait_seconds);
    buffer_append_str(b, ",\"priority_floor\":");
    buffer_append_u64(b, r->priority_floor);
    buffer_append_str(b, ",\"metadata\":{");
    for (uint32_t i = 0; i < r->metadata_count; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_json_string(b, r->metadata_names[i], strlen(r->metadata_names[i]));
        buffer_append_char(b, ':');
        buffer_append_json_string(b, r->metadata_values[i], strlen(r->metadata_values[i]));
    }
    buffer_append_str(b, "}}");
}

void keys_file_key_id(const struct gw_key *key, char id[KEYS_ID_SIZE])
{
    char hex[GW_SHA256_HEX_SIZE];
    gw_hex_encode(key->sha256, GW_SHA256_BYTES, hex);
    snprintf(id, KEYS_ID_SIZE, "%s%.16s", KEYS_FILE_ID_PREFIX, hex);
}

void keys_file_key_encode(struct buffer *b, const struct gw_config *config,
                          const struct gw_key *key)
{
    char id[KEYS_ID_SIZE], hex[GW_SHA256_HEX_SIZE];
    keys_file_key_id(key, id);
    gw_hex_encode(key->sha256, GW_SHA256_BYTES, hex);
    buffer_append_str(b, "{\"id\":");
    buffer_append_json_string(b, id, strlen(id));
    buffer_append_str(b, ",\"sha256_prefix\":");
    buffer_append_json_string(b, hex, 8);
    buffer_append_str(b, ",\"caller\":");
    buffer_append_json_string(b, key->caller, strlen(key->caller));
    buffer_append_str(b, ",\"team\":");
    if (key->team != NULL)
        buffer_append_json_string(b, key->team, strlen(key->team));
    else
        buffer_append_str(b, "null");
    buffer_append_str(b, ",\"models\":");
    if (key->model_count == 0)
        buffer_append_str(b, "null");
    for (uint32_t i = 0; i < key->model_count; i++) {
        const char *name = config->models[key->models[i]].name;
        buffer_append_char(b, i == 0 ? '[' : ',');
        buffer_append_json_string(b, name, strlen(name));
    }
    if (key->model_count > 0)
        buffer_append_char(b, ']');
    buffer_append_str(b, ",\"mcp_servers\":");
    if (!key->mcp_servers_listed)
        buffer_append_str(b, "null");
    else
        buffer_append_char(b, '[');
    for (uint32_t i = 0; key->mcp_servers_listed && i < key->mcp_server_count; i++) {
        const char *name = config->mcp_servers[key->mcp_servers[i]].name;
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_json_string(b, name, strlen(name));
    }
    if (key->mcp_servers_listed)
        buffer_append_char(b, ']');
    buffer_append_str(b, ",\"status\":\"active\",\"source\":\"file\",\"blocked\":false,"
                         "\"created_at_unix_ms\":null,\"expires_at_unix_ms\":null,"
                         "\"revoked_at_unix_ms\":null,\"last_used_unix_ms\":null,"
                         "\"max_wait_seconds\":");
    buffer_append_u64(b, key->max_wait_seconds);
    buffer_append_str(b, ",\"priority_floor\":");
    buffer_append_u64(b, key->priority_floor);
    buffer_append_str(b, ",\"metadata\":{}}");
}
