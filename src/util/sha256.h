/* SHA-256 through OpenSSL, cheap enough for the data path: no lookup of
 * the algorithm by name and no allocation per call, where the one-shot
 * SHA256() and EVP_Digest() look the algorithm up and EVP allocates a
 * context on every call. The gateway hashes every caller's key and request
 * id with it, the TigerBeetle client every transfer's id. */
#ifndef LLMLIMIT_UTIL_SHA256_H
#define LLMLIMIT_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_BYTES 32

/* SHA-256 of data[0..length) into digest. 0, or -1 if libcrypto fails
 * (the digest is missing, or a thread's first context cannot be made). */
int sha256_digest(const void *data, size_t length, uint8_t digest[SHA256_DIGEST_BYTES]);

/* HMAC-SHA256 (RFC 2104) of data[0..length) under key[0..key_length)
 * into mac: the signature of an alert's body (docs/alerts.md). 0, or -1 if
 * libcrypto fails. */
int hmac_sha256(const void *key, size_t key_length, const void *data, size_t length,
                uint8_t mac[SHA256_DIGEST_BYTES]);

#endif
