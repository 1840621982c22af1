/* Conformance: retry_after_ms (docs/semantics.md): exact for rolling, capped
 * and jittered for concurrency, expiry-or-period-end for budgets, the
 * maximum over denied requirements. */
#include <stdio.h>

#include "conformance.h"
#include "test.h"

static int64_t retry_of(struct fixture *f, const char *lease_id, const char *key, uint64_t amount)
{
    struct reservation r = RESERVE(f, lease_id, {key, amount});
    if (r.allowed || r.status != RESULT_OK || r.error[0] != '\0')
        return -1;
    return r.retry_after_ms;
}

FIXTURE_TEST(rolling_retry_after_is_exact)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "l1", "tpm", 30)); /* expires T0+60s */
    advance(f, 10000);
    REQUIRE(reserve1(f, "l2", "tpm", 50)); /* expires T0+70s */
    advance(f, 10000);
    REQUIRE(reserve1(f, "l3", "tpm", 20)); /* expires T0+80s */
    advance(f, 5000);                      /* now T0+25s, full */
    /* 30 needs l1 gone: 35 s; 40 needs l1 and l2: 45 s; 100 needs all: 55 s. */
    CHECK_EQ_I64(retry_of(f, "d1", "tpm", 30), 35000);
    CHECK_EQ_I64(retry_of(f, "d2", "tpm", 40), 45000);
    CHECK_EQ_I64(retry_of(f, "d3", "tpm", 100), 55000);
    /* A shrunk hold frees less when it expires: 10 of l1, then l2. */
    REQUIRE(COMPLETE(f, "l1", {"tpm", 10}).status == RESULT_OK);
    CHECK_EQ_I64(retry_of(f, "d4", "tpm", 21), 35000);
    CHECK_EQ_I64(retry_of(f, "d5", "tpm", 31), 45000);
    /* And the answer is right: at T0+60s exactly, 30 fits but 31 does not. */
    set_time(f, T0_MS + 60000);
    CHECK(!reserve1(f, "d6", "tpm", 31));
    CHECK(reserve1(f, "a1", "tpm", 30));
}

static void concurrency_retry_after_is_capped_with_jitter(void)
{
    struct fixture fixture, *f = &fixture;
    struct backend_config config;
    fixture_config(f, &config, T0_MS);
    config.concurrency_poll_ms = 250;
    REQUIRE(fixture_start(f, &config));
    CHECK(put_concurrency(f, "slots", 1, 30));
    CHECK(reserve1(f, "holder", "slots", 1));
    int64_t low = INT64_MAX, high = 0;
    char id[32];
    for (int i = 0; i < 200; i++) {
        snprintf(id, sizeof id, "w%d", i);
        int64_t retry = retry_of(f, id, "slots", 1);
        CHECK(retry >= 200);
        CHECK(retry <= 300);
        low = retry < low ? retry : low;
        high = retry > high ? retry : high;
    }
    CHECK(low < high); /* jittered, so clients do not retry in lockstep */
    /* When the hold expires sooner than the poll interval, that wins. */
    advance(f, 29900);
    CHECK_EQ_I64(retry_of(f, "late", "slots", 1), 100);
    advance(f, 99);
    CHECK_EQ_I64(retry_of(f, "last-ms", "slots", 1), 1);
    fixture_close(f);
}

FIXTURE_TEST(budget_retry_after_is_expiry_or_period_end)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "l1", "usd", 600)); /* expires T0+60s */
    advance(f, 10000);
    REQUIRE(reserve1(f, "l2", "usd", 300)); /* expires T0+70s */
    advance(f, 10000);
    /* 200 needs 100 freed: l1's expiry at T0+60s does it. */
    CHECK_EQ_I64(retry_of(f, "d1", "usd", 200), 40000);
    /* l1 commits 700: 700 + 300 reserved; 200 more needs l2 gone. */
    REQUIRE(COMPLETE(f, "l1", {"usd", 700}).status == RESULT_OK);
    CHECK_EQ_I64(retry_of(f, "d2", "usd", 200), 50000);
    /* 400 cannot fit this month even when l2 expires: wait for February. */
    CHECK_EQ_I64(retry_of(f, "d3", "usd", 400), FEB_01_MS - (T0_MS + 20000));
}

