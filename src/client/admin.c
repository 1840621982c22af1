/* Admin calls (limit definitions), usage, and the raw request for routes
 * without a call of their own. One attempt each: they are idempotent or
 * read-only, so the caller (or an operator) simply repeats them. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One attempt of method path [body]; returns the mapped status and the
 * parsed body (json_decref), which is NULL unless it is a JSON object. */
static int admin_send(struct llmlimit_client *client, const char *method, const char *path,
                      const json_t *body_json, json_t **json_out, struct llmlimit_status *status)
{
    assert(json_out != NULL);
    assert(client->options.attempt_timeout_ms > 0);
    *json_out = NULL;
    char *body = NULL;
    size_t body_length = 0;
    if (body_json != NULL && (body = json_dump_compact(body_json, &body_length)) == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    struct http_answer answer = {0};
    int rc = transport_send(client, method, path, body, body_length,
                            client->options.attempt_timeout_ms, &answer, status);
    free(body);
    if (rc != 0)
        return rc;
    return answer_take(&answer, status, json_out);
}

/* admin_send of method to /v1/admin/limits/{key}, the key percent-encoded;
 * LLMLIMIT_ERR_INVALID_ARGUMENT for a key the server would refuse. */
static int limit_send(struct llmlimit_client *client, const char *method, const char *key,
                      json_t **json_out, struct llmlimit_status *status)
{
    *json_out = NULL;
    char path[CLIENT_PATH_LENGTH_MAX];
    int rc = path_with_key(path, sizeof(path), "/v1/admin/limits/", key);
    return rc != 0 ? rc : admin_send(client, method, path, NULL, json_out, status);
}

/* ---- usage ---------------------------------------------------------------- */

static int usage_from_json(const json_t *json, struct llmlimit_usage *out)
{
    const char *key = json_field_string(json, "key");
    const char *kind = json_field_string(json, "kind");
    const char *limit_status = json_field_string(json, "status");
    if (key == NULL || kind == NULL || limit_status == NULL)
        return LLMLIMIT_ERR_PROTOCOL;
    copy_string(out->key, sizeof(out->key), key);
    copy_string(out->kind, sizeof(out->kind), kind);
    copy_string(out->status, sizeof(out->status), limit_status);
    bool ok = json_field_u64(json, "capacity", &out->capacity) &&
              json_field_u64(json, "reserved", &out->reserved) &&
              json_field_u64(json, "used", &out->used) &&
              json_field_u64(json, "debt", &out->debt) &&
              json_field_i64(json, "available", &out->available) &&
              json_field_i64(json, "period_start_unix_ms", &out->period_start_unix_ms) &&
              json_field_i64(json, "period_end_unix_ms", &out->period_end_unix_ms);
    return ok ? 0 : LLMLIMIT_ERR_PROTOCOL;
}

int llmlimit_usage(struct llmlimit_client *client, const char *key, int64_t at_unix_ms,
                   struct llmlimit_usage *out, struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (client == NULL || out == NULL || at_unix_ms < 0)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof(*out));
    char path[CLIENT_PATH_LENGTH_MAX + 32];
    int rc = path_with_key(path, CLIENT_PATH_LENGTH_MAX, "/v1/usage/", key);
    if (rc != 0)
        return rc;
    if (at_unix_ms > 0) {
        size_t length = strlen(path);
        snprintf(path + length, sizeof(path) - length, "?at_unix_ms=%" PRId64, at_unix_ms);
    }
    json_t *json;
    rc = admin_send(client, "GET", path, NULL, &json, status);
    if (rc == 0)
        rc = usage_from_json(json, out);
    json_decref(json);
    return rc;
}

/* ---- limit definitions ------------------------------------------------------ */

static bool definition_valid(const struct llmlimit_limit_definition *definition)
{
    return definition != NULL && client_key_valid(definition->key) && definition->kind != NULL &&
           definition->kind[0] != '\0' && definition->capacity > 0 &&
           definition->capacity <= LLMLIMIT_AMOUNT_MAX;
}

