/* Conformance: budgets (docs/semantics.md "Budgets"): commit, overrun
 * debt, UTC periods and their roll-over, old periods, late commits. */
#include "backend/memory/mem_bounds.h"
#include "conformance.h"
#include "test.h"

FIXTURE_TEST(budget_commit_charges_the_actual)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 5));
    struct reservation call = RESERVE(f, "call", {"usd", 300});
    REQUIRE(call.allowed);
    struct completion c = COMPLETE(f, "call", {"usd", 200});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(c.reconciled);
    CHECK_EQ_U64(c.warning_count, 0);
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_U64(u.used, 200);
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_I64(u.available, 800);
    CHECK_EQ_I64(u.period_start_unix_ms, utc_period_start_ms(PERIOD_MONTH, now_ms(f)));
    CHECK_EQ_I64(u.period_end_unix_ms, utc_period_end_ms(PERIOD_MONTH, now_ms(f)));
    if (!f->real_clock) {
        CHECK_EQ_I64(u.period_start_unix_ms, JAN_01_MS);
        CHECK_EQ_I64(u.period_end_unix_ms, FEB_01_MS);
    }
    /* Committed is permanent for the period: the hold's expiry changes nothing. */
    advance_to(f, just_after(f, call.expires_at_unix_ms));
    tick(f);
    CHECK_EQ_U64(usage(f, "usd").used, 200);
}

FIXTURE_TEST(budget_overrun_is_debt_and_blocks_until_next_period)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "one", "usd", 600));
    REQUIRE(reserve1(f, "two", "usd", 300));
    /* 900 spent on a 600 reservation: 700 fits next to the other 300. */
    CHECK_EQ_I64(COMPLETE(f, "one", {"usd", 900}).status, RESULT_OK);
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 700);
    CHECK_EQ_U64(u.debt, 200);
    CHECK_EQ_U64(u.reserved, 300);
    CHECK_EQ_I64(u.available, -200);
    /* "two" spends exactly its reservation: that had room when reserved, so
     * it is used, never debt; the debt stays the overrunning lease's. */
    struct completion two = COMPLETE(f, "two", {"usd", 300});
    CHECK_EQ_I64(two.status, RESULT_OK);
    CHECK_EQ_U64(two.warning_count, 0);
    u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 1000);
    CHECK_EQ_U64(u.debt, 200);
    CHECK_EQ_I64(u.available, -200);
    int64_t asked_ms = now_ms(f);
    struct reservation r = RESERVE(f, "denied", {"usd", 1});
    int64_t answered_ms = now_ms(f);
    CHECK(!r.allowed);
    int64_t period_end_ms = utc_period_end_ms(PERIOD_MONTH, asked_ms);
    CHECK_TIME_BETWEEN(f, r.retry_after_ms, period_end_ms - answered_ms, period_end_ms - asked_ms);
}

FIXTURE_TEST(budget_debt_ends_with_its_period)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "one", "usd", 1000));
    struct completion one = COMPLETE(f, "one", {"usd", 1200});
    CHECK(has_warning(&one, "overage_debt:usd"));
    CHECK_EQ_U64(usage(f, "usd").debt, 200);
    CHECK_EQ_I64(RESERVE(f, "denied", {"usd", 1}).retry_after_ms, FEB_01_MS - T0_MS);
    set_time(f, FEB_01_MS);
    CHECK(reserve1(f, "february", "usd", 1000));
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 0);
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_U64(u.reserved, 1000);
    CHECK_EQ_U64(usage_at(f, "usd", T0_MS).debt, 200);
}

/* Commits within their own reservations after another lease's overrun
 * filled the period: used, no debt, no warning, whether the actual is given,
 * smaller, or left out; only the overrunning caller carries debt, and it
 * comes first among the callers by what it spent. */
