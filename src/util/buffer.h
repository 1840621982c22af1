/* A growable byte buffer for HTTP replies and files, with the writers the
 * server needs (JSON strings and integers). Replies are written directly into
 * it; no JSON tree is built on the data path. It starts on caller storage
 * (usually the stack) and moves to the heap only when that is full. */
#ifndef LLMLIMIT_UTIL_BUFFER_H
#define LLMLIMIT_UTIL_BUFFER_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The default cap of a buffer's growth: one HTTP reply (GET
 * /v1/admin/limits) or one file written whole. */
#define RESPONSE_BYTES_MAX (512 * 1024 * 1024)

struct buffer {
    /* Never NULL: an empty buffer without storage points at a shared empty
     * byte (capacity 0, never written), so its content can be handed to
     * memcpy and pointer arithmetic like any other. */
    char *data;
    size_t length;
    size_t capacity;
    size_t capacity_max; /* growth stops here (RESPONSE_BYTES_MAX by default) */
    bool heap;           /* data is malloc'd and owned by the buffer */
    bool failed;         /* an allocation failed or the cap was hit: content incomplete */
    /* The caller's storage outlives the answer (it is in the request's
     * exchange or arena), so the answer can point at it instead of a copy. */
    bool stable;
};

/* storage may be NULL (size 0): the first append allocates. */
void buffer_init(struct buffer *buffer, char *storage, size_t storage_size);
/* Frees heap storage, if any; the buffer is empty (and usable) afterwards. */
void buffer_free(struct buffer *buffer);
/* Hands the content over as a malloc'd block the caller frees with free();
 * copies it off caller storage if needed (an empty buffer gives an empty
 * block, not NULL). NULL on allocation failure. The buffer is empty
 * afterwards. */
char *buffer_detach(struct buffer *buffer);

/* Makes room for `more` bytes (growing to the heap); false, with failed
 * set, if it cannot. */
bool buffer_grow(struct buffer *buffer, size_t more);

/* Room for at least `more` bytes at the end, or NULL (failed set). Write
 * there, then buffer_wrote with the end of what was written. */
static inline char *buffer_room(struct buffer *buffer, size_t more)
{
    assert(buffer->length <= buffer->capacity);
    if (buffer->failed || buffer->capacity - buffer->length < more) {
        if (!buffer_grow(buffer, more))
            return NULL;
    }
    return buffer->data + buffer->length;
}

static inline void buffer_wrote(struct buffer *buffer, const char *end)
{
    /* Only forward, and never past the room buffer_room made. */
    assert(end >= buffer->data + buffer->length);
    assert(end <= buffer->data + buffer->capacity);
    buffer->length = (size_t)(end - buffer->data);
}

static inline void buffer_append(struct buffer *buffer, const char *bytes, size_t length)
{
    char *at = length > 0 ? buffer_room(buffer, length) : NULL;
    if (at == NULL)
        return;
    assert(bytes != NULL);
    memcpy(at, bytes, length);
    buffer->length += length;
    assert(buffer->length <= buffer->capacity);
}

static inline void buffer_append_str(struct buffer *buffer, const char *s)
{
    buffer_append(buffer, s, strlen(s));
}

static inline void buffer_append_char(struct buffer *buffer, char c)
{
    char *at = buffer_room(buffer, 1);
    if (at == NULL)
        return;
    *at = c;
    buffer->length++;
}

/* Writes the decimal digits of value at out; returns the end. out needs
 * room for 20 bytes (21 for put_i64). */
char *buffer_put_u64(char *out, uint64_t value);
char *buffer_put_i64(char *out, int64_t value);

void buffer_append_u64(struct buffer *buffer, uint64_t value);
void buffer_append_i64(struct buffer *buffer, int64_t value);
/* A JSON string literal with its quotes; bytes < 0x20, '"' and '\' escaped. */
void buffer_append_json_string(struct buffer *buffer, const char *s, size_t length);
void buffer_printf(struct buffer *buffer, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* JSON object members: `"name":` then the value. The name is written as it
 * is (a literal of the caller's, never escaped). */
void buffer_member(struct buffer *buffer, const char *name);
void buffer_member_string(struct buffer *buffer, const char *name, const char *value);
void buffer_member_u64(struct buffer *buffer, const char *name, uint64_t value);
void buffer_member_i64(struct buffer *buffer, const char *name, int64_t value);

#endif
