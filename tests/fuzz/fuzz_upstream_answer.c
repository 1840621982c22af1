/* libFuzzer harness: an upstream's answer turned into usage, cost and the
 * actuals of the lease's complete, through the functions of src/gateway
 * that src/server/gateway_call.c calls on the upstream's bytes, in the
 * same order: a whole answer gathered in a buffer, copied out and parsed
 * (jdoc_parse_nested), what it used read from its usage or counted from
 * its text, or from all its bytes when it does not parse
 * (gw_answer_tokens), then handed over (buffer_detach); a stream through
 * gw_sse_feed/gw_sse_finish and gw_sse_output_* (an event past the bound
 * counted as what came of it); then gw_cost_usd_micros and
 * gw_plan_complete. Empty answers included. Every result must hold its
 * bounds, the cost must be the exact rounded-up price, and each actual the
 * sum of its templates. A whole answer is also read as Gemini's (an object
 * or a stream's array, usageMetadata, a missing candidatesTokenCount
 * counted from the text), its counts held to the same bounds.
 *
 * Input: byte 0 flags (1: streamed, 2: large estimate), byte 1 input and
 * output price (3 bits each, from `prices`), byte 2 the cached price (3
 * bits) and how many split points follow (4 bits), bytes 3..10 the input
 * and output estimates (little-endian uint32), then two bytes per split
 * point, then the answer's body. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_answer.h"
#include "gateway/gw_config.h"
#include "gateway/gw_cost.h"
#include "gateway/gw_estimate.h"
#include "gateway/gw_gemini.h"
#include "gateway/gw_plan.h"
#include "gateway/gw_sse.h"
#include "gateway/gw_usage.h"
#include "util/arena.h"
#include "util/buffer.h"
#include "util/jdoc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD_BYTES 11
#define SPLITS_MAX 15
#define MICROS_PER_MTOK 1000000u

typedef unsigned __int128 u128;

static const uint64_t prices[8] = {
    0, 1, 150000, 600000, 999999, 1000000, UINT64_C(1) << 62, AMOUNT_MAX,
};

/* Templates with literal keys, so the harness knows which share a key:
 * "sum" takes requests, tokens and usd_micros at once. */
static const struct {
    const char *key;
    enum gw_amount amount;
} templates[] = {
    {"r", GW_AMOUNT_REQUESTS},      {"t", GW_AMOUNT_TOKENS},       {"i", GW_AMOUNT_INPUT_TOKENS},
    {"o", GW_AMOUNT_OUTPUT_TOKENS}, {"u", GW_AMOUNT_USD_MICROS},   {"sum", GW_AMOUNT_REQUESTS},
    {"sum", GW_AMOUNT_TOKENS},      {"sum", GW_AMOUNT_USD_MICROS},
};
#define TEMPLATE_COUNT (sizeof templates / sizeof templates[0])

static struct gw_config *config_once(void)
{
    static struct gw_config *config;
    if (config != NULL)
        return config;
    char limits[1024] = "", text[4096], error[GW_CONFIG_ERROR_SIZE];
    for (size_t i = 0; i < TEMPLATE_COUNT; i++)
        snprintf(limits + strlen(limits), sizeof limits - strlen(limits),
                 "%s{\"key\":\"%s\",\"amount\":\"%s\"}", i > 0 ? "," : "", templates[i].key,
                 gw_amount_name(templates[i].amount));
    snprintf(text, sizeof text,
             "{\"upstreams\":[{\"name\":\"up\",\"base_url\":\"http://127.0.0.1:1/v1\"}],"
             "\"models\":[{\"name\":\"m\",\"upstream\":\"up\",\"input_usd_micros_per_mtok\":1,"
             "\"output_usd_micros_per_mtok\":1,\"max_output_tokens\":16,"
             "\"default_max_output_tokens\":16}],\"limits\":[%s],"
             "\"keys\":[{\"sha256\":\"%064d\",\"caller\":\"c\"}]}",
             limits, 1);
    int loaded = gw_config_parse("gateway.json", text, strlen(text), &config, error, sizeof error);
    if (loaded != 0)
        fprintf(stderr, "fuzz_upstream_answer: %s\n", error);
    assert(loaded == 0);
    assert(config->limit_count == TEMPLATE_COUNT);
    return config;
}

