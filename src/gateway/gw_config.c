/* A config as read: the lookup tables (models by name, keys by digest, MCP
 * servers) and the lookups every user of a config makes, and the pieces
 * the loader's files share (its error, its memory, quoting). The loading
 * itself is gw_config_load.c's, which calls down to the section decoders,
 * which call down to this file. */
#include "gw_config.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_config_internal.h"

int gw_config_fail(struct loader *l, uint32_t line, const char *path, const char *format, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(reason, sizeof reason, format, ap);
    va_end(ap);
    snprintf(l->error, l->error_size, "%s: line %u: %s: %s", l->file, line, path, reason);
    return -1;
}

char *gw_config_keep(struct loader *l, const char *text, size_t length)
{
    char *copy = arena_alloc_uninit(l->arena, length + 1);
    if (copy == NULL) {
        snprintf(l->error, l->error_size, "%s: out of memory", l->file);
        return NULL;
    }
    memcpy(copy, text, length);
    copy[length] = '\0';
    return copy;
}

void gw_config_quote(const char *text, size_t length, char out[72])
{
    size_t n = length < 64 ? length : 64, k = 0;
    out[k++] = '\'';
    for (size_t i = 0; i < n; i++)
        out[k++] = text[i] >= 0x20 && text[i] < 0x7F ? text[i] : '?';
    if (n < length)
        out[k++] = '.', out[k++] = '.', out[k++] = '.';
    out[k++] = '\'';
    out[k] = '\0';
}

const char *gw_amount_name(enum gw_amount amount)
{
    static const char *const names[] = {
        [GW_AMOUNT_REQUESTS] = "requests",
        [GW_AMOUNT_TOKENS] = "tokens",
        [GW_AMOUNT_INPUT_TOKENS] = "input_tokens",
        [GW_AMOUNT_OUTPUT_TOKENS] = "output_tokens",
        [GW_AMOUNT_USD_MICROS] = "usd_micros",
        [GW_AMOUNT_UNCACHED_INPUT_TOKENS] = "uncached_input_tokens",
        [GW_AMOUNT_TOOL_CALLS] = "tool_calls",
    };
    assert(amount >= GW_AMOUNT_REQUESTS && amount <= GW_AMOUNT_LAST);
    return names[amount];
}

const char *gw_api_name(enum gw_api api)
{
    static const char *const names[] = {
        [GW_API_OPENAI] = "openai", [GW_API_ANTHROPIC] = "anthropic", [GW_API_GEMINI] = "gemini"};
    assert(api >= GW_API_OPENAI && api <= GW_API_GEMINI);
    return names[api];
}

uint32_t gw_key_priority(const struct gw_key *key, uint32_t asked)
{
    assert(key->priority_floor <= GW_PRIORITY_MAX);
    if (asked > GW_PRIORITY_MAX)
        asked = GW_PRIORITY_MAX;
    return asked < key->priority_floor ? key->priority_floor : asked;
}

uint32_t gw_key_wait_seconds(const struct gw_key *key, int64_t asked_seconds)
{
    assert(key->max_wait_seconds <= GW_KEY_WAIT_SECONDS_MAX);
    assert(key->default_wait_seconds <= key->max_wait_seconds);
    if (asked_seconds < 0)
        return key->default_wait_seconds;
    return (uint64_t)asked_seconds < key->max_wait_seconds ? (uint32_t)asked_seconds
                                                           : key->max_wait_seconds;
}

/* ---- lookups ---- */

static int compare_model_names(const void *a, const void *b, void *context)
{
    const struct gw_model *models = context;
    const struct gw_model *x = &models[*(const uint32_t *)a];
    const struct gw_model *y = &models[*(const uint32_t *)b];
    int order = strcmp(x->name, y->name);
    return order != 0 ? order : (x->index > y->index) - (x->index < y->index);
}

int gw_config_index_models(struct loader *l, const struct jdoc_value *items)
{
    uint32_t count = l->config->model_count;
    uint32_t *order = arena_alloc(l->arena, (count + 1) * sizeof *order);
    if (order == NULL)
        return gw_config_fail(l, items->line, "models", "out of memory");
    for (uint32_t i = 0; i < count; i++)
        order[i] = i;
    qsort_r(order, count, sizeof *order, compare_model_names, (void *)l->config->models);
    uint32_t second = UINT32_MAX; /* the earliest second occurrence, for a stable message */
    for (uint32_t i = 1; i < count; i++) {
        const struct gw_model *a = &l->config->models[order[i - 1]];
        const struct gw_model *b = &l->config->models[order[i]];
        if (strcmp(a->name, b->name) == 0 && b->index < second)
            second = b->index;
    }
    l->config->models_by_name = order;
    if (second == UINT32_MAX)
        return 0;
    char path[48];
    snprintf(path, sizeof path, "models[%u].name", second);
    return gw_config_fail(l, jdoc_get(&items->as.items[second], "name")->line, path,
                          "duplicate model name");
}

