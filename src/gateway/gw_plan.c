/* Templates to keys, amounts to requirements and actuals. A plan keeps
 * which template gave which key, so the complete adds up the actual
 * amounts exactly as the reserve added up the estimated ones. */
#include "gw_plan.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"

/* What a call fills the placeholders with: a model call's model (and its
 * upstream), a tool call's server and tool (not NUL-terminated). */
struct names {
    const struct gw_key *key;
    const struct gw_model *model; /* NULL: a tool call */
    const char *mcp_server;
    const char *tool;
    size_t tool_length;
};

static const char *placeholder_text(const struct names *names, enum gw_placeholder placeholder,
                                    size_t *length)
{
    const char *text = NULL;
    switch (placeholder) {
    case GW_MODEL:
        text = names->model->name;
        break;
    case GW_UPSTREAM:
        text = names->model->upstream->name;
        break;
    case GW_CALLER:
        text = names->key->caller;
        break;
    case GW_TEAM:
        text = names->key->team;
        break;
    case GW_MCP_SERVER:
        text = names->mcp_server;
        break;
    case GW_TOOL:
        *length = names->tool_length;
        return names->tool;
    case GW_TEXT:
        break;
    }
    assert(text != NULL); /* the config gives every key a team when a template needs one */
    *length = strlen(text);
    return text;
}

/* Writes the key of template `index` into out (room for
 * LIMIT_KEY_LENGTH_MAX + 1); its length, or -1 with the error written. */
static int instantiate(const struct gw_limit *limit, uint32_t index, const struct names *names,
                       char *out, char *error, size_t error_size)
{
    size_t length = 0;
    for (uint32_t p = 0; p < limit->part_count; p++) {
        const struct gw_template_part *part = &limit->parts[p];
        const char *text = part->text;
        size_t n = part->length;
        if (part->placeholder != GW_TEXT)
            text = placeholder_text(names, part->placeholder, &n);
        if (n > LIMIT_KEY_LENGTH_MAX - length) {
            snprintf(error, error_size, "limits[%u].key '%s': the key is longer than %d bytes",
                     index, limit->key_template, LIMIT_KEY_LENGTH_MAX);
            return -1;
        }
        memcpy(out + length, text, n);
        length += n;
    }
    out[length] = '\0';
    if (!limit_key_valid(out, length)) {
        snprintf(error, error_size,
                 "limits[%u].key '%s': the key '%s' is not 1..%d bytes of printable ASCII "
                 "without white space",
                 index, limit->key_template, out, LIMIT_KEY_LENGTH_MAX);
        return -1;
    }
    return (int)length;
}

/* The amount one template charges for tokens. */
static int template_amount(enum gw_amount amount, const struct gw_model *model,
                           const struct gw_tokens *tokens, uint64_t *out, char *error,
                           size_t error_size)
{
    enum gw_cost_result cost;
    switch (amount) {
    case GW_AMOUNT_REQUESTS:
        *out = 1;
        return 0;
    case GW_AMOUNT_TOOL_CALLS: /* a model call: no template of it applies (gw_plan_reserve) */
        *out = 0;
        return 0;
    case GW_AMOUNT_TOKENS:
        *out = tokens->input + tokens->output; /* each is at most AMOUNT_MAX: no wrap */
        break;
    case GW_AMOUNT_INPUT_TOKENS:
        *out = tokens->input;
        break;
    case GW_AMOUNT_UNCACHED_INPUT_TOKENS:
        *out = tokens->input - tokens->cached_input; /* checked: within input */
        break;
    case GW_AMOUNT_OUTPUT_TOKENS:
        *out = tokens->output;
        break;
    case GW_AMOUNT_USD_MICROS:
        cost = gw_cost_usd_micros(model, tokens, out);
        if (cost != GW_COST_OK) {
            snprintf(error, error_size, "usd_micros: %s", gw_cost_result_text(cost));
            return -1;
        }
        return 0;
    }
    if (*out > AMOUNT_MAX) {
        snprintf(error, error_size, "%s: above %llu", gw_amount_name(amount),
                 (unsigned long long)AMOUNT_MAX);
        return -1;
    }
    return 0;
}

static int tokens_check(const struct gw_tokens *tokens, char *error, size_t error_size)
{
    enum gw_cost_result result = gw_tokens_check(tokens);
    if (result == GW_COST_OK)
        return 0;
    snprintf(error, error_size, "%s",
             result == GW_COST_OVERFLOW ? "a token count above 9223372036854775807"
                                        : gw_cost_result_text(result));
    return -1;
}

/* Adds amount to *sum; -1 with the error written when above AMOUNT_MAX. */
static int amount_sum(uint64_t *sum, uint64_t amount, const char *key, char *error,
                      size_t error_size)
{
    uint64_t total;
    if (amount_add(*sum, amount, &total) && total <= AMOUNT_MAX) {
        *sum = total;
        return 0;
    }
    snprintf(error, error_size, "%s: the amounts of its templates add up past %llu", key,
             (unsigned long long)AMOUNT_MAX);
    return -1;
}

/* The distinct key equal to text, added if new; its index. */
static uint32_t key_index(struct gw_plan *plan, const char *text, uint32_t length)
{
    for (uint32_t k = 0; k < plan->key_count; k++) {
        if (plan->key_length[k] == length && memcmp(plan->key_text[k], text, length) == 0)
            return k;
    }
    uint32_t k = plan->key_count++;
    memcpy(plan->key_text[k], text, (size_t)length + 1);
    plan->key_length[k] = length;
    return k;
}

