/* Allocation failure, everywhere on a path (fault_alloc.h): for N = 1, 2,
 * ... the N-th allocation of a reserve/complete/release path (memory and
 * sqlite backends) and of the registry's load and rewrites fails. Each run
 * must end in a clean error or a clean success, keep the accounting true
 * (what usage reports is what the successful calls hold), and leave no block
 * of the project's own code allocated once everything is closed. */
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/memory/memory.h"
#include "backend/sqlite/sqlite.h"
#include "fault_alloc.h"
#include "server/registry.h"
#include "test.h"

#define T0_MS INT64_C(1768478400000) /* 2026-01-15T12:00:00Z */
#define RUNS_MAX 100000              /* far above the allocations of any path */

static char root[256];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void make_dir(char *out, size_t size, unsigned run)
{
    snprintf(out, size, "%s/%u", root, run);
    nftw(out, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    REQUIRE(mkdir(out, 0700) == 0);
}

static struct limit_definition definition(const char *key, enum limit_kind kind, uint64_t capacity)
{
    struct limit_definition d;
    memset(&d, 0, sizeof d);
    snprintf(d.key, sizeof d.key, "%s", key);
    d.kind = kind;
    d.capacity = capacity;
    if (kind == LIMIT_ROLLING)
        d.window_seconds = 60;
    else
        d.timeout_seconds = 60;
    if (kind == LIMIT_BUDGET)
        d.period = PERIOD_MONTH;
    char error[256];
    if (limit_definition_validate(&d, error, sizeof error) != 0)
        fprintf(stderr, "bad test definition %s: %s\n", key, error);
    return d;
}

/* What one run did, to check usage against it. */
struct ledger {
    uint64_t tpm_reserved;
    uint64_t slots_reserved;
    uint64_t usd_reserved;
    uint64_t usd_used;
    bool broken; /* an answer that is neither a clean success nor a clean error */
};

static bool reserve(struct backend *b, const char *lease, uint64_t tpm, uint64_t usd,
                    struct ledger *ledger)
{
    struct requirement r[3] = {{"tpm", 3, tpm}, {"slots", 5, 1}, {"usd", 3, usd}};
    struct reserve_request request = {.lease_id = lease,
                                      .lease_id_length = (uint32_t)strlen(lease),
                                      .caller = "alloc-test",
                                      .caller_length = 10,
                                      .requirements = r,
                                      .requirement_count = 3};
    struct reserve_result result;
    backend_reserve_wait(b, &request, &result, 1);
    if (result.error == BACKEND_UNAVAILABLE)
        return false; /* clean: nothing held (checked against usage below) */
    if (result.error != BACKEND_OK || !result.allowed) {
        ledger->broken = true;
        return false;
    }
    ledger->tpm_reserved += tpm;
    ledger->slots_reserved += 1;
    ledger->usd_reserved += usd;
    return true;
}

/* Completes with an overrun of the budget so that warnings are made. */
static void complete(struct backend *b, const char *lease, uint64_t tpm, uint64_t usd_reserved,
                     uint64_t usd_actual, struct ledger *ledger)
{
    struct actual a[2] = {{"tpm", 3, tpm}, {"usd", 3, usd_actual}};
    struct complete_request request = {.lease_id = lease,
                                       .lease_id_length = (uint32_t)strlen(lease),
                                       .actuals = a,
                                       .actual_count = 2};
    struct complete_result result;
    backend_complete_wait(b, &request, &result, 1);
    if (result.error == BACKEND_OK && result.reconciled) {
        /* tpm shrinks to the actual (rolling: used), the slot frees, the budget commits */
        ledger->tpm_reserved -= tpm; /* reserved tpm == actual here */
        ledger->slots_reserved -= 1;
        ledger->usd_reserved -= usd_reserved;
        ledger->usd_used += usd_actual;
    } else if (result.error != BACKEND_UNAVAILABLE) {
        ledger->broken = true;
    }
    free(result.warnings);
}

static void release(struct backend *b, const char *lease, uint64_t tpm, uint64_t usd,
                    struct ledger *ledger)
{
    struct release_request request = {.lease_id = lease,
                                      .lease_id_length = (uint32_t)strlen(lease)};
    struct release_result result;
    backend_release_wait(b, &request, &result, 1);
    if (result.error == BACKEND_OK) {
        ledger->tpm_reserved -= tpm;
        ledger->slots_reserved -= 1;
        ledger->usd_reserved -= usd;
    } else if (result.error != BACKEND_UNAVAILABLE) {
        ledger->broken = true;
    }
}

/* usage as the ledger says, with the allocator disarmed (usage itself may
 * allocate). A failed complete/release may or may not have applied on the
 * sqlite backend (outcome unknown), so only what is certain is checked. */
static void check_usage(struct backend *b, const struct ledger *ledger, bool certain)
{
    struct limit_usage u;
    REQUIRE(backend_usage(b, "slots", T0_MS, &u) == 0);
    if (certain)
        CHECK_EQ_U64(u.reserved, ledger->slots_reserved);
    REQUIRE(backend_usage(b, "usd", T0_MS, &u) == 0);
    if (certain) {
        CHECK_EQ_U64(u.reserved, ledger->usd_reserved);
        CHECK_EQ_U64(u.used + u.debt, ledger->usd_used);
    }
    CHECK(u.reserved + u.used + u.debt <= 2 * 1000);
}

/* One run of the data path; false when the whole path ran without the
 * armed failure firing (the loop is over). */
static bool data_path_run(const struct backend_ops *ops, const void *options, uint64_t n,
                          unsigned run, bool certain_on_failure)
{
    char dir[300];
    make_dir(dir, sizeof dir, run);
    struct clock_manual clock;
    clock_manual_init(&clock, T0_MS);
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &clock.clock;
    config.data_dir = dir;
    config.lease_cache_entries = 64;
    uint64_t live_before = fault_alloc_live();
    fault_alloc_fail_at(n);
    struct backend *b = NULL;
    char error[512] = "";
    if (backend_open(ops, &config, options, &b, error, sizeof error) != 0) {
        bool fired = fault_alloc_fired();
        fault_alloc_fail_at(0);
        CHECK(fired);
        CHECK(error[0] != '\0');
        CHECK_EQ_U64(fault_alloc_live(), live_before);
        return fired;
    }
    struct limit_state state;
    struct limit_definition defs[3] = {definition("tpm", LIMIT_ROLLING, 1000),
                                       definition("slots", LIMIT_CONCURRENCY, 4),
                                       definition("usd", LIMIT_BUDGET, 1000)};
    bool defined = true;
    for (int i = 0; i < 3; i++)
        defined = defined && backend_put_limit(b, &defs[i], &state, error, sizeof error) == 0;
    struct ledger ledger = {0};
    if (defined) {
        bool a = reserve(b, "a", 100, 400, &ledger);
        bool c = reserve(b, "c", 50, 300, &ledger);
        if (a)
            complete(b, "a", 100, 400, 700, &ledger); /* over the room left: debt, warnings */
        if (c)
            release(b, "c", 50, 300, &ledger);
        bool tick_changed = false;
        (void)backend_tick(b, &tick_changed);
    }
    bool fired = fault_alloc_fired();
    fault_alloc_fail_at(0);
    CHECK(!ledger.broken);
    if (defined)
        check_usage(b, &ledger, !fired || certain_on_failure);
    else
        CHECK(fired); /* only an injected failure stops a put here */
    backend_close(b);
    CHECK_EQ_U64(fault_alloc_live(), live_before);
    return fired;
}

/* stride: fail every stride-th allocation point (1: every one). */
static void data_path_loop(const char *name, const struct backend_ops *ops, const void *options,
                           bool certain_on_failure, uint64_t stride)
{
    unsigned runs = 0;
    uint64_t n = 1;
    while (n < RUNS_MAX && data_path_run(ops, options, n, runs, certain_on_failure)) {
        runs++;
        n += stride;
    }
    printf("  %s: %u runs, each with one failed allocation (every %" PRIu64
           " allocation points), then a clean run\n",
           name, runs, stride);
    CHECK(runs > 10); /* the path allocates: the loop did run */
    CHECK(n < RUNS_MAX);
}

static void memory_data_path_fails_cleanly(void)
{
    data_path_loop("memory", &mem_backend_ops, NULL, true, 1);
}

static void sqlite_data_path_fails_cleanly(void)
{
    struct sq_options options;
    sq_options_defaults(&options);
    options.synchronous_normal = true; /* the path, not the disk, is under test */
    /* SQLite's own allocations make thousands of points (about 8,500): every
     * 7th keeps the run short; LLMLIMIT_ALLOC_EVERY=1 walks them all. */
    const char *every = getenv("LLMLIMIT_ALLOC_EVERY");
    uint64_t stride = every != NULL && atoi(every) > 0 ? (uint64_t)atoi(every) : 7;
    data_path_loop("sqlite", &sq_backend_ops, &options, false, stride);
}

/* ---- the registry */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *text = calloc(1, 65536);
    if (text != NULL)
        (void)fread(text, 1, 65535, f);
    fclose(f);
    return text;
}

