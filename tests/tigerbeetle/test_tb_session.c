/* The session's replica routing against three fake replicas in this process
 * (no TigerBeetle needed). They behave as 0.15.3's do where it matters:
 * each answers ping_client with the view while in normal status, only the
 * primary (view % 3) runs requests and replies over its own connection to
 * the client, a backup drops a register and a request of its own view and
 * forwards one of an older view to the primary, and a stopped replica
 * ignores everything. Commits can be made slow, one after the other (as
 * with 0.15.3's ring-next backup down), for the submitter's keepalive. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tbclient/tbc_checksum.h"
#include "core/clock.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_message.h"
#include "tbclient/tbc_session.h"
#include "tbclient/tbc_submitter.h"
#include "test.h"

#define REPLICAS 3
#define CONNECTIONS_MAX 32
#define CLIENTS_MAX 8
#define BUFFER_SIZE 65536

/* Header offsets (the wire layout, docs/tigerbeetle.md). */
#define AT_VIEW 104
#define AT_RELEASE 108
#define AT_COMMAND 114
#define AT_REPLICA 115
#define AT_REQUEST_CLIENT 160
#define AT_REQUEST_NUMBER 192
#define AT_REQUEST_OPERATION 196
#define AT_REPLY_REQUEST_CHECKSUM 128
#define AT_REPLY_CONTEXT 160
#define AT_REPLY_CLIENT 192
#define AT_REPLY_OP 208
#define AT_REPLY_COMMIT 216
#define AT_REPLY_TIMESTAMP 224
#define AT_REPLY_REQUEST 232
#define AT_REPLY_OPERATION 236
#define AT_EVICTION_CLIENT 128
#define AT_EVICTION_REASON 255

struct connection {
    int fd;
    uint32_t replica;
    uint8_t buffer[BUFFER_SIZE];
    uint32_t fill;
};

/* A client as the cluster knows it: its session and last reply. */
struct client_entry {
    tbc_u128 client;
    uint64_t session;
    uint32_t request;
    tbc_u128 request_checksum;
    uint8_t reply[TBC_HEADER_SIZE + 64];
    uint32_t reply_size;
    int64_t reply_due_ms; /* a slow commit: the reply goes out then (0: sent) */
    int fd_of[REPLICAS];  /* each replica's connection to it (from ping or register) */
};

static struct {
    pthread_mutex_t lock;
    bool stopping;
    int listen_fd[REPLICAS];
    int port[REPLICAS];
    struct connection connections[CONNECTIONS_MAX];
    struct client_entry clients[CLIENTS_MAX];
    uint32_t view;
    bool stopped[REPLICAS];
    bool pongs_off;                  /* no replica answers a ping (as during a view change) */
    uint32_t requests_run[REPLICAS]; /* requests each replica ran as primary */
    uint64_t commit;
    int64_t commit_delay_ms; /* each request (not a register) commits this long after the last */
    int64_t committing_until_ms;
    uint32_t keepalives;        /* requests looking up the submitter's keepalive id */
    uint32_t keepalives_queued; /* of those, arrived while another request was committing */
} fake;

static void seal(uint8_t *message, uint32_t body_size)
{
    tbc_put_u128(message + 32, tbc_checksum(message + TBC_HEADER_SIZE, body_size));
    tbc_put_u128(message, tbc_checksum(message + 16, TBC_HEADER_SIZE - 16));
}

static void frame(uint8_t *header, uint32_t size, uint32_t view, uint8_t command, uint32_t replica)
{
    memset(header, 0, TBC_HEADER_SIZE);
    tbc_put_u32(header + 96, size);
    tbc_put_u32(header + AT_VIEW, view);
    tbc_put_u32(header + AT_RELEASE, TBC_RELEASE_0_15_3);
    header[AT_COMMAND] = command;
    header[AT_REPLICA] = (uint8_t)replica;
}

static void send_to(int fd, const uint8_t *message, uint32_t size)
{
    if (fd >= 0)
        (void)!send(fd, message, size, MSG_NOSIGNAL);
}

