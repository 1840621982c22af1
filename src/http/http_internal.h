/* What the files of src/http share. Calls go one way, top to bottom:
 *   http_worker.c   the loops, start and stop
 *   http_answer.c   answers and streams, written on a connection
 *   http_conn.c     a connection's reading, writing and closing
 *   http_wake.c     the wake queue and the ready list
 *   http_list.c, http_status.c, http_listener.c, http_head.c, http_chunked.c
 * (a lower file reaches a higher one only through a function pointer: the
 * server's handlers, an exchange's on_wake, the listener's adopt). */
#ifndef LLMLIMIT_HTTP_INTERNAL_H
#define LLMLIMIT_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http.h"
#include "http_chunked.h"

/* ---- timer lists: every entry of one list has the same timeout, so each
 * list is in deadline order by construction and a sweep pops from its head:
 * the cost is what expires, never what is open. */

struct http_link {
    struct http_link *previous;
    struct http_link *next;
    int64_t at_ms; /* when the entry joined (or last moved) */
    bool linked;
};

struct http_list {
    struct http_link *head;
    struct http_link *tail;
};

void http_list_push(struct http_list *list, struct http_link *link, int64_t now_ms);
void http_list_remove(struct http_list *list, struct http_link *link);
/* Moves the link to the tail with a new time (it must be in the list). */
void http_list_touch(struct http_list *list, struct http_link *link, int64_t now_ms);

/* ---- connections */

enum http_conn_state {
    CONN_HEAD = 0, /* waiting for (the rest of) a request head; idle when nothing came */
    CONN_BODY,     /* reading the body of conn->exchange */
    CONN_RUNNING,  /* the exchange is with the server, or its answer is being written */
    CONN_LINGER,   /* the answer is out and writing is shut: draining what the client sends */
};

#define HTTP_ANSWER_HEAD_BYTES 2048 /* the status line and every header of one answer */
#define HTTP_READ_BYTES (16 * 1024)          /* one recv's room */
#define HTTP_PIPELINE_BYTES_MAX (256 * 1024) /* input read ahead while a request runs */
#define HTTP_TURN_REQUESTS_MAX 16            /* requests one connection is served per turn */
#define HTTP_TURN_BYTES_MAX (64 * 1024)      /* ... and request bytes, past the first request */
#define HTTP_LINGER_MS 2000                  /* reading after a close, before the close */
#define HTTP_LINGER_BYTES_MAX (256 * 1024)

struct http_conn {
    int fd;
    struct http_worker *worker;
    enum http_conn_state state;
    struct http_exchange *exchange; /* the request being read or answered */
    /* Input read but not yet consumed: in[in_start, in_length). */
    char *in;
    size_t in_start;
    size_t in_length;
    size_t in_capacity;
    size_t head_scanned; /* http_head_end's search so far; 0 when the input moves */
    /* The body being read. */
    uint64_t body_left; /* Content-Length bodies */
    bool body_chunked;
    struct http_chunked chunked;
    /* Output not yet taken by the socket. */
    char *out;
    size_t out_start;
    size_t out_length;
    size_t out_capacity;
    bool readable;     /* input may be waiting: read until EAGAIN before sleeping */
    bool peer_closed;  /* the client sends nothing more (EOF, reset) */
    bool close_after;  /* close once the current answer is out */
    bool write_failed; /* the socket refused bytes: nothing more is sent */
    bool in_ready;     /* in the worker's ready list */
    bool dead;         /* closed: freed at the end of the round */
    bool writable_armed;
    uint64_t linger_bytes;
    uint64_t turn_bytes;       /* request bytes taken in this turn */
    struct http_link reading;  /* CONN_HEAD/BODY: the request deadline */
    struct http_link activity; /* CONN_HEAD/BODY: the idle deadline, moved by each byte */
    struct http_link stalled;  /* output waiting: the stall deadline, moved by progress */
    struct http_link linger;   /* CONN_LINGER */
    struct http_link all;      /* every connection of the worker, from its first event */
    bool started;              /* had its first event */
    struct http_conn *ready_next;
    struct http_conn *dead_next;
};

