/* The sqlite backend when the disk fails: through a test VFS that fails
 * writes (disk full, I/O error) or fsyncs on demand, every request of the
 * failed transaction is answered backend_error (503) and nothing unwritten is
 * acknowledged. After a failed write, service resumes once writes succeed;
 * after a failed fsync, nothing more is acknowledged until a restart. A
 * torn write (half of a WAL commit frame's page, or of a checkpoint's page,
 * then a crash) loses nothing acknowledged and keeps the database sound.
 * Also: an answer waits for its fsync, and a full queue answers at once. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/sqlite/sq_bounds.h"
#include "backend/sqlite/sqlite.h"
#include "fault_vfs.h"
#include "sqlite_fixture.h"
#include "test.h"

#define OPEN(db)                                                                                   \
    do {                                                                                           \
        fault_vfs_set(FAULT_NONE);                                                                 \
        fault_vfs_set_sync_delay_ms(0);                                                            \
        fault_vfs_hold_wal_writes(false);                                                          \
        if (!db_open_fresh(db)) {                                                                  \
            fprintf(stderr, "  open: %s\n", (db)->error);                                          \
            CHECK(!"the backend opens");                                                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void fault_answers_503_then_recovers(enum fault fault)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_budget(&db, "usd", 100));
    uint64_t failures = fault_vfs_failures();
    fault_vfs_set(fault);
    struct reservation r = reserve_one(&db, "lease", "usd", 30, "alice");
    CHECK_EQ_I64(r.status, RESULT_UNAVAILABLE);
    CHECK(!r.allowed);
    CHECK_STR(r.error, "backend_error");
    CHECK(fault_vfs_failures() > failures);
    fault_vfs_set(FAULT_NONE);
    /* The unknown outcome is resolved by a retry with the same lease_id. */
    r = reserve_one(&db, "lease", "usd", 30, "alice");
    CHECK_EQ_I64(r.status, RESULT_OK);
    CHECK(r.allowed);
    CHECK_EQ_U64(usage_of(&db, "usd").reserved, 30);
    CHECK(backend_ready(db.backend));
    db_close(&db);
    REQUIRE(db_reopen(&db));
    CHECK_EQ_U64(usage_of(&db, "usd").reserved, 30); /* held once, not twice */
    CHECK_EQ_I64(db_query_int(&db, "SELECT count(*) FROM events WHERE lease_id='lease'"), 1);
    db_destroy(&db);
}

static void full_disk_answers_503_then_recovers(void)
{
    fault_answers_503_then_recovers(FAULT_WRITE_FULL);
}

static void write_error_answers_503_then_recovers(void)
{
    fault_answers_503_then_recovers(FAULT_WRITE_IO);
}

/* The commit was written but its fsync failed: the kernel may have lost it,
 * and later commits would build on it. So the backend answers 503 to
 * everything until it is reopened; then the retry finds the lease exactly
 * once (whether or not the failed commit reached the disk). */
static void failed_fsync_stops_acknowledging_until_restart(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_budget(&db, "usd", 100));
    fault_vfs_set(FAULT_SYNC_IO);
    struct reservation r = reserve_one(&db, "lease", "usd", 30, "alice");
    CHECK_EQ_I64(r.status, RESULT_UNAVAILABLE);
    CHECK_STR(r.error, "backend_error");
    fault_vfs_set(FAULT_NONE);
    CHECK(!backend_ready(db.backend));
    CHECK_EQ_I64(reserve_one(&db, "other", "usd", 1, NULL).status, RESULT_UNAVAILABLE);
    CHECK_EQ_I64(complete_one(&db, "lease", NULL, 0).status, RESULT_UNAVAILABLE);
    db_close(&db);
    REQUIRE(db_reopen(&db));
    CHECK(backend_ready(db.backend));
    r = reserve_one(&db, "lease", "usd", 30, "alice");
    CHECK(r.allowed);
    CHECK_EQ_U64(usage_of(&db, "usd").reserved, 30);
    db_close(&db);
    CHECK_EQ_I64(db_query_int(&db, "SELECT count(*) FROM events WHERE lease_id='lease'"), 1);
    CHECK_EQ_I64(db_query_int(&db, "SELECT count(*) FROM leases WHERE lease_id='other'"), 0);
    db_destroy(&db);
}

struct burst {
    struct db *db;
    atomic_int next;
    atomic_int unavailable;
    atomic_int allowed;
};

static void *burst_thread(void *argument)
{
    struct burst *b = argument;
    char lease[32];
    snprintf(lease, sizeof lease, "burst-%d", atomic_fetch_add(&b->next, 1));
    struct reservation r = reserve_one(b->db, lease, "tpm", 1, NULL);
    if (r.status == RESULT_UNAVAILABLE)
        atomic_fetch_add(&b->unavailable, 1);
    if (r.allowed)
        atomic_fetch_add(&b->allowed, 1);
    return NULL;
}

