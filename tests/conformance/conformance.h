/* Shared fixture of the backend conformance suite: opens the backend named
 * on the command line and wraps the data path in small blocking helpers.
 * Written only against backend.h, so every backend runs the same
 * expectations. Each test runs in a namespace of its own (a prefix on every
 * key and lease id), so tests sharing one TigerBeetle cluster never see each
 * other's limits and leases; and on a clock that is either manual (memory,
 * sqlite: tests move it) or the backend's own (tigerbeetle: tests wait). */
#ifndef LLMLIMIT_CONFORMANCE_H
#define LLMLIMIT_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend_results.h"
#include "core/clock.h"
#include "core/limits.h"

/* 2026-01-15T12:00:00Z, a Thursday: the start of every test on a manual
 * clock. */
#define T0_MS INT64_C(1768478400000)
#define JAN_01_MS INT64_C(1767225600000)
#define JAN_31_23_59_59_MS INT64_C(1769903999000)
#define FEB_01_MS INT64_C(1769904000000)
#define MAR_01_MS INT64_C(1772323200000)
#define MON_JAN_12_MS INT64_C(1768176000000)
#define MON_JAN_19_MS INT64_C(1768780800000)
#define JAN_16_MS INT64_C(1768521600000)

/* On the backend's own clock: how far from an instant a test stands when it
 * means "just before" it, and how long after an expiry the backend may
 * still count the hold (TigerBeetle expires pending transfers by its own
 * clock, about 0.1 s late after a 1 s timeout). A time the backend reports
 * lies between the local clock's readings before and after the call, give
 * or take REAL_TIME_TOLERANCE_MS of skew between the two clocks (not of the
 * call's own time, which a busy machine can stretch at will). */
#define REAL_EARLY_MARGIN_MS 400
#define REAL_EXPIRY_LAG_MS 600
#define REAL_TIME_TOLERANCE_MS 250
/* TigerBeetle timeouts are whole seconds: a hold made again for what is
 * left of a window (a rolling complete) may end up to a second later. */
#define REAL_WHOLE_SECOND_MS 1000

#define NAMESPACE_SIZE 24
#define NAMED_SIZE (NAMESPACE_SIZE + LIMIT_KEY_LENGTH_MAX + 1)

struct fixture {
    const struct backend_ops *ops;
    struct backend *backend;
    struct clock_manual clock;
    bool real_clock; /* the backend's own clock: tests wait instead of moving it */
    int64_t t0_ms;   /* when the test started: T0_MS, or the wall clock at open */
    /* The test's prefix of every key and lease id; stripped from every
     * text that comes back. */
    char ns[NAMESPACE_SIZE];
    char data_dir[512];
};

/* What differs between backends by design (documented in docs/semantics.md
 * and docs/tigerbeetle.md "What differs from the memory backend"). */
struct backend_traits {
    bool bounded_lease_cache;     /* lease_cache_entries evicts (memory, tigerbeetle) */
    uint32_t budget_periods_kept; /* past periods reported, with the current; 0: all */
    uint32_t callers_max;         /* distinct callers told apart (memory); 0: all */
    /* The backend keeps its own clock (tigerbeetle): tests wait in real
     * time, and those that set an absolute time cannot run. */
    bool real_clock;
    /* Every lease stays in the backend's store after the lease cache forgets
     * it (tigerbeetle: transfer ids are derived from the lease id): an
     * evicted lease still completes, and a lease id is never new again. */
    bool leases_outlive_cache;
    bool counts_expired_holds; /* stats.expired_holds (not tigerbeetle) */
};

extern const char *conformance_backend;
extern struct backend_traits conformance_traits;

/* A test of the suite: what it proves and, for a test that moves the clock
 * to an absolute time or back, why it cannot run on a backend's own clock. */
struct conformance_test {
    const char *name;
    void (*run)(void);
    const char *proves;
    const char *needs_manual_clock; /* NULL: runs on every backend */
    /* Sets absolute times that only the backend's period arithmetic reads,
     * and waits for no expiry: on a backend with its own clock
     * (tigerbeetle) it runs too, on a manual clock that the backend reads
     * its periods from (its holds still expire by the cluster's). */
    bool period_clock;
};

#define TEST_ENTRY(fn, proves)                                                                     \
    {                                                                                              \
#fn, fn, proves, NULL, false                                                               \
    }
#define MANUAL_CLOCK_TEST_ENTRY(fn, proves, why)                                                   \
    {                                                                                              \
#fn, fn, proves, why, false                                                                \
    }
#define PERIOD_CLOCK_TEST_ENTRY(fn, proves)                                                        \
    {                                                                                              \
#fn, fn, proves, NULL, true                                                                \
    }

/* Set while a period_clock test runs: its fixtures are on a manual clock. */
extern bool conformance_period_clock;

/* Called by a test that cannot apply to this backend (an optional
 * operation it lacks, documented): the test is reported as skipped. */
void conformance_skip(const char *why);