struct http_worker {
    struct http_server *server;
    int epoll_fd;
    int wake_fd;
    pthread_t thread;
    bool started;
    pthread_mutex_t mutex; /* the wake queue */
    struct http_exchange *wake_head;
    struct http_exchange *wake_tail;
    /* Held by the worker's thread while it runs, released only while it
     * sleeps in epoll_wait: another worker's thread that has woken one of
     * this one's exchanges takes it (trylock, never waits) and answers the
     * exchange itself instead of waking this thread (pay_wakes, http_worker.c). */
    pthread_mutex_t run_lock;
    /* Under run_lock. */
    int64_t sleep_until_ms; /* when epoll_wait returns by itself */
    bool loop_done;         /* the loop has ended: nobody takes its wakes */
    struct http_list reading;
    struct http_list activity;
    struct http_list stalled;
    struct http_list linger;
    struct http_list all;
    bool wakes_local; /* wakes queued from this thread: taken before it sleeps */
    struct http_conn *ready_head; /* connections with input left after their turn */
    struct http_conn *ready_tail;
    struct http_conn *dead;
    uint32_t conn_count;
    bool quiesced; /* saw the server's quiesce */
    char scratch[HTTP_READ_BYTES];
};

/* ---- the listener */

struct http_listener {
    int fd;
    uint16_t port;
    uint32_t limit;
    pthread_mutex_t mutex;
    pthread_cond_t freed; /* a connection closed, or stopping */
    uint32_t open;
    bool stopping;
    bool running;
    pthread_t thread;
    void (*adopt)(void *context, int fd);
    void *adopt_context;
};

int http_listener_open(struct http_listener *listener, const struct sockaddr *address,
                       socklen_t address_length, uint32_t limit);
int http_listener_start(struct http_listener *listener);
void http_listener_closed_one(struct http_listener *listener);
void http_listener_close(struct http_listener *listener);
void http_listener_destroy(struct http_listener *listener);

/* ---- the server */

struct http_server {
    struct http_config config;
    struct http_listener listener;
    int quiescing;               /* atomic */
    int stopping;                /* atomic */
    int64_t open_exchanges;      /* atomic */
    int64_t receiving_exchanges; /* atomic */
    uint64_t stats_connections;  /* atomic, each */
    uint64_t stats_requests;
    uint64_t stats_bad_requests;
    uint64_t stats_closed_idle;
    uint64_t stats_closed_stalled;
    uint64_t stats_wakes_taken_over;
    uint32_t next_worker; /* atomic */
    uint32_t worker_count;
    struct http_worker workers[];
};

/* http_conn.c, on the worker's thread. */
struct http_conn *http_conn_new(struct http_worker *worker, int fd);
void http_conn_event(struct http_conn *conn, uint32_t events);
/* Serves what the connection has in hand and can read, a turn's worth. */
void http_conn_serve(struct http_conn *conn);
void http_conn_close(struct http_conn *conn);
/* At stop: frees the connection and any exchange it still has, at once. */
void http_conn_discard(struct http_conn *conn);
/* Frees the exchange now (true: the caller calls handlers.close), or once
 * it leaves the worker's wake queue. */
bool http_worker_release(struct http_worker *worker, struct http_exchange *exchange);
/* After the server's call into an exchange returned: free it when answered
 * and written, and go on with the connection. */
void http_conn_after(struct http_conn *conn);
/* Tries to write what is waiting; false when the socket is full. */
bool http_conn_flush(struct http_conn *conn);
/* Bytes for the client: sent now as far as the socket takes them, the rest
 * kept. parts[0..count). */
void http_conn_send(struct http_conn *conn, const struct iovec *parts, int count);
void http_worker_ready(struct http_worker *worker, struct http_conn *conn);
/* Marks this thread as the loop of w (its own wakes skip the eventfd). */
void http_worker_enter(struct http_worker *worker);
/* http_wake.c: the worker whose state this thread runs now (its own, or
 * one it took over for a moment), and the workers to which this worker's
 * thread owes a wake (a bit per index), taken. */
void http_worker_become(struct http_worker *worker);
uint64_t http_wakes_owed_take(void);
void http_worker_signal(struct http_worker *worker);
int64_t http_now_ms(void);

/* http_status.c: the reason phrase of a status ("Unknown" for a stranger),
 * and the HTTP date of now (kept per thread for the second). */
const char *http_reason_phrase(unsigned status);
const char *http_date_now(void);

/* http_conn.c: an error the transport answers before the server has the
 * exchange (malformed head) or instead of it (413): the connection closes
 * after it. */
void http_conn_refuse(struct http_conn *conn, const char *path, size_t path_length, unsigned status,
                      const char *reason);

#endif
