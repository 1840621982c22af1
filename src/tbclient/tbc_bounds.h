/* Every bound of the TigerBeetle client in one place: protocol limits
 * fixed by the server, and the deadlines and sizes this client chooses
 * (docs/tigerbeetle.md, docs/tigerbeetle-protocol.md). Each has a test that
 * goes one past it where it can be crossed. */
#ifndef LLMLIMIT_TBCLIENT_BOUNDS_H
#define LLMLIMIT_TBCLIENT_BOUNDS_H

#include <stdint.h>

/* Protocol (docs/tigerbeetle-protocol.md "Framing"): a message is a 256-byte
 * header and a body; 1 MiB in all. */
#define TBC_HEADER_SIZE 256
#define TBC_MESSAGE_SIZE_MAX (1024 * 1024)
#define TBC_BODY_SIZE_MAX (TBC_MESSAGE_SIZE_MAX - TBC_HEADER_SIZE)
/* Events per request: 0.15.3 takes 8190, 0.17 multi-batch ops 8189; the
 * lower one works on both (docs/tigerbeetle-protocol.md "Operations and
 * batch limits"). */
#define TBC_BATCH_EVENTS_MAX 8189
/* Accounts and transfers are 128 bytes on the wire, ids 16. */
#define TBC_EVENT_SIZE 128
#define TBC_ID_SIZE 16
#define TBC_REGISTER_BODY_SIZE 256
/* A 0.17 register reply announces its batch_size_limit; anything below a
 * 4 KiB request is not a server we can talk to. */
#define TBC_BATCH_SIZE_LIMIT_MIN (4096 - TBC_HEADER_SIZE)

/* Addresses in --tb-addresses (TigerBeetle clusters have at most 6 replicas). */
#define TBC_REPLICAS_MAX 6
#define TBC_ADDRESS_LENGTH_MAX 255

/* Sessions: each holds one of the cluster's 64 client slots (clients_max),
 * shared by every front end; a few per front end are plenty. */
#define TBC_SESSIONS_MAX 64
#define TBC_SESSIONS_DEFAULT 4

/* Deadlines (monotonic milliseconds). A data-path item that has not been
 * answered by then fails with "outcome unknown" (HTTP 503); the backend's
 * --tb-deadline-ms, within these bounds, sets it (docs/tigerbeetle.md). */
#define TBC_ITEM_DEADLINE_MS 2000
#define TBC_ITEM_DEADLINE_MS_MIN 100
#define TBC_ITEM_DEADLINE_MS_MAX 60000
#define TBC_CONNECT_TIMEOUT_MS 500
/* First retransmission after this long, then doubling up to the max. */
#define TBC_RETRANSMIT_MS_MIN 300
#define TBC_RETRANSMIT_MS_MAX 1000
/* A registered session pings every replica this often: it keeps the
 * connections known to be alive and learns a view change before its next
 * request goes to a primary that is gone (TigerBeetle's own client pings
 * every 30 s; a ping is one 256-byte header). */
#define TBC_PING_INTERVAL_MS 1000
/* A request that outlived its items keeps being retransmitted (so the
 * session survives a server restart); after this long it is dropped with
 * the session. */
#define TBC_STALE_REQUEST_MS_MAX 60000
/* When no session has been connected for this long, new work fails at once
 * instead of waiting for its deadline. */
#define TBC_FAIL_FAST_AFTER_MS 250
/* The same for admin work (puts, provisioning): a cluster that is starting
 * (or restarting) is worth a few seconds. */
#define TBC_PATIENT_FAIL_AFTER_MS 3000
/* 0.15.3 runs pending-transfer expiry only when a request arrives: an idle
 * front end sends a small lookup this often. */
#define TBC_KEEPALIVE_MS 100

/* When to start another request while one is in flight. TigerBeetle runs
 * requests one after the other, each with a fixed cost (its own prepare,
 * journal write and commit), so one large request beats several small
 * ones: with a request out, waiting work goes out on another session only
 * once this many events wait, or when the request out has taken this long
 * (a slow or lost request must not hold everything up). */
#define TBC_EAGER_EVENTS 1024
#define TBC_STALL_MS 50
/* With nothing in flight, work goes at once, unless the last batch was
 * large (callers answered together come back together): then it waits
 * from that batch's answer until as many items are queued, at most twice
 * the last round trip (callers behind HTTP take longer to come back than
 * the cluster takes to answer) and never more than TBC_LINGER_US_MAX.
 * Larger batches cost the cluster less per reserve (docs/benchmarks-history.md). */
#define TBC_LINGER_BATCH_MIN 8
#define TBC_LINGER_US_MAX 10000

/* Work waiting for a session, in items; a full queue answers 503. */
#define TBC_QUEUE_ITEMS_MAX 65536

#endif
