/* Conformance: waiting for capacity (docs/semantics.md "Waiting for
 * capacity"), the wait layer in front of each backend. A waiter is
 * admitted when a release, a complete, an expiry, a window roll, a new
 * period or a capacity increase makes room; at its deadline it is denied as
 * a plain reserve is; errors and hopeless denials never wait; queues keep
 * priority then arrival order with no overtaking for the hold, then let
 * smaller requests pass; a retried lease joins its
 * wait; cancel, close, a full queue, a deleted or decreased limit all end
 * cleanly. On a manual clock the tests move time and let the wait layer
 * settle (wait_quiesce): no test sleeps for its timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance_wait.h"
#include "test.h"

/* On a backend's own clock (tigerbeetle): how long an answer may take, in
 * real time, once it is due (its releases seen here at once, others' found
 * by asking again: WAIT_REMOTE_RETRY_MS_MAX). */
#define REAL_ANSWER_MS 5000

/* ---- helpers ------------------------------------------------------------- */

struct wait *wait_test_open(struct fixture *f, uint32_t max_waiters)
{
    struct wait_options options;
    wait_options_defaults(&options);
    options.max_waiters = max_waiters;
    struct wait *w = NULL;
    char error[128];
    if (wait_open(f->backend, fixture_clock(f), &options, &w, error, sizeof error) != 0) {
        fprintf(stderr, "  wait_open: %s\n", error);
        return NULL;
    }
    return w;
}

void wait_test_end(struct wait_test *t)
{
    if (t->w != NULL)
        wait_close(t->w);
    t->w = NULL;
    for (uint32_t i = 0; t->waiters != NULL && i < t->waiter_count; i++) {
        struct waiter *x = &t->waiters[i];
        if (!x->started)
            continue;
        CHECK_EQ_U64(x->done_count, 1); /* every waiter answered exactly once */
        pthread_mutex_destroy(&x->mutex);
        pthread_cond_destroy(&x->cond);
    }
    free(t->waiters);
    t->waiters = NULL;
}

static void waiter_done(void *context)
{
    struct waiter *x = context;
    pthread_mutex_lock(&x->mutex);
    x->done_count++;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->mutex);
}

static uint64_t answer_counter; /* the order of answers within a test */

static void waiter_done_ordered(void *context)
{
    struct waiter *x = context;
    x->answer_order = __atomic_add_fetch(&answer_counter, 1, __ATOMIC_SEQ_CST);
    waiter_done(x);
}

void waiter_done_callback(void *context)
{
    waiter_done_ordered(context);
}

void waiter_prepare(struct fixture *f, struct waiter *x, const char *lease_id,
                    const struct item *items, uint32_t count)
{
    if (count > WAITER_ITEMS_MAX || x->started)
        abort(); /* a mistake in the test */
    memset(x, 0, sizeof *x);
    pthread_mutex_init(&x->mutex, NULL);
    pthread_cond_init(&x->cond, NULL);
    x->started = true;
    for (uint32_t k = 0; k < count; k++) {
        fixture_name(f, items[k].key, x->keys[k]);
        x->requirements[k] =
            (struct requirement){x->keys[k], (uint32_t)strlen(x->keys[k]), items[k].amount};
    }
    fixture_name(f, lease_id, x->lease);
    x->request = (struct reserve_request){.lease_id = x->lease,
                                          .lease_id_length = (uint32_t)strlen(x->lease),
                                          .requirements = x->requirements,
                                          .requirement_count = count};
    memset(&x->result, 0xAB, sizeof x->result); /* every field must be written */
}

struct waiter *wait_start(struct wait_test *t, uint32_t i, const char *lease_id,
                          const struct item *items, uint32_t count, int64_t wait_ms,
                          uint8_t priority)
{
    if (i >= t->waiter_count)
        abort();
    struct waiter *x = &t->waiters[i];
    waiter_prepare(t->f, x, lease_id, items, count);
    wait_reserve(t->w, &x->ticket, &x->request, &x->result, wait_ms, priority, waiter_done_ordered,
                 x);
    return x;
}

