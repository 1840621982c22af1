/* Body validation: sizes per operation, and the static checks of accounts
 * and transfers in the order TigerBeetle 0.15.3's state machine makes them
 * (create_account, create_transfer, post_or_void_pending_transfer). */
#include "tbc_body.h"

#include <assert.h>

#include "tbc_bounds.h"

uint32_t tbc_body_event_size(uint8_t operation)
{
    switch (operation) {
    case TBC_OPERATION_CREATE_ACCOUNTS:
    case TBC_OPERATION_CREATE_TRANSFERS:
        return TBC_EVENT_SIZE;
    case TBC_OPERATION_LOOKUP_ACCOUNTS:
    case TBC_OPERATION_LOOKUP_TRANSFERS:
        return TBC_ID_SIZE;
    default:
        return 0;
    }
}

uint32_t tbc_body_result_size(uint8_t operation)
{
    switch (operation) {
    case TBC_OPERATION_CREATE_ACCOUNTS:
    case TBC_OPERATION_CREATE_TRANSFERS:
        return (uint32_t)sizeof(struct tbc_create_result);
    case TBC_OPERATION_LOOKUP_ACCOUNTS:
    case TBC_OPERATION_LOOKUP_TRANSFERS:
        return TBC_EVENT_SIZE;
    default:
        return 0;
    }
}

uint32_t tbc_body_events_max(uint8_t operation, uint32_t batch_size_limit)
{
    uint32_t event_size = tbc_body_event_size(operation);
    uint32_t result_size = tbc_body_result_size(operation);
    if (event_size == 0)
        return 0;
    if (batch_size_limit > TBC_BODY_SIZE_MAX)
        batch_size_limit = TBC_BODY_SIZE_MAX;
    /* Both the request and the reply must fit (docs/tigerbeetle-protocol.md
     * "Operations and batch limits"). */
    uint32_t by_request = batch_size_limit / event_size;
    uint32_t by_reply = TBC_BODY_SIZE_MAX / result_size;
    uint32_t events = by_request < by_reply ? by_request : by_reply;
    events = events < TBC_BATCH_EVENTS_MAX ? events : TBC_BATCH_EVENTS_MAX;
    /* Both directions fit the message bound. */
    assert((uint64_t)events * event_size <= TBC_BODY_SIZE_MAX);
    assert((uint64_t)events * result_size <= TBC_BODY_SIZE_MAX);
    return events;
}

uint32_t tbc_account_check(const struct tbc_account *a, enum tbc_dialect dialect)
{
    (void)dialect; /* we never set the 0.16+ flags (imported, closed) */
    if (a->timestamp != 0)
        return 3; /* timestamp_must_be_zero */
    if (a->reserved != 0)
        return 4; /* reserved_field */
    if ((a->flags & ~TBC_ACCOUNT_FLAGS_KNOWN_0_15) != 0)
        return 5; /* reserved_flag */
    if (tbc_u128_zero(a->id))
        return 6;
    if (tbc_u128_max(a->id))
        return 7;
    if ((a->flags & TBC_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS) &&
        (a->flags & TBC_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS))
        return 8; /* flags_are_mutually_exclusive */
    if (!tbc_u128_zero(a->debits_pending))
        return 9;
    if (!tbc_u128_zero(a->debits_posted))
        return 10;
    if (!tbc_u128_zero(a->credits_pending))
        return 11;
    if (!tbc_u128_zero(a->credits_posted))
        return 12;
    if (a->ledger == 0)
        return 13;
    if (a->code == 0)
        return 14;
    return 0;
}

static uint32_t check_post_or_void(const struct tbc_transfer *t)
{
    bool post = (t->flags & TBC_TRANSFER_POST_PENDING) != 0;
    bool cancel = (t->flags & TBC_TRANSFER_VOID_PENDING) != 0;
    if (post && cancel)
        return TBC_TRANSFER_FLAGS_ARE_MUTUALLY_EXCLUSIVE;
    if (t->flags &
        (TBC_TRANSFER_PENDING | TBC_TRANSFER_BALANCING_DEBIT | TBC_TRANSFER_BALANCING_CREDIT))
        return TBC_TRANSFER_FLAGS_ARE_MUTUALLY_EXCLUSIVE;
    if (tbc_u128_zero(t->pending_id))
        return TBC_TRANSFER_PENDING_ID_MUST_NOT_BE_ZERO;
    if (tbc_u128_max(t->pending_id))
        return TBC_TRANSFER_PENDING_ID_MUST_NOT_BE_INT_MAX;
    if (tbc_u128_equal(t->pending_id, t->id))
        return TBC_TRANSFER_PENDING_ID_MUST_BE_DIFFERENT;
    if (t->timeout != 0)
        return TBC_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER;
    /* amount 0 means "the pending amount" on 0.15.3 and "zero" on 0.17
     * (docs/tigerbeetle-protocol.md "Where 0.15.3 and 0.17 differ"): we
     * always send the amount itself. */
    if (tbc_u128_zero(t->amount))
        return TBC_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO;
    return 0;
}

