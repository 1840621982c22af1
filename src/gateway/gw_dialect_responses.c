/* OpenAI's Responses dialect: /v1/responses, its input_tokens, and the
 * responses an upstream stored for the key (/v1/responses/{id}); errors
 * in OpenAI's error object, a broken stream as Responses' error event. */
#include "gw_dialect.h"

#include <string.h>

#include "gw_error.h"
#include "gw_estimate_internal.h"

extern const struct gw_dialect gw_dialect_responses;

/* input_tokens before the item route: matching walks the rows in order. */
static const struct gw_route routes[] = {
    {"gateway_responses", "/v1/responses", GW_ROUTE_POST, false, GW_ROUTE_CALL,
     GW_ENDPOINT_RESPONSES, &gw_dialect_responses},
    {"gateway_input_tokens", "/v1/responses/input_tokens", GW_ROUTE_POST, false, GW_ROUTE_CALL,
     GW_ENDPOINT_RESPONSES_INPUT_TOKENS, &gw_dialect_responses},
    /* {id}, {id}/input_items, {id}/cancel */
    {"gateway_response", "/v1/responses/", GW_ROUTE_GET | GW_ROUTE_POST | GW_ROUTE_DELETE, true,
     GW_ROUTE_STORED, GW_ENDPOINT_RESPONSES, &gw_dialect_responses},
};

static const char *const responses_bounds[] = {"max_output_tokens", NULL};

/* Its streams carry their usage unasked. */
static const struct gw_surface surfaces[] = {
    {.endpoint = GW_ENDPOINT_RESPONSES,
     .route = "/v1/responses",
     .upstream_path = "/responses",
     .charged = true,
     .checks_references = true,
     .stores_answer = true,
     .bound_fields = responses_bounds,
     .output_tokens = gw_answer_responses_output},
    {.endpoint = GW_ENDPOINT_RESPONSES_INPUT_TOKENS,
     .route = "/v1/responses/input_tokens",
     .upstream_path = "/responses/input_tokens",
     .checks_references = true,
     .never_streams = true},
};

static int responses_usage(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                           struct gw_usage *out, char *error, size_t error_size)
{
    (void)endpoint;
    return gw_usage_read_responses(answer, out, error, error_size);
}

static void responses_error(struct buffer *b, const struct gw_error_args *args)
{
    const char *type = args->type;
    if (type == NULL)
        type = args->status >= 500 ? "server_error" : "invalid_request_error";
    gw_error_openai(b, args->message, type, NULL, args->code);
}

/* `event: error` with {"type":"error","code":...,"message":...,"param":null}. */
static void responses_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                                  const char *message)
{
    if (endpoint != GW_ENDPOINT_RESPONSES) { /* never a stream: as chat's */
        buffer_append_str(b, "data: ");
        gw_error_openai(b, message, "server_error", NULL, code);
        return;
    }
    buffer_append_str(b, "event: error\ndata: {\"type\":\"error\",\"code\":");
    gw_json_string(b, code, strlen(code));
    buffer_append_str(b, ",\"message\":");
    gw_json_string(b, message, strlen(message));
    buffer_append_str(b, ",\"param\":null}");
}

const struct gw_dialect gw_dialect_responses = {
    .name = "responses",
    .api = GW_API_OPENAI,
    .routes = routes,
    .route_count = sizeof routes / sizeof routes[0],
    .surfaces = surfaces,
    .surface_count = sizeof surfaces / sizeof surfaces[0],
    .unknown_key_message = GW_DIALECT_UNKNOWN_KEY_MESSAGE,
    .upstream_key = GW_KEY_BEARER,
    .passes_query = true,
    .served_routes = "/v1/chat/completions, /v1/completions, /v1/embeddings or /v1/responses",
    .too_large_advice = "Lower max_output_tokens (a call that sends none, as Codex does, reserves "
                        "the model's default_max_output_tokens) or shorten the input",
    .invalid_json_prefix = GW_DIALECT_INVALID_JSON_PREFIX,
    .estimate = gw_estimate_responses,
    .usage = responses_usage,
    .stream_event = gw_sse_read_responses_event,
    .error = responses_error,
    .plain_error = gw_dialect_openai_plain_error,
    .error_event = responses_error_event,
};