/* ---- the answer, as gateway_call.c measures it ---- */

/* The same whole answer read as Gemini's: its usageMetadata exactly when the
 * reader takes it (the counted text added when candidatesTokenCount is
 * missing), else the estimate and its counted text; every count within its
 * bounds. */
static void gemini_answer(const struct jdoc_value *root, const char *body, size_t length,
                          uint64_t input_estimate)
{
    struct gw_tokens used;
    bool from_usage =
        gw_answer_tokens(GW_ENDPOINT_GEMINI, root, body, length, input_estimate, &used);
    assert(used.input <= AMOUNT_MAX && used.output <= AMOUNT_MAX);
    assert(used.cached_input <= used.input);
    assert(used.reasoning <= used.output);
    if (!from_usage) {
        assert(used.input == input_estimate && used.cached_input == 0 && used.reasoning == 0);
        if (!jdoc_is(root, JDOC_OBJECT) && !jdoc_is(root, JDOC_ARRAY))
            assert(used.output == gw_estimate_text(body, length));
        return;
    }
    struct gw_usage usage;
    char error[GW_USAGE_ERROR_SIZE];
    assert(gw_gemini_usage_read(root, &usage, error, sizeof error) == 0 && usage.present);
    assert(used.input == usage.prompt_tokens);
    assert(used.output >= usage.completion_tokens);
    assert(usage.has_completion_tokens
               ? used.output == usage.completion_tokens
               : used.output - usage.completion_tokens == gw_gemini_output_tokens(root) ||
                     used.output == AMOUNT_MAX);
}

static struct gw_tokens whole_answer(const char *body, size_t length, const size_t *cuts,
                                     size_t count, uint64_t input_estimate)
{
    struct buffer answer; /* call->answer: filled piece by piece, as on_data does */
    buffer_init(&answer, NULL, 0);
    size_t at = 0;
    for (size_t i = 0; i <= count; i++) {
        size_t cut = i < count ? cuts[i] : length;
        buffer_append(&answer, body + at, cut - at);
        at = cut;
    }
    assert(!answer.failed);
    assert(answer.length == length);
    struct gw_tokens used;
    char *copy = malloc(answer.length + 1);
    assert(copy != NULL);
    memcpy(copy, answer.data, answer.length);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[GW_USAGE_ERROR_SIZE];
    struct gw_usage usage = {0};
    if (jdoc_parse_nested(copy, answer.length, GW_JSON_DEPTH_MAX, &arena, &root, error,
                          sizeof error) != 0)
        root = NULL;
    bool from_usage = gw_answer_tokens(GW_ENDPOINT_CHAT_COMPLETIONS, root, answer.data,
                                       answer.length, input_estimate, &used);
    if (from_usage) { /* the usage as chat's reader takes it, completion_tokens included */
        assert(gw_usage_read_answer(GW_ENDPOINT_CHAT_COMPLETIONS, root, &usage, error,
                                    sizeof error) == 0);
        assert(usage.present && usage.has_completion_tokens);
        assert(used.input == usage.prompt_tokens);
        assert(used.output == usage.completion_tokens);
    } else {
        assert(used.input == input_estimate);
        assert(used.cached_input == 0 && used.reasoning == 0);
        if (!jdoc_is(root, JDOC_OBJECT)) /* not read: every byte is text, never 0 */
            assert(used.output == gw_estimate_text(body, length));
    }
    gemini_answer(root, answer.data, answer.length, input_estimate);
    arena_free(&arena);
    free(copy);
    /* gateway_reply_answer hands the body over: an empty one too, never NULL. */
    char *handed = buffer_detach(&answer);
    assert(handed != NULL);
    assert(length == 0 || memcmp(handed, body, length) == 0);
    free(handed);
    return used;
}

