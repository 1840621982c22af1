/* The request body as it goes upstream: `model` becomes the model's
 * upstream name, a streaming chat or completions call asks for usage
 * (stream_options.include_usage true, keeping the client's other
 * stream_options), and a call that sets no output bound gets the one the
 * gateway reserved; every other member passes byte for byte as the client
 * wrote it (numbers too: the body is never rebuilt from the parsed tree).
 * Messages and Responses streams report their usage unasked. */
#ifndef LLMLIMIT_GATEWAY_REQUEST_H
#define LLMLIMIT_GATEWAY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_config.h"
#include "gw_endpoint.h"
#include "util/buffer.h"
#include "util/jdoc.h"

#define GW_REQUEST_ERROR_SIZE 128

struct gw_request_info {
    bool stream;               /* "stream": true */
    bool client_include_usage; /* the client asked for the usage chunk itself */
};

/* Writes the upstream body for `model` to out (appended). `body` is the
 * client's text as received (length bytes) and `root` the document parsed
 * from a copy of it (the parser decodes strings in place, so body itself
 * must not have been parsed). 0 with *info set, or -1 with "<field>:
 * <reason>" in error: model not a string, stream not a boolean,
 * stream_options not an object or include_usage not a boolean (on a
 * streaming call), out of memory. */
int gw_request_rewrite(const char *body, size_t length, const struct jdoc_value *root,
                       const struct gw_model *model, struct buffer *out,
                       struct gw_request_info *info, char *error, size_t error_size);

/* The same for a call to endpoint: include_usage only for chat and
 * completions; info->stream false for the routes that never stream
 * (embeddings, count_tokens, input_tokens). output_bound > 0: the output
 * the call reserved per choice (the model's default when the request sets
 * none); a request that sets no bound of its own (absent or null) gets it
 * as chat's max_completion_tokens, completions' max_tokens or Responses'
 * max_output_tokens, its null members of those names dropped; Gemini's
 * generateContent as generationConfig.maxOutputTokens (the body otherwise
 * as it came: its model is in the path); other endpoints get none. 0:
 * nothing written. */
int gw_request_rewrite_for(enum gw_endpoint endpoint, const char *body, size_t length,
                           const struct jdoc_value *root, const struct gw_model *model,
                           uint64_t output_bound, struct buffer *out, struct gw_request_info *info,
                           char *error, size_t error_size);

/* The rewrite of a dialect whose body is not the one above (its rewrite,
 * gw_dialect.h), called with info zeroed and root an object; same
 * returns. NULL in the table: the one above. */
struct gw_dialect;
struct gw_surface;
typedef int (*gw_request_rewrite_fn)(const struct gw_surface *surface, const char *body,
                                     size_t length, const struct jdoc_value *root,
                                     const struct gw_model *model, uint64_t output_bound,
                                     struct buffer *out, struct gw_request_info *info, char *error,
                                     size_t error_size);

/* Gemini's: the body as it came, with generationConfig.maxOutputTokens
 * added on a surface that has bound fields (generateContent) when the
 * call sets none. */
int gw_request_rewrite_gemini(const struct gw_surface *surface, const char *body, size_t length,
                              const struct jdoc_value *root, const struct gw_model *model,
                              uint64_t output_bound, struct buffer *out,
                              struct gw_request_info *info, char *error, size_t error_size);

/* gw_request_rewrite_for with the surface and its dialect given (that
 * one looks them up in the dialects' table, gw_dispatch.c): the surface
 * row says which members bound the output, whether a stream asks for its
 * usage and whether the route streams at all. */
int gw_request_rewrite_with(const struct gw_dialect *dialect, const struct gw_surface *surface,
                            const char *body, size_t length, const struct jdoc_value *root,
                            const struct gw_model *model, uint64_t output_bound, struct buffer *out,
                            struct gw_request_info *info, char *error, size_t error_size);

#endif