FIXTURE_TEST(budget_commit_within_reservation_is_never_debt)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(RESERVE_AS(f, "greedy", "alice", {"usd", 400}).allowed);
    REQUIRE(RESERVE_AS(f, "exact", "bob", {"usd", 200}).allowed);
    REQUIRE(RESERVE_AS(f, "less", "bob", {"usd", 200}).allowed);
    REQUIRE(RESERVE_AS(f, "left-out", "bob", {"usd", 200}).allowed);
    /* alice spends 900 on 400: 400 is hers, 0 of the 500 excess fits. */
    struct completion greedy = COMPLETE(f, "greedy", {"usd", 900});
    CHECK(has_warning(&greedy, "overage_debt:usd"));
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 400);
    CHECK_EQ_U64(u.debt, 500);
    struct completion exact = COMPLETE(f, "exact", {"usd", 200});
    struct completion less = COMPLETE(f, "less", {"usd", 150});
    struct completion left_out = complete_none(f, "left-out");
    CHECK_EQ_U64(exact.warning_count, 0);
    CHECK_EQ_U64(less.warning_count, 0);
    CHECK_EQ_U64(left_out.warning_count, 0);
    u = usage(f, "usd");
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_I64(u.available, 1000 - (400 + 200 + 150 + 200) - 500);
    if (!f->backend->ops->budget_debt_pooled) {
        CHECK_EQ_U64(u.used, 400 + 200 + 150 + 200);
        CHECK_EQ_U64(u.debt, 500);
    } else {
        /* One pool of debt per period: the 50 "less" left unspent paid 50
         * of it and reports as used (backend.h, budget_debt_pooled). */
        CHECK_EQ_U64(u.used, 1000);
        CHECK_EQ_U64(u.debt, 450);
    }
    /* Per caller, where the backend counts callers: the debt is alice's. */
    struct caller_usage alice, bob;
    bool by_caller = caller_usage_of(f, "usd", "alice", &alice);
    CHECK(by_caller == (f->backend->ops->usage_by_caller != NULL));
    if (by_caller && caller_usage_of(f, "usd", "bob", &bob)) {
        CHECK_EQ_U64(alice.used, 400);
        CHECK_EQ_U64(alice.debt, 500);
        CHECK_EQ_U64(bob.used, 550);
        CHECK_EQ_U64(bob.debt, 0);
        /* Largest spend (used + debt) first: alice's 900 before bob's 550,
         * although bob used more. */
        CHECK_EQ_I64(caller_rank(f, "usd", "alice"), 0);
        CHECK_EQ_I64(caller_rank(f, "usd", "bob"), 1);
    }
}

FIXTURE_TEST(budget_period_rolls_over_at_utc_month_end)
{
    set_time(f, JAN_31_23_59_59_MS + 999);
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "late-january", "usd", 1000));
    CHECK(!reserve1(f, "still-january", "usd", 1));
    set_time(f, FEB_01_MS);
    /* The January reservation is still live but belongs to January. */
    CHECK(reserve1(f, "february", "usd", 1000));
    struct limit_usage feb = usage(f, "usd");
    CHECK_EQ_I64(feb.period_start_unix_ms, FEB_01_MS);
    CHECK_EQ_I64(feb.period_end_unix_ms, MAR_01_MS);
    CHECK_EQ_U64(feb.reserved, 1000);
    struct limit_usage jan = usage_at(f, "usd", JAN_31_23_59_59_MS);
    CHECK_EQ_I64(jan.period_start_unix_ms, JAN_01_MS);
    CHECK_EQ_U64(jan.reserved, 1000);
}

FIXTURE_TEST(budget_old_period_stays_queryable)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "january", "usd", 400));
    REQUIRE(complete_none(f, "january").status == RESULT_OK);
    set_time(f, FEB_01_MS + 3600 * 1000);
    tick(f);
    REQUIRE(reserve1(f, "february", "usd", 100));
    REQUIRE(complete_none(f, "february").status == RESULT_OK);
    struct limit_usage jan = usage_at(f, "usd", T0_MS);
    CHECK_EQ_U64(jan.used, 400);
    CHECK_EQ_I64(jan.available, 600);
    CHECK_EQ_I64(jan.period_start_unix_ms, JAN_01_MS);
    CHECK_EQ_I64(jan.period_end_unix_ms, FEB_01_MS);
    struct limit_usage feb = usage(f, "usd");
    CHECK_EQ_U64(feb.used, 100);
    CHECK_EQ_I64(feb.period_start_unix_ms, FEB_01_MS);
    /* A period with no activity reports zero. */
    struct limit_usage dec = usage_at(f, "usd", JAN_01_MS - 1);
    CHECK_EQ_U64(dec.used, 0);
    CHECK_EQ_I64(dec.available, 1000);
}

