/* The error bodies of the gateway's surfaces, each in the shape its
 * clients' SDKs read: OpenAI's error object for chat, completions,
 * embeddings and Responses, Anthropic's for Messages, Google's for Gemini
 * (gw_gemini.h). Every text is written
 * as a JSON string that any strict parser reads, whatever bytes it holds
 * (an upstream's or a client's text may be hostile). */
#ifndef LLMLIMIT_GATEWAY_ERROR_H
#define LLMLIMIT_GATEWAY_ERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_endpoint.h"
#include "util/buffer.h"

/* text[0..length) as a JSON string: '"', '\' and control characters
 * escaped, U+2028 and U+2029 escaped (for readers that embed JSON in
 * script), bytes that are not UTF-8 written as U+FFFD, and NUL as U+FFFD
 * too (a C reader would end the text there). */
void gw_json_string(struct buffer *b, const char *text, size_t length);

/* {"error":{"message":...,"type":...,"param":...,"code":...}}, param and
 * code null when NULL. */
void gw_error_openai(struct buffer *b, const char *message, const char *type, const char *param,
                     const char *code);

enum gw_anthropic_error {
    GW_ANTHROPIC_INVALID_REQUEST = 0, /* 400 and other 4xx */
    GW_ANTHROPIC_AUTHENTICATION,      /* 401 */
    GW_ANTHROPIC_PERMISSION,          /* 403 */
    GW_ANTHROPIC_NOT_FOUND,           /* 404 */
    GW_ANTHROPIC_REQUEST_TOO_LARGE,   /* 413 */
    GW_ANTHROPIC_RATE_LIMIT,          /* 429 */
    GW_ANTHROPIC_API_ERROR,           /* 500 and other 5xx */
    GW_ANTHROPIC_OVERLOADED,          /* 503, 529 */
};

/* "invalid_request_error", "rate_limit_error", ... */
const char *gw_anthropic_error_type(enum gw_anthropic_error error);

/* The type Anthropic gives an answer of this HTTP status. */
enum gw_anthropic_error gw_anthropic_error_for_status(unsigned status);

/* {"type":"error","error":{"type":...,"message":...}}, and
 * "request_id":... after it unless request_id is NULL. */
void gw_error_anthropic(struct buffer *b, enum gw_anthropic_error error, const char *message,
                        const char *request_id);

/* The header that tells the OpenAI and Anthropic SDKs (and Claude Code)
 * whether to retry an answer; they honour it before their own rules. */
#define GW_SHOULD_RETRY_HEADER "x-should-retry"
/* The longest wait an SDK makes for a retry-after (the OpenAI and Anthropic
 * SDKs cap theirs at 60 s): a 429 further away cannot be waited out. */
#define GW_SHOULD_RETRY_MS_MAX 60000

/* Whether an answer of this status is one a retry cannot change, and so
 * carries "x-should-retry: false" (docs/gateway.md, "Answers a retry
 * cannot change"): a 4xx but 408 (timeout), 409 (conflict), 425 (too
 * early) and 429; a 429 whose retry lies more than GW_SHOULD_RETRY_MS_MAX
 * away (retry_after_ms: when the answer says to retry, 0 when it does not
 * say); 501 and 505 (a method or version the server never takes). Any
 * other 5xx may pass (an upstream down, a backend's unknown outcome). The
 * one rule for every answer of the gateway's routes. */
bool gw_should_not_retry(unsigned status, int64_t retry_after_ms);

/* The error body for a call on endpoint's surface: Anthropic's for the
 * Messages routes (its type from status), Google's for Gemini's (its
 * status name from status), OpenAI's for the others (type
 * and code as given; type NULL: invalid_request_error below 500,
 * server_error from 500 up). A 401's code goes into Anthropic's error
 * object too (which refusal: invalid_api_key, key_revoked, ...). */
void gw_error_for(struct buffer *b, enum gw_endpoint endpoint, unsigned status, const char *type,
                  const char *code, const char *message);

/* An event that tells a client its stream broke, as the SDKs of
 * endpoint's surface read one (each throws on it): chat and completions
 * `data: {"error":{...}}` (type server_error, code as given), Messages
 * `event: error` with Anthropic's body (api_error), Gemini `data:` with
 * Google's (code 500, INTERNAL), Responses `event:
 * error` with {"type":"error","code":...,"message":...,"param":null}. Ends
 * with its blank line. */
void gw_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                    const char *message);

#endif
