/* The console's server modules on their own: the activity record (denials
 * ring and its bounds, per-second counts) and the budget spend history (its
 * bounds, thinning, period roll-over) and projection (exact integer rates
 * and times), against the memory backend on a manual clock. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/memory/memory.h"
#include "server/activity.h"
#include "server/spend.h"
#include "test.h"

/* 2026-01-15T12:00:00Z. */
#define T0_MS INT64_C(1768478400000)
#define T0_MONTH_MS INT64_C(1767225600000) /* 2026-01-01T00:00Z: T0's UTC month */
#define FEB_01_MS INT64_C(1769904000000)

static struct reserve_request request_of(const char *lease_id, const char *caller,
                                         const struct requirement *requirements, uint32_t count)
{
    return (struct reserve_request){.lease_id = lease_id,
                                    .lease_id_length = (uint32_t)strlen(lease_id),
                                    .caller = caller,
                                    .caller_length = caller ? (uint32_t)strlen(caller) : 0,
                                    .requirements = requirements,
                                    .requirement_count = count};
}

static void denials_ring_keeps_the_newest(void)
{
    struct activity *a = activity_create();
    REQUIRE(a != NULL);
    struct requirement r = {"tpm", 3, 5};
    struct reserve_request request = request_of("lease", "bot", &r, 1);
    struct reserve_result denied = {.denied_count = 1, .denied_index = {0}, .retry_after_ms = 7};
    for (int i = 0; i < ACTIVITY_DENIALS_MAX + 44; i++)
        activity_reserve(a, T0_MS + i, ACTIVITY_SOURCE_API, &request, &denied);
    struct activity_denial *out = malloc((ACTIVITY_DENIALS_MAX + 1) * sizeof *out);
    REQUIRE(out != NULL);
    uint64_t total = 0;
    size_t n = activity_denials(a, out, ACTIVITY_DENIALS_MAX + 1, &total);
    CHECK_EQ_U64(total, ACTIVITY_DENIALS_MAX + 44);
    CHECK_EQ_U64(n, ACTIVITY_DENIALS_MAX);              /* the bound */
    CHECK_EQ_U64(out[0].id, ACTIVITY_DENIALS_MAX + 44); /* newest first */
    CHECK_EQ_I64(out[0].at_unix_ms, T0_MS + ACTIVITY_DENIALS_MAX + 43);
    CHECK_EQ_U64(out[n - 1].id, 45);
    CHECK_STR(out[0].caller, "bot");
    CHECK_STR(out[0].keys[0], "tpm");
    CHECK_EQ_U64(out[0].amounts[0], 5);
    CHECK_EQ_I64(out[0].retry_after_ms, 7);
    CHECK_STR(out[0].error, "");
    n = activity_denials(a, out, 3, &total);
    CHECK_EQ_U64(n, 3);
    free(out);
    activity_destroy(a);
}

static void denial_keeps_eight_keys_and_errors(void)
{
    struct activity *a = activity_create();
    REQUIRE(a != NULL);
    char keys[10][8];
    struct requirement r[10];
    struct reserve_result denied = {.denied_count = 10};
    for (uint32_t i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "k%u", i);
        r[i] = (struct requirement){keys[i], (uint32_t)strlen(keys[i]), i + 1};
        denied.denied_index[i] = (uint8_t)i;
    }
    struct reserve_request request = request_of("many", NULL, r, 10);
    activity_reserve(a, T0_MS, ACTIVITY_SOURCE_GATEWAY, &request, &denied);
    struct reserve_result unknown = {.error = BACKEND_UNKNOWN_LIMIT_KEY, .error_index = 2};
    activity_reserve(a, T0_MS, ACTIVITY_SOURCE_API, &request, &unknown);
    struct reserve_result conflict = {.error = BACKEND_LEASE_CONFLICT};
    activity_reserve(a, T0_MS, ACTIVITY_SOURCE_API, &request, &conflict); /* not an answer */
    struct reserve_result allowed = {.allowed = true};
    activity_reserve(a, T0_MS, ACTIVITY_SOURCE_API, &request, &allowed); /* not a denial */
    struct activity_denial out[4];
    uint64_t total = 0;
    size_t n = activity_denials(a, out, 4, &total);
    REQUIRE(n == 2);
    CHECK_STR(out[0].error, "unknown_limit_key: ");
    CHECK_EQ_U64(out[0].key_count, 1);
    CHECK_STR(out[0].keys[0], "k2");
    CHECK_EQ_U64(out[1].key_count, 10);
    CHECK_STR(out[1].keys[ACTIVITY_DENIAL_KEYS_MAX - 1], "k7");
    CHECK_EQ_I64(out[1].source, ACTIVITY_SOURCE_GATEWAY);
    CHECK_STR(out[1].caller, "");
    struct activity_second seconds[ACTIVITY_SECONDS_REPORTED];
    activity_seconds(a, T0_MS + 1000, seconds, ACTIVITY_SECONDS_REPORTED);
    const struct activity_second *last = &seconds[ACTIVITY_SECONDS_REPORTED - 1];
    CHECK_EQ_I64(last->at_unix_ms, T0_MS);
    CHECK_EQ_U64(last->reserves, 3); /* the conflict is not counted */
    CHECK_EQ_U64(last->denials, 2);
    activity_destroy(a);
}

