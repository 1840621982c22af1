/* The wait layer's entry points and its thread (docs/architecture.md
 * "src/wait"). The thread is the only one that asks the backend again for
 * waiters: woken by the backend's freed events (handed over through a
 * small buffer under events_mutex, never the main mutex, so the backend's
 * lock is held only for a copy) and by timers, it decides under the mutex
 * (wait_settle.c), then makes the backend calls with no lock held. A
 * complete or release that frees capacity runs that pass itself, on its own
 * thread, when no other pass runs (pass_inline): the next waiter is then
 * answered without waking the wait layer's thread first. */
#include "wait.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wait_internal.h"

void wait_options_defaults(struct wait_options *options)
{
    memset(options, 0, sizeof *options);
    options->max_waiters = WAIT_WAITERS_DEFAULT;
    options->hold_ms = WAIT_HOLD_MS_DEFAULT;
}

/* Runs the done of each answered ticket (no lock held). A ticket may be
 * reused by its caller once its done ran: its link is read before. */
static void answers_run(struct wait_list *answers)
{
    for (struct wait_ticket *t = answers->head, *next; t != NULL; t = next) {
        next = t->work_next;
        t->work_next = NULL;
        t->done(t->context);
    }
}

/* The wait layer whose pass this thread runs inline (pass_inline), and
 * whether that pass was kicked: it looks for work itself instead of waking
 * the thread. The wait layer whose events this thread's backend call frees,
 * so that they are not signalled to the thread before it tries. */
static _Thread_local struct wait *inline_pass;
static _Thread_local bool inline_kicked;
static _Thread_local struct wait *inline_freeing;
/* The calls of an inline pass's work that returned on this thread before
 * the pass's work_run did: their end is counted by pass_run, under the
 * mutex it takes next anyway (call_done). */
static _Thread_local struct wait *inline_calling;
static _Thread_local uint32_t inline_returned;

void wait_kick(struct wait *w)
{
    if (inline_pass == w) {
        inline_kicked = true;
        return;
    }
    pthread_mutex_lock(&w->events_mutex);
    w->kicked = true;
    pthread_cond_signal(&w->events_cond);
    pthread_mutex_unlock(&w->events_mutex);
}

/* ---- the backend's events ---------------------------------------------- */

/* Called by the backend, perhaps under its lock: a copy into the buffer. */
static void wait_freed(void *context, const struct backend_freed *freed)
{
    struct wait *w = context;
    if (atomic_load(&w->interest) == 0)
        return; /* nobody waits: nothing to tell (a waiter counts before it asks) */
    struct wait_event e = {
        .hash = freed->key != NULL ? wait_hash(freed->key, freed->key_length) : 0,
        .available = freed->available,
        .available_known = freed->available_known,
        .any = freed->key == NULL,
    };
    pthread_mutex_lock(&w->events_mutex);
    e.seq = atomic_fetch_add(&w->event_seq, 1) + 1;
    if (w->event_count < WAIT_EVENTS_MAX)
        w->events[w->event_count++] = e;
    else
        w->events_lost = true;
    if (inline_freeing != w) /* else pass_inline takes it, or signals */
        pthread_cond_signal(&w->events_cond);
    pthread_mutex_unlock(&w->events_mutex);
}

/* Wakes every queue (an event about any limit, or events lost). */
static void wake_all(struct wait *w)
{
    uint32_t count = w->key_count;
    struct wait_key **keys = malloc((count + 1) * sizeof *keys);
    if (keys == NULL)
        return; /* the waiters' timers still stand */
    uint32_t n = 0;
    for (uint32_t i = 0; i <= w->bucket_mask; i++) {
        for (struct wait_key *k = w->buckets[i]; k != NULL; k = k->bucket_next)
            keys[n++] = k;
    }
    assert(n == count);
    /* Waking asks and adds places, never removes one: every queue stays. */
    for (uint32_t i = 0; i < n; i++)
        wait_wake_key(w, keys[i], false, 0);
    free(keys);
}

static void events_handle(struct wait *w, const struct wait_event *events, uint32_t count,
                          bool lost, uint64_t seq_now)
{
    bool any = lost;
    for (uint32_t i = 0; i < count; i++) {
        const struct wait_event *e = &events[i];
        w->stats.events++;
        if (e->any) {
            any = true;
            continue;
        }
        uint64_t *slot = &w->freed_seq[e->hash & (WAIT_FREED_SLOTS - 1)];
        if (e->seq > *slot)
            *slot = e->seq;
        struct wait_key *found[8];
        uint32_t n = 0;
        for (struct wait_key *k = w->buckets[e->hash & w->bucket_mask]; k != NULL && n < 8;
             k = k->bucket_next) {
            if (k->hash == e->hash)
                found[n++] = k;
        }
        for (uint32_t j = 0; j < n; j++)
            wait_wake_key(w, found[j], e->available_known, e->available);
    }
    if (any) {
        w->any_seq = seq_now;
        wake_all(w);
    }
}

