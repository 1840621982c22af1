/* Hash tables of the memory backend (limits by key, leases by id): open
 * addressing with linear probing and backward-shift deletion, so lookups
 * touch one or two cache lines and deletions leave no tombstones. */
#include "mem_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static uint64_t load64(const char *bytes)
{
    uint64_t word;
    memcpy(&word, bytes, 8);
    return word;
}

static uint64_t mix(uint64_t x)
{
    x *= UINT64_C(0xff51afd7ed558ccd);
    return x ^ (x >> 29);
}

/* A multiply-xorshift hash over 8-byte words in two independent lanes (keys
 * and lease ids are short ASCII strings: this keeps the dependency chain to
 * two or three multiplies). The last word overlaps the one before it rather
 * than being assembled byte by byte. */
uint64_t mem_hash(const char *bytes, size_t length)
{
    uint64_t a = UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)length;
    uint64_t b = UINT64_C(0xc4ceb9fe1a85ec53);
    if (length < 8) {
        uint64_t word = 0;
        for (size_t i = 0; i < length; i++)
            word |= (uint64_t)(unsigned char)bytes[i] << (8 * i);
        a = mix(a ^ word);
    } else {
        size_t i = 0;
        for (; i + 16 <= length; i += 16) {
            a = mix(a ^ load64(bytes + i));
            b = mix(b ^ load64(bytes + i + 8));
        }
        if (i + 8 <= length) {
            a = mix(a ^ load64(bytes + i));
            i += 8;
        }
        if (i < length)
            b = mix(b ^ load64(bytes + length - 8));
    }
    uint64_t h = mix(a ^ (b << 31 | b >> 33));
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 32);
}

/* Entry arrays of TABLE_HUGE_BYTES or more (the lease table: 32 MiB for
 * the default million leases) come from mmap, 2 MiB aligned and advised
 * into transparent huge pages: every lookup lands on a random entry, and
 * with small pages nearly every one also missed the TLB (measured: about
 * 10% of a reserve with a full lease cache). The holds and leases, which
 * are mostly reached through prefetches, measured no better on huge pages,
 * so they stay on ordinary memory. */
#define TABLE_HUGE_BYTES (UINT64_C(4) << 20)
#define HUGE_PAGE_BYTES (UINT64_C(2) << 20)

static struct mem_table_entry *entries_alloc(uint32_t capacity)
{
    size_t bytes = (size_t)capacity * sizeof(struct mem_table_entry);
    if (bytes < TABLE_HUGE_BYTES)
        return calloc(capacity, sizeof(struct mem_table_entry));
    /* Map one huge page more, then trim both ends to an aligned range;
     * fresh anonymous pages are zero. */
    size_t mapped = bytes + HUGE_PAGE_BYTES;
    char *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    size_t head = start - (uintptr_t)p;
    if (head > 0)
        munmap(p, head);
    if (mapped - head > bytes)
        munmap((char *)start + bytes, mapped - head - bytes);
    (void)madvise((void *)start, bytes, MADV_HUGEPAGE); /* only advice: fine without */
    return (struct mem_table_entry *)start;
}

static void entries_free(struct mem_table_entry *entries, uint32_t capacity)
{
    size_t bytes = (size_t)capacity * sizeof(struct mem_table_entry);
    if (bytes < TABLE_HUGE_BYTES)
        free(entries);
    else if (entries != NULL)
        munmap(entries, bytes);
}

int mem_table_init(struct mem_table *table, uint32_t capacity, uint32_t capacity_max)
{
    assert(capacity >= 16);
    assert((capacity & (capacity - 1)) == 0);
    assert(capacity <= capacity_max);
    assert((capacity_max & (capacity_max - 1)) == 0);
    table->entries = entries_alloc(capacity);
    if (table->entries == NULL)
        return -1;
    table->capacity = capacity;
    table->count = 0;
    table->capacity_max = capacity_max;
    return 0;
}

void mem_table_free(struct mem_table *table)
{
    entries_free(table->entries, table->capacity);
    table->entries = NULL;
    table->capacity = 0;
    table->count = 0;
}

static bool node_matches(const struct mem_table_entry *entry, uint64_t hash, const char *key,
                         uint32_t key_length)
{
    return entry->hash == hash && entry->node->key_length == key_length &&
           memcmp(entry->node->key, key, key_length) == 0;
}

struct mem_node *mem_table_find(const struct mem_table *table, uint64_t hash, const char *key,
                                uint32_t key_length)
{
    uint32_t mask = table->capacity - 1;
    /* The load factor is at most 1/2, so an empty slot ends every probe. */
    for (uint32_t i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
        const struct mem_table_entry *entry = &table->entries[i];
        if (entry->node == NULL)
            return NULL;
        if (node_matches(entry, hash, key, key_length))
            return entry->node;
    }
}

/* Puts node in the first empty slot of its probe run. Every entry of the
 * run is passed on the way, so the key's absence is checked for free (the
 * key itself is compared only on a full hash match). */
static void place(struct mem_table_entry *entries, uint32_t mask, struct mem_node *node)
{
    uint32_t i = (uint32_t)node->hash & mask;
    while (entries[i].node != NULL) {
        assert(!node_matches(&entries[i], node->hash, node->key, node->key_length));
        i = (i + 1) & mask;
    }
    entries[i].hash = node->hash;
    entries[i].node = node;
}

static int grow(struct mem_table *table)
{
    if (table->capacity >= table->capacity_max)
        return -1;
    uint32_t capacity = table->capacity * 2;
    struct mem_table_entry *entries = entries_alloc(capacity);
    if (entries == NULL)
        return -1;
    for (uint32_t i = 0; i < table->capacity; i++) {
        if (table->entries[i].node != NULL)
            place(entries, capacity - 1, table->entries[i].node);
    }
    entries_free(table->entries, table->capacity);
    table->entries = entries;
    table->capacity = capacity;
    return 0;
}

int mem_table_insert(struct mem_table *table, struct mem_node *node)
{
    if ((table->count + 1) * 2 > table->capacity && grow(table) != 0)
        return -1;
    place(table->entries, table->capacity - 1, node);
    table->count++;
    return 0;
}

void mem_table_remove(struct mem_table *table, struct mem_node *node)
{
    mem_table_remove_hashed(table, node, node->hash);
}

void mem_table_remove_hashed(struct mem_table *table, struct mem_node *node, uint64_t hash)
{
    uint32_t mask = table->capacity - 1;
    uint32_t i = (uint32_t)hash & mask;
    while (table->entries[i].node != node) {
        assert(table->entries[i].node != NULL);
        i = (i + 1) & mask;
    }
    /* Backward shift: pull later entries of the probe run into the hole when
     * their home slot is not between the hole and where they sit. */
    uint32_t hole = i;
    for (uint32_t j = (hole + 1) & mask; table->entries[j].node != NULL; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)table->entries[j].hash & mask;
        bool home_after_hole = ((j - home) & mask) < ((j - hole) & mask);
        if (home_after_hole)
            continue;
        table->entries[hole] = table->entries[j];
        hole = j;
    }
    table->entries[hole].node = NULL;
    table->entries[hole].hash = 0;
    assert(table->count > 0);
    table->count--;
}
