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

#include "batch.h"
#include "checksum.h"
#include "message.h"
#include "tb_bounds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ITEMS 3
#define ITEM_EVENTS_MAX 64
#define PREFIX_BYTES (1 + ITEMS)

static uint8_t message[TB_MESSAGE_SIZE_MAX];

static void seal(uint8_t *m, uint32_t length)
{
    tb_put_u32(m + 96, length); /* size */
    tb_put_u128(m + 32, tb_checksum(m + TB_HEADER_SIZE, length - TB_HEADER_SIZE));
    tb_put_u128(m, tb_checksum(m + 16, TB_HEADER_SIZE - 16));
}

static void read_header(const uint8_t *m, uint32_t length)
{
    tb_u128 cluster = tb_get_u128(m + 80);
    int verified = tb_message_header_verify(m, cluster);
    assert(verified <= 0 && verified >= TB_MESSAGE_BAD_BODY);
    if (verified != TB_MESSAGE_OK)
        return;
    uint32_t declared = tb_message_size(m);
    assert(declared >= TB_HEADER_SIZE && declared <= TB_MESSAGE_SIZE_MAX);
    if (declared <= length) {
        int body = tb_message_body_verify(m);
        assert(body == TB_MESSAGE_OK || body == TB_MESSAGE_BAD_BODY);
    }
    struct tb_reply_fields reply;
    tb_message_reply_read(m, &reply);
    (void)tb_message_eviction_client(m);
    (void)tb_message_eviction_reason(m);
    (void)tb_message_command(m);
    (void)tb_message_view(m);
    (void)tb_message_release(m);
}

struct batch {
    struct tb_item items[ITEMS];
    uint32_t codes[ITEMS][ITEM_EVENTS_MAX];
    uint8_t ids[ITEMS][ITEM_EVENTS_MAX * TB_ID_SIZE];
    uint8_t objects[ITEMS][ITEM_EVENTS_MAX * TB_EVENT_SIZE];
    uint8_t found[ITEMS][ITEM_EVENTS_MAX];
    uint32_t event_total;
};

/* Three items; lookup ids are taken from the body, so some match. */
static void batch_init(struct batch *b, const uint8_t *sizes, const uint8_t *body,
                       uint32_t body_size)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < ITEMS; i++) {
        struct tb_item *item = &b->items[i];
        item->next = i + 1 < ITEMS ? &b->items[i + 1] : NULL;
        item->event_count = 1 + sizes[i] % ITEM_EVENTS_MAX;
        for (uint32_t e = 0; e < item->event_count; e++) {
            size_t at = ((size_t)(b->event_total + e) * TB_EVENT_SIZE) % (body_size + 1);
            size_t n = body_size - at < TB_ID_SIZE ? body_size - at : TB_ID_SIZE;
            memcpy(b->ids[i] + (size_t)e * TB_ID_SIZE, body + at, n);
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
    if (tb_batch_distribute_create(b->items, b->event_total, body, body_size, UINT64_MAX) != 0)
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
    if (tb_batch_distribute_lookup(b->items, body, body_size) != 0)
        return;
    uint32_t found = 0;
    for (int i = 0; i < ITEMS; i++) {
        for (uint32_t e = 0; e < b->items[i].event_count; e++) {
            if (b->found[i][e]) {
                found++;
                assert(memcmp(b->objects[i] + (size_t)e * TB_EVENT_SIZE,
                              b->ids[i] + (size_t)e * TB_ID_SIZE, TB_ID_SIZE) == 0);
            }
        }
    }
    assert(found == body_size / TB_EVENT_SIZE); /* every object went to its id */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PREFIX_BYTES + TB_HEADER_SIZE || size - PREFIX_BYTES > TB_MESSAGE_SIZE_MAX)
        return 0;
    uint8_t control = data[0];
    uint32_t length = (uint32_t)(size - PREFIX_BYTES);
    memcpy(message, data + PREFIX_BYTES, length);
    if (control & 1)
        seal(message, length);
    read_header(message, length);
    static struct batch b;
    const uint8_t *body = message + TB_HEADER_SIZE;
    uint32_t body_size = length - TB_HEADER_SIZE;
    batch_init(&b, data + 1, body, body_size);
    if (control & 2)
        map_lookup(&b, body, body_size);
    else
        map_create(&b, body, body_size);
    return 0;
}
