/* The lease cache (docs/tigerbeetle.md "Many front ends"): memory only,
 * bounded by lease_cache_entries, least recently used first out, and entries
 * forgotten lease_retention_ms after their last use. What it forgets the
 * cluster still knows: a complete or release that misses looks the lease's
 * transfers up by their deterministic ids. Chained hash table plus an order
 * list; entries carved from slabs (util/slab.h); everything under
 * lease_lock. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/hash.h"
#include "tb_backend.h"
#include "util/queue.h"

/* Entries one insert looks at to find an idle one to evict. */
#define EVICT_SCAN_MAX 64
/* Entries one expire call looks at. */
#define EXPIRE_SCAN_MAX 100000
#define LEASE_SLAB_BYTES (1024 * 1024)
#define LEASE_SIZE_CLASSES 11

/* An entry takes its header, its holds and its id, rounded up to one of
 * these: a 1-4 hold lease with a UUID for its id fits the first four. */
static const uint32_t class_bytes[LEASE_SIZE_CLASSES] = {192,  256,  320,  384,  512, 768,
                                                         1152, 1664, 2304, 3200, 4096};
_Static_assert(sizeof(struct tb_lease) +
                       REQUIREMENTS_PER_RESERVE_MAX * sizeof(struct tb_lease_hold) +
                       LEASE_ID_LENGTH_MAX <=
                   4096,
               "the largest entry fits the last size class");

static char *lease_id(struct tb_lease *lease)
{
    return (char *)&lease->holds[lease->hold_count];
}

static size_t entry_bytes(uint32_t hold_count, uint32_t id_length)
{
    return sizeof(struct tb_lease) + hold_count * sizeof(struct tb_lease_hold) + id_length;
}

static uint64_t id_hash(const char *id, uint32_t length)
{
    uint64_t hash = hash_fnv1a(id, length);
    return hash ^ (hash >> 29);
}

int tb_leases_init(struct tb_backend *b)
{
    uint32_t buckets = TB_LEASE_BUCKETS_MIN;
    while (buckets < b->lease_cache_entries && buckets < (UINT32_C(1) << 30))
        buckets <<= 1;
    assert((buckets & (buckets - 1)) == 0); /* a mask selects the bucket */
    b->lease_buckets = calloc(buckets, sizeof *b->lease_buckets);
    if (b->lease_buckets == NULL)
        return -1;
    b->lease_bucket_mask = buckets - 1;
    slab_pool_init(&b->lease_pool, class_bytes, LEASE_SIZE_CLASSES, LEASE_SLAB_BYTES);
    return 0;
}

static void unlink_order(struct tb_backend *b, struct tb_lease *lease)
{
    /* Linked both ways: the neighbours point back at it. */
    assert(lease->older != NULL || b->oldest == lease);
    assert(lease->newer != NULL || b->newest == lease);
    assert(lease->older == NULL || lease->older->newer == lease);
    assert(lease->newer == NULL || lease->newer->older == lease);
    DLIST_REMOVE(b->oldest, b->newest, lease, older, newer);
}

static void link_newest(struct tb_backend *b, struct tb_lease *lease)
{
    DLIST_PUSH_BACK(b->oldest, b->newest, lease, older, newer);
}

static struct tb_lease **bucket_link(struct tb_backend *b, struct tb_lease *lease)
{
    struct tb_lease **link = &b->lease_buckets[lease->hash & b->lease_bucket_mask];
    while (*link != lease) {
        assert(*link != NULL);
        link = &(*link)->next_in_bucket;
    }
    return link;
}

void tb_leases_remove(struct tb_backend *b, struct tb_lease *lease)
{
    assert(!lease->busy);
    assert(lease->waiting == NULL);
    struct tb_lease **link = bucket_link(b, lease);
    *link = lease->next_in_bucket;
    unlink_order(b, lease);
    assert(b->lease_count > 0);
    b->lease_count--;
    slab_pool_give(&b->lease_pool, lease, lease->size_class);
}

static bool idle(const struct tb_lease *lease)
{
    return !lease->busy && lease->waiting == NULL;
}

struct tb_lease *tb_leases_find(struct tb_backend *b, const char *id, uint32_t id_length,
                                int64_t now_ms)
{
    assert(id_length >= 1);
    assert(id_length <= LEASE_ID_LENGTH_MAX);
    uint64_t hash = id_hash(id, id_length);
    struct tb_lease *lease = b->lease_buckets[hash & b->lease_bucket_mask];
    while (lease != NULL && !(lease->hash == hash && lease->id_length == id_length &&
                              memcmp(lease_id(lease), id, id_length) == 0))
        lease = lease->next_in_bucket;
    if (lease == NULL)
        return NULL;
    if (idle(lease) && now_ms - lease->touched_ms > b->lease_retention_ms) {
        tb_leases_remove(b, lease);
        return NULL;
    }
    lease->touched_ms = now_ms;
    unlink_order(b, lease);
    link_newest(b, lease);
    return lease;
}

static void evict_one(struct tb_backend *b)
{
    struct tb_lease *lease = b->oldest;
    for (int i = 0; lease != NULL && i < EVICT_SCAN_MAX; i++, lease = lease->newer) {
        if (idle(lease)) {
            tb_leases_remove(b, lease);
            return;
        }
    }
    /* All of the oldest are in flight: the cache runs over its bound by
     * the operations in flight, never more. */
}

