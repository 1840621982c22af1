/* Internal types of the memory backend, shared by the memory*.c files only:
 * the hold pool and per-limit expiry-ordered hold sets, limits, leases and
 * the two hash tables. Everything here runs under the backend mutex. */
#ifndef LLMLIMIT_BACKEND_MEMORY_INTERNAL_H
#define LLMLIMIT_BACKEND_MEMORY_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "mem_bounds.h"
#include "util/slab.h"

#define MEM_HOLD_NONE UINT32_MAX
#define MEM_HOLD_CHUNK_SHIFT 16
#define MEM_HOLD_CHUNK_SIZE (UINT32_C(1) << MEM_HOLD_CHUNK_SHIFT)
#define MEM_HOLD_CHUNKS_MAX (MEM_HOLDS_MAX / MEM_HOLD_CHUNK_SIZE)

/* ---- hash tables (mem_table.c) ---------------------------------------- */

/* First member of every object a table indexes; the key bytes live in the
 * object and outlive its table entry. */
struct mem_node {
    uint64_t hash;
    const char *key;
    uint32_t key_length;
};

struct mem_table_entry {
    uint64_t hash;
    struct mem_node *node; /* NULL: empty slot */
};

/* Open addressing with linear probing and backward-shift deletion; the load
 * factor stays at most 1/2. */
struct mem_table {
    struct mem_table_entry *entries;
    uint32_t capacity; /* a power of two */
    uint32_t count;
    uint32_t capacity_max; /* growth stops here (insert then fails) */
};

uint64_t mem_hash(const char *bytes, size_t length);
/* 0, or -1 when out of memory. capacity_max is a power of two >= 16. */
int mem_table_init(struct mem_table *table, uint32_t capacity, uint32_t capacity_max);
void mem_table_free(struct mem_table *table);
struct mem_node *mem_table_find(const struct mem_table *table, uint64_t hash, const char *key,
                                uint32_t key_length);
/* The key must not be present. 0, or -1 if the table cannot grow. */
int mem_table_insert(struct mem_table *table, struct mem_node *node);
/* The node must be present. The _hashed form takes its hash, so the node
 * itself is never loaded (only compared by address). */
void mem_table_remove(struct mem_table *table, struct mem_node *node);
void mem_table_remove_hashed(struct mem_table *table, struct mem_node *node, uint64_t hash);

/* ---- holds (mem_holds.c) ---------------------------------------------- */

enum mem_hold_state {
    MEM_HOLD_FREE = 0,
    MEM_HOLD_RESERVED = 1, /* held by a lease not yet completed */
    MEM_HOLD_USED = 2,     /* rolling: completed, counts until the window ends */
};

struct mem_limit;

/* One requirement of one lease on one limit. One cache line. */
struct mem_hold {
    uint64_t amount;
    uint64_t debt; /* rolling overage debt that expires with this hold */
    int64_t expires_at_ms;
    int64_t period_start_ms; /* budgets: the period this hold is charged to */
    struct mem_limit *limit;
    uint32_t previous;   /* expiry list links (ids; see mem_hold_set_insert) */
    uint32_t next;       /* ... or the free list */
    uint32_t heap_index; /* MEM_HOLD_IN_LIST when in the list */
    uint32_t generation; /* bumped on free: stale lease references see it */
    uint8_t state;
    uint16_t caller_id; /* its lease's caller (mem_callers.c) */
} __attribute__((aligned(64)));

#define MEM_HOLD_IN_LIST UINT32_MAX

/* Every hold of the backend, in one array so a hold is base + id: address
 * space for MEM_HOLDS_MAX holds is reserved at the first growth (no
 * memory behind it) and made usable a chunk at a time, so ids and pointers
 * stay valid as the pool grows. */
struct mem_hold_pool {
    struct mem_hold *holds; /* NULL until the first growth */
    uint32_t chunk_count;   /* chunks of MEM_HOLD_CHUNK_SIZE holds usable */
    uint32_t free_head;
    uint32_t free_count;
    uint32_t live_count;
};

struct mem_heap_entry {
    int64_t expires_at_ms;
    uint32_t hold_id;
};