/* Under the lock: the entry of a client, made when `create`. */
static struct client_entry *client_entry(tbc_u128 client, bool create)
{
    for (int i = 0; i < CLIENTS_MAX; i++) {
        if (tbc_u128_equal(fake.clients[i].client, client))
            return &fake.clients[i];
    }
    for (int i = 0; create && i < CLIENTS_MAX; i++) {
        struct client_entry *entry = &fake.clients[i];
        if (tbc_u128_zero(entry->client)) {
            memset(entry, 0, sizeof *entry);
            entry->client = client;
            for (int r = 0; r < REPLICAS; r++)
                entry->fd_of[r] = -1;
            return entry;
        }
    }
    return NULL;
}

static void send_eviction(struct client_entry *entry, uint32_t replica, uint32_t view)
{
    uint8_t header[TBC_HEADER_SIZE];
    frame(header, TBC_HEADER_SIZE, view, TBC_COMMAND_EVICTION, replica);
    tbc_put_u128(header + AT_EVICTION_CLIENT, entry->client);
    header[AT_EVICTION_REASON] = TBC_EVICTION_NO_SESSION;
    seal(header, 0);
    send_to(entry->fd_of[replica], header, TBC_HEADER_SIZE);
}

/* Under the lock: a new request's commit. With commit_delay_ms set, the
 * primary commits one request after the other, each that long (its reply
 * waits); a keepalive that arrives while another commits is counted. */
static int64_t commit_reply_due(const uint8_t *request)
{
    int64_t now = clock_monotonic_ms();
    tbc_u128 keepalive = tbc_id_from_label("keepalive", 9);
    if (request[AT_REQUEST_OPERATION] == TBC_OPERATION_LOOKUP_ACCOUNTS &&
        tbc_message_size(request) == TBC_HEADER_SIZE + TBC_ID_SIZE &&
        tbc_u128_equal(tbc_get_u128(request + TBC_HEADER_SIZE), keepalive)) {
        fake.keepalives++;
        if (fake.committing_until_ms > now)
            fake.keepalives_queued++;
    }
    if (fake.commit_delay_ms == 0 || request[AT_REQUEST_OPERATION] == TBC_OPERATION_REGISTER)
        return 0;
    int64_t start = fake.committing_until_ms > now ? fake.committing_until_ms : now;
    fake.committing_until_ms = start + fake.commit_delay_ms;
    return fake.committing_until_ms;
}

/* Under the lock: the primary runs a request and replies over its own
 * connection to the client (a repeat gets the stored reply, once its
 * commit is over). */
static void run_request(uint32_t primary, const uint8_t *request)
{
    tbc_u128 client = tbc_get_u128(request + AT_REQUEST_CLIENT);
    uint32_t number = tbc_get_u32(request + AT_REQUEST_NUMBER);
    uint8_t operation = request[AT_REQUEST_OPERATION];
    struct client_entry *entry = client_entry(client, operation == TBC_OPERATION_REGISTER);
    if (entry == NULL || (operation != TBC_OPERATION_REGISTER && entry->session == 0)) {
        if (entry != NULL)
            send_eviction(entry, primary, fake.view);
        return;
    }
    bool repeat = entry->reply_size > 0 && number == entry->request &&
                  tbc_u128_equal(tbc_message_checksum(request), entry->request_checksum);
    if (!repeat) {
        fake.commit++;
        fake.requests_run[primary]++;
        uint32_t body_size = operation == TBC_OPERATION_REGISTER ? 64 : 0;
        uint8_t *reply = entry->reply;
        frame(reply, TBC_HEADER_SIZE + body_size, fake.view, TBC_COMMAND_REPLY, primary);
        tbc_put_u32(reply + AT_RELEASE, tbc_message_release(request));
        tbc_put_u128(reply + AT_REPLY_REQUEST_CHECKSUM, tbc_message_checksum(request));
        tbc_put_u128(reply + AT_REPLY_CONTEXT, tbc_u128_make(fake.commit, 0x5eed));
        tbc_put_u128(reply + AT_REPLY_CLIENT, client);
        tbc_put_u64(reply + AT_REPLY_OP, fake.commit);
        tbc_put_u64(reply + AT_REPLY_COMMIT, fake.commit);
        tbc_put_u64(reply + AT_REPLY_TIMESTAMP, fake.commit);
        tbc_put_u32(reply + AT_REPLY_REQUEST, number);
        reply[AT_REPLY_OPERATION] = operation;
        memset(reply + TBC_HEADER_SIZE, 0, body_size);
        seal(reply, body_size);
        entry->reply_size = TBC_HEADER_SIZE + body_size;
        entry->request = number;
        entry->request_checksum = tbc_message_checksum(request);
        if (operation == TBC_OPERATION_REGISTER)
            entry->session = fake.commit;
        entry->reply_due_ms = commit_reply_due(request);
    }
    if (entry->reply_due_ms != 0)
        return; /* still committing: send_due_replies answers it */
    /* the reply says the primary's current view */
    tbc_put_u32(entry->reply + AT_VIEW, fake.view);
    seal(entry->reply, entry->reply_size - TBC_HEADER_SIZE);
    send_to(entry->fd_of[primary], entry->reply, entry->reply_size);
}

