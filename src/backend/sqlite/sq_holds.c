/* The sqlite backend's live holds: per limit period, an AVL tree ordered by
 * expiry whose nodes carry subtree sums, so retry-after is exact in
 * O(log n); and the lease references the holds of one lease share. */
#include "sq_holds.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"

/* ---- AVL tree of holds. */

static int32_t height_of(const struct sq_hold *node)
{
    return node == NULL ? 0 : node->height;
}

uint64_t sq_holds_sum(const struct sq_hold *root)
{
    return root == NULL ? 0 : root->amount_sum;
}

uint64_t sq_holds_live(const struct sq_hold *root)
{
    return root == NULL ? 0 : root->live_count;
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
    node->live_count =
        sq_holds_live(node->left) + sq_holds_live(node->right) + (node->completed ? 0 : 1);
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

uint64_t sq_holds_live_until(const struct sq_hold *root, int64_t at_ms)
{
    uint64_t count = 0;
    /* Down one path: a node at or before at_ms brings its whole left subtree. */
    while (root != NULL) {
        if (root->expires_at_ms <= at_ms) {
            count += sq_holds_live(root->left) + (root->completed ? 0 : 1);
            root = root->right;
        } else {
            root = root->left;
        }
    }
    return count;
}

const struct sq_hold *sq_holds_first_live(const struct sq_hold *root)
{
    if (sq_holds_live(root) == 0)
        return NULL;
    for (;;) {
        assert(root != NULL);
        if (sq_holds_live(root->left) > 0)
            root = root->left;
        else if (!root->completed)
            return root;
        else
            root = root->right; /* the live ones are all on the right */
    }
}

bool sq_holds_each_live(const struct sq_hold *root,
                        bool (*visit)(void *context, const struct sq_hold *hold), void *context)
{
    /* In order with an explicit stack: the height is bounded. */
    const struct sq_hold *stack[SQ_HOLDS_HEIGHT_MAX + 1];
    uint32_t depth = 0;
    const struct sq_hold *node = root;
    while (node != NULL || depth > 0) {
        while (node != NULL) {
            if (sq_holds_live(node) == 0) {
                node = NULL; /* nothing to visit below */
                break;
            }
            assert(depth <= SQ_HOLDS_HEIGHT_MAX);
            stack[depth++] = node;
            node = node->left;
        }
        if (depth == 0)
            break;
        node = stack[--depth];
        if (!node->completed && !visit(context, node))
            return false;
        node = node->right;
    }
    return true;
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
