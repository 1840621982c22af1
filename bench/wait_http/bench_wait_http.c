/* Waiting for capacity over HTTP (issue 25's speed figures): N callers, one
 * keep-alive connection each, on one concurrency limit; each admitted call
 * completes at once (or after --call-ms, the model call's time), then the
 * caller starts its next call (or after --think-ms, an agent's own work
 * between two calls). With --burst, the callers fan out together instead:
 * one call each, all at once, and the next round only once every caller's
 * call has completed (an orchestrator sending a thousand agents' calls and
 * waiting for all of them). Three ways to get
 * through a denial: wait (the reserve carries wait_ms), loop (retry at once
 * with a new lease id: the busy-loop upper bound) and retry (sleep
 * retry_after_ms with jitter, then a new lease id: what clients do today).
 * One thread, epoll, no allocation per request, so that it costs the two
 * shared cores as little as it can. Prints one JSON line of figures; asserts
 * nothing. bench/wait_http/run.py starts the servers and compares modes. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CALLERS_MAX 10000
#define OUT_BYTES 512
#define IN_BYTES 2048
#define EVENTS_MAX 256
#define SAMPLES_MAX (8u << 20)
#define RELEASES_MAX 65536 /* a ring: releases not yet followed by an answer */
#define JITTER_LOW 0.8     /* retry mode sleeps retry_after_ms times [0.8, 1.2] */
#define JITTER_HIGH 1.2

enum mode { MODE_WAIT, MODE_LOOP, MODE_RETRY };
/* SLEEPING (retry's backoff), HOLDING (admitted, the call runs) and
 * THINKING (between two calls) wait in the heap. */
enum state { IDLE, RESERVING, COMPLETING, SLEEPING, HOLDING, THINKING };

struct options {
    const char *host;
    const char *port;
    const char *key;
    enum mode mode;
    uint32_t callers;
    uint32_t wait_ms;
    uint32_t call_ms;  /* an admitted call holds its slot this long */
    uint32_t think_ms; /* between a complete's answer and the next call */
    bool burst;        /* rounds of one call per caller, all at once */
    double warmup_s;
    double duration_s;
    long server_pid; /* 0: no server CPU figure */
};

struct caller {
    int fd;
    uint32_t index;
    enum state state;
    uint64_t lease_seq;
    uint64_t admitted;       /* in the window */
    int64_t call_started_ns; /* first reserve of the current call (monotonic) */
    int64_t wake_at_ns;      /* SLEEPING: when to reserve again */
    uint32_t heap_index;
    uint32_t out_length, out_sent, in_length;
    bool answer_stamped;
    int64_t answer_real_ns; /* when the answer's first byte reached the socket */
    char out[OUT_BYTES];
    char in[IN_BYTES];
};

struct samples {
    int64_t *values;
    uint64_t count;
};

struct run {
    struct options o;
    struct caller *callers;
    struct caller **heap; /* SLEEPING, HOLDING, THINKING callers by wake_at_ns */
    uint32_t heap_count;
    int epoll_fd;
    struct addrinfo *address;
    uint64_t random_state;
    bool measuring;
    /* In the window: */
    uint64_t admitted, denied, requests, errors, waited_admissions;
    struct samples call_ns, handover_ns;
    int64_t releases[RELEASES_MAX]; /* CLOCK_REALTIME of each complete sent */
    uint64_t release_head, release_tail;
    /* --burst: callers whose call of this round has not completed, when
     * the round started, and each whole round's length in the window. */
    uint32_t round_left;
    int64_t round_started_ns;
    int64_t window_started_ns;
    struct samples round_ns;
};

