/* One pass over a reserve body in its plain shape (see reserve_scan.h).
 * Every check here is one the general path makes too; where this one is
 * stricter (strings with escapes or non-ASCII bytes, amounts of 19 digits
 * or more) it gives up and the general path decides. Nothing is written to
 * the body until the whole of it has scanned. */
#include "reserve_scan.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "core/bounds.h"
#include "util/jdoc.h"

/* The smallest encodings, which bound how many items a body of a given
 * length can hold: {"key":"k","amount":1} and
 * {"lease_id":"x","requirements":[<requirement>]}. */
#define REQUIREMENT_BYTES_MIN 22
#define RESERVE_BYTES_MIN 56

struct scan {
    const char *p;
    const char *end;
};

static void skip_space_slow(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\t' || *s->p == '\r'))
        s->p++;
}

/* Every JSON space is at most ' ': one compare tells there is none. */
static inline void skip_space(struct scan *s)
{
    if (s->p < s->end && (unsigned char)*s->p <= ' ')
        skip_space_slow(s);
}

/* Consumes the next token if it is c (tried first without spaces). */
static inline bool take(struct scan *s, char c)
{
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A string of plain bytes (printable ASCII but '"' and '\'); *classes gets
 * the JDOC_*_CHARS every byte has. */
static bool scan_string(struct scan *s, const char **out, uint32_t *length, unsigned *classes)
{
    if (!take(s, '"'))
        return false;
    const char *start = s->p;
    unsigned seen = JDOC_KEY_CHARS | JDOC_LEASE_CHARS;
    const char *p = start + jdoc_plain_run(start, s->end, &seen);
    assert(p <= s->end);
    if (p == s->end || *p != '"')
        return false; /* an escape, a control or non-ASCII byte, or no end */
    *out = start;
    *length = (uint32_t)(p - start);
    *classes = seen;
    s->p = p + 1;
    return true;
}

/* An integer min..max written plainly: digits, no sign, no leading zero
 * (a lone 0 aside); a fraction or exponent stops the caller at the next
 * token. max is under 10^18, so the arithmetic cannot overflow. */
static bool scan_integer(struct scan *s, uint64_t min, uint64_t max, uint64_t *out)
{
    assert(max < UINT64_C(1000000000000000000));
    skip_space(s);
    const char *p = s->p;
    if (p == s->end || *p < '0' || *p > '9')
        return false;
    uint64_t value = (uint64_t)(*p++ - '0');
    while (value != 0 && value <= max && p < s->end && *p >= '0' && *p <= '9')
        value = value * 10 + (uint64_t)(*p++ - '0');
    if (value < min || value > max || (p < s->end && *p >= '0' && *p <= '9'))
        return false;
    *out = value;
    s->p = p;
    return true;
}

/* An amount of 1 to 18 digits (so 1..AMOUNT_MAX; a longer one goes to the
 * general path). */
#define SCAN_AMOUNT_MAX UINT64_C(999999999999999999)
_Static_assert(SCAN_AMOUNT_MAX <= AMOUNT_MAX, "a scanned amount is an amount");

enum member {
    MEMBER_OTHER,
    MEMBER_KEY,
    MEMBER_AMOUNT,
    MEMBER_LEASE_ID,
    MEMBER_REQUIREMENTS,
    MEMBER_CALLER,
    MEMBER_REQUESTS,
    MEMBER_WAIT_MS,
    MEMBER_PRIORITY,
};

/* `"name":` for a name of ours, compared in place with its closing quote
 * (a name written with escapes is MEMBER_OTHER: the general path takes it). */
static enum member scan_member(struct scan *s)
{
    if (!take(s, '"'))
        return MEMBER_OTHER;
    size_t left = (size_t)(s->end - s->p);
    enum member m = MEMBER_OTHER;
    size_t n = 0;
#define NAME(literal, member)                                                                      \
    if (left >= sizeof(literal) && memcmp(s->p, literal "\"", sizeof(literal)) == 0) {             \
        m = member;                                                                                \
        n = sizeof(literal);                                                                       \
    }
    switch (left > 0 ? *s->p : '\0') {
    case 'k':
        NAME("key", MEMBER_KEY);
        break;
    case 'a':
        NAME("amount", MEMBER_AMOUNT);
        break;
    case 'l':
        NAME("lease_id", MEMBER_LEASE_ID);
        break;
    case 'r':
        NAME("requirements", MEMBER_REQUIREMENTS) else NAME("requests", MEMBER_REQUESTS);
        break;
    case 'c':
        NAME("caller", MEMBER_CALLER);
        break;
    case 'w':
        NAME("wait_ms", MEMBER_WAIT_MS);
        break;
    case 'p':
        NAME("priority", MEMBER_PRIORITY);
        break;
    default:
        break;
    }
#undef NAME
    s->p += n;
    return m != MEMBER_OTHER && take(s, ':') ? m : MEMBER_OTHER;
}

/* After a member: ',' (true, *more set) or '}' (true, *more clear). */
static bool member_end(struct scan *s, bool *more)
{
    *more = take(s, ',');
    return *more || take(s, '}');
}

/* {"key":"...","amount":N} in either order. */
static bool scan_requirement(struct scan *s, struct requirement *r)
{
    if (!take(s, '{'))
        return false;
    bool key = false, amount = false, more = true;
    while (more) {
        enum member m = scan_member(s);
        unsigned classes;
        if (m == MEMBER_KEY && !key) {
            if (!scan_string(s, &r->key, &r->key_length, &classes) || !(classes & JDOC_KEY_CHARS) ||
                r->key_length == 0 || r->key_length > LIMIT_KEY_LENGTH_MAX)
                return false;
            key = true;
        } else if (m == MEMBER_AMOUNT && !amount) {
            if (!scan_integer(s, 1, SCAN_AMOUNT_MAX, &r->amount))
                return false;
            amount = true;
        } else {
            return false;
        }
        if (!member_end(s, &more))
            return false;
    }
    return key && amount;
}

/* [<requirement>,...]: 1..REQUIREMENTS_PER_RESERVE_MAX (and at most room),
 * keys unique. */
static bool scan_requirements(struct scan *s, struct requirement *requirements, uint32_t room,
                              uint32_t *count)
{
    if (!take(s, '['))
        return false;
    uint32_t n = 0;
    do {
        if (n == room || n == REQUIREMENTS_PER_RESERVE_MAX)
            return false;
        struct requirement *r = &requirements[n];
        if (!scan_requirement(s, r))
            return false;
        for (uint32_t j = 0; j < n; j++) {
            if (requirements[j].key_length == r->key_length &&
                memcmp(requirements[j].key, r->key, r->key_length) == 0)
                return false;
        }
        n++;
    } while (take(s, ','));
    if (!take(s, ']'))
        return false;
    assert(n >= 1);
    assert(n <= room);
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    *count = n;
    return true;
}

/* "caller": null, or a string of at most CALLER_LENGTH_MAX bytes. */
static bool scan_caller(struct scan *s, struct reserve_request *request)
{
    skip_space(s);
    if (s->end - s->p >= 4 && memcmp(s->p, "null", 4) == 0) {
        s->p += 4;
        return true;
    }
    unsigned classes;
    return scan_string(s, &request->caller, &request->caller_length, &classes) &&
           request->caller_length <= CALLER_LENGTH_MAX;
}

/* One reserve; `wait` NULL for a batch item (whose wait_ms or priority the
 * general path refuses). */
static bool scan_reserve(struct scan *s, struct reserve_request *request,
                         struct requirement *requirements, uint32_t room, struct reserve_wait *wait)
{
    memset(request, 0, sizeof *request);
    if (!take(s, '{'))
        return false;
    bool lease = false, list = false, caller = false, wait_ms = false, priority = false;
    bool more = true;
    while (more) {
        enum member m = scan_member(s);
        unsigned classes;
        if (m == MEMBER_LEASE_ID && !lease) {
            if (!scan_string(s, &request->lease_id, &request->lease_id_length, &classes) ||
                !(classes & JDOC_LEASE_CHARS) || request->lease_id_length == 0 ||
                request->lease_id_length > LEASE_ID_LENGTH_MAX)
                return false;
            lease = true;
        } else if (m == MEMBER_REQUIREMENTS && !list) {
            if (!scan_requirements(s, requirements, room, &request->requirement_count))
                return false;
            list = true;
        } else if (m == MEMBER_CALLER && !caller) {
            if (!scan_caller(s, request))
                return false;
            caller = true;
        } else if (m == MEMBER_WAIT_MS && wait != NULL && !wait_ms) {
            uint64_t ms;
            if (!scan_integer(s, 0, WAIT_MS_MAX, &ms))
                return false;
            wait->wait_ms = (int64_t)ms;
            wait_ms = true;
        } else if (m == MEMBER_PRIORITY && wait != NULL && !priority) {
            uint64_t rank;
            if (!scan_integer(s, 0, WAIT_PRIORITIES - 1, &rank))
                return false;
            wait->priority = (uint8_t)rank;
            priority = true;
        } else {
            return false;
        }
        if (!member_end(s, &more))
            return false;
    }
    request->requirements = requirements;
    return lease && list;
}

static bool at_end(struct scan *s)
{
    skip_space(s);
    return s->p == s->end;
}

/* The strings end where their closing quotes are: terminate them there, as
 * the general parser does. */
static void terminate(char *text, const struct reserve_request *request)
{
    assert(text[request->lease_id + request->lease_id_length - text] == '"');
    text[request->lease_id + request->lease_id_length - text] = '\0';
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[i];
        assert(text[r->key + r->key_length - text] == '"');
        text[r->key + r->key_length - text] = '\0';
    }
    if (request->caller != NULL) {
        assert(text[request->caller + request->caller_length - text] == '"');
        text[request->caller + request->caller_length - text] = '\0';
    }
}

int reserve_scan_one(char *text, size_t length, struct reserve_request *request,
                     struct requirement *requirements, struct reserve_wait *wait)
{
    struct scan s = {text, text + length};
    wait->wait_ms = 0;
    wait->priority = WAIT_PRIORITY_DEFAULT;
    if (!scan_reserve(&s, request, requirements, REQUIREMENTS_PER_RESERVE_MAX, wait) || !at_end(&s))
        return -1;
    terminate(text, request);
    return 0;
}

int reserve_scan_batch(char *text, size_t length, struct arena *arena,
                       struct reserve_request **requests_out, uint32_t *count_out)
{
    size_t request_room = length / RESERVE_BYTES_MIN + 1;
    size_t requirement_room = length / REQUIREMENT_BYTES_MIN + 1;
    if (request_room > BATCH_ITEMS_MAX)
        request_room = BATCH_ITEMS_MAX;
    if (requirement_room > BATCH_REQUIREMENTS_MAX)
        requirement_room = BATCH_REQUIREMENTS_MAX;
    struct reserve_request *requests = arena_alloc_uninit(arena, request_room * sizeof *requests);
    struct requirement *requirements =
        arena_alloc_uninit(arena, requirement_room * sizeof *requirements);
    if (requests == NULL || requirements == NULL)
        return -1;
    struct scan s = {text, text + length};
    if (!take(&s, '{') || scan_member(&s) != MEMBER_REQUESTS || !take(&s, '['))
        return -1;
    uint32_t n = 0;
    size_t used = 0;
    do {
        if (n == request_room)
            return -1;
        if (!scan_reserve(&s, &requests[n], requirements + used,
                          (uint32_t)(requirement_room - used), NULL))
            return -1;
        used += requests[n].requirement_count;
        n++;
        assert(used <= requirement_room);
    } while (take(&s, ','));
    if (!take(&s, ']') || !take(&s, '}') || !at_end(&s))
        return -1;
    assert(n >= 1);
    assert(n <= BATCH_ITEMS_MAX);
    for (uint32_t i = 0; i < n; i++)
        terminate(text, &requests[i]);
    *requests_out = requests;
    *count_out = n;
    return 0;
}
