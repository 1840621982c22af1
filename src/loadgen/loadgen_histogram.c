/* Logarithmic-bucket latency histogram (see histogram.h). Bucket layout:
 * values below 2*SUB_COUNT map to themselves; above, each power of two
 * [2^k, 2^(k+1)) is cut into SUB_COUNT equal slices. */
#include "loadgen_histogram.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void loadgen_histogram_init(struct loadgen_histogram *histogram)
{
    memset(histogram, 0, sizeof(*histogram));
    histogram->min = UINT64_MAX;
}

uint32_t loadgen_histogram_bucket(uint64_t value)
{
    if (value < 2 * LOADGEN_HISTOGRAM_SUB_COUNT)
        return (uint32_t)value;
    uint32_t msb = 63u - (uint32_t)__builtin_clzll(value);
    if (msb >= LOADGEN_HISTOGRAM_VALUE_BITS)
        return LOADGEN_HISTOGRAM_BUCKETS - 1;
    uint32_t shift = msb - LOADGEN_HISTOGRAM_SUB_BITS;
    uint32_t bucket = (shift + 1) * LOADGEN_HISTOGRAM_SUB_COUNT + (uint32_t)(value >> shift) -
                      LOADGEN_HISTOGRAM_SUB_COUNT;
    assert(bucket < LOADGEN_HISTOGRAM_BUCKETS);
    return bucket;
}

uint64_t loadgen_histogram_bucket_high(uint32_t bucket)
{
    assert(bucket < LOADGEN_HISTOGRAM_BUCKETS);
    if (bucket < 2 * LOADGEN_HISTOGRAM_SUB_COUNT)
        return bucket;
    uint32_t shift = bucket / LOADGEN_HISTOGRAM_SUB_COUNT - 1;
    uint64_t sub = bucket % LOADGEN_HISTOGRAM_SUB_COUNT + LOADGEN_HISTOGRAM_SUB_COUNT;
    return ((sub + 1) << shift) - 1;
}

void loadgen_histogram_record(struct loadgen_histogram *histogram, uint64_t value)
{
    uint32_t bucket = loadgen_histogram_bucket(value);
    /* A bucket's upper bound covers every value put in it (but the last). */
    assert(bucket == LOADGEN_HISTOGRAM_BUCKETS - 1 ||
           value <= loadgen_histogram_bucket_high(bucket));
    histogram->counts[bucket]++;
    histogram->total++;
    if (value > histogram->max)
        histogram->max = value;
    if (value < histogram->min)
        histogram->min = value;
}

void loadgen_histogram_merge(struct loadgen_histogram *into, const struct loadgen_histogram *from)
{
    for (uint32_t i = 0; i < LOADGEN_HISTOGRAM_BUCKETS; i++)
        into->counts[i] += from->counts[i];
    into->total += from->total;
    if (from->max > into->max)
        into->max = from->max;
    if (from->min < into->min)
        into->min = from->min;
    assert(into->total == 0 || into->min <= into->max);
}

uint64_t loadgen_histogram_percentile(const struct loadgen_histogram *histogram, double fraction)
{
    assert(fraction > 0.0);
    assert(fraction <= 1.0);
    if (histogram->total == 0)
        return 0;
    uint64_t rank = (uint64_t)ceil(fraction * (double)histogram->total);
    if (rank == 0)
        rank = 1;
    assert(rank <= histogram->total); /* so the walk below always stops */
    uint64_t seen = 0;
    for (uint32_t i = 0; i < LOADGEN_HISTOGRAM_BUCKETS; i++) {
        seen += histogram->counts[i];
        if (seen >= rank) {
            uint64_t high = loadgen_histogram_bucket_high(i);
            /* Never report more than was really seen. */
            return high < histogram->max ? high : histogram->max;
        }
    }
    return histogram->max;
}
