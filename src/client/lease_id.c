/* Lease ids: UUIDv7 (RFC 9562). The leading 48-bit millisecond timestamp
 * keeps ids of one client roughly ordered (handy in logs and audit events);
 * the 74 random bits from getrandom keep them unique across processes. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#include "internal.h"

static int random_bytes(uint8_t *out, size_t length)
{
    size_t done = 0;
    while (done < length) {
        ssize_t got = getrandom(out + done, length - done, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return LLMLIMIT_ERR_SYSTEM;
        done += (size_t)got;
        assert(done <= length);
    }
    return 0;
}

int llmlimit_lease_id_new(char out[LLMLIMIT_UUID_SIZE])
{
    struct timespec now;
    if (out == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0 || now.tv_sec < 0)
        return LLMLIMIT_ERR_SYSTEM;
    uint64_t unix_ms = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
    uint8_t bytes[16];
    int rc = random_bytes(bytes + 6, 10);
    if (rc != 0)
        return rc;
    for (int i = 0; i < 6; i++)
        bytes[i] = (uint8_t)(unix_ms >> (8 * (5 - i)));
    bytes[6] = (uint8_t)(0x70 | (bytes[6] & 0x0f)); /* version 7 */
    bytes[8] = (uint8_t)(0x80 | (bytes[8] & 0x3f)); /* variant 10 */
    static const char hex[] = "0123456789abcdef";
    size_t length = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[length++] = '-';
        out[length++] = hex[bytes[i] >> 4];
        out[length++] = hex[bytes[i] & 15];
    }
    /* 32 hex digits and 4 dashes: the canonical 36-character form. */
    assert(length == 36);
    assert(length < LLMLIMIT_UUID_SIZE);
    out[length] = '\0';
    return 0;
}
