/* The session protocol over a non-blocking TCP socket, driven by poll()
 * with deadlines. The rules it follows (research brief section 4):
 * - after every (re)connect a ping_client goes first, because a 0.15.3
 *   server only learns which client owns a connection from a ping or a
 *   register, and drops replies to an unknown connection;
 * - a request is resent with exactly the same bytes until its reply comes
 *   (a changed byte is a "request collision" the server ignores forever);
 * - a reply counts only if it names our client, our request number and the
 *   checksum of what we sent; its context is the next request's parent;
 * - an eviction ends the session; the next ready() registers a new one
 *   with a new client id (an id is never reused for a new session). */
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "ids.h"
#include "message.h"

#define RECONNECT_BACKOFF_MS_MIN 20

/* Statistics are read by other threads (tb_submitter_stats). */
#define COUNT(field) __atomic_fetch_add(&(field), 1, __ATOMIC_RELAXED)
#define RECONNECT_BACKOFF_MS_MAX 500

enum receive_event {
    RECEIVE_NOTHING = 0,
    RECEIVE_REPLY = 1,
    RECEIVE_PONG = 2,
    RECEIVE_EVICTED = 3,
    RECEIVE_LOST = 4,
};

static int64_t now_ms(void)
{
    return clock_monotonic_ms();
}

/* LLMLIMIT_TB_TRACE=1 logs the session's protocol events to stderr. */
static bool trace_enabled(void)
{
    static int enabled = -1;
    if (enabled < 0) {
        const char *value = getenv("LLMLIMIT_TB_TRACE");
        enabled = value != NULL && value[0] == '1';
    }
    return enabled != 0;
}

