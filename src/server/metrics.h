/* Prometheus metrics of llmlimitd (docs/api.md "GET /metrics"): request
 * counts and latency histograms per route (lock-free counters), reserve
 * denials per key (bounded label set), and, at scrape time, per-limit gauges
 * and backend statistics. */
#ifndef LLMLIMIT_SERVER_METRICS_H
#define LLMLIMIT_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "util/buffer.h"
#include "router.h"

struct metrics;

/* Returns a new metrics object counting the router's routes, or NULL (out
 * of memory); free with metrics_destroy. */
struct metrics *metrics_create(const struct router *router);
void metrics_destroy(struct metrics *metrics);

/* One answered request. Thread-safe, lock-free. */
/* route: the route's router_index. */
void metrics_request(struct metrics *metrics, uint32_t route, unsigned status, int64_t duration_ns);
/* One denied key of a reserve. The first METRICS_DENIAL_KEYS_MAX distinct
 * keys get their own label, the rest count under key="other". */
void metrics_denial(struct metrics *metrics, const char *key, size_t key_length);

/* One answer of a reserve that asked to wait: its outcome (enum
 * reserve_wait_outcome) and how long it waited. */
void metrics_wait(struct metrics *metrics, uint8_t outcome, int64_t waited_ms);

/* The per-limit part of a scrape: the first METRICS_LIMITS_MAX limits by
 * key and their usage, read in one backend_usage_batch call that the
 * caller does not wait for (a cluster may take its deadline to answer). */
struct metrics_scrape;

/* The limits now, with a usage request each at now_unix_ms; NULL when out
 * of memory. A backend that cannot list its limits gives a scrape of none
 * (no per-limit series). Free with metrics_scrape_free. */
struct metrics_scrape *metrics_scrape_new(struct backend *backend, int64_t now_unix_ms);
void metrics_scrape_free(struct metrics_scrape *scrape);
/* Starts reading the usage; done(context) runs once it is in, maybe
 * before this returns, else on a backend thread. */
void metrics_scrape_read(struct metrics_scrape *scrape, struct backend *backend,
                         backend_done_fn done, void *context);

/* The text exposition format, version 0.0.4, once the scrape's usage is
 * in. A limit whose usage the backend could not read is left out of the
 * per-limit gauges, and llmlimit_usage_unread_limits counts them
 * (docs/api.md "GET /metrics"). */
void metrics_render(struct metrics *metrics, const struct metrics_scrape *scrape,
                    struct backend *backend, struct buffer *out);

/* Unlabelled series, each with its HELP and TYPE lines, for figures kept
 * outside this module (the HTTP server's). */
struct metric_row {
    const char *name, *type, *help;
    uint64_t value;
};
void metrics_render_rows(struct buffer *out, const struct metric_row *rows, size_t count);

#endif
