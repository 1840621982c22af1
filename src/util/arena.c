/* Bump allocation with 16-byte alignment: a first block on caller storage,
 * then heap blocks of at least ARENA_BLOCK_MIN bytes. */
#include "arena.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 16
#define ARENA_BLOCK_MIN (64 * 1024)

struct arena_block {
    struct arena_block *next;
    size_t size;
    size_t used;
    size_t padding; /* keeps data 16-byte aligned */
    char data[];
};
_Static_assert(offsetof(struct arena_block, data) % ARENA_ALIGN == 0, "block data starts aligned");

void arena_init(struct arena *arena, char *storage, size_t storage_size)
{
    assert(arena != NULL);
    assert(storage != NULL || storage_size == 0);
    assert(((uintptr_t)storage % ARENA_ALIGN) == 0);
    arena->storage = storage;
    arena->storage_size = storage_size;
    arena->used = 0;
    arena->blocks = NULL;
}

static size_t align_up(size_t size)
{
    return (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

void *arena_alloc_uninit(struct arena *arena, size_t size)
{
    /* Callers allocate what their bounds allow, far below this: align_up
     * and the block header must not wrap. */
    assert(size <= SIZE_MAX / 2);
    assert(arena->used <= arena->storage_size);
    assert(arena->used % ARENA_ALIGN == 0);
    size = align_up(size > 0 ? size : 1);
    if (size <= arena->storage_size - arena->used) {
        void *p = arena->storage + arena->used;
        arena->used += size;
        return p;
    }
    struct arena_block *block = arena->blocks;
    if (block == NULL || size > block->size - block->used) {
        size_t block_size = size > ARENA_BLOCK_MIN ? size : ARENA_BLOCK_MIN;
        block = malloc(sizeof *block + block_size);
        if (block == NULL)
            return NULL;
        block->next = arena->blocks;
        block->size = block_size;
        block->used = 0;
        arena->blocks = block;
    }
    assert(block->used % ARENA_ALIGN == 0);
    void *p = block->data + block->used;
    block->used += size;
    assert(block->used <= block->size);
    assert((uintptr_t)p % ARENA_ALIGN == 0);
    return p;
}

void *arena_alloc(struct arena *arena, size_t size)
{
    void *p = arena_alloc_uninit(arena, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void arena_reset(struct arena *arena)
{
    struct arena_block *kept = NULL;
    while (arena->blocks != NULL) {
        struct arena_block *block = arena->blocks;
        arena->blocks = block->next;
        if (kept == NULL && block->size <= ARENA_BLOCK_KEEP_BYTES) {
            kept = block;
        } else {
            free(block);
        }
    }
    if (kept != NULL) {
        kept->next = NULL;
        kept->used = 0;
    }
    arena->blocks = kept;
    arena->used = 0;
}

void arena_free(struct arena *arena)
{
    while (arena->blocks != NULL) {
        struct arena_block *next = arena->blocks->next;
        free(arena->blocks);
        arena->blocks = next;
    }
    arena->used = 0;
}
