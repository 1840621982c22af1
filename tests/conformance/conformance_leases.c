/* Conformance: leases (docs/semantics.md "Leases and idempotency", backend.h):
 * idempotent reserve, conflicts, complete/release finality, the lease cache
 * bound and retention. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "conformance.h"
#include "test.h"

FIXTURE_TEST(reserve_retry_gets_the_same_answer)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_concurrency(f, "slots", 5, 30));
    int64_t before_ms = now_ms(f);
    struct reservation first = RESERVE(f, "lease-1", {"tpm", 5}, {"slots", 1});
    int64_t after_ms = now_ms(f);
    REQUIRE(first.allowed);
    CHECK(!first.replayed);
    CHECK_TIME_BETWEEN(f, first.reserved_at_unix_ms, before_ms, after_ms);
    advance(f, 1000);
    /* Same set in another order, later: same answer, same timestamps. */
    struct reservation again = RESERVE(f, "lease-1", {"slots", 1}, {"tpm", 5});
    CHECK_EQ_I64(again.status, RESULT_OK);
    CHECK(again.allowed);
    CHECK_EQ_I64(again.reserved_at_unix_ms, first.reserved_at_unix_ms);
    CHECK_EQ_I64(again.expires_at_unix_ms, first.expires_at_unix_ms);
    CHECK(again.replayed); /* and says so: the gateway answers a retried call 409 */
    CHECK(!again.finished);
    /* Held once, not twice. */
    CHECK_EQ_U64(usage(f, "tpm").reserved, 5);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
    /* Still the same answer after the lease completed. */
    REQUIRE(complete_none(f, "lease-1").status == RESULT_OK);
    again = RESERVE(f, "lease-1", {"tpm", 5}, {"slots", 1});
    CHECK(again.allowed);
    CHECK_EQ_I64(again.reserved_at_unix_ms, first.reserved_at_unix_ms);
    CHECK(again.replayed);
    CHECK(again.finished);
    CHECK_EQ_U64(usage(f, "tpm").used, 5);
}

FIXTURE_TEST(allowed_reserve_reports_what_each_limit_has_left)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_concurrency(f, "slots", 5, 30));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    struct reservation earlier = RESERVE(f, "earlier", {"tpm", 30});
    REQUIRE(earlier.allowed);
    advance(f, 1000);
    const struct item r[3] = {{"usd", 250}, {"tpm", 20}, {"slots", 2}};
    struct requirement_state states[3];
    memset(states, 0xAB, sizeof states);
    struct reserve_result result = reserve_with_states(f, "now", r, 3, states);
    REQUIRE(result.allowed);
    /* Every backend reports the kind and capacity; those that can tell say
     * what is left. */
    CHECK_EQ_U64(states[0].capacity, 1000);
    CHECK_EQ_U64(states[1].capacity, 100);
    CHECK_EQ_U64(states[2].capacity, 5);
    CHECK_EQ_U64(states[0].kind, LIMIT_BUDGET);
    CHECK_EQ_U64(states[1].kind, LIMIT_ROLLING);
    CHECK_EQ_U64(states[2].kind, LIMIT_CONCURRENCY);
    if (states[0].known) {
        CHECK_EQ_I64(states[0].available, 750);
        CHECK_EQ_I64(states[0].reset_at_unix_ms,
                     utc_period_end_ms(PERIOD_MONTH, result.reserved_at_unix_ms));
        CHECK_EQ_I64(states[1].available, 50);
        /* "earlier" frees first */
        CHECK_EQ_I64(states[1].reset_at_unix_ms, earlier.expires_at_unix_ms);
        CHECK_EQ_I64(states[2].available, 3);
        CHECK_EQ_I64(states[2].reset_at_unix_ms, result.reserved_at_unix_ms + 30000);
    }
    /* A replay fills nothing: its answer is the first one's. */
    memset(states, 0xAB, sizeof states);
    result = reserve_with_states(f, "now", r, 3, states);
    CHECK(result.replayed);
    CHECK_EQ_U64(states[0].capacity, UINT64_C(0xABABABABABABABAB));
}

FIXTURE_TEST(reserve_retry_with_other_requirements_conflicts)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_rolling(f, "rpm", 100, 60));
    REQUIRE(RESERVE(f, "lease-1", {"tpm", 5}, {"rpm", 1}).allowed);
    struct reservation r = RESERVE(f, "lease-1", {"tpm", 6}, {"rpm", 1});
    CHECK_EQ_I64(r.status, RESULT_CONFLICT);
    CHECK(!r.allowed);
    CHECK_STR(r.error, "lease_conflict");
    r = RESERVE(f, "lease-1", {"tpm", 5});
    CHECK_EQ_I64(r.status, RESULT_CONFLICT);
    r = RESERVE(f, "lease-1", {"tpm", 5}, {"rpm", 1}, {"other", 1});
    CHECK_EQ_I64(r.status, RESULT_CONFLICT);
    CHECK_EQ_U64(usage(f, "tpm").reserved, 5);
    CHECK_EQ_U64(usage(f, "rpm").reserved, 1);
}

