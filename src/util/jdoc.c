/* Recursive descent over the RFC 8259 grammar. Recursion is bounded by
 * JSON_DEPTH_MAX; every loop advances through the input, so the work is
 * linear in its length (duplicate keys of large objects are found by
 * sorting). Strings are unescaped in place: the decoded form is never longer
 * than the escaped one, so writing behind the read position is safe. */
#include "jdoc.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bounds.h"
#include "utf8.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct parser {
    char *text;
    size_t length;
    size_t pos;
    uint32_t line;
    size_t line_start;
    int depth;
    int depth_max; /* of arrays and objects */
    struct arena *arena;
    char *error;
    size_t error_size;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *p, const char *format, ...)
{
    assert(p->pos <= p->length);
    assert(p->line_start <= p->pos);
    char reason[160];
    va_list ap;
    va_start(ap, format);
    vsnprintf(reason, sizeof reason, format, ap);
    va_end(ap);
    snprintf(p->error, p->error_size, "invalid JSON: %s (line %u, column %zu)", reason, p->line,
             p->pos - p->line_start + 1);
    return -1;
}

/* 1: JDOC_SCAN_STOP, 2: JDOC_KEY_CHARS, 4: JDOC_LEASE_CHARS. */
/* clang-format off */
const uint8_t jdoc_char_class[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10 */
    0, 2, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 6, 6, 2, /* 0x20  !"#$%&'()*+,-./ */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 2, 2, 2, 2, 2, /* 0x30 0-9:;<=>? */
    2, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0x40 @A-O */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 2, 3, 2, 2, 6, /* 0x50 P-Z[\]^_ */
    2, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0x60 `a-o */
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 2, 2, 2, 2, 0, /* 0x70 p-z{|}~ DEL */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x80 and up */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};
/* clang-format on */

#if defined(__SSE2__)
/* 16 bytes at a time: the stop bytes, and the key and lease-id classes of
 * the bytes before the first stop (signed compares: bytes from 0x80 up are
 * negative, so below 0x20 too). */
static size_t plain_run_sse2(const unsigned char *p, const unsigned char *end, unsigned *seen)
{
    const unsigned char *start = p;
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                                 _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                                    _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
        unsigned stop_bits = (unsigned)_mm_movemask_epi8(stop);
        unsigned in_run = stop_bits != 0 ? (1u << __builtin_ctz(stop_bits)) - 1 : 0xffffu;
        __m128i not_key = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')),
                                       _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)));
        if ((unsigned)_mm_movemask_epi8(not_key) & in_run)
            *seen &= ~(unsigned)JDOC_KEY_CHARS;
        __m128i folded = _mm_or_si128(x, _mm_set1_epi8(0x20)); /* A-Z to a-z */
        __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8(0x60)),
                                       _mm_cmplt_epi8(folded, _mm_set1_epi8(0x7b)));
        __m128i punctuation =
            _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('/')),
                             _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8(0x2c)),
                                           _mm_cmplt_epi8(x, _mm_set1_epi8(0x3b))));
        __m128i lease =
            _mm_or_si128(_mm_or_si128(letter, punctuation), _mm_cmpeq_epi8(x, _mm_set1_epi8('_')));
        if (((unsigned)_mm_movemask_epi8(lease) & in_run) != in_run)
            *seen &= ~(unsigned)JDOC_LEASE_CHARS;
        if (stop_bits != 0)
            return (size_t)(p - start) + (size_t)__builtin_ctz(stop_bits);
        p += 16;
    }
    return (size_t)(p - start);
}
#endif

size_t jdoc_plain_run(const char *p, const char *end, unsigned *seen)
{
    assert(p <= end);
    const unsigned char *s = (const unsigned char *)p, *e = (const unsigned char *)end;
    size_t n = 0;
#if defined(__SSE2__)
    n = plain_run_sse2(s, e, seen);
    s += n;
    if (s < e && (jdoc_char_class[*s] & JDOC_SCAN_STOP))
        return n;
#endif
    for (; s < e; s++, n++) {
        unsigned c = jdoc_char_class[*s];
        if (c & JDOC_SCAN_STOP)
            break;
        *seen &= c;
    }
    assert(n <= (size_t)(end - p));
    return n;
}

static void skip_space_slow(struct parser *p)
{
    while (p->pos < p->length) {
        char c = p->text[p->pos];
        if (c == '\n') {
            p->line++;
            p->pos++;
            p->line_start = p->pos;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p->pos++;
        } else {
            break;
        }
    }
}

/* Compact bodies have no whitespace between tokens: check for that first. */
static inline void skip_space(struct parser *p)
{
    if (p->pos < p->length && (unsigned char)p->text[p->pos] > ' ')
        return;
    skip_space_slow(p);
}

static int hex4(const char *s, size_t available, unsigned *out)
{
    if (available < 4)
        return -1;
    unsigned value = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned digit = (c >= '0' && c <= '9')   ? (unsigned)(c - '0')
                         : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
                         : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10)
                                                  : 16u;
        if (digit == 16)
            return -1;
        value = value * 16 + digit;
    }
    *out = value;
    return 0;
}

static size_t utf8_encode(unsigned code, char *out)
{
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (code >> 18));
    out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

/* A \u escape at p->pos (the backslash), surrogate pairs joined; writes the
 * UTF-8 bytes at *w. */
static int unicode_escape(struct parser *p, size_t *w)
{
    unsigned code;
    if (hex4(p->text + p->pos + 2, p->length - p->pos - 2, &code) != 0)
        return fail(p, "invalid \\u escape");
    p->pos += 6;
    if (code >= 0xDC00 && code <= 0xDFFF)
        return fail(p, "invalid Unicode surrogate pair");
    if (code >= 0xD800 && code <= 0xDBFF) {
        unsigned low;
        if (p->length - p->pos < 6 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u' ||
            hex4(p->text + p->pos + 2, 4, &low) != 0 || low < 0xDC00 || low > 0xDFFF)
            return fail(p, "invalid Unicode surrogate pair");
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        p->pos += 6;
    }
    if (code == 0)
        return fail(p, "\\u0000 is not allowed");
    /* 6 or 12 escaped bytes decode to at most 4: the write stays behind. */
    *w += utf8_encode(code, p->text + *w);
    assert(*w <= p->pos);
    return 0;
}

static int escape(struct parser *p, size_t *w)
{
    if (p->pos + 1 >= p->length)
        return fail(p, "unterminated string");
    char c = p->text[p->pos + 1];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *known = c != '\0' ? strchr(from, c) : NULL;
    if (known != NULL) {
        assert(*w <= p->pos);
        p->text[(*w)++] = to[known - from];
        p->pos += 2;
        return 0;
    }
    if (c == 'u')
        return unicode_escape(p, w);
    return fail(p, "invalid escape");
}

/* The rest of a string from p->pos on, past the plain bytes that start at
 * `start`: escapes decoded, UTF-8 checked, written back in place. */
__attribute__((noinline)) static int parse_string_rest(struct parser *p, size_t start,
                                                       const char **out, uint32_t *out_length)
{
    size_t w = p->pos;
    for (;;) {
        if (p->pos >= p->length)
            return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->text[p->pos];
        if (c == '"')
            break;
        if (c == '\\') {
            if (escape(p, &w) != 0)
                return -1;
        } else if (c < 0x20) {
            return fail(p, "control character in string");
        } else {
            size_t n =
                utf8_sequence_length((const unsigned char *)p->text + p->pos, p->length - p->pos);
            if (n == 0)
                return fail(p, "invalid UTF-8 in string");
            memmove(p->text + w, p->text + p->pos, n);
            w += n;
            p->pos += n;
        }
    }
    assert(w <= p->pos); /* in place: the write never passes the read */
    assert(p->pos < p->length);
    p->text[w] = '\0'; /* over the closing quote or bytes already read */
    p->pos++;
    *out = p->text + start;
    *out_length = (uint32_t)(w - start);
    return 0;
}

/* The string at p->pos (its opening quote), decoded in place; *flags gets
 * the JDOC_*_CHARS that hold for all of it (0 unless it is plain ASCII). */
static inline int parse_string(struct parser *p, const char **out, uint32_t *out_length,
                               uint8_t *flags)
{
    assert(p->pos < p->length);
    assert(p->text[p->pos] == '"');
    size_t start = ++p->pos;
    /* Plain ASCII needs no copy: the write position follows the read one
     * until the first escape. */
    unsigned seen = JDOC_KEY_CHARS | JDOC_LEASE_CHARS;
    size_t pos = start + jdoc_plain_run(p->text + start, p->text + p->length, &seen);
    size_t length = p->length;
    assert(pos <= length);
    p->pos = pos;
    if (pos < length && p->text[pos] == '"') { /* the common case: done */
        p->text[pos] = '\0';
        p->pos = pos + 1;
        *out = p->text + start;
        *out_length = (uint32_t)(pos - start);
        *flags = (uint8_t)seen;
        return 0;
    }
    *flags = 0;
    return parse_string_rest(p, start, out, out_length);
}

static int parse_number(struct parser *p, struct jdoc_value *out)
{
    const char *t = p->text;
    size_t pos = p->pos;
    bool negative = t[pos] == '-';
    pos += negative ? 1 : 0;
    if (pos >= p->length || t[pos] < '0' || t[pos] > '9')
        return fail(p, "invalid number");
    uint64_t magnitude = 0;
    bool overflow = false;
    if (t[pos] == '0') {
        pos++;
    } else {
        for (; pos < p->length && t[pos] >= '0' && t[pos] <= '9'; pos++) {
            uint64_t digit = (uint64_t)(t[pos] - '0');
            overflow = overflow || magnitude > (UINT64_MAX - digit) / 10;
            magnitude = magnitude * 10 + digit;
        }
    }
    bool real = false;
    if (pos < p->length && t[pos] == '.') {
        real = true;
        if (++pos >= p->length || t[pos] < '0' || t[pos] > '9')
            return fail(p, "invalid number");
        while (pos < p->length && t[pos] >= '0' && t[pos] <= '9')
            pos++;
    }
    if (pos < p->length && (t[pos] == 'e' || t[pos] == 'E')) {
        real = true;
        if (++pos < p->length && (t[pos] == '+' || t[pos] == '-'))
            pos++;
        if (pos >= p->length || t[pos] < '0' || t[pos] > '9')
            return fail(p, "invalid number");
        while (pos < p->length && t[pos] >= '0' && t[pos] <= '9')
            pos++;
    }
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (!real && (overflow || magnitude > limit))
        return fail(p, "integer out of range (amounts are integers 0..9223372036854775807)");
    assert(pos > p->pos); /* at least one digit was consumed */
    assert(pos <= p->length);
    out->kind = real ? JDOC_REAL : JDOC_INTEGER;
    if (real) {
        /* Strings are unescaped only inside their own quotes, so this text
         * stays as written for as long as the document lives. */
        out->as.number = t + p->pos;
        out->count = (uint32_t)(pos - p->pos);
    } else {
        out->as.integer = !negative            ? (int64_t)magnitude
                          : magnitude == limit ? INT64_MIN
                                               : -(int64_t)magnitude;
    }
    p->pos = pos;
    return 0;
}

static int parse_literal(struct parser *p, const char *word, enum jdoc_kind kind,
                         struct jdoc_value *out)
{
    size_t n = strlen(word);
    if (p->length - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
        return fail(p, "invalid literal");
    p->pos += n;
    out->kind = kind;
    return 0;
}

/* Growable array in the arena; the old copies stay there until the reset. */
static void *grow(struct parser *p, void *data, uint32_t count, uint32_t *capacity, size_t size)
{
    assert(count <= *capacity);
    if (count < *capacity)
        return data;
    /* Values are at least one input byte each and input is below 4 GiB. */
    assert(*capacity <= UINT32_MAX / 2);
    uint32_t doubled = *capacity == 0 ? 4 : *capacity * 2;
    void *bigger = arena_alloc_uninit(p->arena, (size_t)doubled * size);
    if (bigger == NULL)
        return NULL;
    if (count > 0)
        memcpy(bigger, data, (size_t)count * size);
    *capacity = doubled;
    assert(count < *capacity);
    return bigger;
}

static int parse_value(struct parser *p, struct jdoc_value *out);

static int parse_array(struct parser *p, struct jdoc_value *out)
{
    assert(p->text[p->pos] == '[');
    p->pos++;
    struct jdoc_value *items = NULL;
    uint32_t count = 0, capacity = 0;
    skip_space(p);
    if (p->pos < p->length && p->text[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            items = grow(p, items, count, &capacity, sizeof *items);
            if (items == NULL)
                return fail(p, "out of memory");
            if (parse_value(p, &items[count]) != 0)
                return -1;
            count++;
            skip_space(p);
            char c = p->pos < p->length ? p->text[p->pos++] : '\0';
            if (c == ']')
                break;
            if (c != ',')
                return fail(p, "',' or ']' expected");
        }
    }
    assert(count <= capacity);
    out->kind = JDOC_ARRAY;
    out->count = count;
    out->as.items = items;
    return 0;
}

static int member_compare(const void *a, const void *b)
{
    const struct jdoc_member *x = *(const struct jdoc_member *const *)a;
    const struct jdoc_member *y = *(const struct jdoc_member *const *)b;
    size_t n = x->key_length < y->key_length ? x->key_length : y->key_length;
    int order = memcmp(x->key, y->key, n);
    if (order != 0)
        return order;
    return x->key_length < y->key_length ? -1 : x->key_length > y->key_length ? 1 : 0;
}

static bool same_key(const struct jdoc_member *a, const struct jdoc_member *b)
{
    return a->key_length == b->key_length && memcmp(a->key, b->key, a->key_length) == 0;
}

/* Small objects (all of ours) compare pairwise; large ones sort. */
static int check_duplicates(struct parser *p, struct jdoc_member *members, uint32_t count)
{
    assert(members != NULL || count == 0);
    if (count <= 16) {
        for (uint32_t i = 1; i < count; i++) {
            for (uint32_t j = 0; j < i; j++) {
                if (same_key(&members[i], &members[j]))
                    return fail(p, "duplicate object key \"%.64s\"", members[i].key);
            }
        }
        return 0;
    }
    struct jdoc_member **sorted = arena_alloc(p->arena, (size_t)count * sizeof *sorted);
    if (sorted == NULL)
        return fail(p, "out of memory");
    for (uint32_t i = 0; i < count; i++)
        sorted[i] = &members[i];
    qsort(sorted, count, sizeof *sorted, member_compare);
    for (uint32_t i = 1; i < count; i++) {
        if (same_key(sorted[i], sorted[i - 1]))
            return fail(p, "duplicate object key \"%.64s\"", sorted[i]->key);
    }
    return 0;
}

static int parse_member(struct parser *p, struct jdoc_member *member)
{
    skip_space(p);
    if (p->pos >= p->length || p->text[p->pos] != '"')
        return fail(p, "string or '}' expected");
    uint8_t flags;
    if (parse_string(p, &member->key, &member->key_length, &flags) != 0)
        return -1;
    skip_space(p);
    if (p->pos >= p->length || p->text[p->pos] != ':')
        return fail(p, "':' expected");
    p->pos++;
    return parse_value(p, &member->value);
}

static int parse_object(struct parser *p, struct jdoc_value *out)
{
    assert(p->text[p->pos] == '{');
    p->pos++;
    struct jdoc_member *members = NULL;
    uint32_t count = 0, capacity = 0;
    skip_space(p);
    if (p->pos < p->length && p->text[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            members = grow(p, members, count, &capacity, sizeof *members);
            if (members == NULL)
                return fail(p, "out of memory");
            if (parse_member(p, &members[count]) != 0)
                return -1;
            count++;
            skip_space(p);
            char c = p->pos < p->length ? p->text[p->pos++] : '\0';
            if (c == '}')
                break;
            if (c != ',')
                return fail(p, "',' or '}' expected");
        }
    }
    assert(count <= capacity);
    if (check_duplicates(p, members, count) != 0)
        return -1;
    out->kind = JDOC_OBJECT;
    out->count = count;
    out->as.members = members;
    return 0;
}

static int parse_value(struct parser *p, struct jdoc_value *out)
{
    assert(p->depth >= 0);
    assert(p->depth <= p->depth_max);
    assert(p->pos <= p->length);
    skip_space(p);
    if (p->pos >= p->length)
        return fail(p, "unexpected end of input");
    /* Arrays of values are not zero-filled: every field is set here. */
    out->line = p->line;
    out->flags = 0;
    out->count = 0;
    out->as.integer = 0;
    char c = p->text[p->pos];
    if (c == '{' || c == '[') {
        if (p->depth >= p->depth_max)
            return fail(p, "nested deeper than %d levels", p->depth_max);
        int depth = p->depth++;
        int result = c == '{' ? parse_object(p, out) : parse_array(p, out);
        p->depth--;
        assert(p->depth == depth);
        return result;
    }
    if (c == '"') {
        out->kind = JDOC_STRING;
        return parse_string(p, &out->as.string, &out->count, &out->flags);
    }
    if (c == 't')
        return parse_literal(p, "true", JDOC_TRUE, out);
    if (c == 'f')
        return parse_literal(p, "false", JDOC_FALSE, out);
    if (c == 'n')
        return parse_literal(p, "null", JDOC_NULL, out);
    if (c == '-' || (c >= '0' && c <= '9'))
        return parse_number(p, out);
    return fail(p, "unexpected character");
}

int jdoc_parse(char *text, size_t length, struct arena *arena, struct jdoc_value **root,
               char *error, size_t error_size)
{
    return jdoc_parse_nested(text, length, JSON_DEPTH_MAX, arena, root, error, error_size);
}

int jdoc_parse_nested(char *text, size_t length, uint32_t depth_max, struct arena *arena,
                      struct jdoc_value **root, char *error, size_t error_size)
{
    assert(depth_max >= 1);
    assert(depth_max <= JDOC_DEPTH_CEILING);
    struct parser p = {.text = text,
                       .length = length,
                       .line = 1,
                       .depth_max = (int)depth_max,
                       .arena = arena,
                       .error = error,
                       .error_size = error_size};
    assert(text != NULL || length == 0);
    assert(arena != NULL);
    assert(root != NULL);
    assert(error != NULL);
    assert(error_size > 0);
    *root = NULL;
    if (length > UINT32_MAX)
        return fail(&p, "document too large");
    struct jdoc_value *value = arena_alloc(arena, sizeof *value);
    if (value == NULL)
        return fail(&p, "out of memory");
    if (parse_value(&p, value) != 0)
        return -1;
    skip_space(&p);
    if (p.pos != p.length)
        return fail(&p, "end of input expected");
    assert(p.depth == 0);
    *root = value;
    return 0;
}

const struct jdoc_value *jdoc_get(const struct jdoc_value *object, const char *name)
{
    assert(name != NULL);
    if (!jdoc_is(object, JDOC_OBJECT))
        return NULL;
    assert(object->as.members != NULL || object->count == 0);
    size_t length = strlen(name); /* keys hold no NUL (\u0000 is refused) */
    for (uint32_t i = 0; i < object->count; i++) {
        const struct jdoc_member *member = &object->as.members[i];
        if (member->key_length == length && memcmp(member->key, name, length) == 0)
            return &member->value;
    }
    return NULL;
}
