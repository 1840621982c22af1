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
    struct reservation r = RESERVE(f, "lease-1", {"tpm", 10}, {"slots", 1}, {"usd", 100});
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(r.allowed);
    CHECK_STR(r.error, "");
    CHECK_EQ_U64(r.denied_count, 0);
    CHECK_EQ_I64(r.reserved_at_unix_ms, T0_MS);
    CHECK_EQ_I64(r.expires_at_unix_ms, T0_MS + 30000); /* the concurrency hold expires first */
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

FIXTURE_TEST(rolling_hold_expires_after_window)
{
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    REQUIRE(reserve1(f, "first", "rpm", 10));
    advance(f, 59999);
    CHECK(!reserve1(f, "early", "rpm", 1));
    advance(f, 1);
    CHECK(reserve1(f, "on-time", "rpm", 1));
    CHECK_EQ_U64(usage(f, "rpm").reserved, 1);
}

FIXTURE_TEST(concurrency_hold_expires_after_timeout)
{
    REQUIRE(put_concurrency(f, "slots", 1, 30));
    REQUIRE(reserve1(f, "first", "slots", 1));
    advance(f, 29999);
    CHECK(!reserve1(f, "early", "slots", 1));
    advance(f, 1);
    CHECK(reserve1(f, "on-time", "slots", 1));
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
}

FIXTURE_TEST(budget_hold_expires_after_timeout)
{
    REQUIRE(put_budget(f, "usd", 100, PERIOD_MONTH, 10));
    REQUIRE(reserve1(f, "first", "usd", 100));
    advance(f, 9999);
    CHECK(!reserve1(f, "early", "usd", 1));
    advance(f, 1);
    CHECK(reserve1(f, "on-time", "usd", 100));
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.reserved, 100);
    CHECK_EQ_U64(u.used, 0); /* an expired reservation is never charged */
}

FIXTURE_TEST(expired_holds_are_counted)
{
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    REQUIRE(put_concurrency(f, "slots", 10, 30));
    uint64_t before = stats(f).expired_holds;
    REQUIRE(reserve1(f, "done", "rpm", 1));
    REQUIRE(complete_none(f, "done").status == RESULT_OK);
    REQUIRE(reserve1(f, "abandoned", "slots", 1));
    advance(f, 61000);
    tick(f);
    /* The completed rolling hold expiring is not an abandoned one. */
    CHECK_EQ_U64(stats(f).expired_holds - before, 1);
}

FIXTURE_TEST(rolling_complete_shrinks_hold_to_actual)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "big", "tpm", 80));
    advance(f, 10000);
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
    /* The shrunk hold still expires with the original window. */
    set_time(f, T0_MS + 60000);
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
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "call", "tpm", 30));
    advance(f, 5000);
    struct completion c = COMPLETE(f, "call", {"tpm", 50});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK_EQ_U64(c.warning_count, 0);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 50);
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_I64(u.available, 50);
    /* The extra 20 expires with the original hold. */
    set_time(f, T0_MS + 60000);
    CHECK_EQ_U64(usage(f, "tpm").used, 0);
}

static void overage_scenario(struct fixture *f, enum limit_overage overage, struct completion *c)
{
    struct limit_definition d = rolling_limit("tpm", 100, 60);
    d.overage = overage;
    REQUIRE(put(f, d, NULL, NULL) == 0);
    REQUIRE(reserve1(f, "call", "tpm", 60));
    REQUIRE(reserve1(f, "other", "tpm", 30));
    /* 60 reserved, 80 used: the extra 20 does not fit next to the other 30. */
    *c = COMPLETE(f, "call", {"tpm", 80});
}

FIXTURE_TEST(rolling_overage_debt_is_reported_and_does_not_block)
{
    struct completion c;
    overage_scenario(f, OVERAGE_DEBT, &c);
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(has_warning(&c, "overage_debt:tpm"));
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 60);
    CHECK_EQ_U64(u.reserved, 30);
    CHECK_EQ_U64(u.debt, 20);
    CHECK_EQ_I64(u.available, 10); /* rolling debt does not count in available */
    CHECK(reserve1(f, "fits", "tpm", 10));
    /* The debt expires with the window of the hold it came with. */
    set_time(f, T0_MS + 60000);
    u = usage(f, "tpm");
    CHECK_EQ_U64(u.debt, 0);
    CHECK_EQ_U64(u.used, 0);
}

FIXTURE_TEST(rolling_overage_deny_drops_the_excess)
{
    uint64_t before = stats(f).overage_denied;
    struct completion c;
    overage_scenario(f, OVERAGE_DENY, &c);
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
    struct requirement ok = {"slots", 5, 1};
    struct requirement unknown = {"nope", 4, 1};
    struct reserve_request requests[3] = {
        {.lease_id = "a", .lease_id_length = 1, .requirements = &ok, .requirement_count = 1},
        {.lease_id = "b", .lease_id_length = 1, .requirements = &ok, .requirement_count = 1},
        {.lease_id = "c", .lease_id_length = 1, .requirements = &unknown, .requirement_count = 1},
    };
    struct reserve_result raw[3];
    backend_reserve_wait(f->backend, requests, raw, 3);
    struct reservation results[3];
    for (uint32_t i = 0; i < 3; i++)
        results[i] = reservation_of(&requests[i], &raw[i]);
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

void run_reserve_tests(int *passed, int *failed)
{
    RUN(reserve_holds_every_requirement,
        "an allowed reserve holds every requirement and expires at the earliest hold");
    RUN(all_or_nothing_when_one_limit_denies,
        "when one of three limits is full nothing is held on the other two");
    RUN(denied_keys_lists_every_limit_short, "denied_keys lists every limit that did not fit");
    RUN(rolling_hold_expires_after_window, "a rolling hold frees its capacity after the window");
    RUN(concurrency_hold_expires_after_timeout,
        "a concurrency hold frees its slot after timeout_seconds");
    RUN(budget_hold_expires_after_timeout,
        "an uncommitted budget hold frees after timeout_seconds and charges nothing");
    RUN(expired_holds_are_counted, "stats.expired_holds counts holds that expired un-finalized");
    RUN(rolling_complete_shrinks_hold_to_actual,
        "complete shrinks a rolling hold to the actual, moved to used, until its window ends");
    RUN(rolling_complete_to_zero_frees_hold, "a rolling actual of 0 frees the hold");
    RUN(rolling_left_out_key_settles_at_reserved,
        "a rolling key left out of the actuals settles at its reserved amount");
    RUN(rolling_overage_that_fits_grows_the_hold,
        "rolling overage that fits is held until the original expiry");
    RUN(rolling_overage_debt_is_reported_and_does_not_block,
        "rolling overage=debt records debt that is reported, does not block, and expires");
    RUN(rolling_overage_deny_drops_the_excess,
        "rolling overage=deny drops the excess, warns and counts it");
    RUN(rolling_release_frees_the_hold, "release frees a rolling hold at once");
    RUN(concurrency_complete_frees_the_slot, "complete frees a concurrency slot; used stays 0");
    RUN(concurrency_release_frees_the_slot, "release frees a concurrency slot");
    RUN(batch_answers_each_request_in_order, "a batch answers each request, in order");
    RUN(exceeds_capacity_is_a_definitive_error,
        "an amount over the capacity is exceeds_capacity:<key> and holds nothing");
    RUN(unknown_key_is_a_definitive_error,
        "an unknown key is unknown_limit_key: <key> and holds nothing");
    *passed += test_passed_count;
    *failed += test_failed_count;
}