FIXTURE_TEST(denied_lease_stays_denied)
{
    REQUIRE(put_concurrency(f, "slots", 1, 60));
    REQUIRE(put_rolling(f, "rpm", 100, 60));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct reservation first = RESERVE(f, "waiter", {"rpm", 1}, {"slots", 1});
    REQUIRE(!first.allowed);
    REQUIRE(first.denied_count == 1);
    REQUIRE(release(f, "holder").status == RESULT_OK);
    /* Room now, but a denied lease id stays denied: the client needs a new one. */
    struct reservation again = RESERVE(f, "waiter", {"slots", 1}, {"rpm", 1});
    CHECK_EQ_I64(again.status, RESULT_OK);
    CHECK(!again.allowed);
    CHECK_STR(again.error, "");
    REQUIRE(again.denied_count == 1);
    CHECK_EQ_U64(again.denied_index[0], 0); /* "slots", in this request's order */
    CHECK(again.retry_after_ms >= 1);
    CHECK_EQ_U64(usage(f, "rpm").reserved, 0);
    CHECK_EQ_I64(RESERVE(f, "waiter", {"slots", 2}).status, RESULT_CONFLICT);
    CHECK(RESERVE(f, "new-id", {"rpm", 1}, {"slots", 1}).allowed);
}

FIXTURE_TEST(definitive_errors_are_not_recorded)
{
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    struct reservation r = RESERVE(f, "lease-1", {"rpm", 1}, {"later", 1});
    CHECK_STR(r.error, "unknown_limit_key: later");
    REQUIRE(put_rolling(f, "later", 10, 60));
    CHECK(RESERVE(f, "lease-1", {"rpm", 1}, {"later", 1}).allowed);

    r = RESERVE(f, "lease-2", {"rpm", 20});
    CHECK_STR(r.error, "exceeds_capacity:rpm");
    REQUIRE(put_rolling(f, "rpm", 30, 60));
    CHECK(RESERVE(f, "lease-2", {"rpm", 20}).allowed);

    /* 21 held; a decrease to 5 waits. */
    struct limit_state state;
    REQUIRE(put(f, rolling_limit("rpm", 5, 60), &state, NULL) == 0);
    REQUIRE(state.status == LIMIT_DECREASING);
    r = RESERVE(f, "lease-3", {"rpm", 1});
    CHECK_STR(r.error, "limit_decreasing:rpm");
    REQUIRE(put(f, rolling_limit("rpm", 30, 60), &state, NULL) == 0);
    CHECK(RESERVE(f, "lease-3", {"rpm", 1}).allowed);
}

/* docs/semantics.md: unknown_limit_key, then limit_decreasing, then
 * exceeds_capacity, whatever the order of the requirements that cause them;
 * among requirements of one error, the first in request order. */
FIXTURE_TEST(definitive_errors_have_one_precedence)
{
    REQUIRE(put_rolling(f, "rpm", 10, 60));
    REQUIRE(put_rolling(f, "shrinking", 10, 60));
    REQUIRE(put_budget(f, "usd", 100, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "held", "shrinking", 8));
    struct limit_state state;
    REQUIRE(put(f, rolling_limit("shrinking", 5, 60), &state, NULL) == 0);
    REQUIRE(state.status == LIMIT_DECREASING); /* 8 held, 5 wanted */
    /* An amount over one capacity and an unknown key: the unknown key. */
    struct reservation r = RESERVE(f, "p1", {"rpm", 20}, {"nope", 1});
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(!r.allowed);
    CHECK_STR(r.error, "unknown_limit_key: nope");
    CHECK_EQ_I64(r.retry_after_ms, 0);
    r = RESERVE(f, "p2", {"shrinking", 1}, {"usd", 1}, {"nope", 1});
    CHECK_STR(r.error, "unknown_limit_key: nope");
    /* A decreasing limit before an amount over another capacity. */
    r = RESERVE(f, "p3", {"usd", 101}, {"rpm", 11}, {"shrinking", 1});
    CHECK_STR(r.error, "limit_decreasing:shrinking");
    CHECK(r.retry_after_ms >= 1);
    /* The first of one kind in request order. */
    CHECK_STR(RESERVE(f, "p4", {"rpm", 1}, {"gone", 1}, {"nope", 1}).error,
              "unknown_limit_key: gone");
    CHECK_STR(RESERVE(f, "p5", {"usd", 101}, {"rpm", 11}).error, "exceeds_capacity:usd");
    CHECK_STR(RESERVE(f, "p6", {"rpm", 11}, {"usd", 101}).error, "exceeds_capacity:rpm");
    /* None of them held anything. */
    CHECK_EQ_U64(usage(f, "rpm").reserved, 0);
    CHECK_EQ_U64(usage(f, "usd").reserved, 0);
    CHECK_EQ_U64(usage(f, "shrinking").reserved, 8);
    /* A known lease comes before all of them: it is answered as it was. */
    REQUIRE(delete_limit(f, "shrinking") == 0);
    struct reservation again = RESERVE(f, "held", {"shrinking", 8});
    CHECK(again.allowed);
    CHECK(again.replayed);
    CHECK_STR(again.error, "");
}

