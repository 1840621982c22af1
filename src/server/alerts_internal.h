/* What alerts.c and alert_send.c share: the alerts object. Nothing outside
 * those two files includes this. */
#ifndef LLMLIMIT_SERVER_ALERTS_INTERNAL_H
#define LLMLIMIT_SERVER_ALERTS_INTERNAL_H

#include <limits.h>
#include <pthread.h>

#include "alerts.h"
#include "core/periodic.h"
#include "util/sha256.h"

#define ALERT_SENDS_IN_FLIGHT_MAX 16 /* deliveries at once: a dead receiver holds one each */
#define ALERT_SEND_TIMEOUT_MS 10000
#define ALERT_SEND_CONNECT_TIMEOUT_MS 5000
#define ALERT_SEND_POLL_MS 200
/* A rolling or concurrency limit "full for a whole window" may dip below the
 * level for this long: the holds of a window free together and are taken
 * again (on tigerbeetle they expire by the second). */
#define ALERT_LEVEL_DIP_MS 1000 /* the sender looks for due alerts this often */

/* A limit with alerts, as the scanner watches it. */
struct alert_watch {
    struct limit_definition definition;
    /* Rolling and concurrency: since when each alert's level has held
     * (0: it does not now), and since when it has been below it (0: it is
     * not): a dip shorter than ALERT_LEVEL_DIP_MS does not end the stretch. */
    int64_t level_since_unix_ms[LIMIT_ALERTS_MAX];
    int64_t level_below_since_unix_ms[LIMIT_ALERTS_MAX];
};

struct alerts {
    struct backend *backend;
    struct registry *registry;
    struct spend *spend;
    struct clock *clock;
    char webhook[WEBHOOK_URL_LENGTH_MAX + 1]; /* --alert-webhook ("": none) */
    enum alert_format format;
    uint8_t secret[ALERT_SECRET_BYTES_MAX];
    size_t secret_length;
    bool signed_; /* a secret file was given */
    uint32_t scan_ms;
    uint32_t retry_ms;
    uint8_t owner[16]; /* this front end, for backend_ops.claim */
    char dir[PATH_MAX];
    char path[PATH_MAX];
    char tmp_path[PATH_MAX];

    pthread_mutex_t mutex; /* everything below */
    struct alert *kept;    /* ALERTS_KEPT_MAX, oldest first */
    uint32_t kept_count;
    bool dirty; /* kept differs from the file */
    bool write_failed;
    struct alerts_stats stats;

    /* The scanner's own (its thread only). */
    struct alert_watch *watched;
    uint32_t watched_count;
    uint64_t registry_generation; /* of watched; 0: never read */
    struct periodic scanner;
    bool scanner_started;

    /* The sender (alert_send.c). */
    void *multi; /* CURLM */
    pthread_t sender;
    bool sender_started;
    bool sender_stopping; /* under mutex */
};

/* Starts and stops the sender thread. 0 or -1. */
int alert_send_start(struct alerts *alerts);
void alert_send_stop(struct alerts *alerts);
/* Wakes the sender: new alerts were saved. */
void alert_send_wake(struct alerts *alerts);

/* alert_record.c: the kept alert with this id, or NULL (mutex held); the
 * fields of one alert as JSON members (no braces); names back to values
 * (0, or -1 for a name that is none). */
struct alert *alerts_find_locked(struct alerts *alerts, const char *id);
void alert_encode_fields(struct buffer *b, const struct alert *a);
int alert_type_parse(const char *name, enum alert_type *out);
int alert_delivery_parse(const char *name, enum alert_delivery *out);

#endif
