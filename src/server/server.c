/* llmlimitd's life: start-up (tokens, data directory, backend, registry,
 * ticker, HTTP), the wait for SIGTERM/SIGINT, and the graceful shutdown
 * (stop accepting, finish in-flight requests, stop the ticker, close and
 * flush the backend). */
#include "server.h"

#include "exchange.h"
#include "services.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "control/ctl_plane.h"
#include "keys_control.h"
#include "data_dir.h"
#include "keys.h"
#include "gateway.h"
#include "routes.h"
#include "util/log.h"

static int startup_failed(const char *what, const char *reason)
{
    log_write(LOG_ERROR, what, "reason", reason, NULL);
    return -1;
}

static int load_tokens(struct server *s)
{
    char error[512];
    if (auth_load_token(s->config.admin_token_file, "LLMLIMIT_ADMIN_TOKEN", s->auth.admin_token,
                        &s->auth.admin_token_length, error, sizeof error) != 0)
        return startup_failed("cannot read the admin token", error);
    if (auth_load_token(s->config.client_token_file, "LLMLIMIT_CLIENT_TOKEN", s->auth.client_token,
                        &s->auth.client_token_length, error, sizeof error) != 0)
        return startup_failed("cannot read the client token", error);
    return 0;
}

/* Creates the data directory if needed and takes its lock: one owner per
 * directory for every backend, since limits.json is the server's. */
static int own_data_dir(struct server *s)
{
    char error[PATH_MAX + 128];
    if (data_dir_ensure(s->config.data_dir, error, sizeof error) != 0)
        return startup_failed("cannot use the data directory", error);
    if (data_dir_lock(s->config.data_dir, &s->data_dir_lock_fd, error, sizeof error) != 0)
        return startup_failed("cannot own the data directory", error);
    assert(s->data_dir_lock_fd >= 0);
    return 0;
}

/* The chosen backend's own options, defaults and flags applied (config.c). */
static const void *backend_options(struct server *s, const struct backend_ops *ops)
{
    for (uint32_t i = 0; i < backend_count(); i++) {
        if (backend_at(i) == ops)
            return ops->options_size > 0 ? s->config.backend_options[i] : NULL;
    }
    assert(!"a backend found by name is in the list");
    return NULL;
}

static int open_backend(struct server *s)
{
    const struct backend_ops *ops = backend_find(s->config.backend);
    if (ops == NULL)
        return startup_failed("backend not available", s->config.backend);
    struct backend_config bc;
    backend_config_defaults(&bc);
    bc.clock = s->clock;
    bc.data_dir = s->config.data_dir;
    bc.lease_cache_entries = s->config.lease_cache_max;
    bc.lease_retention_ms = (int64_t)s->config.lease_retention_seconds * 1000;
    bc.concurrency_poll_ms = s->config.concurrency_poll_ms;
    bc.decrease_retry_ms = s->config.decrease_retry_ms;
    char error[512];
    if (backend_open(ops, &bc, backend_options(s, ops), &s->backend, error, sizeof error) != 0)
        return startup_failed("cannot open the backend", error);
    assert(s->backend != NULL);
    return 0;
}

