/* Each budget's spend over its current period, for the console's charts
 * (docs/console.md): the server's ticker samples every budget's usage into
 * a bounded ring per budget, and the projection of when the budget runs out
 * at the current rate is computed here, in integers, from those samples.
 * History starts when the server starts, on every backend. Thread-safe. */
#ifndef LLMLIMIT_SERVER_SPEND_H
#define LLMLIMIT_SERVER_SPEND_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

#define SPEND_BUDGETS_MAX 1000       /* budgets with a history: the first by key */
#define SPEND_POINTS_MAX 512         /* samples kept per budget and period */
#define SPEND_SAMPLE_MS 5000         /* least time between two samples */
#define SPEND_RATE_WINDOW_MS 3600000 /* the rate is the spend of the last hour... */
#define SPEND_RATE_SPAN_MS_MIN 60000 /* ... or of the history, once it spans a minute */

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

/* Starts the sampler: a thread that calls spend_sample every
 * SPEND_TICK_MS, so that a slow backend answer (tigerbeetle reads every
 * budget from the cluster) never delays the server's ticker. 0, or -1 when
 * the thread cannot start. spend_stop joins it (a no-op if not started); it
 * runs before the backend closes. */
#define SPEND_TICK_MS 250
int spend_start(struct spend *spend, struct backend *backend, struct clock *clock);
void spend_stop(struct spend *spend);

/* Samples the usage of every budget (the first SPEND_BUDGETS_MAX by key)
 * when SPEND_SAMPLE_MS passed since the last sample (server clock). Called
 * by the sampler (and by tests). A budget's samples start again at a new period; budgets
 * gone from the registry are forgotten; samples later than now (the clock
 * stepped back) are dropped. While a budget has
 * SPEND_POINTS_MAX samples, every second one is dropped and the least time
 * between samples doubles, so the history covers the whole period. 0, or
 * -1 when the backend could not answer (nothing changed). */
int spend_sample(struct spend *spend, struct backend *backend, int64_t now_unix_ms);

/* Copies the samples of `key` in the period starting at period_start_ms,
 * oldest first, into out (room for SPEND_POINTS_MAX); returns how many.
 * *tracked is false when the budget has no history (past the bound, or
 * not sampled yet). */
uint32_t spend_points(struct spend *spend, const char *key, int64_t period_start_ms,
                      struct spend_point *out, bool *tracked);

/* The spend rate and when the budget runs out at it. */
struct spend_projection {
    bool rate_known;        /* the samples span at least SPEND_RATE_SPAN_MS_MIN */
    uint64_t rate_per_hour; /* used + debt per hour, in the budget's unit (rounded down) */
    int64_t rate_window_ms; /* the span the rate was measured over */
    uint64_t projected_at_period_end; /* used + debt at the period's end at that rate */
    bool runs_out;                    /* before the period ends, at that rate */
    int64_t runs_out_at_unix_ms;      /* when available reaches 0 (now when it already has) */
};

/* From the samples (oldest first) and the usage now: the rate over the last
 * SPEND_RATE_WINDOW_MS (or the whole history when shorter), what will have
 * been spent by the period's end at it (rounded down, saturating), and the
 * time `available` is used up at it (rounded up to the millisecond). */
void spend_project(const struct spend_point *points, uint32_t count,
                   const struct limit_usage *now_usage, int64_t now_unix_ms,
                   struct spend_projection *out);

#endif