static void failed_group_commit_acknowledges_nothing(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_rolling(&db, "tpm", 1000, 600));
    REQUIRE(reserve_one(&db, "before", "tpm", 5, NULL).allowed);
    struct burst b = {.db = &db};
    fault_vfs_set(FAULT_WRITE_IO);
    pthread_t threads[32];
    for (int i = 0; i < 32; i++)
        pthread_create(&threads[i], NULL, burst_thread, &b);
    for (int i = 0; i < 32; i++)
        pthread_join(threads[i], NULL);
    fault_vfs_set(FAULT_NONE);
    CHECK_EQ_I64(atomic_load(&b.unavailable), 32);
    CHECK_EQ_I64(atomic_load(&b.allowed), 0);
    /* Nothing of them is held or written: only the earlier lease. */
    CHECK_EQ_U64(usage_of(&db, "tpm").reserved, 5);
    db_close(&db);
    CHECK_EQ_I64(db_query_int(&db, "SELECT count(*) FROM leases"), 1);
    CHECK_EQ_I64(db_query_int(&db, "SELECT count(*) FROM reservations"), 1);
    CHECK_EQ_I64(db_query_int(&db, "SELECT count(*) FROM events WHERE type='reserved'"), 1);
    REQUIRE(db_reopen(&db));
    CHECK_EQ_U64(usage_of(&db, "tpm").reserved, 5);
    db_destroy(&db);
}

static void failed_complete_frees_nothing(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_concurrency(&db, "slots", 1, 60));
    REQUIRE(reserve_one(&db, "a", "slots", 1, NULL).allowed);
    fault_vfs_set(FAULT_WRITE_IO);
    struct completion c = complete_one(&db, "a", NULL, 0);
    CHECK_EQ_I64(c.status, RESULT_UNAVAILABLE);
    CHECK_EQ_I64(release_one(&db, "a").status, RESULT_UNAVAILABLE);
    fault_vfs_set(FAULT_NONE);
    CHECK_EQ_U64(usage_of(&db, "slots").reserved, 1); /* pessimistic: still held */
    c = complete_one(&db, "a", NULL, 0);
    CHECK_EQ_I64(c.status, RESULT_OK);
    CHECK(c.reconciled);
    CHECK_EQ_U64(usage_of(&db, "slots").reserved, 0);
    db_destroy(&db);
}

static void failed_limit_change_is_reported(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_budget(&db, "usd", 100));
    fault_vfs_set(FAULT_WRITE_FULL);
    struct limit_definition d = {.kind = LIMIT_BUDGET, .capacity = 500, .period = PERIOD_MONTH};
    snprintf(d.key, sizeof d.key, "usd");
    char error[RESULT_ERROR_SIZE] = "";
    struct limit_state state;
    enum backend_admin_result put = backend_put_limit(db.backend, &d, &state, error, sizeof error);
    CHECK_EQ_I64(put, BACKEND_ADMIN_UNAVAILABLE);
    admin_error_text(error, put, d.key, &d, NULL); /* what the server answers */
    CHECK(strstr(error, "backend_error") != NULL);
    fault_vfs_set(FAULT_WRITE_FULL);
    CHECK_EQ_I64(backend_delete_limit(db.backend, "usd"), BACKEND_ADMIN_UNAVAILABLE);
    fault_vfs_set(FAULT_NONE);
    CHECK_EQ_U64(usage_of(&db, "usd").state.definition.capacity, 100);
    db_destroy(&db);
}

/* ---- Torn writes: a write that lands partly, then the crash. The test
 * forks: the child reserves TORN_ACKED leases (each acknowledged, so each
 * durable), arms the tear and runs into it; the parent reopens the database
 * the child left and checks recovery. */

#define TORN_ACKED 20

static void ack_lease(int i, char *lease, size_t size)
{
    snprintf(lease, size, "ack-%d", i);
}

/* In the child. Never returns: the tear kills it (SIGKILL); any exit code
 * says where it went wrong instead. */
static void run_into_the_tear(struct db *db, enum tear tear)
{
    if (!db_reopen(db))
        _exit(2);
    for (int i = 0; i < TORN_ACKED; i++) {
        char lease[16];
        ack_lease(i, lease, sizeof lease);
        if (!reserve_one(db, lease, "tpm", 1, NULL).allowed)
            _exit(3);
    }
    fault_vfs_tear(tear);
    if (tear == TEAR_WAL_COMMIT)
        reserve_one(db, "torn", "tpm", 1, NULL); /* its commit frame is torn */
    else
        db_close(db); /* the last connection checkpoints into the database file */
    _exit(4);         /* the torn write never came */
}

