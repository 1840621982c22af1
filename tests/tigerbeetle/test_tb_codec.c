/* Unit tests of the TigerBeetle wire codec, no server needed: the
 * checksum against TigerBeetle's own test vectors, headers against golden
 * bytes for both dialects, body validation one past each bound, ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/uuid.h"
#include "tbclient/tbc_body.h"
#include "tbclient/tbc_checksum.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_message.h"
#include "tbclient/tbc_session.h"
#include "tbclient/tbc_bounds.h"
#include "test.h"

static void from_hex(const char *hex, uint8_t *out, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        unsigned byte;
        sscanf(hex + 2 * i, "%2x", &byte);
        out[i] = (uint8_t)byte;
    }
}

/* A u128 written as TigerBeetle's source writes it (most significant first). */
static tbc_u128 u128_hex(const char *hex32)
{
    uint8_t bytes[16];
    from_hex(hex32, bytes, 16);
    tbc_u128 value = {0, 0};
    for (int i = 0; i < 8; i++) {
        value.high = value.high << 8 | bytes[i];
        value.low = value.low << 8 | bytes[8 + i];
    }
    return value;
}

typedef tbc_u128 (*checksum_fn)(const void *, size_t);

static checksum_fn implementations[2];
static int implementation_count;

static void test_checksum_vectors(void)
{
    static const uint8_t zeros[16];
    for (int i = 0; i < implementation_count; i++) {
        CHECK(tbc_u128_equal(implementations[i]("", 0),
                             u128_hex("49F174618255402DE6E7E3C40D60CC83")));
        uint8_t expected[16];
        from_hex("f72ad48dd05dd1656133101cd4be3a26", expected, 16);
        tbc_u128 got = implementations[i](zeros, 16);
        CHECK(memcmp(&got, expected, 16) == 0);
    }
}

static uint64_t splitmix_state;
static uint64_t splitmix64(void)
{
    splitmix_state += 0x9e3779b97f4a7c15ull;
    uint64_t z = splitmix_state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t xoshiro[4];
static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}
static uint64_t xoshiro_next(void)
{
    uint64_t r = rotl(xoshiro[0] + xoshiro[3], 23) + xoshiro[0];
    uint64_t t = xoshiro[1] << 17;
    xoshiro[2] ^= xoshiro[0];
    xoshiro[3] ^= xoshiro[1];
    xoshiro[1] ^= xoshiro[2];
    xoshiro[0] ^= xoshiro[3];
    xoshiro[2] ^= t;
    xoshiro[3] = rotl(xoshiro[3], 45);
    return r;
}
/* Zig's Xoshiro256.fill: 8 bytes little-endian per next(), the tail from one more. */
static void xoshiro_fill(uint8_t *buffer, size_t size)
{
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t n = xoshiro_next();
        for (int j = 0; j < 8; j++)
            buffer[i + (size_t)j] = (uint8_t)(n >> (8 * j));
    }
    if (i < size) {
        uint64_t n = xoshiro_next();
        for (; i < size; i++, n >>= 8)
            buffer[i] = (uint8_t)n;
    }
}

/* TigerBeetle's "checksum stability" test, case for case. */
static tbc_u128 stability_hash(checksum_fn checksum)
{
    static tbc_u128 cases[896];
    uint8_t buffer[1024];
    int n = 0;
    for (int length = 0; length < 128; length++) {
        memset(buffer, 0, (size_t)length);
        cases[n++] = checksum(buffer, (size_t)length);
    }
    for (int bit = 0; bit < 64 * 8; bit++) {
        memset(buffer, 0, 64);
        buffer[bit / 8] = (uint8_t)(1u << (bit % 8));
        cases[n++] = checksum(buffer, 64);
    }
    splitmix_state = 92;
    for (int i = 0; i < 4; i++)
        xoshiro[i] = splitmix64();
    for (int k = 0; k < 256; k++) {
        xoshiro_fill(buffer, (size_t)k + 13);
        cases[n++] = checksum(buffer, (size_t)k + 13);
    }
    return checksum(cases, sizeof cases);
}

