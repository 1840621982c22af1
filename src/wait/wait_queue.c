/* The limits' queues of the wait layer: one per limit with waiters, found
 * by key in a chained hash table, holding one list per priority in arrival
 * order. A ticket has a place (a node) in the queue of each limit that
 * denied it. Places come from chunks kept for reuse, queues from a free
 * list: no allocation per waiter once warm. Each queue keeps its turns of
 * holding back and letting pass (wait_internal.h, struct wait_key); an
 * empty one cools in the table for 2 * hold_ms before it is dropped.
 * Under wait->mutex. */
#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "wait_internal.h"

#define BUCKETS_INITIAL 1024

uint64_t wait_hash(const char *key, uint32_t length)
{
    /* 8 bytes at a time, multiply-xorshift: keys are short and trusted. */
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ length;
    uint32_t i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t word;
        memcpy(&word, key + i, 8);
        h = (h ^ word) * UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    memcpy(&tail, key + i, length - i);
    h = (h ^ tail) * UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 29;
    return h == 0 ? 1 : h; /* 0 means "any limit" in an event */
}

int wait_queue_init(struct wait *w)
{
    w->buckets = calloc(BUCKETS_INITIAL, sizeof *w->buckets);
    if (w->buckets == NULL)
        return -1;
    w->bucket_mask = BUCKETS_INITIAL - 1;
    return 0;
}

void wait_queue_free(struct wait *w)
{
    for (uint32_t i = 0; w->buckets != NULL && i <= w->bucket_mask; i++) {
        while (w->buckets[i] != NULL) {
            struct wait_key *k = w->buckets[i];
            w->buckets[i] = k->bucket_next;
            free(k);
        }
    }
    free(w->buckets);
    while (w->keys_free != NULL) {
        struct wait_key *k = w->keys_free;
        w->keys_free = k->bucket_next;
        free(k);
    }
    for (uint32_t i = 0; i < w->node_chunk_count; i++)
        free(w->node_chunks[i]);
    free(w->node_chunks);
}

struct wait_key *wait_key_find(const struct wait *w, const char *key, uint32_t length,
                               uint64_t hash)
{
    for (struct wait_key *k = w->buckets[hash & w->bucket_mask]; k != NULL; k = k->bucket_next) {
        if (k->hash == hash && k->key_length == length && memcmp(k->key, key, length) == 0)
            return k;
    }
    return NULL;
}

/* Doubles the table when it holds as many queues as buckets. */
static void buckets_grow(struct wait *w)
{
    uint32_t size = (w->bucket_mask + 1) * 2;
    struct wait_key **grown = calloc(size, sizeof *grown);
    if (grown == NULL)
        return; /* chains just get longer */
    for (uint32_t i = 0; i <= w->bucket_mask; i++) {
        while (w->buckets[i] != NULL) {
            struct wait_key *k = w->buckets[i];
            w->buckets[i] = k->bucket_next;
            k->bucket_next = grown[k->hash & (size - 1)];
            grown[k->hash & (size - 1)] = k;
        }
    }
    free(w->buckets);
    w->buckets = grown;
    w->bucket_mask = size - 1;
}

/* ---- turns and cooling -------------------------------------------------- */

bool wait_key_holding(const struct wait *w, const struct wait_key *key, int64_t now_ms)
{
    int64_t hold = w->options.hold_ms;
    if (hold == 0)
        return false;
    int64_t age = now_ms - key->turns_since_ms;
    return age < 0 || age % (2 * hold) < hold; /* a clock stepped back: holding */
}

int64_t wait_key_lets_pass_at(const struct wait *w, const struct wait_key *key, int64_t now_ms)
{
    int64_t hold = w->options.hold_ms;
    if (!wait_key_holding(w, key, now_ms))
        return now_ms;
    int64_t age = now_ms - key->turns_since_ms;
    if (age < 0)
        return key->turns_since_ms + hold;
    return now_ms - age % (2 * hold) + hold;
}