/* ---- backend calls ------------------------------------------------------ */

/* After a call returned (mutex held): the thread is woken only when it has
 * something to do that it would otherwise not see in time: work to make, a
 * timer sooner than it sleeps, or the end of what was in flight while a
 * quiesce or close waits for it. A waiter that was just queued, its timer
 * later than the thread's, wakes nobody (one futex wake and two thread
 * switches an admission when each call completes at once). */
static void call_kick(struct wait *w)
{
    if (inline_pass == w) {
        inline_kicked = true;
        return;
    }
    bool work = w->work_head != NULL;
    bool drained = w->in_flight == 0;
    int64_t next_ms = wait_timer_next(w);
    pthread_mutex_lock(&w->events_mutex);
    /* Awake (INT64_MIN): it may have read the timers before this call's,
     * so it is kicked into one more pass rather than sleeping on. */
    if (work || w->closing || (drained && !w->idle) || w->sleep_until_ms == INT64_MIN ||
        next_ms < w->sleep_until_ms) {
        w->kicked = true;
        pthread_cond_signal(&w->events_cond);
    }
    pthread_mutex_unlock(&w->events_mutex);
}

/* The end of a call made for a ticket (mutex held). Kicked (a timer, work,
 * or nothing left in flight) before the mutex is let go: once it is,
 * wait_close may see nothing in flight and free the wait layer. Lock
 * order: mutex, then events_mutex. */
static void call_end_locked(struct wait *w)
{
    assert(w->in_flight > 0);
    w->in_flight--;
    call_kick(w);
}

/* A call made for a ticket is done once its answers ran: only then may
 * wait_quiesce and wait_close see nothing in flight. */
static void call_done(struct wait *w, struct wait_list *answers)
{
    answers_run(answers);
    if (inline_calling == w) { /* pass_run counts it, kicked, right after */
        inline_returned++;
        return;
    }
    pthread_mutex_lock(&w->mutex);
    call_end_locked(w);
    pthread_mutex_unlock(&w->mutex);
}

static void attempt_done(void *context)
{
    struct wait_ticket *t = context;
    struct wait *w = t->wait;
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    t->work = WAIT_WORK_NONE;
    w->stats.attempts++;
    wait_settle(w, t, &answers);
    if (answers.head == NULL && inline_calling != w) {
        call_end_locked(w); /* queued, nobody to answer: the call ends here */
        pthread_mutex_unlock(&w->mutex);
        return;
    }
    pthread_mutex_unlock(&w->mutex);
    call_done(w, &answers);
}

/* A reserve that waited for its lease's release: answered as the backend
 * answers it now (a released lease: already_finalized). */
static void parked_done(void *context)
{
    struct wait_ticket *t = context;
    struct wait *w = t->wait;
    pthread_mutex_lock(&w->mutex);
    assert(t->state == WAIT_PARKED);
    t->work = WAIT_WORK_NONE;
    t->state = WAIT_ANSWERED;
    pthread_mutex_unlock(&w->mutex);
    struct wait_list answers = {0};
    wait_list_push(&answers, t);
    call_done(w, &answers);
}

static void release_done(void *context)
{
    struct wait_ticket *t = context;
    struct wait *w = t->wait;
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    assert(t->state == WAIT_RELEASING);
    t->work = WAIT_WORK_NONE;
    wait_lease_remove(w, t);
    wait_unpark(w, t);
    /* A failed release changes nothing: the hold expires by itself. */
    reserve_result_clear(t->result);
    t->result->wait_outcome = RESERVE_WAIT_CANCELLED;
    /* The wall clock may have stepped back since the waiter started. */
    int64_t now_ms = clock_now_ms(w->clock);
    t->result->waited_ms = now_ms > t->started_ms ? now_ms - t->started_ms : 0;
    t->state = WAIT_ANSWERED;
    w->waiting--;
    atomic_fetch_sub(&w->interest, 1);
    w->stats.outcomes[RESERVE_WAIT_CANCELLED]++;
    wait_list_push(&answers, t);
    pthread_mutex_unlock(&w->mutex);
    call_done(w, &answers);
}

