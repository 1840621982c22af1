/* Conformance: the wait layer under a randomized load. Client threads
 * reserve with and without waits (random priorities, deadlines and limit
 * sets), cancel some waits, complete, release or abandon what they get,
 * while a driver moves the clock (expiries, window rolls, deadlines) and
 * changes a capacity. Checked: never over a limit (the clients' own count
 * of concurrency slots, and the backend's invariants at each tick), every
 * waiter answered exactly once, every waiter answered by its deadline plus
 * the tolerance of docs/semantics.md, nothing held or waiting at the end. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance_wait.h"
#include "test.h"

#define STRESS_CLIENTS 8
#define STRESS_OPS 150         /* per client */
#define STRESS_SLOTS 5         /* capacity of "c", never left to expire */
#define STRESS_STEP_MS 25      /* the driver's clock step (manual clock) */
#define STRESS_ANSWER_MS 60000 /* real time a client waits for an answer before failing */
/* On a backend's own clock the driver only watches: an answer may come
 * this long after its deadline (one backend round trip and a pass). */
#define STRESS_REAL_LATE_MS 3000

struct client {
    struct stress *s;
    uint32_t index;
    uint64_t random;
    struct waiter *waiters; /* one per op: answers are checked after close */
    pthread_mutex_t lock;   /* the driver reads these */
    bool active;
    int64_t deadline_ms;
    struct waiter *current;
};

struct stress {
    struct fixture *f;
    struct wait *w;
    struct client clients[STRESS_CLIENTS];
    pthread_mutex_t pause_lock;
    pthread_cond_t pause_cond;
    bool paused;
    uint32_t parked;   /* clients not starting anything while paused */
    uint32_t finished; /* clients done with their ops */
    atomic_bool stop;
    atomic_int slots_held; /* the clients' count of "c", at most STRESS_SLOTS */
    atomic_int slots_max;
    atomic_uint admitted;
    atomic_uint denied;
    atomic_uint cancelled;
    atomic_uint failures;
    atomic_uint late;
};

static uint32_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 11);
}

/* Before any call: waits while the driver holds the world still. */
static void gate(struct stress *s)
{
    pthread_mutex_lock(&s->pause_lock);
    if (s->paused) {
        s->parked++;
        pthread_cond_broadcast(&s->pause_cond);
        while (s->paused)
            pthread_cond_wait(&s->pause_cond, &s->pause_lock);
        s->parked--;
    }
    pthread_mutex_unlock(&s->pause_lock);
}

/* Blocked on an answer counts as parked: it starts nothing. */
static bool await_answer(struct stress *s, struct waiter *x, int64_t real_ms)
{
    pthread_mutex_lock(&s->pause_lock);
    s->parked++;
    pthread_cond_broadcast(&s->pause_cond);
    pthread_mutex_unlock(&s->pause_lock);
    struct timespec until = clock_deadline(CLOCK_REALTIME, real_ms * 1000);
    pthread_mutex_lock(&x->mutex);
    while (x->done_count == 0 && pthread_cond_timedwait(&x->cond, &x->mutex, &until) == 0)
        ;
    bool done = x->done_count > 0;
    pthread_mutex_unlock(&x->mutex);
    pthread_mutex_lock(&s->pause_lock);
    s->parked--;
    pthread_mutex_unlock(&s->pause_lock);
    return done;
}

static uint32_t pick_items(struct client *c, struct item *items)
{
    uint32_t n = 0;
    uint32_t r = next_random(&c->random);
    if (r % 2 == 0)
        items[n++] = (struct item){"c", 1 + r / 2 % 2};
    if (r / 4 % 2 == 0)
        items[n++] = (struct item){"r", 1 + r / 8 % 5};
    if (r / 64 % 3 == 0)
        items[n++] = (struct item){"d", 1 + r / 256 % 2};
    if (r / 1024 % 3 == 0 || n == 0)
        items[n++] = (struct item){"b", 1 + r / 4096 % 50};
    return n;
}

static bool holds_slots(const struct item *items, uint32_t n, int *slots)
{
    *slots = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(items[i].key, "c") == 0)
            *slots = (int)items[i].amount;
    }
    return *slots > 0;
}

static void slots_take(struct stress *s, int slots)
{
    int now = atomic_fetch_add(&s->slots_held, slots) + slots;
    int seen = atomic_load(&s->slots_max);
    while (now > seen && !atomic_compare_exchange_weak(&s->slots_max, &seen, now))
        ;
}

/* What an admitted client does with its lease: complete, release, or (when
 * it holds no slot of "c") leave it to expire. */
