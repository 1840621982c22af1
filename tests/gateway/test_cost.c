/* Unit tests of the cost formula (src/gateway/gw_cost.c): exact figures,
 * rounding up, cached tokens at their price, zero prices, the largest
 * values and one past them. */
#include "gateway/gw_cost.h"
#include "test.h"

static struct gw_model prices(uint64_t input, uint64_t cached, uint64_t output)
{
    return (struct gw_model){.name = "m",
                             .input_usd_micros_per_mtok = input,
                             .cached_input_usd_micros_per_mtok = cached,
                             .output_usd_micros_per_mtok = output};
}

static uint64_t cost(const struct gw_model *m, uint64_t input, uint64_t cached, uint64_t output)
{
    struct gw_tokens t = {.input = input, .cached_input = cached, .output = output};
    uint64_t usd_micros = UINT64_MAX;
    if (gw_cost_usd_micros(m, &t, &usd_micros) != GW_COST_OK)
        return UINT64_MAX;
    return usd_micros;
}

static void exact_figures(void)
{
    struct gw_model mini = prices(150000, 75000, 600000); /* $0.15, $0.075, $0.60 per Mtok */
    CHECK_EQ_U64(cost(&mini, 1000, 0, 500), 450);         /* 150 + 300 */
    CHECK_EQ_U64(cost(&mini, 1000, 400, 500), 420);       /* 90 + 30 + 300 */
    CHECK_EQ_U64(cost(&mini, 1000000, 0, 0), 150000);
    CHECK_EQ_U64(cost(&mini, 0, 0, 1000000), 600000);
    CHECK_EQ_U64(cost(&mini, 0, 0, 0), 0);
}

static void rounds_up(void)
{
    struct gw_model mini = prices(150000, 75000, 600000);
    CHECK_EQ_U64(cost(&mini, 1, 0, 0), 1);  /* 0.15 */
    CHECK_EQ_U64(cost(&mini, 7, 0, 0), 2);  /* 1.05 */
    CHECK_EQ_U64(cost(&mini, 20, 0, 0), 3); /* 3.0 exactly: no rounding */
    CHECK_EQ_U64(cost(&mini, 1, 1, 0), 1);  /* 0.075 */
    struct gw_model one = prices(1, 1, 1);
    CHECK_EQ_U64(cost(&one, 999999, 0, 0), 1);
    CHECK_EQ_U64(cost(&one, 1000000, 0, 0), 1);
    CHECK_EQ_U64(cost(&one, 1000001, 0, 0), 2);
    CHECK_EQ_U64(cost(&one, 500000, 0, 500000), 1); /* the sum is rounded, not each part */
}

static void zero_prices_cost_nothing(void)
{
    struct gw_model free_model = prices(0, 0, 0);
    CHECK_EQ_U64(cost(&free_model, AMOUNT_MAX, AMOUNT_MAX, AMOUNT_MAX), 0);
    struct gw_model cached_free = prices(100, 0, 0);
    CHECK_EQ_U64(cost(&cached_free, 5000000, 5000000, 0), 0);
}

static void largest_values_and_one_past(void)
{
    /* AMOUNT_MAX tokens at one usd_micro per million: the largest figure
     * before the result overflows... */
    struct gw_model m = prices(1000000, 0, 0);
    CHECK_EQ_U64(cost(&m, AMOUNT_MAX, 0, 0), AMOUNT_MAX);
    /* ...and one usd_micro more per million is past it. */
    struct gw_model over = prices(1000001, 0, 0);
    struct gw_tokens t = {.input = AMOUNT_MAX};
    uint64_t usd_micros = 7;
    CHECK_EQ_I64(gw_cost_usd_micros(&over, &t, &usd_micros), GW_COST_OVERFLOW);
    CHECK_EQ_U64(usd_micros, 7); /* untouched */
    /* Every product at its largest: exact in 128 bits, then too large. */
    struct gw_model all = prices(AMOUNT_MAX, AMOUNT_MAX, AMOUNT_MAX);
    t = (struct gw_tokens){.input = AMOUNT_MAX, .cached_input = 1, .output = AMOUNT_MAX};
    CHECK_EQ_I64(gw_cost_usd_micros(&all, &t, &usd_micros), GW_COST_OVERFLOW);
    /* A count past AMOUNT_MAX. */
    struct gw_model cheap = prices(0, 0, 0);
    t = (struct gw_tokens){.input = AMOUNT_MAX + 1};
    CHECK_EQ_I64(gw_cost_usd_micros(&cheap, &t, &usd_micros), GW_COST_OVERFLOW);
    t = (struct gw_tokens){.output = AMOUNT_MAX + 1};
    CHECK_EQ_I64(gw_cost_usd_micros(&cheap, &t, &usd_micros), GW_COST_OVERFLOW);
    /* Large but fitting: 2^40 tokens at $10 per Mtok. */
    struct gw_model ten = prices(10000000, 0, 10000000);
    CHECK_EQ_U64(cost(&ten, UINT64_C(1) << 40, 0, UINT64_C(1) << 40), (UINT64_C(1) << 40) * 20);
}

