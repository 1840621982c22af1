/* libFuzzer harness: request paths as llmlimitd routes them, and the strict
 * percent-decoding of the {key} in /v1/usage/{key} and
 * /v1/admin/limits/{key} (docs/api.md "Conventions": keys in the URL are
 * percent-encoded). Checks the decoder's bounds and that encoding a decoded
 * key and decoding it again gives the same bytes. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bounds.h"
#include "wire/decode.h"
#include "server/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PATH_BYTES_MAX 4096

/* Every byte outside [A-Za-z0-9-._~] as %XX. */
static void percent_encode(const char *in, size_t length, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)in[i];
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '.' || c == '_' || c == '~';
        if (plain) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
}

static void check_key(const char *encoded)
{
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    size_t length = 0;
    int decoded = percent_decode(encoded, key, sizeof key, &length);
    assert(decoded == 0 || decoded == -1 || decoded == -2);
    if (decoded != 0)
        return;
    assert(length < sizeof key);
    assert(strlen(key) == length); /* never a NUL inside */
    assert(length <= strlen(encoded));
    /* the exact fit succeeds, one byte less is -2 */
    char tight[LIMIT_KEY_LENGTH_MAX + 1];
    size_t tight_length = 0;
    assert(percent_decode(encoded, tight, length + 1, &tight_length) == 0);
    assert(tight_length == length && memcmp(tight, key, length) == 0);
    if (length > 0) /* out_size 0 is outside the contract (room for the NUL) */
        assert(percent_decode(encoded, tight, length, &tight_length) == -2);
    char again_encoded[3 * LIMIT_KEY_LENGTH_MAX + 1];
    percent_encode(key, length, again_encoded);
    char again[LIMIT_KEY_LENGTH_MAX + 1];
    size_t again_length = 0;
    assert(percent_decode(again_encoded, again, sizeof again, &again_length) == 0);
    assert(again_length == length && memcmp(again, key, length) == 0);
}

static int no_handler(struct exchange *exchange)
{
    (void)exchange;
    return -1;
}

/* The shapes of the server's table (src/server/routes.c): exact paths, item
 * routes whose rest is a {key}, the not-found row last. */
static const struct route rows[] = {
    {"reserve", "/v1/reserve", HTTP_POST, AUTH_CLIENT, 0, no_handler, NULL},
    {"reserve_batch", "/v1/reserve/batch", HTTP_POST, AUTH_CLIENT, 0, no_handler, NULL},
    {"admin_limits", "/v1/admin/limits", HTTP_GET, AUTH_ADMIN, 0, no_handler, NULL},
    {"admin_limit", "/v1/admin/limits/", HTTP_GET, AUTH_ADMIN, ROUTE_ITEM, no_handler, NULL},
    {"usage", "/v1/usage/", HTTP_GET, AUTH_CLIENT, ROUTE_ITEM, no_handler, NULL},
    {"not_found", "", ~0u, AUTH_NONE, 0, NULL, NULL},
};
static const struct router router = {rows, sizeof rows / sizeof rows[0]};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > PATH_BYTES_MAX)
        return 0;
    char path[PATH_BYTES_MAX + 1];
    memcpy(path, data, size);
    path[size] = '\0'; /* the HTTP layer hands over a C string */
    const char *key_encoded = NULL;
    const struct route *route = router_find(&router, path, &key_encoded);
    assert(router_index(&router, route) < router.count);
    if ((route->flags & ROUTE_ITEM) != 0) {
        assert(key_encoded != NULL && key_encoded[0] != '\0');
        assert(key_encoded > path && key_encoded < path + size + 1);
    } else {
        assert(key_encoded == NULL);
    }
    assert(route->name != NULL);
    assert(route->handler != NULL || route == router_not_found(&router));
    check_key(key_encoded != NULL ? key_encoded : path);
    int64_t value;
    if (decode_i64(path, &value) == 0) { /* a query argument such as at_unix_ms */
        char printed[32];
        snprintf(printed, sizeof printed, "%lld", (long long)value);
        assert(strlen(path) >= 1);
    }
    return 0;
}
