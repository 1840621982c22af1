/* The listening socket and the thread that accepts on it. llmlimitd accepts
 * its own connections and hands each to libmicrohttpd (MHD_add_connection),
 * so that stopping to accept at shutdown is ours to do and cannot race:
 * libmicrohttpd 0.9.75's MHD_quiesce_daemon removes the listening socket from
 * each epoll worker's set while that worker may be removing it itself, and
 * then aborts the process (docs/hardening.md, "Shutdown").
 *
 * --max-connections is kept here too: at the bound the thread stops
 * accepting, so a further client waits in the kernel's listen queue until a
 * connection closes, as it did when libmicrohttpd accepted. */
#ifndef LLMLIMIT_SERVER_LISTENER_H
#define LLMLIMIT_SERVER_LISTENER_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct listener {
    int fd;                /* -1: not open */
    uint16_t port;         /* the bound one (the kernel's pick for port 0) */
    uint32_t limit;        /* connections open at once, at most */
    pthread_mutex_t mutex; /* the counts and stopping */
    pthread_cond_t freed;  /* a connection closed, or stopping */
    uint32_t open;         /* started by libmicrohttpd, not yet closed */
    uint32_t handed;       /* handed over, not yet started */
    bool stopping;
    bool running; /* the thread was started and not yet joined */
    pthread_t thread;
    struct MHD_Daemon *daemon;
    /* Takes each accepted socket instead of the daemon (the direct path,
     * lane.h), which then reports its connections like the daemon does. */
    void (*adopt)(void *context, int fd, const struct sockaddr *address, socklen_t address_length);
    void *adopt_context;
};

void listener_init(struct listener *listener, uint32_t limit);
void listener_destroy(struct listener *listener); /* after MHD_stop_daemon */

/* Binds and listens on address (port 0: any free port). 0, or -1 with
 * errno set (nothing is left open). */
int listener_open(struct listener *listener, const struct sockaddr *address,
                  socklen_t address_length);

/* Starts accepting and handing connections to daemon. 0, or -1 with errno. */
int listener_start(struct listener *listener, struct MHD_Daemon *daemon);

/* From MHD_OPTION_NOTIFY_CONNECTION: a connection started or closed. */
void listener_connection_started(struct listener *listener);
void listener_connection_closed(struct listener *listener);
/* A connection started elsewhere is being handed to the daemon (it starts
 * there again), or a hand-over failed. */
void listener_connection_handed_back(struct listener *listener);
void listener_connection_not_started(struct listener *listener);

/* Stops accepting and closes the socket: clients connecting from now on, and
 * those still in the listen queue, are refused. Connections already handed
 * over are untouched. Safe to call again, and after a failed open or start. */
void listener_close(struct listener *listener);

#endif
