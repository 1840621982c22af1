/* The wait layer against a scripted backend: every reserve it sends stays
 * in flight until the test answers it, so the races the conformance suite
 * can only hit by chance are played out one by one: a cancel while an
 * attempt is in flight (an admission then released, or the wait handed to
 * a retry), shutdown with an attempt in flight, a release that lands while
 * the head's attempt is being decided, how far a wake goes down a queue,
 * a waiter whose limit starts to decrease or is cut below its need while
 * its attempt is in flight, a backend failure while waiting, a retry's own
 * deadline, a plain retry of a lease whose waiter left, a limit's turns of
 * holding back and letting pass (a waiter asking the whole capacity, one
 * that leaves and comes back). Manual clock; the wait layer is settled with
 * wait_quiesce, never by sleeping. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "test.h"
#include "wait/wait.h"

#define T0 INT64_C(1768478400000)
#define CALLS_MAX 64

/* ---- the scripted backend ------------------------------------------------ */

struct call {
    const struct reserve_request *request;
    struct reserve_result *result;
    backend_done_fn done;
    void *context;
};

struct fake {
    struct backend base;
    pthread_mutex_t mutex;
    struct call calls[CALLS_MAX]; /* reserves in flight, oldest first */
    uint32_t call_count;
    uint32_t reserves; /* reserves sent in all */
    char released[CALLS_MAX][LEASE_ID_LENGTH_MAX + 1];
    uint32_t release_count;
    struct backend_watch watch;
    bool limit_gone;    /* get_limit: -1 */
    bool hold_releases; /* a release's done waits for release_finish */
    backend_done_fn release_done;
    void *release_context;
    struct limit_state state;
};

static const struct backend_ops fake_ops;

static void nothing_done(void *context)
{
    (void)context;
}

static struct fake *fake_of(struct backend *base)
{
    return (struct fake *)base;
}

static void fake_reserve(struct backend *base, const struct reserve_request *requests,
                         struct reserve_result *results, uint32_t count, backend_done_fn done,
                         void *context)
{
    struct fake *f = fake_of(base);
    if (count != 1)
        abort();
    pthread_mutex_lock(&f->mutex);
    if (f->call_count == CALLS_MAX)
        abort();
    f->calls[f->call_count++] = (struct call){requests, results, done, context};
    f->reserves++;
    pthread_mutex_unlock(&f->mutex);
}

static void fake_release(struct backend *base, const struct release_request *requests,
                         struct release_result *results, uint32_t count, backend_done_fn done,
                         void *context)
{
    struct fake *f = fake_of(base);
    pthread_mutex_lock(&f->mutex);
    for (uint32_t i = 0; i < count; i++) {
        snprintf(f->released[f->release_count++], LEASE_ID_LENGTH_MAX + 1, "%.*s",
                 (int)requests[i].lease_id_length, requests[i].lease_id);
        results[i].error = BACKEND_OK;
    }
    if (f->hold_releases) {
        f->release_done = done;
        f->release_context = context;
        pthread_mutex_unlock(&f->mutex);
        return;
    }
    pthread_mutex_unlock(&f->mutex);
    done(context);
}

/* A complete that frees one slot, told to the wait layer as a backend
 * does, before its done. */
static void fake_complete(struct backend *base, const struct complete_request *requests,
                          struct complete_result *results, uint32_t count, backend_done_fn done,
                          void *context)
{
    struct fake *f = fake_of(base);
    (void)requests;
    memset(results, 0, count * sizeof *results);
    struct backend_freed freed = {"slots", 5, true, 1};
    pthread_mutex_lock(&f->mutex);
    if (backend_watch_wanted(&f->watch))
        f->watch.freed(f->watch.context, &freed);
    pthread_mutex_unlock(&f->mutex);
    done(context);
}

/* The release held back (hold_releases) returns. */
static void release_finish(struct fake *f)
{
    pthread_mutex_lock(&f->mutex);
    backend_done_fn done = f->release_done;
    void *context = f->release_context;
    f->release_done = NULL;
    pthread_mutex_unlock(&f->mutex);
    if (done == NULL)
        abort(); /* the test expected a release in flight */
    done(context);
}

static enum backend_admin_result fake_get_limit(struct backend *base, const char *key,
                                                struct limit_state *out)
{
    struct fake *f = fake_of(base);
    (void)key;
    if (f->limit_gone)
        return BACKEND_ADMIN_UNKNOWN_KEY;
    *out = f->state;
    return BACKEND_ADMIN_OK;
}

static void fake_watch(struct backend *base, const struct backend_watch *watch)
{
    struct fake *f = fake_of(base);
    pthread_mutex_lock(&f->mutex);
    f->watch = *watch;
    pthread_mutex_unlock(&f->mutex);
}

static const struct backend_ops fake_ops = {
    .name = "fake",
    .reserve = fake_reserve,
    .release = fake_release,
    .complete = fake_complete,
    .get_limit = fake_get_limit,
    .watch = fake_watch,
};

