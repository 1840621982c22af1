/* The sqlite backend's live holds (sq_holds.c): the AVL tree of one limit
 * period's holds, and the reference to its lease each hold keeps. */
#ifndef LLMLIMIT_BACKEND_SQLITE_HOLDS_H
#define LLMLIMIT_BACKEND_SQLITE_HOLDS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/bounds.h"

/* What an expiring hold needs to know of its lease (for the audit
 * event and the caller's counters) without reading the lease row: shared by
 * the lease's holds, freed with the last. */
struct sq_lease_ref {
    uint32_t refs;
    uint32_t caller_offset; /* text: lease_id, NUL, caller, NUL */
    char text[];
};

struct sq_lease_ref *sq_lease_ref_new(const char *lease_id, const char *caller);
struct sq_lease_ref *sq_lease_ref_keep(struct sq_lease_ref *ref);
void sq_lease_ref_drop(struct sq_lease_ref *ref);
static inline const char *sq_lease_ref_caller(const struct sq_lease_ref *ref)
{
    return ref->text + ref->caller_offset;
}

/* Live holds: an AVL tree per limit period ordered by (expiry, row id),
 * each node carrying the sum of the amounts below it and how many of those
 * holds are not completed, so the earliest expiry, a removal, "when will
 * `need` units have expired" and "how many reserved holds expire by T" are
 * all O(log n). A node's `completed` never changes while it is in a tree. */
struct sq_hold {
    struct sq_hold *left;
    struct sq_hold *right;
    uint64_t amount_sum; /* of this subtree, saturating */
    uint64_t live_count; /* holds of this subtree not completed */
    int64_t row_min;     /* least row_id of this subtree */
    int64_t expires_at_ms;
    int64_t row_id;  /* sq_hold_row_id(lease seq, item index): the reservations view's id */
    uint64_t amount; /* held now: reserved, or (rolling) the completed actual */
    uint64_t debt;   /* rolling overage debt carried until expiry */
    struct sq_lease_ref *lease;
    int32_t height;
    bool completed; /* rolling: completed (counts as used, not reserved) */
};

/* Deepest AVL tree we can ever build (1.44 log2 of 2^64 nodes). */
#define SQ_HOLDS_HEIGHT_MAX 96

struct sq_hold *sq_holds_insert(struct sq_hold *root, struct sq_hold *node);
/* Removes the node with this key; *removed gets it (NULL if absent). */
struct sq_hold *sq_holds_remove(struct sq_hold *root, int64_t expires_at_ms, int64_t row_id,
                                struct sq_hold **removed);
struct sq_hold *sq_holds_find(struct sq_hold *root, int64_t expires_at_ms, int64_t row_id);
struct sq_hold *sq_holds_first(struct sq_hold *root);
/* The hold at which the running sum of amounts, in expiry order, first
 * reaches `need`; NULL if the whole tree holds less. */
struct sq_hold *sq_holds_reaching(const struct sq_hold *root, uint64_t need);
uint64_t sq_holds_sum(const struct sq_hold *root);
/* Holds not completed (reserved by leases still open): all of them, those
 * expiring at or before at_ms, and the first of them in expiry order (NULL
 * when none). */
uint64_t sq_holds_live(const struct sq_hold *root);
uint64_t sq_holds_live_until(const struct sq_hold *root, int64_t at_ms);
const struct sq_hold *sq_holds_first_live(const struct sq_hold *root);
/* Calls visit on each hold not completed, in expiry order, until it
 * returns false. Returns false when it was stopped. */
bool sq_holds_each_live(const struct sq_hold *root,
                        bool (*visit)(void *context, const struct sq_hold *hold), void *context);
int64_t sq_holds_row_min(const struct sq_hold *root); /* INT64_MAX for an empty tree */

/* A hold is one item of one lease: row ids are seq * SQ_LEASE_ITEMS + index. */
#define SQ_LEASE_ITEMS REQUIREMENTS_PER_RESERVE_MAX
static inline int64_t sq_hold_row_id(int64_t seq, uint32_t index)
{
    return seq * SQ_LEASE_ITEMS + (int64_t)index;
}
void sq_holds_free_all(struct sq_hold *root);
/* Frees one hold (and drops its lease_ref). */
void sq_hold_free(struct sq_hold *h);

#endif
