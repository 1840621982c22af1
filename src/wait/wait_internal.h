/* Internal types of the wait layer, shared by the wait*.c files only: the
 * per-limit queues and their places (wait_queue.c), the timers and the
 * lease index (wait_index.c), the backend's freed events (wait.c), and the
 * decisions wait.c calls (wait_settle.c). Unless a field says otherwise,
 * everything here is under wait->mutex.
 *
 * Lock order: a backend's own lock, then events_mutex (the backend's watch
 * callback) or wait->mutex (its claim, wait_claim); wait->mutex, then
 * events_mutex (a kick). No backend call is made with either held, and done
 * never runs with either held. */
#ifndef LLMLIMIT_WAIT_INTERNAL_H
#define LLMLIMIT_WAIT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "wait.h"

enum wait_state {
    WAIT_IDLE = 0,  /* not in the wait layer */
    WAIT_FIRST,     /* its first backend attempt is in flight */
    WAIT_QUEUED,    /* in the queues of the limits that denied it; nothing in flight */
    WAIT_ASKING,    /* an attempt scheduled or in flight, its places kept */
    WAIT_FINAL,     /* the deadline's attempt scheduled or in flight, out of the queues */
    WAIT_RELEASING, /* cancelled after an admission: the release in flight */
    WAIT_FOLLOWER,  /* joined another ticket's wait (same lease id) */
    WAIT_PASS,      /* a plain reserve (full queue) through the wait layer */
    WAIT_PARKED, /* a plain retry of a cancelled lease: sent once its attempt or release is done */
    WAIT_ANSWERED, /* done ran or is about to */
};

enum wait_work {
    WAIT_WORK_NONE = 0,
    WAIT_WORK_ATTEMPT, /* backend_reserve of ticket->attempt */
    WAIT_WORK_RELEASE, /* backend_release of ticket->release */
    WAIT_WORK_PARKED,  /* backend_reserve of a parked ticket's own request */
};

/* One place of a ticket in one limit's queue. */
struct wait_node {
    struct wait_ticket *ticket;
    struct wait_key *key;
    struct wait_node *previous; /* in the key's list of the ticket's priority */
    struct wait_node *next;
    struct wait_node *ticket_next; /* the ticket's other places */
    /* Copies of the ticket's, so that a walk of the queue reads the node
     * alone until it finds a waiter to wake. */
    uint64_t amount;     /* what the requirement asks of this limit */
    uint8_t priority;    /* the ticket's */
    uint8_t requirement; /* its index in the ticket's request */
    bool asking;         /* its ticket is asking: counted in its key's asking */
};

/* The queue of one limit: a list per priority, each in arrival order.
 *
 * Its turns (docs/semantics.md "Order"): from turns_since_ms on, for
 * hold_ms its waiters hold back later requests that fit (no overtaking),
 * then for as long those pass the waiters that do not fit, and so on. A
 * queue that empties is kept (cooling, with no places) for 2 * hold_ms, so
 * that a waiter that leaves and comes back does not start its turns again;
 * after that it is dropped, or restarts its turns if a waiter comes. */
struct wait_key {
    struct wait_key *bucket_next;
    uint64_t hash;
    uint32_t count;       /* places in all lists */
    uint16_t nonempty;    /* bit p: list p has places */
    uint16_t asking_mask; /* bit p: asking[p] > 0 */
    bool cooling;         /* no places; in the wait layer's cooling list */
    int64_t turns_since_ms;
    int64_t emptied_ms;         /* when it became cooling */
    struct wait_key *cool_prev; /* the cooling list, in emptied_ms order */
    struct wait_key *cool_next;
    uint32_t asking[WAIT_PRIORITIES]; /* places whose ticket is asking, by priority */
    struct wait_node *head[WAIT_PRIORITIES];
    struct wait_node *tail[WAIT_PRIORITIES];
    uint32_t key_length;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
};

#define WAIT_NODE_CHUNK 1024
#define WAIT_KEYS_FREE_MAX 1024  /* empty queues kept for reuse */
#define WAIT_EVENTS_MAX 4096     /* freed events between two passes of the thread */
#define WAIT_INLINE_PASSES_MAX 4 /* passes a freeing thread runs before it leaves the rest */
#define WAIT_FREED_SLOTS 4096    /* freed events remembered by key hash (a power of two) */
#define WAIT_WAKE_WALK_MAX 256   /* places one freed event looks at */
#define WAIT_SLEEP_MS_MAX 1000   /* the thread looks at the clock at least this often */
#define WAIT_TIMER_RUN (UINT32_MAX - 1) /* a ticket's timer_index: in the ordered run */

/* A limit's capacity may have come back: what the backend told. */
struct wait_event {
    uint64_t hash; /* of the key; 0 with any */
    uint64_t seq;
    int64_t available;
    bool available_known;
    bool any; /* the backend could not say which limit */
};

struct wait {
    struct backend *backend;
    struct clock *clock;
    struct wait_options options;
    bool remote; /* the backend sees only its own releases: waiters also ask again */
    pthread_mutex_t mutex;

