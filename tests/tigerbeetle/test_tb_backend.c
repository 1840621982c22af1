/* Integration tests of the tigerbeetle backend against a real cluster
 * (TIGERBEETLE_BIN), in real time with windows and timeouts of a few
 * seconds (TigerBeetle keeps its own clock). They hold the backend to the
 * rules of backend.h and docs/semantics.md: all-or-nothing reserves,
 * idempotent leases, complete/release per kind, overage and debt, late
 * budget commits, decreases, and two front ends sharing one cluster. */
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/tigerbeetle/tb_backend.h"
#include "backend/tigerbeetle/tigerbeetle.h"
#include "backend_results.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/uuid.h"
#include "tbclient/tbc_ids.h"
#include "tb_server.h"
#include "test.h"

/* TBC_PATIENT_FAIL_AFTER_MS of the backend (3 s): admin work waits that
 * long for a cluster that does not answer. */
#define TB_PATIENT_FAIL_AFTER_MS_FOR_TEST 3000

static struct tb_test_server server;
static const struct backend_ops *ops;
static struct backend *front;  /* the main front end */
static struct backend *second; /* another llmlimitd on the same cluster */
static unsigned test_round;    /* keys differ per run of a test */

static struct backend *open_front_at(const char *address)
{
    struct backend_config config;
    backend_config_defaults(&config);
    struct tb_options options;
    tb_options_defaults(&options);
    options.addresses = address;
    options.sessions = 2;
    struct backend *b = NULL;
    char error[256];
    if (backend_open(ops, &config, &options, &b, error, sizeof error) != 0) {
        fprintf(stderr, "open: %s\n", error);
        return NULL;
    }
    for (int i = 0; i < 300 && !backend_ready(b); i++)
        poll(NULL, 0, 50);
    return b;
}

static struct backend *open_front(void)
{
    return open_front_at(server.address);
}

static void sleep_ms(int ms)
{
    poll(NULL, 0, ms);
}

static struct limit_definition definition(const char *key, enum limit_kind kind, uint64_t capacity,
                                          uint32_t seconds)
{
    struct limit_definition d;
    memset(&d, 0, sizeof d);
    snprintf(d.key, sizeof d.key, "%s", key);
    d.kind = kind;
    d.capacity = capacity;
    if (kind == LIMIT_ROLLING)
        d.window_seconds = seconds;
    else
        d.timeout_seconds = seconds;
    if (kind == LIMIT_BUDGET)
        d.period = PERIOD_DAY;
    snprintf(d.unit, sizeof d.unit, "units");
    char error[256];
    if (limit_definition_validate(&d, error, sizeof error) != 0)
        fprintf(stderr, "bad test definition: %s\n", error);
    return d;
}

static struct limit_state put(struct backend *b, struct limit_definition d)
{
    struct limit_state state;
    memset(&state, 0, sizeof state);
    char error[256] = "";
    if (backend_put_limit(b, &d, &state, error, sizeof error) != 0)
        fprintf(stderr, "put %s: %s\n", d.key, error);
    return state;
}

/* A key unique to this run, so reruns against one cluster do not collide. */
static const char *key(const char *name)
{
    static char keys[16][64];
    static unsigned next;
    char *k = keys[next++ % 16];
    snprintf(k, 64, "%s:%u:%u", name, test_round, (unsigned)getpid());
    return k;
}

static struct reservation reserve_on(struct backend *b, const char *lease,
                                     const struct requirement *requirements, uint32_t count)
{
    struct reserve_request request = {.lease_id = lease,
                                      .lease_id_length = (uint32_t)strlen(lease),
                                      .requirements = requirements,
                                      .requirement_count = count};
    struct reserve_result result;
    backend_reserve_wait(b, &request, &result, 1);
    return reservation_of(&request, &result);
}

static struct reservation reserve1(struct backend *b, const char *lease, const char *k,
                                   uint64_t amount)
{
    struct requirement r = {.key = k, .key_length = (uint32_t)strlen(k), .amount = amount};
    return reserve_on(b, lease, &r, 1);
}

struct completed {
    enum result_status status;
    bool reconciled;
    char error[RESULT_ERROR_SIZE];
    char warnings[512];
};

static struct completed complete1(struct backend *b, const char *lease, const char *k,
                                  uint64_t actual)
{
    struct actual a = {
        .key = k, .key_length = k ? (uint32_t)strlen(k) : 0, .actual_amount = actual};
    struct complete_request request = {.lease_id = lease,
                                       .lease_id_length = (uint32_t)strlen(lease),
                                       .actuals = k ? &a : NULL,
                                       .actual_count = k ? 1 : 0};
    struct complete_result result;
    backend_complete_wait(b, &request, &result, 1);
    struct completion done = completion_of(&request, &result);
    struct completed c;
    memset(&c, 0, sizeof c);
    c.status = done.status;
    c.reconciled = done.reconciled;
    memcpy(c.error, done.error, sizeof c.error);
    size_t at = 0;
    for (uint32_t i = 0; i < done.warning_count && i < WARNINGS_MAX; i++)
        at += (size_t)snprintf(c.warnings + at, sizeof c.warnings - at, "%s;", done.warnings[i]);
    return c;
}

