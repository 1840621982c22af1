/* Budget spend history and projection for the console: one series per
 * budget (the first SPEND_BUDGETS_MAX by key), kept sorted by key so a
 * sample merges the backend's key-ordered page into it; one mutex, held
 * only while series are merged or copied (never across a backend call).
 * The rate is the spend of the last SPEND_RATE_WINDOW_MS (spend.h). */
#include "spend.h"

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/periodic.h"
#include "server_bounds.h"
#include "util/log.h"

struct spend_series {
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    int64_t period_start_ms;
    int64_t interval_ms; /* least time between two samples; doubles as the ring thins */
    uint32_t count;
    bool sampled; /* in the page of the sample being merged */
    struct spend_point points[SPEND_POINTS_MAX];
    /* The latest samples, never thinned (a ring from recent_first). */
    uint32_t recent_first;
    uint32_t recent_count;
    struct spend_point recent[SPEND_RECENT_MAX];
};

struct spend {
    struct periodic sampler;
    bool failing; /* the last sample failed (logged once) */
    struct backend *backend;
    struct clock *clock;
    /* the series */
    pthread_mutex_t mutex;
    int64_t last_sample_ms;       /* INT64_MIN: never */
    struct spend_series **series; /* sorted by key; SPEND_BUDGETS_MAX slots */
    uint32_t count;
    /* What the last sample (or the roster at start) read, at seen_at_ms, to
     * tell a budget made since (it had spent nothing then) from one it
     * could not read. */
    int64_t seen_at_ms;                      /* INT64_MIN: nothing read yet */
    bool last_more;                          /* budgets past the page */
    bool last_incomplete;                    /* a series it could not allocate */
    char last_key[LIMIT_KEY_LENGTH_MAX + 1]; /* the last budget of its page */
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
    spend->last_sample_ms = INT64_MIN;
    spend->seen_at_ms = INT64_MIN;
    return spend;
}

void spend_destroy(struct spend *spend)
{
    if (spend == NULL)
        return;
    for (uint32_t i = 0; i < spend->count; i++)
        free(spend->series[i]);
    free(spend->series);
    assert(!spend->sampler.started);
    pthread_mutex_destroy(&spend->mutex);
    free(spend);
}

/* One sample when it is due; a failure is logged when it starts and ends,
 * not at every tick. */
static void sample_and_log(void *context)
{
    struct spend *spend = context;
    bool failed = spend_sample(spend, spend->backend, clock_now_ms(spend->clock)) != 0;
    if (failed != spend->failing)
        log_write(failed ? LOG_WARN : LOG_INFO,
                  failed ? "budget spend sample failed" : "budget spend sampled again", NULL);
    spend->failing = failed;
}

static void roster(struct spend *spend, struct backend *backend, int64_t now_ms);

int spend_start(struct spend *spend, struct backend *backend, struct clock *clock)
{
    assert(!spend->sampler.started);
    spend->backend = backend;
    spend->clock = clock;
    roster(spend, backend, clock_now_ms(clock));
    return periodic_start(&spend->sampler, SPEND_TICK_MS, sample_and_log, spend);
}

