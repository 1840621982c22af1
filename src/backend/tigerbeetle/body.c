/* Body validation: sizes per operation, and the static checks of accounts
 * and transfers in the order TigerBeetle 0.15.3's state machine makes them
 * (create_account, create_transfer, post_or_void_pending_transfer). */
#include "body.h"

#include <assert.h>

#include "tb_bounds.h"

uint32_t tb_body_event_size(uint8_t operation)
{
    switch (operation) {
    case TB_OPERATION_CREATE_ACCOUNTS:
    case TB_OPERATION_CREATE_TRANSFERS:
        return TB_EVENT_SIZE;
    case TB_OPERATION_LOOKUP_ACCOUNTS:
    case TB_OPERATION_LOOKUP_TRANSFERS:
        return TB_ID_SIZE;
    default:
        return 0;
    }
}

uint32_t tb_body_result_size(uint8_t operation)
{
    switch (operation) {
    case TB_OPERATION_CREATE_ACCOUNTS:
    case TB_OPERATION_CREATE_TRANSFERS:
        return (uint32_t)sizeof(struct tb_create_result);
    case TB_OPERATION_LOOKUP_ACCOUNTS:
    case TB_OPERATION_LOOKUP_TRANSFERS:
        return TB_EVENT_SIZE;
    default:
        return 0;
    }
}

uint32_t tb_body_events_max(uint8_t operation, uint32_t batch_size_limit)
{
    uint32_t event_size = tb_body_event_size(operation);
    uint32_t result_size = tb_body_result_size(operation);
    if (event_size == 0)
        return 0;
    if (batch_size_limit > TB_BODY_SIZE_MAX)
        batch_size_limit = TB_BODY_SIZE_MAX;
    /* Both the request and the reply must fit (docs/tigerbeetle-protocol.md
     * "Operations and batch limits"). */
    uint32_t by_request = batch_size_limit / event_size;
    uint32_t by_reply = TB_BODY_SIZE_MAX / result_size;
    uint32_t events = by_request < by_reply ? by_request : by_reply;
    events = events < TB_BATCH_EVENTS_MAX ? events : TB_BATCH_EVENTS_MAX;
    /* Both directions fit the message bound. */
    assert((uint64_t)events * event_size <= TB_BODY_SIZE_MAX);
    assert((uint64_t)events * result_size <= TB_BODY_SIZE_MAX);
    return events;
}

uint32_t tb_account_check(const struct tb_account *a, enum tb_dialect dialect)
{
    (void)dialect; /* we never set the 0.16+ flags (imported, closed) */
    if (a->timestamp != 0)
        return 3; /* timestamp_must_be_zero */
    if (a->reserved != 0)
        return 4; /* reserved_field */
    if ((a->flags & ~TB_ACCOUNT_FLAGS_KNOWN_0_15) != 0)
        return 5; /* reserved_flag */
    if (tb_u128_zero(a->id))
        return 6;
    if (tb_u128_max(a->id))
        return 7;
    if ((a->flags & TB_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS) &&
        (a->flags & TB_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS))
        return 8; /* flags_are_mutually_exclusive */
    if (!tb_u128_zero(a->debits_pending))
        return 9;
    if (!tb_u128_zero(a->debits_posted))
        return 10;
    if (!tb_u128_zero(a->credits_pending))
        return 11;
    if (!tb_u128_zero(a->credits_posted))
        return 12;
    if (a->ledger == 0)
        return 13;
    if (a->code == 0)
        return 14;
    return 0;
}

static uint32_t check_post_or_void(const struct tb_transfer *t)
{
    bool post = (t->flags & TB_TRANSFER_POST_PENDING) != 0;
    bool cancel = (t->flags & TB_TRANSFER_VOID_PENDING) != 0;
    if (post && cancel)
        return TB_TRANSFER_FLAGS_ARE_MUTUALLY_EXCLUSIVE;
    if (t->flags &
        (TB_TRANSFER_PENDING | TB_TRANSFER_BALANCING_DEBIT | TB_TRANSFER_BALANCING_CREDIT))
        return TB_TRANSFER_FLAGS_ARE_MUTUALLY_EXCLUSIVE;
    if (tb_u128_zero(t->pending_id))
        return TB_TRANSFER_PENDING_ID_MUST_NOT_BE_ZERO;
    if (tb_u128_max(t->pending_id))
        return TB_TRANSFER_PENDING_ID_MUST_NOT_BE_INT_MAX;
    if (tb_u128_equal(t->pending_id, t->id))
        return TB_TRANSFER_PENDING_ID_MUST_BE_DIFFERENT;
    if (t->timeout != 0)
        return TB_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER;
    /* amount 0 means "the pending amount" on 0.15.3 and "zero" on 0.17
     * (docs/tigerbeetle-protocol.md "Where 0.15.3 and 0.17 differ"): we
     * always send the amount itself. */
    if (tb_u128_zero(t->amount))
        return TB_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO;
    return 0;
}

