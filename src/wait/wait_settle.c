/* The wait layer's decisions, all under wait->mutex: what a backend answer
 * means for a waiter (answer it, queue it on the limits that denied it, ask
 * once more at its deadline), who may ask the backend when capacity frees
 * (the head of a queue, and those behind it only while what is left covers
 * them: no thundering herd; no overtaking while a limit holds back, those
 * that fit while it lets pass), and leaving: answering a lease
 * and the retries that joined it, handing a wait over to a retry when its
 * first caller goes away. Backend calls are only scheduled here; the thread
 * (wait.c) makes them once the mutex is released. */
#include <assert.h>
#include <string.h>

#include "util/queue.h"
#include "wait_internal.h"

static int64_t now_of(const struct wait *w)
{
    return clock_now_ms(w->clock);
}

void wait_work_push(struct wait *w, struct wait_ticket *t, enum wait_work work)
{
    assert(t->work == WAIT_WORK_NONE);
    assert(work != WAIT_WORK_NONE);
    t->work = (uint8_t)work;
    FIFO_PUSH(w->work_head, w->work_tail, t, work_next);
    w->in_flight++;
}

void wait_attempt_build(struct wait_ticket *t, int64_t wait_until_ms, uint64_t yield_mask)
{
    t->attempt = *t->request;
    t->attempt.wait_until_unix_ms = wait_until_ms;
    t->attempt.yield_mask = yield_mask;
    /* What is left after an admission tells how far a wake may go. */
    if (t->attempt.states == NULL && t->request->requirement_count <= WAIT_TICKET_STATES) {
        memset(t->states, 0, sizeof t->states); /* unknown unless the backend says */
        t->attempt.states = t->states;
    }
}

static struct wait_key *key_of(const struct wait *w, const struct requirement *r)
{
    return wait_key_find(w, r->key, r->key_length, wait_hash(r->key, r->key_length));
}

uint64_t wait_yield_locked(const struct wait *w, const struct reserve_request *request,
                           uint8_t priority, const struct wait_ticket *self)
{
    uint64_t mask = 0;
    int64_t now_ms = INT64_MIN;
    for (uint32_t i = 0; w->key_count > 0 && i < request->requirement_count; i++) {
        const struct wait_key *k = key_of(w, &request->requirements[i]);
        if (k == NULL || k->count == 0)
            continue;
        if (now_ms == INT64_MIN)
            now_ms = now_of(w);
        bool ahead;
        if (wait_key_holding(w, k, now_ms)) {
            /* A ticket with an arrival is behind earlier ones of its
             * priority; a plain request is behind everyone of its priority
             * or better. */
            ahead = self != NULL ? wait_queue_ahead(k, self, false)
                                 : wait_queue_first(k)->ticket->priority <= priority;
        } else {
            /* Letting pass: only a waiter woken for what freed is ahead. */
            ahead = wait_key_asking(k, priority);
        }
        if (ahead)
            mask |= UINT64_C(1) << i;
    }
    return mask;
}

/* ---- leaving ------------------------------------------------------------- */

/* Takes all the ticket's places; the queues it leaves wake their new head,
 * with what is left when known (states of an admission). */
