/* The sqlite backend's database: connection settings (WAL, synchronous,
 * busy timeout), the versioned schema with its migrations, and the prepared
 * statements of the write connection. */
#include "sq_schema.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "sq_backend.h"
#include "sqlite.h"

/* The columns a lease row has in both versions (v1 `leases`, v2 `leases2`).
 * CHECKs as OR chains: an IN list would build a temporary table on every
 * insert and update. */
#define LEASE_COLUMNS                                                                              \
    " state TEXT NOT NULL CHECK (state='allowed' OR state='denied' OR state='completed' OR"        \
    "  state='released'),"                                                                         \
    " fingerprint TEXT NOT NULL,"                                                                  \
    " caller TEXT NOT NULL,"                                                                       \
    " reserved_at INTEGER NOT NULL,"                                                               \
    " expires_at INTEGER NOT NULL,"

/* Schema version 1, the start of every database (version 2 below rebuilds
 * its lease, reservation and event tables). Every table a change touches is
 * written in the same transaction as the audit event that records it. */
static const char schema_v1[] =
    /* One row per incarnation of a key: deleting a limit keeps its row (and
     * its leases can still complete); putting the key again makes a new one. */
    "CREATE TABLE limits ("
    " id INTEGER PRIMARY KEY,"
    " key TEXT NOT NULL,"
    " deleted INTEGER NOT NULL DEFAULT 0,"
    " kind TEXT NOT NULL,"
    " capacity INTEGER NOT NULL,"
    " window_seconds INTEGER NOT NULL,"
    " timeout_seconds INTEGER NOT NULL,"
    " period TEXT NOT NULL,"
    " unit TEXT NOT NULL,"
    " description TEXT NOT NULL,"
    " overage TEXT NOT NULL,"
    " status TEXT NOT NULL,"
    " pending_decrease_to INTEGER NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    "CREATE INDEX limits_key ON limits(key);"
    /* Running counters: per limit for rolling/concurrency (period_start 0),
     * per limit per period for budgets. Updated with every change, so no
     * decision ever sums reservations. */
    "CREATE TABLE limit_usage ("
    " limit_id INTEGER NOT NULL,"
    " period_start INTEGER NOT NULL,"
    " reserved INTEGER NOT NULL,"
    " used INTEGER NOT NULL,"
    " debt INTEGER NOT NULL,"
    " PRIMARY KEY (limit_id, period_start)) WITHOUT ROWID;"
    /* Budgets: who spent what, per period (GET /v1/usage/{key}?group_by=caller). */
    "CREATE TABLE caller_usage ("
    " limit_id INTEGER NOT NULL,"
    " period_start INTEGER NOT NULL,"
    " caller TEXT NOT NULL,"
    " reserved INTEGER NOT NULL,"
    " used INTEGER NOT NULL,"
    " debt INTEGER NOT NULL,"
    " PRIMARY KEY (limit_id, period_start, caller)) WITHOUT ROWID;"
    /* One row per lease: the idempotency record. Its reservations are the
     * rows first_row .. first_row + row_count - 1. */
    "CREATE TABLE leases ("
    " lease_id TEXT PRIMARY KEY," LEASE_COLUMNS /* state .. expires_at */
    " first_row INTEGER NOT NULL,"
    " row_count INTEGER NOT NULL,"
    " retry_after_ms INTEGER NOT NULL,"
    " denied TEXT NOT NULL," /* the keys that did not fit, one per line */
    " created_at INTEGER NOT NULL,"
    " finished_at INTEGER) WITHOUT ROWID;"
    /* One row per (lease, key). `live` is 1 while the row holds capacity (or
     * rolling debt) in the mirror; `held` is what it holds. */
    "CREATE TABLE reservations ("
    " id INTEGER PRIMARY KEY,"
    " lease_id TEXT NOT NULL,"
    " limit_id INTEGER NOT NULL,"
    " key TEXT NOT NULL,"
    " caller TEXT NOT NULL,"
    " amount INTEGER NOT NULL,"
    " actual_amount INTEGER,"
    " held INTEGER NOT NULL,"
    " debt INTEGER NOT NULL,"
    " live INTEGER NOT NULL,"
    " state TEXT NOT NULL CHECK (state='reserved' OR state='committed' OR state='released' OR"
    "  state='expired' OR state='committed_post_expiry'),"
    " period_start INTEGER NOT NULL,"
    " reserved_at INTEGER NOT NULL,"
    " expires_at INTEGER NOT NULL,"
    " committed_at INTEGER);"
    "CREATE INDEX reservations_live ON reservations(limit_id, expires_at) WHERE live = 1;"
    /* The audit log, append-only. */
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY,"
    " at INTEGER NOT NULL,"
    " type TEXT NOT NULL,"
    " lease_id TEXT,"
    " limit_id INTEGER,"
    " key TEXT NOT NULL,"
    " caller TEXT NOT NULL,"
    " amount INTEGER NOT NULL,"
    " actual_amount INTEGER NOT NULL,"
    " detail TEXT NOT NULL);"
    "CREATE INDEX events_key ON events(key, id);"
    "CREATE INDEX events_lease ON events(lease_id, id) WHERE lease_id IS NOT NULL;";