    /* queues */
    struct wait_key **buckets;
    uint32_t bucket_mask;
    uint32_t key_count;         /* in the table, cooling ones too */
    struct wait_key *cool_head; /* empty queues kept for their turns, oldest first */
    struct wait_key *cool_tail;
    uint32_t cooling_count;
    struct wait_key *keys_free;
    uint32_t keys_free_count;
    struct wait_node *nodes_free;
    void **node_chunks;
    uint32_t node_chunk_count;
    uint32_t node_chunk_capacity;

    /* tickets */
    /* Timers: an ordered run (appended to while they come in order, as
     * deadlines do when waiters share a wait_ms), the rest in a heap. */
    struct wait_ticket *run_head;
    struct wait_ticket *run_tail;
    struct wait_ticket **heap; /* by timer_at_ms; max_waiters entries */
    uint32_t heap_count;
    struct wait_ticket **leases; /* primaries by lease id */
    uint32_t lease_mask;
    /* In leases: none, and a limit change has none to look at. */
    uint32_t lease_count;
    struct wait_ticket *work_head; /* for the thread to send to the backend */
    struct wait_ticket *work_tail;
    uint64_t arrivals;
    uint32_t waiting;   /* tickets in the wait layer, followers included */
    uint32_t queued;    /* tickets with places */
    uint32_t in_flight; /* backend calls made for tickets, not yet returned (or scheduled) */
    bool closing;
    uint64_t freed_seq[WAIT_FREED_SLOTS]; /* the last event handled, by key hash */
    uint64_t any_seq;                     /* the last event about any limit */
    struct wait_stats stats;

    /* events: the backend's hook writes, the thread reads (events_mutex) */
    atomic_uint interest;           /* tickets in the wait layer: 0 lets events go untold */
    atomic_uint_fast64_t event_seq; /* the last event's seq */
    pthread_mutex_t events_mutex;
    pthread_cond_t events_cond; /* the thread sleeps on it */
    pthread_cond_t idle_cond;   /* wait_quiesce and wait_close sleep on it */
    struct wait_event *events;
    struct wait_event *events_spare; /* the thread's copy */
    uint32_t event_count;
    bool events_lost; /* more than WAIT_EVENTS_MAX: treated as "any limit" */
    bool kicked;
    bool stopping;
    bool idle;       /* the last pass found nothing to do and nothing in flight */
    uint64_t passes; /* the thread's passes so far */
    /* One pass at a time: the thread's, or one a freeing thread runs inline
     * (wait_complete, wait_release). */
    bool passing;
    bool thread_blocked;    /* the thread waits for an inline pass to end */
    bool thread_passing;    /* the thread runs a pass of its own */
    int64_t sleep_until_ms; /* when the sleeping thread wakes; INT64_MIN while awake */
    pthread_t thread;
};

/* A ticket in a list of answers, or of work: linked through work_next. */
struct wait_list {
    struct wait_ticket *head;
    struct wait_ticket *tail;
};

static inline void wait_list_push(struct wait_list *list, struct wait_ticket *ticket)
{
    ticket->work_next = NULL;
    if (list->tail == NULL)
        list->head = ticket;
    else
        list->tail->work_next = ticket;
    list->tail = ticket;
}

/* (priority, arrival): the queues' order. */
static inline bool wait_before(const struct wait_ticket *a, const struct wait_ticket *b)
{
    return a->priority < b->priority || (a->priority == b->priority && a->arrival < b->arrival);
}

uint64_t wait_hash(const char *key, uint32_t length);

/* wait_queue.c: the limits' queues. */
int wait_queue_init(struct wait *w);
void wait_queue_free(struct wait *w);
struct wait_key *wait_key_find(const struct wait *w, const char *key, uint32_t length,
                               uint64_t hash);
/* Places the ticket in the queue of its requirement i, in order. -1 when
 * out of memory. */
int wait_queue_add(struct wait *w, struct wait_ticket *t, uint32_t requirement);
/* Takes one place out (its key's queue is freed when empty). */
void wait_queue_remove(struct wait *w, struct wait_node *node);
/* The ticket's place in the queue of requirement i, or NULL. */
struct wait_node *wait_queue_place(const struct wait_ticket *t, uint32_t requirement);
/* Is someone other than t in the key's queue ahead of t (not counting
 * those asking the backend, when past_asking)? */
bool wait_queue_ahead(const struct wait_key *key, const struct wait_ticket *t, bool past_asking);
/* The first place of the queue in order, or NULL. */
struct wait_node *wait_queue_first(const struct wait_key *key);
/* The place after node in the queue's order, or NULL. */
struct wait_node *wait_queue_after(const struct wait_key *key, const struct wait_node *node);
/* The ticket's places count as asking (its attempt is in flight) or no
 * longer. */