/* Only what is set goes on the wire: the server applies its defaults. */
static int definition_json_add(json_t *object, const struct llmlimit_limit_definition *definition)
{
    int rc = 0;
    rc |= json_object_set_new(object, "key", json_string(definition->key));
    rc |= json_object_set_new(object, "kind", json_string(definition->kind));
    rc |= json_object_set_new(object, "capacity", json_integer((json_int_t)definition->capacity));
    if (definition->window_seconds > 0)
        rc |= json_object_set_new(object, "window_seconds",
                                  json_integer((json_int_t)definition->window_seconds));
    if (definition->timeout_seconds > 0)
        rc |= json_object_set_new(object, "timeout_seconds",
                                  json_integer((json_int_t)definition->timeout_seconds));
    if (definition->period_anchor_day > 0)
        rc |= json_object_set_new(object, "period_anchor_day",
                                  json_integer((json_int_t)definition->period_anchor_day));
    const char *names[] = {"period", "unit", "description", "overage", "time_zone"};
    const char *values[] = {definition->period, definition->unit, definition->description,
                            definition->overage, definition->time_zone};
    for (size_t i = 0; i < 5; i++) {
        if (values[i] != NULL && values[i][0] != '\0')
            rc |= json_object_set_new(object, names[i], json_string(values[i]));
    }
    const char *json_names[] = {"alerts", "webhook"};
    const char *json_texts[] = {definition->alerts_json, definition->webhook_json};
    for (size_t i = 0; i < 2; i++) {
        if (json_texts[i] == NULL || json_texts[i][0] == '\0')
            continue;
        json_t *value = json_loads(json_texts[i], JSON_DECODE_ANY, NULL);
        rc |= value != NULL ? json_object_set_new(object, json_names[i], value) : -1;
    }
    return rc == 0 ? 0 : LLMLIMIT_ERR_INVALID_ARGUMENT; /* no memory, not UTF-8 or not JSON */
}

