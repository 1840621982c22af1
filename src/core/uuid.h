/* UUIDv7 (RFC 9562) lease ids: a 48-bit millisecond timestamp, so the ids
 * of one process sort roughly by time, and 74 random bits from getrandom
 * (a block at a time per thread), so ids made by different processes do
 * not collide. */
#ifndef LLMLIMIT_CORE_UUID_H
#define LLMLIMIT_CORE_UUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UUID_TEXT_SIZE 37 /* 36 characters and the NUL */

/* Writes the id for unix_ms into out. 0, or -1 when the kernel gives no
 * randomness (errno set). */
int uuid_v7(int64_t unix_ms, char out[UUID_TEXT_SIZE]);

/* Whether text (not NUL-terminated) is a UUIDv7: 8-4-4-4-12 hex digits of
 * either case, version 7, variant 10. If so, *unix_ms is its timestamp. */
bool uuid_v7_unix_ms(const char *text, size_t length, int64_t *unix_ms);

#endif
