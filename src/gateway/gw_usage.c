/* Three usage shapes, one result. OpenAI chat: prompt_tokens,
 * completion_tokens, total_tokens, prompt_tokens_details.cached_tokens,
 * completion_tokens_details.reasoning_tokens. Responses: input_tokens,
 * output_tokens and their _details. Anthropic: input_tokens (uncached
 * only), cache_read_input_tokens, cache_creation_input_tokens (split by
 * cache_creation), output_tokens. Extra members are allowed: providers add
 * them, and what they count is already in the counts read here. */
#include "gw_usage.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define COUNT_REASON "must be an integer 0..9223372036854775807"

static int fail(char *error, size_t error_size, const char *field, const char *reason)
{
    snprintf(error, error_size, "usage%s%s: %s", field[0] != '\0' ? "." : "", field, reason);
    return -1;
}

/* 1 read, 0 absent (or null), -1 malformed (error written with path). */
static int count_at(const struct jdoc_value *object, const char *name, const char *path,
                    uint64_t *out, char *error, size_t error_size)
{
    const struct jdoc_value *value = jdoc_get(object, name);
    if (value == NULL || value->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 0)
        return fail(error, error_size, path, COUNT_REASON);
    *out = (uint64_t)value->as.integer;
    return 1;
}

static int count(const struct jdoc_value *object, const char *name, uint64_t *out, char *error,
                 size_t error_size)
{
    return count_at(object, name, name, out, error, error_size);
}

/* object.details.name (details absent or null: 0, nothing read); the
 * count must not pass `most` (named most_name). */
static int detail(const struct jdoc_value *object, const char *details_name, const char *name,
                  uint64_t most, const char *most_name, uint64_t *out, char *error,
                  size_t error_size)
{
    const struct jdoc_value *details = jdoc_get(object, details_name);
    if (details == NULL || details->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(details, JDOC_OBJECT))
        return fail(error, error_size, details_name, "must be an object");
    char path[96], reason[64];
    snprintf(path, sizeof path, "%s.%s", details_name, name);
    if (count_at(details, name, path, out, error, error_size) < 0)
        return -1;
    snprintf(reason, sizeof reason, "more than %s", most_name);
    return *out > most ? fail(error, error_size, path, reason) : 0;
}

/* The usage member of answer: NULL (absent or null) or an object; -1 when
 * it is something else or the answer is not an object. */
static int usage_object(const struct jdoc_value *answer, const struct jdoc_value **usage,
                        char *error, size_t error_size)
{
    *usage = NULL;
    if (!jdoc_is(answer, JDOC_OBJECT)) {
        snprintf(error, error_size, "answer: must be a JSON object");
        return -1;
    }
    const struct jdoc_value *value = jdoc_get(answer, "usage");
    if (value == NULL || value->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(value, JDOC_OBJECT))
        return fail(error, error_size, "", "must be an object");
    *usage = value;
    return 0;
}

static void complete_totals(struct gw_usage *out, bool total_read)
{
    if (!total_read) /* both at most 2^63 - 1: no wrap */
        out->total_tokens = out->prompt_tokens + out->completion_tokens;
    out->present = true;
}

