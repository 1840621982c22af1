/* libFuzzer harness: the UTC calendar arithmetic of budget periods
 * (src/core/limits.c, period_span_at), over every instant a request can
 * name (usage at_unix_ms, a test clock moved far forward or backward) and
 * every anchor day. The period containing t starts at or before t and ends
 * after it, starts where the previous one ends, and has the length of a
 * day, a week or a month (from its anchor day); a prepaid budget's one
 * period contains every time the API takes. Time zones: fuzz_tz. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MS_PER_DAY_TEST (INT64_C(86400000))
#define INSTANT_MAX (INT64_MAX / 2) /* usage accepts at_unix_ms up to this */

static struct limit_definition budget(enum limit_period period, uint8_t anchor_day)
{
    struct limit_definition d;
    memset(&d, 0, sizeof d);
    snprintf(d.key, sizeof d.key, "fuzz");
    d.kind = LIMIT_BUDGET;
    d.capacity = 1;
    d.period = period;
    d.period_anchor_day = anchor_day;
    char error[256];
    int rc = limit_definition_validate(&d, error, sizeof error);
    assert(rc == 0);
    return d;
}

/* Day of the month of a UTC midnight, by counting back whole days. */
static int64_t day_of_month(int64_t start, const struct limit_definition *month_1)
{
    return (start - period_span_at(month_1, start).start_ms) / MS_PER_DAY_TEST + 1;
}

static void check_period(const struct limit_definition *d, int64_t t)
{
    struct period_span span = period_span_at(d, t);
    int64_t start = span.start_ms, end = span.end_ms;
    assert(start <= t);
    assert(t < end);
    assert(period_span_at(d, start).start_ms == start);
    assert(period_span_at(d, end - 1).start_ms == start);
    assert(period_span_at(d, end).start_ms == end); /* the next period starts at end */
    assert(start % MS_PER_DAY_TEST == 0);           /* midnight UTC */
    int64_t days = (end - start) / MS_PER_DAY_TEST;
    assert((end - start) % MS_PER_DAY_TEST == 0);
    if (d->period == PERIOD_DAY)
        assert(days == 1);
    if (d->period == PERIOD_WEEK) {
        assert(days == 7);
        int64_t day_number = start / MS_PER_DAY_TEST;  /* 1970-01-01 was a Thursday */
        assert((((day_number + 3) % 7) + 7) % 7 == 0); /* a Monday */
    }
    if (d->period == PERIOD_MONTH) {
        assert(days >= 28 && days <= 31);
        struct limit_definition month_1 = budget(PERIOD_MONTH, 0);
        int64_t anchor = d->period_anchor_day == 0 ? 1 : d->period_anchor_day;
        assert(day_of_month(start, &month_1) == anchor);
        assert(day_of_month(end, &month_1) == anchor);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < sizeof(int64_t))
        return 0;
    uint64_t raw;
    memcpy(&raw, data, sizeof raw);
    int64_t t = (int64_t)(raw % ((uint64_t)INSTANT_MAX * 2 + 1)) - INSTANT_MAX;
    uint8_t anchor_day = size > sizeof raw ? (uint8_t)(data[sizeof raw] % 29) : 0;
    struct limit_definition day = budget(PERIOD_DAY, 0), week = budget(PERIOD_WEEK, 0);
    struct limit_definition month = budget(PERIOD_MONTH, anchor_day);
    check_period(&day, t);
    check_period(&week, t);
    check_period(&month, t);
    struct limit_definition prepaid = budget(PERIOD_PREPAID, 0);
    struct period_span span = period_span_at(&prepaid, t);
    assert(span.start_ms == 0);
    assert(span.end_ms == PERIOD_PREPAID_END_MS);
    /* The memo answers what the arithmetic does. */
    struct period_memo memo = {0};
    for (int i = 0; i < 2; i++) {
        span = period_memo_span(&month, &memo, t);
        assert(span.start_ms == period_span_at(&month, t).start_ms);
        assert(span.end_ms == period_span_at(&month, t).end_ms);
    }
    return 0;
}
