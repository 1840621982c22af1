/* The sqlite backend's admin ops of backend.h (sq_admin.c): limit
 * definitions, usage, the tick, the audit-log reads. Each waits for the
 * writer but usage_batch, which the writer answers. */
#ifndef LLMLIMIT_BACKEND_SQLITE_ADMIN_H
#define LLMLIMIT_BACKEND_SQLITE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

backend_put_limit_op sq_admin_put_limit;
backend_restore_limit_op sq_admin_restore_limit;
backend_delete_limit_op sq_admin_delete_limit;
backend_get_limit_op sq_admin_get_limit;
backend_list_limits_op sq_admin_list_limits;
backend_usage_op sq_admin_usage;
/* The usage_batch op: one asynchronous call of the writer for them all. */
backend_usage_batch_op sq_admin_usage_batch;
int sq_admin_tick(struct backend *base, bool *limits_changed);
backend_events_op sq_admin_events;
backend_usage_by_caller_op sq_admin_usage_by_caller;

#endif
