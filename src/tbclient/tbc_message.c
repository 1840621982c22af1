/* Header layout of TigerBeetle messages, by byte offset
 * (docs/tigerbeetle-protocol.md "Headers").
 * Offsets are written out rather than taken from a C struct so that the
 * layout is visible next to the code that fills it. */
#include "tbc_message.h"

#include <assert.h>
#include <string.h>

#include "tbc_checksum.h"

/* Common frame, bytes 0..127. */
#define OFFSET_CHECKSUM 0
#define OFFSET_CHECKSUM_PADDING 16
#define OFFSET_CHECKSUM_BODY 32
#define OFFSET_CHECKSUM_BODY_PADDING 48
#define OFFSET_NONCE_RESERVED 64
#define OFFSET_CLUSTER 80
#define OFFSET_SIZE 96
#define OFFSET_EPOCH 100
#define OFFSET_VIEW 104
#define OFFSET_RELEASE 108
#define OFFSET_PROTOCOL 112
#define OFFSET_COMMAND 114
#define OFFSET_REPLICA 115
#define OFFSET_RESERVED_FRAME 116
#define RESERVED_FRAME_SIZE 12
/* Request, bytes 128..255. */
#define OFFSET_REQUEST_PARENT 128
#define OFFSET_REQUEST_CLIENT 160
#define OFFSET_REQUEST_SESSION 176
#define OFFSET_REQUEST_REQUEST 192
#define OFFSET_REQUEST_OPERATION 196
/* PingClient. */
#define OFFSET_PING_CLIENT 128
/* Reply. */
#define OFFSET_REPLY_REQUEST_CHECKSUM 128
#define OFFSET_REPLY_CONTEXT 160
#define OFFSET_REPLY_CLIENT 192
#define OFFSET_REPLY_OP 208
#define OFFSET_REPLY_COMMIT 216
#define OFFSET_REPLY_TIMESTAMP 224
#define OFFSET_REPLY_REQUEST 232
#define OFFSET_REPLY_OPERATION 236
/* Eviction. */
#define OFFSET_EVICTION_CLIENT 128
#define OFFSET_EVICTION_REASON 255

/* Little-endian fields at any alignment (memcpy: the host is little-endian,
 * as TigerBeetle requires), one writer and one reader per width. */
#define TBC_FIELD_ACCESSORS(width, type)                                                           \
    void tbc_put_##width(uint8_t *at, type value)                                                  \
    {                                                                                              \
        memcpy(at, &value, sizeof value);                                                          \
    }                                                                                              \
    type tbc_get_##width(const uint8_t *at)                                                        \
    {                                                                                              \
        type value;                                                                                \
        memcpy(&value, at, sizeof value);                                                          \
        return value;                                                                              \
    }

TBC_FIELD_ACCESSORS(u16, uint16_t)
TBC_FIELD_ACCESSORS(u32, uint32_t)
TBC_FIELD_ACCESSORS(u64, uint64_t)
TBC_FIELD_ACCESSORS(u128, tbc_u128)

/* checksum_body, then checksum over bytes 16..255 (which covers it). */
static void seal(uint8_t *message, uint32_t body_size)
{
    tbc_put_u128(message + OFFSET_CHECKSUM_BODY,
                 tbc_checksum(message + TBC_HEADER_SIZE, body_size));
    tbc_put_u128(message + OFFSET_CHECKSUM,
                 tbc_checksum(message + OFFSET_CHECKSUM_PADDING, TBC_HEADER_SIZE - 16));
}

static void frame(uint8_t *header, tbc_u128 cluster, uint32_t size, uint32_t view, uint32_t release,
                  uint8_t command)
{
    memset(header, 0, TBC_HEADER_SIZE);
    tbc_put_u128(header + OFFSET_CLUSTER, cluster);
    tbc_put_u32(header + OFFSET_SIZE, size);
    tbc_put_u32(header + OFFSET_VIEW, view);
    tbc_put_u32(header + OFFSET_RELEASE, release);
    header[OFFSET_COMMAND] = command;
}

void tbc_message_request(uint8_t *message, const struct tbc_request_fields *fields,
                         uint32_t body_size)
{
    assert(body_size <= TBC_BODY_SIZE_MAX);
    assert(fields->release != 0);
    assert(!tbc_u128_zero(fields->client));
    assert(fields->operation != 0 && fields->operation != 1);
    frame(message, fields->cluster, TBC_HEADER_SIZE + body_size, fields->view, fields->release,
          TBC_COMMAND_REQUEST);
    tbc_put_u128(message + OFFSET_REQUEST_PARENT, fields->parent);
    tbc_put_u128(message + OFFSET_REQUEST_CLIENT, fields->client);
    tbc_put_u64(message + OFFSET_REQUEST_SESSION, fields->session);
    tbc_put_u32(message + OFFSET_REQUEST_REQUEST, fields->request);
    message[OFFSET_REQUEST_OPERATION] = fields->operation;
    seal(message, body_size);
}

