/* Deterministic u128 ids (docs/tigerbeetle.md "Account model"): the first 16
 * bytes of SHA-256(label), read little-endian; 0 and 2^128-1, which
 * TigerBeetle rejects, get their lowest bit flipped. Every front end derives
 * the same id from the same label, which is what makes retries idempotent and
 * lets any llmlimitd find any lease's transfers. */
#ifndef LLMLIMIT_TB_IDS_H
#define LLMLIMIT_TB_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "tbc_types.h"

/* 0 and 2^128-1 become 1 and 2^128-2 (the lowest bit flipped); any other
 * value is returned as it is. */
tbc_u128 tbc_id_normalize(tbc_u128 id);

/* The id of a label of `length` bytes. */
tbc_u128 tbc_id_from_label(const char *label, size_t length);

/* Builds "<prefix><a>" or "<prefix><a>/<b>" and hashes it. The '/' cannot
 * occur in a lease id, so "lease/key" labels are unambiguous even though
 * both may contain ':' (see docs/tigerbeetle.md). */
tbc_u128 tbc_id1(const char *prefix, const char *a, size_t a_length);
tbc_u128 tbc_id2(const char *prefix, const char *a, size_t a_length, const char *b,
                 size_t b_length);

/* Id of a budget-period account: "<prefix><period_start_ms>:<key>". */
tbc_u128 tbc_id_period(const char *prefix, int64_t period_start_ms, const char *key,
                       size_t key_length);

/* The id with its top 48 bits replaced by unix_ms (which must fit them), so
 * ids made at about the same time have about the same value. TigerBeetle's
 * trees take ascending ids far more cheaply than scattered ones (its own
 * client's ids are time-based for this). The other 80 bits stay the
 * label's. */
tbc_u128 tbc_id_time_ordered(tbc_u128 id, uint64_t unix_ms);

/* A random nonzero, non-max u128 (client ids, one-off transfer ids). */
tbc_u128 tbc_id_random(void);

#endif