/* A plain reserve made because the queue was full. */
static void pass_done(void *context)
{
    struct wait_ticket *t = context;
    struct wait *w = t->wait;
    struct reserve_result *r = t->result;
    bool full = r->error == BACKEND_OK && !r->allowed && !r->replayed;
    if (full)
        r->wait_outcome = RESERVE_WAIT_FULL;
    pthread_mutex_lock(&w->mutex);
    if (full)
        w->stats.outcomes[RESERVE_WAIT_FULL]++;
    t->state = WAIT_ANSWERED;
    pthread_mutex_unlock(&w->mutex);
    struct wait_list answers = {0};
    wait_list_push(&answers, t);
    call_done(w, &answers);
}

static void work_run(struct wait *w, struct wait_ticket *list)
{
    for (struct wait_ticket *t = list, *next; t != NULL; t = next) {
        next = t->work_next; /* t may be answered (and reused) inside the call */
        if (t->work == WAIT_WORK_RELEASE) {
            backend_release(w->backend, &t->release, &t->release_result, 1, release_done, t);
            continue;
        }
        if (t->work == WAIT_WORK_PARKED) {
            backend_reserve(w->backend, t->request, t->result, 1, parked_done, t);
            continue;
        }
        assert(t->work == WAIT_WORK_ATTEMPT);
        /* Events after this read may not be in the backend's answer. */
        t->event_seq = atomic_load(&w->event_seq);
        backend_reserve(w->backend, &t->attempt, t->result, 1, attempt_done, t);
    }
}

/* ---- the thread --------------------------------------------------------- */

static void timers_handle(struct wait *w, int64_t now_ms, struct wait_list *answers)
{
    wait_keys_cool(w, now_ms, false);
    struct wait_ticket *t;
    while ((t = wait_timer_pop_due(w, now_ms)) != NULL) {
        if (t->state == WAIT_FOLLOWER) {
            wait_follower_deadline(w, t, RESERVE_WAIT_DEADLINE, answers);
            continue;
        }
        assert(t->state == WAIT_QUEUED); /* nothing in flight has a timer */
        if (now_ms >= t->deadline_ms)
            wait_deadline(w, t, answers);
        else
            (void)wait_try_ask(w, t, NULL);
    }
}

/* One pass: events, timers, then the backend calls they made. Returns the
 * next timer; *called (unless NULL) says whether it made any call, and
 * *work_left (unless NULL) whether work is scheduled now. */
static int64_t pass_run(struct wait *w, const struct wait_event *events, uint32_t count, bool lost,
                        bool *called, bool *work_left)
{
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    events_handle(w, events, count, lost, atomic_load(&w->event_seq));
    timers_handle(w, clock_now_ms(w->clock), &answers);
    struct wait_ticket *work = w->work_head;
    w->work_head = w->work_tail = NULL;
    pthread_mutex_unlock(&w->mutex);
    answers_run(&answers);
    if (called != NULL)
        *called = work != NULL;
    inline_calling = inline_pass == w ? w : NULL;
    work_run(w, work);
    inline_calling = NULL;
    pthread_mutex_lock(&w->mutex);
    if (inline_returned > 0) { /* call_done's end of each, as it would have made it */
        assert(w->in_flight >= inline_returned);
        w->in_flight -= inline_returned;
        inline_returned = 0;
        inline_kicked = true;
    }
    int64_t next_ms = wait_timer_next(w);
    if (work_left != NULL)
        *work_left = w->work_head != NULL;
    pthread_mutex_unlock(&w->mutex);
    return next_ms;
}

static bool idle_now(struct wait *w)
{
    pthread_mutex_lock(&w->mutex);
    bool idle = w->in_flight == 0 && w->work_head == NULL;
    pthread_mutex_unlock(&w->mutex);
    return idle;
}

/* The events for a pass, taken (events_mutex held): the buffers swap, so
 * the hook fills the other one meanwhile. */
struct pass_events {
    struct wait_event *events;
    uint32_t count;
    bool lost;
};

static struct pass_events events_take(struct wait *w)
{
    struct pass_events taken = {w->events, w->event_count, w->events_lost};
    w->events = w->events_spare;
    w->events_spare = taken.events;
    w->event_count = 0;
    w->events_lost = false;
    return taken;
}

