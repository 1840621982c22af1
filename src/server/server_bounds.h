/* The bounds of the server (llmlimitd) in one place: connections and their
 * timeouts, threads, request bodies, the registry file, tokens, shutdown,
 * metrics labels and the console's pages. Those of the wire every layer
 * shares are in src/core/bounds.h. Flags may lower the runtime ones. */
#ifndef LLMLIMIT_SERVER_BOUNDS_H
#define LLMLIMIT_SERVER_BOUNDS_H

/* Connections and requests. */
#define CONNECTIONS_DEFAULT 4096
#define CONNECTION_TIMEOUT_SECONDS_DEFAULT 30
#define CONNECTIONS_MAX 65536                /* ceiling of --max-connections */
#define CONNECTION_TIMEOUT_SECONDS_MAX 86400 /* ceiling of --connection-timeout-seconds */
#define SERVER_THREADS_MAX 64                /* ceiling of --threads */
#define EXCHANGE_POOL_MAX 1024               /* idle request objects kept for reuse */
#define BODY_BYTES_DEFAULT (1024 * 1024)     /* --max-body-bytes */
#define BODY_BYTES_MAX (64 * 1024 * 1024)    /* hard ceiling of that flag */

/* Background work and shutdown. */
#define TICK_INTERVAL_MS 250          /* backend tick: decreases apply within 1 s */
#define SHUTDOWN_DRAIN_MS 10000       /* SIGTERM waits this long for open requests */
#define SHUTDOWN_UPLOAD_GRACE_MS 1000 /* ... and this long for bodies still arriving */
#define OFFLOAD_JOBS_MAX 64           /* limit changes waiting for the offload thread */

/* Files. */
#define REGISTRY_BYTES_MAX (512 * 1024 * 1024) /* limits.json */
#define TOKEN_BYTES_MAX 4096                   /* an admin/client token file */

/* Metrics (docs/api.md "GET /metrics"). */
#define METRICS_DENIAL_KEYS_MAX 1000 /* key labels of llmlimit_reserve_denials_total */
#define METRICS_LIMITS_MAX 1000      /* limits with per-limit gauges in /metrics */

/* The console (docs/console.md): limits per page of GET /v1/console/limits
 * unless asked, the "expiring soon" window, and live holds one scan of a
 * limit visits. */
#define CONSOLE_LIMITS_PAGE_DEFAULT 200
#define CONSOLE_HOLDS_SOON_MS 10000
#define CONSOLE_HOLDS_SCAN_MAX 100000

/* Gateway keys made through the API (docs/api.md "Keys"): how many, what
 * each may carry, their files, a rotation's grace, a list's page. */
#define KEYS_COUNT_MAX 100000   /* keys, revoked ones included */
#define KEYS_MODELS_MAX 64      /* models a key names */
#define KEYS_MCP_SERVERS_MAX 64 /* MCP servers a key names (docs/mcp.md) */
#define KEYS_METADATA_MAX 16    /* metadata entries of a key */
#define KEYS_METADATA_NAME_LENGTH_MAX 64
#define KEYS_METADATA_VALUE_LENGTH_MAX 256
#define KEYS_LIMITS_MAX 16                     /* limits created with a key */
#define KEYS_GRACE_SECONDS_MAX (7 * 24 * 3600) /* a rotation's grace_seconds */
#define KEYS_PAGE_DEFAULT 100                  /* keys of GET /v1/admin/keys unless asked */
#define KEYS_PAGE_MAX 1000
#define KEYS_FILE_BYTES_MAX (512 * 1024 * 1024) /* keys.json, and keys.log */
/* keys.log is folded into keys.json once it holds this many lines more
 * than there are keys: a rewrite of n keys every n + this many changes. */
#define KEYS_LOG_LINES_MIN 1024
/* Changes written to keys.log and made durable by one fdatasync (group
 * commit): those that arrive while a sync runs. The offload queue holds
 * fewer (OFFLOAD_JOBS_MAX); a batch this full is synced before another
 * change joins it. */
#define KEYS_BATCH_MAX 64

#endif
