/* TigerBeetle benchmark against a running cluster (--addresses): the round
 * trip of one request, transfers/s in full batches, and the backend's
 * reserves/s (3 requirements: rolling RPM + rolling TPM + monthly budget)
 * with N callers in flight, with the batch fill the submitter reached.
 * Prints figures; asserts nothing. Start the server yourself, e.g.
 *   tigerbeetle format --cluster=0 --replica=0 --replica-count=1 0_0.tigerbeetle
 *   tigerbeetle start --addresses=3000 0_0.tigerbeetle */
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_submitter.h"
#include "tb_backend.h" /* the backend's submitter, for its round-trip figure */
#include "tigerbeetle.h"

#define BATCH_TRANSFERS 8000
#define LATENCIES_MAX 1000000

struct options {
    uint32_t batch_transfers; /* raw modes: transfers per request */
    const char *addresses;
    const char *cluster;
    int seconds;
    uint32_t callers;
    uint32_t sessions;
};

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static struct tbc_transfer transfer(tbc_u128 id, tbc_u128 debit, tbc_u128 credit, uint64_t amount,
                                    uint16_t flags, uint32_t timeout)
{
    struct tbc_transfer t;
    memset(&t, 0, sizeof t);
    t.id = id;
    t.debit_account_id = debit;
    t.credit_account_id = credit;
    t.amount = tbc_u128_from_u64(amount);
    t.ledger = 7; /* a ledger of its own: nothing of llmlimit's is touched */
    t.code = 1;
    t.flags = flags;
    t.timeout = timeout;
    return t;
}

static enum tbc_item_status create(struct tbc_submitter *sub, uint8_t operation, const void *events,
                                   uint32_t count, uint32_t *codes)
{
    struct tbc_item item;
    memset(&item, 0, sizeof item);
    item.operation = operation;
    item.event_count = count;
    item.events = events;
    item.codes = codes;
    item.deadline_ms = clock_monotonic_ms() + 10000;
    return tbc_submitter_call(sub, &item);
}

/* Two accounts on ledger 7 with plenty of credit; returns their ids. */
static int setup_accounts(struct tbc_submitter *sub, tbc_u128 *from, tbc_u128 *to)
{
    *from = tbc_id_random();
    *to = tbc_id_random();
    struct tbc_account accounts[2];
    memset(accounts, 0, sizeof accounts);
    accounts[0].id = *from;
    accounts[1].id = *to;
    for (int i = 0; i < 2; i++) {
        accounts[i].ledger = 7;
        accounts[i].code = 1;
    }
    uint32_t codes[2];
    return create(sub, TBC_OPERATION_CREATE_ACCOUNTS, accounts, 2, codes) == TBC_ITEM_OK ? 0 : -1;
}

static void round_trips(const struct options *o, tbc_u128 cluster)
{
    struct tbc_submitter *sub;
    char error[256];
    if (tbc_submitter_open(cluster, o->addresses, 1, &sub, error, sizeof error) != 0) {
        fprintf(stderr, "%s\n", error);
        return;
    }
    tbc_u128 from, to;
    for (int i = 0; i < 200 && !tbc_submitter_ready(sub); i++)
        poll(NULL, 0, 50);
    if (setup_accounts(sub, &from, &to) != 0) {
        fprintf(stderr, "cluster not reachable at %s\n", o->addresses);
        tbc_submitter_close(sub);
        return;
    }
    uint64_t *latencies = malloc(LATENCIES_MAX * sizeof *latencies);
    uint64_t n = 0;
    int64_t end = clock_monotonic_ms() + o->seconds * 1000;
    while (clock_monotonic_ms() < end && n < LATENCIES_MAX) {
        struct tbc_transfer t = transfer(tbc_id_random(), from, to, 1, TBC_TRANSFER_PENDING, 60);
        uint32_t code;
        int64_t started = clock_monotonic_ns();
        if (create(sub, TBC_OPERATION_CREATE_TRANSFERS, &t, 1, &code) != TBC_ITEM_OK)
            break;
        latencies[n++] = (uint64_t)(clock_monotonic_ns() - started);
    }
    qsort(latencies, n, sizeof *latencies, compare_u64);
    if (n > 0)
        printf("round trip, one pending transfer per request, one session:\n"
               "  %" PRIu64 " requests in %d s = %.0f requests/s; p50 %.3f ms, p99 %.3f ms\n",
               n, o->seconds, (double)n / o->seconds, (double)latencies[n / 2] / 1e6,
               (double)latencies[n * 99 / 100] / 1e6);
    free(latencies);
    tbc_submitter_close(sub);
}