static struct release_outcome release1(struct backend *b, const char *lease)
{
    struct release_request request = {.lease_id = lease,
                                      .lease_id_length = (uint32_t)strlen(lease)};
    struct release_result result;
    backend_release_wait(b, &request, &result, 1);
    return release_outcome_of(&result);
}

static struct limit_usage usage(struct backend *b, const char *k)
{
    struct limit_usage u;
    memset(&u, 0, sizeof u);
    enum backend_admin_result rc = backend_usage(b, k, clock_now_ms(clock_system()), &u);
    if (rc != BACKEND_ADMIN_OK)
        fprintf(stderr, "usage %s: %d\n", k, (int)rc);
    return u;
}

static const char *lease(const char *name)
{
    static char leases[16][64];
    static unsigned next;
    char *l = leases[next++ % 16];
    snprintf(l, 64, "%s-%u-%u", name, test_round, (unsigned)getpid());
    return l;
}

static void test_rolling_reserve_deny_and_replay(void)
{
    const char *k = key("rolling");
    struct limit_state state = put(front, definition(k, LIMIT_ROLLING, 10, 3));
    CHECK(state.status == LIMIT_ACTIVE);
    CHECK_EQ_U64(state.definition.capacity, 10);
    const char *a = lease("a"), *b = lease("b");
    struct reservation r1 = reserve1(front, a, k, 6);
    CHECK(r1.status == RESULT_OK && r1.allowed);
    CHECK(r1.expires_at_unix_ms - r1.reserved_at_unix_ms == 3000);
    struct reservation r2 = reserve1(front, b, k, 6);
    CHECK(r2.status == RESULT_OK && !r2.allowed);
    CHECK_STR(r2.error, "");
    CHECK_EQ_U64(r2.denied_count, 1);
    CHECK(r2.retry_after_ms >= 1 && r2.retry_after_ms <= 3000);
    /* the same lease answers the same, allowed or denied */
    struct reservation again = reserve1(front, a, k, 6);
    CHECK(again.allowed && again.reserved_at_unix_ms == r1.reserved_at_unix_ms);
    struct reservation denied_again = reserve1(front, b, k, 6);
    CHECK(!denied_again.allowed && denied_again.denied_count == 1);
    struct reservation conflict = reserve1(front, a, k, 5);
    CHECK(conflict.status == RESULT_CONFLICT);
    CHECK_STR(conflict.error, "lease_conflict");
    struct limit_usage u = usage(front, k);
    CHECK_EQ_U64(u.reserved, 6);
    CHECK_EQ_I64(u.available, 4);
}

static void test_errors_before_capacity(void)
{
    const char *k = key("errors");
    put(front, definition(k, LIMIT_CONCURRENCY, 3, 30));
    struct reservation unknown = reserve1(front, lease("u"), "no-such-limit", 1);
    CHECK(unknown.status == RESULT_OK && !unknown.allowed);
    CHECK_STR(unknown.error, "unknown_limit_key: no-such-limit");
    struct reservation too_big = reserve1(front, lease("big"), k, 4);
    CHECK(!too_big.allowed);
    CHECK(strncmp(too_big.error, "exceeds_capacity:", 17) == 0);
    /* not recorded: the same lease with an amount that fits is allowed */
    struct reservation fits = reserve1(front, lease("big"), k, 3);
    CHECK(fits.allowed);
}

static void test_all_or_nothing(void)
{
    const char *x = key("x"), *y = key("y");
    put(front, definition(x, LIMIT_CONCURRENCY, 5, 30));
    put(front, definition(y, LIMIT_CONCURRENCY, 5, 30));
    struct requirement both[2] = {{x, (uint32_t)strlen(x), 3}, {y, (uint32_t)strlen(y), 6 - 1}};
    CHECK(reserve_on(front, lease("both"), both, 2).allowed);
    /* y is full now: a reserve of x+y must hold nothing on x */
    both[0].amount = 1;
    both[1].amount = 1;
    struct reservation denied = reserve_on(front, lease("both2"), both, 2);
    CHECK(!denied.allowed);
    CHECK_EQ_U64(denied.denied_count, 1);
    CHECK_EQ_U64(denied.denied_index[0], 1);
    CHECK_EQ_U64(usage(front, x).reserved, 3);
    CHECK_EQ_U64(usage(front, y).reserved, 5);
    CHECK(release1(front, lease("both")).status == RESULT_OK);
    CHECK_EQ_U64(usage(front, x).reserved, 0);
    CHECK_EQ_U64(usage(front, y).reserved, 0);
}

