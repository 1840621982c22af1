/* Flag parsing for llmlimitd. One table describes every flag: its name,
 * its bounds and its help line, so --help can never drift from the parser. */
#include "config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/flag.h"
#include "gateway/gw_bounds.h"

#ifndef LLMLIMIT_VERSION
#define LLMLIMIT_VERSION "0.1.0"
#endif

/* llmlimitd's own flags; the kinds flag.c does not know are FLAG_OTHER,
 * parsed here by name. */
#define FIELD(name) offsetof(struct server_config, name)

static const struct flag flags[] = {
    {"--listen", "HOST:PORT", FLAG_OTHER, 0, 0, 0,
     "numeric IPv4, [IPv6] or localhost; port 0 picks a free port", 0, NULL},
    {"--backend", "NAME", FLAG_STRING, FIELD(backend), 0, 0,
     "one of the backends built in (listed at the end)", 0, NULL},
    {"--data-dir", "DIR", FLAG_STRING, FIELD(data_dir), 0, 0,
     "holds limits.json and the sqlite database", 0, NULL},
    {"--admin-token-file", "FILE", FLAG_STRING, FIELD(admin_token_file), 0, 0,
     "bearer token for /v1/admin/* (else env LLMLIMIT_ADMIN_TOKEN)", 0, NULL},
    {"--client-token-file", "FILE", FLAG_STRING, FIELD(client_token_file), 0, 0,
     "bearer token for data routes and /metrics (else env LLMLIMIT_CLIENT_TOKEN)", 0, NULL},
    {"--threads", "N", FLAG_U32, FIELD(threads), 1, SERVER_THREADS_MAX, "HTTP worker threads", 0,
     NULL},
    {"--max-body-bytes", "N", FLAG_U64, FIELD(max_body_bytes), 1, BODY_BYTES_MAX,
     "largest request body; one byte more is 413", 0, NULL},
    {"--max-connections", "N", FLAG_U32, FIELD(max_connections), 1, CONNECTIONS_MAX,
     "simultaneous client connections", 0, NULL},
    {"--max-waiters", "N", FLAG_U32, FIELD(max_waiters), 1, WAIT_WAITERS_MAX,
     "reserves waiting for capacity at once (wait_ms); past it answered at once", 0, NULL},
    {"--wait-hold-ms", "N", FLAG_U32, FIELD(wait_hold_ms), 0, WAIT_MS_MAX,
     "how long at a time a limit's waiters hold back later requests that fit (0: never)", 0, NULL},
    {"--max-gateway-answer-bytes", "N", FLAG_U64, FIELD(max_gateway_answer_bytes), 1,
     GW_ANSWERS_HELD_BYTES_MAX,
     "bytes of whole gateway answers held until their clients take them; past it a call is "
     "answered 503",
     0, NULL},
    {"--connection-timeout-seconds", "N", FLAG_U32, FIELD(connection_timeout_seconds), 1,
     CONNECTION_TIMEOUT_SECONDS_MAX, "idle connections are closed after this", 0, NULL},
    {"--request-timeout-seconds", "N", FLAG_U32, FIELD(request_timeout_seconds), 0,
     CONNECTION_TIMEOUT_SECONDS_MAX,
     "a connection that completes no request for this long is closed (0: the connection "
     "timeout)",
     0, NULL},
    {"--lease-cache-max", "N", FLAG_U32, FIELD(lease_cache_max), 1, UINT32_MAX,
     "leases remembered for idempotent retries (backends that keep them in memory)", 0, NULL},
    {"--lease-retention-seconds", "N", FLAG_U32, FIELD(lease_retention_seconds), 1,
     WINDOW_SECONDS_MAX, "how long a lease answers retries (longer while its holds live)", 0, NULL},
    {"--concurrency-poll-ms", "N", FLAG_U32, FIELD(concurrency_poll_ms), 1, POLL_MS_MAX,
     "cap of retry_after_ms on a concurrency denial", 0, NULL},
    {"--decrease-retry-ms", "N", FLAG_U32, FIELD(decrease_retry_ms), 1, 3600000,
     "retry_after_ms of a limit_decreasing denial", 0, NULL},
    {"--log-format", "text|json", FLAG_OTHER, 0, 0, 0, "log line format (stderr)", 0, NULL},
    {"--log-level", "LEVEL", FLAG_OTHER, 0, 0, 0, "error, warn, info or debug", 0, NULL},
    {"--gateway-config", "FILE", FLAG_STRING, FIELD(gateway_config), 0, 0,
     "gateway mode's config (default DATA_DIR/gateway.json when it exists); SIGHUP reloads it", 0,
     NULL},
    {"--zoneinfo-dir", "DIR", FLAG_STRING, FIELD(zoneinfo_dir), 0, 0,
     "where a budget's time_zone is read from (default " TZ_DIRECTORY_DEFAULT ")", 0, NULL},
    {"--alert-webhook", "URL", FLAG_STRING, FIELD(alert_webhook), 0, 0,
     "http(s) URL alerts are POSTed to (a limit's own webhook goes first)", 0, NULL},
    {"--alert-secret-file", "FILE", FLAG_STRING, FIELD(alert_secret_file), 0, 0,
     "secret of the alerts' x-llmlimit-signature (HMAC-SHA256 of the body)", 0, NULL},
    {"--alert-format", "json|slack", FLAG_OTHER, 0, 0, 0,
     "body of --alert-webhook's alerts: signed JSON or a Slack message", 0, NULL},
    {"--alert-scan-ms", "N", FLAG_U32, FIELD(alert_scan_ms), 10, ALERT_SCAN_MS_MAX,
     "how often the usage of limits with alerts is read", 0, NULL},
    {"--alert-retry-ms", "N", FLAG_U32, FIELD(alert_retry_ms), 1, ALERT_RETRY_MS_MAX,
     "delay before an alert's first retry (it doubles, for 24 h)", 0, NULL},
    {"--control", "etcd://HOST:PORT[,HOST:PORT...]", FLAG_STRING, FIELD(control), 0, 0,
     "keep limit definitions in this etcd cluster, shared by every front end (default: "
     "limits.json alone)",
     0, NULL},
    {"--test-clock", NULL, FLAG_SWITCH, FIELD(test_clock), 0, 0,
     "tests only: enable POST /v1/admin/clock to move the clock", 0, NULL},
};

