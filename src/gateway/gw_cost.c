/* The cost formula in 128-bit integers: with every count and price at
 * most AMOUNT_MAX (2^63 - 1), each product is below 2^126 and the sum of
 * three below 2^128, so nothing can wrap before the one check at the end. */
#include "gw_cost.h"

#include <assert.h>

#define MICROS_PER_MTOK 1000000u

enum gw_cost_result gw_cost_usd_micros(const struct gw_model *model, const struct gw_tokens *tokens,
                                       uint64_t *usd_micros)
{
    assert(model->input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->cached_input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->output_usd_micros_per_mtok <= AMOUNT_MAX);
    if (tokens->input > AMOUNT_MAX || tokens->output > AMOUNT_MAX)
        return GW_COST_OVERFLOW;
    if (tokens->cached_input > tokens->input)
        return GW_COST_CACHED_OVER_INPUT;
    typedef unsigned __int128 u128;
    u128 sum = (u128)(tokens->input - tokens->cached_input) * model->input_usd_micros_per_mtok +
               (u128)tokens->cached_input * model->cached_input_usd_micros_per_mtok +
               (u128)tokens->output * model->output_usd_micros_per_mtok;
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
    }
    return "unknown";
}
