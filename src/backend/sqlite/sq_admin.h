/* The sqlite backend's admin ops of backend.h (sq_admin.c): limit
 * definitions, usage, the tick, the audit-log reads. Each waits for the
 * writer but usage_batch, which the writer answers. */
#ifndef LLMLIMIT_BACKEND_SQLITE_ADMIN_H
#define LLMLIMIT_BACKEND_SQLITE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

enum backend_admin_result sq_admin_put_limit(struct backend *base,
                                             const struct limit_definition *definition,
                                             struct limit_state *state_out);
enum backend_admin_result sq_admin_restore_limit(struct backend *base,
                                                 const struct limit_state *state);
enum backend_admin_result sq_admin_delete_limit(struct backend *base, const char *key);
enum backend_admin_result sq_admin_get_limit(struct backend *base, const char *key,
                                             struct limit_state *out);
enum backend_admin_result sq_admin_list_limits(struct backend *base, struct limit_state **out,
                                               size_t *count);
enum backend_admin_result sq_admin_usage(struct backend *base, const char *key, int64_t at_unix_ms,
                                         struct limit_usage *out);
/* The usage_batch op: one asynchronous call of the writer for them all. */
void sq_admin_usage_batch(struct backend *base, const struct usage_request *requests,
                          struct usage_result *results, uint32_t count, backend_done_fn done,
                          void *context);
int sq_admin_tick(struct backend *base, bool *limits_changed);
enum backend_admin_result sq_admin_events(struct backend *base, const struct event_query *query,
                                          struct backend_event **out, size_t *count);
enum backend_admin_result sq_admin_usage_by_caller(struct backend *base, const char *key,
                                                   int64_t at_unix_ms, struct caller_usage **out,
                                                   size_t *count);

#endif
