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
} tbc_u128;

static inline tbc_u128 tbc_u128_make(uint64_t high, uint64_t low)
{
    tbc_u128 value = {.low = low, .high = high};
    return value;
}

static inline bool tbc_u128_equal(tbc_u128 a, tbc_u128 b)
{
    return a.low == b.low && a.high == b.high;
}

static inline bool tbc_u128_zero(tbc_u128 a)
{
    return a.low == 0 && a.high == 0;
}

static inline bool tbc_u128_max(tbc_u128 a)
{
    return a.low == UINT64_MAX && a.high == UINT64_MAX;
}

static inline tbc_u128 tbc_u128_from_u64(uint64_t value)
{
    return tbc_u128_make(0, value);
}

/* Balances are u128 but our amounts are at most 2^63-1 each; a sum that
 * does not fit u64 saturates (only usage reporting reads these). */
static inline uint64_t tbc_u128_saturate(tbc_u128 a)
{
    return a.high != 0 ? UINT64_MAX : a.low;
}

struct tbc_account {
    tbc_u128 id;
    tbc_u128 debits_pending;
    tbc_u128 debits_posted;
    tbc_u128 credits_pending;
    tbc_u128 credits_posted;
    tbc_u128 user_data_128;
    uint64_t user_data_64;
    uint32_t user_data_32;
    uint32_t reserved;
    uint32_t ledger;
    uint16_t code;
    uint16_t flags;
    uint64_t timestamp;
};

struct tbc_transfer {
    tbc_u128 id;
    tbc_u128 debit_account_id;
    tbc_u128 credit_account_id;
    tbc_u128 amount;
    tbc_u128 pending_id;
    tbc_u128 user_data_128;
    uint64_t user_data_64;
    uint32_t user_data_32;
    uint32_t timeout; /* seconds; pending transfers only */
    uint32_t ledger;
    uint16_t code;
    uint16_t flags;
    uint64_t timestamp;
};

/* Sparse create result (0.15.3 and the 0.17 ops 129/130): errors only. */
struct tbc_create_result {
    uint32_t index;
    uint32_t result;
};

_Static_assert(sizeof(tbc_u128) == 16, "u128 is 16 bytes");
_Static_assert(sizeof(struct tbc_account) == 128, "Account is 128 bytes");
_Static_assert(offsetof(struct tbc_account, user_data_64) == 96, "Account.user_data_64 @96");
_Static_assert(offsetof(struct tbc_account, reserved) == 108, "Account.reserved @108");
_Static_assert(offsetof(struct tbc_account, ledger) == 112, "Account.ledger @112");
_Static_assert(offsetof(struct tbc_account, flags) == 118, "Account.flags @118");
_Static_assert(offsetof(struct tbc_account, timestamp) == 120, "Account.timestamp @120");
_Static_assert(sizeof(struct tbc_transfer) == 128, "Transfer is 128 bytes");
_Static_assert(offsetof(struct tbc_transfer, amount) == 48, "Transfer.amount @48");
_Static_assert(offsetof(struct tbc_transfer, pending_id) == 64, "Transfer.pending_id @64");
_Static_assert(offsetof(struct tbc_transfer, timeout) == 108, "Transfer.timeout @108");
_Static_assert(offsetof(struct tbc_transfer, ledger) == 112, "Transfer.ledger @112");
_Static_assert(offsetof(struct tbc_transfer, flags) == 118, "Transfer.flags @118");
_Static_assert(offsetof(struct tbc_transfer, timestamp) == 120, "Transfer.timestamp @120");
_Static_assert(sizeof(struct tbc_create_result) == 8, "CreateResult is 8 bytes");

/* Header commands a client sends or reads (docs/tigerbeetle-protocol.md
 * "Commands"). */
enum tbc_command {
    TBC_COMMAND_PING_CLIENT = 3,
    TBC_COMMAND_PONG_CLIENT = 4,
    TBC_COMMAND_REQUEST = 5,
    TBC_COMMAND_REPLY = 8,
    TBC_COMMAND_EVICTION = 18,
};

/* Operations; 129-132 exist with the same encoding on 0.15.3 and 0.17. */
enum tbc_operation {
    TBC_OPERATION_REGISTER = 2,
    TBC_OPERATION_CREATE_ACCOUNTS = 129,
    TBC_OPERATION_CREATE_TRANSFERS = 130,
    TBC_OPERATION_LOOKUP_ACCOUNTS = 131,
    TBC_OPERATION_LOOKUP_TRANSFERS = 132,
};

enum tbc_account_flag {
    TBC_ACCOUNT_LINKED = 1 << 0,
    TBC_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS = 1 << 1,
    TBC_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS = 1 << 2,
    TBC_ACCOUNT_HISTORY = 1 << 3, /* never used: 0.15.3 can crash on it */
};
#define TBC_ACCOUNT_FLAGS_KNOWN_0_15 0x000fu

enum tbc_transfer_flag {
    TBC_TRANSFER_LINKED = 1 << 0,
    TBC_TRANSFER_PENDING = 1 << 1,
    TBC_TRANSFER_POST_PENDING = 1 << 2,
    TBC_TRANSFER_VOID_PENDING = 1 << 3,
    TBC_TRANSFER_BALANCING_DEBIT = 1 << 4,
    TBC_TRANSFER_BALANCING_CREDIT = 1 << 5,
};
#define TBC_TRANSFER_FLAGS_KNOWN_0_15 0x003fu