static void test_checksum_stability(void)
{
    for (int i = 0; i < implementation_count; i++)
        CHECK(tbc_u128_equal(stability_hash(implementations[i]),
                             u128_hex("82dcaacf4875b279446825b6830d1263")));
}

static void test_checksum_implementations_agree(void)
{
    if (implementation_count < 2) {
        printf("     (no AES-NI on this CPU: only the portable checksum ran)\n");
        return;
    }
    uint8_t buffer[4096];
    srand(7);
    for (int round = 0; round < 2000; round++) {
        size_t size = (size_t)rand() % sizeof buffer;
        for (size_t i = 0; i < size; i++)
            buffer[i] = (uint8_t)rand();
        CHECK(tbc_u128_equal(tbc_checksum_portable(buffer, size),
                             tbc_checksum_hardware(buffer, size)));
    }
}

static const tbc_u128 golden_client = {.high = 0x0123456789abcdefull, .low = 0xfedcba9876543210ull};

/* A register request for 0.15.3 (view 1, golden_client), byte for byte as
 * TigerBeetle 0.15.3's own header code builds it. */
static const char register_0_15_hex[] =
    "d55d26f82c53a06ccbd85a52017b1a3e0000000000000000000000000000000083cc600dc4e3e7e62d405582"
    "6174f14900000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000100000000000001000000030f00000000050000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000001032547698badcfeefcdab8967452301"
    "0000000000000000000000000000000000000000020000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000";

/* 0.17 register: 256 zero bytes of RegisterRequest, release 0.17.8, view 1. */
static const char register_0_17_hex[] =
    "fb8051fedc1f8ef54587aa80d1d09a9300000000000000000000000000000000651b82f3ddd4fcbf2deb8496"
    "e8ff613c00000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000200000000000001000000081100000000050000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000001032547698badcfeefcdab8967452301"
    "0000000000000000000000000000000000000000020000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000";

/* 0.17 create_transfers: cluster 7, view 3, session 42, request 9, parent 0x55..55,
 * one pending transfer {id 0x1111, debit 2, credit 3, amount 10, timeout 60}. */
static const char create_transfers_0_17_hex[] =
    "06858fcb722529f3bd9841783ee66cdb00000000000000000000000000000000a539205e8022faf36eec624e"
    "6dfa6de500000000000000000000000000000000000000000000000000000000000000000700000000000000"
    "0000000000000000800100000000000003000000081100000000050000000000000000000000000055555555"
    "555555555555555555555555000000000000000000000000000000001032547698badcfeefcdab8967452301"
    "2a00000000000000000000000000000009000000820000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000";

static void test_register_golden_0_15(void)
{
    uint8_t message[TBC_HEADER_SIZE], expected[TBC_HEADER_SIZE];
    from_hex(register_0_15_hex, expected, sizeof expected);
    struct tbc_request_fields f = {.view = 1,
                                   .release = TBC_RELEASE_0_15_3,
                                   .client = golden_client,
                                   .operation = TBC_OPERATION_REGISTER};
    tbc_message_request(message, &f, 0);
    CHECK(memcmp(message, expected, TBC_HEADER_SIZE) == 0);
    CHECK_EQ_U64(tbc_message_size(message), 256);
}

static void test_register_golden_0_17(void)
{
    uint8_t message[TBC_HEADER_SIZE + TBC_REGISTER_BODY_SIZE] = {0}, expected[TBC_HEADER_SIZE];
    from_hex(register_0_17_hex, expected, sizeof expected);
    struct tbc_request_fields f = {.view = 1,
                                   .release = TBC_RELEASE(0, 17, 8),
                                   .client = golden_client,
                                   .operation = TBC_OPERATION_REGISTER};
    tbc_message_request(message, &f, TBC_REGISTER_BODY_SIZE);
    CHECK(memcmp(message, expected, TBC_HEADER_SIZE) == 0);
    CHECK_EQ_U64(tbc_message_size(message), 512);
    CHECK(tbc_message_body_verify(message) == TBC_MESSAGE_OK);
}

