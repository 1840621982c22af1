/* What a call costs in usd_micros, from token counts and a model's prices
 * per million tokens:
 *   ceil((uncached_input * input_price + cache_read * cached_price
 *         + cache_write_5m * write_5m_price + cache_write_1h * write_1h_price
 *         + (output - reasoning) * output_price + reasoning * reasoning_price)
 *        / 1000000)
 * in exact integer arithmetic, rounded up so that a budget is never charged
 * less than the provider bills. */
#ifndef LLMLIMIT_GATEWAY_COST_H
#define LLMLIMIT_GATEWAY_COST_H

#include <stdint.h>

#include "gw_config.h"

/* Token counts of one call, normalised across providers: estimated before
 * it, or from its usage after. `input` is all the input the model read,
 * whatever it cost: the uncached part, the part read from the provider's
 * cache (cached_input) and the parts written to it; so the uncached input
 * is input - cached_input - cache_write_5m - cache_write_1h (OpenAI's
 * prompt_tokens already count this way; Anthropic's input_tokens is only
 * the uncached part, and gw_usage adds the rest). Likewise `output` is all
 * the output, reasoning included. Each count is 0..AMOUNT_MAX. */
struct gw_tokens {
    uint64_t input;
    uint64_t cached_input; /* read from the cache (OpenAI cached_tokens) */
    uint64_t output;
    uint64_t cache_write_5m; /* written to the cache for 5 minutes */
    uint64_t cache_write_1h; /* written to the cache for 1 hour */
    uint64_t reasoning;      /* the reasoning part of output */
};

enum gw_cost_result {
    GW_COST_OK = 0,
    GW_COST_CACHED_OVER_INPUT = -1,     /* cached_input > input */
    GW_COST_OVERFLOW = -2,              /* a count above AMOUNT_MAX, or a cost above it */
    GW_COST_CACHE_OVER_INPUT = -3,      /* cache reads and writes together above input */
    GW_COST_REASONING_OVER_OUTPUT = -4, /* reasoning > output */
};

/* Whether tokens hold together: each count at most AMOUNT_MAX, cache reads
 * and writes within input, reasoning within output. GW_COST_OK or the
 * first error found (counts first, then cached, cache, reasoning). */
enum gw_cost_result gw_tokens_check(const struct gw_tokens *tokens);

/* The input without cache reads or writes (tokens checked). */
uint64_t gw_tokens_uncached_input(const struct gw_tokens *tokens);

/* The cost of `tokens` at `model`'s prices into *usd_micros (0..AMOUNT_MAX).
 * GW_COST_OK, or one of the errors above with *usd_micros untouched. */
enum gw_cost_result gw_cost_usd_micros(const struct gw_model *model, const struct gw_tokens *tokens,
                                       uint64_t *usd_micros);

/* "cached input tokens exceed input tokens", ... for messages. */
const char *gw_cost_result_text(enum gw_cost_result result);

#endif
