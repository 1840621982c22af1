/* The sqlite backend's console ops of backend.h (sq_console.c): a page of
 * limits with usage and live holds, and one limit's live holds. */
#ifndef LLMLIMIT_BACKEND_SQLITE_CONSOLE_H
#define LLMLIMIT_BACKEND_SQLITE_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

backend_limits_report_op sq_console_limits_report;
backend_holds_scan_op sq_console_holds_scan;

#endif
