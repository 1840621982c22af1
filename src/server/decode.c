/* Request and registry decoding on top of jansson. The data path decodes in
 * one pass over each object's fields and copies nothing: keys and lease IDs
 * stay in the parsed document. */
#include "decode.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AMOUNT_RANGE "1..9223372036854775807"
#define ACTUAL_RANGE "0..9223372036854775807"
#define KEY_SYNTAX "must be 1-256 bytes of printable ASCII without whitespace"
#define LEASE_ID_SYNTAX "must be 1-128 bytes of [A-Za-z0-9._:-]"
#define SECONDS_RANGE "0..31622400"

/* "<path>.<field>: <reason>", or "<field>: <reason>" at the top level. */
static int fail(char *error, size_t error_size, const char *path, const char *field,
                const char *reason)
{
    snprintf(error, error_size, "%s%s%s: %s", path, path[0] != '\0' ? "." : "", field, reason);
    return -1;
}

/* Same, with a field name built from a format (slow path only). */
__attribute__((format(printf, 5, 6))) static int failf(char *error, size_t error_size,
                                                       const char *path, const char *reason,
                                                       const char *field_format, ...)
{
    char field[96];
    va_list ap;
    va_start(ap, field_format);
    vsnprintf(field, sizeof field, field_format, ap);
    va_end(ap);
    return fail(error, error_size, path, field, reason);
}

static int fail_not_object(char *error, size_t error_size, const char *path)
{
    snprintf(error, error_size, "%s: must be a JSON object", path[0] != '\0' ? path : "body");
    return -1;
}

/* Nesting depth, counted before jansson parses (its own bound is far larger
 * and it recurses). Strings are skipped so brackets inside them do not count. */
static int depth_check(const char *body, size_t length)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < length; i++) {
        char c = body[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > JSON_DEPTH_MAX)
                return -1;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return 0;
}

