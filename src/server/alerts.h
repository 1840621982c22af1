/* Alerts on limits (docs/alerts.md): a scanner thread reads the usage of
 * every limit whose definition has "alerts", off the data path, fires each
 * alert once per limit, threshold and period (its id derived from the
 * three), keeps them in DATA_DIR/alerts.json (rewritten atomically like the
 * registry) and hands them to the sender (alert_send.c) until delivered. */
#ifndef LLMLIMIT_SERVER_ALERTS_H
#define LLMLIMIT_SERVER_ALERTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/limits.h"
#include "util/buffer.h"

struct registry;
struct spend;

/* Bounds (each with a test one past it or a line in docs/alerts.md). */
#define ALERTS_KEPT_MAX 1000   /* alerts remembered (alerts.json, GET /v1/alerts) */
#define ALERTS_LIMITS_MAX 1000 /* limits with alerts scanned (the first by key) */
#define ALERTS_FILE_BYTES_MAX (4 * 1024 * 1024)
#define ALERT_SECRET_BYTES_MAX 4096 /* --alert-secret-file */
#define ALERT_SCAN_MS_DEFAULT 1000  /* --alert-scan-ms */
#define ALERT_SCAN_MS_MAX 60000
#define ALERT_RETRY_MS_DEFAULT 1000         /* --alert-retry-ms: the first retry's delay */
#define ALERT_RETRY_MS_MAX 3600000          /* the delay doubles up to this */
#define ALERT_GIVE_UP_MS (24 * 3600 * 1000) /* retried this long after it fired, then failed */
#define ALERT_ID_HEX_LENGTH 64              /* hex SHA-256 */
#define ALERT_ERROR_LENGTH_MAX 127
#define ALERTS_LIST_DEFAULT 100 /* GET /v1/alerts?limit= */
#define ALERT_DAY_MS (24 * 3600 * 1000)

enum alert_type {
    ALERT_THRESHOLD = 0, /* "limit.threshold" */
    ALERT_RUNOUT = 1,    /* "budget.runout" */
};

enum alert_delivery {
    ALERT_PENDING = 0, /* not delivered yet: sent (again) at next_attempt_unix_ms */
    ALERT_SENT = 1,
    ALERT_FAILED = 2, /* not delivered within ALERT_GIVE_UP_MS */
    ALERT_UNSENT = 3, /* no webhook to send it to ("none") */
    /* Another front end on the same backend claimed it and delivers it
     * ("elsewhere"; backend_ops.claim). */
    ALERT_ELSEWHERE = 4,
};

/* One alert as fired, with its delivery state. */
struct alert {
    char id[ALERT_ID_HEX_LENGTH + 1];
    enum alert_type type;
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    enum limit_kind kind;
    uint16_t at_percent; /* threshold alerts; 0 for runout */
    uint64_t used, debt, capacity;
    int64_t period_start_unix_ms, period_end_unix_ms, at_unix_ms;
    char webhook[WEBHOOK_URL_LENGTH_MAX + 1]; /* where it goes ("": nowhere) */
    enum alert_format format;
    enum alert_delivery delivery;
    uint32_t attempts;
    int64_t next_attempt_unix_ms;
    int64_t delivered_at_unix_ms; /* sent: when; else 0 */
    char last_error[ALERT_ERROR_LENGTH_MAX + 1];
    /* This front end's to deliver: claimed in a backend front ends share
     * (tigerbeetle), or a backend no other one shares. */
    bool claimed;
    /* Not saved: */
    bool saved;     /* in alerts.json: the sender may take it */
    bool in_flight; /* the sender is sending it now */
};

struct alerts_options {
    const char *data_dir;
    const char *webhook; /* --alert-webhook, or NULL */
    enum alert_format format;
    const char *secret_file; /* --alert-secret-file, or NULL: unsigned */
    uint32_t scan_ms;
    uint32_t retry_ms;
};

struct alerts_stats {
    uint64_t fired;   /* alerts fired since the start */
    uint64_t sent;    /* delivered since the start */
    uint64_t failed;  /* given up since the start */
    uint64_t pending; /* waiting for delivery now */
    uint64_t dropped; /* fired with ALERTS_KEPT_MAX pending: not kept */
};

struct alerts;

/* Loads DATA_DIR/alerts.json (removing a stale alerts.json.tmp) and the
 * secret file. 0, or -1 with "<file>: <reason>" in error (unreadable or
 * invalid file, a webhook that is not http(s)). */
int alerts_open(const struct alerts_options *options, struct backend *backend,
                struct registry *registry, struct spend *spend, struct clock *clock,
                struct alerts **out, char *error, size_t error_size);
/* Starts the scanner and the sender threads. 0 or -1 (errno set). */
int alerts_start(struct alerts *alerts);
/* Stops both threads (a send in flight is abandoned: it stays pending) and
 * saves the file once more. A no-op when not started. */
void alerts_stop(struct alerts *alerts);
void alerts_close(struct alerts *alerts);

/* One scan at now: reads the usage of every limit with alerts, fires those
 * due, saves the file. Called by the scanner thread (and tests). */
void alerts_scan(struct alerts *alerts);

/* {"alerts":[...]}: the newest `limit` alerts, newest first. */
void alerts_encode_list(struct alerts *alerts, struct buffer *b, uint32_t limit);
void alerts_stats(struct alerts *alerts, struct alerts_stats *out);

/* The alert's id: hex SHA-256 of "<key>\n<threshold>\n<period start>"
 * where threshold is "at_percent:N" or "runout". */
void alert_id(const char *key, const struct limit_alert *threshold, int64_t period_start_unix_ms,
              char out[ALERT_ID_HEX_LENGTH + 1]);

/* The sender's view (alert_send.c). */
const char *alert_type_name(enum alert_type type);
const char *alert_delivery_name(enum alert_delivery delivery);
/* The body POSTed for an alert (its format's). */
void alert_encode_body(const struct alert *alert, struct buffer *b);

#endif