static void seconds_roll_over(void)
{
    struct activity *a = activity_create();
    REQUIRE(a != NULL);
    activity_count(a, T0_MS, 10, 2);
    activity_count(a, T0_MS + 999, 5, 0);
    activity_count(a, T0_MS + 1000, 1, 1);
    /* One ring-length later the same bucket counts a new second from zero. */
    activity_count(a, T0_MS + ACTIVITY_SECONDS * 1000, 4, 0);
    struct activity_second seconds[ACTIVITY_SECONDS_REPORTED];
    activity_seconds(a, T0_MS + 2000, seconds, ACTIVITY_SECONDS_REPORTED);
    CHECK_EQ_U64(seconds[ACTIVITY_SECONDS_REPORTED - 2].reserves, 0); /* reset by the later count */
    CHECK_EQ_U64(seconds[ACTIVITY_SECONDS_REPORTED - 1].reserves, 1);
    CHECK_EQ_U64(seconds[ACTIVITY_SECONDS_REPORTED - 1].denials, 1);
    activity_seconds(a, T0_MS + (ACTIVITY_SECONDS + 1) * 1000, seconds, ACTIVITY_SECONDS_REPORTED);
    CHECK_EQ_U64(seconds[ACTIVITY_SECONDS_REPORTED - 1].reserves, 4);
    CHECK_EQ_I64(seconds[0].at_unix_ms,
                 T0_MS + (ACTIVITY_SECONDS + 1 - ACTIVITY_SECONDS_REPORTED) * 1000);
    activity_destroy(a);
}

/* ---- spend ------------------------------------------------------------------ */

struct fixture {
    struct clock_manual clock;
    struct backend *backend;
    char dir[64];
};

static bool open_memory(struct fixture *f)
{
    clock_manual_init(&f->clock, T0_MS);
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &f->clock.clock;
    config.lease_cache_entries = 1000;
    char error[256];
    return backend_open(&mem_backend_ops, &config, NULL, &f->backend, error, sizeof error) == 0;
}

static bool put_budget(struct fixture *f, const char *key, uint64_t capacity)
{
    struct limit_definition d = {
        .kind = LIMIT_BUDGET, .capacity = capacity, .period = PERIOD_MONTH};
    snprintf(d.key, sizeof d.key, "%s", key);
    char error[256];
    return limit_definition_validate(&d, error, sizeof error) == 0 &&
           backend_put_limit(f->backend, &d, NULL, error, sizeof error) == 0;
}

/* Reserves `reserved` and completes `actual` (more is an overrun). */
static void spend_over(struct fixture *f, const char *key, uint64_t reserved, uint64_t amount)
{
    static unsigned lease;
    char id[32];
    snprintf(id, sizeof id, "s%u", lease++);
    struct requirement r = {key, (uint32_t)strlen(key), reserved};
    struct reserve_request request = request_of(id, NULL, &r, 1);
    struct reserve_result result;
    backend_reserve_wait(f->backend, &request, &result, 1);
    struct actual actual = {key, (uint32_t)strlen(key), amount};
    struct complete_request complete = {id, (uint32_t)strlen(id), &actual, 1};
    struct complete_result done;
    backend_complete_wait(f->backend, &complete, &done, 1);
    free(done.warnings);
}

static void spend_amount(struct fixture *f, const char *key, uint64_t amount)
{
    spend_over(f, key, amount, amount);
}

