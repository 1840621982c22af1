/* See sha256.h. */
#include "sha256.h"

#include <assert.h>

/* The low-level SHA-256 calls are deprecated in OpenSSL 3 in favour of
 * EVP, but they are what EVP's provider runs underneath, and they work on
 * a context on the stack. OpenSSL 3.0's EVP_DigestInit_ex2 allocates and
 * frees a new context on every call: 5 of them per reserve on the
 * tigerbeetle backend (docs/benchmarks-history.md). */
#define OPENSSL_SUPPRESS_DEPRECATED
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