uint32_t tb_transfer_check(const struct tb_transfer *t, enum tb_dialect dialect)
{
    (void)dialect; /* the same rules hold for what we send to either */
    if (t->timestamp != 0)
        return TB_TRANSFER_TIMESTAMP_MUST_BE_ZERO;
    if ((t->flags & ~TB_TRANSFER_FLAGS_KNOWN_0_15) != 0)
        return TB_TRANSFER_RESERVED_FLAG;
    if (tb_u128_zero(t->id))
        return TB_TRANSFER_ID_MUST_NOT_BE_ZERO;
    if (tb_u128_max(t->id))
        return TB_TRANSFER_ID_MUST_NOT_BE_INT_MAX;
    if (t->flags & (TB_TRANSFER_POST_PENDING | TB_TRANSFER_VOID_PENDING))
        return check_post_or_void(t);
    if (tb_u128_zero(t->debit_account_id))
        return TB_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_ZERO;
    if (tb_u128_max(t->debit_account_id))
        return TB_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX;
    if (tb_u128_zero(t->credit_account_id))
        return TB_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_ZERO;
    if (tb_u128_max(t->credit_account_id))
        return TB_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX;
    if (tb_u128_equal(t->debit_account_id, t->credit_account_id))
        return TB_TRANSFER_ACCOUNTS_MUST_BE_DIFFERENT;
    if (!tb_u128_zero(t->pending_id))
        return TB_TRANSFER_PENDING_ID_MUST_BE_ZERO;
    if (!(t->flags & TB_TRANSFER_PENDING) && t->timeout != 0)
        return TB_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER;
    /* Zero is "no upper bound" for a balancing transfer on 0.15.3 only:
     * never sent, in either role. */
    if (tb_u128_zero(t->amount))
        return TB_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO;
    if (t->ledger == 0)
        return TB_TRANSFER_LEDGER_MUST_NOT_BE_ZERO;
    if (t->code == 0)
        return TB_TRANSFER_CODE_MUST_NOT_BE_ZERO;
    return 0;
}

static int validate_events(uint8_t operation, const void *body, uint32_t count,
                           enum tb_dialect dialect, uint32_t *bad_index, uint32_t *bad_code)
{
    for (uint32_t i = 0; i < count; i++) {
        uint32_t code = 0;
        uint16_t flags = 0;
        if (operation == TB_OPERATION_CREATE_TRANSFERS) {
            const struct tb_transfer *t = (const struct tb_transfer *)body + i;
            code = tb_transfer_check(t, dialect);
            flags = t->flags;
        } else {
            const struct tb_account *a = (const struct tb_account *)body + i;
            code = tb_account_check(a, dialect);
            flags = a->flags;
        }
        if (code != 0) {
            assert(i < count);
            *bad_index = i;
            *bad_code = code;
            return TB_BODY_BAD_EVENT;
        }
        /* An open chain at the end fails the whole chain on the server. */
        if (i + 1 == count && (flags & 1u) != 0) {
            *bad_index = i;
            *bad_code = TB_TRANSFER_LINKED_EVENT_CHAIN_OPEN;
            return TB_BODY_CHAIN_OPEN;
        }
    }
    return TB_BODY_OK;
}

int tb_body_validate(uint8_t operation, const void *body, uint32_t size, uint32_t batch_size_limit,
                     enum tb_dialect dialect, uint32_t *bad_index, uint32_t *bad_code)
{
    *bad_index = 0;
    *bad_code = 0;
    uint32_t event_size = tb_body_event_size(operation);
    if (event_size == 0)
        return TB_BODY_BAD_OPERATION;
    if (size % event_size != 0)
        return TB_BODY_NOT_MULTIPLE;
    if (size > batch_size_limit || size > TB_BODY_SIZE_MAX)
        return TB_BODY_TOO_LARGE;
    uint32_t count = size / event_size;
    assert(count * event_size == size); /* whole events only */
    if (count > tb_body_events_max(operation, batch_size_limit))
        return TB_BODY_TOO_MANY;
    if (operation == TB_OPERATION_CREATE_ACCOUNTS || operation == TB_OPERATION_CREATE_TRANSFERS)
        return validate_events(operation, body, count, dialect, bad_index, bad_code);
    return TB_BODY_OK;
}