/* The history of key in the period starting at period_ms (a new copy). */
static struct spend_history *history_of(struct spend *s, const char *key, int64_t period_ms)
{
    struct spend_history *h = malloc(sizeof *h);
    if (h == NULL)
        abort(); /* out of memory in a test */
    spend_history(s, key, period_ms, h);
    return h;
}

static void spend_samples_and_thins(void)
{
    struct fixture f;
    REQUIRE(open_memory(&f));
    struct spend *s = spend_create();
    REQUIRE(s != NULL);
    REQUIRE(put_budget(&f, "usd", 1000000000));
    struct spend_history *h = history_of(s, "usd", T0_MS);
    CHECK(!h->tracked);
    CHECK_EQ_U64(h->count, 0);
    free(h);
    int64_t period_ms = T0_MONTH_MS;
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS), 0);
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS + SPEND_SAMPLE_MS - 1), 0); /* too soon */
    h = history_of(s, "usd", period_ms);
    CHECK(h->tracked);
    CHECK_EQ_U64(h->count, 1); /* there before the first sample: no zero before it */
    CHECK_EQ_U64(h->recent_count, 1);
    free(h);
    /* One sample per interval until the ring is full, then every second
     * one goes and the interval doubles; the recent ring keeps the latest
     * at full rate. */
    int64_t now = T0_MS;
    for (uint32_t i = 1; i <= SPEND_POINTS_MAX; i++) {
        spend_amount(&f, "usd", 10);
        now += SPEND_SAMPLE_MS;
        clock_manual_set(&f.clock, now);
        CHECK_EQ_I64(spend_sample(s, f.backend, now), 0);
    }
    h = history_of(s, "usd", period_ms);
    uint32_t n = h->count;
    CHECK_EQ_U64(n, SPEND_POINTS_MAX / 2 + 1);
    CHECK_EQ_I64(h->points[0].at_unix_ms, T0_MS); /* the first stays */
    CHECK_EQ_I64(h->points[n - 1].at_unix_ms, now);
    CHECK_EQ_U64(h->points[n - 1].used, 10 * SPEND_POINTS_MAX);
    CHECK_EQ_I64(h->points[1].at_unix_ms - h->points[0].at_unix_ms, 2 * SPEND_SAMPLE_MS);
    CHECK_EQ_U64(h->recent_count, SPEND_RECENT_MAX);
    CHECK_EQ_I64(h->recent[SPEND_RECENT_MAX - 1].at_unix_ms, now);
    CHECK_EQ_I64(h->recent[0].at_unix_ms, now - (SPEND_RECENT_MAX - 1) * SPEND_SAMPLE_MS);
    CHECK(h->recent[0].at_unix_ms <= now - SPEND_RATE_WINDOW_MS); /* it reaches a window back */
    free(h);
    /* The next sample waits for the doubled interval (the recent ring does not). */
    now += SPEND_SAMPLE_MS;
    clock_manual_set(&f.clock, now);
    CHECK_EQ_I64(spend_sample(s, f.backend, now), 0);
    h = history_of(s, "usd", period_ms);
    CHECK_EQ_U64(h->count, n);
    CHECK_EQ_I64(h->recent[SPEND_RECENT_MAX - 1].at_unix_ms, now);
    free(h);
    /* The clock steps back: the samples after it go, sampling goes on. */
    clock_manual_set(&f.clock, now - 3 * SPEND_SAMPLE_MS);
    CHECK_EQ_I64(spend_sample(s, f.backend, now - 3 * SPEND_SAMPLE_MS), 0);
    h = history_of(s, "usd", period_ms);
    CHECK(h->count < n);
    CHECK(h->points[h->count - 1].at_unix_ms <= now - 3 * SPEND_SAMPLE_MS);
    for (uint32_t i = 1; i < h->count; i++)
        CHECK(h->points[i].at_unix_ms > h->points[i - 1].at_unix_ms);
    CHECK_EQ_I64(h->recent[h->recent_count - 1].at_unix_ms, now - 3 * SPEND_SAMPLE_MS);
    for (uint32_t i = 1; i < h->recent_count; i++)
        CHECK(h->recent[i].at_unix_ms > h->recent[i - 1].at_unix_ms);
    free(h);
    /* A new period starts from zero, at its start; the old one is not kept. */
    clock_manual_set(&f.clock, FEB_01_MS + 1000);
    CHECK_EQ_I64(spend_sample(s, f.backend, FEB_01_MS + 1000), 0);
    h = history_of(s, "usd", period_ms);
    CHECK_EQ_U64(h->count, 0);
    free(h);
    h = history_of(s, "usd", FEB_01_MS);
    CHECK_EQ_U64(h->count, 1); /* the zero; the sample a second later is too soon */
    CHECK_EQ_I64(h->points[0].at_unix_ms, FEB_01_MS);
    CHECK_EQ_U64(h->points[0].used, 0);
    CHECK_EQ_U64(h->recent_count, 1);
    free(h);
    /* A deleted budget is forgotten. */
    CHECK(backend_delete_limit(f.backend, "usd") == 0);
    CHECK_EQ_I64(spend_sample(s, f.backend, FEB_01_MS + 100000), 0);
    h = history_of(s, "usd", FEB_01_MS);
    CHECK(!h->tracked);
    free(h);
    spend_destroy(s);
    backend_close(f.backend);
}

