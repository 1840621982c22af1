/* What a whole (not streamed) upstream answer says beyond its usage: the
 * output it generated, counted from its text with the estimator of the
 * input (for an answer that gives no usage), and the ids of a Responses
 * answer and of its items (for gw_owners). */
#ifndef LLMLIMIT_GATEWAY_ANSWER_H
#define LLMLIMIT_GATEWAY_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "gw_endpoint.h"
#include "util/jdoc.h"

/* The output tokens of the answer of a call on endpoint, counted from
 * what it generated: chat's choices[].message.content, refusal,
 * reasoning_content and tool calls (or choices[].text); Messages'
 * content[] text, thinking and tool_use name and input; Responses'
 * output[] text, refusals, reasoning summaries, function and custom tool
 * calls. 0 for anything else. */
uint64_t gw_answer_output_tokens(enum gw_endpoint endpoint, const struct jdoc_value *answer);

/* The id of a Responses object (answer.id) into *id and *length: 0, or -1
 * when it has none (not an object, no string id). */
int gw_answer_response_id(const struct jdoc_value *answer, const char **id, size_t *length);

/* Calls fn with the string id of each item of a Responses object's output
 * (answer.output[].id), or of a list's data (answer.data[].id: a stored
 * response's input items). */
void gw_answer_item_ids(const struct jdoc_value *answer,
                        void (*fn)(void *context, const char *id, size_t length), void *context);

#endif
