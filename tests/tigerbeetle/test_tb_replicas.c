/* The native client against a 3-replica TigerBeetle cluster (TIGERBEETLE_BIN;
 * without it the test exits 77, skipped): the session registers with the
 * primary even when the first address is a backup, keeps a connection to
 * every replica, follows the view through a kill -9 of the primary, and
 * survives an eviction. Under load every transfer is retried with its own
 * id until acknowledged, so the target account's balance must equal the
 * number acknowledged: nothing lost, nothing twice. (Backups, SIGSTOP and
 * restarts are covered over HTTP by test_tb_replicas_http.py.) */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_session.h"
#include "tbclient/tbc_submitter.h"
#include "tb_server.h"
#include "test.h"

/* How long a call of these tests may take (an admin call's deadline). */
#define CALL_DEADLINE_MS 5000

#define REPLICAS 3
#define SESSIONS 4
#define LOAD_THREADS 4
/* How long a view change may take here before the test calls it stuck:
 * TigerBeetle's backups wait 5 s for the primary's heartbeat first. */
#define VIEW_CHANGE_MS_MAX 30000
/* After the replicas have moved to a new view, sessions need a resend or
 * two (at most a second apart) and items in flight their deadline. */
#define SETTLE_MS (TBC_RETRANSMIT_MS_MAX + TBC_ITEM_DEADLINE_MS)
/* A transfer retried this long without an acknowledgement is given up
 * (the balance check then fails). */
#define ACKNOWLEDGE_MS_MAX 60000

static struct tb_test_cluster cluster;
static struct tbc_submitter *submitter;

static const tbc_u128 operator_id = {.high = 0, .low = 2001};
static const tbc_u128 target_id = {.high = 0, .low = 2002};

/* Waits until every session is registered. */
static bool wait_all_ready(int64_t timeout_ms)
{
    int64_t until = clock_monotonic_ms() + timeout_ms;
    while (clock_monotonic_ms() < until) {
        struct tbc_submitter_stats stats;
        tbc_submitter_stats(submitter, &stats);
        if (stats.sessions_ready == SESSIONS)
            return true;
        poll(NULL, 0, 20);
    }
    return false;
}

static uint32_t cluster_view(void)
{
    uint32_t view = 0;
    if (tb_test_cluster_view(&cluster, VIEW_CHANGE_MS_MAX, &view) != 0)
        fprintf(stderr, "  no replica answers ping_client\n");
    return view;
}

/* Waits until the running replicas are in a view after `view`. */
static bool wait_view_after(uint32_t view, uint32_t *now_view)
{
    int64_t until = clock_monotonic_ms() + VIEW_CHANGE_MS_MAX;
    while (clock_monotonic_ms() < until) {
        if (tb_test_cluster_view(&cluster, 1000, now_view) == 0 && *now_view > view)
            return true;
        poll(NULL, 0, 100);
    }
    return false;
}

/* Restarts a replica and waits until it answers a ping (normal status);
 * TigerBeetle's known faults while it recovers are ridden out (tb_server.h). */