/* Under the lock: what replica `replica` does with one message. */
static void handle(uint32_t replica, int fd, const uint8_t *message)
{
    if (fake.stopped[replica])
        return;
    uint8_t command = tbc_message_command(message);
    uint32_t primary = fake.view % REPLICAS;
    if (command == TBC_COMMAND_PING_CLIENT) {
        struct client_entry *entry = client_entry(tbc_get_u128(message + 128), true);
        if (entry != NULL)
            entry->fd_of[replica] = fd;
        if (fake.pongs_off)
            return;
        uint8_t pong[TBC_HEADER_SIZE];
        frame(pong, TBC_HEADER_SIZE, fake.view, TBC_COMMAND_PONG_CLIENT, replica);
        seal(pong, 0);
        send_to(fd, pong, TBC_HEADER_SIZE);
        return;
    }
    if (command != TBC_COMMAND_REQUEST)
        return;
    uint32_t view = tbc_message_view(message);
    bool is_register = message[AT_REQUEST_OPERATION] == TBC_OPERATION_REGISTER;
    if (view > fake.view)
        return; /* a newer view than ours: dropped */
    if (replica == primary)
        run_request(primary, message);
    else if (!is_register && view < fake.view && !fake.stopped[primary])
        run_request(primary, message); /* a backup forwards an older view's request */
}

static void close_connection(struct connection *c)
{
    for (int i = 0; i < CLIENTS_MAX; i++) {
        if (fake.clients[i].fd_of[c->replica] == c->fd)
            fake.clients[i].fd_of[c->replica] = -1;
    }
    close(c->fd);
    c->fd = -1;
    c->fill = 0;
}

/* Under the lock: reads what a connection has and handles whole messages. */
static void serve(struct connection *c)
{
    ssize_t n = recv(c->fd, c->buffer + c->fill, BUFFER_SIZE - c->fill, MSG_DONTWAIT);
    if (n <= 0) {
        close_connection(c);
        return;
    }
    c->fill += (uint32_t)n;
    while (c->fill >= TBC_HEADER_SIZE && c->fill >= tbc_message_size(c->buffer)) {
        uint32_t size = tbc_message_size(c->buffer);
        if (tbc_message_header_verify(c->buffer, tbc_u128_from_u64(0)) != TBC_MESSAGE_OK) {
            close_connection(c);
            return;
        }
        handle(c->replica, c->fd, c->buffer);
        memmove(c->buffer, c->buffer + size, c->fill - size);
        c->fill -= size;
    }
}

static void accept_one(uint32_t replica)
{
    int fd = accept(fake.listen_fd[replica], NULL, NULL);
    for (int i = 0; fd >= 0 && i < CONNECTIONS_MAX; i++) {
        if (fake.connections[i].fd < 0) {
            fake.connections[i].fd = fd;
            fake.connections[i].replica = replica;
            fake.connections[i].fill = 0;
            return;
        }
    }
    if (fd >= 0)
        close(fd);
}

/* Under the lock: the replies whose slow commit is over, from the primary. */
static void send_due_replies(void)
{
    int64_t now = clock_monotonic_ms();
    for (int i = 0; i < CLIENTS_MAX; i++) {
        struct client_entry *entry = &fake.clients[i];
        if (entry->reply_due_ms == 0 || entry->reply_due_ms > now)
            continue;
        entry->reply_due_ms = 0;
        uint32_t primary = fake.view % REPLICAS;
        tbc_put_u32(entry->reply + AT_VIEW, fake.view);
        seal(entry->reply, entry->reply_size - TBC_HEADER_SIZE);
        send_to(entry->fd_of[primary], entry->reply, entry->reply_size);
    }
}