static void test_create_accounts_golden_0_15(void)
{
    uint8_t message[TBC_HEADER_SIZE + TBC_EVENT_SIZE] = {0};
    struct tbc_account account = {.id = tbc_u128_from_u64(1), .ledger = 1, .code = 1};
    memcpy(message + TBC_HEADER_SIZE, &account, sizeof account);
    struct tbc_request_fields f = {
        .view = 1,
        .release = TBC_RELEASE_0_15_3,
        .parent = {UINT64_C(0xaaaaaaaaaaaaaaaa), UINT64_C(0xaaaaaaaaaaaaaaaa)},
        .client = golden_client,
        .session = 1,
        .request = 1,
        .operation = TBC_OPERATION_CREATE_ACCOUNTS};
    tbc_message_request(message, &f, TBC_EVENT_SIZE);
    CHECK(tbc_u128_equal(tbc_get_u128(message + 32), u128_hex("89abc71187f04022b2bfde72520949d7")));
    CHECK(tbc_u128_equal(tbc_message_checksum(message),
                         u128_hex("4a231edf04ac6131c00c1f708e7adf6e")));
}

static void test_create_transfers_golden_0_17(void)
{
    uint8_t message[TBC_HEADER_SIZE + TBC_EVENT_SIZE] = {0}, expected[TBC_HEADER_SIZE];
    from_hex(create_transfers_0_17_hex, expected, sizeof expected);
    struct tbc_transfer t = {.id = tbc_u128_from_u64(0x1111),
                             .debit_account_id = tbc_u128_from_u64(2),
                             .credit_account_id = tbc_u128_from_u64(3),
                             .amount = tbc_u128_from_u64(10),
                             .timeout = 60,
                             .ledger = 1,
                             .code = 1,
                             .flags = TBC_TRANSFER_PENDING};
    memcpy(message + TBC_HEADER_SIZE, &t, sizeof t);
    struct tbc_request_fields f = {
        .cluster = tbc_u128_from_u64(7),
        .view = 3,
        .release = TBC_RELEASE(0, 17, 8),
        .parent = {UINT64_C(0x5555555555555555), UINT64_C(0x5555555555555555)},
        .client = golden_client,
        .session = 42,
        .request = 9,
        .operation = TBC_OPERATION_CREATE_TRANSFERS};
    tbc_message_request(message, &f, TBC_EVENT_SIZE);
    CHECK(memcmp(message, expected, TBC_HEADER_SIZE) == 0);
    CHECK(tbc_message_header_verify(message, tbc_u128_from_u64(7)) == TBC_MESSAGE_OK);
}

static void test_ping_golden(void)
{
    uint8_t header[TBC_HEADER_SIZE];
    tbc_message_ping_client(header, tbc_u128_from_u64(0), TBC_RELEASE_0_15_3, golden_client);
    CHECK(
        tbc_u128_equal(tbc_message_checksum(header), u128_hex("fd60a14534ce8b5bb499553f4d84dc57")));
    CHECK_EQ_U64(tbc_message_command(header), TBC_COMMAND_PING_CLIENT);
    /* bytes 144..159 must stay zero to be valid on 0.15.3 */
    static const uint8_t zero[16];
    CHECK(memcmp(header + 144, zero, 16) == 0);
}

/* Builds a sealed reply-like header with arbitrary fields for the reader tests. */
static void sealed(uint8_t *header)
{
    tbc_put_u128(header + 32, tbc_checksum("", 0));
    tbc_put_u128(header, tbc_checksum(header + 16, TBC_HEADER_SIZE - 16));
}

