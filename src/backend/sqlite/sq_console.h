/* The sqlite backend's console ops of backend.h (sq_console.c): a page of
 * limits with usage and live holds, and one limit's live holds. */
#ifndef LLMLIMIT_BACKEND_SQLITE_CONSOLE_H
#define LLMLIMIT_BACKEND_SQLITE_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

enum backend_admin_result sq_console_limits_report(struct backend *base,
                                                   const struct limits_query *query,
                                                   struct limit_report **out, size_t *count,
                                                   bool *more);
enum backend_admin_result sq_console_holds_scan(struct backend *base, const char *key,
                                                uint64_t max_holds, hold_visit_fn visit,
                                                void *context, bool *complete);

#endif
