/* The microbatching submitter (docs/tigerbeetle.md, "The native client"): a pool of
 * sessions, each on its own thread with at most one request in flight.
 * Work waits in one queue per operation; a free session takes every item
 * that fits into one request (never splitting an item, so never a linked
 * chain), sends it, and hands each item its own results. While one
 * request is in flight the next batch fills up, so batches grow with load
 * without any timer. Items that are not answered by their deadline fail
 * as "outcome unknown". */
#ifndef LLMLIMIT_TB_SUBMITTER_H
#define LLMLIMIT_TB_SUBMITTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tbc_batch.h"
#include "tbc_session.h"

struct tbc_submitter;

struct tbc_submitter_stats {
    uint64_t requests;      /* data requests answered */
    uint64_t items;         /* items in them */
    uint64_t events;        /* events in them */
    uint64_t failed_items;  /* items failed as unavailable */
    uint64_t round_trip_us; /* sum over answered requests */
    uint64_t retransmissions;
    uint64_t connections; /* to replicas, the first ones included */
    uint64_t evictions;
    uint64_t registrations;
    uint32_t sessions_ready;
    uint32_t server_release;
    uint32_t view; /* the highest view a session has seen: its primary is view % replicas */
};

/* Starts `sessions` sessions (1..TBC_SESSIONS_MAX) against the cluster.
 * Returns 0, or -1 with a reason in error. Connecting happens in the
 * background: open() succeeds while the cluster is down. */
int tbc_submitter_open(tbc_u128 cluster, const char *addresses, uint32_t sessions,
                       struct tbc_submitter **out, char *error, size_t error_size);
/* Stops the sessions; queued items fail as unavailable. */
void tbc_submitter_close(struct tbc_submitter *submitter);

/* Queues an item (events checked first: an invalid one fails at once with
 * TBC_ITEM_INVALID). done() runs on a session thread, or inside this call
 * when the item fails at once (cluster unreachable, queue full). */
void tbc_submitter_submit(struct tbc_submitter *submitter, struct tbc_item *item);

/* Blocking: submits and waits until done. Returns the item's status. */
enum tbc_item_status tbc_submitter_call(struct tbc_submitter *submitter, struct tbc_item *item);

/* The most events of this operation one item may carry now (it shrinks
 * when a 0.17 server announces a small batch_size_limit). */
uint32_t tbc_submitter_events_max(struct tbc_submitter *submitter, uint8_t operation);

/* At least one session registered and connected. */
bool tbc_submitter_ready(struct tbc_submitter *submitter);

/* The dialect of the registered sessions (0.15 until one registered). */
enum tbc_dialect tbc_submitter_dialect(struct tbc_submitter *submitter);

/* Requests whose items failed at their deadline while the request was
 * still in flight: it is still resent, so it may yet take effect (until it
 * is answered, or given up with its session after
 * TBC_STALE_REQUEST_MS_MAX). A caller told "unknown" can tell from a 0
 * here that nothing it sent can still land. */
uint32_t tbc_submitter_stale_requests(struct tbc_submitter *submitter);

/* The cluster's clock (nanoseconds since the epoch), estimated from the
 * last reply's timestamp plus the local time since; 0 before any reply. */
uint64_t tbc_submitter_cluster_time_ns(struct tbc_submitter *submitter);

void tbc_submitter_stats(struct tbc_submitter *submitter, struct tbc_submitter_stats *out);

#endif
