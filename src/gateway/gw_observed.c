/* Each pair keeps its window twice: as a ring in arrival order (to know
 * which output leaves when a new one comes) and sorted (so the percentile
 * is one read). A record moves at most `window` counts in each; a reserve
 * is a lookup. Pairs live in a fixed array of slots, found through a
 * chained hash table, and ordered by last use in a list whose tail is
 * forgotten when a new pair needs a slot. One mutex guards it all: every
 * operation is short. */
#include "gw_observed.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

struct pair {
    struct pair *hash_next;
    struct pair *older, *newer; /* by last use */
    uint64_t hash;
    char *key; /* model, NUL, caller, NUL */
    size_t model_length, caller_length;
    uint32_t count; /* outputs in the window, at most window */
    uint32_t next;  /* where the ring writes next */
    uint32_t *ring;
    uint32_t *sorted; /* the ring's counts, ascending */
};

struct gw_observed {
    pthread_mutex_t mutex;
    uint32_t pairs_max, window, percentile, min_calls;
    struct pair *slots; /* pairs_max of them */
    uint32_t used;
    struct pair **buckets;
    uint32_t bucket_mask;
    struct pair *newest, *oldest;
};

struct gw_observed *gw_observed_new(uint32_t pairs_max, uint32_t window, uint32_t percentile,
                                    uint32_t min_calls)
{
    assert(pairs_max >= 1 && window >= 1);
    assert(percentile >= 1 && percentile <= 100);
    assert(min_calls >= 1 && min_calls <= window);
    struct gw_observed *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    uint32_t buckets = hash_bucket_count(pairs_max);
    o->slots = calloc(pairs_max, sizeof *o->slots);
    o->buckets = calloc(buckets, sizeof *o->buckets);
    if (o->slots == NULL || o->buckets == NULL || pthread_mutex_init(&o->mutex, NULL) != 0) {
        free(o->slots);
        free(o->buckets);
        free(o);
        return NULL;
    }
    o->pairs_max = pairs_max, o->window = window;
    o->percentile = percentile, o->min_calls = min_calls;
    o->bucket_mask = buckets - 1;
    return o;
}

void gw_observed_free(struct gw_observed *o)
{
    if (o == NULL)
        return;
    for (uint32_t i = 0; i < o->used; i++) {
        free(o->slots[i].key);
        free(o->slots[i].ring); /* sorted shares its block */
    }
    pthread_mutex_destroy(&o->mutex);
    free(o->slots);
    free(o->buckets);
    free(o);
}

/* FNV-1a over model, a NUL, caller. */
static uint64_t pair_hash(const char *model, size_t model_length, const char *caller,
                          size_t caller_length)
{
    uint64_t h = hash_fnv1a_more(HASH_FNV1A_BASIS, model, model_length);
    h = hash_fnv1a_more(h, "", 1);
    return hash_fnv1a_more(h, caller, caller_length);
}

static struct pair *find(struct gw_observed *o, uint64_t hash, const char *model,
                         size_t model_length, const char *caller, size_t caller_length)
{
    for (struct pair *p = o->buckets[hash & o->bucket_mask]; p != NULL; p = p->hash_next) {
        if (p->hash == hash && p->model_length == model_length &&
            p->caller_length == caller_length && memcmp(p->key, model, model_length) == 0 &&
            memcmp(p->key + model_length + 1, caller, caller_length) == 0)
            return p;
    }
    return NULL;
}

static void list_unlink(struct gw_observed *o, struct pair *p)
{
    *(p->newer != NULL ? &p->newer->older : &o->newest) = p->older;
    *(p->older != NULL ? &p->older->newer : &o->oldest) = p->newer;
    p->older = p->newer = NULL;
}

static void list_push_newest(struct gw_observed *o, struct pair *p)
{
    p->older = o->newest;
    p->newer = NULL;
    *(o->newest != NULL ? &o->newest->newer : &o->oldest) = p;
    o->newest = p;
}

static void touch(struct gw_observed *o, struct pair *p)
{
    if (o->newest == p)
        return;
    list_unlink(o, p);
    list_push_newest(o, p);
}

/* The percentile of a pair's window: the value at rank ceil(p% of n). */
static uint64_t percentile_of(const struct gw_observed *o, const struct pair *p)
{
    assert(p->count >= 1 && p->count <= o->window);
    uint64_t rank = ((uint64_t)o->percentile * p->count + 99) / 100;
    assert(rank >= 1 && rank <= p->count);
    return p->sorted[rank - 1];
}

