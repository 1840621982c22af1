/* Conformance: concurrency of callers. Threads hammering one limit never
 * overshoot it, and budget races in usd_micros at the backend level: exact
 * admission under contention, a release that unblocks waiting callers,
 * expiry, the clock stepping back, a commit after expiry
 * (docs/semantics.md "Budgets"). A crash inside a transaction is the sqlite
 * backend's own fault test. */
#include <stdatomic.h>
#include <stdio.h>

#include "conformance.h"
#include "test.h"

#define STRESS_THREADS 8
#define STRESS_RESERVES 2000

struct fill_run {
    struct fixture *f;
    _Atomic uint64_t allowed_amount;
    _Atomic uint32_t allowed_count;
};

static void fill_thread(uint32_t index, void *context)
{
    struct fill_run *run = context;
    char id[48];
    for (uint32_t i = 0; i < STRESS_RESERVES; i++) {
        uint64_t amount = 1 + (index + i) % 3;
        snprintf(id, sizeof id, "t%u-%u", index, i);
        if (reserve1(run->f, id, "tpm", amount)) {
            atomic_fetch_add(&run->allowed_amount, amount);
            atomic_fetch_add(&run->allowed_count, 1);
        }
    }
}

FIXTURE_TEST(threads_never_exceed_capacity)
{
    REQUIRE(put_rolling(f, "tpm", 1000, 60));
    struct fill_run run = {.f = f};
    run_threads(STRESS_THREADS, fill_thread, &run);
    uint64_t allowed = atomic_load(&run.allowed_amount);
    CHECK(allowed <= 1000);
    CHECK(allowed >= 998); /* it fills up: at most an amount of 2 or 3 did not fit */
    CHECK_EQ_U64(usage(f, "tpm").reserved, allowed);
}

#define CHURN_ITERATIONS 3000
#define CHURN_SLOTS 4

struct churn_run {
    struct fixture *f;
    _Atomic int32_t in_flight;
    _Atomic int32_t in_flight_max;
    _Atomic uint64_t completed;
    _Atomic uint64_t allowed;
};

static void churn_thread(uint32_t index, void *context)
{
    struct churn_run *run = context;
    char id[48];
    for (uint32_t i = 0; i < CHURN_ITERATIONS; i++) {
        snprintf(id, sizeof id, "c%u-%u", index, i);
        struct reservation r = RESERVE(run->f, id, {"slots", 1}, {"rpm", 1}, {"usd", 10});
        if (!r.allowed)
            continue;
        atomic_fetch_add(&run->allowed, 1);
        /* Counted after the hold exists and before it is freed, so this can
         * never be above what the backend holds. */
        int32_t now = atomic_fetch_add(&run->in_flight, 1) + 1;
        int32_t seen = atomic_load(&run->in_flight_max);
        while (now > seen && !atomic_compare_exchange_weak(&run->in_flight_max, &seen, now))
            ;
        atomic_fetch_sub(&run->in_flight, 1);
        if (i % 2 == 0) {
            if (COMPLETE(run->f, id, {"slots", 1}, {"rpm", 1}, {"usd", 10}).reconciled)
                atomic_fetch_add(&run->completed, 1);
        } else {
            release(run->f, id);
        }
    }
}

FIXTURE_TEST(threads_churning_slots_stay_within_capacity)
{
    REQUIRE(put_concurrency(f, "slots", CHURN_SLOTS, 600));
    REQUIRE(put_rolling(f, "rpm", 1000000, 600));
    REQUIRE(put_budget(f, "usd", 1000000000, PERIOD_MONTH, 300));
    struct churn_run run = {.f = f};
    run_threads(STRESS_THREADS, churn_thread, &run);
    CHECK(atomic_load(&run.in_flight_max) <= CHURN_SLOTS);
    CHECK(atomic_load(&run.allowed) > 0);
    uint64_t completed = atomic_load(&run.completed);
    CHECK_EQ_U64(usage(f, "slots").reserved, 0);
    struct limit_usage rpm = usage(f, "rpm");
    CHECK_EQ_U64(rpm.reserved, 0);
    CHECK_EQ_U64(rpm.used, completed); /* released ones freed their rolling hold */
    struct limit_usage usd = usage(f, "usd");
    CHECK_EQ_U64(usd.reserved, 0);
    CHECK_EQ_U64(usd.used, 10 * completed);
}

/* Concurrent reserves of $0.05 against a $1.00 budget. */
struct burst {
    struct fixture *f;
    const char *prefix;
    uint32_t per_thread;
    _Atomic uint32_t allowed;
    _Atomic uint32_t denied;
};

static void burst_thread(uint32_t index, void *context)
{
    struct burst *b = context;
    char id[48];
    for (uint32_t i = 0; i < b->per_thread; i++) {
        snprintf(id, sizeof id, "%s-%u-%u", b->prefix, index, i);
        struct reservation r = RESERVE(b->f, id, {"room:sales:usd:month", 50000});
        if (r.status == RESULT_OK && r.allowed)
            atomic_fetch_add(&b->allowed, 1);
        else if (r.status == RESULT_OK && r.error[0] == '\0')
            atomic_fetch_add(&b->denied, 1);
    }
}

static uint32_t burst(struct fixture *f, const char *prefix, uint32_t threads, uint32_t each,
                      uint32_t *denied)
{
    struct burst b = {.f = f, .prefix = prefix, .per_thread = each};
    run_threads(threads, burst_thread, &b);
    *denied = atomic_load(&b.denied);
    return atomic_load(&b.allowed);
}

