/* The dialects compiled in: the only file that knows every dialect.
 * Adding a dialect is one file (gw_dialect_<name>.c) and a row here
 * (docs/architecture.md, "Dialects"). */
#include "gw_dialect.h"

#include <assert.h>

extern const struct gw_dialect gw_dialect_openai;
extern const struct gw_dialect gw_dialect_anthropic;
extern const struct gw_dialect gw_dialect_responses;
extern const struct gw_dialect gw_dialect_gemini;
extern const struct gw_dialect gw_dialect_mcp;

/* The server's routes follow this order; the first dialect of an api is
 * the one its upstreams answer in (gw_dialect_for_api). */
static const struct gw_dialect *const dialects[] = {
    &gw_dialect_openai, &gw_dialect_anthropic, &gw_dialect_responses,
    &gw_dialect_gemini, &gw_dialect_mcp,
};

#define DIALECT_COUNT (sizeof dialects / sizeof dialects[0])

uint32_t gw_dialect_count(void)
{
    return (uint32_t)DIALECT_COUNT;
}

const struct gw_dialect *gw_dialect_at(uint32_t index)
{
    assert(index < DIALECT_COUNT);
    return dialects[index];
}

/* The surface's row and its dialect: a walk of a dozen rows. */
static const struct gw_surface *find_surface(enum gw_endpoint endpoint,
                                             const struct gw_dialect **dialect)
{
    for (size_t d = 0; d < DIALECT_COUNT; d++) {
        for (uint32_t s = 0; s < dialects[d]->surface_count; s++) {
            if (dialects[d]->surfaces[s].endpoint == endpoint) {
                *dialect = dialects[d];
                return &dialects[d]->surfaces[s];
            }
        }
    }
    assert(0 && "every endpoint is a dialect's surface");
    return NULL;
}

const struct gw_dialect *gw_dialect_of(enum gw_endpoint endpoint)
{
    const struct gw_dialect *dialect = NULL;
    find_surface(endpoint, &dialect);
    return dialect;
}

const struct gw_surface *gw_surface_of(enum gw_endpoint endpoint)
{
    const struct gw_dialect *dialect;
    return find_surface(endpoint, &dialect);
}

const struct gw_dialect *gw_dialect_for_api(enum gw_api api)
{
    for (size_t d = 0; d < DIALECT_COUNT; d++) {
        if (dialects[d]->api == api)
            return dialects[d];
    }
    assert(0 && "every api has a dialect");
    return dialects[0];
}