static void cool_unlink(struct wait *w, struct wait_key *k)
{
    assert(k->cooling);
    if (k->cool_prev != NULL)
        k->cool_prev->cool_next = k->cool_next;
    else
        w->cool_head = k->cool_next;
    if (k->cool_next != NULL)
        k->cool_next->cool_prev = k->cool_prev;
    else
        w->cool_tail = k->cool_prev;
    k->cool_prev = k->cool_next = NULL;
    k->cooling = false;
    assert(w->cooling_count > 0);
    w->cooling_count--;
}

/* Has it been empty long enough to forget its turns? */
static bool cooled(const struct wait *w, const struct wait_key *k, int64_t now_ms)
{
    return now_ms - k->emptied_ms >= 2 * (int64_t)w->options.hold_ms;
}

static void key_drop(struct wait *w, struct wait_key *k);

void wait_keys_cool(struct wait *w, int64_t now_ms, bool all)
{
    while (w->cool_head != NULL && (all || cooled(w, w->cool_head, now_ms))) {
        struct wait_key *k = w->cool_head;
        cool_unlink(w, k);
        key_drop(w, k);
    }
}

/* ---- queues --------------------------------------------------------------- */

static struct wait_key *key_get(struct wait *w, const char *key, uint32_t length)
{
    assert(length >= 1);
    assert(length <= LIMIT_KEY_LENGTH_MAX);
    uint64_t hash = wait_hash(key, length);
    struct wait_key *k = wait_key_find(w, key, length, hash);
    if (k != NULL) {
        if (k->cooling) { /* its turns go on, unless it was empty long enough */
            int64_t now_ms = clock_now_ms(w->clock);
            if (cooled(w, k, now_ms))
                k->turns_since_ms = now_ms;
            cool_unlink(w, k);
            w->stats.keys = w->key_count - w->cooling_count;
        }
        return k;
    }
    k = w->keys_free;
    if (k != NULL) {
        w->keys_free = k->bucket_next;
        w->keys_free_count--;
    } else if ((k = malloc(sizeof *k)) == NULL) {
        return NULL;
    }
    memset(k, 0, offsetof(struct wait_key, key));
    k->turns_since_ms = clock_now_ms(w->clock);
    k->hash = hash;
    k->key_length = length;
    memcpy(k->key, key, length);
    k->key[length] = '\0';
    if (w->key_count >= w->bucket_mask + 1)
        buckets_grow(w);
    k->bucket_next = w->buckets[hash & w->bucket_mask];
    w->buckets[hash & w->bucket_mask] = k;
    w->key_count++;
    w->stats.keys = w->key_count - w->cooling_count;
    return k;
}

static void key_drop(struct wait *w, struct wait_key *k)
{
    assert(k->count == 0);
    assert(k->nonempty == 0);
    assert(k->asking_mask == 0);
    assert(!k->cooling);
    struct wait_key **link = &w->buckets[k->hash & w->bucket_mask];
    while (*link != k)
        link = &(*link)->bucket_next;
    *link = k->bucket_next;
    w->key_count--;
    w->stats.keys = w->key_count - w->cooling_count;
    if (w->keys_free_count < WAIT_KEYS_FREE_MAX) {
        k->bucket_next = w->keys_free;
        w->keys_free = k;
        w->keys_free_count++;
    } else {
        free(k);
    }
}

static struct wait_node *node_alloc(struct wait *w)
{
    if (w->nodes_free == NULL) {
        if (w->node_chunk_count == w->node_chunk_capacity) {
            uint32_t capacity = w->node_chunk_capacity == 0 ? 16 : w->node_chunk_capacity * 2;
            void **grown = realloc(w->node_chunks, capacity * sizeof *grown);
            if (grown == NULL)
                return NULL;
            w->node_chunks = grown;
            w->node_chunk_capacity = capacity;
        }
        struct wait_node *chunk = malloc(WAIT_NODE_CHUNK * sizeof *chunk);
        if (chunk == NULL)
            return NULL;
        w->node_chunks[w->node_chunk_count++] = chunk;
        for (uint32_t i = 0; i < WAIT_NODE_CHUNK; i++) {
            chunk[i].ticket_next = w->nodes_free;
            w->nodes_free = &chunk[i];
        }
        w->stats.nodes_allocated += WAIT_NODE_CHUNK;
    }
    struct wait_node *node = w->nodes_free;
    w->nodes_free = node->ticket_next;
    return node;
}

