/* Every bound of the memory backend in one place: live holds, the limits
 * table, budget periods kept, the holds a retry_after or a console summary
 * walks, and the callers told apart. The bounds every backend shares are in
 * src/core/bounds.h. */
#ifndef LLMLIMIT_BACKEND_MEMORY_BOUNDS_H
#define LLMLIMIT_BACKEND_MEMORY_BOUNDS_H

#include <stdint.h>

/* Live holds across all limits: the pool grows in chunks up to this. */
#define MEM_HOLDS_MAX (UINT32_C(1) << 24)
/* Entries of the limits table: live limits and deleted ones still held. */
#define MEM_LIMITS_TABLE_CAPACITY_MAX (UINT32_C(1) << 20)
/* Budget periods kept per limit for usage queries: the current one and
 * the 24 before it. */
#define MEM_BUDGET_PERIODS_KEPT 25
/* Holds walked to compute an exact retry_after before falling back to an
 * upper bound (docs/semantics.md "retry_after_ms"). */
#define MEM_RETRY_WALK_HOLDS_MAX 4096
/* Holds visited in expiry order for one limit's console summary (at most
 * MEM_RETRY_WALK_HOLDS_MAX: the walk shares its scratch). */
#define MEM_CONSOLE_HOLDS_WALK_MAX 1024
/* Distinct callers told apart; those past it share one entry. */
#define MEM_CALLERS_MAX 16384

_Static_assert(MEM_CONSOLE_HOLDS_WALK_MAX <= MEM_RETRY_WALK_HOLDS_MAX,
               "the console's walk uses the retry walk's scratch");

#endif
