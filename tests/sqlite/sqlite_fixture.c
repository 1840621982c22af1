/* Helpers of the sqlite backend's own tests (see sqlite_fixture.h). */
#include "sqlite_fixture.h"

#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sqlite/sqlite.h"

bool db_open_fresh(struct db *db)
{
    memset(db, 0, sizeof *db);
    db->ops = backend_find("sqlite");
    const char *tmp = getenv("TMPDIR");
    snprintf(db->data_dir, sizeof db->data_dir, "%s/llmlimit-sqlite-XXXXXX",
             tmp != NULL ? tmp : P_tmpdir);
    if (db->ops == NULL || mkdtemp(db->data_dir) == NULL) {
        snprintf(db->error, sizeof db->error, "no sqlite backend or no temp dir");
        return false;
    }
    clock_manual_init(&db->clock, START_MS);
    return db_reopen(db);
}

bool db_reopen(struct db *db)
{
    struct backend_config config;
    backend_config_defaults(&config);
    config.clock = &db->clock.clock;
    config.data_dir = db->data_dir;
    struct sq_options options;
    sq_options_defaults(&options);
    options.retention_ms = db->retention_ms;
    db->error[0] = '\0';
    if (backend_open(db->ops, &config, &options, &db->backend, db->error, sizeof db->error) != 0) {
        db->backend = NULL;
        return false;
    }
    return true;
}

void db_close(struct db *db)
{
    if (db->backend != NULL)
        backend_close(db->backend);
    db->backend = NULL;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void db_destroy(struct db *db)
{
    db_close(db);
    if (db->data_dir[0] != '\0')
        nftw(db->data_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

void db_path(const struct db *db, char *out, size_t size)
{
    snprintf(out, size, "%s/llmlimit.db", db->data_dir);
}

int64_t db_query_int(const struct db *db, const char *sql)
{
    char path[300];
    db_path(db, path, sizeof path);
    sqlite3 *conn = NULL;
    int64_t value = 0;
    if (sqlite3_open_v2(path, &conn, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *stmt = NULL;
        int rc = sqlite3_prepare_v2(conn, sql, -1, &stmt, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW)
            value = sqlite3_column_int64(stmt, 0);
        else if (rc != SQLITE_DONE)
            fprintf(stderr, "  query %s: %s\n", sql, sqlite3_errmsg(conn));
        sqlite3_finalize(stmt);
    }
    sqlite3_close(conn);
    return value;
}

static bool put_definition(struct db *db, struct limit_definition d)
{
    char error[256];
    struct limit_state state;
    if (limit_definition_validate(&d, error, sizeof error) != 0 ||
        backend_put_limit(db->backend, &d, &state, error, sizeof error) != 0) {
        fprintf(stderr, "  put %s: %s\n", d.key, error);
        return false;
    }
    return true;
}

bool put_budget(struct db *db, const char *key, uint64_t capacity)
{
    struct limit_definition d = {
        .kind = LIMIT_BUDGET, .capacity = capacity, .period = PERIOD_MONTH, .timeout_seconds = 60};
    snprintf(d.key, sizeof d.key, "%s", key);
    return put_definition(db, d);
}

bool put_rolling(struct db *db, const char *key, uint64_t capacity, uint32_t window_seconds)
{
    struct limit_definition d = {
        .kind = LIMIT_ROLLING, .capacity = capacity, .window_seconds = window_seconds};
    snprintf(d.key, sizeof d.key, "%s", key);
    return put_definition(db, d);
}

bool put_concurrency(struct db *db, const char *key, uint64_t capacity, uint32_t timeout_seconds)
{
    struct limit_definition d = {
        .kind = LIMIT_CONCURRENCY, .capacity = capacity, .timeout_seconds = timeout_seconds};
    snprintf(d.key, sizeof d.key, "%s", key);
    return put_definition(db, d);
}

struct reservation reserve_one(struct db *db, const char *lease_id, const char *key,
                               uint64_t amount, const char *caller)
{
    struct requirement requirement = {
        .key = key, .key_length = (uint32_t)strlen(key), .amount = amount};
    struct reserve_request request = {.lease_id = lease_id,
                                      .lease_id_length = (uint32_t)strlen(lease_id),
                                      .caller = caller,
                                      .caller_length = caller ? (uint32_t)strlen(caller) : 0,
                                      .requirements = &requirement,
                                      .requirement_count = 1};
    struct reserve_result result;
    backend_reserve_wait(db->backend, &request, &result, 1);
    return reservation_of(&request, &result);
}

struct completion complete_one(struct db *db, const char *lease_id, const char *key,
                               uint64_t actual)
{
    struct actual a = {
        .key = key, .key_length = key != NULL ? (uint32_t)strlen(key) : 0, .actual_amount = actual};
    struct complete_request request = {.lease_id = lease_id,
                                       .lease_id_length = (uint32_t)strlen(lease_id),
                                       .actuals = &a,
                                       .actual_count = key != NULL ? 1 : 0};
    struct complete_result result;
    backend_complete_wait(db->backend, &request, &result, 1);
    return completion_of(&request, &result);
}

struct release_outcome release_one(struct db *db, const char *lease_id)
{
    struct release_request request = {.lease_id = lease_id,
                                      .lease_id_length = (uint32_t)strlen(lease_id)};
    struct release_result result;
    backend_release_wait(db->backend, &request, &result, 1);
    return release_outcome_of(&result);
}

struct limit_usage usage_of(struct db *db, const char *key)
{
    struct limit_usage u;
    memset(&u, 0, sizeof u);
    if (backend_usage(db->backend, key, clock_now_ms(&db->clock.clock), &u) != 0)
        memset(&u, 0, sizeof u);
    return u;
}

void tick_once(struct db *db)
{
    bool changed = false;
    backend_tick(db->backend, &changed);
}