static const char registry_text[] =
    "[{\"definition\":{\"key\":\"tpm\",\"kind\":\"rolling\",\"capacity\":1000,"
    "\"window_seconds\":60,\"timeout_seconds\":0,\"period\":\"\",\"unit\":\"tokens\","
    "\"description\":\"\",\"overage\":\"debt\"},\"status\":\"active\",\"pending_decrease_to\":0},\n"
    "{\"definition\":{\"key\":\"usd\",\"kind\":\"budget\",\"capacity\":1000,"
    "\"window_seconds\":0,\"timeout_seconds\":60,\"period\":\"month\",\"unit\":\"usd_micros\","
    "\"description\":\"\",\"overage\":\"debt\"},\"status\":\"active\",\"pending_decrease_to\":0}]"
    "\n";

/* Every limits.json the run can leave is one a clean start loads. */
static void check_registry_loads(const char *dir)
{
    struct clock_manual clock;
    clock_manual_init(&clock, T0_MS);
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &clock.clock;
    config.data_dir = dir;
    struct backend *b = NULL;
    char error[512];
    REQUIRE(backend_open(&mem_backend_ops, &config, NULL, &b, error, sizeof error) == 0);
    struct registry *registry = NULL;
    CHECK(registry_open(dir, b, &registry, error, sizeof error) == 0);
    if (registry != NULL)
        registry_close(registry);
    backend_close(b);
}

