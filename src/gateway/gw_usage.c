/* OpenAI's usage object: prompt_tokens, completion_tokens, total_tokens
 * and prompt_tokens_details.cached_tokens, every count an integer. Extra
 * members (completion_tokens_details, audio counts) are allowed: providers
 * add them, and what they count is already in the totals read here. */
#include "gw_usage.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static int fail(char *error, size_t error_size, const char *field, const char *reason)
{
    snprintf(error, error_size, "usage%s%s: %s", field[0] != '\0' ? "." : "", field, reason);
    return -1;
}

/* 1 read, 0 absent (or null), -1 malformed. */
static int count(const struct jdoc_value *object, const char *name, uint64_t *out, char *error,
                 size_t error_size)
{
    const struct jdoc_value *value = jdoc_get(object, name);
    if (value == NULL || value->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 0)
        return fail(error, error_size, name, "must be an integer 0..9223372036854775807");
    *out = (uint64_t)value->as.integer;
    return 1;
}

static int read_cached(const struct jdoc_value *usage, struct gw_usage *out, char *error,
                       size_t error_size)
{
    const struct jdoc_value *details = jdoc_get(usage, "prompt_tokens_details");
    if (details == NULL || details->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(details, JDOC_OBJECT))
        return fail(error, error_size, "prompt_tokens_details", "must be an object");
    if (count(details, "cached_tokens", &out->cached_tokens, error, error_size) < 0)
        return fail(error, error_size, "prompt_tokens_details.cached_tokens",
                    "must be an integer 0..9223372036854775807");
    if (out->cached_tokens > out->prompt_tokens)
        return fail(error, error_size, "prompt_tokens_details.cached_tokens",
                    "more than prompt_tokens");
    return 0;
}

int gw_usage_read(const struct jdoc_value *answer, struct gw_usage *out, char *error,
                  size_t error_size)
{
    assert(out != NULL && error != NULL);
    memset(out, 0, sizeof *out);
    if (!jdoc_is(answer, JDOC_OBJECT)) {
        snprintf(error, error_size, "answer: must be a JSON object");
        return -1;
    }
    const struct jdoc_value *usage = jdoc_get(answer, "usage");
    if (usage == NULL || usage->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(usage, JDOC_OBJECT))
        return fail(error, error_size, "", "must be an object");
    int prompt = count(usage, "prompt_tokens", &out->prompt_tokens, error, error_size);
    if (prompt == 0)
        return fail(error, error_size, "prompt_tokens", "required");
    int completion =
        prompt < 0 ? -1
                   : count(usage, "completion_tokens", &out->completion_tokens, error, error_size);
    int total =
        completion < 0 ? -1 : count(usage, "total_tokens", &out->total_tokens, error, error_size);
    if (total < 0 || read_cached(usage, out, error, error_size) != 0)
        return -1;
    out->has_completion_tokens = completion == 1;
    if (total == 0) /* both at most 2^63 - 1: no wrap */
        out->total_tokens = out->prompt_tokens + out->completion_tokens;
    out->present = true;
    return 0;
}

struct gw_tokens gw_usage_tokens(const struct gw_usage *usage)
{
    assert(usage->present);
    return (struct gw_tokens){.input = usage->prompt_tokens,
                              .cached_input = usage->cached_tokens,
                              .output = usage->completion_tokens};
}
