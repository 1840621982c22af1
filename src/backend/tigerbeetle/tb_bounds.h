/* The bounds of the tigerbeetle backend (those of its client library are
 * src/tbclient/tbc_bounds.h). Each has a test that goes one past it where
 * it can be crossed. */
#ifndef LLMLIMIT_TB_BOUNDS_H
#define LLMLIMIT_TB_BOUNDS_H

#include <stdint.h>

#include "tbclient/tbc_bounds.h"

/* Admin calls (puts, provisioning) wait this long for the cluster. */
#define TB_ADMIN_DEADLINE_MS 5000
/* open() waits this long for a first session (not an error if none). */
#define TB_OPEN_READY_WAIT_MS 500

/* Holds remembered per limit for retry_after (docs/tigerbeetle.md
 * "Retry-after"). */
#define TB_HOLD_TRACK_MAX 4096

/* Reserves answered 503 whose request may still land, remembered (by a
 * hash of the lease id, one slot each, a newer one taking an older one's
 * slot) so a retry is not denied while that request could still hold. */
#define TB_DOUBT_SLOTS 1024

/* Events of one job's request: a complete may use up to 3 per hold (void,
 * re-reserve, used) plus 2 settles per budget hold; 64 holds at most. */
#define TB_JOB_EVENTS_MAX (5 * 64)
/* Ids of one job's lookup: a lease's holds plus the accounts around them. */
#define TB_JOB_LOOKUP_MAX (3 * 64)
/* Finished jobs kept for reuse (about 45 KiB each): as many as a busy
 * front end has in flight, so a job is no malloc and no fresh pages. */
#define TB_JOB_POOL_MAX 256
/* A complete/release that misses the lease cache looks the lease's
 * transfers up under every limit key, this many ids per request. */
#define TB_SCAN_IDS_MAX 8189

#endif
