/* etcd v3's JSON API as bytes (ctl_codec.h): bodies are built with the
 * reply buffer, answers parsed with the strict parser (util/jdoc.h). etcd
 * writes int64 fields as JSON strings and leaves out fields at their zero
 * value (proto3), so an absent number is 0 and a present one may be either
 * form. */
#include "ctl_codec.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_bounds.h"
#include "util/arena.h"
#include "util/jdoc.h"

static const char base64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void ctl_kv_free(struct ctl_kv *kv)
{
    if (kv == NULL)
        return;
    free(kv->key);
    free(kv->value);
    kv->key = NULL;
    kv->value = NULL;
}

void ctl_base64_append(struct buffer *b, const void *bytes, size_t length)
{
    const unsigned char *p = bytes;
    assert(p != NULL || length == 0);
    for (size_t i = 0; i < length; i += 3) {
        uint32_t word = (uint32_t)p[i] << 16;
        if (i + 1 < length)
            word |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < length)
            word |= p[i + 2];
        char out[4] = {base64_alphabet[(word >> 18) & 63], base64_alphabet[(word >> 12) & 63],
                       i + 1 < length ? base64_alphabet[(word >> 6) & 63] : '=',
                       i + 2 < length ? base64_alphabet[word & 63] : '='};
        buffer_append(b, out, 4);
    }
}

/* The value of a base64 character, or -1. */
static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* One group of four characters (the last may end in padding) into out;
 * the bytes it gave, or -1. */
static int decode_group(const char *group, bool last, unsigned char out[3])
{
    int pad = 0;
    if (last && group[3] == '=')
        pad = group[2] == '=' ? 2 : 1;
    uint32_t word = 0;
    for (int k = 0; k < 4; k++) {
        int v = k >= 4 - pad ? 0 : base64_value(group[k]);
        if (v < 0)
            return -1;
        word = word << 6 | (uint32_t)v;
    }
    /* Bits past the last byte must be zero: one text per byte string. */
    if ((pad == 1 && (word & 0xff) != 0) || (pad == 2 && (word & 0xffff) != 0))
        return -1;
    out[0] = (unsigned char)(word >> 16);
    out[1] = (unsigned char)(word >> 8);
    out[2] = (unsigned char)word;
    return 3 - pad;
}

int ctl_base64_decode(const char *text, size_t length, char *out, size_t out_size,
                      size_t *out_length)
{
    assert(out != NULL);
    assert(out_size > 0);
    *out_length = 0;
    if (length % 4 != 0 || length / 4 * 3 > out_size + 2)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < length; i += 4) {
        unsigned char bytes[3];
        int got = decode_group(text + i, i + 4 == length, bytes);
        if (got < 0 || n + (size_t)got > out_size - 1)
            return -1;
        memcpy(out + n, bytes, (size_t)got);
        n += (size_t)got;
    }
    out[n] = '\0';
    *out_length = n;
    return 0;
}

int ctl_prefix_end(const char *prefix, size_t length, char *out, size_t out_size,
                   size_t *out_length)
{
    size_t n = length;
    while (n > 0 && (unsigned char)prefix[n - 1] == 0xff)
        n--;
    if (n == 0 || n > out_size)
        return -1;
    memcpy(out, prefix, n);
    out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
    *out_length = n;
    return 0;
}

static void member_base64(struct buffer *b, const char *name, const char *bytes, size_t length)
{
    buffer_member(b, name);
    buffer_append_char(b, '"');
    ctl_base64_append(b, bytes, length);
    buffer_append_char(b, '"');
}

/* int64 fields go as JSON strings, as etcd writes them. */
static void member_int64(struct buffer *b, const char *name, int64_t value)
{
    buffer_member(b, name);
    buffer_append_char(b, '"');
    buffer_append_i64(b, value);
    buffer_append_char(b, '"');
}

void ctl_encode_put(struct buffer *b, const char *key, size_t key_length, const char *value,
                    size_t value_length)
{
    buffer_append_char(b, '{');
    member_base64(b, "key", key, key_length);
    buffer_append_char(b, ',');
    member_base64(b, "value", value, value_length);
    buffer_append_char(b, '}');
}

