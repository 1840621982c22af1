/* Unit tests of microbatching, no server needed: under random item sizes,
 * random linked chains and random batch limits, no batch ever splits a
 * chain, and every result a simulated server gives reaches the item (and
 * the event in it) it belongs to. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tbclient/tbc_batch.h"
#include "tbclient/tbc_message.h"
#include "tbclient/tbc_bounds.h"
#include "test.h"

#define ITEMS_MAX 400
#define ITEM_EVENTS_MAX 40

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint32_t rng(uint32_t bound)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rng_state >> 33) % bound);
}

struct fixture {
    struct tbc_item items[ITEMS_MAX];
    struct tbc_transfer events[ITEMS_MAX][ITEM_EVENTS_MAX];
    uint32_t codes[ITEMS_MAX][ITEM_EVENTS_MAX];
    uint32_t expected[ITEMS_MAX][ITEM_EVENTS_MAX];
    uint32_t item_of_id[ITEMS_MAX * ITEM_EVENTS_MAX + 1];
    uint32_t count;
};

static void noop_done(struct tbc_item *item)
{
    (void)item;
}

/* Items of 1..ITEM_EVENTS_MAX transfers in random closed chains; the event
 * id encodes (item, offset) so the simulated server knows its owner. */
static void build(struct fixture *f, uint32_t count)
{
    memset(f, 0, sizeof *f);
    f->count = count;
    uint64_t id = 1;
    for (uint32_t i = 0; i < count; i++) {
        struct tbc_item *item = &f->items[i];
        item->operation = TBC_OPERATION_CREATE_TRANSFERS;
        item->event_count = 1 + rng(ITEM_EVENTS_MAX);
        item->events = f->events[i];
        item->codes = f->codes[i];
        item->done = noop_done;
        for (uint32_t e = 0; e < item->event_count; e++) {
            struct tbc_transfer *t = &f->events[i][e];
            t->id = tbc_u128_from_u64(id);
            f->item_of_id[id] = i;
            id++;
            bool last = e + 1 == item->event_count;
            if (!last && rng(3) != 0)
                t->flags = TBC_TRANSFER_LINKED; /* chains only inside the item */
        }
        if (i > 0)
            f->items[i - 1].next = item;
    }
}

/* TigerBeetle's chain rule on one request: a failing event fails its whole
 * chain (earlier members linked_event_failed first, then the failure, then
 * the rest linked_event_failed); results ascend by index. */
static uint32_t simulate(const struct tbc_transfer *events, uint32_t n, uint8_t *reply,
                         uint32_t *expected_code)
{
    uint32_t results = 0;
    uint32_t start = 0;
    while (start < n) {
        uint32_t end = start;
        while (events[end].flags & TBC_TRANSFER_LINKED)
            end++;
        /* chain [start, end]; maybe one member fails */
        uint32_t failing = rng(4) == 0 ? start + rng(end - start + 1) : UINT32_MAX;
        for (uint32_t e = start; e <= end; e++) {
            uint32_t code = failing == UINT32_MAX ? 0
                            : e == failing        ? 54 + rng(2)
                                                  : TBC_TRANSFER_LINKED_EVENT_FAILED;
            if (failing != UINT32_MAX && end == start)
                code = 54; /* a lone event just fails */
            expected_code[e] = code;
            if (code != 0) {
                tbc_put_u32(reply + 8 * results, e);
                tbc_put_u32(reply + 8 * results + 4, code);
                results++;
            }
        }
        start = end + 1;
    }
    return results * 8;
}

static void test_chains_never_split_and_results_map_back(void)
{
    static struct fixture f;
    static uint8_t body[TBC_BODY_SIZE_MAX];
    static uint8_t reply[TBC_BATCH_EVENTS_MAX * 8];
    static uint32_t codes[TBC_BATCH_EVENTS_MAX];
    for (int round = 0; round < 200; round++) {
        build(&f, 1 + rng(ITEMS_MAX));
        struct tbc_item *head = &f.items[0], *tail = &f.items[f.count - 1];
        uint32_t taken_items = 0;
        while (head != NULL) {
            uint32_t events_max = ITEM_EVENTS_MAX + rng(300); /* random batch boundaries */
            uint32_t events = 0;
            struct tbc_item *batch = tbc_batch_take(&head, &tail, events_max, &events);
            CHECK(events <= events_max);
            uint32_t size = tbc_batch_encode(batch, TBC_EVENT_SIZE, body);
            CHECK_EQ_U64(size, events * TBC_EVENT_SIZE);
            const struct tbc_transfer *sent = (const struct tbc_transfer *)body;
            /* never a chain open at the end of a batch */
            CHECK((sent[events - 1].flags & TBC_TRANSFER_LINKED) == 0);
            uint32_t reply_size = simulate(sent, events, reply, codes);
            for (uint32_t e = 0; e < events; e++) {
                uint64_t id = sent[e].id.low;
                uint32_t owner = f.item_of_id[id];
                uint32_t offset = (uint32_t)(id - f.events[owner][0].id.low);
                f.expected[owner][offset] = codes[e];
            }
            CHECK(tbc_batch_distribute_create(batch, events, reply, reply_size, 1000000) == 0);
            uint32_t base = 0;
            for (struct tbc_item *item = batch; item != NULL; item = item->next) {
                CHECK_EQ_U64(item->timestamp, 1000000 - events + base + 1);
                base += item->event_count;
                taken_items++;
            }
        }
        CHECK_EQ_U64(taken_items, f.count);
        for (uint32_t i = 0; i < f.count; i++) {
            for (uint32_t e = 0; e < f.items[i].event_count; e++)
                CHECK_EQ_U64(f.codes[i][e], f.expected[i][e]);
        }
    }
}