static void test_complete_and_release_rules(void)
{
    const char *k = key("rules");
    put(front, definition(k, LIMIT_ROLLING, 10, 30));
    const char *a = lease("ca"), *b = lease("cb");
    CHECK(reserve1(front, a, k, 6).allowed);
    struct completed c = complete1(front, a, k, 2);
    CHECK(c.status == RESULT_OK && c.reconciled);
    struct limit_usage u = usage(front, k);
    CHECK_EQ_U64(u.reserved, 0);
    CHECK_EQ_U64(u.used, 2); /* shrunk to the actual for the rest of the window */
    CHECK(reserve1(front, b, k, 8).allowed);
    CHECK(complete1(front, a, k, 2).status == RESULT_OK); /* twice: no-op */
    CHECK_EQ_U64(usage(front, k).used, 2);
    struct release_outcome after_complete = release1(front, a);
    CHECK(after_complete.status == RESULT_CONFLICT);
    CHECK_STR(after_complete.error, "already_finalized");
    CHECK(release1(front, b).status == RESULT_OK);
    CHECK(release1(front, b).status == RESULT_OK); /* twice: no-op */
    struct completed late = complete1(front, b, k, 1);
    CHECK(late.status == RESULT_CONFLICT);
    CHECK_STR(late.error, "already_finalized");
    struct completed unknown = complete1(front, lease("never"), k, 1);
    CHECK(unknown.status == RESULT_OK && !unknown.reconciled);
    CHECK(release1(front, lease("never")).status == RESULT_OK);
    struct completed stranger = complete1(front, a, "not-in-lease", 1);
    CHECK(stranger.status == RESULT_INVALID);
    CHECK_STR(stranger.error, "actual_key_not_in_lease:not-in-lease");
}

static void test_concurrency_slots(void)
{
    const char *k = key("slots");
    put(front, definition(k, LIMIT_CONCURRENCY, 2, 30));
    CHECK(reserve1(front, lease("s1"), k, 1).allowed);
    CHECK(reserve1(front, lease("s2"), k, 1).allowed);
    struct reservation third = reserve1(front, lease("s3"), k, 1);
    CHECK(!third.allowed);
    CHECK(third.retry_after_ms >= 1 && third.retry_after_ms <= 300); /* the poll cap */
    CHECK(complete1(front, lease("s1"), k, 1).reconciled);
    CHECK(reserve1(front, lease("s4"), k, 1).allowed);
    CHECK_EQ_U64(usage(front, k).reserved, 2);
    CHECK_EQ_U64(usage(front, k).used, 0);
}

static void test_rolling_overage(void)
{
    const char *k = key("overage");
    put(front, definition(k, LIMIT_ROLLING, 10, 30));
    CHECK(reserve1(front, lease("o1"), k, 5).allowed);
    CHECK(reserve1(front, lease("o2"), k, 2).allowed);
    /* grows to 6 (fits), then 9 does not fit with 2 held: debt 4 */
    struct completed fits = complete1(front, lease("o1"), k, 6);
    CHECK(fits.status == RESULT_OK && strcmp(fits.warnings, "") == 0);
    CHECK(reserve1(front, lease("o3"), k, 2).allowed);
    struct completed over = complete1(front, lease("o3"), k, 5);
    CHECK(over.status == RESULT_OK);
    CHECK(strstr(over.warnings, "overage_debt:") != NULL);
    struct limit_usage u = usage(front, k);
    CHECK_EQ_U64(u.used, 8);     /* 6 + 2 */
    CHECK_EQ_U64(u.reserved, 2); /* o2 */
    CHECK_EQ_U64(u.debt, 3);
    CHECK_EQ_I64(u.available, 0);
}

static void test_rolling_window_expires(void)
{
    const char *k = key("window");
    put(front, definition(k, LIMIT_ROLLING, 4, 1));
    CHECK(reserve1(front, lease("w1"), k, 4).allowed);
    CHECK(!reserve1(front, lease("w2"), k, 1).allowed);
    sleep_ms(2500); /* the cluster expires the hold (the keepalive drives it) */
    CHECK(reserve1(front, lease("w3"), k, 4).allowed);
}

static void test_budget_commit_and_debt(void)
{
    const char *k = key("budget");
    put(front, definition(k, LIMIT_BUDGET, 100, 60));
    CHECK(reserve1(front, lease("b1"), k, 60).allowed);
    struct reservation no = reserve1(front, lease("b2"), k, 50);
    CHECK(!no.allowed && no.retry_after_ms > 0);
    struct completed c = complete1(front, lease("b1"), k, 80); /* overage that fits */
    CHECK(c.status == RESULT_OK && c.reconciled);
    struct limit_usage u = usage(front, k);
    CHECK_EQ_U64(u.used, 80);
    CHECK_EQ_U64(u.reserved, 0);
    CHECK(!reserve1(front, lease("b3"), k, 30).allowed);
    CHECK(reserve1(front, lease("b4"), k, 20).allowed);
    struct completed over = complete1(front, lease("b4"), k, 50); /* 30 past the cap */
    CHECK(strstr(over.warnings, "overage_debt:") != NULL);
    u = usage(front, k);
    CHECK_EQ_U64(u.used, 100);
    CHECK_EQ_U64(u.debt, 30);
    CHECK_EQ_I64(u.available, -30);
    CHECK(u.period_end_unix_ms - u.period_start_unix_ms == 86400000);
    /* debt counts: nothing more this period, even after a release */
    CHECK(!reserve1(front, lease("b5"), k, 1).allowed);
}