int gw_usage_read(const struct jdoc_value *answer, struct gw_usage *out, char *error,
                  size_t error_size)
{
    assert(out != NULL && error != NULL);
    memset(out, 0, sizeof *out);
    const struct jdoc_value *usage;
    if (usage_object(answer, &usage, error, error_size) != 0)
        return -1;
    if (usage == NULL)
        return 0;
    int prompt = count(usage, "prompt_tokens", &out->prompt_tokens, error, error_size);
    if (prompt == 0)
        return fail(error, error_size, "prompt_tokens", "required");
    int completion =
        prompt < 0 ? -1
                   : count(usage, "completion_tokens", &out->completion_tokens, error, error_size);
    int total =
        completion < 0 ? -1 : count(usage, "total_tokens", &out->total_tokens, error, error_size);
    if (total < 0 ||
        detail(usage, "prompt_tokens_details", "cached_tokens", out->prompt_tokens, "prompt_tokens",
               &out->cached_tokens, error, error_size) != 0 ||
        detail(usage, "completion_tokens_details", "reasoning_tokens", out->completion_tokens,
               "completion_tokens", &out->reasoning_tokens, error, error_size) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->has_completion_tokens = completion == 1;
    complete_totals(out, total == 1);
    return 0;
}

int gw_usage_read_responses(const struct jdoc_value *response, struct gw_usage *out, char *error,
                            size_t error_size)
{
    assert(out != NULL && error != NULL);
    memset(out, 0, sizeof *out);
    const struct jdoc_value *usage;
    if (usage_object(response, &usage, error, error_size) != 0)
        return -1;
    if (usage == NULL)
        return 0;
    int input = count(usage, "input_tokens", &out->prompt_tokens, error, error_size);
    int output =
        input < 0 ? -1 : count(usage, "output_tokens", &out->completion_tokens, error, error_size);
    int total =
        output < 0 ? -1 : count(usage, "total_tokens", &out->total_tokens, error, error_size);
    int result = total < 0 ? -1 : 0;
    if (result == 0 && input == 0)
        result = fail(error, error_size, "input_tokens", "required");
    if (result == 0 && output == 0)
        result = fail(error, error_size, "output_tokens", "required");
    if (result == 0)
        result = detail(usage, "input_tokens_details", "cached_tokens", out->prompt_tokens,
                        "input_tokens", &out->cached_tokens, error, error_size);
    if (result == 0)
        result = detail(usage, "output_tokens_details", "reasoning_tokens", out->completion_tokens,
                        "output_tokens", &out->reasoning_tokens, error, error_size);
    if (result != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->has_completion_tokens = true;
    complete_totals(out, total == 1);
    return 0;
}

/* ---- Anthropic ---- */

enum messages_field {
    M_INPUT = 0,   /* input_tokens: the uncached input only */
    M_CACHE_READ,  /* cache_read_input_tokens */
    M_CACHE_WRITE, /* cache_creation_input_tokens: all writes */
    M_WRITE_5M,    /* cache_creation.ephemeral_5m_input_tokens */
    M_WRITE_1H,    /* cache_creation.ephemeral_1h_input_tokens */
    M_OUTPUT,      /* output_tokens */
    M_FIELDS,
};

static const char *const messages_paths[M_FIELDS] = {
    [M_INPUT] = "input_tokens",
    [M_CACHE_READ] = "cache_read_input_tokens",
    [M_CACHE_WRITE] = "cache_creation_input_tokens",
    [M_WRITE_5M] = "cache_creation.ephemeral_5m_input_tokens",
    [M_WRITE_1H] = "cache_creation.ephemeral_1h_input_tokens",
    [M_OUTPUT] = "output_tokens",
};

int gw_messages_usage_merge(struct gw_messages_usage *state, const struct jdoc_value *usage,
                            char *error, size_t error_size)
{
    _Static_assert(M_FIELDS == sizeof state->value / sizeof state->value[0], "one slot a field");
    if (!jdoc_is(usage, JDOC_OBJECT))
        return fail(error, error_size, "", "must be an object");
    const struct jdoc_value *creation = jdoc_get(usage, "cache_creation");
    if (creation != NULL && creation->kind != JDOC_NULL && !jdoc_is(creation, JDOC_OBJECT))
        return fail(error, error_size, "cache_creation", "must be an object");
    struct gw_messages_usage next = *state; /* all or nothing */
    for (int f = 0; f < M_FIELDS; f++) {
        bool nested = f == M_WRITE_5M || f == M_WRITE_1H;
        const char *name = nested ? strchr(messages_paths[f], '.') + 1 : messages_paths[f];
        int read = count_at(nested ? creation : usage, name, messages_paths[f], &next.value[f],
                            error, error_size);
        if (read < 0)
            return -1;
        next.seen |= (unsigned)read << f;
    }
    *state = next;
    return 0;
}

bool gw_messages_usage_has_input(const struct gw_messages_usage *state)
{
    return (state->seen & (1u << M_INPUT)) != 0;
}

/* The writes for 5 minutes and 1 hour. cache_creation's counts when it is
 * given; a cache_creation_input_tokens above their sum adds the rest to the
 * 5-minute writes (the larger of the two figures is charged, never the
 * smaller). Without cache_creation every write is a 5-minute one. */
static void messages_writes(const struct gw_messages_usage *s, uint64_t *write_5m,
                            uint64_t *write_1h)
{
    unsigned split = (1u << M_WRITE_5M) | (1u << M_WRITE_1H);
    uint64_t all = s->seen & (1u << M_CACHE_WRITE) ? s->value[M_CACHE_WRITE] : 0;
    if (!(s->seen & split)) {
        *write_5m = all, *write_1h = 0;
        return;
    }
    *write_1h = s->seen & (1u << M_WRITE_1H) ? s->value[M_WRITE_1H] : 0;
    *write_5m = s->seen & (1u << M_WRITE_5M) ? s->value[M_WRITE_5M] : 0;
    if (all > *write_5m + *write_1h) /* each at most 2^63 - 1: no wrap */
        *write_5m = all - *write_1h;
}

int gw_messages_usage_result(const struct gw_messages_usage *state, struct gw_usage *out,
                             char *error, size_t error_size)
{
    memset(out, 0, sizeof *out);
    if (!(state->seen & (1u << M_INPUT)))
        return fail(error, error_size, "input_tokens", "required");
    if (!(state->seen & (1u << M_OUTPUT)))
        return fail(error, error_size, "output_tokens", "required");
    uint64_t write_5m, write_1h;
    messages_writes(state, &write_5m, &write_1h);
    uint64_t read = state->seen & (1u << M_CACHE_READ) ? state->value[M_CACHE_READ] : 0;
    unsigned __int128 input = (unsigned __int128)state->value[M_INPUT] + read + write_5m + write_1h;
    if (input > AMOUNT_MAX)
        return fail(error, error_size, "input_tokens",
                    "with cache reads and writes, above 9223372036854775807");
    out->prompt_tokens = (uint64_t)input;
    out->cached_tokens = read;
    out->cache_write_5m_tokens = write_5m;
    out->cache_write_1h_tokens = write_1h;
    out->completion_tokens = state->value[M_OUTPUT];
    out->has_completion_tokens = true;
    complete_totals(out, false);
    return 0;
}

int gw_messages_usage_cut(const struct gw_messages_usage *state, uint64_t counted_output,
                          struct gw_usage *out, char *error, size_t error_size)
{
    struct gw_messages_usage cut = *state;
    if (!(cut.seen & (1u << M_OUTPUT)) || cut.value[M_OUTPUT] < counted_output)
        cut.value[M_OUTPUT] = counted_output;
    cut.seen |= 1u << M_OUTPUT;
    return gw_messages_usage_result(&cut, out, error, error_size);
}

int gw_usage_read_messages(const struct jdoc_value *message, struct gw_usage *out, char *error,
                           size_t error_size)
{
    assert(out != NULL && error != NULL);
    memset(out, 0, sizeof *out);
    const struct jdoc_value *usage;
    if (usage_object(message, &usage, error, error_size) != 0)
        return -1;
    if (usage == NULL)
        return 0;
    struct gw_messages_usage state = {0};
    if (gw_messages_usage_merge(&state, usage, error, error_size) != 0)
        return -1;
    return gw_messages_usage_result(&state, out, error, error_size);
}

int gw_usage_read_with(gw_usage_read_fn read, enum gw_endpoint endpoint,
                       const struct jdoc_value *answer, struct gw_usage *out, char *error,
                       size_t error_size)
{
    if (read == NULL) { /* no usage: a tool call costs its price */
        memset(out, 0, sizeof *out);
        return 0;
    }
    return read(endpoint, answer, out, error, error_size);
}

int gw_usage_read_openai(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                         struct gw_usage *out, char *error, size_t error_size)
{
    if (endpoint == GW_ENDPOINT_EMBEDDINGS) /* no output, so no completion_tokens */
        return gw_usage_read(answer, out, error, error_size);
    if (gw_usage_read(answer, out, error, error_size) != 0)
        return -1;
    if (out->present && !out->has_completion_tokens) { /* never read as 0 output */
        memset(out, 0, sizeof *out);
        return fail(error, error_size, "completion_tokens", "required");
    }
    return 0;
}

struct gw_tokens gw_usage_tokens(const struct gw_usage *usage)
{
    assert(usage->present);
    return (struct gw_tokens){.input = usage->prompt_tokens,
                              .cached_input = usage->cached_tokens,
                              .output = usage->completion_tokens,
                              .cache_write_5m = usage->cache_write_5m_tokens,
                              .cache_write_1h = usage->cache_write_1h_tokens,
                              .reasoning = usage->reasoning_tokens};
}
