/* See slab.h. */
#include "slab.h"

#include <assert.h>
#include <stdlib.h>

void slab_pool_init(struct slab_pool *pool, const uint32_t *class_bytes, uint32_t class_count,
                    size_t slab_bytes)
{
    assert(class_count >= 1 && class_count <= SLAB_CLASSES_MAX);
    assert(slab_bytes % SLAB_ALIGN == 0);
    for (uint32_t c = 0; c < class_count; c++) {
        assert(class_bytes[c] % SLAB_ALIGN == 0);
        assert(c == 0 || class_bytes[c] > class_bytes[c - 1]);
    }
    assert(class_bytes[class_count - 1] <= slab_bytes - SLAB_ALIGN);
    *pool = (struct slab_pool){
        .class_bytes = class_bytes, .class_count = class_count, .slab_bytes = slab_bytes};
}

uint32_t slab_pool_class(const struct slab_pool *pool, size_t bytes)
{
    uint32_t c = 0;
    while (c + 1 < pool->class_count && pool->class_bytes[c] < bytes)
        c++;
    assert(pool->class_bytes[c] >= bytes);
    return c;
}

void *slab_pool_take(struct slab_pool *pool, uint32_t class_index)
{
    assert(class_index < pool->class_count);
    void *block = pool->free[class_index];
    if (block != NULL) {
        pool->free[class_index] = *(void **)block;
        return block;
    }
    size_t bytes = pool->class_bytes[class_index];
    if (pool->slabs == NULL || pool->slab_bytes - pool->slab_used < bytes) {
        /* The tail of the old slab is left unused. */
        void *slab = aligned_alloc(SLAB_ALIGN, pool->slab_bytes);
        if (slab == NULL)
            return NULL;
        *(void **)slab = pool->slabs;
        pool->slabs = slab;
        pool->slab_used = SLAB_ALIGN;
    }
    block = (char *)pool->slabs + pool->slab_used;
    pool->slab_used += bytes;
    return block;
}

void slab_pool_give(struct slab_pool *pool, void *block, uint32_t class_index)
{
    assert(block != NULL);
    assert(class_index < pool->class_count);
    *(void **)block = pool->free[class_index];
    pool->free[class_index] = block;
}

void slab_pool_free(struct slab_pool *pool)
{
    while (pool->slabs != NULL) {
        void *next = *(void **)pool->slabs;
        free(pool->slabs);
        pool->slabs = next;
    }
    for (uint32_t c = 0; c < pool->class_count; c++)
        pool->free[c] = NULL;
    pool->slab_used = 0;
}
