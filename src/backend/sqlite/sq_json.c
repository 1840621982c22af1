/* The sqlite backend's JSON columns: a lease's items and an event_log
 * row's events (their layout is in sq_schema.c) are JSON arrays of arrays,
 * written here without a JSON library and read back by a scanner that
 * takes only what these writers (and the version 1 migration's
 * json_array) produce. */
#include "sq_json.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sq_bounds.h"
#include "sq_holds.h"
#include "sq_leases.h"

/* In the order of enum sq_item_state. */
static const char *const item_state_names[] = {"reserved", "committed", "released", "expired",
                                               "committed_post_expiry"};
#define ITEM_STATES (sizeof item_state_names / sizeof item_state_names[0])
_Static_assert(ITEM_STATES == SQ_ITEM_COMMITTED_POST_EXPIRY + 1, "a name per item state");

static const char *item_state_name(enum sq_item_state state)
{
    assert((size_t)state < ITEM_STATES);
    return item_state_names[state];
}

static int item_state_parse(const char *name, size_t length, enum sq_item_state *out)
{
    for (size_t i = 0; i < ITEM_STATES; i++) {
        if (strlen(item_state_names[i]) == length &&
            memcmp(name, item_state_names[i], length) == 0) {
            *out = (enum sq_item_state)i;
            return 0;
        }
    }
    return -1;
}

/* ---- Text. */

static bool text_room(struct sq_text *t, size_t extra)
{
    assert(t->length <= t->capacity);
    assert(extra <= SIZE_MAX / 4); /* a few elements of bounded size */
    if (t->length + extra + 1 <= t->capacity)
        return true;
    size_t capacity = t->capacity == 0 ? 4096 : t->capacity;
    while (capacity < t->length + extra + 1)
        capacity *= 2;
    char *data = realloc(t->data, capacity);
    if (data == NULL)
        return false;
    t->data = data;
    t->capacity = capacity;
    assert(t->length + extra + 1 <= t->capacity);
    return true;
}

/* Unchecked writers for the JSON below: the caller has made room first. */
static char *put_i64(char *at, int64_t value)
{
    char digits[24];
    char *end = digits + sizeof digits, *d = end;
    uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        *--d = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0)
        *--d = '-';
    assert(end - d <= 20); /* "-9223372036854775808" */
    memcpy(at, d, (size_t)(end - d));
    return at + (end - d);
}

static char *put_text(char *at, const char *s, size_t length)
{
    memcpy(at, s, length);
    return at + length;
}

#define PUT_LITERAL(at, s) put_text((at), (s), sizeof(s) - 1)

/* A JSON string: " and \ escaped, control characters as \u00XX (a caller
 * may hold any), other bytes (UTF-8 included) as they are. */
static char *put_string(char *at, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    assert(s != NULL);
    *at++ = '"';
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20) {
            at = PUT_LITERAL(at, "\\u00");
            *at++ = hex[c >> 4];
            *at++ = hex[c & 15];
            continue;
        }
        if (c == '"' || c == '\\')
            *at++ = '\\';
        *at++ = (char)c;
    }
    *at++ = '"';
    return at;
}

/* Room for one array element: numbers, punctuation and escaped strings
 * (a control character of a caller takes 6 bytes). */
#define JSON_ELEMENT_BYTES                                                                         \
    (16 * 24 + 2 * (LIMIT_KEY_LENGTH_MAX + LEASE_ID_LENGTH_MAX + 128) + 6 * CALLER_LENGTH_MAX)

bool sq_items_json(const struct sq_lease_rec *rec, struct sq_text *t)
{
    t->length = 0;
    if (!text_room(t, (size_t)(rec->item_count + 1) * JSON_ELEMENT_BYTES))
        return false;
    char *at = t->data;
    *at++ = '[';
    assert(rec->item_count <= REQUIREMENTS_PER_RESERVE_MAX);
    for (uint32_t i = 0; i < rec->item_count; i++) {
        const struct sq_lease_item *item = &rec->items[i];
        const char *element = at;
        assert(item->amount <= AMOUNT_MAX);
        assert(item->held <= AMOUNT_MAX);
        assert(item->debt <= AMOUNT_MAX);
        if (i > 0)
            *at++ = ',';
        *at++ = '[';
        at = put_i64(at, item->limit_id);
        *at++ = ',';
        at = put_i64(at, (int64_t)item->amount);
        *at++ = ',';
        at = put_string(at, item_state_name(item->state));
        *at++ = ',';
        at = item->actual >= 0 ? put_i64(at, item->actual) : PUT_LITERAL(at, "null");
        *at++ = ',';
        at = put_i64(at, (int64_t)item->held);
        *at++ = ',';
        at = put_i64(at, (int64_t)item->debt);
        at = item->live ? PUT_LITERAL(at, ",1,") : PUT_LITERAL(at, ",0,");
        at = put_i64(at, item->period_start_ms);
        *at++ = ',';
        at = put_i64(at, item->expires_at_ms);
        *at++ = ',';
        at = item->committed_at_ms != 0 ? put_i64(at, item->committed_at_ms)
                                        : PUT_LITERAL(at, "null");
        *at++ = ']';
        assert((size_t)(at - element) <= JSON_ELEMENT_BYTES); /* within the room made */
    }
    *at++ = ']';
    *at = '\0';
    t->length = (size_t)(at - t->data);
    return true;
}

