/* Unit tests of the observed output reservation (src/gateway/gw_observed.c):
 * max_tokens until enough calls are seen, then the percentile of the
 * window, never above max_tokens; pairs kept apart; the window sliding;
 * the bound on pairs one past it with the least recently used forgotten;
 * threads at once; and the budget arithmetic docs/gateway.md quotes for
 * Claude Code's max_tokens 64000. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_cost.h"
#include "gateway/gw_observed.h"
#include "test.h"

static struct gw_observed *standard(void)
{
    return gw_observed_new(GW_OBSERVED_PAIRS_MAX, GW_OBSERVED_WINDOW, GW_OBSERVED_PERCENTILE,
                           GW_OBSERVED_MIN_CALLS);
}

static void max_tokens_until_enough_calls(void)
{
    struct gw_observed *o = standard();
    REQUIRE(o != NULL);
    CHECK_EQ_U64(gw_observed_reserve(o, "opus", "bot", 64000), 64000); /* never seen */
    for (int i = 1; i < GW_OBSERVED_MIN_CALLS; i++)
        REQUIRE(gw_observed_record(o, "opus", "bot", 100 * (uint64_t)i) == 0);
    CHECK_EQ_U64(gw_observed_reserve(o, "opus", "bot", 64000), 64000); /* 19 calls: not yet */
    REQUIRE(gw_observed_record(o, "opus", "bot", 2000) == 0);
    /* 20 outputs 100..1900 and 2000: rank ceil(0.99 x 20) = 20, the largest. */
    CHECK_EQ_U64(gw_observed_reserve(o, "opus", "bot", 64000), 2000);
    gw_observed_free(o);
}

static void the_unseen_amount_until_enough_calls(void)
{
    struct gw_observed *o = standard();
    REQUIRE(o != NULL);
    CHECK_EQ_U64(gw_observed_reserve_or(o, "opus", "bot", 64000, 4096), 4096); /* never seen */
    CHECK_EQ_U64(gw_observed_reserve_or(o, "opus", "bot", 1000, 4096), 1000);  /* never above */
    for (int i = 1; i < GW_OBSERVED_MIN_CALLS; i++)
        REQUIRE(gw_observed_record(o, "opus", "bot", 9000) == 0);
    CHECK_EQ_U64(gw_observed_reserve_or(o, "opus", "bot", 64000, 4096), 4096); /* 19: not yet */
    REQUIRE(gw_observed_record(o, "opus", "bot", 9000) == 0);
    CHECK_EQ_U64(gw_observed_reserve_or(o, "opus", "bot", 64000, 4096), 9000); /* learned */
    gw_observed_free(o);
}

static void the_percentile_of_a_sliding_window(void)
{
    struct gw_observed *o = standard();
    REQUIRE(o != NULL);
    /* Outputs 1..200, shuffled: rank 198 of 200 is 198. */
    uint32_t values[200];
    for (uint32_t i = 0; i < 200; i++)
        values[i] = i + 1;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 199; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t j = (uint32_t)(x % (i + 1)), t = values[i];
        values[i] = values[j], values[j] = t;
    }
    for (uint32_t i = 0; i < 200; i++)
        REQUIRE(gw_observed_record(o, "m", "c", values[i]) == 0);
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c", 1000), 198);
    /* 100 more, 201..300: the window is 101..300, its rank 198 is 298. */
    for (uint32_t v = 201; v <= 300; v++)
        REQUIRE(gw_observed_record(o, "m", "c", v) == 0);
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c", 1000), 298);
    /* Never above what the request allows. */
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c", 250), 250);
    /* Three long outputs are enough to lift the 99th percentile (a burst
     * of long answers is followed within three calls). */
    for (int i = 0; i < 2; i++)
        REQUIRE(gw_observed_record(o, "m", "c", 64000) == 0);
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c", 64000), 300);
    REQUIRE(gw_observed_record(o, "m", "c", 64000) == 0);
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c", 64000), 64000);
    /* Counts past 2^32 are kept as 2^32 - 1. */
    struct gw_observed *one = gw_observed_new(4, 1, 100, 1);
    REQUIRE(one != NULL);
    REQUIRE(gw_observed_record(one, "m", "c", UINT64_C(1) << 40) == 0);
    CHECK_EQ_U64(gw_observed_reserve(one, "m", "c", UINT64_MAX), UINT32_MAX);
    gw_observed_free(one);
    gw_observed_free(o);
}