/* The budget made and charged between two samples: its history starts
 * with a zero at the sample before, so its rate counts the charge. */
static void spend_new_budget_starts_from_zero(void)
{
    struct fixture f;
    REQUIRE(open_memory(&f));
    struct spend *s = spend_create();
    REQUIRE(s != NULL);
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS), 0); /* no budget yet */
    clock_manual_set(&f.clock, T0_MS + 1000);
    REQUIRE(put_budget(&f, "usd", 5000000));
    spend_over(&f, "usd", 5000000, 5600000); /* an overrun, before any sample saw the budget */
    clock_manual_set(&f.clock, T0_MS + SPEND_SAMPLE_MS);
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS + SPEND_SAMPLE_MS), 0);
    int64_t period_ms = T0_MONTH_MS;
    struct spend_history *h = history_of(s, "usd", period_ms);
    REQUIRE(h->count == 2);
    CHECK_EQ_I64(h->points[0].at_unix_ms, T0_MS);
    CHECK_EQ_U64(h->points[0].used + h->points[0].debt, 0);
    CHECK_EQ_U64(h->points[1].used + h->points[1].debt, 5600000);
    /* 75 s after the charge: all of it in the last 10 minutes. */
    struct limit_usage u;
    REQUIRE(backend_usage(f.backend, "usd", T0_MS + 76000, &u) == 0);
    struct spend_projection p;
    spend_project(h->recent, h->recent_count, &u, T0_MS + 76000, &p);
    CHECK(p.rate_known);
    CHECK_EQ_I64(p.rate_window_ms, SPEND_RATE_WINDOW_MS);
    CHECK_EQ_U64(p.rate_window_spent, 5600000);
    CHECK_EQ_U64(p.rate_per_hour, 5600000 * (3600000 / SPEND_RATE_WINDOW_MS));
    CHECK(p.runs_out); /* used up already */
    CHECK_EQ_I64(p.runs_out_at_unix_ms, T0_MS + 76000);
    free(h);
    spend_destroy(s);
    backend_close(f.backend);
}

/* The budgets there when the server starts are noted (no usage read): one
 * made afterwards starts from a zero at the start, one there before does
 * not (what it spent before is unknown). */
static void spend_start_notes_the_budgets_there(void)
{
    struct fixture f;
    REQUIRE(open_memory(&f));
    struct spend *s = spend_create();
    REQUIRE(s != NULL);
    REQUIRE(put_budget(&f, "old", 1000));
    spend_amount(&f, "old", 100);
    REQUIRE(spend_start(s, f.backend, &f.clock.clock) == 0);
    spend_stop(s); /* the sampler waits a tick before its first sample: none was taken */
    int64_t period_ms = T0_MONTH_MS;
    struct spend_history *h = history_of(s, "old", period_ms);
    CHECK(!h->tracked); /* noted, not sampled */
    free(h);
    clock_manual_set(&f.clock, T0_MS + 1000);
    REQUIRE(put_budget(&f, "new", 1000));
    spend_amount(&f, "new", 50);
    clock_manual_set(&f.clock, T0_MS + SPEND_SAMPLE_MS);
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS + SPEND_SAMPLE_MS), 0);
    h = history_of(s, "old", period_ms);
    CHECK(h->tracked);
    REQUIRE(h->count == 1);
    CHECK_EQ_U64(h->points[0].used, 100);
    free(h);
    h = history_of(s, "new", period_ms);
    REQUIRE(h->count == 2);
    CHECK_EQ_I64(h->points[0].at_unix_ms, T0_MS);
    CHECK_EQ_U64(h->points[0].used, 0);
    CHECK_EQ_U64(h->points[1].used, 50);
    free(h);
    spend_destroy(s);
    backend_close(f.backend);
}