void wait_queue_asking(struct wait_ticket *t, bool asking);
/* Is a waiter of this priority or a better one asking on the key? */
static inline bool wait_key_asking(const struct wait_key *key, uint8_t priority)
{
    return (key->asking_mask & ((2u << priority) - 1u)) != 0;
}
/* Its turn to hold back later requests (else to let those that fit pass)? */
bool wait_key_holding(const struct wait *w, const struct wait_key *key, int64_t now_ms);
/* When its next turn to let pass begins (now_ms when it is one now). */
int64_t wait_key_lets_pass_at(const struct wait *w, const struct wait_key *key, int64_t now_ms);
/* Drops the cooling queues empty for 2 * hold_ms by now_ms (every one, all). */
void wait_keys_cool(struct wait *w, int64_t now_ms, bool all);
/* Every queue's order and counts, and every place's ticket. Asserts. */
void wait_queue_check(const struct wait *w);

/* wait_index.c: timers and the lease index. */
int wait_index_init(struct wait *w);
void wait_index_free(struct wait *w);
/* Sets (or moves) the ticket's timer; INT64_MAX takes it out. */
void wait_timer_set(struct wait *w, struct wait_ticket *t, int64_t at_ms);
/* The ticket whose timer is due at now_ms, taken out of the timers, or NULL. */
struct wait_ticket *wait_timer_pop_due(struct wait *w, int64_t now_ms);
/* The earliest timer, INT64_MAX when none. */
int64_t wait_timer_next(const struct wait *w);
/* Asserts the timers' order (tests and close: O(waiters)). */
void wait_timer_check(const struct wait *w);
void wait_lease_insert(struct wait *w, struct wait_ticket *t);
void wait_lease_remove(struct wait *w, struct wait_ticket *t);
/* The primary waiting with this lease id, or NULL. */
struct wait_ticket *wait_lease_find(const struct wait *w, const char *id, uint32_t length,
                                    uint64_t hash);

/* wait_settle.c: the decisions, called by wait.c with wait->mutex held.
 * Answered tickets are appended to `answers`, whose done the caller runs
 * once the mutex is released; backend calls are appended to the thread's
 * work list. */
/* Schedules a backend call for the thread (counted in flight). */
void wait_work_push(struct wait *w, struct wait_ticket *t, enum wait_work work);
/* ticket->attempt: its request, waiting until wait_until_ms (0: a plain
 * reserve), yielding on the requirements of yield_mask. */
void wait_attempt_build(struct wait_ticket *t, int64_t wait_until_ms, uint64_t yield_mask);
/* The requirements on which someone waits ahead of self (or, self NULL, of
 * a new request of this priority). */
uint64_t wait_yield_locked(const struct wait *w, const struct reserve_request *request,
                           uint8_t priority, const struct wait_ticket *self);
/* An attempt of t returned (its result written): answer, queue, or ask
 * once more. */
void wait_settle(struct wait *w, struct wait_ticket *t, struct wait_list *answers);
/* Answers a primary with its result, and the retries that joined it. */
void wait_answer(struct wait *w, struct wait_ticket *t, enum reserve_wait_outcome outcome,
                 struct wait_list *answers);
/* A queued primary's deadline. */
void wait_deadline(struct wait *w, struct wait_ticket *t, struct wait_list *answers);
/* A retry's own deadline (or shutdown): answered with the denial its
 * primary waits on. */
void wait_follower_deadline(struct wait *w, struct wait_ticket *f,
                            enum reserve_wait_outcome outcome, struct wait_list *answers);
/* A queued ticket asks the backend, unless someone is ahead of it on one of
 * its limits in its turn to hold back (then it waits there too, its timer
 * set to when that limit lets pass at the latest). On `counted` (NULL:
 * none), the limit a wake with known availability walks, those ahead that
 * are asking already do not hold it back: what they may take was counted.
 * true when it asks. */
bool wait_try_ask(struct wait *w, struct wait_ticket *t, const struct wait_key *counted);
/* A queued ticket about to ask (its places kept): out of the timers, its
 * attempt built. The caller makes or schedules the call. */
void wait_asking(struct wait *w, struct wait_ticket *t);
/* Capacity may have come back on a limit (available: what is left, when
 * known): the head of its queue asks, and those behind it while what is
 * left covers them; letting pass, the walk goes past those it does not
 * cover. */
void wait_wake_key(struct wait *w, struct wait_key *k, bool known, int64_t available);
/* A limit was deleted (gone) or its capacity (or pending decrease) is now
 * capacity: the waiters whose attempt is in flight and that need more of
 * it are marked, so that they are answered when it returns instead of
 * being queued again (the backend may have decided before the change, or
 * answered limit_decreasing). O(waiters): limit changes are rare. */
void wait_doom_in_flight(struct wait *w, const char *key, uint32_t length, bool gone,
                         uint64_t capacity);
void wait_cancel_locked(struct wait *w, struct wait_ticket *t, struct wait_list *answers);
/* The retries parked on a cancelled ticket go to the backend (as work). */
void wait_unpark(struct wait *w, struct wait_ticket *t);

#endif
