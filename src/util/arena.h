/* Per-request memory: a bump allocator that starts on storage inside the
 * exchange and chains heap blocks when that is full; everything is dropped at
 * once when the request ends. The parsed JSON document and the arrays of a
 * batch live here, so the data path makes no small mallocs and frees. Not
 * thread-safe: one request, one thread at a time. */
#ifndef LLMLIMIT_UTIL_ARENA_H
#define LLMLIMIT_UTIL_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
    char *storage; /* the first block, owned by the caller */
    size_t storage_size;
    size_t used;                /* in storage */
    struct arena_block *blocks; /* heap blocks, newest first */
};

void arena_init(struct arena *arena, char *storage, size_t storage_size);
/* size bytes aligned to 16, zero-filled; NULL when the heap is out of memory.
 * Valid until arena_reset. */
void *arena_alloc(struct arena *arena, size_t size);
/* The same, not zero-filled: for memory the caller writes before reading. */
void *arena_alloc_uninit(struct arena *arena, size_t size);
/* Drops everything; the arena starts over on its storage. One heap block of
 * at most ARENA_BLOCK_KEEP_BYTES is kept for the next request, so a steady
 * stream of batches neither mallocs nor faults pages in. */
void arena_reset(struct arena *arena);
/* Frees every heap block (the arena may be used again). */
void arena_free(struct arena *arena);

#define ARENA_BLOCK_KEEP_BYTES (256 * 1024)

#endif