bool waiter_answered(struct waiter *x)
{
    pthread_mutex_lock(&x->mutex);
    bool done = x->done_count > 0;
    pthread_mutex_unlock(&x->mutex);
    return done;
}

bool wait_for_answer(struct wait_test *t, struct waiter *x, int64_t real_ms)
{
    /* Settled at this time, the answer is due; a plain reserve's comes
     * from the backend's own thread: block until it is there (the bound
     * only keeps a failing test from hanging). */
    if (!t->f->real_clock)
        wait_quiesce(t->w);
    struct timespec until = clock_deadline(CLOCK_REALTIME, real_ms * 1000);
    pthread_mutex_lock(&x->mutex);
    while (x->done_count == 0 && pthread_cond_timedwait(&x->cond, &x->mutex, &until) == 0)
        ;
    bool done = x->done_count > 0;
    pthread_mutex_unlock(&x->mutex);
    return done;
}

void wait_settle_all(struct wait_test *t)
{
    wait_quiesce(t->w);
}

void wait_advance(struct wait_test *t, int64_t delta_ms)
{
    advance(t->f, delta_ms);
    wait_kick(t->w);
}

void wait_advance_to(struct wait_test *t, int64_t at_ms)
{
    advance_to(t->f, at_ms);
    wait_kick(t->w);
}

struct reservation waiter_reservation(struct wait_test *t, struct waiter *x)
{
    return fixture_reservation(t->f, &x->request, &x->result);
}

const char *wait_key(struct wait_test *t, const char *key, char out[NAMED_SIZE])
{
    return fixture_name(t->f, key, out);
}

/* Answered now (after settling), allowed, having waited. */
#define CHECK_ADMITTED(t, x)                                                                       \
    do {                                                                                           \
        CHECK(wait_for_answer((t), (x), REAL_ANSWER_MS));                                          \
        CHECK((x)->result.allowed);                                                                \
        CHECK_EQ_I64((x)->result.error, BACKEND_OK);                                               \
        CHECK_EQ_I64((x)->result.wait_outcome, RESERVE_WAIT_ADMITTED);                             \
    } while (0)

/* Still waiting once the wait layer has nothing left to do. */
#define CHECK_WAITING(t, x)                                                                        \
    do {                                                                                           \
        wait_settle_all(t);                                                                        \
        CHECK(!waiter_answered(x));                                                                \
    } while (0)

/* ---- wake-ups ------------------------------------------------------------ */

WAIT_TEST(wait_release_admits)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "waiter", 30000, 5, {"slots", 1});
    CHECK_WAITING(t, a);
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, a);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
    CHECK(a->result.waited_ms >= 0);
}

WAIT_TEST(wait_complete_admits)
{
    REQUIRE(put_concurrency(f, "slots", 2, 600));
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(RESERVE(f, "holder", {"slots", 2}, {"usd", 100}).allowed);
    struct waiter *a = WAIT_START(t, 0, "waiter", 30000, 5, {"slots", 1}, {"usd", 100});
    CHECK_WAITING(t, a);
    CHECK(COMPLETE(f, "holder", {"slots", 2}, {"usd", 50}).reconciled);
    CHECK_ADMITTED(t, a);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
    CHECK_EQ_U64(usage(f, "usd").used, 50);
}

