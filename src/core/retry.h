/* Retry-after arithmetic every backend shares (docs/semantics.md,
 * "retry_after_ms"): the jitter of a concurrency poll, so callers denied at the
 * same moment do not all come back at the same moment. */
#ifndef LLMLIMIT_CORE_RETRY_H
#define LLMLIMIT_CORE_RETRY_H

#include <stdint.h>

/* poll_ms spread by +-20% with a xorshift64 step of *random_state (which
 * must not be 0; only jitter comes from it, never accounting). At least 1. */
int64_t retry_jitter_ms(int64_t poll_ms, uint64_t *random_state);

/* A seed for random_state from the monotonic clock: never 0. */
uint64_t retry_jitter_seed(void);

#endif
