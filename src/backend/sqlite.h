/* The sqlite backend's extras beyond backend.h, for benchmarks and tests:
 * the ops table itself and the group-commit bound. */
#ifndef LLMLIMIT_SQLITE_H
#define LLMLIMIT_SQLITE_H

#include "backend.h"

extern const struct backend_ops sqlite_backend_ops;

/* Caps the requests in one transaction (default SQLITE_GROUP_COMMIT_MAX); 1
 * gives one transaction, so one fsync, per request. */
void sqlite_backend_set_group_commit_max(struct backend *backend, uint32_t requests);

#endif