static void leave_queues(struct wait *w, struct wait_ticket *t,
                         const struct requirement_state *states)
{
    struct wait_key *kicked[REQUIREMENTS_PER_RESERVE_MAX];
    struct requirement_state left[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t count = 0;
    while (t->nodes != NULL) {
        struct wait_node *n = t->nodes;
        struct wait_key *k = n->key;
        if (k->count > 1) { /* the queue outlives this place: wake it after */
            assert(count < REQUIREMENTS_PER_RESERVE_MAX);
            left[count] = states != NULL ? states[n->requirement]
                                         : (struct requirement_state){.known = false};
            kicked[count++] = k;
        }
        wait_queue_remove(w, n);
    }
    for (uint32_t i = 0; i < count; i++)
        wait_wake_key(w, kicked[i], left[i].known, left[i].available);
}

/* Answers one ticket (its result written): out of every structure. */
static void finish(struct wait *w, struct wait_ticket *t, enum reserve_wait_outcome outcome,
                   int64_t now_ms, struct wait_list *answers)
{
    assert(t->state != WAIT_ANSWERED); /* each done runs once */
    assert(t->nodes == NULL);
    assert(t->timer_index == UINT32_MAX);
    assert(t->work == WAIT_WORK_NONE);
    if (outcome == RESERVE_WAIT_CANCELLED)
        reserve_result_clear(t->result);
    t->result->wait_outcome = (uint8_t)outcome;
    bool waited = t->queued_once || t->state == WAIT_FOLLOWER;
    t->result->waited_ms = waited && now_ms > t->started_ms ? now_ms - t->started_ms : 0;
    t->state = WAIT_ANSWERED;
    assert(w->waiting > 0);
    w->waiting--;
    atomic_fetch_sub(&w->interest, 1);
    w->stats.outcomes[outcome]++;
    wait_list_push(answers, t);
}

/* The index of key in request, or -1. */
static int32_t index_of(const struct reserve_request *request, const char *key, uint32_t length)
{
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[i];
        if (r->key_length == length && memcmp(r->key, key, length) == 0)
            return (int32_t)i;
    }
    return -1;
}

/* The lease's answer for a retry that joined it: the same, with indexes in
 * the retry's order of requirements (the same set). */
static void result_map(const struct wait_ticket *from, struct wait_ticket *to)
{
    const struct reserve_request *a = from->request, *b = to->request;
    struct reserve_result *out = to->result;
    *out = *from->result;
    out->replayed = true; /* it repeats the lease's answer */
    out->denied_count = 0;
    for (uint32_t j = 0; j < b->requirement_count; j++) {
        int32_t i = index_of(a, b->requirements[j].key, b->requirements[j].key_length);
        assert(i >= 0);
        for (uint32_t k = 0; k < from->result->denied_count; k++) {
            if (from->result->denied_index[k] == (uint8_t)i)
                out->denied_index[out->denied_count++] = (uint8_t)j;
        }
    }
    if (backend_error_names_key(out->error)) {
        const struct requirement *r = &a->requirements[from->result->error_index];
        int32_t j = index_of(b, r->key, r->key_length);
        assert(j >= 0);
        out->error_index = (uint8_t)j;
    }
}

/* A denial for a retry whose primary's answer is not settled: the limits
 * the primary waits on, and its last retry_after. */
static void follower_denial(const struct wait_ticket *p, struct wait_ticket *f)
{
    struct reserve_result *out = f->result;
    reserve_result_clear(out);
    for (uint32_t j = 0; j < f->request->requirement_count; j++) {
        const struct requirement *r = &f->request->requirements[j];
        int32_t i = index_of(p->request, r->key, r->key_length);
        assert(i >= 0);
        if (p->nodes == NULL || wait_queue_place(p, (uint32_t)i) != NULL)
            out->denied_index[out->denied_count++] = (uint8_t)j;
    }
    out->retry_after_ms = p->last_retry_after_ms > 0 ? p->last_retry_after_ms : 1;
}

static void unfollow(struct wait_ticket *f)
{
    struct wait_ticket **link = &f->primary->followers;
    while (*link != f)
        link = &(*link)->next_follower;
    *link = f->next_follower;
    f->next_follower = NULL;
    f->primary = NULL;
}

void wait_follower_deadline(struct wait *w, struct wait_ticket *f,
                            enum reserve_wait_outcome outcome, struct wait_list *answers)
{
    assert(f->state == WAIT_FOLLOWER);
    wait_timer_set(w, f, INT64_MAX);
    follower_denial(f->primary, f);
    unfollow(f);
    finish(w, f, outcome, now_of(w), answers);
}