/* Schema version 2: a lease is one row with its reservations packed in
 * `items` (JSON) and the ids of its event_log rows in `event_rows`; the
 * audit log stores one row per lease per transaction (`event_log`, its
 * events packed in `items`), and `event_keys` says, per key, which ranges
 * of event_log rows hold its events (one entry per key per transaction).
 * A reserve writes one lease row and one event row. The views
 * `reservations` and `events` show one row per reservation and per event
 * as version 1 did. Version 1 data is carried over; event ids become
 * old id * SQ_EVENT_ITEMS.
 *
 * An expiry rewrites nothing: it adds a row to `expirations` (the hold's
 * reservation id and the event_log row of its `expired` event), and the
 * expiries of one transaction share one event_log row.
 *
 * items of a lease: [[limit_id, amount, state, actual|null, held, debt, live,
 *   period_start, expires_at, committed_at|null], ...] (state, held, debt and
 *   live as of the last complete or release: an expirations row overrides
 *   them). The key is the limit's: limits.key (the views join it).
 * items of an event row: [[at, type, limit_id, amount, actual, detail
 *   (, lease_id, caller in rows of several leases)], ...] */
#define STR_(x) #x
#define STR(x) STR_(x)
static const char schema_v2[] =
    "CREATE TABLE leases2 ("
    " seq INTEGER PRIMARY KEY,"
    " lease_id TEXT NOT NULL UNIQUE," LEASE_COLUMNS /* state .. expires_at */
    " retry_after_ms INTEGER NOT NULL,"
    " denied TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " finished_at INTEGER,"
    " live INTEGER NOT NULL," /* 1 while one of its reservations holds capacity */
    " items TEXT NOT NULL,"
    " event_rows TEXT NOT NULL);" /* its event_log rows: "id,id,..." */
    "INSERT INTO leases2(seq,lease_id,state,fingerprint,caller,reserved_at,expires_at,"
    " retry_after_ms,denied,created_at,finished_at,live,items,event_rows)"
    " SELECT row_number() OVER (ORDER BY created_at, first_row, lease_id), lease_id, state,"
    "  fingerprint, caller, reserved_at, expires_at, retry_after_ms, denied, created_at,"
    "  finished_at,"
    "  EXISTS (SELECT 1 FROM reservations r WHERE r.id BETWEEN l.first_row AND"
    "   l.first_row + l.row_count - 1 AND r.live = 1),"
    "  (SELECT json_group_array(json_array(r.limit_id, r.amount, r.state,"
    "    r.actual_amount, r.held, r.debt, r.live, r.period_start, r.expires_at,"
    "    r.committed_at)) FROM (SELECT * FROM reservations r WHERE r.id BETWEEN l.first_row"
    "    AND l.first_row + l.row_count - 1 ORDER BY r.id) r),"
    "  COALESCE((SELECT group_concat(id, ',') FROM (SELECT e.id FROM events e"
    "   WHERE e.lease_id = l.lease_id ORDER BY e.id)), '')"
    " FROM leases l;"
    "CREATE TABLE event_log ("
    " id INTEGER PRIMARY KEY,"
    " at INTEGER NOT NULL," /* of its first event: retention */
    " lease_seq INTEGER,"   /* NULL for a limit's own events */
    " lease_id TEXT,"
    " caller TEXT NOT NULL,"
    " items TEXT NOT NULL);"
    "INSERT INTO event_log(id,at,lease_seq,lease_id,caller,items)"
    " SELECT e.id, e.at, (SELECT seq FROM leases2 WHERE leases2.lease_id = e.lease_id), e.lease_id,"
    "  e.caller, json_array(json_array(e.at, e.type, e.limit_id, e.amount,"
    "  e.actual_amount, e.detail)) FROM events e;"
    "CREATE TABLE event_keys ("
    " key TEXT NOT NULL,"
    " first_event INTEGER NOT NULL," /* event_log rows first_event..last_event */
    " last_event INTEGER NOT NULL,"  /* may hold events of key */
    " PRIMARY KEY (key, first_event)) WITHOUT ROWID;"
    "INSERT INTO event_keys(key,first_event,last_event) SELECT key, id, id FROM events;"
    "DROP TABLE events;"
    "DROP TABLE reservations;"
    "DROP TABLE leases;"
    "ALTER TABLE leases2 RENAME TO leases;"
    "CREATE TABLE expirations ("
    " row_id INTEGER PRIMARY KEY," /* reservations.id: seq * items per lease + index */
    " event_id INTEGER);"          /* the event_log row of its `expired` event, if any */
    /* Named values: live_from_seq, no live lease below it (for loading). */
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    /* clang-format would cut the STR() joins below into two-byte pieces. */
    /* clang-format off */
    "CREATE VIEW reservations AS SELECT"
    " l.seq * " STR(REQUIREMENTS_PER_RESERVE_MAX) " + j.key AS id, l.lease_id AS lease_id,"
    " json_extract(j.value,'$[0]') AS limit_id,"
    " (SELECT key FROM limits WHERE id = json_extract(j.value,'$[0]')) AS key,"
    " l.caller AS caller, json_extract(j.value,'$[1]') AS amount,"
    " json_extract(j.value,'$[3]') AS actual_amount,"
    " CASE WHEN x.row_id IS NULL THEN json_extract(j.value,'$[4]') ELSE 0 END AS held,"
    " CASE WHEN x.row_id IS NULL THEN json_extract(j.value,'$[5]') ELSE 0 END AS debt,"
    " CASE WHEN x.row_id IS NULL THEN json_extract(j.value,'$[6]') ELSE 0 END AS live,"
    " CASE WHEN x.row_id IS NOT NULL AND json_extract(j.value,'$[2]') = 'reserved'"
    "  THEN 'expired' ELSE json_extract(j.value,'$[2]') END AS state,"
    " json_extract(j.value,'$[7]') AS period_start,"
    " l.reserved_at AS reserved_at, json_extract(j.value,'$[8]') AS expires_at,"
    " json_extract(j.value,'$[9]') AS committed_at"
    " FROM leases l, json_each(l.items) j LEFT JOIN expirations x"
    "  ON x.row_id = l.seq * " STR(REQUIREMENTS_PER_RESERVE_MAX) " + j.key;"
    "CREATE VIEW events AS SELECT"
    " e.id * " STR(SQ_EVENT_ITEMS) " + j.key AS id, json_extract(j.value,'$[0]') AS at,"
    " json_extract(j.value,'$[1]') AS type,"
    " COALESCE(json_extract(j.value,'$[6]'), e.lease_id) AS lease_id,"
    " json_extract(j.value,'$[2]') AS limit_id,"
    " (SELECT key FROM limits WHERE id = json_extract(j.value,'$[2]')) AS key,"
    " COALESCE(json_extract(j.value,'$[7]'), e.caller) AS caller,"
    " json_extract(j.value,'$[3]') AS amount, json_extract(j.value,'$[4]') AS actual_amount,"
    " json_extract(j.value,'$[5]') AS detail FROM event_log e, json_each(e.items) j;";