static void test_budget_release_pays_debt_first(void)
{
    const char *k = key("debtfirst");
    put(front, definition(k, LIMIT_BUDGET, 100, 60));
    CHECK(reserve1(front, lease("d1"), k, 50).allowed);
    CHECK(reserve1(front, lease("d2"), k, 50).allowed);
    /* d1 costs 70: 50 fits, 20 is debt; then d2 is released: its 50 frees
     * but 20 of it pays the debt, so only 30 is available */
    complete1(front, lease("d1"), k, 70);
    CHECK(release1(front, lease("d2")).status == RESULT_OK);
    struct limit_usage u = usage(front, k);
    CHECK_EQ_I64(u.available, 30);
    CHECK(!reserve1(front, lease("d3"), k, 31).allowed);
    CHECK(reserve1(front, lease("d4"), k, 30).allowed);
}

static void test_budget_commit_after_expiry(void)
{
    const char *k = key("late");
    put(front, definition(k, LIMIT_BUDGET, 100, 5)); /* 5 s: the shortest budget hold */
    CHECK(reserve1(front, lease("l1"), k, 10).allowed);
    sleep_ms(6500);
    CHECK_EQ_U64(usage(front, k).reserved, 0); /* expired in the cluster */
    struct completed c = complete1(front, lease("l1"), k, 10);
    CHECK(c.status == RESULT_OK && c.reconciled);
    CHECK(strstr(c.warnings, "commit_after_expiry:") != NULL);
    CHECK_EQ_U64(usage(front, k).used, 10); /* still charged */
    CHECK(complete1(front, lease("l1"), k, 10).status == RESULT_OK);
    CHECK_EQ_U64(usage(front, k).used, 10); /* and only once */
}

static void test_decrease_waits_for_free_capacity(void)
{
    const char *k = key("decrease");
    put(front, definition(k, LIMIT_CONCURRENCY, 10, 30));
    CHECK(reserve1(front, lease("dec1"), k, 8).allowed);
    struct limit_state s = put(front, definition(k, LIMIT_CONCURRENCY, 5, 30));
    CHECK(s.status == LIMIT_DECREASING);
    CHECK_EQ_U64(s.definition.capacity, 10);
    CHECK_EQ_U64(s.pending_decrease_to, 5);
    struct reservation blocked = reserve1(front, lease("dec2"), k, 1);
    CHECK(!blocked.allowed);
    CHECK(strncmp(blocked.error, "limit_decreasing:", 17) == 0);
    CHECK_EQ_I64(blocked.retry_after_ms, DECREASE_RETRY_MS_DEFAULT);
    CHECK(release1(front, lease("dec1")).status == RESULT_OK);
    bool changed = false;
    for (int i = 0; i < 40 && !changed; i++) { /* the checker runs every second */
        sleep_ms(100);
        backend_tick(front, &changed);
    }
    CHECK(changed);
    struct limit_state after;
    CHECK(backend_get_limit(front, k, &after) == 0);
    CHECK(after.status == LIMIT_ACTIVE);
    CHECK_EQ_U64(after.definition.capacity, 5);
    CHECK(!reserve1(front, lease("dec3"), k, 6).allowed);
    CHECK(reserve1(front, lease("dec4"), k, 5).allowed);
    /* an increase applies at once */
    s = put(front, definition(k, LIMIT_CONCURRENCY, 7, 30));
    CHECK(s.status == LIMIT_ACTIVE && s.definition.capacity == 7);
    CHECK(reserve1(front, lease("dec5"), k, 2).allowed);
}

static void test_two_front_ends_share_leases(void)
{
    const char *k = key("shared"), *c = key("sharedslots");
    put(front, definition(k, LIMIT_ROLLING, 10, 30));
    put(front, definition(c, LIMIT_CONCURRENCY, 1, 30));
    put(second, definition(k, LIMIT_ROLLING, 10, 30)); /* idempotent: no double capacity */
    put(second, definition(c, LIMIT_CONCURRENCY, 1, 30));
    CHECK_EQ_I64(usage(second, k).available, 10);
    struct requirement both[2] = {{k, (uint32_t)strlen(k), 4}, {c, (uint32_t)strlen(c), 1}};
    struct reservation r = reserve_on(front, lease("x1"), both, 2);
    CHECK(r.allowed);
    /* the other front end sees the hold, and a retry there replays */
    CHECK(!reserve_on(second, lease("x2"), both, 2).allowed);
    struct reservation replay = reserve_on(second, lease("x1"), both, 2);
    CHECK(replay.allowed);
    CHECK_EQ_I64(replay.reserved_at_unix_ms, r.reserved_at_unix_ms);
    CHECK_EQ_I64(replay.expires_at_unix_ms, r.expires_at_unix_ms);
    both[0].amount = 5;
    CHECK(reserve_on(second, lease("x1"), both, 2).status == RESULT_CONFLICT);
    /* complete on the other one: it finds the lease by its ids, even the
     * key left out of the actuals (the concurrency slot is freed) */
    struct completed done = complete1(second, lease("x1"), k, 3);
    CHECK(done.status == RESULT_OK && done.reconciled);
    CHECK_EQ_U64(usage(front, k).used, 3);
    CHECK_EQ_U64(usage(front, c).reserved, 0);
    /* and the first front end, which thinks the lease is live, learns */
    struct release_outcome late = release1(front, lease("x1"));
    CHECK(late.status == RESULT_CONFLICT);
    CHECK(complete1(front, lease("x1"), k, 3).status == RESULT_CONFLICT ||
          complete1(front, lease("x1"), k, 3).status == RESULT_OK);
    /* release found by another front end */
    CHECK(reserve1(front, lease("x3"), c, 1).allowed);
    CHECK(release1(second, lease("x3")).status == RESULT_OK);
    CHECK_EQ_U64(usage(front, c).reserved, 0);
    CHECK(complete1(front, lease("x3"), c, 1).status == RESULT_CONFLICT);
    /* a lease of rolling holds only: the complete's voids are linked */
    CHECK(reserve1(front, lease("x4"), k, 1).allowed);
    CHECK(complete1(second, lease("x4"), k, 1).reconciled);
    CHECK(release1(front, lease("x4")).status == RESULT_CONFLICT);
    /* completed with actual 0 (a plain void), then again elsewhere with 3 */
    CHECK(reserve1(front, lease("x5"), k, 2).allowed);
    CHECK(complete1(front, lease("x5"), k, 0).reconciled);
    struct completed twice = complete1(second, lease("x5"), k, 3);
    CHECK(twice.status == RESULT_OK && twice.reconciled);
    CHECK_EQ_U64(usage(front, k).used, 4); /* x1 3 + x4 1; x5 kept nothing */
}

