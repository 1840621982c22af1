/* Blocks of a few fixed sizes carved from large slabs, and kept on a free
 * list per size once given back: a cache that grows allocates one slab per
 * many blocks (instead of growing the heap a page at a time), and a steady
 * load allocates nothing. Slabs are freed only with the pool. Not
 * thread-safe: the owner serializes every call. */
#ifndef LLMLIMIT_UTIL_SLAB_H
#define LLMLIMIT_UTIL_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define SLAB_CLASSES_MAX 16
#define SLAB_ALIGN 64 /* every block starts on a cache line */

struct slab_pool {
    const uint32_t *class_bytes; /* ascending multiples of SLAB_ALIGN */
    uint32_t class_count;
    size_t slab_bytes;
    void *free[SLAB_CLASSES_MAX]; /* a free block's first bytes link to the next */
    void *slabs;                  /* newest first; a slab's first line links to the next */
    size_t slab_used;             /* bytes of the newest slab carved */
};

/* class_bytes must outlive the pool; the largest class fits a slab with its
 * link line. */
void slab_pool_init(struct slab_pool *pool, const uint32_t *class_bytes, uint32_t class_count,
                    size_t slab_bytes);
/* The smallest class of at least `bytes` (there must be one). */
uint32_t slab_pool_class(const struct slab_pool *pool, size_t bytes);
/* A block of the class, not zeroed; NULL when out of memory. */
void *slab_pool_take(struct slab_pool *pool, uint32_t class_index);
/* A block taken from this class, back for reuse. */
void slab_pool_give(struct slab_pool *pool, void *block, uint32_t class_index);
/* Frees every slab: every block taken is gone with them. */
void slab_pool_free(struct slab_pool *pool);

#endif
