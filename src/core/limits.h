/* Limit definitions and states (docs/semantics.md; fields in docs/api.md):
 * the types every layer shares, their validation, and the calendar
 * arithmetic of budget periods. Pure functions, no allocation, no I/O but
 * the first use of a time zone (tz.h), which reads its file once. */
#ifndef LLMLIMIT_LIMITS_H
#define LLMLIMIT_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "ids.h" /* limit_key_valid, lease_id_valid */
#include "tz.h"

enum limit_kind {
    LIMIT_KIND_NONE = 0,
    LIMIT_ROLLING = 1,
    LIMIT_CONCURRENCY = 2,
    LIMIT_BUDGET = 3,
};

/* A budget's period. PERIOD_NONE is "not set" (other kinds); the wire's
 * "none" is PERIOD_PREPAID: one period forever. */
enum limit_period {
    PERIOD_NONE = 0,
    PERIOD_DAY = 1,
    PERIOD_WEEK = 2,  /* ISO week: Monday 00:00 to the next Monday */
    PERIOD_MONTH = 3, /* from the anchor day (default the 1st) to the same day next month */
    PERIOD_PREPAID = 4,
};

enum limit_overage {
    OVERAGE_DEBT = 0, /* the default */
    OVERAGE_DENY = 1,
};

enum limit_status {
    LIMIT_ACTIVE = 0,
    LIMIT_DECREASING = 1,
};

/* A limit's alerts (docs/alerts.md): each fires once per limit, threshold
 * and period. */
#define LIMIT_ALERTS_MAX 8         /* alerts on one limit */
#define ALERT_PERCENT_MIN 1        /* at_percent */
#define ALERT_PERCENT_MAX 1000     /* at_percent: a budget in debt may pass 100 */
#define WEBHOOK_URL_LENGTH_MAX 512 /* a limit's own webhook */

struct limit_alert {
    uint16_t at_percent; /* ALERT_PERCENT_MIN..ALERT_PERCENT_MAX; 0 for runout */
    bool runout;         /* runout_before_period_end (budgets) */
};

enum alert_format {
    ALERT_FORMAT_JSON = 0, /* the signed JSON body (the default) */
    ALERT_FORMAT_SLACK = 1,
};

struct limit_definition {
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    enum limit_kind kind;
    uint64_t capacity;
    uint32_t window_seconds;   /* rolling only, else 0 */
    uint32_t timeout_seconds;  /* concurrency, and budget (5..300, default 60) */
    enum limit_period period;  /* budget only */
    uint8_t period_anchor_day; /* month budgets: 1..PERIOD_ANCHOR_DAY_MAX; 0 unset (the 1st) */
    char time_zone[TIME_ZONE_LENGTH_MAX + 1]; /* budgets: a zone name; "" is UTC */
    /* Set by limit_definition_validate from time_zone (NULL for UTC): an
     * interned zone, never freed, so a copy of the definition stays valid. */
    const struct tz_zone *zone;
    char unit[UNIT_LENGTH_MAX + 1];
    char description[DESCRIPTION_LENGTH_MAX + 1];
    enum limit_overage overage;
    /* Last, so the fields the data path reads stay where they were. */
    uint8_t alert_count; /* 0..LIMIT_ALERTS_MAX */
    struct limit_alert alerts[LIMIT_ALERTS_MAX];
    char webhook[WEBHOOK_URL_LENGTH_MAX + 1]; /* "" : the server's --alert-webhook */
    enum alert_format webhook_format;
};

struct limit_state {
    struct limit_definition definition; /* capacity is the one in force */
    enum limit_status status;
    uint64_t pending_decrease_to; /* 0 when active */
};

/* Checks a definition as docs/api.md "PUT /v1/admin/limits" says and
 * normalises it in place (budget timeout default and clamp; the zone of
 * time_zone, read on its first use). Returns 0, or -1 with a message naming
 * the field written to `error` (always NUL-terminated). */
int limit_definition_validate(struct limit_definition *definition, char *error, size_t error_size);

/* Checks a state loaded from the registry: its definition (normalised into
 * definition_out) and, while decreasing, 1 <= pending_decrease_to <
 * capacity. 0, or -1 with the field named in error. */
int limit_state_validate(const struct limit_state *state, struct limit_definition *definition_out,
                         char *error, size_t error_size);

/* Whether two definitions have the same alerts, webhook and format. */
bool limit_alerts_same(const struct limit_definition *a, const struct limit_definition *b);

/* Whether url is an http:// or https:// URL with a host, of printable ASCII
 * without spaces, at most WEBHOOK_URL_LENGTH_MAX bytes. */