/* The holds of one limit in expiry order. Each limit has one hold duration
 * and time only moves forward, so new holds almost always expire last: they
 * go to the tail of a doubly linked list (O(1) insert, remove and pop). A
 * hold that would expire before the tail (the clock stepped back, or the
 * window was shortened) goes to a binary min-heap instead. The earliest
 * expiry is the smaller of the list head and the heap top. */
struct mem_hold_set {
    uint32_t head;
    uint32_t tail;
    uint32_t count; /* list + heap */
    struct mem_heap_entry *heap;
    uint32_t heap_count;
    uint32_t heap_capacity;
    int64_t expires_at_ms_max; /* an upper bound of every expiry in the set */
};

static inline struct mem_hold *mem_hold_get(const struct mem_hold_pool *pool, uint32_t id)
{
    return &pool->holds[id];
}

void mem_hold_pool_free(struct mem_hold_pool *pool);
/* Makes sure count more holds can be allocated. 0, or -1 (bound or memory). */
int mem_hold_pool_ensure(struct mem_hold_pool *pool, uint32_t count);

/* Needs a prior successful mem_hold_pool_ensure. */
static inline uint32_t mem_hold_alloc(struct mem_hold_pool *pool)
{
    assert(pool->free_count > 0);
    uint32_t id = pool->free_head;
    struct mem_hold *hold = mem_hold_get(pool, id);
    assert(hold->state == MEM_HOLD_FREE);
    pool->free_head = hold->next;
    pool->free_count--;
    pool->live_count++;
    hold->debt = 0;
    hold->period_start_ms = 0;
    return id;
}

static inline void mem_hold_release(struct mem_hold_pool *pool, uint32_t id)
{
    struct mem_hold *hold = mem_hold_get(pool, id);
    assert(hold->state != MEM_HOLD_FREE);
    hold->state = MEM_HOLD_FREE;
    hold->generation++;
    hold->limit = NULL;
    hold->next = pool->free_head;
    pool->free_head = id;
    pool->free_count++;
    assert(pool->live_count > 0);
    pool->live_count--;
}

void mem_hold_set_init(struct mem_hold_set *set);
void mem_hold_set_free(struct mem_hold_set *set);
/* Makes sure one more hold can be inserted whatever its expiry. 0 or -1. */
int mem_hold_set_ensure(struct mem_hold_set *set);
/* The heap half of the set (mem_holds.c). */
void mem_hold_heap_push(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t id);
void mem_hold_heap_remove(const struct mem_hold_pool *pool, struct mem_hold_set *set, uint32_t i);

/* The list keeps its invariant cheap to maintain: every hold's `next` is
 * right, and every hold's `previous` but the head's (which is never read).
 * So expiring the head, the common case, writes only the head itself and
 * never loads its successor. */
static inline void mem_hold_set_insert(struct mem_hold_pool *pool, struct mem_hold_set *set,
                                       uint32_t id)
{
    struct mem_hold *hold = mem_hold_get(pool, id);
    if (hold->expires_at_ms > set->expires_at_ms_max)
        set->expires_at_ms_max = hold->expires_at_ms;
    set->count++;
    if (set->tail != MEM_HOLD_NONE &&
        mem_hold_get(pool, set->tail)->expires_at_ms > hold->expires_at_ms) {
        mem_hold_heap_push(pool, set, id);
        return;
    }
    hold->heap_index = MEM_HOLD_IN_LIST;
    hold->previous = set->tail;
    hold->next = MEM_HOLD_NONE;
    if (set->tail == MEM_HOLD_NONE)
        set->head = id;
    else
        mem_hold_get(pool, set->tail)->next = id;
    set->tail = id;
}

static inline void mem_hold_set_remove(struct mem_hold_pool *pool, struct mem_hold_set *set,
                                       uint32_t id)
{
    struct mem_hold *hold = mem_hold_get(pool, id);
    assert(set->count > 0);
    set->count--;
    if (set->count == 0)
        set->expires_at_ms_max = INT64_MIN;
    if (hold->heap_index != MEM_HOLD_IN_LIST) {
        assert(set->heap[hold->heap_index].hold_id == id);
        mem_hold_heap_remove(pool, set, hold->heap_index);
        return;
    }
    if (set->head == id) {
        set->head = hold->next; /* its previous link goes stale, unread */
        if (hold->next == MEM_HOLD_NONE)
            set->tail = MEM_HOLD_NONE;
        return;
    }
    uint32_t previous = hold->previous;
    assert(previous != MEM_HOLD_NONE);
    mem_hold_get(pool, previous)->next = hold->next;
    if (hold->next == MEM_HOLD_NONE)
        set->tail = previous;
    else
        mem_hold_get(pool, hold->next)->previous = previous;
}

