/* From a call to the requirements of its reserve and the actuals of its
 * complete: each limit template of the config is instantiated for the key
 * and model (placeholders replaced) and given its amount (requests: 1,
 * tokens: all input (uncached, cache reads and writes) + output,
 * input_tokens: all input, uncached_input_tokens: input without cache
 * reads, output_tokens, usd_micros: the cost); templates that give the same key are added into one
 * requirement, and a key whose amount is 0 is left out of the reserve. */
#ifndef LLMLIMIT_GATEWAY_PLAN_H
#define LLMLIMIT_GATEWAY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "gw_config.h"
#include "gw_cost.h"

/* Room for a plan error: the template, the key and a reason. */
#define GW_PLAN_ERROR_SIZE (GW_TEMPLATE_LENGTH_MAX + LIMIT_KEY_LENGTH_MAX + 128)

#define GW_PLAN_NOT_RESERVED UINT8_MAX

/* Caller-provided storage for one call's plan (about 20 KiB: keep it with
 * the call). The requirements and actuals point into its key text, so it
 * must stay where it is while they are used. It refers to the config and
 * model it was made from: hold the config (gw_config_retain) until the
 * call is completed. */
struct gw_plan {
    const struct gw_model *model;
    uint32_t template_count;
    enum gw_amount template_amount[GW_LIMITS_MAX];
    uint8_t template_key[GW_LIMITS_MAX]; /* which distinct key each template gave */
    uint32_t key_count;
    uint32_t key_length[GW_LIMITS_MAX];
    uint8_t key_requirement[GW_LIMITS_MAX]; /* its index in requirements, or NOT_RESERVED */
    /* For the reserve: keys unique, amounts 1..AMOUNT_MAX, in template order. */
    struct requirement requirements[GW_LIMITS_MAX];
    uint32_t requirement_count;
    char key_text[GW_LIMITS_MAX][LIMIT_KEY_LENGTH_MAX + 1];
};

/* Plans the reserve of a call by `key` to `model` with the estimated
 * tokens (estimate->cached_input is normally 0: the cache is unknown
 * before the call, so input is priced in full). 0 with plan filled (its
 * requirement_count may be 0 when every amount is 0), or -1 with the
 * reason in error: an instantiated key longer than LIMIT_KEY_LENGTH_MAX or
 * not a valid key ("limits[2].key 'team:{team}:usd': ..."), an amount or a
 * sum of amounts above AMOUNT_MAX. */
int gw_plan_reserve(struct gw_plan *plan, const struct gw_config *config, const struct gw_key *key,
                    const struct gw_model *model, const struct gw_tokens *estimate, char *error,
                    size_t error_size);

/* Plans the reserve of an MCP tool call by `key` to `tool` (not
 * NUL-terminated) of the server named mcp_server, at usd_micros (the
 * tool's price, at most AMOUNT_MAX): every template that does not name
 * {model} or {upstream}, with requests and tool_calls 1, usd_micros the
 * price, token amounts 0. plan->model is NULL: settle it without actuals
 * (every key at its reserved amount). 0, or -1 with the reason in error
 * (a key too long or not valid, for instance a tool name with white
 * space under {tool}). */
int gw_plan_tool_call(struct gw_plan *plan, const struct gw_config *config,
                      const struct gw_key *key, const char *mcp_server, const char *tool,
                      size_t tool_length, uint64_t usd_micros, char *error, size_t error_size);

/* The actuals of the call's complete from the tokens it really used: one
 * per reserved requirement, same keys (the pointers of the requirements),
 * same order; the reserve's keys and no others (a key left out of the
 * reserve cannot take an actual). actuals has room for GW_LIMITS_MAX.
 * 0 with *actual_count set, or -1 with the reason in error (cached above
 * input, an amount above AMOUNT_MAX); then complete without actuals, which
 * settles every key at its reserved amount. */
int gw_plan_complete(const struct gw_plan *plan, const struct gw_tokens *used,
                     struct actual *actuals, uint32_t *actual_count, char *error,
                     size_t error_size);

#endif
