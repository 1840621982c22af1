/* Each budget's spend over its current period, for the console's charts
 * (docs/console.md): the server's sampler reads every budget's usage into
 * bounded rings per budget, and the rate (the spend of the last
 * SPEND_RATE_WINDOW_MS) and when the budget runs out at it are computed
 * here, in integers, from those samples. History starts when the server
 * starts, on every backend. Thread-safe. */
#ifndef LLMLIMIT_SERVER_SPEND_H
#define LLMLIMIT_SERVER_SPEND_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

#define SPEND_BUDGETS_MAX 1000 /* budgets with a history: the first by key */
#define SPEND_POINTS_MAX 512   /* samples kept per budget and period, for the chart */
#define SPEND_SAMPLE_MS 5000   /* least time between two samples */
/* The spend rate is what was spent in the last 10 minutes: recent enough
 * that a budget that stopped spending stops "running out" 10 minutes
 * later, long enough to smooth single calls. */
#define SPEND_RATE_WINDOW_MS 600000
/* The latest samples at full rate, enough to reach SPEND_RATE_WINDOW_MS
 * back whatever the chart's ring thinned (each at least SPEND_SAMPLE_MS
 * after the one before: SPEND_RECENT_MAX - 1 intervals span more). */
#define SPEND_RECENT_MAX (SPEND_RATE_WINDOW_MS / SPEND_SAMPLE_MS + 2)

_Static_assert(SPEND_BUDGETS_MAX <= CONSOLE_LIMITS_PAGE_MAX, "one page samples every budget");

/* One sample: what the budget had spent (committed) and owed at at_unix_ms. */
struct spend_point {
    int64_t at_unix_ms;
    uint64_t used;
    uint64_t debt;
};

struct spend;

struct spend *spend_create(void);
void spend_destroy(struct spend *spend);

/* Notes the budgets there now (from the backend's registry, reading no
 * usage), so that a budget made once the server answers is known to start
 * from nothing; then starts the sampler: a thread that calls spend_sample
 * every SPEND_TICK_MS, so that a slow backend answer (tigerbeetle reads
 * every budget from the cluster) never delays the server's ticker. Called
 * before the server answers requests. 0, or -1 when the thread cannot
 * start. spend_stop joins it (a no-op if not started); it runs before the
 * backend closes. */
#define SPEND_TICK_MS 250
int spend_start(struct spend *spend, struct backend *backend, struct clock *clock);
void spend_stop(struct spend *spend);

/* Samples the usage of every budget (the first SPEND_BUDGETS_MAX by key)
 * when SPEND_SAMPLE_MS passed since the last sample (server clock). Called
 * by the sampler (and by tests). A budget's samples start again at a new period; budgets
 * gone from the registry are forgotten; samples later than now (the clock
 * stepped back) are dropped. While a budget has
 * SPEND_POINTS_MAX samples, every second one is dropped and the least time
 * between samples doubles, so the history covers the whole period; the
 * latest SPEND_RECENT_MAX samples are kept apart at full rate for the rate.
 * Where the server knows a budget had spent nothing (it was not there at
 * the sample before, or at the start, or its period began since), its
 * history starts with that zero. 0, or -1 when the backend could not answer
 * (nothing changed). */
int spend_sample(struct spend *spend, struct backend *backend, int64_t now_unix_ms);

/* What the server knows of one budget's spend in one period. */
struct spend_history {
    bool tracked;   /* false: no history (past the bound, or not sampled yet) */
    uint32_t count; /* points, oldest first: the chart */
    struct spend_point points[SPEND_POINTS_MAX];
    uint32_t recent_count; /* the latest samples at full rate, oldest first: the rate */
    struct spend_point recent[SPEND_RECENT_MAX];
};

/* Copies the history of `key` in the period starting at period_start_ms
 * (empty when the budget's history is of another period). */
void spend_history(struct spend *spend, const char *key, int64_t period_start_ms,
                   struct spend_history *out);

/* The spend rate and when the budget runs out at it. */
struct spend_projection {
    bool rate_known;            /* the spend SPEND_RATE_WINDOW_MS ago is known */
    uint64_t rate_window_spent; /* used + debt spent in the window */
    int64_t rate_window_ms;     /* the window: SPEND_RATE_WINDOW_MS or a little more */
    uint64_t rate_per_hour; /* rate_window_spent per hour, in the budget's unit (rounded down) */
    uint64_t projected_at_period_end; /* used + debt at the period's end at that rate */
    bool runs_out;                    /* before the period ends, at that rate */
    int64_t runs_out_at_unix_ms;      /* when available reaches 0 (now when it already has) */
};

/* From the recent samples (oldest first) and the usage now: what was spent
 * in the last SPEND_RATE_WINDOW_MS, from the newest sample at least that old
 * to now (the window is then a little longer), or, when there is none yet,
 * from a sample that had spent nothing (spend only grows in a period, so it
 * had spent nothing a window ago either: the window is exact). Unknown
 * otherwise. From that rate: what will have been spent by the period's end
 * (rounded down, saturating), and when `available` is used up (rounded up
 * to the millisecond); a budget that spent nothing in the window does not
 * run out. */
void spend_project(const struct spend_point *recent, uint32_t recent_count,
                   const struct limit_usage *now_usage, int64_t now_unix_ms,
                   struct spend_projection *out);

#endif