FIXTURE_TEST(complete_twice_is_a_noop)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "call", "tpm", 50));
    CHECK(COMPLETE(f, "call", {"tpm", 20}).reconciled);
    struct completion c = COMPLETE(f, "call", {"tpm", 40});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK_EQ_U64(c.warning_count, 0);
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.used, 20);
    CHECK_EQ_U64(u.reserved, 0);
}

FIXTURE_TEST(complete_unknown_lease_is_not_reconciled)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    struct completion c = COMPLETE(f, "never-reserved", {"tpm", 20});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(!c.reconciled);
    CHECK_EQ_U64(usage(f, "tpm").used, 0);
}

FIXTURE_TEST(complete_after_release_conflicts)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "call", "usd", 100));
    REQUIRE(release(f, "call").status == RESULT_OK);
    struct completion c = COMPLETE(f, "call", {"usd", 100});
    CHECK_EQ_I64(c.status, RESULT_CONFLICT);
    CHECK_STR(c.error, "already_finalized");
    CHECK_EQ_U64(usage(f, "usd").used, 0);
}

FIXTURE_TEST(reserve_after_release_is_already_finalized)
{
    REQUIRE(put_concurrency(f, "slots", 2, 60));
    REQUIRE(reserve1(f, "call", "slots", 1));
    REQUIRE(release(f, "call").status == RESULT_OK);
    /* A retry of it must not be told "allowed": it holds nothing. */
    struct reservation again = RESERVE(f, "call", {"slots", 1});
    CHECK_EQ_I64(again.status, RESULT_CONFLICT);
    CHECK_STR(again.error, "already_finalized");
    CHECK(!again.allowed);
    CHECK_EQ_U64(usage(f, "slots").reserved, 0);
    /* Other requirements are still a conflict, found first. */
    CHECK_STR(RESERVE(f, "call", {"slots", 2}).error, "lease_conflict");
    /* The slot is free for a new lease. */
    CHECK(reserve1(f, "next", "slots", 1));
}

FIXTURE_TEST(release_after_complete_conflicts)
{
    REQUIRE(put_concurrency(f, "slots", 1, 60));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(RESERVE(f, "call", {"slots", 1}, {"usd", 100}).allowed);
    REQUIRE(complete_none(f, "call").status == RESULT_OK);
    struct release_outcome r = release(f, "call");
    CHECK_EQ_I64(r.status, RESULT_CONFLICT);
    CHECK_STR(r.error, "already_finalized");
    CHECK_EQ_U64(usage(f, "usd").used, 100);
}

FIXTURE_TEST(release_twice_and_unknown_are_noops)
{
    REQUIRE(put_concurrency(f, "slots", 2, 60));
    REQUIRE(reserve1(f, "call", "slots", 1));
    REQUIRE(reserve1(f, "other", "slots", 1));
    CHECK_EQ_I64(release(f, "call").status, RESULT_OK);
    struct release_outcome r = release(f, "call");
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK_STR(r.error, "");
    CHECK_EQ_I64(release(f, "never-reserved").status, RESULT_OK);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1); /* "other" is untouched */
}

FIXTURE_TEST(actual_key_not_in_lease_changes_nothing)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_rolling(f, "stranger", 100, 60));
    REQUIRE(reserve1(f, "call", "tpm", 10));
    struct completion c = COMPLETE(f, "call", {"tpm", 5}, {"stranger", 1});
    CHECK_EQ_I64(c.status, RESULT_INVALID);
    CHECK_STR(c.error, "actual_key_not_in_lease:stranger");
    struct limit_usage u = usage(f, "tpm");
    CHECK_EQ_U64(u.reserved, 10);
    CHECK_EQ_U64(u.used, 0);
    CHECK(COMPLETE(f, "call", {"tpm", 5}).reconciled);
    CHECK_EQ_U64(usage(f, "tpm").used, 5);
}

