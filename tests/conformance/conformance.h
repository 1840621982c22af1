/* Shared fixture of the backend conformance suite: opens the backend named
 * on the command line on a manual clock and a fresh data directory, and
 * wraps the data path in small blocking helpers. Written only against
 * backend.h, so every backend runs the same expectations. */
#ifndef LLMLIMIT_CONFORMANCE_H
#define LLMLIMIT_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend_results.h"
#include "core/clock.h"
#include "core/limits.h"

/* 2026-01-15T12:00:00Z, a Thursday: the default start of every test. */
#define T0_MS INT64_C(1768478400000)
#define JAN_01_MS INT64_C(1767225600000)
#define JAN_31_23_59_59_MS INT64_C(1769903999000)
#define FEB_01_MS INT64_C(1769904000000)
#define MAR_01_MS INT64_C(1772323200000)
#define MON_JAN_12_MS INT64_C(1768176000000)
#define MON_JAN_19_MS INT64_C(1768780800000)
#define JAN_16_MS INT64_C(1768521600000)

struct fixture {
    const struct backend_ops *ops;
    struct backend *backend;
    struct clock_manual clock;
    char data_dir[512];
};

/* What differs between backends by design (documented in docs/semantics.md). */
struct backend_traits {
    bool bounded_lease_cache;     /* lease_cache_entries evicts (memory, tigerbeetle) */
    uint32_t budget_periods_kept; /* past periods reported, with the current; 0: all */
    uint32_t callers_max;         /* distinct callers told apart (memory); 0: all */
};

extern const char *conformance_backend;
extern struct backend_traits conformance_traits;

/* Defaults (backend_config_defaults) on the manual clock and a fresh data
 * directory. Tests may change fields before fixture_start. */
void fixture_config(struct fixture *f, struct backend_config *config, int64_t start_ms);
bool fixture_start(struct fixture *f, const struct backend_config *config);
/* fixture_config + fixture_start. */
bool fixture_open(struct fixture *f, int64_t start_ms);
void fixture_close(struct fixture *f);

/* Limits; each validates (and normalises) the definition first, as the
 * server does. put returns put_limit's result; state and error (of
 * RESULT_ERROR_SIZE bytes) may be NULL. */
struct limit_definition rolling_limit(const char *key, uint64_t capacity, uint32_t window_seconds);
struct limit_definition concurrency_limit(const char *key, uint64_t capacity,
                                          uint32_t timeout_seconds);
struct limit_definition budget_limit(const char *key, uint64_t capacity, enum limit_period period,
                                     uint32_t timeout_seconds);
int put(struct fixture *f, struct limit_definition definition, struct limit_state *state,
        char *error);
bool put_rolling(struct fixture *f, const char *key, uint64_t capacity, uint32_t window_seconds);
bool put_concurrency(struct fixture *f, const char *key, uint64_t capacity,
                     uint32_t timeout_seconds);
bool put_budget(struct fixture *f, const char *key, uint64_t capacity, enum limit_period period,
                uint32_t timeout_seconds);

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
/* A caller's usage of a limit now, on backends that count callers: false
 * when the backend cannot tell (then *out is untouched). */
bool caller_usage_of(struct fixture *f, const char *key, const char *caller,
                     struct caller_usage *out);
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
int usage_rc(struct fixture *f, const char *key);

int64_t now_ms(struct fixture *f);
void advance(struct fixture *f, int64_t delta_ms);
void set_time(struct fixture *f, int64_t unix_ms);
/* Runs the backend's tick; returns *limits_changed. */
bool tick(struct fixture *f);
struct backend_stats stats(struct fixture *f);

/* Runs fn(i, context) on count threads at once (all start together). */
void run_threads(uint32_t count, void (*fn)(uint32_t index, void *context), void *context);

/* Defines the test `name`: its body runs on a fixture opened at T0_MS and
 * closed afterwards, even when a REQUIRE in the body stops it early. */
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

/* Each file's tests; they add their pass/fail counts. */
void run_reserve_tests(int *passed, int *failed);
void run_budget_tests(int *passed, int *failed);
void run_lease_tests(int *passed, int *failed);
void run_admin_tests(int *passed, int *failed);
void run_retry_tests(int *passed, int *failed);
void run_stress_tests(int *passed, int *failed);
void run_console_tests(int *passed, int *failed);

#endif
