/* Request decoding on top of jdoc. The data path decodes in one pass over
 * each object's fields and copies nothing: keys and lease IDs stay in the
 * parsed document. */
#include "decode.h"
#include "decode_internal.h"
#include "wire_text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AMOUNT_RANGE WIRE_AMOUNT_RANGE
#define ACTUAL_RANGE WIRE_ACTUAL_RANGE
#define KEY_SYNTAX WIRE_KEY_SYNTAX
#define LEASE_ID_SYNTAX WIRE_LEASE_ID_SYNTAX

static int fail_not_object(char *error, size_t error_size, const char *path)
{
    snprintf(error, error_size, "%s: must be a JSON object", path[0] != '\0' ? path : "body");
    return -1;
}

int decode_parse(char *body, size_t length, struct arena *arena, const struct jdoc_value **out,
                 char *error, size_t error_size)
{
    struct jdoc_value *root;
    int parsed = jdoc_parse(body, length, arena, &root, error, error_size);
    assert(parsed != 0 || root != NULL);
    *out = root;
    return parsed;
}

/* A member named by a string literal: lengths first, then a fixed-size
 * compare the compiler inlines. */
#define MEMBER_IS(member, literal)                                                                 \
    ((member)->key_length == sizeof(literal) - 1 &&                                                \
     memcmp((member)->key, literal, sizeof(literal) - 1) == 0)

/* Identifier syntax, without a second scan when the parser already saw
 * every byte (JDOC_*_CHARS). */
static bool key_syntax_ok(const struct jdoc_value *value)
{
    if (value->flags & JDOC_KEY_CHARS)
        return value->count >= 1 && value->count <= LIMIT_KEY_LENGTH_MAX;
    return limit_key_valid(value->as.string, value->count);
}

static bool lease_id_syntax_ok(const struct jdoc_value *value)
{
    if (value->flags & JDOC_LEASE_CHARS)
        return value->count >= 1 && value->count <= LEASE_ID_LENGTH_MAX;
    return lease_id_valid(value->as.string, value->count);
}

/* A string (the parser refuses NUL bytes in strings); sets *s and *length. */
static bool text_value(const struct jdoc_value *value, const char **s, size_t *length)
{
    if (!jdoc_is(value, JDOC_STRING))
        return false;
    *s = value->as.string;
    *length = value->count;
    return true;
}

static int decode_lease_id(const struct jdoc_value *value, const char *path, const char **lease_id,
                           uint32_t *length, char *error, size_t error_size)
{
    if (value == NULL)
        return decode_fail(error, error_size, path, "lease_id", "required");
    const char *s;
    size_t n;
    if (!text_value(value, &s, &n))
        return decode_fail(error, error_size, path, "lease_id", "must be a string");
    if (!lease_id_syntax_ok(value))
        return decode_fail(error, error_size, path, "lease_id", LEASE_ID_SYNTAX);
    assert(n >= 1);
    assert(n <= LEASE_ID_LENGTH_MAX);
    *lease_id = s;
    *length = (uint32_t)n;
    return 0;
}

/* An integer in min..AMOUNT_MAX (parsed integers are int64, so the top is
 * already INT64_MAX). */
static bool amount_value(const struct jdoc_value *value, uint64_t min, uint64_t *out)
{
    if (!jdoc_is(value, JDOC_INTEGER))
        return false;
    int64_t v = value->as.integer;
    if (v < 0 || (uint64_t)v < min)
        return false;
    *out = (uint64_t)v;
    assert(*out <= AMOUNT_MAX);
    return true;
}

