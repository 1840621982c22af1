/* The session protocol over one non-blocking TCP connection per replica,
 * driven by poll() with deadlines. The rules it follows (docs/tigerbeetle.md,
 * "The native client" and "Several replicas"):
 * - every replica gets a connection, and after every (re)connect a
 *   ping_client goes first, because a 0.15.3 replica only learns which
 *   client owns a connection from a ping or a register, and drops replies
 *   to an unknown connection;
 * - the view is the highest seen in a pong, reply or eviction; a request
 *   goes to its primary (view % replica count), and on every timeout again
 *   to that primary and to the next replica in turn, since a replica that
 *   already moved to a newer view forwards it to the new primary;
 * - a request is resent with exactly the same bytes until its reply comes
 *   (a changed byte is a "request collision" the server ignores forever);
 * - a reply counts only if it names our client, our request number and the
 *   checksum of what we sent; its context is the next request's parent;
 * - an eviction (from the primary of our view or a newer one) ends the
 *   session; the next ready() registers a new one with a new client id (an
 *   id is never reused for a new session). */
#include "tbc_session.h"

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
#include "tbc_ids.h"
#include "tbc_message.h"

/* Reconnects wait min + jitter, the jitter's range doubling with each
 * failure up to max - min (as TigerBeetle's message bus does). */
#define RECONNECT_BACKOFF_MS_MIN 20
#define RECONNECT_BACKOFF_MS_MAX 500

/* Statistics are read by other threads (tbc_submitter_stats). */
#define COUNT(field) __atomic_fetch_add(&(field), 1, __ATOMIC_RELAXED)

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

