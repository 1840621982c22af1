/* Conformance: what the console reads (backend.h limits_report, holds_scan,
 * usage_by_caller; docs/console.md): pages by key, usage equal to usage(),
 * live holds with their oldest and those expiring soon, and who holds and
 * spent what. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "test.h"

/* The "expiring soon" window these tests ask for (the server's is
 * CONSOLE_HOLDS_SOON_MS, the same 10 s). */
#define SOON_MS 10000

/* One requirement with a caller (NULL: none); true when allowed. */
static bool reserve_as(struct fixture *f, const char *lease_id, const char *key, uint64_t amount,
                       const char *caller)
{
    struct item item = {key, amount};
    return reserve_items_as(f, lease_id, caller, &item, 1).allowed;
}

/* The console's calls take the backend's own keys: the test's namespace
 * goes in front, and comes off the keys of what they report. */
static const char *ns_key(const struct fixture *f, const char *key, char out[NAMED_SIZE])
{
    snprintf(out, NAMED_SIZE, "%s%s", f->ns, key);
    return out;
}

struct page {
    struct limit_report *reports;
    size_t count;
    bool more;
    enum backend_admin_result rc;
};

static struct page report(struct fixture *f, const char *prefix, const char *after,
                          enum limit_kind kind, uint32_t limit)
{
    char ns_prefix[NAMED_SIZE], ns_after[NAMED_SIZE];
    struct limits_query query = {.prefix = ns_key(f, prefix, ns_prefix),
                                 .after = after[0] != '\0' ? ns_key(f, after, ns_after) : "",
                                 .kind = kind,
                                 .limit = limit,
                                 .soon_ms = SOON_MS};
    struct page page = {0};
    page.rc =
        f->backend->ops->limits_report(f->backend, &query, &page.reports, &page.count, &page.more);
    size_t ns_length = strlen(f->ns);
    for (size_t i = 0; page.rc == 0 && i < page.count; i++) {
        char *key = page.reports[i].usage.state.definition.key;
        CHECK(strncmp(key, f->ns, ns_length) == 0);
        memmove(key, key + ns_length, strlen(key + ns_length) + 1);
    }
    return page;
}

FIXTURE_TEST(limits_report_pages_by_key)
{
    REQUIRE(put_rolling(f, "b:tpm", 100, 60));
    REQUIRE(put_concurrency(f, "a:2", 3, 60));
    REQUIRE(put_budget(f, "a:1", 1000, PERIOD_MONTH, 60));
    REQUIRE(put_rolling(f, "a", 5, 60));
    struct page p = report(f, "a:", "", LIMIT_KIND_NONE, 1);
    REQUIRE(p.rc == 0);
    REQUIRE(p.count == 1);
    CHECK_STR(p.reports[0].usage.state.definition.key, "a:1");
    CHECK(p.more);
    free(p.reports);
    p = report(f, "a:", "a:1", LIMIT_KIND_NONE, 1);
    REQUIRE(p.rc == 0 && p.count == 1);
    CHECK_STR(p.reports[0].usage.state.definition.key, "a:2");
    CHECK(!p.more);
    free(p.reports);
    p = report(f, "", "", LIMIT_KIND_NONE, CONSOLE_LIMITS_PAGE_MAX);
    REQUIRE(p.rc == 0 && p.count == 4);
    CHECK_STR(p.reports[0].usage.state.definition.key, "a");
    CHECK_STR(p.reports[3].usage.state.definition.key, "b:tpm");
    CHECK(!p.more);
    free(p.reports);
    p = report(f, "", "", LIMIT_BUDGET, 10);
    REQUIRE(p.rc == 0 && p.count == 1);
    CHECK_STR(p.reports[0].usage.state.definition.key, "a:1");
    free(p.reports);
    CHECK(delete_limit(f, "a:2") == 0);
    p = report(f, "a:", "", LIMIT_KIND_NONE, 10);
    REQUIRE(p.rc == 0);
    CHECK_EQ_U64(p.count, 1); /* deleted limits are not listed */
    free(p.reports);
    p = report(f, "zzz", "", LIMIT_KIND_NONE, 10);
    CHECK(p.rc == 0 && p.count == 0 && !p.more);
    free(p.reports);
}