/* clang-format on */

/* Schema version 3: callers' budget counters also count their completed
 * leases (calls), for usage by caller. */
static const char schema_v3[] =
    "ALTER TABLE caller_usage ADD COLUMN calls INTEGER NOT NULL DEFAULT 0;";

/* Schema version 4: a budget's period anchor day and time zone (0 and '':
 * the 1st, UTC, as every budget before them). */
static const char schema_v4[] =
    "ALTER TABLE limits ADD COLUMN period_anchor_day INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE limits ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';";

/* Schema version 5: a limit's alerts ("80,100,runout": limit_alerts_text),
 * its own webhook and that webhook's format. */
static const char schema_v5[] =
    "ALTER TABLE limits ADD COLUMN alerts TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE limits ADD COLUMN webhook TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE limits ADD COLUMN webhook_format TEXT NOT NULL DEFAULT 'json';";

/* Schema version 6: a gateway tool call's lease names its MCP server and
 * tool (NULL for every other lease), shown on its events in the audit log. */
static const char schema_v6[] = "ALTER TABLE leases ADD COLUMN mcp_server TEXT;"
                                "ALTER TABLE leases ADD COLUMN tool TEXT;";

/* migrations[i] takes the schema from version i to i + 1. */
static const char *const migrations[] = {schema_v1, schema_v2, schema_v3,
                                         schema_v4, schema_v5, schema_v6};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

