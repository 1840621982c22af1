/* An allocation-failure simulator, in the manner of SQLite's: the program
 * under test is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * --wrap=free,--wrap=strndup (FAULT_ALLOC_LINK_OPTIONS in CMakeLists.txt),
 * so every allocation the project's own code makes goes through here. A
 * countdown makes the N-th allocation from now fail (NULL), and every block
 * handed out is tracked until it is freed, so a test can loop N = 1, 2, ...
 * over a path and check each failure gives a clean error and leaks nothing.
 * SQLite's own allocations can be routed through the same countdown with
 * fault_alloc_sqlite_install(). Thread-safe. */
#ifndef LLMLIMIT_TESTS_FAULT_ALLOC_H
#define LLMLIMIT_TESTS_FAULT_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

/* The n-th allocation from now fails (1: the next one), and only that one;
 * 0 disarms. Resets the fired flag. */
void fault_alloc_fail_at(uint64_t n);
/* Did the armed failure happen? */
bool fault_alloc_fired(void);
/* Allocations made (successful or not) since the last fault_alloc_fail_at. */
uint64_t fault_alloc_count(void);
/* Blocks allocated through the wrappers and not yet freed. */
uint64_t fault_alloc_live(void);
/* Routes SQLite's allocator through the countdown (not through the live
 * tracking: SQLite frees its own). Call before SQLite initialises. 0 or -1. */
int fault_alloc_sqlite_install(void);

#endif
