/* The sqlite backend alone: N threads submit reserves (each a new lease with
 * three requirements: rpm and tpm rolling windows and a monthly budget) and
 * wait for the durable answer. Prints durable reserves/s, latency
 * percentiles and the group-commit batch fill. --max-batch 1 gives the
 * one-transaction-per-reserve figure; --prefill grows the tables first.
 * --ids picks the lease ids: time-ordered (as UUIDv7, what our clients
 * send), per-thread sequences (as the HTTP load generator's) or random (as
 * UUIDv4), which spreads the lease-id B-tree writes widest. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/sqlite/sq_bounds.h"
#include "backend/sqlite/sqlite.h"

#define THREADS_MAX 512
#define SAMPLES_PER_THREAD_MAX (1u << 20)
#define PREFILL_BATCH 1024

struct options {
    uint32_t threads;
    uint32_t seconds;
    uint32_t max_batch;
    uint64_t prefill;
    bool normal;
    bool complete;
    const char *data_dir;
    const char *ids; /* "ordered", "per-thread" or "random" */
};

struct worker {
    struct backend *backend;
    uint32_t index;
    const struct options *options;
    atomic_bool *stop;
    uint64_t reserves;
    uint64_t denied;
    uint64_t errors;
    uint32_t sample_count;
    uint32_t *samples_us;
    uint64_t sequence;
    uint64_t random_state;
};

static const struct backend_ops *ops;
/* Lease ids grow with time, as UUIDv7 ones do (docs/sqlite.md "Lease ids"). */
static atomic_uint_fast64_t lease_sequence;

static void usage(void)
{
    fprintf(stderr, "usage: bench_sqlite [--threads N] [--seconds S] [--max-batch N] "
                    "[--prefill N] [--normal] [--complete] [--data-dir DIR] "
                    "[--ids ordered|per-thread|random]\n");
    exit(2);
}

static void parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.threads = 50,
                          .seconds = 5,
                          .max_batch = SQ_GROUP_COMMIT_MAX,
                          .data_dir = "bench-sqlite-data",
                          .ids = "ordered"};
    for (int i = 1; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--threads") == 0 && next) {
            o->threads = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--seconds") == 0 && next) {
            o->seconds = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--max-batch") == 0 && next) {
            o->max_batch = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--prefill") == 0 && next) {
            o->prefill = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--ids") == 0 && next) {
            o->ids = argv[++i];
        } else if (strcmp(argv[i], "--data-dir") == 0 && next) {
            o->data_dir = argv[++i];
        } else if (strcmp(argv[i], "--normal") == 0) {
            o->normal = true;
        } else if (strcmp(argv[i], "--complete") == 0) {
            o->complete = true;
        } else {
            usage();
        }
    }
    if (o->threads < 1 || o->threads > THREADS_MAX || o->max_batch < 1 || o->seconds < 1 ||
        (strcmp(o->ids, "ordered") != 0 && strcmp(o->ids, "per-thread") != 0 &&
         strcmp(o->ids, "random") != 0))
        usage();
}

static const char *const keys[3] = {"bench:rpm", "bench:tpm", "bench:usd:month"};

static void put_limits(struct backend *backend)
{
    struct limit_definition d[3] = {
        {.kind = LIMIT_ROLLING, .capacity = AMOUNT_MAX, .window_seconds = 10},
        {.kind = LIMIT_ROLLING, .capacity = AMOUNT_MAX, .window_seconds = 10},
        {.kind = LIMIT_BUDGET,
         .capacity = AMOUNT_MAX,
         .period = PERIOD_MONTH,
         .timeout_seconds = 5},
    };
    for (int i = 0; i < 3; i++) {
        snprintf(d[i].key, sizeof d[i].key, "%s", keys[i]);
        char error[256] = "";
        struct limit_state state;
        if (limit_definition_validate(&d[i], error, sizeof error) != 0 ||
            backend_put_limit(backend, &d[i], &state, error, sizeof error) != 0) {
            fprintf(stderr, "put_limit: %s\n", error);
            exit(1);
        }
    }
}

