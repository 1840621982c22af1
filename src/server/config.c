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
#include "backend/sqlite/sq_bounds.h"
#include "tbclient/tbc_bounds.h"

#ifndef LLMLIMIT_VERSION
#define LLMLIMIT_VERSION "0.1.0"
#endif

enum flag_kind {
    FLAG_STRING,
    FLAG_U32,
    FLAG_U64,
    FLAG_LISTEN,
    FLAG_LOG_FORMAT,
    FLAG_LOG_LEVEL,
    FLAG_SYNCHRONOUS,
    FLAG_SWITCH, /* no value */
};

struct flag {
    const char *name;
    const char *metavar;
    enum flag_kind kind;
    size_t offset; /* into struct server_config */
    uint64_t min, max;
    const char *help;
};

#define FIELD(name) offsetof(struct server_config, name)

static const struct flag flags[] = {
    {"--listen", "HOST:PORT", FLAG_LISTEN, 0, 0, 0,
     "numeric IPv4, [IPv6] or localhost; port 0 picks a free port"},
    {"--backend", "NAME", FLAG_STRING, FIELD(backend), 0, 0, "memory, sqlite or tigerbeetle"},
    {"--data-dir", "DIR", FLAG_STRING, FIELD(data_dir), 0, 0,
     "holds limits.json and the sqlite database"},
    {"--admin-token-file", "FILE", FLAG_STRING, FIELD(admin_token_file), 0, 0,
     "bearer token for /v1/admin/* (else env LLMLIMIT_ADMIN_TOKEN)"},
    {"--client-token-file", "FILE", FLAG_STRING, FIELD(client_token_file), 0, 0,
     "bearer token for data routes and /metrics (else env LLMLIMIT_CLIENT_TOKEN)"},
    {"--threads", "N", FLAG_U32, FIELD(threads), 1, SERVER_THREADS_MAX, "HTTP worker threads"},
    {"--max-body-bytes", "N", FLAG_U64, FIELD(max_body_bytes), 1, BODY_BYTES_MAX,
     "largest request body; one byte more is 413"},
    {"--max-connections", "N", FLAG_U32, FIELD(max_connections), 1, CONNECTIONS_MAX,
     "simultaneous client connections"},
    {"--max-waiters", "N", FLAG_U32, FIELD(max_waiters), 1, WAIT_WAITERS_MAX,
     "reserves waiting for capacity at once (wait_ms); past it answered at once"},
    {"--connection-timeout-seconds", "N", FLAG_U32, FIELD(connection_timeout_seconds), 1,
     CONNECTION_TIMEOUT_SECONDS_MAX, "idle connections are closed after this"},
    {"--request-timeout-seconds", "N", FLAG_U32, FIELD(request_timeout_seconds), 0,
     CONNECTION_TIMEOUT_SECONDS_MAX,
     "a connection that completes no request for this long is closed (0: the connection "
     "timeout)"},
    {"--lease-cache-max", "N", FLAG_U32, FIELD(lease_cache_max), 1, UINT32_MAX,
     "leases remembered for idempotent retries (memory, tigerbeetle)"},
    {"--lease-retention-seconds", "N", FLAG_U32, FIELD(lease_retention_seconds), 1,
     WINDOW_SECONDS_MAX, "how long a lease answers retries (longer while its holds live)"},
    {"--concurrency-poll-ms", "N", FLAG_U32, FIELD(concurrency_poll_ms), 1, POLL_MS_MAX,
     "cap of retry_after_ms on a concurrency denial"},
    {"--decrease-retry-ms", "N", FLAG_U32, FIELD(decrease_retry_ms), 1, 3600000,
     "retry_after_ms of a limit_decreasing denial"},
    {"--log-format", "text|json", FLAG_LOG_FORMAT, 0, 0, 0, "log line format (stderr)"},
    {"--log-level", "LEVEL", FLAG_LOG_LEVEL, 0, 0, 0, "error, warn, info or debug"},
    {"--sqlite-synchronous", "full|normal", FLAG_SYNCHRONOUS, 0, 0, 0,
     "sqlite durability: full survives power loss"},
    {"--sqlite-retention-days", "N", FLAG_U32, FIELD(sqlite_retention_days), 0,
     SQ_RETENTION_DAYS_MAX,
     "sqlite: delete finished leases and audit events older than this (0: keep all)"},
    {"--tb-cluster", "ID", FLAG_STRING, FIELD(tb_cluster), 0, 0, "TigerBeetle cluster id"},
    {"--tb-addresses", "HOST:PORT,...", FLAG_STRING, FIELD(tb_addresses), 0, 0,
     "TigerBeetle replica addresses"},
    {"--tb-sessions", "N", FLAG_U32, FIELD(tb_sessions), 1, 64, "TigerBeetle client sessions"},
    {"--tb-deadline-ms", "MS", FLAG_U32, FIELD(tb_deadline_ms), TBC_ITEM_DEADLINE_MS_MIN,
     TBC_ITEM_DEADLINE_MS_MAX, "how long an operation waits for TigerBeetle before a 503"},
    {"--gateway-config", "FILE", FLAG_STRING, FIELD(gateway_config), 0, 0,
     "gateway mode's config (default DATA_DIR/gateway.json when it exists); SIGHUP reloads it"},
    {"--test-clock", NULL, FLAG_SWITCH, FIELD(test_clock), 0, 0,
     "tests only: enable POST /v1/admin/clock to move the clock"},
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
    /* sqlite is the durable default (docs/configuration.md) when it is built in. */
    config->backend = backend_find("sqlite") != NULL ? "sqlite" : "memory";
    config->data_dir = DATA_DIR_DEFAULT;
    config->threads = cores_online();
    config->max_body_bytes = BODY_BYTES_DEFAULT;
    config->max_connections = CONNECTIONS_DEFAULT;
    config->max_waiters = WAIT_WAITERS_DEFAULT;
    config->connection_timeout_seconds = CONNECTION_TIMEOUT_SECONDS_DEFAULT;
    config->lease_cache_max = LEASE_CACHE_ENTRIES_DEFAULT;
    config->lease_retention_seconds = LEASE_RETENTION_MS_DEFAULT / 1000;
    config->concurrency_poll_ms = CONCURRENCY_POLL_MS_DEFAULT;
    config->decrease_retry_ms = DECREASE_RETRY_MS_DEFAULT;
    config->log_format = LOG_FORMAT_TEXT;
    config->log_level = LOG_INFO;
    config->sqlite_synchronous_normal = false;
    config->tb_cluster = "0";
    config->tb_addresses = "127.0.0.1:3000";
    config->tb_sessions = 4;
    config->tb_deadline_ms = TBC_ITEM_DEADLINE_MS;
    assert(defaults_in_bounds(config));
}

