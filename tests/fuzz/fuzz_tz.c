/* libFuzzer harness: the TZif reader (src/core/tz.c) on any bytes, and the
 * budget periods of whatever zone it takes. Input: 8 bytes of an instant,
 * then the file. A file is taken or refused with a reason, never read past
 * its end; a zone's segment contains the instant asked and its offset is
 * in range; the first instant of a local time is the earliest one that
 * reaches it; and every day, week and month period of the zone contains
 * its instant, is named by its start, and ends where the next starts. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INSTANT_MAX (INT64_MAX / 2) /* as fuzz_period: every instant usage takes */

static int64_t local_of(const struct tz_zone *zone, int64_t unix_s)
{
    return unix_s + tz_offset_at(zone, unix_s);
}

static void check_period(const struct tz_zone *zone, enum limit_period period, int64_t t)
{
    struct limit_definition d;
    memset(&d, 0, sizeof d);
    d.kind = LIMIT_BUDGET;
    d.period = period;
    d.period_anchor_day = period == PERIOD_MONTH ? (uint8_t)(1 + (uint64_t)t % 28) : 0;
    snprintf(d.time_zone, sizeof d.time_zone, "Fuzz/Zone");
    d.zone = zone;
    struct period_span span = period_span_at(&d, t);
    assert(span.start_ms <= t);
    assert(t < span.end_ms);
    assert(span.start_ms % 1000 == 0);
    assert(span.end_ms % 1000 == 0);
    struct period_span at_start = period_span_at(&d, span.start_ms);
    assert(at_start.start_ms == span.start_ms);
    assert(at_start.end_ms == span.end_ms);
    assert(period_span_at(&d, span.end_ms - 1).start_ms == span.start_ms);
    assert(period_span_at(&d, span.end_ms).start_ms == span.end_ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < sizeof(uint64_t))
        return 0;
    uint64_t raw;
    memcpy(&raw, data, sizeof raw);
    int64_t t = (int64_t)(raw % ((uint64_t)INSTANT_MAX * 2 + 1)) - INSTANT_MAX;
    struct tz_zone *zone = NULL;
    char error[128];
    if (tz_zone_parse("Fuzz/Zone", data + sizeof raw, size - sizeof raw, &zone, error,
                      sizeof error) != 0) {
        assert(error[0] != '\0');
        return 0;
    }
    int64_t s = t / 1000;
    struct tz_segment segment = tz_segment_at(zone, s);
    assert(segment.start_s <= s);
    assert(s < segment.end_s);
    assert(segment.offset_s >= TZ_OFFSET_SECONDS_MIN);
    assert(segment.offset_s <= TZ_OFFSET_SECONDS_MAX);
    if (segment.end_s != INT64_MAX)
        assert(tz_segment_at(zone, segment.end_s).start_s == segment.end_s);
    /* The first instant at or after local time s: reaches it, and the one
     * before does not. */
    int64_t first = tz_first_local(zone, s);
    assert(local_of(zone, first) >= s);
    assert(local_of(zone, first - 1) < s);
    check_period(zone, PERIOD_DAY, t);
    check_period(zone, PERIOD_WEEK, t);
    check_period(zone, PERIOD_MONTH, t);
    tz_zone_free(zone);
    return 0;
}
