/* The cost formula in 128-bit integers: with every count and price at
 * most AMOUNT_MAX (2^63 - 1), and the input parts adding up to input, the
 * output parts to output, the input side is below input x max price <
 * 2^126 and so is the output side: the sum is below 2^127, so nothing can
 * wrap before the one check at the end. */
#include "gw_cost.h"

#include <assert.h>

#define MICROS_PER_MTOK 1000000u

typedef unsigned __int128 u128;

enum gw_cost_result gw_tokens_check(const struct gw_tokens *t)
{
    if (t->input > AMOUNT_MAX || t->output > AMOUNT_MAX || t->cached_input > AMOUNT_MAX ||
        t->cache_write_5m > AMOUNT_MAX || t->cache_write_1h > AMOUNT_MAX ||
        t->reasoning > AMOUNT_MAX)
        return GW_COST_OVERFLOW;
    if (t->cached_input > t->input)
        return GW_COST_CACHED_OVER_INPUT;
    if ((u128)t->cached_input + t->cache_write_5m + t->cache_write_1h > t->input)
        return GW_COST_CACHE_OVER_INPUT;
    if (t->reasoning > t->output)
        return GW_COST_REASONING_OVER_OUTPUT;
    return GW_COST_OK;
}

uint64_t gw_tokens_uncached_input(const struct gw_tokens *t)
{
    assert(gw_tokens_check(t) == GW_COST_OK);
    return t->input - t->cached_input - t->cache_write_5m - t->cache_write_1h;
}

enum gw_cost_result gw_cost_usd_micros(const struct gw_model *model, const struct gw_tokens *tokens,
                                       uint64_t *usd_micros)
{
    assert(model->input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->cached_input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->cache_write_5m_input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->cache_write_1h_input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->output_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->reasoning_output_usd_micros_per_mtok <= AMOUNT_MAX);
    enum gw_cost_result check = gw_tokens_check(tokens);
    if (check != GW_COST_OK)
        return check;
    u128 sum = (u128)gw_tokens_uncached_input(tokens) * model->input_usd_micros_per_mtok +
               (u128)tokens->cached_input * model->cached_input_usd_micros_per_mtok +
               (u128)tokens->cache_write_5m * model->cache_write_5m_input_usd_micros_per_mtok +
               (u128)tokens->cache_write_1h * model->cache_write_1h_input_usd_micros_per_mtok +
               (u128)(tokens->output - tokens->reasoning) * model->output_usd_micros_per_mtok +
               (u128)tokens->reasoning * model->reasoning_output_usd_micros_per_mtok;
    u128 cost = sum / MICROS_PER_MTOK + (sum % MICROS_PER_MTOK != 0);
    if (cost > AMOUNT_MAX)
        return GW_COST_OVERFLOW;
    *usd_micros = (uint64_t)cost;
    return GW_COST_OK;
}

const char *gw_cost_result_text(enum gw_cost_result result)
{
    switch (result) {
    case GW_COST_OK:
        return "ok";
    case GW_COST_CACHED_OVER_INPUT:
        return "cached input tokens exceed input tokens";
    case GW_COST_OVERFLOW:
        return "cost above 9223372036854775807 usd_micros";
    case GW_COST_CACHE_OVER_INPUT:
        return "cache reads and writes exceed input tokens";
    case GW_COST_REASONING_OVER_OUTPUT:
        return "reasoning tokens exceed output tokens";
    }
    return "unknown";
}
