/* The wait layer's part of the conformance suite (conformance_wait.c,
 * conformance_wait_stress.c): a wait layer in front of the fixture's
 * backend, and waiters whose storage outlives the test body (the wait
 * layer writes their answer until it is closed). */
#ifndef LLMLIMIT_CONFORMANCE_WAIT_H
#define LLMLIMIT_CONFORMANCE_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "conformance.h"
#include "wait/wait.h"

#define WAITER_ITEMS_MAX 4

/* One wait_reserve and its answer. */
struct waiter {
    struct wait_ticket ticket;
    struct reserve_request request;
    struct reserve_result result;
    char lease[NAMED_SIZE];
    char keys[WAITER_ITEMS_MAX][NAMED_SIZE];
    struct requirement requirements[WAITER_ITEMS_MAX];
    bool started;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint32_t done_count;   /* under mutex: must end at exactly 1 */
    uint64_t answer_order; /* the order in which answers came */
};

struct wait_test {
    struct fixture *f;
    struct wait *w;
    struct waiter *waiters;
    uint32_t waiter_count;
    uint64_t answers; /* atomic: answers so far (for answer_order) */
};

#define WAIT_TEST_WAITERS 64

/* Opens a wait layer on the fixture's backend and clock. NULL on failure. */
struct wait *wait_test_open(struct fixture *f, uint32_t max_waiters);
/* Closes the wait layer (if still open) and checks every started waiter
 * was answered exactly once; frees the waiters. */
void wait_test_end(struct wait_test *t);

/* Fills a waiter's request (names without the namespace), ready for
 * wait_reserve with waiter_done_callback and the waiter as context. */
void waiter_prepare(struct fixture *f, struct waiter *x, const char *lease_id,
                    const struct item *items, uint32_t count);
void waiter_done_callback(void *context);
/* Starts waiter i: lease_id and items without the namespace. */
struct waiter *wait_start(struct wait_test *t, uint32_t i, const char *lease_id,
                          const struct item *items, uint32_t count, int64_t wait_ms,
                          uint8_t priority);
#define WAIT_START(t, i, lease_id, wait_ms, priority, ...)                                         \
    wait_start((t), (i), (lease_id), (const struct item[]){__VA_ARGS__},                           \
               (uint32_t)(sizeof((const struct item[]){__VA_ARGS__}) / sizeof(struct item)),       \
               (wait_ms), (priority))

bool waiter_answered(struct waiter *x);
/* Lets the wait layer settle: on a manual clock, until it has nothing left
 * to do at the clock's time; on a real one, up to real_ms or the answer.
 * Then: is it answered? */
bool wait_for_answer(struct wait_test *t, struct waiter *x, int64_t real_ms);
/* Lets the wait layer settle (nothing asserted). */
void wait_settle_all(struct wait_test *t);
/* Moves the clock (waits on a real one) and tells the wait layer. */
void wait_advance(struct wait_test *t, int64_t delta_ms);
void wait_advance_to(struct wait_test *t, int64_t at_ms);
/* The answer as the tests read it (namespace stripped). */
struct reservation waiter_reservation(struct wait_test *t, struct waiter *x);
/* The key's name in the fixture's namespace, for wait_limit_changed. */
const char *wait_key(struct wait_test *t, const char *key, char out[NAMED_SIZE]);

/* Defines a test whose body gets a fixture at T0 and an open wait layer. */
#define WAIT_TEST(name)                                                                            \
    static void name##_body(struct wait_test *t, struct fixture *f);                               \
    static void name(void)                                                                         \
    {                                                                                              \
        struct fixture fixture;                                                                    \
        if (!fixture_open(&fixture, T0_MS)) {                                                      \
            CHECK(!"the backend opens");                                                           \
            return;                                                                                \
        }                                                                                          \
        struct wait_test t = {.f = &fixture};                                                      \
        t.w = wait_test_open(&fixture, WAIT_WAITERS_DEFAULT);                                      \
        t.waiters = calloc(WAIT_TEST_WAITERS, sizeof *t.waiters);                                  \
        t.waiter_count = WAIT_TEST_WAITERS;                                                        \
        if (t.w != NULL && t.waiters != NULL)                                                      \
            name##_body(&t, &fixture);                                                             \
        else                                                                                       \
            CHECK(!"the wait layer opens");                                                        \
        wait_test_end(&t);                                                                         \
        fixture_close(&fixture);                                                                   \
    }                                                                                              \
    static void name##_body(struct wait_test *t, struct fixture *f)

#endif