struct wait_node *wait_queue_place(const struct wait_ticket *t, uint32_t requirement)
{
    for (struct wait_node *n = t->nodes; n != NULL; n = n->ticket_next) {
        if (n->requirement == requirement)
            return n;
    }
    return NULL;
}

int wait_queue_add(struct wait *w, struct wait_ticket *t, uint32_t requirement)
{
    assert(requirement < t->request->requirement_count);
    assert(t->priority < WAIT_PRIORITIES);
    if (wait_queue_place(t, requirement) != NULL)
        return 0;
    const struct requirement *r = &t->request->requirements[requirement];
    struct wait_key *k = key_get(w, r->key, r->key_length);
    struct wait_node *node = k != NULL ? node_alloc(w) : NULL;
    if (node == NULL) {
        if (k != NULL && k->count == 0)
            key_drop(w, k);
        return -1;
    }
    *node = (struct wait_node){.ticket = t,
                               .key = k,
                               .amount = r->amount,
                               .priority = t->priority,
                               .requirement = (uint8_t)requirement};
    /* Usually the latest arrival: from the tail back to its place. */
    uint32_t p = t->priority;
    struct wait_node *after = k->tail[p];
    while (after != NULL && wait_before(t, after->ticket))
        after = after->previous;
    node->previous = after;
    node->next = after != NULL ? after->next : k->head[p];
    if (node->next != NULL)
        node->next->previous = node;
    else
        k->tail[p] = node;
    if (after != NULL)
        after->next = node;
    else
        k->head[p] = node;
    k->nonempty |= (uint16_t)(1u << p);
    k->count++;
    if (t->nodes == NULL)
        w->queued++;
    node->ticket_next = t->nodes;
    t->nodes = node;
    return 0;
}

static void asking_count(struct wait_key *k, uint32_t priority, int delta)
{
    assert(delta > 0 || k->asking[priority] > 0);
    k->asking[priority] = (uint32_t)((int64_t)k->asking[priority] + delta);
    if (k->asking[priority] > 0)
        k->asking_mask |= (uint16_t)(1u << priority);
    else
        k->asking_mask &= (uint16_t) ~(1u << priority);
}

void wait_queue_asking(struct wait_ticket *t, bool asking)
{
    for (struct wait_node *n = t->nodes; n != NULL; n = n->ticket_next) {
        if (n->asking == asking)
            continue;
        n->asking = asking;
        asking_count(n->key, n->priority, asking ? 1 : -1);
    }
}

/* Its last place left: kept for its turns (with a hold), or dropped. */
static void key_empty(struct wait *w, struct wait_key *k)
{
    if (w->options.hold_ms == 0) {
        key_drop(w, k);
        return;
    }
    k->cooling = true;
    k->emptied_ms = clock_now_ms(w->clock);
    k->cool_prev = w->cool_tail;
    k->cool_next = NULL;
    if (w->cool_tail != NULL)
        w->cool_tail->cool_next = k;
    else
        w->cool_head = k;
    w->cool_tail = k;
    w->cooling_count++;
    w->stats.keys = w->key_count - w->cooling_count;
}

