/* gateway.json as a whole: reading the file, the four sections in the order
 * their references need (upstreams, models, limits, keys), the lookup
 * tables, and reference counting. All of a config lives in one arena, so a
 * failed load or the last release frees it in one go. */
#include "gw_config.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_config_internal.h"
#include "util/file.h"

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

/* ---- the document ---- */

static const struct {
    const char *name;
    uint32_t min; /* 0: optional, absent or null the same as [] */
    uint32_t max;
    int (*decode)(struct loader *, const struct jdoc_value *);
    int (*index)(struct loader *, const struct jdoc_value *);
} sections[] = {
    /* In the order their references need. Keys may all come from the Keys
     * API (src/server/keys.c), so the file may name none. */
    {"upstreams", 1, GW_UPSTREAMS_MAX, gw_config_decode_upstreams, NULL},
    {"models", 1, GW_MODELS_MAX, gw_config_decode_models, gw_config_index_models},
    {"limits", 1, GW_LIMITS_MAX, gw_config_decode_limits, NULL},
    {"keys", 0, GW_KEYS_MAX, gw_config_decode_keys, gw_config_index_keys},
};

#define SECTION_COUNT (sizeof sections / sizeof sections[0])

static int check_root(struct loader *l, const struct jdoc_value *root,
                      const struct jdoc_value *found[SECTION_COUNT],
                      const struct jdoc_value **prices_file, const struct jdoc_value **mcp_servers)
{
    if (!jdoc_is(root, JDOC_OBJECT)) {
        snprintf(l->error, l->error_size, "%s: line %u: must be a JSON object", l->file,
                 root->line);
        return -1;
    }
    for (uint32_t i = 0; i < root->count; i++) {
        const struct jdoc_member *m = &root->as.members[i];
        size_t s = 0;
        while (s < SECTION_COUNT && strcmp(m->key, sections[s].name) != 0)
            s++;
        if (s < SECTION_COUNT)
            found[s] = &m->value;
        else if (strcmp(m->key, "prices_file") == 0)
            *prices_file = m->value.kind != JDOC_NULL ? &m->value : NULL;
        else if (strcmp(m->key, "mcp_servers") == 0)
            *mcp_servers = m->value.kind != JDOC_NULL ? &m->value : NULL;
        else
            return gw_config_fail(l, m->value.line, m->key, "unknown field");
    }
    for (size_t s = 0; s < SECTION_COUNT; s++) {
        const struct jdoc_value *v = found[s];
        if (sections[s].min == 0 && (v == NULL || v->kind == JDOC_NULL)) {
            found[s] = NULL; /* load_document gives it an empty array */
            continue;
        }
        if (v == NULL)
            return gw_config_fail(l, root->line, sections[s].name, "required");
        if (!jdoc_is(v, JDOC_ARRAY) || v->count < sections[s].min || v->count > sections[s].max)
            return gw_config_fail(l, v->line, sections[s].name,
                                  "must be an array of %u..%u entries", sections[s].min,
                                  sections[s].max);
    }
    return 0;
}

/* prices_file: read now, relative to the config's directory, and kept
 * while the models take their prices from it. */
static int open_prices(struct loader *l, const struct jdoc_value *value)
{
    if (!jdoc_is(value, JDOC_STRING) || value->count == 0 || value->count > GW_PATH_LENGTH_MAX)
        return gw_config_fail(l, value->line, "prices_file", "must be a file name of 1..%d bytes",
                              GW_PATH_LENGTH_MAX);
    l->config->prices_file = gw_config_keep(l, value->as.string, value->count);
    char *path = malloc(2 * GW_PATH_LENGTH_MAX + 2);
    if (l->config->prices_file == NULL || path == NULL) {
        free(path);
        return gw_config_fail(l, value->line, "prices_file", "out of memory");
    }
    bool relative = value->as.string[0] != '/' && l->directory[0] != '\0';
    snprintf(path, 2 * GW_PATH_LENGTH_MAX + 2, "%s%s%s", relative ? l->directory : "",
             relative ? "/" : "", value->as.string);
    char reason[GW_CONFIG_ERROR_SIZE];
    int result = gw_prices_load(path, &l->prices, reason, sizeof reason);
    l->prices_path = result == 0 ? gw_config_keep(l, path, strlen(path)) : NULL;
    free(path);
    if (result != 0)
        return gw_config_fail(l, value->line, "prices_file", "%s", reason);
    return l->prices_path != NULL ? 0 : -1;
}

