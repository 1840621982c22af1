/* Conformance: retry_after_ms (docs/semantics.md): exact for rolling, capped
 * and jittered for concurrency, expiry-or-period-end for budgets, the
 * maximum over denied requirements. */
#include <stdio.h>

#include "backend/memory/mem_bounds.h"
#include "conformance.h"
#include "test.h"

static int64_t retry_of(struct fixture *f, const char *lease_id, const char *key, uint64_t amount)
{
    struct reservation r = RESERVE(f, lease_id, {key, amount});
    if (r.allowed || r.status != RESULT_OK || r.error[0] != '\0')
        return -1;
    return r.retry_after_ms;
}

/* retry_after_ms of a denied reserve against the instant at_ms it names. */
#define CHECK_RETRY(f, lease_id, key, amount, at_ms)                                               \
    do {                                                                                           \
        int64_t asked_ms_ = now_ms(f);                                                             \
        int64_t retry_ms_ = retry_of(f, lease_id, key, amount);                                    \
        int64_t answered_ms_ = now_ms(f);                                                          \
        CHECK_TIME_BETWEEN(f, retry_ms_, (at_ms)-answered_ms_, (at_ms)-asked_ms_);                 \
    } while (0)

FIXTURE_TEST(rolling_retry_after_is_exact)
{
    REQUIRE(put_rolling(f, "tpm", 100, 8));
    struct reservation l1 = RESERVE(f, "l1", {"tpm", 30}); /* expires T0+8s */
    REQUIRE(l1.allowed);
    advance(f, 3000);
    struct reservation l2 = RESERVE(f, "l2", {"tpm", 50}); /* expires T0+11s */
    REQUIRE(l2.allowed);
    advance(f, 2000);
    struct reservation l3 = RESERVE(f, "l3", {"tpm", 20}); /* expires T0+13s */
    REQUIRE(l3.allowed);
    advance(f, 1000); /* now T0+6s, full */
    /* 30 needs l1 gone: 2 s; 40 needs l1 and l2: 5 s; 100 needs all: 7 s. */
    CHECK_RETRY(f, "d1", "tpm", 30, l1.expires_at_unix_ms);
    CHECK_RETRY(f, "d2", "tpm", 40, l2.expires_at_unix_ms);
    CHECK_RETRY(f, "d3", "tpm", 100, l3.expires_at_unix_ms);
    /* A shrunk hold frees less when it expires: 10 of l1, then l2. */
    REQUIRE(COMPLETE(f, "l1", {"tpm", 10}).status == RESULT_OK);
    CHECK_RETRY(f, "d4", "tpm", 21, l1.expires_at_unix_ms);
    CHECK_RETRY(f, "d5", "tpm", 31, l2.expires_at_unix_ms);
    /* And the answer is right: once l1 expires, 30 fits but 31 does not. */
    advance_to(f, just_after_kept(f, l1.expires_at_unix_ms));
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
    CHECK(put_concurrency(f, "slots", 1, 2));
    struct reservation holder = RESERVE(f, "holder", {"slots", 1});
    CHECK(holder.allowed);
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
    advance_to(f, holder.expires_at_unix_ms - 100);
    CHECK_RETRY(f, "late", "slots", 1, holder.expires_at_unix_ms);
    if (!f->real_clock) { /* a millisecond is below what a real clock can aim at */
        advance(f, 99);
        CHECK_EQ_I64(retry_of(f, "last-ms", "slots", 1), 1);
    }
    fixture_close(f);
}

FIXTURE_TEST(budget_retry_after_is_expiry_or_period_end)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 5));
    struct reservation l1 = RESERVE(f, "l1", {"usd", 600}); /* expires T0+5s */
    REQUIRE(l1.allowed);
    advance(f, 1000);
    struct reservation l2 = RESERVE(f, "l2", {"usd", 300}); /* expires T0+6s */
    REQUIRE(l2.allowed);
    advance(f, 1000);
    /* 200 needs 100 freed: l1's expiry does it. */
    CHECK_RETRY(f, "d1", "usd", 200, l1.expires_at_unix_ms);
    /* l1 commits 700: 700 + 300 reserved; 200 more needs l2 gone. */
    REQUIRE(COMPLETE(f, "l1", {"usd", 700}).status == RESULT_OK);
    CHECK_RETRY(f, "d2", "usd", 200, l2.expires_at_unix_ms);
    /* 400 cannot fit this month even when l2 expires: wait for the next. */
    CHECK_RETRY(f, "d3", "usd", 400, utc_period_end_ms(PERIOD_MONTH, now_ms(f)));
    if (!f->real_clock)
        CHECK_EQ_I64(retry_of(f, "d4", "usd", 400), FEB_01_MS - (T0_MS + 2000));
}

