/* Wait layer figures (src/wait): what a waiter costs in memory (the
 * caller's ticket, and what the wait layer allocates at open and per
 * waiter), and how long a released slot takes to reach the next waiter:
 * a 10-slot concurrency limit with a queue of waiters; each round completes
 * the oldest holder and times until the next waiter's done runs. With
 * TIGERBEETLE_BIN, the same hand-over between two front ends of one
 * cluster, where a release is seen only by its own front end. Prints
 * figures; asserts nothing. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/tigerbeetle/tigerbeetle.h"
#include "tigerbeetle/tb_server.h"
#include "wait/wait.h"
#include "wait/wait_internal.h"

#define SLOTS 10
#define LEASE_BYTES 32

struct bench {
    const char *backend_name;
    struct backend *backend;
    struct wait *wait;
    char data_dir[256];
};

struct caller {
    struct wait_ticket ticket;
    struct reserve_request request;
    struct reserve_result result;
    struct requirement requirements[4];
    char lease[LEASE_BYTES];
    struct bench *b;
};

static const char *const keys[4] = {"slots", "k1", "k2", "k3"};

static int open_backend(struct bench *b)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(b->data_dir, sizeof b->data_dir, "%s/llmlimit-bench-wait-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(b->data_dir) == NULL) {
        fprintf(stderr, "bench_wait: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    struct backend_config config;
    backend_config_defaults(&config);
    config.data_dir = b->data_dir;
    char error[256];
    if (backend_open(backend_find(b->backend_name), &config, NULL, &b->backend, error,
                     sizeof error) != 0) {
        fprintf(stderr, "bench_wait: open %s: %s\n", b->backend_name, error);
        return -1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void close_backend(struct bench *b)
{
    backend_close(b->backend);
    nftw(b->data_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int put_slots(struct bench *b, const char *key, uint64_t capacity)
{
    struct limit_definition d = {
        .kind = LIMIT_CONCURRENCY, .capacity = capacity, .timeout_seconds = 600};
    snprintf(d.key, sizeof d.key, "%s", key);
    char error[256] = "";
    struct limit_state state;
    if (limit_definition_validate(&d, error, sizeof error) != 0 ||
        backend_put_limit(b->backend, &d, &state, error, sizeof error) != 0) {
        fprintf(stderr, "bench_wait: put %s: %s\n", key, error);
        return -1;
    }
    return 0;
}

static bool reserve_plain(struct bench *b, const char *lease, const char *key, uint64_t amount)
{
    struct requirement r = {key, (uint32_t)strlen(key), amount};
    struct reserve_request request = {.lease_id = lease,
                                      .lease_id_length = (uint32_t)strlen(lease),
                                      .requirements = &r,
                                      .requirement_count = 1};
    struct reserve_result result;
    backend_reserve_wait(b->backend, &request, &result, 1);
    return result.allowed;
}

static void caller_prepare(struct caller *c, const char *prefix, uint64_t n, const char *const *k,
                           uint32_t count)
{
    snprintf(c->lease, sizeof c->lease, "%s-%" PRIu64, prefix, n);
    for (uint32_t i = 0; i < count; i++)
        c->requirements[i] = (struct requirement){k[i], (uint32_t)strlen(k[i]), 1};
    c->request = (struct reserve_request){.lease_id = c->lease,
                                          .lease_id_length = (uint32_t)strlen(c->lease),
                                          .requirements = c->requirements,
                                          .requirement_count = count};
}

/* ---- memory per waiter -------------------------------------------------- */

static size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

static void ignore_done(void *context)
{
    (void)context;
}

/* n waiters, each denied on `count` full limits; per_key: every waiter's
 * limits are its own (a queue each) instead of shared. */