/* Tells the wait layer a limit freed, as a backend does. */
static void fake_free(struct fake *f, const char *key, bool known, int64_t available)
{
    struct backend_freed freed = {key, (uint32_t)strlen(key), known, available};
    pthread_mutex_lock(&f->mutex);
    if (backend_watch_wanted(&f->watch))
        f->watch.freed(f->watch.context, &freed);
    pthread_mutex_unlock(&f->mutex);
}

static uint32_t in_flight(struct fake *f)
{
    pthread_mutex_lock(&f->mutex);
    uint32_t n = f->call_count;
    pthread_mutex_unlock(&f->mutex);
    return n;
}

/* The oldest reserve in flight, taken out: the test writes its answer. */
static struct call take(struct fake *f)
{
    pthread_mutex_lock(&f->mutex);
    if (f->call_count == 0)
        abort(); /* the test expected a reserve in flight */
    struct call c = f->calls[0];
    memmove(&f->calls[0], &f->calls[1], --f->call_count * sizeof f->calls[0]);
    pthread_mutex_unlock(&f->mutex);
    reserve_result_clear(c.result);
    return c;
}

/* Allowed; what each limit has left is 0, as on a full limit. */
static void answer_allowed(struct fake *f)
{
    struct call c = take(f);
    for (uint32_t i = 0; c.request->states != NULL && i < c.request->requirement_count; i++)
        c.request->states[i] = (struct requirement_state){.known = true, .capacity = 10};
    c.result->allowed = true;
    c.result->reserved_at_unix_ms = T0;
    c.result->expires_at_unix_ms = T0 + 60000;
    c.done(c.context);
}

/* A capacity denial of every requirement, waitable when the request waits. */
static void answer_denied(struct fake *f, int64_t fits_at_ms)
{
    struct call c = take(f);
    for (uint32_t i = 0; i < c.request->requirement_count; i++)
        c.result->denied_index[c.result->denied_count++] = (uint8_t)i;
    c.result->retry_after_ms = 250;
    c.result->fits_at_unix_ms = fits_at_ms;
    c.result->may_fit_at_unix_ms = T0;
    c.result->waitable = c.request->wait_until_unix_ms != 0 || c.request->yield_mask != 0;
    c.done(c.context);
}

static void answer_error(struct fake *f, enum backend_error error)
{
    struct call c = take(f);
    reserve_result_fail(c.result, error, 0);
    if (error == BACKEND_LIMIT_DECREASING)
        c.result->retry_after_ms = 10000;
    c.done(c.context);
}

/* ---- waiters ------------------------------------------------------------- */

struct waiter {
    struct wait_ticket ticket;
    struct reserve_request request;
    struct reserve_result result;
    struct requirement requirement;
    char lease[32];
    int done_count; /* under the test's lock */
};

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;

static void waiter_done(void *context)
{
    struct waiter *x = context;
    pthread_mutex_lock(&done_lock);
    x->done_count++;
    pthread_cond_broadcast(&done_cond);
    pthread_mutex_unlock(&done_lock);
}

static int done_count(struct waiter *x)
{
    pthread_mutex_lock(&done_lock);
    int n = x->done_count;
    pthread_mutex_unlock(&done_lock);
    return n;
}

struct env {
    struct fake fake;
    struct clock_manual clock;
    struct wait *wait;
    struct waiter waiters[8];
};

static void env_open_hold(struct env *e, uint32_t max_waiters, uint32_t hold_ms)
{
    memset(e, 0, sizeof *e);
    e->fake.base.ops = &fake_ops;
    pthread_mutex_init(&e->fake.mutex, NULL);
    e->fake.state.definition.capacity = 10;
    clock_manual_init(&e->clock, T0);
    struct wait_options options;
    wait_options_defaults(&options);
    options.max_waiters = max_waiters;
    options.hold_ms = hold_ms;
    char error[128];
    if (wait_open(&e->fake.base, &e->clock.clock, &options, &e->wait, error, sizeof error) != 0) {
        fprintf(stderr, "wait_open: %s\n", error);
        exit(1);
    }
}

static void env_open(struct env *e, uint32_t max_waiters)
{
    env_open_hold(e, max_waiters, WAIT_HOLD_MS_DEFAULT);
}

/* The clock to T0 + at_ms, and a whole pass of the wait layer after it. */
static void at(struct env *e, int64_t at_ms)
{
    clock_manual_set(&e->clock, T0 + at_ms);
    wait_kick(e->wait);
    wait_pass(e->wait);
}

/* Closes: answers whatever is still in flight as denied first. */
static void env_close(struct env *e)
{
    for (;;) {
        wait_pass(e->wait);
        if (in_flight(&e->fake) == 0)
            break;
        answer_denied(&e->fake, T0 + 600000);
    }
    wait_close(e->wait);
    for (uint32_t i = 0; i < 8; i++)
        CHECK(e->waiters[i].lease[0] == '\0' || done_count(&e->waiters[i]) == 1);
    pthread_mutex_destroy(&e->fake.mutex);
}