static bool registry_run(uint64_t n, unsigned run)
{
    char dir[300], file[340];
    make_dir(dir, sizeof dir, 100000 + run);
    snprintf(file, sizeof file, "%s/limits.json", dir);
    write_file(file, registry_text);
    struct clock_manual clock;
    clock_manual_init(&clock, T0_MS);
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &clock.clock;
    config.data_dir = dir;
    config.lease_cache_entries = 64;
    struct backend *b = NULL;
    char error[512] = "";
    uint64_t live_before = fault_alloc_live();
    if (backend_open(&mem_backend_ops, &config, NULL, &b, error, sizeof error) != 0) {
        CHECK(!"the memory backend opens");
        return false;
    }
    fault_alloc_fail_at(n);
    struct registry *registry = NULL;
    if (registry_open(dir, b, &registry, error, sizeof error) == 0) {
        struct limit_definition slots = definition("slots", LIMIT_CONCURRENCY, 4);
        struct limit_state state;
        enum registry_outcome put = registry_put(registry, &slots, &state, error, sizeof error);
        /* Out of memory in the backend is its storage failing (503), not a
         * refusal of the definition (400). */
        CHECK(put == REGISTRY_OK || put == REGISTRY_BACKEND_FAILED || put == REGISTRY_WRITE_FAILED);
        enum registry_outcome deleted = registry_delete(registry, "tpm");
        CHECK(deleted == REGISTRY_OK || deleted == REGISTRY_UNKNOWN ||
              deleted == REGISTRY_WRITE_FAILED);
        enum registry_outcome saved = registry_save(registry);
        CHECK(saved == REGISTRY_OK || saved == REGISTRY_WRITE_FAILED);
        registry_close(registry);
    } else {
        CHECK(fault_alloc_fired());
        CHECK(strstr(error, "limits.json") != NULL || strstr(error, "memory") != NULL);
        char *text = read_file(file);
        CHECK(text != NULL && strcmp(text, registry_text) == 0); /* untouched */
        free(text);
    }
    bool fired = fault_alloc_fired();
    fault_alloc_fail_at(0);
    backend_close(b);
    CHECK_EQ_U64(fault_alloc_live(), live_before);
    check_registry_loads(dir);
    return fired;
}

static void registry_fails_cleanly(void)
{
    unsigned runs = 0;
    uint64_t n = 1;
    while (n < RUNS_MAX && registry_run(n, runs)) {
        runs++;
        n++;
    }
    printf("  registry: %u runs, each with one failed allocation, then a clean run\n", runs);
    CHECK(runs > 5);
}

int main(void)
{
    if (fault_alloc_sqlite_install() != 0) {
        fprintf(stderr, "cannot install SQLite's allocator hooks\n");
        return 1;
    }
    const char *base = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/llmlimit-alloc-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(root) == NULL)
        return 1;
    RUN(memory_data_path_fails_cleanly,
        "memory backend: each failed allocation of open/put/reserve/complete/release/tick is a "
        "clean error, usage stays true, nothing leaks");
    RUN(sqlite_data_path_fails_cleanly,
        "sqlite backend: each failed allocation (ours and SQLite's) is a clean error, nothing of "
        "ours leaks");
    RUN(registry_fails_cleanly,
        "registry: each failed allocation of load/put/delete/save is a clean error, limits.json "
        "stays loadable, nothing leaks");
    nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return test_summary();
}