bool sq_events_json(const struct sq_lease_rec *rec, struct sq_text *t)
{
    t->length = 0;
    if (!text_room(t, (size_t)(rec->event_count + 1) * JSON_ELEMENT_BYTES))
        return false;
    char *at = t->data;
    *at++ = '[';
    assert(rec->event_count <= SQ_EVENT_ITEMS); /* one event_log row */
    for (uint32_t i = 0; i < rec->event_count; i++) {
        const struct sq_lease_event *e = &rec->events[i];
        const char *element = at;
        assert(e->type != NULL);
        assert(e->detail != NULL);
        if (i > 0)
            *at++ = ',';
        *at++ = '[';
        at = put_i64(at, e->at_ms);
        *at++ = ',';
        at = put_string(at, e->type);
        *at++ = ',';
        at = put_i64(at, e->limit_id);
        *at++ = ',';
        at = put_i64(at, (int64_t)e->amount);
        *at++ = ',';
        at = put_i64(at, (int64_t)e->actual);
        *at++ = ',';
        at = put_string(at, e->detail);
        *at++ = ']';
        assert((size_t)(at - element) <= JSON_ELEMENT_BYTES);
    }
    *at++ = ']';
    *at = '\0';
    t->length = (size_t)(at - t->data);
    return true;
}

/* The `expired` events of one transaction's audited expiries: each item
 * names its lease and caller, as the row is shared by several leases. */
bool sq_expiries_json(const struct sq_expiry *expiries, uint32_t count, struct sq_text *t,
                      uint32_t *audited)
{
    t->length = 0;
    if (!text_room(t, (size_t)(count + 1) * JSON_ELEMENT_BYTES))
        return false;
    char *at = t->data;
    *at++ = '[';
    *audited = 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct sq_expiry *e = &expiries[i];
        if (!e->audited)
            continue;
        const char *element = at;
        if ((*audited)++ > 0)
            *at++ = ',';
        *at++ = '[';
        at = put_i64(at, e->at_ms);
        at = PUT_LITERAL(at, ",\"expired\",");
        at = put_i64(at, e->limit_id);
        *at++ = ',';
        at = put_i64(at, (int64_t)e->amount);
        at = PUT_LITERAL(at, ",0,\"\",");
        at = put_string(at, e->lease != NULL ? e->lease->text : "");
        *at++ = ',';
        at = put_string(at, e->lease != NULL ? sq_lease_ref_caller(e->lease) : "");
        *at++ = ']';
        assert((size_t)(at - element) <= JSON_ELEMENT_BYTES);
    }
    assert(*audited <= count);
    *at++ = ']';
    *at = '\0';
    t->length = (size_t)(at - t->data);
    return true;
}

/* ---- Reading our own JSON arrays (what sq_items_json, sq_events_json and the
 * version 1 migration's json_array write). */

struct scan {
    const char *at;
};

static void skip_space(struct scan *s)
{
    while (*s->at == ' ' || *s->at == '\n' || *s->at == '\t' || *s->at == '\r')
        s->at++;
}

static bool expect(struct scan *s, char c)
{
    skip_space(s);
    if (*s->at != c)
        return false;
    s->at++;
    return true;
}

/* An integer, or null (then *is_null). */
static bool scan_i64(struct scan *s, int64_t *out, bool *is_null)
{
    skip_space(s);
    if (is_null != NULL)
        *is_null = false;
    if (strncmp(s->at, "null", 4) == 0 && is_null != NULL) {
        s->at += 4;
        *is_null = true;
        *out = 0;
        return true;
    }
    char *end = NULL;
    errno = 0;
    long long value = strtoll(s->at, &end, 10);
    if (end == s->at || errno != 0)
        return false;
    s->at = end;
    *out = value;
    return true;
}

static bool scan_u64(struct scan *s, uint64_t *out)
{
    int64_t value;
    if (!scan_i64(s, &value, NULL) || value < 0)
        return false;
    *out = (uint64_t)value;
    return true;
}