WAIT_TEST(wait_release_hands_over)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "waiter", 30000, 5, {"slots", 1});
    struct waiter *b = WAIT_START(t, 1, "waiter2", 30000, 5, {"slots", 1});
    CHECK_WAITING(t, a);
    CHECK_WAITING(t, b);
    /* The release, through the wait layer as the server makes it; its done
     * counts on a third waiter, whose lease is the holder's. */
    struct waiter *call = &t->waiters[2];
    waiter_prepare(f, call, "holder", (const struct item[]){{"slots", 1}}, 1);
    struct release_request request = {call->lease, (uint32_t)strlen(call->lease)};
    struct release_result result;
    wait_release(t->w, &request, &result, 1, waiter_done_callback, call);
    /* The memory backend hands the room over inside the release's own
     * critical section: the first waiter is answered before the release
     * returns, and the wait layer counts it. */
    bool memory = strcmp(f->backend->ops->name, "memory") == 0;
    if (memory)
        CHECK(waiter_answered(a));
    CHECK(wait_for_answer(t, call, REAL_ANSWER_MS));
    CHECK_EQ_I64(result.error, BACKEND_OK);
    CHECK_ADMITTED(t, a);
    CHECK_WAITING(t, b); /* one slot: the second stays in line */
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
    struct wait_stats s;
    wait_stats(t->w, &s);
    CHECK_EQ_U64(s.handed_over, memory ? 1 : 0);
}

WAIT_TEST(wait_expiry_admits)
{
    REQUIRE(put_concurrency(f, "slots", 1, 5));
    struct reservation holder = RESERVE(f, "holder", {"slots", 1});
    REQUIRE(holder.allowed);
    struct waiter *a = WAIT_START(t, 0, "waiter", 20000, 5, {"slots", 1});
    wait_advance_to(t, just_before(f, holder.expires_at_unix_ms));
    CHECK_WAITING(t, a);
    /* No release: the hold's expiry, a time the denial reported. */
    wait_advance_to(t, just_after(f, holder.expires_at_unix_ms));
    CHECK_ADMITTED(t, a);
}

WAIT_TEST(wait_window_roll_admits)
{
    REQUIRE(put_rolling(f, "tpm", 100, 10));
    struct reservation used = RESERVE(f, "used", {"tpm", 100});
    REQUIRE(used.allowed);
    REQUIRE(COMPLETE(f, "used", {"tpm", 100}).reconciled); /* only the window frees it */
    struct waiter *a = WAIT_START(t, 0, "waiter", 20000, 5, {"tpm", 40});
    wait_advance_to(t, just_before(f, used.expires_at_unix_ms));
    CHECK_WAITING(t, a);
    wait_advance_to(t, just_after_kept(f, used.expires_at_unix_ms));
    CHECK_ADMITTED(t, a);
    CHECK_EQ_U64(usage(f, "tpm").reserved, 40);
}

WAIT_TEST(wait_period_change_admits)
{
    set_time(f, JAN_31_23_59_59_MS - 29000); /* 30 s before February */
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "spent", "usd", 1000));
    REQUIRE(complete_none(f, "spent").reconciled);
    struct waiter *a = WAIT_START(t, 0, "waiter", 60000, 5, {"usd", 10});
    wait_advance_to(t, FEB_01_MS - 1);
    CHECK_WAITING(t, a);
    wait_advance_to(t, FEB_01_MS);
    CHECK_ADMITTED(t, a);
    CHECK_EQ_I64(a->result.waited_ms, 30000);
}

WAIT_TEST(wait_capacity_increase_admits)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "waiter", 30000, 5, {"slots", 1});
    CHECK_WAITING(t, a);
    REQUIRE(put_concurrency(f, "slots", 2, 600));
    char key[NAMED_SIZE];
    wait_limit_changed(t->w, wait_key(t, "slots", key)); /* as the server does after a put */
    CHECK_ADMITTED(t, a);
}

/* ---- the deadline and what never waits ----------------------------------- */

WAIT_TEST(wait_deadline_denies_as_a_plain_reserve)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "waiter", 2000, 5, {"slots", 1});
    wait_advance(t, 1999);
    CHECK_WAITING(t, a);
    wait_advance(t, 1);
    CHECK(wait_for_answer(t, a, REAL_ANSWER_MS));
    struct reservation r = waiter_reservation(t, a);
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(!r.allowed);
    CHECK_STR(r.error, "");
    CHECK_EQ_U64(r.denied_count, 1);
    CHECK(r.retry_after_ms >= 1);   /* recomputed by the last attempt */
    CHECK(r.retry_after_ms <= 300); /* the concurrency poll, jittered */
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_DEADLINE);
    CHECK_EQ_I64(a->result.waited_ms, 2000);
    /* Recorded as a plain denial: the lease stays denied. */
    struct reservation again = RESERVE(f, "waiter", {"slots", 1});
    CHECK(!again.allowed);
    CHECK(again.replayed);
}