static void test_header_verify_rejects(void)
{
    uint8_t h[TBC_HEADER_SIZE];
    tbc_message_ping_client(h, tbc_u128_from_u64(5), TBC_RELEASE_0_15_3, golden_client);
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(5)) == TBC_MESSAGE_OK);
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(6)) == TBC_MESSAGE_BAD_CLUSTER);
    h[200] ^= 1;
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(5)) == TBC_MESSAGE_BAD_CHECKSUM);
    h[200] ^= 1;
    tbc_put_u32(h + 96, TBC_MESSAGE_SIZE_MAX + 1); /* one past the largest message */
    sealed(h);
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(5)) == TBC_MESSAGE_BAD_SIZE);
    tbc_put_u32(h + 96, TBC_MESSAGE_SIZE_MAX);
    sealed(h);
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(5)) == TBC_MESSAGE_OK);
    tbc_put_u32(h + 96, TBC_HEADER_SIZE - 1);
    sealed(h);
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(5)) == TBC_MESSAGE_BAD_SIZE);
    tbc_put_u32(h + 96, TBC_HEADER_SIZE);
    h[100] = 1; /* epoch */
    sealed(h);
    CHECK(tbc_message_header_verify(h, tbc_u128_from_u64(5)) == TBC_MESSAGE_BAD_FRAME);
}

static void test_reply_fields_read(void)
{
    uint8_t h[TBC_HEADER_SIZE] = {0};
    tbc_put_u128(h + 128, tbc_u128_make(1, 2));
    tbc_put_u128(h + 160, tbc_u128_make(3, 4));
    tbc_put_u128(h + 192, golden_client);
    tbc_put_u64(h + 208, 77);
    tbc_put_u64(h + 216, 77);
    tbc_put_u64(h + 224, 1700000000000000000ull);
    tbc_put_u32(h + 232, 12);
    h[236] = TBC_OPERATION_CREATE_TRANSFERS;
    struct tbc_reply_fields r;
    tbc_message_reply_read(h, &r);
    CHECK(tbc_u128_equal(r.request_checksum, tbc_u128_make(1, 2)));
    CHECK(tbc_u128_equal(r.context, tbc_u128_make(3, 4)));
    CHECK(tbc_u128_equal(r.client, golden_client));
    CHECK_EQ_U64(r.commit, 77);
    CHECK_EQ_U64(r.timestamp, 1700000000000000000ull);
    CHECK_EQ_U64(r.request, 12);
    CHECK_EQ_U64(r.operation, TBC_OPERATION_CREATE_TRANSFERS);
}

static struct tbc_transfer good_transfer(uint64_t id)
{
    struct tbc_transfer t = {.id = tbc_u128_from_u64(id),
                             .debit_account_id = tbc_u128_from_u64(2),
                             .credit_account_id = tbc_u128_from_u64(3),
                             .amount = tbc_u128_from_u64(5),
                             .timeout = 1,
                             .ledger = 1,
                             .code = 1,
                             .flags = TBC_TRANSFER_PENDING};
    return t;
}

static void test_body_rejects_partial_event(void)
{
    uint8_t body[100] = {0};
    uint32_t index, code;
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_ACCOUNTS, body, 100, TBC_BODY_SIZE_MAX,
                            TBC_DIALECT_0_15, &index, &code) == TBC_BODY_NOT_MULTIPLE);
    CHECK(tbc_body_validate(TBC_OPERATION_LOOKUP_ACCOUNTS, body, 24, TBC_BODY_SIZE_MAX,
                            TBC_DIALECT_0_15, &index, &code) == TBC_BODY_NOT_MULTIPLE);
    CHECK(tbc_body_validate(99, body, 0, TBC_BODY_SIZE_MAX, TBC_DIALECT_0_15, &index, &code) ==
          TBC_BODY_BAD_OPERATION);
}