/* Once every hold has expired nothing is left to void: a complete or
 * release through one front end marks the lease, and the other way through
 * the other front end is already_finalized; a lease released first is
 * never charged by a late complete. */
static void test_finalized_after_expiry_across_front_ends(void)
{
    const char *c = key("lateslots"), *u = key("lateusd");
    put(front, definition(c, LIMIT_CONCURRENCY, 5, 1));
    put(second, definition(c, LIMIT_CONCURRENCY, 5, 1));
    put(front, definition(u, LIMIT_BUDGET, 1000, 5)); /* 5 s: the shortest budget hold */
    put(second, definition(u, LIMIT_BUDGET, 1000, 5));
    struct requirement both[2] = {{c, (uint32_t)strlen(c), 1}, {u, (uint32_t)strlen(u), 100}};
    CHECK(reserve_on(front, lease("e1"), both, 2).allowed);
    CHECK(reserve_on(front, lease("e2"), both, 2).allowed);
    sleep_ms(6500);
    /* e1: completed late through the second front end, then released */
    struct completed done = complete1(second, lease("e1"), u, 70);
    CHECK(done.status == RESULT_OK && done.reconciled);
    CHECK(strstr(done.warnings, "commit_after_expiry:") != NULL);
    CHECK(release1(front, lease("e1")).status == RESULT_CONFLICT);
    CHECK(complete1(front, lease("e1"), u, 70).status == RESULT_OK); /* twice: a no-op */
    /* e2: released late through the second front end, then completed */
    CHECK(release1(second, lease("e2")).status == RESULT_OK);
    CHECK(complete1(front, lease("e2"), u, 80).status == RESULT_CONFLICT);
    CHECK(release1(second, lease("e2")).status == RESULT_OK); /* twice: a no-op */
    struct limit_usage usd = usage(front, u);
    CHECK_EQ_U64(usd.used + usd.debt, 70); /* e1 once, e2 never */
    CHECK_EQ_U64(usd.reserved, 0);
}

static void test_restart_of_front_end_keeps_accounting(void)
{
    const char *k = key("restart");
    put(front, definition(k, LIMIT_CONCURRENCY, 3, 30));
    CHECK(reserve1(front, lease("p1"), k, 2).allowed);
    /* a new llmlimitd (empty cache) restores the registry and carries on */
    struct backend *fresh = open_front();
    REQUIRE(fresh != NULL);
    struct limit_state state = {.definition = definition(k, LIMIT_CONCURRENCY, 3, 30)};
    char error[256];
    CHECK(backend_restore_limit(fresh, &state, error, sizeof error) == 0);
    CHECK(!reserve1(fresh, lease("p2"), k, 2).allowed);
    CHECK(reserve1(fresh, lease("p3"), k, 1).allowed);
    CHECK(release1(fresh, lease("p1")).status == RESULT_OK);
    CHECK(reserve1(fresh, lease("p4"), k, 2).allowed);
    backend_close(fresh);
}

/* Budget periods come from the backend's clock (TigerBeetle's own clock
 * only times holds): a manual clock crosses a month boundary at once. */
