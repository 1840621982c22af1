/* The route table of llmlimitd (SPEC section 6; docs/api.md): path matching,
 * allowed methods, the token each route needs, and percent-decoding of the
 * {key} in paths and of query arguments. */
#ifndef LLMLIMIT_SERVER_ROUTES_H
#define LLMLIMIT_SERVER_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "auth.h"

enum route {
    ROUTE_RESERVE = 0,
    ROUTE_COMPLETE,
    ROUTE_RELEASE,
    ROUTE_RESERVE_BATCH,
    ROUTE_COMPLETE_BATCH,
    ROUTE_ADMIN_LIMITS, /* /v1/admin/limits */
    ROUTE_ADMIN_LIMIT,  /* /v1/admin/limits/{key} */
    ROUTE_ADMIN_CLOCK,  /* /v1/admin/clock, only with --test-clock */
    ROUTE_USAGE,        /* /v1/usage/{key} */
    ROUTE_EVENTS,
    ROUTE_METRICS,
    ROUTE_HEALTHZ,
    ROUTE_READYZ,
    ROUTE_NOT_FOUND,
    ROUTE_COUNT,
};

enum method {
    METHOD_GET = 1,
    METHOD_HEAD = 2,
    METHOD_POST = 4,
    METHOD_PUT = 8,
    METHOD_DELETE = 16,
    METHOD_OTHER = 32,
};

/* The route of a path (query string already cut off by the HTTP layer);
 * *key_encoded points at the still-encoded {key} of item routes. */
enum route route_find(const char *path, const char **key_encoded);
enum method method_parse(const char *method);
/* Bitmask of enum method the route answers. */
unsigned route_methods(enum route route);
/* Value of the Allow header of a 405. */
const char *route_allow(enum route route);
enum auth_need route_auth(enum route route);
/* Label of the route in metrics. */
const char *route_name(enum route route);
/* Does the route's error body carry "ok": false (complete and release)? */
bool route_error_has_ok(enum route route);

/* Strict percent-decoding: "%" must be followed by two hex digits and may not
 * encode NUL. Returns 0 with the decoded, NUL-terminated text in out, or -1
 * (bad escape or NUL) or -2 (longer than out_size - 1). */
int percent_decode(const char *in, char *out, size_t out_size, size_t *out_length);

#endif