static void test_body_event_count_bound(void)
{
    uint32_t count = TBC_BATCH_EVENTS_MAX + 1;
    struct tbc_transfer *events = calloc(count, sizeof *events);
    REQUIRE(events != NULL);
    for (uint32_t i = 0; i < count; i++)
        events[i] = good_transfer(i + 1);
    uint32_t index, code;
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_TRANSFERS, events, (count - 1) * TBC_EVENT_SIZE,
                            TBC_BODY_SIZE_MAX, TBC_DIALECT_0_15, &index, &code) == TBC_BODY_OK);
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_TRANSFERS, events, count * TBC_EVENT_SIZE,
                            TBC_BODY_SIZE_MAX, TBC_DIALECT_0_15, &index,
                            &code) == TBC_BODY_TOO_MANY);
    /* A --development 0.17 server: 32 KiB requests, 254 events. */
    uint32_t dev_limit = 32 * 1024 - TBC_HEADER_SIZE;
    CHECK_EQ_U64(tbc_body_events_max(TBC_OPERATION_CREATE_TRANSFERS, dev_limit), 254);
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_TRANSFERS, events, 254 * TBC_EVENT_SIZE, dev_limit,
                            TBC_DIALECT_0_17, &index, &code) == TBC_BODY_OK);
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_TRANSFERS, events, 255 * TBC_EVENT_SIZE, dev_limit,
                            TBC_DIALECT_0_17, &index, &code) == TBC_BODY_TOO_LARGE);
    CHECK_EQ_U64(tbc_body_events_max(TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_BODY_SIZE_MAX),
                 TBC_BATCH_EVENTS_MAX);
    free(events);
}

static void test_body_rejects_bad_events(void)
{
    struct tbc_transfer t[2] = {good_transfer(1), good_transfer(2)};
    uint32_t index, code;
    t[1].amount = tbc_u128_from_u64(0);
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_TRANSFERS, t, sizeof t, TBC_BODY_SIZE_MAX,
                            TBC_DIALECT_0_15, &index, &code) == TBC_BODY_BAD_EVENT);
    CHECK_EQ_U64(index, 1);
    CHECK_EQ_U64(code, TBC_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO);
    t[1] = good_transfer(2);
    t[1].flags |= TBC_TRANSFER_LINKED;
    CHECK(tbc_body_validate(TBC_OPERATION_CREATE_TRANSFERS, t, sizeof t, TBC_BODY_SIZE_MAX,
                            TBC_DIALECT_0_15, &index, &code) == TBC_BODY_CHAIN_OPEN);
    t[1] = good_transfer(2);
    t[1].flags = 0; /* posted, but with a timeout */
    CHECK_EQ_U64(tbc_transfer_check(&t[1], TBC_DIALECT_0_15),
                 TBC_TRANSFER_TIMEOUT_RESERVED_FOR_PENDING_TRANSFER);
    t[1] = good_transfer(2);
    t[1].flags |= 1u << 6; /* closing_debit: not a 0.15.3 flag */
    CHECK_EQ_U64(tbc_transfer_check(&t[1], TBC_DIALECT_0_15), TBC_TRANSFER_RESERVED_FLAG);
    struct tbc_transfer cancel = {.id = tbc_u128_from_u64(9),
                                  .pending_id = tbc_u128_from_u64(1),
                                  .ledger = 1,
                                  .code = 1,
                                  .flags = TBC_TRANSFER_VOID_PENDING};
    CHECK_EQ_U64(tbc_transfer_check(&cancel, TBC_DIALECT_0_17),
                 TBC_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO);
    cancel.amount = tbc_u128_from_u64(5);
    CHECK_EQ_U64(tbc_transfer_check(&cancel, TBC_DIALECT_0_17), 0);
    cancel.pending_id = cancel.id;
    CHECK_EQ_U64(tbc_transfer_check(&cancel, TBC_DIALECT_0_17),
                 TBC_TRANSFER_PENDING_ID_MUST_BE_DIFFERENT);
    struct tbc_account a = {.id = tbc_u128_from_u64(1),
                            .ledger = 1,
                            .code = 1,
                            .flags = TBC_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS |
                                     TBC_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS};
    CHECK_EQ_U64(tbc_account_check(&a, TBC_DIALECT_0_15), 8);
    a.flags = 0;
    a.id = tbc_u128_make(UINT64_MAX, UINT64_MAX);
    CHECK_EQ_U64(tbc_account_check(&a, TBC_DIALECT_0_15), 7);
}

