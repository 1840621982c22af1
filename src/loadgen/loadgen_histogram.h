/* A latency histogram with logarithmic buckets (the HDR histogram idea):
 * 64 linear sub-buckets per power of two, so every recorded value is kept
 * within 1/64 (1.6%) of its true value, in a fixed array: recording costs
 * a few instructions and never allocates. */
#ifndef LLMLIMIT_LOADGEN_HISTOGRAM_H
#define LLMLIMIT_LOADGEN_HISTOGRAM_H

#include <stdint.h>

#define LOADGEN_HISTOGRAM_SUB_BITS 6 /* 64 sub-buckets per power of two */
#define LOADGEN_HISTOGRAM_SUB_COUNT (1u << LOADGEN_HISTOGRAM_SUB_BITS)
/* Values up to 2^40 ns (18 minutes); larger ones land in the last bucket. */
#define LOADGEN_HISTOGRAM_VALUE_BITS 40
#define LOADGEN_HISTOGRAM_BUCKETS                                                                  \
    ((LOADGEN_HISTOGRAM_VALUE_BITS - LOADGEN_HISTOGRAM_SUB_BITS + 1) * LOADGEN_HISTOGRAM_SUB_COUNT)

struct loadgen_histogram {
    uint64_t counts[LOADGEN_HISTOGRAM_BUCKETS];
    uint64_t total;
    uint64_t max;
    uint64_t min;
};

void loadgen_histogram_init(struct loadgen_histogram *histogram);
void loadgen_histogram_record(struct loadgen_histogram *histogram, uint64_t value);
/* Adds every count of from into into. */
void loadgen_histogram_merge(struct loadgen_histogram *into, const struct loadgen_histogram *from);
/* The smallest recorded value v (to bucket precision, rounded up) with at
 * least fraction (0..1] of the values <= v; 0 when empty. */
uint64_t loadgen_histogram_percentile(const struct loadgen_histogram *histogram, double fraction);

/* Exposed for tests: the bucket of a value and the largest value in it. */
uint32_t loadgen_histogram_bucket(uint64_t value);
uint64_t loadgen_histogram_bucket_high(uint32_t bucket);

#endif