static int64_t now_ns(clockid_t clock)
{
    struct timespec t;
    int rc = clock_gettime(clock, &t);
    assert(rc == 0);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static double random_unit(struct run *r)
{
    r->random_state ^= r->random_state << 13; /* xorshift64 */
    r->random_state ^= r->random_state >> 7;
    r->random_state ^= r->random_state << 17;
    return (double)(r->random_state >> 11) / (double)(UINT64_C(1) << 53);
}

static void sample_add(struct samples *s, int64_t value)
{
    if (s->count < SAMPLES_MAX)
        s->values[s->count++] = value;
}

/* ---- the sleepers' heap ---------------------------------------------------- */

static void heap_swap(struct run *r, uint32_t a, uint32_t b)
{
    struct caller *t = r->heap[a];
    r->heap[a] = r->heap[b];
    r->heap[b] = t;
    r->heap[a]->heap_index = a;
    r->heap[b]->heap_index = b;
}

static void heap_push(struct run *r, struct caller *c)
{
    uint32_t i = r->heap_count++;
    r->heap[i] = c;
    c->heap_index = i;
    while (i > 0 && r->heap[(i - 1) / 2]->wake_at_ns > r->heap[i]->wake_at_ns) {
        heap_swap(r, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static struct caller *heap_pop(struct run *r)
{
    assert(r->heap_count > 0);
    struct caller *top = r->heap[0];
    heap_swap(r, 0, --r->heap_count);
    for (uint32_t i = 0;;) {
        uint32_t least = i, left = 2 * i + 1, right = left + 1;
        if (left < r->heap_count && r->heap[left]->wake_at_ns < r->heap[least]->wake_at_ns)
            least = left;
        if (right < r->heap_count && r->heap[right]->wake_at_ns < r->heap[least]->wake_at_ns)
            least = right;
        if (least == i)
            break;
        heap_swap(r, i, least);
        i = least;
    }
    return top;
}

/* ---- connections and requests ---------------------------------------------------- */

static int caller_connect(struct run *r, struct caller *c)
{
    int fd = socket(r->address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, r->address->ai_addr, r->address->ai_addrlen) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* The kernel stamps each segment as it arrives: on loopback, when the
     * server wrote it. */
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->in_length = 0;
    return 0;
}

static void caller_flush(struct run *r, struct caller *c)
{
    while (c->out_sent < c->out_length) {
        ssize_t n = write(c->fd, c->out + c->out_sent, c->out_length - c->out_sent);
        if (n < 0 && errno == EAGAIN) {
            struct epoll_event event = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
            epoll_ctl(r->epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
            return;
        }
        if (n <= 0)
            return; /* the read side sees the error */
        c->out_sent += (uint32_t)n;
    }
}

static void caller_send(struct run *r, struct caller *c, const char *path, const char *body)
{
    int length = snprintf(c->out, sizeof c->out,
                          "POST %s HTTP/1.1\r\nHost: llmlimitd\r\nContent-Type: application/json"
                          "\r\nContent-Length: %zu\r\n\r\n%s",
                          path, strlen(body), body);
    assert(length > 0 && (size_t)length < sizeof c->out);
    c->out_length = (uint32_t)length;
    c->out_sent = 0;
    c->answer_stamped = false;
    if (r->measuring)
        r->requests++;
    caller_flush(r, c);
}

static void reserve_send(struct run *r, struct caller *c)
{
    char body[256];
    c->lease_seq++;
    if (r->o.mode == MODE_WAIT)
        snprintf(body, sizeof body,
                 "{\"lease_id\":\"b%u-%" PRIu64 "\",\"wait_ms\":%u,"
                 "\"requirements\":[{\"key\":\"%s\",\"amount\":1}]}",
                 c->index, c->lease_seq, r->o.wait_ms, r->o.key);
    else
        snprintf(body, sizeof body,
                 "{\"lease_id\":\"b%u-%" PRIu64 "\",\"requirements\":[{\"key\":\"%s\","
                 "\"amount\":1}]}",
                 c->index, c->lease_seq, r->o.key);
    c->state = RESERVING;
    caller_send(r, c, "/v1/reserve", body);
}

static void call_start(struct run *r, struct caller *c)
{
    c->call_started_ns = now_ns(CLOCK_MONOTONIC);
    reserve_send(r, c);
}

static void complete_send(struct run *r, struct caller *c)
{
    char body[128];
    snprintf(body, sizeof body, "{\"lease_id\":\"b%u-%" PRIu64 "\"}", c->index, c->lease_seq);
    c->state = COMPLETING;
    if (r->release_tail - r->release_head < RELEASES_MAX)
        r->releases[r->release_tail++ % RELEASES_MAX] = now_ns(CLOCK_REALTIME);
    caller_send(r, c, "/v1/complete", body);
}

/* ---- answers ------------------------------------------------------------- */

/* The length of a whole answer at the front of in, or 0 if incomplete;
 * status gets its status code. */
static uint32_t answer_length(const struct caller *c, int *status)
{
    const char *in = c->in;
    const char *end = memmem(in, c->in_length, "\r\n\r\n", 4);
    if (end == NULL)
        return 0;
    uint32_t head = (uint32_t)(end - in) + 4;
    const char *field = memmem(in, head, "\r\ncontent-length:", 17);
    if (field == NULL)
        field = memmem(in, head, "\r\nContent-Length:", 17);
    uint32_t body = field != NULL ? (uint32_t)strtoul(field + 17, NULL, 10) : 0;
    if (c->in_length < head + body)
        return 0;
    *status = atoi(in + 9);
    return head + body;
}

/* The FIFO pairing of releases and admissions: each admission answers the
 * oldest release sent before it arrived (a slot frees, the next caller gets
 * it). Both on CLOCK_REALTIME: the answer's time is the kernel's. */
static void handover(struct run *r, int64_t answer_real_ns)
{
    if (r->release_head == r->release_tail)
        return; /* the first fills of the slots */
    int64_t released = r->releases[r->release_head % RELEASES_MAX];
    if (released > answer_real_ns)
        return;
    r->release_head++;
    if (r->measuring)
        sample_add(&r->handover_ns, answer_real_ns - released);
}

/* Puts the caller in the heap until ms from now. */
static void sleep_for(struct run *r, struct caller *c, enum state state, double ms)
{
    c->wake_at_ns = now_ns(CLOCK_MONOTONIC) + (int64_t)(ms * 1e6);
    c->state = state;
    heap_push(r, c);
}

static void reserve_answered(struct run *r, struct caller *c, int status, const char *body)
{
    bool allowed = status == 200 && strstr(body, "\"allowed\":true") != NULL;
    if (allowed) {
        handover(r, c->answer_real_ns);
        if (r->measuring) {
            r->admitted++;
            c->admitted++;
            sample_add(&r->call_ns, now_ns(CLOCK_MONOTONIC) - c->call_started_ns);
            const char *waited = strstr(body, "\"waited_ms\":");
            if (waited != NULL && atol(waited + 12) > 0)
                r->waited_admissions++;
        }
        if (r->o.call_ms > 0)
            sleep_for(r, c, HOLDING, r->o.call_ms);
        else
            complete_send(r, c);
        return;
    }
    if (r->measuring && status == 200)
        r->denied++;
    else if (r->measuring)
        r->errors++;
    if (r->o.mode != MODE_RETRY) {
        reserve_send(r, c); /* a new lease id: a denied one stays denied */
        return;
    }
    const char *retry = strstr(body, "\"retry_after_ms\":");
    long retry_ms = retry != NULL ? atol(retry + 17) : 0;
    if (retry_ms < 1)
        retry_ms = 1;
    double jitter = JITTER_LOW + (JITTER_HIGH - JITTER_LOW) * random_unit(r);
    sleep_for(r, c, SLEEPING, (double)retry_ms * jitter);
}

/* --burst: every caller starts a call at once; the round that ended (if
 * any, and if it started in the window) is counted. */
static void round_start(struct run *r)
{
    int64_t now = now_ns(CLOCK_MONOTONIC);
    if (r->measuring && r->round_started_ns >= r->window_started_ns)
        sample_add(&r->round_ns, now - r->round_started_ns);
    r->round_started_ns = now;
    r->round_left = r->o.callers;
    r->release_head = r->release_tail; /* a round's first admissions follow no release */
    for (uint32_t i = 0; i < r->o.callers; i++)
        call_start(r, &r->callers[i]);
}

static void answer(struct run *r, struct caller *c, int status, char *body)
{
    if (c->state == RESERVING) {
        reserve_answered(r, c, status, body);
        return;
    }
    assert(c->state == COMPLETING);
    if (status != 200 && r->measuring)
        r->errors++;
    if (r->o.burst) {
        c->state = IDLE;
        if (--r->round_left == 0)
            round_start(r);
        return;
    }
    if (r->o.think_ms > 0)
        sleep_for(r, c, THINKING, r->o.think_ms);
    else
        call_start(r, c);
}

/* Reads what arrived, with the kernel's arrival time of the first segment. */
static ssize_t caller_read(struct caller *c)
{
    char control[CMSG_SPACE(sizeof(struct timespec))];
    struct iovec vector = {.iov_base = c->in + c->in_length,
                           .iov_len = sizeof c->in - c->in_length - 1};
    struct msghdr message = {.msg_iov = &vector,
                             .msg_iovlen = 1,
                             .msg_control = control,
                             .msg_controllen = sizeof control};
    ssize_t n = recvmsg(c->fd, &message, 0);
    if (n <= 0 || c->answer_stamped)
        return n;
    c->answer_stamped = true;
    c->answer_real_ns = now_ns(CLOCK_REALTIME); /* if the kernel says nothing */
    for (struct cmsghdr *m = CMSG_FIRSTHDR(&message); m != NULL; m = CMSG_NXTHDR(&message, m)) {
        if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(m), sizeof t);
            c->answer_real_ns = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
        }
    }
    return n;
}

static void caller_lost(struct run *r, struct caller *c)
{
    if (r->measuring)
        r->errors++;
    epoll_ctl(r->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (caller_connect(r, c) == 0)
        call_start(r, c);
}

static void caller_readable(struct run *r, struct caller *c)
{
    for (;;) {
        ssize_t n = caller_read(c);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            caller_lost(r, c);
            return;
        }
        c->in_length += (uint32_t)n;
        int status = 0;
        uint32_t length = answer_length(c, &status);
        if (length == 0) {
            if (c->in_length + 1 >= sizeof c->in) {
                caller_lost(r, c);
                return;
            }
            continue;
        }
        assert(length == c->in_length); /* one request in flight per connection */
        c->in[length] = '\0';
        char *body = memmem(c->in, length, "\r\n\r\n", 4) + 4;
        c->in_length = 0;
        answer(r, c, status, body);
        return;
    }
}

/* ---- the run ------------------------------------------------------------- */

/* CPU time of a process, in seconds: user (utime) and system (stime). */
struct cpu_times {
    double user_s, system_s;
};

/* false when it cannot be read. */
static bool process_cpu(long pid, struct cpu_times *out)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')'); /* the name may hold spaces */
    if (p == NULL)
        return false;
    unsigned long utime = 0, stime = 0;
    /* after ") ": state, then fields 4..13, then utime (14) and stime (15) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return false;
    double tick = (double)sysconf(_SC_CLK_TCK);
    *out = (struct cpu_times){(double)utime / tick, (double)stime / tick};
    return true;
}

static double self_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void wake_sleepers(struct run *r)
{
    int64_t now = now_ns(CLOCK_MONOTONIC);
    while (r->heap_count > 0 && r->heap[0]->wake_at_ns <= now) {
        struct caller *c = heap_pop(r);
        if (c->state == HOLDING)
            complete_send(r, c);
        else if (c->state == THINKING)
            call_start(r, c);
        else
            reserve_send(r, c); /* a new lease id after the sleep */
    }
}

