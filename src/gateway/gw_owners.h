/* Which virtual key created which Responses id ("resp_..."), so that the
 * routes that read, delete or cancel a response (GET /v1/responses/{id},
 * ...) serve only the key that made it and answer 404 to any other. Keys
 * are remembered by the SHA-256 of their secret, which a config reload
 * does not change. Bounded: at most `capacity` ids, the oldest forgotten
 * first (a forgotten id answers as unknown: 404). Safe from any thread. */
#ifndef LLMLIMIT_GATEWAY_OWNERS_H
#define LLMLIMIT_GATEWAY_OWNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_bounds.h"
#include "gw_config.h"

struct gw_owners;

/* A memory of at most capacity ids (the gateway uses
 * GW_RESPONSE_OWNERS_MAX). NULL when out of memory; free with
 * gw_owners_free. */
struct gw_owners *gw_owners_new(uint32_t capacity);
void gw_owners_free(struct gw_owners *owners);

/* Remembers that the key whose secret hashes to digest created response
 * id (length bytes). An id already remembered keeps its first owner (the
 * key that created it). 0, or -1 when id is empty or longer than
 * GW_RESPONSE_ID_LENGTH_MAX (not remembered: its later calls answer 404). */
int gw_owners_remember(struct gw_owners *owners, const char *id, size_t length,
                       const uint8_t digest[GW_SHA256_BYTES]);

enum gw_owner {
    GW_OWNER_UNKNOWN = 0, /* never remembered, or forgotten */
    GW_OWNER_THIS_KEY,    /* created by the key asking */
    GW_OWNER_OTHER_KEY,   /* created by another key */
};

/* Who owns id, as seen by the key whose secret hashes to digest (compared
 * in constant time). */
enum gw_owner gw_owners_lookup(struct gw_owners *owners, const char *id, size_t length,
                               const uint8_t digest[GW_SHA256_BYTES]);

/* How many ids are remembered now (at most capacity). */
uint32_t gw_owners_count(struct gw_owners *owners);

#endif
