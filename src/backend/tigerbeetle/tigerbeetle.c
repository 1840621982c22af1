/* The tigerbeetle backend (docs/tigerbeetle.md): limits as
 * accounts in a TigerBeetle cluster, reservations as linked chains of
 * pending transfers, sent by the microbatching submitter over a pool of
 * native sessions. Several llmlimitd can share one cluster: all state that
 * matters is in the cluster, the lease cache is only a shortcut. This file
 * holds the ops table, open/close and the maintenance thread. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/retry.h"
#include "tbclient/tbc_bounds.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_session.h"
#include "tb_backend.h"
#include "tb_console.h"
#include "tb_provision.h"
#include "tigerbeetle.h"

#define MAINTENANCE_INTERVAL_MS 100
#define MAINTENANCE_FULL_MS 1000
/* Every this many full passes, every budget's current period is checked
 * for debt another front end left (the others only when known to owe). */
#define SETTLE_SWEEP_EVERY 10
#define CLOSE_DRAIN_MS 10000
#define TICK_ADMIN_WAIT_MS 1000

/* ---- maintenance --------------------------------------------------------- */

/* The limits a pass looks at, copied out of the registry so the (slow)
 * conversations with the cluster run without the registry lock. */
static struct tb_limit **snapshot_limits(struct tb_backend *b, bool full, bool budgets,
                                         uint32_t *count)
{
    pthread_rwlock_wrlock(&b->registry_lock);
    __atomic_store_n(&b->provision_wanted, false, __ATOMIC_RELEASE);
    struct tb_limit **limits = malloc((b->limit_count + 1) * sizeof *limits);
    uint32_t n = 0;
    for (uint32_t i = 0; limits != NULL && i < TB_LIMIT_BUCKETS; i++) {
        for (struct tb_limit *limit = b->limit_buckets[i]; limit != NULL;
             limit = limit->next_in_bucket) {
            bool budget = limit->state.definition.kind == LIMIT_BUDGET;
            bool wanted = !limit->provisioned || (budgets && budget) ||
                          (full && limit->state.status == LIMIT_DECREASING);
            if (!limit->deleted && wanted)
                limits[n++] = limit;
        }
    }
    if (limits == NULL)
        __atomic_store_n(&b->provision_wanted, true, __ATOMIC_RELEASE); /* try again next time */
    assert(n <= b->limit_count);
    pthread_rwlock_unlock(&b->registry_lock);
    *count = n;
    return limits;
}

static void maintain_limit(struct tb_backend *b, struct tb_limit *limit, int64_t now_ms, bool sweep,
                           bool *changed)
{
    if (tb_provision_limit(b, limit, now_ms))
        *changed = true;
    if (tb_provision_decrease(b, limit))
        *changed = true;
    pthread_rwlock_rdlock(&b->registry_lock);
    bool budget = limit->state.definition.kind == LIMIT_BUDGET;
    int64_t owes_ms = limit->budget_owes_ms;
    int64_t period_ms = budget ? tb_limit_period_now(limit, now_ms).start_ms : 0;
    bool current = budget && tb_limit_period_ready(limit, period_ms);
    pthread_rwlock_unlock(&b->registry_lock);
    if (!budget)
        return;
    tb_provision_budget_period(b, limit, now_ms);
    if (owes_ms != INT64_MIN)
        tb_provision_settle(b, limit, owes_ms);
    else if (sweep && current)
        tb_provision_settle(b, limit, period_ms);
}

/* full: the once-a-second pass; parked: reserves wait (perhaps for a new
 * budget period's accounts); sweep: look for debt in every budget. */
static void maintain(struct tb_backend *b, bool full, bool parked, bool sweep)
{
    pthread_mutex_lock(&b->admin_lock);
    /* Every job waits for the cluster's id scheme, which comes with the
     * operator account, even where no limit needs provisioning. */
    if (parked)
        tb_provision_operator(b);
    uint32_t count = 0;
    struct tb_limit **limits = snapshot_limits(b, full, full || parked, &count);
    bool changed = false;
    int64_t now_ms = clock_now_ms(b->clock);
    for (uint32_t i = 0; limits != NULL && i < count; i++)
        maintain_limit(b, limits[i], now_ms, sweep, &changed);
    free(limits);
    /* Before the admin lock goes: a tick() waiting for it then reports the
     * change rather than finding nothing left to do. */
    if (changed)
        __atomic_store_n(&b->limits_changed, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&b->admin_lock);
}