void wait_queue_remove(struct wait *w, struct wait_node *node)
{
    struct wait_ticket *t = node->ticket;
    struct wait_key *k = node->key;
    uint32_t p = node->priority;
    if (node->previous != NULL)
        node->previous->next = node->next;
    else
        k->head[p] = node->next;
    if (node->next != NULL)
        node->next->previous = node->previous;
    else
        k->tail[p] = node->previous;
    if (k->head[p] == NULL)
        k->nonempty &= (uint16_t) ~(1u << p);
    assert(k->count > 0);
    k->count--;
    struct wait_node **link = &t->nodes;
    while (*link != node)
        link = &(*link)->ticket_next;
    *link = node->ticket_next;
    if (t->nodes == NULL) {
        assert(w->queued > 0);
        w->queued--;
    }
    if (node->asking)
        asking_count(k, p, -1);
    node->ticket = NULL;
    node->ticket_next = w->nodes_free;
    w->nodes_free = node;
    if (k->count == 0)
        key_empty(w, k);
}

struct wait_node *wait_queue_first(const struct wait_key *key)
{
    if (key->nonempty == 0)
        return NULL;
    return key->head[__builtin_ctz(key->nonempty)];
}

struct wait_node *wait_queue_after(const struct wait_key *key, const struct wait_node *node)
{
    if (node->next != NULL)
        return node->next;
    uint32_t p = node->priority + 1u;
    uint32_t rest = p >= WAIT_PRIORITIES ? 0 : (uint32_t)key->nonempty >> p;
    return rest == 0 ? NULL : key->head[p + (uint32_t)__builtin_ctz(rest)];
}

bool wait_queue_ahead(const struct wait_key *key, const struct wait_ticket *t, bool past_asking)
{
    /* The queue is in order: the first other than t (and, past_asking, not
     * asking) decides. Walking past those asking stops at t at the latest. */
    struct wait_node *first = wait_queue_first(key);
    while (first != NULL &&
           (first->ticket == t || (past_asking && first->ticket->state == WAIT_ASKING))) {
        if (first->ticket == t && past_asking)
            return false; /* everyone before t is asking */
        first = wait_queue_after(key, first);
    }
    return first != NULL && wait_before(first->ticket, t);
}

/* One key's lists: ordered, linked both ways, counted, each place its
 * ticket's. */
static void key_check(const struct wait_key *k)
{
    uint32_t count = 0;
    for (uint32_t p = 0; p < WAIT_PRIORITIES; p++) {
        uint32_t asking = 0;
        assert((k->head[p] == NULL) == ((k->nonempty >> p & 1) == 0));
        assert((k->head[p] == NULL) == (k->tail[p] == NULL));
        const struct wait_node *previous = NULL;
        for (const struct wait_node *n = k->head[p]; n != NULL; n = n->next) {
            assert(n->key == k);
            assert(n->previous == previous);
            assert(n->ticket->priority == p);
            assert(n->priority == p);
            assert(n->amount == n->ticket->request->requirements[n->requirement].amount);
            assert(previous == NULL || wait_before(previous->ticket, n->ticket));
            assert(wait_queue_place(n->ticket, n->requirement) == n);
            assert(n->asking == (n->ticket->state == WAIT_ASKING));
            asking += n->asking;
            previous = n;
            count++;
        }
        assert(k->tail[p] == previous);
        assert(k->asking[p] == asking);
        assert((k->asking[p] > 0) == ((k->asking_mask >> p & 1) != 0));
    }
    assert(count == k->count);
    assert((count == 0) == k->cooling); /* an empty queue is dropped, or cools */
}

void wait_queue_check(const struct wait *w)
{
    uint32_t keys = 0, cooling = 0;
    for (uint32_t i = 0; i <= w->bucket_mask; i++) {
        for (const struct wait_key *k = w->buckets[i]; k != NULL; k = k->bucket_next) {
            assert((k->hash & w->bucket_mask) == i);
            key_check(k);
            keys++;
        }
    }
    assert(keys == w->key_count);
    const struct wait_key *previous = NULL;
    for (const struct wait_key *k = w->cool_head; k != NULL; k = k->cool_next) {
        assert(k->cooling && k->cool_prev == previous);
        previous = k;
        cooling++;
    }
    assert(w->cool_tail == previous);
    assert(cooling == w->cooling_count);
    wait_timer_check(w);
}
