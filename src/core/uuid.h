/* UUIDv7 (RFC 9562) lease ids: a 48-bit millisecond timestamp, so the ids
 * of one process sort roughly by time, and 74 random bits from getrandom,
 * so ids made by different processes do not collide. */
#ifndef LLMLIMIT_CORE_UUID_H
#define LLMLIMIT_CORE_UUID_H

#include <stdint.h>

#define UUID_TEXT_SIZE 37 /* 36 characters and the NUL */

/* Writes the id for unix_ms into out. 0, or -1 when the kernel gives no
 * randomness (errno set). */
int uuid_v7(int64_t unix_ms, char out[UUID_TEXT_SIZE]);

#endif