static bool maintenance_wait(struct tb_backend *b)
{
    pthread_mutex_lock(&b->maintenance_lock);
    if (!b->stopping && b->parked == NULL) {
        struct timespec until = clock_deadline(CLOCK_REALTIME, MAINTENANCE_INTERVAL_MS * 1000);
        pthread_cond_timedwait(&b->maintenance_wake, &b->maintenance_lock, &until);
    }
    bool stop = b->stopping;
    pthread_mutex_unlock(&b->maintenance_lock);
    return !stop;
}

static void *maintenance_main(void *argument)
{
    struct tb_backend *b = argument;
    int64_t last_full_ms = 0;
    uint32_t passes = 0;
    while (maintenance_wait(b)) {
        int64_t now = clock_monotonic_ms();
        bool full = now - last_full_ms >= MAINTENANCE_FULL_MS;
        bool wanted = __atomic_load_n(&b->provision_wanted, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&b->maintenance_lock);
        bool parked = b->parked != NULL;
        pthread_mutex_unlock(&b->maintenance_lock);
        if (full || wanted || parked) {
            if (full) {
                last_full_ms = now;
                passes++;
            }
            maintain(b, full, parked, full && passes % SETTLE_SWEEP_EVERY == 0);
        }
        /* Parked reserves run again; one whose limit is still missing its
         * accounts now answers backend_error. */
        tb_jobs_unpark_all(b, false);
    }
    tb_jobs_unpark_all(b, true);
    return NULL;
}

/* ---- ops ----------------------------------------------------------------- */

static void tb_free(struct tb_backend *b);

void tb_options_defaults(struct tb_options *options)
{
    options->cluster = "0";
    options->addresses = "127.0.0.1:3000";
    options->sessions = 4;
    options->deadline_ms = TBC_ITEM_DEADLINE_MS;
}

static int check_options(const struct tb_options *options, tbc_u128 *cluster, char *error,
                         size_t error_size)
{
    if (options->sessions < 1 || options->sessions > TBC_SESSIONS_MAX)
        snprintf(error, error_size, "tb-sessions: must be 1..%d", TBC_SESSIONS_MAX);
    else if (options->deadline_ms < TBC_ITEM_DEADLINE_MS_MIN ||
             options->deadline_ms > TBC_ITEM_DEADLINE_MS_MAX)
        snprintf(error, error_size, "tb-deadline-ms: must be %d..%d", TBC_ITEM_DEADLINE_MS_MIN,
                 TBC_ITEM_DEADLINE_MS_MAX);
    else if (options->cluster == NULL || tbc_cluster_parse(options->cluster, cluster) != 0)
        snprintf(error, error_size, "tb-cluster: a decimal number below 2^128");
    else if (options->addresses == NULL)
        snprintf(error, error_size, "tb-addresses: required");
    else
        return 0;
    return -1;
}