static void pairs_are_kept_apart(void)
{
    struct gw_observed *o = gw_observed_new(16, 10, 100, 1);
    REQUIRE(o != NULL);
    REQUIRE(gw_observed_record(o, "a", "x", 10) == 0);
    REQUIRE(gw_observed_record(o, "a", "y", 20) == 0);
    REQUIRE(gw_observed_record(o, "b", "x", 30) == 0);
    /* "a" + "bx" and "ab" + "x" are different pairs. */
    REQUIRE(gw_observed_record(o, "ab", "x", 40) == 0);
    CHECK_EQ_U64(gw_observed_reserve(o, "a", "x", 99), 10);
    CHECK_EQ_U64(gw_observed_reserve(o, "a", "y", 99), 20);
    CHECK_EQ_U64(gw_observed_reserve(o, "b", "x", 99), 30);
    CHECK_EQ_U64(gw_observed_reserve(o, "ab", "x", 99), 40);
    CHECK_EQ_U64(gw_observed_reserve(o, "a", "bx", 99), 99);
    CHECK_EQ_U64(gw_observed_pairs(o), 4);
    gw_observed_free(o);
}

static void pairs_bound_one_past_forgets_the_least_recently_used(void)
{
    enum { MAX = 8 };
    struct gw_observed *o = gw_observed_new(MAX, 4, 100, 1);
    REQUIRE(o != NULL);
    char caller[16];
    for (int i = 0; i < MAX; i++) {
        snprintf(caller, sizeof caller, "c%d", i);
        REQUIRE(gw_observed_record(o, "m", caller, 100 + (uint64_t)i) == 0);
    }
    CHECK_EQ_U64(gw_observed_pairs(o), MAX);
    /* A reserve counts as a use: c0 is now the most recent, c1 the least. */
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c0", 1000), 100);
    REQUIRE(gw_observed_record(o, "m", "new", 7) == 0); /* one past the bound */
    CHECK_EQ_U64(gw_observed_pairs(o), MAX);
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c1", 1000), 1000); /* forgotten */
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "c0", 1000), 100);  /* kept */
    CHECK_EQ_U64(gw_observed_reserve(o, "m", "new", 1000), 7);
    for (int i = 2; i < MAX; i++) {
        snprintf(caller, sizeof caller, "c%d", i);
        CHECK_EQ_U64(gw_observed_reserve(o, "m", caller, 1000), 100 + (uint64_t)i);
    }
    /* Many more pairs than slots: still MAX, each new one found. */
    for (int i = 0; i < 1000; i++) {
        snprintf(caller, sizeof caller, "n%d", i);
        REQUIRE(gw_observed_record(o, "m", caller, (uint64_t)i) == 0);
        CHECK_EQ_U64(gw_observed_reserve(o, "m", caller, 5000), (uint64_t)i);
    }
    CHECK_EQ_U64(gw_observed_pairs(o), MAX);
    gw_observed_free(o);
}

struct worker {
    struct gw_observed *observed;
    int id;
    int wrong;
};

static void *work(void *argument)
{
    struct worker *w = argument;
    char caller[16];
    for (int i = 0; i < 20000; i++) {
        snprintf(caller, sizeof caller, "c%d", i % 13);
        /* Every output recorded lies in 1..64: so must every reserve. */
        if (gw_observed_record(w->observed, "m", caller, 1 + (uint64_t)((i + w->id) % 64)) != 0)
            w->wrong++;
        uint64_t r = gw_observed_reserve(w->observed, "m", caller, 1000);
        w->wrong += r != 1000 && (r < 1 || r > 64);
    }
    return NULL;
}

