/* Conformance: reserve across kinds (docs/semantics.md): all-or-nothing,
 * denied_keys, each kind's expiry, rolling shrink and overage, concurrency
 * release, batches. */
#include "conformance.h"
#include "test.h"

FIXTURE_TEST(reserve_holds_every_requirement)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_concurrency(f, "slots", 10, 30));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    int64_t before_ms = now_ms(f);
    struct reservation r = RESERVE(f, "lease-1", {"tpm", 10}, {"slots", 1}, {"usd", 100});
    int64_t after_ms = now_ms(f);
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(r.allowed);
    CHECK_STR(r.error, "");
    CHECK_EQ_U64(r.denied_count, 0);
    CHECK_TIME_BETWEEN(f, r.reserved_at_unix_ms, before_ms, after_ms);
    /* the concurrency hold expires first */
    CHECK_EQ_I64(r.expires_at_unix_ms, r.reserved_at_unix_ms + 30000);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.reserved, 10);
    CHECK_EQ_U64(u.used, 0);
    CHECK_EQ_I64(u.available, 90);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
    u = usage(f, "usd");
    CHECK_EQ_U64(u.reserved, 100);
    CHECK_EQ_I64(u.available, 900);
}

FIXTURE_TEST(all_or_nothing_when_one_limit_denies)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_concurrency(f, "slots", 10, 30));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "filler", "slots", 10));
    struct reservation r = RESERVE(f, "lease-1", {"tpm", 10}, {"slots", 1}, {"usd", 100});
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(!r.allowed);
    CHECK_STR(r.error, ""); /* a capacity denial is not an error */
    CHECK(r.retry_after_ms >= 1);
    REQUIRE(r.denied_count == 1);
    CHECK_EQ_U64(r.denied_index[0], 1);
    /* Nothing was held on the two limits that had room. */
    CHECK_EQ_U64(usage(f, "tpm").reserved, 0);
    CHECK_EQ_I64(usage(f, "tpm").available, 100);
    CHECK_EQ_U64(usage(f, "usd").reserved, 0);
    CHECK_EQ_U64(usage(f, "slots").reserved, 10);
}

FIXTURE_TEST(denied_keys_lists_every_limit_short)
{
    REQUIRE(put_rolling(f, "a", 10, 60));
    REQUIRE(put_rolling(f, "b", 10, 60));
    REQUIRE(put_budget(f, "c", 100, PERIOD_DAY, 60));
    REQUIRE(reserve1(f, "fill-a", "a", 8));
    REQUIRE(reserve1(f, "fill-c", "c", 95));
    struct reservation r = RESERVE(f, "lease-1", {"a", 5}, {"b", 1}, {"c", 10});
    CHECK(!r.allowed);
    REQUIRE(r.denied_count == 2);
    CHECK_EQ_U64(r.denied_index[0], 0);
    CHECK_EQ_U64(r.denied_index[1], 2);
}

/* Holds the whole limit with lease "first", then checks it is still
 * held just before its expiry and free just after. */
static void expires_on_time(struct fixture *f, const char *key, uint64_t capacity,
                            int64_t duration_ms)
{
    struct reservation first = RESERVE(f, "first", {key, capacity});
    REQUIRE(first.allowed);
    CHECK_EQ_I64(first.expires_at_unix_ms, first.reserved_at_unix_ms + duration_ms);
    advance_to(f, just_before(f, first.expires_at_unix_ms));
    CHECK(!reserve1(f, "early", key, 1));
    advance_to(f, just_after(f, first.expires_at_unix_ms));
    CHECK(reserve1(f, "on-time", key, capacity));
}

FIXTURE_TEST(rolling_hold_expires_after_window)
{
    REQUIRE(put_rolling(f, "rpm", 10, 2));
    expires_on_time(f, "rpm", 10, 2000);
    CHECK_EQ_U64(usage(f, "rpm").reserved, 10);
}