struct stream {
    struct gw_sse_output output;
    struct gw_usage usage;
};

static int on_event(void *context, const struct gw_sse_event *event)
{
    struct stream *s = context;
    gw_sse_output_add(&s->output, event);
    if (event->usage.present)
        s->usage = event->usage;
    return 0;
}

static struct gw_tokens streamed_answer(const char *body, size_t length, const size_t *cuts,
                                        size_t count, uint64_t input_estimate)
{
    struct stream s = {0};
    gw_sse_output_init(&s.output);
    struct gw_sse sse;
    gw_sse_init(&sse);
    char error[GW_SSE_ERROR_SIZE];
    size_t at = 0;
    for (size_t i = 0; i <= count; i++) {
        size_t cut = i < count ? cuts[i] : length;
        if (gw_sse_feed(&sse, body + at, cut - at, on_event, &s, error, sizeof error) != 0)
            break; /* the call is cut: what came so far is measured */
        at = cut;
    }
    gw_sse_finish(&sse, on_event, &s);
    gw_sse_free(&sse);
    if (s.usage.present)
        return gw_usage_tokens(&s.usage);
    return (struct gw_tokens){.input = input_estimate, .output = gw_sse_output_tokens(&s.output)};
}

/* ---- cost and actuals, held to a recomputation ---- */

/* The price of tokens before rounding, in usd_micros * 10^6. */
static u128 price_sum(const struct gw_model *model, const struct gw_tokens *t)
{
    /* The parts of the cost formula (docs/gateway.md "Cost"), each at its own price. */
    uint64_t uncached = t->input - t->cached_input - t->cache_write_5m - t->cache_write_1h;
    return (u128)uncached * model->input_usd_micros_per_mtok +
           (u128)t->cached_input * model->cached_input_usd_micros_per_mtok +
           (u128)t->cache_write_5m * model->cache_write_5m_input_usd_micros_per_mtok +
           (u128)t->cache_write_1h * model->cache_write_1h_input_usd_micros_per_mtok +
           (u128)(t->output - t->reasoning) * model->output_usd_micros_per_mtok +
           (u128)t->reasoning * model->reasoning_output_usd_micros_per_mtok;
}

/* The cost is the least whole usd_micros that pays the price, or an
 * overflow exactly when that is above AMOUNT_MAX. Returns it (or
 * UINT64_MAX on overflow). */
static uint64_t check_cost(const struct gw_model *model, const struct gw_tokens *used)
{
    uint64_t cost = UINT64_MAX;
    enum gw_cost_result result = gw_cost_usd_micros(model, used, &cost);
    u128 sum = price_sum(model, used);
    if (result == GW_COST_OVERFLOW) {
        assert(cost == UINT64_MAX); /* untouched */
        assert(sum > (u128)AMOUNT_MAX * MICROS_PER_MTOK);
        return UINT64_MAX;
    }
    assert(result == GW_COST_OK);
    assert(cost <= AMOUNT_MAX);
    assert((u128)cost * MICROS_PER_MTOK >= sum);
    assert(cost == 0 || (u128)(cost - 1) * MICROS_PER_MTOK < sum);
    return cost;
}

/* What a template charges for tokens, or UINT64_MAX past AMOUNT_MAX. */
static uint64_t template_charge(enum gw_amount amount, const struct gw_tokens *t, uint64_t cost)
{
    switch (amount) {
    case GW_AMOUNT_REQUESTS:
        return 1;
    case GW_AMOUNT_TOKENS:
        return t->input + t->output <= AMOUNT_MAX ? t->input + t->output : UINT64_MAX;
    case GW_AMOUNT_INPUT_TOKENS:
        return t->input;
    case GW_AMOUNT_UNCACHED_INPUT_TOKENS:
        return t->input - t->cached_input;
    case GW_AMOUNT_OUTPUT_TOKENS:
        return t->output;
    case GW_AMOUNT_USD_MICROS:
        return cost;
    case GW_AMOUNT_TOOL_CALLS: /* an MCP tool call's: none of the fuzzed templates */
        return 0;
    }
    assert(false);
    return 0;
}

