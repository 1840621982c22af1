/* libFuzzer harness: the UTC calendar arithmetic of budget periods
 * (src/core/limits.c), over every instant a request can name (usage
 * at_unix_ms, a test clock moved far forward or backward). The period
 * containing t starts at or before t and ends after it, starts where the
 * previous one ends, and has the length of a day, a week or a month. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MS_PER_DAY_TEST (INT64_C(86400000))
#define INSTANT_MAX (INT64_MAX / 2) /* usage accepts at_unix_ms up to this */

static void check_period(enum limit_period period, int64_t t)
{
    int64_t start = period_start_ms(period, t);
    int64_t end = period_end_ms(period, t);
    assert(start <= t);
    assert(t < end);
    assert(period_start_ms(period, start) == start);
    assert(period_start_ms(period, end - 1) == start);
    assert(period_start_ms(period, end) == end); /* the next period starts at end */
    assert(start % MS_PER_DAY_TEST == 0);        /* midnight UTC */
    int64_t days = (end - start) / MS_PER_DAY_TEST;
    assert((end - start) % MS_PER_DAY_TEST == 0);
    if (period == PERIOD_DAY)
        assert(days == 1);
    if (period == PERIOD_WEEK) {
        assert(days == 7);
        int64_t day_number = start / MS_PER_DAY_TEST;  /* 1970-01-01 was a Thursday */
        assert((((day_number + 3) % 7) + 7) % 7 == 0); /* a Monday */
    }
    if (period == PERIOD_MONTH)
        assert(days >= 28 && days <= 31);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < sizeof(int64_t))
        return 0;
    uint64_t raw;
    memcpy(&raw, data, sizeof raw);
    int64_t t = (int64_t)(raw % ((uint64_t)INSTANT_MAX * 2 + 1)) - INSTANT_MAX;
    check_period(PERIOD_DAY, t);
    check_period(PERIOD_WEEK, t);
    check_period(PERIOD_MONTH, t);
    return 0;
}
