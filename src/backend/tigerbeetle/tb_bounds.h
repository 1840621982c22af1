/* Every bound of the TigerBeetle backend in one place: protocol limits
 * fixed by the server, and the deadlines and sizes this client chooses.
 * Each has a test that goes one past it where it can be crossed. */
#ifndef LLMLIMIT_TB_BOUNDS_H
#define LLMLIMIT_TB_BOUNDS_H

#include <stdint.h>

/* Protocol (docs/tigerbeetle-protocol.md "Framing"): a message is a 256-byte
 * header and a body; 1 MiB in all. */
#define TB_HEADER_SIZE 256
#define TB_MESSAGE_SIZE_MAX (1024 * 1024)
#define TB_BODY_SIZE_MAX (TB_MESSAGE_SIZE_MAX - TB_HEADER_SIZE)
/* Events per request: 0.15.3 takes 8190, 0.17 multi-batch ops 8189; the
 * lower one works on both (docs/tigerbeetle-protocol.md "Operations and
 * batch limits"). */
#define TB_BATCH_EVENTS_MAX 8189
/* Accounts and transfers are 128 bytes on the wire, ids 16. */
#define TB_EVENT_SIZE 128
#define TB_ID_SIZE 16
#define TB_REGISTER_BODY_SIZE 256
/* A 0.17 register reply announces its batch_size_limit; anything below a
 * 4 KiB request is not a server we can talk to. */
#define TB_BATCH_SIZE_LIMIT_MIN (4096 - TB_HEADER_SIZE)

/* Addresses in --tb-addresses (TigerBeetle clusters have at most 6 replicas). */
#define TB_REPLICAS_MAX 6
#define TB_ADDRESS_LENGTH_MAX 255

/* Sessions: each holds one of the cluster's 64 client slots (clients_max),
 * shared by every front end; a few per front end are plenty. */
#define TB_SESSIONS_MAX 64
#define TB_SESSIONS_DEFAULT 4

/* Deadlines (monotonic milliseconds). A data-path item that has not been
 * answered by then fails with "outcome unknown" (HTTP 503). */
#define TB_ITEM_DEADLINE_MS 2000
#define TB_ADMIN_DEADLINE_MS 5000
#define TB_CONNECT_TIMEOUT_MS 500
/* open() waits this long for a first session (not an error if none). */
#define TB_OPEN_READY_WAIT_MS 500
/* First retransmission after this long, then doubling up to the max. */
#define TB_RETRANSMIT_MS_MIN 300
#define TB_RETRANSMIT_MS_MAX 1000
/* A registered session pings every replica this often: it keeps the
 * connections known to be alive and learns a view change before its next
 * request goes to a primary that is gone (TigerBeetle's own client pings
 * every 30 s; a ping is one 256-byte header). */
#define TB_PING_INTERVAL_MS 1000
/* A request that outlived its items keeps being retransmitted (so the
 * session survives a server restart); after this long it is dropped with
 * the session. */
#define TB_STALE_REQUEST_MS_MAX 60000
/* When no session has been connected for this long, new work fails at once
 * instead of waiting for its deadline. */
#define TB_FAIL_FAST_AFTER_MS 250
/* The same for admin work (puts, provisioning): a cluster that is starting
 * (or restarting) is worth a few seconds. */
#define TB_PATIENT_FAIL_AFTER_MS 3000
/* 0.15.3 runs pending-transfer expiry only when a request arrives: an idle
 * front end sends a small lookup this often. */
#define TB_KEEPALIVE_MS 100

/* When to start another request while one is in flight. TigerBeetle runs
 * requests one after the other, each with a fixed cost (its own prepare,
 * journal write and commit), so one large request beats several small
 * ones: with a request out, waiting work goes out on another session only
 * once this many events wait, or when the request out has taken this long
 * (a slow or lost request must not hold everything up). */
#define TB_EAGER_EVENTS 1024
#define TB_STALL_MS 50
/* With nothing in flight, work goes at once, unless the last batch was
 * large (callers answered together come back together): then it waits
 * for 3/4 of that many items, at most a quarter of the last round trip
 * and never more than TB_LINGER_US_MAX. */
#define TB_LINGER_BATCH_MIN 8
#define TB_LINGER_US_MAX 2000

/* Work waiting for a session, in items; a full queue answers 503. */
#define TB_QUEUE_ITEMS_MAX 65536

/* Holds remembered per limit for retry_after (docs/tigerbeetle.md
 * "Retry-after"). */
#define TB_HOLD_TRACK_MAX 4096

/* Events of one job's request: a complete may use up to 3 per hold (void,
 * re-reserve, used) plus 2 settles per budget hold; 64 holds at most. */
#define TB_JOB_EVENTS_MAX (5 * 64)
/* Ids of one job's lookup: a lease's holds plus the accounts around them. */
#define TB_JOB_LOOKUP_MAX (3 * 64)
/* A complete/release that misses the lease cache looks the lease's
 * transfers up under every limit key, this many ids per request. */
#define TB_SCAN_IDS_MAX 8189

#endif
