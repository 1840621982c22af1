/* One table of the surfaces, so that routes, upstream paths and dialects
 * cannot disagree. */
#include "gw_endpoint.h"

#include <assert.h>

static const struct {
    const char *route;
    const char *upstream_path;
    enum gw_api api;
    bool charged;
} endpoints[] = {
    [GW_ENDPOINT_CHAT_COMPLETIONS] = {"/v1/chat/completions", "/chat/completions", GW_API_OPENAI,
                                      true},
    [GW_ENDPOINT_COMPLETIONS] = {"/v1/completions", "/completions", GW_API_OPENAI, true},
    [GW_ENDPOINT_EMBEDDINGS] = {"/v1/embeddings", "/embeddings", GW_API_OPENAI, true},
    [GW_ENDPOINT_MESSAGES] = {"/v1/messages", "/messages", GW_API_ANTHROPIC, true},
    [GW_ENDPOINT_MESSAGES_COUNT_TOKENS] = {"/v1/messages/count_tokens", "/messages/count_tokens",
                                           GW_API_ANTHROPIC, false},
    [GW_ENDPOINT_RESPONSES] = {"/v1/responses", "/responses", GW_API_OPENAI, true},
    [GW_ENDPOINT_RESPONSES_INPUT_TOKENS] = {"/v1/responses/input_tokens", "/responses/input_tokens",
                                            GW_API_OPENAI, false},
    [GW_ENDPOINT_GEMINI] = {"/v1beta/models/{model}:generateContent", ":generateContent",
                            GW_API_GEMINI, true},
    [GW_ENDPOINT_GEMINI_COUNT_TOKENS] = {"/v1beta/models/{model}:countTokens", ":countTokens",
                                         GW_API_GEMINI, false},
    /* No model's: its server's URL is the whole endpoint; each tools/call
     * is charged, not the route. */
    [GW_ENDPOINT_MCP] = {"/mcp/{server}", "", GW_API_OPENAI, false},
};

static void check(enum gw_endpoint endpoint)
{
    assert(endpoint >= GW_ENDPOINT_CHAT_COMPLETIONS && endpoint <= GW_ENDPOINT_LAST);
    (void)endpoint;
}

const char *gw_endpoint_route(enum gw_endpoint endpoint)
{
    check(endpoint);
    return endpoints[endpoint].route;
}

const char *gw_endpoint_upstream_path(enum gw_endpoint endpoint)
{
    check(endpoint);
    return endpoints[endpoint].upstream_path;
}

enum gw_api gw_endpoint_api(enum gw_endpoint endpoint)
{
    check(endpoint);
    return endpoints[endpoint].api;
}

bool gw_endpoint_charged(enum gw_endpoint endpoint)
{
    check(endpoint);
    return endpoints[endpoint].charged;
}

bool gw_model_serves(const struct gw_model *model, enum gw_endpoint endpoint)
{
    if (endpoint == GW_ENDPOINT_MCP)
        return false;
    return model->upstream->api == gw_endpoint_api(endpoint);
}

const char *gw_model_routes(const struct gw_model *model)
{
    switch (model->upstream->api) {
    case GW_API_ANTHROPIC:
        return "/v1/messages";
    case GW_API_GEMINI:
        return "/v1beta/models/{model}:generateContent (or :streamGenerateContent)";
    default:
        return "/v1/chat/completions, /v1/completions, /v1/embeddings or /v1/responses";
    }
}