WAIT_TEST(wait_definitive_errors_never_wait)
{
    REQUIRE(put_concurrency(f, "slots", 4, 600));
    REQUIRE(reserve1(f, "holder", "slots", 4));
    struct waiter *unknown = WAIT_START(t, 0, "u", 30000, 5, {"slots", 1}, {"nope", 1});
    CHECK(waiter_answered(unknown) || wait_for_answer(t, unknown, REAL_ANSWER_MS));
    CHECK_STR(waiter_reservation(t, unknown).error, "unknown_limit_key: nope");
    CHECK_EQ_I64(unknown->result.wait_outcome, RESERVE_WAIT_NONE);
    CHECK_EQ_I64(unknown->result.waited_ms, 0);
    struct waiter *big = WAIT_START(t, 1, "big", 30000, 5, {"slots", 5});
    CHECK(wait_for_answer(t, big, REAL_ANSWER_MS));
    CHECK_STR(waiter_reservation(t, big).error, "exceeds_capacity:slots");
    CHECK_EQ_I64(big->result.wait_outcome, RESERVE_WAIT_NONE);
    struct limit_state state;
    REQUIRE(put(f, concurrency_limit("slots", 2, 600), &state, NULL) == 0);
    REQUIRE(state.status == LIMIT_DECREASING);
    struct waiter *cut = WAIT_START(t, 2, "cut", 30000, 5, {"slots", 1});
    CHECK(wait_for_answer(t, cut, REAL_ANSWER_MS));
    CHECK_STR(waiter_reservation(t, cut).error, "limit_decreasing:slots");
    CHECK_EQ_I64(cut->result.wait_outcome, RESERVE_WAIT_NONE);
}

WAIT_TEST(wait_budget_that_cannot_free_answers_at_once)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "spent", "usd", 1000));
    REQUIRE(complete_none(f, "spent").reconciled); /* committed: back only next month */
    struct waiter *a = WAIT_START(t, 0, "waiter", 60000, 5, {"usd", 10});
    CHECK(wait_for_answer(t, a, REAL_ANSWER_MS));
    CHECK(!a->result.allowed);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_NONE);
    CHECK_EQ_I64(a->result.waited_ms, 0);
    CHECK(a->result.retry_after_ms > 60000); /* the next period */
    /* A live reservation could be released: then it waits. */
    REQUIRE(put_budget(f, "usd2", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "live", "usd2", 1000));
    struct waiter *b = WAIT_START(t, 1, "waiter2", 60000, 5, {"usd2", 10});
    CHECK_WAITING(t, b);
    CHECK_EQ_I64(release(f, "live").status, RESULT_OK);
    CHECK_ADMITTED(t, b);
}

/* ---- order ---------------------------------------------------------------- */

WAIT_TEST(wait_order_is_priority_then_arrival)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    static const uint8_t priorities[5] = {5, 5, 1, 9, 1};
    static const uint32_t expected[5] = {2, 4, 0, 1, 3}; /* 1, 1, 5, 5, 9: by arrival within */
    struct waiter *x[5];
    for (uint32_t i = 0; i < 5; i++) {
        char lease[16];
        snprintf(lease, sizeof lease, "w%u", i);
        x[i] = WAIT_START(t, i, lease, 30000, priorities[i], {"slots", 1});
    }
    wait_settle_all(t);
    const char *previous = "holder";
    for (uint32_t step = 0; step < 5; step++) {
        CHECK_EQ_I64(complete_none(f, previous).status, RESULT_OK);
        struct waiter *next = x[expected[step]];
        CHECK_ADMITTED(t, next);
        for (uint32_t j = step + 1; j < 5; j++)
            CHECK(!waiter_answered(x[expected[j]]));
        previous = next->lease + strlen(f->ns);
    }
}