static void check_same_usage(struct fixture *f, const struct limit_report *r)
{
    struct limit_usage u = usage(f, r->usage.state.definition.key);
    CHECK_EQ_U64(r->usage.reserved, u.reserved);
    CHECK_EQ_U64(r->usage.used, u.used);
    CHECK_EQ_U64(r->usage.debt, u.debt);
    CHECK_EQ_I64(r->usage.available, u.available);
    CHECK_EQ_U64(r->usage.state.definition.capacity, u.state.definition.capacity);
    CHECK_EQ_I64(r->usage.period_end_unix_ms, u.period_end_unix_ms);
}

FIXTURE_TEST(limits_report_counts_live_holds)
{
    REQUIRE(put_concurrency(f, "slots", 10, 60));
    REQUIRE(reserve1(f, "first", "slots", 2));
    advance(f, 55000);
    REQUIRE(reserve1(f, "second", "slots", 3));
    REQUIRE(reserve1(f, "third", "slots", 1));
    CHECK(complete_none(f, "third").reconciled);
    struct page p = report(f, "slots", "", LIMIT_KIND_NONE, 1);
    REQUIRE(p.rc == 0 && p.count == 1);
    const struct limit_report *r = &p.reports[0];
    check_same_usage(f, r);
    CHECK_EQ_U64(r->usage.reserved, 5);
    CHECK_EQ_U64(r->holds.count, 2);
    CHECK_EQ_U64(r->holds.expiring_soon, 1); /* "first" expires in 5 s */
    CHECK_EQ_I64(r->holds.oldest_expires_at_unix_ms, T0_MS + 60000);
    CHECK_EQ_I64(r->holds.oldest_at_unix_ms, T0_MS);
    CHECK_EQ_I64(r->reset_at_unix_ms, T0_MS + 60000);
    CHECK(r->holds.exact);
    free(p.reports);
    advance(f, 5000); /* "first" expires: the page never shows a due hold */
    p = report(f, "slots", "", LIMIT_KIND_NONE, 1);
    REQUIRE(p.rc == 0 && p.count == 1);
    CHECK_EQ_U64(p.reports[0].holds.count, 1);
    CHECK_EQ_U64(p.reports[0].usage.reserved, 3);
    CHECK_EQ_I64(p.reports[0].holds.oldest_at_unix_ms, T0_MS + 55000);
    free(p.reports);
}

FIXTURE_TEST(limits_report_rolling_and_budget)
{
    REQUIRE(put_rolling(f, "tpm", 1000, 60));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 30));
    REQUIRE(reserve1(f, "done", "tpm", 100));
    CHECK(COMPLETE(f, "done", {"tpm", 40}).reconciled); /* used until its window ends */
    advance(f, 1000);
    REQUIRE(reserve1(f, "open", "tpm", 200));
    REQUIRE(reserve1(f, "spend", "usd", 300));
    CHECK(COMPLETE(f, "spend", {"usd", 250}).reconciled);
    REQUIRE(reserve1(f, "hold", "usd", 100));
    struct page p = report(f, "", "", LIMIT_KIND_NONE, 10);
    REQUIRE(p.rc == 0 && p.count == 2);
    const struct limit_report *tpm = &p.reports[0], *usd = &p.reports[1];
    check_same_usage(f, tpm);
    check_same_usage(f, usd);
    CHECK_EQ_U64(tpm->usage.used, 40);
    CHECK_EQ_U64(tpm->holds.count, 1); /* the completed hold is used, not live */
    CHECK_EQ_I64(tpm->holds.oldest_at_unix_ms, T0_MS + 1000);
    CHECK_EQ_I64(tpm->reset_at_unix_ms, T0_MS + 60000); /* the completed hold frees first */
    CHECK_EQ_U64(tpm->holds.expiring_soon, 0);
    CHECK_EQ_U64(usd->usage.used, 250);
    CHECK_EQ_U64(usd->holds.count, 1);
    CHECK_EQ_I64(usd->holds.oldest_expires_at_unix_ms, T0_MS + 1000 + 30000);
    CHECK_EQ_I64(usd->reset_at_unix_ms, FEB_01_MS);
    CHECK_EQ_I64(usd->usage.period_start_unix_ms, JAN_01_MS);
    free(p.reports);
    advance(f, 25000); /* the budget hold expires within the next 10 s */
    p = report(f, "usd", "", LIMIT_BUDGET, 1);
    REQUIRE(p.rc == 0 && p.count == 1);
    CHECK_EQ_U64(p.reports[0].holds.expiring_soon, 1);
    free(p.reports);
}