static int tigerbeetle_open(const struct backend_config *config, const void *options_given,
                            struct backend **out, char *error, size_t error_size)
{
    struct tb_options options;
    if (options_given != NULL)
        options = *(const struct tb_options *)options_given;
    else
        tb_options_defaults(&options);
    tbc_u128 cluster;
    if (check_options(&options, &cluster, error, error_size) != 0)
        return -1;
    struct tb_backend *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    b->base.ops = &tb_backend_ops;
    b->clock = config->clock;
    b->item_deadline_ms = options.deadline_ms;
    b->lease_cache_entries = config->lease_cache_entries;
    b->lease_retention_ms = config->lease_retention_ms;
    b->concurrency_poll_ms = config->concurrency_poll_ms;
    b->decrease_retry_ms = config->decrease_retry_ms;
    b->random_state = retry_jitter_seed();
    b->operator_id = tbc_id_from_label("acct:operator", 13);
    b->finalized_id = tbc_id_from_label("acct:finalized", 14);
    pthread_rwlock_init(&b->registry_lock, NULL);
    pthread_mutex_init(&b->lease_lock, NULL);
    pthread_mutex_init(&b->job_pool_lock, NULL);
    pthread_mutex_init(&b->admin_lock, NULL);
    pthread_mutex_init(&b->maintenance_lock, NULL);
    pthread_mutex_init(&b->watch_lock, NULL);
    pthread_cond_init(&b->maintenance_wake, NULL);
    if (tb_leases_init(b) != 0) {
        snprintf(error, error_size, "out of memory");
        tb_free(b);
        return -1;
    }
    if (tbc_submitter_open(cluster, options.addresses, options.sessions, &b->submitter, error,
                           error_size) != 0) {
        tb_free(b);
        return -1;
    }
    if (pthread_create(&b->maintenance, NULL, maintenance_main, b) != 0) {
        snprintf(error, error_size, "tigerbeetle: cannot start the maintenance thread");
        tb_free(b);
        return -1;
    }
    b->maintenance_started = true;
    /* A reachable cluster registers a session within milliseconds: wait a
     * little so the backend starts ready; an unreachable one does not hold
     * start-up (it connects in the background). */
    int64_t until = clock_monotonic_ms() + TB_OPEN_READY_WAIT_MS;
    while (!tbc_submitter_ready(b->submitter) && clock_monotonic_ms() < until) {
        struct timespec pause = {0, 5 * 1000000L};
        nanosleep(&pause, NULL);
    }
    *out = &b->base;
    return 0;
}

static void tb_free(struct tb_backend *b)
{
    if (b->maintenance_started) {
        pthread_mutex_lock(&b->maintenance_lock);
        b->stopping = true;
        pthread_cond_signal(&b->maintenance_wake);
        pthread_mutex_unlock(&b->maintenance_lock);
        pthread_join(b->maintenance, NULL);
    }
    /* In-flight jobs finish on their own: every item has a deadline. */
    int64_t until = clock_monotonic_ms() + CLOSE_DRAIN_MS;
    while (__atomic_load_n(&b->jobs_in_flight, __ATOMIC_ACQUIRE) > 0 &&
           clock_monotonic_ms() < until) {
        struct timespec pause = {0, 5 * 1000000L};
        nanosleep(&pause, NULL);
    }
    if (b->submitter != NULL)
        tbc_submitter_close(b->submitter);
    assert(__atomic_load_n(&b->jobs_in_flight, __ATOMIC_ACQUIRE) == 0);
    tb_leases_free(b);
    tb_job_pool_free(b);
    tb_registry_free(b);
    pthread_cond_destroy(&b->maintenance_wake);
    pthread_mutex_destroy(&b->maintenance_lock);
    pthread_mutex_destroy(&b->watch_lock);
    pthread_mutex_destroy(&b->admin_lock);
    pthread_mutex_destroy(&b->lease_lock);
    pthread_mutex_destroy(&b->job_pool_lock);
    pthread_rwlock_destroy(&b->registry_lock);
    free(b);
}

/* The part of maintenance that changes limit states, for tick(): limits
 * without accounts yet, and pending decreases (backend.h: tick applies
 * them). Never waits for a cluster that is not there. */
static void tick_limits(struct tb_backend *b)
{
    /* The maintenance thread's pass is short while the cluster answers;
     * while it does not, tick() gives up rather than wait. */
    struct timespec until = clock_deadline(CLOCK_REALTIME, TICK_ADMIN_WAIT_MS * 1000);
    if (pthread_mutex_timedlock(&b->admin_lock, &until) != 0)
        return;
    tb_provision_patience(false);
    pthread_rwlock_rdlock(&b->registry_lock);
    uint32_t count = 0;
    struct tb_limit **limits = malloc((b->limit_count + 1) * sizeof *limits);
    for (uint32_t i = 0; limits != NULL && i < TB_LIMIT_BUCKETS; i++) {
        for (struct tb_limit *limit = b->limit_buckets[i]; limit != NULL;
             limit = limit->next_in_bucket) {
            if (!limit->deleted && (!limit->provisioned || limit->state.status == LIMIT_DECREASING))
                limits[count++] = limit;
        }
    }
    pthread_rwlock_unlock(&b->registry_lock);
    bool changed = false;
    int64_t now_ms = clock_now_ms(b->clock);
    for (uint32_t i = 0; limits != NULL && i < count; i++) {
        if (tb_provision_limit(b, limits[i], now_ms))
            changed = true;
        if (tb_provision_decrease(b, limits[i]))
            changed = true;
    }
    free(limits);
    tb_provision_patience(true);
    pthread_mutex_unlock(&b->admin_lock);
    if (changed)
        __atomic_store_n(&b->limits_changed, true, __ATOMIC_RELEASE);
}