/* The data path's writes say OR ROLLBACK: any error already abandons the
 * whole transaction (sqlite.c), so SQLite need not keep a statement journal
 * to undo one statement. */
static const char *const statement_sql[SQ_STMT_COUNT] = {
    [SQ_STMT_BEGIN] = "BEGIN IMMEDIATE",
    [SQ_STMT_COMMIT] = "COMMIT",
    [SQ_STMT_ROLLBACK] = "ROLLBACK",
    [SQ_STMT_LEASE_INSERT] =
        "INSERT OR ROLLBACK INTO leases(seq,lease_id,state,fingerprint,caller,reserved_at,"
        "expires_at,retry_after_ms,denied,created_at,finished_at,live,items,event_rows,"
        "mcp_server,tool) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)",
    [SQ_STMT_LEASE_UPDATE] = "UPDATE OR ROLLBACK leases SET state=?3,finished_at=?11,live=?12,"
                             "items=?13,event_rows=?14 WHERE seq=?1",
    [SQ_STMT_LEASE_BY_ID] =
        "SELECT seq,lease_id,state,fingerprint,caller,reserved_at,expires_at,"
        "retry_after_ms,denied,created_at,finished_at,items,event_rows FROM leases "
        "WHERE lease_id=?",
    [SQ_STMT_LEASE_BY_SEQ] =
        "SELECT seq,lease_id,state,fingerprint,caller,reserved_at,expires_at,"
        "retry_after_ms,denied,created_at,finished_at,items,event_rows FROM leases "
        "WHERE seq=?",
    [SQ_STMT_LEASE_RENAME] = "UPDATE OR ROLLBACK leases SET lease_id=? WHERE seq=?",
    [SQ_STMT_EVENT_INSERT] =
        "INSERT OR ROLLBACK INTO event_log(lease_seq,lease_id,caller,items,at) VALUES(?,?,?,?,?)",
    [SQ_STMT_EVENT_KEY] = "INSERT OR ROLLBACK INTO event_keys(key,first_event,last_event) "
                          "VALUES(?,?,?) ON CONFLICT(key,first_event) DO UPDATE SET "
                          "last_event=max(last_event,excluded.last_event)",
    [SQ_STMT_EXPIRATION_INSERT] =
        "INSERT OR ROLLBACK INTO expirations(row_id,event_id) VALUES(?,?)",
    [SQ_STMT_EXPIRATION_GET] = "SELECT 1 FROM expirations WHERE row_id=?",
    [SQ_STMT_META_PUT] = "INSERT OR ROLLBACK INTO meta(name,value) VALUES(?,?) "
                         "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
    [SQ_STMT_USAGE_PUT] =
        "INSERT OR ROLLBACK INTO limit_usage(limit_id,period_start,reserved,used,debt) "
        "VALUES(?,?,?,?,?) ON CONFLICT(limit_id,period_start) DO UPDATE SET "
        "reserved=excluded.reserved,used=excluded.used,debt=excluded.debt",
    [SQ_STMT_USAGE_GET] =
        "SELECT reserved,used,debt FROM limit_usage WHERE limit_id=? AND period_start=?",
    [SQ_STMT_CALLER_ADD] =
        "INSERT OR ROLLBACK INTO caller_usage(limit_id,period_start,caller,reserved,used,"
        "debt,calls) VALUES(?,?,?,?,?,?,?) ON CONFLICT(limit_id,period_start,caller) "
        "DO UPDATE SET reserved=reserved+excluded.reserved,"
        "used=used+excluded.used,debt=debt+excluded.debt,calls=calls+excluded.calls",
    [SQ_STMT_LIMIT_INSERT] = "INSERT INTO limits(id,key,deleted,kind,capacity,window_seconds,"
                             "timeout_seconds,period,unit,description,overage,status,"
                             "pending_decrease_to,created_at,updated_at,period_anchor_day,"
                             "time_zone,alerts,webhook,webhook_format) "
                             "VALUES(?1,?2,0,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?13,?14,?15,"
                             "?16,?17,?18)",
    [SQ_STMT_LIMIT_UPDATE] = "UPDATE limits SET kind=?3,capacity=?4,window_seconds=?5,"
                             "timeout_seconds=?6,period=?7,unit=?8,description=?9,overage=?10,"
                             "status=?11,pending_decrease_to=?12,updated_at=?13,"
                             "period_anchor_day=?14,time_zone=?15,alerts=?16,webhook=?17,"
                             "webhook_format=?18 WHERE id=?1 AND key=?2",
    [SQ_STMT_LIMIT_DELETE] = "UPDATE limits SET deleted=1,updated_at=? WHERE id=?",
};

