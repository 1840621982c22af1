/* Budget spend history and projection for the console: one series per
 * budget (the first SPEND_BUDGETS_MAX by key), kept sorted by key so a
 * sample merges the backend's key-ordered page into it; one mutex, held
 * only while series are merged or copied (never across a backend call). */
#include "spend.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"

struct spend_series {
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    int64_t period_start_ms;
    int64_t interval_ms; /* least time between two samples; doubles as the ring thins */
    uint32_t count;
    bool sampled; /* in the page of the sample being merged */
    struct spend_point points[SPEND_POINTS_MAX];
};

struct spend {
    /* the sampler thread */
    pthread_t thread;
    bool started;
    bool stopping; /* under thread_mutex */
    bool failing;  /* the last sample failed (logged once) */
    pthread_mutex_t thread_mutex;
    pthread_cond_t thread_cond; /* CLOCK_MONOTONIC */
    struct backend *backend;
    struct clock *clock;
    /* the series */
    pthread_mutex_t mutex;
    int64_t last_sample_ms;       /* INT64_MIN: never */
    struct spend_series **series; /* sorted by key; SPEND_BUDGETS_MAX slots */
    uint32_t count;
};

struct spend *spend_create(void)
{
    struct spend *spend = calloc(1, sizeof *spend);
    if (spend == NULL)
        return NULL;
    spend->series = calloc(SPEND_BUDGETS_MAX, sizeof *spend->series);
    if (spend->series == NULL) {
        free(spend);
        return NULL;
    }
    pthread_mutex_init(&spend->mutex, NULL);
    pthread_mutex_init(&spend->thread_mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&spend->thread_cond, &attr);
    pthread_condattr_destroy(&attr);
    spend->last_sample_ms = INT64_MIN;
    return spend;
}

void spend_destroy(struct spend *spend)
{
    if (spend == NULL)
        return;
    for (uint32_t i = 0; i < spend->count; i++)
        free(spend->series[i]);
    free(spend->series);
    assert(!spend->started);
    pthread_mutex_destroy(&spend->mutex);
    pthread_mutex_destroy(&spend->thread_mutex);
    pthread_cond_destroy(&spend->thread_cond);
    free(spend);
}

/* One sample when it is due; a failure is logged when it starts and ends,
 * not at every tick. */
static void sample_and_log(struct spend *spend)
{
    bool failed = spend_sample(spend, spend->backend, clock_now_ms(spend->clock)) != 0;
    if (failed != spend->failing)
        log_write(failed ? LOG_WARN : LOG_INFO,
                  failed ? "budget spend sample failed" : "budget spend sampled again", NULL);
    spend->failing = failed;
}

static void *sampler_main(void *context)
{
    struct spend *spend = context;
    pthread_mutex_lock(&spend->thread_mutex);
    while (!spend->stopping) {
        struct timespec deadline = clock_deadline(CLOCK_MONOTONIC, SPEND_TICK_MS * 1000);
        pthread_cond_timedwait(&spend->thread_cond, &spend->thread_mutex, &deadline);
        if (spend->stopping)
            break;
        pthread_mutex_unlock(&spend->thread_mutex);
        sample_and_log(spend);
        pthread_mutex_lock(&spend->thread_mutex);
    }
    pthread_mutex_unlock(&spend->thread_mutex);
    return NULL;
}

int spend_start(struct spend *spend, struct backend *backend, struct clock *clock)
{
    assert(!spend->started);
    spend->backend = backend;
    spend->clock = clock;
    if (pthread_create(&spend->thread, NULL, sampler_main, spend) != 0)
        return -1;
    spend->started = true;
    return 0;
}

void spend_stop(struct spend *spend)
{
    if (spend == NULL || !spend->started)
        return;
    pthread_mutex_lock(&spend->thread_mutex);
    spend->stopping = true;
    pthread_cond_signal(&spend->thread_cond);
    pthread_mutex_unlock(&spend->thread_mutex);
    pthread_join(spend->thread, NULL);
    spend->started = false;
}

/* The series of key, or NULL (mutex held). */
static struct spend_series *series_find(const struct spend *spend, const char *key)
{
    uint32_t low = 0, high = spend->count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        int c = strcmp(spend->series[middle]->key, key);
        if (c == 0)
            return spend->series[middle];
        if (c < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return NULL;
}

/* Keeps every second sample (the first and the newest stay) and doubles
 * the interval. */
static void series_thin(struct spend_series *series)
{
    assert(series->count == SPEND_POINTS_MAX);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < series->count; i += 2)
        series->points[kept++] = series->points[i];
    series->points[kept - 1] = series->points[series->count - 1];
    series->count = kept;
    series->interval_ms *= 2;
}

static void series_add(struct spend_series *series, const struct limit_usage *usage, int64_t now_ms)
{
    if (series->period_start_ms != usage->period_start_unix_ms) {
        series->period_start_ms = usage->period_start_unix_ms; /* a new period: from zero */
        series->interval_ms = SPEND_SAMPLE_MS;
        series->count = 0;
    }
    /* The clock stepped back: samples taken "after" now describe a time
     * that did not happen this way; they go, so the history stays in order. */
    while (series->count > 0 && series->points[series->count - 1].at_unix_ms > now_ms)
        series->count--;
    if (series->count > 0) {
        int64_t last_ms = series->points[series->count - 1].at_unix_ms;
        if (now_ms < last_ms + series->interval_ms)
            return; /* too soon */
    }
    if (series->count == SPEND_POINTS_MAX)
        series_thin(series);
    series->points[series->count++] =
        (struct spend_point){.at_unix_ms = now_ms, .used = usage->used, .debt = usage->debt};
}

