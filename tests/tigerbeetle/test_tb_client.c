/* Integration tests of the native client against a real TigerBeetle
 * (TIGERBEETLE_BIN): the release probe picks the dialect, creates and
 * lookups round-trip, linked chains fail as a unit, concurrent items are
 * batched, pending transfers expire while the client idles (0.15.3 needs
 * the keepalive for that), and the sessions survive kill -9 and restart. */
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "tbclient/tbc_bounds.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_session.h"
#include "tbclient/tbc_submitter.h"
#include "tb_server.h"
#include "test.h"

/* How long a call of these tests may take (an admin call's deadline). */
#define CALL_DEADLINE_MS 5000

static struct tb_test_server server;
static struct tbc_submitter *submitter;

static const tbc_u128 operator_id = {.high = 0, .low = 1001};
static const tbc_u128 limit_id = {.high = 0, .low = 1002};

static bool wait_ready(int64_t timeout_ms)
{
    int64_t until = clock_monotonic_ms() + timeout_ms;
    while (clock_monotonic_ms() < until) {
        if (tbc_submitter_ready(submitter))
            return true;
        poll(NULL, 0, 20);
    }
    return false;
}

static enum tbc_item_status create(uint8_t operation, const void *events, uint32_t count,
                                   uint32_t *codes)
{
    struct tbc_item item = {.operation = operation,
                            .event_count = count,
                            .events = events,
                            .codes = codes,
                            .deadline_ms = clock_monotonic_ms() + CALL_DEADLINE_MS};
    return tbc_submitter_call(submitter, &item);
}

static bool lookup_account(tbc_u128 id, struct tbc_account *out)
{
    uint8_t found = 0;
    struct tbc_item item = {.operation = TBC_OPERATION_LOOKUP_ACCOUNTS,
                            .event_count = 1,
                            .events = &id,
                            .objects = out,
                            .found = &found,
                            .deadline_ms = clock_monotonic_ms() + CALL_DEADLINE_MS};
    return tbc_submitter_call(submitter, &item) == TBC_ITEM_OK && found;
}

static struct tbc_transfer transfer(uint64_t id, tbc_u128 debit, tbc_u128 credit, uint64_t amount,
                                    uint16_t flags, uint32_t timeout)
{
    struct tbc_transfer t = {.id = tbc_u128_make(7, id),
                             .debit_account_id = debit,
                             .credit_account_id = credit,
                             .amount = tbc_u128_from_u64(amount),
                             .timeout = timeout,
                             .ledger = 1,
                             .code = 1,
                             .flags = flags};
    return t;
}

static void test_probe_and_register(void)
{
    REQUIRE(wait_ready(10000));
    struct tbc_submitter_stats stats;
    tbc_submitter_stats(submitter, &stats);
    CHECK_EQ_U64(stats.server_release, TBC_RELEASE_0_15_3);
    CHECK(tbc_submitter_dialect(submitter) == TBC_DIALECT_0_15);
    CHECK(stats.registrations >= 1);
}

static void test_accounts_created_once(void)
{
    struct tbc_account accounts[2] = {
        {.id = operator_id, .ledger = 1, .code = 1},
        {.id = limit_id,
         .ledger = 1,
         .code = 2,
         .flags = TBC_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS},
    };
    uint32_t codes[2];
    CHECK(create(TBC_OPERATION_CREATE_ACCOUNTS, accounts, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
    CHECK_EQ_U64(codes[1], 0);
    CHECK(create(TBC_OPERATION_CREATE_ACCOUNTS, accounts, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], TBC_ACCOUNT_EXISTS);
    CHECK_EQ_U64(codes[1], TBC_ACCOUNT_EXISTS);
    accounts[1].code = 9;
    CHECK(create(TBC_OPERATION_CREATE_ACCOUNTS, &accounts[1], 1, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_CODE);
}

static void test_linked_chain_fails_as_a_unit(void)
{
    /* capacity 10 into the limit account */
    struct tbc_transfer topup = transfer(1, operator_id, limit_id, 10, 0, 0);
    uint32_t codes[3];
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, &topup, 1, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
    /* 6 + 6 > 10: the chain fails, nothing is held */
    struct tbc_transfer chain[2] = {
        transfer(2, limit_id, operator_id, 6, TBC_TRANSFER_PENDING | TBC_TRANSFER_LINKED, 60),
        transfer(3, limit_id, operator_id, 6, TBC_TRANSFER_PENDING, 60),
    };
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, chain, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], TBC_TRANSFER_LINKED_EVENT_FAILED);
    CHECK_EQ_U64(codes[1], TBC_TRANSFER_EXCEEDS_CREDITS);
    struct tbc_account account;
    REQUIRE(lookup_account(limit_id, &account));
    CHECK_EQ_U64(account.debits_pending.low, 0);
    CHECK_EQ_U64(account.credits_posted.low, 10);
    /* 4 + 6 fits; resubmitting the same chain is "exists" */
    chain[0].amount = tbc_u128_from_u64(4);
    chain[0].id = tbc_u128_make(7, 4);
    chain[1].id = tbc_u128_make(7, 5);
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, chain, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
    CHECK_EQ_U64(codes[1], 0);
    REQUIRE(lookup_account(limit_id, &account));
    CHECK_EQ_U64(account.debits_pending.low, 10);
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, chain, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], TBC_TRANSFER_EXISTS);
    CHECK_EQ_U64(codes[1], TBC_TRANSFER_LINKED_EVENT_FAILED);
    /* void both so later tests start from a free account */
    struct tbc_transfer voids[2] = {
        transfer(6, limit_id, operator_id, 4, TBC_TRANSFER_VOID_PENDING, 0),
        transfer(8, limit_id, operator_id, 6, TBC_TRANSFER_VOID_PENDING, 0)};
    voids[0].pending_id = tbc_u128_make(7, 4);
    voids[1].pending_id = tbc_u128_make(7, 5);
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, voids, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
    CHECK_EQ_U64(codes[1], 0);
}