/* Defaults (backend_config_defaults) on the suite's clock and a fresh data
 * directory and namespace. Tests may change fields before fixture_start. */
void fixture_config(struct fixture *f, struct backend_config *config, int64_t start_ms);
bool fixture_start(struct fixture *f, const struct backend_config *config);
/* backend_open with the suite's backend options: 0, or -1 with error. */
int fixture_try_open(struct fixture *f, const struct backend_config *config, struct backend **out,
                     char *error, size_t error_size);
/* fixture_config + fixture_start. */
bool fixture_open(struct fixture *f, int64_t start_ms);
void fixture_close(struct fixture *f);

/* Limits; each validates (and normalises) the definition first, as the
 * server does. Keys are given without the namespace. put returns
 * backend_put_limit's result; state and error (of RESULT_ERROR_SIZE bytes)
 * may be NULL; error gets the validator's text, or the failure's wire text
 * (admin_error_text). */
struct limit_definition rolling_limit(const char *key, uint64_t capacity, uint32_t window_seconds);
struct limit_definition concurrency_limit(const char *key, uint64_t capacity,
                                          uint32_t timeout_seconds);
struct limit_definition budget_limit(const char *key, uint64_t capacity, enum limit_period period,
                                     uint32_t timeout_seconds);
/* A budget with an anchor day (0: unset) and a time zone ("": UTC). */
struct limit_definition budget_limit_in(const char *key, uint64_t capacity,
                                        enum limit_period period, uint8_t anchor_day,
                                        const char *time_zone);
enum backend_admin_result put(struct fixture *f, struct limit_definition definition,
                              struct limit_state *state, char *error);
bool put_rolling(struct fixture *f, const char *key, uint64_t capacity, uint32_t window_seconds);
bool put_concurrency(struct fixture *f, const char *key, uint64_t capacity,
                     uint32_t timeout_seconds);
bool put_budget(struct fixture *f, const char *key, uint64_t capacity, enum limit_period period,
                uint32_t timeout_seconds);
/* The admin calls of backend.h, keys without the namespace. */
enum backend_admin_result restore(struct fixture *f, struct limit_state state, char *error);
enum backend_admin_result delete_limit(struct fixture *f, const char *key);
struct limit_state get_limit(struct fixture *f, const char *key, enum backend_admin_result *rc);
/* A new array of the limits, keys without the namespace; caller frees. */
enum backend_admin_result list_limits(struct fixture *f, struct limit_state **out, size_t *count);

struct item {
    const char *key;
    uint64_t amount;
};

struct reservation reserve_items(struct fixture *f, const char *lease_id, const struct item *items,
                                 uint32_t count);
#define RESERVE(f, lease_id, ...)                                                                  \
    reserve_items((f), (lease_id), (const struct item[]){__VA_ARGS__},                             \
                  (uint32_t)(sizeof((const struct item[]){__VA_ARGS__}) / sizeof(struct item)))
/* The same with a caller. */
struct reservation reserve_items_as(struct fixture *f, const char *lease_id, const char *caller,
                                    const struct item *items, uint32_t count);
#define RESERVE_AS(f, lease_id, caller, ...)                                                       \
    reserve_items_as((f), (lease_id), (caller), (const struct item[]){__VA_ARGS__},                \
                     (uint32_t)(sizeof((const struct item[]){__VA_ARGS__}) / sizeof(struct item)))
/* The same asking for each requirement's state (states: count entries);
 * the raw result, for what reservation_of does not carry. */
struct reserve_result reserve_with_states(struct fixture *f, const char *lease_id,
                                          const struct item *items, uint32_t count,
                                          struct requirement_state *states);
/* One backend call of count single-requirement reserves, answered in order. */
void reserve_batch(struct fixture *f, const char *const *lease_ids, const struct item *items,
                   uint32_t count, struct reservation *out);
/* A caller's usage of a limit now, on backends that count callers: false
 * when the backend cannot tell (then *out is untouched). */
bool caller_usage_of(struct fixture *f, const char *key, const char *caller,
                     struct caller_usage *out);
/* Where a caller comes in the backend's per-caller answer (0: first), or -1
 * when it is not there or the backend does not count callers. */
int caller_rank(struct fixture *f, const char *key, const char *caller);
/* One requirement; true when allowed. */
bool reserve1(struct fixture *f, const char *lease_id, const char *key, uint64_t amount);

struct completion complete_items(struct fixture *f, const char *lease_id, const struct item *items,
                                 uint32_t count);
#define COMPLETE(f, lease_id, ...)                                                                 \
    complete_items((f), (lease_id), (const struct item[]){__VA_ARGS__},                            \
                   (uint32_t)(sizeof((const struct item[]){__VA_ARGS__}) / sizeof(struct item)))
/* Complete with no actuals: every key settles at its reserved amount. */
struct completion complete_none(struct fixture *f, const char *lease_id);
struct release_outcome release(struct fixture *f, const char *lease_id);

