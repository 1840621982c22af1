/* Counters are plain uint64_t updated with relaxed atomic adds: a scrape may
 * see one request counted in requests_total a moment before its histogram,
 * which Prometheus tolerates, and the data path never takes a lock. */
#include "metrics.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The statuses llmlimitd answers; 429, 502 and 504 come from the gateway's routes. */
static const unsigned statuses[] = {200, 400, 401, 404, 405, 409, 413, 429, 500, 502, 503, 504};
#define STATUS_COUNT (sizeof statuses / sizeof statuses[0])
#define STATUS_OTHER STATUS_COUNT /* index of any other status */

/* Upper bounds of the latency buckets, in nanoseconds and as labels. */
static const int64_t bucket_ns[] = {100000,  250000,   500000,   1000000,   2500000,
                                    5000000, 10000000, 25000000, 100000000, 1000000000};
static const char *const bucket_labels[] = {"0.0001", "0.00025", "0.0005", "0.001", "0.0025",
                                            "0.005",  "0.01",    "0.025",  "0.1",   "1"};
#define BUCKET_COUNT (sizeof bucket_ns / sizeof bucket_ns[0])
_Static_assert(sizeof bucket_labels / sizeof bucket_labels[0] == BUCKET_COUNT,
               "one label per bucket");

struct histogram {
    uint64_t buckets[BUCKET_COUNT + 1]; /* not cumulative; the last is +Inf */
    uint64_t sum_ns;
};

/* Open addressing, twice the bound, so probes stay short. */
#define DENIAL_SLOTS (2 * METRICS_DENIAL_KEYS_MAX)

struct denial_slot {
    char *key; /* NULL: empty */
    uint64_t count;
};

/* Wait times (docs/api.md, "Waiting for capacity"), upper bounds in ms. */
static const int64_t wait_bucket_ms[] = {1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 30000, 60000};
static const char *const wait_bucket_labels[] = {"0.001", "0.005", "0.01", "0.05", "0.1", "0.5",
                                                 "1",     "5",     "10",   "30",   "60"};
#define WAIT_BUCKET_COUNT (sizeof wait_bucket_ms / sizeof wait_bucket_ms[0])
_Static_assert(sizeof wait_bucket_labels / sizeof wait_bucket_labels[0] == WAIT_BUCKET_COUNT,
               "one label per wait bucket");
#define WAIT_OUTCOMES (RESERVE_WAIT_FAILED + 1)
static const char *const wait_outcome_names[WAIT_OUTCOMES] = {
    "at_once", "admitted", "deadline", "cancelled", "full", "closed", "failed"};

struct metrics {
    const struct router *router;                  /* the routes counted, by their index */
    uint64_t wait_buckets[WAIT_BUCKET_COUNT + 1]; /* not cumulative; the last is +Inf */
    uint64_t wait_sum_ms;
    uint64_t wait_outcomes[WAIT_OUTCOMES];
    uint64_t requests[ROUTES_MAX][STATUS_COUNT + 1];
    struct histogram durations[ROUTES_MAX];
    pthread_mutex_t denial_mutex;
    struct denial_slot denials[DENIAL_SLOTS];
    size_t denial_keys;
    uint64_t denial_other;
};

struct metrics *metrics_create(const struct router *router)
{
    assert(router->count <= ROUTES_MAX);
    struct metrics *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->router = router;
    pthread_mutex_init(&m->denial_mutex, NULL);
    /* Half the slots at most: probing always finds an empty one. */
    _Static_assert(METRICS_DENIAL_KEYS_MAX * 2 <= DENIAL_SLOTS, "denial table half empty");
    return m;
}

void metrics_destroy(struct metrics *metrics)
{
    if (metrics == NULL)
        return;
    for (size_t i = 0; i < DENIAL_SLOTS; i++)
        free(metrics->denials[i].key);
    pthread_mutex_destroy(&metrics->denial_mutex);
    free(metrics);
}

static size_t status_index(unsigned status)
{
    for (size_t i = 0; i < STATUS_COUNT; i++) {
        if (statuses[i] == status)
            return i;
    }
    return STATUS_OTHER;
}

