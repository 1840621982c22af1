/* Validation of limit definitions and UTC calendar arithmetic for budget
 * periods. The civil-date conversion works on days since 1970-01-01 with
 * 400-year eras, so it is exact for every int64 millisecond we accept. */
#include "limits.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define MS_PER_DAY INT64_C(86400000)

static const char *const kind_names[] = {"", "rolling", "concurrency", "budget"};
static const char *const period_names[] = {"", "day", "week", "month"};
static const char *const overage_names[] = {"debt", "deny"};
static const char *const status_names[] = {"active", "decreasing"};

static int name_parse(const char *const *names, int count, int first, const char *name)
{
    assert(name != NULL);
    assert(first >= 0);
    assert(first < count);
    for (int i = first; i < count; i++) {
        if (strcmp(names[i], name) == 0)
            return i;
    }
    return -1;
}

const char *limit_kind_name(enum limit_kind kind)
{
    return (kind >= LIMIT_ROLLING && kind <= LIMIT_BUDGET) ? kind_names[kind] : "";
}

int limit_kind_parse(const char *name, enum limit_kind *out)
{
    assert(out != NULL);
    int i = name_parse(kind_names, 4, 1, name);
    if (i < 0)
        return -1;
    *out = (enum limit_kind)i;
    return 0;
}

const char *limit_period_name(enum limit_period period)
{
    return (period >= PERIOD_DAY && period <= PERIOD_MONTH) ? period_names[period] : "";
}

int limit_period_parse(const char *name, enum limit_period *out)
{
    assert(out != NULL);
    int i = name_parse(period_names, 4, 0, name);
    if (i < 0)
        return -1;
    *out = (enum limit_period)i;
    return 0;
}

const char *limit_overage_name(enum limit_overage overage)
{
    return overage == OVERAGE_DENY ? "deny" : "debt";
}

int limit_overage_parse(const char *name, enum limit_overage *out)
{
    assert(out != NULL);
    int i = name_parse(overage_names, 2, 0, name);
    if (i < 0)
        return -1;
    *out = (enum limit_overage)i;
    return 0;
}

const char *limit_status_name(enum limit_status status)
{
    return status == LIMIT_DECREASING ? "decreasing" : "active";
}

int limit_status_parse(const char *name, enum limit_status *out)
{
    assert(out != NULL);
    int i = name_parse(status_names, 2, 0, name);
    if (i < 0)
        return -1;
    *out = (enum limit_status)i;
    return 0;
}

static int fail(char *error, size_t error_size, const char *message)
{
    assert(error != NULL);
    assert(error_size > 0);
    snprintf(error, error_size, "%s", message);
    return -1;
}

static int validate_kind_fields(struct limit_definition *d, char *error, size_t error_size)
{
    switch (d->kind) {
    case LIMIT_ROLLING:
        if (d->window_seconds == 0)
            return fail(error, error_size, "window_seconds: required (> 0) for a rolling limit");
        if (d->timeout_seconds != 0)
            return fail(error, error_size, "timeout_seconds: not allowed on a rolling limit");
        if (d->period != PERIOD_NONE)
            return fail(error, error_size, "period: not allowed on a rolling limit");
        break;
    case LIMIT_CONCURRENCY:
        if (d->timeout_seconds == 0)
            return fail(error, error_size,
                        "timeout_seconds: required (> 0) for a concurrency limit");
        if (d->window_seconds != 0)
            return fail(error, error_size, "window_seconds: not allowed on a concurrency limit");
        if (d->period != PERIOD_NONE)
            return fail(error, error_size, "period: not allowed on a concurrency limit");
        break;
    case LIMIT_BUDGET:
        if (d->period == PERIOD_NONE)
            return fail(error, error_size, "period: required (day, week or month) for a budget");
        if (d->window_seconds != 0)
            return fail(error, error_size, "window_seconds: not allowed on a budget limit");
        if (d->timeout_seconds == 0)
            d->timeout_seconds = BUDGET_TIMEOUT_SECONDS_DEFAULT;
        if (d->timeout_seconds < BUDGET_TIMEOUT_SECONDS_MIN)
            d->timeout_seconds = BUDGET_TIMEOUT_SECONDS_MIN;
        if (d->timeout_seconds > BUDGET_TIMEOUT_SECONDS_MAX)
            d->timeout_seconds = BUDGET_TIMEOUT_SECONDS_MAX;
        assert(d->timeout_seconds >= BUDGET_TIMEOUT_SECONDS_MIN);
        assert(d->timeout_seconds <= BUDGET_TIMEOUT_SECONDS_MAX);
        break;
    default:
        return fail(error, error_size, "kind: must be rolling, concurrency or budget");
    }
    return 0;
}

