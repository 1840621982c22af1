/* Limit definitions and states (docs/semantics.md; fields in docs/api.md):
 * the types every layer shares, their validation, and the calendar
 * arithmetic of budget periods. Pure functions, no allocation, no I/O. */
#ifndef LLMLIMIT_LIMITS_H
#define LLMLIMIT_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "ids.h" /* limit_key_valid, lease_id_valid */

enum limit_kind {
    LIMIT_KIND_NONE = 0,
    LIMIT_ROLLING = 1,
    LIMIT_CONCURRENCY = 2,
    LIMIT_BUDGET = 3,
};

enum limit_period {
    PERIOD_NONE = 0,
    PERIOD_DAY = 1,
    PERIOD_WEEK = 2, /* ISO week: Monday 00:00 UTC to the next Monday */
    PERIOD_MONTH = 3,
};

enum limit_overage {
    OVERAGE_DEBT = 0, /* the default */
    OVERAGE_DENY = 1,
};

enum limit_status {
    LIMIT_ACTIVE = 0,
    LIMIT_DECREASING = 1,
};

struct limit_definition {
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    enum limit_kind kind;
    uint64_t capacity;
    uint32_t window_seconds;  /* rolling only, else 0 */
    uint32_t timeout_seconds; /* concurrency, and budget (5..300, default 60) */
    enum limit_period period; /* budget only */
    char unit[UNIT_LENGTH_MAX + 1];
    char description[DESCRIPTION_LENGTH_MAX + 1];
    enum limit_overage overage;
};

struct limit_state {
    struct limit_definition definition; /* capacity is the one in force */
    enum limit_status status;
    uint64_t pending_decrease_to; /* 0 when active */
};

/* Checks a definition as docs/api.md "PUT /v1/admin/limits" says and
 * normalises it in place (budget timeout default and clamp). Returns 0, or
 * -1 with a message naming the field written to `error` (always
 * NUL-terminated). */
int limit_definition_validate(struct limit_definition *definition, char *error, size_t error_size);

/* Checks a state loaded from the registry: its definition (normalised into
 * definition_out) and, while decreasing, 1 <= pending_decrease_to <
 * capacity. 0, or -1 with the field named in error. */
int limit_state_validate(const struct limit_state *state, struct limit_definition *definition_out,
                         char *error, size_t error_size);

/* Names <-> enums. Parsers return 0 on success, -1 on an unknown name. */
const char *limit_kind_name(enum limit_kind kind);
int limit_kind_parse(const char *name, enum limit_kind *out);
const char *limit_period_name(enum limit_period period); /* "" for NONE */
int limit_period_parse(const char *name, enum limit_period *out);
const char *limit_overage_name(enum limit_overage overage);
int limit_overage_parse(const char *name, enum limit_overage *out);
const char *limit_status_name(enum limit_status status);
int limit_status_parse(const char *name, enum limit_status *out);

/* Budget periods in UTC. period_start_ms returns the start of the period
 * containing unix_ms; period_end_ms the start of the next one. */
int64_t period_start_ms(enum limit_period period, int64_t unix_ms);
int64_t period_end_ms(enum limit_period period, int64_t unix_ms);

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