/* Forks a child that runs into the tear; true when it died of it. */
static bool crashed_in_a_torn_write(struct db *db, enum tear tear)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0)
        run_into_the_tear(db, tear);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return false;
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        fprintf(stderr, "  the child exited %d, not killed in the torn write\n",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return false;
    }
    return true;
}

/* Every acknowledged lease holds exactly once, the torn one not at all, the
 * database is sound, and the backend serves on. */
static void check_recovered(struct db *db)
{
    REQUIRE(db_reopen(db));
    CHECK_EQ_U64(usage_of(db, "tpm").reserved, TORN_ACKED);
    for (int i = 0; i < TORN_ACKED; i++) {
        char lease[16];
        ack_lease(i, lease, sizeof lease);
        CHECK(reserve_one(db, lease, "tpm", 1, NULL).allowed); /* a replay, not a new hold */
    }
    CHECK_EQ_U64(usage_of(db, "tpm").reserved, TORN_ACKED);
    CHECK(reserve_one(db, "after", "tpm", 1, NULL).allowed);
    db_close(db);
    CHECK_EQ_I64(db_query_int(db, "SELECT count(*) FROM leases WHERE lease_id='torn'"), 0);
    CHECK_EQ_I64(db_query_int(db, "SELECT count(*) FROM leases"), TORN_ACKED + 1);
    CHECK_EQ_I64(
        db_query_int(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check<>'ok'"),
        0);
}

static void torn_wal_commit_frame_is_rejected_at_recovery(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_rolling(&db, "tpm", 1000000, 3600));
    db_close(&db);
    REQUIRE(crashed_in_a_torn_write(&db, TEAR_WAL_COMMIT));
    check_recovered(&db);
    db_destroy(&db);
}

static void torn_checkpoint_write_is_repaired_from_the_wal(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_rolling(&db, "tpm", 1000000, 3600));
    db_close(&db);
    REQUIRE(crashed_in_a_torn_write(&db, TEAR_DATABASE));
    check_recovered(&db);
    db_destroy(&db);
}

static void answer_waits_for_the_fsync(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_rolling(&db, "tpm", 100, 60));
    uint64_t syncs = fault_vfs_syncs();
    fault_vfs_set_sync_delay_ms(200);
    int64_t started = clock_monotonic_ms();
    CHECK(reserve_one(&db, "a", "tpm", 1, NULL).allowed);
    int64_t elapsed = clock_monotonic_ms() - started;
    fault_vfs_set_sync_delay_ms(0);
    CHECK(fault_vfs_syncs() > syncs);
    CHECK(elapsed >= 200);
    db_destroy(&db);
}

struct counter {
    atomic_int done;
};

static void count_done(void *context)
{
    atomic_fetch_add(&((struct counter *)context)->done, 1);
}

/* Until the writer waits in a write held by fault_vfs_hold_wal_writes (it
 * has taken what was queued), however long that takes. */