static void make_request(struct reserve_request *request, struct requirement *requirements,
                         char *lease_id, size_t lease_size, const char *prefix, uint64_t n)
{
    snprintf(lease_id, lease_size, "%s-%016" PRIx64, prefix, n);
    uint64_t amounts[3] = {1, 500, 2000};
    for (int k = 0; k < 3; k++)
        requirements[k] = (struct requirement){
            .key = keys[k], .key_length = (uint32_t)strlen(keys[k]), .amount = amounts[k]};
    *request = (struct reserve_request){.lease_id = lease_id,
                                        .lease_id_length = (uint32_t)strlen(lease_id),
                                        .caller = "bench",
                                        .caller_length = 5,
                                        .requirements = requirements,
                                        .requirement_count = 3};
}

/* Grows the tables with completed leases, PREFILL_BATCH per call. */
static void prefill(struct backend *backend, uint64_t count)
{
    static struct reserve_request requests[PREFILL_BATCH];
    static struct reserve_result results[PREFILL_BATCH];
    static struct complete_request completes[PREFILL_BATCH];
    static struct complete_result completed[PREFILL_BATCH];
    static struct requirement requirements[PREFILL_BATCH][3];
    static char ids[PREFILL_BATCH][48];
    int64_t started = clock_monotonic_ns();
    for (uint64_t done = 0; done < count;) {
        uint32_t n = count - done < PREFILL_BATCH ? (uint32_t)(count - done) : PREFILL_BATCH;
        for (uint32_t i = 0; i < n; i++) {
            make_request(&requests[i], requirements[i], ids[i], sizeof ids[i], "prefill", done + i);
            completes[i] = (struct complete_request){
                .lease_id = ids[i], .lease_id_length = requests[i].lease_id_length};
        }
        backend_reserve_wait(backend, requests, results, n);
        backend_complete_wait(backend, completes, completed, n);
        for (uint32_t i = 0; i < n; i++)
            free(completed[i].warnings);
        done += n;
        if (done % (100 * PREFILL_BATCH) < PREFILL_BATCH || done == count)
            fprintf(stderr, "\rprefill: %" PRIu64 " leases", done);
    }
    double seconds = (double)(clock_monotonic_ns() - started) / 1e9;
    fprintf(stderr, "\nprefill: %.0f leases/s (reserve and complete, %u per call)\n",
            (double)count / seconds, PREFILL_BATCH);
}

/* The next lease id of a worker, per --ids. */
static void next_lease_id(struct worker *w, struct reserve_request *request,
                          struct requirement *requirements, char *lease_id, size_t size)
{
    if (strcmp(w->options->ids, "ordered") == 0) {
        make_request(request, requirements, lease_id, size, "lease",
                     atomic_fetch_add(&lease_sequence, 1));
    } else if (strcmp(w->options->ids, "per-thread") == 0) {
        char prefix[24];
        snprintf(prefix, sizeof prefix, "t%u", w->index);
        make_request(request, requirements, lease_id, size, prefix, w->sequence++);
    } else {
        uint64_t x = w->random_state; /* xorshift64 */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w->random_state = x;
        make_request(request, requirements, lease_id, size, "r", x);
    }
}

