/* Route matching by exact path (and one prefix per item route): no regex,
 * no allocation, a handful of string compares per request. */
#include "router.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/hex.h"

const struct route *router_find(const struct router *router, const char *path,
                                const char **key_encoded)
{
    assert(router->count >= 1);
    assert(router->count <= ROUTES_MAX);
    *key_encoded = NULL;
    for (uint32_t i = 0; i + 1 < router->count; i++) {
        const struct route *route = &router->routes[i];
        if ((route->flags & ROUTE_ITEM) == 0) {
            if (strcmp(path, route->path) == 0)
                return route;
            continue;
        }
        size_t n = strlen(route->path);
        assert(n > 0);
        assert(route->path[n - 1] == '/');
        if (strncmp(path, route->path, n) == 0 && path[n] != '\0') {
            *key_encoded = path + n;
            return route;
        }
    }
    return router_not_found(router);
}

uint32_t router_index(const struct router *router, const struct route *route)
{
    assert(route >= router->routes);
    assert(route < router->routes + router->count);
    return (uint32_t)(route - router->routes);
}

const struct route *router_not_found(const struct router *router)
{
    const struct route *route = &router->routes[router->count - 1];
    assert(route->handler == NULL);
    return route;
}

void route_allow(const struct route *route, char *out, size_t out_size)
{
    static const struct {
        enum http_method method;
        const char *name;
    } names[] = {{HTTP_GET, "GET"}, {HTTP_HEAD, "HEAD"},     {HTTP_POST, "POST"},
                 {HTTP_PUT, "PUT"}, {HTTP_DELETE, "DELETE"}, {HTTP_PATCH, "PATCH"}};
    assert(out_size >= 64);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if ((route->methods & names[i].method) == 0)
            continue;
        int n = snprintf(out + used, out_size - used, "%s%s", used > 0 ? ", " : "", names[i].name);
        assert(n > 0);
        assert((size_t)n < out_size - used);
        used += (size_t)n;
    }
}

int percent_decode(const char *in, char *out, size_t out_size, size_t *out_length)
{
    assert(in != NULL);
    assert(out_size >= 1);
    size_t n = 0;
    for (size_t i = 0; in[i] != '\0'; i++) {
        char c = in[i];
        if (c == '%') {
            int high = hex_digit_value(in[i + 1]);
            int low = high < 0 ? -1 : hex_digit_value(in[i + 2]);
            if (low < 0 || (high == 0 && low == 0))
                return -1;
            c = (char)(high * 16 + low);
            i += 2;
        }
        if (n + 1 >= out_size)
            return -2;
        out[n++] = c;
    }
    assert(n < out_size);
    out[n] = '\0';
    *out_length = n;
    return 0;
}
