/* Token loading and constant-time checks. A token never reaches a log line. */
#include "auth.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int auth_load_token(const char *file, const char *env, char *token, size_t *length, char *error,
                    size_t error_size)
{
    assert(env != NULL);
    assert(token != NULL);
    assert(length != NULL);
    *length = 0;
    token[0] = '\0';
    if (file == NULL) {
        const char *value = getenv(env);
        if (value == NULL || value[0] == '\0')
            return 0;
        size_t n = strlen(value);
        if (n > TOKEN_BYTES_MAX) {
            snprintf(error, error_size, "%s: longer than %d bytes", env, TOKEN_BYTES_MAX);
            return -1;
        }
        memcpy(token, value, n + 1);
        *length = n;
        return 0;
    }
    FILE *f = fopen(file, "rb");
    if (f == NULL) {
        snprintf(error, error_size, "%s: %s", file, strerror(errno));
        return -1;
    }
    size_t n = fread(token, 1, TOKEN_BYTES_MAX + 1, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed || n > TOKEN_BYTES_MAX) {
        if (failed)
            snprintf(error, error_size, "%s: read error", file);
        else
            snprintf(error, error_size, "%s: longer than %d bytes", file, TOKEN_BYTES_MAX);
        return -1;
    }
    while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r'))
        n--;
    token[n] = '\0';
    if (n == 0 || memchr(token, '\0', n) != NULL) {
        snprintf(error, error_size, "%s: empty or not a text token", file);
        return -1;
    }
    assert(n <= TOKEN_BYTES_MAX);
    *length = n;
    return 0;
}

bool auth_token_equal(const char *presented, size_t presented_length, const char *expected,
                      size_t expected_length)
{
    /* The loop always runs over the expected length; bytes past the presented
     * length compare against 0, and a length difference is folded in without
     * an early exit. */
    assert(presented != NULL || presented_length == 0);
    assert(expected != NULL);
    volatile uint8_t diff = (uint8_t)(presented_length != expected_length);
    for (size_t i = 0; i < expected_length; i++) {
        uint8_t p = i < presented_length ? (uint8_t)presented[i] : 0;
        diff |= (uint8_t)(p ^ (uint8_t)expected[i]);
    }
    return diff == 0;
}

/* The token of "Bearer <token>" (scheme case-insensitive), or NULL. */
static const char *bearer_token(const char *authorization, size_t *length)
{
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *token = authorization + 7;
    while (*token == ' ')
        token++;
    size_t n = strlen(token);
    while (n > 0 && token[n - 1] == ' ')
        n--;
    *length = n;
    return token;
}

enum auth_outcome auth_check(const struct auth *auth, enum auth_need need,
                             const char *authorization)
{
    if (need == AUTH_NONE || need == AUTH_GATEWAY)
        return AUTH_OK;
    if (need == AUTH_CLIENT && auth->client_token_length == 0)
        return AUTH_OK;
    if (need == AUTH_ADMIN && auth->admin_token_length == 0)
        return auth->loopback ? AUTH_OK : AUTH_ADMIN_REQUIRED;
    assert(need == AUTH_CLIENT || need == AUTH_ADMIN);
    size_t length = 0;
    const char *token = bearer_token(authorization, &length);
    if (token == NULL)
        return AUTH_UNAUTHORIZED;
    /* Which comparisons run depends on the configuration only, never on the
     * presented token. */
    bool admin = auth->admin_token_length > 0 &&
                 auth_token_equal(token, length, auth->admin_token, auth->admin_token_length);
    bool client = need == AUTH_CLIENT && auth->client_token_length > 0 &&
                  auth_token_equal(token, length, auth->client_token, auth->client_token_length);
    return (admin || client) ? AUTH_OK : AUTH_UNAUTHORIZED;
}
