/* Wall and manual clocks behind the struct clock interface. */
#include "clock.h"

#include <assert.h>
#include <time.h>

static int64_t system_now_ms(struct clock *clock)
{
    (void)clock;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    assert(rc == 0); /* CLOCK_REALTIME always exists */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct clock system_clock = {.now_ms = system_now_ms};

struct clock *clock_system(void)
{
    return &system_clock;
}

static int64_t manual_now_ms(struct clock *clock)
{
    struct clock_manual *manual = (struct clock_manual *)clock;
    return __atomic_load_n(&manual->now_ms, __ATOMIC_SEQ_CST);
}

void clock_manual_init(struct clock_manual *manual, int64_t start_ms)
{
    assert(manual != NULL);
    manual->clock.now_ms = manual_now_ms;
    __atomic_store_n(&manual->now_ms, start_ms, __ATOMIC_SEQ_CST);
}

void clock_manual_set(struct clock_manual *manual, int64_t now_ms)
{
    __atomic_store_n(&manual->now_ms, now_ms, __ATOMIC_SEQ_CST);
}

void clock_manual_advance(struct clock_manual *manual, int64_t delta_ms)
{
    __atomic_add_fetch(&manual->now_ms, delta_ms, __ATOMIC_SEQ_CST);
}

static int64_t offset_now_ms(struct clock *clock)
{
    struct clock_offset *offset = (struct clock_offset *)clock;
    return system_now_ms(NULL) + __atomic_load_n(&offset->offset_ms, __ATOMIC_SEQ_CST);
}

void clock_offset_init(struct clock_offset *offset)
{
    assert(offset != NULL);
    offset->clock.now_ms = offset_now_ms;
    __atomic_store_n(&offset->offset_ms, 0, __ATOMIC_SEQ_CST);
}

int64_t clock_offset_advance(struct clock_offset *offset, int64_t delta_ms)
{
    return __atomic_add_fetch(&offset->offset_ms, delta_ms, __ATOMIC_SEQ_CST);
}

int64_t clock_monotonic_ns(void)
{
    struct timespec ts;
    int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
    assert(rc == 0); /* CLOCK_MONOTONIC always exists on Linux */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec clock_deadline(clockid_t which, int64_t us)
{
    assert(us >= 0);
    struct timespec at;
    int rc = clock_gettime(which, &at);
    assert(rc == 0);
    at.tv_sec += (time_t)(us / 1000000);
    at.tv_nsec += (long)(us % 1000000) * 1000L;
    at.tv_sec += at.tv_nsec / 1000000000L;
    at.tv_nsec %= 1000000000L;
    return at;
}

void clock_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attributes);
    pthread_condattr_destroy(&attributes);
}

int64_t clock_monotonic_ms(void)
{
    return clock_monotonic_ns() / 1000000;
}
