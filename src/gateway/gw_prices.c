/* Two parts: the exact conversion of a price literal, and the prices file.
 * The file is scanned once, its top-level members indexed by name (sorted,
 * for a binary search); a value is only skipped over (strings and brackets
 * followed, nothing else checked) until a model asks for it, and then it is
 * parsed strictly. Every loop advances through the text, so the work is
 * linear in its length; nesting is counted, never recursed. */
#include "gw_prices.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bounds.h"
#include "util/arena.h"
#include "util/file.h"
#include "util/jdoc.h"

/* ---- a price literal ---- */

/* An exponent's magnitude stops growing here: far past any number of
 * digits the file can hold, so the result is decided already. */
#define EXPONENT_CAP 1000000000
/* USD per token to usd_micros per million tokens. */
#define MICROS_PER_MTOK_EXPONENT 12
/* 10^19 > 2^63: a 20-digit integer part is always too large. */
#define INTEGER_DIGITS_MAX 19

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The digits of a literal: its integer part, then its fraction. */
struct digits {
    const char *integer, *fraction;
    size_t integer_length, fraction_length;
};

static int digit_at(const struct digits *d, size_t k)
{
    char c = k < d->integer_length ? d->integer[k] : d->fraction[k - d->integer_length];
    return c - '0';
}

/* The grammar of a JSON number; 0 with its parts, or -1. */
static int split_number(const char *text, size_t length, bool *negative, struct digits *d,
                        int64_t *exponent)
{
    size_t i = 0;
    *negative = length > 0 && text[0] == '-';
    i += *negative;
    d->integer = text + i;
    while (i < length && is_digit(text[i]))
        i++;
    d->integer_length = (size_t)(text + i - d->integer);
    if (d->integer_length == 0 || (d->integer[0] == '0' && d->integer_length > 1))
        return -1;
    d->fraction = text + i;
    d->fraction_length = 0;
    if (i < length && text[i] == '.') {
        d->fraction = text + ++i;
        while (i < length && is_digit(text[i]))
            i++;
        d->fraction_length = (size_t)(text + i - d->fraction);
        if (d->fraction_length == 0)
            return -1;
    }
    *exponent = 0;
    if (i < length && (text[i] == 'e' || text[i] == 'E')) {
        bool below = ++i < length && text[i] == '-';
        i += i < length && (text[i] == '-' || text[i] == '+');
        size_t start = i;
        for (; i < length && is_digit(text[i]); i++)
            *exponent = *exponent >= EXPONENT_CAP ? EXPONENT_CAP : *exponent * 10 + (text[i] - '0');
        if (i == start)
            return -1;
        *exponent = below ? -*exponent : *exponent;
    }
    return i == length ? 0 : -1;
}

enum gw_price_result gw_price_usd_per_token(const char *text, size_t length, uint64_t *out)
{
    assert(text != NULL || length == 0);
    bool negative;
    struct digits d;
    int64_t exponent;
    if (split_number(text, length, &negative, &d, &exponent) != 0)
        return GW_PRICE_NOT_A_NUMBER;
    size_t total = d.integer_length + d.fraction_length, first = 0;
    while (first < total && digit_at(&d, first) == 0)
        first++;
    if (first == total) {
        *out = 0; /* zero, -0 too */
        return GW_PRICE_OK;
    }
    if (negative)
        return GW_PRICE_NEGATIVE;
    /* value = D x 10^(exponent - fraction_length), D the significant digits
     * (n of them, the first not 0); times 10^12 it has n + scale digits
     * before the point. Sizes are below 2^32 and the exponent is capped:
     * no overflow in int64. */
    int64_t n = (int64_t)(total - first);
    int64_t scale = exponent - (int64_t)d.fraction_length + MICROS_PER_MTOK_EXPONENT;
    int64_t integer_digits = n + scale;
    if (integer_digits > INTEGER_DIGITS_MAX)
        return GW_PRICE_TOO_LARGE;
    uint64_t value = 0;
    for (int64_t j = 0; j < integer_digits; j++) /* at most 19 digits: fits uint64 */
        value = value * 10 + (uint64_t)(j < n ? digit_at(&d, first + (size_t)j) : 0);
    bool fraction = false;
    for (int64_t j = integer_digits > 0 ? integer_digits : 0; j < n && !fraction; j++)
        fraction = digit_at(&d, first + (size_t)j) != 0;
    if (value > AMOUNT_MAX - (fraction ? 1 : 0))
        return GW_PRICE_TOO_LARGE;
    *out = value + (fraction ? 1 : 0); /* rounded up: never below what is billed */
    return GW_PRICE_OK;
}

