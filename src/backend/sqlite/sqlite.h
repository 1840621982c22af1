/* The sqlite backend's extras beyond backend.h, for benchmarks and tests:
 * the ops table itself and the group-commit bound. */
#ifndef LLMLIMIT_BACKEND_SQLITE_H
#define LLMLIMIT_BACKEND_SQLITE_H

#include "backend/backend.h"

extern const struct backend_ops sq_backend_ops;

/* The sqlite backend's own settings (the options argument of its open). */
struct sq_options {
    bool synchronous_normal; /* false: synchronous=FULL (default) */
    int64_t retention_ms;    /* 0: keep finished leases and the audit log for ever */
};

/* The defaults: synchronous=FULL, keep everything. */
void sq_options_defaults(struct sq_options *options);

/* Caps the requests in one transaction (default SQ_GROUP_COMMIT_MAX); 1
 * gives one transaction and one fsync per request (no group commit at all). */
void sq_backend_set_group_commit_max(struct backend *backend, uint32_t requests);

/* WAL fsyncs made so far by the syncer (0 with sqlite_synchronous_normal). */
uint64_t sq_backend_fsyncs(struct backend *backend);

/* Creates the database file `path` at an older schema version (tests of the
 * migrations). 0, or -1 with a reason in error. */
int sq_schema_create(const char *path, int version, char *error, size_t error_size);

#endif
