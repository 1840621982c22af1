/* Validation of limit definitions and the calendar arithmetic of budget
 * periods: local days of a time zone (tz.c) or of UTC, on the civil-date
 * conversion of civil.h, exact for every int64 millisecond we accept. */
#include "limits.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "civil.h"

_Static_assert(TIME_ZONE_LENGTH_MAX == TZ_NAME_LENGTH_MAX, "a time_zone is a zone name");

static const char *const kind_names[] = {"", "rolling", "concurrency", "budget"};
static const char *const period_names[] = {"", "day", "week", "month", "none"};
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
    return (period >= PERIOD_DAY && period <= PERIOD_PREPAID) ? period_names[period] : "";
}

int limit_period_parse(const char *name, enum limit_period *out)
{
    assert(out != NULL);
    int i = name_parse(period_names, 5, 0, name);
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

static const char *const format_names[] = {"json", "slack"};

const char *alert_format_name(enum alert_format format)
{
    return format == ALERT_FORMAT_SLACK ? "slack" : "json";
}

int alert_format_parse(const char *name, enum alert_format *out)
{
    assert(out != NULL);
    int i = name_parse(format_names, 2, 0, name);
    if (i < 0)
        return -1;
    *out = (enum alert_format)i;
    return 0;
}

bool webhook_url_valid(const char *url)
{
    size_t length = strnlen(url, WEBHOOK_URL_LENGTH_MAX + 1);
    if (length > WEBHOOK_URL_LENGTH_MAX)
        return false;
    size_t scheme = strncmp(url, "https://", 8) == 0 ? 8 : strncmp(url, "http://", 7) == 0 ? 7 : 0;
    if (scheme == 0 || length == scheme || url[scheme] == '/' || url[scheme] == ':')
        return false;
    for (size_t i = 0; i < length; i++) {
        if (url[i] <= ' ' || url[i] > '~')
            return false;
    }
    return true;
}

bool limit_alerts_same(const struct limit_definition *a, const struct limit_definition *b)
{
    if (a->alert_count != b->alert_count || a->webhook_format != b->webhook_format ||
        strcmp(a->webhook, b->webhook) != 0)
        return false;
    for (uint32_t i = 0; i < a->alert_count && i < LIMIT_ALERTS_MAX; i++) {
        if (a->alerts[i].at_percent != b->alerts[i].at_percent ||
            a->alerts[i].runout != b->alerts[i].runout)
            return false;
    }
    return true;
}

void limit_alerts_text(const struct limit_definition *d, char out[LIMIT_ALERTS_TEXT_SIZE])
{
    size_t at = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < d->alert_count && i < LIMIT_ALERTS_MAX; i++) {
        int n = d->alerts[i].runout
                    ? snprintf(out + at, LIMIT_ALERTS_TEXT_SIZE - at, "%srunout", i ? "," : "")
                    : snprintf(out + at, LIMIT_ALERTS_TEXT_SIZE - at, "%s%u", i ? "," : "",
                               (unsigned)d->alerts[i].at_percent);
        assert(n > 0);
        at += (size_t)n;
        assert(at < LIMIT_ALERTS_TEXT_SIZE);
    }
}

static int alerts_parse_items(const char *text, struct limit_definition *d)
{
    d->alert_count = 0;
    const char *p = text;
    while (*p != '\0') {
        if (d->alert_count == LIMIT_ALERTS_MAX)
            return -1;
        struct limit_alert *a = &d->alerts[d->alert_count];
        if (strncmp(p, "runout", 6) == 0) {
            *a = (struct limit_alert){.runout = true};
            p += 6;
        } else {
            unsigned value = 0;
            const char *start = p;
            while (*p >= '0' && *p <= '9' && p - start < 4)
                value = value * 10 + (unsigned)(*p++ - '0');
            if (p == start || value > ALERT_PERCENT_MAX)
                return -1;
            *a = (struct limit_alert){.at_percent = (uint16_t)value};
        }
        d->alert_count++;
        if (*p == ',' && p[1] != '\0')
            p++;
        else if (*p != '\0')
            return -1;
    }
    return 0;
}