static void test_ids_from_labels(void)
{
    CHECK(tbc_u128_equal(tbc_id_from_label("acct:operator", 13),
                         u128_hex("ee06f35fb94212edc7e42a11203bfca8")));
    const char *lease = "lease-1", *key = "global:llm:openai:gpt-4o:tpm";
    CHECK(tbc_u128_equal(tbc_id2("xfer:reserve:", lease, strlen(lease), key, strlen(key)),
                         u128_hex("116c3ff7af4b110248d2a17e198ddfe9")));
    /* Lease "a:b" + key "c" and lease "a" + key "b:c" must differ. */
    CHECK(!tbc_u128_equal(tbc_id2("xfer:reserve:", "a:b", 3, "c", 1),
                          tbc_id2("xfer:reserve:", "a", 1, "b:c", 3)));
    CHECK(tbc_u128_equal(tbc_id_normalize(tbc_u128_make(0, 0)), tbc_u128_make(0, 1)));
    CHECK(tbc_u128_equal(tbc_id_normalize(tbc_u128_make(UINT64_MAX, UINT64_MAX)),
                         tbc_u128_make(UINT64_MAX, UINT64_MAX - 1)));
    CHECK(tbc_u128_equal(tbc_id_normalize(tbc_u128_make(0, 7)), tbc_u128_make(0, 7)));
    tbc_u128 r1 = tbc_id_random(), r2 = tbc_id_random();
    CHECK(!tbc_u128_equal(r1, r2));
}

/* The ids of a lease on a cluster of time-ordered ids: the label's id with
 * a UUIDv7 lease id's timestamp in its top 48 bits (docs/tigerbeetle.md
 * "Account model"). */
static void test_time_ordered_ids(void)
{
    const char *lease = "01936f0e-8c2a-7b3d-9a4f-2c6e8d1b5a90",
               *key = "global:llm:openai:gpt-4o:tpm";
    int64_t unix_ms = 0;
    REQUIRE(uuid_v7_unix_ms(lease, strlen(lease), &unix_ms));
    CHECK_EQ_I64(unix_ms, INT64_C(0x01936f0e8c2a));
    tbc_u128 label = tbc_id2("xfer:reserve:", lease, strlen(lease), key, strlen(key));
    CHECK(tbc_u128_equal(label, u128_hex("433ccb6a305d8182f816179d16a987bd")));
    CHECK(tbc_u128_equal(tbc_id_time_ordered(label, (uint64_t)unix_ms),
                         u128_hex("01936f0e8c2a8182f816179d16a987bd")));
    /* A millisecond later sorts after, whatever the labels hash to. */
    const char *later = "01936f0e-8c2b-7000-8000-000000000000";
    int64_t later_ms = 0;
    REQUIRE(uuid_v7_unix_ms(later, strlen(later), &later_ms));
    tbc_u128 a = tbc_id_time_ordered(tbc_id_from_label("z", 1), (uint64_t)unix_ms);
    tbc_u128 b = tbc_id_time_ordered(tbc_id_from_label("a", 1), (uint64_t)later_ms);
    CHECK(a.high < b.high);
    /* 0 and 2^128-1 stay out of reach. */
    CHECK(tbc_u128_equal(tbc_id_time_ordered(tbc_u128_make(0, 0), 0), tbc_u128_make(0, 1)));
    CHECK(tbc_u128_equal(
        tbc_id_time_ordered(tbc_u128_make(UINT64_MAX, UINT64_MAX), (UINT64_C(1) << 48) - 1),
        tbc_u128_make(UINT64_MAX, UINT64_MAX - 1)));
}