void metrics_request(struct metrics *metrics, uint32_t route, unsigned status, int64_t duration_ns)
{
    assert(route < metrics->router->count);
    size_t status_slot = status_index(status);
    assert(status_slot <= STATUS_OTHER);
    __atomic_fetch_add(&metrics->requests[route][status_slot], 1, __ATOMIC_RELAXED);
    size_t bucket = 0;
    while (bucket < BUCKET_COUNT && duration_ns > bucket_ns[bucket])
        bucket++;
    assert(bucket <= BUCKET_COUNT);
    struct histogram *h = &metrics->durations[route];
    __atomic_fetch_add(&h->buckets[bucket], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->sum_ns, (uint64_t)(duration_ns > 0 ? duration_ns : 0), __ATOMIC_RELAXED);
}

static void header(struct buffer *out, const char *name, const char *type, const char *help);

void metrics_wait(struct metrics *metrics, uint8_t outcome, int64_t waited_ms)
{
    assert(outcome < WAIT_OUTCOMES);
    assert(waited_ms >= 0);
    __atomic_fetch_add(&metrics->wait_outcomes[outcome], 1, __ATOMIC_RELAXED);
    size_t bucket = 0;
    while (bucket < WAIT_BUCKET_COUNT && waited_ms > wait_bucket_ms[bucket])
        bucket++;
    __atomic_fetch_add(&metrics->wait_buckets[bucket], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&metrics->wait_sum_ms, (uint64_t)waited_ms, __ATOMIC_RELAXED);
}

/* The answers of reserves that asked to wait: by outcome, and how long. */
static void render_waits(struct metrics *m, struct buffer *out)
{
    header(out, "llmlimit_wait_outcomes_total", "counter",
           "Answers of reserves that asked to wait (wait_ms), by outcome.");
    for (size_t i = 0; i < WAIT_OUTCOMES; i++) {
        buffer_printf(out, "llmlimit_wait_outcomes_total{outcome=\"%s\"} ", wait_outcome_names[i]);
        buffer_append_u64(out, __atomic_load_n(&m->wait_outcomes[i], __ATOMIC_RELAXED));
        buffer_append_char(out, '\n');
    }
    header(out, "llmlimit_wait_seconds", "histogram",
           "How long reserves that asked to wait waited before their answer.");
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= WAIT_BUCKET_COUNT; b++) {
        cumulative += __atomic_load_n(&m->wait_buckets[b], __ATOMIC_RELAXED);
        buffer_printf(out, "llmlimit_wait_seconds_bucket{le=\"%s\"} ",
                      b < WAIT_BUCKET_COUNT ? wait_bucket_labels[b] : "+Inf");
        buffer_append_u64(out, cumulative);
        buffer_append_char(out, '\n');
    }
    uint64_t sum_ms = __atomic_load_n(&m->wait_sum_ms, __ATOMIC_RELAXED);
    buffer_printf(out, "llmlimit_wait_seconds_sum %.3f\n", (double)sum_ms / 1e3);
    buffer_append_str(out, "llmlimit_wait_seconds_count ");
    buffer_append_u64(out, cumulative);
    buffer_append_char(out, '\n');
}

static uint64_t key_hash(const char *key, size_t length)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < length; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211u;
    }
    return h;
}

void metrics_denial(struct metrics *metrics, const char *key, size_t key_length)
{
    assert(key != NULL);
    assert(key_length >= 1);
    assert(key_length <= LIMIT_KEY_LENGTH_MAX);
    pthread_mutex_lock(&metrics->denial_mutex);
    assert(metrics->denial_keys <= METRICS_DENIAL_KEYS_MAX);
    size_t slot = (size_t)(key_hash(key, key_length) % DENIAL_SLOTS);
    /* At most half the slots are ever used, so an empty slot is always found. */
    for (size_t probes = 0;; probes++) {
        assert(probes < DENIAL_SLOTS);
        struct denial_slot *s = &metrics->denials[slot];
        if (s->key == NULL) {
            char *copy =
                metrics->denial_keys < METRICS_DENIAL_KEYS_MAX ? strndup(key, key_length) : NULL;
            if (copy == NULL) {
                metrics->denial_other++;
            } else {
                s->key = copy;
                s->count = 1;
                metrics->denial_keys++;
            }
            break;
        }
        if (strlen(s->key) == key_length && memcmp(s->key, key, key_length) == 0) {
            s->count++;
            break;
        }
        slot = (slot + 1) % DENIAL_SLOTS;
    }
    pthread_mutex_unlock(&metrics->denial_mutex);
}

