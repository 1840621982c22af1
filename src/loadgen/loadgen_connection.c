/* One load-generator connection: builds each request in place (body first,
 * then the headers written just in front of it, so nothing is copied twice),
 * sends it, and reads the answer far enough to count allowed, denied and
 * errors. Only Content-Length framed answers are understood. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "loadgen_internal.h"

int64_t loadgen_now_ns(void)
{
    struct timespec now;
    int rc = clock_gettime(CLOCK_MONOTONIC, &now);
    assert(rc == 0);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

int loadgen_connection_open(struct connection *connection, const struct loadgen_shared *shared)
{
    assert(connection->fd < 0); /* closed before it is opened again */
    int fd = socket(shared->address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)&shared->address, shared->address_length) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    connection->fd = fd;
    connection->receive_length = 0;
    connection->in_flight = REQUEST_NONE;
    connection->want_write = false;
    return 0;
}

void loadgen_connection_close(struct worker *worker, struct connection *connection)
{
    if (connection->fd < 0)
        return;
    epoll_ctl(worker->epoll_fd, EPOLL_CTL_DEL, connection->fd, NULL);
    close(connection->fd);
    connection->fd = -1;
    if (connection->in_flight != REQUEST_NONE) {
        assert(worker->in_flight > 0);
        worker->in_flight--;
        connection->in_flight = REQUEST_NONE;
    }
}

/* ---- building requests ---------------------------------------------------- */

static char *put_u64(char *out, uint64_t value)
{
    char digits[20];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (count > 0)
        *out++ = digits[--count];
    return out;
}

static uint64_t next_random(struct connection *connection)
{
    uint64_t x = connection->random_state; /* xorshift64: unique enough for ids */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    connection->random_state = x;
    return x;
}

/* A new lease id in UUID text form: UUIDv7 (48-bit Unix milliseconds, then
 * random bits) or all random. The per-connection generators are seeded from
 * getrandom, so ids never repeat across connections or runs. */
static char *put_lease_id(char *out, const struct loadgen_shared *shared,
                          struct connection *connection)
{
    assert(connection->random_state != 0); /* xorshift stays at 0 once there */
    char *start = out;
    uint8_t bytes[16];
    uint64_t a = next_random(connection), b = next_random(connection);
    for (int i = 0; i < 8; i++) {
        bytes[i] = (uint8_t)(a >> (8 * i));
        bytes[8 + i] = (uint8_t)(b >> (8 * i));
    }
    if (shared->config->ids == LOADGEN_IDS_UUIDV7) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        uint64_t ms = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
        for (int i = 0; i < 6; i++)
            bytes[i] = (uint8_t)(ms >> (8 * (5 - i)));
        bytes[6] = (uint8_t)(0x70 | (bytes[6] & 0x0f));
    } else {
        bytes[6] = (uint8_t)(0x40 | (bytes[6] & 0x0f));
    }
    bytes[8] = (uint8_t)(0x80 | (bytes[8] & 0x3f));
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *out++ = '-';
        *out++ = hex[bytes[i] >> 4];
        *out++ = hex[bytes[i] & 15];
    }
    assert(out - start == 36); /* the canonical UUID text form */
    return out;
}

/* {"lease_id":"<new id>","requirements":[...]} at out; returns its end. */
static char *put_reserve(char *out, const struct loadgen_shared *shared,
                         struct connection *connection)
{
    static const char head[] = "{\"lease_id\":\"";
    memcpy(out, head, sizeof(head) - 1);
    out += sizeof(head) - 1;
    char *lease_id = out;
    out = put_lease_id(out, shared, connection);
    connection->lease_id_length = (size_t)(out - lease_id);
    assert(connection->lease_id_length < LOADGEN_LEASE_ID_SIZE);
    memcpy(connection->lease_id, lease_id, connection->lease_id_length);
    memcpy(out, shared->requirements_tail, shared->requirements_tail_length);
    return out + shared->requirements_tail_length;
}