FIXTURE_TEST(limits_report_of_an_idle_limit)
{
    REQUIRE(put_rolling(f, "idle", 10, 60));
    struct page p = report(f, "", "", LIMIT_KIND_NONE, 1);
    REQUIRE(p.rc == 0 && p.count == 1);
    CHECK_EQ_U64(p.reports[0].holds.count, 0);
    CHECK_EQ_I64(p.reports[0].holds.oldest_at_unix_ms, 0);
    CHECK_EQ_I64(p.reports[0].reset_at_unix_ms, 0);
    CHECK_EQ_I64(p.reports[0].usage.available, 10);
    free(p.reports);
}

struct seen {
    char callers[8][64];
    uint64_t amounts[8];
    uint32_t count;
};

static void remember(void *context, const struct hold_view *hold)
{
    struct seen *seen = context;
    if (seen->count < 8) {
        snprintf(seen->callers[seen->count], sizeof seen->callers[0], "%.*s",
                 (int)hold->caller_length, hold->caller);
        seen->amounts[seen->count++] = hold->amount;
    }
}

static uint64_t amount_of(const struct seen *seen, const char *caller)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < seen->count; i++) {
        if (strcmp(seen->callers[i], caller) == 0)
            sum += seen->amounts[i];
    }
    return sum;
}

FIXTURE_TEST(holds_scan_visits_live_holds_with_callers)
{
    if (f->backend->ops->holds_scan == NULL) {
        conformance_skip("the backend does not know who holds what (documented)");
        return;
    }
    REQUIRE(put_rolling(f, "tpm", 1000, 60));
    REQUIRE(reserve_as(f, "a1", "tpm", 10, "alice"));
    REQUIRE(reserve_as(f, "a2", "tpm", 20, "alice"));
    REQUIRE(reserve_as(f, "b1", "tpm", 5, "evil:<img/src=x/onerror=alert(1)>"));
    REQUIRE(reserve_as(f, "n1", "tpm", 7, NULL));
    REQUIRE(reserve_as(f, "gone", "tpm", 50, "bob"));
    CHECK(complete_none(f, "gone").reconciled); /* used, no longer live */
    REQUIRE(reserve_as(f, "freed", "tpm", 60, "bob"));
    CHECK(release(f, "freed").status == RESULT_OK);
    struct seen seen = {0};
    bool complete = false;
    char tpm[NAMED_SIZE];
    ns_key(f, "tpm", tpm);
    REQUIRE(f->backend->ops->holds_scan(f->backend, tpm, 100, remember, &seen, &complete) == 0);
    CHECK(complete);
    CHECK_EQ_U64(seen.count, 4);
    CHECK_EQ_U64(amount_of(&seen, "alice"), 30);
    CHECK_EQ_U64(amount_of(&seen, "evil:<img/src=x/onerror=alert(1)>"), 5);
    CHECK_EQ_U64(amount_of(&seen, ""), 7);
    CHECK_EQ_U64(amount_of(&seen, "bob"), 0);
    struct seen bounded = {0};
    REQUIRE(f->backend->ops->holds_scan(f->backend, tpm, 3, remember, &bounded, &complete) == 0);
    CHECK(!complete);
    CHECK_EQ_U64(bounded.count, 3);
    CHECK_EQ_I64(f->backend->ops->holds_scan(f->backend, "nope", 10, remember, &seen, &complete),
                 BACKEND_ADMIN_UNKNOWN_KEY);
}

static const struct caller_usage *row_of(const struct caller_usage *rows, size_t count,
                                         const char *caller)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(rows[i].caller, caller) == 0)
            return &rows[i];
    }
    return NULL;
}