static void test_invalid_item_never_sent(void)
{
    struct tbc_transfer bad = transfer(50, limit_id, operator_id, 0, TBC_TRANSFER_PENDING, 60);
    uint32_t codes[1];
    struct tbc_item item = {.operation = TBC_OPERATION_CREATE_TRANSFERS,
                            .event_count = 1,
                            .events = &bad,
                            .codes = codes,
                            .deadline_ms = clock_monotonic_ms() + CALL_DEADLINE_MS};
    CHECK(tbc_submitter_call(submitter, &item) == TBC_ITEM_INVALID);
    CHECK_EQ_U64(item.invalid_code, TBC_TRANSFER_AMOUNT_MUST_NOT_BE_ZERO);
}

#define CONCURRENT_THREADS 8
#define CONCURRENT_ITEMS 300

static void *submit_many(void *argument)
{
    uint64_t base = (uint64_t)(uintptr_t)argument;
    int *failures = calloc(1, sizeof *failures);
    for (uint64_t i = 0; i < CONCURRENT_ITEMS; i++) {
        /* a 1-unit hold and its void, as one item: net zero */
        struct tbc_transfer pair[2] = {
            transfer(base + 2 * i, limit_id, operator_id, 1,
                     TBC_TRANSFER_PENDING | TBC_TRANSFER_LINKED, 60),
            transfer(base + 2 * i + 1, limit_id, operator_id, 1, TBC_TRANSFER_VOID_PENDING, 0),
        };
        pair[1].pending_id = pair[0].id;
        uint32_t codes[2] = {9, 9};
        if (create(TBC_OPERATION_CREATE_TRANSFERS, pair, 2, codes) != TBC_ITEM_OK ||
            codes[0] != 0 || codes[1] != 0)
            (*failures)++;
    }
    return failures;
}

static void test_concurrent_items_are_batched(void)
{
    struct tbc_submitter_stats before, after;
    tbc_submitter_stats(submitter, &before);
    pthread_t threads[CONCURRENT_THREADS];
    for (uint64_t t = 0; t < CONCURRENT_THREADS; t++)
        pthread_create(&threads[t], NULL, submit_many, (void *)(uintptr_t)(1000000 * (t + 1)));
    int failures = 0;
    for (int t = 0; t < CONCURRENT_THREADS; t++) {
        int *f;
        pthread_join(threads[t], (void **)&f);
        failures += *f;
        free(f);
    }
    tbc_submitter_stats(submitter, &after);
    CHECK_EQ_I64(failures, 0);
    uint64_t items = after.items - before.items, requests = after.requests - before.requests;
    printf("     %" PRIu64 " items in %" PRIu64 " requests\n", items, requests);
    CHECK(items >= CONCURRENT_THREADS * CONCURRENT_ITEMS);
    CHECK(requests < items); /* more than one item per request on average */
    struct tbc_account account;
    REQUIRE(lookup_account(limit_id, &account));
    CHECK_EQ_U64(account.debits_pending.low, 0);
}

static void test_expiry_runs_while_idle(void)
{
    struct tbc_transfer hold = transfer(60, limit_id, operator_id, 3, TBC_TRANSFER_PENDING, 1);
    uint32_t codes[1];
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, &hold, 1, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
    /* No request of ours for 3 s: only the keepalive reaches the server. */
    poll(NULL, 0, 3000);
    struct tbc_account account;
    REQUIRE(lookup_account(limit_id, &account));
    CHECK_EQ_U64(account.debits_pending.low, 0);
}