static void use_lease(struct stress *s, struct client *c, const char *lease,
                      const struct item *items, uint32_t n)
{
    int slots;
    bool slot = holds_slots(items, n, &slots);
    if (slot)
        slots_take(s, slots);
    uint32_t r = next_random(&c->random) % 10;
    if (slot)
        atomic_fetch_sub(&s->slots_held, slots); /* before they are freed */
    gate(s);
    if (r < 5) {
        if (complete_items(s->f, lease, items, n).status != RESULT_OK)
            atomic_fetch_add(&s->failures, 1);
    } else if (r < 9 || slot) {
        if (release(s->f, lease).status != RESULT_OK)
            atomic_fetch_add(&s->failures, 1);
    }
}

static void client_op(struct stress *s, struct client *c, uint32_t op)
{
    struct item items[WAITER_ITEMS_MAX];
    uint32_t n = pick_items(c, items);
    uint32_t r = next_random(&c->random);
    int64_t wait_ms = r % 5 == 0 ? 0 : 1 + (int64_t)(r / 5 % 3000);
    uint8_t priority = (uint8_t)(r / 16384 % WAIT_PRIORITIES);
    char lease[48];
    snprintf(lease, sizeof lease, "s%u-%u", c->index, op);
    struct waiter *x = &c->waiters[op];
    waiter_prepare(s->f, x, lease, items, n);
    gate(s);
    pthread_mutex_lock(&c->lock);
    c->active = wait_ms > 0;
    c->deadline_ms = now_ms(s->f) + wait_ms;
    c->current = x;
    pthread_mutex_unlock(&c->lock);
    wait_reserve(s->w, &x->ticket, &x->request, &x->result, wait_ms, priority, waiter_done_callback,
                 x);
    /* Some callers go away: at once, or after a little while. */
    if (next_random(&c->random) % 8 == 0 &&
        !await_answer(s, x, (int64_t)(next_random(&c->random) % 3))) {
        gate(s);
        wait_cancel(s->w, &x->ticket);
        atomic_fetch_add(&s->cancelled, 1);
    }
    if (!await_answer(s, x, STRESS_ANSWER_MS)) {
        atomic_fetch_add(&s->failures, 1); /* never answered */
        fprintf(stderr, "  %s never answered\n", lease);
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->active = false;
    pthread_mutex_unlock(&c->lock);
    if (x->result.error != BACKEND_OK && x->result.error != BACKEND_LIMIT_DECREASING)
        atomic_fetch_add(&s->failures, 1);
    if (!x->result.allowed) {
        atomic_fetch_add(&s->denied, 1);
        return;
    }
    atomic_fetch_add(&s->admitted, 1);
    use_lease(s, c, lease, items, n);
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    for (uint32_t op = 0; op < STRESS_OPS && !atomic_load(&c->s->failures); op++)
        client_op(c->s, c, op);
    pthread_mutex_lock(&c->s->pause_lock);
    c->s->parked++; /* done: parked for good */
    c->s->finished++;
    pthread_cond_broadcast(&c->s->pause_cond);
    pthread_mutex_unlock(&c->s->pause_lock);
    return NULL;
}

/* Holds the clients still: every one parked or blocked on an answer. */
static void pause_clients(struct stress *s)
{
    pthread_mutex_lock(&s->pause_lock);
    s->paused = true;
    while (s->parked < STRESS_CLIENTS)
        pthread_cond_wait(&s->pause_cond, &s->pause_lock);
    pthread_mutex_unlock(&s->pause_lock);
}

static void resume_clients(struct stress *s)
{
    pthread_mutex_lock(&s->pause_lock);
    s->paused = false;
    pthread_cond_broadcast(&s->pause_cond);
    pthread_mutex_unlock(&s->pause_lock);
}

/* Waiters past their deadline (by more than `late_ms`) not yet answered. */
static uint32_t late_waiters(struct stress *s, int64_t late_ms)
{
    uint32_t late = 0;
    int64_t now = now_ms(s->f);
    for (uint32_t i = 0; i < STRESS_CLIENTS; i++) {
        struct client *c = &s->clients[i];
        pthread_mutex_lock(&c->lock);
        if (c->active && c->deadline_ms + late_ms <= now && !waiter_answered(c->current)) {
            fprintf(stderr, "  %s unanswered %lld ms after its deadline\n", c->current->lease,
                    (long long)(now - c->deadline_ms));
            late++;
        }
        pthread_mutex_unlock(&c->lock);
    }
    return late;
}

static void change_capacity(struct stress *s, uint32_t step)
{
    uint64_t capacity = 2 + step % 5;
    if (put(s->f, concurrency_limit("d", capacity, 5), NULL, NULL) != 0)
        atomic_fetch_add(&s->failures, 1);
    char key[NAMED_SIZE];
    wait_limit_changed(s->w, fixture_name(s->f, "d", key));
}

static bool clients_done(struct stress *s)
{
    pthread_mutex_lock(&s->pause_lock);
    bool done = s->finished == STRESS_CLIENTS;
    pthread_mutex_unlock(&s->pause_lock);
    return done;
}

/* The driver: on a manual clock, holds the clients still, moves the clock
 * one step, lets the wait layer settle, and checks no deadline is past; on
 * a real one it only watches. */
static void drive(struct stress *s)
{
    for (uint32_t step = 0; !clients_done(s); step++) {
        if (s->f->real_clock) {
            struct timespec pause = {0, 20 * 1000000L};
            nanosleep(&pause, NULL);
            atomic_fetch_add(&s->late, late_waiters(s, STRESS_REAL_LATE_MS));
        } else {
            pause_clients(s);
            advance(s->f, STRESS_STEP_MS);
            wait_kick(s->w);
            wait_quiesce(s->w);
            atomic_fetch_add(&s->late, late_waiters(s, 0)); /* settled at this time */
            if (step % 40 == 0)
                tick(s->f); /* the backend checks its invariants */
            resume_clients(s);
        }
        if (step % 97 == 0)
            change_capacity(s, step);
    }
}

static bool stress_limits(struct fixture *f)
{
    return put_concurrency(f, "c", STRESS_SLOTS, 600) && put_rolling(f, "r", 40, 2) &&
           put_concurrency(f, "d", 4, 5) && put_budget(f, "b", 100000, PERIOD_MONTH, 5);
}

static void stress_check_end(struct stress *s)
{
    CHECK_EQ_U64(atomic_load(&s->failures), 0);
    CHECK_EQ_U64(atomic_load(&s->late), 0);
    CHECK(atomic_load(&s->slots_max) <= STRESS_SLOTS);
    CHECK(atomic_load(&s->admitted) > 0);
    struct wait_stats stats;
    wait_stats(s->w, &stats);
    CHECK_EQ_U64(stats.waiting, 0);
    CHECK_EQ_U64(stats.queued, 0);
    CHECK_EQ_U64(usage(s->f, "c").reserved, 0); /* nothing held for a cancelled waiter */
}

static void wait_stress(void)
{
    struct fixture f;
    if (!fixture_open(&f, T0_MS)) {
        CHECK(!"the backend opens");
        return;
    }
    static struct stress s; /* large: the waiters of every client */
    memset(&s, 0, sizeof s);
    s.f = &f;
    s.w = wait_test_open(&f, WAIT_WAITERS_DEFAULT);
    pthread_mutex_init(&s.pause_lock, NULL);
    pthread_cond_init(&s.pause_cond, NULL);
    pthread_t threads[STRESS_CLIENTS];
    bool ready = s.w != NULL && stress_limits(&f);
    for (uint32_t i = 0; ready && i < STRESS_CLIENTS; i++) {
        struct client *c = &s.clients[i];
        c->s = &s;
        c->index = i;
        c->random = 0x9e3779b97f4a7c15u * (i + 1);
        c->waiters = calloc(STRESS_OPS, sizeof *c->waiters);
        pthread_mutex_init(&c->lock, NULL);
        if (c->waiters == NULL || pthread_create(&threads[i], NULL, client_main, c) != 0)
            abort();
    }
    if (ready) {
        drive(&s);
        for (uint32_t i = 0; i < STRESS_CLIENTS; i++)
            pthread_join(threads[i], NULL);
        stress_check_end(&s);
        printf("  %u admitted, %u denied, %u cancels\n", atomic_load(&s.admitted),
               atomic_load(&s.denied), atomic_load(&s.cancelled));
    } else {
        CHECK(!"the wait layer and the limits are set up");
    }
    if (s.w != NULL)
        wait_close(s.w);
    for (uint32_t i = 0; ready && i < STRESS_CLIENTS; i++) {
        for (uint32_t op = 0; op < STRESS_OPS; op++) {
            struct waiter *x = &s.clients[i].waiters[op];
            if (!x->started)
                continue;
            CHECK_EQ_U64(x->done_count, 1); /* exactly once */
            pthread_mutex_destroy(&x->mutex);
            pthread_cond_destroy(&x->cond);
        }
        free(s.clients[i].waiters);
        pthread_mutex_destroy(&s.clients[i].lock);
    }
    fixture_close(&f);
}

const struct conformance_test wait_stress_tests[] = {
    TEST_ENTRY(wait_stress,
               "8 clients waiting, cancelling, completing, releasing and abandoning under a "
               "moving clock and capacity changes: never over a limit, every waiter answered "
               "once and by its deadline, nothing left held or waiting"),
};
const uint32_t wait_stress_test_count = sizeof wait_stress_tests / sizeof wait_stress_tests[0];