const char *gw_price_result_text(enum gw_price_result result)
{
    switch (result) {
    case GW_PRICE_OK:
        return "ok";
    case GW_PRICE_NOT_A_NUMBER:
        return "must be a number (USD per token)";
    case GW_PRICE_NEGATIVE:
        return "must be 0 or more";
    case GW_PRICE_TOO_LARGE:
        return "is above 9223372036854775807 usd_micros per million tokens";
    }
    return "unknown";
}

const char *gw_price_field_name(enum gw_price_field field)
{
    static const char *const names[GW_PRICE_FIELDS] = {
        [GW_PRICE_INPUT] = "input_cost_per_token",
        [GW_PRICE_CACHED_INPUT] = "cache_read_input_token_cost",
        [GW_PRICE_CACHE_WRITE_5M] = "cache_creation_input_token_cost",
        [GW_PRICE_CACHE_WRITE_1H] = "cache_creation_input_token_cost_above_1hr",
        [GW_PRICE_OUTPUT] = "output_cost_per_token",
        [GW_PRICE_REASONING_OUTPUT] = "output_cost_per_reasoning_token",
    };
    assert(field >= GW_PRICE_INPUT && field < GW_PRICE_FIELDS);
    return names[field];
}

/* ---- the file ---- */

struct entry {
    const char *name; /* in the text (decoded in place when it had escapes) */
    uint32_t name_length;
    uint32_t line;
    size_t start, end; /* the value's bytes */
};

struct gw_prices {
    char *name; /* the file's, for messages */
    char *text;
    size_t length;
    struct entry *entries; /* sorted by name */
    uint32_t count;
};

struct scan {
    struct gw_prices *prices;
    size_t pos;
    uint32_t line;
    char *error;
    size_t error_size;
};

__attribute__((format(printf, 2, 3))) static int scan_fail(struct scan *s, const char *format, ...)
{
    char reason[256];
    va_list ap;
    va_start(ap, format);
    vsnprintf(reason, sizeof reason, format, ap);
    va_end(ap);
    snprintf(s->error, s->error_size, "%s: line %u: %s", s->prices->name, s->line, reason);
    return -1;
}

static void skip_space(struct scan *s)
{
    const char *t = s->prices->text;
    for (; s->pos < s->prices->length; s->pos++) {
        if (t[s->pos] == '\n')
            s->line++;
        else if (t[s->pos] != ' ' && t[s->pos] != '\t' && t[s->pos] != '\r')
            break;
    }
}

/* At a '"': past its closing quote. *escaped says whether it held a '\'. */
static int skip_string(struct scan *s, bool *escaped)
{
    const char *t = s->prices->text;
    *escaped = false;
    for (s->pos++; s->pos < s->prices->length; s->pos++) {
        if (t[s->pos] == '"') {
            s->pos++;
            return 0;
        }
        s->line += t[s->pos] == '\n';
        if (t[s->pos] == '\\') {
            *escaped = true;
            s->pos++; /* the escaped character, whatever it is */
        }
    }
    return scan_fail(s, "unterminated string");
}

/* Past one value, without checking it beyond its strings and brackets:
 * entries no model asks for are never read. */
static int skip_value(struct scan *s)
{
    const char *t = s->prices->text;
    size_t end = s->prices->length;
    bool escaped;
    if (s->pos >= end)
        return scan_fail(s, "unexpected end of the file");
    if (t[s->pos] == '"')
        return skip_string(s, &escaped);
    if (t[s->pos] != '{' && t[s->pos] != '[') { /* a number or a literal */
        size_t start = s->pos;
        while (s->pos < end && strchr(",}] \t\r\n", t[s->pos]) == NULL)
            s->pos++;
        return s->pos > start ? 0 : scan_fail(s, "a value expected");
    }
    uint32_t depth = 0;
    while (s->pos < end) {
        char c = t[s->pos];
        if (c == '"') {
            if (skip_string(s, &escaped) != 0)
                return -1;
            continue;
        }
        if ((c == '{' || c == '[') && ++depth > GW_JSON_DEPTH_MAX)
            return scan_fail(s, "nested deeper than %d levels", GW_JSON_DEPTH_MAX);
        depth -= c == '}' || c == ']';
        s->line += c == '\n';
        s->pos++;
        if (depth == 0)
            return 0;
    }
    return scan_fail(s, "unexpected end of the file");
}

/* A member's name: kept in place, escapes decoded by the strict parser. */
static int read_name(struct scan *s, struct entry *e, struct arena *scratch)
{
    size_t start = s->pos;
    bool escaped;
    if (skip_string(s, &escaped) != 0)
        return -1;
    char *text = s->prices->text + start;
    size_t length = s->pos - start;
    e->name = text + 1;
    e->name_length = (uint32_t)(length - 2);
    if (!escaped)
        return 0;
    struct jdoc_value *root;
    char reason[160];
    if (jdoc_parse(text, length, scratch, &root, reason, sizeof reason) != 0)
        return scan_fail(s, "%s", reason);
    e->name = root->as.string;
    e->name_length = root->count;
    return 0;
}

