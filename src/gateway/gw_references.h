/* What a Responses request points at that is stored upstream: the response
 * it continues (previous_response_id) and the items it references (an
 * item_reference, or an item of only an id, which OpenAI reads as one).
 * The gateway serves these only to the key that created them (gw_owners);
 * the estimate counts a reference as nothing (its content is upstream). */
#ifndef LLMLIMIT_GATEWAY_REFERENCES_H
#define LLMLIMIT_GATEWAY_REFERENCES_H

#include <stdbool.h>
#include <stddef.h>

#include "util/jdoc.h"

enum gw_reference {
    GW_REFERENCE_RESPONSE = 0, /* previous_response_id */
    GW_REFERENCE_ITEM,         /* an item of input or instructions */
};

/* Whether an input item refers to a stored item: {"type":
 * "item_reference", "id"}, or an object with neither type nor role and a
 * string id. */
bool gw_item_is_reference(const struct jdoc_value *item);

/* Called for each reference with its id (length bytes, not
 * NUL-terminated); a non-zero return stops the walk. */
typedef int (*gw_reference_fn)(void *context, enum gw_reference kind, const char *id,
                               size_t length);

/* Calls fn for previous_response_id (unless absent or null), then for
 * each reference among the items of input and instructions (when arrays),
 * in order. Returns fn's first non-zero answer, else 0. An id that is not
 * a string is given with length 0 (it names nothing stored). */
int gw_references_each(const struct jdoc_value *body, gw_reference_fn fn, void *context);

#endif