uint64_t gw_observed_reserve(struct gw_observed *o, const char *model, const char *caller,
                             uint64_t max_tokens)
{
    return gw_observed_reserve_or(o, model, caller, max_tokens, max_tokens);
}

uint64_t gw_observed_reserve_or(struct gw_observed *o, const char *model, const char *caller,
                                uint64_t max_tokens, uint64_t unseen)
{
    size_t model_length = strlen(model), caller_length = strlen(caller);
    uint64_t hash = pair_hash(model, model_length, caller, caller_length);
    uint64_t reserve = unseen < max_tokens ? unseen : max_tokens;
    pthread_mutex_lock(&o->mutex);
    struct pair *p = find(o, hash, model, model_length, caller, caller_length);
    if (p != NULL) {
        touch(o, p);
        if (p->count >= o->min_calls) {
            uint64_t seen = percentile_of(o, p);
            reserve = seen < max_tokens ? seen : max_tokens;
        }
    }
    pthread_mutex_unlock(&o->mutex);
    return reserve;
}

/* The first index in sorted[0..count) whose value is not below value. */
static uint32_t lower_bound(const uint32_t *sorted, uint32_t count, uint32_t value)
{
    uint32_t low = 0, high = count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (sorted[middle] < value)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

static void add_output(struct gw_observed *o, struct pair *p, uint32_t value)
{
    if (p->count == o->window) { /* the oldest output leaves the window */
        uint32_t old = p->ring[p->next];
        uint32_t at = lower_bound(p->sorted, p->count, old);
        assert(at < p->count && p->sorted[at] == old);
        memmove(p->sorted + at, p->sorted + at + 1, (p->count - at - 1) * sizeof *p->sorted);
        p->count--;
    }
    uint32_t at = lower_bound(p->sorted, p->count, value);
    memmove(p->sorted + at + 1, p->sorted + at, (p->count - at) * sizeof *p->sorted);
    p->sorted[at] = value;
    p->count++;
    p->ring[p->next] = value;
    p->next = (p->next + 1) % o->window;
}

/* A slot for a new pair: a free one, else the least recently used pair's. */
static struct pair *take_slot(struct gw_observed *o)
{
    if (o->used < o->pairs_max)
        return &o->slots[o->used++];
    struct pair *p = o->oldest;
    assert(p != NULL);
    list_unlink(o, p);
    struct pair **link = &o->buckets[p->hash & o->bucket_mask];
    while (*link != p)
        link = &(*link)->hash_next;
    *link = p->hash_next;
    free(p->key);
    p->key = NULL;
    p->count = p->next = 0;
    return p;
}

static struct pair *insert(struct gw_observed *o, uint64_t hash, const char *model,
                           size_t model_length, const char *caller, size_t caller_length)
{
    char *key = malloc(model_length + caller_length + 2);
    if (key == NULL)
        return NULL;
    struct pair *p = take_slot(o);
    if (p->ring == NULL) {
        p->ring = malloc(2 * (size_t)o->window * sizeof *p->ring);
        if (p->ring == NULL) { /* the slot stays, empty and unlinked, for the next pair */
            free(key);
            if (p == &o->slots[o->used - 1])
                o->used--;
            return NULL;
        }
        p->sorted = p->ring + o->window;
    }
    memcpy(key, model, model_length);
    key[model_length] = '\0';
    memcpy(key + model_length + 1, caller, caller_length);
    key[model_length + 1 + caller_length] = '\0';
    p->key = key;
    p->hash = hash;
    p->model_length = model_length, p->caller_length = caller_length;
    p->count = p->next = 0;
    p->hash_next = o->buckets[hash & o->bucket_mask];
    o->buckets[hash & o->bucket_mask] = p;
    list_push_newest(o, p);
    return p;
}

int gw_observed_record(struct gw_observed *o, const char *model, const char *caller,
                       uint64_t output_tokens)
{
    size_t model_length = strlen(model), caller_length = strlen(caller);
    uint64_t hash = pair_hash(model, model_length, caller, caller_length);
    uint32_t value = output_tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)output_tokens;
    pthread_mutex_lock(&o->mutex);
    struct pair *p = find(o, hash, model, model_length, caller, caller_length);
    if (p != NULL)
        touch(o, p);
    else
        p = insert(o, hash, model, model_length, caller, caller_length);
    if (p != NULL)
        add_output(o, p, value);
    pthread_mutex_unlock(&o->mutex);
    return p != NULL ? 0 : -1;
}

uint32_t gw_observed_pairs(struct gw_observed *o)
{
    pthread_mutex_lock(&o->mutex);
    uint32_t used = o->used;
    pthread_mutex_unlock(&o->mutex);
    return used;
}