void spend_stop(struct spend *spend)
{
    if (spend != NULL)
        periodic_stop(&spend->sampler);
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

static struct spend_point *recent_at(struct spend_series *series, uint32_t i)
{
    assert(i < series->recent_count);
    return &series->recent[(series->recent_first + i) % SPEND_RECENT_MAX];
}

/* Into the recent ring: the oldest goes when it is full. */
static void recent_push(struct spend_series *series, struct spend_point point)
{
    if (series->recent_count == SPEND_RECENT_MAX) {
        series->recent_first = (series->recent_first + 1) % SPEND_RECENT_MAX;
        series->recent_count--;
    }
    series->recent_count++;
    *recent_at(series, series->recent_count - 1) = point;
}

/* A history that starts from a time the budget had spent nothing: a
 * period's start, or a sample the budget was not in yet. */
static void series_restart(struct spend_series *series, int64_t period_start_ms, int64_t zero_at_ms)
{
    series->period_start_ms = period_start_ms;
    series->interval_ms = SPEND_SAMPLE_MS;
    series->count = 0;
    series->recent_first = 0;
    series->recent_count = 0;
    if (zero_at_ms == INT64_MIN)
        return;
    struct spend_point zero = {.at_unix_ms = zero_at_ms};
    series->points[series->count++] = zero;
    recent_push(series, zero);
}

/* The clock stepped back: samples taken "after" now describe a time that
 * did not happen this way; they go, so the history stays in order. */
static void series_drop_after(struct spend_series *series, int64_t now_ms)
{
    while (series->count > 0 && series->points[series->count - 1].at_unix_ms > now_ms)
        series->count--;
    while (series->recent_count > 0 &&
           recent_at(series, series->recent_count - 1)->at_unix_ms > now_ms)
        series->recent_count--;
}

static void series_add(struct spend_series *series, const struct limit_usage *usage, int64_t now_ms)
{
    if (series->period_start_ms != usage->period_start_unix_ms) {
        /* A new period starts from zero; a series sampled in an earlier
         * one saw it begin. */
        bool seen_before = series->period_start_ms != INT64_MIN;
        series_restart(series, usage->period_start_unix_ms,
                       seen_before ? usage->period_start_unix_ms : INT64_MIN);
    }
    series_drop_after(series, now_ms);
    struct spend_point point = {.at_unix_ms = now_ms, .used = usage->used, .debt = usage->debt};
    if (series->recent_count == 0 ||
        now_ms >= recent_at(series, series->recent_count - 1)->at_unix_ms + SPEND_SAMPLE_MS)
        recent_push(series, point);
    if (series->count > 0) {
        int64_t last_ms = series->points[series->count - 1].at_unix_ms;
        if (now_ms < last_ms + series->interval_ms)
            return; /* too soon */
    }
    if (series->count == SPEND_POINTS_MAX)
        series_thin(series);
    series->points[series->count++] = point;
}

/* Whether the last sample would have read `key` had it been a budget then:
 * it read every budget up to its last key, and kept them all (mutex held). */
static bool seen_by_last_sample(const struct spend *spend, const char *key)
{
    if (spend->seen_at_ms == INT64_MIN || spend->last_incomplete)
        return false;
    return !spend->last_more || strcmp(key, spend->last_key) < 0;
}

/* A new series; when the last sample did not see the budget, it had spent
 * nothing then, in this period (mutex held). NULL when out of memory. */
static struct spend_series *series_new(const struct spend *spend, const struct limit_usage *usage)
{
    struct spend_series *series = malloc(sizeof *series);
    if (series == NULL)
        return NULL;
    memset(series, 0, offsetof(struct spend_series, points));
    memcpy(series->key, usage->state.definition.key, sizeof series->key);
    int64_t zero_at_ms = INT64_MIN;
    if (seen_by_last_sample(spend, series->key)) {
        zero_at_ms = spend->seen_at_ms > usage->period_start_unix_ms ? spend->seen_at_ms
                                                                     : usage->period_start_unix_ms;
    }
    series_restart(series, usage->period_start_unix_ms, zero_at_ms);
    return series;
}

/* The budgets there at start, from the backend's registry (no usage is
 * read: nothing waits on a cluster), each with an empty series: a budget
 * first seen by a later sample was made since. On failure nothing is known
 * (no budget starts from a zero until the first sample). */
static void roster(struct spend *spend, struct backend *backend, int64_t now_ms)
{
    struct limit_name *names = NULL; /* sorted by key */
    size_t count = 0;
    if (backend_list_names(backend, &names, &count) != 0)
        return;
    pthread_mutex_lock(&spend->mutex);
    assert(spend->count == 0);
    bool incomplete = false, more = false;
    for (size_t i = 0; i < count; i++) {
        if (names[i].kind != LIMIT_BUDGET)
            continue;
        struct spend_series *series =
            spend->count < SPEND_BUDGETS_MAX ? malloc(sizeof *series) : NULL;
        if (series == NULL) {
            incomplete |= spend->count < SPEND_BUDGETS_MAX;
            more = true;
            continue;
        }
        memset(series, 0, offsetof(struct spend_series, points));
        snprintf(series->key, sizeof series->key, "%s", names[i].key);
        series->period_start_ms = INT64_MIN; /* not sampled yet */
        spend->series[spend->count++] = series;
    }
    spend->seen_at_ms = now_ms;
    spend->last_more = more;
    spend->last_incomplete = incomplete;
    const char *last = spend->count > 0 ? spend->series[spend->count - 1]->key : "";
    snprintf(spend->last_key, sizeof spend->last_key, "%s", last);
    pthread_mutex_unlock(&spend->mutex);
    limit_names_free(names, count);
}

/* Rebuilds the sorted list from the page (key order): kept series move
 * over, new budgets get a series, the others are freed (mutex held). */
static void merge(struct spend *spend, const struct limit_report *reports, size_t count, bool more,
                  int64_t now_ms)
{
    struct spend_series *next[SPEND_BUDGETS_MAX];
    uint32_t n = 0;
    bool incomplete = false;
    for (uint32_t i = 0; i < spend->count; i++)
        spend->series[i]->sampled = false;
    for (size_t i = 0; i < count && n < SPEND_BUDGETS_MAX; i++) {
        const struct limit_usage *usage = &reports[i].usage;
        assert(usage->state.definition.kind == LIMIT_BUDGET);
        struct spend_series *series = series_find(spend, usage->state.definition.key);
        if (series == NULL && (series = series_new(spend, usage)) == NULL) {
            incomplete = true; /* no history for this one until memory is back */
            continue;
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
    spend->seen_at_ms = now_ms;
    spend->last_more = more || count > n;
    spend->last_incomplete = incomplete;
    const char *last = count > 0 ? reports[count - 1].usage.state.definition.key : "";
    snprintf(spend->last_key, sizeof spend->last_key, "%s", last);
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
    merge(spend, reports, count, more, now_ms);
    spend->last_sample_ms = now_ms;
    pthread_mutex_unlock(&spend->mutex);
    free(reports);
    return 0;
}

void spend_history(struct spend *spend, const char *key, int64_t period_start_ms,
                   struct spend_history *out)
{
    out->count = 0;
    out->recent_count = 0;
    pthread_mutex_lock(&spend->mutex);
    struct spend_series *series = series_find(spend, key);
    out->tracked = series != NULL && series->period_start_ms != INT64_MIN; /* sampled */
    if (series != NULL && series->period_start_ms == period_start_ms) {
        out->count = series->count;
        memcpy(out->points, series->points, series->count * sizeof *out->points);
        out->recent_count = series->recent_count;
        for (uint32_t i = 0; i < series->recent_count; i++)
            out->recent[i] = *recent_at(series, i);
    }
    pthread_mutex_unlock(&spend->mutex);
}

static uint64_t spent(uint64_t used, uint64_t debt)
{
    return amount_add_saturating(used, debt);
}

/* What the budget had spent a window before now, and when: the newest
 * sample at least a window old, else (a window exactly) a sample that had
 * spent nothing. False when neither is there. */
static bool rate_origin(const struct spend_point *recent, uint32_t count, int64_t now_ms,
                        struct spend_point *origin)
{
    int64_t from_ms = now_ms - SPEND_RATE_WINDOW_MS;
    const struct spend_point *found = NULL;
    for (uint32_t i = 0; i < count && recent[i].at_unix_ms <= from_ms; i++)
        found = &recent[i];
    if (found != NULL) {
        *origin = *found;
        return true;
    }
    if (count > 0 && spent(recent[0].used, recent[0].debt) == 0) {
        *origin = (struct spend_point){.at_unix_ms = from_ms}; /* nothing before it either */
        return true;
    }
    return false;
}

/* available / (delta / window), exact, rounded up; false when that is not
 * before the period ends. */
static bool runs_out_in(const struct limit_usage *u, uint64_t delta, int64_t window_ms,
                        int64_t now_ms, int64_t *left_ms)
{
    assert(u->available > 0);
    assert(delta > 0);
    assert(window_ms > 0);
    unsigned __int128 left =
        ((unsigned __int128)u->available * (unsigned __int128)window_ms + delta - 1) / delta;
    if (left >= (unsigned __int128)(u->period_end_unix_ms - now_ms))
        return false;
    *left_ms = (int64_t)left;
    return true;
}

void spend_project(const struct spend_point *recent, uint32_t recent_count,
                   const struct limit_usage *now_usage, int64_t now_ms,
                   struct spend_projection *out)
{
    memset(out, 0, sizeof *out);
    struct spend_point origin;
    if (!rate_origin(recent, recent_count, now_ms, &origin))
        return;
    uint64_t now_spent = spent(now_usage->used, now_usage->debt);
    uint64_t then_spent = spent(origin.used, origin.debt);
    uint64_t delta = now_spent > then_spent ? now_spent - then_spent : 0;
    int64_t window_ms = now_ms - origin.at_unix_ms;
    assert(window_ms >= SPEND_RATE_WINDOW_MS);
    out->rate_known = true;
    out->rate_window_spent = delta;
    out->rate_window_ms = window_ms;
    unsigned __int128 rate = (unsigned __int128)delta * 3600000u / (unsigned __int128)window_ms;
    out->rate_per_hour = rate > UINT64_MAX ? UINT64_MAX : (uint64_t)rate;
    int64_t to_end_ms = now_usage->period_end_unix_ms - now_ms;
    unsigned __int128 more = to_end_ms <= 0 ? 0
                                            : (unsigned __int128)delta * (uint64_t)to_end_ms /
                                                  (unsigned __int128)window_ms;
    unsigned __int128 projected = (unsigned __int128)now_spent + more;
    out->projected_at_period_end = projected > UINT64_MAX ? UINT64_MAX : (uint64_t)projected;
    if (now_usage->available <= 0) {
        out->runs_out = true; /* it has already */
        out->runs_out_at_unix_ms = now_ms;
        return;
    }
    int64_t left_ms = 0;
    if (delta > 0 && runs_out_in(now_usage, delta, window_ms, now_ms, &left_ms)) {
        out->runs_out = true;
        out->runs_out_at_unix_ms = now_ms + left_ms;
    }
}
