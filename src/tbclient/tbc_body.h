/* Request bodies are checked before they leave this process: a 0.15.3
 * replica panics on a body that is not a whole number of events, and a
 * 0.17 one evicts the session on an oversized or malformed one
 * (docs/tigerbeetle-protocol.md "Body validation"). The per-event checks
 * catch what the server would reject anyway, so a bad event fails locally
 * with the server's code. */
#ifndef LLMLIMIT_TB_BODY_H
#define LLMLIMIT_TB_BODY_H

#include <stdint.h>

#include "tbc_types.h"

enum tbc_body_error {
    TBC_BODY_OK = 0,
    TBC_BODY_NOT_MULTIPLE = -1, /* size is not a multiple of the event size */
    TBC_BODY_TOO_LARGE = -2,    /* over the batch size limit */
    TBC_BODY_TOO_MANY = -3,     /* more events than TBC_BATCH_EVENTS_MAX */
    TBC_BODY_BAD_EVENT = -4,    /* *bad_index, *bad_code say which and why */
    TBC_BODY_BAD_OPERATION = -5,
    TBC_BODY_CHAIN_OPEN = -6, /* the last event is linked */
};

/* Event size on the wire for a data operation (0 for an unknown one). */
uint32_t tbc_body_event_size(uint8_t operation);
/* Result size of one reply element (8 for creates, 128 for lookups). */
uint32_t tbc_body_result_size(uint8_t operation);

/* The most events of this operation one request may carry for a server
 * with this batch_size_limit (body bytes). */
uint32_t tbc_body_events_max(uint8_t operation, uint32_t batch_size_limit);

/* Checks a whole body. Returns TBC_BODY_OK or an error; on
 * TBC_BODY_BAD_EVENT, *bad_index and *bad_code name the first bad event
 * and the result code TigerBeetle would give it. */
int tbc_body_validate(uint8_t operation, const void *body, uint32_t size, uint32_t batch_size_limit,
                      enum tbc_dialect dialect, uint32_t *bad_index, uint32_t *bad_code);

/* One event: 0 if it may be sent, else the server's result code for it. */
uint32_t tbc_transfer_check(const struct tbc_transfer *transfer, enum tbc_dialect dialect);
uint32_t tbc_account_check(const struct tbc_account *account, enum tbc_dialect dialect);

#endif
