/* The sqlite backend's leases as the writer works on them (sq_leases.c). A
 * lease is one row of the leases table with its reservations packed in
 * `items`; the writer loads it once per transaction, changes it in memory
 * and writes it (and one event_log row with its new audit events) when the
 * transaction ends, so a reserve costs one row and a complete one update.
 * The expiries, the callers' budget counters and the audit log's key ranges
 * of the transaction are written when it ends too. */
#ifndef LLMLIMIT_BACKEND_SQLITE_LEASES_H
#define LLMLIMIT_BACKEND_SQLITE_LEASES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/bounds.h"
#include "sq_holds.h"
#include "sq_map.h"
#include "sq_mirror.h"
#include "sq_queue.h"

struct sq_backend;

/* The values of enum lease_view_state (backend.h), so that a lease's state
 * is its view's; the leases table stores their names (sq_leases.c). */
enum sq_lease_state {
    SQ_LEASE_ALLOWED = LEASE_VIEW_ALLOWED,
    SQ_LEASE_DENIED = LEASE_VIEW_DENIED,
    SQ_LEASE_COMPLETED = LEASE_VIEW_COMPLETED,
    SQ_LEASE_RELEASED = LEASE_VIEW_RELEASED,
};

enum sq_item_state {
    SQ_ITEM_RESERVED,
    SQ_ITEM_COMMITTED,
    SQ_ITEM_RELEASED,
    SQ_ITEM_EXPIRED,
    SQ_ITEM_COMMITTED_POST_EXPIRY,
};

/* One reservation: one requirement of an allowed lease. */
struct sq_lease_item {
    int64_t limit_id;
    uint64_t amount;
    int64_t actual; /* -1: not completed */
    uint64_t held;  /* what it holds in the mirror while live */
    uint64_t debt;  /* rolling overage debt carried while live */
    int64_t period_start_ms;
    int64_t expires_at_ms;
    int64_t committed_at_ms; /* 0: not committed */
    enum sq_item_state state;
    bool live; /* holds capacity (or rolling debt) in the mirror */
};

/* One audit event, buffered until the lease is written. type and detail
 * are string constants. */
struct sq_lease_event {
    int64_t at_ms;
    const char *type;
    int64_t limit_id;
    uint64_t amount;
    uint64_t actual;
    const char *detail;
};

/* Room kept inside each record, so that most leases need no allocation. */
#define SQ_LEASE_INLINE_ITEMS 4
#define SQ_LEASE_INLINE_EVENTS 8
#define SQ_LEASE_INLINE_TEXT 96

struct sq_lease_rec {
    struct sq_lease_rec *next_free; /* in lease_cache.free_recs */
    int64_t seq;
    enum sq_lease_state state;
    bool is_new;              /* not in the table yet */
    bool dirty;               /* changed since loaded or written */
    bool pinned;              /* in use by the current request: a flush keeps it */
    struct sq_lease_ref *ref; /* new leases: shared with their holds */
    struct sq_skip origin; /* the request that last touched it (to skip if it cannot be written) */
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    char *fingerprint; /* the requirement set, canonical text */
    char *denied;      /* the keys that did not fit, one per line */
    char *event_rows;  /* its event_log rows, "id,id,..." */
    char *mcp_server;  /* a new tool call's lease: its MCP server and tool (heap); else NULL */
    char *tool;
    char inline_fingerprint[SQ_LEASE_INLINE_TEXT];
    char inline_denied[SQ_LEASE_INLINE_TEXT];
    char inline_event_rows[SQ_LEASE_INLINE_TEXT];
    int64_t reserved_at_ms;
    int64_t expires_at_ms;
    int64_t retry_after_ms;
    int64_t created_at_ms;
    int64_t finished_at_ms; /* 0: not finished */
    uint32_t item_count;
    uint32_t item_capacity;
    struct sq_lease_item *items;
    uint32_t event_count;
    uint32_t event_capacity;
    struct sq_lease_event *events;
    struct sq_lease_item inline_items[SQ_LEASE_INLINE_ITEMS];
    struct sq_lease_event inline_events[SQ_LEASE_INLINE_EVENTS];
};

/* Holds that expired in this transaction: written at its end as rows of
 * the expirations table and one event_log row of `expired` events. */