static void test_cluster_and_addresses_parse(void)
{
    tbc_u128 cluster;
    CHECK(tbc_cluster_parse("0", &cluster) == 0 && tbc_u128_zero(cluster));
    CHECK(tbc_cluster_parse("340282366920938463463374607431768211455", &cluster) == 0);
    CHECK(tbc_u128_max(cluster));
    CHECK(tbc_cluster_parse("340282366920938463463374607431768211456", &cluster) == -1);
    CHECK(tbc_cluster_parse("12x", &cluster) == -1);
    CHECK(tbc_cluster_parse("", &cluster) == -1);
    struct tbc_address addresses[TBC_REPLICAS_MAX];
    char error[128];
    CHECK(tbc_addresses_parse("3000", addresses, error, sizeof error) == 1);
    CHECK_STR(addresses[0].host, "127.0.0.1");
    CHECK_STR(addresses[0].port, "3000");
    CHECK(tbc_addresses_parse("10.0.0.1:3001,db:3002", addresses, error, sizeof error) == 2);
    CHECK_STR(addresses[1].host, "db");
    CHECK(tbc_addresses_parse("1,2,3,4,5,6", addresses, error, sizeof error) == 6);
    CHECK(tbc_addresses_parse("1,2,3,4,5,6,7", addresses, error, sizeof error) == -1);
    CHECK(tbc_addresses_parse("host:", addresses, error, sizeof error) == -1);
    CHECK(tbc_addresses_parse("a,,b", addresses, error, sizeof error) == -1);
}

static void test_release_and_dialect(void)
{
    CHECK_EQ_U64(TBC_RELEASE_0_15_3, 3843);
    CHECK_EQ_U64(TBC_RELEASE(0, 16, 4), 4100);
    CHECK_EQ_U64(TBC_RELEASE(0, 17, 8), 4360);
    CHECK(tbc_dialect_for_release(TBC_RELEASE_0_15_3) == TBC_DIALECT_0_15);
    CHECK(tbc_dialect_for_release(TBC_RELEASE(0, 0, 1)) == TBC_DIALECT_0_15);
    CHECK(tbc_dialect_for_release(TBC_RELEASE(0, 16, 33)) == TBC_DIALECT_0_17);
    CHECK(tbc_dialect_for_release(TBC_RELEASE(0, 17, 8)) == TBC_DIALECT_0_17);
}

int main(void)
{
    implementations[implementation_count++] = tbc_checksum_portable;
    if (tbc_checksum_hardware_available())
        implementations[implementation_count++] = tbc_checksum_hardware;
    RUN(test_checksum_vectors,
        "both checksums give TigerBeetle's vectors for \"\" and 16 zero bytes");
    RUN(test_checksum_stability, "both checksums reproduce TigerBeetle's 896-case stability hash");
    RUN(test_checksum_implementations_agree,
        "AES-NI and portable checksums agree on 2000 random inputs");
    RUN(test_register_golden_0_15,
        "a 0.15.3 register header matches TigerBeetle 0.15.3's bytes exactly");
    RUN(test_register_golden_0_17, "a 0.17 register (256-byte body) matches golden bytes");
    RUN(test_create_accounts_golden_0_15,
        "a 0.15.3 create_accounts has the two checksums TigerBeetle computes");
    RUN(test_create_transfers_golden_0_17, "a 0.17 create_transfers header matches golden bytes");
    RUN(test_ping_golden, "ping_client has TigerBeetle's checksum and zero bytes 144..159");
    RUN(test_header_verify_rejects,
        "a received header with a bad checksum/size/frame/cluster is refused");
    RUN(test_reply_fields_read, "reply header fields are read from their offsets");
    RUN(test_body_rejects_partial_event, "a body that is not whole events is never sent");
    RUN(test_body_event_count_bound,
        "one event past the batch limit (and a 0.17 dev limit) is refused");
    RUN(test_body_rejects_bad_events,
        "malformed events fail locally with the server's result code");
    RUN(test_ids_from_labels, "ids are SHA-256 of labels, unambiguous, 0/max flipped");
    RUN(test_time_ordered_ids,
        "a time-ordered id is the label's with the UUIDv7 timestamp on top, and sorts by it");
    RUN(test_cluster_and_addresses_parse, "cluster ids and address lists parse to their bounds");
    RUN(test_release_and_dialect,
        "release encoding and dialect choice follow docs/tigerbeetle-protocol.md");
    return test_summary();
}