static int read_member(struct scan *s, struct entry *e, struct arena *scratch)
{
    skip_space(s);
    if (s->pos >= s->prices->length || s->prices->text[s->pos] != '"')
        return scan_fail(s, "a string (a model's name) expected");
    e->line = s->line;
    if (read_name(s, e, scratch) != 0)
        return -1;
    skip_space(s);
    if (s->pos >= s->prices->length || s->prices->text[s->pos] != ':')
        return scan_fail(s, "':' expected");
    s->pos++;
    skip_space(s);
    e->start = s->pos;
    if (skip_value(s) != 0)
        return -1;
    e->end = s->pos;
    return 0;
}

static int index_entries(struct scan *s, struct arena *scratch)
{
    struct gw_prices *p = s->prices;
    skip_space(s);
    if (s->pos >= p->length || p->text[s->pos] != '{')
        return scan_fail(s, "must be a JSON object");
    s->pos++;
    skip_space(s);
    if (s->pos < p->length && p->text[s->pos] == '}')
        s->pos++;
    else
        for (;;) {
            if (p->count == GW_PRICES_ENTRIES_MAX)
                return scan_fail(s, "more than %d entries", GW_PRICES_ENTRIES_MAX);
            if (read_member(s, &p->entries[p->count], scratch) != 0)
                return -1;
            p->count++;
            skip_space(s);
            char c = s->pos < p->length ? p->text[s->pos++] : '\0';
            if (c == '}')
                break;
            if (c != ',')
                return scan_fail(s, "',' or '}' expected");
        }
    skip_space(s);
    if (s->pos != p->length)
        return scan_fail(s, "end of the file expected");
    return 0;
}

static int compare_entries(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    uint32_t n = x->name_length < y->name_length ? x->name_length : y->name_length;
    int order = memcmp(x->name, y->name, n);
    if (order != 0)
        return order;
    if (x->name_length != y->name_length)
        return x->name_length < y->name_length ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start); /* file order among equals */
}

void gw_prices_free(struct gw_prices *prices)
{
    if (prices == NULL)
        return;
    free(prices->entries);
    free(prices->text);
    free(prices->name);
    free(prices);
}

int gw_prices_parse(const char *name, const char *text, size_t length, struct gw_prices **out,
                    char *error, size_t error_size)
{
    assert(name != NULL && out != NULL && error != NULL && error_size > 0);
    *out = NULL;
    if (length > GW_PRICES_FILE_BYTES_MAX) {
        snprintf(error, error_size, "%s: larger than %d bytes", name, GW_PRICES_FILE_BYTES_MAX);
        return -1;
    }
    /* Each entry takes at least 6 bytes ("a":0,): a count from the size. */
    size_t room = length / 6 + 1 < GW_PRICES_ENTRIES_MAX ? length / 6 + 1 : GW_PRICES_ENTRIES_MAX;
    struct gw_prices *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->name = strdup(name);
        p->text = malloc(length + 1);
        p->entries = malloc(room * sizeof *p->entries);
    }
    if (p == NULL || p->name == NULL || p->text == NULL || p->entries == NULL) {
        snprintf(error, error_size, "%s: out of memory", name);
        gw_prices_free(p);
        return -1;
    }
    memcpy(p->text, text, length);
    p->text[length] = '\0';
    p->length = length;
    struct arena scratch;
    arena_init(&scratch, NULL, 0);
    struct scan s = {.prices = p, .line = 1, .error = error, .error_size = error_size};
    int result = index_entries(&s, &scratch);
    arena_free(&scratch);
    if (result != 0) {
        gw_prices_free(p);
        return -1;
    }
    assert(p->count <= room);
    qsort(p->entries, p->count, sizeof *p->entries, compare_entries);
    *out = p;
    return 0;
}

int gw_prices_load(const char *path, struct gw_prices **out, char *error, size_t error_size)
{
    *out = NULL;
    char *data;
    size_t size;
    if (file_read_all(path, GW_PRICES_FILE_BYTES_MAX, &data, &size, error, error_size) != 0)
        return -1;
    int result = gw_prices_parse(path, data, size, out, error, error_size);
    free(data);
    return result;
}

/* ---- one entry ---- */

struct entry_context {
    const struct gw_prices *prices;
    const struct entry *entry;
    char *error;
    size_t error_size;
};

