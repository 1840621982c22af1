/* The waiting queue (docs/semantics.md "Waiting for capacity",
 * docs/architecture.md "src/wait"): a reserve denied for capacity waits up
 * to its wait_ms in per-limit queues, ordered by priority then arrival, and
 * is answered as soon as it fits. Sits between the server and the backend;
 * one thread for the whole queue, woken by the backend when capacity frees
 * (backend_ops.watch) and by timers at the times a denial reported; no
 * thread and no allocation per waiter (the caller gives the ticket).
 *
 * Threading: every call may be made from any thread at once. done runs
 * exactly once per wait_reserve, on the caller's thread (inside
 * wait_reserve, as the memory backend does), on the wait layer's thread or
 * on a backend thread; never with a lock of the wait layer held, so done
 * may call the wait layer again. */
#ifndef LLMLIMIT_WAIT_H
#define LLMLIMIT_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/bounds.h"
#include "core/clock.h"

struct wait;
struct wait_node;

struct wait_options {
    uint32_t max_waiters; /* 1..WAIT_WAITERS_MAX; past it a reserve is answered at once */
    /* 0..WAIT_MS_MAX: how long at a time a limit's waiters hold back later
     * requests that fit (docs/semantics.md "Order"); 0: never. */
    uint32_t hold_ms;
};

/* max_waiters = WAIT_WAITERS_DEFAULT, hold_ms = WAIT_HOLD_MS_DEFAULT. */
void wait_options_defaults(struct wait_options *options);

/* Requirements whose state a probe asks for when the caller's request has
 * no states array: what is left after an admission tells how far the wake
 * may go down a queue. */
#define WAIT_TICKET_STATES 4

/* One wait_reserve. The caller owns the storage and keeps it (and the
 * request and result) until done ran; every field is the wait layer's. */
struct wait_ticket {
    struct wait *wait;
    const struct reserve_request *request;
    struct reserve_result *result;
    backend_done_fn done;
    void *context;
    int64_t started_ms; /* the wait layer's clock */
    int64_t deadline_ms;
    int64_t wake_at_ms;      /* when to ask again by itself (fits_at, backoff) */
    int64_t timer_at_ms;     /* when its timer is due (INT64_MAX: none) */
    int64_t remote_retry_ms; /* the backoff on a backend that sees only its own releases */
    int64_t last_retry_after_ms;
    uint64_t arrival;   /* order among waiters of one priority */
    uint64_t event_seq; /* freed events issued before its last attempt */
    uint64_t lease_hash;
    struct wait_ticket *lease_next;    /* the lease index's chain */
    struct wait_ticket *primary;       /* a follower's: whose wait it joined */
    struct wait_ticket *followers;     /* a primary's: retries of its lease, oldest first */
    struct wait_ticket *next_follower; /* ... and their chain (of parked ones too) */
    struct wait_ticket *parked;        /* a cancelled one's: retries of its lease held
                                        * until its attempt or release is done */
    struct wait_ticket *work_next;     /* the thread's work list, or an answer list */
    struct wait_node *nodes;           /* its places in the limits' queues */
    struct wait_ticket *timer_prev;    /* in the timers' ordered run */
    struct wait_ticket *timer_next;
    uint32_t timer_index;              /* in the heap, WAIT_TIMER_RUN, or UINT32_MAX */
    uint8_t priority;
    uint8_t state;
    uint8_t work; /* what the thread is to do for it */
    bool cancelled;
    bool queued_once; /* has waited: its answer is an outcome of waiting */
    bool full;        /* answered at once: max_waiters were waiting */
    /* A limit of its attempt in flight was deleted or cut below its amount
     * meanwhile: the error (enum backend_error) it is answered with should
     * that attempt come back to be queued again, and the requirement. */
    uint8_t doomed;
    uint8_t doomed_index;
    /* Buffers, written before use (everything above is cleared first). */
    struct reserve_request attempt; /* the request as the backend gets it */
    struct release_request release; /* a cancelled waiter that was admitted */
    struct release_result release_result;
    struct requirement_state states[WAIT_TICKET_STATES];
};

/* Opens the wait layer in front of an open backend (it must outlive the
 * wait layer) on the backend's clock, and starts its thread. Returns 0, or
 * -1 with a reason in error (options out of range, out of memory, no
 * thread). */
int wait_open(struct backend *backend, struct clock *clock, const struct wait_options *options,
              struct wait **out, char *error, size_t error_size);

/* Shutdown: every waiter is answered at once, denied with its last
 * retry_after_ms (RESERVE_WAIT_CLOSED); a waiter whose backend call is in
 * flight is answered when it returns. Returns once every done ran and the
 * thread stopped; then frees. Call it before closing the backend, after the
 * server stopped taking requests. */