static struct waiter *start(struct env *e, uint32_t i, const char *lease, uint64_t amount,
                            int64_t wait_ms, uint8_t priority)
{
    struct waiter *x = &e->waiters[i];
    memset(x, 0, sizeof *x);
    snprintf(x->lease, sizeof x->lease, "%s", lease);
    x->requirement = (struct requirement){"slots", 5, amount};
    x->request = (struct reserve_request){.lease_id = x->lease,
                                          .lease_id_length = (uint32_t)strlen(x->lease),
                                          .requirements = &x->requirement,
                                          .requirement_count = 1};
    wait_reserve(e->wait, &x->ticket, &x->request, &x->result, wait_ms, priority, waiter_done, x);
    return x;
}

/* Starts a waiter and denies its first attempt: it is queued. */
static struct waiter *queued(struct env *e, uint32_t i, const char *lease, uint64_t amount)
{
    struct waiter *x = start(e, i, lease, amount, 30000, 5);
    answer_denied(&e->fake, T0 + 600000);
    wait_pass(e->wait);
    return x;
}

/* ---- tests ----------------------------------------------------------------- */

static void cancel_while_admitted_releases(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = start(&e, 0, "a", 1, 30000, 5);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    wait_cancel(e.wait, &a->ticket);
    CHECK_EQ_I64(done_count(a), 0); /* its attempt is still in flight */
    answer_allowed(&e.fake);        /* ... and admits it */
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK(!a->result.allowed);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    CHECK_EQ_U64(e.fake.release_count, 1); /* nothing stays held */
    CHECK_STR(e.fake.released[0], "a");
    env_close(&e);
}

static void cancel_while_asking_hands_over_to_a_retry(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "lease", 1);
    struct waiter *b = start(&e, 1, "lease", 1, 30000, 5); /* joins a */
    CHECK_EQ_U64(in_flight(&e.fake), 0);
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* a asks */
    wait_cancel(e.wait, &a->ticket);
    answer_denied(&e.fake, T0 + 600000);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    CHECK_EQ_I64(done_count(b), 0); /* b waits on in a's place */
    CHECK_EQ_U64(e.fake.release_count, 0);
    fake_free(&e.fake, "slots", true, 1);
    wait_pass(e.wait);
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK(b->result.allowed);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_ADMITTED);
    env_close(&e);
}

static void retry_of_a_cancelled_lease_takes_its_admission(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = start(&e, 0, "a", 1, 30000, 5);
    wait_cancel(e.wait, &a->ticket);
    struct waiter *b = start(&e, 1, "a", 1, 0, 5); /* a plain retry of a's lease */
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* held back: only a's attempt is in flight */
    answer_allowed(&e.fake);             /* a's attempt admits */
    wait_pass(e.wait);
    CHECK_EQ_U64(e.fake.release_count, 0); /* the admission stands for the retry */
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    CHECK_EQ_I64(done_count(b), 0);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* b is sent only now: the backend replays it */
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK(b->result.allowed);
    env_close(&e);
}

static void release_with_the_clock_moved_back_waited_never_below_zero(void)
{
    struct env e;
    env_open(&e, 16);
    e.fake.hold_releases = true;
    struct waiter *a = start(&e, 0, "a", 1, 30000, 5);
    wait_cancel(e.wait, &a->ticket);
    answer_allowed(&e.fake); /* admitted after its client left: released */
    wait_pass(e.wait);
    clock_manual_advance(&e.clock, -5000); /* the wall clock steps back mid-release */
    release_finish(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    CHECK_EQ_I64(a->result.waited_ms, 0);
    env_close(&e);
}

static void retry_during_a_release_is_sent_after_it(void)
{
    struct env e;
    env_open(&e, 16);
    e.fake.hold_releases = true;
    struct waiter *a = start(&e, 0, "a", 1, 30000, 5);
    wait_cancel(e.wait, &a->ticket);
    answer_allowed(&e.fake); /* admitted after its client left: released */
    wait_pass(e.wait);
    CHECK_EQ_U64(e.fake.release_count, 1);
    CHECK_EQ_I64(done_count(a), 0); /* answered once the release returns */
    struct waiter *b = start(&e, 1, "a", 1, 0, 5);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 0); /* b waits for the release */
    release_finish(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* now b goes: the backend knows the lease released */
    answer_error(&e.fake, BACKEND_ALREADY_FINALIZED);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK(!b->result.allowed);
    CHECK_EQ_I64(b->result.error, BACKEND_ALREADY_FINALIZED);
    env_close(&e);
}

static void a_complete_hands_over_on_its_own_thread(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    CHECK_EQ_U64(in_flight(&e.fake), 0);
    struct complete_request complete = {"h", 1, NULL, 0};
    struct complete_result result;
    wait_complete(e.wait, &complete, &result, 1, nothing_done, NULL);
    /* The waiter's reserve was made before wait_complete returned: by the
     * completing thread, not after a wake-up of the wait layer's thread. */
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK(a->result.allowed);
    env_close(&e);
}

struct telling {
    struct env *e;
    bool called;       /* what tell_end said */
    uint32_t in_flight; /* the waiter's reserves made when tell_end returned */
};

/* A backend thread of its own (sqlite's writer) telling a freed slot. */
static void *tell_from_a_backend_thread(void *arg)
{
    struct telling *t = arg;
    struct fake *f = &t->e->fake;
    pthread_mutex_lock(&f->mutex);
    struct backend_watch watch = f->watch;
    pthread_mutex_unlock(&f->mutex);
    struct backend_freed freed = {"slots", 5, true, 1};
    watch.tell_begin(watch.context);
    watch.freed(watch.context, &freed);
    t->called = watch.tell_end(watch.context);
    t->in_flight = in_flight(f);
    return NULL;
}

static void a_backend_thread_that_tells_hands_over_on_it(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    CHECK_EQ_U64(in_flight(&e.fake), 0);
    struct telling t = {.e = &e};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, tell_from_a_backend_thread, &t) == 0);
    pthread_join(thread, NULL);
    /* The waiter's reserve was made before tell_end returned, and said so
     * (sqlite then syncs the two commits together). */
    CHECK(t.called);
    CHECK_EQ_U64(t.in_flight, 1);
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK(a->result.allowed);
    /* With nobody waiting, nothing is asked and tell_end says so. */
    t = (struct telling){.e = &e};
    REQUIRE(pthread_create(&thread, NULL, tell_from_a_backend_thread, &t) == 0);
    pthread_join(thread, NULL);
    CHECK(!t.called);
    CHECK_EQ_U64(t.in_flight, 0);
    env_close(&e);
}

