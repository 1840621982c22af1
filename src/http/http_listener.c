/* Accepting connections: one thread in a blocking accept(), gated by
 * --max-connections (at the bound it stops accepting, so a further client
 * waits in the kernel's listen queue until a connection closes), stopped
 * by shutdown() on the listening socket. Each accepted socket goes to a
 * worker (adopt). */
#include "http_internal.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "util/log.h"

/* Out of descriptors or kernel memory: wait this long before accepting again. */
#define LISTENER_RETRY_MS 50

int http_listener_open(struct http_listener *listener, const struct sockaddr *address,
                       socklen_t address_length, uint32_t limit)
{
    assert(limit > 0);
    memset(listener, 0, sizeof *listener);
    listener->fd = -1;
    listener->limit = limit;
    pthread_mutex_init(&listener->mutex, NULL);
    clock_cond_init_monotonic(&listener->freed);
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
static bool wait_for_room(struct http_listener *listener)
{
    while (!listener->stopping && listener->open >= listener->limit)
        pthread_cond_wait(&listener->freed, &listener->mutex);
    return !listener->stopping;
}

/* accept() failed with error: true to go on accepting. Out of descriptors
 * or memory, the connection waits in the listen queue while the thread
 * retries; one warning per run of failures. */
static bool accept_failed(struct http_listener *listener, int error, bool *failing)
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
    struct http_listener *listener = argument;
    bool failing = false;
    for (;;) {
        pthread_mutex_lock(&listener->mutex);
        bool room = wait_for_room(listener);
        pthread_mutex_unlock(&listener->mutex);
        if (!room)
            break;
        int client = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client < 0) {
            if (accept_failed(listener, errno, &failing))
                continue;
            break;
        }
        if (failing)
            log_write(LOG_INFO, "accepting connections again", NULL);
        failing = false;
        pthread_mutex_lock(&listener->mutex);
        listener->open++;
        pthread_mutex_unlock(&listener->mutex);
        listener->adopt(listener->adopt_context, client); /* closes it on failure */
    }
    return NULL;
}

int http_listener_start(struct http_listener *listener)
{
    assert(listener->fd >= 0);
    assert(!listener->running);
    assert(listener->adopt != NULL);
    int error = pthread_create(&listener->thread, NULL, listener_main, listener);
    if (error != 0) {
        errno = error;
        return -1;
    }
    listener->running = true;
    return 0;
}

void http_listener_closed_one(struct http_listener *listener)
{
    pthread_mutex_lock(&listener->mutex);
    assert(listener->open > 0);
    listener->open--;
    pthread_cond_signal(&listener->freed);
    pthread_mutex_unlock(&listener->mutex);
}

void http_listener_close(struct http_listener *listener)
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

void http_listener_destroy(struct http_listener *listener)
{
    assert(listener->fd < 0);
    assert(!listener->running);
    pthread_cond_destroy(&listener->freed);
    pthread_mutex_destroy(&listener->mutex);
}
