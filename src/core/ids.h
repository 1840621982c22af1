/* The syntax of the identifiers the wire carries (docs/api.md
 * "Conventions"): limit keys and lease ids. Pure functions, no state; also
 * compiled into the C client (src/client), hidden, so that it refuses what
 * the server would before anything is sent. */
#ifndef LLMLIMIT_CORE_IDS_H
#define LLMLIMIT_CORE_IDS_H

#include <stdbool.h>
#include <stddef.h>

/* true when each of the length bytes is printable ASCII but the space
 * (0x21..0x7e): a key, a URL. */
bool ids_visible_ascii(const char *text, size_t length);

/* Key syntax: 1..LIMIT_KEY_LENGTH_MAX bytes of printable ASCII, no whitespace. */
bool limit_key_valid(const char *key, size_t length);

/* Lease ID syntax: 1..LEASE_ID_LENGTH_MAX bytes of [A-Za-z0-9._:-]. */
bool lease_id_valid(const char *lease_id, size_t length);

/* Lease IDs that begin with this belong to the gateway's calls
 * (docs/gateway.md, "A call, step by step"): the gateway alone reserves,
 * completes and releases them; the data routes refuse them (403). */
#define LEASE_ID_GATEWAY_PREFIX "gw:"

/* Whether lease_id (length bytes) is in the gateway's namespace. */
bool lease_id_is_gateway(const char *lease_id, size_t length);

#endif