/* The reserve's requirements from each distinct key's sum. */
static void plan_requirements(struct gw_plan *plan, const uint64_t *sums)
{
    for (uint32_t k = 0; k < plan->key_count; k++) {
        plan->key_requirement[k] = GW_PLAN_NOT_RESERVED;
        if (sums[k] == 0)
            continue; /* nothing to hold: left out of the reserve */
        plan->key_requirement[k] = (uint8_t)plan->requirement_count;
        plan->requirements[plan->requirement_count++] = (struct requirement){
            .key = plan->key_text[k], .key_length = plan->key_length[k], .amount = sums[k]};
    }
}

int gw_plan_reserve(struct gw_plan *plan, const struct gw_config *config, const struct gw_key *key,
                    const struct gw_model *model, const struct gw_tokens *estimate, char *error,
                    size_t error_size)
{
    assert(config->limit_count <= GW_LIMITS_MAX);
    memset(plan, 0, offsetof(struct gw_plan, key_text)); /* key text is written as needed */
    plan->model = model;
    plan->template_count = config->limit_count;
    if (tokens_check(estimate, error, error_size) != 0)
        return -1;
    uint64_t sums[GW_LIMITS_MAX] = {0};
    struct names names = {.key = key, .model = model};
    for (uint32_t i = 0; i < config->limit_count; i++) {
        const struct gw_limit *limit = &config->limits[i];
        plan->template_key[i] = GW_PLAN_NOT_RESERVED;
        if (limit->tool_calls_only)
            continue; /* an MCP tool call's template */
        char text[LIMIT_KEY_LENGTH_MAX + 1];
        int length = instantiate(limit, i, &names, text, error, error_size);
        uint64_t amount;
        if (length < 0 ||
            template_amount(limit->amount, model, estimate, &amount, error, error_size) != 0)
            return -1;
        uint32_t k = key_index(plan, text, (uint32_t)length);
        plan->template_amount[i] = limit->amount;
        plan->template_key[i] = (uint8_t)k;
        if (amount_sum(&sums[k], amount, plan->key_text[k], error, error_size) != 0)
            return -1;
    }
    plan_requirements(plan, sums);
    return 0;
}

int gw_plan_tool_call(struct gw_plan *plan, const struct gw_config *config,
                      const struct gw_key *key, const char *mcp_server, const char *tool,
                      size_t tool_length, uint64_t usd_micros, char *error, size_t error_size)
{
    assert(config->limit_count <= GW_LIMITS_MAX);
    assert(usd_micros <= AMOUNT_MAX);
    memset(plan, 0, offsetof(struct gw_plan, key_text));
    plan->template_count = config->limit_count;
    uint64_t sums[GW_LIMITS_MAX] = {0};
    struct names names = {
        .key = key, .mcp_server = mcp_server, .tool = tool, .tool_length = tool_length};
    for (uint32_t i = 0; i < config->limit_count; i++) {
        const struct gw_limit *limit = &config->limits[i];
        plan->template_key[i] = GW_PLAN_NOT_RESERVED;
        if (limit->model_calls_only)
            continue; /* a model call's template */
        char text[LIMIT_KEY_LENGTH_MAX + 1];
        int length = instantiate(limit, i, &names, text, error, error_size);
        if (length < 0)
            return -1;
        /* A tool call takes no tokens: those amounts are 0 and leave the
         * key out unless another template gives it an amount. */
        uint64_t amount =
            limit->amount == GW_AMOUNT_REQUESTS || limit->amount == GW_AMOUNT_TOOL_CALLS ? 1
            : limit->amount == GW_AMOUNT_USD_MICROS ? usd_micros
                                                    : 0;
        uint32_t k = key_index(plan, text, (uint32_t)length);
        plan->template_amount[i] = limit->amount;
        plan->template_key[i] = (uint8_t)k;
        if (amount_sum(&sums[k], amount, plan->key_text[k], error, error_size) != 0)
            return -1;
    }
    plan_requirements(plan, sums);
    return 0;
}

int gw_plan_complete(const struct gw_plan *plan, const struct gw_tokens *used,
                     struct actual *actuals, uint32_t *actual_count, char *error, size_t error_size)
{
    *actual_count = 0;
    if (tokens_check(used, error, error_size) != 0)
        return -1;
    uint64_t sums[GW_LIMITS_MAX] = {0};
    for (uint32_t i = 0; i < plan->template_count; i++) {
        uint64_t amount;
        uint32_t k = plan->template_key[i];
        if (k == GW_PLAN_NOT_RESERVED)
            continue; /* the template does not apply to the call */
        if (template_amount(plan->template_amount[i], plan->model, used, &amount, error,
                            error_size) != 0 ||
            amount_sum(&sums[k], amount, plan->key_text[k], error, error_size) != 0)
            return -1;
    }
    for (uint32_t r = 0; r < plan->requirement_count; r++)
        actuals[r] = (struct actual){.key = plan->requirements[r].key,
                                     .key_length = plan->requirements[r].key_length};
    for (uint32_t k = 0; k < plan->key_count; k++) {
        if (plan->key_requirement[k] != GW_PLAN_NOT_RESERVED)
            actuals[plan->key_requirement[k]].actual_amount = sums[k];
    }
    *actual_count = plan->requirement_count;
    return 0;
}