const struct gw_model *gw_config_find_model(const struct gw_config *config, const char *name,
                                            size_t length)
{
    uint32_t low = 0, high = config->model_count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        const struct gw_model *model = &config->models[config->models_by_name[middle]];
        size_t model_length = strlen(model->name);
        int order = memcmp(model->name, name, model_length < length ? model_length : length);
        if (order == 0)
            order = (model_length > length) - (model_length < length);
        if (order == 0)
            return model;
        if (order < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return NULL;
}

/* The digests are uniform: their first bytes are a good slot number. */
static uint32_t digest_slot(const uint8_t digest[GW_SHA256_BYTES], uint32_t mask)
{
    uint32_t h = (uint32_t)digest[0] | (uint32_t)digest[1] << 8 | (uint32_t)digest[2] << 16 |
                 (uint32_t)digest[3] << 24;
    return h & mask;
}

int gw_config_index_keys(struct loader *l, const struct jdoc_value *items)
{
    struct gw_config *c = l->config;
    uint32_t size = 2;
    while (size < 2 * c->key_count)
        size *= 2; /* at most half full: probes stay short */
    uint32_t *slots = arena_alloc(l->arena, size * sizeof *slots);
    if (slots == NULL)
        return gw_config_fail(l, items->line, "keys", "out of memory");
    c->key_slots = slots;
    c->key_slot_mask = size - 1;
    for (uint32_t i = 0; i < c->key_count; i++) {
        uint32_t s = digest_slot(c->keys[i].sha256, c->key_slot_mask);
        for (; slots[s] != 0; s = (s + 1) & c->key_slot_mask) {
            uint32_t other = slots[s] - 1;
            if (memcmp(c->keys[other].sha256, c->keys[i].sha256, GW_SHA256_BYTES) != 0)
                continue;
            char path[48];
            snprintf(path, sizeof path, "keys[%u].sha256", i);
            return gw_config_fail(l, jdoc_get(&items->as.items[i], "sha256")->line, path,
                                  "duplicate of keys[%u]", other);
        }
        slots[s] = i + 1;
    }
    return 0;
}

const struct gw_key *gw_config_find_key(const struct gw_config *config,
                                        const uint8_t digest[GW_SHA256_BYTES])
{
    uint32_t mask = config->key_slot_mask;
    uint32_t s = digest_slot(digest, mask);
    for (uint32_t probes = 0; probes <= mask && config->key_slots[s] != 0; probes++) {
        const struct gw_key *key = &config->keys[config->key_slots[s] - 1];
        if (CRYPTO_memcmp(key->sha256, digest, GW_SHA256_BYTES) == 0)
            return key;
        s = (s + 1) & mask;
    }
    return NULL;
}

static int compare_index(const void *key, const void *item)
{
    uint32_t a = *(const uint32_t *)key, b = *(const uint32_t *)item;
    return (a > b) - (a < b);
}

bool gw_key_allows_model(const struct gw_key *key, const struct gw_model *model)
{
    for (uint32_t i = 0; i < key->model_name_count; i++) {
        if (strcmp(key->model_names[i], model->name) == 0)
            return true;
    }
    if (key->model_count == 0)
        return key->model_name_count == 0;
    return bsearch(&model->index, key->models, key->model_count, sizeof *key->models,
                   compare_index) != NULL;
}

const struct gw_mcp_server *gw_config_find_mcp_server(const struct gw_config *config,
                                                      const char *name, size_t length)
{
    for (uint32_t i = 0; i < config->mcp_server_count; i++) {
        const struct gw_mcp_server *server = &config->mcp_servers[i];
        if (strlen(server->name) == length && memcmp(server->name, name, length) == 0)
            return server;
    }
    return NULL;
}

bool gw_key_allows_mcp_server(const struct gw_key *key, const struct gw_mcp_server *server)
{
    if (!key->mcp_servers_listed)
        return true;
    if (key->mcp_server_names != NULL) {
        for (uint32_t i = 0; i < key->mcp_server_name_count; i++) {
            if (strcmp(key->mcp_server_names[i], server->name) == 0)
                return true;
        }
        return false;
    }
    return bsearch(&server->index, key->mcp_servers, key->mcp_server_count,
                   sizeof *key->mcp_servers, compare_index) != NULL;
}

uint64_t gw_mcp_tool_price(const struct gw_mcp_server *server, const char *tool, size_t length,
                           bool *charge_errors)
{
    *charge_errors = false;
    for (uint32_t i = 0; i < server->tool_count; i++) {
        const struct gw_mcp_tool *t = &server->tools[i];
        if (strlen(t->name) == length && memcmp(t->name, tool, length) == 0) {
            *charge_errors = t->charge_errors;
            return t->usd_micros_per_call;
        }
    }
    return server->default_usd_micros_per_call;
}