static void *fake_main(void *argument)
{
    (void)argument;
    pthread_mutex_lock(&fake.lock);
    while (!fake.stopping) {
        struct pollfd polls[REPLICAS + CONNECTIONS_MAX];
        int owner[REPLICAS + CONNECTIONS_MAX];
        nfds_t count = 0;
        for (int r = 0; r < REPLICAS; r++) {
            polls[count] = (struct pollfd){.fd = fake.listen_fd[r], .events = POLLIN};
            owner[count++] = -1 - r;
        }
        for (int i = 0; i < CONNECTIONS_MAX; i++) {
            if (fake.connections[i].fd >= 0) {
                polls[count] = (struct pollfd){.fd = fake.connections[i].fd, .events = POLLIN};
                owner[count++] = i;
            }
        }
        pthread_mutex_unlock(&fake.lock);
        int ready = poll(polls, count, 5);
        pthread_mutex_lock(&fake.lock);
        send_due_replies();
        for (nfds_t k = 0; ready > 0 && k < count; k++) {
            if (polls[k].revents == 0)
                continue;
            if (owner[k] < 0)
                accept_one((uint32_t)(-1 - owner[k]));
            else if (fake.connections[owner[k]].fd == polls[k].fd)
                serve(&fake.connections[owner[k]]);
        }
    }
    pthread_mutex_unlock(&fake.lock);
    return NULL;
}

static int listen_on_free_port(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(fd, 16) != 0 || getsockname(fd, (struct sockaddr *)&address, &length) != 0)
        return -1;
    *port = ntohs(address.sin_port);
    return fd;
}

static void set_view(uint32_t view)
{
    pthread_mutex_lock(&fake.lock);
    fake.view = view;
    pthread_mutex_unlock(&fake.lock);
}

static void set_stopped(uint32_t replica, bool stopped)
{
    pthread_mutex_lock(&fake.lock);
    fake.stopped[replica] = stopped;
    pthread_mutex_unlock(&fake.lock);
}

static uint32_t requests_run(uint32_t replica)
{
    pthread_mutex_lock(&fake.lock);
    uint32_t count = fake.requests_run[replica];
    pthread_mutex_unlock(&fake.lock);
    return count;
}

/* ---- the client side ---- */

static struct tbc_address addresses[TBC_REPLICAS_MAX];
static char address_list[128];
static struct tbc_session session;

static int lookup(int64_t timeout_ms)
{
    tbc_u128 id = tbc_u128_from_u64(42);
    memcpy(tbc_session_body(&session), &id, sizeof id);
    return tbc_session_call(&session, TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_ID_SIZE,
                            clock_monotonic_ms() + timeout_ms);
}

static void test_registers_with_the_primary(void)
{
    set_view(1);
    REQUIRE(tbc_session_init(&session, tbc_u128_from_u64(0), addresses, REPLICAS) == 0);
    REQUIRE(tbc_session_ready(&session, clock_monotonic_ms() + 5000) == TBC_SESSION_OK);
    CHECK_EQ_U64(session.view, 1);
    /* only the primary runs a register (backups drop it): it went there first */
    CHECK_EQ_U64(requests_run(1), 1);
    CHECK_EQ_U64(session.stats.retransmissions, 0);
    for (uint32_t i = 0; i < REPLICAS; i++)
        CHECK(session.connections[i].fd >= 0 && !session.connections[i].connecting);
}

static void test_requests_go_to_the_primary(void)
{
    uint32_t before = requests_run(1);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_I64(lookup(2000), TBC_SESSION_OK);
        CHECK_EQ_U64(session.reply_replica, 1);
    }
    CHECK_EQ_U64(requests_run(1) - before, 5);
    CHECK_EQ_U64(session.stats.retransmissions, 0);
}

static void set_pongs(bool on)
{
    pthread_mutex_lock(&fake.lock);
    fake.pongs_off = !on;
    pthread_mutex_unlock(&fake.lock);
}

/* The primary stops answering and the others move to view 2, answering no
 * pings: a resend to the next replica in turn reaches replica 2 (directly
 * or forwarded by replica 0), the reply tells view 2, and the session
 * sends there from then on. */
