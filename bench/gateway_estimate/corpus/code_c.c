/* ring.c: a fixed-size ring buffer of messages shared by one producer and
 * one consumer thread. Positions only grow; the slot is position % capacity. */
#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RING_CAPACITY 1024
#define MESSAGE_BYTES_MAX 240

struct message {
    uint32_t length;
    uint16_t kind;
    uint16_t flags;
    char payload[MESSAGE_BYTES_MAX];
};

struct ring {
    _Atomic uint64_t head; /* next position to write */
    _Atomic uint64_t tail; /* next position to read */
    struct message slots[RING_CAPACITY];
};

struct ring *ring_new(void)
{
    struct ring *ring = calloc(1, sizeof *ring);
    if (ring == NULL)
        return NULL;
    atomic_init(&ring->head, 0);
    atomic_init(&ring->tail, 0);
    return ring;
}

void ring_free(struct ring *ring)
{
    free(ring);
}

/* Returns false when the ring is full; the caller decides whether to wait. */
bool ring_put(struct ring *ring, uint16_t kind, const void *payload, uint32_t length)
{
    assert(length <= MESSAGE_BYTES_MAX);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    if (head - tail >= RING_CAPACITY)
        return false;
    struct message *slot = &ring->slots[head % RING_CAPACITY];
    slot->length = length;
    slot->kind = kind;
    slot->flags = 0;
    memcpy(slot->payload, payload, length);
    atomic_store_explicit(&ring->head, head + 1, memory_order_release);
    return true;
}

/* Copies the oldest message out; false when the ring is empty. */
bool ring_take(struct ring *ring, struct message *out)
{
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    if (tail == head)
        return false;
    const struct message *slot = &ring->slots[tail % RING_CAPACITY];
    out->length = slot->length;
    out->kind = slot->kind;
    out->flags = slot->flags;
    memcpy(out->payload, slot->payload, slot->length);
    atomic_store_explicit(&ring->tail, tail + 1, memory_order_release);
    return true;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

/* Median of the lengths of up to 64 waiting messages, for the statistics
 * page; 0 when the ring is empty. */
uint32_t ring_median_length(struct ring *ring)
{
    uint32_t lengths[64];
    size_t count = 0;
    uint64_t tail = atomic_load(&ring->tail), head = atomic_load(&ring->head);
    for (uint64_t p = tail; p != head && count < 64; p++)
        lengths[count++] = ring->slots[p % RING_CAPACITY].length;
    if (count == 0)
        return 0;
    qsort(lengths, count, sizeof lengths[0], compare_u32);
    return lengths[count / 2];
}