static char *put_complete(char *out, const struct loadgen_shared *shared,
                          const struct connection *connection)
{
    /* A complete follows an allowed reserve on the same connection. */
    assert(connection->lease_id_length > 0);
    static const char head[] = "{\"lease_id\":\"";
    memcpy(out, head, sizeof(head) - 1);
    out += sizeof(head) - 1;
    memcpy(out, connection->lease_id, connection->lease_id_length);
    out += connection->lease_id_length;
    memcpy(out, shared->actuals_tail, shared->actuals_tail_length);
    return out + shared->actuals_tail_length;
}

static char *put_batch(char *out, const struct loadgen_shared *shared,
                       struct connection *connection)
{
    static const char head[] = "{\"requests\":[";
    assert(shared->config->batch_size >= 1);
    memcpy(out, head, sizeof(head) - 1);
    out += sizeof(head) - 1;
    for (uint32_t i = 0; i < shared->config->batch_size; i++) {
        if (i > 0)
            *out++ = ',';
        out = put_reserve(out, shared, connection);
    }
    *out++ = ']';
    *out++ = '}';
    return out;
}

/* Writes the headers right in front of the body that starts at
 * LOADGEN_HEADER_ROOM and points send_data at them. */
static void put_headers(struct connection *connection, const char *header, size_t header_length,
                        size_t body_length)
{
    char length_text[24];
    char *end = put_u64(length_text, body_length);
    memcpy(end, "\r\n\r\n", 4);
    size_t length_length = (size_t)(end - length_text) + 4;
    size_t total = header_length + length_length;
    assert(total <= LOADGEN_HEADER_ROOM);
    char *start = connection->send_buffer + LOADGEN_HEADER_ROOM - total;
    memcpy(start, header, header_length);
    memcpy(start + header_length, length_text, length_length);
    assert(body_length > 0);
    connection->send_data = start;
    connection->send_length = total + body_length;
    connection->send_offset = 0;
}

static int want_write(struct worker *worker, struct connection *connection, bool on)
{
    if (connection->want_write == on)
        return 0;
    struct epoll_event event = {.events = EPOLLIN | (on ? EPOLLOUT : 0u), .data.ptr = connection};
    connection->want_write = on;
    return epoll_ctl(worker->epoll_fd, EPOLL_CTL_MOD, connection->fd, &event);
}