static int load_document(struct loader *l, const struct jdoc_value *root)
{
    const struct jdoc_value *found[SECTION_COUNT] = {0};
    const struct jdoc_value *prices_file = NULL, *mcp_servers = NULL;
    if (check_root(l, root, found, &prices_file, &mcp_servers) != 0)
        return -1;
    if (prices_file != NULL && open_prices(l, prices_file) != 0)
        return -1;
    /* Before the keys, which name them (optional: none without it). */
    if (mcp_servers != NULL && gw_config_decode_mcp_servers(l, mcp_servers) != 0)
        return -1;
    const struct jdoc_value none = {.kind = JDOC_ARRAY, .count = 0, .line = root->line};
    for (size_t s = 0; s < SECTION_COUNT; s++) {
        const struct jdoc_value *items = found[s] != NULL ? found[s] : &none;
        if (sections[s].decode(l, items) != 0)
            return -1;
        if (sections[s].index != NULL && sections[s].index(l, items) != 0)
            return -1;
    }
    return 0;
}

static void config_free(struct gw_config *config)
{
    for (uint32_t i = 0; i < config->upstream_count; i++) {
        const char *key = config->upstreams[i].api_key;
        if (key != NULL)
            OPENSSL_cleanse((void *)(uintptr_t)key, strlen(key));
    }
    for (uint32_t i = 0; i < config->mcp_server_count; i++) {
        const char *key = config->mcp_servers[i].upstream.api_key;
        if (key != NULL)
            OPENSSL_cleanse((void *)(uintptr_t)key, strlen(key));
    }
    arena_free(&config->memory->arena);
    free(config->memory);
    free(config);
}

/* The directory part of name ("" when it has none), for relative key files. */
static void directory_of(const char *name, char *out, size_t size)
{
    const char *slash = strrchr(name, '/');
    size_t length = slash == NULL ? 0 : slash == name ? 1 : (size_t)(slash - name);
    if (length >= size)
        length = 0;
    memcpy(out, name, length);
    out[length] = '\0';
}

static int parse_into(struct loader *l, char *text, size_t length)
{
    struct arena scratch;
    arena_init(&scratch, NULL, 0);
    struct jdoc_value *root;
    char reason[256];
    int result = jdoc_parse(text, length, &scratch, &root, reason, sizeof reason);
    if (result != 0)
        snprintf(l->error, l->error_size, "%s: %s", l->file, reason);
    else
        result = load_document(l, root);
    arena_free(&scratch);
    return result;
}

int gw_config_parse(const char *name, const char *text, size_t length, struct gw_config **out,
                    char *error, size_t error_size)
{
    assert(name != NULL && out != NULL && error != NULL && error_size > 0);
    *out = NULL;
    if (length > GW_CONFIG_BYTES_MAX) {
        snprintf(error, error_size, "%s: larger than %d bytes", name, GW_CONFIG_BYTES_MAX);
        return -1;
    }
    char directory[GW_PATH_LENGTH_MAX + 1];
    directory_of(name, directory, sizeof directory);
    struct gw_config *config = calloc(1, sizeof *config);
    struct gw_config_memory *memory = calloc(1, sizeof *memory);
    char *copy = malloc(length + 1); /* the parser decodes strings in place */
    if (config == NULL || memory == NULL || copy == NULL) {
        snprintf(error, error_size, "%s: out of memory", name);
        free(config), free(memory), free(copy);
        return -1;
    }
    memcpy(copy, text, length);
    arena_init(&memory->arena, NULL, 0);
    config->memory = memory;
    struct loader l = {.file = name,
                       .directory = directory,
                       .arena = &memory->arena,
                       .config = config,
                       .caller_limit = -1,
                       .team_limit = -1,
                       .error = error,
                       .error_size = error_size};
    int result = parse_into(&l, copy, length);
    free(copy);
    gw_prices_free(l.prices); /* the prices are in the models now */
    config->path = result == 0 ? gw_config_keep(&l, name, strlen(name)) : NULL;
    if (result != 0 || config->path == NULL) {
        config_free(config);
        return -1;
    }
    atomic_init(&config->references, 1);
    *out = config;
    return 0;
}

int gw_config_load(const char *path, struct gw_config **out, char *error, size_t error_size)
{
    assert(path != NULL && out != NULL);
    *out = NULL;
    char *text;
    size_t length;
    if (file_read_all(path, GW_CONFIG_BYTES_MAX, &text, &length, error, error_size) != 0)
        return -1;
    int result = gw_config_parse(path, text, length, out, error, error_size);
    free(text);
    return result;
}

struct gw_config *gw_config_retain(struct gw_config *config)
{
    uint32_t before = atomic_fetch_add(&config->references, 1);
    assert(before >= 1);
    (void)before;
    return config;
}

void gw_config_release(struct gw_config *config)
{
    if (config == NULL)
        return;
    uint32_t before = atomic_fetch_sub(&config->references, 1);
    assert(before >= 1);
    if (before == 1)
        config_free(config);
}