#define TRACE(s, ...)                                                                              \
    do {                                                                                           \
        if (trace_enabled()) {                                                                     \
            fprintf(stderr, "tb session %016llx: ", (unsigned long long)(s)->client.low);          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

int tb_session_init(struct tb_session *s, tb_u128 cluster, const struct tb_address *addresses,
                    uint32_t address_count)
{
    assert(address_count >= 1 && address_count <= TB_REPLICAS_MAX);
    memset(s, 0, sizeof *s);
    s->cluster = cluster;
    s->addresses = addresses;
    s->address_count = address_count;
    s->release_hint = TB_RELEASE_0_15_3;
    s->fd = -1;
    s->client = tb_id_random();
    s->reconnect_backoff_ms = RECONNECT_BACKOFF_MS_MIN;
    s->batch_size_limit = TB_BODY_SIZE_MAX;
    s->send = aligned_alloc(16, TB_MESSAGE_SIZE_MAX);
    s->receive = aligned_alloc(16, TB_MESSAGE_SIZE_MAX);
    if (s->send == NULL || s->receive == NULL) {
        free(s->send);
        free(s->receive);
        s->send = s->receive = NULL;
        return -1;
    }
    return 0;
}

void tb_session_free(struct tb_session *s)
{
    tb_session_disconnect(s);
    free(s->send);
    free(s->receive);
    s->send = s->receive = NULL;
}

uint8_t *tb_session_body(struct tb_session *s)
{
    return s->send + TB_HEADER_SIZE;
}

void tb_session_disconnect(struct tb_session *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    s->connected_at_ms = 0;
    s->receive_fill = 0;
    s->reply_consumed = 0;
}

/* Writes all bytes by deadline_ms. 0, or -1 (the connection is closed). */
static int write_all(struct tb_session *s, const uint8_t *data, uint32_t size, int64_t deadline_ms)
{
    uint32_t written = 0;
    while (written < size) {
        ssize_t n = send(s->fd, data + written, size - written, MSG_NOSIGNAL);
        if (n > 0) {
            written += (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int64_t wait = deadline_ms - now_ms();
            struct pollfd p = {.fd = s->fd, .events = POLLOUT};
            if (wait > 0 && poll(&p, 1, (int)wait) > 0 && !(p.revents & (POLLERR | POLLHUP)))
                continue;
        }
        tb_session_disconnect(s);
        return -1;
    }
    return 0;
}

static uint32_t ping_release(const struct tb_session *s)
{
    if (s->registered)
        return s->release;
    return s->server_release != 0 ? s->server_release : s->release_hint;
}

static int send_ping(struct tb_session *s, int64_t deadline_ms)
{
    uint8_t header[TB_HEADER_SIZE];
    tb_message_ping_client(header, s->cluster, ping_release(s), s->client);
    return write_all(s, header, TB_HEADER_SIZE, deadline_ms);
}

static int open_socket(const struct tb_address *address, int64_t deadline_ms)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *found = NULL;
    if (getaddrinfo(address->host, address->port, &hints, &found) != 0 || found == NULL)
        return -1;
    int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    found->ai_protocol);
    if (fd < 0) {
        freeaddrinfo(found);
        return -1;
    }
    int rc = connect(fd, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0 && errno == EINPROGRESS) {
        int64_t wait = deadline_ms - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int error = 0;
        socklen_t length = sizeof error;
        if (wait > 0 && poll(&p, 1, (int)wait) > 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
            rc = 0;
    }
    if (rc != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    return fd;
}

/* One connection attempt (respecting the reconnect backoff); on success
 * sends the ping and, if a request is in flight, its exact bytes again. */
static int connect_once(struct tb_session *s, int64_t deadline_ms)
{
    int64_t now = now_ms();
    if (now < s->reconnect_after_ms)
        return -1;
    int64_t connect_deadline = now + TB_CONNECT_TIMEOUT_MS;
    if (connect_deadline > deadline_ms)
        connect_deadline = deadline_ms;
    /* The primary of view v is replica v % count (brief 4.2). */
    const struct tb_address *address = &s->addresses[s->address_index % s->address_count];
    int fd = open_socket(address, connect_deadline);
    if (fd < 0) {
        s->address_index = (s->address_index + 1) % s->address_count;
        s->reconnect_after_ms = now_ms() + s->reconnect_backoff_ms;
        s->reconnect_backoff_ms *= 2;
        if (s->reconnect_backoff_ms > RECONNECT_BACKOFF_MS_MAX)
            s->reconnect_backoff_ms = RECONNECT_BACKOFF_MS_MAX;
        return -1;
    }
    s->fd = fd;
    TRACE(s, "connected to %s:%s", address->host, address->port);
    s->connected_at_ms = now_ms();
    s->receive_fill = 0;
    s->reconnect_backoff_ms = RECONNECT_BACKOFF_MS_MIN;
    COUNT(s->stats.reconnects);
    if (send_ping(s, deadline_ms) != 0)
        return -1;
    if (s->in_flight && write_all(s, s->send, s->send_size, deadline_ms) != 0)
        return -1;
    return 0;
}

static void learn_view(struct tb_session *s, const uint8_t *header)
{
    uint32_t view = tb_message_view(header);
    if (view > s->view)
        s->view = view;
}

static void handle_register_reply(struct tb_session *s, const struct tb_reply_fields *reply,
                                  const uint8_t *body, uint32_t body_size)
{
    s->session = reply->commit;
    s->registered = true;
    s->in_flight_register = false;
    s->batch_size_limit = TB_BODY_SIZE_MAX;
    if (s->dialect == TB_DIALECT_0_17 && body_size >= 4) {
        /* RegisterResult.batch_size_limit (brief 5.6); 0 on releases that
         * do not announce one. */
        uint32_t limit = tb_get_u32(body);
        if (limit >= TB_BATCH_SIZE_LIMIT_MIN && limit <= TB_BODY_SIZE_MAX)
            s->batch_size_limit = limit;
    }
    COUNT(s->stats.registrations);
}

static enum receive_event handle_reply(struct tb_session *s, const uint8_t *message)
{
    struct tb_reply_fields reply;
    tb_message_reply_read(message, &reply);
    if (!s->in_flight || !tb_u128_equal(reply.client, s->client) || reply.request != s->request)
        return RECEIVE_NOTHING; /* a late duplicate of an earlier reply */
    if (!tb_u128_equal(reply.request_checksum, s->in_flight_checksum))
        return RECEIVE_NOTHING;
    learn_view(s, message);
    s->parent = reply.context;
    s->in_flight = false;
    const uint8_t *body = message + TB_HEADER_SIZE;
    uint32_t body_size = tb_message_size(message) - TB_HEADER_SIZE;
    if (s->in_flight_register)
        handle_register_reply(s, &reply, body, body_size);
    s->reply_body = body;
    s->reply_body_size = body_size;
    s->reply_timestamp = reply.timestamp;
    return RECEIVE_REPLY;
}

static enum receive_event handle_message(struct tb_session *s, const uint8_t *message)
{
    TRACE(s, "received command %u size %u view %u release %u", tb_message_command(message),
          tb_message_size(message), tb_message_view(message), tb_message_release(message));
    switch (tb_message_command(message)) {
    case TB_COMMAND_PONG_CLIENT:
        learn_view(s, message);
        s->server_release = tb_message_release(message);
        return RECEIVE_PONG;
    case TB_COMMAND_EVICTION:
        if (!tb_u128_equal(tb_message_eviction_client(message), s->client))
            return RECEIVE_NOTHING;
        if (tb_message_view(message) < s->view)
            return RECEIVE_NOTHING; /* from an old view: ignored, as the official client does */
        s->server_release = tb_message_release(message);
        s->last_eviction_reason = tb_message_eviction_reason(message);
        return RECEIVE_EVICTED;
    case TB_COMMAND_REPLY:
        return handle_reply(s, message);
    default:
        return RECEIVE_NOTHING; /* replica-to-replica traffic is none of ours */
    }
}

/* Consumes whole messages at the front of the receive buffer. A reply or
 * eviction stops it (the reply body stays in place until the next read). */
static enum receive_event process_buffer(struct tb_session *s, uint32_t *consumed)
{
    enum receive_event last = RECEIVE_NOTHING;
    uint32_t at = 0;
    while (s->receive_fill - at >= TB_HEADER_SIZE) {
        const uint8_t *message = s->receive + at;
        int verified = tb_message_header_verify(message, s->cluster);
        if (verified != TB_MESSAGE_OK) {
            TRACE(s, "bad header from server (%d): dropping the connection", verified);
            return RECEIVE_LOST;
        }
        uint32_t size = tb_message_size(message);
        if (s->receive_fill - at < size)
            break;
        if (tb_message_body_verify(message) != TB_MESSAGE_OK)
            return RECEIVE_LOST;
        at += size;
        enum receive_event event = handle_message(s, message);
        if (event == RECEIVE_REPLY || event == RECEIVE_EVICTED) {
            *consumed = at;
            return event;
        }
        if (event == RECEIVE_PONG)
            last = RECEIVE_PONG;
    }
    *consumed = at;
    return last;
}

static void compact(struct tb_session *s, uint32_t consumed)
{
    assert(consumed <= s->receive_fill);
    memmove(s->receive, s->receive + consumed, s->receive_fill - consumed);
    s->receive_fill -= consumed;
}

/* Waits for input until until_ms and handles what arrived. */
static enum receive_event receive_step(struct tb_session *s, int64_t until_ms)
{
    if (s->reply_consumed > 0) {
        compact(s, s->reply_consumed);
        s->reply_consumed = 0;
    }
    uint32_t consumed = 0;
    enum receive_event event = process_buffer(s, &consumed);
    if (event == RECEIVE_LOST)
        return event;
    if (event != RECEIVE_NOTHING) {
        /* Keep the reply's bytes where they are; drop them next time. */
        s->reply_consumed = consumed;
        return event;
    }
    compact(s, consumed);
    int64_t wait = until_ms - now_ms();
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    int ready = poll(&p, 1, wait > 0 ? (int)wait : 0);
    if (ready <= 0)
        return RECEIVE_NOTHING;
    ssize_t n = recv(s->fd, s->receive + s->receive_fill, TB_MESSAGE_SIZE_MAX - s->receive_fill, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
        return RECEIVE_LOST;
    if (n > 0)
        s->receive_fill += (uint32_t)n;
    event = process_buffer(s, &consumed);
    if (event == RECEIVE_REPLY || event == RECEIVE_EVICTED)
        s->reply_consumed = consumed;
    else if (event != RECEIVE_LOST)
        compact(s, consumed);
    return event;
}

static void sleep_until(int64_t until_ms)
{
    int64_t wait = until_ms - now_ms();
    if (wait > 0)
        poll(NULL, 0, (int)wait);
}

static bool connected(const struct tb_session *s)
{
    return s->fd >= 0;
}

/* Waits for the in-flight request's reply until deadline_ms, resending it
 * on a timer and after every reconnect. */
static int wait_reply(struct tb_session *s, int64_t deadline_ms)
{
    for (;;) {
        int64_t now = now_ms();
        if (now - s->in_flight_since_ms > TB_STALE_REQUEST_MS_MAX) {
            s->dead = true; /* give the session up; its request's fate stays unknown */
            return TB_SESSION_TIMEOUT;
        }
        if (now >= deadline_ms)
            return TB_SESSION_TIMEOUT;
        if (!connected(s) && connect_once(s, deadline_ms) != 0) {
            int64_t until =
                s->reconnect_after_ms < deadline_ms ? s->reconnect_after_ms : deadline_ms;
            sleep_until(until > now ? until : now + 1);
            continue;
        }
        if (now >= s->retransmit_at_ms) {
            COUNT(s->stats.retransmissions);
            if (write_all(s, s->send, s->send_size, deadline_ms) != 0)
                continue;
            s->retransmit_interval_ms *= 2;
            if (s->retransmit_interval_ms > TB_RETRANSMIT_MS_MAX)
                s->retransmit_interval_ms = TB_RETRANSMIT_MS_MAX;
            s->retransmit_at_ms = now + s->retransmit_interval_ms;
        }
        int64_t until = s->retransmit_at_ms < deadline_ms ? s->retransmit_at_ms : deadline_ms;
        switch (receive_step(s, until)) {
        case RECEIVE_REPLY:
            return TB_SESSION_OK;
        case RECEIVE_EVICTED:
            COUNT(s->stats.evictions);
            s->in_flight = false;
            s->dead = true;
            return TB_SESSION_EVICTED;
        case RECEIVE_LOST:
            TRACE(s, "connection lost while waiting for request %u", s->request);
            tb_session_disconnect(s);
            break;
        default:
            break;
        }
    }
}

/* Seals the request in s->send and puts it on the wire. */
static void start_request(struct tb_session *s, uint8_t operation, uint32_t body_size,
                          int64_t deadline_ms)
{
    struct tb_request_fields fields = {
        .cluster = s->cluster,
        .view = s->view,
        .release = s->release,
        .parent = s->parent,
        .client = s->client,
        .session = s->session,
        .request = s->request,
        .operation = operation,
    };
    tb_message_request(s->send, &fields, body_size);
    s->send_size = TB_HEADER_SIZE + body_size;
    s->in_flight = true;
    s->in_flight_checksum = tb_message_checksum(s->send);
    int64_t now = now_ms();
    s->in_flight_since_ms = now;
    s->retransmit_interval_ms = TB_RETRANSMIT_MS_MIN;
    s->retransmit_at_ms = now + TB_RETRANSMIT_MS_MIN;
    COUNT(s->stats.requests);
    TRACE(s, "request %u operation %u size %u", s->request, operation, s->send_size);
    if (connected(s))
        write_all(s, s->send, s->send_size, deadline_ms); /* a failure reconnects and resends */
}

/* Learns the server's release from a pong (or an eviction of the ping). */
static int probe_release(struct tb_session *s, int64_t deadline_ms)
{
    int64_t ping_again_ms = now_ms() + TB_RETRANSMIT_MS_MIN;
    while (s->server_release == 0 || s->fd < 0) {
        int64_t now = now_ms();
        if (now >= deadline_ms)
            return TB_SESSION_TIMEOUT;
        if (!connected(s)) {
            if (connect_once(s, deadline_ms) != 0)
                return TB_SESSION_DISCONNECTED;
            continue;
        }
        if (now >= ping_again_ms) {
            send_ping(s, deadline_ms);
            ping_again_ms = now + TB_RETRANSMIT_MS_MAX;
        }
        enum receive_event event =
            receive_step(s, ping_again_ms < deadline_ms ? ping_again_ms : deadline_ms);
        if (event == RECEIVE_LOST)
            tb_session_disconnect(s);
        if (event == RECEIVE_EVICTED)
            s->client = tb_id_random(); /* the ping's release was out of range: fresh id */
    }
    return TB_SESSION_OK;
}

static void start_register(struct tb_session *s, int64_t deadline_ms)
{
    s->release = s->server_release;
    s->dialect = tb_dialect_for_release(s->server_release);
    s->session = 0;
    s->request = 0;
    s->parent = tb_u128_make(0, 0);
    /* 0.15.3 takes no body (one makes the header invalid); 0.16.33+
     * requires a zeroed 256-byte RegisterRequest (brief 2.2, 6.3). */
    uint32_t body_size = s->dialect == TB_DIALECT_0_17 ? TB_REGISTER_BODY_SIZE : 0;
    memset(tb_session_body(s), 0, body_size);
    s->in_flight_register = true;
    start_request(s, TB_OPERATION_REGISTER, body_size, deadline_ms);
}

/* Forgets an evicted or abandoned session: the next one gets a new id. */
static void reset_session(struct tb_session *s)
{
    tb_session_disconnect(s);
    s->client = tb_id_random();
    s->registered = false;
    s->in_flight = false;
    s->in_flight_register = false;
    s->session = 0;
    s->request = 0;
    s->dead = false;
    s->server_release = 0; /* probe again: the server may have been upgraded */
}

int tb_session_ready(struct tb_session *s, int64_t deadline_ms)
{
    if (s->dead)
        reset_session(s);
    if (!connected(s) && !s->in_flight && connect_once(s, deadline_ms) != 0)
        return TB_SESSION_DISCONNECTED;
    if (!s->registered && !s->in_flight) {
        int rc = probe_release(s, deadline_ms);
        if (rc != TB_SESSION_OK)
            return rc;
        start_register(s, deadline_ms);
    }
    if (s->in_flight) {
        int rc = wait_reply(s, deadline_ms);
        if (rc != TB_SESSION_OK)
            return rc;
    }
    return s->registered ? TB_SESSION_OK : TB_SESSION_TIMEOUT;
}

bool tb_session_alive(struct tb_session *s)
{
    if (!connected(s) || !s->registered || s->dead || s->in_flight)
        return false;
    switch (receive_step(s, now_ms())) {
    case RECEIVE_LOST:
        TRACE(s, "connection closed while idle");
        tb_session_disconnect(s);
        return false;
    case RECEIVE_EVICTED:
        s->dead = true;
        return false;
    default:
        return true;
    }
}

int tb_session_call(struct tb_session *s, uint8_t operation, uint32_t body_size,
                    int64_t deadline_ms)
{
    assert(s->registered);
    assert(!s->in_flight);
    assert(body_size <= s->batch_size_limit);
    s->request++;
    start_request(s, operation, body_size, deadline_ms);
    return wait_reply(s, deadline_ms);
}

static int parse_one_address(const char *text, size_t length, struct tb_address *out)
{
    const char *colon = memrchr(text, ':', length);
    const char *port = colon ? colon + 1 : text;
    size_t port_length = length - (size_t)(port - text);
    size_t host_length = colon ? (size_t)(colon - text) : 0;
    if (port_length == 0 || port_length >= sizeof out->port || host_length > TB_ADDRESS_LENGTH_MAX)
        return -1;
    for (size_t i = 0; i < port_length; i++) {
        if (port[i] < '0' || port[i] > '9')
            return -1;
    }
    memcpy(out->port, port, port_length);
    out->port[port_length] = '\0';
    if (host_length == 0) {
        strcpy(out->host, "127.0.0.1");
    } else {
        memcpy(out->host, text, host_length);
        out->host[host_length] = '\0';
    }
    return 0;
}

int tb_addresses_parse(const char *text, struct tb_address *out, char *error, size_t error_size)
{
    int count = 0;
    const char *at = text;
    for (;;) {
        const char *comma = strchr(at, ',');
        size_t length = comma ? (size_t)(comma - at) : strlen(at);
        if (count == TB_REPLICAS_MAX) {
            snprintf(error, error_size, "tb-addresses: at most %d replicas", TB_REPLICAS_MAX);
            return -1;
        }
        if (length == 0 || parse_one_address(at, length, &out[count]) != 0) {
            snprintf(error, error_size, "tb-addresses: expected HOST:PORT[,HOST:PORT...]");
            return -1;
        }
        count++;
        if (comma == NULL)
            return count;
        at = comma + 1;
    }
}

int tb_cluster_parse(const char *text, tb_u128 *out)
{
    /* Decimal digits into a 128-bit value: value = value * 10 + digit. */
    tb_u128 value = {0, 0};
    size_t length = strlen(text);
    if (length == 0 || length > 39)
        return -1;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        unsigned __int128 wide = ((unsigned __int128)value.high << 64) | value.low;
        unsigned digit = (unsigned)(text[i] - '0');
        if (wide > (~(unsigned __int128)0 - digit) / 10)
            return -1; /* more than 2^128-1 */
        wide = wide * 10 + digit;
        value.high = (uint64_t)(wide >> 64);
        value.low = (uint64_t)wide;
    }
    *out = value;
    return 0;
}