bool sq_sql_error_is_fatal(int code)
{
    switch (code & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
        return false; /* this request only */
    default:
        return true; /* I/O, full disk, corruption, out of memory, busy, ... */
    }
}

sqlite3_stmt *sq_statement(struct sq_backend *backend, enum sq_statement which)
{
    assert(which < SQ_STMT_COUNT);
    return backend->statements[which];
}

int sq_statement_run(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc == SQLITE_ROW)
        rc = SQLITE_DONE;
    return rc;
}

static int exec_error(sqlite3 *db, const char *sql, const char *what, char *error,
                      size_t error_size)
{
    char *message = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &message);
    if (rc != SQLITE_OK) {
        snprintf(error, error_size, "%s: %s", what, message ? message : sqlite3_errstr(rc));
        sqlite3_free(message);
        return -1;
    }
    return 0;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return -1;
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? 0 : -1;
}

/* synchronous=NORMAL in every case: in WAL mode it writes each commit
 * without syncing it; with sqlite_synchronous_normal unset, the syncer
 * (sq_sync.c) fsyncs the WAL before any answer, which is what FULL would
 * do, once for several batches. */
static int configure(sqlite3 *db, char *error, size_t error_size)
{
    sqlite3_busy_timeout(db, SQ_BUSY_TIMEOUT_MS);
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &stmt, NULL) != SQLITE_OK)
        return exec_error(db, "SELECT 1", "journal_mode", error, error_size);
    int rc = sqlite3_step(stmt);
    bool wal = rc == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(stmt, 0), "wal") == 0;
    sqlite3_finalize(stmt);
    if (!wal) {
        snprintf(error, error_size, "cannot put the database in WAL mode: %s", sqlite3_errmsg(db));
        return -1;
    }
    char sql[256];
    snprintf(sql, sizeof sql,
             "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;"
             "PRAGMA cache_size=-%d; PRAGMA journal_size_limit=%d;",
             SQ_CACHE_KIB, SQ_WAL_BYTES_KEPT);
    return exec_error(db, sql, "pragmas", error, error_size);
}