static bool writer_parked(void)
{
    int64_t until = clock_monotonic_ms() + 60000;
    while (fault_vfs_held_wal_writes() == 0 && clock_monotonic_ms() < until) {
        struct timespec pause = {.tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
    return fault_vfs_held_wal_writes() > 0;
}

/* The writer sits in a held write while the queue fills: the request one
 * past SQ_QUEUE_ITEMS_MAX is answered backend_error before reserve()
 * returns; every queued one is answered afterwards. */
static void full_queue_answers_at_once(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_rolling(&db, "tpm", 1000000, 600));
    enum { COUNT = SQ_QUEUE_ITEMS_MAX + 2 };
    struct requirement req = {.key = "tpm", .key_length = 3, .amount = 1};
    struct reserve_request *requests = calloc(COUNT, sizeof *requests);
    struct reserve_result *results = calloc(COUNT, sizeof *results);
    char(*ids)[16] = calloc(COUNT, sizeof *ids);
    REQUIRE(requests != NULL && results != NULL && ids != NULL);
    for (int i = 0; i < COUNT; i++) {
        snprintf(ids[i], sizeof ids[i], "q%d", i);
        requests[i] = (struct reserve_request){.lease_id = ids[i],
                                               .lease_id_length = (uint32_t)strlen(ids[i]),
                                               .requirements = &req,
                                               .requirement_count = 1};
    }
    struct counter counter = {0};
    fault_vfs_hold_wal_writes(true);
    backend_reserve(db.backend, &requests[0], &results[0], 1, count_done, &counter);
    REQUIRE(writer_parked()); /* it has taken request 0 and waits in a write */
    struct timespec pause = {.tv_nsec = 10 * 1000000};
    for (int i = 1; i < COUNT - 1; i++)
        backend_reserve(db.backend, &requests[i], &results[i], 1, count_done, &counter);
    int before = atomic_load(&counter.done);
    backend_reserve(db.backend, &requests[COUNT - 1], &results[COUNT - 1], 1, count_done, &counter);
    CHECK_EQ_I64(atomic_load(&counter.done), before + 1); /* answered before returning */
    CHECK_EQ_I64(result_status_of(results[COUNT - 1].error), RESULT_UNAVAILABLE);
    fault_vfs_hold_wal_writes(false);
    while (atomic_load(&counter.done) < COUNT)
        nanosleep(&pause, NULL);
    int allowed = 0;
    for (int i = 0; i < COUNT - 1; i++)
        allowed += results[i].allowed;
    CHECK_EQ_I64(allowed, COUNT - 1);
    CHECK_EQ_U64(usage_of(&db, "tpm").reserved, COUNT - 1);
    free(requests);
    free(results);
    free(ids);
    db_destroy(&db);
}

/* While the writer is held in a write, 9 single-request calls queue up;
 * with the group commit capped at 4 requests they take 3 transactions
 * (4 + 4 + 1): one past the cap starts another transaction. */
static void group_commit_cap_splits_the_queue(void)
{
    struct db db;
    OPEN(&db);
    REQUIRE(put_rolling(&db, "tpm", 1000, 600));
    sq_backend_set_group_commit_max(db.backend, 4);
    enum { COUNT = 10 };
    struct requirement req = {.key = "tpm", .key_length = 3, .amount = 1};
    struct reserve_request requests[COUNT];
    struct reserve_result results[COUNT];
    char ids[COUNT][8];
    for (int i = 0; i < COUNT; i++) {
        snprintf(ids[i], sizeof ids[i], "g%d", i);
        requests[i] = (struct reserve_request){.lease_id = ids[i],
                                               .lease_id_length = (uint32_t)strlen(ids[i]),
                                               .requirements = &req,
                                               .requirement_count = 1};
    }
    struct backend_stats before, after;
    struct counter counter = {0};
    fault_vfs_hold_wal_writes(true);
    backend_reserve(db.backend, &requests[0], &results[0], 1, count_done, &counter);
    REQUIRE(writer_parked()); /* the writer holds request 0 in a write */
    struct timespec pause = {.tv_nsec = 10 * 1000000};
    backend_stats(db.backend, &before);
    for (int i = 1; i < COUNT; i++)
        backend_reserve(db.backend, &requests[i], &results[i], 1, count_done, &counter);
    fault_vfs_hold_wal_writes(false);
    while (atomic_load(&counter.done) < COUNT)
        nanosleep(&pause, NULL);
    backend_stats(db.backend, &after);
    CHECK_EQ_U64(after.batches - before.batches, 4); /* request 0's, then 4 + 4 + 1 */
    CHECK_EQ_U64(after.batched_items - before.batched_items, COUNT);
    for (int i = 0; i < COUNT; i++)
        CHECK(results[i].allowed);
    db_destroy(&db);
}

int main(void)
{
    if (fault_vfs_install() != 0) {
        fprintf(stderr, "cannot install the fault VFS\n");
        return 1;
    }
    RUN(full_disk_answers_503_then_recovers,
        "disk full: backend_error, nothing kept; the same lease_id succeeds once space returns");
    RUN(write_error_answers_503_then_recovers,
        "a write I/O error: backend_error; the retry holds exactly once");
    RUN(failed_fsync_stops_acknowledging_until_restart,
        "a failed fsync: backend_error, then 503 to everything until reopened; the retry then "
        "holds exactly once");
    RUN(failed_group_commit_acknowledges_nothing,
        "32 concurrent reserves in failing transactions: all backend_error, none written");
    RUN(failed_complete_frees_nothing,
        "a complete or release that fails frees nothing; a later complete does");
    RUN(failed_limit_change_is_reported,
        "a limit change or delete the disk refused is a storage error (unavailable) and changes "
        "nothing");
    RUN(torn_wal_commit_frame_is_rejected_at_recovery,
        "a crash mid-write of a WAL commit frame (half its page torn): recovery rejects the "
        "transaction by its checksum; every acknowledged lease holds once; the database is sound");
    RUN(torn_checkpoint_write_is_repaired_from_the_wal,
        "a crash mid-write of a checkpoint into the database file (half a page torn): the "
        "WAL still holds the page; nothing acknowledged is lost; the database is sound");
    RUN(answer_waits_for_the_fsync, "a reserve is answered only after its fsync returned");
    RUN(group_commit_cap_splits_the_queue,
        "one request past the group-commit cap goes into the next transaction");
    RUN(full_queue_answers_at_once,
        "one call past SQ_QUEUE_ITEMS_MAX is answered backend_error at once; the rest "
        "commit");
    return test_summary();
}