static void retry_of_a_cancelled_denied_lease_is_sent_after(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = start(&e, 0, "a", 1, 30000, 5);
    wait_cancel(e.wait, &a->ticket);
    struct waiter *b = start(&e, 1, "a", 1, 0, 5);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    answer_denied(&e.fake, T0 + 600000); /* a's attempt is denied: nothing to release */
    wait_pass(e.wait);
    CHECK_EQ_U64(e.fake.release_count, 0);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* now b goes */
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK(b->result.allowed);
    env_close(&e);
}

struct late_answer {
    struct env *e;
    struct waiter *first_answered;
};

/* Answers the attempt in flight once close has begun (it answered b). */
static void *answer_when_closing(void *arg)
{
    struct late_answer *late = arg;
    pthread_mutex_lock(&done_lock);
    while (late->first_answered->done_count == 0)
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
    answer_denied(&late->e->fake, T0 + 600000);
    return NULL;
}

static void close_with_an_attempt_in_flight(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    struct waiter *b = queued(&e, 1, "b", 1);
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* a asks */
    struct late_answer late = {&e, b};
    pthread_t thread;
    if (pthread_create(&thread, NULL, answer_when_closing, &late) != 0)
        abort();
    wait_close(e.wait); /* answers b at once, a once its attempt returns */
    pthread_join(thread, NULL);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CLOSED);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_CLOSED);
    CHECK(!a->result.allowed);
    pthread_mutex_destroy(&e.fake.mutex);
}

static void release_during_the_heads_attempt_is_not_lost(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    fake_free(&e.fake, "slots", true, 1);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    /* The backend decided before a second release landed: told now. */
    fake_free(&e.fake, "slots", true, 1);
    answer_denied(&e.fake, T0 + 600000);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* it asks again */
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK(a->result.allowed);
    env_close(&e);
}

static void a_wake_goes_as_far_as_what_is_left(void)
{
    struct env e;
    env_open(&e, 16);
    queued(&e, 0, "a", 2);
    queued(&e, 1, "b", 2);
    queued(&e, 2, "c", 2);
    uint32_t before = e.fake.reserves;
    fake_free(&e.fake, "slots", true, 4);
    wait_pass(e.wait);
    CHECK_EQ_U64(e.fake.reserves - before, 2); /* a and b fit in 4; c is not woken */
    CHECK_EQ_U64(in_flight(&e.fake), 2);
    answer_allowed(&e.fake);
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 0);
    CHECK_EQ_I64(done_count(&e.waiters[2]), 0);
    /* Unknown availability: the head alone. */
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    env_close(&e);
}

static void a_decreasing_limit_is_waited_for(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    answer_error(&e.fake, BACKEND_LIMIT_DECREASING);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 0);        /* it waits for the decrease */
    fake_free(&e.fake, "slots", false, 0); /* the tick applied it */
    wait_pass(e.wait);
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK(a->result.allowed);
    /* A new request is answered limit_decreasing at once. */
    struct waiter *b = start(&e, 1, "b", 1, 30000, 5);
    answer_error(&e.fake, BACKEND_LIMIT_DECREASING);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK_EQ_I64(b->result.error, BACKEND_LIMIT_DECREASING);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_NONE);
    env_close(&e);
}

/* The capacity is cut below what the head needs while its attempt is in
 * flight: the backend answers that attempt limit_decreasing (or a denial it
 * decided before the cut). The waiter is answered exceeds_capacity as soon as
 * it returns, not queued again at the head until the decrease applies, and
 * the waiter behind it asks. */
