/* The fast path of POST /v1/reserve and /v1/reserve/batch: one pass over a
 * body in its plain shape, straight into reserve requests, with no document
 * in between. Anything else (an escape or a non-ASCII byte in a string, a
 * real number, an unknown or repeated field, an invalid value, malformed
 * JSON) is left to the general parser (jdoc + decode), which decides and
 * words every error: the scan only ever accepts bodies the general path
 * accepts, with the same result. */
#ifndef LLMLIMIT_SERVER_RESERVE_SCAN_H
#define LLMLIMIT_SERVER_RESERVE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "backend/backend.h"
#include "wire/decode.h"

/* {"lease_id":...,"requirements":[...],"caller":...,"wait_ms":...,
 * "priority":...} in text[0..length). Returns 0 with *request filled (its
 * requirements in `requirements`, room for REQUIREMENTS_PER_RESERVE_MAX),
 * its strings NUL-terminated in place, as the general parser leaves them,
 * and *wait as decode_reserve_wait gives it; -1 with text unchanged
 * otherwise. */
int reserve_scan_one(char *text, size_t length, struct reserve_request *request,
                     struct requirement *requirements, struct reserve_wait *wait);

/* {"requests":[<reserve>,...]}: every item must scan (an item with wait_ms
 * or priority does not: the general path refuses it). Returns 0 with
 * *requests (count of them) and their requirements in arrays from arena;
 * -1 with text unchanged otherwise (also when out of memory). */
int reserve_scan_batch(char *text, size_t length, struct arena *arena,
                       struct reserve_request **requests, uint32_t *count);

#endif