void tbc_message_ping_client(uint8_t header[TBC_HEADER_SIZE], tbc_u128 cluster, uint32_t release,
                             tbc_u128 client)
{
    assert(release != 0);
    assert(!tbc_u128_zero(client));
    /* view 0 and nothing at 144..159: valid on every release. */
    frame(header, cluster, TBC_HEADER_SIZE, 0, release, TBC_COMMAND_PING_CLIENT);
    tbc_put_u128(header + OFFSET_PING_CLIENT, client);
    seal(header, 0);
}

static bool all_zero(const uint8_t *bytes, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (bytes[i] != 0)
            return false;
    }
    return true;
}

int tbc_message_header_verify(const uint8_t header[TBC_HEADER_SIZE], tbc_u128 cluster)
{
    tbc_u128 expected = tbc_checksum(header + OFFSET_CHECKSUM_PADDING, TBC_HEADER_SIZE - 16);
    if (!tbc_u128_equal(expected, tbc_message_checksum(header)))
        return TBC_MESSAGE_BAD_CHECKSUM;
    uint32_t size = tbc_message_size(header);
    if (size < TBC_HEADER_SIZE || size > TBC_MESSAGE_SIZE_MAX)
        return TBC_MESSAGE_BAD_SIZE;
    if (!all_zero(header + OFFSET_CHECKSUM_PADDING, 16) ||
        !all_zero(header + OFFSET_CHECKSUM_BODY_PADDING, 16) ||
        !all_zero(header + OFFSET_NONCE_RESERVED, 16) || tbc_get_u32(header + OFFSET_EPOCH) != 0 ||
        tbc_get_u16(header + OFFSET_PROTOCOL) != 0 ||
        !all_zero(header + OFFSET_RESERVED_FRAME, RESERVED_FRAME_SIZE))
        return TBC_MESSAGE_BAD_FRAME;
    if (!tbc_u128_equal(tbc_get_u128(header + OFFSET_CLUSTER), cluster))
        return TBC_MESSAGE_BAD_CLUSTER;
    return TBC_MESSAGE_OK;
}

int tbc_message_body_verify(const uint8_t *message)
{
    uint32_t size = tbc_message_size(message);
    assert(size >= TBC_HEADER_SIZE && size <= TBC_MESSAGE_SIZE_MAX);
    tbc_u128 body = tbc_checksum(message + TBC_HEADER_SIZE, size - TBC_HEADER_SIZE);
    if (!tbc_u128_equal(body, tbc_get_u128(message + OFFSET_CHECKSUM_BODY)))
        return TBC_MESSAGE_BAD_BODY;
    return TBC_MESSAGE_OK;
}

tbc_u128 tbc_message_checksum(const uint8_t *header)
{
    return tbc_get_u128(header + OFFSET_CHECKSUM);
}

uint32_t tbc_message_size(const uint8_t *header)
{
    return tbc_get_u32(header + OFFSET_SIZE);
}

uint32_t tbc_message_view(const uint8_t *header)
{
    return tbc_get_u32(header + OFFSET_VIEW);
}

uint32_t tbc_message_release(const uint8_t *header)
{
    return tbc_get_u32(header + OFFSET_RELEASE);
}

uint8_t tbc_message_command(const uint8_t *header)
{
    return header[OFFSET_COMMAND];
}

void tbc_message_reply_read(const uint8_t *header, struct tbc_reply_fields *out)
{
    out->request_checksum = tbc_get_u128(header + OFFSET_REPLY_REQUEST_CHECKSUM);
    out->context = tbc_get_u128(header + OFFSET_REPLY_CONTEXT);
    out->client = tbc_get_u128(header + OFFSET_REPLY_CLIENT);
    out->op = tbc_get_u64(header + OFFSET_REPLY_OP);
    out->commit = tbc_get_u64(header + OFFSET_REPLY_COMMIT);
    out->timestamp = tbc_get_u64(header + OFFSET_REPLY_TIMESTAMP);
    out->request = tbc_get_u32(header + OFFSET_REPLY_REQUEST);
    out->operation = header[OFFSET_REPLY_OPERATION];
}

tbc_u128 tbc_message_eviction_client(const uint8_t *header)
{
    return tbc_get_u128(header + OFFSET_EVICTION_CLIENT);
}

uint8_t tbc_message_eviction_reason(const uint8_t *header)
{
    return header[OFFSET_EVICTION_REASON];
}
