/* The sqlite backend's JSON columns (sq_json.c): the items of a lease row and
 * of an event_log row (their layout is in sq_schema.c), written into a
 * growable text and read back. Only what this backend writes is read. */
#ifndef LLMLIMIT_BACKEND_SQLITE_JSON_H
#define LLMLIMIT_BACKEND_SQLITE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bounds.h"
#include "sq_leases.h"

/* A growable text buffer (JSON of items and events). */
struct sq_text {
    char *data;
    size_t length;
    size_t capacity;
};

/* Each writes one JSON array into t; false when out of memory. */
/* The items column of a lease row. */
bool sq_items_json(const struct sq_lease_rec *rec, struct sq_text *t);
/* The items column of the event_log row of a lease's buffered events. */
bool sq_events_json(const struct sq_lease_rec *rec, struct sq_text *t);
/* The items column of the event_log row of the `expired` events of the
 * audited expiries (each item names its lease and caller); *audited gets
 * their count. */
bool sq_expiries_json(const struct sq_expiry *expiries, uint32_t count, struct sq_text *t,
                      uint32_t *audited);

/* Parses the items column into rec (item_count, items; the items array
 * must have room for REQUIREMENTS_PER_RESERVE_MAX, or rec->item_capacity
 * is grown from the inline room). 0 or -1. */
int sq_lease_items_parse(struct sq_lease_rec *rec, const char *json);

/* An event_log row's items, one at a time: 1 with *out filled (type and
 * detail copied into the buffers), 0 at the end, -1 on a malformed row. */
struct sq_event_reader {
    const char *at;
};
struct sq_event_item_text {
    bool has_lease; /* an expiry row's item names its lease and caller */
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    int64_t at_ms;
    char type[32];
    int64_t limit_id; /* the key is the limit's (limits.key) */
    uint64_t amount;
    uint64_t actual;
    char detail[128];
};
void sq_event_reader_start(struct sq_event_reader *reader, const char *json);
int sq_event_reader_next(struct sq_event_reader *reader, struct sq_event_item_text *out);

#endif
