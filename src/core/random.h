/* Random bytes from the kernel (getrandom(2), which blocks only until its
 * pool is first seeded). */
#ifndef LLMLIMIT_CORE_RANDOM_H
#define LLMLIMIT_CORE_RANDOM_H

#include <stddef.h>

/* Fills length bytes at out; 0, or -1 (errno set) when getrandom fails. */
int random_fill(void *out, size_t length);

#endif
