/* llmlimitd's insides, shared by the files of src/server/: the server
 * object, one HTTP exchange (a request and its answer), and the route
 * handlers. main.c only sees server_run(). */
#ifndef LLMLIMIT_SERVER_SERVER_H
#define LLMLIMIT_SERVER_SERVER_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/arena.h"
#include "activity.h"
#include "auth.h"
#include "backend/backend.h"
#include "backend/sqlite/sqlite.h"
#include "backend/tigerbeetle/tigerbeetle.h"
#include "util/buffer.h"
#include "config.h"
#include "listener.h"
#include "core/clock.h"
#include "util/jdoc.h"
#include "metrics.h"
#include "registry.h"
#include "router.h"
#include "spend.h"
#include "watch.h"

struct server {
    struct server_config config;
    struct clock *clock; /* the system clock, or test_clock with --test-clock */
    struct clock_offset test_clock;
    struct backend *backend;
    struct gateway *gateway;               /* NULL: gateway mode is off */
    struct sq_options sqlite_options;      /* the backend's options, when it is sqlite */
    struct tb_options tigerbeetle_options; /* ... or tigerbeetle */
    struct registry *registry;
    int data_dir_lock_fd; /* holds the data directory's lock (data_dir.h); -1 before */
    struct metrics *metrics;
    struct activity *activity; /* recent reserves and denials (the console) */
    struct spend *spend;       /* budget spend history (the console) */
    int64_t started_at_unix_ms;
    struct auth auth;
    struct MHD_Daemon *daemon;
    const struct router *router; /* the routes it answers (routes.c) */
    struct watch_list watches;   /* the request deadline */
    struct listener listener;    /* accepts the connections */
    struct lane *lane;           /* the direct path (lane.h), or NULL */
    pthread_t ticker;
    bool ticker_started;
    pthread_mutex_t ticker_mutex;
    pthread_cond_t ticker_cond; /* CLOCK_MONOTONIC */
    bool ticker_stop;
    bool ticker_cond_ready;
    bool ready;                 /* registry loaded into the backend */
    int draining;               /* atomic: answers carry Connection: close */
    int closing;                /* atomic: no new backend calls (503) */
    int64_t backend_calls;      /* atomic: data-path calls whose done has not run */
    int64_t open_requests;      /* atomic: from the request line to the completion */
    int64_t receiving_requests; /* atomic: open requests whose body is not complete */
    pthread_mutex_t pool_mutex; /* idle exchanges kept for reuse */
    struct exchange *pool;
    uint32_t pool_count;
};

/* Runs llmlimitd until SIGTERM/SIGINT; returns the process exit code. */
int server_run(const struct server_config *config);

enum exchange_phase {
    PHASE_RECEIVING = 0, /* reading the body, or not at the backend yet */
    PHASE_WAITING = 1,   /* the backend call is in flight */
    PHASE_DONE = 2,      /* the backend called done: results are written */
    PHASE_SUSPENDED = 3, /* waiting, and the connection is suspended */
};

#define EXCHANGE_BODY_INLINE 1536
#define EXCHANGE_ARENA_INLINE 4096 /* a parsed single reserve fits: no heap block */
#define EXCHANGE_REPLY_INLINE 1024 /* a single reserve/complete/release answer */

struct batch;
struct exchange;
struct gw_call;

typedef enum MHD_Result (*exchange_fn)(struct exchange *exchange);

/* One request/answer. Owned by the HTTP layer: created at the request line,
 * freed when MHD reports the request completed. */
