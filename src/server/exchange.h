/* One HTTP exchange as the server sees it (a request and its answer) and
 * the API the route handlers answer through (exchange.c). */
#ifndef LLMLIMIT_SERVER_EXCHANGE_H
#define LLMLIMIT_SERVER_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"
#include "router.h"
#include "util/arena.h"
#include "util/buffer.h"
#include "util/jdoc.h"

struct server;

enum exchange_phase {
    PHASE_RECEIVING = 0, /* not at the backend yet */
    PHASE_WAITING = 1,   /* the backend call is in flight */
    PHASE_DONE = 2,      /* the backend called done: results are written */
    PHASE_SUSPENDED = 3, /* waiting, and the handler has returned: done wakes the exchange */
};

/* A handler's state and a parsed body without a heap block: a single
 * reserve's state (its request, result, entries and wait ticket, about
 * 2.2 KiB: handlers_data.c checks it leaves 4 KiB) and its document. */
#define EXCHANGE_ARENA_INLINE 6400
#define EXCHANGE_REPLY_INLINE 1024 /* a single reserve/complete/release answer */
#define EXCHANGE_HEADERS_MAX 24    /* headers of one answer besides the transport's */

struct exchange;

typedef int (*exchange_fn)(struct exchange *exchange);

/* One request and its answer, as the server sees it: the transport's
 * exchange (src/http/http.h) with what the routes need beside it. Made by
 * the transport through the server's pool, freed once answered. */
struct exchange {
    struct http_exchange http; /* first: the transport hands this pointer around */
    struct server *server;
    const struct route *route;
    enum http_method method;
    const char *key_encoded; /* {key} of item routes, inside the path */
    char *body;              /* the request body (NUL-terminated; parsed in place) */
    size_t body_length;
    int64_t started_ns;
    unsigned refused_status;   /* answer decided from the headers, given after the body */
    const char *refused_error; /* static string */
    bool called;               /* a backend data call was made */
    int phase;                 /* enum exchange_phase, atomic */
    exchange_fn reply;         /* writes the answer once the backend is done */
    void (*pump)(struct exchange *exchange);    /* a paced answer's writer (exchange_stream_*) */
    void (*cleanup)(struct exchange *exchange); /* set by a handler: frees what it attached */
    /* A handler's own while its backend call or offloaded work runs, typed
     * by the handler alone (in the arena, or freed by its cleanup): a data
     * request's or a batch's (handlers_data.c), a gateway call
     * (gateway_internal.h), an admin change (handlers_admin.c,
     * handlers_keys.c). NULL until the handler sets it. */
    void *handler_state;
    struct {
        void (*work)(struct exchange *exchange); /* run on the offload thread */
        exchange_fn reply;
        bool refused; /* the offload thread had OFFLOAD_JOBS_MAX jobs waiting */
        int holds;    /* atomic: work running, and a deferred finish (exchange_offload_defer) */
    } offload;
    const struct jdoc_value *document; /* the parsed body (in the arena and the body) */
    struct exchange *next_free;        /* in the server's pool */
    struct arena arena;
    char reply_inline[EXCHANGE_REPLY_INLINE];
    _Alignas(16) char arena_storage[EXCHANGE_ARENA_INLINE];
};

/* exchange.c: the server on the HTTP layer. */
int server_http_start(struct server *server, char *error, size_t error_size);
/* Frees the idle exchanges of the pool (at shutdown). */
void exchange_pool_free(struct server *server);

/* Has the exchange been answered? */
static inline bool exchange_answered(const struct exchange *exchange)
{
    return exchange->http.status != 0;
}

/* Answers. A route's own headers (Content-Type, Retry-After, Allow, ...) are
 * added; the body's bytes are sent or copied before it returns. Each
 * returns 0. */
int exchange_answer(struct exchange *exchange, unsigned status, struct buffer *body,
                    int64_t retry_after_ms);
/* exchange_answer with one more header (name and value static or outliving
 * the call), or none when name is NULL. */
