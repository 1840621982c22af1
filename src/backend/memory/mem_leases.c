/* The lease cache of the memory backend: leases by id in a hash table and a
 * ring in reserve order, bounded by lease_cache_entries (oldest evicted
 * first) and lease_retention_ms. Leases are carved from slabs, cache-line
 * aligned, and kept on per-size free lists once freed (util/slab.h), so a
 * steady load allocates nothing. Callers hold the mutex. */
#include "mem_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct mem_lease) == 64, "a lease header is one cache line");
_Static_assert(sizeof(struct mem_lease_item) == 32, "two lease items per cache line");
_Static_assert(sizeof(struct mem_hold) == 64, "a hold is one cache line");

/* Multiples of the cache line, up to 64 items with a 128-byte id. */
static const uint32_t class_bytes[MEM_LEASE_SIZE_CLASSES] = {192, 256,  320,  384, 512,
                                                             768, 1152, 1664, 2304};

/* How many evictions ahead mem_leases_prefetch loads: far enough to cover a
 * memory access, near enough that the lines are still cached when used. */
#define LEASE_EVICT_AHEAD 8

_Static_assert(sizeof(struct mem_lease) +
                       REQUIREMENTS_PER_RESERVE_MAX * sizeof(struct mem_lease_item) +
                       LEASE_ID_LENGTH_MAX + 1 <=
                   2304,
               "the largest lease fits the last size class");