/* The hold that expires first, or MEM_HOLD_NONE. */
static inline uint32_t mem_hold_set_first(const struct mem_hold_pool *pool,
                                          const struct mem_hold_set *set)
{
    if (set->heap_count == 0)
        return set->head;
    if (set->head == MEM_HOLD_NONE)
        return set->heap[0].hold_id;
    if (set->heap[0].expires_at_ms < mem_hold_get(pool, set->head)->expires_at_ms)
        return set->heap[0].hold_id;
    return set->head;
}

/* Visits holds in expiry order, summing `amount` (of holds whose
 * period_start_ms equals period_start_ms, or all when it is INT64_MIN) until
 * the sum reaches need. Returns MEM_WALK_FOUND with the expiry of the hold that
 * reached it, MEM_WALK_EXHAUSTED if every hold was visited short of need, or
 * MEM_WALK_BOUNDED after MEM_RETRY_WALK_HOLDS_MAX holds. scratch has room for
 * MEM_RETRY_WALK_HOLDS_MAX + 1 entries. */
enum mem_walk_result { MEM_WALK_FOUND, MEM_WALK_EXHAUSTED, MEM_WALK_BOUNDED };
enum mem_walk_result mem_hold_set_walk(const struct mem_hold_pool *pool,
                                       const struct mem_hold_set *set, uint64_t need,
                                       int64_t period_start_ms, struct mem_heap_entry *scratch,
                                       int64_t *expires_at_ms);
/* Visits holds in expiry order until visit returns false or visits_max
 * holds were visited (at most MEM_RETRY_WALK_HOLDS_MAX; scratch as for
 * mem_hold_set_walk). Returns false when it stopped at visits_max with
 * holds left unvisited. */
bool mem_hold_set_each(const struct mem_hold_pool *pool, const struct mem_hold_set *set,
                       uint32_t visits_max, struct mem_heap_entry *scratch,
                       bool (*visit)(void *context, const struct mem_hold *hold), void *context);
/* Checks list order and links, heap order and indexes, and the count;
 * returns the sums of reserved, used and debt amounts and the number of
 * RESERVED holds. Asserts. */
void mem_hold_set_check(const struct mem_hold_pool *pool, const struct mem_hold_set *set,
                        const struct mem_limit *limit, uint64_t *reserved, uint64_t *used,
                        uint64_t *debt, uint64_t *reserved_count);

/* ---- limits (mem_limits.c) -------------------------------------------- */

/* What one caller holds and spent in one budget period: an entry of the
 * period's open-addressing table keyed by caller id + 1 (0: empty). */
struct mem_caller_spend {
    uint32_t key;
    uint64_t reserved;
    uint64_t used;
    uint64_t debt;
    uint64_t calls; /* leases completed */
};

struct mem_period {
    int64_t start_ms;
    int64_t end_ms;
    uint64_t committed;
    uint64_t debt;
    uint64_t reserved; /* live holds reserved in this period */
    /* The same three split by caller (GET /v1/usage/{key}?group_by=caller):
     * an entry per caller that reserved in the period, never removed while
     * the period is kept; at most MEM_CALLERS_MAX + 2 entries. */
    struct mem_caller_spend *callers;
    uint32_t caller_count;
    uint32_t caller_capacity; /* a power of two, or 0 */
};

struct mem_limit {
    struct mem_node node; /* key points into state.definition.key */
    /* hot: read by every reserve */
    enum limit_kind kind;
    enum limit_status status;
    uint64_t capacity; /* in force */
    int64_t hold_duration_ms;
    uint64_t reserved;       /* RESERVED holds (budgets count them per period instead) */
    uint64_t reserved_holds; /* how many holds are RESERVED (every period) */
    uint64_t used;           /* rolling: USED holds */
    uint64_t debt;           /* rolling: debt riding on live holds; saturates */
    struct mem_hold_set holds;
    bool deleted; /* hidden from new reserves, list, get, usage */
    /* The lease ring's tail when it was deleted: only leases before it can
     * point here, so it can be freed once they and its holds are gone. */
    uint64_t deleted_at_ring_position;
    /* budgets: a ring of periods, newest at period_newest */
    uint32_t period_newest;
    uint32_t period_count;
    struct mem_period periods[MEM_BUDGET_PERIODS_KEPT];
    struct mem_limit *next_retired; /* replaced after delete, kept until unused */
    /* cold */
    struct limit_state state;
};