WAIT_TEST(wait_large_head_is_not_overtaken)
{
    REQUIRE(put_concurrency(f, "units", 10, 600));
    REQUIRE(reserve1(f, "holder", "units", 8));
    struct waiter *large = WAIT_START(t, 0, "large", 30000, 5, {"units", 5});
    CHECK_WAITING(t, large);
    /* 2 units are free, but the large request came first (and its limit
     * holds back for WAIT_HOLD_MS_DEFAULT from now). */
    struct waiter *small = WAIT_START(t, 1, "small", 30000, 5, {"units", 2});
    CHECK_WAITING(t, small);
    struct waiter *plain = WAIT_START(t, 2, "plain", 0, 5, {"units", 2});
    CHECK(wait_for_answer(t, plain, REAL_ANSWER_MS));
    CHECK(!plain->result.allowed);
    CHECK_STR(waiter_reservation(t, plain).error, "");
    CHECK(plain->result.retry_after_ms >= 1);
    CHECK_EQ_U64(usage(f, "units").reserved, 8); /* nobody took the 2 */
    /* A better priority is ahead of them all: it does not wait. */
    struct waiter *urgent = WAIT_START(t, 3, "urgent", 30000, 0, {"units", 2});
    CHECK(wait_for_answer(t, urgent, REAL_ANSWER_MS));
    CHECK(urgent->result.allowed);
    CHECK_EQ_I64(urgent->result.wait_outcome, RESERVE_WAIT_NONE);
    CHECK_EQ_I64(release(f, "urgent").status, RESULT_OK);
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, large);
    CHECK_ADMITTED(t, small);
    CHECK(large->answer_order < small->answer_order);
    CHECK_EQ_U64(usage(f, "units").reserved, 7);
}

WAIT_TEST(wait_large_head_holds_back_for_a_bounded_time)
{
    REQUIRE(put_concurrency(f, "units", 10, 600));
    REQUIRE(reserve1(f, "holder", "units", 8));
    /* The whole capacity, at the best priority: it cannot fit while
     * anything is held, and it holds back the others for the hold only. */
    struct waiter *large = WAIT_START(t, 0, "large", 60000, 0, {"units", 10});
    CHECK_WAITING(t, large);
    struct waiter *small = WAIT_START(t, 1, "small", 60000, 9, {"units", 2});
    wait_advance(t, WAIT_HOLD_MS_DEFAULT - 1);
    CHECK_WAITING(t, small);
    struct waiter *plain = WAIT_START(t, 2, "plain", 0, 9, {"units", 1});
    CHECK(wait_for_answer(t, plain, REAL_ANSWER_MS));
    CHECK(!plain->result.allowed);
    wait_advance(t, 1);
    CHECK_ADMITTED(t, small); /* it lets the smaller ones pass */
    CHECK_EQ_I64(small->result.waited_ms, WAIT_HOLD_MS_DEFAULT);
    CHECK_EQ_I64(release(f, "small").status, RESULT_OK);
    struct waiter *plain2 = WAIT_START(t, 3, "plain2", 0, 9, {"units", 1});
    CHECK(wait_for_answer(t, plain2, REAL_ANSWER_MS));
    CHECK(plain2->result.allowed); /* a plain one too */
    CHECK_WAITING(t, large);       /* the large one keeps its place */
    CHECK_EQ_I64(release(f, "plain2").status, RESULT_OK);
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, large);
    CHECK_EQ_U64(usage(f, "units").reserved, 10);
}

