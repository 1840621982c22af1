/* Growable buffer: doubling growth bounded by capacity_max, so a reply can
 * never take more memory than the bound says. */
#include "buffer.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bounds.h"

void buffer_init(struct buffer *buffer, char *storage, size_t storage_size)
{
    assert(storage != NULL || storage_size == 0);
    buffer->data = storage;
    buffer->length = 0;
    buffer->capacity = storage_size;
    buffer->capacity_max = RESPONSE_BYTES_MAX;
    buffer->heap = false;
    buffer->failed = false;
}

void buffer_free(struct buffer *buffer)
{
    if (buffer->heap)
        free(buffer->data);
    buffer->data = NULL;
    buffer->length = 0;
    buffer->capacity = 0;
    buffer->heap = false;
}

char *buffer_detach(struct buffer *buffer)
{
    char *data;
    if (buffer->heap) {
        data = buffer->data;
    } else {
        data = malloc(buffer->length + 1);
        if (data != NULL)
            memcpy(data, buffer->data, buffer->length);
    }
    buffer->data = NULL;
    buffer->length = 0;
    buffer->capacity = 0;
    buffer->heap = false;
    return data;
}

/* Makes room for `more` bytes; false (and failed set) if it cannot. */
static bool buffer_reserve(struct buffer *buffer, size_t more)
{
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
    while (capacity < needed)
        capacity = capacity > buffer->capacity_max / 2 ? buffer->capacity_max : capacity * 2;
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
    return true;
}

void buffer_append(struct buffer *buffer, const char *bytes, size_t length)
{
    if (length == 0 || !buffer_reserve(buffer, length))
        return;
    memcpy(buffer->data + buffer->length, bytes, length);
    buffer->length += length;
}

void buffer_append_str(struct buffer *buffer, const char *s)
{
    buffer_append(buffer, s, strlen(s));
}

void buffer_append_char(struct buffer *buffer, char c)
{
    if (!buffer_reserve(buffer, 1))
        return;
    buffer->data[buffer->length++] = c;
}

void buffer_append_u64(struct buffer *buffer, uint64_t value)
{
    char digits[20];
    size_t count = 0;
    do {
        digits[sizeof digits - 1 - count] = (char)('0' + value % 10);
        value /= 10;
        count++;
    } while (value != 0);
    buffer_append(buffer, digits + sizeof digits - count, count);
}

void buffer_append_i64(struct buffer *buffer, int64_t value)
{
    if (value < 0) {
        buffer_append_char(buffer, '-');
        /* -(INT64_MIN) does not fit an int64; go through uint64. */
        buffer_append_u64(buffer, (uint64_t)0 - (uint64_t)value);
    } else {
        buffer_append_u64(buffer, (uint64_t)value);
    }
}

void buffer_append_json_string(struct buffer *buffer, const char *s, size_t length)
{
    static const char hex[] = "0123456789abcdef";
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
    if (!buffer_reserve(buffer, (size_t)n + 1))
        return;
    va_start(ap, format);
    vsnprintf(buffer->data + buffer->length, (size_t)n + 1, format, ap);
    va_end(ap);
    buffer->length += (size_t)n;
}
