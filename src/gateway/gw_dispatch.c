/* The gateway's calls that take an endpoint: each finds the endpoint's
 * surface and dialect in the dialects' table (gw_dialects.c) and goes on
 * with them. The code the table points at (the estimates, usage readers,
 * stream readers, rewrites, error shapes) takes what it needs from its
 * caller and never looks the table up, so no file of the gateway calls in
 * a circle (tests/layers). The declarations are with the code each call
 * goes to: gw_error.h, gw_estimate.h, gw_usage.h, gw_sse.h, gw_request.h,
 * gw_answer.h. */
#include <assert.h>

#include "gw_answer.h"
#include "gw_dialect.h"
#include "gw_error.h"
#include "gw_estimate.h"
#include "gw_request.h"
#include "gw_sse.h"
#include "gw_usage.h"

void gw_error_for(struct buffer *b, enum gw_endpoint endpoint, unsigned status, const char *type,
                  const char *code, const char *message)
{
    const struct gw_error_args args = {
        .status = status, .type = type, .code = code, .message = message};
    gw_dialect_of(endpoint)->error(b, &args);
}

void gw_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                    const char *message)
{
    assert(code != NULL && message != NULL);
    gw_dialect_of(endpoint)->error_event(b, endpoint, code, message);
    buffer_append_str(b, "\n\n");
}

int gw_estimate_request(const struct jdoc_value *body, enum gw_endpoint endpoint,
                        const struct gw_model *model, struct gw_estimate *out, char *error,
                        size_t error_size)
{
    return gw_estimate_request_with(gw_dialect_of(endpoint), body, endpoint, model, out, error,
                                    error_size);
}

int gw_usage_read_answer(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                         struct gw_usage *out, char *error, size_t error_size)
{
    return gw_usage_read_with(gw_dialect_of(endpoint)->usage, endpoint, answer, out, error,
                              error_size);
}

void gw_sse_init(struct gw_sse *sse)
{
    gw_sse_init_for(sse, GW_ENDPOINT_CHAT_COMPLETIONS);
}

void gw_sse_init_for(struct gw_sse *sse, enum gw_endpoint endpoint)
{
    gw_sse_init_with(sse, gw_dialect_of(endpoint), gw_surface_of(endpoint));
}

int gw_request_rewrite(const char *body, size_t length, const struct jdoc_value *root,
                       const struct gw_model *model, struct buffer *out,
                       struct gw_request_info *info, char *error, size_t error_size)
{
    return gw_request_rewrite_for(GW_ENDPOINT_CHAT_COMPLETIONS, body, length, root, model, 0, out,
                                  info, error, error_size);
}

int gw_request_rewrite_for(enum gw_endpoint endpoint, const char *body, size_t length,
                           const struct jdoc_value *root, const struct gw_model *model,
                           uint64_t output_bound, struct buffer *out, struct gw_request_info *info,
                           char *error, size_t error_size)
{
    return gw_request_rewrite_with(gw_dialect_of(endpoint), gw_surface_of(endpoint), body, length,
                                   root, model, output_bound, out, info, error, error_size);
}

uint64_t gw_answer_output_tokens(enum gw_endpoint endpoint, const struct jdoc_value *answer)
{
    return gw_answer_output_with(gw_surface_of(endpoint), answer);
}

bool gw_answer_tokens(enum gw_endpoint endpoint, const struct jdoc_value *root, const char *body,
                      size_t length, uint64_t input_estimate, struct gw_tokens *out)
{
    return gw_answer_tokens_with(gw_dialect_of(endpoint), gw_surface_of(endpoint), root, body,
                                 length, input_estimate, out);
}