FIXTURE_TEST(usage_by_caller_splits_a_budget)
{
    char named[NAMED_SIZE];
    if (f->backend->ops->usage_by_caller == NULL) {
        conformance_skip("the backend keeps no callers (documented)");
        return;
    }
    REQUIRE(put_budget(f, "usd", 100, PERIOD_MONTH, 30));
    REQUIRE(reserve_as(f, "l3", "usd", 1, NULL));
    REQUIRE(reserve_as(f, "l1", "usd", 30, "alice"));
    CHECK(COMPLETE(f, "l1", {"usd", 20}).reconciled);
    REQUIRE(reserve_as(f, "l2", "usd", 40, "bob"));
    CHECK(COMPLETE(f, "l2", {"usd", 90}).reconciled); /* 79 fit, 11 is debt */
    advance(f, 31000); /* l3 expires: it holds nothing, spent nothing */
    /* 20 + 79 used, 11 debt: nothing left, denied, and it holds nothing. */
    CHECK(!reserve_as(f, "l4", "usd", 1, "carol"));
    struct caller_usage *rows = NULL;
    size_t count = 0;
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "usd", named), now_ms(f), &rows,
                                             &count) == 0);
    CHECK_EQ_U64(count, 2);
    const struct caller_usage *bob = row_of(rows, count, "bob");
    const struct caller_usage *alice = row_of(rows, count, "alice");
    REQUIRE(bob != NULL && alice != NULL);
    CHECK_STR(rows[0].caller, "bob"); /* most spent (used + debt) first */
    CHECK_EQ_U64(bob->used, 79);
    CHECK_EQ_U64(bob->debt, 11);
    CHECK_EQ_U64(bob->calls, 1);
    CHECK_EQ_U64(alice->used, 20);
    CHECK_EQ_U64(alice->reserved, 0);
    CHECK_EQ_U64(alice->calls, 1);
    free(rows);
    /* A new period starts from zero; the old one stays queryable. */
    set_time(f, FEB_01_MS + 1000);
    REQUIRE(reserve_as(f, "l5", "usd", 5, "alice"));
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "usd", named), now_ms(f), &rows,
                                             &count) == 0);
    REQUIRE(count == 1);
    CHECK_STR(rows[0].caller, "alice");
    CHECK_EQ_U64(rows[0].reserved, 5);
    CHECK_EQ_U64(rows[0].used, 0);
    CHECK_EQ_U64(rows[0].calls, 0); /* not completed yet */
    free(rows);
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "usd", named), T0_MS, &rows,
                                             &count) == 0);
    CHECK_EQ_U64(count, 2);
    free(rows);
    CHECK_EQ_I64(f->backend->ops->usage_by_caller(f->backend, "nope", T0_MS, &rows, &count),
                 BACKEND_ADMIN_UNKNOWN_KEY);
}

FIXTURE_TEST(usage_by_caller_of_a_window)
{
    char named[NAMED_SIZE];
    if (f->backend->ops->usage_by_caller == NULL) {
        conformance_skip("the backend keeps no callers (documented)");
        return;
    }
    REQUIRE(put_rolling(f, "tpm", 1000, 60));
    REQUIRE(reserve_as(f, "a", "tpm", 10, "alice"));
    REQUIRE(reserve_as(f, "b", "tpm", 30, "alice"));
    CHECK(COMPLETE(f, "b", {"tpm", 25}).reconciled);
    REQUIRE(reserve_as(f, "c", "tpm", 5, "bob"));
    struct caller_usage *rows = NULL;
    size_t count = 0;
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "tpm", named), now_ms(f), &rows,
                                             &count) == 0);
    REQUIRE(count == 2);
    CHECK_STR(rows[0].caller, "alice");
    CHECK_EQ_U64(rows[0].reserved, 10);
    CHECK_EQ_U64(rows[0].used, 25);
    CHECK_EQ_U64(rows[0].calls, 2); /* the open lease and the completed one */
    CHECK_STR(rows[1].caller, "bob");
    CHECK_EQ_U64(rows[1].reserved, 5);
    CHECK_EQ_U64(rows[1].calls, 1);
    free(rows);
    advance(f, 61000); /* the window is over: nobody holds anything */
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "tpm", named), now_ms(f), &rows,
                                             &count) == 0);
    CHECK_EQ_U64(count, 0);
    free(rows);
    /* Debt is spent too: bob's overrun puts him first though alice used more. */
    REQUIRE(put_rolling(f, "small", 100, 60));
    REQUIRE(reserve_as(f, "d", "small", 60, "alice"));
    CHECK(COMPLETE(f, "d", {"small", 60}).reconciled);
    REQUIRE(reserve_as(f, "e", "small", 30, "bob"));
    CHECK(COMPLETE(f, "e", {"small", 80}).reconciled); /* 50 over, and no room: debt */
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "small", named), now_ms(f),
                                             &rows, &count) == 0);
    REQUIRE(count == 2);
    CHECK_STR(rows[0].caller, "bob");
    CHECK_EQ_U64(rows[0].used, 30);
    CHECK_EQ_U64(rows[0].debt, 50);
    CHECK_STR(rows[1].caller, "alice");
    CHECK_EQ_U64(rows[1].used, 60);
    free(rows);
}