/* The sum of the templates of `key`, or UINT64_MAX past AMOUNT_MAX. */
static uint64_t key_charge(const char *key, const struct gw_tokens *t, uint64_t cost)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < TEMPLATE_COUNT; i++) {
        if (strcmp(templates[i].key, key) != 0)
            continue;
        uint64_t charge = template_charge(templates[i].amount, t, cost);
        if (charge == UINT64_MAX || charge > AMOUNT_MAX - sum)
            return UINT64_MAX;
        sum += charge;
    }
    return sum;
}

static void check_actuals(const struct gw_model *model, const struct gw_tokens *estimate,
                          const struct gw_tokens *used, uint64_t cost)
{
    static struct gw_plan plan; /* about 20 KiB */
    struct gw_config *config = config_once();
    char error[GW_PLAN_ERROR_SIZE];
    if (gw_plan_reserve(&plan, config, &config->keys[0], model, estimate, error, sizeof error) != 0)
        return;                          /* the call would have been refused before it went out */
    assert(plan.requirement_count >= 1); /* requests charge 1 */
    struct actual actuals[GW_LIMITS_MAX];
    uint32_t count = UINT32_MAX;
    bool overflow = false;
    for (uint32_t r = 0; r < plan.requirement_count; r++)
        overflow = overflow || key_charge(plan.requirements[r].key, used, cost) == UINT64_MAX;
    if (gw_plan_complete(&plan, used, actuals, &count, error, sizeof error) != 0) {
        assert(count == 0);
        assert(overflow || cost == UINT64_MAX);
        return;
    }
    assert(!overflow);
    assert(count == plan.requirement_count);
    for (uint32_t r = 0; r < count; r++) {
        assert(actuals[r].key == plan.requirements[r].key);
        assert(actuals[r].key_length == plan.requirements[r].key_length);
        assert(actuals[r].actual_amount == key_charge(actuals[r].key, used, cost));
        assert(actuals[r].actual_amount <= AMOUNT_MAX);
    }
}

static uint32_t read_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int compare_cuts(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEAD_BYTES)
        return 0;
    bool streamed = (data[0] & 1) != 0;
    unsigned shift = (data[0] & 2) != 0 ? 31 : 0; /* estimates up to 2^63 - 2^31 */
    struct gw_model model = config_once()->models[0];
    model.input_usd_micros_per_mtok = prices[data[1] & 7];
    model.output_usd_micros_per_mtok = prices[(data[1] >> 3) & 7];
    model.cached_input_usd_micros_per_mtok = prices[data[2] & 7];
    size_t count = (size_t)(data[2] >> 3) % (SPLITS_MAX + 1);
    struct gw_tokens estimate = {.input = (uint64_t)read_u32(data + 3) << shift,
                                 .output = (uint64_t)read_u32(data + 7) << shift};
    if (size < HEAD_BYTES + 2 * count)
        return 0;
    const char *body = (const char *)data + HEAD_BYTES + 2 * count;
    size_t length = size - HEAD_BYTES - 2 * count;
    size_t cuts[SPLITS_MAX];
    for (size_t i = 0; i < count; i++) {
        const uint8_t *p = data + HEAD_BYTES + 2 * i;
        cuts[i] = ((size_t)p[0] | (size_t)p[1] << 8) % (length + 1);
    }
    qsort(cuts, count, sizeof cuts[0], compare_cuts);

    struct gw_tokens used = streamed ? streamed_answer(body, length, cuts, count, estimate.input)
                                     : whole_answer(body, length, cuts, count, estimate.input);
    assert(used.input <= AMOUNT_MAX);
    assert(used.output <= AMOUNT_MAX);
    assert(used.cached_input <= used.input);
    uint64_t cost = check_cost(&model, &used);
    check_actuals(&model, &estimate, &used, cost);
    return 0;
}