static int memory_run(struct bench *b, uint32_t n, uint32_t count, bool per_key)
{
    struct caller *callers = calloc(n, sizeof *callers);
    char(*own)[4][32] = calloc(n, sizeof *own);
    if (callers == NULL || own == NULL)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k[4];
        for (uint32_t j = 0; j < count; j++) {
            snprintf(own[i][j], sizeof own[i][j], "%s-%u", keys[j], per_key ? i : 0);
            k[j] = own[i][j];
            char holder[64];
            snprintf(holder, sizeof holder, "hold-%s", k[j]);
            if ((i == 0 || per_key) &&
                (put_slots(b, k[j], 1) != 0 || !reserve_plain(b, holder, k[j], 1)))
                return -1; /* every limit full: the waiters queue on all */
        }
        caller_prepare(&callers[i], "m", i, k, count);
    }
    size_t before = heap_in_use();
    for (uint32_t i = 0; i < n; i++)
        wait_reserve(b->wait, &callers[i].ticket, &callers[i].request, &callers[i].result, 60000,
                     WAIT_PRIORITY_DEFAULT, ignore_done, NULL);
    wait_quiesce(b->wait);
    size_t after = heap_in_use();
    struct wait_stats s;
    wait_stats(b->wait, &s);
    printf("%6u waiters, %u limit%s each, %s: %6.1f bytes per waiter allocated by the wait layer "
           "(+ %zu of ticket), %u queued, %u queues\n",
           n, count, count > 1 ? "s" : "", per_key ? "a queue per limit" : "shared queues",
           (double)(after - before) / n, sizeof(struct wait_ticket), s.queued, s.keys);
    for (uint32_t i = 0; i < n; i++)
        wait_cancel(b->wait, &callers[i].ticket);
    wait_quiesce(b->wait);
    free(callers);
    free(own);
    return 0;
}

static int memory_scenario(const char *backend_name, uint32_t n)
{
    struct bench b = {.backend_name = backend_name};
    if (open_backend(&b) != 0)
        return -1;
    size_t before = heap_in_use();
    struct wait_options options;
    wait_options_defaults(&options);
    options.max_waiters = n;
    char error[256];
    if (wait_open(b.backend, clock_system(), &options, &b.wait, error, sizeof error) != 0) {
        fprintf(stderr, "bench_wait: %s\n", error);
        return -1;
    }
    printf("sizes: ticket %zu bytes (the caller's), queue place %zu, queue %zu; wait_open with "
           "max_waiters %u: %zu bytes\n",
           sizeof(struct wait_ticket), sizeof(struct wait_node), sizeof(struct wait_key), n,
           heap_in_use() - before);
    int rc = memory_run(&b, n, 1, false);
    if (rc == 0)
        rc = memory_run(&b, n, 4, false);
    if (rc == 0)
        rc = memory_run(&b, n, 1, true);
    wait_close(b.wait);
    close_backend(&b);
    return rc;
}

/* ---- hand-over latency -------------------------------------------------- */

struct handoff {
    struct bench b;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    struct caller *admitted[SLOTS * 4]; /* ring of holders, oldest first */
    uint32_t head;
    uint32_t count;
    int64_t admitted_ns; /* when the last admission's done ran */
    uint64_t admissions;
    uint64_t denials;
    uint64_t completes; /* completes answered */
    struct complete_request complete;
    struct complete_result completed;
};

static void complete_done(void *context)
{
    struct handoff *h = context;
    pthread_mutex_lock(&h->mutex);
    h->completes++;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mutex);
}

static void handoff_done(void *context)
{
    struct caller *c = context;
    struct handoff *h = (struct handoff *)c->b;
    int64_t now = clock_monotonic_ns();
    pthread_mutex_lock(&h->mutex);
    if (c->result.allowed) {
        h->admitted[(h->head + h->count++) % (SLOTS * 4)] = c;
        h->admitted_ns = now;
        h->admissions++;
    } else {
        h->denials++;
    }
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mutex);
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void start_waiter(struct handoff *h, struct caller *c, uint64_t n)
{
    caller_prepare(c, "h", n, keys, 1);
    c->b = &h->b;
    wait_reserve(h->b.wait, &c->ticket, &c->request, &c->result, WAIT_MS_MAX, WAIT_PRIORITY_DEFAULT,
                 handoff_done, c);
}

/* One round: complete the oldest holder, wait for the next admission. */
static int64_t handoff_round(struct handoff *h, struct caller **freed)
{
    pthread_mutex_lock(&h->mutex);
    struct caller *oldest = h->admitted[h->head];
    h->head = (h->head + 1) % (SLOTS * 4);
    h->count--;
    uint64_t seen = h->admissions, completes = h->completes;
    pthread_mutex_unlock(&h->mutex);
    h->complete = (struct complete_request){.lease_id = oldest->lease,
                                            .lease_id_length = (uint32_t)strlen(oldest->lease)};
    int64_t start = clock_monotonic_ns();
    backend_complete(h->b.backend, &h->complete, &h->completed, 1, complete_done, h);
    pthread_mutex_lock(&h->mutex);
    while (h->admissions == seen || h->completes == completes)
        pthread_cond_wait(&h->cond, &h->mutex);
    int64_t latency = h->admitted_ns - start;
    pthread_mutex_unlock(&h->mutex);
    free(h->completed.warnings);
    *freed = oldest;
    return latency;
}

