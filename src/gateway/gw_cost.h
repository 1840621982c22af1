/* What a call costs in usd_micros, from token counts and a model's prices
 * per million tokens: ceil(((input - cached) * input_price + cached *
 * cached_price + output * output_price) / 1000000), in exact integer
 * arithmetic, rounded up so that a budget is never charged less than the
 * provider bills. */
#ifndef LLMLIMIT_GATEWAY_COST_H
#define LLMLIMIT_GATEWAY_COST_H

#include <stdint.h>

#include "gw_config.h"

/* Token counts of one call: estimated before it, or from its usage after.
 * cached_input is the part of input the provider read from its cache
 * (usage.prompt_tokens_details.cached_tokens), never more than input. */
struct gw_tokens {
    uint64_t input;
    uint64_t cached_input;
    uint64_t output;
};

enum gw_cost_result {
    GW_COST_OK = 0,
    GW_COST_CACHED_OVER_INPUT = -1, /* cached_input > input */
    GW_COST_OVERFLOW = -2,          /* a count above AMOUNT_MAX, or a cost above it */
};

/* The cost of `tokens` at `model`'s prices into *usd_micros (0..AMOUNT_MAX).
 * GW_COST_OK, or one of the errors above with *usd_micros untouched. */
enum gw_cost_result gw_cost_usd_micros(const struct gw_model *model, const struct gw_tokens *tokens,
                                       uint64_t *usd_micros);

/* "cached input tokens exceed input tokens", ... for messages. */
const char *gw_cost_result_text(enum gw_cost_result result);

#endif
