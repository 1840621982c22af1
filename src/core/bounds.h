/* The bounds every layer shares: identifiers, amounts and requests as the
 * wire carries them, limit definitions, the common backend config, and the
 * waiting queue. A limit on everything, so that no input, table or queue can
 * grow without end; each module keeps its own beside its code
 * (src/server/server_bounds.h, src/backend/memory/mem_bounds.h,
 * src/backend/sqlite/sq_bounds.h, src/backend/tigerbeetle/tb_bounds.h,
 * src/tbclient/tbc_bounds.h, src/gateway/gw_bounds.h). Each one has a test
 * that goes one past it. Flags may lower the runtime ones; the compile-time
 * ones size buffers. */
#ifndef LLMLIMIT_BOUNDS_H
#define LLMLIMIT_BOUNDS_H

#include <stdint.h>

/* Identifiers (docs/api.md "Conventions"). Lengths in bytes, excluding the NUL. */
#define LIMIT_KEY_LENGTH_MAX 256
#define LEASE_ID_LENGTH_MAX 128
#define CALLER_LENGTH_MAX 256
#define UNIT_LENGTH_MAX 64
#define DESCRIPTION_LENGTH_MAX 1024
#define TIME_ZONE_LENGTH_MAX 64   /* a budget's time_zone (TZ_NAME_LENGTH_MAX, core/tz.h) */
#define PERIOD_ANCHOR_DAY_MAX 28  /* a month budget's period_anchor_day: every month has it */
#define AUDIT_NAME_LENGTH_MAX 128 /* an MCP server's or tool's name in the audit log */

/* Amounts: requirement amounts and capacities are 1..AMOUNT_MAX, actual
 * amounts 0..AMOUNT_MAX. */
#define AMOUNT_MAX ((uint64_t)INT64_MAX)

/* Requests. */
#define REQUIREMENTS_PER_RESERVE_MAX 64
#define BATCH_REQUIREMENTS_MAX 8189 /* all requirements of one batch */
#define BATCH_ITEMS_MAX 8189        /* requests in one batch */
#define JSON_DEPTH_MAX 8

/* Limits in the registry. */
#define LIMITS_COUNT_MAX 100000

/* Lease cache of the memory and tigerbeetle backends (--lease-cache-max). */
#define LEASE_CACHE_ENTRIES_DEFAULT 1000000
#define LEASE_CACHE_ENTRIES_MAX (UINT32_C(1) << 28) /* ceiling of lease_cache_entries */
#define LEASE_RETENTION_MS_DEFAULT (3600 * 1000)

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
 * (--max-waiters), how long at a time a limit's waiters hold back later
 * requests (--wait-hold-ms, at most WAIT_MS_MAX), and the cap of the
 * backoff with which waiters on a backend that cannot see every release
 * (tigerbeetle) ask again. */
#define WAIT_MS_MAX 60000
#define WAIT_PRIORITIES 10 /* 0..9, 0 first */
#define WAIT_PRIORITY_DEFAULT 5
#define WAIT_WAITERS_DEFAULT 10000
#define WAIT_WAITERS_MAX 1000000
#define WAIT_HOLD_MS_DEFAULT 10000
#define WAIT_REMOTE_RETRY_MS_MIN 10
#define WAIT_REMOTE_RETRY_MS_MAX 1000

/* The console's page of limits (struct limits_query.limit). */
#define CONSOLE_LIMITS_PAGE_MAX 1000

#endif