static void a_cut_during_the_heads_attempt_answers_it(bool decided_before)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 8);
    struct waiter *b = queued(&e, 1, "b", 1);
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* a asks */
    e.fake.state.status = LIMIT_DECREASING;
    e.fake.state.pending_decrease_to = 5;
    wait_limit_changed(e.wait, "slots");
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 0); /* its attempt is still in flight */
    if (decided_before)
        answer_denied(&e.fake, T0 + 600000);
    else
        answer_error(&e.fake, BACKEND_LIMIT_DECREASING);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK(!a->result.allowed);
    CHECK_EQ_I64(a->result.error, BACKEND_EXCEEDS_CAPACITY);
    CHECK_EQ_I64(a->result.error_index, 0);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_FAILED);
    CHECK_EQ_I64(done_count(b), 0);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* b, now first, asks */
    env_close(&e);
}

static void a_cut_during_the_heads_attempt_answers_it_decreasing(void)
{
    a_cut_during_the_heads_attempt_answers_it(false);
}

static void a_cut_during_the_heads_attempt_answers_it_denied(void)
{
    a_cut_during_the_heads_attempt_answers_it(true);
}

/* Two queued waiters that need more than a pending decrease: the first is
 * answered at once, which wakes the second; its attempt, answered
 * limit_decreasing, answers it too. */
static void a_cut_answers_a_waiter_it_woke(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 8);
    struct waiter *b = queued(&e, 1, "b", 8);
    e.fake.state.status = LIMIT_DECREASING;
    e.fake.state.pending_decrease_to = 5;
    wait_limit_changed(e.wait, "slots");
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.error, BACKEND_EXCEEDS_CAPACITY);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* a's leaving woke b */
    answer_error(&e.fake, BACKEND_LIMIT_DECREASING);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK_EQ_I64(b->result.error, BACKEND_EXCEEDS_CAPACITY);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_FAILED);
    env_close(&e);
}

/* The same for a first attempt, and for a limit deleted meanwhile. */
static void a_change_during_a_first_attempt_answers_it(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = start(&e, 0, "a", 8, 30000, 5);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    e.fake.state.definition.capacity = 5; /* applied at once */
    wait_limit_changed(e.wait, "slots");
    answer_denied(&e.fake, T0 + 600000); /* decided before the cut */
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.error, BACKEND_EXCEEDS_CAPACITY);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_NONE); /* it never waited */
    struct waiter *b = start(&e, 1, "b", 1, 30000, 5);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    e.fake.limit_gone = true;
    wait_limit_changed(e.wait, "slots");
    answer_denied(&e.fake, T0 + 600000);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK_EQ_I64(b->result.error, BACKEND_UNKNOWN_LIMIT_KEY);
    struct wait_stats s;
    wait_stats(e.wait, &s);
    CHECK_EQ_U64(s.waiting, 0);
    env_close(&e);
}

static void a_backend_failure_while_waiting_is_answered(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    answer_error(&e.fake, BACKEND_UNAVAILABLE);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.error, BACKEND_UNAVAILABLE);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_FAILED);
    env_close(&e);
}

static void a_retry_has_its_own_deadline(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "lease", 1);
    struct waiter *b = start(&e, 1, "lease", 1, 1000, 5);
    clock_manual_advance(&e.clock, 1000);
    wait_kick(e.wait);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK(!b->result.allowed);
    CHECK_EQ_U64(b->result.denied_count, 1);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_DEADLINE);
    CHECK_EQ_I64(b->result.waited_ms, 1000);
    CHECK_EQ_I64(done_count(a), 0);
    CHECK_EQ_U64(in_flight(&e.fake), 0); /* no attempt for it: a's wait goes on */
    env_close(&e);
}

static void the_deadline_makes_one_plain_reserve(void)
{
    struct env e;
    env_open(&e, 16);
    struct waiter *a = queued(&e, 0, "a", 1);
    clock_manual_advance(&e.clock, 30000);
    wait_kick(e.wait);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    pthread_mutex_lock(&e.fake.mutex);
    CHECK_EQ_I64(e.fake.calls[0].request->wait_until_unix_ms, 0); /* recorded as a plain one */
    pthread_mutex_unlock(&e.fake.mutex);
    answer_denied(&e.fake, T0 + 600000);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(a), 1);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_DEADLINE);
    CHECK_EQ_I64(a->result.retry_after_ms, 250);
    env_close(&e);
}

/* Deadlines out of arrival order (two in the timers' ordered run, two in
 * the heap): each waiter is answered at its own, none sooner. */
static void deadlines_in_any_order_are_each_kept(void)
{
    struct env e;
    env_open(&e, 16);
    static const int64_t wait_ms[] = {3000, 1000, 2000, 3000};
    static const char *leases[] = {"a", "b", "c", "d"};
    struct waiter *x[4];
    for (uint32_t i = 0; i < 4; i++) {
        x[i] = start(&e, i, leases[i], 1, wait_ms[i], 5);
        answer_denied(&e.fake, T0 + 600000);
        wait_pass(e.wait);
    }
    wait_quiesce(e.wait); /* asserts the timers' order */
    static const uint32_t due_at[] = {1000, 2000, 3000};
    static const uint32_t done_by[][4] = {{0, 1, 0, 0}, {0, 1, 1, 0}, {1, 1, 1, 1}};
    int64_t now = 0;
    for (uint32_t step = 0; step < 3; step++) {
        clock_manual_advance(&e.clock, due_at[step] - 1 - now);
        wait_kick(e.wait);
        wait_pass(e.wait);
        CHECK_EQ_U64(in_flight(&e.fake), 0); /* a millisecond early: nothing */
        clock_manual_advance(&e.clock, 1);
        now = due_at[step];
        wait_kick(e.wait);
        wait_pass(e.wait);
        while (in_flight(&e.fake) > 0) {
            answer_denied(&e.fake, T0 + 600000);
            wait_pass(e.wait);
        }
        for (uint32_t i = 0; i < 4; i++) {
            CHECK_EQ_I64(done_count(x[i]), done_by[step][i]);
            if (done_by[step][i])
                CHECK_EQ_I64(x[i]->result.wait_outcome, RESERVE_WAIT_DEADLINE);
        }
        wait_quiesce(e.wait);
    }
    env_close(&e);
}

