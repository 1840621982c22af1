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

int main(void)
{
    RUN(exact_figures, "exact figures, cached tokens at their own price");
    RUN(rounds_up, "the sum is rounded up to a whole usd_micro, once");
    RUN(zero_prices_cost_nothing, "zero prices cost nothing, whatever the counts");
    RUN(largest_values_and_one_past, "the largest cost fits, one past is an overflow error");
    RUN(cached_over_input_is_an_error, "cached above input is an error");
    return test_summary();
}
