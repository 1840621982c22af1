/* Conformance: limit administration (docs/semantics.md "Capacity changes",
 * backend.h put/restore/delete/get/list): increases, decreases and the
 * decreasing state, kind changes, delete, restore. */
#include <stdio.h>
#include <stdlib.h>

#include "conformance.h"
#include "test.h"

static struct limit_state get(struct fixture *f, const char *key, enum backend_admin_result *rc)
{
    return get_limit(f, key, rc);
}

FIXTURE_TEST(capacity_increase_applies_at_once)
{
    REQUIRE(put_concurrency(f, "slots", 1, 60));
    REQUIRE(reserve1(f, "one", "slots", 1));
    CHECK(!reserve1(f, "two", "slots", 1));
    struct limit_state state;
    REQUIRE(put(f, concurrency_limit("slots", 2, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(state.definition.capacity, 2);
    CHECK_EQ_U64(state.pending_decrease_to, 0);
    CHECK(reserve1(f, "three", "slots", 1));
}

FIXTURE_TEST(capacity_decrease_applies_at_once_when_free)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "held", "tpm", 30));
    struct limit_state state;
    REQUIRE(put(f, rolling_limit("tpm", 50, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(state.definition.capacity, 50);
    CHECK(!reserve1(f, "too-much", "tpm", 21));
    CHECK(reserve1(f, "fits", "tpm", 20));
    CHECK_EQ_I64(usage(f, "tpm").available, 0);
}

static void decreasing_scenario(bool free_by_release)
{
    struct fixture fixture, *f = &fixture;
    struct backend_config config;
    fixture_config(f, &config, T0_MS);
    config.decrease_retry_ms = 7000;
    REQUIRE(fixture_start(f, &config));
    CHECK(put_rolling(f, "tpm", 100, 3));
    struct reservation a = RESERVE(f, "a", {"tpm", 40});
    CHECK(a.allowed);
    advance(f, 2000);
    CHECK(reserve1(f, "b", "tpm", 40));
    struct limit_state state;
    CHECK(put(f, rolling_limit("tpm", 50, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_DECREASING);
    CHECK_EQ_U64(state.pending_decrease_to, 50);
    CHECK_EQ_U64(state.definition.capacity, 100); /* still in force */
    struct reservation r = RESERVE(f, "c", {"tpm", 1});
    CHECK(!r.allowed);
    CHECK_STR(r.error, "limit_decreasing:tpm");
    CHECK_EQ_I64(r.retry_after_ms, 7000);
    CHECK(!tick(f)); /* 80 held, 50 wanted: not yet */
    enum backend_admin_result rc;
    CHECK_EQ_I64(get(f, "tpm", &rc).status, LIMIT_DECREASING);
    if (free_by_release)
        CHECK_EQ_I64(release(f, "a").status, RESULT_OK);
    else
        advance_to(f, just_after(f, a.expires_at_unix_ms)); /* "a" expires, "b" lives */
    CHECK(tick(f));
    state = get(f, "tpm", &rc);
    CHECK_EQ_I64(rc, 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(state.definition.capacity, 50);
    CHECK_EQ_U64(state.pending_decrease_to, 0);
    CHECK(reserve1(f, "d", "tpm", 10));
    CHECK(!reserve1(f, "e", "tpm", 1));
    fixture_close(f);
}

static void capacity_decrease_waits_for_release(void)
{
    decreasing_scenario(true);
}

static void capacity_decrease_waits_for_expiry(void)
{
    decreasing_scenario(false);
}

FIXTURE_TEST(concurrency_decrease_waits_too)
{
    REQUIRE(put_concurrency(f, "slots", 4, 60));
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "l%d", i);
        REQUIRE(reserve1(f, id, "slots", 1));
    }
    struct limit_state state;
    REQUIRE(put(f, concurrency_limit("slots", 2, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_DECREASING);
    REQUIRE(complete_none(f, "l0").status == RESULT_OK);
    CHECK(!tick(f));
    REQUIRE(complete_none(f, "l1").status == RESULT_OK);
    CHECK(tick(f));
    CHECK(!reserve1(f, "l4", "slots", 1));
    CHECK_EQ_I64(usage(f, "slots").available, 0);
}

FIXTURE_TEST(budget_decrease_applies_at_once)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "call", "usd", 800));
    REQUIRE(complete_none(f, "call").status == RESULT_OK);
    struct limit_state state;
    REQUIRE(put(f, budget_limit("usd", 500, PERIOD_MONTH, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(state.definition.capacity, 500);
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 800);
    CHECK_EQ_I64(u.available, -300);
    CHECK(!reserve1(f, "more", "usd", 1));
}

FIXTURE_TEST(budget_decrease_outlives_an_expired_hold)
{
    REQUIRE(put_budget(f, "usd", 100, PERIOD_MONTH, 5));
    REQUIRE(reserve1(f, "spent", "usd", 30));
    REQUIRE(complete_none(f, "spent").status == RESULT_OK);
    struct reservation held = RESERVE(f, "held", {"usd", 40});
    REQUIRE(held.allowed);
    /* 30 spent and 40 held leave 30 free: the cut of 40 owes 10 of the hold. */
    REQUIRE(put(f, budget_limit("usd", 60, PERIOD_MONTH, 5), NULL, NULL) == 0);
    advance_to(f, just_after(f, held.expires_at_unix_ms));
    tick(f);
    REQUIRE(usage(f, "usd").reserved == 0);
    /* The expired 40 pays the 10 owed before any reserve may take it. */
    CHECK(!reserve1(f, "over", "usd", 35));
    struct limit_usage u = usage(f, "usd");
    CHECK_EQ_U64(u.used, 30);
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_I64(u.available, 30);
    CHECK(reserve1(f, "fits", "usd", 30));
}

FIXTURE_TEST(decrease_is_cancelled_by_a_put_at_or_above)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(reserve1(f, "held", "tpm", 90));
    struct limit_state state;
    REQUIRE(put(f, rolling_limit("tpm", 10, 60), &state, NULL) == 0);
    REQUIRE(state.status == LIMIT_DECREASING);
    REQUIRE(put(f, rolling_limit("tpm", 100, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(state.pending_decrease_to, 0);
    CHECK_EQ_U64(state.definition.capacity, 100);
    CHECK(reserve1(f, "fits", "tpm", 10));
    /* A smaller decrease that fits replaces a pending one at once. */
    REQUIRE(release(f, "held").status == RESULT_OK);
    REQUIRE(put(f, rolling_limit("tpm", 5, 60), &state, NULL) == 0);
    REQUIRE(state.status == LIMIT_DECREASING);
    REQUIRE(put(f, rolling_limit("tpm", 20, 60), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(state.definition.capacity, 20);
}

FIXTURE_TEST(kind_or_period_change_is_refused)
{
    REQUIRE(put_rolling(f, "k", 100, 60));
    char error[RESULT_ERROR_SIZE] = "";
    CHECK_EQ_I64(put(f, concurrency_limit("k", 100, 60), NULL, error), BACKEND_ADMIN_KIND_CHANGED);
    CHECK(strncmp(error, "kind:", 5) == 0);
    CHECK(strstr(error, "delete") != NULL);
    REQUIRE(put_budget(f, "b", 100, PERIOD_MONTH, 60));
    CHECK_EQ_I64(put(f, budget_limit("b", 100, PERIOD_DAY, 60), NULL, error),
                 BACKEND_ADMIN_PERIOD_CHANGED);
    CHECK(strncmp(error, "period:", 7) == 0);
    enum backend_admin_result rc;
    CHECK_EQ_I64(get(f, "k", &rc).definition.kind, LIMIT_ROLLING);
    CHECK_EQ_I64(get(f, "b", &rc).definition.period, PERIOD_MONTH);
}

FIXTURE_TEST(delete_hides_the_key_but_leases_still_finish)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(put_rolling(f, "keep", 1000, 60));
    REQUIRE(reserve1(f, "call", "usd", 100));
    REQUIRE(reserve1(f, "other", "usd", 100));
    CHECK_EQ_I64(delete_limit(f, "usd"), 0);
    enum backend_admin_result rc;
    (void)get(f, "usd", &rc);
    CHECK_EQ_I64(rc, BACKEND_ADMIN_UNKNOWN_KEY);
    CHECK_EQ_I64(usage_rc(f, "usd"), BACKEND_ADMIN_UNKNOWN_KEY);
    struct limit_state *states = NULL;
    size_t count = 0;
    REQUIRE(list_limits(f, &states, &count) == 0);
    CHECK_EQ_U64(count, 1);
    if (count == 1)
        CHECK_STR(states[0].definition.key, "keep");
    free(states);
    CHECK_STR(RESERVE(f, "new", {"usd", 1}).error, "unknown_limit_key: usd");
    struct completion c = COMPLETE(f, "call", {"usd", 50});
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(c.reconciled);
    CHECK_EQ_I64(release(f, "other").status, RESULT_OK);
    CHECK_EQ_I64(delete_limit(f, "usd"), BACKEND_ADMIN_UNKNOWN_KEY);
    CHECK_EQ_I64(delete_limit(f, "never"), BACKEND_ADMIN_UNKNOWN_KEY);
}

FIXTURE_TEST(recreate_after_delete)
{
    REQUIRE(put_rolling(f, "k", 10, 60));
    REQUIRE(reserve1(f, "call", "k", 4));
    REQUIRE(delete_limit(f, "k") == 0);
    /* Same kind: back in service (it may keep its holds, pessimistically). */
    REQUIRE(put_rolling(f, "k", 10, 60));
    CHECK(reserve1(f, "after", "k", 6));
    CHECK(usage(f, "k").available >= 0);
    CHECK(COMPLETE(f, "call", {"k", 4}).reconciled);
    /* Another kind after a delete is a new limit. */
    REQUIRE(delete_limit(f, "k") == 0);
    REQUIRE(put_concurrency(f, "k", 3, 60));
    CHECK(reserve1(f, "conc", "k", 3));
    CHECK_EQ_U64(usage(f, "k").reserved, 3);
    CHECK_EQ_U64(usage(f, "k").used, 0);
}

FIXTURE_TEST(list_is_sorted_and_get_reports_state)
{
    REQUIRE(put_rolling(f, "b:rpm", 10, 60));
    REQUIRE(put_budget(f, "a:usd", 100, PERIOD_WEEK, 0));
    REQUIRE(put_concurrency(f, "c:slots", 3, 20));
    struct limit_state *states = NULL;
    size_t count = 0;
    REQUIRE(list_limits(f, &states, &count) == 0);
    REQUIRE(count == 3);
    CHECK_STR(states[0].definition.key, "a:usd");
    CHECK_STR(states[1].definition.key, "b:rpm");
    CHECK_STR(states[2].definition.key, "c:slots");
    CHECK_EQ_U64(states[0].definition.timeout_seconds, 60); /* the budget default */
    CHECK_STR(states[0].definition.unit, "usd_micros");
    free(states);
    enum backend_admin_result rc;
    struct limit_state s = get(f, "c:slots", &rc);
    CHECK_EQ_I64(rc, 0);
    CHECK_EQ_I64(s.definition.kind, LIMIT_CONCURRENCY);
    CHECK_EQ_U64(s.definition.capacity, 3);
    CHECK_EQ_U64(s.definition.timeout_seconds, 20);
    (void)get(f, "missing", &rc);
    CHECK_EQ_I64(rc, BACKEND_ADMIN_UNKNOWN_KEY);
}

FIXTURE_TEST(restore_loads_a_state_as_it_was)
{
    struct limit_state saved = {0};
    saved.definition = rolling_limit("tpm", 100, 60);
    saved.status = LIMIT_DECREASING;
    saved.pending_decrease_to = 40;
    char error[RESULT_ERROR_SIZE] = "";
    REQUIRE(restore(f, saved, error) == 0);
    enum backend_admin_result rc;
    struct limit_state s = get(f, "tpm", &rc);
    CHECK_EQ_I64(s.status, LIMIT_DECREASING);
    CHECK_EQ_U64(s.pending_decrease_to, 40);
    CHECK_EQ_U64(s.definition.capacity, 100);
    CHECK_STR(RESERVE(f, "call", {"tpm", 1}).error, "limit_decreasing:tpm");
    CHECK(tick(f)); /* nothing is held after a restart: the decrease applies */
    s = get(f, "tpm", &rc);
    CHECK_EQ_I64(s.status, LIMIT_ACTIVE);
    CHECK_EQ_U64(s.definition.capacity, 40);
    CHECK(reserve1(f, "call", "tpm", 40));
}

FIXTURE_TEST(usage_of_unknown_key_fails)
{
    CHECK_EQ_I64(usage_rc(f, "nothing"), BACKEND_ADMIN_UNKNOWN_KEY);
    CHECK(backend_ready(f->backend));
}

/* One field at a time, so that a failure names it. */
static void check_same_usage(const struct limit_usage *batch, const struct limit_usage *single)
{
    CHECK_STR(batch->state.definition.key, single->state.definition.key);
    CHECK_EQ_U64(batch->state.definition.capacity, single->state.definition.capacity);
    CHECK_EQ_I64(batch->state.status, single->state.status);
    CHECK_EQ_U64(batch->reserved, single->reserved);
    CHECK_EQ_U64(batch->used, single->used);
    CHECK_EQ_U64(batch->debt, single->debt);
    CHECK_EQ_I64(batch->available, single->available);
    CHECK_EQ_I64(batch->period_start_unix_ms, single->period_start_unix_ms);
    CHECK_EQ_I64(batch->period_end_unix_ms, single->period_end_unix_ms);
}

FIXTURE_TEST(usage_batch_answers_each_key_as_usage)
{
    REQUIRE(put_rolling(f, "tpm", 100, 60));
    REQUIRE(put_budget(f, "usd", 100, PERIOD_WEEK, 0));
    REQUIRE(put_concurrency(f, "slots", 3, 60));
    REQUIRE(reserve1(f, "held", "tpm", 30));
    REQUIRE(reserve1(f, "slot", "slots", 2));
    CHECK(RESERVE(f, "spent", {"tpm", 10}, {"usd", 40}).allowed);
    CHECK(COMPLETE(f, "spent", {"tpm", 5}, {"usd", 25}).reconciled);
    const char *const keys[] = {"tpm", "missing", "usd", "slots"};
    struct usage_result results[4];
    usage_batch(f, keys, 4, results);
    CHECK_EQ_I64(results[1].result, BACKEND_ADMIN_UNKNOWN_KEY);
    for (uint32_t i = 0; i < 4; i++) {
        if (i == 1)
            continue;
        CHECK_EQ_I64(results[i].result, BACKEND_ADMIN_OK);
        struct limit_usage single = usage(f, keys[i]);
        check_same_usage(&results[i].usage, &single);
    }
    CHECK_EQ_U64(results[0].usage.reserved, 30);
    CHECK_EQ_U64(results[0].usage.used, 5);
    CHECK_EQ_U64(results[2].usage.used, 25);
    CHECK_EQ_U64(results[3].usage.reserved, 2);
    usage_batch(f, keys, 0, results); /* none: done still runs */
}

const struct conformance_test admin_tests[] = {
    TEST_ENTRY(capacity_increase_applies_at_once, "a capacity increase applies at once"),
    TEST_ENTRY(capacity_decrease_applies_at_once_when_free,
               "a decrease that the free capacity covers applies at once"),
    TEST_ENTRY(
        capacity_decrease_waits_for_release,
        "a decrease that does not fit enters decreasing: reserves get limit_decreasing with the "
        "configured retry; tick applies it once a release frees enough"),
    TEST_ENTRY(capacity_decrease_waits_for_expiry,
               "tick applies a pending decrease once holds expire"),
    TEST_ENTRY(concurrency_decrease_waits_too, "a concurrency decrease waits for slots to free"),
    TEST_ENTRY(budget_decrease_applies_at_once,
               "a budget decrease applies at once and available goes negative"),
    TEST_ENTRY(budget_decrease_outlives_an_expired_hold,
               "a budget decrease that owes part of a hold still binds once the hold expires"),
    TEST_ENTRY(decrease_is_cancelled_by_a_put_at_or_above,
               "a put at or above the capacity in force cancels a pending decrease"),
    TEST_ENTRY(kind_or_period_change_is_refused,
               "changing the kind or period of a live limit is refused, naming the field"),
    TEST_ENTRY(
        delete_hides_the_key_but_leases_still_finish,
        "a deleted key is unknown to reserve/get/list/usage, yet its leases complete and release"),
    TEST_ENTRY(recreate_after_delete,
               "a deleted key can be put again, of the same or another kind"),
    TEST_ENTRY(list_is_sorted_and_get_reports_state,
               "list_limits is sorted by key; get reports the state"),
    TEST_ENTRY(restore_loads_a_state_as_it_was,
               "restore_limit loads a decreasing state as saved and tick finishes the decrease"),
    TEST_ENTRY(usage_of_unknown_key_fails,
               "usage of an unknown key is unknown_limit_key; the backend is ready"),
    TEST_ENTRY(usage_batch_answers_each_key_as_usage,
               "usage_batch answers each key as usage does, unknown keys as unknown, none at all"),
};
const uint32_t admin_test_count = sizeof admin_tests / sizeof admin_tests[0];