FIXTURE_TEST(concurrency_hold_expires_after_timeout)
{
    REQUIRE(put_concurrency(f, "slots", 1, 2));
    expires_on_time(f, "slots", 1, 2000);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
}

FIXTURE_TEST(budget_hold_expires_after_timeout)
{
    /* 5 s is the shortest budget timeout (BUDGET_TIMEOUT_SECONDS_MIN). */
    REQUIRE(put_budget(f, "usd", 100, PERIOD_MONTH, 5));
    expires_on_time(f, "usd", 100, 5000);
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.reserved, 100);
    CHECK_EQ_U64(u.used, 0); /* an expired reservation is never charged */
}

FIXTURE_TEST(expired_holds_are_counted)
{
    REQUIRE(put_rolling(f, "rpm", 10, 2));
    REQUIRE(put_concurrency(f, "slots", 10, 1));
    uint64_t before = stats(f).expired_holds;
    struct reservation done = RESERVE(f, "done", {"rpm", 1});
    REQUIRE(done.allowed);
    REQUIRE(complete_none(f, "done").status == RESULT_OK);
    REQUIRE(reserve1(f, "abandoned", "slots", 1));
    advance_to(f, just_after_kept(f, done.expires_at_unix_ms));
    tick(f);
    CHECK_EQ_U64(usage(f, "slots").reserved, 0);
    CHECK_EQ_U64(usage(f, "rpm").used, 0);
    /* The completed rolling hold expiring is not an abandoned one. A
     * TigerBeetle cluster expires holds without saying which: 0 there. */
    CHECK_EQ_U64(stats(f).expired_holds - before, conformance_traits.counts_expired_holds ? 1 : 0);
}

FIXTURE_TEST(rolling_complete_shrinks_hold_to_actual)
{
    REQUIRE(put_rolling(f, "tpm", 100, 5));
    struct reservation big = RESERVE(f, "big", {"tpm", 80});
    REQUIRE(big.allowed);
    advance(f, 3000);
    struct completion c = COMPLETE(f, "big", {"tpm", 30});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(c.reconciled);
    CHECK_EQ_U64(c.warning_count, 0);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_U64(u.used, 30);
    CHECK_EQ_I64(u.available, 70);
    CHECK(reserve1(f, "rest", "tpm", 70));
    CHECK(!reserve1(f, "over", "tpm", 1));
    /* The shrunk hold still expires with the original window ("rest"
     * lives 3 s longer). */
    advance_to(f, just_after_kept(f, big.expires_at_unix_ms));
    u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 0);
    CHECK_EQ_U64(u.reserved, 70);
}

FIXTURE_TEST(rolling_complete_to_zero_frees_hold)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "call", "tpm", 100));
    REQUIRE(COMPLETE(f, "call", {"tpm", 0}).status == RESULT_OK);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 0);
    CHECK_EQ_U64(u.reserved, 0);
    CHECK(reserve1(f, "next", "tpm", 100));
}

FIXTURE_TEST(rolling_left_out_key_settles_at_reserved)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    struct reservation r = RESERVE(f, "call", {"tpm", 40}, {"rpm", 1});
    REQUIRE(r.allowed);
    REQUIRE(COMPLETE(f, "call", {"rpm", 1}).status == RESULT_OK);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_U64(u.used, 40);
}

FIXTURE_TEST(rolling_overage_that_fits_grows_the_hold)
{
    REQUIRE(put_rolling(f, "tpm", 100, 3));
    struct reservation call = RESERVE(f, "call", {"tpm", 30});
    REQUIRE(call.allowed);
    advance(f, 1000);
    struct completion c = COMPLETE(f, "call", {"tpm", 50});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK_EQ_U64(c.warning_count, 0);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 50);
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_I64(u.available, 50);
    /* The extra 20 expires with the original hold. */
    advance_to(f, just_after_kept(f, call.expires_at_unix_ms));
    CHECK_EQ_U64(usage(f, "tpm").used, 0);
}