void ctl_encode_range(struct buffer *b, const char *key, size_t key_length, const char *end,
                      size_t end_length, uint32_t limit, int64_t revision)
{
    buffer_append_char(b, '{');
    member_base64(b, "key", key, key_length);
    if (end != NULL) {
        buffer_append_char(b, ',');
        member_base64(b, "range_end", end, end_length);
    }
    if (limit > 0) {
        buffer_append_char(b, ',');
        member_int64(b, "limit", limit);
    }
    if (revision > 0) {
        buffer_append_char(b, ',');
        member_int64(b, "revision", revision);
    }
    buffer_append_char(b, '}');
}

void ctl_encode_delete(struct buffer *b, const char *key, size_t key_length)
{
    buffer_append_char(b, '{');
    member_base64(b, "key", key, key_length);
    buffer_append_char(b, '}');
}

void ctl_encode_put_if(struct buffer *b, const char *key, size_t key_length, const char *value,
                       size_t value_length, int64_t mod_revision)
{
    assert(mod_revision >= 0);
    buffer_append_str(b, "{\"compare\":[{\"target\":\"MOD\",\"result\":\"EQUAL\",");
    member_base64(b, "key", key, key_length);
    buffer_append_char(b, ',');
    member_int64(b, "mod_revision", mod_revision);
    buffer_append_str(b, "}],\"success\":[{\"request_put\":");
    ctl_encode_put(b, key, key_length, value, value_length);
    buffer_append_str(b, "}]}");
}

void ctl_encode_watch(struct buffer *b, const char *key, size_t key_length, const char *end,
                      size_t end_length, int64_t start_revision)
{
    buffer_append_str(b, "{\"create_request\":{");
    member_base64(b, "key", key, key_length);
    if (end != NULL) {
        buffer_append_char(b, ',');
        member_base64(b, "range_end", end, end_length);
    }
    if (start_revision > 0) {
        buffer_append_char(b, ',');
        member_int64(b, "start_revision", start_revision);
    }
    buffer_append_str(b, "}}");
}

/* ---- answers ------------------------------------------------------------ */

/* An int64 member: absent is 0; a string of digits or an integer, >= 0. */
static int get_int64(const struct jdoc_value *object, const char *name, int64_t *out)
{
    const struct jdoc_value *v = jdoc_get(object, name);
    *out = 0;
    if (v == NULL)
        return 0;
    if (v->kind == JDOC_INTEGER) {
        *out = v->as.integer;
        return *out >= 0 ? 0 : -1;
    }
    if (v->kind != JDOC_STRING || v->count == 0 || v->count > 18)
        return -1;
    int64_t value = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        char c = v->as.string[i];
        if (c < '0' || c > '9')
            return -1;
        value = value * 10 + (c - '0');
    }
    *out = value;
    return 0;
}

static bool get_bool(const struct jdoc_value *object, const char *name)
{
    return jdoc_is(jdoc_get(object, name), JDOC_TRUE);
}

/* An error answer: {"error":"..","message":".."} (unary) or
 * {"error":{"message":..}} (a stream's). 1 when it is one (error set). */
static int error_answer(const struct jdoc_value *root, char *error, size_t error_size)
{
    const struct jdoc_value *e = jdoc_get(root, "error");
    if (e == NULL)
        return 0;
    const struct jdoc_value *message = jdoc_get(root, "message");
    if (jdoc_is(e, JDOC_OBJECT))
        message = jdoc_get(e, "message");
    if (!jdoc_is(message, JDOC_STRING))
        message = jdoc_is(e, JDOC_STRING) ? e : NULL;
    snprintf(error, error_size, "etcd: %.200s", message != NULL ? message->as.string : "error");
    return 1;
}

/* Parses an answer that must be an object (not an error one) with a
 * header revision. 0, or -1 with error set. */
static int parse_answer(char *text, size_t length, struct arena *arena, struct jdoc_value **root,
                        int64_t *revision, char *error, size_t error_size)
{
    if (jdoc_parse(text, length, arena, root, error, error_size) != 0)
        return -1;
    if (!jdoc_is(*root, JDOC_OBJECT)) {
        snprintf(error, error_size, "etcd: answer is not a JSON object");
        return -1;
    }
    if (error_answer(*root, error, error_size))
        return -1;
    const struct jdoc_value *header = jdoc_get(*root, "header");
    if (!jdoc_is(header, JDOC_OBJECT) || get_int64(header, "revision", revision) != 0 ||
        *revision <= 0) {
        snprintf(error, error_size, "etcd: answer has no header revision");
        return -1;
    }
    return 0;
}