static void test_budget_new_period_starts_from_zero(void)
{
    struct clock_manual clock;
    clock_manual_init(&clock, INT64_C(1769903940000)); /* 2026-01-31T23:59:00Z */
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &clock.clock;
    struct tb_options options;
    tb_options_defaults(&options);
    options.addresses = server.address;
    options.sessions = 1;
    struct backend *b = NULL;
    char error[256];
    REQUIRE(backend_open(ops, &config, &options, &b, error, sizeof error) == 0);
    const char *k = key("monthly");
    struct limit_definition d = definition(k, LIMIT_BUDGET, 100, 60);
    d.period = PERIOD_MONTH;
    put(b, d);
    CHECK(reserve1(b, lease("jan"), k, 100).allowed);
    CHECK(complete1(b, lease("jan"), k, 100).reconciled);
    struct reservation full = reserve1(b, lease("jan2"), k, 1);
    CHECK(!full.allowed);
    CHECK_EQ_I64(full.retry_after_ms, 60000);         /* the end of January */
    clock_manual_set(&clock, INT64_C(1769904000000)); /* 2026-02-01T00:00:00Z */
    CHECK(reserve1(b, lease("feb"), k, 100).allowed); /* February's accounts, on demand */
    struct limit_usage january;
    CHECK(backend_usage(b, k, INT64_C(1769903940000), &january) == 0);
    CHECK_EQ_U64(january.used, 100);
    struct limit_usage february;
    CHECK(backend_usage(b, k, INT64_C(1769904000000), &february) == 0);
    CHECK_EQ_U64(february.used, 0);
    CHECK_EQ_U64(february.reserved, 100);
    backend_close(b);
}

#define STORM_THREADS 8
#define STORM_OPS 150
#define STORM_LEASES 12

struct storm {
    const char *key;
    unsigned seed;
    int unavailable;
};

/* Random reserves, completes and releases of a few lease ids from many
 * threads at once: one front end serialises each lease, so nothing is
 * held twice or freed twice. */
static void *storm_thread(void *argument)
{
    struct storm *s = argument;
    for (int i = 0; i < STORM_OPS; i++) {
        char id[32];
        snprintf(id, sizeof id, "storm-%u-%u", test_round,
                 (unsigned)(rand_r(&s->seed) % STORM_LEASES));
        int op = (int)(rand_r(&s->seed) % 3);
        enum result_status status = RESULT_OK;
        if (op == 0)
            status = reserve1(front, id, s->key, 1).status;
        else if (op == 1)
            status = complete1(front, id, s->key, 1).status;
        else
            status = release1(front, id).status;
        if (status == RESULT_UNAVAILABLE)
            s->unavailable++;
    }
    return NULL;
}

static void test_storm_on_few_leases(void)
{
    const char *k = key("storm");
    put(front, definition(k, LIMIT_CONCURRENCY, 100, 60));
    pthread_t threads[STORM_THREADS];
    struct storm storms[STORM_THREADS];
    for (int t = 0; t < STORM_THREADS; t++) {
        storms[t] = (struct storm){.key = k, .seed = (unsigned)t + 1};
        pthread_create(&threads[t], NULL, storm_thread, &storms[t]);
    }
    int unavailable = 0;
    for (int t = 0; t < STORM_THREADS; t++) {
        pthread_join(threads[t], NULL);
        unavailable += storms[t].unavailable;
    }
    CHECK_EQ_I64(unavailable, 0);
    /* every lease is held at most once: at most one unit each */
    struct limit_usage u = usage(front, k);
    CHECK(u.reserved <= STORM_LEASES);
    for (int l = 0; l < STORM_LEASES; l++) {
        char id[32];
        snprintf(id, sizeof id, "storm-%u-%d", test_round, l);
        release1(front, id);
        complete1(front, id, k, 1);
    }
    CHECK_EQ_U64(usage(front, k).reserved, 0);
}

/* With the cluster gone a put still answers (the state as asked) within
 * a few seconds, reserves answer backend_error at once, and once the
 * cluster is back the limit's accounts are made and reserves go through. */
static void test_put_while_cluster_down_applies_later(void)
{
    tb_test_server_kill(&server);
    const char *k = key("later");
    int64_t started = clock_monotonic_ms();
    struct limit_state s = put(front, definition(k, LIMIT_CONCURRENCY, 2, 30));
    int64_t took = clock_monotonic_ms() - started;
    printf("     put answered in %" PRId64 " ms with the cluster down\n", took);
    CHECK(took < 2 * TB_PATIENT_FAIL_AFTER_MS_FOR_TEST);
    CHECK(s.status == LIMIT_ACTIVE && s.definition.capacity == 2);
    started = clock_monotonic_ms();
    struct reservation r = reserve1(front, lease("later1"), k, 1);
    CHECK(r.status == RESULT_UNAVAILABLE);
    CHECK_STR(r.error, "backend_error");
    CHECK(clock_monotonic_ms() - started < 2 * TB_PATIENT_FAIL_AFTER_MS_FOR_TEST);
    CHECK(!backend_ready(front));
    REQUIRE(tb_test_server_restart(&server) == 0);
    bool allowed = false;
    for (int i = 0; i < 100 && !allowed; i++) {
        allowed = reserve1(front, lease("later2"), k, 2).allowed;
        if (!allowed)
            sleep_ms(200);
    }
    CHECK(allowed);
    CHECK(backend_ready(front));
    CHECK_EQ_U64(usage(front, k).reserved, 2);
}

/* ---- the cluster's id scheme (docs/tigerbeetle.md "Account model") ------ */