int limit_alerts_parse_text(const char *text, struct limit_definition *d)
{
    if (alerts_parse_items(text, d) == 0)
        return 0;
    d->alert_count = 0;
    return -1;
}

static int fail(char *error, size_t error_size, const char *message)
{
    assert(error != NULL);
    assert(error_size > 0);
    snprintf(error, error_size, "%s", message);
    return -1;
}

/* The fields of a budget's periods on a limit of another kind: absent. */
static int period_fields_absent(const struct limit_definition *d, const char *kind, char *error,
                                size_t error_size)
{
    char text[96];
    const char *field = d->period != PERIOD_NONE    ? "period"
                        : d->period_anchor_day != 0 ? "period_anchor_day"
                        : d->time_zone[0] != '\0'   ? "time_zone"
                                                    : NULL;
    if (field == NULL)
        return 0;
    snprintf(text, sizeof text, "%s: not allowed on a %s limit", field, kind);
    return fail(error, error_size, text);
}

/* A budget's period, anchor day and time zone (whose zone is looked up). */
static int validate_period(struct limit_definition *d, char *error, size_t error_size)
{
    if (d->period == PERIOD_NONE)
        return fail(error, error_size, "period: required (day, week, month or none) for a budget");
    if (d->period_anchor_day > PERIOD_ANCHOR_DAY_MAX)
        return fail(error, error_size, "period_anchor_day: must be 1..28");
    if (d->period_anchor_day != 0 && d->period != PERIOD_MONTH)
        return fail(error, error_size, "period_anchor_day: only for period month");
    d->zone = NULL;
    if (d->time_zone[0] == '\0')
        return 0;
    if (d->period == PERIOD_PREPAID)
        return fail(error, error_size, "time_zone: not allowed with period none (it never resets)");
    char reason[128];
    if (tz_zone_get(d->time_zone, &d->zone, reason, sizeof reason) != 0) {
        char text[256];
        snprintf(text, sizeof text, "time_zone: %s: %s", d->time_zone, reason);
        return fail(error, error_size, text);
    }
    assert(d->zone != NULL);
    return 0;
}

static int validate_kind_fields(struct limit_definition *d, char *error, size_t error_size)
{
    switch (d->kind) {
    case LIMIT_ROLLING:
        if (d->window_seconds == 0)
            return fail(error, error_size, "window_seconds: required (> 0) for a rolling limit");
        if (d->timeout_seconds != 0)
            return fail(error, error_size, "timeout_seconds: not allowed on a rolling limit");
        return period_fields_absent(d, "rolling", error, error_size);
    case LIMIT_CONCURRENCY:
        if (d->timeout_seconds == 0)
            return fail(error, error_size,
                        "timeout_seconds: required (> 0) for a concurrency limit");
        if (d->window_seconds != 0)
            return fail(error, error_size, "window_seconds: not allowed on a concurrency limit");
        return period_fields_absent(d, "concurrency", error, error_size);
    case LIMIT_BUDGET:
        if (validate_period(d, error, error_size) != 0)
            return -1;
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
        return 0;
    default:
        return fail(error, error_size, "kind: must be rolling, concurrency or budget");
    }
}

