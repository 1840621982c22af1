/* llmlimitd's configuration: every flag and environment variable, its
 * default, and the parser (docs/configuration.md). */
#ifndef LLMLIMIT_SERVER_CONFIG_H
#define LLMLIMIT_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "core/bounds.h"
#include "alerts.h"
#include "server_bounds.h"
#include "util/log.h"

#define LISTEN_DEFAULT "127.0.0.1:8470"
#define DATA_DIR_DEFAULT "./data"
#define LISTEN_HOST_LENGTH_MAX 255

struct server_config {
    char listen_host[LISTEN_HOST_LENGTH_MAX + 1]; /* numeric IPv4/IPv6 or "localhost" */
    uint16_t listen_port;                         /* 0: any free port */
    const char *backend;
    const char *data_dir;
    const char *admin_token_file; /* NULL: environment LLMLIMIT_ADMIN_TOKEN */
    const char *client_token_file;
    uint32_t threads;
    uint64_t max_body_bytes;
    uint32_t max_connections;
    uint32_t max_waiters;  /* reserves waiting for capacity at once */
    uint32_t wait_hold_ms; /* how long at a time a limit's waiters hold back others */
    /* Bytes of whole gateway answers held until their clients take them. */
    uint64_t max_gateway_answer_bytes;
    uint32_t connection_timeout_seconds;
    uint32_t request_timeout_seconds; /* 0: the connection timeout */
    uint32_t lease_cache_max;
    uint32_t lease_retention_seconds;
    uint32_t concurrency_poll_ms;
    uint32_t decrease_retry_ms;
    enum log_format log_format;
    enum log_level log_level;
    const char *gateway_config;    /* NULL: DATA_DIR/gateway.json when it exists */
    const char *alert_webhook;     /* NULL: none (a limit's own webhook only) */
    const char *alert_secret_file; /* NULL: alerts unsigned */
    enum alert_format alert_format;
    uint32_t alert_scan_ms;
    uint32_t alert_retry_ms;
    bool test_clock;          /* clock movable through POST /v1/admin/clock (tests only) */
    const char *zoneinfo_dir; /* budgets' time_zone files (TZ_DIRECTORY_DEFAULT) */
    const char *control;      /* --control etcd://...: definitions in etcd; NULL: none */
    /* Each backend's options struct (backend_ops.options_size bytes), by its
     * position in backend_at(), with its defaults and its flags applied. */
    _Alignas(16) unsigned char backend_options[BACKENDS_MAX][BACKEND_OPTIONS_BYTES_MAX];
};

enum config_outcome {
    CONFIG_RUN = 0,   /* start the server */
    CONFIG_EXIT = 1,  /* --help/--version printed: exit 0 */
    CONFIG_USAGE = 2, /* bad flag or value, message printed: exit 2 */
};

/* Fills the defaults, then applies argv. Strings point into argv or static
 * storage. Messages go to `out` (--help, --version) or `err`. */
enum config_outcome config_parse(struct server_config *config, int argc, char **argv, FILE *out,
                                 FILE *err);

void config_defaults(struct server_config *config);

#endif