/* Decimal only: no sign, no spaces, no hex; 0 or -1. */
static int parse_u64(const char *text, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = value;
    return 0;
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
    if (host_length > LISTEN_HOST_LENGTH_MAX || parse_u64(colon + 1, &port) != 0 || port > 65535)
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

static int flag_apply(struct server_config *config, const struct flag *flag, const char *value)
{
    assert(value != NULL);
    assert(flag->min <= flag->max);
    char *field = (char *)config + flag->offset;
    uint64_t number;
    switch (flag->kind) {
    case FLAG_STRING:
        if (value[0] == '\0')
            return -1;
        *(const char **)(void *)field = value;
        return 0;
    case FLAG_U32:
    case FLAG_U64:
        if (parse_u64(value, &number) != 0 || number < flag->min || number > flag->max)
            return -1;
        if (flag->kind == FLAG_U32)
            *(uint32_t *)(void *)field = (uint32_t)number;
        else
            *(uint64_t *)(void *)field = number;
        return 0;
    case FLAG_LISTEN:
        return parse_listen(config, value);
    case FLAG_LOG_FORMAT:
        return log_format_parse(value, &config->log_format);
    case FLAG_LOG_LEVEL:
        return log_level_parse(value, &config->log_level);
    case FLAG_SYNCHRONOUS:
        if (strcmp(value, "full") != 0 && strcmp(value, "normal") != 0)
            return -1;
        config->sqlite_synchronous_normal = strcmp(value, "normal") == 0;
        return 0;
    case FLAG_SWITCH:
        *(bool *)(void *)field = true;
        return 0;
    }
    return -1;
}

static void flag_default_text(const struct server_config *d, const struct flag *flag, char *text,
                              size_t size)
{
    const char *field = (const char *)d + flag->offset;
    switch (flag->kind) {
    case FLAG_STRING: {
        const char *s = *(const char *const *)(const void *)field;
        snprintf(text, size, "%s", s != NULL ? s : "none");
        break;
    }
    case FLAG_U32:
        snprintf(text, size, "%" PRIu32, *(const uint32_t *)(const void *)field);
        break;
    case FLAG_U64:
        snprintf(text, size, "%" PRIu64, *(const uint64_t *)(const void *)field);
        break;
    case FLAG_LISTEN:
        snprintf(text, size, "%s", LISTEN_DEFAULT);
        break;
    case FLAG_LOG_FORMAT:
        snprintf(text, size, "%s", log_format_name(d->log_format));
        break;
    case FLAG_LOG_LEVEL:
        snprintf(text, size, "%s", log_level_name(d->log_level));
        break;
    case FLAG_SYNCHRONOUS:
        snprintf(text, size, "full");
        break;
    case FLAG_SWITCH:
        snprintf(text, size, "off");
        break;
    }
}

static void print_help(FILE *out)
{
    struct server_config d;
    config_defaults(&d);
    fprintf(out, "usage: llmlimitd [flags]\n\n"
                 "Reserves capacity across several limits before an LLM call and reconciles "
                 "after it.\n\nflags (default in brackets):\n");
    for (size_t i = 0; i < FLAG_COUNT; i++) {
        char usage[64], text[128];
        snprintf(usage, sizeof usage, "%s%s%s", flags[i].name, flags[i].metavar ? " " : "",
                 flags[i].metavar ? flags[i].metavar : "");
        flag_default_text(&d, &flags[i], text, sizeof text);
        fprintf(out, "  %-40s %s [%s]\n", usage, flags[i].help, text);
    }
    fprintf(out, "  %-40s %s\n  %-40s %s\n", "--help", "print this and exit", "--version",
            "print the version and exit");
    fprintf(out, "\nbackends built in: %s\n", backend_names());
    fprintf(out, "environment: LLMLIMIT_ADMIN_TOKEN, LLMLIMIT_CLIENT_TOKEN (used when the "
                 "matching --*-token-file is not given)\n");
}

static const struct flag *flag_find(const char *name, size_t length)
{
    for (size_t i = 0; i < FLAG_COUNT; i++) {
        if (strlen(flags[i].name) == length && memcmp(flags[i].name, name, length) == 0)
            return &flags[i];
    }
    return NULL;
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
        const struct flag *flag = flag_find(arg, name_length);
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
        if (flag_apply(config, flag, value) != 0) {
            fprintf(err, "llmlimitd: invalid value for %s: '%s' (expected %s", flag->name, value,
                    flag->metavar);
            if (flag->kind == FLAG_U32 || flag->kind == FLAG_U64)
                fprintf(err, " in %" PRIu64 "..%" PRIu64, flag->min, flag->max);
            fprintf(err, ")\n");
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