/* What a plain reserve of one slot at this priority yields on: 1 when
 * it is held back, 0 when it may take a slot. */
static uint64_t plain_yield(struct env *e, uint8_t priority)
{
    struct requirement one = {"slots", 5, 1};
    struct reserve_request plain = {
        .lease_id = "p", .lease_id_length = 1, .requirements = &one, .requirement_count = 1};
    return wait_yield_mask(e->wait, &plain, priority);
}

/* The yield_mask of the attempt in flight (the oldest). */
static uint64_t attempt_yield(struct env *e)
{
    pthread_mutex_lock(&e->fake.mutex);
    uint64_t yield = e->fake.calls[0].request->yield_mask;
    pthread_mutex_unlock(&e->fake.mutex);
    return yield;
}

/* A waiter of priority 0 asking the whole capacity, queued at T0 (it can
 * never fit while anything is held). */
static struct waiter *whole(struct env *e, uint32_t i, const char *lease)
{
    struct waiter *x = start(e, i, lease, 10, 30000, 0);
    answer_denied(&e->fake, T0 + 600000);
    wait_pass(e->wait);
    CHECK_EQ_I64(done_count(x), 0);
    return x;
}

/* docs/semantics.md "Order": a limit's waiters hold back later requests
 * for hold_ms, then let those that fit pass for as long, in turns. */
static void a_head_holds_back_for_hold_ms_then_smaller_ones_pass(void)
{
    struct env e;
    env_open_hold(&e, 16, 1000);
    struct waiter *a = whole(&e, 0, "a");
    /* Its turn to hold back: a plain reserve of any priority yields, a
     * small waiter queues behind it. */
    CHECK_EQ_U64(plain_yield(&e, 0), 1);
    CHECK_EQ_U64(plain_yield(&e, 9), 1);
    struct waiter *v = start(&e, 1, "v", 1, 30000, 5);
    CHECK_EQ_U64(attempt_yield(&e), 1);
    answer_denied(&e.fake, T0 + 1); /* a yield: it would fit now */
    wait_pass(e.wait);
    at(&e, 999);
    CHECK_EQ_U64(in_flight(&e.fake), 0); /* held back: it does not ask */
    CHECK_EQ_U64(plain_yield(&e, 5), 1);
    CHECK_EQ_I64(done_count(v), 0);
    /* hold_ms after the queue formed: the small one asks, unyielding. */
    at(&e, 1000);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    CHECK_EQ_U64(attempt_yield(&e), 0);
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(v), 1);
    CHECK(v->result.allowed);
    CHECK_EQ_I64(v->result.wait_outcome, RESERVE_WAIT_ADMITTED);
    CHECK_EQ_I64(v->result.waited_ms, 1000);
    CHECK_EQ_U64(plain_yield(&e, 5), 0); /* a plain one passes too */
    CHECK_EQ_U64(plain_yield(&e, 0), 0);
    CHECK_EQ_I64(done_count(a), 0); /* the large one keeps its place */
    /* What frees goes to it first, while it waits (here: all of it). */
    fake_free(&e.fake, "slots", true, 10);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1);
    CHECK_EQ_U64(attempt_yield(&e), 0);
    CHECK_EQ_U64(plain_yield(&e, 9), 1); /* woken for that room: not overtaken */
    answer_denied(&e.fake, T0 + 600000); /* someone took it first */
    wait_pass(e.wait);
    CHECK_EQ_U64(plain_yield(&e, 5), 0);
    /* Then it holds back again, and so on. */
    at(&e, 1999);
    CHECK_EQ_U64(plain_yield(&e, 9), 0);
    at(&e, 2000);
    CHECK_EQ_U64(plain_yield(&e, 9), 1);
    at(&e, 3000);
    CHECK_EQ_U64(plain_yield(&e, 9), 0);
    env_close(&e);
}

/* A waiter that leaves and comes back does not start the turns again: the
 * limit lets pass when it would have; a queue empty for twice hold_ms
 * starts afresh. */
