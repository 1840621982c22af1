/* A latency histogram with logarithmic buckets (the HDR histogram idea):
 * 64 linear sub-buckets per power of two, so every recorded value is kept
 * within 1/64 (1.6%) of its true value, in a fixed array: recording costs
 * a few instructions and never allocates. */
#ifndef LLMLIMIT_BENCH_HISTOGRAM_H
#define LLMLIMIT_BENCH_HISTOGRAM_H

#include <stdint.h>

#define HISTOGRAM_SUB_BITS 6 /* 64 sub-buckets per power of two */
#define HISTOGRAM_SUB_COUNT (1u << HISTOGRAM_SUB_BITS)
/* Values up to 2^40 ns (18 minutes); larger ones land in the last bucket. */
#define HISTOGRAM_VALUE_BITS 40
#define HISTOGRAM_BUCKETS ((HISTOGRAM_VALUE_BITS - HISTOGRAM_SUB_BITS + 1) * HISTOGRAM_SUB_COUNT)

struct histogram {
    uint64_t counts[HISTOGRAM_BUCKETS];
    uint64_t total;
    uint64_t max;
    uint64_t min;
};

void histogram_init(struct histogram *histogram);
void histogram_record(struct histogram *histogram, uint64_t value);
/* Adds every count of from into into. */
void histogram_merge(struct histogram *into, const struct histogram *from);
/* The smallest recorded value v (to bucket precision, rounded up) with at
 * least fraction (0..1] of the values <= v; 0 when empty. */
uint64_t histogram_percentile(const struct histogram *histogram, double fraction);

/* Exposed for tests: the bucket of a value and the largest value in it. */
uint32_t histogram_bucket(uint64_t value);
uint64_t histogram_bucket_high(uint32_t bucket);

#endif