#define FLAG_COUNT (sizeof flags / sizeof flags[0])

static uint32_t cores_online(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        return 1;
    return cores > SERVER_THREADS_MAX ? SERVER_THREADS_MAX : (uint32_t)cores;
}

/* Every numeric default lies within its flag's bounds (--help prints it as
 * a value the flag would accept). */
static bool defaults_in_bounds(const struct server_config *config)
{
    for (size_t i = 0; i < FLAG_COUNT; i++) {
        const char *field = (const char *)config + flags[i].offset;
        uint64_t value;
        if (flags[i].kind == FLAG_U32)
            value = *(const uint32_t *)(const void *)field;
        else if (flags[i].kind == FLAG_U64)
            value = *(const uint64_t *)(const void *)field;
        else
            continue;
        if (value < flags[i].min || value > flags[i].max)
            return false;
    }
    return true;
}

void config_defaults(struct server_config *config)
{
    memset(config, 0, sizeof *config);
    snprintf(config->listen_host, sizeof config->listen_host, "127.0.0.1");
    config->listen_port = 8470;
    config->backend = backend_default_name();
    config->data_dir = DATA_DIR_DEFAULT;
    config->zoneinfo_dir = TZ_DIRECTORY_DEFAULT;
    config->threads = cores_online();
    config->max_body_bytes = BODY_BYTES_DEFAULT;
    config->max_connections = CONNECTIONS_DEFAULT;
    config->max_waiters = WAIT_WAITERS_DEFAULT;
    config->wait_hold_ms = WAIT_HOLD_MS_DEFAULT;
    config->max_gateway_answer_bytes = GW_ANSWERS_HELD_BYTES_DEFAULT;
    config->connection_timeout_seconds = CONNECTION_TIMEOUT_SECONDS_DEFAULT;
    config->lease_cache_max = LEASE_CACHE_ENTRIES_DEFAULT;
    config->lease_retention_seconds = LEASE_RETENTION_MS_DEFAULT / 1000;
    config->concurrency_poll_ms = CONCURRENCY_POLL_MS_DEFAULT;
    config->decrease_retry_ms = DECREASE_RETRY_MS_DEFAULT;
    config->alert_scan_ms = ALERT_SCAN_MS_DEFAULT;
    config->alert_retry_ms = ALERT_RETRY_MS_DEFAULT;
    config->log_format = LOG_FORMAT_TEXT;
    config->log_level = LOG_INFO;
    for (uint32_t i = 0; i < backend_count(); i++) {
        const struct backend_ops *ops = backend_at(i);
        if (ops->options_defaults != NULL)
            ops->options_defaults(config->backend_options[i]);
    }
    assert(defaults_in_bounds(config));
}