/* Full batches of posted transfers, or (chains) of 3-transfer linked
 * chains of pending transfers with a timeout: the shape of a reserve. */
static void full_batches(const struct options *o, tbc_u128 cluster, bool chains)
{
    struct tbc_submitter *sub;
    char error[256];
    if (tbc_submitter_open(cluster, o->addresses, 1, &sub, error, sizeof error) != 0)
        return;
    for (int i = 0; i < 200 && !tbc_submitter_ready(sub); i++)
        poll(NULL, 0, 50);
    tbc_u128 from, to;
    struct tbc_transfer *events = malloc(BATCH_TRANSFERS * sizeof *events);
    uint32_t *codes = malloc(BATCH_TRANSFERS * sizeof *codes);
    if (events == NULL || codes == NULL || setup_accounts(sub, &from, &to) != 0) {
        free(events);
        free(codes);
        tbc_submitter_close(sub);
        return;
    }
    uint64_t transfers = 0, requests = 0;
    int64_t started = clock_monotonic_ns();
    int64_t end = clock_monotonic_ms() + o->seconds * 1000;
    while (clock_monotonic_ms() < end) {
        for (uint32_t i = 0; i < o->batch_transfers; i++) {
            uint16_t flags = chains ? TBC_TRANSFER_PENDING : 0;
            if (chains && i % 3 != 2 && i + 1 < o->batch_transfers)
                flags |= TBC_TRANSFER_LINKED;
            events[i] = transfer(tbc_id_random(), from, to, 1, flags, chains ? 3600 : 0);
        }
        if (create(sub, TBC_OPERATION_CREATE_TRANSFERS, events, o->batch_transfers, codes) !=
            TBC_ITEM_OK)
            break;
        transfers += o->batch_transfers;
        requests++;
    }
    double seconds = (double)(clock_monotonic_ns() - started) / 1e9;
    printf("full batches, %d %s per request, one session:\n"
           "  %" PRIu64 " transfers in %.1f s = %.0f transfers/s (%.1f ms per request)\n",
           o->batch_transfers,
           chains ? "pending transfers in linked chains of 3" : "posted transfers", transfers,
           seconds, (double)transfers / seconds,
           requests ? seconds * 1000 / (double)requests : 0.0);
    free(events);
    free(codes);
    tbc_submitter_close(sub);
}

static const char *const keys[3] = {"bench:tb:rpm", "bench:tb:tpm", "bench:tb:usd:month"};
static const uint64_t amounts[3] = {1, 500, 2500};

struct caller;

struct drive {
    const struct backend_ops *ops;
    struct backend *backend;
    int64_t end_ms;
    uint64_t next_lease; /* atomic */
    uint64_t allowed;    /* atomic */
    uint64_t failed;     /* atomic */
    uint64_t active;     /* atomic */
    pthread_mutex_t mutex;
    pthread_cond_t idle;
    uint32_t run;
};

struct caller {
    struct drive *drive;
    char lease[48];
    struct requirement requirements[3];
    struct reserve_request request;
    struct reserve_result result;
};

static void issue(struct caller *c);

