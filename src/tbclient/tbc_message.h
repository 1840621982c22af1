/* TigerBeetle message headers (docs/tigerbeetle-protocol.md): building the
 * client's request and ping_client headers with their checksums, and
 * checking and reading the reply, pong_client and eviction headers a
 * server sends. A message is TBC_HEADER_SIZE header bytes then the body;
 * these functions work on caller-owned buffers and never allocate. */
#ifndef LLMLIMIT_TB_MESSAGE_H
#define LLMLIMIT_TB_MESSAGE_H

#include <stdint.h>

#include "tbc_bounds.h"
#include "tbc_types.h"

/* What a client puts in a Request header (command 5). */
struct tbc_request_fields {
    tbc_u128 cluster;
    uint32_t view;    /* highest view the client has seen */
    uint32_t release; /* the dialect's release, never 0 */
    tbc_u128 parent;  /* previous reply's context; 0 for register */
    tbc_u128 client;  /* session's random nonzero id */
    uint64_t session; /* register reply's commit; 0 for register */
    uint32_t request; /* 0 for register, then 1, 2, ... */
    uint8_t operation;
};

/* Fills message[0, TBC_HEADER_SIZE) for a request whose body_size bytes
 * already sit at message + TBC_HEADER_SIZE, then seals it: checksum_body
 * first, then the header checksum (docs/tigerbeetle-protocol.md "Checksum"). */
void tbc_message_request(uint8_t *message, const struct tbc_request_fields *fields,
                         uint32_t body_size);

/* A ping_client header (command 3): no body, bytes 144..159 zero so it is
 * valid on 0.15.3 and 0.17 alike. */
void tbc_message_ping_client(uint8_t header[TBC_HEADER_SIZE], tbc_u128 cluster, uint32_t release,
                             tbc_u128 client);

enum tbc_message_error {
    TBC_MESSAGE_OK = 0,
    TBC_MESSAGE_BAD_CHECKSUM = -1,
    TBC_MESSAGE_BAD_SIZE = -2,
    TBC_MESSAGE_BAD_FRAME = -3, /* non-zero padding, epoch or protocol */
    TBC_MESSAGE_BAD_CLUSTER = -4,
    TBC_MESSAGE_BAD_BODY = -5,
};

/* Checks a received header: checksum, frame rules, size bounds, cluster.
 * Returns TBC_MESSAGE_OK or one of the errors above. */
int tbc_message_header_verify(const uint8_t header[TBC_HEADER_SIZE], tbc_u128 cluster);
/* Checks checksum_body against the body that follows the header (size
 * taken from a verified header). TBC_MESSAGE_OK or TBC_MESSAGE_BAD_BODY. */
int tbc_message_body_verify(const uint8_t *message);

/* Readers of common header fields. */
tbc_u128 tbc_message_checksum(const uint8_t *header);
uint32_t tbc_message_size(const uint8_t *header);
uint32_t tbc_message_view(const uint8_t *header);
uint32_t tbc_message_release(const uint8_t *header);
uint8_t tbc_message_command(const uint8_t *header);

/* Reply (command 8) fields (docs/tigerbeetle-protocol.md "Reply"). */
struct tbc_reply_fields {
    tbc_u128 request_checksum;
    tbc_u128 context; /* the next request's parent */
    tbc_u128 client;
    uint64_t op;
    uint64_t commit; /* register: the session number */
    uint64_t timestamp;
    uint32_t request;
    uint8_t operation;
};
void tbc_message_reply_read(const uint8_t *header, struct tbc_reply_fields *out);

/* Eviction (command 18). */
tbc_u128 tbc_message_eviction_client(const uint8_t *header);
uint8_t tbc_message_eviction_reason(const uint8_t *header);

/* Little-endian field access, shared with the body codec. */
void tbc_put_u16(uint8_t *at, uint16_t value);
void tbc_put_u32(uint8_t *at, uint32_t value);
void tbc_put_u64(uint8_t *at, uint64_t value);
void tbc_put_u128(uint8_t *at, tbc_u128 value);
uint16_t tbc_get_u16(const uint8_t *at);
uint32_t tbc_get_u32(const uint8_t *at);
uint64_t tbc_get_u64(const uint8_t *at);
tbc_u128 tbc_get_u128(const uint8_t *at);

#endif
