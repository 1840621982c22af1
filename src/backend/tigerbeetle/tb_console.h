/* The tigerbeetle backend's console op of backend.h (tb_console.c): a page
 * of limits with usage from the cluster and the holds this llmlimitd knows. */
#ifndef LLMLIMIT_TB_CONSOLE_H
#define LLMLIMIT_TB_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

backend_limits_report_op tb_console_limits_report;

#endif
