/* The load generator's run: resolves the server, prepares the request
 * templates, opens every connection, runs one epoll loop per thread for the
 * duration, prints progress each second, and sums the threads' figures. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "loadgen_internal.h"

#define EPOLL_EVENTS_MAX 256
#define EPOLL_WAIT_MS 50

static const char *const mode_names[] = {"reserve", "reserve-complete", "batch", "post"};

const char *loadgen_mode_name(enum loadgen_mode mode)
{
    assert((size_t)mode < sizeof mode_names / sizeof mode_names[0]);
    return mode_names[mode];
}

int loadgen_mode_parse(const char *name, enum loadgen_mode *out)
{
    for (size_t i = 0; i < sizeof mode_names / sizeof mode_names[0]; i++) {
        if (strcmp(name, mode_names[i]) == 0) {
            *out = (enum loadgen_mode)i;
            return 0;
        }
    }
    return -1;
}

void loadgen_config_defaults(struct loadgen_config *config)
{
    memset(config, 0, sizeof(*config));
    snprintf(config->host, sizeof(config->host), "127.0.0.1");
    snprintf(config->port, sizeof(config->port), "8470");
    config->connections = 50;
    config->threads = 1;
    config->duration_seconds = 10;
    config->mode = LOADGEN_RESERVE;
    config->batch_size = 64;
    config->progress = true;
    config->progress_output = stderr;
}

int loadgen_config_url(struct loadgen_config *config, const char *url)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *host = url + 7, *host_end, *port;
    if (*host == '[') { /* [IPv6]:port */
        host_end = strchr(host, ']');
        if (host_end == NULL)
            return -1;
        host++;
        port = host_end + 1;
    } else {
        host_end = host + strcspn(host, ":/");
        port = host_end;
    }
    size_t host_length = (size_t)(host_end - host);
    if (host_length == 0 || host_length > LOADGEN_HOST_LENGTH_MAX)
        return -1;
    memcpy(config->host, host, host_length);
    config->host[host_length] = '\0';
    if (*port == ':') {
        port++;
        size_t port_length = strspn(port, "0123456789");
        if (port_length == 0 || port_length >= sizeof(config->port))
            return -1;
        if (port[port_length] != '\0' && strcmp(port + port_length, "/") != 0)
            return -1;
        memcpy(config->port, port, port_length);
        config->port[port_length] = '\0';
    } else if (*port != '\0' && strcmp(port, "/") != 0) {
        return -1;
    } else {
        snprintf(config->port, sizeof(config->port), "80");
    }
    return 0;
}

/* ---- templates ---------------------------------------------------------------- */

/* Appends a JSON string body (no quotes) with " and \ escaped. */
static size_t put_escaped(char *out, const char *text)
{
    size_t length = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            out[length++] = '\\';
        out[length++] = *p;
    }
    return length;
}

/* `","<list>":[{"key":"k","<field>":n},...]}`; a new string or NULL. */
static char *tail_new(const struct loadgen_config *config, const char *list, const char *field,
                      size_t *length_out)
{
    assert(config->key_count >= 1 || config->mode == LOADGEN_POST);
    size_t capacity = 64;
    for (uint32_t i = 0; i < config->key_count; i++)
        capacity += 2 * strlen(config->keys[i]) + strlen(field) + 48;
    char *tail = malloc(capacity);
    if (tail == NULL)
        return NULL;
    size_t length = (size_t)snprintf(tail, capacity, "\",\"%s\":[", list);
    for (uint32_t i = 0; i < config->key_count; i++) {
        length +=
            (size_t)snprintf(tail + length, capacity - length, "%s{\"key\":\"", i > 0 ? "," : "");
        length += put_escaped(tail + length, config->keys[i]);
        length += (size_t)snprintf(tail + length, capacity - length, "\",\"%s\":%" PRIu64 "}",
                                   field, config->amounts[i]);
    }
    length += (size_t)snprintf(tail + length, capacity - length, "]}");
    assert(length < capacity);
    *length_out = length;
    return tail;
}