static void lease_cache_evicts_oldest_one_past_the_bound(void)
{
    if (!conformance_traits.bounded_lease_cache) {
        printf("  (skipped: %s keeps every lease)\n", conformance_backend);
        return;
    }
    struct fixture fixture, *f = &fixture;
    struct backend_config config;
    fixture_config(f, &config, T0_MS);
    config.lease_cache_entries = 4;
    REQUIRE(fixture_start(f, &config));
    CHECK(put_concurrency(f, "slots", 10, 2));
    char id[32];
    int64_t last_expiry_ms = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "lease-%d", i);
        struct reservation r = RESERVE(f, id, {"slots", 1});
        CHECK(r.allowed);
        last_expiry_ms = r.expires_at_unix_ms;
    }
    CHECK_EQ_U64(stats(f).lease_cache_entries, 4);
    if (!conformance_traits.leases_outlive_cache) {
        /* The oldest was evicted: unknown now, but its hold is still counted. */
        CHECK(!complete_none(f, "lease-0").reconciled);
        CHECK_EQ_U64(usage(f, "slots").reserved, 5);
    } else {
        /* Evicted from the cache, not from the cluster: it still completes. */
        CHECK(complete_none(f, "lease-0").reconciled);
        CHECK_EQ_U64(usage(f, "slots").reserved, 4);
    }
    CHECK(complete_none(f, "lease-1").reconciled);
    CHECK_EQ_U64(usage(f, "slots").reserved, conformance_traits.leases_outlive_cache ? 3 : 4);
    /* What is left, evicted or not, expires by itself. */
    advance_to(f, just_after(f, last_expiry_ms));
    tick(f);
    CHECK_EQ_U64(usage(f, "slots").reserved, 0);
    fixture_close(f);
}

static void lease_retention_forgets_old_leases(void)
{
    struct fixture fixture, *f = &fixture;
    struct backend_config config;
    fixture_config(f, &config, T0_MS);
    config.lease_retention_ms = 1000;
    REQUIRE(fixture_start(f, &config));
    CHECK(put_rolling(f, "tpm", 100, 3));
    struct reservation old = RESERVE(f, "old", {"tpm", 10});
    CHECK(old.allowed);
    /* past its retention, but its hold lives: still retained */
    advance_to(f, just_after(f, old.reserved_at_unix_ms + 1000));
    struct reservation again = RESERVE(f, "old", {"tpm", 10});
    CHECK(again.allowed);
    /* the same answer, not a second hold */
    CHECK_EQ_I64(again.reserved_at_unix_ms, old.reserved_at_unix_ms);
    CHECK_EQ_U64(usage(f, "tpm").reserved, 10);
    /* the window is over: nothing holds, the lease is forgotten */
    advance_to(f, just_after(f, old.expires_at_unix_ms));
    tick(f);
    CHECK_EQ_U64(usage(f, "tpm").reserved, 0);
    if (!conformance_traits.leases_outlive_cache) {
        CHECK(!complete_none(f, "old").reconciled);
        /* The id is free again: other requirements are a new lease, not a conflict. */
        CHECK(RESERVE(f, "old", {"tpm", 20}).allowed);
    } else {
        /* The cluster keeps the lease's transfers: the id stays taken. */
        CHECK_EQ_I64(RESERVE(f, "old", {"tpm", 20}).status, RESULT_CONFLICT);
    }
    CHECK_EQ_U64(usage(f, "tpm").used, 0);
    fixture_close(f);
}

static void lease_forgotten_out_of_order_keeps_cache_order(void)
{
    struct fixture fixture, *f = &fixture;
    struct backend_config config;
    fixture_config(f, &config, T0_MS + 10000);
    config.lease_cache_entries = 3;
    config.lease_retention_ms = 10000;
    REQUIRE(fixture_start(f, &config));
    CHECK(put_concurrency(f, "slots", 100, 5)); /* holds end before the retention */
    CHECK(reserve1(f, "a", "slots", 1));
    set_time(f, T0_MS); /* the clock steps back: "b" is older than "a" */
    CHECK(reserve1(f, "b", "slots", 1));
    set_time(f, T0_MS + 10000);
    CHECK(!complete_none(f, "b").reconciled); /* past its retention and its hold, "a" is not */
    CHECK(RESERVE(f, "a", {"slots", 1}).reserved_at_unix_ms == T0_MS + 10000);
    CHECK(reserve1(f, "c", "slots", 1));
    CHECK(reserve1(f, "d", "slots", 1));
    if (conformance_traits.bounded_lease_cache) {
        CHECK_EQ_U64(stats(f).lease_cache_entries, 3);
        CHECK(reserve1(f, "e", "slots", 1)); /* evicts "a", the oldest left */
        CHECK(!complete_none(f, "a").reconciled);
        CHECK(complete_none(f, "c").reconciled);
    }
    /* Forgetting never frees: an evicted "a" still holds. Three slots either
     * way ("b" expired; the bounded cache took "e" and freed "c"). */
    CHECK_EQ_U64(usage(f, "slots").reserved, 3);
    fixture_close(f);
}

