/* The references of a Responses request (gw_references.h), read the way the
 * estimate reads its items, so the two never disagree on which item is
 * one. */
#include "gw_references.h"

#include <string.h>

static bool type_is(const struct jdoc_value *type, const char *name)
{
    size_t length = strlen(name);
    return jdoc_is(type, JDOC_STRING) && type->count == length &&
           memcmp(type->as.string, name, length) == 0;
}

bool gw_item_is_reference(const struct jdoc_value *item)
{
    if (!jdoc_is(item, JDOC_OBJECT))
        return false;
    const struct jdoc_value *type = jdoc_get(item, "type");
    if (type != NULL)
        return type_is(type, "item_reference");
    return jdoc_get(item, "role") == NULL && jdoc_is(jdoc_get(item, "id"), JDOC_STRING);
}

static int items_each(const struct jdoc_value *items, gw_reference_fn fn, void *context)
{
    for (uint32_t i = 0; jdoc_is(items, JDOC_ARRAY) && i < items->count; i++) {
        const struct jdoc_value *item = &items->as.items[i];
        if (!gw_item_is_reference(item))
            continue;
        const struct jdoc_value *id = jdoc_get(item, "id");
        int rc = jdoc_is(id, JDOC_STRING) ? fn(context, GW_REFERENCE_ITEM, id->as.string, id->count)
                                          : fn(context, GW_REFERENCE_ITEM, "", 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int gw_references_each(const struct jdoc_value *body, gw_reference_fn fn, void *context)
{
    const struct jdoc_value *previous = jdoc_get(body, "previous_response_id");
    if (previous != NULL && previous->kind != JDOC_NULL) {
        int rc = jdoc_is(previous, JDOC_STRING)
                     ? fn(context, GW_REFERENCE_RESPONSE, previous->as.string, previous->count)
                     : fn(context, GW_REFERENCE_RESPONSE, "", 0);
        if (rc != 0)
            return rc;
    }
    int rc = items_each(jdoc_get(body, "input"), fn, context);
    return rc != 0 ? rc : items_each(jdoc_get(body, "instructions"), fn, context);
}