/* ---- leases (mem_leases.c) -------------------------------------------- */

/* The values of enum lease_view_state (backend.h), so that a lease's state
 * is its view's. */
enum mem_lease_state {
    MEM_LEASE_ACTIVE = LEASE_VIEW_ALLOWED,
    MEM_LEASE_COMPLETED = LEASE_VIEW_COMPLETED,
    MEM_LEASE_RELEASED = LEASE_VIEW_RELEASED,
    MEM_LEASE_DENIED = LEASE_VIEW_DENIED,
};

struct mem_lease_item {
    struct mem_limit *limit;
    uint64_t amount;
    int64_t period_start_ms; /* budgets */
    uint32_t hold_id;
    uint32_t hold_generation;
};

/* A lease takes 64 + 32 * items + id length + 1 bytes, rounded up to one of
 * MEM_LEASE_SIZE_CLASSES sizes (class_bytes in mem_leases.c): the common 1-4
 * item lease with a short id fits 3 or 4 cache lines. */
#define MEM_LEASE_SIZE_CLASSES 9
#define MEM_LEASE_SLAB_BYTES (1024 * 1024) /* leases are carved from slabs this big */

struct mem_lease_slot {
    struct mem_lease *lease; /* NULL: a hole */
    uint64_t hash;           /* of its id, to find its table entry without loading it */
};

/* Laid out to touch few cache lines: a 64-byte header, the items, then the
 * id right after the items in use (not after the whole size class). */
struct mem_lease {
    struct mem_node node;   /* key points at the id after the items */
    uint64_t ring_position; /* in the cache */
    int64_t reserved_at_ms;
    union {
        int64_t expires_at_ms;  /* allowed */
        int64_t retry_after_ms; /* denied: a retry gets the same answer */
    };
    uint64_t denied_items; /* bit i: items[i] did not fit */
    uint8_t state;
    uint8_t size_class;
    uint8_t item_count;
    uint16_t caller_id;
    struct mem_lease_item items[];
};

/* The id of a lease, stored after its items. */
static inline char *mem_lease_id(struct mem_lease *lease)
{
    return (char *)&lease->items[lease->item_count];
}

/* A lease id with its hash, computed once per call: the cache's functions
 * take this, so the hash they use always belongs to the id. */
struct mem_lease_key {
    const char *id;
    uint32_t length;
    uint64_t hash;
};

static inline struct mem_lease_key mem_lease_key(const char *id, uint32_t length)
{
    return (struct mem_lease_key){id, length, mem_hash(id, length)};
}

/* ---- the backend --------------------------------------------------------- */

/* Limits found by key, remembered across calls: most reserves name the same
 * few keys, and a hit costs a key compare instead of hashing the key and
 * probing the table. Direct-mapped; an entry is good only while
 * limits_version (bumped on every insert into or removal from the limits
 * table) is what it was when the entry was made, so a limit it names is
 * always still in the table, hence alive. */
#define MEM_LIMIT_MEMO_SLOTS 64

struct mem_limit_memo {
    struct mem_limit *limit;
    uint64_t version;
};

/* ---- callers (mem_callers.c) -------------------------------------------- */

/* Callers are interned once and kept until the backend closes: a hold
 * carries its caller as a 16-bit id. Id 0 is "no caller" (""); callers past
 * MEM_CALLERS_MAX share MEM_CALLER_OTHERS. */
#define MEM_CALLER_NONE 0
#define MEM_CALLER_OTHERS (MEM_CALLERS_MAX + 1)
#define MEM_CALLER_OTHERS_NAME "(other callers)"
_Static_assert(MEM_CALLER_OTHERS <= UINT16_MAX, "caller ids fit a hold's 16 bits");

struct mem_caller {
    struct mem_node node; /* key points at name */
    uint16_t id;
    char name[];
};

struct mem_callers {
    struct mem_table table;
    struct mem_caller **by_id; /* [id], ids 1..count */
    uint32_t count;
    uint32_t capacity;
};

