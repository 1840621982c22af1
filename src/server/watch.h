/* The request deadline. libmicrohttpd's connection timeout counts only
 * inactivity, so a client that trickles a byte every few seconds never times
 * out and, at --max-connections, clients like it can hold every slot. Each
 * connection is watched from the moment it opens or finishes a request; one
 * that completes no request within --request-timeout-seconds, and is not
 * waiting for its answer, is shut down by the ticker. */
#ifndef LLMLIMIT_SERVER_WATCH_H
#define LLMLIMIT_SERVER_WATCH_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>

struct watch {
    int fd;
    int64_t since_ms; /* monotonic; atomic */
    int busy;         /* a request is fully received and being answered; atomic */
    int shut;         /* shut down once already */
    struct watch *previous;
    struct watch *next;
};

struct watch_list {
    pthread_mutex_t mutex; /* the list, and every fd while it is in it */
    struct watch *head;
    int64_t timeout_ms;
    uint64_t closed; /* connections shut down for the deadline; atomic */
};

void watch_list_init(struct watch_list *list, int64_t timeout_ms);
void watch_list_destroy(struct watch_list *list); /* after MHD_stop_daemon */

/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the struct watch_list. A
 * connection is unlinked (under the mutex) before MHD closes its socket, so
 * the sweeper never shuts down a reused fd. */
void watch_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);

/* The connection's watch (NULL if it has none). */
struct watch *watch_of(struct MHD_Connection *connection);
void watch_request_received(struct watch *watch);
void watch_request_finished(struct watch *watch);

/* Shuts down the connections past the deadline; returns how many. */
uint32_t watch_sweep(struct watch_list *list, int64_t now_ms);

#endif