int llmlimit_limit_put(struct llmlimit_client *client,
                       const struct llmlimit_limit_definition *definition, bool *decreasing,
                       struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (decreasing != NULL)
        *decreasing = false;
    if (client == NULL || !definition_valid(definition))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    json_t *body = json_object();
    if (body == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    int rc = definition_json_add(body, definition);
    json_t *json = NULL;
    if (rc == 0)
        rc = admin_send(client, "PUT", "/v1/admin/limits", body, &json, status);
    json_decref(body);
    if (rc == 0) {
        const char *limit_status = json_field_string(json, "status");
        if (limit_status == NULL)
            rc = LLMLIMIT_ERR_PROTOCOL;
        else if (decreasing != NULL)
            *decreasing = strcmp(limit_status, "decreasing") == 0;
    }
    json_decref(json);
    return rc;
}

static const char *const state_string_names[] = {"key",  "kind",        "period",
                                                 "unit", "description", "overage"};
#define STATE_STRING_COUNT 6
_Static_assert(sizeof state_string_names / sizeof state_string_names[0] == STATE_STRING_COUNT,
               "one name per string");

/* A member as compact JSON text (a new string the caller frees), or NULL
 * when absent. */
static char *member_text(const json_t *definition, const char *name)
{
    const json_t *value = json_object_get(definition, name);
    return value != NULL ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

static size_t member_text_size(const json_t *definition, const char *name)
{
    char *text = member_text(definition, name);
    size_t bytes = (text != NULL ? strlen(text) : 0) + 1;
    free(text);
    return bytes;
}

/* Bytes the strings of one LimitState need, or 0 if it is malformed. */
static size_t state_strings_size(const json_t *state)
{
    const json_t *definition = json_object_get(state, "definition");
    if (!json_is_object(definition))
        return 0;
    size_t bytes = 0;
    for (size_t i = 0; i < STATE_STRING_COUNT; i++) {
        const char *text = json_field_string(definition, state_string_names[i]);
        if (text == NULL)
            return 0;
        bytes += strlen(text) + 1;
    }
    /* A budget's zone is there only when set. */
    const char *time_zone = json_field_string(definition, "time_zone");
    bytes += (time_zone != NULL ? strlen(time_zone) : 0) + 1;
    bytes += member_text_size(definition, "alerts") + member_text_size(definition, "webhook");
    const char *limit_status = json_field_string(state, "status");
    return limit_status != NULL ? bytes + strlen(limit_status) + 1 : 0;
}

static const char *strings_put(char **cursor, const char *text)
{
    assert(text != NULL); /* state_strings_size checked every string */
    size_t length = strlen(text) + 1;
    char *copy = *cursor;
    memcpy(copy, text, length);
    *cursor += length;
    return copy;
}

static int state_fill(const json_t *state, struct llmlimit_limit_state *out, char **cursor)
{
    const json_t *definition = json_object_get(state, "definition");
    const char *strings[STATE_STRING_COUNT];
    for (size_t i = 0; i < STATE_STRING_COUNT; i++)
        strings[i] = strings_put(cursor, json_field_string(definition, state_string_names[i]));
    out->definition.key = strings[0];
    out->definition.kind = strings[1];
    out->definition.period = strings[2];
    out->definition.unit = strings[3];
    out->definition.description = strings[4];
    out->definition.overage = strings[5];
    const char *time_zone = json_field_string(definition, "time_zone");
    out->definition.time_zone = strings_put(cursor, time_zone != NULL ? time_zone : "");
    const char **json_texts[] = {&out->definition.alerts_json, &out->definition.webhook_json};
    const char *json_names[] = {"alerts", "webhook"};
    for (size_t i = 0; i < 2; i++) {
        char *text = member_text(definition, json_names[i]);
        *json_texts[i] = strings_put(cursor, text != NULL ? text : "");
        free(text);
    }
    out->status = strings_put(cursor, json_field_string(state, "status"));
    /* Absent unless set; 0 is the 1st. */
    int64_t anchor_day = 0;
    if (json_object_get(definition, "period_anchor_day") != NULL &&
        (!json_field_i64(definition, "period_anchor_day", &anchor_day) || anchor_day < 0 ||
         anchor_day > 28))
        return LLMLIMIT_ERR_PROTOCOL;
    out->definition.period_anchor_day = (uint32_t)anchor_day;
    int64_t window_seconds, timeout_seconds;
    bool ok = json_field_u64(definition, "capacity", &out->definition.capacity) &&
              json_field_i64(definition, "window_seconds", &window_seconds) &&
              json_field_i64(definition, "timeout_seconds", &timeout_seconds) &&
              json_field_u64(state, "pending_decrease_to", &out->pending_decrease_to) &&
              window_seconds >= 0 && window_seconds <= UINT32_MAX && timeout_seconds >= 0 &&
              timeout_seconds <= UINT32_MAX;
    if (!ok)
        return LLMLIMIT_ERR_PROTOCOL;
    out->definition.window_seconds = (uint32_t)window_seconds;
    out->definition.timeout_seconds = (uint32_t)timeout_seconds;
    return 0;
}

int llmlimit_limit_get(struct llmlimit_client *client, const char *key,
                       struct llmlimit_limit_state **out, struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (client == NULL || out == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    json_t *json;
    int rc = limit_send(client, "GET", key, &json, status);
    const json_t *state = json != NULL ? json_object_get(json, "limit") : NULL;
    size_t bytes = state != NULL ? state_strings_size(state) : 0;
    if (rc == 0 && bytes == 0)
        rc = LLMLIMIT_ERR_PROTOCOL;
    if (rc == 0) {
        struct llmlimit_limit_state *copy = malloc(sizeof(*copy) + bytes);
        char *cursor = copy != NULL ? (char *)(copy + 1) : NULL;
        if (copy == NULL)
            rc = LLMLIMIT_ERR_NO_MEMORY;
        else if ((rc = state_fill(state, copy, &cursor)) != 0)
            free(copy);
        else
            *out = copy;
        /* The strings fill the block exactly as state_strings_size said. */
        assert(rc != 0 || cursor == (char *)(copy + 1) + bytes);
    }
    json_decref(json);
    return rc;
}

void llmlimit_limit_state_free(struct llmlimit_limit_state *state)
{
    free(state);
}

static int list_copy(const json_t *limits, struct llmlimit_limit_list **out)
{
    size_t count = json_array_size(limits);
    size_t bytes = sizeof(struct llmlimit_limit_list) + count * sizeof(struct llmlimit_limit_state);
    for (size_t i = 0; i < count; i++) {
        size_t strings = state_strings_size(json_array_get(limits, i));
        if (strings == 0)
            return LLMLIMIT_ERR_PROTOCOL;
        bytes += strings;
    }
    struct llmlimit_limit_list *list = malloc(bytes);
    if (list == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    list->count = count;
    list->limits = (struct llmlimit_limit_state *)(list + 1);
    char *cursor = (char *)(list->limits + count);
    for (size_t i = 0; i < count; i++) {
        int rc = state_fill(json_array_get(limits, i), &list->limits[i], &cursor);
        if (rc != 0) {
            free(list);
            return rc;
        }
    }
    assert(cursor == (char *)list + bytes);
    *out = list;
    return 0;
}

int llmlimit_limit_list(struct llmlimit_client *client, struct llmlimit_limit_list **out,
                        struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (client == NULL || out == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    json_t *json;
    int rc = admin_send(client, "GET", "/v1/admin/limits", NULL, &json, status);
    const json_t *limits = json != NULL ? json_object_get(json, "limits") : NULL;
    if (rc == 0)
        rc = json_is_array(limits) ? list_copy(limits, out) : LLMLIMIT_ERR_PROTOCOL;
    json_decref(json);
    return rc;
}

void llmlimit_limit_list_free(struct llmlimit_limit_list *list)
{
    free(list);
}

int llmlimit_limit_delete(struct llmlimit_client *client, const char *key,
                          struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (client == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    json_t *json;
    int rc = limit_send(client, "DELETE", key, &json, status);
    json_decref(json);
    return rc;
}

/* ---- raw requests ---------------------------------------------------------- */

static bool method_valid(const char *method)
{
    return method != NULL && (strcmp(method, "GET") == 0 || strcmp(method, "POST") == 0 ||
                              strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0 ||
                              strcmp(method, "PATCH") == 0);
}

static bool path_valid(const char *path)
{
    if (path == NULL || path[0] != '/' || strlen(path) > CLIENT_PATH_LENGTH_MAX)
        return false;
    for (const char *p = path; *p != '\0'; p++) {
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return false;
    }
    return true;
}

int llmlimit_request(struct llmlimit_client *client, const char *method, const char *path,
                     const char *body, int64_t timeout_ms, char **response_body,
                     struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (response_body != NULL)
        *response_body = NULL;
    if (client == NULL || !method_valid(method) || !path_valid(path))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (timeout_ms <= 0)
        timeout_ms = client->options.attempt_timeout_ms;
    /* A POST or PUT always carries a body, if only an empty one. */
    if (body == NULL && (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0))
        body = "";
    struct http_answer answer = {0};
    int rc = transport_send(client, method, path, body, body != NULL ? strlen(body) : 0, timeout_ms,
                            &answer, status);
    if (rc != 0)
        return rc;
    json_t *json = answer_json(&answer);
    client_status_from_body(status, json);
    json_decref(json);
    rc = client_status_error(answer.http_status);
    if (response_body != NULL) {
        *response_body = answer.body;
        answer.body = NULL;
    }
    http_answer_clear(&answer);
    return rc;
}
