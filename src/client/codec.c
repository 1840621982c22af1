/* Small helpers for the wire format of libllmlimit: identifier syntax (the
 * server's own code, src/core/ids.c, so bad input fails before anything is
 * sent), URL paths with percent-encoded keys, and typed access to JSON
 * answers. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "internal.h"

bool client_key_valid(const char *key)
{
    return key != NULL && limit_key_valid(key, strnlen(key, LLMLIMIT_KEY_LENGTH_MAX + 1));
}

bool client_lease_id_valid(const char *lease_id)
{
    return lease_id != NULL &&
           lease_id_valid(lease_id, strnlen(lease_id, LLMLIMIT_LEASE_ID_LENGTH_MAX + 1));
}

int path_with_key(char *out, size_t out_size, const char *prefix, const char *key)
{
    if (!client_key_valid(key))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    static const char hex[] = "0123456789ABCDEF";
    assert(prefix != NULL);
    assert(prefix[0] == '/');
    size_t length = strlen(prefix);
    assert(length + 3 * strlen(key) + 1 <= out_size);
    memcpy(out, prefix, length);
    for (const char *p = key; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
        if (unreserved) {
            out[length++] = (char)c;
        } else {
            out[length++] = '%';
            out[length++] = hex[c >> 4];
            out[length++] = hex[c & 15];
        }
    }
    assert(length < out_size);
    out[length] = '\0';
    return 0;
}

json_t *answer_json(const struct http_answer *answer)
{
    if (answer->body == NULL || answer->body_length == 0)
        return NULL;
    json_t *json = json_loadb(answer->body, answer->body_length, JSON_DECODE_ANY, NULL);
    if (json != NULL && !json_is_object(json)) {
        json_decref(json);
        return NULL;
    }
    return json;
}

int answer_take(struct http_answer *answer, struct llmlimit_status *status, json_t **json_out)
{
    *json_out = answer_json(answer);
    client_status_from_body(status, *json_out);
    int rc = client_status_error(answer->http_status);
    if (rc == 0 && *json_out == NULL)
        rc = LLMLIMIT_ERR_PROTOCOL;
    http_answer_clear(answer);
    assert(answer->body == NULL); /* consumed: the caller cannot read it twice */
    return rc;
}

void client_status_from_body(struct llmlimit_status *status, const json_t *body)
{
    if (status == NULL)
        return;
    const char *error = body != NULL ? json_field_string(body, "error") : NULL;
    copy_string(status->error, sizeof(status->error), error != NULL ? error : "");
}

bool json_field_i64(const json_t *object, const char *name, int64_t *out)
{
    const json_t *value = json_object_get(object, name);
    if (value == NULL) {
        *out = 0;
        return true;
    }
    if (!json_is_integer(value))
        return false;
    *out = (int64_t)json_integer_value(value);
    return true;
}

bool json_field_u64(const json_t *object, const char *name, uint64_t *out)
{
    int64_t value;
    if (!json_field_i64(object, name, &value) || value < 0)
        return false;
    *out = (uint64_t)value;
    return true;
}

const char *json_field_string(const json_t *object, const char *name)
{
    const json_t *value = json_object_get(object, name);
    if (value == NULL)
        return "";
    return json_is_string(value) ? json_string_value(value) : NULL;
}

char *json_dump_compact(const json_t *value, size_t *length)
{
    char *text = json_dumps(value, JSON_COMPACT);
    if (text != NULL && length != NULL)
        *length = strlen(text);
    return text;
}

/* A text the server writes, the prefix of a key when it names one. */
struct wire_text {
    const char *text;
    int value;
};

static const struct wire_text denials[] = {
    {"unknown_limit_key: ", LLMLIMIT_DENIAL_UNKNOWN_LIMIT_KEY},
    {"limit_decreasing:", LLMLIMIT_DENIAL_LIMIT_DECREASING},
    {"exceeds_capacity:", LLMLIMIT_DENIAL_EXCEEDS_CAPACITY},
};

static const struct wire_text warnings[] = {
    {"commit_after_expiry:", LLMLIMIT_WARNING_COMMIT_AFTER_EXPIRY},
    {"overage_debt:", LLMLIMIT_WARNING_OVERAGE_DEBT},
    {"overage_denied:", LLMLIMIT_WARNING_OVERAGE_DENIED},
};

char *batch_body(const uint32_t *pending, size_t pending_count, batch_item_json_fn item_json,
                 const void *context, size_t *length)
{
    json_t *items = json_array();
    json_t *object = json_object();
    char *body = NULL;
    if (items == NULL || object == NULL || json_object_set(object, "requests", items) != 0)
        goto done;
    for (size_t i = 0; i < pending_count; i++) {
        json_t *item = item_json(pending[i], context);
        if (item == NULL || json_array_append_new(items, item) != 0)
            goto done;
    }
    body = json_dump_compact(object, length);
done:
    json_decref(items);
    json_decref(object);
    return body;
}

int batch_read(const json_t *json, uint32_t *pending, size_t *pending_count,
               batch_item_read_fn item_read, void *context)
{
    const json_t *items = json != NULL ? json_object_get(json, "results") : NULL;
    if (!json_is_array(items) || json_array_size(items) != *pending_count)
        return LLMLIMIT_ERR_PROTOCOL;
    size_t still = 0;
    for (size_t i = 0; i < *pending_count; i++) {
        uint32_t index = pending[i];
        const json_t *item = json_array_get(items, i);
        int64_t item_status;
        if (!json_is_object(item) || !json_field_i64(item, "status", &item_status) ||
            item_status < 100 || item_status > 599)
            return LLMLIMIT_ERR_PROTOCOL;
        int rc = item_read(item, (int)item_status, index, context);
        if (rc != 0)
            return rc;
        if (item_status >= 500)
            pending[still++] = index; /* unknown outcome: the same item again */
        assert(still <= i + 1);
    }
    *pending_count = still;
    return 0;
}

static int wire_lookup(const struct wire_text *table, size_t count, const char *text, int other)
{
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(table[i].text);
        if (strncmp(text, table[i].text, n) == 0)
            return table[i].value;
    }
    return other;
}

int codec_denial(const char *error)
{
    assert(error != NULL);
    if (error[0] == '\0')
        return LLMLIMIT_DENIAL_NONE;
    return wire_lookup(denials, sizeof denials / sizeof denials[0], error, LLMLIMIT_DENIAL_OTHER);
}

int codec_error_copy(const json_t *json, char *error, size_t error_size)
{
    const char *text = json_field_string(json, "error");
    if (text == NULL)
        return LLMLIMIT_ERR_PROTOCOL;
    copy_string(error, error_size, text);
    return 0;
}

uint32_t codec_warning_flag(const char *warning)
{
    assert(warning != NULL);
    return (uint32_t)wire_lookup(warnings, sizeof warnings / sizeof warnings[0], warning, 0);
}
