/* The etcd client (src/control/ctl_etcd.c) against a fake member that
 * answers what a broken or hostile store might: a watch line one byte past
 * CTL_WATCH_LINE_BYTES_MAX, bad JSON, bad base64, a canceled watch, an
 * answer past CTL_RESPONSE_BYTES_MAX, a member that closes at once. Each
 * is an error returned, never an assert, and what came before it in the
 * stream was handed on. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/ctl_bounds.h"
#include "control/ctl_etcd.h"
#include "test.h"

/* One connection's answer: the fake member's whole reply body. */
struct fake {
    int listener;
    uint16_t port;
    const char *body; /* NUL-terminated; or body_length bytes of filler */
    size_t filler_length;
    int answers; /* connections to answer, each the same (0: one) */
    pthread_t thread;
};

static void write_all(int fd, const char *data, size_t length)
{
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n <= 0)
            return;
        data += n;
        length -= (size_t)n;
    }
}

/* Reads the request head and enough of the body, then answers and closes. */
static void serve_one(struct fake *f)
{
    int fd = accept(f->listener, NULL, NULL);
    if (fd < 0)
        return;
    char request[8192];
    ssize_t got = read(fd, request, sizeof request); /* the small request arrives at once */
    (void)got;
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: "
                       "close\r\n\r\n";
    write_all(fd, head, strlen(head));
    if (f->body != NULL)
        write_all(fd, f->body, strlen(f->body));
    if (f->filler_length > 0) {
        char block[65536];
        memset(block, 'x', sizeof block);
        for (size_t sent = 0; sent < f->filler_length; sent += sizeof block) {
            size_t n =
                f->filler_length - sent < sizeof block ? f->filler_length - sent : sizeof block;
            write_all(fd, block, n);
        }
    }
    close(fd);
}

static void *serve(void *context)
{
    struct fake *f = context;
    for (int i = 0; i < (f->answers > 0 ? f->answers : 1); i++)
        serve_one(f);
    return NULL;
}

static struct ctl_etcd *fake_answering(struct fake *f, const char *body, size_t filler_length,
                                       int answers)
{
    memset(f, 0, sizeof *f);
    f->body = body;
    f->filler_length = filler_length;
    f->answers = answers;
    f->listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(f->listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(f->listener, 4) != 0 ||
        getsockname(f->listener, (struct sockaddr *)&address, &length) != 0)
        abort();
    f->port = ntohs(address.sin_port);
    pthread_create(&f->thread, NULL, serve, f);
    char url[64], error[256];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%u", (unsigned)f->port);
    struct ctl_etcd *etcd = NULL;
    if (ctl_etcd_open(url, &etcd, error, sizeof error) != 0)
        abort();
    return etcd;
}

static struct ctl_etcd *fake_start(struct fake *f, const char *body, size_t filler_length)
{
    return fake_answering(f, body, filler_length, 1);
}

static void fake_stop(struct fake *f, struct ctl_etcd *etcd)
{
    pthread_join(f->thread, NULL);
    close(f->listener);
    ctl_etcd_close(etcd);
}

static int responses;

static int count_response(void *context, const struct ctl_watch_response *response)
{
    (void)context;
    responses += 1 + (int)response->count;
    return 0;
}

/* Runs a watch against a fake member answering body (+ filler bytes). */
static int watch_against(const char *body, size_t filler_length, bool *compacted, char *error,
                         size_t error_size)
{
    struct fake f;
    struct ctl_etcd *etcd = fake_start(&f, body, filler_length);
    int stop = 0;
    responses = 0;
    int result =
        ctl_etcd_watch(etcd, "/p/", 1, count_response, NULL, &stop, compacted, error, error_size);
    fake_stop(&f, etcd);
    return result;
}

#define CREATED "{\"result\":{\"header\":{\"revision\":\"3\"},\"created\":true}}\n"

static void watch_line_bound(void)
{
    char error[256];
    bool compacted;
    /* A line of exactly CTL_WATCH_LINE_BYTES_MAX bytes is read whole (and is bad JSON). */
    CHECK(watch_against(CREATED, CTL_WATCH_LINE_BYTES_MAX, &compacted, error, sizeof error) == -1);
    CHECK(strstr(error, "past") == NULL);
    CHECK_EQ_I64(responses, 1);
    CHECK(watch_against(CREATED, CTL_WATCH_LINE_BYTES_MAX + 1, &compacted, error, sizeof error) ==
          -1);
    CHECK(strstr(error, "watch line past") != NULL);
    CHECK_EQ_I64(responses, 1);
}

