/* Holds of the memory backend: a pool of fixed 64-byte records in one
 * array grown in chunks (no malloc per hold), and per limit an
 * expiry-ordered set of them: a list for the in-order common case plus a
 * binary min-heap for the rest. */
#include "mem_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- pool ---------------------------------------------------------------- */

#define POOL_BYTES_MAX ((size_t)MEM_HOLDS_MAX * sizeof(struct mem_hold))
#define CHUNK_BYTES ((size_t)MEM_HOLD_CHUNK_SIZE * sizeof(struct mem_hold))

void mem_hold_pool_free(struct mem_hold_pool *pool)
{
    if (pool->holds != NULL)
        munmap(pool->holds, POOL_BYTES_MAX);
    memset(pool, 0, sizeof *pool);
    pool->free_head = MEM_HOLD_NONE;
}

static int pool_grow(struct mem_hold_pool *pool)
{
    if (pool->chunk_count == MEM_HOLD_CHUNKS_MAX)
        return -1;
    if (pool->holds == NULL) {
        /* Address space only: nothing is committed until made writable. */
        void *space = mmap(NULL, POOL_BYTES_MAX, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (space == MAP_FAILED)
            return -1;
        pool->holds = space;
    }
    struct mem_hold *chunk = pool->holds + ((size_t)pool->chunk_count << MEM_HOLD_CHUNK_SHIFT);
    if (mprotect(chunk, CHUNK_BYTES, PROT_READ | PROT_WRITE) != 0)
        return -1; /* out of memory (the commit limit) */
    uint32_t base = pool->chunk_count << MEM_HOLD_CHUNK_SHIFT;
    /* Fresh pages are zero. Thread the new holds onto the free list so they
     * are used in order. */
    for (uint32_t i = 0; i < MEM_HOLD_CHUNK_SIZE; i++) {
        chunk[i].state = MEM_HOLD_FREE;
        chunk[i].next = i + 1 < MEM_HOLD_CHUNK_SIZE ? base + i + 1 : pool->free_head;
    }
    pool->chunk_count++;
    pool->free_head = base;
    pool->free_count += MEM_HOLD_CHUNK_SIZE;
    /* Every hold of the usable chunks is either free or live. */
    assert(pool->free_count + pool->live_count == pool->chunk_count << MEM_HOLD_CHUNK_SHIFT);
    return 0;
}

int mem_hold_pool_ensure(struct mem_hold_pool *pool, uint32_t count)
{
    while (pool->free_count < count) {
        if (pool_grow(pool) != 0)
            return -1;
    }
    return 0;
}

/* ---- heap of out-of-order holds ------------------------------------------ */

static void heap_place(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t i,
                       struct mem_heap_entry entry)
{
    set->heap[i] = entry;
    mem_hold_get(pool, entry.hold_id)->heap_index = i;
}

static void heap_sift_up(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t i)
{
    struct mem_heap_entry entry = set->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (set->heap[parent].expires_at_ms <= entry.expires_at_ms)
            break;
        heap_place(pool, set, i, set->heap[parent]);
        i = parent;
    }
    assert(i == 0 || set->heap[(i - 1) / 2].expires_at_ms <= entry.expires_at_ms);
    heap_place(pool, set, i, entry);
}

/* Sifting down an entry expiring at expires_at_ms, now at i of a min-heap
 * of count entries: the child that moves up into i (the earlier of the two,
 * if it expires before the entry), or UINT32_MAX when the entry stays at i.
 * Both heaps of this file, the set's and a walk's, sift down with it. */
static uint32_t heap_child_before(const struct mem_heap_entry *heap, uint32_t count, uint32_t i,
                                  int64_t expires_at_ms)
{
    uint32_t child = 2 * i + 1;
    if (child >= count)
        return UINT32_MAX;
    if (child + 1 < count && heap[child + 1].expires_at_ms < heap[child].expires_at_ms)
        child++;
    return heap[child].expires_at_ms < expires_at_ms ? child : UINT32_MAX;
}

static void heap_sift_down(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t i)
{
    struct mem_heap_entry entry = set->heap[i];
    uint32_t child;
    while ((child = heap_child_before(set->heap, set->heap_count, i, entry.expires_at_ms)) !=
           UINT32_MAX) {
        heap_place(pool, set, i, set->heap[child]);
        i = child;
    }
    assert(2 * i + 1 >= set->heap_count ||
           set->heap[2 * i + 1].expires_at_ms >= entry.expires_at_ms);
    heap_place(pool, set, i, entry);
}