static void leaving_and_coming_back_keeps_the_turns(void)
{
    struct env e;
    env_open_hold(&e, 16, 1000);
    struct waiter *a = whole(&e, 0, "a");
    at(&e, 900);
    wait_cancel(e.wait, &a->ticket);
    CHECK_EQ_U64(plain_yield(&e, 5), 0); /* nobody waits */
    struct waiter *b = whole(&e, 1, "b");
    CHECK_EQ_U64(plain_yield(&e, 5), 1);
    at(&e, 1000); /* hold_ms after a queued, not after b */
    CHECK_EQ_U64(plain_yield(&e, 5), 0);
    struct waiter *v = start(&e, 2, "v", 1, 30000, 5);
    CHECK_EQ_U64(attempt_yield(&e), 0);
    answer_allowed(&e.fake);
    CHECK(v->result.allowed);
    at(&e, 2000);
    CHECK_EQ_U64(plain_yield(&e, 5), 1);
    wait_cancel(e.wait, &b->ticket);
    at(&e, 3999); /* empty for less than twice hold_ms: the turns go on */
    struct waiter *c = whole(&e, 3, "c");
    CHECK_EQ_U64(plain_yield(&e, 5), 0);
    wait_cancel(e.wait, &c->ticket);
    at(&e, 7999); /* empty for twice hold_ms: it starts afresh */
    struct waiter *d = whole(&e, 4, "d");
    CHECK_EQ_U64(plain_yield(&e, 5), 1);
    at(&e, 8998);
    CHECK_EQ_U64(plain_yield(&e, 5), 1);
    at(&e, 8999);
    CHECK_EQ_U64(plain_yield(&e, 5), 0);
    CHECK_EQ_I64(done_count(d), 0);
    env_close(&e);
}

/* Room that freed while the limit held back is offered down the queue
 * once it lets pass; and while it lets pass, a head that cannot take what
 * freed (unknown how much) hands the wake on to the next waiter. */
static void what_freed_goes_down_the_queue_when_it_lets_pass(void)
{
    struct env e;
    env_open_hold(&e, 16, 1000);
    whole(&e, 0, "a");
    struct waiter *b = start(&e, 1, "b", 2, 30000, 5);
    answer_denied(&e.fake, T0 + 600000); /* no room for it either */
    wait_pass(e.wait);
    at(&e, 100);
    fake_free(&e.fake, "slots", true, 3); /* not enough for a: held for it */
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 0);
    at(&e, 1000);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* b asks */
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK(b->result.allowed);
    struct waiter *c = start(&e, 2, "c", 2, 30000, 5);
    answer_denied(&e.fake, T0 + 600000);
    wait_pass(e.wait);
    fake_free(&e.fake, "slots", false, 0);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* the head alone asks */
    answer_denied(&e.fake, T0 + 600000);
    wait_pass(e.wait);
    CHECK_EQ_U64(in_flight(&e.fake), 1); /* then c */
    answer_allowed(&e.fake);
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(c), 1);
    CHECK(c->result.allowed);
    CHECK_EQ_U64(in_flight(&e.fake), 0);
    env_close(&e);
}

/* With a hold of 0 the waiters never hold back what they cannot take. */
static void a_hold_of_zero_never_holds_back(void)
{
    struct env e;
    env_open_hold(&e, 16, 0);
    whole(&e, 0, "a");
    CHECK_EQ_U64(plain_yield(&e, 9), 0);
    struct wait_stats s;
    wait_stats(e.wait, &s);
    CHECK_EQ_U64(s.keys, 1);
    env_close(&e);
}

static void a_plain_reserve_yields_to_waiters_ahead(void)
{
    struct env e;
    env_open(&e, 16);
    queued(&e, 0, "a", 1);
    struct reserve_request plain = e.waiters[0].request;
    CHECK_EQ_U64(wait_yield_mask(e.wait, &plain, 5), 1);
    CHECK_EQ_U64(wait_yield_mask(e.wait, &plain, 9), 1);
    CHECK_EQ_U64(wait_yield_mask(e.wait, &plain, 4), 0); /* a better priority passes */
    struct waiter *p = start(&e, 1, "p", 1, 0, 5);
    pthread_mutex_lock(&e.fake.mutex);
    CHECK_EQ_U64(e.fake.calls[0].request->yield_mask, 1);
    pthread_mutex_unlock(&e.fake.mutex);
    answer_denied(&e.fake, T0 + 1);
    CHECK_EQ_I64(done_count(p), 1); /* answered by the backend, not queued */
    CHECK_EQ_I64(p->result.wait_outcome, RESERVE_WAIT_NONE);
    env_close(&e);
}

static void past_max_waiters_a_plain_reserve_says_full(void)
{
    struct env e;
    env_open(&e, 1);
    queued(&e, 0, "a", 1);
    struct waiter *b = start(&e, 1, "b", 1, 30000, 5);
    answer_denied(&e.fake, T0 + 600000);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_FULL);
    struct wait_stats s;
    wait_stats(e.wait, &s);
    CHECK_EQ_U64(s.outcomes[RESERVE_WAIT_FULL], 1);
    CHECK_EQ_U64(s.waiting, 1);
    env_close(&e);
}