static int migrate(sqlite3 *db, int target, char *error, size_t error_size)
{
    int64_t version = 0;
    if (pragma_int(db, "PRAGMA user_version", &version) != 0) {
        snprintf(error, error_size, "cannot read the schema version: %s", sqlite3_errmsg(db));
        return -1;
    }
    if (version > SCHEMA_VERSION) {
        snprintf(error, error_size,
                 "database schema version %lld is newer than this llmlimitd supports (%d)",
                 (long long)version, SCHEMA_VERSION);
        return -1;
    }
    for (int64_t v = version; v < target; v++) {
        if (exec_error(db, "BEGIN IMMEDIATE", "migration", error, error_size) != 0)
            return -1;
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version=%lld", (long long)(v + 1));
        if (exec_error(db, migrations[v], "migration", error, error_size) != 0 ||
            exec_error(db, bump, "migration", error, error_size) != 0 ||
            exec_error(db, "COMMIT", "migration", error, error_size) != 0) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    return 0;
}

static int prepare_all(struct sq_backend *backend, char *error, size_t error_size)
{
    for (int i = 0; i < SQ_STMT_COUNT; i++) {
        assert(statement_sql[i] != NULL);
        if (sqlite3_prepare_v3(backend->db, statement_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &backend->statements[i], NULL) != SQLITE_OK) {
            snprintf(error, error_size, "prepare %d: %s", i, sqlite3_errmsg(backend->db));
            return -1;
        }
    }
    return 0;
}

int sq_schema_open(struct sq_backend *backend, const char *path, char *error, size_t error_size)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(path, &backend->db, flags, NULL);
    if (rc != SQLITE_OK) {
        snprintf(error, error_size, "cannot open %s: %s", path,
                 backend->db ? sqlite3_errmsg(backend->db) : sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_extended_result_codes(backend->db, 1);
    if (configure(backend->db, error, error_size) != 0 ||
        migrate(backend->db, SCHEMA_VERSION, error, error_size) != 0 ||
        prepare_all(backend, error, error_size) != 0)
        return -1;
    /* Checkpoints run on their own thread and connection (sqlite.c), never
     * inside the writer's commits. The writer is the only writer, so it never
     * waits for a lock: the busy timeout (used while migrating) goes to 0, and
     * at worst SQLite starts the WAL over one commit later. */
    sqlite3_wal_autocheckpoint(backend->db, 0);
    sqlite3_busy_timeout(backend->db, 0);
    rc = sqlite3_open_v2(path, &backend->checkpoint_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                         NULL);
    if (rc != SQLITE_OK) {
        snprintf(error, error_size, "cannot open %s for checkpoints: %s", path, sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_busy_timeout(backend->checkpoint_db, SQ_BUSY_TIMEOUT_MS);
    sqlite3_wal_autocheckpoint(backend->checkpoint_db, 0);
    /* A connection opens the WAL on its first read; until then its
     * checkpoints would do nothing. */
    int64_t version = 0;
    if (pragma_int(backend->checkpoint_db, "PRAGMA user_version", &version) != 0) {
        snprintf(error, error_size, "cannot read %s for checkpoints: %s", path,
                 sqlite3_errmsg(backend->checkpoint_db));
        return -1;
    }

    rc = sqlite3_open_v2(path, &backend->read_db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(error, error_size, "cannot open %s for reading: %s", path, sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_busy_timeout(backend->read_db, SQ_BUSY_TIMEOUT_MS);
    return 0;
}

int sq_schema_create(const char *path, int version, char *error, size_t error_size)
{
    sqlite3 *db = NULL;
    if (version < 1 || version > SCHEMA_VERSION) {
        snprintf(error, error_size, "no schema version %d", version);
        return -1;
    }
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        snprintf(error, error_size, "cannot open %s: %s", path, sqlite3_errstr(rc));
        sqlite3_close_v2(db);
        return -1;
    }
    rc = configure(db, error, error_size) == 0 && migrate(db, version, error, error_size) == 0 ? 0
                                                                                               : -1;
    sqlite3_close_v2(db);
    return rc;
}

void sq_schema_close(struct sq_backend *backend)
{
    for (int i = 0; i < SQ_STMT_COUNT; i++) {
        sqlite3_finalize(backend->statements[i]);
        backend->statements[i] = NULL;
    }
    if (backend->read_db != NULL) {
        sqlite3_close_v2(backend->read_db);
        backend->read_db = NULL;
    }
    if (backend->checkpoint_db != NULL) {
        sqlite3_close_v2(backend->checkpoint_db);
        backend->checkpoint_db = NULL;
    }
    if (backend->db != NULL) {
        /* A last full checkpoint leaves a small WAL behind. */
        sqlite3_wal_checkpoint_v2(backend->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close_v2(backend->db);
        backend->db = NULL;
    }
}