WAIT_TEST(wait_unrelated_limit_is_not_delayed)
{
    REQUIRE(put_concurrency(f, "busy", 1, 600));
    REQUIRE(put_concurrency(f, "free", 5, 600));
    REQUIRE(reserve1(f, "holder", "busy", 1));
    struct waiter *a = WAIT_START(t, 0, "waiter", 30000, 5, {"busy", 1});
    CHECK_WAITING(t, a);
    struct waiter *other = WAIT_START(t, 1, "other", 30000, 9, {"free", 1});
    CHECK(wait_for_answer(t, other, REAL_ANSWER_MS));
    CHECK(other->result.allowed);
    CHECK_EQ_I64(other->result.wait_outcome, RESERVE_WAIT_NONE);
    CHECK_EQ_I64(other->result.waited_ms, 0);
    CHECK(reserve1(f, "plain", "free", 1));
    CHECK(!waiter_answered(a));
}

/* ---- leases, cancel, close, bounds --------------------------------------- */

WAIT_TEST(wait_retried_lease_joins_its_wait)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(put_rolling(f, "tpm", 1000, 60));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "lease", 30000, 5, {"slots", 1}, {"tpm", 10});
    CHECK_WAITING(t, a);
    /* The same requirements in another order: the same wait. */
    struct waiter *b = WAIT_START(t, 1, "lease", 30000, 5, {"tpm", 10}, {"slots", 1});
    CHECK_WAITING(t, b);
    struct waiter *c = WAIT_START(t, 2, "lease", 30000, 5, {"slots", 1}, {"tpm", 11});
    CHECK(wait_for_answer(t, c, REAL_ANSWER_MS));
    CHECK_STR(waiter_reservation(t, c).error, "lease_conflict");
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, a);
    CHECK_ADMITTED(t, b);
    CHECK_EQ_I64(a->result.reserved_at_unix_ms, b->result.reserved_at_unix_ms);
    CHECK(b->result.replayed);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1); /* one hold, never two */
    CHECK_EQ_U64(usage(f, "tpm").reserved, 10);
}

WAIT_TEST(wait_cancel_leaves_at_once)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "a", 30000, 5, {"slots", 1});
    struct waiter *b = WAIT_START(t, 1, "b", 30000, 5, {"slots", 1});
    struct waiter *b2 = WAIT_START(t, 2, "b", 30000, 5, {"slots", 1}); /* joins b */
    wait_settle_all(t);
    wait_cancel(t->w, &a->ticket);
    CHECK(waiter_answered(a)); /* at once: nothing was in flight for it */
    CHECK(!a->result.allowed);
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    /* b, now first, may be asking (a's leaving woke it): then it is
     * answered when that attempt returns. */
    wait_cancel(t->w, &b->ticket); /* b2 takes its place */
    CHECK(wait_for_answer(t, b, REAL_ANSWER_MS));
    CHECK_EQ_I64(b->result.wait_outcome, RESERVE_WAIT_CANCELLED);
    CHECK(!b->result.allowed);
    CHECK(!waiter_answered(b2));
    wait_cancel(t->w, &a->ticket); /* answered already: nothing */
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, b2);
    CHECK_EQ_U64(usage(f, "slots").reserved, 1); /* b's lease, nothing for a */
    struct wait_stats s;
    wait_stats(t->w, &s);
    CHECK_EQ_U64(s.waiting, 0);
    CHECK_EQ_U64(s.outcomes[RESERVE_WAIT_CANCELLED], 2);
}

WAIT_TEST(wait_close_answers_every_waiter)
{
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *x[6];
    for (uint32_t i = 0; i < 6; i++) {
        char lease[16];
        snprintf(lease, sizeof lease, "w%u", i < 5 ? i : 4); /* the last joins w4 */
        x[i] = WAIT_START(t, i, lease, 30000, (uint8_t)i, {"slots", 1});
    }
    wait_settle_all(t);
    wait_close(t->w);
    t->w = NULL;
    for (uint32_t i = 0; i < 6; i++) {
        CHECK(waiter_answered(x[i]));
        CHECK(!x[i]->result.allowed);
        CHECK_EQ_I64(x[i]->result.wait_outcome, RESERVE_WAIT_CLOSED);
        CHECK(x[i]->result.retry_after_ms >= 1);
        CHECK_EQ_U64(x[i]->result.denied_count, 1);
    }
    CHECK_EQ_U64(usage(f, "slots").reserved, 1);
}

