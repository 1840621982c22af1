/* The HTTP load generator behind `llmlimit bench`: raw HTTP/1.1 over N
 * keep-alive connections driven by epoll, closed loop (one request in flight
 * per connection), so that it costs the server's cores as little as
 * possible. No allocation after start-up; latency goes to a log histogram. */
#ifndef LLMLIMIT_LOADGEN_LOADGEN_H
#define LLMLIMIT_LOADGEN_LOADGEN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loadgen_histogram.h"

#define LOADGEN_KEYS_MAX 64 /* requirements per reserve (the server's bound) */
#define LOADGEN_CONNECTIONS_MAX 10000
#define LOADGEN_THREADS_MAX 64
#define LOADGEN_BATCH_SIZE_MAX 8189
#define LOADGEN_DURATION_SECONDS_MAX 86400
#define LOADGEN_HOST_LENGTH_MAX 255
#define LOADGEN_TOKEN_LENGTH_MAX 4096
#define LOADGEN_POST_BODY_BYTES_MAX (1u << 20)
#define LOADGEN_POST_ANSWER_BYTES_MAX (1u << 20)
#define LOADGEN_HEADERS_BYTES_MAX 1024 /* --header lines together, CRLFs included */
/* After the run, answers still in flight get this long to arrive. */
#define LOADGEN_DRAIN_MS 2000

enum loadgen_mode {
    LOADGEN_RESERVE = 0,          /* POST /v1/reserve */
    LOADGEN_RESERVE_COMPLETE = 1, /* reserve, then complete each allowed lease */
    LOADGEN_BATCH = 2,            /* POST /v1/reserve/batch with batch_size reserves */
    LOADGEN_POST = 3,             /* POST post_body to post_path (a gateway route, say) */
};

/* Lease ids: UUIDv7 (time-ordered, what the llmlimit clients generate and
 * docs/api.md recommends) or random (UUIDv4-like, the worst case for a
 * database keyed by lease id). */
enum loadgen_ids {
    LOADGEN_IDS_UUIDV7 = 0,
    LOADGEN_IDS_RANDOM = 1,
};

struct loadgen_config {
    char host[LOADGEN_HOST_LENGTH_MAX + 1];
    char port[8];
    const char *token; /* NULL: no Authorization header */
    /* More header lines for every request ("Name: value\r\n" each, "":
     * none): an MCP session id, say (bench/mcp). */
    char headers[LOADGEN_HEADERS_BYTES_MAX + 1];
    uint32_t connections;
    uint32_t threads;
    uint32_t duration_seconds;
    enum loadgen_mode mode;
    uint32_t batch_size;
    enum loadgen_ids ids;
    uint32_t key_count;
    const char *keys[LOADGEN_KEYS_MAX];
    uint64_t amounts[LOADGEN_KEYS_MAX];
    /* LOADGEN_POST: the path and the body of every request (not copied;
     * at most LOADGEN_POST_BODY_BYTES_MAX bytes). A 200 counts as allowed,
     * an answer framed by Content-Length or chunked (a stream). No keys. */
    const char *post_path;
    const char *post_body;
    size_t post_body_length;
    bool progress;         /* a line each second */
    FILE *progress_output; /* where progress goes (stderr) */
};

/* Defaults: 50 connections, 1 thread, 10 s, reserve, batch 64. */
void loadgen_config_defaults(struct loadgen_config *config);

/* Takes host and port from "http://HOST:PORT" (a trailing '/' allowed).
 * Returns 0, or -1 for anything else (https is not supported). */
int loadgen_config_url(struct loadgen_config *config, const char *url);

struct loadgen_report {
    double elapsed_seconds; /* from the first request to the last answer */
    uint64_t requests;      /* HTTP requests answered */
    uint64_t reserves;      /* reservations decided (batch: items) */
    uint64_t completes;     /* completes answered ok */
    uint64_t allowed;
    uint64_t denied;
    uint64_t errors;                     /* non-200, unparseable answers, failed items */
    uint64_t connection_errors;          /* connects that failed, connections lost */
    struct loadgen_histogram latency_ns; /* per HTTP request */
};

/* Runs the load. Returns 0 with the report filled, or -1 with a reason in
 * error (no connection could be made, out of memory at start-up). */
int loadgen_run(const struct loadgen_config *config, struct loadgen_report *report, char *error,
                size_t error_size);

/* The figures, as text lines or one JSON object. */
void loadgen_report_print(FILE *out, const struct loadgen_config *config,
                          const struct loadgen_report *report);
void loadgen_report_print_json(FILE *out, const struct loadgen_config *config,
                               const struct loadgen_report *report);

const char *loadgen_mode_name(enum loadgen_mode mode);
int loadgen_mode_parse(const char *name, enum loadgen_mode *out);

#endif