static void reserved(void *context)
{
    struct caller *c = context;
    struct drive *d = c->drive;
    if (c->result.error == BACKEND_OK && c->result.allowed)
        __atomic_add_fetch(&d->allowed, 1, __ATOMIC_RELAXED);
    else
        __atomic_add_fetch(&d->failed, 1, __ATOMIC_RELAXED);
    if (clock_monotonic_ms() < d->end_ms) {
        issue(c); /* the next reserve, from the backend's thread: it does not block */
        return;
    }
    if (__atomic_sub_fetch(&d->active, 1, __ATOMIC_ACQ_REL) == 0) {
        pthread_mutex_lock(&d->mutex);
        pthread_cond_signal(&d->idle);
        pthread_mutex_unlock(&d->mutex);
    }
}

static void issue(struct caller *c)
{
    struct drive *d = c->drive;
    uint64_t n = __atomic_add_fetch(&d->next_lease, 1, __ATOMIC_RELAXED);
    int length = snprintf(c->lease, sizeof c->lease, "bench-%u-%" PRIu64, d->run, n);
    c->request.lease_id = c->lease;
    c->request.lease_id_length = (uint32_t)length;
    backend_reserve(d->backend, &c->request, &c->result, 1, reserved, c);
}

static int put_limits(struct backend *backend)
{
    for (int i = 0; i < 3; i++) {
        struct limit_definition d;
        memset(&d, 0, sizeof d);
        snprintf(d.key, sizeof d.key, "%s", keys[i]);
        d.capacity = UINT64_C(1000000000000000000);
        d.kind = i < 2 ? LIMIT_ROLLING : LIMIT_BUDGET;
        d.window_seconds = i < 2 ? 60 : 0;
        d.period = i < 2 ? PERIOD_NONE : PERIOD_MONTH;
        d.timeout_seconds = i < 2 ? 0 : 60;
        char error[256] = "";
        struct limit_state state;
        if (limit_definition_validate(&d, error, sizeof error) != 0 ||
            backend_put_limit(backend, &d, &state, error, sizeof error) != 0) {
            fprintf(stderr, "put %s: %s\n", d.key, error);
            return -1;
        }
    }
    return 0;
}

