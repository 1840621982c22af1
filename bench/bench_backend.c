/* Backend benchmark: reserves per second of a 3-requirement reserve (rolling
 * RPM + rolling TPM + monthly budget, capacities that never deny) against a
 * steady state of about a million live holds, alone and paired with a
 * complete, on one and two threads; with --through-wait, the same calls
 * through the wait layer (wait_reserve with wait_ms 0, wait_complete), which
 * must cost no more; with --time-zone, the budget's periods are that zone's
 * local months, which must cost no more either. Prints figures; asserts
 * nothing. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "wait/wait.h"

#define START_MS INT64_C(1768478400000) /* 2026-01-15T12:00:00Z */
#define WINDOW_SECONDS 60
#define THREADS_MAX 8

/* Time moves by one step per read, and the backend reads it once per call
 * under its lock: always monotonic, on any number of threads, and a window
 * holds exactly live_leases calls, so the live holds stay put. */
struct ticking_clock {
    struct clock clock;
    _Atomic uint64_t reads;
    uint64_t reads_per_window;
};

static int64_t ticking_now_ms(struct clock *clock)
{
    struct ticking_clock *t = (struct ticking_clock *)clock;
    uint64_t n = atomic_fetch_add_explicit(&t->reads, 1, memory_order_relaxed);
    return START_MS + (int64_t)(n * WINDOW_SECONDS * 1000 / t->reads_per_window);
}

struct options {
    const char *backend;
    uint64_t live_holds;
    uint64_t ops;
    const char *scenario;  /* "all" or one name of the table in main */
    bool through_wait;     /* calls through the wait layer (src/wait) */
    const char *time_zone; /* the budget's ("": UTC) */
    uint32_t lease_cache_entries;
    int64_t warm_up; /* reserves before timing; -1: a window of leases plus the lease cache */
};

struct bench {
    const struct backend_ops *ops;
    struct backend *backend;
    struct wait *wait; /* NULL: straight to the backend */
    struct ticking_clock clock;
    char data_dir[256];
    uint64_t ops_per_thread;
    uint32_t threads;
    bool complete;
};

static const char *const keys[3] = {"global:llm:openai:gpt-4o:rpm", "global:llm:openai:gpt-4o:tpm",
                                    "team:sales:usd:month"};
static const uint64_t amounts[3] = {1, 1500, 20000};

/* "b<thread>-<16 hex digits>", without snprintf in the timed loop. */
static uint32_t lease_id(char *out, uint32_t thread, uint64_t i)
{
    static const char hex[] = "0123456789abcdef";
    out[0] = 'b';
    out[1] = (char)('0' + thread);
    out[2] = '-';
    for (int d = 0; d < 16; d++)
        out[3 + d] = hex[(i >> (60 - 4 * d)) & 15];
    out[19] = '\0';
    return 19;
}

static int put_limits(struct bench *b, const char *time_zone)
{
    struct limit_definition d[3];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 3; i++) {
        snprintf(d[i].key, sizeof d[i].key, "%s", keys[i]);
        d[i].capacity = UINT64_C(1000000000000000000);
    }
    d[0].kind = d[1].kind = LIMIT_ROLLING;
    d[0].window_seconds = d[1].window_seconds = WINDOW_SECONDS;
    d[2].kind = LIMIT_BUDGET;
    d[2].period = PERIOD_MONTH;
    d[2].timeout_seconds = WINDOW_SECONDS;
    snprintf(d[2].time_zone, sizeof d[2].time_zone, "%s", time_zone);
    for (int i = 0; i < 3; i++) {
        char error[256] = "";
        struct limit_state state;
        if (limit_definition_validate(&d[i], error, sizeof error) != 0 ||
            backend_put_limit(b->backend, &d[i], &state, error, sizeof error) != 0) {
            fprintf(stderr, "bench_backend: put %s: %s\n", d[i].key, error);
            return -1;
        }
    }
    return 0;
}

/* Each call waits for its done callback, as the server does. Synchronous
 * backends (memory) run it before returning: then the state is already DONE
 * and the wait costs a load and a store, the call one atomic exchange.
 * Otherwise the worker moves IDLE to SLEEPING under the mutex and waits;
 * done's exchange sees SLEEPING and signals under the same mutex, so no
 * wake-up is lost. */
enum waiter_state { WAITER_IDLE, WAITER_SLEEPING, WAITER_DONE };

struct waiter {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    _Atomic int state;
};

static void waiter_done(void *context)
{
    struct waiter *w = context;
    if (atomic_exchange(&w->state, WAITER_DONE) == WAITER_SLEEPING) {
        pthread_mutex_lock(&w->mutex);
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->mutex);
    }
}

