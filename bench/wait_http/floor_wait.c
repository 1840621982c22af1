/* The floor of the wait benchmark (bench/wait_http/run.py --backends floor):
 * a server that does nothing but the HTTP exchanges of bench_wait_http and
 * the least bookkeeping of one concurrency limit, so that the figures of
 * llmlimitd can be put beside what any server would reach on this machine.
 *
 * It answers POST /v1/reserve and POST /v1/complete. A reserve takes a free
 * slot if no one waits; else, when its body names "wait_ms", the connection
 * is parked in arrival order, and otherwise it is denied with
 * retry_after_ms 250 x [0.8, 1.2], as llmlimitd answers a concurrency
 * limit. A complete hands its slot straight to the oldest parked connection,
 * writing that answer from the completing thread (the cheapest hand-over
 * there is: no queue, no wake-up of another thread), or frees it.
 *
 * What it leaves out, for speed: lease ids (every complete frees one slot,
 * as bench_wait_http only completes admitted calls), deadlines (a parked
 * connection waits as long as it takes), request validation, pipelining,
 * partial writes (an answer is under 200 bytes; a short write ends the
 * process with a message, so a run that hit one is never mistaken for a
 * result). Connections are never closed by the server, so a hand-over never
 * writes to a descriptor reused meanwhile. Not a server to run anything
 * behind: a benchmark instrument. Listens on 127.0.0.1 --port, runs until
 * killed. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define THREADS_MAX 16
#define IN_BYTES 2048
#define EVENTS_MAX 256
#define POLL_MS 250

struct conn {
    int fd;
    bool parked;
    bool gone;
    int64_t parked_at_ms;
    struct conn *prev, *next; /* the parked ones, oldest first */
    uint32_t in_length;
    char in[IN_BYTES];
};

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static uint32_t free_slots;
static struct conn *parked_head, *parked_tail;
static uint16_t port;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static bool answer(int fd, const char *body)
{
    char out[256];
    int length = snprintf(out, sizeof out,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\n\r\n%s",
                          strlen(body), body);
    ssize_t n = send(fd, out, (size_t)length, MSG_NOSIGNAL);
    if (n == length)
        return true;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
        return false; /* the client went away */
    fprintf(stderr, "floor_wait: short write (%zd of %d)\n", n, length);
    exit(1);
}

/* Under the mutex. */
static void unpark(struct conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        parked_head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        parked_tail = c->prev;
    c->prev = c->next = NULL;
    c->parked = false;
}

static void reserve(struct conn *c, const char *body, uint64_t *random_state)
{
    bool wait = strstr(body, "\"wait_ms\"") != NULL;
    pthread_mutex_lock(&mutex);
    if (free_slots > 0 && parked_head == NULL) {
        free_slots--;
        pthread_mutex_unlock(&mutex);
        answer(c->fd, "{\"allowed\":true,\"waited_ms\":0}");
        return;
    }
    if (wait) {
        c->parked = true;
        c->parked_at_ms = now_ms();
        c->prev = parked_tail;
        c->next = NULL;
        if (parked_tail != NULL)
            parked_tail->next = c;
        else
            parked_head = c;
        parked_tail = c;
        pthread_mutex_unlock(&mutex);
        return;
    }
    pthread_mutex_unlock(&mutex);
    uint64_t x = *random_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *random_state = x;
    char body_out[96];
    snprintf(body_out, sizeof body_out,
             "{\"allowed\":false,\"denied_keys\":[\"bench:slots\"],\"retry_after_ms\":%d}",
             (int)(POLL_MS * (80 + (int)(x % 41)) / 100));
    answer(c->fd, body_out);
}

static void complete(struct conn *c)
{
    for (;;) {
        pthread_mutex_lock(&mutex);
        struct conn *next = parked_head;
        if (next == NULL) {
            free_slots++;
            pthread_mutex_unlock(&mutex);
            break;
        }
        unpark(next);
        pthread_mutex_unlock(&mutex);
        char body[64];
        snprintf(body, sizeof body, "{\"allowed\":true,\"waited_ms\":%lld}",
                 (long long)(now_ms() - next->parked_at_ms));
        if (answer(next->fd, body))
            break; /* else its client left: the slot goes to the next */
    }
    answer(c->fd, "{\"reconciled\":true}");
}

/* The whole requests at the front of c->in, one at a time. */
static void serve(struct conn *c, uint64_t *random_state)
{
    for (;;) {
        char *end = memmem(c->in, c->in_length, "\r\n\r\n", 4);
        if (end == NULL)
            return;
        uint32_t head = (uint32_t)(end - c->in) + 4;
        char *field = memmem(c->in, head, "\r\nContent-Length:", 17);
        uint32_t body_length = field != NULL ? (uint32_t)strtoul(field + 17, NULL, 10) : 0;
        if (c->in_length < head + body_length)
            return;
        char saved = c->in[head + body_length];
        c->in[head + body_length] = '\0';
        if (strncmp(c->in, "POST /v1/reserve ", 17) == 0)
            reserve(c, c->in + head, random_state);
        else if (strncmp(c->in, "POST /v1/complete ", 18) == 0)
            complete(c);
        else
            answer(c->fd, "{\"error\":\"not_found\"}");
        c->in[head + body_length] = saved;
        memmove(c->in, c->in + head + body_length, c->in_length - head - body_length);
        c->in_length -= head + body_length;
    }
}

static void gone(int epoll_fd, struct conn *c)
{
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    pthread_mutex_lock(&mutex);
    if (c->parked)
        unpark(c);
    pthread_mutex_unlock(&mutex);
    c->gone = true; /* its descriptor stays open: see the top of the file */
}

static void *worker(void *arg)
{
    (void)arg;
    uint64_t random_state = (uint64_t)now_ms() * 2654435761u | 1;
    int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in address = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listen_fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listen_fd, 4096) != 0)
        die("floor_wait: listen");
    int epoll_fd = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &event);
    struct epoll_event events[EVENTS_MAX];
    for (;;) {
        int n = epoll_wait(epoll_fd, events, EVENTS_MAX, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *fresh = calloc(1, sizeof *fresh);
                    if (fresh == NULL)
                        die("floor_wait: calloc");
                    fresh->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                                            .data.ptr = fresh};
                    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            if (c->gone)
                continue;
            for (;;) {
                ssize_t got = recv(c->fd, c->in + c->in_length, sizeof c->in - c->in_length - 1, 0);
                if (got < 0 && errno == EAGAIN)
                    break;
                if (got <= 0 || c->in_length + (uint32_t)got >= sizeof c->in - 1) {
                    gone(epoll_fd, c);
                    break;
                }
                c->in_length += (uint32_t)got;
                serve(c, &random_state);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    uint32_t threads = 2;
    free_slots = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0)
            threads = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--capacity") == 0)
            free_slots = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--port") == 0)
            port = (uint16_t)atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: floor_wait [--threads N] [--capacity C] [--port P]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > THREADS_MAX || port == 0) {
        fprintf(stderr, "floor_wait: --port P (not 0) and --threads 1..%d\n", THREADS_MAX);
        return 2;
    }
    pthread_t ids[THREADS_MAX];
    for (uint32_t i = 0; i < threads; i++) {
        if (pthread_create(&ids[i], NULL, worker, NULL) != 0)
            die("floor_wait: pthread_create");
    }
    printf("listening on 127.0.0.1:%u\n", port);
    fflush(stdout);
    pthread_join(ids[0], NULL);
    return 0;
}
