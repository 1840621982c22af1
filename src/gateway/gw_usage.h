/* The `usage` of an upstream answer, normalised across providers: the
 * whole body of a call that did not stream, or what a stream's events
 * reveal. OpenAI counts cached tokens inside its input count; Anthropic
 * counts cache reads and writes outside it: both become one model, all
 * input (uncached + cache reads + cache writes) with its parts, and all
 * output with its reasoning part. A missing usage is reported as missing
 * (the gateway then counts what it saw), never as zero; a malformed one is
 * an error, never read as zero either. */
#ifndef LLMLIMIT_GATEWAY_USAGE_H
#define LLMLIMIT_GATEWAY_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_cost.h"
#include "gw_endpoint.h"
#include "util/jdoc.h"

#define GW_USAGE_ERROR_SIZE 160

struct gw_usage {
    bool present;               /* the answer has a usage object */
    bool has_completion_tokens; /* embeddings have none */
    /* All input the model read: OpenAI's prompt_tokens or input_tokens;
     * Anthropic's input_tokens + cache reads + cache writes. */
    uint64_t prompt_tokens;
    uint64_t completion_tokens; /* all output, reasoning included; 0 when absent */
    uint64_t total_tokens;      /* prompt + completion when absent */
    uint64_t cached_tokens;     /* cache reads, 0 when absent */
    uint64_t cache_write_5m_tokens;
    uint64_t cache_write_1h_tokens;
    uint64_t reasoning_tokens; /* the reasoning part of completion_tokens */
};

/* Reads answer.usage of an OpenAI chat, completions or embeddings answer
 * (or chunk). 0 with *out filled (present false when the answer has no
 * usage, or usage is null), or -1 with "usage.<field>: <reason>" in error
 * when the answer is not an object or usage is malformed: not an object,
 * prompt_tokens missing, a count that is not an integer 0..AMOUNT_MAX,
 * cached_tokens above prompt_tokens, reasoning_tokens
 * (completion_tokens_details) above completion_tokens. */
int gw_usage_read(const struct jdoc_value *answer, struct gw_usage *out, char *error,
                  size_t error_size);

/* An Anthropic Message's usage (a non-streamed /v1/messages answer):
 * input_tokens and output_tokens required; cache_read_input_tokens,
 * cache_creation_input_tokens, cache_creation.ephemeral_5m_input_tokens /
 * ephemeral_1h_input_tokens. Same returns as gw_usage_read. */
int gw_usage_read_messages(const struct jdoc_value *message, struct gw_usage *out, char *error,
                           size_t error_size);

/* A Responses object's usage (a non-streamed /v1/responses answer, or the
 * `response` of its final stream event): input_tokens and output_tokens
 * required, input_tokens_details.cached_tokens, and
 * output_tokens_details.reasoning_tokens (inside output_tokens). Same
 * returns as gw_usage_read. */
int gw_usage_read_responses(const struct jdoc_value *response, struct gw_usage *out, char *error,
                            size_t error_size);

/* The reader for a whole non-streamed answer of endpoint (or a chunk of
 * its stream). Chat and completions: gw_usage_read, and a usage without
 * completion_tokens is malformed ("usage.completion_tokens: required"): a
 * call that generated text never reads as 0 output. Embeddings:
 * gw_usage_read as it is. */
int gw_usage_read_answer(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                         struct gw_usage *out, char *error, size_t error_size);
/* A dialect's reader of the usage of an answer of endpoint (its usage,
 * gw_dialect.h), as above. */
typedef int (*gw_usage_read_fn)(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                                struct gw_usage *out, char *error, size_t error_size);
/* The same with the dialect's reader given: read NULL (a surface without
 * usage, whose call costs its price): no usage, 0. */
int gw_usage_read_with(gw_usage_read_fn read, enum gw_endpoint endpoint,
                       const struct jdoc_value *answer, struct gw_usage *out, char *error,
                       size_t error_size);
/* The reader of OpenAI's chat, completions and embeddings (their
 * dialect's, gw_dialect_openai.c), as above. */
int gw_usage_read_openai(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                         struct gw_usage *out, char *error, size_t error_size);

/* Anthropic's usage as a stream reveals it: message_start.message.usage,
 * then message_delta.usage, whose values are cumulative. Each field keeps
 * its last value; nothing is ever added up. Plain data: zero it to start. */
struct gw_messages_usage {
    uint64_t value[6];
    unsigned seen; /* bit per value */
};

/* Takes each field usage (an object) gives. 0, or -1 with the reason in
 * error (not an object, a count that is not an integer 0..AMOUNT_MAX);
 * then *state is unchanged. */
int gw_messages_usage_merge(struct gw_messages_usage *state, const struct jdoc_value *usage,
                            char *error, size_t error_size);

/* The usage the fields so far make. 0 with *out (present), or -1 with the
 * reason (input_tokens or output_tokens never seen, a sum past
 * AMOUNT_MAX). */
int gw_messages_usage_result(const struct gw_messages_usage *state, struct gw_usage *out,
                             char *error, size_t error_size);

/* Whether the input fields (input_tokens) were seen: a stream cut after
 * message_start still knows its exact input. */
bool gw_messages_usage_has_input(const struct gw_messages_usage *state);

/* The usage of a stream cut before its final usage: the input fields seen,
 * and as output the larger of counted_output (from the text sent) and the
 * output_tokens seen. 0, or -1 (input never seen, a sum too large). */
int gw_messages_usage_cut(const struct gw_messages_usage *state, uint64_t counted_output,
                          struct gw_usage *out, char *error, size_t error_size);

/* The token counts of a present usage, for gw_cost and gw_plan_complete. */
struct gw_tokens gw_usage_tokens(const struct gw_usage *usage);

#endif