struct mem_backend {
    struct backend base; /* first: the ops see a struct backend */
    pthread_mutex_t mutex;
    struct clock *clock;
    uint32_t lease_cache_entries;
    int64_t lease_retention_ms;
    int64_t concurrency_poll_ms;
    int64_t decrease_retry_ms;
    uint64_t random_state; /* retry jitter */

    struct mem_hold_pool pool;
    struct mem_table limits; /* live and deleted limits by key */
    uint64_t limits_version; /* see struct mem_limit_memo; starts at 1 */
    struct mem_limit_memo limit_memo[MEM_LIMIT_MEMO_SLOTS];
    uint32_t live_limit_count; /* not deleted */
    struct mem_limit *retired; /* deleted, then replaced by another kind */

    struct mem_table leases;
    /* Cache order, oldest at ring_head: positions count up forever and
     * index the ring modulo its size. A lease dropped out of order leaves
     * a hole (lease NULL) that the head skips. The ring has twice the cache
     * bound of room, so holes never make the cache evict early. */
    struct mem_lease_slot *ring;
    uint64_t ring_mask;
    uint64_t ring_head;
    uint64_t ring_tail;
    uint32_t lease_count;
    struct slab_pool lease_pool; /* every lease lives in one of its slabs */

    struct mem_heap_entry *walk_scratch;
    struct mem_callers callers;

    uint64_t overage_denied;
    uint64_t expired_holds;

    /* Told of freed capacity (backend.h, watch), under the mutex. */
    struct backend_watch watch;
    /* A complete or release is under way (memory.c): the watch may claim
     * one waiter for the room it frees (mem_limit_notify), reserved before
     * the lock is let go; claim_cookie is set from the claim to that
     * reserve. */
    bool claim_open;
    const struct reserve_request *claim_request;
    struct reserve_result *claim_result;
    void *claim_cookie;
};

/* mem_limits.c */
/* The limit (live or deleted) with this key, or NULL; mem_limit_find first
 * tries the memo inline, then the table. */
struct mem_limit *mem_limit_find_slow(struct mem_backend *b, const char *key, uint32_t key_length,
                                      struct mem_limit_memo *memo);
uint32_t mem_limit_memo_slot(const char *key, uint32_t key_length);

static inline struct mem_limit *mem_limit_find(struct mem_backend *b, const char *key,
                                               uint32_t key_length)
{
    struct mem_limit_memo *memo = &b->limit_memo[mem_limit_memo_slot(key, key_length)];
    if (memo->version == b->limits_version && memo->limit->node.key_length == key_length &&
        memcmp(memo->limit->node.key, key, key_length) == 0)
        return memo->limit;
    return mem_limit_find_slow(b, key, key_length, memo);
}
/* Expires every hold due at now_ms; budgets also start the period of now. */
void mem_limit_expire(struct mem_backend *b, struct mem_limit *limit, int64_t now_ms);
/* The budget period containing now (created, and older ones dropped, as
 * needed). */
struct mem_period *mem_limit_period_now(struct mem_limit *limit, int64_t now_ms);
/* The kept period starting at start_ms, or NULL. */
struct mem_period *mem_limit_period_find(struct mem_limit *limit, int64_t start_ms);
/* Takes one hold out of its set and its counters and frees it. */
void mem_limit_drop_hold(struct mem_backend *b, struct mem_limit *limit, uint32_t id);
/* Applies a pending decrease once the free capacity covers it. true if applied. */
bool mem_limit_try_decrease(struct mem_limit *limit);
/* Frees a deleted limit no lease or hold refers to (mem_limit_unused). */
void mem_limit_destroy(struct mem_backend *b, struct mem_limit *limit);
bool mem_limit_unused(const struct mem_backend *b, const struct mem_limit *limit);
/* Full invariant check (sums, order); asserts. */
void mem_limit_check(struct mem_backend *b, struct mem_limit *limit);
/* Tells the listener (if any) that capacity may have come back on the
 * limit, with what it has left now. */
void mem_limit_notify(struct mem_backend *b, struct mem_limit *limit, int64_t now_ms);

/* The admin ops (backend.h), under the lock; definitions and states come
 * checked by backend.c. */
enum backend_admin_result mem_put_limit(struct mem_backend *b,
                                        const struct limit_definition *definition,
                                        struct limit_state *state_out);