struct tb_lease *tb_leases_insert(struct tb_backend *b, const char *id, uint32_t id_length,
                                  uint32_t hold_count, int64_t now_ms)
{
    assert(id_length >= 1);
    assert(id_length <= LEASE_ID_LENGTH_MAX);
    assert(hold_count <= REQUIREMENTS_PER_RESERVE_MAX);
    if (b->lease_count >= b->lease_cache_entries)
        evict_one(b);
    uint32_t size_class = slab_pool_class(&b->lease_pool, entry_bytes(hold_count, id_length));
    struct tb_lease *lease = slab_pool_take(&b->lease_pool, size_class);
    if (lease == NULL)
        return NULL;
    memset(lease, 0, entry_bytes(hold_count, 0));
    lease->size_class = (uint8_t)size_class;
    lease->hash = id_hash(id, id_length);
    lease->id_length = (uint8_t)id_length;
    lease->hold_count = (uint8_t)hold_count;
    memcpy(lease_id(lease), id, id_length);
    lease->touched_ms = now_ms;
    lease->state = TB_LEASE_PENDING;
    lease->busy = true;
    struct tb_lease **bucket = &b->lease_buckets[lease->hash & b->lease_bucket_mask];
    lease->next_in_bucket = *bucket;
    *bucket = lease;
    link_newest(b, lease);
    b->lease_count++;
    return lease;
}

struct tb_lease *tb_leases_resize(struct tb_backend *b, struct tb_lease *lease, uint32_t hold_count)
{
    assert(hold_count <= REQUIREMENTS_PER_RESERVE_MAX);
    assert(lease->busy); /* only the job that owns the entry reshapes it */
    uint32_t size_class =
        slab_pool_class(&b->lease_pool, entry_bytes(hold_count, lease->id_length));
    struct tb_lease *bigger = slab_pool_take(&b->lease_pool, size_class);
    if (bigger == NULL)
        return NULL;
    uint32_t keep = lease->hold_count < hold_count ? lease->hold_count : hold_count;
    memcpy(bigger, lease, entry_bytes(keep, 0));
    bigger->size_class = (uint8_t)size_class;
    bigger->hold_count = (uint8_t)hold_count;
    memcpy(lease_id(bigger), lease_id(lease), lease->id_length);
    *bucket_link(b, lease) = bigger;
    if (bigger->older != NULL)
        bigger->older->newer = bigger;
    else
        b->oldest = bigger;
    if (bigger->newer != NULL)
        bigger->newer->older = bigger;
    else
        b->newest = bigger;
    slab_pool_give(&b->lease_pool, lease, lease->size_class);
    return bigger;
}

void tb_leases_expire(struct tb_backend *b, int64_t now_ms)
{
    pthread_mutex_lock(&b->lease_lock);
    struct tb_lease *lease = b->oldest;
    for (int i = 0; lease != NULL && i < EXPIRE_SCAN_MAX; i++) {
        struct tb_lease *newer = lease->newer;
        if (now_ms - lease->touched_ms <= b->lease_retention_ms)
            break; /* the order list is by last use: the rest are younger */
        if (idle(lease))
            tb_leases_remove(b, lease);
        lease = newer;
    }
    pthread_mutex_unlock(&b->lease_lock);
}

/* ---- reserves in doubt ----------------------------------------------------
 * A reserve whose chain failed at its deadline (503) may still land: the
 * session keeps resending its request. If the caller retries and that
 * retry is denied for capacity before the old request lands, the lease
 * would be held after a denial. So while any request that outlived its
 * deadline is unsettled (tbc_submitter_stale_requests), a denial of a lease
 * answered 503 within TBC_STALE_REQUEST_MS_MAX is answered 503 too. */

static uint64_t doubt_hash(const char *id, uint32_t id_length)
{
    uint64_t hash = id_hash(id, id_length);
    return hash != 0 ? hash : 1; /* 0 marks a free slot */
}

void tb_leases_doubt_note(struct tb_backend *b, const char *id, uint32_t id_length)
{
    uint64_t hash = doubt_hash(id, id_length);
    pthread_mutex_lock(&b->lease_lock);
    uint32_t slot = (uint32_t)(hash % TB_DOUBT_SLOTS);
    b->doubts[slot].hash = hash;
    b->doubts[slot].at_ms = clock_monotonic_ms();
    pthread_mutex_unlock(&b->lease_lock);
}

bool tb_leases_in_doubt(struct tb_backend *b, const char *id, uint32_t id_length)
{
    uint64_t hash = doubt_hash(id, id_length);
    uint32_t slot = (uint32_t)(hash % TB_DOUBT_SLOTS);
    bool stale = tbc_submitter_stale_requests(b->submitter) > 0;
    pthread_mutex_lock(&b->lease_lock);
    bool doubt = b->doubts[slot].hash == hash &&
                 clock_monotonic_ms() - b->doubts[slot].at_ms < TBC_STALE_REQUEST_MS_MAX;
    if (doubt && !stale)
        b->doubts[slot].hash = 0; /* every request sent has settled: no more doubt */
    pthread_mutex_unlock(&b->lease_lock);
    return doubt && stale;
}

void tb_leases_free(struct tb_backend *b)
{
    slab_pool_free(&b->lease_pool); /* every entry lives in a slab */
    b->oldest = b->newest = NULL;
    b->lease_count = 0;
    free(b->lease_buckets);
    b->lease_buckets = NULL;
}