/* Sets *expires_ms to the overrunning lease's expiry. */
static void overage_scenario(struct fixture *f, enum limit_overage overage, struct completion *c,
                             int64_t *expires_ms)
{
    struct limit_definition d = rolling_limit("tpm", 100, 3);
    d.overage = overage;
    REQUIRE(put(f, d, NULL, NULL) == 0);
    struct reservation call = RESERVE(f, "call", {"tpm", 60});
    REQUIRE(call.allowed);
    *expires_ms = call.expires_at_unix_ms;
    REQUIRE(reserve1(f, "other", "tpm", 30));
    /* 60 reserved, 80 used: the extra 20 does not fit next to the other 30. */
    *c = COMPLETE(f, "call", {"tpm", 80});
}

FIXTURE_TEST(rolling_overage_debt_is_reported_and_does_not_block)
{
    struct completion c;
    int64_t expires_ms = 0;
    overage_scenario(f, OVERAGE_DEBT, &c, &expires_ms);
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(has_warning(&c, "overage_debt:tpm"));
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 60);
    CHECK_EQ_U64(u.reserved, 30);
    CHECK_EQ_U64(u.debt, 20);
    CHECK_EQ_I64(u.available, 10); /* rolling debt does not count in available */
    CHECK(reserve1(f, "fits", "tpm", 10));
    /* The debt expires with the window of the hold it came with. */
    advance_to(f, just_after_kept(f, expires_ms));
    u = usage(f, "tpm");
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_U64(u.used, 0);
}

FIXTURE_TEST(rolling_overage_deny_drops_the_excess)
{
    uint64_t before = stats(f).overage_denied;
    struct completion c;
    int64_t expires_ms;
    overage_scenario(f, OVERAGE_DENY, &c, &expires_ms);
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(has_warning(&c, "overage_denied:tpm"));
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 60);
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_U64(stats(f).overage_denied - before, 1);
}

FIXTURE_TEST(rolling_release_frees_the_hold)
{
    REQUIRE(put_rolling(f, "rpm", 100, 60));
    REQUIRE(reserve1(f, "never-called", "rpm", 100));
    CHECK_EQ_I64(release(f, "never-called").status, RESULT_OK);
    CHECK_EQ_U64(usage(f, "rpm").reserved, 0);
    CHECK(reserve1(f, "next", "rpm", 100));
}

FIXTURE_TEST(concurrency_complete_frees_the_slot)
{
    REQUIRE(put_concurrency(f, "slots", 2, 600));
    REQUIRE(reserve1(f, "one", "slots", 1));
    REQUIRE(reserve1(f, "two", "slots", 1));
    CHECK(!reserve1(f, "three", "slots", 1));
    CHECK(COMPLETE(f, "one", {"slots", 1}).reconciled);
    struct limit_usage u = usage(f, "slots");
    CHECK_EQ_U64(u.reserved, 1);
    CHECK_EQ_U64(u.used, 0); /* concurrency never has used */
    CHECK_EQ_I64(u.available, 1);
    CHECK(reserve1(f, "four", "slots", 1));
}

FIXTURE_TEST(concurrency_release_frees_the_slot)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "one", "slots", 1));
    CHECK(!reserve1(f, "two", "slots", 1));
    CHECK_EQ_I64(release(f, "one").status, RESULT_OK);
    CHECK_EQ_U64(usage(f, "slots").reserved, 0);
    CHECK(reserve1(f, "three", "slots", 1));
}

FIXTURE_TEST(batch_answers_each_request_in_order)
{
    REQUIRE(put_concurrency(f, "slots", 1, 60));
    const char *const leases[3] = {"a", "b", "c"};
    const struct item items[3] = {{"slots", 1}, {"slots", 1}, {"nope", 1}};
    struct reservation results[3];
    reserve_batch(f, leases, items, 3, results);
    CHECK(results[0].allowed);
    CHECK(!results[1].allowed);
    CHECK_STR(results[1].error, "");
    CHECK(!results[2].allowed);
    CHECK_STR(results[2].error, "unknown_limit_key: nope");
}

