/* Google's Gemini dialect: POST /v1beta/models/{model}:generateContent,
 * :streamGenerateContent and :countTokens; the key as x-goog-api-key (or
 * ?key=), errors in Google's shape with the details its CLI reads
 * (gw_gemini.h). */
#include "gw_dialect.h"

#include <stdio.h>
#include <string.h>

#include "gw_gemini.h"

extern const struct gw_dialect gw_dialect_gemini;

static const struct gw_route routes[] = {
    /* {model}:generateContent, :streamGenerateContent, :countTokens */
    {"gateway_gemini", "/v1beta/models/", GW_ROUTE_POST, true, GW_ROUTE_MODEL_IN_PATH,
     GW_ENDPOINT_GEMINI, &gw_dialect_gemini},
};

/* Its bound, inside generationConfig: written by its own rewrite
 * (gw_request_rewrite_gemini). */
static const char *const generate_bounds[] = {"maxOutputTokens", NULL};

static const struct gw_surface surfaces[] = {
    {.endpoint = GW_ENDPOINT_GEMINI,
     .route = "/v1beta/models/{model}:generateContent",
     .upstream_path = ":generateContent",
     .charged = true,
     .bound_fields = generate_bounds,
     .output_tokens = gw_gemini_output_tokens},
    {.endpoint = GW_ENDPOINT_GEMINI_COUNT_TOKENS,
     .route = "/v1beta/models/{model}:countTokens",
     .upstream_path = ":countTokens"},
};

static int gemini_target(const char *item, size_t length, const char **name, size_t *name_length,
                         enum gw_endpoint *endpoint, bool *stream, char *error, size_t error_size)
{
    enum gw_gemini_method method;
    if (gw_gemini_target(item, length, name, name_length, &method, error, error_size) != 0)
        return -1;
    *endpoint =
        method == GW_GEMINI_COUNT_TOKENS ? GW_ENDPOINT_GEMINI_COUNT_TOKENS : GW_ENDPOINT_GEMINI;
    *stream = method == GW_GEMINI_STREAM;
    return 0;
}

/* /models/<upstream model>:<method>, with ?alt=sse when a stream asked
 * for events (else Google streams a JSON array). */
static int gemini_upstream_path(const struct gw_model *model, enum gw_endpoint endpoint,
                                bool stream, bool events, char *path, size_t size, char *error,
                                size_t error_size)
{
    enum gw_gemini_method method = endpoint == GW_ENDPOINT_GEMINI_COUNT_TOKENS
                                       ? GW_GEMINI_COUNT_TOKENS
                                   : stream ? GW_GEMINI_STREAM
                                            : GW_GEMINI_GENERATE;
    if (gw_gemini_upstream_path(model->upstream_model, method, stream && events, path, size) == 0)
        return 0;
    snprintf(error, error_size,
             "The model '%s' cannot be called on Gemini: its upstream_model must be letters, "
             "digits, '.', '_' and '-' only.",
             model->name);
    return -1;
}

static int gemini_estimate(struct gw_walk *w, const struct jdoc_value *body,
                           enum gw_endpoint endpoint, const struct gw_model *model,
                           struct gw_estimate *out)
{
    if (endpoint == GW_ENDPOINT_GEMINI_COUNT_TOKENS)
        return 0; /* counted upstream, never charged */
    return gw_gemini_estimate(w, body, model, out);
}

static int gemini_usage(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                        struct gw_usage *out, char *error, size_t error_size)
{
    (void)endpoint;
    return gw_gemini_usage_read(answer, out, error, error_size);
}

/* Google's shape, with the wait and the limits as details (RetryInfo,
 * QuotaFailure), which the Gemini CLI reads to decide between waiting and
 * stopping; a refused key says why, as the other shapes' code does. */
static void gemini_error(struct buffer *b, const struct gw_error_args *args)
{
    const char *reason =
        args->status == 401 && args->code != NULL && strncmp(args->code, "key_", 4) == 0
            ? args->code
            : NULL;
    gw_gemini_error(b, args->status, args->message, args->retry_after_ms, args->denied_keys,
                    args->denied_count, reason);
}

static void gemini_plain_error(struct buffer *b, unsigned status, const char *code,
                               const char *reason)
{
    char text[192];
    snprintf(text, sizeof text, "%s%s%s", code, reason != NULL ? ": " : "",
             reason != NULL ? reason : "");
    gw_gemini_error(b, status, text, 0, NULL, 0, NULL);
}

/* `data:` with a google.rpc.Status (code 500, INTERNAL). */
static void gemini_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                               const char *message)
{
    (void)endpoint;
    (void)code;
    buffer_append_str(b, "data: ");
    gw_gemini_error(b, 500, message, 0, NULL, 0, NULL);
}

const struct gw_dialect gw_dialect_gemini = {
    .name = "gemini",
    .api = GW_API_GEMINI,
    .routes = routes,
    .route_count = sizeof routes / sizeof routes[0],
    .surfaces = surfaces,
    .surface_count = sizeof surfaces / sizeof surfaces[0],
    .key_header = "x-goog-api-key",
    .key_query = "key",
    .unknown_key_message = "API key not valid. Send a virtual key of this gateway as "
                           "'x-goog-api-key: <key>' (GEMINI_API_KEY) or '?key=<key>'.",
    .upstream_key = GW_KEY_X_GOOG_API_KEY,
    .passes_query = false, /* its path has its query (alt=sse); the client's may hold its key */
    .served_routes = "/v1beta/models/{model}:generateContent (or :streamGenerateContent)",
    .too_large_advice = "Lower generationConfig.maxOutputTokens (a call that sends none reserves "
                        "the model's default_max_output_tokens) or shorten the input",
    .invalid_json_prefix = "Invalid JSON payload received: ",
    .target = gemini_target,
    .upstream_path = gemini_upstream_path,
    .item_pattern = "/v1beta/models/{model}:{method}",
    .stream_query_name = "alt",
    .stream_query_value = "sse",
    .estimate = gemini_estimate,
    .usage = gemini_usage,
    .stream_event = gw_sse_read_gemini_chunk,
    .rewrite = gw_request_rewrite_gemini,
    .answer_tokens = gw_gemini_answer_tokens,
    .error = gemini_error,
    .plain_error = gemini_plain_error,
    .error_event = gemini_error_event,
};