static void cached_over_input_is_an_error(void)
{
    struct gw_model m = prices(1, 1, 1);
    struct gw_tokens t = {.input = 10, .cached_input = 11};
    uint64_t usd_micros = 7;
    CHECK_EQ_I64(gw_cost_usd_micros(&m, &t, &usd_micros), GW_COST_CACHED_OVER_INPUT);
    CHECK_EQ_U64(usd_micros, 7);
    CHECK_STR(gw_cost_result_text(GW_COST_CACHED_OVER_INPUT),
              "cached input tokens exceed input tokens");
}

/* Sonnet-like prices, every part different: $3 input, $0.30 cache read,
 * $3.75 and $6 cache writes, $15 output, $20 reasoning per Mtok. */
static struct gw_model all_prices(void)
{
    return (struct gw_model){.name = "all",
                             .input_usd_micros_per_mtok = 3000000,
                             .cached_input_usd_micros_per_mtok = 300000,
                             .cache_write_5m_input_usd_micros_per_mtok = 3750000,
                             .cache_write_1h_input_usd_micros_per_mtok = 6000000,
                             .output_usd_micros_per_mtok = 15000000,
                             .reasoning_output_usd_micros_per_mtok = 20000000};
}

static enum gw_cost_result cost_of(const struct gw_model *m, struct gw_tokens t, uint64_t *out)
{
    *out = UINT64_MAX;
    return gw_cost_usd_micros(m, &t, out);
}

static void every_part_at_its_own_price(void)
{
    struct gw_model m = all_prices();
    uint64_t usd_micros;
    /* 1000 uncached, 2000 read, 3000 written for 5 min, 4000 for 1 h;
     * 500 output of which 100 reasoning:
     * 3000 + 600 + 11250 + 24000 + 6000 + 2000 = 46850. */
    struct gw_tokens t = {.input = 10000,
                          .cached_input = 2000,
                          .cache_write_5m = 3000,
                          .cache_write_1h = 4000,
                          .output = 500,
                          .reasoning = 100};
    REQUIRE(cost_of(&m, t, &usd_micros) == GW_COST_OK);
    CHECK_EQ_U64(usd_micros, 46850);
    CHECK_EQ_U64(gw_tokens_uncached_input(&t), 1000);
    /* Each part alone, one token: rounded up once. */
    REQUIRE(cost_of(&m, (struct gw_tokens){.input = 1, .cache_write_1h = 1}, &usd_micros) == 0);
    CHECK_EQ_U64(usd_micros, 6);
    REQUIRE(cost_of(&m, (struct gw_tokens){.input = 1, .cache_write_5m = 1}, &usd_micros) == 0);
    CHECK_EQ_U64(usd_micros, 4); /* 3.75 */
    REQUIRE(cost_of(&m, (struct gw_tokens){.output = 1, .reasoning = 1}, &usd_micros) == 0);
    CHECK_EQ_U64(usd_micros, 20);
    REQUIRE(cost_of(&m, (struct gw_tokens){.input = 1, .cached_input = 1}, &usd_micros) == 0);
    CHECK_EQ_U64(usd_micros, 1); /* 0.3 */
    /* All output reasoning: none left at the output price. */
    REQUIRE(cost_of(&m, (struct gw_tokens){.output = 1000, .reasoning = 1000}, &usd_micros) == 0);
    CHECK_EQ_U64(usd_micros, 20000);
}

