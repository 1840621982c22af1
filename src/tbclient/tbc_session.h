/* One TigerBeetle client session (docs/tigerbeetle.md): a TCP
 * connection to every replica of the cluster, ping_client on each to learn
 * the server's release (the dialect) and the view, register with the
 * primary, then requests 1, 2, 3... each naming the previous reply's
 * context as its parent, at most one in flight. A request goes to the
 * primary of the highest view seen, and is retransmitted byte for byte
 * (moving on to other replicas) until its reply arrives, across view
 * changes, reconnects and server restarts. Blocking I/O with deadlines;
 * one thread owns a session at a time. */
#ifndef LLMLIMIT_TB_SESSION_H
#define LLMLIMIT_TB_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "tbc_bounds.h"
#include "tbc_types.h"

/* LLMLIMIT_TB_TRACE=1 in the environment: sessions log their protocol
 * events, and the submitter its batches, to stderr, each with the monotonic
 * time in milliseconds. Read once. */
bool tbc_trace_enabled(void);

struct tbc_address {
    char host[TBC_ADDRESS_LENGTH_MAX + 1];
    char port[8];
};

/* Parses "HOST:PORT[,HOST:PORT...]" (or bare ports, meaning 127.0.0.1).
 * Returns the count (1..TBC_REPLICAS_MAX), or -1 with a reason in error. */
int tbc_addresses_parse(const char *text, struct tbc_address *out, char *error, size_t error_size);
/* Parses a decimal u128 cluster id. 0 or -1. */
int tbc_cluster_parse(const char *text, tbc_u128 *out);

enum tbc_session_status {
    TBC_SESSION_OK = 0,
    TBC_SESSION_TIMEOUT = -1,      /* deadline passed; a request may still be in flight */
    TBC_SESSION_DISCONNECTED = -2, /* no connection could be made */
    TBC_SESSION_EVICTED = -3,      /* the server ended the session; a new one follows */
};

struct tbc_session_stats {
    uint64_t requests;
    uint64_t retransmissions;
    uint64_t connections; /* to replicas, the first ones included */
    uint64_t evictions;
    uint64_t registrations;
};

/* One replica's TCP connection: connected in the background and, when it
 * fails or closes, connected again after a backoff with jitter. */
struct tbc_connection {
    int fd; /* -1 when closed */
    bool connecting;
    int64_t connect_started_ms;
    int64_t reconnect_after_ms; /* monotonic: no attempt before this */
    uint32_t connect_failures;  /* since the last success: the backoff's exponent */

    uint8_t *receive; /* TBC_MESSAGE_SIZE_MAX bytes, allocated at the first connect */
    uint32_t receive_fill;
    uint32_t reply_consumed; /* bytes of the last reply, dropped on the next read */

    /* What a full socket did not take yet: the rest of one message (the
     * next message waits or is dropped, never interleaved). */
    uint8_t *out; /* TBC_MESSAGE_SIZE_MAX bytes, allocated when first needed */
    uint32_t out_fill;
    uint32_t out_sent;
};

struct tbc_session {
    /* configuration: addresses[i] is replica i, in the cluster's order */
    tbc_u128 cluster;
    const struct tbc_address *addresses;
    uint32_t address_count;
    uint32_t release_hint; /* what to ping with before the release is known */

    struct tbc_connection connections[TBC_REPLICAS_MAX];
    int64_t ping_at_ms; /* monotonic: the next keepalive ping to every replica */
    uint64_t random;    /* xorshift state: backoff jitter and the hedge's replica */

    /* protocol state */
    tbc_u128 client;
    uint64_t session; /* 0 until registered */
    uint32_t request; /* number of the last request sent */
    tbc_u128 parent;
    uint32_t view;           /* highest seen in a pong, reply or eviction; primary = view % count */
    uint32_t server_release; /* 0 until a pong or eviction told us */
    uint32_t release;        /* this session's release, fixed once registered */
    enum tbc_dialect dialect;
    uint32_t batch_size_limit; /* body bytes */
    bool registered;
    bool dead; /* evicted or given up: the next ready() starts a new session */

    /* the request in flight (send holds its exact bytes) */
    uint8_t *send;
    uint32_t send_size;
    bool in_flight;
    bool in_flight_register;
    tbc_u128 in_flight_checksum;
    int64_t in_flight_since_ms;
    int64_t retransmit_at_ms;
    int64_t retransmit_interval_ms;
    uint32_t retransmit_attempts; /* of the request in flight: which replica is next */

    /* the last reply, valid until the next call */
    const uint8_t *reply_body;
    uint32_t reply_body_size;
    uint64_t reply_timestamp;
    uint32_t reply_replica; /* whose connection delivered it */

    struct tbc_session_stats stats;
    uint8_t last_eviction_reason;
};

/* Allocates the 1 MiB send buffer (each connection allocates its own
 * receive buffer when it first connects). 0 or -1 (out of memory). */
int tbc_session_init(struct tbc_session *session, tbc_u128 cluster,
                     const struct tbc_address *addresses, uint32_t address_count);
void tbc_session_free(struct tbc_session *session);

/* Brings the session to "registered, nothing in flight" by deadline_ms
 * (monotonic): connects to the replicas, probes the release, registers,
 * and finishes a request left in flight by an earlier timeout.
 * TBC_SESSION_OK; TBC_SESSION_DISCONNECTED when no replica could be reached;
 * TBC_SESSION_TIMEOUT or TBC_SESSION_EVICTED otherwise. Safe to call again
 * after any error. */
int tbc_session_ready(struct tbc_session *session, int64_t deadline_ms);

/* Where the next request's body goes (TBC_BODY_SIZE_MAX bytes, 16-aligned). */
uint8_t *tbc_session_body(struct tbc_session *session);

/* Sends the body at tbc_session_body() as request `operation` and waits for
 * its reply until deadline_ms. On TBC_SESSION_OK the reply body is at
 * session->reply_body (reply_body_size bytes) and its timestamp in
 * reply_timestamp. On TBC_SESSION_TIMEOUT the request stays in flight and
 * the next tbc_session_ready() keeps retransmitting it. Requires a ready
 * session. */
int tbc_session_call(struct tbc_session *session, uint8_t operation, uint32_t body_size,
                     int64_t deadline_ms);

/* For an idle session: reads what arrived (pongs), reconnects closed
 * connections, pings every replica now and then to follow the view.
 * false when the session must be made ready again (evicted, or no
 * replica connected). */
bool tbc_session_alive(struct tbc_session *session);

/* Whether some replica is connected now (the cluster may still be slow or
 * in a view change). */
bool tbc_session_connected(const struct tbc_session *session);

/* Closes every connection (the session itself survives on the server). */
void tbc_session_disconnect(struct tbc_session *session);

#endif