struct sq_expiry {
    int64_t row_id;
    int64_t limit_id;
    int64_t at_ms;
    uint64_t amount;
    struct sq_lease_ref *lease; /* kept until written */
    bool audited;               /* a reservation that was never completed */
};

/* A caller's budget counters changed in this transaction, added to
 * caller_usage once when it ends. */
struct sq_caller_delta {
    int64_t limit_id;
    int64_t period_start_ms;
    int64_t reserved;
    int64_t used;
    int64_t debt;
    int64_t calls;
    char caller[CALLER_LENGTH_MAX + 1];
};

/* The event_log rows written in this transaction that hold events of a
 * key: one event_keys entry when it ends. */
struct sq_key_range {
    const char *key; /* the limit's (limits are never freed while the mirror lives) */
    int64_t first_event;
    int64_t last_event;
};

struct sq_lease_cache {
    struct sq_map by_id;  /* hash of lease_id */
    struct sq_map by_seq; /* hash of seq */
    struct sq_lease_rec **recs;
    uint32_t count;
    uint32_t capacity;
    struct sq_lease_rec *free_recs; /* records to reuse, at most SQ_LEASE_CACHE_MAX */
    uint32_t free_count;
    struct sq_expiry *expiries;
    uint32_t expiry_count;
    uint32_t expiry_capacity;
    struct sq_map ranges_by_key; /* key_range by hash of key */
    struct sq_key_range *ranges;
    uint32_t range_count;
    uint32_t range_capacity;
    struct sq_map callers_by_key; /* caller_delta by hash of (limit, period, caller) */
    struct sq_caller_delta *callers;
    uint32_t caller_count;
    uint32_t caller_capacity;
};

/* Each returns SQLITE_DONE/SQLITE_ROW as said, or an SQLite error code
 * (SQLITE_NOMEM for memory). */
/* SQLITE_ROW with *out (from this transaction's cache or the table),
 * SQLITE_DONE when the lease id is unknown. */
int sq_leases_find(struct sq_backend *backend, const char *lease_id, struct sq_lease_rec **out);
/* SQLITE_ROW with *out; SQLITE_CORRUPT when no lease has this seq. */
int sq_leases_by_seq(struct sq_backend *backend, int64_t seq, struct sq_lease_rec **out);
/* A new lease (is_new, dirty) with room for item_count items, in the cache. */
int sq_leases_new(struct sq_backend *backend, const char *lease_id, uint32_t item_count,
                  struct sq_lease_rec **out);
/* Renames a lease that is forgotten (lease_retention_ms) to lease_id#seq,
 * so its id can name a new lease; its rows and events stay. */
int sq_leases_forget(struct sq_backend *backend, struct sq_lease_rec *rec);
int sq_lease_event(struct sq_backend *backend, struct sq_lease_rec *rec, int64_t at_ms,
                   const char *type, int64_t limit_id, uint64_t amount, uint64_t actual,
                   const char *detail);
/* Records a hold's expiry, written when the transaction ends. */
int sq_leases_expired(struct sq_backend *backend, const struct sq_expiry *expiry);
/* Adds to a caller's counters of a budget period (nothing for other kinds),
 * written when the transaction ends; calls counts completed leases. */
int sq_leases_caller_add(struct sq_backend *backend, const struct sq_limit *limit,
                         int64_t period_start_ms, const char *caller, int64_t reserved,
                         int64_t used, int64_t debt, int64_t calls);
/* A limit's own event (limit_changed), written at once as its own row. */
int sq_leases_limit_event(struct sq_backend *backend, int64_t at_ms, const struct sq_limit *limit,
                          uint64_t amount, const char *detail);
/* Writes every changed lease and its events; keeps pinned leases cached,
 * frees the others. */
int sq_leases_flush(struct sq_backend *backend);
/* Flushes when the cache holds more than SQ_LEASE_CACHE_MAX leases. */
int sq_leases_flush_if_full(struct sq_backend *backend);
/* Forgets the cache without writing (the transaction rolled back). */
void sq_leases_discard(struct sq_backend *backend);
void sq_leases_free(struct sq_backend *backend);
/* Sets rec->fingerprint, rec->denied or rec->event_rows to a copy of text
 * (inline when it fits). */
int sq_lease_set_text(struct sq_lease_rec *rec, char **field, const char *text);

#endif
