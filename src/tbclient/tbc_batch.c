/* Packing items into a request and mapping results back. The invariant the
 * asserts hold: a batch is a run of whole items, so the event at index i
 * of the request belongs to exactly one item, at offset i - base. */
#include "tbc_batch.h"

#include <assert.h>
#include <string.h>

#include "tbc_body.h"
#include "tbc_message.h"
#include "tbc_bounds.h"

struct tbc_item *tbc_batch_take(struct tbc_item **head, struct tbc_item **tail, uint32_t events_max,
                                uint32_t *events_out)
{
    struct tbc_item *first = *head;
    assert(first != NULL);
    assert(first->event_count <= events_max);
    struct tbc_item *last = first;
    uint32_t events = first->event_count;
    /* Bounded by the queue length, which the submitter bounds. */
    while (last->next != NULL && events + last->next->event_count <= events_max) {
        assert(last->next->operation == first->operation);
        last = last->next;
        events += last->event_count;
    }
    *head = last->next;
    if (*head == NULL)
        *tail = NULL;
    last->next = NULL;
    *events_out = events;
    return first;
}

uint32_t tbc_batch_encode(const struct tbc_item *batch, uint32_t event_size, uint8_t *body)
{
    uint32_t size = 0;
    for (const struct tbc_item *item = batch; item != NULL; item = item->next) {
        uint32_t bytes = item->event_count * event_size;
        memcpy(body + size, item->events, bytes);
        size += bytes;
    }
    return size;
}

bool tbc_item_chains_closed(const struct tbc_item *item)
{
    if (item->event_count == 0)
        return true;
    if (item->operation == TBC_OPERATION_CREATE_TRANSFERS) {
        const struct tbc_transfer *t = item->events;
        return (t[item->event_count - 1].flags & TBC_TRANSFER_LINKED) == 0;
    }
    if (item->operation == TBC_OPERATION_CREATE_ACCOUNTS) {
        const struct tbc_account *a = item->events;
        return (a[item->event_count - 1].flags & TBC_ACCOUNT_LINKED) == 0;
    }
    return true;
}

int tbc_batch_distribute_create(struct tbc_item *batch, uint32_t event_total, const uint8_t *reply,
                                uint32_t reply_size, uint64_t timestamp)
{
    if (reply_size % sizeof(struct tbc_create_result) != 0)
        return -1;
    uint32_t result_count = reply_size / (uint32_t)sizeof(struct tbc_create_result);
    if (result_count > event_total)
        return -1;
    struct tbc_item *item = batch;
    uint32_t base = 0;
    for (struct tbc_item *i = batch; i != NULL; i = i->next)
        memset(i->codes, 0, i->event_count * sizeof *i->codes);
    int64_t previous = -1;
    for (uint32_t r = 0; r < result_count; r++) {
        uint32_t index = tbc_get_u32(reply + 8 * r);
        uint32_t code = tbc_get_u32(reply + 8 * r + 4);
        if ((int64_t)index <= previous || index >= event_total || code == 0)
            return -1;
        previous = index;
        /* Results ascend, so the item only moves forward. */
        while (index >= base + item->event_count) {
            base += item->event_count;
            item = item->next;
            assert(item != NULL);
        }
        item->codes[index - base] = code;
    }
    base = 0;
    for (struct tbc_item *i = batch; i != NULL; i = i->next) {
        i->timestamp = timestamp - event_total + base + 1;
        base += i->event_count;
    }
    return 0;
}

int tbc_batch_distribute_lookup(struct tbc_item *batch, const uint8_t *reply, uint32_t reply_size)
{
    if (reply_size % TBC_EVENT_SIZE != 0)
        return -1;
    uint32_t object_count = reply_size / TBC_EVENT_SIZE;
    uint32_t next = 0;
    /* Objects come in request order with the missing ids left out: walk
     * the ids and take the next object when its id matches. */
    for (struct tbc_item *item = batch; item != NULL; item = item->next) {
        const uint8_t *ids = item->events;
        for (uint32_t i = 0; i < item->event_count; i++) {
            item->found[i] = 0;
            if (next == object_count)
                continue;
            const uint8_t *object = reply + (size_t)next * TBC_EVENT_SIZE;
            if (memcmp(object, ids + (size_t)i * TBC_ID_SIZE, TBC_ID_SIZE) == 0) {
                memcpy((uint8_t *)item->objects + (size_t)i * TBC_EVENT_SIZE, object,
                       TBC_EVENT_SIZE);
                item->found[i] = 1;
                next++;
            }
        }
    }
    return next == object_count ? 0 : -1;
}