/* Each threshold once; runout on budgets only (it is about a period's end). */
static int validate_alerts(const struct limit_definition *d, char *error, size_t error_size)
{
    if (d->alert_count > LIMIT_ALERTS_MAX)
        return fail(error, error_size, "alerts: at most 8");
    char text[96];
    for (uint32_t i = 0; i < d->alert_count; i++) {
        const struct limit_alert *a = &d->alerts[i];
        if (a->runout && d->kind != LIMIT_BUDGET) {
            snprintf(text, sizeof text, "alerts[%u].runout_before_period_end: only for a budget",
                     i);
            return fail(error, error_size, text);
        }
        if (!a->runout &&
            (a->at_percent < ALERT_PERCENT_MIN || a->at_percent > ALERT_PERCENT_MAX)) {
            snprintf(text, sizeof text, "alerts[%u].at_percent: must be an integer 1..1000", i);
            return fail(error, error_size, text);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (d->alerts[j].runout == a->runout && d->alerts[j].at_percent == a->at_percent) {
                snprintf(text, sizeof text, "alerts[%u]: the same alert as alerts[%u]", i, j);
                return fail(error, error_size, text);
            }
        }
    }
    if (d->webhook[0] != '\0' && !webhook_url_valid(d->webhook))
        return fail(error, error_size,
                    "webhook: must be an http:// or https:// URL of at most 512 bytes");
    if (d->webhook_format != ALERT_FORMAT_JSON && d->webhook_format != ALERT_FORMAT_SLACK)
        return fail(error, error_size, "webhook.format: must be json or slack");
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
    if (validate_alerts(d, error, error_size) != 0)
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

/* ---- budget periods ------------------------------------------------------ */

static int anchor_of(const struct limit_definition *d)
{
    return d->period_anchor_day == 0 ? 1 : d->period_anchor_day;
}

bool limit_period_same(const struct limit_definition *a, const struct limit_definition *b)
{
    return a->period == b->period && anchor_of(a) == anchor_of(b) &&
           strcmp(a->time_zone, b->time_zone) == 0;
}

/* The local day (days since 1970-01-01 of the local calendar) the period
 * containing local day `day` starts on. */
static int64_t period_first_day(const struct limit_definition *d, int64_t day)
{
    switch (d->period) {
    case PERIOD_DAY:
        return day;
    case PERIOD_WEEK:
        return day - (civil_weekday(day) + 6) % 7; /* back to Monday */
    case PERIOD_MONTH: {
        int64_t year;
        int month, day_of_month;
        civil_from_days(day, &year, &month, &day_of_month);
        if (day_of_month < anchor_of(d) && --month == 0) {
            month = 12;
            year--;
        }
        return civil_to_days(year, month, anchor_of(d));
    }
    default:
        assert(false);
        return 0;
    }
}

/* The local day the period after the one starting on `first` starts on. */
static int64_t period_next_day(const struct limit_definition *d, int64_t first)
{
    if (d->period == PERIOD_DAY)
        return first + 1;
    if (d->period == PERIOD_WEEK)
        return first + 7;
    assert(d->period == PERIOD_MONTH);
    int64_t year;
    int month, day;
    civil_from_days(first, &year, &month, &day);
    if (++month == 13) {
        month = 1;
        year++;
    }
    return civil_to_days(year, month, day); /* day <= 28: every month has it */
}

/* The first instant (unix seconds) of local day `day`. */
static int64_t day_start_s(const struct tz_zone *zone, int64_t day)
{
    int64_t local_s = day * CIVIL_SECONDS_PER_DAY;
    return zone == NULL ? local_s : tz_first_local(zone, local_s);
}

struct period_span period_span_at(const struct limit_definition *d, int64_t unix_ms)
{
    assert(d->kind == LIMIT_BUDGET);
    assert(d->time_zone[0] == '\0' || d->zone != NULL); /* validated */
    /* Within +-INT64_MAX / 2 and a margin for the next period's start. */
    assert(unix_ms > INT64_MIN / 4 * 3);
    assert(unix_ms < INT64_MAX / 4 * 3);
    if (d->period == PERIOD_PREPAID)
        return (struct period_span){0, PERIOD_PREPAID_END_MS};
    const struct tz_zone *zone = d->time_zone[0] == '\0' ? NULL : d->zone;
    int64_t s = civil_floor_div(unix_ms, 1000);
    int64_t local_s = zone == NULL ? s : s + tz_offset_at(zone, s);
    int64_t first = period_first_day(d, civil_floor_div(local_s, CIVIL_SECONDS_PER_DAY));
    int64_t next = period_next_day(d, first);
    int64_t start_s = day_start_s(zone, first);
    int64_t end_s = day_start_s(zone, next);
    /* Local time that falls back over midnight has already reached the next
     * day once: the next period began then. Offsets differ by at most two
     * days, so a few steps always reach it. */
    for (int step = 0; step < 4 && s >= end_s; step++) {
        next = period_next_day(d, next);
        start_s = end_s;
        end_s = day_start_s(zone, next);
    }
    assert(start_s <= s);
    assert(s < end_s);
    return (struct period_span){start_s * 1000, end_s * 1000};
}

#define MEMO_LENGTH_BITS 22
#define MEMO_START_S_MAX (INT64_C(1) << (63 - MEMO_LENGTH_BITS))

struct period_span period_memo_span(const struct limit_definition *d, struct period_memo *memo,
                                    int64_t unix_ms)
{
    uint64_t packed = atomic_load_explicit(&memo->packed, memory_order_relaxed);
    /* Arithmetic shift: the start may be before 1970. */
    int64_t start_ms = ((int64_t)packed >> MEMO_LENGTH_BITS) * 1000;
    int64_t end_ms = start_ms + (int64_t)(packed & ((UINT64_C(1) << MEMO_LENGTH_BITS) - 1)) * 1000;
    if (unix_ms >= start_ms && unix_ms < end_ms)
        return (struct period_span){start_ms, end_ms};
    struct period_span span = period_span_at(d, unix_ms);
    int64_t start_s = span.start_ms / 1000, length_s = (span.end_ms - span.start_ms) / 1000;
    /* A day, week or month fits; a prepaid budget's one period is known
     * without arithmetic. */
    if (start_s > -MEMO_START_S_MAX && start_s < MEMO_START_S_MAX &&
        length_s < (INT64_C(1) << MEMO_LENGTH_BITS)) {
        packed = (uint64_t)start_s << MEMO_LENGTH_BITS | (uint64_t)length_s;
        atomic_store_explicit(&memo->packed, packed, memory_order_relaxed);
    }
    return span;
}

void period_memo_reset(struct period_memo *memo)
{
    atomic_store_explicit(&memo->packed, 0, memory_order_relaxed);
}

bool period_local_text(const struct limit_definition *d, int64_t unix_ms,
                       char out[PERIOD_LOCAL_TEXT_SIZE])
{
    out[0] = '\0';
    const struct tz_zone *zone = d->time_zone[0] == '\0' ? NULL : d->zone;
    int64_t s = civil_floor_div(unix_ms, 1000);
    int32_t offset_s = zone == NULL ? 0 : tz_offset_at(zone, s);
    /* RFC 3339 offsets are whole minutes; an old local mean time is not. */
    if (offset_s % 60 != 0)
        offset_s = 0, zone = NULL;
    int64_t local_s = s + offset_s;
    int64_t days = civil_floor_div(local_s, CIVIL_SECONDS_PER_DAY);
    int64_t second_of_day = local_s - days * CIVIL_SECONDS_PER_DAY;
    int64_t year;
    int month, day;
    civil_from_days(days, &year, &month, &day);
    if (year < 0 || year > 9999)
        return false;
    char offset[16] = "Z";
    if (zone != NULL) {
        int32_t minutes = (offset_s < 0 ? -offset_s : offset_s) / 60;
        snprintf(offset, sizeof offset, "%c%02d:%02d", offset_s < 0 ? '-' : '+', minutes / 60,
                 minutes % 60);
    }
    snprintf(out, PERIOD_LOCAL_TEXT_SIZE, "%04d-%02d-%02dT%02d:%02d:%02d%s", (int)year, month, day,
             (int)(second_of_day / 3600), (int)(second_of_day / 60 % 60), (int)(second_of_day % 60),
             offset);
    return true;
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
