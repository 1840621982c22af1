/* Routing of llmlimitd (docs/api.md): a route is one row of a table that
 * owns its path, the methods it answers, the token it needs and its handler;
 * this module matches a request's path against such a table and decodes the
 * percent-encoded {key} of item routes and query arguments. The table itself
 * is routes.c: adding a route is adding a row there. */
#ifndef LLMLIMIT_SERVER_ROUTER_H
#define LLMLIMIT_SERVER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http_head.h"

#include "auth.h"

enum route_flag {
    ROUTE_ITEM = 1,            /* path is a prefix; the rest of the path is the {key} */
    ROUTE_ERROR_HAS_OK = 2,    /* error bodies carry "ok": false (complete, release) */
    ROUTE_TEST_CLOCK_ONLY = 4, /* exists only with --test-clock */
    ROUTE_TEXT = 8,            /* a 200 is Prometheus text, not JSON */
    ROUTE_NO_STORE = 16,       /* answers are never cached, never sniffed (the console's data) */
};

struct exchange;
struct gw_route;
typedef int (*route_handler)(struct exchange *exchange);

struct route {
    const char *name; /* its label in metrics and logs */
    const char *path;
    unsigned methods; /* enum http_method bits */
    enum auth_need auth;
    unsigned flags; /* enum route_flag bits */
    route_handler handler;
    /* A gateway route: its dialect's row (error bodies in its shape,
     * gateway/gw_dialect.h); NULL for the others. */
    const struct gw_route *gateway;
};

/* A table of routes; the last one is the answer for every path no other
 * route has (404), with no handler. */
struct router {
    const struct route *routes;
    uint32_t count; /* including the not-found route, at most ROUTES_MAX */
};

#define ROUTES_MAX 64

/* The route of a path (the query string already cut off by the HTTP
 * layer); *key_encoded points at the still-encoded {key} of item routes,
 * else NULL. Never NULL: the not-found route when nothing matches. */
const struct route *router_find(const struct router *router, const char *path,
                                const char **key_encoded);
/* Its position in the table, for per-route counters. */
uint32_t router_index(const struct router *router, const struct route *route);
const struct route *router_not_found(const struct router *router);

/* The value of the Allow header of a 405: the route's methods, ", "
 * between them. out has room for 64 bytes. */
void route_allow(const struct route *route, char *out, size_t out_size);

/* Strict percent-decoding: "%" must be followed by two hex digits and may not
 * encode NUL. Returns 0 with the decoded, NUL-terminated text in out, or -1
 * (bad escape or NUL) or -2 (longer than out_size - 1). */
int percent_decode(const char *in, char *out, size_t out_size, size_t *out_length);

#endif
