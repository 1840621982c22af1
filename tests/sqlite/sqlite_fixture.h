/* Shared helpers of the sqlite backend's own tests: a backend on a manual
 * clock in a fresh data directory that can be closed and reopened, and
 * blocking one-line wrappers over the data path. */
#ifndef LLMLIMIT_SQLITE_FIXTURE_H
#define LLMLIMIT_SQLITE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend_results.h"
#include "core/clock.h"

/* 2026-01-15T12:00:00Z */
#define START_MS INT64_C(1768478400000)

struct db {
    const struct backend_ops *ops;
    struct backend *backend;
    struct clock_manual clock;
    char data_dir[256];
    char error[512];
    int64_t retention_ms; /* sq_options.retention_ms of the next (re)open */
};

/* A fresh data directory and an open backend. false on failure (error set). */
bool db_open_fresh(struct db *db);
/* Opens (again) on the same directory and clock. */
bool db_reopen(struct db *db);
void db_close(struct db *db);
/* Closes and removes the data directory. */
void db_destroy(struct db *db);
/* Path of the database file, for direct inspection. */
void db_path(const struct db *db, char *out, size_t size);
/* Runs one SQL statement on the database file with a separate connection;
 * returns the first column of the first row as an integer (0 if none). */
int64_t db_query_int(const struct db *db, const char *sql);

bool put_budget(struct db *db, const char *key, uint64_t capacity);
bool put_rolling(struct db *db, const char *key, uint64_t capacity, uint32_t window_seconds);
bool put_concurrency(struct db *db, const char *key, uint64_t capacity, uint32_t timeout_seconds);

struct reservation reserve_one(struct db *db, const char *lease_id, const char *key,
                               uint64_t amount, const char *caller);
/* Completes with one actual (key, amount; key NULL: none). */
struct completion complete_one(struct db *db, const char *lease_id, const char *key,
                               uint64_t actual);
struct release_outcome release_one(struct db *db, const char *lease_id);
struct limit_usage usage_of(struct db *db, const char *key);
void tick_once(struct db *db);

#endif