WAIT_TEST(wait_full_queue_answers_at_once)
{
    wait_close(t->w);
    t->w = wait_test_open(f, 2);
    REQUIRE(t->w != NULL);
    REQUIRE(put_concurrency(f, "slots", 1, 600));
    REQUIRE(reserve1(f, "holder", "slots", 1));
    struct waiter *a = WAIT_START(t, 0, "a", 30000, 5, {"slots", 1});
    struct waiter *b = WAIT_START(t, 1, "b", 30000, 5, {"slots", 1});
    struct waiter *c = WAIT_START(t, 2, "c", 30000, 5, {"slots", 1});
    CHECK(wait_for_answer(t, c, REAL_ANSWER_MS));
    CHECK(!c->result.allowed);
    CHECK_EQ_I64(c->result.wait_outcome, RESERVE_WAIT_FULL);
    CHECK(c->result.retry_after_ms >= 1);
    struct waiter *a2 = WAIT_START(t, 3, "a", 30000, 5, {"slots", 1}); /* a retry counts too */
    CHECK(wait_for_answer(t, a2, REAL_ANSWER_MS));
    CHECK_EQ_I64(a2->result.wait_outcome, RESERVE_WAIT_FULL);
    CHECK(!waiter_answered(a));
    CHECK(!waiter_answered(b));
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, a);
}

WAIT_TEST(wait_deleted_limit_answers_its_waiters)
{
    REQUIRE(put_concurrency(f, "gone", 1, 600));
    REQUIRE(put_concurrency(f, "kept", 10, 600));
    REQUIRE(reserve1(f, "holder", "gone", 1));
    struct waiter *a = WAIT_START(t, 0, "a", 30000, 5, {"kept", 1}, {"gone", 1});
    struct waiter *b = WAIT_START(t, 1, "b", 30000, 5, {"gone", 1});
    CHECK_WAITING(t, b);
    REQUIRE(delete_limit(f, "gone") == 0);
    char key[NAMED_SIZE];
    wait_limit_changed(t->w, wait_key(t, "gone", key));
    CHECK(wait_for_answer(t, a, REAL_ANSWER_MS));
    CHECK(wait_for_answer(t, b, REAL_ANSWER_MS));
    CHECK_STR(waiter_reservation(t, a).error, "unknown_limit_key: gone");
    CHECK_STR(waiter_reservation(t, b).error, "unknown_limit_key: gone");
    CHECK_EQ_I64(a->result.wait_outcome, RESERVE_WAIT_FAILED);
    CHECK_EQ_U64(usage(f, "kept").reserved, 0);
}

