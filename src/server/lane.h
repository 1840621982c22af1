/* The direct path (docs/architecture.md, "The direct path"): the data
 * path's plain requests served without libmicrohttpd.
 *
 * Every accepted connection starts here, on one of a few worker threads,
 * each with its own epoll set. A worker looks at the next request with
 * MSG_PEEK: when it is whole in the socket, a POST to a route marked
 * ROUTE_DIRECT with its body at once (lane_head.h), the worker takes it and
 * runs the route's handler; anything else (a partial head, a chunked body,
 * Expect, a GET, a stranger) and the connection is handed, with the
 * request still unread, to libmicrohttpd for the rest of its life.
 *
 * A request waiting on the backend costs no system call: done() puts its
 * exchange on its worker's queue, and one eventfd write wakes the worker
 * for every answer queued while it was busy. All I/O on a connection
 * happens on its worker. Connections idle past the request deadline are
 * closed, as libmicrohttpd's are. */
#ifndef LLMLIMIT_SERVER_LANE_H
#define LLMLIMIT_SERVER_LANE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct server;
struct exchange;
struct lane;
struct lane_conn;

/* Starts `workers` threads. Connections with no request in hand are closed
 * after idle_ms; those whose client does not read its answer after
 * stall_ms without progress. NULL on failure (errno set). */
struct lane *lane_start(struct server *server, uint32_t workers, int64_t idle_ms, int64_t stall_ms);
/* Stops the workers and closes the connections they hold: after every
 * backend call has finished. NULL is ignored. */
void lane_stop(struct lane *lane);

/* The listener's hand-over: takes the accepted socket (closing it on
 * failure). */
void lane_adopt(void *lane, int fd, const struct sockaddr *address, socklen_t address_length);

/* From done(), any thread: the exchange's backend call finished; its worker
 * answers it. */
void lane_resume(struct exchange *exchange);

/* Writes an answer on the exchange's connection (its worker's thread).
 * head is the status line and headers, blank line included. */
void lane_send(struct exchange *exchange, const char *head, size_t head_length, const char *body,
               size_t body_length, bool close_after);

/* Requests served, connections handed to libmicrohttpd. */
void lane_counts(const struct lane *lane, uint64_t *served, uint64_t *handed);

#endif
