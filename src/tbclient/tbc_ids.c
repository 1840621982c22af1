/* SHA-256 label ids (util/sha256.c) and random ids (getrandom). */
#include "tbc_ids.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/bounds.h"
#include "util/sha256.h"

/* Longest label: a prefix, a lease id, '/', a key. */
#define PREFIX_LENGTH_MAX 40
#define LABEL_SIZE_MAX (PREFIX_LENGTH_MAX + LEASE_ID_LENGTH_MAX + 1 + LIMIT_KEY_LENGTH_MAX + 32)

tbc_u128 tbc_id_normalize(tbc_u128 id)
{
    if (tbc_u128_zero(id) || tbc_u128_max(id))
        id.low ^= 1;
    return id;
}

tbc_u128 tbc_id_from_label(const char *label, size_t length)
{
    uint8_t digest[SHA256_DIGEST_BYTES];
    /* An id is what every front end must agree on: without SHA-256 there
     * is none to give (libcrypto fails only without memory or provider). */
    if (sha256_digest(label, length, digest) != 0) {
        fprintf(stderr, "llmlimit: SHA-256 failed in libcrypto\n");
        abort();
    }
    tbc_u128 id;
    memcpy(&id, digest, sizeof id); /* first 16 bytes, little-endian */
    return tbc_id_normalize(id);
}

tbc_u128 tbc_id_time_ordered(tbc_u128 id, uint64_t unix_ms)
{
    assert(unix_ms < UINT64_C(1) << 48);
    id.high = unix_ms << 16 | (id.high & 0xffff);
    return tbc_id_normalize(id);
}

static size_t append(char *label, size_t at, const char *text, size_t length)
{
    assert(at + length <= LABEL_SIZE_MAX);
    memcpy(label + at, text, length);
    return at + length;
}

tbc_u128 tbc_id1(const char *prefix, const char *a, size_t a_length)
{
    char label[LABEL_SIZE_MAX];
    size_t prefix_length = strlen(prefix);
    assert(prefix_length <= PREFIX_LENGTH_MAX);
    size_t at = append(label, 0, prefix, prefix_length);
    at = append(label, at, a, a_length);
    return tbc_id_from_label(label, at);
}

tbc_u128 tbc_id2(const char *prefix, const char *a, size_t a_length, const char *b, size_t b_length)
{
    char label[LABEL_SIZE_MAX];
    size_t prefix_length = strlen(prefix);
    assert(prefix_length <= PREFIX_LENGTH_MAX);
    size_t at = append(label, 0, prefix, prefix_length);
    at = append(label, at, a, a_length);
    at = append(label, at, "/", 1);
    at = append(label, at, b, b_length);
    return tbc_id_from_label(label, at);
}

tbc_u128 tbc_id_period(const char *prefix, int64_t period_start_ms, const char *key,
                       size_t key_length)
{
    char label[LABEL_SIZE_MAX];
    size_t prefix_length = strlen(prefix);
    assert(prefix_length <= PREFIX_LENGTH_MAX);
    size_t at = append(label, 0, prefix, prefix_length);
    char number[32];
    int n = snprintf(number, sizeof number, "%" PRId64 ":", period_start_ms);
    assert(n > 0 && (size_t)n < sizeof number);
    at = append(label, at, number, (size_t)n);
    at = append(label, at, key, key_length);
    return tbc_id_from_label(label, at);
}

tbc_u128 tbc_id_random(void)
{
    tbc_u128 id = {0, 0};
    size_t got = 0;
    /* getrandom of 16 bytes only comes back short on a signal. */
    for (int attempt = 0; attempt < 16 && got < sizeof id; attempt++) {
        ssize_t n = getrandom((char *)&id + got, sizeof id - got, 0);
        if (n > 0)
            got += (size_t)n;
    }
    assert(got == sizeof id);
    return tbc_id_normalize(id);
}