static void tigerbeetle_close(struct backend *base)
{
    tb_free(tb_backend_of(base));
}

static int tigerbeetle_tick(struct backend *base, bool *limits_changed)
{
    struct tb_backend *b = tb_backend_of(base);
    tb_leases_expire(b, clock_now_ms(b->clock));
    tick_limits(b);
    bool changed = __atomic_exchange_n(&b->limits_changed, false, __ATOMIC_ACQ_REL);
    if (limits_changed != NULL)
        *limits_changed = changed;
    return 0;
}

/* Runs one job per request; done() once the last has answered. */
static void run_call(struct tb_backend *b, enum tb_job_kind kind, tb_job_step_fn start,
                     const void *requests, size_t request_size, void *results, size_t result_size,
                     uint32_t count, backend_done_fn done, void *context,
                     void (*unavailable)(void *result))
{
    /* One extra count, dropped below, so a job that answers at once
     * cannot finish the call while jobs are still being made. */
    struct tb_call *call = tb_call_new(b, count + 1, done, context);
    if (call == NULL) {
        for (uint32_t i = 0; i < count; i++)
            unavailable((char *)results + i * result_size);
        if (done != NULL)
            done(context);
        return;
    }
    for (uint32_t i = 0; i < count; i++) {
        const void *request = (const char *)requests + i * request_size;
        void *result = (char *)results + i * result_size;
        struct tb_job *job = tb_job_new(call, kind, start, request, result);
        if (job == NULL) {
            unavailable(result);
            __atomic_sub_fetch(&call->remaining, 1, __ATOMIC_ACQ_REL);
            continue;
        }
        tb_job_start(job);
    }
    if (__atomic_sub_fetch(&call->remaining, 1, __ATOMIC_ACQ_REL) == 0) {
        if (done != NULL)
            done(context);
        free(call);
    }
}

static void reserve_unavailable(void *result)
{
    reserve_result_unavailable(result);
}

static void complete_unavailable(void *result)
{
    struct complete_result *r = result;
    complete_result_clear(r); /* never filled before */
    complete_result_unavailable(r);
}

static void release_unavailable(void *result)
{
    release_result_unavailable(result);
}

static void tigerbeetle_reserve(struct backend *base, const struct reserve_request *requests,
                                struct reserve_result *results, uint32_t count,
                                backend_done_fn done, void *context)
{
    run_call(tb_backend_of(base), TB_JOB_RESERVE, tb_reserve_start, requests, sizeof *requests,
             results, sizeof *results, count, done, context, reserve_unavailable);
}

static void tigerbeetle_complete(struct backend *base, const struct complete_request *requests,
                                 struct complete_result *results, uint32_t count,
                                 backend_done_fn done, void *context)
{
    run_call(tb_backend_of(base), TB_JOB_COMPLETE, tb_complete_start, requests, sizeof *requests,
             results, sizeof *results, count, done, context, complete_unavailable);
}

static void tigerbeetle_release(struct backend *base, const struct release_request *requests,
                                struct release_result *results, uint32_t count,
                                backend_done_fn done, void *context)
{
    run_call(tb_backend_of(base), TB_JOB_RELEASE, tb_release_start, requests, sizeof *requests,
             results, sizeof *results, count, done, context, release_unavailable);
}

static bool tigerbeetle_ready(struct backend *base)
{
    return tbc_submitter_ready(tb_backend_of(base)->submitter);
}