enum backend_admin_result mem_restore_limit(struct mem_backend *b, const struct limit_state *state);
enum backend_admin_result mem_delete_limit(struct mem_backend *b, const char *key);
enum backend_admin_result mem_get_limit(struct mem_backend *b, const char *key,
                                        struct limit_state *out);
enum backend_admin_result mem_list_limits(struct mem_backend *b, struct limit_state **out,
                                          size_t *count);
enum backend_admin_result mem_list_names(struct mem_backend *b, struct limit_name **out,
                                         size_t *count);
enum backend_admin_result mem_usage(struct mem_backend *b, const char *key, int64_t at_unix_ms,
                                    struct limit_usage *out);
/* Expires holds of every limit, applies decreases, frees unused deleted limits. */
void mem_limits_tick(struct mem_backend *b, int64_t now_ms, bool *limits_changed);
void mem_limits_free_all(struct mem_backend *b);

/* The same for every limit of a lease; inline, so that a complete or
 * release nobody listens to costs one load. */
static inline void mem_lease_notify(struct mem_backend *b, const struct mem_lease *lease,
                                    int64_t now_ms)
{
    if (!backend_watch_wanted(&b->watch))
        return;
    for (uint32_t j = 0; j < lease->item_count; j++)
        mem_limit_notify(b, lease->items[j].limit, now_ms);
}

/* mem_callers.c */
int mem_callers_init(struct mem_callers *callers);
void mem_callers_free(struct mem_callers *callers);
/* The id of a caller (NULL or "": MEM_CALLER_NONE), interned on first
 * sight; MEM_CALLER_OTHERS past the bound or when out of memory (only the
 * attribution to a caller is lost, never an amount). */
uint16_t mem_caller_intern(struct mem_callers *callers, const char *name, uint32_t length);
/* The name of an id (static or interned storage, valid until close). */
const char *mem_caller_name(const struct mem_callers *callers, uint16_t id);
/* The period's entry for a caller: created (NULL when out of memory), or
 * found (NULL when the caller never reserved in the period). */
struct mem_caller_spend *mem_period_spend_add(struct mem_period *period, uint16_t caller_id);
struct mem_caller_spend *mem_period_spend_find(const struct mem_period *period, uint16_t caller_id);
void mem_period_spend_free(struct mem_period *period);

/* mem_console.c: the console ops (limits_report, holds_scan) and
 * usage_by_caller, each under the lock. */
enum backend_admin_result mem_limits_report(struct mem_backend *b, const struct limits_query *query,
                                            struct limit_report **out, size_t *count, bool *more);
enum backend_admin_result mem_holds_scan(struct mem_backend *b, const char *key, uint64_t max_holds,
                                         hold_visit_fn visit, void *context, bool *complete);
enum backend_admin_result mem_usage_by_caller(struct mem_backend *b, const char *key,
                                              int64_t at_unix_ms, struct caller_usage **out,
                                              size_t *count);

/* mem_leases.c */
/* Starts loading what a reserve of this id will touch in the cache: its
 * table slot and, when the cache is full, the oldest lease (its table slot,
 * and the lease itself, which the next reserve of its size reuses). */
void mem_leases_prefetch(const struct mem_backend *b, uint64_t hash);
/* The lease with this id, or NULL (also when past its retention, then dropped). */
struct mem_lease *mem_lease_find(struct mem_backend *b, const struct mem_lease_key *key,
                                 int64_t now_ms);
/* A new lease not yet in the cache, with room for item_count items and an
 * id of id_length bytes, or NULL when out of memory. */
struct mem_lease *mem_lease_alloc(struct mem_backend *b, uint32_t item_count, uint32_t id_length);
/* Adds to the cache, evicting the oldest lease when the cache is full. */
void mem_lease_insert(struct mem_backend *b, struct mem_lease *lease,
                      const struct mem_lease_key *key, int64_t reserved_at_ms);
/* Frees a lease not in the cache. */
void mem_lease_discard(struct mem_backend *b, struct mem_lease *lease);
/* Drops leases past their retention. */
void mem_leases_expire(struct mem_backend *b, int64_t now_ms);
/* 0, or -1 when out of memory. */
int mem_leases_init(struct mem_backend *b, uint32_t cache_entries);
void mem_leases_free_all(struct mem_backend *b);

#endif
