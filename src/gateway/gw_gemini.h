/* Google's Gemini API (generateContent, streamGenerateContent, countTokens)
 * as the gateway speaks it (docs/gateway.md, "Gemini"): the route's target
 * ("<model>:<method>"), the path it goes to upstream, the request's estimate
 * and output bound, the answer's usageMetadata and text, a stream chunk's
 * texts and end, and errors in Google's shape. Everything Gemini-specific of
 * the gateway is here; the other modules call in by endpoint. */
#ifndef LLMLIMIT_GATEWAY_GEMINI_H
#define LLMLIMIT_GATEWAY_GEMINI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_cost.h"
#include "gw_estimate.h"
#include "gw_usage.h"
#include "util/buffer.h"
#include "util/jdoc.h"

/* Room for a decoded "<model>:<method>". */
#define GW_GEMINI_TARGET_LENGTH_MAX (GW_NAME_LENGTH_MAX + 32)
/* A media part (inlineData, fileData) read as this many input tokens: an
 * image is 258 tokens per 768x768 tile, so this holds six tiles. */
#define GW_GEMINI_MEDIA_TOKENS 1548
/* generationConfig.candidateCount: 1..this (Google takes at most 8). */
#define GW_GEMINI_CANDIDATES_MAX 8

enum gw_gemini_method {
    GW_GEMINI_GENERATE = 0, /* :generateContent */
    GW_GEMINI_STREAM,       /* :streamGenerateContent (?alt=sse: events, else a JSON array) */
    GW_GEMINI_COUNT_TOKENS, /* :countTokens: forwarded, not charged */
};

/* "generateContent", ... */
const char *gw_gemini_method_name(enum gw_gemini_method method);

/* Splits a decoded route target "<model>:<method>" at its last ':'. 0 with
 * the model's name (not NUL-terminated) and the method, or -1 with the
 * reason in error: no ':', an empty model, a method the gateway does not
 * serve. */
int gw_gemini_target(const char *target, size_t length, const char **model, size_t *model_length,
                     enum gw_gemini_method *method, char *error, size_t error_size);

/* The path after an upstream's base_url (which ends in /v1beta):
 * "/models/<upstream_model>:<method>", and "?alt=sse" when alt_sse. 0, or
 * -1 when it does not fit in size or the upstream model holds a byte other
 * than [A-Za-z0-9._-]. */
int gw_gemini_upstream_path(const char *upstream_model, enum gw_gemini_method method, bool alt_sse,
                            char *out, size_t size);

struct gw_walk;
struct gw_sse_text;

/* The estimate of a generateContent request (gw_estimate_request calls it):
 * systemInstruction, contents[].parts[] (text, function calls and
 * responses as their JSON, media parts at GW_GEMINI_MEDIA_TOKENS), tools
 * and toolConfig; output generationConfig.maxOutputTokens (1..the model's
 * max_output_tokens; absent: the model's default; thinkingBudget is inside
 * it) times candidateCount. 0, or -1 with "<field>: <reason>" written. */
int gw_gemini_estimate(struct gw_walk *w, const struct jdoc_value *body,
                       const struct gw_model *model, struct gw_estimate *out);

/* Whether the request sets generationConfig.maxOutputTokens. */
bool gw_gemini_bound_given(const struct jdoc_value *body);

/* The generationConfig member as it goes upstream with the gateway's
 * bound: `"generationConfig":{"maxOutputTokens":<bound>,<the client's
 * members>}`, value_text[0..value_length) being the client's value as it
 * came (an object without maxOutputTokens, or null). Appended to out. */
void gw_gemini_write_generation_config(struct buffer *out, const char *value_text,
                                       size_t value_length, uint64_t bound);

/* The usageMetadata of a GenerateContentResponse (an object), or of the
 * last element that has one in an array of them (a stream read without
 * alt=sse): promptTokenCount (required; it includes
 * cachedContentTokenCount) and toolUsePromptTokenCount are input,
 * cachedContentTokenCount cache reads, candidatesTokenCount plus
 * thoughtsTokenCount output, the thoughts its reasoning part. Absent
 * optional counts are 0 (Google leaves out zero counts); a missing
 * candidatesTokenCount leaves has_completion_tokens false (its output is
 * counted from the text, never read as 0). 0 with *out (present false
 * without usageMetadata), or -1 with "usageMetadata.<field>: <reason>". */
int gw_gemini_usage_read(const struct jdoc_value *answer, struct gw_usage *out, char *error,
                         size_t error_size);

/* The output tokens of a whole answer counted from its text
 * (candidates[].content.parts[]: text, function calls). */
uint64_t gw_gemini_output_tokens(const struct jdoc_value *answer);

/* gw_answer_tokens for a Gemini answer: its usage (and, when it lacks
 * candidatesTokenCount, the counted text as the rest of its output; true),
 * else the input estimate and the counted text (false); an answer that is
 * not JSON is counted as text whole. */
bool gw_gemini_answer_tokens(const struct jdoc_value *root, const char *body, size_t length,
                             uint64_t input_estimate, struct gw_tokens *out);

/* A stream chunk: how many texts it may hold, and those texts (the text
 * and function-call names of its candidates' parts) with the candidate's
 * index as choice, into items (room for gw_gemini_chunk_texts_max). */
uint32_t gw_gemini_chunk_texts_max(const struct jdoc_value *chunk);
uint32_t gw_gemini_chunk_texts(const struct jdoc_value *chunk, struct gw_sse_text *items);
/* Whether the chunk ends the answer: a candidate with a finishReason. */
bool gw_gemini_chunk_final(const struct jdoc_value *chunk);

/* Google's status name for an HTTP status: "INVALID_ARGUMENT",
 * "UNAUTHENTICATED", "NOT_FOUND", "RESOURCE_EXHAUSTED", ... */
const char *gw_gemini_status(unsigned status);

/* {"error":{"code":<status>,"message":...,"status":...}}, and when
 * retry_after_ms > 0 or limits are given a "details" list: a
 * google.rpc.RetryInfo whose retryDelay is the wait in whole seconds
 * (rounded up), and a google.rpc.QuotaFailure with one violation per limit
 * key (subject and quotaId the key). The Gemini CLI reads these to decide
 * between waiting and stopping. A reason (NULL: none) adds a
 * google.rpc.ErrorInfo naming it (domain "llmlimit"): why a key was
 * refused, as the other surfaces' error code says it. */
void gw_gemini_error(struct buffer *b, unsigned status, const char *message, int64_t retry_after_ms,
                     const char *const *limits, uint32_t limit_count, const char *reason);

#endif