static void *thread_main(void *arg)
{
    struct wait *w = arg;
    pthread_mutex_lock(&w->events_mutex);
    while (!w->stopping || w->passing) {
        if (w->passing) { /* an inline pass: this one waits for its end */
            w->thread_blocked = true;
            pthread_cond_wait(&w->events_cond, &w->events_mutex);
            w->thread_blocked = false;
            continue;
        }
        w->passing = true; /* until it sleeps: no inline pass meanwhile */
        w->thread_passing = true;
        struct pass_events taken = events_take(w);
        w->kicked = false;
        pthread_mutex_unlock(&w->events_mutex);
        int64_t next_ms = pass_run(w, taken.events, taken.count, taken.lost, NULL, NULL);
        bool idle = idle_now(w);
        pthread_mutex_lock(&w->events_mutex);
        w->passes++;
        w->idle = idle && w->event_count == 0 && !w->kicked;
        pthread_cond_broadcast(&w->idle_cond);
        w->passing = false;
        w->thread_passing = false;
        if (w->kicked || w->event_count > 0 || w->events_lost || w->stopping)
            continue;
        int64_t now_ms = clock_now_ms(w->clock);
        int64_t sleep_ms = next_ms == INT64_MAX ? WAIT_SLEEP_MS_MAX : next_ms - now_ms;
        if (sleep_ms <= 0)
            continue;
        if (sleep_ms > WAIT_SLEEP_MS_MAX)
            sleep_ms = WAIT_SLEEP_MS_MAX; /* the clock may jump */
        struct timespec until = clock_deadline(CLOCK_MONOTONIC, sleep_ms * 1000);
        w->sleep_until_ms = now_ms + sleep_ms;
        pthread_cond_timedwait(&w->events_cond, &w->events_mutex, &until);
        w->sleep_until_ms = INT64_MIN;
    }
    pthread_mutex_unlock(&w->events_mutex);
    return NULL;
}

/* The pass a freeing thread runs itself, right after its complete or
 * release (events_mutex held on entry and on return): the freed events it
 * told are handled here, the next waiter's reserve made and answered, with
 * no wake-up of the thread between the release and that answer. It runs
 * only when no other pass runs: the one running (another freeing thread's,
 * or the thread's) takes these events too, as it looks at the buffer again
 * under events_mutex before it ends, so nobody is woken for them. What it
 * leaves (more events, a timer earlier than the thread's wake-up) goes to
 * the thread. */
static bool pass_inline_locked(struct wait *w)
{
    bool called = false;
    bool more = w->event_count > 0 || w->events_lost;
    for (uint32_t round = 0; more && round < WAIT_INLINE_PASSES_MAX; round++) {
        if (w->stopping)
            break;
        if (w->passing) /* the pass running looks at the events again before it ends */
            return called;
        w->passing = true;
        struct pass_events taken = events_take(w);
        pthread_mutex_unlock(&w->events_mutex);
        inline_pass = w;
        inline_kicked = false;
        bool round_called, work_left;
        int64_t next_ms =
            pass_run(w, taken.events, taken.count, taken.lost, &round_called, &work_left);
        called |= round_called;
        inline_pass = NULL;
        bool work = inline_kicked && work_left;
        pthread_mutex_lock(&w->events_mutex);
        w->passing = false;
        if (next_ms < w->sleep_until_ms && w->sleep_until_ms != INT64_MIN)
            pthread_cond_signal(&w->events_cond); /* a timer sooner than it sleeps */
        /* Work its answers scheduled: the next round's pass makes the calls. */
        more = work || w->event_count > 0 || w->events_lost;
    }
    if (more || w->kicked || w->thread_blocked)
        pthread_cond_signal(&w->events_cond);
    return called;
}

/* Whether it made backend calls. */
static bool pass_inline(struct wait *w)
{
    inline_freeing = NULL;
    pthread_mutex_lock(&w->events_mutex);
    bool called = pass_inline_locked(w);
    pthread_mutex_unlock(&w->events_mutex);
    return called;
}

/* A complete or release is about to free room: with someone waiting, the
 * events it tells are not signalled to the thread, as this thread runs the
 * pass right after it (pass_inline). */
static bool freeing_begin(struct wait *w)
{
    if (atomic_load_explicit(&w->interest, memory_order_relaxed) == 0)
        return false;
    inline_freeing = w;
    return true;
}

/* A backend telling its freed events from a thread of its own (sqlite's
 * writer, right after the commit that freed them): that thread runs the
 * pass, as a freeing caller's thread does. */
static void wait_tell_begin(void *context)
{
    (void)freeing_begin(context);
}

static bool wait_tell_end(void *context)
{
    struct wait *w = context;
    return inline_freeing == w && pass_inline(w);
}

/* The backend's claim (memory): the room a complete or release of this
 * thread frees goes to the first waiter of its limit in the same critical
 * section, with no freed event, no pass and no second backend call. Only
 * for a first waiter that waits on that limit alone, is queued (not
 * asking already) and fits what is left; anything else is told as a freed
 * event. Under the backend's lock (lock order: a backend's lock, then
 * wait->mutex: no backend call is made with wait->mutex held). */