static int64_t earliest(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

bool tbc_trace_enabled(void)
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
        if (tbc_trace_enabled()) {                                                                 \
            fprintf(stderr, "%lld tb session %016llx: ", (long long)now_ms(),                      \
                    (unsigned long long)(s)->client.low);                                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static uint64_t next_random(struct tbc_session *s)
{
    /* xorshift64: jitter and the hedge's replica need no more */
    uint64_t x = s->random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->random = x;
    return x;
}

static uint32_t primary(const struct tbc_session *s)
{
    return s->view % s->address_count;
}

int tbc_session_init(struct tbc_session *s, tbc_u128 cluster, const struct tbc_address *addresses,
                     uint32_t address_count)
{
    assert(address_count >= 1 && address_count <= TBC_REPLICAS_MAX);
    memset(s, 0, sizeof *s);
    s->cluster = cluster;
    s->addresses = addresses;
    s->address_count = address_count;
    s->release_hint = TBC_RELEASE_0_15_3;
    for (uint32_t i = 0; i < TBC_REPLICAS_MAX; i++)
        s->connections[i].fd = -1;
    s->client = tbc_id_random();
    s->random = (s->client.low ^ s->client.high) | 1;
    s->batch_size_limit = TBC_BODY_SIZE_MAX;
    s->send = aligned_alloc(16, TBC_MESSAGE_SIZE_MAX);
    if (s->send == NULL)
        return -1;
    return 0;
}

void tbc_session_free(struct tbc_session *s)
{
    tbc_session_disconnect(s);
    for (uint32_t i = 0; i < TBC_REPLICAS_MAX; i++) {
        free(s->connections[i].receive);
        free(s->connections[i].out);
        s->connections[i].receive = s->connections[i].out = NULL;
    }
    free(s->send);
    s->send = NULL;
}

uint8_t *tbc_session_body(struct tbc_session *s)
{
    return s->send + TBC_HEADER_SIZE;
}

static bool connected(const struct tbc_connection *c)
{
    return c->fd >= 0 && !c->connecting;
}

static bool any_connected(const struct tbc_session *s)
{
    for (uint32_t i = 0; i < s->address_count; i++) {
        if (connected(&s->connections[i]))
            return true;
    }
    return false;
}

/* Closes a connection; the next attempt waits for the backoff. */
static void connection_close(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    if (c->fd >= 0) {
        TRACE(s, "closed connection to replica %u", replica);
        close(c->fd);
    }
    c->fd = -1;
    c->connecting = false;
    c->receive_fill = 0;
    c->reply_consumed = 0;
    c->out_fill = 0;
    c->out_sent = 0;
    uint32_t exponent = c->connect_failures < 10 ? c->connect_failures : 10;
    int64_t range = (int64_t)RECONNECT_BACKOFF_MS_MIN << exponent;
    if (range > RECONNECT_BACKOFF_MS_MAX - RECONNECT_BACKOFF_MS_MIN)
        range = RECONNECT_BACKOFF_MS_MAX - RECONNECT_BACKOFF_MS_MIN;
    int64_t jitter = (int64_t)(next_random(s) % (uint64_t)(range + 1));
    c->reconnect_after_ms = now_ms() + RECONNECT_BACKOFF_MS_MIN + jitter;
    c->connect_failures++;
}

void tbc_session_disconnect(struct tbc_session *s)
{
    for (uint32_t i = 0; i < s->address_count; i++) {
        connection_close(s, i);
        s->connections[i].reconnect_after_ms = 0; /* a deliberate close: no backoff */
        s->connections[i].connect_failures = 0;
    }
}

/* Sends what the socket takes now. 0, or -1 (the connection is broken). */
static int send_some(int fd, const uint8_t *data, uint32_t size, uint32_t *sent)
{
    *sent = 0;
    while (*sent < size) {
        ssize_t n = send(fd, data + *sent, size - *sent, MSG_NOSIGNAL);
        if (n > 0) {
            *sent += (uint32_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Writes what a full socket left of the last message. */
static void connection_flush(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    assert(c->out_sent <= c->out_fill);
    if (c->out_sent == c->out_fill)
        return;
    uint32_t sent = 0;
    if (send_some(c->fd, c->out + c->out_sent, c->out_fill - c->out_sent, &sent) != 0) {
        connection_close(s, replica);
        return;
    }
    c->out_sent += sent;
    if (c->out_sent == c->out_fill)
        c->out_sent = c->out_fill = 0;
}

/* Puts one whole message on a replica's connection without blocking: what
 * the socket does not take now is kept and written when it drains. A
 * connection still draining an earlier message (a stopped replica) drops
 * this one: messages never interleave, and the protocol resends what
 * matters. true when the message went out or is queued. */
static bool connection_send(struct tbc_session *s, uint32_t replica, const uint8_t *data,
                            uint32_t size)
{
    assert(replica < s->address_count);
    assert(size >= TBC_HEADER_SIZE && size <= TBC_MESSAGE_SIZE_MAX);
    struct tbc_connection *c = &s->connections[replica];
    if (!connected(c))
        return false;
    connection_flush(s, replica);
    if (!connected(c) || c->out_fill > 0)
        return false;
    uint32_t sent = 0;
    if (send_some(c->fd, data, size, &sent) != 0) {
        connection_close(s, replica);
        return false;
    }
    if (sent == size)
        return true;
    if (c->out == NULL)
        c->out = malloc(TBC_MESSAGE_SIZE_MAX);
    if (c->out == NULL) {
        connection_close(s, replica); /* half a message sent: the stream is lost */
        return false;
    }
    memcpy(c->out, data + sent, size - sent);
    c->out_fill = size - sent;
    c->out_sent = 0;
    return true;
}

static uint32_t ping_release(const struct tbc_session *s)
{
    if (s->registered)
        return s->release;
    return s->server_release != 0 ? s->server_release : s->release_hint;
}

static void send_ping(struct tbc_session *s, uint32_t replica)
{
    uint8_t header[TBC_HEADER_SIZE];
    tbc_message_ping_client(header, s->cluster, ping_release(s), s->client);
    connection_send(s, replica, header, TBC_HEADER_SIZE);
}

static void ping_all(struct tbc_session *s)
{
    for (uint32_t i = 0; i < s->address_count; i++)
        send_ping(s, i);
}

/* The in-flight request to the primary of the view we know and, when
 * `other` is not the primary, to that replica too. */
static void send_request_to(struct tbc_session *s, uint32_t other)
{
    assert(s->in_flight);
    uint32_t to = primary(s);
    bool sent = connection_send(s, to, s->send, s->send_size);
    TRACE(s, "request %u to replica %u%s", s->request, to, sent ? "" : " (not connected)");
    if (other != to && other < s->address_count) {
        sent = connection_send(s, other, s->send, s->send_size);
        TRACE(s, "request %u also to replica %u%s", s->request, other,
              sent ? "" : " (not connected)");
    }
}

/* Another replica than the primary, for a hedged send. */
static uint32_t random_backup(struct tbc_session *s)
{
    if (s->address_count == 1)
        return 0;
    uint64_t offset = 1 + next_random(s) % (s->address_count - 1);
    return (uint32_t)((primary(s) + offset) % s->address_count);
}

/* A request's first send: to the primary; on 0.17 also to a random backup
 * (that server's own client hedges every send: a backup forwards it to the
 * primary, which helps when only the link to the primary is down); and to
 * a backup as well whenever the primary has no connection. */
static void send_request_first(struct tbc_session *s)
{
    bool hedge = s->dialect == TBC_DIALECT_0_17 || !connected(&s->connections[primary(s)]);
    send_request_to(s, hedge ? random_backup(s) : primary(s));
}

/* A resend after a timeout: the primary may be gone, or a view change may
 * have happened that we have not heard of. The primary of our view gets it
 * again, and so does the next replica in turn ((view + attempts) % count,
 * 0.15.3's own rule): once that replica is in a newer view it either is
 * the new primary or forwards the request there. Pings go to every replica
 * so that the next send knows the new view. */
static void send_request_again(struct tbc_session *s)
{
    s->retransmit_attempts++;
    uint32_t other = (s->view + s->retransmit_attempts) % s->address_count;
    if (other == primary(s))
        other = (other + 1) % s->address_count;
    send_request_to(s, other);
    ping_all(s);
}

/* A connection came up: ping first (0.15.3 identifies the connection by
 * it), then the request in flight again if this is its primary. */
static void connection_up(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    c->connecting = false;
    c->connect_failures = 0;
    c->receive_fill = 0;
    COUNT(s->stats.connections);
    TRACE(s, "connected to replica %u (%s:%s)", replica, s->addresses[replica].host,
          s->addresses[replica].port);
    send_ping(s, replica);
    if (s->in_flight && replica == primary(s))
        connection_send(s, replica, s->send, s->send_size);
}

/* Starts a non-blocking connect to a replica. */
static void connection_start(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    assert(c->fd < 0);
    if (c->receive == NULL)
        c->receive = aligned_alloc(16, TBC_MESSAGE_SIZE_MAX);
    const struct tbc_address *address = &s->addresses[replica];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *found = NULL;
    if (c->receive == NULL || getaddrinfo(address->host, address->port, &hints, &found) != 0 ||
        found == NULL) {
        connection_close(s, replica);
        return;
    }
    c->fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   found->ai_protocol);
    int rc = c->fd < 0 ? -1 : connect(c->fd, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc == 0) {
        connection_up(s, replica);
    } else if (errno == EINPROGRESS) {
        c->connecting = true;
        c->connect_started_ms = now_ms();
    } else {
        connection_close(s, replica);
    }
}

/* A connect in progress became writable: it either succeeded or failed. */
static void connection_finish(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
        connection_up(s, replica);
    else
        connection_close(s, replica);
}

/* Starts the connects that are due, gives up on slow ones, and pings every
 * replica when the keepalive is due. Returns when it next has work. */
static int64_t maintain(struct tbc_session *s, int64_t now)
{
    int64_t next = INT64_MAX;
    for (uint32_t i = 0; i < s->address_count; i++) {
        struct tbc_connection *c = &s->connections[i];
        if (c->fd < 0 && now >= c->reconnect_after_ms)
            connection_start(s, i);
        if (c->connecting && now - c->connect_started_ms >= TBC_CONNECT_TIMEOUT_MS)
            connection_close(s, i);
        if (c->fd < 0)
            next = earliest(next, c->reconnect_after_ms);
        else if (c->connecting)
            next = earliest(next, c->connect_started_ms + TBC_CONNECT_TIMEOUT_MS);
    }
    if (s->registered && now >= s->ping_at_ms) {
        ping_all(s);
        s->ping_at_ms = now + TBC_PING_INTERVAL_MS;
    }
    if (s->registered)
        next = earliest(next, s->ping_at_ms);
    return next;
}

static void learn_view(struct tbc_session *s, const uint8_t *header)
{
    uint32_t view = tbc_message_view(header);
    if (view > s->view) {
        TRACE(s, "view %u -> %u (primary replica %u)", s->view, view, view % s->address_count);
        s->view = view;
        /* Replicas only announce a view once it has started: a request
         * still waiting goes to its primary now rather than at the next
         * timeout (once per view change, so no storm of resends). */
        if (s->in_flight)
            s->retransmit_at_ms = now_ms();
    }
}

static void handle_register_reply(struct tbc_session *s, const struct tbc_reply_fields *reply,
                                  const uint8_t *body, uint32_t body_size)
{
    s->session = reply->commit;
    s->registered = true;
    s->in_flight_register = false;
    s->batch_size_limit = TBC_BODY_SIZE_MAX;
    if (s->dialect == TBC_DIALECT_0_17 && body_size >= 4) {
        /* RegisterResult.batch_size_limit (docs/tigerbeetle-protocol.md,
         * "Operations and batch limits"); 0 on releases that
         * do not announce one. */
        uint32_t limit = tbc_get_u32(body);
        if (limit >= TBC_BATCH_SIZE_LIMIT_MIN && limit <= TBC_BODY_SIZE_MAX)
            s->batch_size_limit = limit;
    }
    COUNT(s->stats.registrations);
}

static enum receive_event handle_reply(struct tbc_session *s, uint32_t replica,
                                       const uint8_t *message)
{
    struct tbc_reply_fields reply;
    tbc_message_reply_read(message, &reply);
    if (!s->in_flight || !tbc_u128_equal(reply.client, s->client) || reply.request != s->request)
        return RECEIVE_NOTHING; /* a late duplicate of an earlier reply */
    if (!tbc_u128_equal(reply.request_checksum, s->in_flight_checksum))
        return RECEIVE_NOTHING;
    learn_view(s, message);
    s->parent = reply.context;
    s->in_flight = false;
    const uint8_t *body = message + TBC_HEADER_SIZE;
    uint32_t body_size = tbc_message_size(message) - TBC_HEADER_SIZE;
    if (s->in_flight_register)
        handle_register_reply(s, &reply, body, body_size);
    s->reply_body = body;
    s->reply_body_size = body_size;
    s->reply_timestamp = reply.timestamp;
    s->reply_replica = replica;
    return RECEIVE_REPLY;
}

static enum receive_event handle_message(struct tbc_session *s, uint32_t replica,
                                         const uint8_t *message)
{
    TRACE(s, "from replica %u: command %u size %u view %u release %u", replica,
          tbc_message_command(message), tbc_message_size(message), tbc_message_view(message),
          tbc_message_release(message));
    switch (tbc_message_command(message)) {
    case TBC_COMMAND_PONG_CLIENT:
        learn_view(s, message);
        s->server_release = tbc_message_release(message);
        return RECEIVE_PONG;
    case TBC_COMMAND_EVICTION:
        if (!tbc_u128_equal(tbc_message_eviction_client(message), s->client))
            return RECEIVE_NOTHING;
        if (tbc_message_view(message) < s->view)
            return RECEIVE_NOTHING; /* from an old view: ignored, as the official client does */
        learn_view(s, message);     /* the next session starts from it */
        s->server_release = tbc_message_release(message);
        s->last_eviction_reason = tbc_message_eviction_reason(message);
        return RECEIVE_EVICTED;
    case TBC_COMMAND_REPLY:
        return handle_reply(s, replica, message);
    default:
        return RECEIVE_NOTHING; /* replica-to-replica traffic is none of ours */
    }
}

/* Consumes whole messages at the front of a connection's buffer. A reply
 * or eviction stops it (the reply body stays in place until the next
 * read). */
static enum receive_event process_buffer(struct tbc_session *s, uint32_t replica,
                                         uint32_t *consumed)
{
    struct tbc_connection *c = &s->connections[replica];
    enum receive_event last = RECEIVE_NOTHING;
    uint32_t at = 0;
    while (c->receive_fill - at >= TBC_HEADER_SIZE) {
        const uint8_t *message = c->receive + at;
        int verified = tbc_message_header_verify(message, s->cluster);
        if (verified != TBC_MESSAGE_OK) {
            TRACE(s, "bad header from replica %u (%d): dropping the connection", replica, verified);
            return RECEIVE_LOST;
        }
        uint32_t size = tbc_message_size(message);
        if (c->receive_fill - at < size)
            break;
        if (tbc_message_body_verify(message) != TBC_MESSAGE_OK)
            return RECEIVE_LOST;
        at += size;
        enum receive_event event = handle_message(s, replica, message);
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

static void compact(struct tbc_connection *c, uint32_t consumed)
{
    assert(consumed <= c->receive_fill);
    memmove(c->receive, c->receive + consumed, c->receive_fill - consumed);
    c->receive_fill -= consumed;
}

/* Handles what sits in a connection's buffer; a reply's (or eviction's)
 * bytes stay until the next pump. */
static enum receive_event drain(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    uint32_t consumed = 0;
    enum receive_event event = process_buffer(s, replica, &consumed);
    if (event == RECEIVE_LOST) {
        connection_close(s, replica);
    } else if (event == RECEIVE_REPLY || event == RECEIVE_EVICTED) {
        c->reply_consumed = consumed;
    } else {
        compact(c, consumed);
    }
    return event;
}

/* Reads what a connection has and handles it. */
static enum receive_event connection_read(struct tbc_session *s, uint32_t replica)
{
    struct tbc_connection *c = &s->connections[replica];
    assert(c->reply_consumed == 0);
    assert(c->receive_fill < TBC_MESSAGE_SIZE_MAX); /* a whole message would have been handled */
    ssize_t n =
        recv(c->fd, c->receive + c->receive_fill, TBC_MESSAGE_SIZE_MAX - c->receive_fill, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return RECEIVE_NOTHING;
    if (n <= 0) {
        TRACE(s, "connection to replica %u lost", replica);
        connection_close(s, replica);
        return RECEIVE_LOST;
    }
    c->receive_fill += (uint32_t)n;
    return drain(s, replica);
}

/* The last reply's bytes are no longer needed once the caller comes back. */
static void release_reply(struct tbc_session *s)
{
    for (uint32_t i = 0; i < s->address_count; i++) {
        struct tbc_connection *c = &s->connections[i];
        if (c->reply_consumed > 0) {
            compact(c, c->reply_consumed);
            c->reply_consumed = 0;
        }
    }
}

/* A reply or an eviction ends a pump at once (true); a pong is kept in *seen,
 * for the pump to report once every connection was looked at. */
static bool pump_ends(enum receive_event event, enum receive_event *seen)
{
    if (event == RECEIVE_PONG)
        *seen = event;
    return event == RECEIVE_REPLY || event == RECEIVE_EVICTED;
}

/* Messages already buffered first (a reply stops handling midway), then
 * one poll() over every connection until until_ms or the next connect,
 * connect timeout or ping. Returns at the first reply or eviction. */
static enum receive_event pump(struct tbc_session *s, int64_t until_ms)
{
    release_reply(s);
    enum receive_event seen = RECEIVE_NOTHING;
    for (uint32_t i = 0; i < s->address_count; i++) {
        if (!connected(&s->connections[i]))
            continue;
        enum receive_event event = drain(s, i);
        if (pump_ends(event, &seen))
            return event;
    }
    int64_t now = now_ms();
    int64_t wait = earliest(until_ms, maintain(s, now)) - now;
    struct pollfd polls[TBC_REPLICAS_MAX];
    uint32_t replicas[TBC_REPLICAS_MAX];
    nfds_t count = 0;
    for (uint32_t i = 0; i < s->address_count; i++) {
        const struct tbc_connection *c = &s->connections[i];
        if (c->fd < 0)
            continue;
        short events = c->connecting ? POLLOUT : POLLIN;
        if (c->out_fill > 0)
            events |= POLLOUT;
        polls[count] = (struct pollfd){.fd = c->fd, .events = events};
        replicas[count++] = i;
    }
    if (seen != RECEIVE_NOTHING || wait < 0)
        wait = 0;
    if (poll(polls, count, (int)(wait < INT32_MAX ? wait : INT32_MAX)) <= 0)
        return seen;
    for (nfds_t k = 0; k < count; k++) {
        uint32_t i = replicas[k];
        struct tbc_connection *c = &s->connections[i];
        if (polls[k].revents == 0 || c->fd != polls[k].fd)
            continue;
        if (c->connecting) {
            connection_finish(s, i);
            continue;
        }
        if (polls[k].revents & POLLOUT)
            connection_flush(s, i);
        if (!connected(c) || !(polls[k].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        enum receive_event event = connection_read(s, i);
        if (pump_ends(event, &seen))
            return event;
    }
    return seen;
}

/* Waits for the in-flight request's reply until deadline_ms, resending it
 * on a timer (moving on to other replicas) and after a reconnect. */
static int wait_reply(struct tbc_session *s, int64_t deadline_ms)
{
    for (;;) {
        int64_t now = now_ms();
        if (now - s->in_flight_since_ms > TBC_STALE_REQUEST_MS_MAX) {
            s->dead = true; /* give the session up; its request's fate stays unknown */
            return TBC_SESSION_TIMEOUT;
        }
        if (now >= deadline_ms)
            return TBC_SESSION_TIMEOUT;
        if (now >= s->retransmit_at_ms) {
            COUNT(s->stats.retransmissions);
            send_request_again(s);
            s->retransmit_interval_ms *= 2;
            if (s->retransmit_interval_ms > TBC_RETRANSMIT_MS_MAX)
                s->retransmit_interval_ms = TBC_RETRANSMIT_MS_MAX;
            s->retransmit_at_ms = now + s->retransmit_interval_ms;
        }
        switch (pump(s, earliest(s->retransmit_at_ms, deadline_ms))) {
        case RECEIVE_REPLY:
            return TBC_SESSION_OK;
        case RECEIVE_EVICTED:
            COUNT(s->stats.evictions);
            s->in_flight = false;
            s->dead = true;
            return TBC_SESSION_EVICTED;
        default:
            break;
        }
    }
}

/* Seals the request in s->send and puts it on the wire. */
static void start_request(struct tbc_session *s, uint8_t operation, uint32_t body_size)
{
    struct tbc_request_fields fields = {
        .cluster = s->cluster,
        .view = s->view,
        .release = s->release,
        .parent = s->parent,
        .client = s->client,
        .session = s->session,
        .request = s->request,
        .operation = operation,
    };
    tbc_message_request(s->send, &fields, body_size);
    s->send_size = TBC_HEADER_SIZE + body_size;
    s->in_flight = true;
    s->in_flight_checksum = tbc_message_checksum(s->send);
    int64_t now = now_ms();
    s->in_flight_since_ms = now;
    s->retransmit_interval_ms = TBC_RETRANSMIT_MS_MIN;
    s->retransmit_at_ms = now + TBC_RETRANSMIT_MS_MIN;
    s->retransmit_attempts = 0;
    COUNT(s->stats.requests);
    TRACE(s, "request %u operation %u size %u view %u", s->request, operation, s->send_size,
          s->view);
    send_request_first(s); /* a replica not connected gets it after its reconnect or a resend */
}

/* Connects (in the background) until some replica is connected. */
static int wait_connected(struct tbc_session *s, int64_t deadline_ms)
{
    while (!any_connected(s)) {
        if (now_ms() >= deadline_ms)
            return TBC_SESSION_DISCONNECTED;
        if (pump(s, deadline_ms) == RECEIVE_EVICTED) {
            s->dead = true;
            return TBC_SESSION_EVICTED;
        }
    }
    return TBC_SESSION_OK;
}

/* A new client id: every replica has tied the old one to its connection,
 * so the connections start over too. */
static void new_client(struct tbc_session *s)
{
    tbc_session_disconnect(s);
    s->client = tbc_id_random();
}

/* Learns the server's release from a pong (or an eviction of the ping)
 * from any replica; each connection pinged when it came up. */
static int probe_release(struct tbc_session *s, int64_t deadline_ms)
{
    int64_t ping_again_ms = now_ms() + TBC_RETRANSMIT_MS_MIN;
    while (s->server_release == 0) {
        int rc = wait_connected(s, deadline_ms);
        if (rc != TBC_SESSION_OK)
            return rc;
        int64_t now = now_ms();
        if (now >= deadline_ms)
            return TBC_SESSION_TIMEOUT;
        if (now >= ping_again_ms) {
            ping_all(s);
            ping_again_ms = now + TBC_RETRANSMIT_MS_MAX;
        }
        if (pump(s, earliest(ping_again_ms, deadline_ms)) == RECEIVE_EVICTED)
            new_client(s); /* the ping's release was out of range: fresh id */
    }
    return TBC_SESSION_OK;
}

static void start_register(struct tbc_session *s)
{
    s->release = s->server_release;
    s->dialect = tbc_dialect_for_release(s->server_release);
    s->session = 0;
    s->request = 0;
    s->parent = tbc_u128_make(0, 0);
    /* 0.15.3 takes no body (one makes the header invalid); 0.16.33+
     * requires a zeroed 256-byte RegisterRequest (docs/tigerbeetle-protocol.md,
     * "Sessions"). */
    uint32_t body_size = s->dialect == TBC_DIALECT_0_17 ? TBC_REGISTER_BODY_SIZE : 0;
    memset(tbc_session_body(s), 0, body_size);
    s->in_flight_register = true;
    start_request(s, TBC_OPERATION_REGISTER, body_size);
}

/* Forgets an evicted or abandoned session: the next one gets a new id. */
static void reset_session(struct tbc_session *s)
{
    new_client(s);
    s->registered = false;
    s->in_flight = false;
    s->in_flight_register = false;
    s->session = 0;
    s->request = 0;
    s->dead = false;
    s->server_release = 0; /* probe again: the server may have been upgraded */
}

int tbc_session_ready(struct tbc_session *s, int64_t deadline_ms)
{
    if (s->dead)
        reset_session(s);
    if (!s->in_flight) {
        int rc = wait_connected(s, deadline_ms);
        if (rc != TBC_SESSION_OK)
            return rc;
    }
    if (!s->registered && !s->in_flight) {
        int rc = probe_release(s, deadline_ms);
        if (rc != TBC_SESSION_OK)
            return rc;
        start_register(s);
    }
    if (s->in_flight) {
        int rc = wait_reply(s, deadline_ms);
        if (rc != TBC_SESSION_OK)
            return rc;
    }
    return s->registered ? TBC_SESSION_OK : TBC_SESSION_TIMEOUT;
}

bool tbc_session_alive(struct tbc_session *s)
{
    if (!s->registered || s->dead || s->in_flight)
        return false;
    if (pump(s, now_ms()) == RECEIVE_EVICTED) {
        s->dead = true;
        return false;
    }
    if (!any_connected(s)) {
        TRACE(s, "no replica connected while idle");
        return false;
    }
    return true;
}

bool tbc_session_connected(const struct tbc_session *s)
{
    return any_connected(s);
}

int tbc_session_call(struct tbc_session *s, uint8_t operation, uint32_t body_size,
                     int64_t deadline_ms)
{
    assert(s->registered);
    assert(!s->in_flight);
    assert(body_size <= s->batch_size_limit);
    s->request++;
    start_request(s, operation, body_size);
    return wait_reply(s, deadline_ms);
}

static int parse_one_address(const char *text, size_t length, struct tbc_address *out)
{
    const char *colon = memrchr(text, ':', length);
    const char *port = colon ? colon + 1 : text;
    size_t port_length = length - (size_t)(port - text);
    size_t host_length = colon ? (size_t)(colon - text) : 0;
    if (port_length == 0 || port_length >= sizeof out->port || host_length > TBC_ADDRESS_LENGTH_MAX)
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

int tbc_addresses_parse(const char *text, struct tbc_address *out, char *error, size_t error_size)
{
    int count = 0;
    const char *at = text;
    for (;;) {
        const char *comma = strchr(at, ',');
        size_t length = comma ? (size_t)(comma - at) : strlen(at);
        if (count == TBC_REPLICAS_MAX) {
            snprintf(error, error_size, "tb-addresses: at most %d replicas", TBC_REPLICAS_MAX);
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

int tbc_cluster_parse(const char *text, tbc_u128 *out)
{
    /* Decimal digits into a 128-bit value: value = value * 10 + digit. */
    tbc_u128 value = {0, 0};
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
