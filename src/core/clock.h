/* The one source of time: all accounting time comes from one injectable clock
 * (docs/semantics.md "Clocks").
 * Production code uses clock_system(); tests use a manual clock they move by
 * hand, so expiry and period roll-over are deterministic. */
#ifndef LLMLIMIT_CLOCK_H
#define LLMLIMIT_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct clock {
    int64_t (*now_ms)(struct clock *clock); /* unix milliseconds */
};

/* The wall clock (CLOCK_REALTIME). Static storage; never freed. */
struct clock *clock_system(void);

/* A clock that only moves when told to. Thread-safe (atomic). */
struct clock_manual {
    struct clock clock;
    int64_t now_ms; /* accessed atomically */
};

void clock_manual_init(struct clock_manual *manual, int64_t start_ms);
void clock_manual_set(struct clock_manual *manual, int64_t now_ms);
void clock_manual_advance(struct clock_manual *manual, int64_t delta_ms);

/* The wall clock plus an offset that can be moved at runtime: what
 * `llmlimitd --test-clock` runs on, so integration tests can jump forward
 * (expiry, period roll-over) and backward (clock skew) without sleeping. */
struct clock_offset {
    struct clock clock;
    int64_t offset_ms; /* accessed atomically */
};

void clock_offset_init(struct clock_offset *offset);
/* Moves the clock by delta_ms (negative: backward); returns the new offset. */
int64_t clock_offset_advance(struct clock_offset *offset, int64_t delta_ms);

static inline int64_t clock_now_ms(struct clock *clock)
{
    return clock->now_ms(clock);
}

/* Monotonic milliseconds, for timeouts and latency only (never accounting). */
int64_t clock_monotonic_ms(void);
int64_t clock_monotonic_ns(void);
/* The time on `which` (CLOCK_MONOTONIC or CLOCK_REALTIME, as the condition
 * variable or lock waited on uses) `us` microseconds from now: the
 * deadline of a pthread timed wait. */
struct timespec clock_deadline(clockid_t which, int64_t us);
/* Initializes a condition variable whose timed waits read CLOCK_MONOTONIC
 * (a deadline from clock_deadline(CLOCK_MONOTONIC, ...)), so that a step of
 * the wall clock neither stretches nor cuts a wait. */
void clock_cond_init_monotonic(pthread_cond_t *cond);

#endif
