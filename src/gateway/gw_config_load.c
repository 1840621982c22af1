/* gateway.json's loading: the file read, its document checked as a whole
 * (sections in the order their references need: upstreams, models, limits,
 * keys; mcp_servers before the keys), each section handed to its decoder
 * (gw_config_decode.c, gw_config_mcp.c), and the config's reference count.
 * All of a config lives in one arena, so a failed load or the last release
 * frees it in one go. */
#include "gw_config.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_config_internal.h"
#include "util/file.h"

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