/* Rebuilds the sorted list from the page (key order): kept series move
 * over, new budgets get a series, the others are freed (mutex held). */
static void merge(struct spend *spend, const struct limit_report *reports, size_t count,
                  int64_t now_ms)
{
    struct spend_series *next[SPEND_BUDGETS_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < spend->count; i++)
        spend->series[i]->sampled = false;
    for (size_t i = 0; i < count && n < SPEND_BUDGETS_MAX; i++) {
        const struct limit_usage *usage = &reports[i].usage;
        assert(usage->state.definition.kind == LIMIT_BUDGET);
        struct spend_series *series = series_find(spend, usage->state.definition.key);
        if (series == NULL) {
            series = calloc(1, sizeof *series);
            if (series == NULL)
                continue; /* no history for this one until memory is back */
            memcpy(series->key, usage->state.definition.key, sizeof series->key);
            series->period_start_ms = INT64_MIN;
        }
        series_add(series, usage, now_ms);
        series->sampled = true;
        next[n++] = series;
    }
    /* Series that are not in the page any more (deleted) are freed. */
    for (uint32_t i = 0; i < spend->count; i++) {
        if (!spend->series[i]->sampled)
            free(spend->series[i]);
    }
    memcpy(spend->series, next, n * sizeof *next);
    spend->count = n;
}

int spend_sample(struct spend *spend, struct backend *backend, int64_t now_ms)
{
    pthread_mutex_lock(&spend->mutex);
    int64_t last_ms = spend->last_sample_ms;
    pthread_mutex_unlock(&spend->mutex);
    if (last_ms != INT64_MIN && now_ms >= last_ms && now_ms - last_ms < SPEND_SAMPLE_MS)
        return 0;
    struct limits_query query = {.prefix = "",
                                 .after = "",
                                 .kind = LIMIT_BUDGET,
                                 .limit = SPEND_BUDGETS_MAX,
                                 .soon_ms = CONSOLE_HOLDS_SOON_MS};
    struct limit_report *reports = NULL;
    size_t count = 0;
    bool more = false;
    if (backend->ops->limits_report(backend, &query, &reports, &count, &more) != 0)
        return -1;
    pthread_mutex_lock(&spend->mutex);
    merge(spend, reports, count, now_ms);
    spend->last_sample_ms = now_ms;
    pthread_mutex_unlock(&spend->mutex);
    free(reports);
    return 0;
}

uint32_t spend_points(struct spend *spend, const char *key, int64_t period_start_ms,
                      struct spend_point *out, bool *tracked)
{
    uint32_t count = 0;
    pthread_mutex_lock(&spend->mutex);
    const struct spend_series *series = series_find(spend, key);
    *tracked = series != NULL;
    if (series != NULL && series->period_start_ms == period_start_ms) {
        count = series->count;
        memcpy(out, series->points, count * sizeof *out);
    }
    pthread_mutex_unlock(&spend->mutex);
    return count;
}

static uint64_t spent(uint64_t used, uint64_t debt)
{
    return amount_add_saturating(used, debt);
}

/* The sample the rate is measured from: the newest at least a window old,
 * else the oldest. NULL when there is none before now. */
static const struct spend_point *rate_origin(const struct spend_point *points, uint32_t count,
                                             int64_t now_ms)
{
    const struct spend_point *origin = NULL;
    for (uint32_t i = 0; i < count && points[i].at_unix_ms < now_ms; i++) {
        if (origin == NULL || points[i].at_unix_ms <= now_ms - SPEND_RATE_WINDOW_MS)
            origin = &points[i];
    }
    return origin;
}

void spend_project(const struct spend_point *points, uint32_t count,
                   const struct limit_usage *now_usage, int64_t now_ms,
                   struct spend_projection *out)
{
    memset(out, 0, sizeof *out);
    const struct spend_point *origin = rate_origin(points, count, now_ms);
    if (origin == NULL || now_ms - origin->at_unix_ms < SPEND_RATE_SPAN_MS_MIN)
        return;
    uint64_t now_spent = spent(now_usage->used, now_usage->debt);
    uint64_t then_spent = spent(origin->used, origin->debt);
    uint64_t delta = now_spent > then_spent ? now_spent - then_spent : 0;
    out->rate_known = true;
    out->rate_window_ms = now_ms - origin->at_unix_ms;
    unsigned __int128 rate =
        (unsigned __int128)delta * 3600000u / (unsigned __int128)out->rate_window_ms;
    out->rate_per_hour = rate > UINT64_MAX ? UINT64_MAX : (uint64_t)rate;
    int64_t to_end_ms = now_usage->period_end_unix_ms - now_ms;
    unsigned __int128 more = to_end_ms <= 0 ? 0
                                            : (unsigned __int128)delta * (uint64_t)to_end_ms /
                                                  (unsigned __int128)out->rate_window_ms;
    unsigned __int128 projected = (unsigned __int128)now_spent + more;
    out->projected_at_period_end = projected > UINT64_MAX ? UINT64_MAX : (uint64_t)projected;
    if (now_usage->available <= 0) {
        out->runs_out = true; /* it has already */
        out->runs_out_at_unix_ms = now_ms;
        return;
    }
    if (delta == 0)
        return;
    /* available / (delta / window): exact, rounded up. */
    unsigned __int128 left_ms =
        ((unsigned __int128)now_usage->available * (unsigned __int128)out->rate_window_ms + delta -
         1) /
        delta;
    if (left_ms >= (unsigned __int128)(now_usage->period_end_unix_ms - now_ms))
        return; /* not before the period ends */
    out->runs_out = true;
    out->runs_out_at_unix_ms = now_ms + (int64_t)left_ms;
}
