/* Virtual API keys: a client's bearer secret is never stored, only its
 * SHA-256, so gateway.json can be read by operators without leaking a key.
 * New secrets are "llk-" and 32 random bytes (getrandom) in base64url. */
#ifndef LLMLIMIT_GATEWAY_SECRET_H
#define LLMLIMIT_GATEWAY_SECRET_H

#include <stddef.h>
#include <stdint.h>

#include "gw_config.h"

#define GW_SECRET_PREFIX "llk-"
#define GW_SECRET_RANDOM_BYTES 32
/* "llk-" + 43 base64url characters + NUL. */
#define GW_SECRET_SIZE (4 + 43 + 1)
#define GW_SHA256_HEX_SIZE (2 * GW_SHA256_BYTES + 1)

/* Lower-case hex of bytes[0..length) into out, NUL-terminated; out has
 * room for 2 * length + 1. */
void gw_hex_encode(const uint8_t *bytes, size_t length, char *out);

/* Decodes exactly 2 * size lower-case hex digits (text_length must be that)
 * into out[0..size). 0, or -1 for another length or any other character. */
int gw_hex_decode(const char *text, size_t text_length, uint8_t *out, size_t size);

/* base64url without padding of bytes[0..length) into out, NUL-terminated;
 * returns the length written. out has room for (4 * length + 2) / 3 + 1. */
size_t gw_base64url_encode(const uint8_t *bytes, size_t length, char *out);

/* A new secret and the hex SHA-256 of it (what gateway.json holds). 0, or
 * -1 with errno set when the kernel gives no randomness or libcrypto fails. */
int gw_secret_new(char secret[GW_SECRET_SIZE], char sha256_hex[GW_SHA256_HEX_SIZE]);

/* A provider key shorter than this is not looked for in what is relayed:
 * so short a text would match ordinary bytes of an answer. */
#define GW_REDACT_SECRET_LENGTH_MIN 8

/* Overwrites every occurrence of secret (NUL-terminated; NULL or shorter
 * than GW_REDACT_SECRET_LENGTH_MIN: none is looked for) in bytes[0..length)
 * with '*', so an upstream that echoes the provider key does not show it
 * to a client (docs/gateway.md, "Routes"). Returns how many it found. */
size_t gw_secret_redact(char *bytes, size_t length, const char *secret);

#endif