static void label_value(struct buffer *out, const char *value)
{
    buffer_append_char(out, '"');
    for (const char *c = value; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            buffer_append_char(out, '\\');
        if (*c == '\n') {
            buffer_append_str(out, "\\n");
            continue;
        }
        buffer_append_char(out, *c);
    }
    buffer_append_char(out, '"');
}

static void header(struct buffer *out, const char *name, const char *type, const char *help)
{
    buffer_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_requests(struct metrics *m, struct buffer *out)
{
    header(out, "llmlimit_requests_total", "counter",
           "HTTP requests answered, by route and status.");
    for (uint32_t r = 0; r < m->router->count; r++) {
        const char *name = m->router->routes[r].name;
        for (size_t s = 0; s <= STATUS_COUNT; s++) {
            uint64_t n = __atomic_load_n(&m->requests[r][s], __ATOMIC_RELAXED);
            if (n == 0)
                continue;
            buffer_printf(out, "llmlimit_requests_total{route=\"%s\",status=\"", name);
            if (s == STATUS_OTHER)
                buffer_append_str(out, "other");
            else
                buffer_append_u64(out, statuses[s]);
            buffer_append_str(out, "\"} ");
            buffer_append_u64(out, n);
            buffer_append_char(out, '\n');
        }
    }
}

static void render_durations(struct metrics *m, struct buffer *out)
{
    header(out, "llmlimit_request_duration_seconds", "histogram",
           "Time from the request line to the answer, by route.");
    for (uint32_t r = 0; r < m->router->count; r++) {
        const char *name = m->router->routes[r].name;
        struct histogram *h = &m->durations[r];
        uint64_t counts[BUCKET_COUNT + 1], total = 0;
        for (size_t b = 0; b <= BUCKET_COUNT; b++) {
            counts[b] = __atomic_load_n(&h->buckets[b], __ATOMIC_RELAXED);
            total += counts[b];
        }
        if (total == 0)
            continue;
        uint64_t cumulative = 0;
        for (size_t b = 0; b <= BUCKET_COUNT; b++) {
            cumulative += counts[b];
            buffer_printf(out, "llmlimit_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} ",
                          name, b < BUCKET_COUNT ? bucket_labels[b] : "+Inf");
            buffer_append_u64(out, cumulative);
            buffer_append_char(out, '\n');
        }
        assert(cumulative == total); /* the +Inf bucket counts every request */
        uint64_t sum_ns = __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
        buffer_printf(out, "llmlimit_request_duration_seconds_sum{route=\"%s\"} %.9f\n", name,
                      (double)sum_ns / 1e9);
        buffer_printf(out, "llmlimit_request_duration_seconds_count{route=\"%s\"} ", name);
        buffer_append_u64(out, total);
        buffer_append_char(out, '\n');
    }
}

static void render_denials(struct metrics *m, struct buffer *out)
{
    header(out, "llmlimit_reserve_denials_total", "counter",
           "Keys named in denied reserves (first 1000 keys, then key=\"other\").");
    pthread_mutex_lock(&m->denial_mutex);
    for (size_t i = 0; i < DENIAL_SLOTS; i++) {
        if (m->denials[i].key == NULL)
            continue;
        buffer_append_str(out, "llmlimit_reserve_denials_total{key=");
        label_value(out, m->denials[i].key);
        buffer_append_str(out, "} ");
        buffer_append_u64(out, m->denials[i].count);
        buffer_append_char(out, '\n');
    }
    if (m->denial_other > 0) {
        buffer_append_str(out, "llmlimit_reserve_denials_total{key=\"other\"} ");
        buffer_append_u64(out, m->denial_other);
        buffer_append_char(out, '\n');
    }
    pthread_mutex_unlock(&m->denial_mutex);
}

static const char *const gauge_names[] = {"llmlimit_limit_capacity", "llmlimit_limit_reserved",
                                          "llmlimit_limit_used", "llmlimit_limit_debt",
                                          "llmlimit_limit_available"};
static const char *const gauge_help[] = {
    "Capacity in force, in the limit's unit.", "Held by leases not yet completed.",
    "Held by completed leases (rolling: in window; budget: committed this period).",
    "Overage recorded this window or period.", "Capacity minus reserved, used (and debt)."};
#define GAUGE_COUNT 5
_Static_assert(sizeof gauge_names / sizeof gauge_names[0] == GAUGE_COUNT, "a name per gauge");
_Static_assert(sizeof gauge_help / sizeof gauge_help[0] == GAUGE_COUNT, "a help per gauge");

static int64_t gauge_value(const struct limit_usage *u, int gauge)
{
    assert(gauge >= 0);
    assert(gauge < GAUGE_COUNT);
    switch (gauge) {
    case 0:
        return (int64_t)u->state.definition.capacity;
    case 1:
        return (int64_t)u->reserved;
    case 2:
        return (int64_t)u->used;
    case 3:
        return (int64_t)u->debt;
    default:
        return u->available;
    }
}

struct metrics_scrape {
    bool listed; /* false: the backend could not list its limits */
    uint32_t count;
    struct limit_state *states; /* the limits, by key (backend_list_limits) */
    struct usage_request *requests;
    struct usage_result *results;
};

_Static_assert(METRICS_LIMITS_MAX <= USAGE_BATCH_MAX, "one usage_batch reads a scrape");

struct metrics_scrape *metrics_scrape_new(struct backend *backend, int64_t now_unix_ms)
{
    struct metrics_scrape *scrape = calloc(1, sizeof *scrape);
    if (scrape == NULL)
        return NULL;
    size_t count = 0;
    scrape->listed = backend_list_limits(backend, &scrape->states, &count) == 0;
    if (!scrape->listed)
        return scrape;
    assert(scrape->states != NULL || count == 0);
    scrape->count = (uint32_t)(count < METRICS_LIMITS_MAX ? count : METRICS_LIMITS_MAX);
    scrape->requests = malloc((scrape->count + 1) * sizeof *scrape->requests);
    scrape->results = malloc((scrape->count + 1) * sizeof *scrape->results);
    if (scrape->requests == NULL || scrape->results == NULL) {
        metrics_scrape_free(scrape);
        return NULL;
    }
    for (uint32_t i = 0; i < scrape->count; i++)
        scrape->requests[i] = (struct usage_request){scrape->states[i].definition.key, now_unix_ms};
    return scrape;
}

void metrics_scrape_free(struct metrics_scrape *scrape)
{
    if (scrape == NULL)
        return;
    free(scrape->states);
    free(scrape->requests);
    free(scrape->results);
    free(scrape);
}

void metrics_scrape_read(struct metrics_scrape *scrape, struct backend *backend,
                         backend_done_fn done, void *context)
{
    backend_usage_batch(backend, scrape->requests, scrape->results, scrape->count, done, context);
}

/* Limits whose usage the backend did not answer (a deleted one is gone, not unread). */
static uint64_t scrape_unread(const struct metrics_scrape *scrape)
{
    uint64_t unread = 0;
    for (uint32_t i = 0; i < scrape->count; i++)
        unread += scrape->results[i].result == BACKEND_ADMIN_UNAVAILABLE;
    return unread;
}

static void render_limits(const struct metrics_scrape *scrape, struct buffer *out)
{
    if (!scrape->listed)
        return;
    for (int g = 0; g < GAUGE_COUNT; g++) {
        header(out, gauge_names[g], "gauge", gauge_help[g]);
        for (uint32_t i = 0; i < scrape->count; i++) {
            const struct usage_result *result = &scrape->results[i];
            if (result->result != BACKEND_ADMIN_OK)
                continue;
            buffer_append_str(out, gauge_names[g]);
            buffer_append_str(out, "{key=");
            label_value(out, scrape->states[i].definition.key);
            buffer_append_str(out, "} ");
            buffer_append_i64(out, gauge_value(&result->usage, g));
            buffer_append_char(out, '\n');
        }
    }
}

void metrics_render_rows(struct buffer *out, const struct metric_row *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        header(out, rows[i].name, rows[i].type, rows[i].help);
        buffer_append_str(out, rows[i].name);
        buffer_append_char(out, ' ');
        buffer_append_u64(out, rows[i].value);
        buffer_append_char(out, '\n');
    }
}

