/* What a whole (not streamed) upstream answer says: what it used (its
 * usage, else the output it generated, counted from its text with the
 * estimator of the input), and the ids of a Responses answer and of its
 * items (for gw_owners). */
#ifndef LLMLIMIT_GATEWAY_ANSWER_H
#define LLMLIMIT_GATEWAY_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_cost.h"
#include "gw_endpoint.h"
#include "util/jdoc.h"

/* The output tokens of the answer of a call on endpoint, counted from
 * what it generated: chat's choices[].message.content, refusal,
 * reasoning_content and tool calls (or choices[].text); Messages'
 * content[] text, thinking and tool_use name and input; Responses'
 * output[] text, refusals, reasoning summaries, function and custom tool
 * calls. 0 for anything else. */
uint64_t gw_answer_output_tokens(enum gw_endpoint endpoint, const struct jdoc_value *answer);

/* What a whole answer of a call on endpoint used, into *out: its usage
 * when it has one the surface's reader takes (returns true); else
 * (returns false) the input_estimate as input and, as output, the text it
 * generated counted (gw_answer_output_tokens), or, when it is not a JSON
 * object the gateway reads (root NULL: it did not parse; a number past
 * 2^63 - 1, a body cut short, HTML from a proxy), every byte of the body
 * counted as text: a missing or unreadable usage never charges 0 output.
 * An embedding generates no text: its output is 0 either way. body and
 * length are the answer as it came (root, when not NULL, parsed from a
 * copy). */
bool gw_answer_tokens(enum gw_endpoint endpoint, const struct jdoc_value *root, const char *body,
                      size_t length, uint64_t input_estimate, struct gw_tokens *out);

/* The surfaces' counters of the output of a whole answer (a surface's
 * output_tokens, gw_dialect.h): chat's and completions', Messages',
 * Responses' as gw_answer_output_tokens says; answer an object. */
typedef uint64_t (*gw_answer_output_fn)(const struct jdoc_value *answer);
uint64_t gw_answer_chat_output(const struct jdoc_value *answer);
uint64_t gw_answer_messages_output(const struct jdoc_value *answer);
uint64_t gw_answer_responses_output(const struct jdoc_value *answer);

/* A dialect's own reading of a whole answer (its answer_tokens,
 * gw_dialect.h: Gemini's, whose stream may come as one JSON array), as
 * gw_answer_tokens says. */
typedef bool (*gw_answer_tokens_fn)(const struct jdoc_value *root, const char *body, size_t length,
                                    uint64_t input_estimate, struct gw_tokens *out);

/* gw_answer_output_tokens and gw_answer_tokens with the surface and its
 * dialect given (those two look them up in the dialects' table,
 * gw_dispatch.c): the surface's counter, the dialect's usage reader or
 * its own reading of an answer. */
struct gw_dialect;
struct gw_surface;
uint64_t gw_answer_output_with(const struct gw_surface *surface, const struct jdoc_value *answer);
bool gw_answer_tokens_with(const struct gw_dialect *dialect, const struct gw_surface *surface,
                           const struct jdoc_value *root, const char *body, size_t length,
                           uint64_t input_estimate, struct gw_tokens *out);

/* The id of a Responses object (answer.id) into *id and *length: 0, or -1
 * when it has none (not an object, no string id). */
int gw_answer_response_id(const struct jdoc_value *answer, const char **id, size_t *length);

/* Calls fn with the string id of each item of a Responses object's output
 * (answer.output[].id), or of a list's data (answer.data[].id: a stored
 * response's input items). */
void gw_answer_item_ids(const struct jdoc_value *answer,
                        void (*fn)(void *context, const char *id, size_t length), void *context);

#endif
