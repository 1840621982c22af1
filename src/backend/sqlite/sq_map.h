/* The sqlite backend's hash map (sq_map.c): a 64-bit hash to a pointer. The
 * caller owns the values and hashes the keys; match() tells equal keys
 * apart on collisions. */
#ifndef LLMLIMIT_BACKEND_SQLITE_MAP_H
#define LLMLIMIT_BACKEND_SQLITE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sq_map_slot {
    uint64_t hash;
    void *value; /* NULL: empty slot */
};

struct sq_map {
    struct sq_map_slot *slots;
    uint32_t capacity; /* 0 or a power of two */
    uint32_t count;
};

typedef bool (*sq_map_match_fn)(const void *value, const void *key);

/* Makes room for `extra` more inserts. 0, or -1 when out of memory. */
int sq_map_reserve(struct sq_map *map, uint32_t extra);
void *sq_map_find(const struct sq_map *map, uint64_t hash, sq_map_match_fn match, const void *key);
/* Room must have been reserved. */
void sq_map_insert(struct sq_map *map, uint64_t hash, void *value);
bool sq_map_remove(struct sq_map *map, uint64_t hash, sq_map_match_fn match, const void *key);
void sq_map_free(struct sq_map *map);
uint64_t sq_hash_bytes(const void *data, size_t length);
uint64_t sq_hash_i64(int64_t value);

#endif