/* Callers past the backend's bound share one row (memory: documented). */
FIXTURE_TEST(callers_past_the_bound_share_a_row)
{
    char named[NAMED_SIZE];
    uint32_t bound = conformance_traits.callers_max;
    if (bound == 0 || f->backend->ops->usage_by_caller == NULL) {
        conformance_skip("the backend tells every caller apart, or keeps none");
        return;
    }
    REQUIRE(put_budget(f, "usd", 1000000, PERIOD_MONTH, 300));
    char lease[32], caller[32];
    for (uint32_t i = 0; i <= bound; i++) {
        snprintf(lease, sizeof lease, "l%u", i);
        snprintf(caller, sizeof caller, "c%u", i);
        REQUIRE(reserve_as(f, lease, "usd", 1, caller));
    }
    struct caller_usage *rows = NULL;
    size_t count = 0;
    REQUIRE(f->backend->ops->usage_by_caller(f->backend, ns_key(f, "usd", named), now_ms(f), &rows,
                                             &count) == 0);
    CHECK_EQ_U64(count, bound + 1);
    snprintf(caller, sizeof caller, "c%u", bound - 1);
    CHECK(row_of(rows, count, caller) != NULL);
    snprintf(caller, sizeof caller, "c%u", bound);
    CHECK(row_of(rows, count, caller) == NULL);
    const struct caller_usage *others = row_of(rows, count, "(other callers)");
    REQUIRE(others != NULL);
    CHECK_EQ_U64(others->reserved, 1);
    free(rows);
}

const struct conformance_test console_tests[] = {
    TEST_ENTRY(limits_report_pages_by_key,
               "limits_report filters by prefix and kind, pages by key after a key, says when more "
               "match, and leaves deleted limits out"),
    MANUAL_CLOCK_TEST_ENTRY(
        limits_report_counts_live_holds,
        "limits_report's usage equals usage(); holds count the live ones, the oldest, those "
        "expiring within 10 s, and the next expiry",
        "checks times to the millisecond"),
    MANUAL_CLOCK_TEST_ENTRY(
        limits_report_rolling_and_budget,
        "a completed rolling hold is used, not live, and still sets the next reset; a budget "
        "resets at its period's end",
        "sets an absolute date"),
    TEST_ENTRY(limits_report_of_an_idle_limit, "an idle limit has no holds and no reset time"),
    TEST_ENTRY(
        holds_scan_visits_live_holds_with_callers,
        "holds_scan visits each live hold once with its caller (none after complete or release), "
        "stops at its bound, and unknown_limit_key for an unknown key"),
    TEST_ENTRY(
        usage_by_caller_splits_a_budget,
        "usage_by_caller splits a budget's used, debt, reserved and completed calls by caller, "
        "period by period"),
    TEST_ENTRY(usage_by_caller_of_a_window,
               "usage_by_caller of a rolling limit: what each caller's holds carry in the window, "
               "most spent (used + debt) first"),
    TEST_ENTRY(callers_past_the_bound_share_a_row,
               "callers past the backend's bound are counted together as (other callers)"),
};
const uint32_t console_test_count = sizeof console_tests / sizeof console_tests[0];