void wait_close(struct wait *wait);

/* The first half of wait_close, for a server that drains: every waiter not
 * in flight is answered now (RESERVE_WAIT_CLOSED), the rest when their call
 * returns, and reserves from now on are answered at once. The wait layer
 * stays usable until wait_close. */
void wait_drain(struct wait *wait);

/* Reserve, waiting up to wait_ms (0..WAIT_MS_MAX) when denied for capacity;
 * priority 0..WAIT_PRIORITIES-1, 0 first. result gets the answer, with
 * wait_outcome and waited_ms; done(context) runs once when it is written.
 * - wait_ms 0: a plain backend_reserve, except that when others wait ahead
 *   on one of its limits (same or better priority) while it holds back, or
 *   are asking (woken for room that freed) while it lets pass, it is denied
 *   on that limit without taking capacity (not recorded; retry_after_ms a
 *   poll). A limit holds back for hold_ms from when its queue formed, then
 *   lets pass for as long, in turns (docs/semantics.md "Order").
 * - Definitive errors, replays of a known lease, and a denial that cannot
 *   turn into a fit before the deadline are answered at once.
 * - max_waiters waiting: answered as a plain reserve, RESERVE_WAIT_FULL on
 *   a capacity denial.
 * - A lease id already waiting joins that wait (its answer is the same;
 *   requirements that differ answer lease_conflict at once). */
void wait_reserve(struct wait *wait, struct wait_ticket *ticket,
                  const struct reserve_request *request, struct reserve_result *result,
                  int64_t wait_ms, uint8_t priority, backend_done_fn done, void *context);

/* The caller went away: the ticket leaves the queues at once and nothing
 * stays held (an admission that raced with it is released). done still
 * runs once, RESERVE_WAIT_CANCELLED: at once, or when the backend call in
 * flight for the ticket returns. A no-op on a ticket already answered
 * (while its storage is still valid) or on a plain reserve (wait_ms 0). */
void wait_cancel(struct wait *wait, struct wait_ticket *ticket);

/* The requirements (bits) on which others wait ahead of a request of this
 * priority (as the limit's turn has it): what wait_reserve denies a
 * wait_ms 0 reserve on. For callers
 * that reserve through the backend themselves (batches): set it as the
 * request's yield_mask. 0 when nobody waits. */
uint64_t wait_yield_mask(struct wait *wait, const struct reserve_request *request,
                         uint8_t priority);

/* Pass-throughs to the backend, so the server talks to one object: the
 * backend itself tells the wait layer what it freed (backend_ops.watch). */
void wait_complete(struct wait *wait, const struct complete_request *requests,
                   struct complete_result *results, uint32_t count, backend_done_fn done,
                   void *context);
void wait_release(struct wait *wait, const struct release_request *requests,
                  struct release_result *results, uint32_t count, backend_done_fn done,
                  void *context);

/* A limit was put, restored or deleted: a deleted limit's waiters are
 * answered unknown_limit_key, those that need more than a decreased
 * capacity exceeds_capacity (RESERVE_WAIT_FAILED), at once, or when their
 * attempt in flight returns unless it admitted them; the others wait (for
 * a pending decrease too) and the queue's head is woken. Reads the limit
 * through backend_get_limit. */
void wait_limit_changed(struct wait *wait, const char *key);

/* The clock was moved (llmlimitd --test-clock, tests): look at the timers
 * again now. */
void wait_kick(struct wait *wait);

/* Tests: returns once the thread has handled every event, timer due on the
 * clock now and backend call it made, and found nothing left to do. */
void wait_quiesce(struct wait *wait);
/* Tests: returns once the thread has handled the events told and the
 * timers due on the clock now, and made the backend calls they led to
 * (which may still be in flight). */
void wait_pass(struct wait *wait);

struct wait_stats {
    uint32_t waiting; /* reserves in the wait layer (queued, asking, following) */
    uint32_t queued;  /* of which in at least one limit's queue */
    uint32_t keys;    /* limits with a queue */
    uint32_t max_waiters;
    uint64_t outcomes[RESERVE_WAIT_FAILED + 1]; /* answers by enum reserve_wait_outcome */
    uint64_t attempts;                          /* backend reserves made for waiters */
    uint64_t handed_over;                       /* of which in the complete that freed room */
    uint64_t events;                            /* freed events the backend told */
    uint64_t nodes_allocated;                   /* queue places, in use or free */
};

void wait_stats(struct wait *wait, struct wait_stats *out);

/* The waiters queued on one limit and when the oldest of them started
 * (0 when none), for the console. */
void wait_key_waiters(struct wait *wait, const char *key, uint32_t *count,
                      int64_t *oldest_started_ms);

#endif
