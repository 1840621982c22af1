/* The route table of llmlimitd: one row per route with its path, methods,
 * token and handler. Adding a route is adding a row (and writing its
 * handler). The hot data routes come first: matching walks the rows in
 * order. */
#include "routes.h"

#include "gateway.h"
#include "handlers.h"

#define GET_HEAD (HTTP_GET | HTTP_HEAD)

static const struct route rows[] = {
    {"reserve", "/v1/reserve", HTTP_POST, AUTH_CLIENT, 0, handle_reserve},
    {"complete", "/v1/complete", HTTP_POST, AUTH_CLIENT, ROUTE_ERROR_HAS_OK, handle_complete},
    {"release", "/v1/release", HTTP_POST, AUTH_CLIENT, ROUTE_ERROR_HAS_OK, handle_release},
    {"reserve_batch", "/v1/reserve/batch", HTTP_POST, AUTH_CLIENT, 0, handle_reserve_batch},
    {"complete_batch", "/v1/complete/batch", HTTP_POST, AUTH_CLIENT, 0, handle_complete_batch},
    {"admin_limits", "/v1/admin/limits", GET_HEAD | HTTP_PUT, AUTH_ADMIN, 0, handle_admin_limits},
    {"admin_limit", "/v1/admin/limits/", GET_HEAD | HTTP_DELETE, AUTH_ADMIN, ROUTE_ITEM,
     handle_admin_limit},
    {"admin_keys", "/v1/admin/keys", GET_HEAD | HTTP_POST, AUTH_ADMIN, 0, handle_admin_keys},
    /* {id}: GET, PATCH, DELETE; {id}/rotate: POST */
    {"admin_key", "/v1/admin/keys/", GET_HEAD | HTTP_PATCH | HTTP_DELETE | HTTP_POST, AUTH_ADMIN,
     ROUTE_ITEM, handle_admin_key},
    {"admin_clock", "/v1/admin/clock", HTTP_POST, AUTH_ADMIN, ROUTE_TEST_CLOCK_ONLY,
     handle_admin_clock},
    {"usage", "/v1/usage/", GET_HEAD, AUTH_CLIENT, ROUTE_ITEM, handle_usage},
    {"events", "/v1/events", GET_HEAD, AUTH_CLIENT, 0, handle_events},
    {"alerts", "/v1/alerts", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE, handle_alerts},
    {"gateway_chat", "/v1/chat/completions", HTTP_POST, AUTH_GATEWAY, ROUTE_ERROR_OPENAI,
     handle_gateway_chat_completions},
    {"gateway_completions", "/v1/completions", HTTP_POST, AUTH_GATEWAY, ROUTE_ERROR_OPENAI,
     handle_gateway_completions},
    {"gateway_embeddings", "/v1/embeddings", HTTP_POST, AUTH_GATEWAY, ROUTE_ERROR_OPENAI,
     handle_gateway_embeddings},
    {"gateway_models", "/v1/models", GET_HEAD, AUTH_GATEWAY, ROUTE_ERROR_OPENAI,
     handle_gateway_models},
    {"gateway_messages", "/v1/messages", HTTP_POST, AUTH_GATEWAY, ROUTE_ERROR_ANTHROPIC,
     handle_gateway_messages},
    {"gateway_count_tokens", "/v1/messages/count_tokens", HTTP_POST, AUTH_GATEWAY,
     ROUTE_ERROR_ANTHROPIC, handle_gateway_messages_count_tokens},
    {"gateway_responses", "/v1/responses", HTTP_POST, AUTH_GATEWAY, ROUTE_ERROR_OPENAI,
     handle_gateway_responses},
    {"gateway_input_tokens", "/v1/responses/input_tokens", HTTP_POST, AUTH_GATEWAY,
     ROUTE_ERROR_OPENAI, handle_gateway_responses_input_tokens},
    /* {model}:generateContent, :streamGenerateContent, :countTokens */
    {"gateway_gemini", "/v1beta/models/", HTTP_POST, AUTH_GATEWAY, ROUTE_ITEM | ROUTE_ERROR_GEMINI,
     handle_gateway_gemini},
    /* after input_tokens: {id}, {id}/input_items, {id}/cancel */
    {"gateway_response", "/v1/responses/", GET_HEAD | HTTP_POST | HTTP_DELETE, AUTH_GATEWAY,
     ROUTE_ITEM | ROUTE_ERROR_OPENAI, handle_gateway_response_item},
    {"gateway_mcp", "/mcp/", HTTP_POST | HTTP_GET | HTTP_DELETE, AUTH_GATEWAY,
     ROUTE_ITEM | ROUTE_ERROR_OPENAI | ROUTE_ERROR_MCP, handle_gateway_mcp},
    {"metrics", "/metrics", GET_HEAD, AUTH_CLIENT, ROUTE_TEXT, handle_metrics},
    {"healthz", "/healthz", GET_HEAD, AUTH_NONE, 0, handle_healthz},
    {"readyz", "/readyz", GET_HEAD, AUTH_NONE, 0, handle_readyz},
    {"root", "/", GET_HEAD, AUTH_NONE, 0, handle_root}, /* points at the console */
    /* The console: its files need no token (they hold no data); what they
     * read does. */
    {"console", "/console", GET_HEAD, AUTH_NONE, 0, handle_console_asset},
    {"console_js", "/console/app.js", GET_HEAD, AUTH_NONE, 0, handle_console_asset},
    {"console_css", "/console/app.css", GET_HEAD, AUTH_NONE, 0, handle_console_asset},
    {"console_status", "/v1/console/status", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_status},
    {"console_limits", "/v1/console/limits", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_limits},
    {"console_holds", "/v1/console/holds/", GET_HEAD, AUTH_ADMIN, ROUTE_ITEM | ROUTE_NO_STORE,
     handle_console_holds},
    {"console_denials", "/v1/console/denials", GET_HEAD, AUTH_ADMIN, ROUTE_NO_STORE,
     handle_console_denials},
    {"console_spend", "/v1/console/spend/", GET_HEAD, AUTH_CLIENT, ROUTE_ITEM | ROUTE_NO_STORE,
     handle_console_spend},
    {"console_gateway", "/v1/console/gateway", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_gateway},
    {"console_gateway_limits", "/v1/console/gateway/limits", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_gateway_limits},
    {"not_found", "", ~0u, AUTH_NONE, 0, NULL}, /* last: every other path */
};

const struct router server_routes = {rows, sizeof rows / sizeof rows[0]};
