/* The route table of llmlimitd: one row per route with its path, methods,
 * token and handler. Adding a route is adding a row (and writing its
 * handler); the gateway's rows come from its dialects' table
 * (gateway/gw_dialect.h). The hot data routes come first: matching walks
 * the rows in order. */
#include "routes.h"

#include <assert.h>
#include <pthread.h>

#include "gateway.h"
#include "gateway/gw_dialect.h"
#include "handlers.h"

#define GET_HEAD (HTTP_GET | HTTP_HEAD)

/* The rows before the gateway's. */
static const struct route head[] = {
    {"reserve", "/v1/reserve", HTTP_POST, AUTH_CLIENT, 0, handle_reserve, NULL},
    {"complete", "/v1/complete", HTTP_POST, AUTH_CLIENT, ROUTE_ERROR_HAS_OK, handle_complete, NULL},
    {"release", "/v1/release", HTTP_POST, AUTH_CLIENT, ROUTE_ERROR_HAS_OK, handle_release, NULL},
    {"reserve_batch", "/v1/reserve/batch", HTTP_POST, AUTH_CLIENT, 0, handle_reserve_batch, NULL},
    {"complete_batch", "/v1/complete/batch", HTTP_POST, AUTH_CLIENT, 0, handle_complete_batch,
     NULL},
    {"admin_limits", "/v1/admin/limits", GET_HEAD | HTTP_PUT, AUTH_ADMIN, 0, handle_admin_limits,
     NULL},
    {"admin_limit", "/v1/admin/limits/", GET_HEAD | HTTP_DELETE, AUTH_ADMIN, ROUTE_ITEM,
     handle_admin_limit, NULL},
    {"admin_keys", "/v1/admin/keys", GET_HEAD | HTTP_POST, AUTH_ADMIN, 0, handle_admin_keys, NULL},
    /* {id}: GET, PATCH, DELETE; {id}/rotate: POST */
    {"admin_key", "/v1/admin/keys/", GET_HEAD | HTTP_PATCH | HTTP_DELETE | HTTP_POST, AUTH_ADMIN,
     ROUTE_ITEM, handle_admin_key, NULL},
    {"admin_clock", "/v1/admin/clock", HTTP_POST, AUTH_ADMIN, ROUTE_TEST_CLOCK_ONLY,
     handle_admin_clock, NULL},
    {"usage", "/v1/usage/", GET_HEAD, AUTH_CLIENT, ROUTE_ITEM, handle_usage, NULL},
    {"events", "/v1/events", GET_HEAD, AUTH_CLIENT, 0, handle_events, NULL},
    {"alerts", "/v1/alerts", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE, handle_alerts, NULL},
};

/* The rows after the gateway's, the not-found route last. */
static const struct route tail[] = {
    {"metrics", "/metrics", GET_HEAD, AUTH_CLIENT, ROUTE_TEXT, handle_metrics, NULL},
    {"healthz", "/healthz", GET_HEAD, AUTH_NONE, 0, handle_healthz, NULL},
    {"readyz", "/readyz", GET_HEAD, AUTH_NONE, 0, handle_readyz, NULL},
    {"root", "/", GET_HEAD, AUTH_NONE, 0, handle_root, NULL}, /* points at the console */
    /* The console: its files need no token (they hold no data); what they
     * read does. */
    {"console", "/console", GET_HEAD, AUTH_NONE, 0, handle_console_asset, NULL},
    {"console_js", "/console/app.js", GET_HEAD, AUTH_NONE, 0, handle_console_asset, NULL},
    {"console_css", "/console/app.css", GET_HEAD, AUTH_NONE, 0, handle_console_asset, NULL},
    {"console_status", "/v1/console/status", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_status, NULL},
    {"console_limits", "/v1/console/limits", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_limits, NULL},
    {"console_holds", "/v1/console/holds/", GET_HEAD, AUTH_ADMIN, ROUTE_ITEM | ROUTE_NO_STORE,
     handle_console_holds, NULL},
    {"console_denials", "/v1/console/denials", GET_HEAD, AUTH_ADMIN, ROUTE_NO_STORE,
     handle_console_denials, NULL},
    {"console_spend", "/v1/console/spend/", GET_HEAD, AUTH_CLIENT, ROUTE_ITEM | ROUTE_NO_STORE,
     handle_console_spend, NULL},
    {"console_gateway", "/v1/console/gateway", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_gateway, NULL},
    {"console_gateway_limits", "/v1/console/gateway/limits", GET_HEAD, AUTH_CLIENT, ROUTE_NO_STORE,
     handle_console_gateway_limits, NULL},
    {"not_found", "", ~0u, AUTH_NONE, 0, NULL, NULL}, /* last: every other path */
};

#define HEAD_COUNT (sizeof head / sizeof head[0])
#define TAIL_COUNT (sizeof tail / sizeof tail[0])

static struct route rows[ROUTES_MAX];
static struct router table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static unsigned methods_of(const struct gw_route *gateway)
{
    return ((gateway->methods & GW_ROUTE_GET) != 0 ? GET_HEAD : 0) |
           ((gateway->methods & GW_ROUTE_POST) != 0 ? HTTP_POST : 0) |
           ((gateway->methods & GW_ROUTE_DELETE) != 0 ? HTTP_DELETE : 0);
}

/* The head, a row per route of each dialect (their table's order), the
 * tail. */
static void build(void)
{
    uint32_t n = 0;
    for (size_t i = 0; i < HEAD_COUNT; i++)
        rows[n++] = head[i];
    for (uint32_t d = 0; d < gw_dialect_count(); d++) {
        const struct gw_dialect *dialect = gw_dialect_at(d);
        for (uint32_t r = 0; r < dialect->route_count; r++) {
            const struct gw_route *gateway = &dialect->routes[r];
            assert(n < ROUTES_MAX - TAIL_COUNT);
            bool tools = gateway->kind == GW_ROUTE_TOOLS;
            rows[n++] = (struct route){gateway->name,
                                       gateway->path,
                                       methods_of(gateway),
                                       AUTH_GATEWAY,
                                       gateway->item ? ROUTE_ITEM : 0,
                                       tools ? handle_gateway_mcp : handle_gateway,
                                       gateway};
        }
    }
    for (size_t i = 0; i < TAIL_COUNT; i++)
        rows[n++] = tail[i];
    table = (struct router){rows, n};
}

const struct router *routes_server(void)
{
    pthread_once(&table_once, build);
    return &table;
}