/* A string into out (NUL-terminated, at most size - 1 bytes). */
static bool scan_string(struct scan *s, char *out, size_t size)
{
    assert(out != NULL);
    assert(size >= 1);
    if (!expect(s, '"'))
        return false;
    size_t used = 0;
    for (;;) {
        char c = *s->at++;
        if (c == '\0')
            return false;
        if (c == '"')
            break;
        if (c == '\\') {
            char e = *s->at++;
            switch (e) {
            case '"':
            case '\\':
            case '/':
                c = e;
                break;
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'u': {
                unsigned code = 0;
                for (int i = 0; i < 4; i++) {
                    char h = *s->at++;
                    unsigned digit = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                                            : 16u;
                    if (digit == 16u)
                        return false;
                    code = code * 16 + digit;
                }
                if (code == 0 || code > 0x7f)
                    return false; /* never written by us */
                c = (char)code;
                break;
            }
            default:
                return false;
            }
        }
        if (used + 1 >= size)
            return false;
        out[used++] = c;
    }
    assert(used < size);
    out[used] = '\0';
    return true;
}

/* Starts an array of arrays; true while another element follows. */
static bool next_element(struct scan *s, bool first)
{
    skip_space(s);
    if (*s->at == ']')
        return false;
    return first || expect(s, ',');
}

static int item_parse(struct scan *s, struct sq_lease_item *item)
{
    char text[LIMIT_KEY_LENGTH_MAX + 1];
    int64_t live, actual, committed_at;
    bool actual_null, committed_null;
    if (!expect(s, '[') || !scan_i64(s, &item->limit_id, NULL) || !expect(s, ',') ||
        !scan_u64(s, &item->amount) || !expect(s, ',') || !scan_string(s, text, sizeof text) ||
        item_state_parse(text, strlen(text), &item->state) != 0 || !expect(s, ',') ||
        !scan_i64(s, &actual, &actual_null) || !expect(s, ',') || !scan_u64(s, &item->held) ||
        !expect(s, ',') || !scan_u64(s, &item->debt) || !expect(s, ',') ||
        !scan_i64(s, &live, NULL) || !expect(s, ',') ||
        !scan_i64(s, &item->period_start_ms, NULL) || !expect(s, ',') ||
        !scan_i64(s, &item->expires_at_ms, NULL) || !expect(s, ',') ||
        !scan_i64(s, &committed_at, &committed_null) || !expect(s, ']'))
        return -1;
    assert((size_t)item->state < ITEM_STATES); /* item_state_parse took it */
    item->actual = actual_null ? -1 : actual;
    item->committed_at_ms = committed_null ? 0 : committed_at;
    item->live = live != 0;
    return 0;
}

int sq_lease_items_parse(struct sq_lease_rec *rec, const char *json)
{
    assert(json != NULL);
    struct scan s = {json};
    rec->item_count = 0;
    if (!expect(&s, '['))
        return -1;
    for (bool first = true; next_element(&s, first); first = false) {
        if (rec->item_count == REQUIREMENTS_PER_RESERVE_MAX)
            return -1;
        if (rec->item_count == rec->item_capacity) {
            struct sq_lease_item *items = malloc(REQUIREMENTS_PER_RESERVE_MAX * sizeof *items);
            if (items == NULL)
                return -1;
            memcpy(items, rec->items, rec->item_count * sizeof *items);
            if (rec->items != rec->inline_items)
                free(rec->items);
            rec->items = items;
            rec->item_capacity = REQUIREMENTS_PER_RESERVE_MAX;
        }
        assert(rec->item_count < rec->item_capacity);
        if (item_parse(&s, &rec->items[rec->item_count]) != 0)
            return -1;
        rec->item_count++;
    }
    return expect(&s, ']') ? 0 : -1;
}

void sq_event_reader_start(struct sq_event_reader *reader, const char *json)
{
    assert(json != NULL);
    struct scan s = {json};
    reader->at = expect(&s, '[') ? s.at : NULL;
}

int sq_event_reader_next(struct sq_event_reader *reader, struct sq_event_item_text *out)
{
    if (reader->at == NULL)
        return -1;
    struct scan s = {reader->at};
    skip_space(&s);
    if (*s.at == ']')
        return 0;
    if (*s.at == ',')
        s.at++;
    if (!expect(&s, '[') || !scan_i64(&s, &out->at_ms, NULL) || !expect(&s, ',') ||
        !scan_string(&s, out->type, sizeof out->type) || !expect(&s, ',') ||
        !scan_i64(&s, &out->limit_id, NULL) || !expect(&s, ',') || !scan_u64(&s, &out->amount) ||
        !expect(&s, ',') || !scan_u64(&s, &out->actual) || !expect(&s, ',') ||
        !scan_string(&s, out->detail, sizeof out->detail)) {
        reader->at = NULL;
        return -1;
    }
    skip_space(&s);
    out->has_lease = *s.at == ',';
    if (out->has_lease &&
        (!expect(&s, ',') || !scan_string(&s, out->lease_id, sizeof out->lease_id) ||
         !expect(&s, ',') || !scan_string(&s, out->caller, sizeof out->caller))) {
        reader->at = NULL;
        return -1;
    }
    if (!expect(&s, ']')) {
        reader->at = NULL;
        return -1;
    }
    assert(s.at > reader->at); /* an item was read: the row's walk ends */
    reader->at = s.at;
    return 1;
}
