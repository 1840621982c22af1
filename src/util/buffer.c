/* Growable buffer: doubling growth bounded by capacity_max, so a reply can
 * never take more memory than the bound says. */
#include "buffer.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an empty buffer without storage points at, so that data is never
 * NULL: memcpy(dst, NULL, 0) and NULL + 0 are undefined behaviour, and an
 * upstream answer with no body is such a buffer. Read, never written (its
 * capacity is 0); const, so a write past the API faults at once. */
static const char buffer_empty[1];

static void buffer_become_empty(struct buffer *buffer)
{
    buffer->data = (char *)buffer_empty;
    buffer->length = 0;
    buffer->capacity = 0;
    buffer->heap = false;
}

void buffer_init(struct buffer *buffer, char *storage, size_t storage_size)
{
    assert(buffer != NULL);
    assert(storage != NULL || storage_size == 0);
    buffer->data = storage != NULL ? storage : (char *)buffer_empty;
    buffer->length = 0;
    buffer->capacity = storage_size;
    buffer->capacity_max = RESPONSE_BYTES_MAX;
    buffer->heap = false;
    buffer->failed = false;
    buffer->stable = false;
}

void buffer_free(struct buffer *buffer)
{
    if (buffer->heap)
        free(buffer->data);
    buffer_become_empty(buffer);
}

char *buffer_detach(struct buffer *buffer)
{
    assert(buffer->length <= buffer->capacity);
    char *data;
    if (buffer->heap) {
        data = buffer->data;
    } else {
        /* An empty buffer still gives a block: NULL says out of memory. */
        data = malloc(buffer->length + 1);
        if (data != NULL && buffer->length > 0)
            memcpy(data, buffer->data, buffer->length);
    }
    buffer_become_empty(buffer);
    return data;
}

bool buffer_grow(struct buffer *buffer, size_t more)
{
    assert(buffer->length <= buffer->capacity);
    if (buffer->failed)
        return false;
    if (buffer->capacity - buffer->length >= more)
        return true;
    if (more > buffer->capacity_max - buffer->length) {
        buffer->failed = true;
        return false;
    }
    size_t needed = buffer->length + more;
    size_t capacity = buffer->capacity < 256 ? 256 : buffer->capacity;
    if (capacity > buffer->capacity_max) /* a cap below the least block */
        capacity = buffer->capacity_max;
    while (capacity < needed)
        capacity = capacity > buffer->capacity_max / 2 ? buffer->capacity_max : capacity * 2;
    assert(capacity >= needed);
    assert(capacity <= buffer->capacity_max);
    char *data = buffer->heap ? realloc(buffer->data, capacity) : malloc(capacity);
    if (data == NULL) {
        buffer->failed = true;
        return false;
    }
    if (!buffer->heap && buffer->length > 0)
        memcpy(data, buffer->data, buffer->length);
    buffer->data = data;
    buffer->capacity = capacity;
    buffer->heap = true;
    assert(buffer->capacity - buffer->length >= more);
    return true;
}

/* "00" to "99": two digits per division. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

static size_t digit_count(uint64_t value)
{
    size_t n = 1;
    while (value >= 10) {
        value /= 10;
        n++;
    }
    return n;
}

char *buffer_put_u64(char *out, uint64_t value)
{
    size_t n = value >= UINT64_C(1000000000000) && value < UINT64_C(10000000000000)
                   ? 13 /* a unix_ms timestamp: most of what is written */
                   : digit_count(value);
    char *end = out + n, *at = end;
    while (value >= 100) {
        uint64_t pair = value % 100;
        value /= 100;
        at -= 2;
        memcpy(at, digit_pairs + 2 * pair, 2);
    }
    if (value >= 10) {
        at -= 2;
        memcpy(at, digit_pairs + 2 * value, 2);
    } else {
        *--at = (char)('0' + value);
    }
    assert(at == out); /* digit_count was exact: no gap, no overrun */
    return end;
}

char *buffer_put_i64(char *out, int64_t value)
{
    if (value >= 0)
        return buffer_put_u64(out, (uint64_t)value);
    *out++ = '-';
    /* -(INT64_MIN) does not fit an int64; go through uint64. */
    return buffer_put_u64(out, (uint64_t)0 - (uint64_t)value);
}

void buffer_append_u64(struct buffer *buffer, uint64_t value)
{
    char *at = buffer_room(buffer, 20);
    if (at != NULL)
        buffer_wrote(buffer, buffer_put_u64(at, value));
}

void buffer_append_i64(struct buffer *buffer, int64_t value)
{
    char *at = buffer_room(buffer, 21);
    if (at != NULL)
        buffer_wrote(buffer, buffer_put_i64(at, value));
}

void buffer_append_json_string(struct buffer *buffer, const char *s, size_t length)
{
    static const char hex[] = "0123456789abcdef";
    assert(s != NULL || length == 0);
    buffer_append_char(buffer, '"');
    size_t run = 0; /* bytes that need no escape, copied in one go */
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        buffer_append(buffer, s + run, i - run);
        run = i + 1;
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            buffer_append(buffer, escaped, 2);
        } else {
            char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buffer_append(buffer, escaped, 6);
        }
    }
    assert(run <= length);
    if (run < length) /* s may be NULL when length is 0: no s + 0 */
        buffer_append(buffer, s + run, length - run);
    buffer_append_char(buffer, '"');
}

void buffer_printf(struct buffer *buffer, const char *format, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(small, sizeof small, format, ap);
    va_end(ap);
    if (n < 0) {
        buffer->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        buffer_append(buffer, small, (size_t)n);
        return;
    }
    if (!buffer_grow(buffer, (size_t)n + 1))
        return;
    va_start(ap, format);
    vsnprintf(buffer->data + buffer->length, (size_t)n + 1, format, ap);
    va_end(ap);
    buffer->length += (size_t)n;
}

void buffer_member(struct buffer *buffer, const char *name)
{
    assert(name != NULL);
    buffer_append_char(buffer, '"');
    buffer_append_str(buffer, name);
    buffer_append_str(buffer, "\":");
}

void buffer_member_string(struct buffer *buffer, const char *name, const char *value)
{
    buffer_member(buffer, name);
    buffer_append_json_string(buffer, value, strlen(value));
}

void buffer_member_u64(struct buffer *buffer, const char *name, uint64_t value)
{
    buffer_member(buffer, name);
    buffer_append_u64(buffer, value);
}

void buffer_member_i64(struct buffer *buffer, const char *name, int64_t value)
{
    buffer_member(buffer, name);
    buffer_append_i64(buffer, value);
}