static void backend_reserves(const struct options *o)
{
    const struct backend_ops *ops = backend_find("tigerbeetle");
    struct backend_config config;
    backend_config_defaults(&config);
    struct tb_options options;
    tb_options_defaults(&options);
    options.addresses = o->addresses;
    options.cluster = o->cluster;
    options.sessions = o->sessions;
    struct drive d;
    memset(&d, 0, sizeof d);
    d.ops = ops;
    d.run = (uint32_t)(clock_monotonic_ms() % 1000000);
    char error[256];
    if (backend_open(ops, &config, &options, &d.backend, error, sizeof error) != 0) {
        fprintf(stderr, "open: %s\n", error);
        return;
    }
    for (int i = 0; i < 200 && !backend_ready(d.backend); i++)
        poll(NULL, 0, 50);
    struct caller *callers = calloc(o->callers, sizeof *callers);
    if (callers == NULL || put_limits(d.backend) != 0) {
        free(callers);
        backend_close(d.backend);
        return;
    }
    pthread_mutex_init(&d.mutex, NULL);
    pthread_cond_init(&d.idle, NULL);
    struct backend_stats before, after;
    struct tbc_submitter_stats sub_before, sub_after;
    backend_stats(d.backend, &before);
    tbc_submitter_stats(tb_backend_of(d.backend)->submitter, &sub_before);
    d.active = o->callers;
    int64_t started = clock_monotonic_ns();
    d.end_ms = clock_monotonic_ms() + o->seconds * 1000;
    for (uint32_t i = 0; i < o->callers; i++) {
        struct caller *c = &callers[i];
        c->drive = &d;
        for (int k = 0; k < 3; k++)
            c->requirements[k] =
                (struct requirement){keys[k], (uint32_t)strlen(keys[k]), amounts[k]};
        c->request.requirements = c->requirements;
        c->request.requirement_count = 3;
        issue(c);
    }
    pthread_mutex_lock(&d.mutex);
    while (__atomic_load_n(&d.active, __ATOMIC_ACQUIRE) > 0)
        pthread_cond_wait(&d.idle, &d.mutex);
    pthread_mutex_unlock(&d.mutex);
    double seconds = (double)(clock_monotonic_ns() - started) / 1e9;
    backend_stats(d.backend, &after);
    tbc_submitter_stats(tb_backend_of(d.backend)->submitter, &sub_after);
    uint64_t round_trips = sub_after.requests - sub_before.requests;
    double round_trip_ms = round_trips
                               ? (double)(sub_after.round_trip_us - sub_before.round_trip_us) /
                                     1000.0 / (double)round_trips
                               : 0.0;
    uint64_t batches = after.batches - before.batches;
    uint64_t items = after.batched_items - before.batched_items;
    uint64_t done = d.allowed + d.failed;
    printf("backend reserves, 3 requirements, %u callers in flight, %u sessions:\n"
           "  %" PRIu64 " reserves (%" PRIu64 " not allowed) in %.1f s = %.0f reserves/s;\n"
           "  %" PRIu64 " requests, fill %.1f items (%.1f transfers) per request, round trip "
           "%.2f ms, reserve latency %.2f ms, %" PRIu64 " retransmissions\n",
           o->callers, o->sessions, done, d.failed, seconds, (double)done / seconds, batches,
           batches ? (double)items / (double)batches : 0.0,
           batches ? 3.0 * (double)items / (double)batches : 0.0, round_trip_ms,
           done ? seconds * 1000.0 * o->callers / (double)done : 0.0,
           sub_after.retransmissions - sub_before.retransmissions);
    backend_close(d.backend);
    pthread_cond_destroy(&d.idle);
    pthread_mutex_destroy(&d.mutex);
    free(callers);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_tigerbeetle [--addresses HOST:PORT] [--cluster ID] [--seconds S]\n"
            "                         [--callers N] [--sessions N] [--batch-transfers N]\n"
            "                         [--only rtt|batch|chains|backend]\n");
}

int main(int argc, char **argv)
{
    struct options o = {BATCH_TRANSFERS, "127.0.0.1:3000", "0", 5, 200, 4};
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (value != NULL && strcmp(argv[i], "--addresses") == 0)
            o.addresses = argv[++i];
        else if (value != NULL && strcmp(argv[i], "--cluster") == 0)
            o.cluster = argv[++i];
        else if (value != NULL && strcmp(argv[i], "--seconds") == 0)
            o.seconds = atoi(argv[++i]);
        else if (value != NULL && strcmp(argv[i], "--callers") == 0)
            o.callers = (uint32_t)atoi(argv[++i]);
        else if (value != NULL && strcmp(argv[i], "--sessions") == 0)
            o.sessions = (uint32_t)atoi(argv[++i]);
        else if (value != NULL && strcmp(argv[i], "--batch-transfers") == 0)
            o.batch_transfers = (uint32_t)atoi(argv[++i]);
        else if (value != NULL && strcmp(argv[i], "--only") == 0)
            only = argv[++i];
        else {
            usage();
            return 2;
        }
    }
    if (o.seconds < 1 || o.callers < 1 || o.sessions < 1 || o.batch_transfers < 1 ||
        o.batch_transfers > BATCH_TRANSFERS) {
        usage();
        return 2;
    }
    tbc_u128 cluster;
    if (tbc_cluster_parse(o.cluster, &cluster) != 0) {
        usage();
        return 2;
    }
    if (only == NULL || strcmp(only, "rtt") == 0)
        round_trips(&o, cluster);
    if (only == NULL || strcmp(only, "batch") == 0)
        full_batches(&o, cluster, false);
    if (only == NULL || strcmp(only, "chains") == 0)
        full_batches(&o, cluster, true);
    if (only == NULL || strcmp(only, "backend") == 0)
        backend_reserves(&o);
    return 0;
}