static void watch_bad_lines(void)
{
    char error[256];
    bool compacted = true;
    CHECK(watch_against(CREATED "{\"result\":\n", 0, &compacted, error, sizeof error) == -1);
    CHECK(strstr(error, "invalid JSON") != NULL);
    CHECK_EQ_I64(responses, 1);
    CHECK(watch_against(CREATED "{\"result\":{\"header\":{\"revision\":\"4\"},\"events\":[{\"kv\":"
                                "{\"key\":\"a!==\"}}]}}\n",
                        0, &compacted, error, sizeof error) == -1);
    CHECK(strstr(error, "base64") != NULL);
    CHECK(watch_against(CREATED "{\"result\":{\"header\":{\"revision\":\"9\"},\"canceled\":true,"
                                "\"compact_revision\":\"8\"}}\n",
                        0, &compacted, error, sizeof error) == -1);
    CHECK(compacted);
    CHECK(watch_against(CREATED "{\"result\":{\"header\":{\"revision\":\"4\"},\"events\":[{\"kv\":"
                                "{\"key\":\"L3AvYQ==\",\"mod_revision\":\"4\"}}]}}\n",
                        0, &compacted, error, sizeof error) == -1);
    CHECK(strstr(error, "stream ended") != NULL); /* the member closed: an end, not a stop */
    CHECK_EQ_I64(responses, 3);                   /* created, then one response of one event */
    CHECK(!compacted);
}

static void unary_bounds(void)
{
    char error[256];
    int64_t revision;
    struct fake f;
    /* The answer is CTL_RESPONSE_BYTES_MAX bytes of filler after a valid-looking start. */
    struct ctl_etcd *etcd = fake_start(&f, NULL, CTL_RESPONSE_BYTES_MAX + 1);
    CHECK(ctl_etcd_put(etcd, "k", 1, "v", 1, &revision, error, sizeof error) == -1);
    CHECK(strstr(error, "answer past") != NULL);
    fake_stop(&f, etcd);
    etcd = fake_start(&f, "{\"header\":{\"revision\":\"x\"}}", 0);
    CHECK(ctl_etcd_put(etcd, "k", 1, "v", 1, &revision, error, sizeof error) == -1);
    fake_stop(&f, etcd);
    etcd = fake_start(&f, "", 0);
    struct ctl_range range;
    CHECK(ctl_etcd_range_prefix(etcd, "/p/", &range, error, sizeof error) == -1);
    fake_stop(&f, etcd);
    etcd = fake_start(&f, "{\"header\":{\"revision\":\"5\"}}", 0);
    CHECK(ctl_etcd_put(etcd, "k", 1, "v", 1, &revision, error, sizeof error) == 0);
    CHECK_EQ_I64(revision, 5);
    fake_stop(&f, etcd);
    /* A range page past the bound is asked again with half the keys, down
     * to one (1024, 512, ..., 1: 11 asks), then fails with the reason. */
    int asks = 1;
    for (uint32_t keys = CTL_RANGE_FIRST_PAGE_KEYS; keys > 1; keys /= 2)
        asks++;
    etcd = fake_answering(&f, NULL, CTL_RESPONSE_BYTES_MAX + 1, asks);
    CHECK(ctl_etcd_range_prefix(etcd, "/p/", &range, error, sizeof error) == -1);
    CHECK(strstr(error, "answer past") != NULL);
    fake_stop(&f, etcd); /* joins: the fake answered every ask */
}

/* No member listening: every call fails at once with the reason. */
static void nobody_there(void)
{
    /* A port that was free a moment ago, with nobody listening on it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    REQUIRE(bind(fd, (struct sockaddr *)&address, sizeof address) == 0);
    REQUIRE(getsockname(fd, (struct sockaddr *)&address, &length) == 0);
    close(fd);
    unsigned port = ntohs(address.sin_port);
    char url[64], error[256];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%u,127.0.0.1:%u", port, port);
    struct ctl_etcd *etcd;
    REQUIRE(ctl_etcd_open(url, &etcd, error, sizeof error) == 0);
    int64_t revision;
    CHECK(ctl_etcd_put(etcd, "k", 1, "v", 1, &revision, error, sizeof error) == -1);
    CHECK(strstr(error, "127.0.0.1") != NULL);
    int stop = 0;
    bool compacted;
    CHECK(ctl_etcd_watch(etcd, "/p/", 1, count_response, NULL, &stop, &compacted, error,
                         sizeof error) == -1);
    ctl_etcd_close(etcd);
}

int main(void)
{
    RUN(watch_line_bound, "a watch line of CTL_WATCH_LINE_BYTES_MAX is read; one byte more fails");
    RUN(watch_bad_lines, "bad JSON, bad base64, a cancel or a close end the watch with -1");
    RUN(unary_bounds, "an answer past CTL_RESPONSE_BYTES_MAX, malformed or empty is an error");
    RUN(nobody_there, "with no member listening, a call fails with the member named");
    return test_summary();
}