static void test_follows_a_view_change(void)
{
    set_stopped(1, true);
    set_pongs(false);
    set_view(2);
    int64_t started = clock_monotonic_ms();
    CHECK_EQ_I64(lookup(5000), TBC_SESSION_OK);
    int64_t took = clock_monotonic_ms() - started;
    printf("     answered after the view change in %" PRId64 " ms\n", took);
    CHECK(took < 2 * TBC_RETRANSMIT_MS_MAX);
    CHECK_EQ_U64(session.view, 2);
    CHECK(session.stats.retransmissions >= 1);
    uint64_t resent = session.stats.retransmissions;
    CHECK_EQ_I64(lookup(2000), TBC_SESSION_OK);
    CHECK_EQ_U64(session.reply_replica, 2);
    CHECK_EQ_U64(session.stats.retransmissions, resent); /* straight to the new primary */
    set_stopped(1, false);
    set_pongs(true);
}

/* Now the pings tell: replica 2 stops, view 3 starts (primary replica 0). */
static void test_learns_the_view_from_pongs(void)
{
    set_stopped(2, true);
    set_view(3);
    CHECK_EQ_I64(lookup(5000), TBC_SESSION_OK);
    CHECK_EQ_U64(session.view, 3);
    CHECK_EQ_I64(lookup(2000), TBC_SESSION_OK);
    CHECK_EQ_U64(session.reply_replica, 0);
    set_stopped(2, false);
}

/* A lost connection comes back by itself, and the session carries on. */
static void test_reconnects(void)
{
    uint64_t connects = session.stats.connections;
    pthread_mutex_lock(&fake.lock);
    for (int i = 0; i < CONNECTIONS_MAX; i++) {
        if (fake.connections[i].fd >= 0)
            close_connection(&fake.connections[i]);
    }
    pthread_mutex_unlock(&fake.lock);
    CHECK_EQ_I64(lookup(5000), TBC_SESSION_OK);
    int64_t until = clock_monotonic_ms() + 30000; /* waited for, however busy the machine */
    while (session.stats.connections < connects + REPLICAS && clock_monotonic_ms() < until)
        tbc_session_alive(&session);
    CHECK_EQ_U64(session.stats.connections, connects + REPLICAS);
}

/* An eviction from an older view is ignored; one from the current view
 * ends the session, and the next one registers with a new client id. */
static void test_evictions(void)
{
    pthread_mutex_lock(&fake.lock);
    struct client_entry *entry = client_entry(session.client, false);
    REQUIRE(entry != NULL);
    send_eviction(entry, 0, 1); /* view 1 < 3 */
    pthread_mutex_unlock(&fake.lock);
    CHECK_EQ_I64(lookup(2000), TBC_SESSION_OK);
    pthread_mutex_lock(&fake.lock);
    entry->session = 0; /* the cluster forgets the session */
    pthread_mutex_unlock(&fake.lock);
    tbc_u128 first = session.client;
    CHECK_EQ_I64(lookup(2000), TBC_SESSION_EVICTED);
    CHECK_EQ_I64(tbc_session_ready(&session, clock_monotonic_ms() + 5000), TBC_SESSION_OK);
    CHECK(!tbc_u128_equal(session.client, first));
    CHECK_EQ_I64(lookup(2000), TBC_SESSION_OK);
    CHECK_EQ_U64(session.reply_replica, 0);
}

static void set_commit_delay(int64_t delay_ms)
{
    pthread_mutex_lock(&fake.lock);
    fake.commit_delay_ms = delay_ms;
    pthread_mutex_unlock(&fake.lock);
}

static void keepalive_counts(uint32_t *all, uint32_t *queued)
{
    pthread_mutex_lock(&fake.lock);
    *all = fake.keepalives;
    *queued = fake.keepalives_queued;
    pthread_mutex_unlock(&fake.lock);
}