void mem_hold_heap_push(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t id)
{
    assert(set->heap_count < set->heap_capacity);
    struct mem_hold *hold = mem_hold_get(pool, id);
    set->heap[set->heap_count] = (struct mem_heap_entry){hold->expires_at_ms, id};
    heap_sift_up(pool, set, set->heap_count++);
}

void mem_hold_heap_remove(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t i)
{
    assert(i < set->heap_count);
    set->heap_count--;
    if (i == set->heap_count)
        return;
    set->heap[i] = set->heap[set->heap_count];
    mem_hold_get(pool, set->heap[i].hold_id)->heap_index = i;
    if (i > 0 && set->heap[(i - 1) / 2].expires_at_ms > set->heap[i].expires_at_ms)
        heap_sift_up(pool, set, i);
    else
        heap_sift_down(pool, set, i);
}

/* ---- the set ------------------------------------------------------------- */

void mem_hold_set_init(struct mem_hold_set *set)
{
    memset(set, 0, sizeof *set);
    set->head = MEM_HOLD_NONE;
    set->tail = MEM_HOLD_NONE;
    set->expires_at_ms_max = INT64_MIN;
}

void mem_hold_set_free(struct mem_hold_set *set)
{
    free(set->heap);
    mem_hold_set_init(set);
}

int mem_hold_set_ensure(struct mem_hold_set *set)
{
    if (set->heap_count < set->heap_capacity)
        return 0;
    uint32_t capacity = set->heap_capacity == 0 ? 16 : set->heap_capacity * 2;
    if (capacity > MEM_HOLDS_MAX)
        return -1;
    struct mem_heap_entry *heap = realloc(set->heap, capacity * sizeof *heap);
    if (heap == NULL)
        return -1;
    set->heap = heap;
    set->heap_capacity = capacity;
    return 0;
}

/* Best-first walk of the heap: a small min-heap (scratch) of the heap
 * positions whose parents were visited yields the heap's holds in expiry
 * order; it never holds more than one entry per visited hold plus one. */
struct heap_walk {
    const struct mem_hold_set *set;
    struct mem_heap_entry *open; /* hold_id is a position in set->heap here */
    uint32_t open_count;
};