int limit_definition_validate(struct limit_definition *d, char *error, size_t error_size)
{
    if (!limit_key_valid(d->key, strnlen(d->key, sizeof d->key)))
        return fail(error, error_size,
                    "key: required, 1-256 bytes of printable ASCII without whitespace");
    if (d->capacity == 0 || d->capacity > AMOUNT_MAX)
        return fail(error, error_size, "capacity: must be 1..9223372036854775807");
    if (d->window_seconds > WINDOW_SECONDS_MAX)
        return fail(error, error_size, "window_seconds: at most 31622400 (366 days)");
    if (d->timeout_seconds > WINDOW_SECONDS_MAX)
        return fail(error, error_size, "timeout_seconds: at most 31622400 (366 days)");
    if (d->overage != OVERAGE_DEBT && d->overage != OVERAGE_DENY)
        return fail(error, error_size, "overage: must be deny or debt");
    if (validate_kind_fields(d, error, error_size) != 0)
        return -1;
    /* Every valid definition holds for a positive time: expiry depends on it. */
    assert(limit_hold_duration_ms(d) > 0);
    return 0;
}

int limit_state_validate(const struct limit_state *state, struct limit_definition *definition_out,
                         char *error, size_t error_size)
{
    assert(state != NULL);
    assert(definition_out != NULL);
    *definition_out = state->definition;
    if (limit_definition_validate(definition_out, error, error_size) != 0)
        return -1;
    if (state->status == LIMIT_DECREASING &&
        (state->pending_decrease_to == 0 || state->pending_decrease_to >= definition_out->capacity))
        return fail(error, error_size,
                    "pending_decrease_to: must be 1..capacity-1 while decreasing");
    return 0;
}

int64_t limit_hold_duration_ms(const struct limit_definition *d)
{
    assert(d->kind >= LIMIT_ROLLING);
    assert(d->kind <= LIMIT_BUDGET);
    uint32_t seconds = d->kind == LIMIT_ROLLING ? d->window_seconds : d->timeout_seconds;
    return (int64_t)seconds * 1000;
}

/* Floor division for negative instants (before 1970). */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* Days since 1970-01-01 -> civil year/month (month 1..12). */
static void civil_from_days(int64_t days, int64_t *year, int *month)
{
    days += 719468;
    int64_t era = floor_div(days, 146097);
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (m <= 2 ? 1 : 0);
    *month = m;
}

/* Civil year/month/day -> days since 1970-01-01. */
static int64_t days_from_civil(int64_t year, int month, int day)
{
    year -= month <= 2 ? 1 : 0;
    int64_t era = floor_div(year, 400);
    int64_t yoe = year - era * 400;
    int64_t mp = month > 2 ? month - 3 : month + 9;
    int64_t doy = (153 * mp + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t period_start_ms(enum limit_period period, int64_t unix_ms)
{
    int64_t days = floor_div(unix_ms, MS_PER_DAY);
    switch (period) {
    case PERIOD_DAY:
        return days * MS_PER_DAY;
    case PERIOD_WEEK: {
        /* 1970-01-01 was a Thursday; Monday is 3 days earlier. */
        int64_t monday = days - (((days + 3) % 7) + 7) % 7;
        return monday * MS_PER_DAY;
    }
    case PERIOD_MONTH: {
        int64_t year;
        int month;
        civil_from_days(days, &year, &month);
        return days_from_civil(year, month, 1) * MS_PER_DAY;
    }
    default:
        return 0;
    }
}

int64_t period_end_ms(enum limit_period period, int64_t unix_ms)
{
    int64_t start = period_start_ms(period, unix_ms);
    switch (period) {
    case PERIOD_DAY:
        return start + MS_PER_DAY;
    case PERIOD_WEEK:
        return start + 7 * MS_PER_DAY;
    case PERIOD_MONTH: {
        int64_t year;
        int month;
        civil_from_days(floor_div(start, MS_PER_DAY), &year, &month);
        if (month == 12)
            return days_from_civil(year + 1, 1, 1) * MS_PER_DAY;
        return days_from_civil(year, month + 1, 1) * MS_PER_DAY;
    }
    default:
        return INT64_MAX;
    }
}

int64_t limit_available(enum limit_kind kind, uint64_t capacity, uint64_t reserved, uint64_t used,
                        uint64_t debt)
{
    assert(kind >= LIMIT_ROLLING);
    assert(kind <= LIMIT_BUDGET);
    assert(capacity <= AMOUNT_MAX);
    uint64_t taken = amount_add_saturating(reserved, used);
    if (kind == LIMIT_BUDGET)
        taken = amount_add_saturating(taken, debt);
    if (taken <= capacity)
        return (int64_t)(capacity - taken);
    uint64_t over = taken - capacity;
    return over >= (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)over;
}