/* "<file>: line L: '<name>'.<field>: <reason>" */
__attribute__((format(printf, 4, 5))) static int
fail_at(const struct entry_context *c, uint32_t line, const char *field, const char *format, ...)
{
    char reason[256], name[72];
    va_list ap;
    va_start(ap, format);
    vsnprintf(reason, sizeof reason, format, ap);
    va_end(ap);
    uint32_t n = c->entry->name_length < 64 ? c->entry->name_length : 64;
    for (uint32_t i = 0; i < n; i++) {
        char ch = c->entry->name[i];
        name[i] = ch >= 0x20 && ch < 0x7f ? ch : '?';
    }
    name[n] = '\0';
    snprintf(c->error, c->error_size, "%s: line %u: '%s%s'%s%s: %s", c->prices->name, line, name,
             n < c->entry->name_length ? "..." : "", field[0] != '\0' ? "." : "", field, reason);
    return -1;
}

static int entry_price(const struct entry_context *c, const struct jdoc_value *value, uint32_t line,
                       enum gw_price_field field, struct gw_price_entry *out)
{
    const char *name = gw_price_field_name(field);
    enum gw_price_result result = GW_PRICE_NOT_A_NUMBER;
    uint64_t micros = 0;
    if (jdoc_is(value, JDOC_REAL)) {
        result = gw_price_usd_per_token(value->as.number, value->count, &micros);
    } else if (jdoc_is(value, JDOC_INTEGER)) {
        char digits[24];
        int n = snprintf(digits, sizeof digits, "%lld", (long long)value->as.integer);
        result = gw_price_usd_per_token(digits, (size_t)n, &micros);
    }
    if (result != GW_PRICE_OK)
        return fail_at(c, line, name, "%s", gw_price_result_text(result));
    out->usd_micros_per_mtok[field] = micros;
    out->present |= 1u << field;
    return 0;
}

static int entry_fields(const struct entry_context *c, const struct jdoc_value *root,
                        struct gw_price_entry *out)
{
    uint32_t base = c->entry->line - 1; /* the value's lines count from its own start */
    if (!jdoc_is(root, JDOC_OBJECT))
        return fail_at(c, base + root->line, "", "must be an object");
    for (int f = GW_PRICE_INPUT; f < GW_PRICE_FIELDS; f++) {
        const struct jdoc_value *value = jdoc_get(root, gw_price_field_name(f));
        if (value != NULL && value->kind != JDOC_NULL &&
            entry_price(c, value, base + value->line, (enum gw_price_field)f, out) != 0)
            return -1;
    }
    const struct jdoc_value *max = jdoc_get(root, "max_output_tokens");
    if (max == NULL || max->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(max, JDOC_INTEGER) || max->as.integer < 1 ||
        max->as.integer > GW_OUTPUT_TOKENS_MAX)
        return fail_at(c, base + max->line, "max_output_tokens", "must be an integer 1..%u",
                       GW_OUTPUT_TOKENS_MAX);
    out->max_output_tokens = (uint64_t)max->as.integer;
    return 0;
}

static const struct entry *find_entry(const struct gw_prices *p, const char *name, size_t length)
{
    uint32_t low = 0, high = p->count;
    while (low < high) { /* the first entry not below name */
        uint32_t middle = low + (high - low) / 2;
        const struct entry *e = &p->entries[middle];
        size_t n = e->name_length < length ? e->name_length : length;
        int order = memcmp(e->name, name, n);
        if (order == 0)
            order = (e->name_length > length) - (e->name_length < length);
        if (order < 0)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == p->count || p->entries[low].name_length != length ||
        memcmp(p->entries[low].name, name, length) != 0)
        return NULL;
    return &p->entries[low];
}

int gw_prices_find(const struct gw_prices *prices, const char *name, size_t length,
                   struct gw_price_entry *out, char *error, size_t error_size)
{
    assert(prices != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    const struct entry *e = find_entry(prices, name, length);
    if (e == NULL)
        return 0;
    struct entry_context c = {prices, e, error, error_size};
    const struct entry *next = e + 1;
    if (next < prices->entries + prices->count && next->name_length == e->name_length &&
        memcmp(next->name, e->name, e->name_length) == 0)
        return fail_at(&c, next->line, "", "appears more than once (also on line %u)", e->line);
    out->line = e->line;
    /* Parsed from a copy: the parser decodes strings in place, and an entry
     * may be asked for by more than one model. */
    size_t size = e->end - e->start;
    char *copy = malloc(size + 1);
    if (copy == NULL)
        return fail_at(&c, e->line, "", "out of memory");
    memcpy(copy, prices->text + e->start, size);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    char reason[200];
    int result =
        jdoc_parse_nested(copy, size, GW_JSON_DEPTH_MAX, &arena, &root, reason, sizeof reason) != 0
            ? fail_at(&c, e->line, "", "%s", reason)
            : entry_fields(&c, root, out);
    arena_free(&arena);
    free(copy);
    return result == 0 ? 1 : -1;
}
