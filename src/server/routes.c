/* Route matching by exact path (and one prefix per item route): no regex,
 * no allocation, a handful of string compares per request. */
#include "routes.h"

#include <string.h>

struct route_info {
    const char *name;
    unsigned methods;
    const char *allow;
    enum auth_need auth;
};

static const struct route_info routes[ROUTE_COUNT] = {
    [ROUTE_RESERVE] = {"reserve", METHOD_POST, "POST", AUTH_CLIENT},
    [ROUTE_COMPLETE] = {"complete", METHOD_POST, "POST", AUTH_CLIENT},
    [ROUTE_RELEASE] = {"release", METHOD_POST, "POST", AUTH_CLIENT},
    [ROUTE_RESERVE_BATCH] = {"reserve_batch", METHOD_POST, "POST", AUTH_CLIENT},
    [ROUTE_COMPLETE_BATCH] = {"complete_batch", METHOD_POST, "POST", AUTH_CLIENT},
    [ROUTE_ADMIN_LIMITS] = {"admin_limits", METHOD_GET | METHOD_HEAD | METHOD_PUT, "GET, HEAD, PUT",
                            AUTH_ADMIN},
    [ROUTE_ADMIN_LIMIT] = {"admin_limit", METHOD_GET | METHOD_HEAD | METHOD_DELETE,
                           "GET, HEAD, DELETE", AUTH_ADMIN},
    [ROUTE_ADMIN_CLOCK] = {"admin_clock", METHOD_POST, "POST", AUTH_ADMIN},
    [ROUTE_USAGE] = {"usage", METHOD_GET | METHOD_HEAD, "GET, HEAD", AUTH_CLIENT},
    [ROUTE_EVENTS] = {"events", METHOD_GET | METHOD_HEAD, "GET, HEAD", AUTH_CLIENT},
    [ROUTE_METRICS] = {"metrics", METHOD_GET | METHOD_HEAD, "GET, HEAD", AUTH_CLIENT},
    [ROUTE_HEALTHZ] = {"healthz", METHOD_GET | METHOD_HEAD, "GET, HEAD", AUTH_NONE},
    [ROUTE_READYZ] = {"readyz", METHOD_GET | METHOD_HEAD, "GET, HEAD", AUTH_NONE},
    [ROUTE_NOT_FOUND] = {"not_found", ~0u, "", AUTH_NONE},
};

static const struct {
    const char *path;
    enum route route;
} exact[] = {
    {"/v1/reserve", ROUTE_RESERVE},
    {"/v1/complete", ROUTE_COMPLETE},
    {"/v1/release", ROUTE_RELEASE},
    {"/v1/reserve/batch", ROUTE_RESERVE_BATCH},
    {"/v1/complete/batch", ROUTE_COMPLETE_BATCH},
    {"/v1/admin/limits", ROUTE_ADMIN_LIMITS},
    {"/v1/admin/clock", ROUTE_ADMIN_CLOCK},
    {"/v1/events", ROUTE_EVENTS},
    {"/metrics", ROUTE_METRICS},
    {"/healthz", ROUTE_HEALTHZ},
    {"/readyz", ROUTE_READYZ},
};

enum route route_find(const char *path, const char **key_encoded)
{
    *key_encoded = NULL;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        if (strcmp(path, exact[i].path) == 0)
            return exact[i].route;
    }
    static const char limit_prefix[] = "/v1/admin/limits/";
    static const char usage_prefix[] = "/v1/usage/";
    if (strncmp(path, limit_prefix, sizeof limit_prefix - 1) == 0 &&
        path[sizeof limit_prefix - 1] != '\0') {
        *key_encoded = path + sizeof limit_prefix - 1;
        return ROUTE_ADMIN_LIMIT;
    }
    if (strncmp(path, usage_prefix, sizeof usage_prefix - 1) == 0 &&
        path[sizeof usage_prefix - 1] != '\0') {
        *key_encoded = path + sizeof usage_prefix - 1;
        return ROUTE_USAGE;
    }
    return ROUTE_NOT_FOUND;
}

enum method method_parse(const char *method)
{
    if (strcmp(method, "POST") == 0)
        return METHOD_POST;
    if (strcmp(method, "GET") == 0)
        return METHOD_GET;
    if (strcmp(method, "PUT") == 0)
        return METHOD_PUT;
    if (strcmp(method, "DELETE") == 0)
        return METHOD_DELETE;
    if (strcmp(method, "HEAD") == 0)
        return METHOD_HEAD;
    return METHOD_OTHER;
}

unsigned route_methods(enum route route)
{
    return routes[route].methods;
}

const char *route_allow(enum route route)
{
    return routes[route].allow;
}

enum auth_need route_auth(enum route route)
{
    return routes[route].auth;
}

const char *route_name(enum route route)
{
    return routes[route].name;
}

bool route_error_has_ok(enum route route)
{
    return route == ROUTE_COMPLETE || route == ROUTE_RELEASE;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int percent_decode(const char *in, char *out, size_t out_size, size_t *out_length)
{
    size_t n = 0;
    for (size_t i = 0; in[i] != '\0'; i++) {
        char c = in[i];
        if (c == '%') {
            int high = hex_value(in[i + 1]);
            int low = high < 0 ? -1 : hex_value(in[i + 2]);
            if (low < 0 || (high == 0 && low == 0))
                return -1;
            c = (char)(high * 16 + low);
            i += 2;
        }
        if (n + 1 >= out_size)
            return -2;
        out[n++] = c;
    }
    out[n] = '\0';
    *out_length = n;
    return 0;
}
