/* The microbatching submitter (SPEC section 8, "ADR 0005"): a pool of
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

#include "batch.h"
#include "session.h"

struct tb_submitter;

struct tb_submitter_stats {
    uint64_t requests;      /* data requests answered */
    uint64_t items;         /* items in them */
    uint64_t events;        /* events in them */
    uint64_t failed_items;  /* items failed as unavailable */
    uint64_t round_trip_us; /* sum over answered requests */
    uint64_t retransmissions;
    uint64_t reconnects;
    uint64_t evictions;
    uint64_t registrations;
    uint32_t sessions_ready;
    uint32_t server_release;
    uint32_t view; /* the highest view a session has seen: its primary is view % replicas */
};

/* Starts `sessions` sessions (1..TB_SESSIONS_MAX) against the cluster.
 * Returns 0, or -1 with a reason in error. Connecting happens in the
 * background: open() succeeds while the cluster is down. */
int tb_submitter_open(tb_u128 cluster, const char *addresses, uint32_t sessions,
                      struct tb_submitter **out, char *error, size_t error_size);
/* Stops the sessions; queued items fail as unavailable. */
void tb_submitter_close(struct tb_submitter *submitter);

/* Queues an item (events checked first: an invalid one fails at once with
 * TB_ITEM_INVALID). done() runs on a session thread, or inside this call
 * when the item fails at once (cluster unreachable, queue full). */
void tb_submitter_submit(struct tb_submitter *submitter, struct tb_item *item);

/* Blocking: submits and waits until done. Returns the item's status. */
enum tb_item_status tb_submitter_call(struct tb_submitter *submitter, struct tb_item *item);

/* The most events of this operation one item may carry now (it shrinks
 * when a 0.17 server announces a small batch_size_limit). */
uint32_t tb_submitter_events_max(struct tb_submitter *submitter, uint8_t operation);

/* At least one session registered and connected. */
bool tb_submitter_ready(struct tb_submitter *submitter);

/* The dialect of the registered sessions (0.15 until one registered). */
enum tb_dialect tb_submitter_dialect(struct tb_submitter *submitter);

/* The cluster's clock (nanoseconds since the epoch), estimated from the
 * last reply's timestamp plus the local time since; 0 before any reply. */
uint64_t tb_submitter_cluster_time_ns(struct tb_submitter *submitter);

void tb_submitter_stats(struct tb_submitter *submitter, struct tb_submitter_stats *out);

#endif