/* HOST:PORT or [IPV6]:PORT. 0 or -1. */
static int parse_listen(struct server_config *config, const char *text)
{
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text)
        return -1;
    const char *host = text;
    size_t host_length = (size_t)(colon - text);
    if (host[0] == '[') {
        if (host_length < 3 || host[host_length - 1] != ']')
            return -1;
        host++;
        host_length -= 2;
    }
    uint64_t port;
    if (host_length > LISTEN_HOST_LENGTH_MAX || flag_parse_u64(colon + 1, &port) != 0 ||
        port > 65535)
        return -1;
    memcpy(config->listen_host, host, host_length);
    config->listen_host[host_length] = '\0';
    config->listen_port = (uint16_t)port;
    /* Numeric addresses only (and localhost): no DNS lookup at start-up. */
    unsigned char address[sizeof(struct in6_addr)];
    if (strcmp(config->listen_host, "localhost") != 0 &&
        inet_pton(AF_INET, config->listen_host, address) != 1 &&
        inet_pton(AF_INET6, config->listen_host, address) != 1)
        return -1;
    return 0;
}

/* The flags flag.c leaves to the table's owner (FLAG_OTHER). */
static int other_apply(struct server_config *config, const struct flag *flag, const char *value)
{
    if (strcmp(flag->name, "--listen") == 0)
        return parse_listen(config, value);
    if (strcmp(flag->name, "--log-format") == 0)
        return log_format_parse(value, &config->log_format);
    if (strcmp(flag->name, "--log-level") == 0)
        return log_level_parse(value, &config->log_level);
    if (strcmp(flag->name, "--alert-format") == 0)
        return alert_format_parse(value, &config->alert_format);
    assert(!"a FLAG_OTHER row without its parser");
    return -1;
}

static void other_default_text(const struct server_config *d, const struct flag *flag, char *text,
                               size_t size)
{
    if (strcmp(flag->name, "--listen") == 0)
        snprintf(text, size, "%s", LISTEN_DEFAULT);
    else if (strcmp(flag->name, "--log-format") == 0)
        snprintf(text, size, "%s", log_format_name(d->log_format));
    else if (strcmp(flag->name, "--alert-format") == 0)
        snprintf(text, size, "%s", alert_format_name(d->alert_format));
    else
        snprintf(text, size, "%s", log_level_name(d->log_level));
}

/* A flag and the struct its value goes to: llmlimitd's own, or a backend's
 * options (backend_ops.flags). */
struct flag_place {
    const struct flag *flag;
    void *object;
};

static struct flag_place flag_place_find(struct server_config *config, const char *name,
                                         size_t length)
{
    const struct flag *own = flag_find(flags, FLAG_COUNT, name, length);
    if (own != NULL)
        return (struct flag_place){own, config};
    for (uint32_t i = 0; i < backend_count(); i++) {
        const struct backend_ops *ops = backend_at(i);
        const struct flag *row = flag_find(ops->flags, ops->flag_count, name, length);
        if (row != NULL)
            return (struct flag_place){row, config->backend_options[i]};
    }
    return (struct flag_place){NULL, NULL};
}

