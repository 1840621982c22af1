/* The request deadline (see watch.h): a list of open connections under one
 * mutex, two atomic stores per request, a sweep by the ticker. */
#include "watch.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "util/log.h"

void watch_list_init(struct watch_list *list, int64_t timeout_ms)
{
    assert(timeout_ms > 0);
    pthread_mutex_init(&list->mutex, NULL);
    list->head = NULL;
    list->timeout_ms = timeout_ms;
    list->closed = 0;
}

void watch_list_destroy(struct watch_list *list)
{
    pthread_mutex_lock(&list->mutex);
    while (list->head != NULL) { /* none is left after MHD_stop_daemon */
        struct watch *next = list->head->next;
        free(list->head);
        list->head = next;
    }
    pthread_mutex_unlock(&list->mutex);
    pthread_mutex_destroy(&list->mutex);
}

static void watch_open(struct watch_list *list, struct MHD_Connection *connection,
                       void **socket_context)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct watch *watch = info != NULL ? calloc(1, sizeof *watch) : NULL;
    if (watch == NULL)
        return; /* unwatched: only the inactivity timeout applies */
    watch->fd = info->connect_fd;
    assert(watch->fd >= 0);
    __atomic_store_n(&watch->since_ms, clock_monotonic_ms(), __ATOMIC_RELAXED);
    pthread_mutex_lock(&list->mutex);
    watch->next = list->head;
    if (list->head != NULL)
        list->head->previous = watch;
    list->head = watch;
    pthread_mutex_unlock(&list->mutex);
    *socket_context = watch;
}

static void watch_close(struct watch_list *list, void **socket_context)
{
    struct watch *watch = *socket_context;
    if (watch == NULL)
        return;
    pthread_mutex_lock(&list->mutex);
    /* Linked both ways: the neighbours point back at it. */
    assert(watch->previous != NULL || list->head == watch);
    assert(watch->previous == NULL || watch->previous->next == watch);
    assert(watch->next == NULL || watch->next->previous == watch);
    if (watch->previous != NULL)
        watch->previous->next = watch->next;
    else
        list->head = watch->next;
    if (watch->next != NULL)
        watch->next->previous = watch->previous;
    pthread_mutex_unlock(&list->mutex);
    free(watch);
    *socket_context = NULL;
}

void watch_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        watch_open(cls, connection, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        watch_close(cls, socket_context);
}

struct watch *watch_of(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

void watch_request_received(struct watch *watch)
{
    if (watch != NULL)
        __atomic_store_n(&watch->busy, 1, __ATOMIC_RELAXED);
}

void watch_request_finished(struct watch *watch)
{
    if (watch == NULL)
        return;
    __atomic_store_n(&watch->since_ms, clock_monotonic_ms(), __ATOMIC_RELAXED);
    __atomic_store_n(&watch->busy, 0, __ATOMIC_RELAXED);
}

uint32_t watch_sweep(struct watch_list *list, int64_t now_ms)
{
    uint32_t closed = 0;
    pthread_mutex_lock(&list->mutex);
    for (struct watch *watch = list->head; watch != NULL; watch = watch->next) {
        assert(watch->next == NULL || watch->next->previous == watch);
        if (watch->shut || __atomic_load_n(&watch->busy, __ATOMIC_RELAXED))
            continue;
        if (now_ms - __atomic_load_n(&watch->since_ms, __ATOMIC_RELAXED) < list->timeout_ms)
            continue;
        /* MHD sees end of file and closes the connection itself. */
        shutdown(watch->fd, SHUT_RDWR);
        watch->shut = 1;
        closed++;
    }
    pthread_mutex_unlock(&list->mutex);
    if (closed > 0) {
        __atomic_add_fetch(&list->closed, closed, __ATOMIC_RELAXED);
        log_write(LOG_WARN, "connections past the request deadline closed", NULL);
    }
    return closed;
}
