/* Every bound of the sqlite backend in one place: the writer's queue and
 * batches, the connections and their WAL, expiry per tick and per request,
 * and the audit log's rows. The bounds every backend shares are in
 * src/core/bounds.h. */
#ifndef LLMLIMIT_BACKEND_SQLITE_BOUNDS_H
#define LLMLIMIT_BACKEND_SQLITE_BOUNDS_H

#define SQ_QUEUE_ITEMS_MAX 16384 /* calls waiting for the writer; past it: 503 */
#define SQ_GROUP_COMMIT_MAX 1024 /* requests per transaction (at least one call) */
#define SQ_SKIPS_MAX 64          /* failing requests one transaction is redone without */
#define SQ_BUSY_TIMEOUT_MS 5000
#define SQ_CACHE_KIB 65536                   /* page cache of the write connection */
#define SQ_WAL_BYTES_KEPT (80 * 1024 * 1024) /* journal_size_limit: above the largest WAL */
#define SQ_CHECKPOINT_PAGES 1024             /* WAL pages that trigger a background checkpoint */
#define SQ_WAL_PAGES_MAX 16384               /* WAL pages at which the writer restarts the WAL */
#define SQ_RESTART_LAG_PAGES 256             /* ... once at most this many are left to checkpoint */
#define SQ_EXPIRIES_PER_TICK_MAX 4096        /* holds one tick() expires; the rest next time */
#define SQ_EXPIRIES_PER_REQUEST 8   /* due holds a reserve expires per limit when it fits */
#define SQ_CALLERS_MAX 10000        /* rows of one usage-by-caller answer */
#define SQ_LEASE_CACHE_MAX 4096     /* leases one transaction keeps in memory before writing */
#define SQ_RETENTION_DAYS_MAX 36600 /* --sqlite-retention-days */
#define SQ_PRUNE_ROWS_PER_TICK 4096 /* leases and event rows one tick deletes, each */
#define SQ_EVENT_ITEMS 1024 /* audit events per event_log row; event id = row id * this + index */
#define SQ_FREED_LIMITS_MAX                                                                        \
    256 /* limits one transaction tells the wait layer about; past it: any */

#endif