static void tigerbeetle_stats(struct backend *base, struct backend_stats *out)
{
    struct tb_backend *b = tb_backend_of(base);
    memset(out, 0, sizeof *out);
    struct tbc_submitter_stats s;
    tbc_submitter_stats(b->submitter, &s);
    out->batches = s.requests;
    out->batched_items = s.items;
    const struct backend_metric own[] = {
        {"llmlimit_tigerbeetle_round_trip_microseconds_total", "counter",
         "Round trips of the requests the cluster answered, summed (mean: divide by "
         "llmlimit_backend_batches_total).",
         s.round_trip_us},
        {"llmlimit_tigerbeetle_failed_items_total", "counter",
         "Items answered unavailable: the cluster was not reached in time.", s.failed_items},
        {"llmlimit_tigerbeetle_retransmissions_total", "counter", "Requests sent again.",
         s.retransmissions},
        {"llmlimit_tigerbeetle_connections_total", "counter",
         "Connections to replicas made, the first ones included.", s.connections},
        {"llmlimit_tigerbeetle_evictions_total", "counter", "Sessions the cluster evicted.",
         s.evictions},
        {"llmlimit_tigerbeetle_registrations_total", "counter",
         "Sessions registered with the cluster, the first ones included.", s.registrations},
        {"llmlimit_tigerbeetle_sessions_ready", "gauge", "Sessions registered and usable.",
         s.sessions_ready},
        {"llmlimit_tigerbeetle_view", "gauge",
         "The highest view seen; it rises at each view change (primary = view % replicas).",
         s.view},
    };
    _Static_assert(sizeof own / sizeof own[0] <= BACKEND_OWN_METRICS_MAX, "room for them");
    out->own_count = (uint32_t)(sizeof own / sizeof own[0]);
    memcpy(out->own, own, sizeof own);
    out->overage_denied = __atomic_load_n(&b->overage_denied, __ATOMIC_RELAXED);
    pthread_mutex_lock(&b->lease_lock);
    out->lease_cache_entries = b->lease_count;
    pthread_mutex_unlock(&b->lease_lock);
    /* expired_holds: TigerBeetle expires holds itself and does not say
     * which; 0 here. */
}

static void tb_watch(struct backend *base, const struct backend_watch *watch)
{
    struct tb_backend *b = tb_backend_of(base);
    pthread_mutex_lock(&b->watch_lock);
    b->watch = *watch;
    pthread_mutex_unlock(&b->watch_lock);
}

static void options_defaults(void *options)
{
    tb_options_defaults(options);
}

/* The flags of --backend tigerbeetle (docs/configuration.md). */
static const struct flag flags[] = {
    {"--tb-cluster", "ID", FLAG_STRING, offsetof(struct tb_options, cluster), 0, 0,
     "TigerBeetle cluster id", 0, NULL},
    {"--tb-addresses", "HOST:PORT,...", FLAG_STRING, offsetof(struct tb_options, addresses), 0, 0,
     "TigerBeetle replica addresses", 0, NULL},
    {"--tb-sessions", "N", FLAG_U32, offsetof(struct tb_options, sessions), 1, TBC_SESSIONS_MAX,
     "TigerBeetle client sessions", 0, NULL},
    {"--tb-deadline-ms", "MS", FLAG_U32, offsetof(struct tb_options, deadline_ms),
     TBC_ITEM_DEADLINE_MS_MIN, TBC_ITEM_DEADLINE_MS_MAX,
     "how long an operation waits for TigerBeetle before a 503", 0, NULL},
};

_Static_assert(sizeof(struct tb_options) <= BACKEND_OPTIONS_BYTES_MAX,
               "options fit the server's room");

const struct backend_ops tb_backend_ops = {
    .name = tb_backend_name,
    .options_size = sizeof(struct tb_options),
    .options_defaults = options_defaults,
    .flags = flags,
    .flag_count = sizeof flags / sizeof flags[0],
    .budget_debt_pooled = true,
    .open = tigerbeetle_open,
    .close = tigerbeetle_close,
    .put_limit = tb_registry_put,
    .restore_limit = tb_registry_restore,
    .delete_limit = tb_registry_delete,
    .get_limit = tb_registry_get,
    .list_limits = tb_registry_list,
    .usage = tb_registry_usage,
    .usage_batch = tb_usage_batch,
    .tick = tigerbeetle_tick,
    .reserve = tigerbeetle_reserve,
    .complete = tigerbeetle_complete,
    .release = tigerbeetle_release,
    .ready = tigerbeetle_ready,
    .stats = tigerbeetle_stats,
    .events = NULL,
    .usage_by_caller = NULL,
    .limits_report = tb_console_limits_report,
    .holds_scan = NULL, /* the lease cache does not keep callers */
    .holds_seen_here_only = true,
    .watch = tb_watch,
    .claim = tb_provision_claim,
};
