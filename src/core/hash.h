/* FNV-1a, the one hash of the in-memory tables keyed by short strings (lease
 * ids, limit keys, callers, response ids). Not for anything an attacker
 * could aim at a single bucket where that matters more than speed: each
 * table says why its keys are safe. */
#ifndef LLMLIMIT_CORE_HASH_H
#define LLMLIMIT_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_BASIS 0xcbf29ce484222325ull

/* hash carried on over length more bytes: a key of several parts is hashed
 * part after part, starting from HASH_FNV1A_BASIS. */
static inline uint64_t hash_fnv1a_more(uint64_t hash, const void *bytes, size_t length)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ull;
    return hash;
}

static inline uint64_t hash_fnv1a(const void *bytes, size_t length)
{
    return hash_fnv1a_more(HASH_FNV1A_BASIS, bytes, length);
}

/* The bucket count of a chained table of up to `entries` entries: the least
 * power of two >= entries (at most 2^30), so that a hash picks its bucket
 * with a mask and chains stay about one entry long. */
static inline uint32_t hash_bucket_count(uint32_t entries)
{
    uint32_t buckets = 1;
    while (buckets < entries && buckets < (1u << 30))
        buckets *= 2;
    return buckets;
}

#endif
