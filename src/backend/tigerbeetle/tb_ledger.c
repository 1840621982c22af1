/* The account model in code: labels, ids and the shapes of the
 * accounts and transfers the backend creates (docs/tigerbeetle.md lists
 * every label). Everything is on ledger TB_LEDGER. */
#include <assert.h>
#include <string.h>

#include "core/ids.h"
#include "core/uuid.h"
#include "tbclient/tbc_ids.h"
#include "tb_backend.h"

bool tb_ledger_ids_known(const struct tb_backend *b)
{
    return __atomic_load_n(&b->id_scheme, __ATOMIC_ACQUIRE) != TB_IDS_UNKNOWN;
}

struct tb_lease_name tb_ledger_lease_name(const struct tb_backend *b, const char *id,
                                          uint32_t length)
{
    uint8_t scheme = __atomic_load_n(&b->id_scheme, __ATOMIC_ACQUIRE);
    assert(scheme != TB_IDS_UNKNOWN); /* every job waits for it (tb_reserve_start, start) */
    struct tb_lease_name name = {id, length, -1};
    /* The gateway's own lease ids are its prefix and a UUIDv7. */
    uint32_t skip = lease_id_is_gateway(id, length) ? sizeof LEASE_ID_GATEWAY_PREFIX - 1 : 0;
    int64_t unix_ms;
    if (scheme == TB_IDS_TIME_ORDERED && uuid_v7_unix_ms(id + skip, length - skip, &unix_ms))
        name.unix_ms = unix_ms;
    return name;
}

/* A lease's id from its label's: on a cluster of time-ordered ids, a UUIDv7
 * lease id's timestamp leads it. */
static tbc_u128 of_lease(const struct tb_lease_name *lease, tbc_u128 id)
{
    return lease->unix_ms >= 0 ? tbc_id_time_ordered(id, (uint64_t)lease->unix_ms) : id;
}

tbc_u128 tb_ledger_reserve_id(const struct tb_lease_name *lease, const struct tb_limit *limit)
{
    return tb_ledger_transfer_id("xfer:reserve:", lease, limit);
}

tbc_u128 tb_ledger_transfer_id(const char *prefix, const struct tb_lease_name *lease,
                               const struct tb_limit *limit)
{
    return of_lease(lease,
                    tbc_id2(prefix, lease->id, lease->length, limit->key, limit->key_length));
}

tbc_u128 tb_ledger_lease_tag(const struct tb_lease_name *lease)
{
    return of_lease(lease, tbc_id1("lease:", lease->id, lease->length));
}

tbc_u128 tb_ledger_final_id(const struct tb_lease_name *lease)
{
    return of_lease(lease, tbc_id1("xfer:final:", lease->id, lease->length));
}

tbc_u128 tb_ledger_period_gate(const struct tb_limit *limit, int64_t period_start_ms)
{
    return tbc_id_period("acct:budget:", period_start_ms, limit->key, limit->key_length);
}

void tb_ledger_period_accounts(const struct tb_limit *limit, int64_t period_start_ms,
                               struct tb_period_accounts *out)
{
    out->gate = tb_ledger_period_gate(limit, period_start_ms);
    out->spend = tbc_id_period("acct:spend:", period_start_ms, limit->key, limit->key_length);
    out->cut = tbc_id_period("acct:cut:", period_start_ms, limit->key, limit->key_length);
}

struct tbc_account tb_ledger_account(tbc_u128 id, uint16_t code, uint16_t flags,
                                     const struct tb_limit *limit)
{
    struct tbc_account account;
    memset(&account, 0, sizeof account);
    account.id = id;
    account.ledger = TB_LEDGER;
    account.code = code;
    account.flags = flags;
    if (limit != NULL) /* which limit, for whoever reads the cluster directly */
        account.user_data_128 = tbc_id1("limit:", limit->key, limit->key_length);
    return account;
}

struct tbc_transfer tb_ledger_transfer(tbc_u128 id, tbc_u128 debit, tbc_u128 credit,
                                       uint64_t amount, uint16_t code, uint16_t flags)
{
    assert(amount > 0); /* amount 0 means different things to 0.15.3 and 0.17 */
    struct tbc_transfer t;
    memset(&t, 0, sizeof t);
    t.id = id;
    t.debit_account_id = debit;
    t.credit_account_id = credit;
    t.amount = tbc_u128_from_u64(amount);
    t.ledger = TB_LEDGER;
    t.code = code;
    t.flags = flags;
    return t;
}

struct tbc_transfer tb_ledger_void(tbc_u128 id, const struct tbc_transfer *pending, uint32_t by)
{
    struct tbc_transfer t;
    memset(&t, 0, sizeof t);
    t.id = id;
    t.pending_id = pending->id;
    /* Every field spelled out as the pending one has it, amount included:
     * no reliance on 0 meaning "inherit". */
    t.debit_account_id = pending->debit_account_id;
    t.credit_account_id = pending->credit_account_id;
    t.amount = pending->amount;
    t.user_data_128 = pending->user_data_128;
    t.user_data_64 = pending->user_data_64;
    t.user_data_32 = by;
    t.ledger = TB_LEDGER;
    t.code = pending->code;
    t.flags = TBC_TRANSFER_VOID_PENDING;
    return t;
}

struct tbc_transfer tb_ledger_settle(tbc_u128 id, tbc_u128 gate, tbc_u128 owed)
{
    /* Balancing on both sides moves min(free capacity of gate, what owed is
     * owed); the amount is only an upper bound, never the 0 sentinel. */
    struct tbc_transfer t =
        tb_ledger_transfer(id, gate, owed, AMOUNT_MAX, TB_CODE_SETTLE,
                           TBC_TRANSFER_BALANCING_DEBIT | TBC_TRANSFER_BALANCING_CREDIT);
    return t;
}

static unsigned __int128 wide(tbc_u128 value)
{
    return ((unsigned __int128)value.high << 64) | value.low;
}

static int64_t to_int64(__int128 value)
{
    if (value > INT64_MAX)
        return INT64_MAX;
    if (value < INT64_MIN)
        return INT64_MIN;
    return (int64_t)value;
}

int64_t tb_ledger_available(const struct tbc_account *a)
{
    __int128 credits = (__int128)wide(a->credits_posted);
    __int128 taken = (__int128)wide(a->debits_posted) + (__int128)wide(a->debits_pending);
    return to_int64(credits - taken);
}

uint64_t tb_ledger_capacity(const struct tbc_account *a)
{
    __int128 capacity = (__int128)wide(a->credits_posted) - (__int128)wide(a->debits_posted);
    return capacity <= 0 ? 0 : (uint64_t)to_int64(capacity);
}

uint64_t tb_ledger_owed(const struct tbc_account *a)
{
    __int128 owed = (__int128)wide(a->debits_posted) - (__int128)wide(a->credits_posted);
    return owed <= 0 ? 0 : (uint64_t)to_int64(owed);
}