int exchange_answer_with(struct exchange *exchange, unsigned status, struct buffer *body,
                         int64_t retry_after_ms, const char *name, const char *value);
/* The same with the caller's headers (Content-Type among them, when the
 * route's is not wanted) instead of the route's. */
int exchange_answer_raw(struct exchange *exchange, unsigned status,
                        const struct http_header *headers, size_t count, const char *body,
                        size_t length);
/* exchange_answer_raw's head only (http_answer_begin): the body's length
 * bytes follow through exchange_stream_write, paced by pump, so that a
 * large body is never copied whole; body is only logged. pump runs now
 * and each time the client's socket takes more (or more is ready,
 * http_wake). Returns 0. */
int exchange_answer_begin(struct exchange *exchange, unsigned status,
                          const struct http_header *headers, size_t count, const char *body,
                          size_t length, void (*pump)(struct exchange *exchange));
/* A streamed answer of unknown length (chunked): its head, then pump as
 * above. Returns 0. */
int exchange_stream_begin(struct exchange *exchange, unsigned status,
                          const struct http_header *headers, size_t count,
                          void (*pump)(struct exchange *exchange));
/* In a pump: whether the answer is still open, how many bytes it takes
 * now (0: wait for the next pump), a write of at most that many, its end. */
bool exchange_streaming(const struct exchange *exchange);
size_t exchange_stream_room(const struct exchange *exchange);
void exchange_stream_write(struct exchange *exchange, const char *bytes, size_t length);
void exchange_stream_end(struct exchange *exchange);
/* {"error": error}, plus "ok": false on complete/release routes. */
int exchange_error(struct exchange *exchange, unsigned status, const char *error);
/* A query argument, percent-decoded into out: 1 found, 0 absent, -1 (bad
 * escape or too long) answered 400. */
int exchange_query(struct exchange *exchange, const char *name, char *out, size_t out_size);
/* An integer query argument in min..max: 1 found (*out set), 0 absent, -1
 * answered 400 ("<name>: must be an integer <min>..<max>"). */
int exchange_query_i64(struct exchange *exchange, const char *name, int64_t min, int64_t max,
                       int64_t *out);
/* The {key} of an item route, percent-decoded and checked into key (room
 * for key_size > LIMIT_KEY_LENGTH_MAX bytes): 0, or -1 answered 400. */
int exchange_path_key(struct exchange *exchange, char *key, size_t key_size);
/* 404 "unknown_limit_key: <key>". */
int exchange_unknown_key(struct exchange *exchange, const char *key);
/* A request header's value, NUL-terminated, or NULL (name in lower case). */
const char *exchange_header(struct exchange *exchange, const char *name);
/* Parses the body (in place, into the arena) into exchange->document; on
 * failure answers 400 and returns NULL. */
const struct jdoc_value *exchange_parse_body(struct exchange *exchange);
/* Runs call(exchange), which starts one backend data-path call with
 * exchange_backend_done as its done callback, then answers with reply()
 * once done has run: at once if the backend finished synchronously, else
 * on the exchange's worker when done wakes it. */
int exchange_call_backend(struct exchange *exchange, void (*call)(struct exchange *),
                          exchange_fn reply);
void exchange_backend_done(void *context);

/* Runs work(exchange) on the offload thread (offload.h), as
 * exchange_call_backend runs a backend call, then reply() on the
 * exchange's worker. 503 admin_queue_full when OFFLOAD_JOBS_MAX jobs wait
 * already (work never runs), 503 shutting_down as exchange_call_backend. */
int exchange_call_offload(struct exchange *exchange, void (*work)(struct exchange *),
                          exchange_fn reply);

/* Called by an offloaded work that finishes later, from any thread: the
 * reply waits until exchange_offload_resume(exchange) is called too (once;
 * it may be called before the work returns). */
void exchange_offload_defer(struct exchange *exchange);
void exchange_offload_resume(struct exchange *exchange);

/* A buffer on the exchange's reply storage (stable). */
void exchange_reply_buffer(struct exchange *exchange, struct buffer *buffer);

#endif