static void server_tick(void *context)
{
    struct server *s = context;
    bool changed = false;
    if (backend_tick(s->backend, &changed) != 0)
        log_write(LOG_WARN, "backend tick failed", NULL);
    registry_tick(s->registry, changed); /* a failure is logged, and retried next tick */
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Open requests are done, or only uploads stalled past their grace remain. */
static bool drained(struct server *s, int64_t upload_deadline)
{
    int64_t open, receiving;
    http_counts(s->http, &open, &receiving);
    return open == 0 || (open == receiving && clock_monotonic_ms() >= upload_deadline);
}

/* Stop accepting; let open requests finish (each answer now closes its
 * connection): up to SHUTDOWN_DRAIN_MS for requests being answered, and
 * SHUTDOWN_UPLOAD_GRACE_MS for bodies still arriving (a client that stalls
 * mid-body must not hold the exit). Then refuse new backend calls and wait
 * for those in flight: their exchanges must be answered before the HTTP
 * server stops. */
static void drain(struct server *s)
{
    http_quiesce(s->http);
    wait_drain(s->wait); /* every waiter answered now; no reserve waits from here */
    int64_t start = clock_monotonic_ms();
    int64_t deadline = start + SHUTDOWN_DRAIN_MS;
    int64_t upload_deadline = start + SHUTDOWN_UPLOAD_GRACE_MS;
    while (!drained(s, upload_deadline) && clock_monotonic_ms() < deadline)
        sleep_ms(2);
    int64_t open, receiving;
    http_counts(s->http, &open, &receiving);
    if (open > 0) {
        char count[24];
        snprintf(count, sizeof count, "%lld", (long long)open);
        log_write(LOG_WARN, "closing unfinished requests", "open_requests", count, NULL);
    }
    /* Gateway calls still forwarding are cut and settled with what they used. */
    if (s->gateway != NULL)
        gateway_quiesce(s->gateway);
    __atomic_store_n(&s->closing, 1, __ATOMIC_SEQ_CST);
    /* Backends always call done (with backend_error at worst), so this ends. */
    while (__atomic_load_n(&s->backend_calls, __ATOMIC_SEQ_CST) > 0)
        sleep_ms(1);
    /* No call can start now (closing is set), so none is left for later. */
    assert(__atomic_load_n(&s->backend_calls, __ATOMIC_SEQ_CST) == 0);
    /* Answers of calls that finished just now are being written: give them
     * a moment even when the drain time is spent. */
    int64_t settle = clock_monotonic_ms() + 200;
    if (deadline < settle)
        deadline = settle;
    while (!drained(s, 0) && clock_monotonic_ms() < deadline)
        sleep_ms(2);
    http_stop(s->http);
    s->http = NULL;
}

/* One line at start: gateway mode on and the file it read, or off and why. */
static void log_gateway_mode(const struct server *s)
{
    if (s->gateway != NULL) {
        uint32_t counts[4];
        gateway_config_counts(s->gateway, &counts[0], &counts[1], &counts[2], &counts[3]);
        char text[4][12];
        for (int i = 0; i < 4; i++)
            snprintf(text[i], sizeof text[i], "%u", counts[i]);
        log_write(LOG_INFO, "gateway mode on", "config", gateway_config_path(s->gateway), "models",
                  text[0], "keys", text[1], "upstreams", text[2], "limit_templates", text[3], NULL);
        return;
    }
    char looked_for[PATH_MAX + 32];
    snprintf(looked_for, sizeof looked_for, "%s/gateway.json", s->config.data_dir);
    log_write(LOG_INFO, "gateway mode off", "reason",
              "no --gateway-config, and no gateway.json in the data directory", "looked_for",
              looked_for, NULL);
}

static void print_listening(const struct server *s)
{
    char line[LISTEN_HOST_LENGTH_MAX + 64];
    bool v6 = strchr(s->config.listen_host, ':') != NULL;
    int n = snprintf(line, sizeof line, "llmlimitd listening on %s%s%s:%u\n", v6 ? "[" : "",
                     s->config.listen_host, v6 ? "]" : "", (unsigned)http_port(s->http));
    if (n > 0) {
        ssize_t written = write(STDERR_FILENO, line, (size_t)n);
        (void)written;
    }
}

/* The Keys API's side of a start, on a thread of its own while the limits'
 * side runs (neither reads the other's): keys.log, then the store's keys. */
struct keys_start {
    struct server *server;
    struct ctl_prefetch *read; /* taken */
    const char *failed;        /* NULL, or what failed (error says why) */
    char error[1024];
};

static void *keys_start(void *context)
{
    struct keys_start *k = context;
    struct server *s = k->server;
    if (keys_open(s->config.data_dir, &s->keys, k->error, sizeof k->error) != 0) {
        ctl_prefetch_free(k->read);
        k->failed = "invalid keys file";
    } else if (s->config.control != NULL &&
               keys_control_open(s->config.control, k->read, s->keys, &s->keys_control, k->error,
                                 sizeof k->error) != 0) {
        k->failed = "invalid --control";
    }
    k->read = NULL;
    return NULL;
}

/* The registry, the keys and, with --control, the store's view of both;
 * the limits' side here, the keys' on a thread (keys_start). -1 on a fatal
 * error (logged). */
static int open_state(struct server *s)
{
    char error[1024];
    struct ctl_prefetch *limits_read = s->limits_read;
    struct keys_start k = {.server = s, .read = s->keys_read};
    s->limits_read = s->keys_read = NULL; /* taken (and freed) from here on */
    pthread_t thread;
    bool threaded = pthread_create(&thread, NULL, keys_start, &k) == 0;
    if (!threaded)
        keys_start(&k);
    const char *failed = NULL;
    struct wait_options wait_options;
    wait_options_defaults(&wait_options);
    wait_options.max_waiters = s->config.max_waiters;
    wait_options.hold_ms = s->config.wait_hold_ms;
    if (registry_open(s->config.data_dir, s->backend, &s->registry, error, sizeof error) != 0)
        failed = "invalid registry";
    else if (wait_open(s->backend, s->clock, &wait_options, &s->wait, error, sizeof error) != 0)
        failed = "cannot start the waiting queue";
    else if (s->config.control != NULL) {
        struct ctl_prefetch *read = limits_read;
        limits_read = NULL; /* control_open takes it, whatever it returns */
        if (control_open(s->config.control, read, s->registry, s->backend, s->wait, &s->control,
                         error, sizeof error) != 0)
            failed = "invalid --control";
    }
    ctl_prefetch_free(limits_read); /* a start that failed before control_open */
    if (threaded)
        pthread_join(thread, NULL);
    if (failed != NULL)
        return startup_failed(failed, error);
    if (k.failed != NULL)
        return startup_failed(k.failed, k.error);
    return 0;
}

/* Everything before the listening line; -1 on a fatal error (logged). */
static int server_start(struct server *s)
{
    if (load_tokens(s) != 0 || own_data_dir(s) != 0)
        return -1;
    char error[1024];
    /* The store's two prefixes are read on threads of their own while the
     * local files load: a start with 100,000 of each waits for the longer. */
    if (s->config.control != NULL &&
        (ctl_prefetch_begin(s->config.control, CONTROL_LIMITS_PREFIX, &s->limits_read, error,
                            sizeof error) != 0 ||
         ctl_prefetch_begin(s->config.control, KEYS_CONTROL_PREFIX, &s->keys_read, error,
                            sizeof error) != 0))
        return startup_failed("invalid --control", error);
    clock_offset_init(&s->test_clock);
    s->clock = s->config.test_clock ? &s->test_clock.clock : clock_system();
    /* Before any definition is read: the backend's and the registry's. */
    if (tz_directory_set(s->config.zoneinfo_dir) != 0)
        return startup_failed("invalid --zoneinfo-dir", s->config.zoneinfo_dir);
    if (open_backend(s) != 0)
        return -1;
    if (open_state(s) != 0)
        return -1;
    if (gateway_open(s, &s->gateway, error, sizeof error) != 0)
        return startup_failed("invalid gateway config", error);
    s->ready = true;
    s->router = routes_server();
    s->metrics = metrics_create(s->router);
    s->activity = activity_create();
    s->spend = spend_create();
    if (s->metrics == NULL || s->activity == NULL || s->spend == NULL)
        return startup_failed("cannot start", "out of memory");
    s->started_at_unix_ms = clock_now_ms(s->clock);
    if (offload_start(OFFLOAD_JOBS_MAX, &s->offload) != 0)
        return startup_failed("cannot start the offload thread", strerror(errno));
    if (periodic_start(&s->ticker, TICK_INTERVAL_MS, server_tick, s) != 0)
        return startup_failed("cannot start the ticker thread", strerror(errno));
    if (spend_start(s->spend, s->backend, s->clock) != 0)
        return startup_failed("cannot start the spend sampler thread", strerror(errno));
    struct alerts_options alert_options = {
        .data_dir = s->config.data_dir,
        .webhook = s->config.alert_webhook,
        .format = s->config.alert_format,
        .secret_file = s->config.alert_secret_file,
        .scan_ms = s->config.alert_scan_ms,
        .retry_ms = s->config.alert_retry_ms,
    };
    if (alerts_open(&alert_options, s->backend, s->registry, s->spend, s->clock, &s->alerts, error,
                    sizeof error) != 0)
        return startup_failed("invalid alerts", error);
    if (alerts_start(s->alerts) != 0)
        return startup_failed("cannot start the alerts' threads", strerror(errno));
    if (server_http_start(s, error, sizeof error) != 0)
        return startup_failed("cannot listen", error);
    assert(s->http != NULL);
    return 0;
}

static void server_free(struct server *s)
{
    /* The HTTP server is stopped: no exchange, and so no backend call, is left. */
    assert(s->http == NULL);
    assert(__atomic_load_n(&s->backend_calls, __ATOMIC_SEQ_CST) == 0);
    offload_stop(s->offload); /* idle: every job of it counted as a backend call */
    periodic_stop(&s->ticker);
    alerts_stop(s->alerts);    /* before the backend and the spend it reads */
    spend_stop(s->spend);      /* before the backend it reads closes */
    gateway_close(s->gateway); /* quiesced: no call of it is left */
    control_close(s->control); /* applies nothing from here on */
    /* The store's reads of a start that failed before they were taken. */
    ctl_prefetch_free(s->limits_read);
    ctl_prefetch_free(s->keys_read);
    keys_control_close(s->keys_control);
    if (s->wait != NULL)
        wait_close(s->wait); /* drained: no waiter is left; before the backend closes */
    if (s->registry != NULL)
        registry_tick(s->registry, false); /* a change not yet saved gets a last try */
    if (s->backend != NULL)
        backend_close(s->backend);
    registry_close(s->registry);
    keys_close(s->keys);
    metrics_destroy(s->metrics);
    activity_destroy(s->activity);
    alerts_close(s->alerts);
    spend_destroy(s->spend);
    exchange_pool_free(s);
    pthread_mutex_destroy(&s->pool_mutex);
    if (s->data_dir_lock_fd >= 0)
        close(s->data_dir_lock_fd); /* last: the directory is ours until everything is closed */
    free(s);
}

/* SIGHUP reloads the gateway's config (a bad one changes nothing);
 * SIGTERM and SIGINT stop. Returns the stopping signal. */
static int wait_for_stop(struct server *s, const sigset_t *signals)
{
    for (;;) {
        int signal_number = 0;
        if (sigwait(signals, &signal_number) != 0)
            continue;
        if (signal_number != SIGHUP)
            return signal_number;
        if (s->gateway == NULL) {
            log_write(LOG_INFO, "SIGHUP: gateway mode is off, nothing to reload", NULL);
            continue;
        }
        char error[1024];
        if (gateway_reload(s->gateway, error, sizeof error) == 0)
            log_write(LOG_INFO, "gateway config reloaded", "file", gateway_config_path(s->gateway),
                      NULL);
        else
            log_write(LOG_ERROR, "gateway config not reloaded: the old one stays in force",
                      "reason", error, NULL);
    }
}

int server_run(const struct server_config *config)
{
    assert(config != NULL);
    assert(config->threads >= 1);
    log_setup(config->log_level, config->log_format);
    /* SIGTERM/SIGINT are taken by sigwait() in this thread only: block them
     * before any thread starts so every thread inherits the mask. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return 1;
    s->config = *config;
    s->data_dir_lock_fd = -1;
    pthread_mutex_init(&s->pool_mutex, NULL);
    if (server_start(s) != 0) {
        http_stop(s->http);
        s->http = NULL;
        server_free(s);
        return 1;
    }
    log_write(LOG_INFO, "started", "backend", s->backend->ops->name, "data_dir", s->config.data_dir,
              "registry", registry_path(s->registry), NULL);
    log_gateway_mode(s);
    print_listening(s);

    int signal_number = wait_for_stop(s, &signals);
    log_write(LOG_INFO, "shutting down", "signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM",
              NULL);
    drain(s);
    server_free(s);
    log_write(LOG_INFO, "stopped", NULL);
    return 0;
}