/* A plain client of the cluster at address, to read what the backend made. */
static struct tbc_submitter *raw_client(const char *address)
{
    struct tbc_submitter *client = NULL;
    char error[256];
    if (tbc_submitter_open(tbc_u128_from_u64(0), address, 1, &client, error, sizeof error) != 0) {
        fprintf(stderr, "raw client: %s\n", error);
        return NULL;
    }
    for (int i = 0; i < 200 && !tbc_submitter_ready(client); i++)
        sleep_ms(50);
    return client;
}

static bool raw_lookup(struct tbc_submitter *client, uint8_t operation, tbc_u128 id, void *out)
{
    uint8_t found = 0;
    struct tbc_item item = {.operation = operation,
                            .event_count = 1,
                            .events = &id,
                            .objects = out,
                            .found = &found,
                            .deadline_ms = clock_monotonic_ms() + 5000};
    return tbc_submitter_call(client, &item) == TBC_ITEM_OK && found;
}

static uint32_t raw_create_operator(struct tbc_submitter *client, uint32_t user_data_32)
{
    struct tbc_account accounts[2] = {
        {.id = tbc_id_from_label("acct:operator", 13),
         .user_data_32 = user_data_32,
         .ledger = 1,
         .code = TB_ACCOUNT_CODE_OPERATOR},
        {.id = tbc_id_from_label("acct:finalized", 14),
         .ledger = 1,
         .code = TB_ACCOUNT_CODE_FINALIZED},
    };
    uint32_t codes[2] = {UINT32_MAX, UINT32_MAX};
    struct tbc_item item = {.operation = TBC_OPERATION_CREATE_ACCOUNTS,
                            .event_count = 2,
                            .events = accounts,
                            .codes = codes,
                            .deadline_ms = clock_monotonic_ms() + 5000};
    if (tbc_submitter_call(client, &item) != TBC_ITEM_OK)
        return UINT32_MAX;
    return codes[0];
}

/* A UUIDv7 lease id of now (after prefix: "" or the gateway's), and its
 * hold's id under each scheme. */
struct uuid_lease {
    char id[sizeof LEASE_ID_GATEWAY_PREFIX + UUID_TEXT_SIZE];
    tbc_u128 label_hold;
    tbc_u128 timed_hold;
};

static struct uuid_lease uuid_lease(const char *k, const char *prefix)
{
    struct uuid_lease l;
    int64_t now_ms = clock_now_ms(clock_system());
    char uuid[UUID_TEXT_SIZE];
    CHECK(uuid_v7(now_ms, uuid) == 0);
    snprintf(l.id, sizeof l.id, "%s%s", prefix, uuid);
    l.label_hold = tbc_id2("xfer:reserve:", l.id, strlen(l.id), k, strlen(k));
    l.timed_hold = tbc_id_time_ordered(l.label_hold, (uint64_t)now_ms);
    return l;
}

/* Reserves a UUIDv7 lease through one front end and completes it through
 * another, which must find it by its ids; returns the id its hold was
 * made under (or 0 when neither is found). */
static tbc_u128 hold_made_and_found(struct backend *a, struct backend *b,
                                    struct tbc_submitter *client, const char *k,
                                    struct uuid_lease l)
{
    put(a, definition(k, LIMIT_ROLLING, 100, 30));
    put(b, definition(k, LIMIT_ROLLING, 100, 30));
    CHECK(reserve1(a, l.id, k, 7).allowed);
    struct tbc_transfer hold;
    tbc_u128 made = tbc_u128_from_u64(0);
    bool timed = raw_lookup(client, TBC_OPERATION_LOOKUP_TRANSFERS, l.timed_hold, &hold);
    bool label = raw_lookup(client, TBC_OPERATION_LOOKUP_TRANSFERS, l.label_hold, &hold);
    CHECK(timed != label); /* under one id, never both */
    if (timed || label) {
        made = timed ? l.timed_hold : l.label_hold;
        CHECK(tbc_u128_equal(hold.amount, tbc_u128_from_u64(7)));
        CHECK((hold.flags & TBC_TRANSFER_PENDING) != 0);
    }
    struct completed done = complete1(b, l.id, k, 5);
    CHECK(done.status == RESULT_OK && done.reconciled);
    CHECK_EQ_U64(usage(a, k).used, 5);
    CHECK_EQ_U64(usage(a, k).reserved, 0);
    return made;
}