static bool restart_replica(uint32_t replica)
{
    return tb_test_cluster_restart(&cluster, replica) == 0;
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

/* ---- load: transfers of 1 to the target, each retried until acknowledged ---- */

struct load {
    pthread_mutex_t lock;
    bool stop;
    uint64_t next_id;
    uint64_t acknowledged;
    uint64_t unavailable;    /* answers "outcome unknown" (then the same id again) */
    uint64_t other_failures; /* anything else: always a bug */
    int64_t last_ack_ms;
    int64_t longest_gap_ms; /* without any acknowledgement */
    int64_t last_unavailable_ms;
};

static struct load load;

/* One transfer: 1 = acknowledged (created, or an earlier attempt was),
 * 0 = outcome unknown, -1 = a wrong answer. */
static int transfer_once(uint64_t id)
{
    struct tbc_transfer t = {.id = tbc_u128_make(9, id),
                             .debit_account_id = operator_id,
                             .credit_account_id = target_id,
                             .amount = tbc_u128_from_u64(1),
                             .ledger = 1,
                             .code = 1};
    uint32_t code = UINT32_MAX;
    struct tbc_item item = {.operation = TBC_OPERATION_CREATE_TRANSFERS,
                            .event_count = 1,
                            .events = &t,
                            .codes = &code,
                            .deadline_ms = clock_monotonic_ms() + TBC_ITEM_DEADLINE_MS};
    enum tbc_item_status status = tbc_submitter_call(submitter, &item);
    if (status == TBC_ITEM_UNAVAILABLE)
        return 0;
    return status == TBC_ITEM_OK && (code == 0 || code == TBC_TRANSFER_EXISTS) ? 1 : -1;
}

static void record(int outcome)
{
    int64_t now = clock_monotonic_ms();
    pthread_mutex_lock(&load.lock);
    if (outcome == 1) {
        load.acknowledged++;
        if (now - load.last_ack_ms > load.longest_gap_ms)
            load.longest_gap_ms = now - load.last_ack_ms;
        load.last_ack_ms = now;
    } else if (outcome == 0) {
        load.unavailable++;
        load.last_unavailable_ms = now;
    } else {
        load.other_failures++;
    }
    pthread_mutex_unlock(&load.lock);
}

static void *load_main(void *argument)
{
    (void)argument;
    for (;;) {
        pthread_mutex_lock(&load.lock);
        bool stop = load.stop;
        uint64_t id = ++load.next_id;
        pthread_mutex_unlock(&load.lock);
        if (stop)
            return NULL;
        int64_t give_up_ms = clock_monotonic_ms() + ACKNOWLEDGE_MS_MAX;
        int outcome;
        do {
            outcome = transfer_once(id);
            record(outcome);
            if (outcome == 0)
                poll(NULL, 0, 20);
        } while (outcome == 0 && clock_monotonic_ms() < give_up_ms);
    }
}

static pthread_t load_threads[LOAD_THREADS];

static void load_start(void)
{
    pthread_mutex_lock(&load.lock);
    load.stop = false;
    load.acknowledged = load.unavailable = load.other_failures = 0;
    load.longest_gap_ms = 0;
    load.last_unavailable_ms = 0;
    load.last_ack_ms = clock_monotonic_ms();
    pthread_mutex_unlock(&load.lock);
    for (int i = 0; i < LOAD_THREADS; i++)
        pthread_create(&load_threads[i], NULL, load_main, NULL);
}

static void load_stop(void)
{
    pthread_mutex_lock(&load.lock);
    load.stop = true;
    pthread_mutex_unlock(&load.lock);
    for (int i = 0; i < LOAD_THREADS; i++)
        pthread_join(load_threads[i], NULL);
}

/* Every transfer ever acknowledged is in the balance exactly once. */
static void check_balance(void)
{
    static uint64_t acknowledged_total;
    acknowledged_total += load.acknowledged;
    struct tbc_account account;
    REQUIRE(lookup_account(target_id, &account));
    CHECK_EQ_U64(account.credits_posted.low, acknowledged_total);
    CHECK_EQ_U64(load.other_failures, 0);
}

static void sleep_ms(int ms)
{
    poll(NULL, 0, ms);
}

/* ---- tests ---- */

static void test_registers_with_the_primary(void)
{
    REQUIRE(wait_all_ready(30000));
    uint32_t view = cluster_view();
    /* A fresh cluster starts in view 1: the primary is replica 1 and the
     * first address a backup, which drops a register on 0.15.3. */
    CHECK(view % REPLICAS != 0);
    struct tbc_account accounts[2] = {{.id = operator_id, .ledger = 1, .code = 1},
                                      {.id = target_id, .ledger = 1, .code = 1}};
    uint32_t codes[2];
    struct tbc_item item = {.operation = TBC_OPERATION_CREATE_ACCOUNTS,
                            .event_count = 2,
                            .events = accounts,
                            .codes = codes,
                            .deadline_ms = clock_monotonic_ms() + CALL_DEADLINE_MS};
    CHECK(tbc_submitter_call(submitter, &item) == TBC_ITEM_OK);
    CHECK_EQ_U64(codes[0], 0);
    CHECK_EQ_U64(codes[1], 0);
    struct tbc_submitter_stats stats;
    tbc_submitter_stats(submitter, &stats);
    CHECK_EQ_U64(stats.view, view);
}

static void test_session_talks_to_every_replica(void)
{
    struct tbc_address addresses[TBC_REPLICAS_MAX];
    char error[128];
    REQUIRE(tbc_addresses_parse(cluster.addresses, addresses, error, sizeof error) == REPLICAS);
    static struct tbc_session session;
    REQUIRE(tbc_session_init(&session, tbc_u128_from_u64(0), addresses, REPLICAS) == 0);
    REQUIRE(tbc_session_ready(&session, clock_monotonic_ms() + 10000) == TBC_SESSION_OK);
    memcpy(tbc_session_body(&session), &target_id, sizeof target_id);
    CHECK_EQ_I64(tbc_session_call(&session, TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_ID_SIZE,
                                  clock_monotonic_ms() + 10000),
                 TBC_SESSION_OK);
    CHECK_EQ_U64(session.reply_body_size, TBC_EVENT_SIZE);
    CHECK_EQ_U64(session.view, cluster_view());
    CHECK_EQ_U64(session.reply_replica, session.view % REPLICAS); /* the primary answered */
    for (uint32_t i = 0; i < REPLICAS; i++)
        CHECK(session.connections[i].fd >= 0 && !session.connections[i].connecting);
    tbc_session_free(&session);
}

/* kill -9 of the primary under load: nothing is acknowledged until the
 * others have moved to a new view (measured and printed), then everything
 * is again; no transfer lost or counted twice. The old primary is
 * restarted afterwards, as a backup (restarts under load are covered over
 * HTTP). */
static void test_primary_killed(void)
{
    uint32_t view = cluster_view();
    uint32_t old_primary = view % REPLICAS;
    load_start();
    sleep_ms(1000);
    int64_t kill_ms = clock_monotonic_ms();
    tb_test_cluster_kill(&cluster, old_primary);
    uint32_t new_view = view;
    bool changed = wait_view_after(view, &new_view);
    int64_t view_change_ms = clock_monotonic_ms() - kill_ms;
    sleep_ms(SETTLE_MS + 3000); /* the new primary serves with one backup */
    load_stop();
    int64_t end_ms = clock_monotonic_ms();
    CHECK(changed);
    CHECK(restart_replica(old_primary));
    printf("     primary %u killed: view %u -> %u seen after %" PRId64
           " ms; no acknowledgement for %" PRId64 " ms; %" PRIu64 " transfers, %" PRIu64
           " unavailable answers\n",
           old_primary, view, new_view, view_change_ms, load.longest_gap_ms, load.acknowledged,
           load.unavailable);
    CHECK(load.longest_gap_ms < VIEW_CHANGE_MS_MAX);
    /* unavailable only until the view change had settled, not after */
    CHECK(load.last_unavailable_ms < end_ms - 3000);
    check_balance();
    struct tbc_submitter_stats stats;
    tbc_submitter_stats(submitter, &stats);
    CHECK(stats.view >= new_view);
}

#define CLIENTS_MAX 64 /* the cluster's session table (clients_max) */

/* A session goes quiet while 64 other clients register: the primary evicts
 * it; its next request learns so and the session starts over with a new
 * client id, registering with the primary again. */
static void test_eviction_starts_a_new_session(void)
{
    struct tbc_address addresses[TBC_REPLICAS_MAX];
    char error[128];
    REQUIRE(tbc_addresses_parse(cluster.addresses, addresses, error, sizeof error) == REPLICAS);
    static struct tbc_session quiet, other;
    REQUIRE(tbc_session_init(&quiet, tbc_u128_from_u64(0), addresses, REPLICAS) == 0);
    REQUIRE(tbc_session_init(&other, tbc_u128_from_u64(0), addresses, REPLICAS) == 0);
    REQUIRE(tbc_session_ready(&quiet, clock_monotonic_ms() + 10000) == TBC_SESSION_OK);
    tbc_u128 first_client = quiet.client;
    int registered = 0;
    for (int i = 0; i < CLIENTS_MAX; i++) {
        /* one session object, a new client (and session) each time */
        other.dead = true;
        if (tbc_session_ready(&other, clock_monotonic_ms() + 10000) == TBC_SESSION_OK)
            registered++;
    }
    CHECK_EQ_I64(registered, CLIENTS_MAX);
    memcpy(tbc_session_body(&quiet), &target_id, sizeof target_id);
    int rc = tbc_session_call(&quiet, TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_ID_SIZE,
                              clock_monotonic_ms() + 10000);
    CHECK_EQ_I64(rc, TBC_SESSION_EVICTED);
    CHECK_EQ_U64(quiet.last_eviction_reason, TBC_EVICTION_NO_SESSION);
    CHECK(tbc_session_ready(&quiet, clock_monotonic_ms() + 10000) == TBC_SESSION_OK);
    CHECK(!tbc_u128_equal(quiet.client, first_client));
    memcpy(tbc_session_body(&quiet), &target_id, sizeof target_id);
    CHECK_EQ_I64(tbc_session_call(&quiet, TBC_OPERATION_LOOKUP_ACCOUNTS, TBC_ID_SIZE,
                                  clock_monotonic_ms() + 10000),
                 TBC_SESSION_OK);
    CHECK_EQ_U64(quiet.reply_body_size, TBC_EVENT_SIZE);
    tbc_session_free(&quiet);
    tbc_session_free(&other);
    /* the submitter's sessions were evicted too: they recover by themselves */
    struct tbc_account account;
    bool found = false;
    for (int attempt = 0; attempt < 20 && !found; attempt++)
        found = lookup_account(target_id, &account);
    CHECK(found);
}

int main(void)
{
    if (tb_test_server_binary() == NULL) {
        printf("SKIPPED: TIGERBEETLE_BIN not set (TigerBeetle 3-replica tests)\n");
        return 77;
    }
    pthread_mutex_init(&load.lock, NULL);
    if (tb_test_cluster_start(&cluster, REPLICAS) != 0) {
        tb_test_cluster_stop(&cluster);
        return 1;
    }
    char error[256];
    if (tbc_submitter_open(tbc_u128_from_u64(0), cluster.addresses, SESSIONS, &submitter, error,
                           sizeof error) != 0) {
        fprintf(stderr, "%s\n", error);
        tb_test_cluster_stop(&cluster);
        return 1;
    }
    RUN(test_registers_with_the_primary,
        "sessions register with the primary of view 1 (replica 1), not the first address");
    RUN(test_session_talks_to_every_replica,
        "a session connects to all 3 replicas and the primary answers its requests");
    RUN(test_primary_killed,
        "kill -9 of the primary: unavailable only during the view change, nothing lost or twice");
    RUN(test_eviction_starts_a_new_session,
        "evicted by 64 newer clients, a session registers anew with the primary");
    tbc_submitter_close(submitter);
    tb_test_cluster_stop(&cluster);
    return test_summary();
}