/* The primary is answered: so are the retries that joined it. */
static void answer_followers(struct wait *w, struct wait_ticket *t,
                             enum reserve_wait_outcome outcome, int64_t now_ms,
                             struct wait_list *answers)
{
    while (t->followers != NULL) {
        struct wait_ticket *f = t->followers;
        t->followers = f->next_follower;
        f->next_follower = NULL;
        f->primary = NULL;
        wait_timer_set(w, f, INT64_MAX);
        result_map(t, f);
        finish(w, f, outcome, now_ms, answers);
    }
}

void wait_answer(struct wait *w, struct wait_ticket *t, enum reserve_wait_outcome outcome,
                 struct wait_list *answers)
{
    const struct reserve_result *r = t->result;
    bool admitted_here = r->allowed && !r->replayed;
    leave_queues(w, t, admitted_here ? t->attempt.states : NULL);
    wait_timer_set(w, t, INT64_MAX);
    wait_lease_remove(w, t);
    int64_t now_ms = now_of(w);
    answer_followers(w, t, outcome, now_ms, answers);
    finish(w, t, outcome, now_ms, answers);
}

/* The outcome of an answer from the backend. */
static enum reserve_wait_outcome outcome_of(const struct wait_ticket *t, bool final)
{
    const struct reserve_result *r = t->result;
    if (!t->queued_once)
        return RESERVE_WAIT_NONE;
    if (r->allowed)
        return RESERVE_WAIT_ADMITTED;
    if (r->error != BACKEND_OK)
        return RESERVE_WAIT_FAILED;
    (void) final; /* a denial after waiting: at the deadline, or one that cannot fit by it */
    return RESERVE_WAIT_DEADLINE;
}

/* ---- queueing ------------------------------------------------------------ */

/* The ticket's places become exactly the limits that denied it (the
 * decreasing one for limit_decreasing), keeping its arrival order. -1 when
 * out of memory. */
