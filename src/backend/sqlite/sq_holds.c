/* Data structures of the sqlite backend's mirror: an open-addressing hash map
 * (limits by key and by id) and an AVL tree of holds ordered by expiry whose
 * nodes carry subtree sums, so retry-after is exact in O(log n). */
#include "sq_backend.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

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
    map->slots = NULL;
    map->capacity = 0;
    map->count = 0;
}

/* ---- AVL tree of holds. */

static int32_t height_of(const struct sq_hold *node)
{
    return node == NULL ? 0 : node->height;
}

uint64_t sq_holds_sum(const struct sq_hold *root)
{
    return root == NULL ? 0 : root->amount_sum;
}

int64_t sq_holds_row_min(const struct sq_hold *root)
{
    return root == NULL ? INT64_MAX : root->row_min;
}

static void node_update(struct sq_hold *node)
{
    int32_t hl = height_of(node->left), hr = height_of(node->right);
    node->height = (hl > hr ? hl : hr) + 1;
    assert(node->height <= SQ_HOLDS_HEIGHT_MAX);
    node->amount_sum = amount_add_saturating(
        amount_add_saturating(sq_holds_sum(node->left), sq_holds_sum(node->right)), node->amount);
    int64_t left = sq_holds_row_min(node->left), right = sq_holds_row_min(node->right);
    int64_t least = left < right ? left : right;
    node->row_min = node->row_id < least ? node->row_id : least;
}

static struct sq_hold *rotate_right(struct sq_hold *node)
{
    struct sq_hold *pivot = node->left;
    node->left = pivot->right;
    pivot->right = node;
    node_update(node);
    node_update(pivot);
    return pivot;
}

static struct sq_hold *rotate_left(struct sq_hold *node)
{
    struct sq_hold *pivot = node->right;
    node->right = pivot->left;
    pivot->left = node;
    node_update(node);
    node_update(pivot);
    return pivot;
}

static struct sq_hold *rebalance(struct sq_hold *node)
{
    node_update(node);
    int32_t balance = height_of(node->left) - height_of(node->right);
    if (balance > 1) {
        if (height_of(node->left->left) < height_of(node->left->right))
            node->left = rotate_left(node->left);
        return rotate_right(node);
    }
    if (balance < -1) {
        if (height_of(node->right->right) < height_of(node->right->left))
            node->right = rotate_right(node->right);
        return rotate_left(node);
    }
    return node;
}

static int key_compare(int64_t expires_a, int64_t row_a, int64_t expires_b, int64_t row_b)
{
    if (expires_a != expires_b)
        return expires_a < expires_b ? -1 : 1;
    if (row_a != row_b)
        return row_a < row_b ? -1 : 1;
    return 0;
}

/* Recursion depth is the tree height, bounded by SQ_HOLDS_HEIGHT_MAX. */
struct sq_hold *sq_holds_insert(struct sq_hold *root, struct sq_hold *node)
{
    if (root == NULL) {
        node->left = NULL;
        node->right = NULL;
        node_update(node);
        return node;
    }
    int c = key_compare(node->expires_at_ms, node->row_id, root->expires_at_ms, root->row_id);
    assert(c != 0);
    if (c < 0)
        root->left = sq_holds_insert(root->left, node);
    else
        root->right = sq_holds_insert(root->right, node);
    return rebalance(root);
}

static struct sq_hold *remove_first(struct sq_hold *root, struct sq_hold **first)
{
    if (root->left == NULL) {
        *first = root;
        return root->right;
    }
    root->left = remove_first(root->left, first);
    return rebalance(root);
}

struct sq_hold *sq_holds_remove(struct sq_hold *root, int64_t expires_at_ms, int64_t row_id,
                                struct sq_hold **removed)
{
    if (root == NULL) {
        *removed = NULL;
        return NULL;
    }
    int c = key_compare(expires_at_ms, row_id, root->expires_at_ms, root->row_id);
    if (c < 0) {
        root->left = sq_holds_remove(root->left, expires_at_ms, row_id, removed);
    } else if (c > 0) {
        root->right = sq_holds_remove(root->right, expires_at_ms, row_id, removed);
    } else {
        *removed = root;
        if (root->left == NULL || root->right == NULL)
            return root->left != NULL ? root->left : root->right;
        struct sq_hold *successor = NULL;
        struct sq_hold *right = remove_first(root->right, &successor);
        successor->left = root->left;
        successor->right = right;
        return rebalance(successor);
    }
    return rebalance(root);
}

struct sq_hold *sq_holds_find(struct sq_hold *root, int64_t expires_at_ms, int64_t row_id)
{
    while (root != NULL) {
        int c = key_compare(expires_at_ms, row_id, root->expires_at_ms, root->row_id);
        if (c == 0)
            return root;
        root = c < 0 ? root->left : root->right;
    }
    return NULL;
}

struct sq_hold *sq_holds_first(struct sq_hold *root)
{
    if (root == NULL)
        return NULL;
    while (root->left != NULL)
        root = root->left;
    return root;
}

struct sq_hold *sq_holds_reaching(const struct sq_hold *root, uint64_t need)
{
    if (need == 0 || sq_holds_sum(root) < need)
        return NULL;
    /* Descend: skip whole left subtrees when they do not reach `need`. */
    for (;;) {
        assert(root != NULL);
        uint64_t left = sq_holds_sum(root->left);
        if (left >= need) {
            root = root->left;
            continue;
        }
        need -= left;
        if (root->amount >= need)
            return (struct sq_hold *)root;
        need -= root->amount;
        root = root->right;
    }
}

void sq_hold_free(struct sq_hold *h)
{
    if (h == NULL)
        return;
    sq_lease_ref_drop(h->lease);
    free(h);
}

void sq_holds_free_all(struct sq_hold *root)
{
    if (root == NULL)
        return;
    sq_holds_free_all(root->left);
    sq_holds_free_all(root->right);
    sq_hold_free(root);
}

/* ---- Lease references. */

struct sq_lease_ref *sq_lease_ref_new(const char *lease_id, const char *caller)
{
    size_t id_length = strlen(lease_id), caller_length = strlen(caller);
    struct sq_lease_ref *ref = malloc(sizeof *ref + id_length + caller_length + 2);
    if (ref == NULL)
        return NULL;
    ref->refs = 1;
    ref->caller_offset = (uint32_t)id_length + 1;
    memcpy(ref->text, lease_id, id_length + 1);
    memcpy(ref->text + id_length + 1, caller, caller_length + 1);
    return ref;
}

struct sq_lease_ref *sq_lease_ref_keep(struct sq_lease_ref *ref)
{
    if (ref != NULL)
        ref->refs++;
    return ref;
}

void sq_lease_ref_drop(struct sq_lease_ref *ref)
{
    if (ref != NULL && --ref->refs == 0)
        free(ref);
}
