/* The "observed" output reservation (docs/gateway.md, "Output
 * reservation"): instead of the max_tokens a request allows, reserve a
 * high percentile of the outputs this caller's recent calls to this model
 * produced. Per (model, caller): a window of the last outputs; until
 * enough calls are seen, the request's max_tokens; never above it. Memory
 * is bounded: at most a fixed number of pairs, the least recently used
 * forgotten first. Safe from any thread. */
#ifndef LLMLIMIT_GATEWAY_OBSERVED_H
#define LLMLIMIT_GATEWAY_OBSERVED_H

#include <stddef.h>
#include <stdint.h>

#include "gw_bounds.h"

struct gw_observed;

/* A tracker of at most pairs_max (model, caller) pairs, each keeping the
 * last `window` outputs, reserving their `percentile`-th percentile
 * (nearest rank, 1..100) once min_calls (1..window) are seen. The gateway
 * uses GW_OBSERVED_PAIRS_MAX, GW_OBSERVED_WINDOW, GW_OBSERVED_PERCENTILE
 * and GW_OBSERVED_MIN_CALLS. NULL when out of memory; free with
 * gw_observed_free. */
struct gw_observed *gw_observed_new(uint32_t pairs_max, uint32_t window, uint32_t percentile,
                                    uint32_t min_calls);
void gw_observed_free(struct gw_observed *observed);

/* The output to reserve for a call of caller to model that allows up to
 * max_tokens: max_tokens until min_calls outputs of the pair are known,
 * then their percentile, never above max_tokens. */
uint64_t gw_observed_reserve(struct gw_observed *observed, const char *model, const char *caller,
                             uint64_t max_tokens);

/* The same, reserving `unseen` (never above max_tokens) until min_calls
 * outputs are known: the gateway's guess for a caller it has not seen
 * enough of (the model's default_max_output_tokens), so that a budget
 * smaller than one call's max_tokens still admits the calls to learn from. */
uint64_t gw_observed_reserve_or(struct gw_observed *observed, const char *model, const char *caller,
                                uint64_t max_tokens, uint64_t unseen);

/* Records the output a finished call produced (its real count, whatever
 * was reserved). A new pair past pairs_max takes the place of the least
 * recently used one. Returns 0, or -1 when out of memory (nothing kept). */
int gw_observed_record(struct gw_observed *observed, const char *model, const char *caller,
                       uint64_t output_tokens);

/* How many pairs are tracked now (at most pairs_max). */
uint32_t gw_observed_pairs(struct gw_observed *observed);

#endif