static void walk_open_push(struct heap_walk *w, uint32_t position)
{
    if (position >= w->set->heap_count)
        return;
    struct mem_heap_entry entry = {w->set->heap[position].expires_at_ms, position};
    /* At most one open position per visited hold plus one: scratch holds
     * MEM_RETRY_WALK_HOLDS_MAX + 1. */
    assert(w->open_count <= MEM_RETRY_WALK_HOLDS_MAX);
    uint32_t i = w->open_count++;
    while (i > 0 && w->open[(i - 1) / 2].expires_at_ms > entry.expires_at_ms) {
        w->open[i] = w->open[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->open[i] = entry;
}

/* Takes the earliest open position and opens its children. */
static uint32_t walk_open_pop(struct heap_walk *w)
{
    assert(w->open_count > 0);
    uint32_t position = w->open[0].hold_id;
    struct mem_heap_entry last = w->open[--w->open_count];
    uint32_t i = 0, child;
    while ((child = heap_child_before(w->open, w->open_count, i, last.expires_at_ms)) !=
           UINT32_MAX) {
        w->open[i] = w->open[child];
        i = child;
    }
    if (w->open_count > 0)
        w->open[i] = last;
    walk_open_push(w, 2 * position + 1);
    walk_open_push(w, 2 * position + 2);
    return position;
}

/* The walk's next hold in expiry order, the earlier of the list's next and
 * the heap's earliest open position; NULL when both are done. */
static const struct mem_hold *walk_next(const struct mem_hold_pool *pool, struct heap_walk *w,
                                        uint32_t *list_id)
{
    if (*list_id == MEM_HOLD_NONE && w->open_count == 0)
        return NULL;
    const struct mem_hold *list_hold =
        *list_id == MEM_HOLD_NONE ? NULL : mem_hold_get(pool, *list_id);
    if (list_hold != NULL &&
        (w->open_count == 0 || list_hold->expires_at_ms <= w->open[0].expires_at_ms)) {
        *list_id = list_hold->next;
        return list_hold;
    }
    return mem_hold_get(pool, w->set->heap[walk_open_pop(w)].hold_id);
}

enum mem_walk_result mem_hold_set_walk(const struct mem_hold_pool *pool,
                                       const struct mem_hold_set *set, uint64_t need,
                                       int64_t period_start_ms, struct mem_heap_entry *scratch,
                                       int64_t *expires_at_ms)
{
    assert(need > 0);
    struct heap_walk w = {.set = set, .open = scratch, .open_count = 0};
    walk_open_push(&w, 0);
    uint32_t list_id = set->head;
    uint64_t sum = 0;
    for (uint32_t visited = 0; visited < MEM_RETRY_WALK_HOLDS_MAX; visited++) {
        const struct mem_hold *hold = walk_next(pool, &w, &list_id);
        if (hold == NULL)
            return MEM_WALK_EXHAUSTED;
        if (period_start_ms != INT64_MIN && hold->period_start_ms != period_start_ms)
            continue;
        if (hold->state != MEM_HOLD_RESERVED && hold->state != MEM_HOLD_USED)
            continue;
        sum = sum > UINT64_MAX - hold->amount ? UINT64_MAX : sum + hold->amount;
        if (sum >= need) {
            *expires_at_ms = hold->expires_at_ms;
            return MEM_WALK_FOUND;
        }
    }
    return MEM_WALK_BOUNDED;
}

bool mem_hold_set_each(const struct mem_hold_pool *pool, const struct mem_hold_set *set,
                       uint32_t visits_max, struct mem_heap_entry *scratch,
                       bool (*visit)(void *context, const struct mem_hold *hold), void *context)
{
    assert(visits_max <= MEM_RETRY_WALK_HOLDS_MAX);
    struct heap_walk w = {.set = set, .open = scratch, .open_count = 0};
    walk_open_push(&w, 0);
    uint32_t list_id = set->head;
    for (uint32_t visited = 0; visited < visits_max; visited++) {
        const struct mem_hold *hold = walk_next(pool, &w, &list_id);
        if (hold == NULL || !visit(context, hold))
            return true;
    }
    return list_id == MEM_HOLD_NONE && w.open_count == 0;
}

static void add_to(uint64_t *sum, uint64_t amount)
{
    *sum = *sum > UINT64_MAX - amount ? UINT64_MAX : *sum + amount;
}

struct check_sums {
    uint64_t reserved;
    uint64_t used;
    uint64_t debt;
    uint64_t reserved_count;
};

static void check_hold(const struct mem_hold *hold, const struct mem_hold_set *set,
                       const struct mem_limit *limit, struct check_sums *sums)
{
    assert(hold->limit == limit);
    assert(hold->state == MEM_HOLD_RESERVED || hold->state == MEM_HOLD_USED);
    assert(hold->expires_at_ms <= set->expires_at_ms_max);
    assert(hold->caller_id <= MEM_CALLER_OTHERS);
    if (hold->state == MEM_HOLD_RESERVED) {
        add_to(&sums->reserved, hold->amount);
        sums->reserved_count++;
    } else {
        add_to(&sums->used, hold->amount);
    }
    add_to(&sums->debt, hold->debt);
}

void mem_hold_set_check(const struct mem_hold_pool *pool, const struct mem_hold_set *set,
                        const struct mem_limit *limit, uint64_t *reserved, uint64_t *used,
                        uint64_t *debt, uint64_t *reserved_count)
{
    struct check_sums sums = {0};
    uint32_t list_count = 0;
    uint32_t previous = MEM_HOLD_NONE;
    for (uint32_t id = set->head; id != MEM_HOLD_NONE; id = mem_hold_get(pool, id)->next) {
        const struct mem_hold *hold = mem_hold_get(pool, id);
        assert(hold->heap_index == MEM_HOLD_IN_LIST);
        assert(previous == MEM_HOLD_NONE || hold->previous == previous); /* the head's is stale */
        if (previous != MEM_HOLD_NONE)
            assert(mem_hold_get(pool, previous)->expires_at_ms <= hold->expires_at_ms);
        check_hold(hold, set, limit, &sums);
        previous = id;
        list_count++;
        assert(list_count <= set->count);
    }
    assert(set->tail == previous);
    for (uint32_t i = 0; i < set->heap_count; i++) {
        const struct mem_hold *hold = mem_hold_get(pool, set->heap[i].hold_id);
        assert(hold->heap_index == i);
        assert(hold->expires_at_ms == set->heap[i].expires_at_ms);
        if (i > 0)
            assert(set->heap[(i - 1) / 2].expires_at_ms <= set->heap[i].expires_at_ms);
        check_hold(hold, set, limit, &sums);
    }
    assert(list_count + set->heap_count == set->count);
    *reserved = sums.reserved;
    *used = sums.used;
    *debt = sums.debt;
    *reserved_count = sums.reserved_count;
}