FIXTURE_TEST(retry_after_is_the_max_over_denied_requirements)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 30));
    REQUIRE(RESERVE(f, "l1", {"tpm", 100}, {"usd", 1000}).allowed);
    advance(f, 5000);
    /* tpm frees in 55 s, usd in 25 s: the request fits only after both. */
    struct reservation r = RESERVE(f, "d1", {"tpm", 1}, {"usd", 1});
    CHECK(!r.allowed);
    CHECK_EQ_U64(r.denied_count, 2);
    CHECK_EQ_I64(r.retry_after_ms, 55000);
}

FIXTURE_TEST(retry_after_survives_a_clock_step_back)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "l1", "tpm", 50)); /* expires T0+60s */
    set_time(f, T0_MS - 20000);
    REQUIRE(reserve1(f, "l2", "tpm", 50)); /* expires T0+40s: before l1 */
    /* 50 needs only the earliest hold gone: l2 at T0+40s. */
    CHECK_EQ_I64(retry_of(f, "d1", "tpm", 50), 60000);
    CHECK_EQ_I64(retry_of(f, "d2", "tpm", 51), 80000);
    set_time(f, T0_MS + 40000);
    CHECK(reserve1(f, "a1", "tpm", 50));
}

FIXTURE_TEST(retry_after_past_the_walk_bound_is_never_early)
{
    /* RETRY_WALK_HOLDS_MAX + 2 holds of 1, one per millisecond; the request
     * needs all but the last to expire, one more than the walk visits. */
    uint32_t holds = RETRY_WALK_HOLDS_MAX + 2;
    REQUIRE(put_rolling(f, "rpm", holds, 60));
    char id[32];
    for (uint32_t i = 0; i < holds; i++) {
        snprintf(id, sizeof id, "h%u", i);
        REQUIRE(reserve1(f, id, "rpm", 1));
        advance(f, 1);
    }
    /* now = T0 + holds; hold i expires at T0 + 60000 + i. */
    int64_t exact = T0_MS + 60000 + (holds - 2) - now_ms(f);
    int64_t latest = T0_MS + 60000 + (holds - 1) - now_ms(f);
    int64_t retry = retry_of(f, "wide", "rpm", holds - 1);
    CHECK(retry >= exact);
    CHECK(retry <= latest);
    /* Within the bound it is exact. */
    CHECK_EQ_I64(retry_of(f, "narrow", "rpm", RETRY_WALK_HOLDS_MAX),
                 T0_MS + 60000 + (RETRY_WALK_HOLDS_MAX - 1) - now_ms(f));
}

void run_retry_tests(int *passed, int *failed)
{
    RUN(rolling_retry_after_is_exact,
        "rolling retry_after_ms is the exact time until enough held amount expires");
    RUN(concurrency_retry_after_is_capped_with_jitter,
        "concurrency retry_after_ms is the earliest expiry capped at the poll interval +-20%");
    RUN(budget_retry_after_is_expiry_or_period_end,
        "budget retry_after_ms is the reservation expiry that makes room, else the period end");
    RUN(retry_after_is_the_max_over_denied_requirements,
        "retry_after_ms is the maximum over the denied requirements");
    RUN(retry_after_past_the_walk_bound_is_never_early,
        "one past RETRY_WALK_HOLDS_MAX holds, retry_after_ms is still never too early");
    RUN(retry_after_survives_a_clock_step_back,
        "holds that expire out of order (clock stepped back) keep expiry and retry exact");
    *passed += test_passed_count;
    *failed += test_failed_count;
}
