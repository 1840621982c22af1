/* The jitter of retry_after_ms for concurrency polls (retry.h). */
#include "retry.h"

#include <assert.h>
#include <stddef.h>

#include "clock.h"

int64_t retry_jitter_ms(int64_t poll_ms, uint64_t *random_state)
{
    assert(poll_ms >= 1);
    assert(poll_ms <= INT64_MAX / 120);
    assert(random_state != NULL);
    assert(*random_state != 0);
    uint64_t x = *random_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *random_state = x;
    int64_t percent = 80 + (int64_t)(x % 41); /* 80..120 */
    int64_t jittered_ms = poll_ms * percent / 100;
    assert(jittered_ms <= poll_ms * 120 / 100);
    assert(*random_state != 0); /* xorshift never reaches 0 from non-zero */
    return jittered_ms < 1 ? 1 : jittered_ms;
}

uint64_t retry_jitter_seed(void)
{
    return (uint64_t)clock_monotonic_ns() | 1;
}