static void spend_tracks_at_most_the_bound(void)
{
    struct fixture f;
    REQUIRE(open_memory(&f));
    struct spend *s = spend_create();
    REQUIRE(s != NULL);
    char key[32];
    for (uint32_t i = 0; i <= SPEND_BUDGETS_MAX; i++) {
        snprintf(key, sizeof key, "b%05u", i);
        REQUIRE(put_budget(&f, key, 100));
    }
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS), 0);
    int64_t period_ms = T0_MONTH_MS;
    snprintf(key, sizeof key, "b%05u", SPEND_BUDGETS_MAX - 1);
    struct spend_history *h = history_of(s, key, period_ms);
    CHECK(h->tracked);
    free(h);
    snprintf(key, sizeof key, "b%05u", SPEND_BUDGETS_MAX);
    h = history_of(s, key, period_ms);
    CHECK(!h->tracked); /* one past the bound */
    free(h);
    /* Room for two more: a budget before the last sample's last key is new
     * (it starts from a zero); one past it may have been there unseen. */
    CHECK(backend_delete_limit(f.backend, "b00000") == 0);
    CHECK(backend_delete_limit(f.backend, "b00001") == 0);
    REQUIRE(put_budget(&f, "a-new", 100));
    snprintf(key, sizeof key, "b%05ux", SPEND_BUDGETS_MAX - 1);
    REQUIRE(put_budget(&f, key, 100));
    CHECK_EQ_I64(spend_sample(s, f.backend, T0_MS + SPEND_SAMPLE_MS), 0);
    h = history_of(s, "a-new", period_ms);
    CHECK_EQ_U64(h->count, 2);
    CHECK_EQ_I64(h->points[0].at_unix_ms, T0_MS);
    free(h);
    h = history_of(s, key, period_ms);
    CHECK(h->tracked);
    CHECK_EQ_U64(h->count, 1);
    CHECK_EQ_I64(h->points[0].at_unix_ms, T0_MS + SPEND_SAMPLE_MS);
    free(h);
    spend_destroy(s);
    backend_close(f.backend);
}

static struct limit_usage usage_of(uint64_t capacity, uint64_t used, uint64_t debt,
                                   uint64_t reserved)
{
    struct limit_usage u = {.used = used, .debt = debt, .reserved = reserved};
    u.state.definition.capacity = capacity;
    u.available = (int64_t)capacity - (int64_t)(used + debt + reserved);
    u.period_start_unix_ms = T0_MONTH_MS;
    u.period_end_unix_ms = FEB_01_MS;
    return u;
}

#define WINDOW SPEND_RATE_WINDOW_MS