static void waiter_wait(struct waiter *w)
{
    if (atomic_load_explicit(&w->state, memory_order_acquire) != WAITER_DONE) {
        pthread_mutex_lock(&w->mutex);
        int expected = WAITER_IDLE;
        if (atomic_compare_exchange_strong(&w->state, &expected, WAITER_SLEEPING)) {
            while (atomic_load(&w->state) != WAITER_DONE)
                pthread_cond_wait(&w->cond, &w->mutex);
        }
        pthread_mutex_unlock(&w->mutex);
    }
    /* The next call is made after this, by this thread: it cannot see DONE. */
    atomic_store_explicit(&w->state, WAITER_IDLE, memory_order_relaxed);
}

struct worker {
    struct bench *b;
    uint32_t index;
    uint64_t first; /* lease number to start at */
    uint64_t count;
    uint64_t denied;
    struct waiter waiter;
};

static void *worker_main(void *argument)
{
    struct worker *w = argument;
    struct requirement requirements[3];
    struct actual actuals[3];
    for (int i = 0; i < 3; i++) {
        requirements[i] = (struct requirement){keys[i], (uint32_t)strlen(keys[i]), amounts[i]};
        /* Actuals below the estimate: rolling holds shrink, the budget commits. */
        actuals[i] = (struct actual){keys[i], (uint32_t)strlen(keys[i]), amounts[i] / 2 + 1};
    }
    char id[32];
    struct reserve_request request = {
        .lease_id = id, .requirements = requirements, .requirement_count = 3};
    struct complete_request completion = {.lease_id = id, .actuals = actuals, .actual_count = 3};
    struct reserve_result result;
    struct complete_result completed;
    struct wait_ticket ticket;
    pthread_mutex_init(&w->waiter.mutex, NULL);
    pthread_cond_init(&w->waiter.cond, NULL);
    atomic_init(&w->waiter.state, WAITER_IDLE);
    for (uint64_t i = w->first; i < w->first + w->count; i++) {
        request.lease_id_length = completion.lease_id_length = lease_id(id, w->index, i);
        if (w->b->wait != NULL)
            wait_reserve(w->b->wait, &ticket, &request, &result, 0, WAIT_PRIORITY_DEFAULT,
                         waiter_done, &w->waiter);
        else
            backend_reserve(w->b->backend, &request, &result, 1, waiter_done, &w->waiter);
        waiter_wait(&w->waiter);
        if (!result.allowed)
            w->denied++;
        if (w->b->complete) {
            if (w->b->wait != NULL)
                wait_complete(w->b->wait, &completion, &completed, 1, waiter_done, &w->waiter);
            else
                backend_complete(w->b->backend, &completion, &completed, 1, waiter_done,
                                 &w->waiter);
            waiter_wait(&w->waiter);
            free(completed.warnings);
        }
    }
    pthread_cond_destroy(&w->waiter.cond);
    pthread_mutex_destroy(&w->waiter.mutex);
    return NULL;
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Runs count calls on each thread; returns the elapsed nanoseconds and the
 * CPU time of the process (what the figures are on a busy machine). */
static int64_t run(struct bench *b, uint64_t first, uint64_t count, uint64_t *denied,
                   int64_t *cpu_used_ns)
{
    pthread_t threads[THREADS_MAX];
    struct worker workers[THREADS_MAX];
    int64_t start_cpu_ns = cpu_ns();
    int64_t start_ns = clock_monotonic_ns();
    for (uint32_t t = 0; t < b->threads; t++) {
        workers[t] = (struct worker){.b = b, .index = t, .first = first, .count = count};
        if (pthread_create(&threads[t], NULL, worker_main, &workers[t]) != 0) {
            fprintf(stderr, "bench_backend: pthread_create failed\n");
            exit(1);
        }
    }
    for (uint32_t t = 0; t < b->threads; t++) {
        pthread_join(threads[t], NULL);
        *denied += workers[t].denied;
    }
    *cpu_used_ns = cpu_ns() - start_cpu_ns;
    return clock_monotonic_ns() - start_ns;
}

/* Live holds from usage: one rpm hold (amount 1) and one tpm hold per live
 * lease, and budget holds until they commit. */
static uint64_t live_holds(struct bench *b)
{
    struct limit_usage rpm, usd;
    if (backend_usage(b->backend, keys[0], START_MS, &rpm) != 0 ||
        backend_usage(b->backend, keys[2], START_MS, &usd) != 0)
        return 0;
    return 2 * (rpm.reserved + rpm.used) + usd.reserved / amounts[2];
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int scenario(const struct options *o, const char *name, uint32_t threads, bool complete)
{
    struct bench b = {.ops = backend_find(o->backend), .threads = threads, .complete = complete};
    const char *tmp = getenv("TMPDIR");
    snprintf(b.data_dir, sizeof b.data_dir, "%s/llmlimit-bench-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(b.data_dir) == NULL) {
        fprintf(stderr, "bench_backend: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    /* Holds of completed budget leases are gone, so pairs keep 2 per lease;
     * each pair reads the clock twice. */
    uint64_t holds_per_lease = complete ? 2 : 3;
    uint64_t live_leases = o->live_holds / holds_per_lease;
    b.clock.clock.now_ms = ticking_now_ms;
    b.clock.reads_per_window = live_leases * (complete ? 2 : 1);
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &b.clock.clock;
    config.data_dir = b.data_dir;
    config.lease_cache_entries = o->lease_cache_entries;
    char error[256];
    if (backend_open(b.ops, &config, NULL, &b.backend, error, sizeof error) != 0) {
        fprintf(stderr, "bench_backend: open %s: %s\n", o->backend, error);
        return -1;
    }
    int rc = put_limits(&b, o->time_zone);
    if (rc == 0 && o->through_wait) {
        struct wait_options options;
        wait_options_defaults(&options);
        rc = wait_open(b.backend, &b.clock.clock, &options, &b.wait, error, sizeof error);
        if (rc != 0)
            fprintf(stderr, "bench_backend: wait_open: %s\n", error);
    }
    uint64_t denied = 0;
    if (rc == 0) {
        /* Warm up to the steady state: a window of live holds and a full
         * lease cache that evicts its oldest on every reserve. */
        uint64_t warm_up =
            o->warm_up >= 0 ? (uint64_t)o->warm_up : live_leases + config.lease_cache_entries;
        int64_t cpu_used_ns;
        (void)run(&b, 0, warm_up / threads + 1, &denied, &cpu_used_ns);
        uint64_t per_thread = o->ops / threads;
        int64_t elapsed_ns = run(&b, warm_up, per_thread, &denied, &cpu_used_ns);
        uint64_t done = per_thread * threads;
        const char *what = complete ? "pair" : "reserve";
        printf("%-28s %10.0f %ss/s %7.1f ns/%s wall, %7.1f ns/%s cpu  (%" PRIu64
               " in %.2f s, live holds %" PRIu64 ", denied %" PRIu64 ")\n",
               name, (double)done * 1e9 / (double)elapsed_ns, what,
               (double)elapsed_ns / (double)done, what, (double)cpu_used_ns / (double)done, what,
               done, (double)elapsed_ns / 1e9, live_holds(&b), denied);
    }
    if (b.wait != NULL)
        wait_close(b.wait);
    backend_close(b.backend);
    nftw(b.data_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

static int parse(int argc, char **argv, struct options *o)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            o->backend = argv[++i];
        else if (strcmp(argv[i], "--live-holds") == 0 && i + 1 < argc)
            o->live_holds = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            o->ops = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            o->scenario = argv[++i];
        else if (strcmp(argv[i], "--lease-cache") == 0 && i + 1 < argc)
            o->lease_cache_entries = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--warm-up") == 0 && i + 1 < argc)
            o->warm_up = strtoll(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--through-wait") == 0)
            o->through_wait = true;
        else if (strcmp(argv[i], "--time-zone") == 0 && i + 1 < argc)
            o->time_zone = argv[++i];
        else
            return -1;
    }
    if (backend_find(o->backend) == NULL || o->live_holds < 6 || o->ops < 2 ||
        o->lease_cache_entries < 1)
        return -1;
    return 0;
}

static const struct {
    const char *name;
    const char *title;
    uint32_t threads;
    bool complete;
} scenarios[] = {
    {"reserve", "reserve, 1 thread", 1, false},
    {"pairs", "reserve+complete, 1 thread", 1, true},
    {"reserve2", "reserve, 2 threads", 2, false},
    {"pairs2", "reserve+complete, 2 threads", 2, true},
};

#define SCENARIO_COUNT (sizeof scenarios / sizeof scenarios[0])

int main(int argc, char **argv)
{
    struct options o = {.backend = "memory",
                        .live_holds = 1000000,
                        .ops = 3000000,
                        .scenario = "all",
                        .lease_cache_entries = LEASE_CACHE_ENTRIES_DEFAULT,
                        .time_zone = ""};
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr,
                "usage: bench_backend [--backend %s] [--live-holds N (1000000)] [--ops N "
                "(3000000)] [--scenario all|reserve|pairs|reserve2|pairs2] [--lease-cache N "
                "(%u)] [--warm-up N (live leases + lease cache)] [--through-wait] "
                "[--time-zone NAME (the budget's; default UTC)]\n",
                backend_names(), (unsigned)LEASE_CACHE_ENTRIES_DEFAULT);
        return 2;
    }
    printf("bench_backend: %s backend%s; reserve = rolling rpm 1 + rolling tpm 1500 + monthly "
           "budget 20000 usd_micros (%s); ~%" PRIu64 " live holds; lease cache full\n",
           o.backend, o.through_wait ? " through the wait layer" : "",
           o.time_zone[0] != '\0' ? o.time_zone : "UTC", o.live_holds);
    for (size_t i = 0; i < SCENARIO_COUNT; i++) {
        if (strcmp(o.scenario, "all") != 0 && strcmp(o.scenario, scenarios[i].name) != 0)
            continue;
        if (scenario(&o, scenarios[i].title, scenarios[i].threads, scenarios[i].complete) != 0)
            return 1;
    }
    return 0;
}