/* One {"key", <amount_name>} item of requirements[] or actuals[]. */
static int decode_item(const struct jdoc_value *item, const char *path, const char *list,
                       size_t index, const char *amount_name, uint64_t amount_min, const char **key,
                       uint32_t *key_length, uint64_t *amount, char *error, size_t error_size)
{
    if (!jdoc_is(item, JDOC_OBJECT))
        return decode_failf(error, error_size, path, "must be an object", "%s[%zu]", list, index);
    const struct jdoc_value *key_value = NULL, *amount_value_json = NULL;
    bool actual = amount_min == 0; /* "actual_amount", else "amount" */
    for (uint32_t i = 0; i < item->count; i++) {
        const struct jdoc_member *member = &item->as.members[i];
        const char *name = member->key;
        const struct jdoc_value *value = &member->value;
        if (MEMBER_IS(member, "key"))
            key_value = value;
        else if (actual ? MEMBER_IS(member, "actual_amount") : MEMBER_IS(member, "amount"))
            amount_value_json = value;
        else
            return decode_failf(error, error_size, path, "unknown field", "%s[%zu].%.40s", list,
                                index, name);
    }
    if (key_value == NULL)
        return decode_failf(error, error_size, path, "required", "%s[%zu].key", list, index);
    const char *s;
    size_t n;
    if (!text_value(key_value, &s, &n))
        return decode_failf(error, error_size, path, "must be a string", "%s[%zu].key", list,
                            index);
    if (!key_syntax_ok(key_value))
        return decode_failf(error, error_size, path, KEY_SYNTAX, "%s[%zu].key", list, index);
    if (amount_value_json == NULL)
        return decode_failf(error, error_size, path, "required", "%s[%zu].%s", list, index,
                            amount_name);
    if (!amount_value(amount_value_json, amount_min, amount))
        return decode_failf(error, error_size, path,
                            amount_min == 0 ? "must be an integer " ACTUAL_RANGE
                                            : "must be an integer " AMOUNT_RANGE,
                            "%s[%zu].%s", list, index, amount_name);
    assert(n >= 1);
    assert(n <= LIMIT_KEY_LENGTH_MAX);
    assert(*amount >= amount_min);
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

/* The items of a requirements or actuals list (at most
 * REQUIREMENTS_PER_RESERVE_MAX, checked by the caller), in parallel arrays. */
struct keyed_list {
    const char *keys[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t lengths[REQUIREMENTS_PER_RESERVE_MAX];
    uint64_t amounts[REQUIREMENTS_PER_RESERVE_MAX];
};

/* Each item is {key, <amount_name>} with amount_name >= amount_min and keys
 * unique across the list. 0, or -1 with the error naming the item. */
static int decode_keyed_list(const struct jdoc_value *list, const char *path, const char *field,
                             const char *amount_name, uint64_t amount_min, struct keyed_list *out,
                             char *error, size_t error_size)
{
    assert(list->count <= REQUIREMENTS_PER_RESERVE_MAX);
    for (size_t i = 0; i < list->count; i++) {
        if (decode_item(&list->as.items[i], path, field, i, amount_name, amount_min, &out->keys[i],
                        &out->lengths[i], &out->amounts[i], error, error_size) != 0)
            return -1;
        if (key_seen(out->keys, out->lengths, i, out->keys[i], out->lengths[i]))
            return decode_failf(error, error_size, path, "duplicate key", "%s[%zu].key", field, i);
    }
    return 0;
}

static int decode_requirements(const struct jdoc_value *list, const char *path,
                               struct requirement *requirements, uint32_t *count, char *error,
                               size_t error_size)
{
    if (list == NULL)
        return decode_fail(error, error_size, path, "requirements", "required");
    if (!jdoc_is(list, JDOC_ARRAY))
        return decode_fail(error, error_size, path, "requirements", "must be an array");
    size_t n = list->count;
    if (n == 0 || n > REQUIREMENTS_PER_RESERVE_MAX)
        return decode_fail(error, error_size, path, "requirements", "1..64 items");
    struct keyed_list items;
    if (decode_keyed_list(list, path, "requirements", "amount", 1, &items, error, error_size) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        requirements[i] = (struct requirement){items.keys[i], items.lengths[i], items.amounts[i]};
    assert(n >= 1);
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    *count = (uint32_t)n;
    return 0;
}

/* An integer member in min..max, or the default when absent. */
static int bounded_integer(const struct jdoc_value *value, const char *path, const char *field,
                           int64_t min, int64_t max, const char *reason, int64_t *out, char *error,
                           size_t error_size)
{
    if (value == NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < min || value->as.integer > max)
        return decode_fail(error, error_size, path, field, reason);
    *out = value->as.integer;
    return 0;
}

/* wait_ms and priority (docs/api.md "Waiting for capacity"): allowed when
 * wait is not NULL, refused in a batch item. */
static int decode_wait(const struct jdoc_value *wait_ms, const struct jdoc_value *priority,
                       const char *path, struct reserve_wait *wait, char *error, size_t error_size)
{
    if (wait == NULL && wait_ms != NULL)
        return decode_fail(error, error_size, path, "wait_ms", "a batch item does not wait");
    if (wait == NULL && priority != NULL)
        return decode_fail(error, error_size, path, "priority", "a batch item does not wait");
    if (wait == NULL)
        return 0;
    int64_t ms = 0, rank = WAIT_PRIORITY_DEFAULT;
    if (bounded_integer(wait_ms, path, "wait_ms", 0, WAIT_MS_MAX,
                        "must be an integer 0..60000 (milliseconds)", &ms, error,
                        error_size) != 0 ||
        bounded_integer(priority, path, "priority", 0, WAIT_PRIORITIES - 1,
                        "must be an integer 0..9 (0 first)", &rank, error, error_size) != 0)
        return -1;
    wait->wait_ms = ms;
    wait->priority = (uint8_t)rank;
    return 0;
}

int decode_reserve(const struct jdoc_value *object, const char *path, struct reserve_request *out,
                   struct requirement *requirements, char *error, size_t error_size)
{
    return decode_reserve_wait(object, path, out, requirements, NULL, error, error_size);
}

int decode_reserve_wait(const struct jdoc_value *object, const char *path,
                        struct reserve_request *out, struct requirement *requirements,
                        struct reserve_wait *wait, char *error, size_t error_size)
{
    if (!jdoc_is(object, JDOC_OBJECT))
        return fail_not_object(error, error_size, path);
    const struct jdoc_value *lease = NULL, *list = NULL, *caller = NULL;
    const struct jdoc_value *wait_ms = NULL, *priority = NULL;
    for (uint32_t i = 0; i < object->count; i++) {
        const struct jdoc_member *member = &object->as.members[i];
        const char *name = member->key;
        const struct jdoc_value *value = &member->value;
        if (MEMBER_IS(member, "lease_id"))
            lease = value;
        else if (MEMBER_IS(member, "requirements"))
            list = value;
        else if (MEMBER_IS(member, "caller"))
            caller = value;
        else if (MEMBER_IS(member, "wait_ms"))
            wait_ms = value;
        else if (MEMBER_IS(member, "priority"))
            priority = value;
        else
            return decode_fail(error, error_size, path, name, "unknown field");
    }
    memset(out, 0, sizeof *out);
    if (decode_wait(wait_ms, priority, path, wait, error, error_size) != 0)
        return -1;
    if (decode_lease_id(lease, path, &out->lease_id, &out->lease_id_length, error, error_size) != 0)
        return -1;
    if (decode_requirements(list, path, requirements, &out->requirement_count, error, error_size) !=
        0)
        return -1;
    out->requirements = requirements;
    if (caller != NULL && !jdoc_is(caller, JDOC_NULL)) {
        const char *s;
        size_t n;
        if (!text_value(caller, &s, &n) || n > CALLER_LENGTH_MAX)
            return decode_fail(error, error_size, path, "caller",
                               "must be a string of at most 256 bytes");
        out->caller = s;
        out->caller_length = (uint32_t)n;
    }
    assert(out->caller_length <= CALLER_LENGTH_MAX);
    return 0;
}

static int decode_actuals(const struct jdoc_value *list, const char *path, struct actual *actuals,
                          uint32_t *count, char *error, size_t error_size)
{
    *count = 0;
    if (list == NULL || jdoc_is(list, JDOC_NULL))
        return 0; /* every key settles at its reserved amount */
    if (!jdoc_is(list, JDOC_ARRAY))
        return decode_fail(error, error_size, path, "actuals", "must be an array");
    size_t n = list->count;
    if (n > REQUIREMENTS_PER_RESERVE_MAX)
        return decode_fail(error, error_size, path, "actuals", "0..64 items");
    struct keyed_list items;
    if (decode_keyed_list(list, path, "actuals", "actual_amount", 0, &items, error, error_size) !=
        0)
        return -1;
    for (size_t i = 0; i < n; i++)
        actuals[i] = (struct actual){items.keys[i], items.lengths[i], items.amounts[i]};
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    *count = (uint32_t)n;
    return 0;
}

int decode_complete(const struct jdoc_value *object, const char *path, struct complete_request *out,
                    struct actual *actuals, char *error, size_t error_size)
{
    if (!jdoc_is(object, JDOC_OBJECT))
        return fail_not_object(error, error_size, path);
    const struct jdoc_value *lease = NULL, *list = NULL;
    for (uint32_t i = 0; i < object->count; i++) {
        const struct jdoc_member *member = &object->as.members[i];
        const char *name = member->key;
        const struct jdoc_value *value = &member->value;
        if (MEMBER_IS(member, "lease_id"))
            lease = value;
        else if (MEMBER_IS(member, "actuals"))
            list = value;
        else
            return decode_fail(error, error_size, path, name, "unknown field");
    }
    memset(out, 0, sizeof *out);
    if (decode_lease_id(lease, path, &out->lease_id, &out->lease_id_length, error, error_size) != 0)
        return -1;
    if (decode_actuals(list, path, actuals, &out->actual_count, error, error_size) != 0)
        return -1;
    out->actuals = actuals;
    return 0;
}

int decode_release(const struct jdoc_value *object, const char *path, struct release_request *out,
                   char *error, size_t error_size)
{
    if (!jdoc_is(object, JDOC_OBJECT))
        return fail_not_object(error, error_size, path);
    const struct jdoc_value *lease = NULL;
    for (uint32_t i = 0; i < object->count; i++) {
        const struct jdoc_member *member = &object->as.members[i];
        const char *name = member->key;
        const struct jdoc_value *value = &member->value;
        if (MEMBER_IS(member, "lease_id"))
            lease = value;
        else
            return decode_fail(error, error_size, path, name, "unknown field");
    }
    memset(out, 0, sizeof *out);
    return decode_lease_id(lease, path, &out->lease_id, &out->lease_id_length, error, error_size);
}

int decode_batch(const struct jdoc_value *body, const struct jdoc_value **requests, char *error,
                 size_t error_size)
{
    if (!jdoc_is(body, JDOC_OBJECT))
        return fail_not_object(error, error_size, "");
    const struct jdoc_value *list = NULL;
    for (uint32_t i = 0; i < body->count; i++) {
        const struct jdoc_member *member = &body->as.members[i];
        const char *name = member->key;
        const struct jdoc_value *value = &member->value;
        if (MEMBER_IS(member, "requests"))
            list = value;
        else
            return decode_fail(error, error_size, "", name, "unknown field");
    }
    if (list == NULL)
        return decode_fail(error, error_size, "", "requests", "required");
    if (!jdoc_is(list, JDOC_ARRAY))
        return decode_fail(error, error_size, "", "requests", "must be an array");
    size_t n = list->count;
    if (n == 0 || n > BATCH_ITEMS_MAX)
        return decode_fail(error, error_size, "", "requests", "1..8189 items");
    assert(list->as.items != NULL);
    *requests = list;
    return 0;
}

int decode_i64(const char *text, int64_t *out)
{
    assert(text != NULL);
    assert(out != NULL);
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
