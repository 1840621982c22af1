/* Every bound llmlimit enforces, in one place (TigerStyle: a limit on
 * everything). Each one has a test that goes one past it. Flags may lower
 * the runtime ones; the compile-time ones size buffers. */
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

/* sqlite backend. */
#define SQLITE_QUEUE_ITEMS_MAX 16384 /* calls waiting for the writer; past it: 503 */
#define SQLITE_GROUP_COMMIT_MAX 1024 /* requests per transaction (at least one call) */
#define SQLITE_SKIPS_MAX 64          /* failing requests one transaction is redone without */
#define SQLITE_BUSY_TIMEOUT_MS 5000
#define SQLITE_CACHE_KIB 65536                   /* page cache of the write connection */
#define SQLITE_WAL_BYTES_KEPT (80 * 1024 * 1024) /* journal_size_limit: above the largest WAL */
#define SQLITE_CHECKPOINT_PAGES 1024      /* WAL pages that trigger a background checkpoint */
#define SQLITE_WAL_PAGES_MAX 16384        /* WAL pages at which the writer restarts the WAL */
#define SQLITE_RESTART_LAG_PAGES 256      /* ... once at most this many are left to checkpoint */
#define SQLITE_EXPIRIES_PER_TICK_MAX 4096 /* holds one tick() expires; the rest next time */
#define SQLITE_EXPIRIES_PER_REQUEST 8     /* due holds a reserve expires per limit when it fits */
#define SQLITE_CALLERS_MAX 10000          /* rows of one usage-by-caller answer */
#define SQLITE_LEASE_CACHE_MAX 4096     /* leases one transaction keeps in memory before writing */
#define SQLITE_RETENTION_DAYS_MAX 36600 /* --sqlite-retention-days */
#define SQLITE_PRUNE_ROWS_PER_TICK 4096 /* leases and event rows one tick deletes, each */
#define SQLITE_EVENT_ITEMS                                                                         \
    1024 /* audit events per event_log row; event id = row id * this + index */

#endif
