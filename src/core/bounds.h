/* Every bound llmlimit enforces, in one place (TigerStyle: a limit on
 * everything). Each one has a test that goes one past it. Flags may lower
 * the runtime ones; the compile-time ones size buffers. */
#ifndef LLMLIMIT_BOUNDS_H
#define LLMLIMIT_BOUNDS_H

#include <stdint.h>

/* Identifiers (SPEC section 2 and 3). Lengths in bytes, excluding the NUL. */
#define LIMIT_KEY_LENGTH_MAX 256
#define LEASE_ID_LENGTH_MAX 128
#define CALLER_LENGTH_MAX 256
#define UNIT_LENGTH_MAX 64
#define DESCRIPTION_LENGTH_MAX 1024

/* Amounts: requirement amounts and capacities are 1..AMOUNT_MAX, actual
 * amounts 0..AMOUNT_MAX. */
#define AMOUNT_MAX ((uint64_t)INT64_MAX)

/* Requests. */
#define REQUIREMENTS_PER_RESERVE_MAX 64
#define BATCH_REQUIREMENTS_MAX 8189 /* all requirements of one batch */
#define BATCH_ITEMS_MAX 8189        /* requests in one batch */
#define JSON_DEPTH_MAX 8
#define BODY_BYTES_DEFAULT (1024 * 1024)   /* --max-body-bytes */
#define BODY_BYTES_MAX (64 * 1024 * 1024)  /* hard ceiling of that flag */

/* Limits in the registry. */
#define LIMITS_COUNT_MAX 100000

/* Lease cache of the memory and tigerbeetle backends (--lease-cache-max). */
#define LEASE_CACHE_ENTRIES_DEFAULT 1000000
#define LEASE_RETENTION_MS_DEFAULT (3600 * 1000)

/* Budget reservation timeout (SPEC section 3). */
#define BUDGET_TIMEOUT_SECONDS_DEFAULT 60
#define BUDGET_TIMEOUT_SECONDS_MIN 5
#define BUDGET_TIMEOUT_SECONDS_MAX 300

/* Window/timeout upper bound: one year, so expiry arithmetic never overflows. */
#define WINDOW_SECONDS_MAX (366 * 24 * 3600)

/* Retry-after (SPEC section 5). */
#define CONCURRENCY_POLL_MS_DEFAULT 250
#define DECREASE_RETRY_MS_DEFAULT 10000

/* Server. */
#define CONNECTIONS_DEFAULT 4096
#define CONNECTION_TIMEOUT_SECONDS_DEFAULT 30

#endif
