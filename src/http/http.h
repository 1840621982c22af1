/* llmlimit's HTTP/1.1 server (docs/architecture.md, "HTTP"): its own
 * accepting thread, a few worker threads with an epoll set each, and one
 * exchange per request. It knows nothing of limits: the server above it
 * (src/server) routes and answers through the functions below.
 *
 * An exchange is a request and its one answer. The transport creates it
 * once a request's head is whole (handlers.open), lets the server look at
 * the head (handlers.begin), reads the body, and hands it over
 * (handlers.run). The server answers on the worker's thread: at once, or
 * later after http_wake() from any thread has the worker call the
 * exchange's on_wake. Every exchange gets exactly one answer, a whole one
 * (http_answer) or a stream (http_stream_begin, http_stream_write,
 * http_stream_end), even when its client has gone: the transport frees it
 * (handlers.close) once the answer is given and the handler's call has
 * returned. */
#ifndef LLMLIMIT_HTTP_H
#define LLMLIMIT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http_head.h"

#define HTTP_HEAD_INLINE_BYTES 1024 /* a usual head is copied here, not to the heap */
#define HTTP_BODY_INLINE_BYTES 1536 /* a single reserve's body fits */

struct http_server;
struct http_conn;
struct http_exchange;

typedef void (*http_exchange_fn)(struct http_exchange *exchange);

struct http_exchange {
    /* The request, valid until the exchange is freed (its head: below). */
    char *head_bytes; /* a NUL follows the head */
    char *body;       /* body_length bytes, then a NUL */
    size_t body_length;
    /* Set by the server. */
    http_exchange_fn on_wake; /* the worker calls it after http_wake() */
    http_exchange_fn on_gone; /* the client closed or reset (NULL: nothing to do) */
    bool discard_body;        /* set in begin: the body is read and dropped */
    /* The transport's. */
    struct http_conn *conn;
    unsigned status; /* 0 until an answer is given */
    bool streaming;  /* a stream was begun and has not ended */
    bool sized;      /* ... a whole answer given in pieces (http_answer_begin) */
    bool answered;   /* the whole answer has been given */
    bool gone;       /* the client closed or reset the connection */
    bool body_too_large;
    bool body_alloc_failed;
    bool receiving;   /* the body is not complete yet */
    bool wake_queued; /* in its worker's queue (under its mutex) */
    bool freeing;     /* freed once out of that queue */
    size_t body_capacity;
    uint64_t dropped_bytes;
    uint64_t sized_left; /* bytes of a sized answer still to be written */
    struct http_exchange *wake_next;
    /* After the fields above, so that what answering reads of the head is
     * near them; its table of fields, filled up to field_count by the
     * parser, is never cleared (http_exchange_init). */
    struct http_head head; /* offsets into head_bytes */
    char head_inline[HTTP_HEAD_INLINE_BYTES];
    char body_inline[HTTP_BODY_INLINE_BYTES];
};

struct http_header;

struct http_handlers {
    /* A new exchange for the request being read (NULL: out of memory, the
     * connection is closed). The transport initialises its fields with
     * http_exchange_init. */
    struct http_exchange *(*open)(void *context);
    /* The head is whole (path, method, fields): route and check it; a
     * refusal (404, 401, ...) is remembered and answered from run, after
     * the body, with discard_body set. */
    void (*begin)(void *context, struct http_exchange *exchange);
    /* The body is in (or dropped): answer now or later. */
    void (*run)(void *context, struct http_exchange *exchange);
    /* The answer is given and out (or the connection died): free it. */
    void (*close)(void *context, struct http_exchange *exchange);
    /* The body of an error the transport answers itself (a malformed head,
     * a body over the limit): the server writes it in the shape of the
     * route (path, when known) into out (at most out_size bytes); returns
     * the length and sets *content_type, and *header when the answer
     * carries one more header (its name and value static text; left
     * {NULL, NULL} for none). */
    size_t (*error_body)(void *context, const char *path, size_t path_length, unsigned status,
                         const char *error, char *out, size_t out_size, const char **content_type,
                         struct http_header *header);
};

