/* Token estimates before a call: the input from the request's text (erring
 * a little high; docs/gateway-estimate.md measures by how much) and the
 * output the call may produce, from max_completion_tokens / max_tokens or
 * the model's default, times the choices asked for. The request is checked
 * on the way: a field of the wrong type or out of range is an error naming
 * it (the gateway answers 400 invalid_request_error). */
#ifndef LLMLIMIT_GATEWAY_ESTIMATE_H
#define LLMLIMIT_GATEWAY_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_config.h"
#include "gw_cost.h"
#include "gw_endpoint.h"
#include "util/jdoc.h"

/* Room for an estimate error (a field path and a reason). */
#define GW_ESTIMATE_ERROR_SIZE 256

/* Which cache writes a request may cause (Anthropic's cache_control): the
 * whole input is then priced as written, the most it can cost. */
enum gw_cache_write {
    GW_CACHE_WRITE_NONE = 0,
    GW_CACHE_WRITE_5M, /* a cache_control breakpoint, none for 1 hour */
    GW_CACHE_WRITE_1H, /* a breakpoint with "ttl":"1h" */
};

struct gw_estimate {
    uint64_t input_tokens;
    uint64_t output_tokens; /* the reservation: per choice times choices */
    uint64_t output_tokens_per_choice;
    uint32_t choices; /* n (best_of, prompts); 0 for embeddings */
    enum gw_cache_write cache_write;
};

/* The token counts to reserve for an estimate, with output_tokens as the
 * output (the estimate's own, or less under the observed reservation):
 * the input priced as written to the cache when the request may write it. */
struct gw_tokens gw_estimate_tokens(const struct gw_estimate *estimate, uint64_t output_tokens);

/* Estimates the request `body` (a parsed JSON object) to `endpoint` for
 * `model`. 0 with *out filled, or -1 with "<field>: <reason>" in error
 * (e.g. "messages[1].content: must be a string, an array of parts or
 * null", "max_tokens: must be at most 16384 for model gpt-4o-mini",
 * "max_tokens: required" on /v1/messages, "background: not supported: ..."
 * on /v1/responses). count_tokens and input_tokens reserve no output. */
int gw_estimate_request(const struct jdoc_value *body, enum gw_endpoint endpoint,
                        const struct gw_model *model, struct gw_estimate *out, char *error,
                        size_t error_size);
/* The same in dialect, endpoint's (gw_estimate_request looks it up in the
 * dialects' table; the code the table points at takes it from there). */
struct gw_dialect;
int gw_estimate_request_with(const struct gw_dialect *dialect, const struct jdoc_value *body,
                             enum gw_endpoint endpoint, const struct gw_model *model,
                             struct gw_estimate *out, char *error, size_t error_size);

/* The estimated token count of one UTF-8 text (any bytes are accepted). */
uint64_t gw_estimate_text(const char *text, size_t length);

/* The same, fed in pieces: the count of the pieces added one after the
 * other is the count of their concatenation, wherever the text is split
 * (inside a word or a UTF-8 character too), and it never goes down as text
 * is added. For the output of a stream. Plain data: copy, embed or reset
 * with gw_text_counter_init at will. */
struct gw_text_counter {
    uint64_t closed_milli; /* thousandths of a token, pieces already closed */
    uint64_t open_milli;   /* the piece still open */
    uint32_t run;          /* its length in characters */
    uint8_t piece;
    uint8_t previous; /* class of the last character */
    uint8_t consonants;
    uint8_t flags;
    uint8_t utf8[4]; /* a character split between two pieces */
    uint8_t utf8_length;
    uint8_t utf8_expected;
};

void gw_text_counter_init(struct gw_text_counter *counter);
void gw_text_counter_add(struct gw_text_counter *counter, const char *text, size_t length);
/* Ends the current text: what comes next is counted as a separate text (no
 * word runs on across the two). */
void gw_text_counter_break(struct gw_text_counter *counter);
uint64_t gw_text_counter_tokens(const struct gw_text_counter *counter);

#endif