FIXTURE_TEST(budget_race_hundred_reserves_admit_twenty)
{
    REQUIRE(put_budget(f, "room:sales:usd:month", 1000000, PERIOD_MONTH, 60));
    uint32_t denied;
    uint32_t allowed = burst(f, "t1", 10, 10, &denied);
    CHECK_EQ_U64(allowed, 20);
    CHECK_EQ_U64(denied, 80);
    struct limit_usage u = usage(f, "room:sales:usd:month");
    CHECK_EQ_U64(u.reserved, 1000000); /* exact, not 1000000 + epsilon */
    CHECK_EQ_U64(u.used, 0);
    CHECK_EQ_I64(u.available, 0);
}

FIXTURE_TEST(budget_race_release_unblocks_exactly_ten)
{
    /* A $0.50 reservation on a $1.00 cap cannot block reserves of $0.05;
     * with $0.50 already spent it does, and releasing the reservation then
     * admits exactly 10. */
    REQUIRE(put_budget(f, "room:sales:usd:month", 1000000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "spent", "room:sales:usd:month", 500000));
    REQUIRE(complete_none(f, "spent").status == RESULT_OK);
    REQUIRE(reserve1(f, "initial", "room:sales:usd:month", 500000));
    uint32_t denied;
    CHECK_EQ_U64(burst(f, "b", 10, 5, &denied), 0);
    CHECK_EQ_U64(denied, 50);
    CHECK_EQ_I64(release(f, "initial").status, RESULT_OK);
    CHECK_EQ_U64(burst(f, "d", 10, 5, &denied), 10);
    CHECK_EQ_U64(denied, 40);
    CHECK_EQ_U64(usage(f, "room:sales:usd:month").reserved, 500000);
}

FIXTURE_TEST(budget_race_expiry_frees_budget)
{
    /* 5 s is the shortest budget timeout (BUDGET_TIMEOUT_SECONDS_MIN). */
    REQUIRE(put_budget(f, "room:hr:usd:month", 100000, PERIOD_MONTH, 5));
    struct reservation first = RESERVE(f, "caller-1", {"room:hr:usd:month", 100000});
    REQUIRE(first.allowed);
    CHECK(!reserve1(f, "caller-2a", "room:hr:usd:month", 50000));
    advance_to(f, just_after(f, first.expires_at_unix_ms));
    tick(f);
    CHECK(reserve1(f, "caller-2b", "room:hr:usd:month", 50000));
    CHECK_EQ_U64(usage(f, "room:hr:usd:month").reserved, 50000);
}

FIXTURE_TEST(budget_race_clock_stepping_back_revives_nothing)
{
    REQUIRE(put_budget(f, "room:finance:usd:month", 500000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "call", "room:finance:usd:month", 50000)); /* expires T0+60s */
    set_time(f, T0_MS - 30000);
    tick(f);
    CHECK_EQ_U64(usage(f, "room:finance:usd:month").reserved, 50000); /* not swept */
    struct completion c = COMPLETE(f, "call", {"room:finance:usd:month", 50000});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(c.reconciled);
    CHECK(!has_warning(&c, "commit_after_expiry:room:finance:usd:month"));
    CHECK_EQ_U64(usage(f, "room:finance:usd:month").used, 50000);
    /* And an expired hold stays expired when the clock steps back. */
    REQUIRE(reserve1(f, "second", "room:finance:usd:month", 450000));
    set_time(f, T0_MS + 120000);
    tick(f);
    set_time(f, T0_MS);
    CHECK_EQ_U64(usage(f, "room:finance:usd:month").reserved, 0);
}

FIXTURE_TEST(budget_race_commit_after_expiry_counts)
{
    REQUIRE(put_budget(f, "room:ops:usd:month", 1000000, PERIOD_MONTH, 5));
    struct reservation slow = RESERVE(f, "slow", {"room:ops:usd:month", 300000});
    REQUIRE(slow.allowed);
    advance_to(f, just_after(f, slow.expires_at_unix_ms));
    struct completion c = COMPLETE(f, "slow", {"room:ops:usd:month", 300000});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(has_warning(&c, "commit_after_expiry:room:ops:usd:month"));
    struct limit_usage u = usage(f, "room:ops:usd:month");
    CHECK_EQ_U64(u.used, 300000);
    CHECK_EQ_I64(u.available, 700000);
    CHECK(reserve1(f, "rest", "room:ops:usd:month", 700000));
    CHECK(!reserve1(f, "one-more", "room:ops:usd:month", 1));
}

const struct conformance_test stress_tests[] = {
    TEST_ENTRY(threads_never_exceed_capacity,
               "8 threads reserving on one limit never hold more than its capacity; usage matches"),
    TEST_ENTRY(threads_churning_slots_stay_within_capacity,
               "8 threads reserving 3 limits and completing/releasing never exceed 4 slots; "
               "usage matches what was completed"),
    TEST_ENTRY(budget_race_hundred_reserves_admit_twenty,
               "100 concurrent $0.05 reserves on $1.00 allow exactly 20, sum exact"),
    TEST_ENTRY(budget_race_release_unblocks_exactly_ten,
               "a full budget blocks all 50; after a release exactly 10 of 50 pass"),
    TEST_ENTRY(budget_race_expiry_frees_budget,
               "an expired reservation frees the budget for the next caller"),
    MANUAL_CLOCK_TEST_ENTRY(budget_race_clock_stepping_back_revives_nothing,
                            "a clock stepping back neither expires live holds nor revives expired "
                            "ones",
                            "steps the clock back"),
    TEST_ENTRY(budget_race_commit_after_expiry_counts,
               "a commit after expiry is charged and counts in later reserves"),
};
const uint32_t stress_test_count = sizeof stress_tests / sizeof stress_tests[0];