FIXTURE_TEST(retry_after_is_the_max_over_denied_requirements)
{
    REQUIRE(put_rolling(f, "tpm", 100, 8));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 5));
    struct reservation l1 = RESERVE(f, "l1", {"tpm", 100}, {"usd", 1000});
    REQUIRE(l1.allowed);
    advance(f, 1000);
    /* tpm frees in 7 s, usd in 4 s: the request fits only after both. */
    int64_t asked_ms = now_ms(f);
    struct reservation r = RESERVE(f, "d1", {"tpm", 1}, {"usd", 1});
    int64_t answered_ms = now_ms(f);
    CHECK(!r.allowed);
    CHECK_EQ_U64(r.denied_count, 2);
    int64_t frees_ms = l1.reserved_at_unix_ms + 8000;
    CHECK_TIME_BETWEEN(f, r.retry_after_ms, frees_ms - answered_ms, frees_ms - asked_ms);
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
    /* MEM_RETRY_WALK_HOLDS_MAX + 2 holds of 1, one per millisecond; the request
     * needs all but the last to expire, one more than the walk visits. */
    uint32_t holds = MEM_RETRY_WALK_HOLDS_MAX + 2;
    REQUIRE(put_rolling(f, "rpm", holds, 60));
    static int64_t expires_ms[MEM_RETRY_WALK_HOLDS_MAX + 2];
    char id[32];
    for (uint32_t i = 0; i < holds; i++) {
        snprintf(id, sizeof id, "h%u", i);
        struct reservation r = RESERVE(f, id, {"rpm", 1});
        REQUIRE(r.allowed);
        expires_ms[i] = r.expires_at_unix_ms;
        advance(f, 1);
    }
    /* On a manual clock hold i expires at T0 + 60000 + i. A real clock's
     * answer is checked within the call's span, give or take the skew. */
    int64_t asked_ms = now_ms(f);
    int64_t retry = retry_of(f, "wide", "rpm", holds - 1);
    int64_t answered_ms = now_ms(f);
    CHECK_TIME_BETWEEN(f, retry, expires_ms[holds - 2] - answered_ms,
                       expires_ms[holds - 1] - asked_ms);
    /* Within the bound it is exact. */
    CHECK_RETRY(f, "narrow", "rpm", MEM_RETRY_WALK_HOLDS_MAX,
                expires_ms[MEM_RETRY_WALK_HOLDS_MAX - 1]);
}

const struct conformance_test retry_tests[] = {
    TEST_ENTRY(rolling_retry_after_is_exact,
               "rolling retry_after_ms is the exact time until enough held amount expires"),
    TEST_ENTRY(
        concurrency_retry_after_is_capped_with_jitter,
        "concurrency retry_after_ms is the earliest expiry capped at the poll interval +-20%"),
    TEST_ENTRY(
        budget_retry_after_is_expiry_or_period_end,
        "budget retry_after_ms is the reservation expiry that makes room, else the period end"),
    TEST_ENTRY(retry_after_is_the_max_over_denied_requirements,
               "retry_after_ms is the maximum over the denied requirements"),
    TEST_ENTRY(retry_after_past_the_walk_bound_is_never_early,
               "one past MEM_RETRY_WALK_HOLDS_MAX holds, retry_after_ms is still never too early"),
    MANUAL_CLOCK_TEST_ENTRY(
        retry_after_survives_a_clock_step_back,
        "holds that expire out of order (clock stepped back) keep expiry and retry exact",
        "steps the clock back"),
};
const uint32_t retry_test_count = sizeof retry_tests / sizeof retry_tests[0];