static bool wait_claim(void *context, const struct backend_freed *freed,
                       const struct reserve_request **request, struct reserve_result **result,
                       void **cookie)
{
    struct wait *w = context;
    if (inline_freeing != w || !freed->available_known)
        return false; /* not this thread's complete: its pass may not run here */
    uint64_t hash = wait_hash(freed->key, freed->key_length);
    bool claimed = false;
    pthread_mutex_lock(&w->mutex);
    struct wait_key *k = w->closing ? NULL : wait_key_find(w, freed->key, freed->key_length, hash);
    struct wait_node *n = k != NULL ? wait_queue_first(k) : NULL;
    struct wait_ticket *t = n != NULL ? n->ticket : NULL;
    if (t != NULL && t->state == WAIT_QUEUED && !t->cancelled &&
        t->request->requirement_count == 1 && (int64_t)n->amount <= freed->available) {
        /* As wait_try_ask, with the reserve made by the backend itself
         * right after this returns. */
        wait_asking(w, t);
        w->in_flight++; /* ended by attempt_done, through claimed_done */
        w->stats.handed_over++;
        t->event_seq = atomic_load(&w->event_seq);
        *request = &t->attempt;
        *result = t->result;
        *cookie = t;
        claimed = true;
    }
    pthread_mutex_unlock(&w->mutex);
    return claimed;
}

/* ---- open and close ----------------------------------------------------- */

static void wait_free(struct wait *w)
{
    wait_queue_free(w);
    wait_index_free(w);
    free(w->events);
    free(w->events_spare);
    pthread_mutex_destroy(&w->mutex);
    pthread_mutex_destroy(&w->events_mutex);
    pthread_cond_destroy(&w->events_cond);
    pthread_cond_destroy(&w->idle_cond);
    free(w);
}

