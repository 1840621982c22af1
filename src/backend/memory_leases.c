/* The lease cache of the memory backend: leases by id in a hash table and a
 * list in reserve order, bounded by lease_cache_entries (oldest evicted
 * first) and lease_retention_ms. Freed leases are kept on per-size free
 * lists, so a steady load allocates nothing. Callers hold the mutex. */
#include "memory_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static uint8_t size_class(uint32_t item_count)
{
    assert(item_count >= 1);
    assert(item_count <= REQUIREMENTS_PER_RESERVE_MAX);
    uint8_t c = 0;
    while ((UINT32_C(1) << c) < item_count)
        c++;
    assert(c < LEASE_SIZE_CLASSES);
    return c;
}

struct mem_lease *mem_lease_alloc(struct backend *b, uint32_t item_count)
{
    uint8_t c = size_class(item_count);
    struct mem_lease *lease = b->free_leases[c];
    if (lease != NULL) {
        b->free_leases[c] = lease->newer;
    } else {
        lease = malloc(sizeof *lease + (sizeof lease->items[0] << c));
        if (lease == NULL)
            return NULL;
    }
    lease->size_class = c;
    lease->item_count = (uint8_t)item_count;
    lease->older = lease->newer = NULL;
    return lease;
}

void mem_lease_discard(struct backend *b, struct mem_lease *lease)
{
    lease->newer = b->free_leases[lease->size_class];
    b->free_leases[lease->size_class] = lease;
}

/* Takes a lease out of the cache. Its holds stay where they are: they are
 * accounted on their limits and expire by themselves. */
static void lease_drop(struct backend *b, struct mem_lease *lease)
{
    mem_table_remove(&b->leases, &lease->node);
    if (lease->older != NULL)
        lease->older->newer = lease->newer;
    else
        b->oldest = lease->newer;
    if (lease->newer != NULL)
        lease->newer->older = lease->older;
    else
        b->newest = lease->older;
    assert(b->lease_count > 0);
    b->lease_count--;
    for (uint32_t i = 0; i < lease->item_count; i++) {
        struct mem_limit *limit = lease->items[i].limit;
        assert(limit->lease_references > 0);
        limit->lease_references--;
    }
    mem_lease_discard(b, lease);
}

static bool past_retention(const struct backend *b, const struct mem_lease *lease, int64_t now_ms)
{
    return now_ms - lease->reserved_at_ms >= b->lease_retention_ms;
}

struct mem_lease *mem_lease_find(struct backend *b, const char *id, uint32_t id_length,
                                 int64_t now_ms)
{
    struct mem_node *node = mem_table_find(&b->leases, mem_hash(id, id_length), id, id_length);
    if (node == NULL)
        return NULL;
    struct mem_lease *lease = (struct mem_lease *)node;
    if (past_retention(b, lease, now_ms)) {
        lease_drop(b, lease);
        return NULL;
    }
    return lease;
}

void mem_lease_insert(struct backend *b, struct mem_lease *lease, const char *id,
                      uint32_t id_length, int64_t reserved_at_ms)
{
    assert(id_length >= 1);
    assert(id_length <= LEASE_ID_LENGTH_MAX);
    if (b->lease_count >= b->lease_cache_entries)
        lease_drop(b, b->oldest);
    memcpy(lease->id, id, id_length);
    lease->id[id_length] = '\0';
    lease->node.key = lease->id;
    lease->node.key_length = id_length;
    lease->node.hash = mem_hash(id, id_length);
    lease->reserved_at_ms = reserved_at_ms;
    /* The table is sized for the cache bound, so this cannot fail. */
    int inserted = mem_table_insert(&b->leases, &lease->node);
    assert(inserted == 0);
    (void)inserted;
    lease->older = b->newest;
    lease->newer = NULL;
    if (b->newest != NULL)
        b->newest->newer = lease;
    else
        b->oldest = lease;
    b->newest = lease;
    b->lease_count++;
    for (uint32_t i = 0; i < lease->item_count; i++)
        lease->items[i].limit->lease_references++;
}

void mem_leases_expire(struct backend *b, int64_t now_ms)
{
    /* Reserve order is time order, so expired leases are at the old end;
     * the loop is bounded by the cache size. */
    while (b->oldest != NULL && past_retention(b, b->oldest, now_ms))
        lease_drop(b, b->oldest);
}

void mem_leases_free_all(struct backend *b)
{
    while (b->oldest != NULL)
        lease_drop(b, b->oldest);
    for (uint32_t c = 0; c < LEASE_SIZE_CLASSES; c++) {
        while (b->free_leases[c] != NULL) {
            struct mem_lease *lease = b->free_leases[c];
            b->free_leases[c] = lease->newer;
            free(lease);
        }
    }
    mem_table_free(&b->leases);
}