static size_t header_new(char *out, const struct loadgen_config *config, const char *path)
{
    int length =
        snprintf(out, LOADGEN_HEADER_ROOM,
                 "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                 "%s%s%s%sContent-Length: ",
                 path, config->host, config->port, config->token ? "Authorization: Bearer " : "",
                 config->token ? config->token : "", config->token ? "\r\n" : "", config->headers);
    assert(length > 0);
    assert(length < LOADGEN_HEADER_ROOM - 32); /* room for the length and the blank line */
    return (size_t)length;
}

static int shared_resolve(struct loadgen_shared *shared, char *error, size_t error_size)
{
    const struct loadgen_config *config = shared->config;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found;
    int rc = getaddrinfo(config->host, config->port, &hints, &found);
    if (rc != 0) {
        snprintf(error, error_size, "%s:%s: %s", config->host, config->port, gai_strerror(rc));
        return -1;
    }
    memcpy(&shared->address, found->ai_addr, found->ai_addrlen);
    shared->address_length = found->ai_addrlen;
    freeaddrinfo(found);
    return 0;
}

static int shared_init(struct loadgen_shared *shared, const struct loadgen_config *config,
                       char *error, size_t error_size)
{
    memset(shared, 0, sizeof(*shared));
    shared->config = config;
    if (shared_resolve(shared, error, error_size) != 0)
        return -1;
    shared->header_reserve_length = header_new(shared->header_reserve, config, "/v1/reserve");
    shared->header_batch_length = header_new(shared->header_batch, config, "/v1/reserve/batch");
    shared->header_complete_length = header_new(shared->header_complete, config, "/v1/complete");
    if (config->mode == LOADGEN_POST)
        shared->header_post_length = header_new(shared->header_post, config, config->post_path);
    shared->requirements_tail =
        tail_new(config, "requirements", "amount", &shared->requirements_tail_length);
    shared->actuals_tail =
        tail_new(config, "actuals", "actual_amount", &shared->actuals_tail_length);
    if (shared->requirements_tail == NULL || shared->actuals_tail == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    uint32_t items = config->mode == LOADGEN_BATCH ? config->batch_size : 1;
    size_t reserve_bytes = 16 + LOADGEN_LEASE_ID_SIZE + shared->requirements_tail_length;
    size_t complete_bytes = 16 + LOADGEN_LEASE_ID_SIZE + shared->actuals_tail_length;
    size_t body_bytes = items * (reserve_bytes + 1) + 32;
    if (complete_bytes > body_bytes)
        body_bytes = complete_bytes;
    shared->send_capacity = LOADGEN_HEADER_ROOM + body_bytes;
    /* An answer item is ~200 bytes plus the denied keys it may list. */
    size_t item_bytes = 512;
    for (uint32_t i = 0; i < config->key_count; i++)
        item_bytes += 2 * strlen(config->keys[i]) + 4;
    shared->receive_capacity = 4096 + items * item_bytes;
    if (config->mode == LOADGEN_POST) {
        assert(config->post_body_length <= LOADGEN_POST_BODY_BYTES_MAX);
        if (config->post_body_length > body_bytes)
            shared->send_capacity = LOADGEN_HEADER_ROOM + config->post_body_length;
        shared->receive_capacity = LOADGEN_POST_ANSWER_BYTES_MAX;
    }
    /* Headers go in front of the body: the room is part of every buffer. */
    assert(shared->send_capacity > LOADGEN_HEADER_ROOM + reserve_bytes);
    return 0;
}

/* ---- workers ------------------------------------------------------------------- */

static int worker_register(struct worker *worker, struct connection *connection)
{
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = connection};
    return epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, connection->fd, &event);
}

/* A connection failed: count it, and open a new one unless the run is over. */
static void worker_reconnect(struct worker *worker, struct connection *connection)
{
    worker->report.connection_errors++;
    loadgen_connection_close(worker, connection);
    if (worker->draining)
        return;
    if (loadgen_connection_open(connection, worker->shared) != 0 ||
        worker_register(worker, connection) != 0 ||
        loadgen_connection_send_next(worker, connection) != 0) {
        loadgen_connection_close(worker, connection);
        worker->report.connection_errors++;
    }
}

