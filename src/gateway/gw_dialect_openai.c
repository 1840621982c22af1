/* OpenAI's dialect: chat completions, completions and embeddings, and the
 * list of models; errors in OpenAI's error object, no rate-limit headers
 * of its own (x-ratelimit-* are every surface's). */
#include "gw_dialect.h"

#include <string.h>

#include "gw_error.h"
#include "gw_estimate_internal.h"

extern const struct gw_dialect gw_dialect_openai;

static const struct gw_route routes[] = {
    {"gateway_chat", "/v1/chat/completions", GW_ROUTE_POST, false, GW_ROUTE_CALL,
     GW_ENDPOINT_CHAT_COMPLETIONS, &gw_dialect_openai},
    {"gateway_completions", "/v1/completions", GW_ROUTE_POST, false, GW_ROUTE_CALL,
     GW_ENDPOINT_COMPLETIONS, &gw_dialect_openai},
    {"gateway_embeddings", "/v1/embeddings", GW_ROUTE_POST, false, GW_ROUTE_CALL,
     GW_ENDPOINT_EMBEDDINGS, &gw_dialect_openai},
    {"gateway_models", "/v1/models", GW_ROUTE_GET, false, GW_ROUTE_MODELS,
     GW_ENDPOINT_CHAT_COMPLETIONS, &gw_dialect_openai},
};

/* max_completion_tokens: what OpenAI's chat takes from every model (its
 * reasoning models refuse max_tokens), reasoning included. */
static const char *const chat_bounds[] = {"max_completion_tokens", "max_tokens", NULL};
static const char *const completions_bounds[] = {"max_tokens", NULL};

static const struct gw_surface surfaces[] = {
    {.endpoint = GW_ENDPOINT_CHAT_COMPLETIONS,
     .route = "/v1/chat/completions",
     .upstream_path = "/chat/completions",
     .charged = true,
     .bound_fields = chat_bounds,
     .asks_stream_usage = true,
     .output_tokens = gw_answer_chat_output},
    {.endpoint = GW_ENDPOINT_COMPLETIONS,
     .route = "/v1/completions",
     .upstream_path = "/completions",
     .charged = true,
     .bound_fields = completions_bounds,
     .asks_stream_usage = true,
     .output_tokens = gw_answer_chat_output},
    /* generates nothing: no bound to write */
    {.endpoint = GW_ENDPOINT_EMBEDDINGS,
     .route = "/v1/embeddings",
     .upstream_path = "/embeddings",
     .charged = true,
     .never_streams = true,
     .no_output = true},
};

/* {"object":"list","data":[{"id","object":"model","created":0,"owned_by"}]} */
static void openai_model_list(struct buffer *b, const struct gw_config *config,
                              const struct gw_key *key)
{
    buffer_append_str(b, "{\"object\":\"list\",\"data\":[");
    bool first = true;
    for (uint32_t i = 0; i < config->model_count; i++) {
        const struct gw_model *model = &config->models[i];
        if (!gw_key_allows_model(key, model))
            continue;
        buffer_append_str(b, first ? "{\"id\":" : ",{\"id\":");
        first = false;
        buffer_append_json_string(b, model->name, strlen(model->name));
        buffer_append_str(b, ",\"object\":\"model\",\"created\":0,\"owned_by\":");
        buffer_append_json_string(b, model->upstream->name, strlen(model->upstream->name));
        buffer_append_char(b, '}');
    }
    buffer_append_str(b, "]}");
}

static void openai_error(struct buffer *b, const struct gw_error_args *args)
{
    const char *type = args->type;
    if (type == NULL)
        type = args->status >= 500 ? "server_error" : "invalid_request_error";
    gw_error_openai(b, args->message, type, NULL, args->code);
}

/* A sentence for the errors the HTTP layer gives before a route runs. */
static const char *plain_message(const char *error)
{
    static const char *const messages[][2] = {
        {"body_too_large", "The request body is larger than this server accepts."},
        {"method_not_allowed", "This route does not take that method."},
        {"shutting_down", "The server is shutting down; retry the call."},
        {"out_of_memory", "The server is out of memory; retry the call."},
    };
    for (size_t i = 0; i < sizeof messages / sizeof messages[0]; i++) {
        if (strcmp(error, messages[i][0]) == 0)
            return messages[i][1];
    }
    return error;
}

void gw_dialect_openai_plain_error(struct buffer *b, unsigned status, const char *code,
                                   const char *reason)
{
    if (reason != NULL)
        gw_error_openai(b, reason, "invalid_request_error", NULL, code);
    else
        gw_error_openai(b, plain_message(code),
                        status >= 500 ? "server_error" : "invalid_request_error", NULL, code);
}

void gw_dialect_openai_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                                   const char *message)
{
    (void)endpoint;
    buffer_append_str(b, "data: ");
    gw_error_openai(b, message, "server_error", NULL, code);
}

const struct gw_dialect gw_dialect_openai = {
    .name = "openai",
    .api = GW_API_OPENAI,
    .routes = routes,
    .route_count = sizeof routes / sizeof routes[0],
    .surfaces = surfaces,
    .surface_count = sizeof surfaces / sizeof surfaces[0],
    .unknown_key_message = GW_DIALECT_UNKNOWN_KEY_MESSAGE,
    .upstream_key = GW_KEY_BEARER,
    .passes_query = true,
    .served_routes = "/v1/chat/completions, /v1/completions, /v1/embeddings or /v1/responses",
    .too_large_advice = "Lower max_tokens (or max_completion_tokens) or shorten the input",
    .invalid_json_prefix = GW_DIALECT_INVALID_JSON_PREFIX,
    .model_list = openai_model_list,
    .estimate = gw_estimate_openai,
    .usage = gw_usage_read_openai,
    .stream_event = gw_sse_read_chunk,
    .error = openai_error,
    .plain_error = gw_dialect_openai_plain_error,
    .error_event = gw_dialect_openai_error_event,
};