static void test_time_ordered_ids_on_a_new_cluster(void)
{
    struct tbc_submitter *client = raw_client(server.address);
    REQUIRE(client != NULL);
    /* The front ends made the operator account, marked. */
    struct tbc_account operator;
    REQUIRE(raw_lookup(client, TBC_OPERATION_LOOKUP_ACCOUNTS,
                       tbc_id_from_label("acct:operator", 13), &operator));
    CHECK_EQ_U64(operator.user_data_32, TB_OPERATOR_TIME_ORDERED_IDS);
    const char *k = key("timed");
    struct uuid_lease l = uuid_lease(k, "");
    CHECK(tbc_u128_equal(hold_made_and_found(front, second, client, k, l), l.timed_hold));
    /* The gateway's lease ids, its prefix and a UUIDv7, are time-ordered too. */
    const char *g = key("timed-gateway");
    struct uuid_lease gateway = uuid_lease(g, LEASE_ID_GATEWAY_PREFIX);
    CHECK(
        tbc_u128_equal(hold_made_and_found(front, second, client, g, gateway), gateway.timed_hold));
    /* A lease id that is no UUIDv7 keeps its label's id. */
    const char *plain = lease("plain");
    CHECK(reserve1(front, plain, k, 1).allowed);
    struct tbc_transfer hold;
    CHECK(raw_lookup(client, TBC_OPERATION_LOOKUP_TRANSFERS,
                     tbc_id2("xfer:reserve:", plain, strlen(plain), k, strlen(k)), &hold));
    CHECK(release1(second, plain).status == RESULT_OK);
    /* What an older llmlimitd gets making its operator account here: a
     * refusal, so it cannot make ids of the other scheme. */
    CHECK_EQ_U64(raw_create_operator(client, 0), TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_USER_DATA_32);
    tbc_submitter_close(client);
}

static void test_label_ids_on_a_cluster_an_older_llmlimitd_made(void)
{
    struct tb_test_server older;
    memset(&older, 0, sizeof older);
    REQUIRE(tb_test_server_start(&older) == 0);
    struct tbc_submitter *client = raw_client(older.address);
    REQUIRE(client != NULL);
    /* The operator account as llmlimitd made it before the scheme existed. */
    CHECK_EQ_U64(raw_create_operator(client, 0), TBC_ACCOUNT_OK);
    struct backend *a = open_front_at(older.address), *b = open_front_at(older.address);
    REQUIRE(a != NULL && b != NULL);
    const char *k = key("labels");
    struct uuid_lease l = uuid_lease(k, "");
    CHECK(tbc_u128_equal(hold_made_and_found(a, b, client, k, l), l.label_hold));
    backend_close(a);
    backend_close(b);
    tbc_submitter_close(client);
    tb_test_server_stop(&older);
}

int main(void)
{
    if (tb_test_server_binary() == NULL) {
        printf("SKIPPED: TIGERBEETLE_BIN not set (tigerbeetle backend integration tests)\n");
        return 77; /* ctest: skipped (SKIP_RETURN_CODE) */
    }
    ops = backend_find("tigerbeetle");
    if (ops == NULL || tb_test_server_start(&server) != 0) {
        tb_test_server_stop(&server);
        return 1;
    }
    test_round = (unsigned)(clock_monotonic_ms() % 100000);
    front = open_front();
    second = open_front();
    if (front == NULL || second == NULL) {
        tb_test_server_stop(&server);
        return 1;
    }
    RUN(test_rolling_reserve_deny_and_replay,
        "rolling: fits, denies the rest, replays a lease, 409 on change");
    RUN(test_errors_before_capacity,
        "unknown key and exceeds_capacity are definitive and not recorded");
    RUN(test_all_or_nothing, "a reserve across limits holds all or nothing; release frees all");
    RUN(test_complete_and_release_rules,
        "complete shrinks, twice is a no-op, release/complete conflicts are 409");
    RUN(test_concurrency_slots,
        "concurrency: complete frees a slot; a denial polls in 250 ms +-20%");
    RUN(test_rolling_overage, "rolling overage grows the hold when it fits, else becomes debt");
    RUN(test_rolling_window_expires, "a rolling hold expires with its window in the cluster");
    RUN(test_budget_commit_and_debt,
        "budget: commit charges actuals, the excess is debt that blocks");
    RUN(test_budget_release_pays_debt_first,
        "budget: capacity a release frees pays the debt first");
    RUN(test_budget_commit_after_expiry,
        "budget: a commit after expiry is charged once, with a warning");
    RUN(test_budget_new_period_starts_from_zero,
        "a new budget period starts from zero; the old one is kept");
    RUN(test_decrease_waits_for_free_capacity,
        "a decrease waits (limit_decreasing) until capacity is free");
    RUN(test_two_front_ends_share_leases,
        "two front ends on one cluster complete and release each other's leases");
    RUN(test_finalized_after_expiry_across_front_ends,
        "after every hold expired, finalizing the other way through another front end is 409; "
        "a lease released first is never charged");
    RUN(test_storm_on_few_leases, "8 threads storming 12 leases never hold one twice or leak");
    RUN(test_put_while_cluster_down_applies_later,
        "with the cluster down a put answers, reserves fail fast; back up, all goes through");
    RUN(test_restart_of_front_end_keeps_accounting,
        "a fresh front end sees the cluster's holds and frees them");
    RUN(test_time_ordered_ids_on_a_new_cluster,
        "a new cluster is marked for time-ordered ids: a UUIDv7 lease's hold is led by its "
        "timestamp and found by another front end; an older llmlimitd is refused");
    RUN(test_label_ids_on_a_cluster_an_older_llmlimitd_made,
        "a cluster an older llmlimitd made keeps label ids, found by another front end");
    backend_close(front);
    backend_close(second);
    tb_test_server_stop(&server);
    return test_summary();
}
