/* The sqlite backend's hash map: open addressing from a 64-bit hash to a
 * pointer, linear probing and backward-shift deletion (the mirror's limits
 * by key and by id, the transaction's leases, key ranges and callers). */
#include "sq_map.h"

#include <assert.h>
#include <stdlib.h>

#define MAP_CAPACITY_MIN 16

uint64_t sq_hash_bytes(const void *data, size_t length)
{
    /* FNV-1a, then a final mix so low bits spread over the table. */
    const unsigned char *bytes = data;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < length; i++) {
        h ^= bytes[i];
        h *= UINT64_C(1099511628211);
    }
    return sq_hash_i64((int64_t)h);
}

uint64_t sq_hash_i64(int64_t value)
{
    uint64_t x = (uint64_t)value;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static void map_place(struct sq_map_slot *slots, uint32_t capacity, uint64_t hash, void *value)
{
    uint32_t mask = capacity - 1;
    uint32_t i = (uint32_t)hash & mask;
    while (slots[i].value != NULL)
        i = (i + 1) & mask;
    slots[i].hash = hash;
    slots[i].value = value;
}

int sq_map_reserve(struct sq_map *map, uint32_t extra)
{
    assert(extra <= UINT32_MAX / 4);
    uint64_t needed = (uint64_t)map->count + extra;
    if (needed * 4 <= (uint64_t)map->capacity * 3 && map->capacity != 0)
        return 0;
    uint64_t capacity = map->capacity == 0 ? MAP_CAPACITY_MIN : map->capacity;
    while (needed * 4 > capacity * 3)
        capacity *= 2;
    if (capacity > UINT32_MAX / 2)
        return -1;
    struct sq_map_slot *slots = calloc((size_t)capacity, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (uint32_t i = 0; i < map->capacity; i++) {
        if (map->slots[i].value != NULL)
            map_place(slots, (uint32_t)capacity, map->slots[i].hash, map->slots[i].value);
    }
    free(map->slots);
    map->slots = slots;
    map->capacity = (uint32_t)capacity;
    return 0;
}

void *sq_map_find(const struct sq_map *map, uint64_t hash, sq_map_match_fn match, const void *key)
{
    if (map->capacity == 0)
        return NULL;
    uint32_t mask = map->capacity - 1;
    for (uint32_t i = (uint32_t)hash & mask, probes = 0; probes < map->capacity;
         i = (i + 1) & mask, probes++) {
        if (map->slots[i].value == NULL)
            return NULL;
        if (map->slots[i].hash == hash && match(map->slots[i].value, key))
            return map->slots[i].value;
    }
    return NULL;
}

void sq_map_insert(struct sq_map *map, uint64_t hash, void *value)
{
    assert(value != NULL);
    assert(map->capacity != 0);
    assert(((uint64_t)map->count + 1) * 4 <= (uint64_t)map->capacity * 3);
    map_place(map->slots, map->capacity, hash, value);
    map->count++;
}

bool sq_map_remove(struct sq_map *map, uint64_t hash, sq_map_match_fn match, const void *key)
{
    if (map->capacity == 0)
        return false;
    uint32_t mask = map->capacity - 1;
    uint32_t i = (uint32_t)hash & mask;
    for (uint32_t probes = 0;; i = (i + 1) & mask, probes++) {
        if (probes == map->capacity || map->slots[i].value == NULL)
            return false;
        if (map->slots[i].hash == hash && match(map->slots[i].value, key))
            break;
    }
    /* Backward-shift deletion keeps every probe chain unbroken. */
    uint32_t hole = i;
    for (uint32_t j = (hole + 1) & mask; map->slots[j].value != NULL; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)map->slots[j].hash & mask;
        bool movable = (hole <= j) ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            map->slots[hole] = map->slots[j];
            hole = j;
        }
    }
    map->slots[hole].value = NULL;
    map->slots[hole].hash = 0;
    map->count--;
    return true;
}

void sq_map_free(struct sq_map *map)
{
    free(map->slots);
    *map = (struct sq_map){0};
}
