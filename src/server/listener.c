/* Accepting connections for libmicrohttpd (see listener.h): one thread in a
 * blocking accept(), gated by --max-connections, stopped by shutdown(). */
#include "listener.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

/* A hand-over libmicrohttpd has not started within this long has failed
 * (it could not allocate the connection) and will never be closed. */
#define LISTENER_HANDOVER_MS_MAX 1000
/* Out of descriptors or kernel memory: wait this long before accepting again. */
#define LISTENER_RETRY_MS 50

void listener_init(struct listener *listener, uint32_t limit)
{
    assert(limit > 0);
    memset(listener, 0, sizeof *listener);
    listener->fd = -1;
    listener->limit = limit;
    pthread_mutex_init(&listener->mutex, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&listener->freed, &attributes);
    pthread_condattr_destroy(&attributes);
}

void listener_destroy(struct listener *listener)
{
    assert(listener->fd < 0);
    assert(!listener->running);
    pthread_cond_destroy(&listener->freed);
    pthread_mutex_destroy(&listener->mutex);
}

int listener_open(struct listener *listener, const struct sockaddr *address,
                  socklen_t address_length)
{
    assert(listener->fd < 0);
    int fd = socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_storage bound;
    socklen_t bound_length = sizeof bound;
    /* A restarted server binds at once, even with connections of the last
     * one in TIME_WAIT; IPv6 listens on IPv6 only, as --listen says. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (address->sa_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, address, address_length) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&bound, &bound_length) != 0) {
        int error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    listener->port =
        ntohs(bound.ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)&bound)->sin6_port
                                          : ((const struct sockaddr_in *)&bound)->sin_port);
    listener->fd = fd;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Under the mutex: waits until a connection may be accepted. false: stopping. */
static bool wait_for_room(struct listener *listener)
{
    while (!listener->stopping && listener->open + listener->handed >= listener->limit) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += LISTENER_HANDOVER_MS_MAX / 1000;
        int waited = pthread_cond_timedwait(&listener->freed, &listener->mutex, &until);
        /* Connections libmicrohttpd had all that time to start are lost. */
        if (waited == ETIMEDOUT)
            listener->handed = 0;
    }
    return !listener->stopping;
}

/* accept() failed with error: true to go on accepting. Out of descriptors
 * or memory, the connection waits in the listen queue while the thread
 * retries; one warning per run of failures. */
static bool accept_failed(struct listener *listener, int error, bool *failing)
{
    if (__atomic_load_n(&listener->stopping, __ATOMIC_SEQ_CST))
        return false; /* shutdown() woke it: EINVAL */
    if (error == EINTR || error == EAGAIN || error == ECONNABORTED || error == EPROTO)
        return true; /* the client gave up before accept, or a signal */
    if (!*failing)
        log_write(LOG_WARN, "cannot accept connections for now, retrying", "reason",
                  strerror(error), NULL);
    *failing = true;
    sleep_ms(LISTENER_RETRY_MS);
    return true;
}

static void *listener_main(void *argument)
{
    struct listener *listener = argument;
    bool failing = false;
    for (;;) {
        pthread_mutex_lock(&listener->mutex);
        bool room = wait_for_room(listener);
        pthread_mutex_unlock(&listener->mutex);
        if (!room)
            break;
        struct sockaddr_storage address;
        socklen_t address_length = sizeof address;
        int client = accept4(listener->fd, (struct sockaddr *)&address, &address_length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client < 0) {
            if (accept_failed(listener, errno, &failing))
                continue;
            break;
        }
        if (failing)
            log_write(LOG_INFO, "accepting connections again", NULL);
        failing = false;
        pthread_mutex_lock(&listener->mutex);
        listener->handed++;
        pthread_mutex_unlock(&listener->mutex);
        if (listener->adopt != NULL) {
            listener->adopt(listener->adopt_context, client, (struct sockaddr *)&address,
                            address_length);
            continue;
        }
        /* libmicrohttpd owns the socket now, and closes it on failure. */
        if (MHD_add_connection(listener->daemon, client, (struct sockaddr *)&address,
                               address_length) != MHD_YES)
            listener_connection_not_started(listener);
    }
    return NULL;
}

int listener_start(struct listener *listener, struct MHD_Daemon *daemon)
{
    assert(listener->fd >= 0);
    assert(!listener->running);
    listener->daemon = daemon;
    int error = pthread_create(&listener->thread, NULL, listener_main, listener);
    if (error != 0) {
        errno = error;
        return -1;
    }
    listener->running = true;
    return 0;
}

void listener_connection_started(struct listener *listener)
{
    pthread_mutex_lock(&listener->mutex);
    listener->open++;
    if (listener->handed > 0)
        listener->handed--;
    pthread_mutex_unlock(&listener->mutex);
}

void listener_connection_closed(struct listener *listener)
{
    pthread_mutex_lock(&listener->mutex);
    assert(listener->open > 0);
    listener->open--;
    pthread_cond_signal(&listener->freed);
    pthread_mutex_unlock(&listener->mutex);
}

void listener_connection_handed_back(struct listener *listener)
{
    pthread_mutex_lock(&listener->mutex);
    assert(listener->open > 0);
    listener->open--;
    listener->handed++;
    pthread_mutex_unlock(&listener->mutex);
}

void listener_connection_not_started(struct listener *listener)
{
    pthread_mutex_lock(&listener->mutex);
    if (listener->handed > 0)
        listener->handed--;
    pthread_cond_signal(&listener->freed);
    pthread_mutex_unlock(&listener->mutex);
}

void listener_close(struct listener *listener)
{
    if (listener->fd < 0)
        return;
    pthread_mutex_lock(&listener->mutex);
    __atomic_store_n(&listener->stopping, true, __ATOMIC_SEQ_CST);
    pthread_cond_signal(&listener->freed);
    pthread_mutex_unlock(&listener->mutex);
    /* Wakes the thread's accept() (EINVAL) and refuses new clients at once. */
    shutdown(listener->fd, SHUT_RDWR);
    if (listener->running)
        pthread_join(listener->thread, NULL);
    listener->running = false;
    close(listener->fd);
    listener->fd = -1;
}