static void lease_cache_entries_has_a_ceiling(void)
{
    if (!conformance_traits.bounded_lease_cache) {
        printf("  (skipped: %s keeps every lease)\n", conformance_backend);
        return;
    }
    struct fixture fixture, *f = &fixture;
    struct backend_config config;
    fixture_config(f, &config, T0_MS);
    config.lease_cache_entries = LEASE_CACHE_ENTRIES_MAX + 1;
    REQUIRE(mkdir(f->data_dir, 0700) == 0);
    char error[256] = "";
    struct backend *backend = NULL;
    CHECK_EQ_I64(fixture_try_open(f, &config, &backend, error, sizeof error), -1);
    CHECK(strncmp(error, "lease_cache_entries:", 20) == 0);
    config.lease_cache_entries = 0;
    CHECK_EQ_I64(fixture_try_open(f, &config, &backend, error, sizeof error), -1);
}

const struct conformance_test lease_tests[] = {
    TEST_ENTRY(
        reserve_retry_gets_the_same_answer,
        "the same lease_id and requirement set (any order) gets the same answer and timestamps, "
        "held once"),
    TEST_ENTRY(
        allowed_reserve_reports_what_each_limit_has_left,
        "an allowed reserve reports each limit's capacity, and what is left and when it resets "
        "on the backends that know; a replay reports nothing"),
    TEST_ENTRY(reserve_retry_with_other_requirements_conflicts,
               "the same lease_id with other requirements is lease_conflict and changes nothing"),
    TEST_ENTRY(denied_lease_stays_denied,
               "a capacity-denied lease stays denied even once room frees"),
    TEST_ENTRY(
        definitive_errors_are_not_recorded,
        "unknown_limit_key, exceeds_capacity and limit_decreasing are not recorded on the lease"),
    TEST_ENTRY(definitive_errors_have_one_precedence,
               "unknown_limit_key comes before limit_decreasing before exceeds_capacity whatever "
               "the order of the requirements, the first of one kind in request order; a known "
               "lease is replayed before any of them"),
    TEST_ENTRY(complete_twice_is_a_noop, "completing twice is a no-op success"),
    TEST_ENTRY(complete_unknown_lease_is_not_reconciled,
               "completing an unknown lease succeeds with reconciled=false"),
    TEST_ENTRY(complete_after_release_conflicts,
               "completing a released lease is already_finalized"),
    TEST_ENTRY(reserve_after_release_is_already_finalized,
               "a reserve retried after its lease was released is already_finalized, not allowed"),
    TEST_ENTRY(release_after_complete_conflicts,
               "releasing a completed lease is already_finalized"),
    TEST_ENTRY(release_twice_and_unknown_are_noops,
               "releasing twice, or an unknown lease, is a no-op success"),
    TEST_ENTRY(
        actual_key_not_in_lease_changes_nothing,
        "an actual for a key not in the lease is actual_key_not_in_lease:<key>, nothing changes"),
    TEST_ENTRY(lease_cache_evicts_oldest_one_past_the_bound,
               "one lease past lease_cache_entries evicts the oldest, which never frees its holds "
               "(and still completes where the backend keeps every lease)"),
    MANUAL_CLOCK_TEST_ENTRY(
        lease_forgotten_out_of_order_keeps_cache_order,
        "a lease forgotten out of order (clock stepped back) leaves the others and the eviction "
        "order intact",
        "steps the clock back"),
    TEST_ENTRY(lease_cache_entries_has_a_ceiling,
               "opening with lease_cache_entries 0 or one past LEASE_CACHE_ENTRIES_MAX fails, "
               "naming the field"),
    TEST_ENTRY(lease_retention_forgets_old_leases,
               "a lease is kept while a hold lives, then forgotten once past lease_retention_ms "
               "(its id stays taken where the backend keeps every lease)"),
};
const uint32_t lease_test_count = sizeof lease_tests / sizeof lease_tests[0];