static int place_apply(struct server_config *config, struct flag_place place, const char *value)
{
    if (place.flag->kind == FLAG_OTHER)
        return other_apply(config, place.flag, value);
    return flag_apply(place.flag, place.object, value);
}

static void help_rows(FILE *out, const struct flag *rows, size_t count, const void *object,
                      const struct server_config *d)
{
    for (size_t i = 0; i < count; i++) {
        char usage[64], text[128];
        snprintf(usage, sizeof usage, "%s%s%s", rows[i].name, rows[i].metavar ? " " : "",
                 rows[i].metavar ? rows[i].metavar : "");
        if (rows[i].kind == FLAG_OTHER)
            other_default_text(d, &rows[i], text, sizeof text);
        else
            flag_value_text(&rows[i], object, text, sizeof text);
        fprintf(out, "  %-40s %s [%s]\n", usage, rows[i].help, text);
    }
}

static void print_help(FILE *out)
{
    struct server_config d;
    config_defaults(&d);
    fprintf(out, "usage: llmlimitd [flags]\n\n"
                 "Reserves capacity across several limits before an LLM call and reconciles "
                 "after it.\n\nflags (default in brackets):\n");
    help_rows(out, flags, FLAG_COUNT, &d, &d);
    fprintf(out, "  %-40s %s\n  %-40s %s\n", "--help", "print this and exit", "--version",
            "print the version and exit");
    for (uint32_t i = 0; i < backend_count(); i++) {
        const struct backend_ops *ops = backend_at(i);
        if (ops->flag_count == 0)
            continue;
        fprintf(out, "\nflags of --backend %s:\n", ops->name);
        help_rows(out, ops->flags, ops->flag_count, d.backend_options[i], &d);
    }
    fprintf(out, "\nbackends built in: %s\n", backend_names());
    fprintf(out, "environment: LLMLIMIT_ADMIN_TOKEN, LLMLIMIT_CLIENT_TOKEN (used when the "
                 "matching --*-token-file is not given)\n");
}

enum config_outcome config_parse(struct server_config *config, int argc, char **argv, FILE *out,
                                 FILE *err)
{
    config_defaults(config);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help(out);
            return CONFIG_EXIT;
        }
        if (strcmp(arg, "--version") == 0) {
            fprintf(out, "llmlimitd %s\n", LLMLIMIT_VERSION);
            return CONFIG_EXIT;
        }
        const char *equals = strchr(arg, '=');
        size_t name_length = equals != NULL ? (size_t)(equals - arg) : strlen(arg);
        struct flag_place place = flag_place_find(config, arg, name_length);
        const struct flag *flag = place.flag;
        if (flag == NULL) {
            fprintf(err, "llmlimitd: unknown flag %.*s (see --help)\n", (int)name_length, arg);
            return CONFIG_USAGE;
        }
        const char *value = equals != NULL ? equals + 1 : NULL;
        if (flag->kind == FLAG_SWITCH) {
            if (value != NULL) {
                fprintf(err, "llmlimitd: %s takes no value\n", flag->name);
                return CONFIG_USAGE;
            }
            value = "";
        } else if (value == NULL) {
            if (i + 1 >= argc) {
                fprintf(err, "llmlimitd: %s needs a value (%s)\n", flag->name, flag->metavar);
                return CONFIG_USAGE;
            }
            value = argv[++i];
        }
        if (place_apply(config, place, value) != 0) {
            char expected[96];
            flag_expected_text(flag, expected, sizeof expected);
            fprintf(err, "llmlimitd: invalid value for %s: '%s' (expected %s)\n", flag->name, value,
                    expected);
            return CONFIG_USAGE;
        }
    }
    if (backend_find(config->backend) == NULL) {
        fprintf(err, "llmlimitd: unknown backend '%s' (built in: %s)\n", config->backend,
                backend_names());
        return CONFIG_USAGE;
    }
    assert(config->threads >= 1);
    assert(config->threads <= SERVER_THREADS_MAX);
    return CONFIG_RUN;
}