/* Usage now / at a time; the whole struct is zero when the key is unknown. */
struct limit_usage usage(struct fixture *f, const char *key);
struct limit_usage usage_at(struct fixture *f, const char *key, int64_t at_unix_ms);
enum backend_admin_result usage_rc(struct fixture *f, const char *key);
/* backend_usage_batch of count (0..8) keys now, waited for: results[i]
 * answers keys[i], its state stripped as usage's. */
void usage_batch(struct fixture *f, const char *const *keys, uint32_t count,
                 struct usage_result *results);

/* ---- time ---------------------------------------------------------------
 * On a manual clock advance moves it; on the backend's own clock it waits.
 * just_before / just_after name the instants a test checks on either side
 * of an expiry: one millisecond before and the instant itself on a manual
 * clock, with the margins above on a real one. */
int64_t now_ms(struct fixture *f);
void advance(struct fixture *f, int64_t delta_ms);
/* Moves to (or waits until) at_ms; never backwards. */
void advance_to(struct fixture *f, int64_t at_ms);
int64_t just_before(const struct fixture *f, int64_t at_ms);
int64_t just_after(const struct fixture *f, int64_t at_ms);
/* just_after for holds a complete made again for the rest of a window. */
int64_t just_after_kept(const struct fixture *f, int64_t at_ms);
/* Manual clock only: tests that set absolute times are marked so. */
void set_time(struct fixture *f, int64_t unix_ms);
/* The UTC period containing at_ms, computed here apart from src/core. */
int64_t utc_period_start_ms(enum limit_period period, int64_t at_ms);
int64_t utc_period_end_ms(enum limit_period period, int64_t at_ms);

/* A time the backend reported, against the one expected: exact on a
 * manual clock, within REAL_TIME_TOLERANCE_MS on a real one. */
/* A time the backend read during a call (or a span computed from it),
 * against the span low..high the test's clock gives it from its readings
 * before and after the call: exact on the manual clock, which does not
 * move meanwhile; within REAL_TIME_TOLERANCE_MS of skew on the backend's
 * own clock, however long the call took. */
#define CHECK_TIME_BETWEEN(f, actual, low, high)                                                   \
    do {                                                                                           \
        int64_t time_a_ = (int64_t)(actual), time_l_ = (int64_t)(low), time_h_ = (int64_t)(high);  \
        int64_t skew_ = (f)->real_clock ? REAL_TIME_TOLERANCE_MS : 0;                              \
        if (time_a_ < time_l_ - skew_ || time_a_ > time_h_ + skew_) {                              \
            fprintf(stderr,                                                                        \
                    "  FAIL %s:%d: %s = %" PRId64 ", not in %s..%s = %" PRId64 "..%" PRId64        \
                    " (give or take %" PRId64 " ms)\n",                                            \
                    __FILE__, __LINE__, #actual, time_a_, #low, #high, time_l_, time_h_, skew_);   \
            test_failures_in_current++;                                                            \
        }                                                                                          \
    } while (0)

/* name inside the test's namespace (a key or lease id), for tests that
 * build requests themselves. */
const char *fixture_name(const struct fixture *f, const char *name, char out[NAMED_SIZE]);
/* reservation_of, with the namespace stripped from the error. */
struct reservation fixture_reservation(const struct fixture *f,
                                       const struct reserve_request *request,
                                       const struct reserve_result *result);
/* The clock the backend runs on. */
struct clock *fixture_clock(struct fixture *f);

/* Runs the backend's tick; returns *limits_changed. */
bool tick(struct fixture *f);
struct backend_stats stats(struct fixture *f);

/* Runs fn(i, context) on count threads at once (all start together). */
void run_threads(uint32_t count, void (*fn)(uint32_t index, void *context), void *context);

/* Defines the test `name`: its body runs on a fixture opened at T0_MS (or
 * now, on a real clock) and closed afterwards, even when a REQUIRE in the
 * body stops it early. */
#define FIXTURE_TEST(name)                                                                         \
    static void name##_body(struct fixture *f);                                                    \
    static void name(void)                                                                         \
    {                                                                                              \
        struct fixture fixture;                                                                    \
        if (!fixture_open(&fixture, T0_MS)) {                                                      \
            CHECK(!"the backend opens");                                                           \
            return;                                                                                \
        }                                                                                          \
        name##_body(&fixture);                                                                     \
        fixture_close(&fixture);                                                                   \
    }                                                                                              \
    static void name##_body(struct fixture *f)

/* Each file's tests. */
extern const struct conformance_test reserve_tests[], budget_tests[], period_tests[], lease_tests[],
    admin_tests[], retry_tests[], stress_tests[], console_tests[], wait_tests[],
    wait_stress_tests[];
extern const uint32_t reserve_test_count, budget_test_count, period_test_count, lease_test_count,
    admin_test_count, retry_test_count, stress_test_count, console_test_count, wait_test_count,
    wait_stress_test_count;

#endif