bool webhook_url_valid(const char *url);

/* A definition's alerts as text ("80,100,runout"; "" without any), the
 * form a database column keeps, and back. The text form is at most
 * LIMIT_ALERTS_TEXT_SIZE - 1 bytes. parse returns 0, or -1 for a text
 * that is not one (alerts then unset); limit_definition_validate checks the
 * values. */
#define LIMIT_ALERTS_TEXT_SIZE (LIMIT_ALERTS_MAX * 7 + 1)
void limit_alerts_text(const struct limit_definition *d, char out[LIMIT_ALERTS_TEXT_SIZE]);
int limit_alerts_parse_text(const char *text, struct limit_definition *d);

/* Names <-> enums. Parsers return 0 on success, -1 on an unknown name. */
const char *limit_kind_name(enum limit_kind kind);
int limit_kind_parse(const char *name, enum limit_kind *out);
const char *limit_period_name(enum limit_period period); /* "" for NONE, "none" for PREPAID */
int limit_period_parse(const char *name, enum limit_period *out);
const char *limit_overage_name(enum limit_overage overage);
int limit_overage_parse(const char *name, enum limit_overage *out);
const char *limit_status_name(enum limit_status status);
int limit_status_parse(const char *name, enum limit_status *out);
const char *alert_format_name(enum alert_format format);
int alert_format_parse(const char *name, enum alert_format *out);

/* ---- Budget periods (docs/semantics.md "Budgets"). Every backend asks
 * these, so that a period is the same everywhere. */

/* The one period of a prepaid budget (period "none") is [0, this):
 * 10000-01-01T00:00Z, after every time the API takes. */
#define PERIOD_PREPAID_END_MS INT64_C(253402300800000)

struct period_span {
    int64_t start_ms; /* the first instant of the period */
    int64_t end_ms;   /* the first instant of the next one */
};

/* The period of budget d (validated) containing unix_ms (|unix_ms| <=
 * INT64_MAX / 2): start_ms <= unix_ms < end_ms (prepaid: [0,
 * PERIOD_PREPAID_END_MS) whatever unix_ms). Periods start at local
 * midnight in d's zone (UTC without one): the first instant of that local
 * day, which is the end of the gap where a daylight-saving change skips
 * midnight. start_ms names the period: equal for every instant in it,
 * different for every other period of d. */
struct period_span period_span_at(const struct limit_definition *d, int64_t unix_ms);

/* The last span period_memo_span gave, for a limit whose period rule does
 * not change (zeroed: empty). One atomic word, so any thread may read and
 * fill it without a lock: a reserve computes its period's bounds once per
 * period, not once per call. */
struct period_memo {
    _Atomic uint64_t packed; /* start seconds << 22 | length seconds */
};

/* period_span_at, from the memo while unix_ms is inside its span. */
struct period_span period_memo_span(const struct limit_definition *d, struct period_memo *memo,
                                    int64_t unix_ms);
void period_memo_reset(struct period_memo *memo);

/* Whether two budgets have the same periods: period, anchor day (0 is 1)
 * and time zone. A put may not change them (limit_reshape_check). */
bool limit_period_same(const struct limit_definition *a, const struct limit_definition *b);

/* unix_ms as RFC 3339 local time in d's zone, with its offset
 * ("2026-03-29T00:00:00+01:00"; "Z" without a zone). false, with out
 * empty, for an instant outside the years 0..9999. */
#define PERIOD_LOCAL_TEXT_SIZE 32
bool period_local_text(const struct limit_definition *d, int64_t unix_ms,
                       char out[PERIOD_LOCAL_TEXT_SIZE]);

/* How long a hold of this limit lives, in milliseconds: the window for
 * rolling, the timeout for concurrency and budget. */
int64_t limit_hold_duration_ms(const struct limit_definition *definition);

/* Checked arithmetic on amounts: return false on overflow (result untouched). */
static inline bool amount_add(uint64_t a, uint64_t b, uint64_t *result)
{
    if (a > UINT64_MAX - b)
        return false;
    *result = a + b;
    return true;
}

/* a + b, or UINT64_MAX when that overflows: for sums that are only reported
 * or compared against a capacity (at most AMOUNT_MAX), never stored as an
 * exact balance. */
static inline uint64_t amount_add_saturating(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* What a limit has left (docs/api.md, "GET /v1/usage/{key}"): capacity minus
 * reserved and used, and minus debt for a budget (rolling debt is reported
 * but does not block). Negative after an overrun; saturates at INT64_MIN. */
int64_t limit_available(enum limit_kind kind, uint64_t capacity, uint64_t reserved, uint64_t used,
                        uint64_t debt);

#endif