static uint32_t power_of_two_at_least(uint64_t n)
{
    uint32_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

int mem_leases_init(struct mem_backend *b, uint32_t cache_entries)
{
    assert(cache_entries >= 1);
    assert(cache_entries <= LEASE_CACHE_ENTRIES_MAX);
    uint32_t slots = power_of_two_at_least(2 * (uint64_t)cache_entries);
    if (mem_table_init(&b->leases, slots, slots) != 0)
        return -1;
    b->ring_mask = slots - 1;
    b->ring = calloc(slots, sizeof *b->ring);
    if (b->ring == NULL)
        return -1;
    b->ring_head = b->ring_tail = 0;
    slab_pool_init(&b->lease_pool, class_bytes, MEM_LEASE_SIZE_CLASSES, MEM_LEASE_SLAB_BYTES);
    return 0;
}

static size_t lease_bytes(uint32_t item_count, uint32_t id_length)
{
    assert(item_count >= 1);
    assert(item_count <= REQUIREMENTS_PER_RESERVE_MAX);
    assert(id_length >= 1);
    assert(id_length <= LEASE_ID_LENGTH_MAX);
    return sizeof(struct mem_lease) + item_count * sizeof(struct mem_lease_item) + id_length + 1;
}

struct mem_lease *mem_lease_alloc(struct mem_backend *b, uint32_t item_count, uint32_t id_length)
{
    /* The static assert above: the last class always fits. */
    uint32_t c = slab_pool_class(&b->lease_pool, lease_bytes(item_count, id_length));
    struct mem_lease *lease = slab_pool_take(&b->lease_pool, c);
    if (lease == NULL)
        return NULL;
    lease->size_class = (uint8_t)c;
    lease->item_count = (uint8_t)item_count;
    return lease;
}

void mem_lease_discard(struct mem_backend *b, struct mem_lease *lease)
{
    slab_pool_give(&b->lease_pool, lease, lease->size_class);
}

static struct mem_lease_slot *ring_slot(const struct mem_backend *b, uint64_t position)
{
    return &b->ring[position & b->ring_mask];
}

/* Moves the head past holes, so it names the oldest lease (or the tail). */
static void ring_skip_holes(struct mem_backend *b)
{
    while (b->ring_head != b->ring_tail && ring_slot(b, b->ring_head)->lease == NULL)
        b->ring_head++;
}

/* Takes the lease at this ring position out of the cache. Its holds stay
 * where they are: they are accounted on their limits and expire by
 * themselves. Evictions do not wait for the lease to load: its table entry
 * is found by the hash kept in the ring, and limits keep no reference
 * counts (see deleted_at_ring_position). */
static void drop_at(struct mem_backend *b, uint64_t position)
{
    struct mem_lease_slot *slot = ring_slot(b, position);
    struct mem_lease *lease = slot->lease;
    assert(lease != NULL);
    mem_table_remove_hashed(&b->leases, &lease->node, slot->hash);
    slot->lease = NULL;
    ring_skip_holes(b);
    assert(b->lease_count > 0);
    b->lease_count--;
    mem_lease_discard(b, lease);
}

static struct mem_lease *oldest(const struct mem_backend *b)
{
    return b->ring_head == b->ring_tail ? NULL : ring_slot(b, b->ring_head)->lease;
}

static void drop_oldest(struct mem_backend *b)
{
    assert(b->ring_head != b->ring_tail);
    drop_at(b, b->ring_head);
}

void mem_leases_prefetch(const struct mem_backend *b, uint64_t hash)
{
    const struct mem_table *t = &b->leases;
    __builtin_prefetch(&t->entries[(uint32_t)hash & (t->capacity - 1)], 1);
    if (b->lease_count < b->lease_cache_entries)
        return;
    /* Evictions go in ring order, so the lease that goes LEASE_EVICT_AHEAD
     * reserves from now is known: start loading its table entry, and the
     * lease itself for writing (its free-list link, then the next lease of
     * its size reuses it), early enough for the loads to arrive. */
    uint64_t position = b->ring_head + LEASE_EVICT_AHEAD;
    if (position >= b->ring_tail)
        return;
    const struct mem_lease_slot *victim = ring_slot(b, position);
    if (victim->lease == NULL)
        return; /* a hole */
    __builtin_prefetch(&t->entries[(uint32_t)victim->hash & (t->capacity - 1)], 1);
    const char *lease = (const char *)victim->lease;
    __builtin_prefetch(lease, 1);
    __builtin_prefetch(lease + 64, 1);
    __builtin_prefetch(lease + 128, 1);
}

/* True while one of the lease's holds still holds capacity. */
static bool lease_holding(const struct mem_backend *b, const struct mem_lease *lease,
                          int64_t now_ms)
{
    for (uint32_t i = 0; i < lease->item_count; i++) {
        const struct mem_lease_item *item = &lease->items[i];
        if (item->hold_id == MEM_HOLD_NONE)
            continue;
        const struct mem_hold *hold = mem_hold_get(&b->pool, item->hold_id);
        if (hold->generation == item->hold_generation && hold->state != MEM_HOLD_FREE &&
            hold->expires_at_ms > now_ms)
            return true;
    }
    return false;
}

/* A lease is forgotten once it is older than lease_retention_ms and none of
 * its holds lives any more: a retry while a hold lives must get the same
 * answer, never a second reservation. (The count bound may still evict it.) */
static bool past_retention(const struct mem_backend *b, const struct mem_lease *lease,
                           int64_t now_ms)
{
    return now_ms - lease->reserved_at_ms >= b->lease_retention_ms &&
           !lease_holding(b, lease, now_ms);
}

struct mem_lease *mem_lease_find(struct mem_backend *b, const struct mem_lease_key *key,
                                 int64_t now_ms)
{
    struct mem_node *node = mem_table_find(&b->leases, key->hash, key->id, key->length);
    if (node == NULL)
        return NULL;
    struct mem_lease *lease = (struct mem_lease *)node;
    if (past_retention(b, lease, now_ms)) {
        drop_at(b, lease->ring_position);
        return NULL;
    }
    return lease;
}

void mem_lease_insert(struct mem_backend *b, struct mem_lease *lease,
                      const struct mem_lease_key *key, int64_t reserved_at_ms)
{
    assert(key->length >= 1);
    assert(key->length <= LEASE_ID_LENGTH_MAX);
    assert(sizeof *lease + lease->item_count * sizeof lease->items[0] + key->length + 1 <=
           class_bytes[lease->size_class]);
    if (b->lease_count >= b->lease_cache_entries)
        drop_oldest(b);
    /* Holes come from leases dropped past their retention out of order,
     * which needs a clock stepping back; should they ever fill the spare
     * room, the oldest lease goes early (each drop frees its slot). */
    while (b->ring_tail - b->ring_head > b->ring_mask)
        drop_oldest(b);
    char *stored_id = mem_lease_id(lease);
    memcpy(stored_id, key->id, key->length);
    stored_id[key->length] = '\0';
    lease->node.key = stored_id;
    lease->node.key_length = key->length;
    lease->node.hash = key->hash;
    lease->reserved_at_ms = reserved_at_ms;
    /* The table is sized for the cache bound, so this cannot fail. */
    int inserted = mem_table_insert(&b->leases, &lease->node);
    assert(inserted == 0);
    (void)inserted;
    lease->ring_position = b->ring_tail++;
    *ring_slot(b, lease->ring_position) = (struct mem_lease_slot){lease, key->hash};
    b->lease_count++;
}

void mem_leases_expire(struct mem_backend *b, int64_t now_ms)
{
    /* Reserve order is time order, so expired leases are at the old end;
     * the loop is bounded by the cache size. */
    for (struct mem_lease *lease = oldest(b); lease != NULL && past_retention(b, lease, now_ms);
         lease = oldest(b))
        drop_oldest(b);
}

void mem_leases_free_all(struct mem_backend *b)
{
    if (b->ring != NULL) {
        while (oldest(b) != NULL)
            drop_oldest(b);
    }
    slab_pool_free(&b->lease_pool); /* free leases live in the slabs */
    free(b->ring);
    b->ring = NULL;
    mem_table_free(&b->leases);
}