struct exchange {
    struct server *server;
    struct MHD_Connection *connection;
    struct watch *watch; /* of the connection; NULL if unwatched */
    const struct route *route;
    enum method method;
    const char *key_encoded; /* {key} of item routes, inside MHD's URL */
    int64_t started_ns;
    unsigned status;           /* 0 until an answer is queued */
    unsigned refused_status;   /* answer decided from the headers, given after the body */
    const char *refused_error; /* static string */
    bool body_too_large;
    bool body_alloc_failed;
    uint64_t dropped_bytes;                     /* body bytes read and thrown away */
    bool called;                                /* a backend data call was made */
    bool receiving;                             /* counted in receiving_requests */
    int phase;                                  /* enum exchange_phase, atomic */
    exchange_fn reply;                          /* writes the answer once the backend is done */
    void (*cleanup)(struct exchange *exchange); /* set by a handler: frees what it attached */
    struct gw_call *gateway_call;               /* a gateway call's (gateway.c) */
    const struct jdoc_value *document;          /* the parsed body (in the arena and the body) */
    struct batch *batch;                        /* in the arena */
    struct exchange *next_free;                 /* in the server's pool */
    struct lane_conn *lane;                     /* the direct path's connection, or NULL: MHD's */
    struct exchange *lane_next;                 /* in its worker's queue (lane.c) */
    bool direct_close;                          /* the direct request asked for Connection: close */
    struct arena arena;
    char *body;
    size_t body_length;
    size_t body_capacity;
    union {
        struct {
            struct reserve_request request;
            struct reserve_result result;
            struct requirement requirements[REQUIREMENTS_PER_RESERVE_MAX];
        } reserve;
        struct {
            struct complete_request request;
            struct complete_result result;
            struct actual actuals[REQUIREMENTS_PER_RESERVE_MAX];
        } complete;
        struct {
            struct release_request request;
            struct release_result result;
        } release;
    } op;
    char body_inline[EXCHANGE_BODY_INLINE];
    /* Answers written here (or in the arena) are handed to MHD without a
     * copy: the exchange outlives the sending of its answer. */
    char reply_inline[EXCHANGE_REPLY_INLINE];
    _Alignas(16) char arena_storage[EXCHANGE_ARENA_INLINE];
};

struct lane_head;
/* The direct path (lane.c): an exchange for a request it took (NULL: out of
 * memory), counted open; run it (answered, or waiting for the backend);
 * answer it once the backend is done; count and free it once answered. */
struct exchange *exchange_direct(struct server *server, struct lane_conn *conn,
                                 const struct route *route, char *data,
                                 const struct lane_head *head);
void exchange_direct_run(struct exchange *exchange);
void exchange_direct_resumed(struct exchange *exchange);
void exchange_complete(struct exchange *exchange);

/* Frees the idle exchanges of the pool (at shutdown). */
void http_pool_free(struct server *server);

/* http.c: the MHD daemon. */
int http_start(struct server *server, char *error, size_t error_size);
/* Stops accepting; in-flight requests go on. */
void http_quiesce(struct server *server);
void http_stop(struct server *server);

/* Answers. Each queues the response and returns MHD's verdict. A body
 * marked stable (buffer.stable: storage in the exchange or its arena) is
 * sent from where it is. */
enum MHD_Result exchange_answer(struct exchange *exchange, unsigned status, struct buffer *body,
                                int64_t retry_after_ms);
/* {"error": error}, plus "ok": false on complete/release routes. */
enum MHD_Result exchange_error(struct exchange *exchange, unsigned status, const char *error);
/* A query argument, percent-decoded into out: 1 found, 0 absent, -1 (bad
 * escape or too long) answered 400. */
int exchange_query(struct exchange *exchange, const char *name, char *out, size_t out_size);
/* Parses the body (in place, into the arena) into exchange->document; on
 * failure answers 400 and returns NULL. */
const struct jdoc_value *exchange_parse_body(struct exchange *exchange);
/* Runs call(exchange), which starts one backend data-path call with
 * exchange_backend_done as its done callback, then answers with reply()
 * once done has run: at once if the backend finished synchronously, else
 * after suspending and resuming the connection. */
enum MHD_Result exchange_call_backend(struct exchange *exchange, void (*call)(struct exchange *),
                                      exchange_fn reply);
void exchange_backend_done(void *context);

/* A buffer on the exchange's reply storage (stable). */
void exchange_reply_buffer(struct exchange *exchange, struct buffer *buffer);

#endif