struct http_config {
    const struct sockaddr *address;
    socklen_t address_length;
    uint32_t workers;         /* 1..HTTP_WORKERS_MAX */
    uint32_t max_connections; /* open at once; more wait in the listen queue */
    uint64_t max_body_bytes;
    int64_t idle_ms;    /* a connection with no byte coming is closed after this */
    int64_t request_ms; /* ... and one that completes no request */
    int64_t stall_ms;   /* ... and one whose client does not take its answer */
    const struct http_handlers *handlers;
    void *context;
};

#define HTTP_WORKERS_MAX 64

/* Binds, listens and starts the threads. 0 with *out, or -1 with errno set
 * and a reason in error. */
int http_start(const struct http_config *config, struct http_server **out, char *error,
               size_t error_size);
/* The bound port (the kernel's pick for port 0). */
uint16_t http_port(const struct http_server *server);
/* Stops accepting (clients connecting from now on are refused), closes idle
 * connections, and makes every answer from now on close its connection. */
void http_quiesce(struct http_server *server);
/* Exchanges alive, and those among them whose body is still arriving. */
void http_counts(const struct http_server *server, int64_t *open, int64_t *receiving);
/* Stops the workers and closes every connection: after every exchange's
 * work has finished (no http_wake may come later). NULL is ignored. */
void http_stop(struct http_server *server);

struct http_stats {
    uint64_t connections;  /* accepted */
    uint64_t requests;     /* exchanges opened */
    uint64_t bad_requests; /* heads or bodies refused by the transport */
    uint64_t closed_idle;  /* closed for the idle or request deadline */
    uint64_t closed_stalled;
    uint64_t wakes_taken_over; /* exchanges of a sleeping worker answered by another's thread */
};
void http_stats(const struct http_server *server, struct http_stats *out);

/* ---- exchanges (the worker's thread, except http_wake) ---- */

/* Zeroes the transport's part of a new or reused exchange. */
void http_exchange_init(struct http_exchange *exchange);

/* The request's path (still percent-encoded), NUL-terminated by a copy in
 * out when it fits: the path, or NULL when longer than out_size - 1. */
const char *http_path(const struct http_exchange *exchange, char *out, size_t out_size);
/* The query string after '?', without it ("" when none), and its length. */
const char *http_query(const struct http_exchange *exchange, size_t *length);
/* A field's value (name in lower case), or NULL. Not NUL-terminated. */
const char *http_field(const struct http_exchange *exchange, const char *name, size_t *length);
static inline enum http_method http_method(const struct http_exchange *exchange)
{
    return exchange->head.method;
}

struct http_header {
    const char *name;
    const char *value; /* NUL-terminated */
};

/* The whole answer: status, headers (Date, Content-Length and Connection
 * are the transport's), body (NULL with 0). The bytes are sent or copied
 * before it returns. */
void http_answer(struct http_exchange *exchange, unsigned status, const struct http_header *headers,
                 size_t count, const char *body, size_t length);

/* A whole answer of `length` bytes given in pieces, so that its bytes need
 * not be copied at once: the head now, with Content-Length, then exactly
 * `length` bytes through http_stream_write, then http_stream_end; paced
 * like a stream (http_stream_pending). */
void http_answer_begin(struct http_exchange *exchange, unsigned status,
                       const struct http_header *headers, size_t count, uint64_t length);

/* A streamed answer: the head now (chunked on HTTP/1.1, ended by closing the
 * connection on HTTP/1.0), then pieces, then the end. */
void http_stream_begin(struct http_exchange *exchange, unsigned status,
                       const struct http_header *headers, size_t count);
void http_stream_write(struct http_exchange *exchange, const char *bytes, size_t length);
void http_stream_end(struct http_exchange *exchange);
/* Bytes written but not yet taken by the client's socket: a producer gives
 * more only below HTTP_STREAM_HIGH_WATER; on_wake is called again once they
 * drain below half of it. */
size_t http_stream_pending(const struct http_exchange *exchange);
#define HTTP_STREAM_HIGH_WATER (256 * 1024)

/* Any thread: the worker calls the exchange's on_wake soon, on its thread
 * (several wakes before that run it once). Never after the exchange has
 * been answered in full. */
void http_wake(struct http_exchange *exchange);

/* Whether the server is draining (answers close their connection). */
bool http_draining(const struct http_exchange *exchange);

#endif