static void *worker_main(void *argument)
{
    struct worker *w = argument;
    struct reserve_request request;
    struct requirement requirements[3];
    char lease_id[48];
    while (!atomic_load(w->stop)) {
        next_lease_id(w, &request, requirements, lease_id, sizeof lease_id);
        struct reserve_result result;
        int64_t started = clock_monotonic_ns();
        backend_reserve_wait(w->backend, &request, &result, 1);
        int64_t elapsed_us = (clock_monotonic_ns() - started) / 1000;
        if (w->sample_count < SAMPLES_PER_THREAD_MAX)
            w->samples_us[w->sample_count++] = (uint32_t)elapsed_us;
        if (result.error != BACKEND_OK && !backend_error_is_denial(result.error))
            w->errors++;
        else if (!result.allowed)
            w->denied++;
        else
            w->reserves++;
        if (w->options->complete && result.allowed) {
            struct complete_request complete = {.lease_id = lease_id,
                                                .lease_id_length = request.lease_id_length};
            struct complete_result completed;
            backend_complete_wait(w->backend, &complete, &completed, 1);
            free(completed.warnings);
        }
    }
    return NULL;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void report(struct worker *workers, const struct options *o, double seconds,
                   const struct backend_stats *before, const struct backend_stats *after,
                   uint64_t fsyncs)
{
    uint64_t reserves = 0, denied = 0, errors = 0, samples = 0;
    for (uint32_t i = 0; i < o->threads; i++) {
        reserves += workers[i].reserves;
        denied += workers[i].denied;
        errors += workers[i].errors;
        samples += workers[i].sample_count;
    }
    uint32_t *all = malloc((samples > 0 ? samples : 1) * sizeof *all);
    uint64_t at = 0;
    for (uint32_t i = 0; all != NULL && i < o->threads; i++) {
        memcpy(all + at, workers[i].samples_us, workers[i].sample_count * sizeof *all);
        at += workers[i].sample_count;
    }
    if (all != NULL && samples > 0)
        qsort(all, samples, sizeof *all, compare_u32);
    uint64_t batches = after->batches - before->batches;
    uint64_t items = after->batched_items - before->batched_items;
    printf("sqlite backend, synchronous=%s, max batch %u, %u threads, %.1f s%s, prefill %" PRIu64
           ", %s lease ids\n",
           o->normal ? "NORMAL" : "FULL", o->max_batch, o->threads, seconds,
           o->complete ? ", reserve+complete" : "", o->prefill, o->ids);
    printf("  durable reserves/s: %.0f (allowed %" PRIu64 ", denied %" PRIu64 ", errors %" PRIu64
           ")\n",
           (double)reserves / seconds, reserves, denied, errors);
    if (all != NULL && samples > 0)
        printf("  reserve latency us: p50 %u  p90 %u  p99 %u  p99.9 %u  max %u\n", all[samples / 2],
               all[samples * 9 / 10], all[samples * 99 / 100], all[samples * 999 / 1000],
               all[samples - 1]);
    printf("  transactions: %" PRIu64 " (%.0f/s), batch fill %.1f requests per transaction, "
           "WAL fsyncs %.0f/s\n",
           batches, (double)batches / seconds, batches ? (double)items / (double)batches : 0.0,
           (double)fsyncs / seconds);
    free(all);
}

int main(int argc, char **argv)
{
    struct options o;
    parse(argc, argv, &o);
    ops = backend_find("sqlite");
    mkdir(o.data_dir, 0750);
    struct backend_config config;
    backend_config_defaults(&config);
    config.data_dir = o.data_dir;
    struct sq_options options;
    sq_options_defaults(&options);
    options.synchronous_normal = o.normal;
    struct backend *backend = NULL;
    char error[512];
    if (ops == NULL || backend_open(ops, &config, &options, &backend, error, sizeof error) != 0) {
        fprintf(stderr, "open: %s\n", ops ? error : "no sqlite backend");
        return 1;
    }
    put_limits(backend);
    if (o.prefill > 0)
        prefill(backend, o.prefill);
    sq_backend_set_group_commit_max(backend, o.max_batch);
    static struct worker workers[THREADS_MAX];
    static pthread_t threads[THREADS_MAX];
    atomic_bool stop = false;
    struct backend_stats before, after;
    backend_stats(backend, &before);
    uint64_t fsyncs_before = sq_backend_fsyncs(backend);
    int64_t started = clock_monotonic_ns();
    for (uint32_t i = 0; i < o.threads; i++) {
        workers[i] = (struct worker){.backend = backend,
                                     .index = i,
                                     .options = &o,
                                     .stop = &stop,
                                     .random_state = 0x9e3779b97f4a7c15ull * (i + 1)};
        workers[i].samples_us = malloc(SAMPLES_PER_THREAD_MAX * sizeof(uint32_t));
        if (workers[i].samples_us == NULL ||
            pthread_create(&threads[i], NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "cannot start thread %u\n", i);
            return 1;
        }
    }
    sleep(o.seconds);
    atomic_store(&stop, true);
    for (uint32_t i = 0; i < o.threads; i++)
        pthread_join(threads[i], NULL);
    double seconds = (double)(clock_monotonic_ns() - started) / 1e9;
    backend_stats(backend, &after);
    report(workers, &o, seconds, &before, &after, sq_backend_fsyncs(backend) - fsyncs_before);
    for (uint32_t i = 0; i < o.threads; i++)
        free(workers[i].samples_us);
    backend_close(backend);
    return 0;
}