int ctl_decode_put(char *text, size_t length, int64_t *revision, char *error, size_t error_size)
{
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    int result = parse_answer(text, length, &arena, &root, revision, error, error_size);
    arena_free(&arena);
    return result;
}

int ctl_decode_delete(char *text, size_t length, int64_t *revision, int64_t *deleted, char *error,
                      size_t error_size)
{
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    int result = parse_answer(text, length, &arena, &root, revision, error, error_size);
    if (result == 0 && get_int64(root, "deleted", deleted) != 0) {
        snprintf(error, error_size, "etcd: deleted: not a count");
        result = -1;
    }
    arena_free(&arena);
    return result;
}

int ctl_decode_txn(char *text, size_t length, int64_t *revision, bool *succeeded, char *error,
                   size_t error_size)
{
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    int result = parse_answer(text, length, &arena, &root, revision, error, error_size);
    if (result == 0)
        *succeeded = get_bool(root, "succeeded");
    arena_free(&arena);
    return result;
}

/* A base64 member into a new NUL-terminated string of at most max bytes;
 * absent is empty. 0, or -1 with error. */
static int get_bytes(const struct jdoc_value *object, const char *name, size_t max, char **out,
                     size_t *out_length, char *error, size_t error_size)
{
    *out = NULL;
    *out_length = 0;
    const struct jdoc_value *v = jdoc_get(object, name);
    if (v != NULL && v->kind != JDOC_STRING) {
        snprintf(error, error_size, "etcd: %s: not a string", name);
        return -1;
    }
    size_t text_length = v != NULL ? v->count : 0;
    if (text_length / 4 * 3 > max + 2) {
        snprintf(error, error_size, "etcd: %s: longer than %zu bytes", name, max);
        return -1;
    }
    /* Its own length, not max: a range of 100,000 values each given
     * CTL_VALUE_BYTES_MAX grew the heap by gigabytes, page by page. */
    size_t size = (text_length / 4 * 3 < max ? text_length / 4 * 3 : max) + 1;
    char *bytes = malloc(size);
    if (bytes == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    if (ctl_base64_decode(v != NULL ? v->as.string : "", text_length, bytes, size, out_length) !=
        0) {
        free(bytes);
        snprintf(error, error_size, "etcd: %s: not base64 of at most %zu bytes", name, max);
        return -1;
    }
    *out = bytes;
    return 0;
}

static int decode_kv(const struct jdoc_value *object, struct ctl_kv *kv, char *error,
                     size_t error_size)
{
    memset(kv, 0, sizeof *kv);
    if (!jdoc_is(object, JDOC_OBJECT)) {
        snprintf(error, error_size, "etcd: kv: not an object");
        return -1;
    }
    if (get_bytes(object, "key", CTL_KEY_BYTES_MAX, &kv->key, &kv->key_length, error, error_size) !=
        0)
        return -1;
    if (kv->key_length == 0) {
        snprintf(error, error_size, "etcd: kv: empty key");
        ctl_kv_free(kv);
        return -1;
    }
    if (get_bytes(object, "value", CTL_VALUE_BYTES_MAX, &kv->value, &kv->value_length, error,
                  error_size) != 0) {
        ctl_kv_free(kv);
        return -1;
    }
    if (get_int64(object, "create_revision", &kv->create_revision) != 0 ||
        get_int64(object, "mod_revision", &kv->mod_revision) != 0) {
        snprintf(error, error_size, "etcd: kv: bad revision");
        ctl_kv_free(kv);
        return -1;
    }
    return 0;
}

/* The kvs of an array (absent: none), at most max. */
static int decode_kvs(const struct jdoc_value *array, size_t max, struct ctl_kv **out,
                      size_t *count, char *error, size_t error_size)
{
    *out = NULL;
    *count = 0;
    if (array == NULL)
        return 0;
    if (!jdoc_is(array, JDOC_ARRAY) || array->count > max) {
        snprintf(error, error_size, "etcd: kvs: not an array of at most %zu", max);
        return -1;
    }
    struct ctl_kv *kvs = calloc(array->count > 0 ? array->count : 1, sizeof *kvs);
    if (kvs == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < array->count; i++) {
        if (decode_kv(&array->as.items[i], &kvs[i], error, error_size) != 0) {
            for (size_t k = 0; k < i; k++)
                ctl_kv_free(&kvs[k]);
            free(kvs);
            return -1;
        }
    }
    *out = kvs;
    *count = array->count;
    return 0;
}

int ctl_decode_range(char *text, size_t length, struct ctl_range_page *page, char *error,
                     size_t error_size)
{
    memset(page, 0, sizeof *page);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    int result = parse_answer(text, length, &arena, &root, &page->revision, error, error_size);
    if (result == 0)
        result = decode_kvs(jdoc_get(root, "kvs"), CTL_RANGE_PAGE_KEYS, &page->kvs, &page->count,
                            error, error_size);
    if (result == 0)
        page->more = get_bool(root, "more");
    arena_free(&arena);
    return result;
}

void ctl_range_page_free(struct ctl_range_page *page)
{
    for (size_t i = 0; i < page->count; i++)
        ctl_kv_free(&page->kvs[i]);
    free(page->kvs);
    page->kvs = NULL;
    page->count = 0;
}

void ctl_watch_response_free(struct ctl_watch_response *response)
{
    for (size_t i = 0; i < response->count; i++)
        ctl_kv_free(&response->events[i].kv);
    free(response->events);
    response->events = NULL;
    response->count = 0;
}

static int decode_events(const struct jdoc_value *array, struct ctl_watch_response *response,
                         char *error, size_t error_size)
{
    if (array == NULL)
        return 0;
    if (!jdoc_is(array, JDOC_ARRAY) || array->count > CTL_WATCH_EVENTS_MAX) {
        snprintf(error, error_size, "etcd: events: not an array of at most %d",
                 CTL_WATCH_EVENTS_MAX);
        return -1;
    }
    response->events = calloc(array->count > 0 ? array->count : 1, sizeof *response->events);
    if (response->events == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < array->count; i++) {
        const struct jdoc_value *event = &array->as.items[i];
        const struct jdoc_value *type = jdoc_get(event, "type");
        struct ctl_event *out = &response->events[i];
        if (type == NULL || (jdoc_is(type, JDOC_STRING) && strcmp(type->as.string, "PUT") == 0))
            out->type = CTL_EVENT_PUT;
        else if (jdoc_is(type, JDOC_STRING) && strcmp(type->as.string, "DELETE") == 0)
            out->type = CTL_EVENT_DELETE;
        else {
            snprintf(error, error_size, "etcd: event %zu: unknown type", i);
            return -1;
        }
        if (decode_kv(jdoc_get(event, "kv"), &out->kv, error, error_size) != 0)
            return -1;
        response->count = i + 1;
    }
    return 0;
}

int ctl_decode_watch(char *text, size_t length, struct ctl_watch_response *response, char *error,
                     size_t error_size)
{
    memset(response, 0, sizeof *response);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    int result = jdoc_parse(text, length, &arena, &root, error, error_size);
    const struct jdoc_value *r = NULL;
    if (result == 0 && !error_answer(root, error, error_size)) {
        r = jdoc_get(root, "result");
        if (!jdoc_is(r, JDOC_OBJECT)) {
            snprintf(error, error_size, "etcd: watch answer has no result");
            r = NULL;
        }
    }
    const struct jdoc_value *header = jdoc_get(r, "header");
    result = -1;
    if (r != NULL &&
        (!jdoc_is(header, JDOC_OBJECT) || get_int64(header, "revision", &response->revision) != 0 ||
         get_int64(r, "compact_revision", &response->compact_revision) != 0))
        snprintf(error, error_size, "etcd: watch answer has a bad header or compact revision");
    else if (r != NULL) {
        response->created = get_bool(r, "created");
        response->canceled = get_bool(r, "canceled");
        result = decode_events(jdoc_get(r, "events"), response, error, error_size);
    }
    arena_free(&arena);
    if (result != 0)
        ctl_watch_response_free(response);
    return result;
}