static void projection_is_exact(void)
{
    struct spend_point points[] = {
        {T0_MS - 2 * WINDOW, 0, 0},
        {T0_MS - WINDOW - 1000, 1000, 0}, /* the newest at least a window old: the origin */
        {T0_MS - WINDOW / 2, 2000, 0},
    };
    struct spend_projection p;
    struct limit_usage u = usage_of(1000000, 4000, 1000, 3000);
    spend_project(points, 3, &u, T0_MS, &p);
    CHECK(p.rate_known);
    CHECK_EQ_I64(p.rate_window_ms, WINDOW + 1000);
    CHECK_EQ_U64(p.rate_window_spent, 4000); /* 5000 spent now - 1000 then */
    CHECK_EQ_U64(p.rate_per_hour, (uint64_t)4000 * 3600000 / (WINDOW + 1000));
    CHECK(p.runs_out);
    /* 992000 left at 4000 per window: rounded up to the millisecond. */
    CHECK_EQ_I64(p.runs_out_at_unix_ms,
                 T0_MS + (INT64_C(992000) * (WINDOW + 1000) + 4000 - 1) / 4000);
    CHECK_EQ_U64(p.projected_at_period_end,
                 5000 + (uint64_t)4000 * (uint64_t)(FEB_01_MS - T0_MS) / (WINDOW + 1000));
    /* Rounded up: 1 unit left at 180 per window. */
    struct spend_point one[] = {{T0_MS - WINDOW, 0, 0}};
    u = usage_of(181, 180, 0, 0);
    spend_project(one, 1, &u, T0_MS, &p);
    CHECK_EQ_U64(p.rate_per_hour, 180 * (3600000 / WINDOW));
    CHECK_EQ_I64(p.runs_out_at_unix_ms, T0_MS + (WINDOW + 179) / 180);
    /* After the period's end: no run-out; used up: now. */
    u = usage_of(INT64_C(1) << 40, 180, 0, 0);
    spend_project(one, 1, &u, T0_MS, &p);
    CHECK(p.rate_known && !p.runs_out);
    u = usage_of(100, 100, 20, 0);
    spend_project(one, 1, &u, T0_MS, &p);
    CHECK(p.runs_out);
    CHECK_EQ_I64(p.runs_out_at_unix_ms, T0_MS);
    /* History shorter than the window: known only from a sample that had
     * spent nothing (then the window is exact), else unknown. */
    struct spend_point zero[] = {{T0_MS - 1000, 0, 0}};
    u = usage_of(1000, 300, 0, 0);
    spend_project(zero, 1, &u, T0_MS, &p);
    CHECK(p.rate_known);
    CHECK_EQ_I64(p.rate_window_ms, WINDOW);
    CHECK_EQ_U64(p.rate_window_spent, 300);
    CHECK_EQ_U64(p.rate_per_hour, 300 * (3600000 / WINDOW));
    struct spend_point young[] = {{T0_MS - 1000, 5, 0}};
    spend_project(young, 1, &u, T0_MS, &p);
    CHECK(!p.rate_known && !p.runs_out);
    spend_project(young, 0, &u, T0_MS, &p);
    CHECK(!p.rate_known);
}

/* A budget that spent nothing in the window does not run out, however much
 * it spent before (the console said such a budget ran out in seconds). */
static void idle_budget_does_not_run_out(void)
{
    struct spend_point points[] = {
        {T0_MS - 3 * WINDOW, 0, 0},
        {T0_MS - WINDOW - 5000, 0, 0},
        {T0_MS - WINDOW - 1, 7400, 0}, /* the last spend, just over a window ago */
        {T0_MS - 5000, 7400, 0},
    };
    struct limit_usage u = usage_of(10000, 7400, 0, 0);
    struct spend_projection p;
    spend_project(points, 4, &u, T0_MS, &p);
    CHECK(p.rate_known);
    CHECK_EQ_U64(p.rate_window_spent, 0);
    CHECK_EQ_U64(p.rate_per_hour, 0);
    CHECK(!p.runs_out);
    CHECK_EQ_U64(p.projected_at_period_end, 7400);
    /* Within the window it was spending: 7400 in it, 2600 left. */
    spend_project(points, 4, &u, T0_MS - 2, &p);
    CHECK_EQ_U64(p.rate_window_spent, 7400);
    CHECK(p.runs_out);
}

int main(void)
{
    RUN(denials_ring_keeps_the_newest,
        "the denials ring keeps the newest ACTIVITY_DENIALS_MAX, newest first, and counts all");
    RUN(denial_keeps_eight_keys_and_errors,
        "a denial keeps 8 keys of more, a definitive error names its key, conflicts are not "
        "answers and allowed reserves are counted but not denials");
    RUN(seconds_roll_over, "per-second counts land in their second and a bucket is reused "
                           "from zero one ring-length later");
    RUN(spend_samples_and_thins,
        "samples wait for their interval; a full ring drops every second sample and doubles "
        "the interval while the recent ring keeps the latest; a new period starts from a zero "
        "at its start; a deleted budget is forgotten");
    RUN(spend_new_budget_starts_from_zero,
        "a budget made since the last sample starts from a zero there, so a charge before its "
        "first sample is in its rate");
    RUN(spend_start_notes_the_budgets_there,
        "the budgets there at start are noted: one made afterwards starts from a zero, one "
        "there before does not");
    RUN(spend_tracks_at_most_the_bound,
        "at most SPEND_BUDGETS_MAX budgets have a history; a zero starts only the budgets the "
        "last sample would have read");
    RUN(projection_is_exact,
        "the rate over the last 10 minutes, the end-of-period spend and the run-out time are "
        "exact integers, rounded as documented; unknown without a sample a window old or a zero");
    RUN(idle_budget_does_not_run_out,
        "a budget that spent nothing in the last 10 minutes has a zero rate and does not run out");
    return test_summary();
}