int wait_open(struct backend *backend, struct clock *clock, const struct wait_options *options,
              struct wait **out, char *error, size_t error_size)
{
    if (options->max_waiters < 1 || options->max_waiters > WAIT_WAITERS_MAX) {
        snprintf(error, error_size, "max_waiters: must be 1..%d", WAIT_WAITERS_MAX);
        return -1;
    }
    if (options->hold_ms > WAIT_MS_MAX) {
        snprintf(error, error_size, "hold_ms: must be 0..%d", WAIT_MS_MAX);
        return -1;
    }
    struct wait *w = calloc(1, sizeof *w);
    if (w == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    w->backend = backend;
    w->clock = clock;
    w->options = *options;
    w->remote = backend->ops->holds_seen_here_only || backend->ops->watch == NULL;
    w->sleep_until_ms = INT64_MIN;
    pthread_mutex_init(&w->mutex, NULL);
    pthread_mutex_init(&w->events_mutex, NULL);
    clock_cond_init_monotonic(&w->events_cond);
    pthread_cond_init(&w->idle_cond, NULL);
    w->stats.max_waiters = options->max_waiters;
    w->events = malloc(WAIT_EVENTS_MAX * sizeof *w->events);
    w->events_spare = malloc(WAIT_EVENTS_MAX * sizeof *w->events_spare);
    if (w->events == NULL || w->events_spare == NULL || wait_queue_init(w) != 0 ||
        wait_index_init(w) != 0) {
        wait_free(w);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    if (pthread_create(&w->thread, NULL, thread_main, w) != 0) {
        wait_free(w);
        snprintf(error, error_size, "cannot start the wait thread");
        return -1;
    }
    if (backend->ops->watch != NULL) {
        struct backend_watch watch = {.freed = wait_freed,
                                      .context = w,
                                      .listening = &w->interest,
                                      .tell_begin = wait_tell_begin,
                                      .tell_end = wait_tell_end,
                                      .claim = wait_claim,
                                      .claimed_done = attempt_done};
        backend->ops->watch(backend, &watch);
    }
    *out = w;
    return 0;
}

/* Every waiter not in flight is answered now; the rest when their call
 * returns (wait_settle answers them while closing). */
static void close_answer(struct wait *w, struct wait_list *answers)
{
    w->closing = true;
    for (uint32_t i = 0; i <= w->lease_mask; i++) {
        /* Answering t takes only t out of the chain. */
        for (struct wait_ticket *t = w->leases[i], *next; t != NULL; t = next) {
            next = t->lease_next;
            while (t->followers != NULL)
                wait_follower_deadline(w, t->followers, RESERVE_WAIT_CLOSED, answers);
            if (t->state == WAIT_QUEUED)
                wait_answer(w, t, RESERVE_WAIT_CLOSED, answers);
        }
    }
}

void wait_drain(struct wait *w)
{
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    close_answer(w, &answers);
    pthread_mutex_unlock(&w->mutex);
    answers_run(&answers);
}

void wait_close(struct wait *w)
{
    if (w->backend->ops->watch != NULL)
        w->backend->ops->watch(w->backend, &(struct backend_watch){0});
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    close_answer(w, &answers);
    pthread_mutex_unlock(&w->mutex);
    answers_run(&answers);
    /* The thread makes the calls still scheduled; their answers come back. */
    for (;;) {
        pthread_mutex_lock(&w->mutex);
        bool drained = w->in_flight == 0 && w->work_head == NULL && w->waiting == 0;
        pthread_mutex_unlock(&w->mutex);
        if (drained)
            break;
        wait_quiesce(w);
    }
    pthread_mutex_lock(&w->events_mutex);
    w->stopping = true;
    pthread_cond_signal(&w->events_cond);
    pthread_mutex_unlock(&w->events_mutex);
    pthread_join(w->thread, NULL);
    pthread_mutex_lock(&w->mutex);
    wait_queue_check(w);
    wait_keys_cool(w, 0, true);
    assert(w->key_count == 0);
    assert(w->heap_count == 0);
    assert(w->run_head == NULL && w->run_tail == NULL);
    pthread_mutex_unlock(&w->mutex);
    wait_free(w);
}

/* Both return once a whole pass of the thread started after the call, and
 * with the thread out of any pass of its own: a test may then look at what
 * the pass did without racing one more. The thread is kicked only while it
 * is out of a pass, so that no kick makes it run one past the target. */
static void thread_kick_locked(struct wait *w)
{
    if (!w->kicked && !w->thread_passing) {
        w->kicked = true;
        pthread_cond_signal(&w->events_cond);
    }
}

void wait_pass(struct wait *w)
{
    pthread_mutex_lock(&w->events_mutex);
    uint64_t target = w->passes + 2; /* a whole pass after this call */
    while (w->passes < target || w->thread_passing) {
        if (w->passes < target)
            thread_kick_locked(w);
        pthread_cond_wait(&w->idle_cond, &w->events_mutex);
    }
    pthread_mutex_unlock(&w->events_mutex);
}

void wait_quiesce(struct wait *w)
{
    pthread_mutex_lock(&w->events_mutex);
    uint64_t target = w->passes + 2; /* a whole pass after this call */
    while (w->passes < target || !w->idle || w->thread_passing) {
        if (w->passes < target || !w->idle)
            thread_kick_locked(w);
        pthread_cond_wait(&w->idle_cond, &w->events_mutex);
    }
    pthread_mutex_unlock(&w->events_mutex);
    pthread_mutex_lock(&w->mutex);
    wait_queue_check(w);
    pthread_mutex_unlock(&w->mutex);
}

/* ---- the data path ------------------------------------------------------ */

static bool same_requirements(const struct reserve_request *a, const struct reserve_request *b)
{
    struct lease_item_key items[REQUIREMENTS_PER_RESERVE_MAX];
    uint8_t item_of[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < a->requirement_count; i++)
        items[i] = (struct lease_item_key){a->requirements[i].key, a->requirements[i].key_length,
                                           a->requirements[i].amount};
    return requirements_match(b, items, a->requirement_count, item_of);
}

/* A retry of a waiting lease joins its wait; false when its requirements
 * differ (lease_conflict). */
static bool follow(struct wait *w, struct wait_ticket *p, struct wait_ticket *t)
{
    if (!same_requirements(p->request, t->request))
        return false;
    t->state = WAIT_FOLLOWER;
    t->primary = p;
    struct wait_ticket **link = &p->followers;
    while (*link != NULL)
        link = &(*link)->next_follower;
    *link = t;
    w->waiting++;
    atomic_fetch_add(&w->interest, 1);
    wait_timer_set(w, t, t->deadline_ms);
    return true;
}

/* A retry of a lease whose client left while it waited, while its attempt
 * or its release is in flight: it goes to the backend once that is done,
 * never before, so that it is told what holds (an admission handed over to
 * it, or a release: already_finalized), never "allowed" for what is about
 * to be released. A retry that asks to wait joins the wait instead. */
static void park(struct wait_ticket *p, struct wait_ticket *t)
{
    t->state = WAIT_PARKED;
    struct wait_ticket **link = &p->parked;
    while (*link != NULL)
        link = &(*link)->next_follower;
    *link = t;
}

/* A reserve that does not wait: to the backend, yielding where others wait
 * ahead; through pass_done when it would have waited but the queue is full. */
static void reserve_plain(struct wait *w, struct wait_ticket *t, uint64_t yield, bool full)
{
    if (!full && yield == 0) {
        backend_reserve(w->backend, t->request, t->result, 1, t->done, t->context);
        return;
    }
    t->attempt = *t->request;
    t->attempt.yield_mask = yield;
    if (!full) {
        backend_reserve(w->backend, &t->attempt, t->result, 1, t->done, t->context);
        return;
    }
    t->state = WAIT_PASS;
    backend_reserve(w->backend, &t->attempt, t->result, 1, pass_done, t);
}

static void ticket_init(struct wait *w, struct wait_ticket *t,
                        const struct reserve_request *request, struct reserve_result *result,
                        backend_done_fn done, void *context)
{
    memset(t, 0, offsetof(struct wait_ticket, attempt));
    t->wait = w;
    t->request = request;
    t->result = result;
    t->done = done;
    t->context = context;
    t->timer_index = UINT32_MAX;
}

void wait_reserve(struct wait *w, struct wait_ticket *t, const struct reserve_request *request,
                  struct reserve_result *result, int64_t wait_ms, uint8_t priority,
                  backend_done_fn done, void *context)
{
    assert(wait_ms >= 0 && wait_ms <= WAIT_MS_MAX);
    assert(priority < WAIT_PRIORITIES);
    assert(request->wait_until_unix_ms == 0 && request->yield_mask == 0);
    t->state = WAIT_IDLE; /* wait_cancel of a plain reserve is a no-op */
    if (wait_ms == 0 && atomic_load_explicit(&w->interest, memory_order_relaxed) == 0) {
        backend_reserve(w->backend, request, result, 1, done, context); /* today's path */
        return;
    }
    ticket_init(w, t, request, result, done, context);
    t->lease_hash = wait_hash(request->lease_id, request->lease_id_length);
    pthread_mutex_lock(&w->mutex);
    struct wait_ticket *p =
        wait_lease_find(w, request->lease_id, request->lease_id_length, t->lease_hash);
    if (p != NULL && (p->state == WAIT_RELEASING || (p->cancelled && wait_ms == 0))) {
        park(p, t);
        pthread_mutex_unlock(&w->mutex);
        return;
    }
    bool full = w->waiting >= w->options.max_waiters;
    if (wait_ms == 0 || w->closing || full) {
        uint64_t yield = wait_yield_locked(w, request, priority, NULL);
        if (full && wait_ms > 0 && p != NULL && !w->closing) {
            /* A retry of a waiting lease, with no room to join its wait:
             * told the queue is full, never with a denial recorded against
             * the lease, which would end the wait it asks to join. */
            yield = request->requirement_count >= 64
                        ? UINT64_MAX
                        : (UINT64_C(1) << request->requirement_count) - 1;
        }
        bool pass = wait_ms > 0 && full && !w->closing;
        if (pass)
            w->in_flight++; /* answered through pass_done: wait_close waits for it */
        pthread_mutex_unlock(&w->mutex);
        reserve_plain(w, t, yield, pass);
        return;
    }
    int64_t now_ms = clock_now_ms(w->clock);
    t->started_ms = now_ms;
    t->deadline_ms = now_ms + wait_ms;
    t->priority = priority;
    if (p != NULL) {
        bool joined = follow(w, p, t);
        pthread_mutex_unlock(&w->mutex);
        if (!joined) {
            reserve_result_fail(result, BACKEND_LEASE_CONFLICT, 0);
            done(context);
        }
        return;
    }
    t->arrival = ++w->arrivals;
    t->state = WAIT_FIRST;
    wait_lease_insert(w, t);
    w->waiting++;
    w->in_flight++;
    atomic_fetch_add(&w->interest, 1); /* before the attempt: its events are told */
    wait_attempt_build(t, t->deadline_ms, wait_yield_locked(w, request, priority, t));
    pthread_mutex_unlock(&w->mutex);
    t->event_seq = atomic_load(&w->event_seq);
    backend_reserve(w->backend, &t->attempt, result, 1, attempt_done, t);
}

void wait_cancel(struct wait *w, struct wait_ticket *t)
{
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    wait_cancel_locked(w, t, &answers);
    pthread_mutex_unlock(&w->mutex);
    wait_kick(w);
    answers_run(&answers);
}

uint64_t wait_yield_mask(struct wait *w, const struct reserve_request *request, uint8_t priority)
{
    assert(priority < WAIT_PRIORITIES);
    if (atomic_load_explicit(&w->interest, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&w->mutex);
    uint64_t mask = wait_yield_locked(w, request, priority, NULL);
    pthread_mutex_unlock(&w->mutex);
    return mask;
}

void wait_complete(struct wait *w, const struct complete_request *requests,
                   struct complete_result *results, uint32_t count, backend_done_fn done,
                   void *context)
{
    bool pass = freeing_begin(w);
    backend_complete(w->backend, requests, results, count, done, context);
    if (pass)
        (void)pass_inline(w);
}

void wait_release(struct wait *w, const struct release_request *requests,
                  struct release_result *results, uint32_t count, backend_done_fn done,
                  void *context)
{
    bool pass = freeing_begin(w);
    backend_release(w->backend, requests, results, count, done, context);
    if (pass)
        (void)pass_inline(w);
}

/* ---- limits -------------------------------------------------------------- */

/* Waiters of the queue that can never fit the limit as it is now: a
 * deleted limit, or a capacity (or pending decrease) below their amount.
 * Answering one wakes the next, which may then be asking: it is answered
 * when its attempt returns (wait_doom_in_flight). */
static void limit_answer(struct wait *w, struct wait_key *k, bool gone, uint64_t capacity,
                         struct wait_list *answers)
{
    uint32_t count = 0;
    struct wait_ticket **doomed = malloc(k->count * sizeof *doomed);
    uint8_t *which = malloc(k->count);
    if (doomed == NULL || which == NULL) {
        free(doomed);
        free(which);
        return; /* they learn it when they next ask */
    }
    for (struct wait_node *n = wait_queue_first(k); n != NULL; n = wait_queue_after(k, n)) {
        struct wait_ticket *t = n->ticket;
        if (t->state == WAIT_QUEUED && (gone || n->amount > capacity)) {
            which[count] = n->requirement;
            doomed[count++] = t;
        }
    }
    for (uint32_t i = 0; i < count; i++) {
        struct wait_ticket *t = doomed[i];
        if (t->state != WAIT_QUEUED)
            continue;
        reserve_result_fail(t->result, gone ? BACKEND_UNKNOWN_LIMIT_KEY : BACKEND_EXCEEDS_CAPACITY,
                            which[i]);
        wait_answer(w, t, RESERVE_WAIT_FAILED, answers);
    }
    free(doomed);
    free(which);
}

void wait_limit_changed(struct wait *w, const char *key)
{
    struct limit_state state;
    bool gone = backend_get_limit(w->backend, key, &state) != 0;
    uint64_t capacity = state.definition.capacity;
    if (!gone && state.status == LIMIT_DECREASING && state.pending_decrease_to < capacity)
        capacity = state.pending_decrease_to;
    uint32_t length = (uint32_t)strnlen(key, LIMIT_KEY_LENGTH_MAX + 1);
    uint64_t hash = wait_hash(key, length);
    struct wait_list answers = {0};
    pthread_mutex_lock(&w->mutex);
    struct wait_key *k = wait_key_find(w, key, length, hash);
    if (k != NULL && k->count > 0)
        limit_answer(w, k, gone, capacity, &answers);
    /* Those in flight, and those that answering woke. */
    wait_doom_in_flight(w, key, length, gone, capacity);
    k = wait_key_find(w, key, length, hash); /* empty once its last waiter was answered */
    if (k != NULL)
        wait_wake_key(w, k, false, 0);
    pthread_mutex_unlock(&w->mutex);
    wait_kick(w);
    answers_run(&answers);
}

/* ---- reading -------------------------------------------------------------- */

void wait_stats(struct wait *w, struct wait_stats *out)
{
    pthread_mutex_lock(&w->mutex);
    *out = w->stats;
    out->waiting = w->waiting;
    out->queued = w->queued;
    out->keys = w->key_count - w->cooling_count;
    pthread_mutex_unlock(&w->mutex);
}

void wait_key_waiters(struct wait *w, const char *key, uint32_t *count, int64_t *oldest_started_ms)
{
    uint32_t length = (uint32_t)strnlen(key, LIMIT_KEY_LENGTH_MAX + 1);
    uint64_t hash = wait_hash(key, length);
    *count = 0;
    *oldest_started_ms = 0;
    pthread_mutex_lock(&w->mutex);
    struct wait_key *k = wait_key_find(w, key, length, hash);
    for (struct wait_node *n = k != NULL ? wait_queue_first(k) : NULL; n != NULL;
         n = wait_queue_after(k, n)) {
        (*count)++;
        int64_t started = n->ticket->started_ms;
        if (*oldest_started_ms == 0 || started < *oldest_started_ms)
            *oldest_started_ms = started;
    }
    pthread_mutex_unlock(&w->mutex);
}
