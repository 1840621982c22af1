/* The surfaces as the dialects' table has them (gw_dialects.c), so that
 * routes, upstream paths and dialects cannot disagree. */
#include "gw_endpoint.h"

#include "gw_dialect.h"

#include <assert.h>

static void check(enum gw_endpoint endpoint)
{
    assert(endpoint >= GW_ENDPOINT_CHAT_COMPLETIONS && endpoint <= GW_ENDPOINT_LAST);
    (void)endpoint;
}

const char *gw_endpoint_route(enum gw_endpoint endpoint)
{
    check(endpoint);
    return gw_surface_of(endpoint)->route;
}

const char *gw_endpoint_upstream_path(enum gw_endpoint endpoint)
{
    check(endpoint);
    return gw_surface_of(endpoint)->upstream_path;
}

enum gw_api gw_endpoint_api(enum gw_endpoint endpoint)
{
    check(endpoint);
    return gw_dialect_of(endpoint)->api;
}

bool gw_endpoint_charged(enum gw_endpoint endpoint)
{
    check(endpoint);
    return gw_surface_of(endpoint)->charged;
}

bool gw_model_serves(const struct gw_model *model, enum gw_endpoint endpoint)
{
    const struct gw_dialect *dialect = gw_dialect_of(endpoint);
    return dialect->estimate != NULL && model->upstream->api == dialect->api;
}

const char *gw_model_routes(const struct gw_model *model)
{
    return gw_dialect_for_api(model->upstream->api)->served_routes;
}
