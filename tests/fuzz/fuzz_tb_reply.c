/* libFuzzer harness: what the TigerBeetle backend reads from the network
 * (docs/tigerbeetle-protocol.md): header verification, reply and
 * eviction fields, body checksums, and the mapping of a reply body back to
 * the batched items (sparse create results, lookup objects). A replica or a
 * man in the middle can send anything; the client must refuse or map it
 * without reading out of bounds, and a reply it accepts must map exactly.
 *
 * Input: one control byte (bit 0: seal the message with correct checksums
 * so the checks behind them are reached; bit 1: lookup rather than create),
 * three item sizes, then the message (header and body). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tbclient/tbc_batch.h"
#include "tbclient/tbc_checksum.h"
#include "tbclient/tbc_message.h"
#include "tbclient/tbc_bounds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ITEMS 3
#define ITEM_EVENTS_MAX 64
#define PREFIX_BYTES (1 + ITEMS)

static uint8_t message[TBC_MESSAGE_SIZE_MAX];

static void seal(uint8_t *m, uint32_t length)
{
    tbc_put_u32(m + 96, length); /* size */
    tbc_put_u128(m + 32, tbc_checksum(m + TBC_HEADER_SIZE, length - TBC_HEADER_SIZE));
    tbc_put_u128(m, tbc_checksum(m + 16, TBC_HEADER_SIZE - 16));
}

static void read_header(const uint8_t *m, uint32_t length)
{
    tbc_u128 cluster = tbc_get_u128(m + 80);
    int verified = tbc_message_header_verify(m, cluster);
    assert(verified <= 0 && verified >= TBC_MESSAGE_BAD_BODY);
    if (verified != TBC_MESSAGE_OK)
        return;
    uint32_t declared = tbc_message_size(m);
    assert(declared >= TBC_HEADER_SIZE && declared <= TBC_MESSAGE_SIZE_MAX);
    if (declared <= length) {
        int body = tbc_message_body_verify(m);
        assert(body == TBC_MESSAGE_OK || body == TBC_MESSAGE_BAD_BODY);
    }
    struct tbc_reply_fields reply;
    tbc_message_reply_read(m, &reply);
    (void)tbc_message_eviction_client(m);
    (void)tbc_message_eviction_reason(m);
    (void)tbc_message_command(m);
    (void)tbc_message_view(m);
    (void)tbc_message_release(m);
}

struct batch {
    struct tbc_item items[ITEMS];
    uint32_t codes[ITEMS][ITEM_EVENTS_MAX];
    uint8_t ids[ITEMS][ITEM_EVENTS_MAX * TBC_ID_SIZE];
    uint8_t objects[ITEMS][ITEM_EVENTS_MAX * TBC_EVENT_SIZE];
    uint8_t found[ITEMS][ITEM_EVENTS_MAX];
    uint32_t event_total;
};

/* Three items; lookup ids are taken from the body, so some match. */
static void batch_init(struct batch *b, const uint8_t *sizes, const uint8_t *body,
                       uint32_t body_size)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < ITEMS; i++) {
        struct tbc_item *item = &b->items[i];
        item->next = i + 1 < ITEMS ? &b->items[i + 1] : NULL;
        item->event_count = 1 + sizes[i] % ITEM_EVENTS_MAX;
        for (uint32_t e = 0; e < item->event_count; e++) {
            size_t at = ((size_t)(b->event_total + e) * TBC_EVENT_SIZE) % (body_size + 1);
            size_t n = body_size - at < TBC_ID_SIZE ? body_size - at : TBC_ID_SIZE;
            memcpy(b->ids[i] + (size_t)e * TBC_ID_SIZE, body + at, n);
        }
        item->events = b->ids[i];
        item->codes = b->codes[i];
        item->objects = b->objects[i];
        item->found = b->found[i];
        b->event_total += item->event_count;
    }
}

static void map_create(struct batch *b, const uint8_t *body, uint32_t body_size)
{
    if (tbc_batch_distribute_create(b->items, b->event_total, body, body_size, UINT64_MAX) != 0)
        return;
    uint32_t failed = 0;
    for (int i = 0; i < ITEMS; i++) {
        for (uint32_t e = 0; e < b->items[i].event_count; e++)
            failed += b->codes[i][e] != 0;
    }
    assert(failed == body_size / 8); /* each result names one event, no two the same */
}

static void map_lookup(struct batch *b, const uint8_t *body, uint32_t body_size)
{
    if (tbc_batch_distribute_lookup(b->items, body, body_size) != 0)
        return;
    uint32_t found = 0;
    for (int i = 0; i < ITEMS; i++) {
        for (uint32_t e = 0; e < b->items[i].event_count; e++) {
            if (b->found[i][e]) {
                found++;
                assert(memcmp(b->objects[i] + (size_t)e * TBC_EVENT_SIZE,
                              b->ids[i] + (size_t)e * TBC_ID_SIZE, TBC_ID_SIZE) == 0);
            }
        }
    }
    assert(found == body_size / TBC_EVENT_SIZE); /* every object went to its id */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PREFIX_BYTES + TBC_HEADER_SIZE || size - PREFIX_BYTES > TBC_MESSAGE_SIZE_MAX)
        return 0;
    uint8_t control = data[0];
    uint32_t length = (uint32_t)(size - PREFIX_BYTES);
    memcpy(message, data + PREFIX_BYTES, length);
    if (control & 1)
        seal(message, length);
    read_header(message, length);
    static struct batch b;
    const uint8_t *body = message + TBC_HEADER_SIZE;
    uint32_t body_size = length - TBC_HEADER_SIZE;
    batch_init(&b, data + 1, body, body_size);
    if (control & 2)
        map_lookup(&b, body, body_size);
    else
        map_create(&b, body, body_size);
    return 0;
}