static void a_retry_of_a_waiting_lease_past_max_waiters_records_nothing(void)
{
    struct env e;
    env_open(&e, 1);
    struct waiter *a = start(&e, 0, "a", 1, 30000, 5); /* its first attempt in flight */
    struct waiter *b = start(&e, 1, "a", 1, 30000, 5); /* its retry: the queue is full */
    CHECK_EQ_U64(in_flight(&e.fake), 2);
    pthread_mutex_lock(&e.fake.mutex);
    uint64_t yield = e.fake.calls[1].request->yield_mask;
    pthread_mutex_unlock(&e.fake.mutex);
    /* Nobody is queued yet, so nothing to yield to; still sent as yielding
     * on every requirement: a denial is not recorded against the lease,
     * whose wait goes on. */
    CHECK_EQ_U64(yield, 1);
    answer_denied(&e.fake, T0 + 600000); /* a: queued */
    answer_denied(&e.fake, T0 + 600000); /* b: the queue was full */
    wait_pass(e.wait);
    CHECK_EQ_I64(done_count(b), 1);
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_FULL);
    CHECK_EQ_I64(done_count(a), 0);
    env_close(&e);
}

int main(void)
{
    RUN(cancel_while_admitted_releases,
        "a waiter cancelled while its attempt admits it is released and answered cancelled");
    RUN(release_with_the_clock_moved_back_waited_never_below_zero,
        "a cancelled waiter whose release returns after the wall clock stepped back is answered "
        "waited 0 ms, never a negative time that the metrics refuse");
    RUN(retry_of_a_cancelled_lease_takes_its_admission,
        "a plain retry of a lease whose waiter left, sent while its attempt is in flight, takes "
        "the admission");
    RUN(retry_during_a_release_is_sent_after_it,
        "a plain retry of a lease being released after its waiter left is sent after the release");
    RUN(a_complete_hands_over_on_its_own_thread,
        "a complete that frees room makes the next waiter's reserve on its own thread");
    RUN(a_backend_thread_that_tells_hands_over_on_it,
        "a backend thread telling freed room (tell_begin, tell_end) makes the next waiter's "
        "reserve on that thread");
    RUN(retry_of_a_cancelled_denied_lease_is_sent_after,
        "a plain retry of a lease whose waiter left is sent once its attempt returns");
    RUN(cancel_while_asking_hands_over_to_a_retry,
        "a waiter cancelled while asking hands its place to a retry of its lease");
    RUN(close_with_an_attempt_in_flight,
        "close answers queued waiters at once and one in flight when its attempt returns");
    RUN(release_during_the_heads_attempt_is_not_lost,
        "a release told while the head's attempt is decided makes it ask again");
    RUN(a_wake_goes_as_far_as_what_is_left,
        "a freed limit wakes the waiters what is left covers, the head alone when unknown");
    RUN(a_decreasing_limit_is_waited_for,
        "a waiter whose limit starts to decrease waits; a new request is answered at once");
    RUN(a_cut_during_the_heads_attempt_answers_it_decreasing,
        "a capacity cut below the head's need while its attempt is in flight (answered "
        "limit_decreasing) answers it exceeds_capacity when it returns");
    RUN(a_cut_during_the_heads_attempt_answers_it_denied,
        "a capacity cut below the head's need while its attempt is in flight (a denial decided "
        "before it) answers it exceeds_capacity when it returns");
    RUN(a_cut_answers_a_waiter_it_woke,
        "a cut answers the waiters behind the first too, though answering it woke them");
    RUN(a_change_during_a_first_attempt_answers_it,
        "a cut or a delete while a first attempt is in flight answers it when it returns");
    RUN(a_backend_failure_while_waiting_is_answered, "backend_error while waiting is answered");
    RUN(a_retry_has_its_own_deadline,
        "a retry that joined a wait is answered at its own deadline, the wait goes on");
    RUN(the_deadline_makes_one_plain_reserve,
        "at the deadline one plain (recorded) reserve answers the waiter");
    RUN(deadlines_in_any_order_are_each_kept,
        "deadlines out of arrival order (timers in the ordered run and in the heap) are each kept");
    RUN(a_plain_reserve_yields_to_waiters_ahead,
        "a plain reserve yields on limits where waiters of its priority or better wait");
    RUN(a_head_holds_back_for_hold_ms_then_smaller_ones_pass,
        "a head asking the whole capacity holds back later requests for hold_ms, then lets "
        "smaller ones pass as long, and so on; woken for what freed it is not overtaken");
    RUN(leaving_and_coming_back_keeps_the_turns,
        "a waiter that leaves and comes back does not restart a limit's turns; an empty queue "
        "starts afresh after twice hold_ms");
    RUN(what_freed_goes_down_the_queue_when_it_lets_pass,
        "room freed while a limit holds back goes down the queue once it lets pass; letting "
        "pass, a denied head hands the wake on");
    RUN(a_hold_of_zero_never_holds_back, "with hold_ms 0 waiters never hold back others");
    RUN(past_max_waiters_a_plain_reserve_says_full,
        "past max_waiters a reserve is a plain one whose denial says the queue was full");
    RUN(a_retry_of_a_waiting_lease_past_max_waiters_records_nothing,
        "past max_waiters a retry of a waiting lease yields on every limit: nothing recorded");
    return test_summary();
}