int decode_parse(const char *body, size_t length, json_t **out, char *error, size_t error_size)
{
    *out = NULL;
    if (depth_check(body, length) != 0) {
        snprintf(error, error_size, "invalid JSON: nested deeper than %d levels", JSON_DEPTH_MAX);
        return -1;
    }
    json_error_t e;
    /* DECODE_ANY: a scalar body parses, then fails as "must be a JSON object". */
    json_t *root = json_loadb(body, length, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (root == NULL) {
        /* jansson reads integers as int64: name the real bound. */
        bool too_big = strstr(e.text, "too big") != NULL;
        snprintf(error, error_size, "invalid JSON: %s%s (line %d, column %d)", e.text,
                 too_big ? " (amounts are integers " ACTUAL_RANGE ")" : "", e.line, e.column);
        return -1;
    }
    *out = root;
    return 0;
}

/* A string without NUL bytes; sets *s and *length. */
static bool text_value(const json_t *value, const char **s, size_t *length)
{
    if (!json_is_string(value))
        return false;
    *s = json_string_value(value);
    *length = json_string_length(value);
    return strlen(*s) == *length;
}

static int decode_lease_id(const json_t *value, const char *path, const char **lease_id,
                           uint32_t *length, char *error, size_t error_size)
{
    if (value == NULL)
        return fail(error, error_size, path, "lease_id", "required");
    if (!json_is_string(value))
        return fail(error, error_size, path, "lease_id", "must be a string");
    /* The length includes any NUL byte, which lease_id_valid rejects. */
    const char *s = json_string_value(value);
    size_t n = json_string_length(value);
    if (!lease_id_valid(s, n))
        return fail(error, error_size, path, "lease_id", LEASE_ID_SYNTAX);
    *lease_id = s;
    *length = (uint32_t)n;
    return 0;
}

/* An integer in min..AMOUNT_MAX (jansson integers are int64, so the top is
 * already INT64_MAX). */
static bool amount_value(const json_t *value, uint64_t min, uint64_t *out)
{
    if (!json_is_integer(value))
        return false;
    json_int_t v = json_integer_value(value);
    if (v < 0 || (uint64_t)v < min)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* One {"key", <amount_name>} item of requirements[] or actuals[]. */
static int decode_item(json_t *item, const char *path, const char *list, size_t index,
                       const char *amount_name, uint64_t amount_min, const char **key,
                       uint32_t *key_length, uint64_t *amount, char *error, size_t error_size)
{
    if (!json_is_object(item))
        return failf(error, error_size, path, "must be an object", "%s[%zu]", list, index);
    const json_t *key_value = NULL, *amount_value_json = NULL;
    const char *name;
    json_t *value;
    json_object_foreach(item, name, value)
    {
        if (strcmp(name, "key") == 0)
            key_value = value;
        else if (strcmp(name, amount_name) == 0)
            amount_value_json = value;
        else
            return failf(error, error_size, path, "unknown field", "%s[%zu].%.40s", list, index,
                         name);
    }
    if (key_value == NULL)
        return failf(error, error_size, path, "required", "%s[%zu].key", list, index);
    if (!json_is_string(key_value))
        return failf(error, error_size, path, "must be a string", "%s[%zu].key", list, index);
    const char *s = json_string_value(key_value);
    size_t n = json_string_length(key_value); /* a NUL byte fails limit_key_valid */
    if (!limit_key_valid(s, n))
        return failf(error, error_size, path, KEY_SYNTAX, "%s[%zu].key", list, index);
    if (amount_value_json == NULL)
        return failf(error, error_size, path, "required", "%s[%zu].%s", list, index,
                     amount_name);
    if (!amount_value(amount_value_json, amount_min, amount))
        return failf(error, error_size, path,
                     amount_min == 0 ? "must be an integer " ACTUAL_RANGE
                                     : "must be an integer " AMOUNT_RANGE,
                     "%s[%zu].%s", list, index, amount_name);
    *key = s;
    *key_length = (uint32_t)n;
    return 0;
}

/* Keys are few (<= 64) and usually 1-3: a quadratic scan beats hashing. */
static bool key_seen(const char *const *keys, const uint32_t *lengths, size_t count,
                     const char *key, uint32_t length)
{
    for (size_t j = 0; j < count; j++) {
        if (lengths[j] == length && memcmp(keys[j], key, length) == 0)
            return true;
    }
    return false;
}

static int decode_requirements(json_t *list, const char *path, struct requirement *requirements,
                               uint32_t *count, char *error, size_t error_size)
{
    if (list == NULL)
        return fail(error, error_size, path, "requirements", "required");
    if (!json_is_array(list))
        return fail(error, error_size, path, "requirements", "must be an array");
    size_t n = json_array_size(list);
    if (n == 0 || n > REQUIREMENTS_PER_RESERVE_MAX)
        return fail(error, error_size, path, "requirements", "1..64 items");
    const char *keys[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t lengths[REQUIREMENTS_PER_RESERVE_MAX];
    for (size_t i = 0; i < n; i++) {
        struct requirement *r = &requirements[i];
        if (decode_item(json_array_get(list, i), path, "requirements", i, "amount", 1, &r->key,
                        &r->key_length, &r->amount, error, error_size) != 0)
            return -1;
        if (key_seen(keys, lengths, i, r->key, r->key_length))
            return failf(error, error_size, path, "duplicate key", "requirements[%zu].key", i);
        keys[i] = r->key;
        lengths[i] = r->key_length;
    }
    *count = (uint32_t)n;
    return 0;
}

int decode_reserve(json_t *object, const char *path, struct reserve_request *out,
                   struct requirement *requirements, char *error, size_t error_size)
{
    if (!json_is_object(object))
        return fail_not_object(error, error_size, path);
    json_t *lease = NULL, *list = NULL, *caller = NULL;
    const char *name;
    json_t *value;
    json_object_foreach(object, name, value)
    {
        if (strcmp(name, "lease_id") == 0)
            lease = value;
        else if (strcmp(name, "requirements") == 0)
            list = value;
        else if (strcmp(name, "caller") == 0)
            caller = value;
        else
            return fail(error, error_size, path, name, "unknown field");
    }
    memset(out, 0, sizeof *out);
    if (decode_lease_id(lease, path, &out->lease_id, &out->lease_id_length, error,
                        error_size) != 0)
        return -1;
    if (decode_requirements(list, path, requirements, &out->requirement_count, error,
                            error_size) != 0)
        return -1;
    out->requirements = requirements;
    if (caller != NULL && !json_is_null(caller)) {
        const char *s;
        size_t n;
        if (!text_value(caller, &s, &n) || n > CALLER_LENGTH_MAX)
            return fail(error, error_size, path, "caller", "must be a string of at most 256 bytes");
        out->caller = s;
        out->caller_length = (uint32_t)n;
    }
    return 0;
}

static int decode_actuals(json_t *list, const char *path, struct actual *actuals,
                          uint32_t *count, char *error, size_t error_size)
{
    *count = 0;
    if (list == NULL || json_is_null(list))
        return 0; /* every key settles at its reserved amount */
    if (!json_is_array(list))
        return fail(error, error_size, path, "actuals", "must be an array");
    size_t n = json_array_size(list);
    if (n > REQUIREMENTS_PER_RESERVE_MAX)
        return fail(error, error_size, path, "actuals", "0..64 items");
    const char *keys[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t lengths[REQUIREMENTS_PER_RESERVE_MAX];
    for (size_t i = 0; i < n; i++) {
        struct actual *a = &actuals[i];
        if (decode_item(json_array_get(list, i), path, "actuals", i, "actual_amount", 0, &a->key,
                        &a->key_length, &a->actual_amount, error, error_size) != 0)
            return -1;
        if (key_seen(keys, lengths, i, a->key, a->key_length))
            return failf(error, error_size, path, "duplicate key", "actuals[%zu].key", i);
        keys[i] = a->key;
        lengths[i] = a->key_length;
    }
    *count = (uint32_t)n;
    return 0;
}

int decode_complete(json_t *object, const char *path, struct complete_request *out,
                    struct actual *actuals, char *error, size_t error_size)
{
    if (!json_is_object(object))
        return fail_not_object(error, error_size, path);
    json_t *lease = NULL, *list = NULL;
    const char *name;
    json_t *value;
    json_object_foreach(object, name, value)
    {
        if (strcmp(name, "lease_id") == 0)
            lease = value;
        else if (strcmp(name, "actuals") == 0)
            list = value;
        else
            return fail(error, error_size, path, name, "unknown field");
    }
    memset(out, 0, sizeof *out);
    if (decode_lease_id(lease, path, &out->lease_id, &out->lease_id_length, error,
                        error_size) != 0)
        return -1;
    if (decode_actuals(list, path, actuals, &out->actual_count, error, error_size) != 0)
        return -1;
    out->actuals = actuals;
    return 0;
}

int decode_release(json_t *object, const char *path, struct release_request *out, char *error,
                   size_t error_size)
{
    if (!json_is_object(object))
        return fail_not_object(error, error_size, path);
    json_t *lease = NULL;
    const char *name;
    json_t *value;
    json_object_foreach(object, name, value)
    {
        if (strcmp(name, "lease_id") == 0)
            lease = value;
        else
            return fail(error, error_size, path, name, "unknown field");
    }
    memset(out, 0, sizeof *out);
    return decode_lease_id(lease, path, &out->lease_id, &out->lease_id_length, error,
                           error_size);
}

int decode_batch(json_t *body, json_t **requests, char *error, size_t error_size)
{
    if (!json_is_object(body))
        return fail_not_object(error, error_size, "");
    json_t *list = NULL;
    const char *name;
    json_t *value;
    json_object_foreach(body, name, value)
    {
        if (strcmp(name, "requests") == 0)
            list = value;
        else
            return fail(error, error_size, "", name, "unknown field");
    }
    if (list == NULL)
        return fail(error, error_size, "", "requests", "required");
    if (!json_is_array(list))
        return fail(error, error_size, "", "requests", "must be an array");
    size_t n = json_array_size(list);
    if (n == 0 || n > BATCH_ITEMS_MAX)
        return fail(error, error_size, "", "requests", "1..8189 items");
    *requests = list;
    return 0;
}

int decode_i64(const char *text, int64_t *out)
{
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (digits[0] < '0' || digits[0] > '9')
        return -1;
    errno = 0;
    char *end;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = value;
    return 0;
}