FIXTURE_TEST(budget_commit_after_period_end_goes_to_its_own_period)
{
    set_time(f, JAN_31_23_59_59_MS - 10000);
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "straddles", "usd", 300));
    set_time(f, FEB_01_MS + 30000); /* the hold is still live */
    struct completion c = COMPLETE(f, "straddles", {"usd", 300});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(!has_warning(&c, "commit_after_expiry:usd"));
    CHECK_EQ_U64(usage_at(f, "usd", JAN_31_23_59_59_MS).used, 300);
    CHECK_EQ_U64(usage(f, "usd").used, 0);
}

FIXTURE_TEST(budget_commit_after_expiry_is_charged_with_warning)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 5));
    struct reservation slow = RESERVE(f, "slow", {"usd", 300});
    REQUIRE(slow.allowed);
    advance_to(f, just_after(f, slow.expires_at_unix_ms));
    tick(f);
    CHECK_EQ_U64(usage(f, "usd").reserved, 0);
    struct completion c = COMPLETE(f, "slow", {"usd", 250});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(c.reconciled);
    CHECK(has_warning(&c, "commit_after_expiry:usd"));
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 250);
    CHECK_EQ_I64(u.available, 750);
}

FIXTURE_TEST(budget_left_out_key_settles_at_reserved)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    REQUIRE(RESERVE(f, "call", {"usd", 500}, {"rpm", 1}).allowed);
    REQUIRE(COMPLETE(f, "call", {"rpm", 1}).status == RESULT_OK);
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 500);
    CHECK_EQ_U64(u.reserved, 0);
}

FIXTURE_TEST(budget_release_frees_the_reservation)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "call", "usd", 1000));
    CHECK_EQ_I64(release(f, "call").status, RESULT_OK);
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_U64(u.used, 0);
    CHECK(reserve1(f, "next", "usd", 1000));
}

FIXTURE_TEST(budget_day_and_week_periods_are_utc)
{
    REQUIRE(put_budget(f, "daily", 100, PERIOD_DAY, 60));
    REQUIRE(put_budget(f, "weekly", 100, PERIOD_WEEK, 60));
    struct limit_usage day = usage(f, "daily");
    CHECK_EQ_I64(day.period_start_unix_ms, JAN_16_MS - 86400000);
    CHECK_EQ_I64(day.period_end_unix_ms, JAN_16_MS);
    struct limit_usage week = usage(f, "weekly");
    CHECK_EQ_I64(week.period_start_unix_ms, MON_JAN_12_MS);
    CHECK_EQ_I64(week.period_end_unix_ms, MON_JAN_19_MS);
    REQUIRE(reserve1(f, "d1", "daily", 100));
    REQUIRE(complete_none(f, "d1").status == RESULT_OK);
    set_time(f, JAN_16_MS - 1);
    CHECK(!reserve1(f, "d2", "daily", 1));
    set_time(f, JAN_16_MS);
    CHECK(reserve1(f, "d3", "daily", 100));
}

/* Each kind of period as usage reports it, checked against UTC calendar
 * arithmetic done here. */
FIXTURE_TEST(budget_periods_are_reported_in_utc)
{
    REQUIRE(put_budget(f, "daily", 100, PERIOD_DAY, 60));
    REQUIRE(put_budget(f, "weekly", 100, PERIOD_WEEK, 60));
    REQUIRE(put_budget(f, "monthly", 100, PERIOD_MONTH, 60));
    const char *keys[3] = {"daily", "weekly", "monthly"};
    enum limit_period periods[3] = {PERIOD_DAY, PERIOD_WEEK, PERIOD_MONTH};
    for (int i = 0; i < 3; i++) {
        int64_t at_ms = now_ms(f);
        struct limit_usage u = usage(f, keys[i]);
        CHECK_EQ_I64(u.period_start_unix_ms, utc_period_start_ms(periods[i], at_ms));
        CHECK_EQ_I64(u.period_end_unix_ms, utc_period_end_ms(periods[i], at_ms));
        CHECK(u.period_start_unix_ms <= at_ms);
        CHECK(at_ms < u.period_end_unix_ms);
    }
    /* The arithmetic here agrees with the calendar. */
    CHECK_EQ_I64(utc_period_start_ms(PERIOD_WEEK, T0_MS), MON_JAN_12_MS);
    CHECK_EQ_I64(utc_period_end_ms(PERIOD_WEEK, T0_MS), MON_JAN_19_MS);
    CHECK_EQ_I64(utc_period_start_ms(PERIOD_MONTH, T0_MS), JAN_01_MS);
    CHECK_EQ_I64(utc_period_end_ms(PERIOD_MONTH, T0_MS), FEB_01_MS);
    CHECK_EQ_I64(utc_period_end_ms(PERIOD_MONTH, FEB_01_MS), MAR_01_MS);
    CHECK_EQ_I64(utc_period_end_ms(PERIOD_DAY, T0_MS), JAN_16_MS);
}