static int next_timeout_ms(const struct run *r, int64_t until_ns)
{
    int64_t at = until_ns;
    if (r->heap_count > 0 && r->heap[0]->wake_at_ns < at)
        at = r->heap[0]->wake_at_ns;
    int64_t ms = (at - now_ns(CLOCK_MONOTONIC) + 999999) / 1000000;
    return ms < 0 ? 0 : (int)(ms > 1000 ? 1000 : ms);
}

/* Runs the event loop until until_ns (monotonic). */
static void loop_until(struct run *r, int64_t until_ns)
{
    struct epoll_event events[EVENTS_MAX];
    while (now_ns(CLOCK_MONOTONIC) < until_ns) {
        int n = epoll_wait(r->epoll_fd, events, EVENTS_MAX, next_timeout_ms(r, until_ns));
        for (int i = 0; i < n; i++) {
            struct caller *c = events[i].data.ptr;
            if ((events[i].events & EPOLLOUT) != 0) {
                struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(r->epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
                caller_flush(r, c);
            }
            if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0)
                caller_readable(r, c);
        }
        wake_sleepers(r);
    }
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double quantile_ms(struct samples *s, double q)
{
    if (s->count == 0)
        return -1;
    uint64_t i = (uint64_t)(q * (double)(s->count - 1) + 0.5);
    return (double)s->values[i] / 1e6;
}

static const char *mode_name(enum mode mode)
{
    return mode == MODE_WAIT ? "wait" : mode == MODE_LOOP ? "loop" : "retry";
}

/* Calls not admitted by the end of the window: their age so far is a lower
 * bound of their latency (a caller starved by the others shows here, not in
 * call_ms). Callers admitted at least once in the window. */
static void report_pending(struct run *r, int64_t end_ns)
{
    struct samples pending = {.values = r->call_ns.values + r->call_ns.count, .count = 0};
    uint32_t served = 0;
    for (uint32_t i = 0; i < r->o.callers; i++) {
        const struct caller *c = &r->callers[i];
        served += c->admitted > 0;
        bool calling = c->state == RESERVING || c->state == SLEEPING;
        if (calling && r->call_ns.count + pending.count < SAMPLES_MAX)
            pending.values[pending.count++] = end_ns - c->call_started_ns;
    }
    qsort(pending.values, pending.count, sizeof(int64_t), compare_i64);
    printf("\"callers_served\":%u,\"pending\":{\"count\":%" PRIu64
           ",\"p99_ms\":%.1f,\"max_ms\":%.1f},",
           served, pending.count, quantile_ms(&pending, 0.99), quantile_ms(&pending, 1.0));
}

/* server: the server's CPU time over the window (both -1 when unknown). */
static void report(struct run *r, double seconds, struct cpu_times server, double client_cpu_s,
                   int64_t end_ns)
{
    qsort(r->call_ns.values, r->call_ns.count, sizeof(int64_t), compare_i64);
    qsort(r->handover_ns.values, r->handover_ns.count, sizeof(int64_t), compare_i64);
    double admitted = (double)r->admitted;
    printf("{\"mode\":\"%s\",\"callers\":%u,\"seconds\":%.2f,\"admitted\":%" PRIu64
           ",\"admitted_per_s\":%.0f,\"requests_per_s\":%.0f,\"denied_per_s\":%.0f,"
           "\"errors\":%" PRIu64 ",\"waited_admissions\":%" PRIu64 ",",
           mode_name(r->o.mode), r->o.callers, seconds, r->admitted, admitted / seconds,
           (double)r->requests / seconds, (double)r->denied / seconds, r->errors,
           r->waited_admissions);
    printf("\"call_ms\":{\"p50\":%.2f,\"p99\":%.2f,\"max\":%.2f},", quantile_ms(&r->call_ns, 0.5),
           quantile_ms(&r->call_ns, 0.99), quantile_ms(&r->call_ns, 1.0));
    printf("\"handover_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"samples\":%" PRIu64 "},",
           quantile_ms(&r->handover_ns, 0.5), quantile_ms(&r->handover_ns, 0.99),
           quantile_ms(&r->handover_ns, 1.0), r->handover_ns.count);
    report_pending(r, end_ns);
    if (r->o.burst) {
        qsort(r->round_ns.values, r->round_ns.count, sizeof(int64_t), compare_i64);
        printf("\"round_ms\":{\"p50\":%.2f,\"p99\":%.2f,\"max\":%.2f,\"rounds\":%" PRIu64 "},",
               quantile_ms(&r->round_ns, 0.5), quantile_ms(&r->round_ns, 0.99),
               quantile_ms(&r->round_ns, 1.0), r->round_ns.count);
    }
    double server_cpu_s = server.user_s >= 0 ? server.user_s + server.system_s : -1;
    bool known = admitted > 0 && server.user_s >= 0; /* the figures per admission */
    printf("\"server_cpu_s\":%.2f,\"server_cpu_us_per_admitted\":%.1f,"
           "\"server_user_us_per_admitted\":%.1f,\"server_system_us_per_admitted\":%.1f,"
           "\"client_cpu_s\":%.2f}\n",
           server_cpu_s, known ? server_cpu_s * 1e6 / admitted : -1,
           known ? server.user_s * 1e6 / admitted : -1,
           known ? server.system_s * 1e6 / admitted : -1, client_cpu_s);
}

static int run_open(struct run *r)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    if (getaddrinfo(r->o.host, r->o.port, &hints, &r->address) != 0) {
        fprintf(stderr, "bench_wait_http: cannot resolve %s:%s\n", r->o.host, r->o.port);
        return -1;
    }
    r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    r->callers = calloc(r->o.callers, sizeof *r->callers);
    r->heap = calloc(r->o.callers, sizeof *r->heap);
    r->call_ns.values = malloc(SAMPLES_MAX * sizeof(int64_t));
    r->handover_ns.values = malloc(SAMPLES_MAX * sizeof(int64_t));
    r->round_ns.values = malloc(SAMPLES_MAX * sizeof(int64_t));
    if (r->round_ns.values == NULL || r->epoll_fd < 0 || r->callers == NULL || r->heap == NULL ||
        r->call_ns.values == NULL || r->handover_ns.values == NULL) {
        fprintf(stderr, "bench_wait_http: out of memory\n");
        return -1;
    }
    for (uint32_t i = 0; i < r->o.callers; i++) {
        r->callers[i].index = i;
        if (caller_connect(r, &r->callers[i]) != 0) {
            fprintf(stderr, "bench_wait_http: connect %u: %s\n", i, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int bench(struct run *r)
{
    if (run_open(r) != 0)
        return 1;
    if (r->o.burst) {
        round_start(r);
    } else {
        for (uint32_t i = 0; i < r->o.callers; i++)
            call_start(r, &r->callers[i]);
    }
    loop_until(r, now_ns(CLOCK_MONOTONIC) + (int64_t)(r->o.warmup_s * 1e9));
    struct cpu_times server0, server1, server = {-1, -1};
    bool server_known = r->o.server_pid > 0 && process_cpu(r->o.server_pid, &server0);
    double client0 = self_cpu_s();
    int64_t started = now_ns(CLOCK_MONOTONIC);
    r->window_started_ns = started;
    r->measuring = true;
    loop_until(r, started + (int64_t)(r->o.duration_s * 1e9));
    r->measuring = false;
    int64_t end = now_ns(CLOCK_MONOTONIC);
    double seconds = (double)(end - started) / 1e9;
    if (server_known && process_cpu(r->o.server_pid, &server1))
        server = (struct cpu_times){server1.user_s - server0.user_s,
                                    server1.system_s - server0.system_s};
    report(r, seconds, server, self_cpu_s() - client0, end);
    for (uint32_t i = 0; i < r->o.callers; i++)
        close(r->callers[i].fd);
    return 0;
}

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out, "usage: bench_wait_http --url http://HOST:PORT --mode wait|loop|retry\n"
                 "         [--callers 1000] [--key bench:slots] [--wait-ms 60000]\n"
                 "         [--warmup 2] [--duration 10] [--server-pid PID]\n"
                 "         [--call-ms 0] [--think-ms 0] [--burst]\n"
                 "Callers on one concurrency limit (put it first), each completing when\n"
                 "admitted (after --call-ms) and calling again (after --think-ms; with\n"
                 "--burst, once every caller's call completed: rounds of one call each);\n"
                 "prints one JSON line: admitted/s, latency per call (first\n"
                 "reserve to admission), release-to-next-answer (a complete sent to the\n"
                 "next admission's arrival, kernel-stamped), llmlimitd's CPU per admission,\n"
                 "and with --burst each round's length (its first reserve to its last\n"
                 "complete's answer).\n");
}

static int parse_url(struct options *o, char *url)
{
    static char host[256];
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    char *colon = strrchr(url + 7, ':');
    if (colon == NULL || snprintf(host, sizeof host, "%.*s", (int)(colon - url - 7), url + 7) < 0)
        return -1;
    char *slash = strchr(colon, '/');
    if (slash != NULL)
        *slash = '\0';
    o->host = host;
    o->port = colon + 1;
    return 0;
}

static int parse_mode(struct options *o, const char *name)
{
    if (strcmp(name, "wait") == 0)
        o->mode = MODE_WAIT;
    else if (strcmp(name, "loop") == 0)
        o->mode = MODE_LOOP;
    else if (strcmp(name, "retry") == 0)
        o->mode = MODE_RETRY;
    else
        return -1;
    return 0;
}

static int parse_args(struct options *o, int argc, char **argv)
{
    *o = (struct options){.key = "bench:slots",
                          .callers = 1000,
                          .wait_ms = 60000,
                          .warmup_s = 2,
                          .duration_s = 10,
                          .mode = MODE_WAIT};
    bool url = false;
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(name, "--burst") == 0) {
            o->burst = true;
            continue;
        }
        int bad = value == NULL;
        if (strcmp(name, "--url") == 0 && value != NULL)
            bad = parse_url(o, argv[i + 1]), url = true;
        else if (strcmp(name, "--mode") == 0 && value != NULL)
            bad = parse_mode(o, value);
        else if (strcmp(name, "--callers") == 0 && value != NULL)
            o->callers = (uint32_t)strtoul(value, NULL, 10);
        else if (strcmp(name, "--key") == 0 && value != NULL)
            o->key = value;
        else if (strcmp(name, "--wait-ms") == 0 && value != NULL)
            o->wait_ms = (uint32_t)strtoul(value, NULL, 10);
        else if (strcmp(name, "--warmup") == 0 && value != NULL)
            o->warmup_s = atof(value);
        else if (strcmp(name, "--duration") == 0 && value != NULL)
            o->duration_s = atof(value);
        else if (strcmp(name, "--server-pid") == 0 && value != NULL)
            o->server_pid = atol(value);
        else if (strcmp(name, "--call-ms") == 0 && value != NULL)
            o->call_ms = (uint32_t)strtoul(value, NULL, 10);
        else if (strcmp(name, "--think-ms") == 0 && value != NULL)
            o->think_ms = (uint32_t)strtoul(value, NULL, 10);
        else
            bad = 1;
        if (bad)
            return -1;
        i++;
    }
    if (!url || o->callers < 1 || o->callers > CALLERS_MAX || o->duration_s <= 0 ||
        o->wait_ms < 1 || o->wait_ms > 60000 || strlen(o->key) > 128 || o->call_ms > 600000 ||
        o->think_ms > 600000 || (o->burst && o->think_ms > 0))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    static struct run r;
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (parse_args(&r.o, argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    r.random_state = (uint64_t)now_ns(CLOCK_MONOTONIC) | 1;
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max; /* a socket per caller */
        setrlimit(RLIMIT_NOFILE, &files);
    }
    return bench(&r);
}