uint32_t tbc_transfer_check(const struct tbc_transfer *t, enum tbc_dialect dialect)
{
    (void)dialect; /* the same rules hold for what we send to either */
    if (t->timestamp != 0)
        return TBC_TRANSFER_TIMESTAMP_MUST_BE_ZERO;
    if ((t->flags & ~TBC_TRANSFER_FLAGS_KNOWN_0_15) != 0)
        return TBC_TRANSFER_RESERVED_FLAG;
    if (tbc_u128_zero(t->id))
        return TBC_TRANSFER_ID_MUST_NOT_BE_ZERO;
    if (tbc_u128_max(t->id))
        return TBC_TRANSFER_ID_MUST_NOT_BE_INT_MAX;
    if (t->flags & (TBC_TRANSFER_POST_PENDING | TBC_TRANSFER_VOID_PENDING))
        return check_post_or_void(t);
    if (tbc_u128_zero(t->debit_account_id))
        return TBC_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_ZERO;
    if (tbc_u128_max(t->debit_account_id))
        return TBC_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX;
    if (tbc_u128_zero(t->credit_account_id))
        return TBC_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_ZERO;
    if (tbc_u128_max(t->credit_account_id))
        return TBC_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX;
    if (tbc_u128_equal(t->debit_account_id, t->credit_account_id))
        return TBC_TRANSFER_ACCOUNTS_MUST_BE_DIFFERENT;
    if (!tbc_u128_zero(t->pending_id))
        return TBC_TRANSFER_PENDING_ID_MUST_BE_ZERO;
    if (!(t->flags & TBC_TRANSFER_PENDING) && t->timeout != 0)
        return TBC_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER;
    /* Zero is "no upper bound" for a balancing transfer on 0.15.3 only:
     * never sent, in either role. */
    if (tbc_u128_zero(t->amount))
        return TBC_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO;
    if (t->ledger == 0)
        return TBC_TRANSFER_LEDGER_MUST_NOT_BE_ZERO;
    if (t->code == 0)
        return TBC_TRANSFER_CODE_MUST_NOT_BE_ZERO;
    return 0;
}

static int validate_events(uint8_t operation, const void *body, uint32_t count,
                           enum tbc_dialect dialect, uint32_t *bad_index, uint32_t *bad_code)
{
    for (uint32_t i = 0; i < count; i++) {
        uint32_t code = 0;
        uint16_t flags = 0;
        if (operation == TBC_OPERATION_CREATE_TRANSFERS) {
            const struct tbc_transfer *t = (const struct tbc_transfer *)body + i;
            code = tbc_transfer_check(t, dialect);
            flags = t->flags;
        } else {
            const struct tbc_account *a = (const struct tbc_account *)body + i;
            code = tbc_account_check(a, dialect);
            flags = a->flags;
        }
        if (code != 0) {
            assert(i < count);
            *bad_index = i;
            *bad_code = code;
            return TBC_BODY_BAD_EVENT;
        }
        /* An open chain at the end fails the whole chain on the server. */
        if (i + 1 == count && (flags & 1u) != 0) {
            *bad_index = i;
            *bad_code = TBC_TRANSFER_LINKED_EVENT_CHAIN_OPEN;
            return TBC_BODY_CHAIN_OPEN;
        }
    }
    return TBC_BODY_OK;
}

int tbc_body_validate(uint8_t operation, const void *body, uint32_t size, uint32_t batch_size_limit,
                      enum tbc_dialect dialect, uint32_t *bad_index, uint32_t *bad_code)
{
    *bad_index = 0;
    *bad_code = 0;
    uint32_t event_size = tbc_body_event_size(operation);
    if (event_size == 0)
        return TBC_BODY_BAD_OPERATION;
    if (size % event_size != 0)
        return TBC_BODY_NOT_MULTIPLE;
    if (size > batch_size_limit || size > TBC_BODY_SIZE_MAX)
        return TBC_BODY_TOO_LARGE;
    uint32_t count = size / event_size;
    assert(count * event_size == size); /* whole events only */
    if (count > tbc_body_events_max(operation, batch_size_limit))
        return TBC_BODY_TOO_MANY;
    if (operation == TBC_OPERATION_CREATE_ACCOUNTS || operation == TBC_OPERATION_CREATE_TRANSFERS)
        return validate_events(operation, body, count, dialect, bad_index, bad_code);
    return TBC_BODY_OK;
}
