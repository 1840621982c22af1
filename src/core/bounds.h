/* The bounds llmlimit enforces, in one place: a limit on everything, so that
 * no input, table or queue can grow without end (the sqlite and tigerbeetle
 * backends keep their own beside their code: src/backend/sqlite/sq_bounds.h,
 * src/backend/tigerbeetle/tb_bounds.h). Each one has a test that goes one
 * past it. Flags may lower the runtime ones; the compile-time ones size
 * buffers. */
#ifndef LLMLIMIT_BOUNDS_H
#define LLMLIMIT_BOUNDS_H

#include <stdint.h>

/* Identifiers (docs/api.md "Conventions"). Lengths in bytes, excluding the NUL. */
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
#define BODY_BYTES_DEFAULT (1024 * 1024)  /* --max-body-bytes */
#define BODY_BYTES_MAX (64 * 1024 * 1024) /* hard ceiling of that flag */

/* Limits in the registry. */
#define LIMITS_COUNT_MAX 100000

/* Lease cache of the memory and tigerbeetle backends (--lease-cache-max). */
#define LEASE_CACHE_ENTRIES_DEFAULT 1000000
#define LEASE_RETENTION_MS_DEFAULT (3600 * 1000)

/* Memory backend: live holds across all limits (the pool grows in chunks up
 * to this), past budget periods kept per limit for usage queries, and holds
 * walked to compute an exact retry_after before falling back to an upper
 * bound. */
#define MEMORY_HOLDS_MAX (UINT32_C(1) << 24)
#define MEMORY_LEASE_CACHE_ENTRIES_MAX (UINT32_C(1) << 28) /* ceiling of lease_cache_entries */
#define BUDGET_PERIODS_KEPT 25 /* the current period and the 24 before it */
#define RETRY_WALK_HOLDS_MAX 4096

/* Budget reservation timeout (docs/semantics.md "Budgets"). */
#define BUDGET_TIMEOUT_SECONDS_DEFAULT 60
#define BUDGET_TIMEOUT_SECONDS_MIN 5
#define BUDGET_TIMEOUT_SECONDS_MAX 300

/* Window/timeout upper bound: one year, so expiry arithmetic never overflows. */
#define WINDOW_SECONDS_MAX (366 * 24 * 3600)

/* Retry-after (docs/semantics.md "retry_after_ms"). */
#define CONCURRENCY_POLL_MS_DEFAULT 250
#define POLL_MS_MAX 60000 /* ceiling of --concurrency-poll-ms */
#define DECREASE_RETRY_MS_DEFAULT 10000

/* Waiting for capacity (docs/semantics.md "Waiting for capacity", src/wait):
 * a reserve's wait_ms and priority, the waiters held at once
 * (--max-waiters), and the cap of the backoff with which waiters on a
 * backend that cannot see every release (tigerbeetle) ask again. */
#define WAIT_MS_MAX 60000
#define WAIT_PRIORITIES 10 /* 0..9, 0 first */
#define WAIT_PRIORITY_DEFAULT 5
#define WAIT_WAITERS_DEFAULT 10000
#define WAIT_WAITERS_MAX 1000000
#define WAIT_REMOTE_RETRY_MS_MIN 10
#define WAIT_REMOTE_RETRY_MS_MAX 1000

/* Server. */
#define CONNECTIONS_DEFAULT 4096
#define CONNECTION_TIMEOUT_SECONDS_DEFAULT 30
#define CONNECTIONS_MAX 65536                  /* ceiling of --max-connections */
#define CONNECTION_TIMEOUT_SECONDS_MAX 86400   /* ceiling of --connection-timeout-seconds */
#define SERVER_THREADS_MAX 64                  /* ceiling of --threads */
#define EXCHANGE_POOL_MAX 1024                 /* idle request objects kept for reuse */
#define CONNECTION_MEMORY_BYTES (16 * 1024)    /* per connection: request line, headers, reads */
#define TICK_INTERVAL_MS 250                   /* backend tick: decreases apply within 1 s */
#define SHUTDOWN_DRAIN_MS 10000                /* SIGTERM waits this long for open requests */
#define SHUTDOWN_UPLOAD_GRACE_MS 1000          /* ... and this long for bodies still arriving */
#define REGISTRY_BYTES_MAX (512 * 1024 * 1024) /* limits.json */
#define TOKEN_BYTES_MAX 4096                   /* an admin/client token file */
#define RESPONSE_BYTES_MAX (512 * 1024 * 1024) /* one HTTP reply (GET /v1/admin/limits) */
#define METRICS_DENIAL_KEYS_MAX 1000           /* key labels of llmlimit_reserve_denials_total */
#define METRICS_LIMITS_MAX 1000                /* limits with per-limit gauges in /metrics */

/* The console (docs/console.md): limits per page of
 * GET /v1/console/limits, holds visited in expiry order for one limit's
 * summary (at most RETRY_WALK_HOLDS_MAX: the walk shares its scratch), the
 * "expiring soon" window, live holds one scan of a limit visits, and the
 * distinct callers the memory backend tells apart. */
#define CONSOLE_LIMITS_PAGE_DEFAULT 200
#define CONSOLE_LIMITS_PAGE_MAX 1000
#define CONSOLE_HOLDS_WALK_MAX 1024
#define CONSOLE_HOLDS_SOON_MS 10000
#define CONSOLE_HOLDS_SCAN_MAX 100000
#define MEMORY_CALLERS_MAX 16384

#endif