FIXTURE_TEST(exceeds_capacity_is_a_definitive_error)
{
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    REQUIRE(put_budget(f, "usd", 100, PERIOD_DAY, 60));
    struct reservation r = RESERVE(f, "big", {"rpm", 1}, {"usd", 101});
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(!r.allowed);
    CHECK_STR(r.error, "exceeds_capacity:usd");
    CHECK_EQ_U64(usage(f, "rpm").reserved, 0);
    CHECK(reserve1(f, "exact", "rpm", 10)); /* amount == capacity fits */
}

FIXTURE_TEST(unknown_key_is_a_definitive_error)
{
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    struct reservation r = RESERVE(f, "call", {"rpm", 1}, {"missing:key", 1});
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(!r.allowed);
    CHECK_STR(r.error, "unknown_limit_key: missing:key");
    CHECK_EQ_U64(usage(f, "rpm").reserved, 0);
}

const struct conformance_test reserve_tests[] = {
    TEST_ENTRY(reserve_holds_every_requirement,
               "an allowed reserve holds every requirement and expires at the earliest hold"),
    TEST_ENTRY(all_or_nothing_when_one_limit_denies,
               "when one of three limits is full nothing is held on the other two"),
    TEST_ENTRY(denied_keys_lists_every_limit_short,
               "denied_keys lists every limit that did not fit"),
    TEST_ENTRY(rolling_hold_expires_after_window,
               "a rolling hold frees its capacity after the window"),
    TEST_ENTRY(concurrency_hold_expires_after_timeout,
               "a concurrency hold frees its slot after timeout_seconds"),
    TEST_ENTRY(budget_hold_expires_after_timeout,
               "an uncommitted budget hold frees after timeout_seconds and charges nothing"),
    TEST_ENTRY(expired_holds_are_counted,
               "expired holds free their capacity; stats.expired_holds counts those that expired "
               "un-finalized (0 on tigerbeetle, which cannot tell)"),
    TEST_ENTRY(
        rolling_complete_shrinks_hold_to_actual,
        "complete shrinks a rolling hold to the actual, moved to used, until its window ends"),
    TEST_ENTRY(rolling_complete_to_zero_frees_hold, "a rolling actual of 0 frees the hold"),
    TEST_ENTRY(rolling_left_out_key_settles_at_reserved,
               "a rolling key left out of the actuals settles at its reserved amount"),
    TEST_ENTRY(rolling_overage_that_fits_grows_the_hold,
               "rolling overage that fits is held until the original expiry"),
    TEST_ENTRY(rolling_overage_debt_is_reported_and_does_not_block,
               "rolling overage=debt records debt that is reported, does not block, and expires"),
    TEST_ENTRY(rolling_overage_deny_drops_the_excess,
               "rolling overage=deny drops the excess, warns and counts it"),
    TEST_ENTRY(rolling_release_frees_the_hold, "release frees a rolling hold at once"),
    TEST_ENTRY(concurrency_complete_frees_the_slot,
               "complete frees a concurrency slot; used stays 0"),
    TEST_ENTRY(concurrency_release_frees_the_slot, "release frees a concurrency slot"),
    TEST_ENTRY(batch_answers_each_request_in_order, "a batch answers each request, in order"),
    TEST_ENTRY(exceeds_capacity_is_a_definitive_error,
               "an amount over the capacity is exceeds_capacity:<key> and holds nothing"),
    TEST_ENTRY(unknown_key_is_a_definitive_error,
               "an unknown key is unknown_limit_key: <key> and holds nothing"),
};
const uint32_t reserve_test_count = sizeof reserve_tests / sizeof reserve_tests[0];
