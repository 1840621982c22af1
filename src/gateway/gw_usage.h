/* The `usage` of an upstream answer: the whole body of a call that did not
 * stream, or the data of one event of a stream. A missing usage is
 * reported as missing (the gateway then counts what it saw), never as
 * zero. */
#ifndef LLMLIMIT_GATEWAY_USAGE_H
#define LLMLIMIT_GATEWAY_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_cost.h"
#include "util/jdoc.h"

#define GW_USAGE_ERROR_SIZE 128

struct gw_usage {
    bool present;               /* the answer has a usage object */
    bool has_completion_tokens; /* embeddings have none */
    uint64_t prompt_tokens;     /* 0..AMOUNT_MAX each */
    uint64_t completion_tokens; /* 0 when absent */
    uint64_t total_tokens;      /* prompt + completion when absent */
    uint64_t cached_tokens;     /* prompt_tokens_details.cached_tokens, 0 when absent */
};

/* Reads answer.usage. 0 with *out filled (present false when the answer
 * has no usage, or usage is null), or -1 with "usage.<field>: <reason>" in
 * error when the answer is not an object or usage is malformed: not an
 * object, prompt_tokens missing, a count that is not an integer
 * 0..AMOUNT_MAX, cached_tokens above prompt_tokens. */
int gw_usage_read(const struct jdoc_value *answer, struct gw_usage *out, char *error,
                  size_t error_size);

/* The token counts of a present usage, for gw_cost and gw_plan_complete. */
struct gw_tokens gw_usage_tokens(const struct gw_usage *usage);

#endif