WAIT_TEST(wait_capacity_decrease_below_waiters)
{
    REQUIRE(put_concurrency(f, "units", 10, 600));
    REQUIRE(reserve1(f, "holder", "units", 4));
    struct waiter *big = WAIT_START(t, 0, "big", 30000, 5, {"units", 8});
    CHECK_WAITING(t, big); /* queued: from now on nobody passes it */
    struct waiter *fits = WAIT_START(t, 1, "fits", 30000, 5, {"units", 3});
    CHECK_WAITING(t, fits);
    struct limit_state state;
    REQUIRE(put(f, concurrency_limit("units", 5, 600), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_ACTIVE); /* 4 held <= 5: applies at once */
    char key[NAMED_SIZE];
    wait_limit_changed(t->w, wait_key(t, "units", key));
    CHECK(wait_for_answer(t, big, REAL_ANSWER_MS));
    CHECK_STR(waiter_reservation(t, big).error, "exceeds_capacity:units");
    CHECK_EQ_I64(big->result.wait_outcome, RESERVE_WAIT_FAILED);
    CHECK_WAITING(t, fits); /* 4 + 3 > 5 */
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_ADMITTED(t, fits);
}

WAIT_TEST(wait_pending_decrease_is_waited_for)
{
    REQUIRE(put_concurrency(f, "units", 10, 600));
    REQUIRE(reserve1(f, "holder", "units", 8));
    struct waiter *a = WAIT_START(t, 0, "a", 30000, 5, {"units", 3});
    CHECK_WAITING(t, a);
    struct limit_state state;
    REQUIRE(put(f, concurrency_limit("units", 6, 600), &state, NULL) == 0);
    CHECK_EQ_I64(state.status, LIMIT_DECREASING);
    char key[NAMED_SIZE];
    wait_limit_changed(t->w, wait_key(t, "units", key));
    CHECK_WAITING(t, a); /* 3 <= 6: it waits for the decrease */
    CHECK_EQ_I64(release(f, "holder").status, RESULT_OK);
    CHECK_WAITING(t, a); /* still decreasing until the tick */
    tick(f);
    CHECK_ADMITTED(t, a);
    CHECK_EQ_U64(usage(f, "units").state.definition.capacity, 6);
}

const struct conformance_test wait_tests[] = {
    TEST_ENTRY(wait_release_admits, "a waiter is admitted when a release frees its limit"),
    TEST_ENTRY(wait_release_hands_over,
               "a release through the wait layer admits the first waiter alone (memory: in the "
               "release's own critical section)"),
    TEST_ENTRY(wait_complete_admits,
               "a waiter on two limits is admitted when a complete frees both"),
    TEST_ENTRY(wait_expiry_admits,
               "a waiter is admitted when a hold expires, at the time the denial reported"),
    TEST_ENTRY(wait_window_roll_admits, "a waiter is admitted when the rolling window rolls"),
    MANUAL_CLOCK_TEST_ENTRY(wait_period_change_admits,
                            "a waiter on a spent budget is admitted when the next period starts",
                            "sets the time to the end of a month"),
    TEST_ENTRY(wait_capacity_increase_admits, "a waiter is admitted when its capacity increases"),
    MANUAL_CLOCK_TEST_ENTRY(wait_deadline_denies_as_a_plain_reserve,
                            "at its deadline a waiter is denied as a plain reserve, recorded, "
                            "retry_after recomputed",
                            "checks the millisecond of the deadline"),
    TEST_ENTRY(wait_definitive_errors_never_wait,
               "unknown_limit_key, exceeds_capacity and limit_decreasing are answered at once"),
    TEST_ENTRY(wait_budget_that_cannot_free_answers_at_once,
               "a spent budget whose next period is past the deadline answers at once"),
    TEST_ENTRY(wait_order_is_priority_then_arrival,
               "waiters are admitted by priority, then in arrival order"),
    TEST_ENTRY(wait_large_head_is_not_overtaken,
               "a later, smaller request does not pass a waiting head of the same priority"),
    MANUAL_CLOCK_TEST_ENTRY(wait_large_head_holds_back_for_a_bounded_time,
                            "a waiter asking the whole capacity holds back smaller requests "
                            "for the hold only, then they pass and it keeps its place",
                            "moves the clock by the hold"),
    TEST_ENTRY(wait_unrelated_limit_is_not_delayed,
               "requests on a limit nobody waits for are not delayed"),
    TEST_ENTRY(wait_retried_lease_joins_its_wait,
               "a retried lease id joins its wait: one hold, the same answer"),
    TEST_ENTRY(wait_cancel_leaves_at_once,
               "a cancelled waiter is answered at once and holds nothing; a retry takes its place"),
    TEST_ENTRY(wait_close_answers_every_waiter, "close answers every waiter, denied"),
    TEST_ENTRY(wait_full_queue_answers_at_once, "past max_waiters a reserve is answered at once"),
    TEST_ENTRY(wait_deleted_limit_answers_its_waiters,
               "a deleted limit's waiters are answered unknown_limit_key"),
    TEST_ENTRY(wait_capacity_decrease_below_waiters,
               "a decrease answers waiters that can never fit, the others wait"),
    TEST_ENTRY(wait_pending_decrease_is_waited_for,
               "a waiter that fits a pending decrease waits for it to apply"),
};
const uint32_t wait_test_count = sizeof wait_tests / sizeof wait_tests[0];