static void test_take_fills_up_to_the_limit(void)
{
    static struct fixture f;
    build(&f, 3);
    f.items[0].event_count = 5;
    f.items[1].event_count = 5;
    f.items[2].event_count = 1;
    for (int i = 0; i < 3; i++)
        f.events[i][f.items[i].event_count - 1].flags = 0;
    struct tbc_item *head = &f.items[0], *tail = &f.items[2];
    uint32_t events = 0;
    struct tbc_item *batch = tbc_batch_take(&head, &tail, 9, &events);
    CHECK(batch == &f.items[0]);
    CHECK(batch->next == NULL); /* 5 + 5 > 9: the second item waits whole */
    CHECK_EQ_U64(events, 5);
    batch = tbc_batch_take(&head, &tail, 9, &events);
    CHECK(batch == &f.items[1] && batch->next == &f.items[2]);
    CHECK_EQ_U64(events, 6);
    CHECK(head == NULL && tail == NULL);
}

static void test_malformed_create_reply_refused(void)
{
    static struct fixture f;
    build(&f, 2);
    f.items[0].next = &f.items[1];
    uint32_t total = f.items[0].event_count + f.items[1].event_count;
    uint8_t reply[16];
    tbc_put_u32(reply, total); /* index past the batch */
    tbc_put_u32(reply + 4, 54);
    CHECK(tbc_batch_distribute_create(&f.items[0], total, reply, 8, 99) == -1);
    tbc_put_u32(reply, 0);
    tbc_put_u32(reply + 8, 0); /* not ascending */
    tbc_put_u32(reply + 12, 54);
    CHECK(tbc_batch_distribute_create(&f.items[0], total, reply, 16, 99) == -1);
    CHECK(tbc_batch_distribute_create(&f.items[0], total, reply, 7, 99) == -1);
}

static void test_lookup_results_matched_by_id(void)
{
    /* Two items: ids {1, 2, 3} and {2, 9}; the server found 1, 3, 2 (and not 2 twice, 9). */
    tbc_u128 ids_a[3] = {tbc_u128_from_u64(1), tbc_u128_from_u64(2), tbc_u128_from_u64(3)};
    tbc_u128 ids_b[2] = {tbc_u128_from_u64(2), tbc_u128_from_u64(9)};
    uint8_t objects_a[3][128], objects_b[2][128], found_a[3], found_b[2];
    struct tbc_item a = {.operation = TBC_OPERATION_LOOKUP_ACCOUNTS,
                         .event_count = 3,
                         .events = ids_a,
                         .objects = objects_a,
                         .found = found_a};
    struct tbc_item b = {.operation = TBC_OPERATION_LOOKUP_ACCOUNTS,
                         .event_count = 2,
                         .events = ids_b,
                         .objects = objects_b,
                         .found = found_b};
    a.next = &b;
    uint8_t reply[3][128] = {{0}};
    tbc_put_u128(reply[0], ids_a[0]);
    tbc_put_u128(reply[1], ids_a[2]);
    tbc_put_u128(reply[2], ids_b[0]);
    reply[2][100] = 42;
    CHECK(tbc_batch_distribute_lookup(&a, &reply[0][0], sizeof reply) == 0);
    CHECK(found_a[0] == 1 && found_a[1] == 0 && found_a[2] == 1);
    CHECK(found_b[0] == 1 && found_b[1] == 0);
    CHECK_EQ_U64(objects_b[0][100], 42);
    /* an object nobody asked for is a malformed reply */
    tbc_put_u128(reply[2], tbc_u128_from_u64(77));
    CHECK(tbc_batch_distribute_lookup(&a, &reply[0][0], sizeof reply) == -1);
}

int main(void)
{
    RUN(test_chains_never_split_and_results_map_back,
        "under random batch limits no chain is split and each result reaches its item and event");
    RUN(test_take_fills_up_to_the_limit,
        "a batch takes whole items up to the event limit, in order");
    RUN(test_malformed_create_reply_refused,
        "a create reply out of range or out of order is refused");
    RUN(test_lookup_results_matched_by_id, "lookup objects reach the items whose ids they answer");
    return test_summary();
}