FIXTURE_TEST(budget_old_periods_are_kept_up_to_the_bound)
{
    REQUIRE(put_budget(f, "usd", 100, PERIOD_DAY, 60));
    REQUIRE(reserve1(f, "first-day", "usd", 7));
    REQUIRE(complete_none(f, "first-day").status == RESULT_OK);
    uint32_t kept = conformance_traits.budget_periods_kept;
    uint32_t days = kept == 0 ? MEM_BUDGET_PERIODS_KEPT : kept;
    /* Each day has activity, so each is a period of its own. */
    for (uint32_t day = 1; day < days; day++) {
        advance(f, 86400000);
        tick(f);
    }
    CHECK_EQ_U64(usage_at(f, "usd", T0_MS).used, 7); /* the oldest kept period */
    advance(f, 86400000);
    tick(f);
    /* One past the bound: the memory backend forgets it, others keep it. */
    CHECK_EQ_U64(usage_at(f, "usd", T0_MS).used, kept == 0 ? 7 : 0);
    CHECK_EQ_I64(usage_at(f, "usd", T0_MS).period_start_unix_ms, JAN_16_MS - 86400000);
}

const struct conformance_test budget_tests[] = {
    TEST_ENTRY(budget_commit_charges_the_actual,
               "complete commits the actual to the period, permanently, and frees the rest"),
    TEST_ENTRY(budget_overrun_is_debt_and_blocks_until_next_period,
               "an overrun beyond the cap is debt, available goes negative, retry_after_ms is the "
               "period end"),
    MANUAL_CLOCK_TEST_ENTRY(
        budget_debt_ends_with_its_period,
        "debt blocks until the next period, which starts without it; the old period keeps it",
        "sets the clock to the first of February"),
    TEST_ENTRY(
        budget_commit_within_reservation_is_never_debt,
        "a commit within its own reservation is used, never debt, after another lease's overrun "
        "filled the period; debt stays with the overrunning caller"),
    MANUAL_CLOCK_TEST_ENTRY(
        budget_period_rolls_over_at_utc_month_end,
        "a new month starts from zero at 00:00 UTC; last month's live hold stays last month's",
        "sets the clock to the last second of January"),
    MANUAL_CLOCK_TEST_ENTRY(budget_old_period_stays_queryable,
                            "usage at_unix_ms reports the period containing it",
                            "moves the clock into February"),
    MANUAL_CLOCK_TEST_ENTRY(
        budget_commit_after_period_end_goes_to_its_own_period,
        "a commit landing after the period ended is charged to the period of the reserve",
        "sets the clock to the end of a month and past it"),
    TEST_ENTRY(budget_commit_after_expiry_is_charged_with_warning,
               "a commit after the hold expired is charged and warned commit_after_expiry:<key>"),
    TEST_ENTRY(budget_left_out_key_settles_at_reserved,
               "a budget key left out of the actuals commits its reserved amount"),
    TEST_ENTRY(budget_release_frees_the_reservation, "release frees a budget reservation at once"),
    MANUAL_CLOCK_TEST_ENTRY(
        budget_old_periods_are_kept_up_to_the_bound,
        "a budget reports its last MEM_BUDGET_PERIODS_KEPT periods; one past, the oldest is gone "
        "(memory) or kept (backends that keep all)",
        "moves the clock 25 days on"),
    MANUAL_CLOCK_TEST_ENTRY(budget_day_and_week_periods_are_utc,
                            "day and week (Monday) periods follow UTC boundaries",
                            "sets the clock to the last millisecond of a day"),
    TEST_ENTRY(budget_periods_are_reported_in_utc,
               "usage reports the UTC day, week (from Monday) and month containing now"),
};
const uint32_t budget_test_count = sizeof budget_tests / sizeof budget_tests[0];