static int handoff_scenario(const char *backend_name, uint32_t queued, uint32_t rounds)
{
    static struct handoff h; /* its bench first: a caller's b points at it */
    memset(&h, 0, sizeof h);
    h.b.backend_name = backend_name;
    pthread_mutex_init(&h.mutex, NULL);
    pthread_cond_init(&h.cond, NULL);
    struct wait_options options;
    wait_options_defaults(&options);
    char error[256];
    if (open_backend(&h.b) != 0 || put_slots(&h.b, keys[0], SLOTS) != 0 ||
        wait_open(h.b.backend, clock_system(), &options, &h.b.wait, error, sizeof error) != 0)
        return -1;
    uint32_t total = SLOTS + queued + 1;
    struct caller *callers = calloc(total, sizeof *callers);
    int64_t *latencies = calloc(rounds, sizeof *latencies);
    if (callers == NULL || latencies == NULL)
        return -1;
    uint64_t n = 0;
    for (uint32_t i = 0; i < SLOTS + queued; i++, n++)
        start_waiter(&h, &callers[i], n);
    wait_quiesce(h.b.wait);
    struct caller *spare = &callers[SLOTS + queued];
    int64_t start = clock_monotonic_ns();
    for (uint32_t r = 0; r < rounds; r++) {
        struct caller *freed;
        latencies[r] = handoff_round(&h, &freed);
        start_waiter(&h, spare, n++); /* the queue stays as long */
        spare = freed;
    }
    int64_t elapsed = clock_monotonic_ns() - start;
    qsort(latencies, rounds, sizeof *latencies, compare_i64);
    printf("%-7s %u slots, %u waiting: release -> next waiter's done p50 %.1f us, p99 %.1f us, "
           "max %.1f us; %.0f hand-overs/s (%u rounds, %" PRIu64 " denied)\n",
           backend_name, SLOTS, queued, (double)latencies[rounds / 2] / 1e3,
           (double)latencies[rounds * 99 / 100] / 1e3, (double)latencies[rounds - 1] / 1e3,
           (double)rounds * 1e9 / (double)elapsed, rounds, h.denials);
    wait_close(h.b.wait);
    close_backend(&h.b);
    free(callers);
    free(latencies);
    return 0;
}

/* ---- two tigerbeetle front ends ------------------------------------------ */

struct front {
    struct backend *backend;
    struct wait *wait;
};

static int front_open(struct front *fr, const char *address)
{
    struct tb_options options;
    tb_options_defaults(&options);
    options.addresses = address;
    options.sessions = 1;
    struct backend_config config;
    backend_config_defaults(&config);
    struct wait_options wait_options;
    wait_options_defaults(&wait_options);
    char error[256];
    struct bench b = {.backend_name = "tigerbeetle"};
    if (backend_open(&tb_backend_ops, &config, &options, &fr->backend, error, sizeof error) != 0 ||
        (b.backend = fr->backend, put_slots(&b, keys[0], 1)) != 0 ||
        wait_open(fr->backend, clock_system(), &wait_options, &fr->wait, error, sizeof error) !=
            0) {
        fprintf(stderr, "bench_wait: a front end: %s\n", error);
        return -1;
    }
    return 0;
}

struct signal_done {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
    int64_t at_ns;
};

static void signal_done(void *context)
{
    struct signal_done *d = context;
    pthread_mutex_lock(&d->mutex);
    d->done = true;
    d->at_ns = clock_monotonic_ns();
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->mutex);
}

static bool front_reserve(struct front *fr, const char *lease)
{
    struct bench b = {.backend = fr->backend};
    return reserve_plain(&b, lease, keys[0], 1);
}

static void front_release(struct front *fr, const char *lease)
{
    struct release_request request = {lease, (uint32_t)strlen(lease)};
    struct release_result result;
    backend_release_wait(fr->backend, &request, &result, 1);
}

/* One hand-over: a holder on `from`, a waiter on `to`; the holder is
 * released through `from`. Returns the time to the waiter's done, or -1. */