/* A request stuck past its items' deadline (the server stopped) is still
 * resent: the caller was told "unknown", and the request lands once the
 * server runs again. tbc_submitter_stale_requests says so until then. */
static void test_stale_request_lands_after_its_deadline(void)
{
    const tbc_u128 from = {.high = 0, .low = 1003}, to = {.high = 0, .low = 1004};
    struct tbc_account accounts[2] = {{.id = from, .ledger = 1, .code = 1},
                                      {.id = to, .ledger = 1, .code = 1}};
    uint32_t codes[2];
    REQUIRE(create(TBC_OPERATION_CREATE_ACCOUNTS, accounts, 2, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(tbc_submitter_stale_requests(submitter), 0);
    REQUIRE(kill(server.pid, SIGSTOP) == 0);
    struct tbc_transfer move = transfer(80, from, to, 1, 0, 0);
    struct tbc_item item = {.operation = TBC_OPERATION_CREATE_TRANSFERS,
                            .event_count = 1,
                            .events = &move,
                            .codes = codes,
                            .deadline_ms = clock_monotonic_ms() + 500};
    CHECK(tbc_submitter_call(submitter, &item) == TBC_ITEM_UNAVAILABLE);
    /* (the idle keepalive, stuck on the other session, may count too) */
    CHECK(tbc_submitter_stale_requests(submitter) >= 1);
    poll(NULL, 0, 500);
    CHECK(tbc_submitter_stale_requests(submitter) >= 1); /* still resent */
    REQUIRE(kill(server.pid, SIGCONT) == 0);
    int64_t until = clock_monotonic_ms() + 10000;
    while (tbc_submitter_stale_requests(submitter) > 0 && clock_monotonic_ms() < until)
        poll(NULL, 0, 20);
    CHECK_EQ_U64(tbc_submitter_stale_requests(submitter), 0);
    struct tbc_account account;
    REQUIRE(lookup_account(to, &account));
    CHECK_EQ_U64(account.credits_posted.low, 1); /* it landed, once */
}

static void test_survives_kill_and_restart(void)
{
    struct tbc_submitter_stats before, after;
    tbc_submitter_stats(submitter, &before);
    REQUIRE(tb_test_server_restart(&server) == 0);
    struct tbc_account account;
    bool found = false;
    /* the first calls may fail while sessions reconnect */
    for (int attempt = 0; attempt < 50 && !found; attempt++) {
        found = lookup_account(limit_id, &account);
        if (!found)
            poll(NULL, 0, 200);
    }
    CHECK(found);
    CHECK_EQ_U64(account.credits_posted.low, 10);
    tbc_submitter_stats(submitter, &after);
    CHECK(after.connections > before.connections);
    /* sessions are durable: no new registration was needed */
    CHECK_EQ_U64(after.registrations, before.registrations);
    struct tbc_transfer hold = transfer(70, limit_id, operator_id, 1, TBC_TRANSFER_PENDING, 60);
    uint32_t codes[1];
    CHECK(create(TBC_OPERATION_CREATE_TRANSFERS, &hold, 1, codes) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
}

#define CLIENTS_MAX 64 /* the cluster's session table (clients_max) */

/* A session goes quiet while 64 other clients register: the cluster evicts
 * it (the least recently used). Its next request learns so (no_session),
 * and the session starts over with a new client id and works again. */
static void test_eviction_starts_a_new_session(void)
{
    struct tbc_address address[TBC_REPLICAS_MAX];
    char error[128];
    REQUIRE(tbc_addresses_parse(server.address, address, error, sizeof error) == 1);
    static struct tbc_session quiet, others[CLIENTS_MAX];
    REQUIRE(tbc_session_init(&quiet, tbc_u128_from_u64(0), address, 1) == 0);
    REQUIRE(tbc_session_ready(&quiet, clock_monotonic_ms() + 10000) == TBC_SESSION_OK);
    tbc_u128 first_client = quiet.client;
    int registered = 0;
    for (int i = 0; i < CLIENTS_MAX; i++) {
        if (tbc_session_init(&others[i], tbc_u128_from_u64(0), address, 1) != 0)
            break;
        if (tbc_session_ready(&others[i], clock_monotonic_ms() + 10000) == TBC_SESSION_OK)
            registered++;
    }
    CHECK_EQ_I64(registered, CLIENTS_MAX);
    memcpy(tbc_session_body(&quiet), &limit_id, sizeof limit_id);
    int rc = tbc_session_call(&quiet, TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_ID_SIZE,
                              clock_monotonic_ms() + 10000);
    CHECK_EQ_I64(rc, TBC_SESSION_EVICTED);
    CHECK_EQ_U64(quiet.last_eviction_reason, TBC_EVICTION_NO_SESSION);
    CHECK(tbc_session_ready(&quiet, clock_monotonic_ms() + 10000) == TBC_SESSION_OK);
    CHECK(!tbc_u128_equal(quiet.client, first_client)); /* never reused for a new session */
    CHECK_EQ_U64(quiet.stats.registrations, 2);
    memcpy(tbc_session_body(&quiet), &limit_id, sizeof limit_id);
    CHECK_EQ_I64(tbc_session_call(&quiet, TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_ID_SIZE,
                                  clock_monotonic_ms() + 10000),
                 TBC_SESSION_OK);
    CHECK_EQ_U64(quiet.reply_body_size, TBC_EVENT_SIZE); /* found the account */
    tbc_session_free(&quiet);
    for (int i = 0; i < CLIENTS_MAX; i++) {
        if (others[i].send != NULL)
            tbc_session_free(&others[i]);
    }
    /* the submitter's own sessions may have been evicted too: they recover */
    struct tbc_account account;
    bool found = false;
    for (int attempt = 0; attempt < 20 && !found; attempt++)
        found = lookup_account(limit_id, &account);
    CHECK(found);
}

/* Once no session reaches the cluster (waited for, however long the
 * machine takes to notice), a call fails without waiting for its deadline:
 * a long one here, so that only a call that waited could come near it. */
static void test_unreachable_fails_fast(void)
{
    tb_test_server_kill(&server);
    int64_t until = clock_monotonic_ms() + 60000;
    struct tbc_submitter_stats stats;
    do {
        poll(NULL, 0, 50);
        tbc_submitter_stats(submitter, &stats);
    } while (stats.sessions_ready > 0 && clock_monotonic_ms() < until);
    REQUIRE(stats.sessions_ready == 0);
    poll(NULL, 0, 4 * TBC_FAIL_FAST_AFTER_MS); /* unreachable for longer than that */
    tbc_u128 id = limit_id;
    uint8_t found = 0;
    struct tbc_account account;
    int64_t started = clock_monotonic_ms();
    struct tbc_item item = {.operation = TBC_OPERATION_LOOKUP_ACCOUNTS,
                            .event_count = 1,
                            .events = &id,
                            .objects = &account,
                            .found = &found,
                            .deadline_ms = started + 60000};
    CHECK(tbc_submitter_call(submitter, &item) == TBC_ITEM_UNAVAILABLE);
    int64_t took = clock_monotonic_ms() - started;
    printf("     unavailable answered in %" PRId64 " ms\n", took);
    CHECK(took < 30000);
}

int main(void)
{
    if (tb_test_server_binary() == NULL) {
        printf("SKIPPED: TIGERBEETLE_BIN not set (TigerBeetle client integration tests)\n");
        return 77; /* ctest: skipped (SKIP_RETURN_CODE) */
    }
    if (tb_test_server_start(&server) != 0) {
        tb_test_server_stop(&server);
        return 1;
    }
    char error[256];
    if (tbc_submitter_open(tbc_u128_from_u64(0), server.address, 2, &submitter, error,
                           sizeof error) != 0) {
        fprintf(stderr, "%s\n", error);
        tb_test_server_stop(&server);
        return 1;
    }
    RUN(test_probe_and_register, "ping_client finds release 0.15.3 and the session registers");
    RUN(test_accounts_created_once,
        "accounts are created once; again is exists / exists_with_different_code");
    RUN(test_linked_chain_fails_as_a_unit,
        "a linked chain fails as a unit and its codes come back per event");
    RUN(test_invalid_item_never_sent, "a transfer with amount 0 fails locally and is never sent");
    RUN(test_concurrent_items_are_batched, "2400 concurrent items all succeed in fewer requests");
    RUN(test_expiry_runs_while_idle,
        "a 1 s hold expires while idle (keepalive drives 0.15.3's pulse)");
    RUN(test_stale_request_lands_after_its_deadline,
        "a request past its items' deadline is still resent and lands; stale_requests counts it "
        "until then");
    RUN(test_survives_kill_and_restart, "after kill -9 and restart the same sessions carry on");
    RUN(test_eviction_starts_a_new_session,
        "evicted by 64 newer clients, a session registers anew");
    RUN(test_unreachable_fails_fast, "with the server gone, work fails fast instead of hanging");
    tbc_submitter_close(submitter);
    tb_test_server_stop(&server);
    return test_summary();
}
