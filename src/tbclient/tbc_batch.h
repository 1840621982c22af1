/* Microbatching (docs/tigerbeetle.md "The native client"): many items of work
 * packed into one TigerBeetle request, and the reply's results handed back to
 * the item each came from. An item is the unit that is never split: a linked
 * chain always lies inside one item, so packing whole items can never split a
 * chain. Pure functions over caller-owned lists, no I/O, so the packing and
 * the result mapping are tested on their own. */
#ifndef LLMLIMIT_TB_BATCH_H
#define LLMLIMIT_TB_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "tbc_types.h"

enum tbc_item_status {
    TBC_ITEM_OK = 0,          /* the server answered; see codes/found */
    TBC_ITEM_UNAVAILABLE = 1, /* no answer by the deadline: outcome unknown */
    TBC_ITEM_INVALID = 2,     /* rejected before sending (bad event), nothing sent */
};

struct tbc_item;
typedef void (*tb_item_done_fn)(struct tbc_item *item);

/* One unit of work: event_count events of one operation. The submitter
 * owns it from submit until done() runs; the caller owns the memory. */
struct tbc_item {
    struct tbc_item *next; /* list link while queued or batched */
    uint64_t sequence;     /* submission order */
    int64_t queued_at_ns;  /* monotonic, when submitted */
    uint8_t operation;
    uint32_t event_count;
    const void *events; /* accounts, transfers, or 16-byte ids */

    /* Results, filled before done(). */
    enum tbc_item_status status;
    uint32_t *codes;        /* creates: a result per event, 0 = ok (caller's array) */
    void *objects;          /* lookups: event_count slots of 128 bytes (caller's) */
    uint8_t *found;         /* lookups: found[i] = 1 if events[i] was found */
    uint64_t timestamp;     /* creates: the cluster timestamp of the first event */
    uint32_t invalid_index; /* TBC_ITEM_INVALID: which event, and its code */
    uint32_t invalid_code;

    int64_t deadline_ms; /* monotonic */
    bool patient;        /* admin work: while no session is connected, waits
                            TBC_PATIENT_FAIL_AFTER_MS rather than TBC_FAIL_FAST_AFTER_MS */
    tb_item_done_fn done;
    void *context;
};

/* Takes whole items from the front of the list at *head (tail *tail)
 * while their events fit in events_max, at least one item (which must fit
 * by itself). Returns the first taken item (its list ends with NULL) and
 * the event total in *events_out. */
struct tbc_item *tbc_batch_take(struct tbc_item **head, struct tbc_item **tail, uint32_t events_max,
                                uint32_t *events_out);

/* Copies the batch's events back to back into body; returns the bytes. */
uint32_t tbc_batch_encode(const struct tbc_item *batch, uint32_t event_size, uint8_t *body);

/* Hands a create reply (sparse {index, result} errors, ascending index) to
 * the items: every event not named is ok. timestamp is the reply header's
 * (the batch's last event); event i of n got timestamp - n + i + 1.
 * Returns 0, or -1 if the reply is malformed (then nothing is trusted). */
int tbc_batch_distribute_create(struct tbc_item *batch, uint32_t event_total, const uint8_t *reply,
                                uint32_t reply_size, uint64_t timestamp);

/* Hands a lookup reply (the found objects in request order; ids not found
 * are left out) to the items, matching by id. 0 or -1 if malformed. */
int tbc_batch_distribute_lookup(struct tbc_item *batch, const uint8_t *reply, uint32_t reply_size);

/* True if the item's events are a whole number of closed chains: the last
 * event is not linked (creates only; lookups are always closed). */
bool tbc_item_chains_closed(const struct tbc_item *item);

#endif