static void worker_event(struct worker *worker, const struct epoll_event *event)
{
    struct connection *connection = event->data.ptr;
    if (connection->fd < 0)
        return;
    int rc = 0;
    if (event->events & EPOLLOUT)
        rc = loadgen_connection_send_more(worker, connection);
    if (rc == 0 && (event->events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        rc = loadgen_connection_readable(worker, connection);
    if (rc != 0)
        worker_reconnect(worker, connection);
}

static void *worker_main(void *argument)
{
    struct worker *worker = argument;
    const struct loadgen_shared *shared = worker->shared;
    for (uint32_t i = 0; i < worker->connection_count; i++) {
        struct connection *connection = &worker->connections[i];
        if (connection->fd >= 0 && loadgen_connection_send_next(worker, connection) != 0)
            worker_reconnect(worker, connection);
    }
    struct epoll_event events[EPOLL_EVENTS_MAX];
    int64_t drain_until_ns = 0;
    for (;;) {
        int64_t now = loadgen_now_ns();
        if (!worker->draining && now >= shared->end_ns) {
            worker->draining = true;
            drain_until_ns = now + (int64_t)LOADGEN_DRAIN_MS * 1000000;
        }
        if (worker->draining && (worker->in_flight == 0 || now >= drain_until_ns))
            break;
        int count = epoll_wait(worker->epoll_fd, events, EPOLL_EVENTS_MAX, EPOLL_WAIT_MS);
        for (int i = 0; i < count; i++)
            worker_event(worker, &events[i]);
    }
    atomic_store(&worker->finished, true);
    return NULL;
}

/* ---- the run ----------------------------------------------------------------- */

static void report_init(struct loadgen_report *report)
{
    memset(report, 0, sizeof(*report));
    loadgen_histogram_init(&report->latency_ns);
}

static void workers_free(struct worker *workers, uint32_t count, struct connection *connections,
                         uint32_t connection_count)
{
    for (uint32_t i = 0; i < connection_count; i++) {
        if (connections[i].fd >= 0)
            close(connections[i].fd);
        free(connections[i].send_buffer);
        free(connections[i].receive_buffer);
    }
    for (uint32_t i = 0; i < count; i++) {
        if (workers[i].epoll_fd >= 0)
            close(workers[i].epoll_fd);
    }
    free(connections);
    free(workers);
}

/* Allocates everything and connects, before the clock starts. */
static int workers_prepare(struct loadgen_shared *shared, struct worker *workers,
                           struct connection *connections, char *error, size_t error_size)
{
    const struct loadgen_config *config = shared->config;
    for (uint32_t t = 0; t < config->threads; t++) {
        struct worker *worker = &workers[t];
        worker->shared = shared;
        report_init(&worker->report);
        worker->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (worker->epoll_fd < 0) {
            snprintf(error, error_size, "epoll_create1 failed");
            return -1;
        }
    }
    for (uint32_t i = 0; i < config->connections; i++) {
        struct connection *connection = &connections[i];
        /* Thread t owns a contiguous share of the connections. */
        uint32_t t = (uint32_t)((uint64_t)i * config->threads / config->connections);
        assert(t < config->threads);
        struct worker *worker = &workers[t];
        connection->index = i;
        if (getrandom(&connection->random_state, sizeof connection->random_state, 0) !=
            (ssize_t)sizeof connection->random_state)
            connection->random_state = (uint64_t)loadgen_now_ns() ^ ((uint64_t)i << 32);
        connection->random_state |= 1; /* xorshift never leaves 0 */
        connection->send_buffer = malloc(shared->send_capacity);
        connection->receive_buffer = malloc(shared->receive_capacity);
        if (connection->send_buffer == NULL || connection->receive_buffer == NULL) {
            snprintf(error, error_size, "out of memory");
            return -1;
        }
        if (loadgen_connection_open(connection, shared) != 0 ||
            worker_register(worker, connection)) {
            snprintf(error, error_size, "cannot connect to %s:%s", config->host, config->port);
            return -1;
        }
        if (worker->connections == NULL)
            worker->connections = connection;
        /* A worker's connections are contiguous: it walks them as an array. */
        assert(worker->connections + worker->connection_count == connection);
        worker->connection_count++;
    }
    return 0;
}

static void progress_print(const struct loadgen_config *config, struct worker *workers,
                           int64_t second, uint64_t *last_requests, uint64_t *last_reserves)
{
    uint64_t requests = 0, reserves = 0;
    for (uint32_t t = 0; t < config->threads; t++) {
        requests += atomic_load_explicit(&workers[t].progress_requests, memory_order_relaxed);
        reserves += atomic_load_explicit(&workers[t].progress_reserves, memory_order_relaxed);
    }
    assert(requests >= *last_requests); /* counters only grow */
    assert(reserves >= *last_reserves);
    fprintf(config->progress_output,
            "[%3" PRId64 "s] %9" PRIu64 " requests/s %9" PRIu64 " reservations/s  (%" PRIu64
            " requests so far)\n",
            second, requests - *last_requests, reserves - *last_reserves, requests);
    fflush(config->progress_output);
    *last_requests = requests;
    *last_reserves = reserves;
}

static void progress_loop(const struct loadgen_shared *shared, struct worker *workers)
{
    const struct loadgen_config *config = shared->config;
    uint64_t last_requests = 0, last_reserves = 0;
    for (int64_t second = 1;; second++) {
        int64_t wake = shared->start_ns + second * 1000000000;
        bool all_finished;
        do {
            all_finished = true;
            for (uint32_t t = 0; t < config->threads; t++)
                all_finished = all_finished && atomic_load(&workers[t].finished);
            if (all_finished)
                return;
            struct timespec nap = {0, 10 * 1000 * 1000};
            nanosleep(&nap, NULL);
        } while (loadgen_now_ns() < wake);
        if (config->progress && wake <= shared->end_ns)
            progress_print(config, workers, second, &last_requests, &last_reserves);
    }
}

static int run_threads(struct loadgen_shared *shared, struct worker *workers, char *error,
                       size_t error_size)
{
    const struct loadgen_config *config = shared->config;
    shared->start_ns = loadgen_now_ns();
    shared->end_ns = shared->start_ns + (int64_t)config->duration_seconds * 1000000000;
    uint32_t started = 0;
    for (; started < config->threads; started++) {
        if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0)
            break;
    }
    if (started == config->threads)
        progress_loop(shared, workers);
    for (uint32_t t = 0; t < started; t++)
        pthread_join(workers[t].thread, NULL);
    if (started < config->threads) {
        snprintf(error, error_size, "cannot start threads");
        return -1;
    }
    return 0;
}

static void report_sum(const struct loadgen_shared *shared, const struct worker *workers,
                       struct loadgen_report *report)
{
    report_init(report);
    int64_t last_ns = shared->start_ns;
    for (uint32_t t = 0; t < shared->config->threads; t++) {
        const struct loadgen_report *part = &workers[t].report;
        report->requests += part->requests;
        report->reserves += part->reserves;
        report->completes += part->completes;
        report->allowed += part->allowed;
        report->denied += part->denied;
        report->errors += part->errors;
        report->connection_errors += part->connection_errors;
        loadgen_histogram_merge(&report->latency_ns, &part->latency_ns);
        if (workers[t].last_answer_ns > last_ns)
            last_ns = workers[t].last_answer_ns;
    }
    report->elapsed_seconds = (double)(last_ns - shared->start_ns) / 1e9;
}

int loadgen_run(const struct loadgen_config *config, struct loadgen_report *report, char *error,
                size_t error_size)
{
    assert(config->connections >= 1);
    assert(config->connections <= LOADGEN_CONNECTIONS_MAX);
    assert(config->threads >= 1);
    assert(config->threads <= LOADGEN_THREADS_MAX);
    assert(config->threads <= config->connections);
    assert(config->key_count >= 1 || config->mode == LOADGEN_POST);
    assert(config->key_count <= LOADGEN_KEYS_MAX);
    assert(config->mode != LOADGEN_POST ||
           (config->post_path != NULL && config->post_body != NULL));
    assert(config->batch_size >= 1);
    assert(config->batch_size <= LOADGEN_BATCH_SIZE_MAX);
    struct loadgen_shared shared;
    int rc = shared_init(&shared, config, error, error_size);
    struct worker *workers = calloc(config->threads, sizeof(*workers));
    struct connection *connections = calloc(config->connections, sizeof(*connections));
    if (rc == 0 && (workers == NULL || connections == NULL)) {
        snprintf(error, error_size, "out of memory");
        rc = -1;
    }
    if (rc == 0) {
        for (uint32_t t = 0; t < config->threads; t++)
            workers[t].epoll_fd = -1;
        for (uint32_t i = 0; i < config->connections; i++)
            connections[i].fd = -1;
        rc = workers_prepare(&shared, workers, connections, error, error_size);
    }
    if (rc == 0)
        rc = run_threads(&shared, workers, error, error_size);
    if (rc == 0)
        report_sum(&shared, workers, report);
    if (workers != NULL && connections != NULL)
        workers_free(workers, config->threads, connections, config->connections);
    else {
        free(workers);
        free(connections);
    }
    free(shared.requirements_tail);
    free(shared.actuals_tail);
    return rc;
}

/* ---- the report ---------------------------------------------------------------- */

static double per_second(uint64_t count, double seconds)
{
    return seconds > 0 ? (double)count / seconds : 0.0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

void loadgen_report_print(FILE *out, const struct loadgen_config *config,
                          const struct loadgen_report *report)
{
    const struct loadgen_histogram *latency = &report->latency_ns;
    fprintf(out, "mode %s, %u connections, %u thread(s), %u s", loadgen_mode_name(config->mode),
            config->connections, config->threads, config->duration_seconds);
    if (config->mode == LOADGEN_BATCH)
        fprintf(out, ", %u reserves per request", config->batch_size);
    fprintf(out, "\n");
    fprintf(out, "  requests:     %" PRIu64 " in %.2f s = %.0f requests/s\n", report->requests,
            report->elapsed_seconds, per_second(report->requests, report->elapsed_seconds));
    fprintf(out,
            "  reservations: %" PRIu64 " = %.0f reservations/s (allowed %" PRIu64
            ", denied %" PRIu64 ")\n",
            report->reserves, per_second(report->reserves, report->elapsed_seconds),
            report->allowed, report->denied);
    if (config->mode == LOADGEN_RESERVE_COMPLETE)
        fprintf(out, "  completes:    %" PRIu64 " = %.0f completes/s\n", report->completes,
                per_second(report->completes, report->elapsed_seconds));
    fprintf(out, "  errors:       %" PRIu64 " (connection errors %" PRIu64 ")\n", report->errors,
            report->connection_errors);
    fprintf(out, "  latency ms:   p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
            ms(loadgen_histogram_percentile(latency, 0.50)),
            ms(loadgen_histogram_percentile(latency, 0.99)),
            ms(loadgen_histogram_percentile(latency, 0.999)), ms(latency->max));
}

void loadgen_report_print_json(FILE *out, const struct loadgen_config *config,
                               const struct loadgen_report *report)
{
    const struct loadgen_histogram *latency = &report->latency_ns;
    fprintf(out,
            "{\"mode\":\"%s\",\"connections\":%u,\"threads\":%u,\"batch_size\":%u,"
            "\"elapsed_seconds\":%.3f,\"requests\":%" PRIu64 ",\"requests_per_second\":%.0f,"
            "\"reservations\":%" PRIu64 ",\"reservations_per_second\":%.0f,"
            "\"completes\":%" PRIu64 ",\"allowed\":%" PRIu64 ",\"denied\":%" PRIu64
            ",\"errors\":%" PRIu64 ",\"connection_errors\":%" PRIu64
            ",\"latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f}}\n",
            loadgen_mode_name(config->mode), config->connections, config->threads,
            config->mode == LOADGEN_BATCH ? config->batch_size : 1, report->elapsed_seconds,
            report->requests, per_second(report->requests, report->elapsed_seconds),
            report->reserves, per_second(report->reserves, report->elapsed_seconds),
            report->completes, report->allowed, report->denied, report->errors,
            report->connection_errors, ms(loadgen_histogram_percentile(latency, 0.50)),
            ms(loadgen_histogram_percentile(latency, 0.99)),
            ms(loadgen_histogram_percentile(latency, 0.999)), ms(latency->max));
}