static void render_backend(struct backend *backend, const struct metrics_scrape *scrape,
                           struct buffer *out)
{
    struct backend_stats stats;
    memset(&stats, 0, sizeof stats);
    backend_stats(backend, &stats);
    const struct metric_row rows[] = {
        {"llmlimit_backend_batches_total", "counter", "Backend transactions or requests sent.",
         stats.batches},
        {"llmlimit_backend_batched_items_total", "counter",
         "Items in them (fill = items / batches).", stats.batched_items},
        {"llmlimit_lease_cache_entries", "gauge", "Leases held in the lease cache.",
         stats.lease_cache_entries},
        {"llmlimit_overage_denied_total", "counter", "Rolling overage dropped under overage=deny.",
         stats.overage_denied},
        {"llmlimit_expired_holds_total", "counter",
         "Holds that expired without complete or release.", stats.expired_holds},
    };
    metrics_render_rows(out, rows, sizeof rows / sizeof rows[0]);
    const struct metric_row unread[] = {
        {"llmlimit_usage_unread_limits", "gauge",
         "Limits left out of this scrape's llmlimit_limit_* gauges: the backend did not answer "
         "their usage in time.",
         scrape_unread(scrape)},
    };
    metrics_render_rows(out, unread, 1);
    if (!stats.cluster)
        return;
    const struct metric_row cluster_rows[] = {
        {"llmlimit_tigerbeetle_round_trip_microseconds_total", "counter",
         "Round trips of the requests the cluster answered, summed (mean: divide by "
         "llmlimit_backend_batches_total).",
         stats.cluster_round_trip_us},
        {"llmlimit_tigerbeetle_failed_items_total", "counter",
         "Items answered unavailable: the cluster was not reached in time.",
         stats.cluster_failed_items},
        {"llmlimit_tigerbeetle_retransmissions_total", "counter", "Requests sent again.",
         stats.cluster_retransmissions},
        {"llmlimit_tigerbeetle_connections_total", "counter",
         "Connections to replicas made, the first ones included.", stats.cluster_connections},
        {"llmlimit_tigerbeetle_evictions_total", "counter", "Sessions the cluster evicted.",
         stats.cluster_evictions},
        {"llmlimit_tigerbeetle_registrations_total", "counter",
         "Sessions registered with the cluster, the first ones included.",
         stats.cluster_registrations},
        {"llmlimit_tigerbeetle_sessions_ready", "gauge", "Sessions registered and usable.",
         stats.cluster_sessions_ready},
        {"llmlimit_tigerbeetle_view", "gauge",
         "The highest view seen; it rises at each view change (primary = view % replicas).",
         stats.cluster_view},
    };
    metrics_render_rows(out, cluster_rows, sizeof cluster_rows / sizeof cluster_rows[0]);
}

void metrics_render(struct metrics *metrics, const struct metrics_scrape *scrape,
                    struct backend *backend, struct buffer *out)
{
    render_requests(metrics, out);
    render_durations(metrics, out);
    render_denials(metrics, out);
    render_waits(metrics, out);
    render_limits(scrape, out);
    render_backend(backend, scrape, out);
}