static void threads_at_once(void)
{
    struct gw_observed *o = gw_observed_new(8, 50, 99, 5);
    REQUIRE(o != NULL);
    struct worker workers[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        workers[i] = (struct worker){.observed = o, .id = i};
        REQUIRE(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    int wrong = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        wrong += workers[i].wrong;
    }
    CHECK_EQ_I64(wrong, 0);
    CHECK_EQ_U64(gw_observed_pairs(o), 8);
    gw_observed_free(o);
}

/* Claude Code asks max_tokens 64000 on every call. At Opus prices ($15
 * input, $18.75 a 5-minute cache write, $75 output per Mtok), with 20000
 * input tokens written to the cache, a 20 USD budget admits: */
static uint64_t call_reservation(uint64_t output_tokens)
{
    struct gw_model opus = {.name = "opus",
                            .input_usd_micros_per_mtok = 15000000,
                            .cached_input_usd_micros_per_mtok = 1500000,
                            .cache_write_5m_input_usd_micros_per_mtok = 18750000,
                            .cache_write_1h_input_usd_micros_per_mtok = 30000000,
                            .output_usd_micros_per_mtok = 75000000,
                            .reasoning_output_usd_micros_per_mtok = 75000000};
    struct gw_tokens t = {.input = 20000, .cache_write_5m = 20000, .output = output_tokens};
    uint64_t usd_micros = 0;
    if (gw_cost_usd_micros(&opus, &t, &usd_micros) != GW_COST_OK)
        return 0;
    return usd_micros;
}

static void claude_code_budget_arithmetic(void)
{
    const uint64_t budget = 20000000; /* 20 USD */
    uint64_t full = call_reservation(64000);
    CHECK_EQ_U64(full, 5175000); /* 0.375 input + 4.80 output */
    CHECK_EQ_U64(budget / full, 3);
    /* Observed: a caller whose last 200 outputs run 200..4000 tokens
     * (Claude Code's tool calls are short) reserves their 99th percentile. */
    struct gw_observed *o = standard();
    REQUIRE(o != NULL);
    for (uint64_t i = 0; i < GW_OBSERVED_WINDOW; i++)
        REQUIRE(gw_observed_record(o, "opus", "dev", 200 + i * 19) == 0);
    uint64_t p99 = gw_observed_reserve(o, "opus", "dev", 64000);
    CHECK_EQ_U64(p99, 3943); /* rank 198 of 200, 219, ..., 3981 */
    uint64_t observed = call_reservation(p99);
    CHECK_EQ_U64(observed, 670725); /* 0.375 input + 0.295725 output */
    CHECK_EQ_U64(budget / observed, 29);
    /* The worst case: all 29 admitted calls then write 64000 tokens each,
     * before any of them ends: 150.075 USD spent against 20 (the budget
     * goes into debt; the next calls are denied until it is paid off). */
    CHECK_EQ_U64(budget / observed * full, 150075000);
    gw_observed_free(o);
}

int main(void)
{
    RUN(max_tokens_until_enough_calls, "max_tokens is reserved until 20 calls are seen");
    RUN(the_unseen_amount_until_enough_calls,
        "until 20 calls are seen, the amount asked for unseen callers, never above max_tokens");
    RUN(the_percentile_of_a_sliding_window,
        "the 99th percentile of the last 200 outputs, never above max_tokens");
    RUN(pairs_are_kept_apart, "each (model, caller) pair has its own window");
    RUN(pairs_bound_one_past_forgets_the_least_recently_used,
        "one pair past the bound forgets the least recently used one");
    RUN(threads_at_once, "threads recording and reserving at once see only recorded values");
    RUN(claude_code_budget_arithmetic,
        "a 20 USD budget admits 3 Claude Code calls at max_tokens, 29 observed (worst: 150 USD)");
    return test_summary();
}
