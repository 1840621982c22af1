/* Strict decoding of request bodies and registry entries (docs/api.md,
 * docs/configuration.md "The registry file"). Every rejection names the field
 * path and the reason, e.g. "requirements[1].amount: must be an integer
 * 1..9223372036854775807". Unknown fields are rejected. Decoded strings point
 * into the parsed document, which the caller keeps alive as long as it uses
 * them. */
#ifndef LLMLIMIT_SERVER_DECODE_H
#define LLMLIMIT_SERVER_DECODE_H

#include <stddef.h>

#include "util/arena.h"
#include "backend/backend.h"
#include "util/jdoc.h"

#define DECODE_ERROR_SIZE 512

/* Parses a body in place (see jdoc_parse): nesting deeper than
 * JSON_DEPTH_MAX, malformed JSON, an integer beyond int64 and duplicate
 * object keys are errors ("invalid JSON: ... (line L, column C)"). Returns 0
 * with the document (in arena) in *out, or -1. */
int decode_parse(char *body, size_t length, struct arena *arena, const struct jdoc_value **out,
                 char *error, size_t error_size);

/* `path` locates the object in the body: "" for a whole body, "requests[3]"
 * for a batch item; field paths are built from it. Each returns 0 or -1. */

/* requirements: room for REQUIREMENTS_PER_RESERVE_MAX. A batch item's:
 * wait_ms and priority are refused. */
int decode_reserve(const struct jdoc_value *object, const char *path, struct reserve_request *out,
                   struct requirement *requirements, char *error, size_t error_size);

/* What a single reserve asks of the waiting queue (docs/api.md, "Waiting
 * for capacity"). */
struct reserve_wait {
    int64_t wait_ms;  /* 0..WAIT_MS_MAX, default 0: answered at once */
    uint8_t priority; /* 0..WAIT_PRIORITIES-1, default WAIT_PRIORITY_DEFAULT */
};

/* decode_reserve that also reads wait_ms and priority into *wait. */
int decode_reserve_wait(const struct jdoc_value *object, const char *path,
                        struct reserve_request *out, struct requirement *requirements,
                        struct reserve_wait *wait, char *error, size_t error_size);
/* actuals: room for REQUIREMENTS_PER_RESERVE_MAX. */
int decode_complete(const struct jdoc_value *object, const char *path, struct complete_request *out,
                    struct actual *actuals, char *error, size_t error_size);
int decode_release(const struct jdoc_value *object, const char *path, struct release_request *out,
                   char *error, size_t error_size);

/* {"requests":[...]}: 1..BATCH_ITEMS_MAX items. *requests is borrowed from
 * the body. */
int decode_batch(const struct jdoc_value *body, const struct jdoc_value **requests, char *error,
                 size_t error_size);

/* A limit definition (PUT /v1/admin/limits), validated and normalised with
 * limit_definition_validate. */
int decode_definition(const struct jdoc_value *object, const char *path,
                      struct limit_definition *out, char *error, size_t error_size);
/* The same for a definition without its key (a gateway template's
 * "default"): a "key" field is refused, and `key` (valid) is checked in
 * its place, so it passes exactly the checks of a PUT with that key. */
int decode_definition_keyed(const struct jdoc_value *object, const char *path, const char *key,
                            struct limit_definition *out, char *error, size_t error_size);
/* A LimitState of limits.json: definition, status, pending_decrease_to. */
int decode_limit_state(const struct jdoc_value *object, const char *path, struct limit_state *out,
                       char *error, size_t error_size);

/* A whole-number query argument (decimal, optional leading '-'): 0 or -1. */
int decode_i64(const char *text, int64_t *out);

#endif