static void parts_that_do_not_add_up_are_errors(void)
{
    struct gw_model m = all_prices();
    uint64_t usd_micros;
    CHECK_EQ_I64(cost_of(&m, (struct gw_tokens){.output = 10, .reasoning = 11}, &usd_micros),
                 GW_COST_REASONING_OVER_OUTPUT);
    CHECK_EQ_U64(usd_micros, UINT64_MAX); /* untouched */
    CHECK_EQ_I64(
        cost_of(&m,
                (struct gw_tokens){
                    .input = 10, .cached_input = 5, .cache_write_5m = 3, .cache_write_1h = 3},
                &usd_micros),
        GW_COST_CACHE_OVER_INPUT);
    CHECK_EQ_I64(
        cost_of(&m,
                (struct gw_tokens){
                    .input = 10, .cached_input = 5, .cache_write_5m = 3, .cache_write_1h = 2},
                &usd_micros),
        GW_COST_OK);
    CHECK_EQ_U64(usd_micros, 25); /* 0 uncached; 1.5 + 11.25 + 12 = 24.75 */
    /* Writes past AMOUNT_MAX each, or adding up past 2^64: errors, no wrap. */
    struct gw_tokens t = {.input = AMOUNT_MAX, .cache_write_5m = AMOUNT_MAX, .cache_write_1h = 2};
    CHECK_EQ_I64(cost_of(&m, t, &usd_micros), GW_COST_CACHE_OVER_INPUT);
    t = (struct gw_tokens){.input = AMOUNT_MAX,
                           .cached_input = AMOUNT_MAX,
                           .cache_write_5m = AMOUNT_MAX,
                           .cache_write_1h = AMOUNT_MAX};
    CHECK_EQ_I64(cost_of(&m, t, &usd_micros), GW_COST_CACHE_OVER_INPUT);
    t = (struct gw_tokens){.input = 1, .cache_write_1h = AMOUNT_MAX + 1};
    CHECK_EQ_I64(cost_of(&m, t, &usd_micros), GW_COST_OVERFLOW);
    t = (struct gw_tokens){.output = 1, .reasoning = AMOUNT_MAX + 1};
    CHECK_EQ_I64(cost_of(&m, t, &usd_micros), GW_COST_OVERFLOW);
    CHECK_STR(gw_cost_result_text(GW_COST_REASONING_OVER_OUTPUT),
              "reasoning tokens exceed output tokens");
    CHECK_STR(gw_cost_result_text(GW_COST_CACHE_OVER_INPUT),
              "cache reads and writes exceed input tokens");
}

static void the_largest_parts_do_not_wrap(void)
{
    /* Every price and count at its largest, split between all parts: the
     * sum stays below 2^127 and is reported as an overflow, never wrapped. */
    struct gw_model max = {.name = "max",
                           .input_usd_micros_per_mtok = AMOUNT_MAX,
                           .cached_input_usd_micros_per_mtok = AMOUNT_MAX,
                           .cache_write_5m_input_usd_micros_per_mtok = AMOUNT_MAX,
                           .cache_write_1h_input_usd_micros_per_mtok = AMOUNT_MAX,
                           .output_usd_micros_per_mtok = AMOUNT_MAX,
                           .reasoning_output_usd_micros_per_mtok = AMOUNT_MAX};
    uint64_t usd_micros;
    uint64_t q = AMOUNT_MAX / 4;
    struct gw_tokens t = {.input = AMOUNT_MAX,
                          .cached_input = q,
                          .cache_write_5m = q,
                          .cache_write_1h = q,
                          .output = AMOUNT_MAX,
                          .reasoning = AMOUNT_MAX / 2};
    CHECK_EQ_I64(cost_of(&max, t, &usd_micros), GW_COST_OVERFLOW);
    /* The same parts at one usd_micro per million: exactly the token count. */
    struct gw_model one = {.name = "one",
                           .input_usd_micros_per_mtok = 1000000,
                           .cached_input_usd_micros_per_mtok = 1000000,
                           .cache_write_5m_input_usd_micros_per_mtok = 1000000,
                           .cache_write_1h_input_usd_micros_per_mtok = 1000000,
                           .output_usd_micros_per_mtok = 1000000,
                           .reasoning_output_usd_micros_per_mtok = 1000000};
    t.output = 0, t.reasoning = 0;
    REQUIRE(cost_of(&one, t, &usd_micros) == GW_COST_OK);
    CHECK_EQ_U64(usd_micros, AMOUNT_MAX);
}

int main(void)
{
    RUN(exact_figures, "exact figures, cached tokens at their own price");
    RUN(rounds_up, "the sum is rounded up to a whole usd_micro, once");
    RUN(zero_prices_cost_nothing, "zero prices cost nothing, whatever the counts");
    RUN(largest_values_and_one_past, "the largest cost fits, one past is an overflow error");
    RUN(cached_over_input_is_an_error, "cached above input is an error");
    RUN(every_part_at_its_own_price,
        "uncached, cache read, both cache writes, output and reasoning each at its price");
    RUN(parts_that_do_not_add_up_are_errors,
        "reasoning above output, cache parts above input: errors, never wrapped");
    RUN(the_largest_parts_do_not_wrap, "the largest counts and prices of every part: exact");
    return test_summary();
}