enum tbc_create_account_result {
    TBC_ACCOUNT_OK = 0,
    TBC_ACCOUNT_LINKED_EVENT_FAILED = 1,
    TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_FLAGS = 15,
    TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_USER_DATA_128 = 16,
    TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_USER_DATA_32 = 18,
    TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_LEDGER = 19,
    TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_CODE = 20,
    TBC_ACCOUNT_EXISTS = 21,
};

enum tbc_create_transfer_result {
    TBC_TRANSFER_OK = 0,
    TBC_TRANSFER_LINKED_EVENT_FAILED = 1,
    TBC_TRANSFER_LINKED_EVENT_CHAIN_OPEN = 2,
    TBC_TRANSFER_TIMESTAMP_MUST_BE_ZERO = 3,
    TBC_TRANSFER_RESERVED_FLAG = 4,
    TBC_TRANSFER_ID_MUST_NOT_BE_ZERO = 5,
    TBC_TRANSFER_ID_MUST_NOT_BE_INT_MAX = 6,
    TBC_TRANSFER_FLAGS_ARE_MUTUALLY_EXCLUSIVE = 7,
    TBC_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_ZERO = 8,
    TBC_TRANSFER_DEBIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX = 9,
    TBC_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_ZERO = 10,
    TBC_TRANSFER_CREDIT_ACCOUNT_ID_MUST_NOT_BE_INT_MAX = 11,
    TBC_TRANSFER_ACCOUNTS_MUST_BE_DIFFERENT = 12,
    TBC_TRANSFER_PENDING_ID_MUST_BE_ZERO = 13,
    TBC_TRANSFER_PENDING_ID_MUST_NOT_BE_ZERO = 14,
    TBC_TRANSFER_PENDING_ID_MUST_NOT_BE_INT_MAX = 15,
    TBC_TRANSFER_PENDING_ID_MUST_BE_DIFFERENT = 16,
    TBC_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER = 17,
    TBC_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO = 18,
    TBC_TRANSFER_LEDGER_MUST_NOT_BE_ZERO = 19,
    TBC_TRANSFER_CODE_MUST_NOT_BE_ZERO = 20,
    TBC_TRANSFER_DEBIT_ACCOUNT_NOT_FOUND = 21,
    TBC_TRANSFER_CREDIT_ACCOUNT_NOT_FOUND = 22,
    TBC_TRANSFER_PENDING_TRANSFER_NOT_FOUND = 25,
    TBC_TRANSFER_PENDING_TRANSFER_ALREADY_POSTED = 33,
    TBC_TRANSFER_PENDING_TRANSFER_ALREADY_VOIDED = 34,
    TBC_TRANSFER_PENDING_TRANSFER_EXPIRED = 35,
    TBC_TRANSFER_EXISTS_WITH_DIFFERENT_FLAGS = 36,
    TBC_TRANSFER_EXISTS_WITH_DIFFERENT_AMOUNT = 39,
    TBC_TRANSFER_EXISTS_WITH_DIFFERENT_USER_DATA_32 = 43,
    TBC_TRANSFER_EXISTS_WITH_DIFFERENT_CODE = 45,
    TBC_TRANSFER_EXISTS = 46,
    TBC_TRANSFER_EXCEEDS_CREDITS = 54,
    TBC_TRANSFER_EXCEEDS_DEBITS = 55,
    TBC_TRANSFER_EXISTS_WITH_DIFFERENT_LEDGER = 67,
    TBC_TRANSFER_ID_ALREADY_FAILED = 68,
};

/* exists_with_different_* of a transfer: 36..45, and 67 on 0.17. */
static inline bool tbc_transfer_result_exists_different(uint32_t result)
{
    return (result >= 36 && result <= 45) || result == 67;
}

/* Eviction reasons (docs/tigerbeetle-protocol.md "Eviction"); 4..8 only
 * on 0.17. */
enum tbc_eviction_reason {
    TBC_EVICTION_NO_SESSION = 1,
    TBC_EVICTION_RELEASE_TOO_LOW = 2,
    TBC_EVICTION_RELEASE_TOO_HIGH = 3,
    TBC_EVICTION_INVALID_REQUEST_OPERATION = 4,
    TBC_EVICTION_INVALID_REQUEST_BODY = 5,
    TBC_EVICTION_INVALID_REQUEST_BODY_SIZE = 6,
    TBC_EVICTION_SESSION_TOO_LOW = 7,
    TBC_EVICTION_SESSION_RELEASE_MISMATCH = 8,
};

/* Release = patch | minor << 8 | major << 16 (docs/tigerbeetle-protocol.md
 * "Releases and dialects"). */
#define TBC_RELEASE(major, minor, patch)                                                           \
    ((uint32_t)(patch) | (uint32_t)(minor) << 8 | (uint32_t)(major) << 16)
#define TBC_RELEASE_0_15_3 TBC_RELEASE(0, 15, 3)
#define TBC_RELEASE_0_16_0 TBC_RELEASE(0, 16, 0)
#define TBC_RELEASE_0_16_4 TBC_RELEASE(0, 16, 4)

/* How this client speaks to a server, chosen from its release:
 * - 0.15: release must equal the server's, register has no body, the
 *   server crashes on a malformed body, failed ids may be retried.
 * - 0.17 (0.16.0 and later): 256-byte register body, batch_size_limit from
 *   the register reply, failed ids are burnt (id_already_failed). */
enum tbc_dialect {
    TBC_DIALECT_0_15 = 1,
    TBC_DIALECT_0_17 = 2,
};

static inline enum tbc_dialect tbc_dialect_for_release(uint32_t server_release)
{
    return server_release >= TBC_RELEASE_0_16_0 ? TBC_DIALECT_0_17 : TBC_DIALECT_0_15;
}

#endif
