/* Bearer tokens (docs/api.md "Authentication"): loaded once at startup from a
 * file or the environment, compared in constant time on every request. */
#ifndef LLMLIMIT_SERVER_AUTH_H
#define LLMLIMIT_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "server_bounds.h"

struct auth {
    char admin_token[TOKEN_BYTES_MAX + 1];
    size_t admin_token_length; /* 0: none configured */
    char client_token[TOKEN_BYTES_MAX + 1];
    size_t client_token_length;
    bool loopback; /* the listen address is loopback */
};

enum auth_need {
    AUTH_NONE,   /* /healthz, /readyz */
    AUTH_CLIENT, /* data routes and /metrics: client or admin token, if a client token is set */
    AUTH_ADMIN,  /* admin routes: the admin token */
    AUTH_GATEWAY, /* gateway routes: the handler checks the caller's virtual key itself */
};

enum auth_outcome {
    AUTH_OK = 0,
    AUTH_UNAUTHORIZED = -1,   /* missing or wrong token */
    AUTH_ADMIN_REQUIRED = -2, /* no admin token configured and not on loopback */
};

/* Loads a token: from `file` when not NULL (trailing CR/LF trimmed), else
 * from environment variable `env` (unset or empty: no token). Returns 0, or
 * -1 with a reason in error (unreadable, empty or oversized file). */
int auth_load_token(const char *file, const char *env, char *token, size_t *length, char *error,
                    size_t error_size);

/* authorization: the Authorization header or NULL. */
enum auth_outcome auth_check(const struct auth *auth, enum auth_need need,
                             const char *authorization);

/* Equality whose time depends only on the expected token's length, not on
 * where the first difference is or on the presented length. */
bool auth_token_equal(const char *presented, size_t presented_length, const char *expected,
                      size_t expected_length);

#endif
