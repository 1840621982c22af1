/* The sqlite backend's data path (sq_ledger.c): reserve, complete and release
 * of one request at a time inside the batch transaction, decided on the
 * mirror and written through the leases; and the expiry of holds, which
 * changes both. */
#ifndef LLMLIMIT_BACKEND_SQLITE_LEDGER_H
#define LLMLIMIT_BACKEND_SQLITE_LEDGER_H

#include <stdint.h>

#include "backend/backend.h"
#include "sq_mirror.h"

struct sq_backend;
struct sq_ledger_scratch;

/* Each returns SQLITE_DONE (the result is filled) or an SQLite error code
 * (SQLITE_NOMEM for memory), after which the writer rolls the transaction
 * back and redoes it without that request. */
struct sq_ledger_scratch *sq_ledger_scratch_new(void); /* free() it */
int sq_ledger_reserve(struct sq_backend *backend, const struct reserve_request *request,
                      struct reserve_result *result);
int sq_ledger_complete(struct sq_backend *backend, const struct complete_request *request,
                       struct complete_result *result);
int sq_ledger_release(struct sq_backend *backend, const struct release_request *request,
                      struct release_result *result);
/* Expires the holds of `limit` due at now_ms, in expiry order: all of them,
 * or at most *budget_left (decremented). Each expiry frees the hold in the
 * mirror and records it with its lease. SQLITE_DONE or an error code. */
int sq_ledger_expire(struct sq_backend *backend, struct sq_limit *limit, int64_t now_ms,
                     uint64_t *budget_left);

#endif
