/* The sqlite backend's database (sq_schema.c): the connections and their
 * settings, the versioned schema with its migrations, and the prepared
 * statements of the write connection. */
#ifndef LLMLIMIT_BACKEND_SQLITE_SCHEMA_H
#define LLMLIMIT_BACKEND_SQLITE_SCHEMA_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

struct sq_backend;

/* Prepared statements of the write connection. */
enum sq_statement {
    SQ_STMT_BEGIN,
    SQ_STMT_COMMIT,
    SQ_STMT_ROLLBACK,
    SQ_STMT_LEASE_INSERT,
    SQ_STMT_LEASE_UPDATE,
    SQ_STMT_LEASE_BY_ID,
    SQ_STMT_LEASE_BY_SEQ,
    SQ_STMT_LEASE_RENAME,
    SQ_STMT_EVENT_INSERT,
    SQ_STMT_EVENT_KEY,
    SQ_STMT_EXPIRATION_INSERT,
    SQ_STMT_EXPIRATION_GET,
    SQ_STMT_META_PUT,
    SQ_STMT_USAGE_PUT,
    SQ_STMT_USAGE_GET,
    SQ_STMT_CALLER_ADD,
    SQ_STMT_LIMIT_INSERT,
    SQ_STMT_LIMIT_UPDATE,
    SQ_STMT_LIMIT_DELETE,
    SQ_STMT_COUNT
};

/* Opens the write, checkpoint and read connections of the database at path,
 * migrates it and prepares the statements. 0, or -1 with a reason in error. */
int sq_schema_open(struct sq_backend *backend, const char *path, char *error, size_t error_size);
void sq_schema_close(struct sq_backend *backend);
sqlite3_stmt *sq_statement(struct sq_backend *backend, enum sq_statement which);
/* Steps a statement that returns no row and resets it. SQLITE_DONE or an error code. */
int sq_statement_run(sqlite3_stmt *stmt);
/* True for errors after which the transaction cannot go on (I/O, full, busy...). */
bool sq_sql_error_is_fatal(int code);

#endif
