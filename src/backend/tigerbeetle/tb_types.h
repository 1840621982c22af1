/* TigerBeetle's wire types as C structs: u128, Account, Transfer, the
 * sparse create result, and the numeric codes of commands, operations,
 * flags and results (docs/tigerbeetle-protocol.md). The structs are
 * byte-for-byte the wire layout on a little-endian host (checked below). */
#ifndef LLMLIMIT_TB_TYPES_H
#define LLMLIMIT_TB_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the TigerBeetle wire codec assumes a little-endian host"
#endif

/* u128 as two little-endian halves: the wire order of the 16 bytes. */
typedef struct {
    uint64_t low;
    uint64_t high;
} tb_u128;

static inline tb_u128 tb_u128_make(uint64_t high, uint64_t low)
{
    tb_u128 value = {.low = low, .high = high};
    return value;
}

static inline bool tb_u128_equal(tb_u128 a, tb_u128 b)
{
    return a.low == b.low && a.high == b.high;
}

static inline bool tb_u128_zero(tb_u128 a)
{
    return a.low == 0 && a.high == 0;
}

static inline bool tb_u128_max(tb_u128 a)
{
    return a.low == UINT64_MAX && a.high == UINT64_MAX;
}

static inline tb_u128 tb_u128_from_u64(uint64_t value)
{
    return tb_u128_make(0, value);
}

/* Balances are u128 but our amounts are at most 2^63-1 each; a sum that
 * does not fit u64 saturates (only usage reporting reads these). */
static inline uint64_t tb_u128_saturate(tb_u128 a)
{
    return a.high != 0 ? UINT64_MAX : a.low;
}

struct tb_account {
    tb_u128 id;
    tb_u128 debits_pending;
    tb_u128 debits_posted;
    tb_u128 credits_pending;
    tb_u128 credits_posted;
    tb_u128 user_data_128;
    uint64_t user_data_64;
    uint32_t user_data_32;
    uint32_t reserved;
    uint32_t ledger;
    uint16_t code;
    uint16_t flags;
    uint64_t timestamp;
};

struct tb_transfer {
    tb_u128 id;
    tb_u128 debit_account_id;
    tb_u128 credit_account_id;
    tb_u128 amount;
    tb_u128 pending_id;
    tb_u128 user_data_128;
    uint64_t user_data_64;
    uint32_t user_data_32;
    uint32_t timeout; /* seconds; pending transfers only */
    uint32_t ledger;
    uint16_t code;
    uint16_t flags;
    uint64_t timestamp;
};

/* Sparse create result (0.15.3 and the 0.17 ops 129/130): errors only. */
struct tb_create_result {
    uint32_t index;
    uint32_t result;
};

_Static_assert(sizeof(tb_u128) == 16, "u128 is 16 bytes");
_Static_assert(sizeof(struct tb_account) == 128, "Account is 128 bytes");
_Static_assert(offsetof(struct tb_account, user_data_64) == 96, "Account.user_data_64 @96");
_Static_assert(offsetof(struct tb_account, reserved) == 108, "Account.reserved @108");
_Static_assert(offsetof(struct tb_account, ledger) == 112, "Account.ledger @112");
_Static_assert(offsetof(struct tb_account, flags) == 118, "Account.flags @118");
_Static_assert(offsetof(struct tb_account, timestamp) == 120, "Account.timestamp @120");
_Static_assert(sizeof(struct tb_transfer) == 128, "Transfer is 128 bytes");
_Static_assert(offsetof(struct tb_transfer, amount) == 48, "Transfer.amount @48");
_Static_assert(offsetof(struct tb_transfer, pending_id) == 64, "Transfer.pending_id @64");
_Static_assert(offsetof(struct tb_transfer, timeout) == 108, "Transfer.timeout @108");
_Static_assert(offsetof(struct tb_transfer, ledger) == 112, "Transfer.ledger @112");
_Static_assert(offsetof(struct tb_transfer, flags) == 118, "Transfer.flags @118");
_Static_assert(offsetof(struct tb_transfer, timestamp) == 120, "Transfer.timestamp @120");
_Static_assert(sizeof(struct tb_create_result) == 8, "CreateResult is 8 bytes");

/* Header commands a client sends or reads (docs/tigerbeetle-protocol.md
 * "Commands"). */
enum tb_command {
    TB_COMMAND_PING_CLIENT = 3,
    TB_COMMAND_PONG_CLIENT = 4,
    TB_COMMAND_REQUEST = 5,
    TB_COMMAND_REPLY = 8,
    TB_COMMAND_EVICTION = 18,
};

/* Operations; 129-132 exist with the same encoding on 0.15.3 and 0.17. */
enum tb_operation {
    TB_OPERATION_REGISTER = 2,
    TB_OPERATION_CREATE_ACCOUNTS = 129,
    TB_OPERATION_CREATE_TRANSFERS = 130,
    TB_OPERATION_LOOKUP_ACCOUNTS = 131,
    TB_OPERATION_LOOKUP_TRANSFERS = 132,
};

enum tb_account_flag {
    TB_ACCOUNT_LINKED = 1 << 0,
    TB_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS = 1 << 1,
    TB_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS = 1 << 2,
    TB_ACCOUNT_HISTORY = 1 << 3, /* never used: 0.15.3 can crash on it */
};
#define TB_ACCOUNT_FLAGS_KNOWN_0_15 0x000fu

enum tb_transfer_flag {
    TB_TRANSFER_LINKED = 1 << 0,
    TB_TRANSFER_PENDING = 1 << 1,
    TB_TRANSFER_POST_PENDING = 1 << 2,
    TB_TRANSFER_VOID_PENDING = 1 << 3,
    TB_TRANSFER_BALANCING_DEBIT = 1 << 4,
    TB_TRANSFER_BALANCING_CREDIT = 1 << 5,
};
#define TB_TRANSFER_FLAGS_KNOWN_0_15 0x003fu