static int requeue(struct wait *w, struct wait_ticket *t, const struct reserve_result *r)
{
    uint64_t denied = 0;
    if (r->error == BACKEND_LIMIT_DECREASING)
        denied = UINT64_C(1) << r->error_index;
    for (uint32_t k = 0; r->error == BACKEND_OK && k < r->denied_count; k++)
        denied |= UINT64_C(1) << r->denied_index[k];
    assert(denied != 0);
    for (uint32_t i = 0; i < t->request->requirement_count; i++) {
        if ((denied >> i & 1) != 0 && wait_queue_add(w, t, i) != 0)
            return -1;
    }
    struct wait_key *kicked[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t count = 0;
    for (struct wait_node *n = t->nodes, *next; n != NULL; n = next) {
        next = n->ticket_next;
        if ((denied >> n->requirement & 1) != 0)
            continue;
        if (n->key->count > 1)
            kicked[count++] = n->key; /* it fits there now: who is behind may go */
        wait_queue_remove(w, n);
    }
    for (uint32_t i = 0; i < count; i++)
        wait_wake_key(w, kicked[i], false, 0);
    return 0;
}

/* Has capacity come back on one of its limits since its attempt started? */
static bool freed_since(const struct wait *w, const struct wait_ticket *t)
{
    if (w->any_seq > t->event_seq)
        return true;
    for (const struct wait_node *n = t->nodes; n != NULL; n = n->ticket_next) {
        if (w->freed_seq[n->key->hash & (WAIT_FREED_SLOTS - 1)] > t->event_seq)
            return true;
    }
    return false;
}

/* Hands the wait of t over to its oldest retry (t leaves with outcome):
 * the retry takes t's places and order, its own deadline. */
static void promote(struct wait *w, struct wait_ticket *t, enum reserve_wait_outcome outcome,
                    struct wait_list *answers)
{
    struct wait_ticket *f = t->followers;
    assert(f != NULL);
    assert(t->state == WAIT_QUEUED);
    wait_timer_set(w, f, INT64_MAX);
    t->followers = f->next_follower;
    f->next_follower = NULL;
    f->followers = t->followers;
    t->followers = NULL;
    for (struct wait_ticket *g = f->followers; g != NULL; g = g->next_follower)
        g->primary = f;
    f->primary = NULL;
    f->priority = t->priority;
    f->arrival = t->arrival;
    f->wake_at_ms = t->wake_at_ms;
    f->event_seq = t->event_seq;
    f->remote_retry_ms = t->remote_retry_ms;
    f->last_retry_after_ms = t->last_retry_after_ms;
    f->queued_once = true;
    for (struct wait_node *n = t->nodes; n != NULL; n = n->ticket_next) {
        int32_t j = index_of(f->request, n->key->key, n->key->key_length);
        assert(j >= 0); /* the same requirement set */
        n->ticket = f;
        n->requirement = (uint8_t)j;
    }
    f->nodes = t->nodes;
    t->nodes = NULL;
    wait_lease_remove(w, t);
    wait_lease_insert(w, f);
    f->state = WAIT_QUEUED;
    int64_t at = f->wake_at_ms < f->deadline_ms ? f->wake_at_ms : f->deadline_ms;
    wait_timer_set(w, f, at);
    wait_timer_set(w, t, INT64_MAX);
    finish(w, t, outcome, now_of(w), answers);
}

/* Its deadline: the last attempt, as a plain reserve (recorded as today),
 * or the wait handed to a retry that joined it. */
void wait_deadline(struct wait *w, struct wait_ticket *t, struct wait_list *answers)
{
    assert(t->state == WAIT_QUEUED);
    if (t->followers != NULL) {
        promote(w, t, RESERVE_WAIT_DEADLINE, answers);
        return;
    }
    leave_queues(w, t, NULL);
    wait_timer_set(w, t, INT64_MAX);
    /* It still does not pass those ahead of it. */
    wait_attempt_build(t, 0, wait_yield_locked(w, t->request, t->priority, t));
    t->state = WAIT_FINAL;
    wait_work_push(w, t, WAIT_WORK_ATTEMPT);
}

bool wait_try_ask(struct wait *w, struct wait_ticket *t, const struct wait_key *counted)
{
    assert(t->state == WAIT_QUEUED);
    if (w->closing)
        return false;
    bool blocked = false;
    int64_t now_ms = now_of(w);
    int64_t lets_pass_ms = INT64_MAX;
    for (uint32_t i = 0; i < t->request->requirement_count; i++) {
        /* Where it has a place, the place knows its queue: no lookup. */
        const struct wait_node *place = wait_queue_place(t, i);
        const struct wait_key *k =
            place != NULL ? place->key : key_of(w, &t->request->requirements[i]);
        if (k == NULL || !wait_queue_ahead(k, t, k == counted) || !wait_key_holding(w, k, now_ms))
            continue;
        /* Someone is ahead on that limit, in its turn to hold back: wait
         * there too, behind them (out of memory, it still waits: its
         * deadline stands), until it lets pass at the latest. */
        blocked = true;
        (void)wait_queue_add(w, t, i);
        int64_t at = wait_key_lets_pass_at(w, k, now_ms);
        if (at < lets_pass_ms)
            lets_pass_ms = at;
    }
    if (blocked) {
        wait_timer_set(w, t, lets_pass_ms < t->deadline_ms ? lets_pass_ms : t->deadline_ms);
        return false;
    }
    wait_asking(w, t);
    wait_work_push(w, t, WAIT_WORK_ATTEMPT);
    return true;
}

void wait_asking(struct wait *w, struct wait_ticket *t)
{
    assert(t->state == WAIT_QUEUED);
    wait_timer_set(w, t, INT64_MAX); /* nothing in flight has a timer */
    wait_attempt_build(t, t->deadline_ms, 0);
    t->state = WAIT_ASKING;
    wait_queue_asking(t, true);
}

/* Room freed on a limit in its turn to hold back, and the waiter at node
 * could not take it: the first waiter behind it asks when the limit lets
 * pass (its timer), so that what sits free then is offered down the queue
 * (pass_on takes it further). */
static void hold_next(struct wait *w, const struct wait_key *k, const struct wait_node *node,
                      int64_t now_ms)
{
    for (const struct wait_node *n = wait_queue_after(k, node); n != NULL;
         n = wait_queue_after(k, n)) {
        struct wait_ticket *t = n->ticket;
        if (t->state != WAIT_QUEUED)
            continue;
        int64_t at = wait_key_lets_pass_at(w, k, now_ms);
        if (at < t->timer_at_ms)
            wait_timer_set(w, t, at);
        return;
    }
}

void wait_wake_key(struct wait *w, struct wait_key *k, bool known, int64_t available)
{
    int64_t now_ms = now_of(w);
    bool holding = wait_key_holding(w, k, now_ms);
    bool asked = false;
    struct wait_node *n = wait_queue_first(k);
    for (uint32_t seen = 0; n != NULL && seen < WAIT_WAKE_WALK_MAX; seen++) {
        struct wait_ticket *t = n->ticket;
        struct wait_node *next = wait_queue_after(k, n);
        int64_t amount = (int64_t)n->amount;
        if (t->state == WAIT_ASKING) {
            /* Already asking: what it may take is not left for the next. */
            if (!known)
                return;
            available = available < INT64_MIN + amount ? INT64_MIN : available - amount;
            n = next;
            continue;
        }
        assert(t->state == WAIT_QUEUED);
        /* Only waiters that can fit are woken; blocked keeps its place.
         * Holding back, the walk ends at the first that cannot go; letting
         * pass, those behind it may. */
        bool go = (!known || available >= amount) && wait_try_ask(w, t, known ? k : NULL);
        if (!go && holding) {
            if (!asked)
                hold_next(w, k, n, now_ms);
            return;
        }
        if (go && !known)
            return; /* unknown: one at a time (pass_on takes it further) */
        if (go) {
            asked = true;
            available -= amount;
        }
        n = next;
    }
}

/* A waiter woken for what freed was denied. On a limit letting pass, the
 * next waiter that has not asked since the limit last freed asks in its
 * stead (one at a time: a smaller one may fit what the first could not);
 * on one holding back, the first behind it asks once it lets pass. */
static void pass_on(struct wait *w, const struct wait_ticket *denied)
{
    int64_t now_ms = now_of(w);
    for (const struct wait_node *d = denied->nodes; d != NULL; d = d->ticket_next) {
        const struct wait_key *k = d->key;
        if (wait_key_holding(w, k, now_ms)) {
            hold_next(w, k, d, now_ms);
            continue;
        }
        uint64_t freed = w->freed_seq[k->hash & (WAIT_FREED_SLOTS - 1)];
        if (w->any_seq > freed)
            freed = w->any_seq;
        const struct wait_node *n = wait_queue_first(k);
        for (uint32_t seen = 0; n != NULL && seen < WAIT_WAKE_WALK_MAX; seen++) {
            const struct wait_node *next = wait_queue_after(k, n);
            struct wait_ticket *t = n->ticket;
            if (t != denied && t->state == WAIT_QUEUED && t->event_seq < freed &&
                wait_try_ask(w, t, NULL))
                break;
            n = next;
        }
    }
}

/* The wake-up time of a waiter that was denied: when it fits by time
 * alone, and on a backend that sees only its own releases, sooner, with a
 * backoff starting at the retry hint. */
static int64_t wake_at(const struct wait *w, struct wait_ticket *t, const struct reserve_result *r,
                       int64_t now_ms)
{
    int64_t at = r->error == BACKEND_OK ? r->fits_at_unix_ms : now_ms + r->retry_after_ms;
    if (!w->remote)
        return at;
    int64_t backoff = t->remote_retry_ms == 0 ? r->retry_after_ms : 2 * t->remote_retry_ms;
    if (backoff < WAIT_REMOTE_RETRY_MS_MIN)
        backoff = WAIT_REMOTE_RETRY_MS_MIN;
    if (backoff > WAIT_REMOTE_RETRY_MS_MAX)
        backoff = WAIT_REMOTE_RETRY_MS_MAX;
    t->remote_retry_ms = backoff;
    return now_ms + backoff < at ? now_ms + backoff : at;
}

void wait_unpark(struct wait *w, struct wait_ticket *t)
{
    while (t->parked != NULL) {
        struct wait_ticket *p = t->parked;
        t->parked = p->next_follower;
        p->next_follower = NULL;
        wait_work_push(w, p, WAIT_WORK_PARKED);
    }
}

/* A cancelled ticket's attempt returned: nothing may stay held for it
 * unless a retry of its lease came meanwhile. */
static void settle_cancelled(struct wait *w, struct wait_ticket *t, struct wait_list *answers)
{
    struct reserve_result *r = t->result;
    bool release = t->followers == NULL && t->parked == NULL && r->allowed && !r->replayed;
    if (!release) /* a retry came: the admission, if any, stands for it */
        wait_unpark(w, t);
    bool waitable = r->error == BACKEND_OK && !r->allowed && !r->replayed && r->waitable;
    if (t->followers != NULL && waitable && !w->closing && requeue(w, t, r) == 0) {
        struct wait_ticket *f = t->followers;
        t->state = WAIT_QUEUED;
        t->last_retry_after_ms = r->retry_after_ms;
        t->wake_at_ms = wake_at(w, t, r, now_of(w));
        promote(w, t, RESERVE_WAIT_CANCELLED, answers);
        if (freed_since(w, f))
            wait_try_ask(w, f, NULL); /* capacity came back while t was asking */
        return;
    }
    leave_queues(w, t, NULL);
    wait_timer_set(w, t, INT64_MAX);
    if (release) {
        /* Its lease stays in the index: a retry arriving before the release
         * is done waits for it (wait.c, release_done), so that it is never
         * told "allowed" for what is about to be released. */
        t->release = (struct release_request){t->request->lease_id, t->request->lease_id_length};
        t->state = WAIT_RELEASING;
        wait_work_push(w, t, WAIT_WORK_RELEASE);
        return;
    }
    wait_lease_remove(w, t);
    if (t->followers != NULL)
        answer_followers(w, t, outcome_of(t, t->state == WAIT_FINAL), now_of(w), answers);
    finish(w, t, RESERVE_WAIT_CANCELLED, now_of(w), answers);
}

void wait_doom_in_flight(struct wait *w, const char *key, uint32_t length, bool gone,
                         uint64_t capacity)
{
    /* A start creating 100,000 limits calls this for each: no bucket to look at. */
    for (uint32_t b = 0; w->lease_count > 0 && b <= w->lease_mask; b++) {
        for (struct wait_ticket *t = w->leases[b]; t != NULL; t = t->lease_next) {
            if (t->state != WAIT_FIRST && t->state != WAIT_ASKING)
                continue;
            int32_t i = index_of(t->request, key, length);
            if (i < 0)
                continue;
            if (!gone && t->request->requirements[i].amount <= capacity) {
                if (t->doomed != BACKEND_OK && t->doomed_index == (uint8_t)i)
                    t->doomed = BACKEND_OK; /* an increase since: it fits again */
                continue;
            }
            t->doomed = (uint8_t)(gone ? BACKEND_UNKNOWN_LIMIT_KEY : BACKEND_EXCEEDS_CAPACITY);
            t->doomed_index = (uint8_t)i;
        }
    }
}

/* An attempt that was in flight across a limit change that dooms it: were
 * it to be queued again (a denial decided before the change, or
 * limit_decreasing), it is answered the error instead, as a queued waiter
 * was when the change came (wait.c, limit_answer). */
static void doom_apply(struct wait_ticket *t)
{
    const struct reserve_result *r = t->result;
    bool again = !r->allowed && !r->replayed &&
                 ((r->error == BACKEND_OK && r->waitable) || r->error == BACKEND_LIMIT_DECREASING);
    if (again && t->state != WAIT_FINAL)
        reserve_result_fail(t->result, (enum backend_error)t->doomed, t->doomed_index);
    t->doomed = BACKEND_OK;
}

void wait_settle(struct wait *w, struct wait_ticket *t, struct wait_list *answers)
{
    assert(t->state == WAIT_FIRST || t->state == WAIT_ASKING || t->state == WAIT_FINAL);
    bool was_asking = t->state == WAIT_ASKING;
    wait_queue_asking(t, false);
    if (t->doomed != BACKEND_OK)
        doom_apply(t);
    if (t->cancelled) {
        settle_cancelled(w, t, answers);
        return;
    }
    const struct reserve_result *r = t->result;
    bool final = t->state == WAIT_FINAL;
    bool denial = r->error == BACKEND_OK && !r->allowed && !r->replayed;
    /* A waiter's limit began to decrease: it waits for the decrease. */
    bool decreasing = r->error == BACKEND_LIMIT_DECREASING && t->queued_once;
    if (final || (!denial && !decreasing) || (denial && !r->waitable)) {
        wait_answer(w, t, outcome_of(t, final), answers);
        return;
    }
    if (w->closing) {
        wait_answer(w, t, RESERVE_WAIT_CLOSED, answers);
        return;
    }
    int64_t now_ms = now_of(w);
    t->state = WAIT_QUEUED;
    if (requeue(w, t, r) != 0) {
        t->full = true; /* no room for its places: answered as a full queue */
        wait_answer(w, t, RESERVE_WAIT_FULL, answers);
        return;
    }
    t->queued_once = true;
    t->last_retry_after_ms = r->retry_after_ms;
    if (now_ms >= t->deadline_ms || (denial && r->may_fit_at_unix_ms > t->deadline_ms)) {
        wait_deadline(w, t, answers);
        return;
    }
    t->wake_at_ms = wake_at(w, t, r, now_ms);
    wait_timer_set(w, t, t->wake_at_ms < t->deadline_ms ? t->wake_at_ms : t->deadline_ms);
    /* Capacity came back while it was asking: it asks again; else what
     * woke it may serve another. */
    bool again = freed_since(w, t) && wait_try_ask(w, t, NULL);
    if (!again && was_asking)
        pass_on(w, t);
}

void wait_cancel_locked(struct wait *w, struct wait_ticket *t, struct wait_list *answers)
{
    switch (t->state) {
    case WAIT_FOLLOWER:
        wait_timer_set(w, t, INT64_MAX);
        unfollow(t);
        finish(w, t, RESERVE_WAIT_CANCELLED, now_of(w), answers);
        break;
    case WAIT_QUEUED:
        if (t->followers != NULL) {
            promote(w, t, RESERVE_WAIT_CANCELLED, answers);
            break;
        }
        leave_queues(w, t, NULL);
        wait_timer_set(w, t, INT64_MAX);
        wait_lease_remove(w, t);
        finish(w, t, RESERVE_WAIT_CANCELLED, now_of(w), answers);
        break;
    case WAIT_FIRST:
    case WAIT_ASKING:
    case WAIT_FINAL:
        /* Out of the queues now; answered when its attempt returns. */
        t->cancelled = true;
        if (t->followers == NULL)
            leave_queues(w, t, NULL);
        break;
    default:
        break; /* answered, releasing, or a plain reserve */
    }
}