int loadgen_connection_send_more(struct worker *worker, struct connection *connection)
{
    while (connection->send_offset < connection->send_length) {
        ssize_t sent = send(connection->fd, connection->send_data + connection->send_offset,
                            connection->send_length - connection->send_offset, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return want_write(worker, connection, true);
        if (sent <= 0)
            return -1;
        connection->send_offset += (size_t)sent;
        assert(connection->send_offset <= connection->send_length);
    }
    return want_write(worker, connection, false);
}

static int send_request(struct worker *worker, struct connection *connection,
                        enum request_kind kind)
{
    const struct loadgen_shared *shared = worker->shared;
    char *body = connection->send_buffer + LOADGEN_HEADER_ROOM;
    char *end;
    if (kind == REQUEST_RESERVE) {
        end = put_reserve(body, shared, connection);
        put_headers(connection, shared->header_reserve, shared->header_reserve_length,
                    (size_t)(end - body));
    } else if (kind == REQUEST_BATCH) {
        end = put_batch(body, shared, connection);
        put_headers(connection, shared->header_batch, shared->header_batch_length,
                    (size_t)(end - body));
    } else if (kind == REQUEST_POST) {
        memcpy(body, shared->config->post_body, shared->config->post_body_length);
        end = body + shared->config->post_body_length;
        put_headers(connection, shared->header_post, shared->header_post_length,
                    (size_t)(end - body));
    } else {
        assert(kind == REQUEST_COMPLETE);
        end = put_complete(body, shared, connection);
        put_headers(connection, shared->header_complete, shared->header_complete_length,
                    (size_t)(end - body));
    }
    assert((size_t)(end - connection->send_buffer) <= shared->send_capacity);
    assert(connection->in_flight == REQUEST_NONE);
    connection->in_flight = kind;
    worker->in_flight++;
    connection->sent_at_ns = loadgen_now_ns();
    return loadgen_connection_send_more(worker, connection);
}

int loadgen_connection_send_next(struct worker *worker, struct connection *connection)
{
    enum loadgen_mode mode = worker->shared->config->mode;
    return send_request(worker, connection,
                        mode == LOADGEN_BATCH  ? REQUEST_BATCH
                        : mode == LOADGEN_POST ? REQUEST_POST
                                               : REQUEST_RESERVE);
}

/* ---- reading answers ----------------------------------------------------------- */

struct answer {
    int status;
    const char *body;
    size_t body_length;
    size_t total_length; /* headers and body */
    bool close;
};

static bool header_is(const char *line, const char *end, const char *name)
{
    size_t length = strlen(name);
    return (size_t)(end - line) >= length && strncasecmp(line, name, length) == 0;
}

/* The end of a chunked body that starts at body: 1 with *end set past its
 * last chunk (no trailers), 0 when it has not all arrived, -1 when it is not
 * chunked framing. */
static int chunked_end(const char *body, const char *data_end, const char **end)
{
    const char *p = body;
    for (;;) {
        const char *line_end = memmem(p, (size_t)(data_end - p), "\r\n", 2);
        if (line_end == NULL)
            return 0;
        uint64_t size = 0;
        const char *digit = p;
        for (; digit < line_end && isxdigit((unsigned char)*digit); digit++) {
            if (size > (LOADGEN_POST_ANSWER_BYTES_MAX >> 4))
                return -1;
            size = size * 16 + (uint64_t)(isdigit((unsigned char)*digit)
                                              ? *digit - '0'
                                              : (tolower((unsigned char)*digit) - 'a' + 10));
        }
        if (digit == p)
            return -1;
        const char *next = line_end + 2 + size + 2;
        if (next > data_end)
            return 0;
        if (size == 0) {
            *end = next;
            return 1;
        }
        p = next;
    }
}

/* 1: a whole answer is in the buffer; 0: not yet; -1: not HTTP we understand. */
static int answer_parse(const char *data, size_t length, struct answer *answer)
{
    const char *headers_end = memmem(data, length, "\r\n\r\n", 4);
    if (headers_end == NULL)
        return 0;
    if (length < 12 || memcmp(data, "HTTP/1.", 7) != 0)
        return -1;
    answer->status = (data[9] - '0') * 100 + (data[10] - '0') * 10 + (data[11] - '0');
    answer->close = false;
    int64_t content_length = -1;
    bool chunked = false;
    const char *line = memchr(data, '\n', (size_t)(headers_end - data)) + 1;
    while (line < headers_end) {
        const char *eol = memchr(line, '\r', (size_t)(headers_end + 2 - line));
        if (header_is(line, eol, "content-length:")) {
            content_length = 0;
            for (const char *p = line + 15; p < eol; p++) {
                if (*p >= '0' && *p <= '9')
                    content_length = content_length * 10 + (*p - '0');
            }
        } else if (header_is(line, eol, "transfer-encoding:") &&
                   memmem(line, (size_t)(eol - line), "chunked", 7) != NULL) {
            chunked = true;
        } else if (header_is(line, eol, "connection:") &&
                   memmem(line, (size_t)(eol - line), "close", 5) != NULL) {
            answer->close = true;
        }
        line = eol + 2;
    }
    size_t header_length = (size_t)(headers_end + 4 - data);
    if (chunked && content_length < 0) {
        const char *end;
        int whole = chunked_end(headers_end + 4, data + length, &end);
        if (whole <= 0)
            return whole;
        answer->body = headers_end + 4;
        answer->body_length = (size_t)(end - answer->body);
        answer->total_length = (size_t)(end - data);
        return 1;
    }
    if (content_length < 0)
        return -1;
    if (length < header_length + (size_t)content_length)
        return 0;
    answer->body = headers_end + 4;
    answer->body_length = (size_t)content_length;
    answer->total_length = header_length + (size_t)content_length;
    assert(answer->total_length <= length); /* the whole answer has arrived */
    return 1;
}

/* The value of a JSON boolean after `"name"` at p: 1 true, 0 false, -1 none. */
static int bool_after(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == ':' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    if (p < end && *p == 't')
        return 1;
    if (p < end && *p == 'f')
        return 0;
    return -1;
}

/* Counts `"name": true` and `"name": false` in a body. */
static void count_bools(const char *body, size_t length, const char *name, uint64_t *trues,
                        uint64_t *falses)
{
    size_t name_length = strlen(name);
    const char *end = body + length;
    const char *p = body;
    while (p < end) {
        const char *found = memmem(p, (size_t)(end - p), name, name_length);
        if (found == NULL)
            break;
        int value = bool_after(found + name_length, end);
        if (value == 1)
            (*trues)++;
        else if (value == 0)
            (*falses)++;
        p = found + name_length;
    }
}

/* Counts one answer; returns the request to send next on this connection. */
static enum request_kind answer_count(struct worker *worker, struct connection *connection,
                                      const struct answer *answer)
{
    struct loadgen_report *report = &worker->report;
    enum request_kind kind = connection->in_flight;
    uint64_t allowed = 0, denied = 0,
             expected = kind == REQUEST_BATCH ? worker->shared->config->batch_size : 1;
    if (answer->status != 200) {
        report->errors += expected;
        return kind == REQUEST_COMPLETE ? REQUEST_RESERVE : kind;
    }
    if (kind == REQUEST_POST) { /* a 200 is a call made */
        report->allowed++;
        report->reserves++;
        atomic_fetch_add_explicit(&worker->progress_reserves, 1, memory_order_relaxed);
        return REQUEST_POST;
    }
    if (kind == REQUEST_COMPLETE) {
        count_bools(answer->body, answer->body_length, "\"ok\"", &allowed, &denied);
        if (allowed == 1)
            report->completes++;
        else
            report->errors++;
        return REQUEST_RESERVE;
    }
    count_bools(answer->body, answer->body_length, "\"allowed\"", &allowed, &denied);
    report->allowed += allowed;
    report->denied += denied;
    report->reserves += allowed + denied;
    if (allowed + denied < expected)
        report->errors += expected - allowed - denied;
    atomic_fetch_add_explicit(&worker->progress_reserves, allowed + denied, memory_order_relaxed);
    if (kind == REQUEST_RESERVE && allowed == 1 &&
        worker->shared->config->mode == LOADGEN_RESERVE_COMPLETE)
        return REQUEST_COMPLETE;
    return kind;
}

static int answer_done(struct worker *worker, struct connection *connection,
                       const struct answer *answer)
{
    int64_t now = loadgen_now_ns();
    loadgen_histogram_record(&worker->report.latency_ns, (uint64_t)(now - connection->sent_at_ns));
    worker->report.requests++;
    worker->last_answer_ns = now;
    atomic_fetch_add_explicit(&worker->progress_requests, 1, memory_order_relaxed);
    enum request_kind next = answer_count(worker, connection, answer);
    assert(connection->in_flight != REQUEST_NONE);
    assert(worker->in_flight > 0);
    connection->in_flight = REQUEST_NONE;
    worker->in_flight--;
    if (answer->total_length != connection->receive_length)
        return -1; /* bytes nobody asked for: the stream is out of step */
    connection->receive_length = 0;
    if (answer->close)
        return -1;
    if (worker->draining)
        return 0;
    return send_request(worker, connection, next);
}

int loadgen_connection_readable(struct worker *worker, struct connection *connection)
{
    assert(connection->receive_length <= worker->shared->receive_capacity);
    size_t room = worker->shared->receive_capacity - connection->receive_length;
    if (room == 0)
        return -1; /* an answer larger than any this mode should get */
    ssize_t got =
        recv(connection->fd, connection->receive_buffer + connection->receive_length, room, 0);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (got <= 0)
        return -1;
    connection->receive_length += (size_t)got;
    if (connection->in_flight == REQUEST_NONE)
        return -1; /* the server spoke unasked */
    struct answer answer;
    int parsed = answer_parse(connection->receive_buffer, connection->receive_length, &answer);
    if (parsed == 0)
        return 0;
    if (parsed < 0) {
        worker->report.errors++;
        return -1;
    }
    return answer_done(worker, connection, &answer);
}
