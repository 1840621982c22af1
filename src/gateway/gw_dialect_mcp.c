/* The MCP route's row (docs/mcp.md): a tool server's JSON-RPC passed
 * through, its tools/call charged by the MCP module (gw_mcp.h); the
 * gateway's own errors as JSON-RPC errors, the HTTP layer's in OpenAI's
 * shape. No model's surface: no estimate, no usage. */
#include "gw_dialect.h"

#include <stdio.h>

#include "gw_error.h"
#include "gw_mcp.h"

extern const struct gw_dialect gw_dialect_mcp;

static const struct gw_route routes[] = {
    {"gateway_mcp", "/mcp/", GW_ROUTE_POST | GW_ROUTE_GET | GW_ROUTE_DELETE, true, GW_ROUTE_TOOLS,
     GW_ENDPOINT_MCP, &gw_dialect_mcp},
};

/* No model's: its server's URL is the whole endpoint; each tools/call is
 * charged, not the route. */
static const struct gw_surface surfaces[] = {
    {.endpoint = GW_ENDPOINT_MCP, .route = "/mcp/{server}", .upstream_path = ""},
};

/* JSON-RPC, of no request id (one that has an id is answered by the MCP
 * module, gw_mcp.h). */
static void mcp_error(struct buffer *b, const struct gw_error_args *args)
{
    char data[128];
    snprintf(data, sizeof data, "{\"status\":%u,\"code\":\"%s\"}", args->status,
             args->code != NULL ? args->code
                                : (args->status >= 500 ? "server_error" : "invalid_request"));
    gw_mcp_error(b, NULL, GW_MCP_SERVER_ERROR, args->message, data);
}

const struct gw_dialect gw_dialect_mcp = {
    .name = "mcp",
    .api = GW_API_OPENAI, /* a tool server's key goes as Authorization: Bearer */
    .routes = routes,
    .route_count = sizeof routes / sizeof routes[0],
    .surfaces = surfaces,
    .surface_count = sizeof surfaces / sizeof surfaces[0],
    .unknown_key_message = GW_DIALECT_UNKNOWN_KEY_MESSAGE,
    .upstream_key = GW_KEY_BEARER,
    .passes_query = true,
    .served_routes = "",
    .too_large_advice = "Lower max_tokens (or max_completion_tokens) or shorten the input",
    .invalid_json_prefix = GW_DIALECT_INVALID_JSON_PREFIX,
    .error = mcp_error,
    .plain_error = gw_dialect_openai_plain_error,
    .error_event = gw_dialect_openai_error_event,
};
