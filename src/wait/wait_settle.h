/* The wait layer's decisions (wait_settle.c), called by wait.c with
 * wait->mutex held. Answered tickets are appended to `answers`, whose done
 * the caller runs once the mutex is released; backend calls are appended
 * to the thread's work list. */
#ifndef LLMLIMIT_WAIT_SETTLE_H
#define LLMLIMIT_WAIT_SETTLE_H

#include "wait_internal.h"

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
