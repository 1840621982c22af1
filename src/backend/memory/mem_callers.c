/* Callers in the memory backend: each distinct caller name interned once
 * (a hold then carries a 16-bit id, within its cache line), and per budget
 * period what each caller holds and spent, for usage by caller. Callers
 * hold the backend mutex. */
#include "mem_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define CALLERS_TABLE_CAPACITY_MAX (UINT32_C(1) << 16)
_Static_assert(2 * (MEM_CALLERS_MAX + 1) <= CALLERS_TABLE_CAPACITY_MAX,
               "the table holds every caller at a load of 1/2");

int mem_callers_init(struct mem_callers *callers)
{
    memset(callers, 0, sizeof *callers);
    return mem_table_init(&callers->table, 16, CALLERS_TABLE_CAPACITY_MAX);
}

void mem_callers_free(struct mem_callers *callers)
{
    for (uint32_t id = 1; id <= callers->count; id++)
        free(callers->by_id[id]);
    free(callers->by_id);
    if (callers->table.entries != NULL)
        mem_table_free(&callers->table);
    memset(callers, 0, sizeof *callers);
}

/* Room in by_id for the id count + 1. 0 or -1. */
static int by_id_reserve(struct mem_callers *callers)
{
    if (callers->count + 1 < callers->capacity)
        return 0;
    uint32_t capacity = callers->capacity == 0 ? 64 : callers->capacity * 2;
    struct mem_caller **grown = realloc(callers->by_id, capacity * sizeof *grown);
    if (grown == NULL)
        return -1;
    callers->by_id = grown;
    callers->capacity = capacity;
    return 0;
}

uint16_t mem_caller_intern(struct mem_callers *callers, const char *name, uint32_t length)
{
    if (name == NULL || length == 0)
        return MEM_CALLER_NONE;
    assert(length <= CALLER_LENGTH_MAX);
    uint64_t hash = mem_hash(name, length);
    struct mem_node *found = mem_table_find(&callers->table, hash, name, length);
    if (found != NULL)
        return ((const struct mem_caller *)found)->id;
    if (callers->count >= MEM_CALLERS_MAX || by_id_reserve(callers) != 0)
        return MEM_CALLER_OTHERS;
    struct mem_caller *caller = malloc(sizeof *caller + length + 1);
    if (caller == NULL)
        return MEM_CALLER_OTHERS;
    memcpy(caller->name, name, length);
    caller->name[length] = '\0';
    caller->node = (struct mem_node){.hash = hash, .key = caller->name, .key_length = length};
    caller->id = (uint16_t)(callers->count + 1);
    if (mem_table_insert(&callers->table, &caller->node) != 0) {
        free(caller);
        return MEM_CALLER_OTHERS;
    }
    callers->count++;
    callers->by_id[caller->id] = caller;
    return caller->id;
}

const char *mem_caller_name(const struct mem_callers *callers, uint16_t id)
{
    if (id == MEM_CALLER_NONE)
        return "";
    if (id == MEM_CALLER_OTHERS)
        return MEM_CALLER_OTHERS_NAME;
    assert(id <= callers->count);
    return callers->by_id[id]->name;
}

/* ---- per-period spend by caller ------------------------------------------ */

static uint32_t spend_slot(uint32_t key, uint32_t mask)
{
    return (key * UINT32_C(0x9e3779b1)) >> 16 & mask;
}

struct mem_caller_spend *mem_period_spend_find(const struct mem_period *period, uint16_t caller_id)
{
    if (period->caller_capacity == 0)
        return NULL;
    uint32_t key = (uint32_t)caller_id + 1, mask = period->caller_capacity - 1;
    /* The load stays at most 1/2: an empty slot ends every probe. */
    for (uint32_t i = spend_slot(key, mask);; i = (i + 1) & mask) {
        struct mem_caller_spend *entry = &period->callers[i];
        if (entry->key == key)
            return entry;
        if (entry->key == 0)
            return NULL;
    }
}

static void spend_place(struct mem_caller_spend *entries, uint32_t mask,
                        const struct mem_caller_spend *entry)
{
    uint32_t i = spend_slot(entry->key, mask);
    while (entries[i].key != 0)
        i = (i + 1) & mask;
    entries[i] = *entry;
}

static int spend_grow(struct mem_period *period)
{
    uint32_t capacity = period->caller_capacity == 0 ? 8 : period->caller_capacity * 2;
    assert(capacity <= 4 * (MEM_CALLERS_MAX + 2)); /* ids are bounded */
    struct mem_caller_spend *entries = calloc(capacity, sizeof *entries);
    if (entries == NULL)
        return -1;
    for (uint32_t i = 0; i < period->caller_capacity; i++) {
        if (period->callers[i].key != 0)
            spend_place(entries, capacity - 1, &period->callers[i]);
    }
    free(period->callers);
    period->callers = entries;
    period->caller_capacity = capacity;
    return 0;
}

struct mem_caller_spend *mem_period_spend_add(struct mem_period *period, uint16_t caller_id)
{
    struct mem_caller_spend *entry = mem_period_spend_find(period, caller_id);
    if (entry != NULL)
        return entry;
    if ((period->caller_count + 1) * 2 > period->caller_capacity && spend_grow(period) != 0)
        return NULL;
    struct mem_caller_spend fresh = {.key = (uint32_t)caller_id + 1};
    spend_place(period->callers, period->caller_capacity - 1, &fresh);
    period->caller_count++;
    entry = mem_period_spend_find(period, caller_id);
    assert(entry != NULL);
    return entry;
}

void mem_period_spend_free(struct mem_period *period)
{
    free(period->callers);
    period->callers = NULL;
    period->caller_count = 0;
    period->caller_capacity = 0;
}
