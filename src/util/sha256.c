/* See sha256.h. */
#include "sha256.h"

#include <assert.h>

/* The low-level SHA-256 calls are deprecated in OpenSSL 3 in favour of
 * EVP, but they are what EVP's provider runs underneath, and they work on
 * a context on the stack. OpenSSL 3.0's EVP_DigestInit_ex2 allocates and
 * frees a new context on every call: 5 of them per reserve on the
 * tigerbeetle backend (docs/benchmarks-history.md). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

int sha256_digest(const void *data, size_t length, uint8_t digest[SHA256_DIGEST_BYTES])
{
    assert(data != NULL || length == 0);
    assert(digest != NULL);
    SHA256_CTX context;
    if (SHA256_Init(&context) != 1 || SHA256_Update(&context, data, length) != 1 ||
        SHA256_Final(digest, &context) != 1)
        return -1;
    return 0;
}

int hmac_sha256(const void *key, size_t key_length, const void *data, size_t length,
                uint8_t mac[SHA256_DIGEST_BYTES])
{
    assert(key != NULL || key_length == 0);
    assert(data != NULL || length == 0);
    assert(key_length <= INT32_MAX);
    static const uint8_t empty = 0;
    unsigned int mac_length = 0;
    /* HMAC() takes a NULL key as "no key given", not as the empty key. */
    if (HMAC(EVP_sha256(), key_length > 0 ? key : &empty, (int)key_length,
             length > 0 ? data : &empty, length, mac, &mac_length) == NULL)
        return -1;
    assert(mac_length == SHA256_DIGEST_BYTES);
    return 0;
}