/* A lookup through the submitter, as a caller of the backend makes one. */
static enum tbc_item_status submitter_lookup(struct tbc_submitter *sub, int64_t timeout_ms)
{
    tbc_u128 id = tbc_u128_from_u64(43);
    uint8_t object[TBC_EVENT_SIZE];
    uint8_t found = 0;
    struct tbc_item item = {.operation = TBC_OPERATION_LOOKUP_ACCOUNTS,
                            .event_count = 1,
                            .events = &id,
                            .objects = object,
                            .found = &found,
                            .deadline_ms = clock_monotonic_ms() + timeout_ms};
    return tbc_submitter_call(sub, &item);
}

/* Commits slow and one after the other, as on 0.15.3 with the backup next
 * in the ring down (seconds each, docs/tigerbeetle.md "Several replicas"):
 * a caller's lookups, one at a time, each outlasting the keepalive's
 * interval and its 2 s deadline. No keepalive may reach the primary while
 * a request commits there (a reserve queued behind it waited for both);
 * once idle, keepalives go on. */
#define SLOW_COMMIT_MS 2500
static void test_no_keepalive_beside_a_slow_request(void)
{
    struct tbc_submitter *sub = NULL;
    char error[128];
    REQUIRE(tbc_submitter_open(tbc_u128_from_u64(0), address_list, 2, &sub, error, sizeof error) ==
            0);
    int64_t until = clock_monotonic_ms() + 30000;
    while (!tbc_submitter_ready(sub) && clock_monotonic_ms() < until)
        usleep(10000);
    REQUIRE(tbc_submitter_ready(sub));
    set_commit_delay(SLOW_COMMIT_MS);
    /* A keepalive the idle submitter sent just now may hold up the first. */
    CHECK_EQ_I64(submitter_lookup(sub, 15000), TBC_ITEM_OK);
    uint32_t keepalives = 0, queued = 0;
    keepalive_counts(&keepalives, &queued);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_I64(submitter_lookup(sub, 15000), TBC_ITEM_OK);
    uint32_t keepalives_after = 0, queued_after = 0;
    keepalive_counts(&keepalives_after, &queued_after);
    printf("     %u keepalives beside 2 slow lookups, %u of them queued behind one\n",
           keepalives_after - keepalives, queued_after - queued);
    CHECK_EQ_U64(queued_after - queued, 0);
    set_commit_delay(0);
    /* Idle: the keepalive comes back (TBC_KEEPALIVE_MS after the last answer). */
    until = clock_monotonic_ms() + 10000;
    do {
        usleep(10000);
        keepalive_counts(&keepalives, &queued);
    } while (keepalives == keepalives_after && clock_monotonic_ms() < until);
    CHECK(keepalives > keepalives_after);
    tbc_submitter_close(sub);
}

int main(void)
{
    pthread_mutex_init(&fake.lock, NULL);
    for (int i = 0; i < CONNECTIONS_MAX; i++)
        fake.connections[i].fd = -1;
    for (int r = 0; r < REPLICAS; r++) {
        fake.listen_fd[r] = listen_on_free_port(&fake.port[r]);
        if (fake.listen_fd[r] < 0)
            return 1;
        size_t length = strlen(address_list);
        snprintf(address_list + length, sizeof address_list - length, "%s127.0.0.1:%d",
                 r > 0 ? "," : "", fake.port[r]);
    }
    char error[128];
    if (tbc_addresses_parse(address_list, addresses, error, sizeof error) != REPLICAS)
        return 1;
    pthread_t thread;
    pthread_create(&thread, NULL, fake_main, NULL);
    RUN(test_registers_with_the_primary,
        "in view 1 the session registers with replica 1 only, connected to all three");
    RUN(test_requests_go_to_the_primary, "requests go to the primary alone, none resent");
    RUN(test_follows_a_view_change,
        "the primary stopped and view 2 started: a resend gets through, then replica 2 directly");
    RUN(test_learns_the_view_from_pongs,
        "replica 2 stopped and view 3 started: pongs tell, replica 0 answers");
    RUN(test_reconnects, "every connection lost: the session reconnects to all and carries on");
    RUN(test_evictions, "an older view's eviction is ignored; a current one starts a new session");
    RUN(test_no_keepalive_beside_a_slow_request,
        "commits slow: no keepalive beside a caller's request, and keepalives again once idle");
    tbc_session_free(&session);
    pthread_mutex_lock(&fake.lock);
    fake.stopping = true;
    pthread_mutex_unlock(&fake.lock);
    pthread_join(thread, NULL);
    return test_summary();
}
