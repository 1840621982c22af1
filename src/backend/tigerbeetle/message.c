/* Header layout of TigerBeetle messages, by byte offset
 * (docs/tigerbeetle-protocol.md "Headers").
 * Offsets are written out rather than taken from a C struct so that the
 * layout is visible next to the code that fills it. */
#include "message.h"

#include <assert.h>
#include <string.h>

#include "checksum.h"

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

void tb_put_u16(uint8_t *at, uint16_t value)
{
    memcpy(at, &value, sizeof value);
}

void tb_put_u32(uint8_t *at, uint32_t value)
{
    memcpy(at, &value, sizeof value);
}

void tb_put_u64(uint8_t *at, uint64_t value)
{
    memcpy(at, &value, sizeof value);
}

void tb_put_u128(uint8_t *at, tb_u128 value)
{
    memcpy(at, &value, sizeof value);
}

uint16_t tb_get_u16(const uint8_t *at)
{
    uint16_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

uint32_t tb_get_u32(const uint8_t *at)
{
    uint32_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

uint64_t tb_get_u64(const uint8_t *at)
{
    uint64_t value;
    memcpy(&value, at, sizeof value);
    return value;
}

tb_u128 tb_get_u128(const uint8_t *at)
{
    tb_u128 value;
    memcpy(&value, at, sizeof value);
    return value;
}

/* checksum_body, then checksum over bytes 16..255 (which covers it). */
static void seal(uint8_t *message, uint32_t body_size)
{
    tb_put_u128(message + OFFSET_CHECKSUM_BODY, tb_checksum(message + TB_HEADER_SIZE, body_size));
    tb_put_u128(message + OFFSET_CHECKSUM,
                tb_checksum(message + OFFSET_CHECKSUM_PADDING, TB_HEADER_SIZE - 16));
}

static void frame(uint8_t *header, tb_u128 cluster, uint32_t size, uint32_t view, uint32_t release,
                  uint8_t command)
{
    memset(header, 0, TB_HEADER_SIZE);
    tb_put_u128(header + OFFSET_CLUSTER, cluster);
    tb_put_u32(header + OFFSET_SIZE, size);
    tb_put_u32(header + OFFSET_VIEW, view);
    tb_put_u32(header + OFFSET_RELEASE, release);
    header[OFFSET_COMMAND] = command;
}

void tb_message_request(uint8_t *message, const struct tb_request_fields *fields,
                        uint32_t body_size)
{
    assert(body_size <= TB_BODY_SIZE_MAX);
    assert(fields->release != 0);
    assert(!tb_u128_zero(fields->client));
    assert(fields->operation != 0 && fields->operation != 1);
    frame(message, fields->cluster, TB_HEADER_SIZE + body_size, fields->view, fields->release,
          TB_COMMAND_REQUEST);
    tb_put_u128(message + OFFSET_REQUEST_PARENT, fields->parent);
    tb_put_u128(message + OFFSET_REQUEST_CLIENT, fields->client);
    tb_put_u64(message + OFFSET_REQUEST_SESSION, fields->session);
    tb_put_u32(message + OFFSET_REQUEST_REQUEST, fields->request);
    message[OFFSET_REQUEST_OPERATION] = fields->operation;
    seal(message, body_size);
}

void tb_message_ping_client(uint8_t header[TB_HEADER_SIZE], tb_u128 cluster, uint32_t release,
                            tb_u128 client)
{
    assert(release != 0);
    assert(!tb_u128_zero(client));
    /* view 0 and nothing at 144..159: valid on every release. */
    frame(header, cluster, TB_HEADER_SIZE, 0, release, TB_COMMAND_PING_CLIENT);
    tb_put_u128(header + OFFSET_PING_CLIENT, client);
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

int tb_message_header_verify(const uint8_t header[TB_HEADER_SIZE], tb_u128 cluster)
{
    tb_u128 expected = tb_checksum(header + OFFSET_CHECKSUM_PADDING, TB_HEADER_SIZE - 16);
    if (!tb_u128_equal(expected, tb_message_checksum(header)))
        return TB_MESSAGE_BAD_CHECKSUM;
    uint32_t size = tb_message_size(header);
    if (size < TB_HEADER_SIZE || size > TB_MESSAGE_SIZE_MAX)
        return TB_MESSAGE_BAD_SIZE;
    if (!all_zero(header + OFFSET_CHECKSUM_PADDING, 16) ||
        !all_zero(header + OFFSET_CHECKSUM_BODY_PADDING, 16) ||
        !all_zero(header + OFFSET_NONCE_RESERVED, 16) || tb_get_u32(header + OFFSET_EPOCH) != 0 ||
        tb_get_u16(header + OFFSET_PROTOCOL) != 0 ||
        !all_zero(header + OFFSET_RESERVED_FRAME, RESERVED_FRAME_SIZE))
        return TB_MESSAGE_BAD_FRAME;
    if (!tb_u128_equal(tb_get_u128(header + OFFSET_CLUSTER), cluster))
        return TB_MESSAGE_BAD_CLUSTER;
    return TB_MESSAGE_OK;
}

int tb_message_body_verify(const uint8_t *message)
{
    uint32_t size = tb_message_size(message);
    assert(size >= TB_HEADER_SIZE && size <= TB_MESSAGE_SIZE_MAX);
    tb_u128 body = tb_checksum(message + TB_HEADER_SIZE, size - TB_HEADER_SIZE);
    if (!tb_u128_equal(body, tb_get_u128(message + OFFSET_CHECKSUM_BODY)))
        return TB_MESSAGE_BAD_BODY;
    return TB_MESSAGE_OK;
}

tb_u128 tb_message_checksum(const uint8_t *header)
{
    return tb_get_u128(header + OFFSET_CHECKSUM);
}

uint32_t tb_message_size(const uint8_t *header)
{
    return tb_get_u32(header + OFFSET_SIZE);
}

uint32_t tb_message_view(const uint8_t *header)
{
    return tb_get_u32(header + OFFSET_VIEW);
}

uint32_t tb_message_release(const uint8_t *header)
{
    return tb_get_u32(header + OFFSET_RELEASE);
}

uint8_t tb_message_command(const uint8_t *header)
{
    return header[OFFSET_COMMAND];
}

void tb_message_reply_read(const uint8_t *header, struct tb_reply_fields *out)
{
    out->request_checksum = tb_get_u128(header + OFFSET_REPLY_REQUEST_CHECKSUM);
    out->context = tb_get_u128(header + OFFSET_REPLY_CONTEXT);
    out->client = tb_get_u128(header + OFFSET_REPLY_CLIENT);
    out->op = tb_get_u64(header + OFFSET_REPLY_OP);
    out->commit = tb_get_u64(header + OFFSET_REPLY_COMMIT);
    out->timestamp = tb_get_u64(header + OFFSET_REPLY_TIMESTAMP);
    out->request = tb_get_u32(header + OFFSET_REPLY_REQUEST);
    out->operation = header[OFFSET_REPLY_OPERATION];
}

tb_u128 tb_message_eviction_client(const uint8_t *header)
{
    return tb_get_u128(header + OFFSET_EVICTION_CLIENT);
}

uint8_t tb_message_eviction_reason(const uint8_t *header)
{
    return header[OFFSET_EVICTION_REASON];
}
