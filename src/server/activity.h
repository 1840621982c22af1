/* Recent reserve activity of llmlimitd, for the console (docs/console.md):
 * a bounded ring of the latest denied reserves (when, which lease and
 * caller, which limits did not fit or which definitive error), and reserves
 * and denials per second over the last minute. Fed by the reserve routes
 * (single and batch) and by the gateway; read by GET /v1/console/denials and
 * GET /v1/console/status. Thread-safe. */
#ifndef LLMLIMIT_SERVER_ACTIVITY_H
#define LLMLIMIT_SERVER_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define ACTIVITY_DENIALS_MAX 256    /* denials kept, newest first out of the ring */
#define ACTIVITY_DENIAL_KEYS_MAX 8  /* keys kept per denial (key_count says how many) */
#define ACTIVITY_SECONDS 64         /* one-second buckets of the throughput ring */
#define ACTIVITY_ERROR_BYTES_MAX 64 /* the error's text, without its key */

enum activity_source {
    ACTIVITY_SOURCE_API = 0,     /* POST /v1/reserve, /v1/reserve/batch */
    ACTIVITY_SOURCE_GATEWAY = 1, /* a gateway call (docs/gateway.md) */
};

/* One denied reserve, as kept. Strings are NUL-terminated. */
struct activity_denial {
    uint64_t id; /* counts up from 1: every denial since start */
    int64_t at_unix_ms;
    enum activity_source source;
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1]; /* "" when the reserve named none */
    /* "" for a capacity denial; else the definitive error's text without
     * its key ("unknown_limit_key: ", "limit_decreasing:",
     * "exceeds_capacity:"), the key being keys[0]. */
    char error[ACTIVITY_ERROR_BYTES_MAX];
    uint32_t key_count; /* keys denied; the first ACTIVITY_DENIAL_KEYS_MAX are kept */
    char keys[ACTIVITY_DENIAL_KEYS_MAX][LIMIT_KEY_LENGTH_MAX + 1];
    uint64_t amounts[ACTIVITY_DENIAL_KEYS_MAX]; /* what each kept key was asked for */
    int64_t retry_after_ms;
};

/* Reserves and denials in one second (at_unix_ms: its start). */
struct activity_second {
    int64_t at_unix_ms;
    uint64_t reserves;
    uint64_t denials;
};

struct activity;

/* A new, empty activity record, or NULL (out of memory). */
struct activity *activity_create(void);
void activity_destroy(struct activity *activity);

/* The contract for every caller of the backend's reserve that answers a
 * client (the reserve routes and the gateway): call activity_reserve once
 * per reserve request, after the backend answered it, with the request and
 * its result as the backend gave them (results with an error that is not a
 * definitive denial, 409 lease_conflict and 503 backend_error, are not
 * answers about capacity and are not counted). It counts one reserve at
 * at_unix_ms, and when the result is a denial (allowed false: capacity or a
 * definitive error) it records the denial. Never fails, never blocks for
 * long (one atomic add; a short mutex for a denial). */
void activity_reserve(struct activity *activity, int64_t at_unix_ms, enum activity_source source,
                      const struct reserve_request *request, const struct reserve_result *result);

/* The two halves of activity_reserve, for callers that answer many
 * reserves at once: count them in one call, record each denial. */
void activity_count(struct activity *activity, int64_t at_unix_ms, uint64_t reserves,
                    uint64_t denials);
void activity_denial(struct activity *activity, int64_t at_unix_ms, enum activity_source source,
                     const struct reserve_request *request, const struct reserve_result *result);

/* The newest denials first, at most max of them, into out; returns how
 * many. *total gets the number of denials since start. */
size_t activity_denials(struct activity *activity, struct activity_denial *out, size_t max,
                        uint64_t *total);

/* The last `count` whole seconds before now_unix_ms, oldest first (at most
 * ACTIVITY_SECONDS - 2: the ring keeps one second of slack each side). */
#define ACTIVITY_SECONDS_REPORTED 60
void activity_seconds(struct activity *activity, int64_t now_unix_ms, struct activity_second *out,
                      uint32_t count);

#endif
