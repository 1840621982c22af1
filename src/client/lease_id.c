/* Lease ids: UUIDv7 (RFC 9562), made by the server's own code
 * (src/core/uuid.c, compiled into the library): the leading 48-bit
 * millisecond timestamp keeps ids of one client roughly ordered (handy in
 * logs and audit events), the 74 random bits keep them unique across
 * processes. */
#include <assert.h>
#include <string.h>
#include <time.h>

#include "core/uuid.h"
#include "internal.h"

_Static_assert(LLMLIMIT_UUID_SIZE == UUID_TEXT_SIZE, "a lease id is a UUID in text form");

int llmlimit_lease_id_new(char out[LLMLIMIT_UUID_SIZE])
{
    struct timespec now;
    if (out == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0 || now.tv_sec < 0)
        return LLMLIMIT_ERR_SYSTEM;
    int64_t unix_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (uuid_v7(unix_ms, out) != 0)
        return LLMLIMIT_ERR_SYSTEM; /* no randomness from the kernel */
    /* 32 hex digits and 4 dashes: the canonical 36-character form. */
    assert(strlen(out) == UUID_TEXT_SIZE - 1);
    return 0;
}
