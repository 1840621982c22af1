/* Hex and base64url by hand (both are a few lines, and they must never
 * allocate), SHA-256 from util/sha256.c, and randomness from
 * core/random.c; and a provider key starred out of what is relayed. */
#include "gw_secret.h"

#include <assert.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>

#include "core/random.h"
#include "util/sha256.h"

void gw_hex_encode(const uint8_t *bytes, size_t length, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < length; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 0x0F];
    }
    out[2 * length] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int gw_hex_decode(const char *text, size_t text_length, uint8_t *out, size_t size)
{
    if (text_length != 2 * size)
        return -1;
    for (size_t i = 0; i < size; i++) {
        int high = hex_value(text[2 * i]), low = hex_value(text[2 * i + 1]);
        if (high < 0 || low < 0)
            return -1;
        out[i] = (uint8_t)(high << 4 | low);
    }
    return 0;
}

size_t gw_base64url_encode(const uint8_t *bytes, size_t length, char *out)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t n = 0;
    for (size_t i = 0; i < length; i += 3) {
        uint32_t group = (uint32_t)bytes[i] << 16;
        size_t have = length - i < 3 ? length - i : 3;
        if (have > 1)
            group |= (uint32_t)bytes[i + 1] << 8;
        if (have > 2)
            group |= bytes[i + 2];
        for (size_t k = 0; k <= have; k++) /* have bytes make have + 1 characters */
            out[n++] = alphabet[(group >> (18 - 6 * k)) & 0x3F];
    }
    out[n] = '\0';
    return n;
}

int gw_secret_new(char secret[GW_SECRET_SIZE], char sha256_hex[GW_SHA256_HEX_SIZE])
{
    uint8_t random[GW_SECRET_RANDOM_BYTES], digest[GW_SHA256_BYTES];
    if (random_fill(random, sizeof random) != 0)
        return -1;
    memcpy(secret, GW_SECRET_PREFIX, strlen(GW_SECRET_PREFIX));
    size_t n = gw_base64url_encode(random, sizeof random, secret + strlen(GW_SECRET_PREFIX));
    assert(strlen(GW_SECRET_PREFIX) + n + 1 == GW_SECRET_SIZE);
    OPENSSL_cleanse(random, sizeof random);
    if (sha256_digest(secret, strlen(secret), digest) != 0) {
        errno = EIO;
        return -1;
    }
    gw_hex_encode(digest, sizeof digest, sha256_hex);
    return 0;
}

size_t gw_secret_redact(char *bytes, size_t length, const char *secret)
{
    size_t secret_length = secret != NULL ? strlen(secret) : 0;
    if (secret_length < GW_REDACT_SECRET_LENGTH_MIN)
        return 0;
    size_t found = 0;
    char *at = bytes, *end = bytes + length;
    while ((size_t)(end - at) >= secret_length) {
        char *match = memmem(at, (size_t)(end - at), secret, secret_length);
        if (match == NULL)
            break;
        memset(match, '*', secret_length);
        at = match + secret_length;
        found++;
    }
    return found;
}
