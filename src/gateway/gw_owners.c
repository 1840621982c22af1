/* A ring of entries in the order they were remembered, and a chained hash
 * table over them: remembering past the capacity takes the oldest entry's
 * place, unlinking it from its chain first. All memory is taken at
 * creation (calloc: pages are touched only as entries are used). */
#include "gw_owners.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

#define NO_ENTRY UINT32_MAX

struct entry {
    uint64_t hash;
    uint32_t next; /* in its chain, or NO_ENTRY */
    uint8_t id_length;
    char id[GW_RESPONSE_ID_LENGTH_MAX];
    uint8_t digest[GW_SHA256_BYTES];
};

_Static_assert(GW_RESPONSE_ID_LENGTH_MAX <= UINT8_MAX, "an id's length fits its byte");

struct gw_owners {
    pthread_mutex_t mutex;
    uint32_t capacity;
    uint32_t count;  /* entries in use, at most capacity */
    uint32_t oldest; /* where the next entry goes once full */
    struct entry *entries;
    uint32_t *buckets; /* first entry of each chain, or NO_ENTRY */
    uint32_t bucket_mask;
};

struct gw_owners *gw_owners_new(uint32_t capacity)
{
    assert(capacity >= 1);
    struct gw_owners *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    uint32_t buckets = hash_bucket_count(capacity);
    o->entries = calloc(capacity, sizeof *o->entries);
    o->buckets = malloc(buckets * sizeof *o->buckets);
    if (o->entries == NULL || o->buckets == NULL || pthread_mutex_init(&o->mutex, NULL) != 0) {
        free(o->entries);
        free(o->buckets);
        free(o);
        return NULL;
    }
    memset(o->buckets, 0xff, buckets * sizeof *o->buckets); /* NO_ENTRY everywhere */
    o->capacity = capacity;
    o->bucket_mask = buckets - 1;
    return o;
}

void gw_owners_free(struct gw_owners *o)
{
    if (o == NULL)
        return;
    pthread_mutex_destroy(&o->mutex);
    free(o->entries);
    free(o->buckets);
    free(o);
}

/* FNV-1a: ids are chosen by the upstream, not by clients. */
static uint64_t id_hash(const char *id, size_t length)
{
    return hash_fnv1a(id, length);
}

static uint32_t find(const struct gw_owners *o, uint64_t hash, const char *id, size_t length)
{
    for (uint32_t e = o->buckets[hash & o->bucket_mask]; e != NO_ENTRY; e = o->entries[e].next) {
        const struct entry *x = &o->entries[e];
        if (x->hash == hash && x->id_length == length && memcmp(x->id, id, length) == 0)
            return e;
    }
    return NO_ENTRY;
}

static void unlink_entry(struct gw_owners *o, uint32_t e)
{
    uint32_t *link = &o->buckets[o->entries[e].hash & o->bucket_mask];
    while (*link != e) {
        assert(*link != NO_ENTRY);
        link = &o->entries[*link].next;
    }
    *link = o->entries[e].next;
}

int gw_owners_remember(struct gw_owners *o, const char *id, size_t length,
                       const uint8_t digest[GW_SHA256_BYTES])
{
    if (length == 0 || length > GW_RESPONSE_ID_LENGTH_MAX)
        return -1;
    uint64_t hash = id_hash(id, length);
    pthread_mutex_lock(&o->mutex);
    if (find(o, hash, id, length) == NO_ENTRY) {
        uint32_t e;
        if (o->count < o->capacity) {
            e = o->count++;
        } else { /* full: the oldest is forgotten */
            e = o->oldest;
            o->oldest = (o->oldest + 1) % o->capacity;
            unlink_entry(o, e);
        }
        struct entry *x = &o->entries[e];
        x->hash = hash;
        x->id_length = (uint8_t)length;
        memcpy(x->id, id, length);
        memcpy(x->digest, digest, GW_SHA256_BYTES);
        x->next = o->buckets[hash & o->bucket_mask];
        o->buckets[hash & o->bucket_mask] = e;
    }
    pthread_mutex_unlock(&o->mutex);
    return 0;
}

enum gw_owner gw_owners_lookup(struct gw_owners *o, const char *id, size_t length,
                               const uint8_t digest[GW_SHA256_BYTES])
{
    if (length == 0 || length > GW_RESPONSE_ID_LENGTH_MAX)
        return GW_OWNER_UNKNOWN;
    uint64_t hash = id_hash(id, length);
    enum gw_owner answer = GW_OWNER_UNKNOWN;
    pthread_mutex_lock(&o->mutex);
    uint32_t e = find(o, hash, id, length);
    if (e != NO_ENTRY)
        answer = CRYPTO_memcmp(o->entries[e].digest, digest, GW_SHA256_BYTES) == 0
                     ? GW_OWNER_THIS_KEY
                     : GW_OWNER_OTHER_KEY;
    pthread_mutex_unlock(&o->mutex);
    return answer;
}

uint32_t gw_owners_count(struct gw_owners *o)
{
    pthread_mutex_lock(&o->mutex);
    uint32_t count = o->count;
    pthread_mutex_unlock(&o->mutex);
    return count;
}