static int64_t fronts_round(struct front *from, struct front *to, uint32_t round)
{
    char holder[32], waiter[32];
    snprintf(holder, sizeof holder, "fh-%u", round);
    snprintf(waiter, sizeof waiter, "fw-%u", round);
    if (!front_reserve(from, holder))
        return -1;
    struct caller c;
    caller_prepare(&c, "fw", round, keys, 1);
    struct signal_done d = {.done = false};
    pthread_mutex_init(&d.mutex, NULL);
    pthread_cond_init(&d.cond, NULL);
    wait_reserve(to->wait, &c.ticket, &c.request, &c.result, WAIT_MS_MAX, WAIT_PRIORITY_DEFAULT,
                 signal_done, &d);
    wait_quiesce(to->wait); /* denied once: it waits */
    int64_t start = clock_monotonic_ns();
    front_release(from, holder);
    pthread_mutex_lock(&d.mutex);
    while (!d.done)
        pthread_cond_wait(&d.cond, &d.mutex);
    pthread_mutex_unlock(&d.mutex);
    bool allowed = c.result.allowed;
    front_release(to, waiter);
    pthread_cond_destroy(&d.cond);
    pthread_mutex_destroy(&d.mutex);
    return allowed ? d.at_ns - start : -1;
}

static void print_latencies(const char *what, int64_t *latencies, uint32_t count)
{
    qsort(latencies, count, sizeof *latencies, compare_i64);
    printf("%-40s p50 %7.1f ms, p90 %7.1f ms, max %7.1f ms (%u rounds)\n", what,
           (double)latencies[count / 2] / 1e6, (double)latencies[count * 9 / 10] / 1e6,
           (double)latencies[count - 1] / 1e6, count);
}

static int fronts_scenario(uint32_t rounds)
{
    if (tb_test_server_binary() == NULL) {
        printf("fronts: skipped, TIGERBEETLE_BIN not set\n");
        return 0;
    }
    struct tb_test_server server;
    if (tb_test_server_start(&server) != 0)
        return -1;
    struct front a = {0}, b = {0};
    int64_t *local = calloc(rounds, sizeof *local), *remote = calloc(rounds, sizeof *remote);
    int rc = local != NULL && remote != NULL && front_open(&a, server.address) == 0 &&
                     front_open(&b, server.address) == 0
                 ? 0
                 : -1;
    for (uint32_t r = 0; rc == 0 && r < rounds; r++) {
        local[r] = fronts_round(&a, &a, 2 * r);
        remote[r] = fronts_round(&a, &b, 2 * r + 1);
        if (local[r] < 0 || remote[r] < 0)
            rc = -1;
    }
    if (rc == 0) {
        printf("tigerbeetle, one replica, a 1-slot limit, two front ends:\n");
        print_latencies("  released and waiting on the same front end:", local, rounds);
        print_latencies("  released on one, waiting on the other:", remote, rounds);
    }
    for (struct front *fr = &a; fr != NULL; fr = fr == &a ? &b : NULL) {
        if (fr->wait != NULL)
            wait_close(fr->wait);
        if (fr->backend != NULL)
            backend_close(fr->backend);
    }
    tb_test_server_stop(&server);
    free(local);
    free(remote);
    return rc;
}

int main(int argc, char **argv)
{
    const char *backend = "memory";
    const char *scenario = "all";
    uint32_t waiters = WAIT_WAITERS_DEFAULT, rounds = 20000, queued = 100;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            backend = argv[++i];
        else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            scenario = argv[++i];
        else if (strcmp(argv[i], "--waiters") == 0 && i + 1 < argc)
            waiters = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--queued") == 0 && i + 1 < argc)
            queued = (uint32_t)strtoul(argv[++i], NULL, 10);
        else
            backend = NULL;
    }
    if (backend == NULL || backend_find(backend) == NULL || waiters < 1 || rounds < 1 ||
        queued < 1) {
        fprintf(stderr,
                "usage: bench_wait [--backend %s] [--scenario all|memory|handoff] "
                "[--waiters N (10000)] [--rounds N (20000)] [--queued N (100)]\n",
                backend_names());
        return 2;
    }
    if ((strcmp(scenario, "all") == 0 || strcmp(scenario, "memory") == 0) &&
        memory_scenario(backend, waiters) != 0)
        return 1;
    if ((strcmp(scenario, "all") == 0 || strcmp(scenario, "handoff") == 0) &&
        handoff_scenario(backend, queued, rounds) != 0)
        return 1;
    if (strcmp(scenario, "fronts") == 0 && fronts_scenario(rounds < 200 ? rounds : 20) != 0)
        return 1;
    return 0;
}