enum tb_create_account_result {
    TB_ACCOUNT_OK = 0,
    TB_ACCOUNT_LINKED_EVENT_FAILED = 1,
    TB_ACCOUNT_EXISTS_WITH_DIFFERENT_FLAGS = 15,
    TB_ACCOUNT_EXISTS_WITH_DIFFERENT_LEDGER = 19,
    TB_ACCOUNT_EXISTS_WITH_DIFFERENT_CODE = 20,
    TB_ACCOUNT_EXISTS = 21,
};

enum tb_create_transfer_result {
    TB_TRANSFER_OK = 0,
    TB_TRANSFER_LINKED_EVENT_FAILED = 1,
    TB_TRANSFER_LINKED_EVENT_CHAIN_OPEN = 2,
    TB_TRANSFER_TIMESTAMP_MUST_BE_ZERO = 3,
    TB_TRANSFER_RESERVED_FLAG = 4,
    TB_TRANSFER_ID_MUST_NOT_BE_ZERO = 5,
    TB_TRANSFER_ID_MUST_NOT_BE_INT_MAX = 6,
    TB_TRANSFER_FLAGS_ARE_MUTUALLY_EXCLUSIVE = 7,
    TB_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_ZERO = 8,
    TB_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX = 9,
    TB_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_ZERO = 10,
    TB_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX = 11,
    TB_TRANSFER_ACCOUNTS_MUST_BE_DIFFERENT = 12,
    TB_TRANSFER_PENDING_ID_MUST_BE_ZERO = 13,
    TB_TRANSFER_PENDING_ID_MUST_NOT_BE_ZERO = 14,
    TB_TRANSFER_PENDING_ID_MUST_NOT_BE_INT_MAX = 15,
    TB_TRANSFER_PENDING_ID_MUST_BE_DIFFERENT = 16,
    TB_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER = 17,
    TB_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO = 18,
    TB_TRANSFER_LEDGER_MUST_NOT_BE_ZERO = 19,
    TB_TRANSFER_CODE_MUST_NOT_BE_ZERO = 20,
    TB_TRANSFER_DEBIT_ACCOUNT_NOT_FOUND = 21,
    TB_TRANSFER_CREDIT_ACCOUNT_NOT_FOUND = 22,
    TB_TRANSFER_PENDING_TRANSFER_NOT_FOUND = 25,
    TB_TRANSFER_PENDING_TRANSFER_ALREADY_POSTED = 33,
    TB_TRANSFER_PENDING_TRANSFER_ALREADY_VOIDED = 34,
    TB_TRANSFER_PENDING_TRANSFER_EXPIRED = 35,
    TB_TRANSFER_EXISTS_WITH_DIFFERENT_FLAGS = 36,
    TB_TRANSFER_EXISTS_WITH_DIFFERENT_AMOUNT = 39,
    TB_TRANSFER_EXISTS_WITH_DIFFERENT_USER_DATA_32 = 43,
    TB_TRANSFER_EXISTS_WITH_DIFFERENT_CODE = 45,
    TB_TRANSFER_EXISTS = 46,
    TB_TRANSFER_EXCEEDS_CREDITS = 54,
    TB_TRANSFER_EXCEEDS_DEBITS = 55,
    TB_TRANSFER_EXISTS_WITH_DIFFERENT_LEDGER = 67,
    TB_TRANSFER_ID_ALREADY_FAILED = 68,
};

/* exists_with_different_* of a transfer: 36..45, and 67 on 0.17. */
static inline bool tb_transfer_result_exists_different(uint32_t result)
{
    return (result >= 36 && result <= 45) || result == 67;
}

/* Eviction reasons (docs/tigerbeetle-protocol.md "Eviction"); 4..8 only
 * on 0.17. */
enum tb_eviction_reason {
    TB_EVICTION_NO_SESSION = 1,
    TB_EVICTION_RELEASE_TOO_LOW = 2,
    TB_EVICTION_RELEASE_TOO_HIGH = 3,
    TB_EVICTION_INVALID_REQUEST_OPERATION = 4,
    TB_EVICTION_INVALID_REQUEST_BODY = 5,
    TB_EVICTION_INVALID_REQUEST_BODY_SIZE = 6,
    TB_EVICTION_SESSION_TOO_LOW = 7,
    TB_EVICTION_SESSION_RELEASE_MISMATCH = 8,
};

/* Release = patch | minor << 8 | major << 16 (docs/tigerbeetle-protocol.md
 * "Releases and dialects"). */
#define TB_RELEASE(major, minor, patch)                                                            \
    ((uint32_t)(patch) | (uint32_t)(minor) << 8 | (uint32_t)(major) << 16)
#define TB_RELEASE_0_15_3 TB_RELEASE(0, 15, 3)
#define TB_RELEASE_0_16_0 TB_RELEASE(0, 16, 0)
#define TB_RELEASE_0_16_4 TB_RELEASE(0, 16, 4)

/* How this client speaks to a server, chosen from its release:
 * - 0.15: release must equal the server's, register has no body, the
 *   server crashes on a malformed body, failed ids may be retried.
 * - 0.17 (0.16.0 and later): 256-byte register body, batch_size_limit from
 *   the register reply, failed ids are burnt (id_already_failed). */
enum tb_dialect {
    TB_DIALECT_0_15 = 1,
    TB_DIALECT_0_17 = 2,
};

static inline enum tb_dialect tb_dialect_for_release(uint32_t server_release)
{
    return server_release >= TB_RELEASE_0_16_0 ? TB_DIALECT_0_17 : TB_DIALECT_0_15;
}

#endif
