/* A strict JSON parser (RFC 8259) for request bodies and limits.json,
 * built for the data path: one pass, no malloc (nodes come from the
 * request's arena), strings decoded in place in the input buffer, nesting
 * bounded by JSON_DEPTH_MAX, integers exact in int64 (larger ones are an
 * error, never rounded), duplicate object keys rejected. It replaced jansson
 * here because jansson spent about 25 ns per byte, more than half the CPU of
 * a batch reserve. */
#ifndef LLMLIMIT_UTIL_JDOC_H
#define LLMLIMIT_UTIL_JDOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

enum jdoc_kind {
    JDOC_NULL = 0,
    JDOC_FALSE,
    JDOC_TRUE,
    JDOC_INTEGER, /* fits int64 */
    JDOC_REAL,    /* a fraction or an exponent: its text is kept (as.number), not its value */
    JDOC_STRING,
    JDOC_ARRAY,
    JDOC_OBJECT,
};

struct jdoc_member;

/* What the parser saw of a string's bytes while scanning it (set only for
 * a string without escapes or non-ASCII bytes; 0 says "not checked"), so
 * the decoders need not scan identifiers a second time. */
enum {
    JDOC_KEY_CHARS = 2,   /* every byte is printable ASCII, not a space */
    JDOC_LEASE_CHARS = 4, /* every byte is in [A-Za-z0-9._:-] */
};

/* Per byte: JDOC_SCAN_STOP for the bytes a plain string cannot hold as they
 * are ('"', '\', controls, non-ASCII), plus the JDOC_*_CHARS it belongs to. */
#define JDOC_SCAN_STOP 1
extern const uint8_t jdoc_char_class[256];

/* The number of bytes from p on (before end) up to the first one a plain
 * string cannot hold as it is; *seen gets the JDOC_*_CHARS that all of them
 * have. Reads whole 16-byte blocks while they fit before end. */
size_t jdoc_plain_run(const char *p, const char *end, unsigned *seen);

struct jdoc_value {
    enum jdoc_kind kind;
    uint32_t count; /* string bytes, array items, object members, or a real's text bytes */
    uint32_t line;  /* where the value starts (1-based), for error messages */
    uint8_t flags;  /* strings: JDOC_*_CHARS */
    union {
        int64_t integer;
        const char *string; /* NUL-terminated; may hold NUL bytes (\u0000 is refused) */
        /* JDOC_REAL: the number as written, count bytes in the parsed text
         * (not NUL-terminated), for readers that need its exact decimal
         * digits rather than a binary double. */
        const char *number;
        struct jdoc_value *items;
        struct jdoc_member *members; /* in document order */
    } as;
};

struct jdoc_member {
    const char *key; /* NUL-terminated */
    uint32_t key_length;
    struct jdoc_value value;
};

/* Parses text[0..length) in place (strings are unescaped into it, so it
 * must stay alive and unchanged as long as the document is used). Nodes come
 * from arena. Returns 0 with *root set, or -1 with "invalid JSON: <reason>
 * (line L, column C)" in error. */
int jdoc_parse(char *text, size_t length, struct arena *arena, struct jdoc_value **root,
               char *error, size_t error_size);

/* The parser recurses once per level: this caps any depth asked for. */
#define JDOC_DEPTH_CEILING 256

/* jdoc_parse with its own nesting bound (1..JDOC_DEPTH_CEILING) instead of
 * JSON_DEPTH_MAX: for documents that are not this API's requests, such as
 * an OpenAI request's tool schemas. */
int jdoc_parse_nested(char *text, size_t length, uint32_t depth_max, struct arena *arena,
                      struct jdoc_value **root, char *error, size_t error_size);

/* The member named `name` of an object, or NULL (also when not an object). */
const struct jdoc_value *jdoc_get(const struct jdoc_value *object, const char *name);

static inline bool jdoc_is(const struct jdoc_value *value, enum jdoc_kind kind)
{
    return value != NULL && value->kind == kind;
}

#endif
