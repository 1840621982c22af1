/* gateway.json's sections, entry by entry: strict types, unknown fields
 * rejected, names unique, references between sections resolved, provider
 * keys read. Every error names the file, the line and the field
 * (docs/gateway.md lists the rules). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "gw_config_internal.h"
#include "gw_secret.h"
#include "wire/decode.h"

/* Printable ASCII without white space: what a limit key may hold. */
static bool key_chars(const char *text, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c <= 0x20 || c >= 0x7F)
            return false;
    }
    return true;
}

static bool printable(const char *text, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c >= 0x7F)
            return false;
    }
    return true;
}

enum text_rule {
    TEXT_ANY,       /* any string (no NUL: the parser refuses \u0000) */
    TEXT_PRINTABLE, /* printable ASCII */
    TEXT_KEY,       /* printable ASCII without white space */
};

static const char *const text_rule_reason[] = {
    [TEXT_ANY] = "a string",
    [TEXT_PRINTABLE] = "a string of printable ASCII",
    [TEXT_KEY] = "a string of printable ASCII without white space",
};

/* A string of min..max bytes following rule, kept in the config. */
static int text_value(struct loader *l, const struct jdoc_value *value, const char *path,
                      size_t max, enum text_rule rule, const char **out)
{
    assert(max >= 1);
    assert(rule == TEXT_ANY || rule == TEXT_PRINTABLE || rule == TEXT_KEY);
    bool ok = jdoc_is(value, JDOC_STRING) && value->count >= 1 && value->count <= max;
    if (ok && rule == TEXT_PRINTABLE)
        ok = printable(value->as.string, value->count);
    if (ok && rule == TEXT_KEY)
        ok = key_chars(value->as.string, value->count);
    if (!ok)
        return gw_config_fail(l, value->line, path, "must be %s of 1..%zu bytes",
                              text_rule_reason[rule], max);
    *out = gw_config_keep(l, value->as.string, value->count);
    if (*out == NULL)
        return -1;
    /* The parser refuses \u0000: the kept copy is the whole string. */
    assert(strlen(*out) == value->count);
    return 0;
}

static int integer_value(struct loader *l, const struct jdoc_value *value, const char *path,
                         uint64_t min, uint64_t max, uint64_t *out)
{
    assert(min <= max);
    if (!jdoc_is(value, JDOC_INTEGER) || value->as.integer < 0 ||
        (uint64_t)value->as.integer < min || (uint64_t)value->as.integer > max)
        return gw_config_fail(l, value->line, path, "must be an integer %llu..%llu",
                              (unsigned long long)min, (unsigned long long)max);
    *out = (uint64_t)value->as.integer;
    assert(*out >= min);
    assert(*out <= max);
    return 0;
}

/* "<section>[i].<field>" */
static void field_path(char *out, size_t size, const char *entry, const char *field)
{
    snprintf(out, size, "%s.%s", entry, field);
}

static int object_entry(struct loader *l, const struct jdoc_value *item, const char *path)
{
    if (!jdoc_is(item, JDOC_OBJECT))
        return gw_config_fail(l, item->line, path, "must be an object");
    return 0;
}

static int missing(struct loader *l, const struct jdoc_value *entry, const char *path,
                   const char *field)
{
    assert(field != NULL && field[0] != '\0');
    char where[96];
    field_path(where, sizeof where, path, field);
    return gw_config_fail(l, entry->line, where, "required");
}

/* ---- upstreams ---- */

/* http:// or https://, a host, printable ASCII without white space, no
 * query or fragment; trailing '/' removed. */
static int base_url_value(struct loader *l, const struct jdoc_value *value, const char *path,
                          const char **out)
{
    const char *reason = NULL;
    size_t length = jdoc_is(value, JDOC_STRING) ? value->count : 0;
    const char *text = length > 0 ? value->as.string : "";
    size_t scheme = strncmp(text, "https://", 8) == 0  ? 8
                    : strncmp(text, "http://", 7) == 0 ? 7
                                                       : 0;
    if (!jdoc_is(value, JDOC_STRING) || length > GW_BASE_URL_LENGTH_MAX)
        reason = "must be a string of at most 2048 bytes";
    else if (scheme == 0)
        reason = "must start with http:// or https://";
    else if (!key_chars(text, length) || memchr(text, '?', length) || memchr(text, '#', length))
        reason = "must be printable ASCII without white space, '?' or '#'";
    while (reason == NULL && length > scheme && text[length - 1] == '/')
        length--;
    if (reason == NULL && (length == scheme || text[scheme] == '/'))
        reason = "has no host";
    if (reason != NULL)
        return gw_config_fail(l, value->line, path, "%s", reason);
    /* A scheme, a host, no trailing '/': the path is appended as it is. */
    assert(length > scheme);
    assert(length <= GW_BASE_URL_LENGTH_MAX);
    assert(text[length - 1] != '/');
    *out = gw_config_keep(l, text, length);
    return *out != NULL ? 0 : -1;
}

static bool env_name_valid(const char *name, size_t length)
{
    if (length == 0 || length > GW_ENV_NAME_LENGTH_MAX || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* A provider key goes into a header: one token of visible ASCII. */
static int api_key_check(struct loader *l, uint32_t line, const char *path, const char *key,
                         size_t length, const char *source)
{
    assert(key != NULL || length == 0);
    if (length == 0)
        return gw_config_fail(l, line, path, "%s is empty", source);
    if (length > GW_API_KEY_BYTES_MAX)
        return gw_config_fail(l, line, path, "%s is longer than %d bytes", source,
                              GW_API_KEY_BYTES_MAX);
    if (!key_chars(key, length))
        return gw_config_fail(l, line, path,
                              "%s holds white space or a character that is not printable ASCII",
                              source);
    return 0;
}

static int api_key_from_env(struct loader *l, const struct jdoc_value *value, const char *path,
                            struct gw_upstream *upstream)
{
    if (!jdoc_is(value, JDOC_STRING) || !env_name_valid(value->as.string, value->count))
        return gw_config_fail(l, value->line, path,
                              "must name an environment variable ([A-Za-z_][A-Za-z0-9_]*, at most "
                              "%d bytes)",
                              GW_ENV_NAME_LENGTH_MAX);
    const char *key = getenv(value->as.string);
    char source[GW_ENV_NAME_LENGTH_MAX + 32];
    snprintf(source, sizeof source, "environment variable %s", value->as.string);
    if (key == NULL)
        return gw_config_fail(l, value->line, path, "%s is not set", source);
    if (api_key_check(l, value->line, path, key, strlen(key), source) != 0)
        return -1;
    upstream->api_key = gw_config_keep(l, key, strlen(key));
    return upstream->api_key != NULL ? 0 : -1;
}

/* Reads at most GW_API_KEY_BYTES_MAX + 2 bytes (a key and its line end). */
static ssize_t read_key_file(const char *path, char *buffer, size_t size)
{
    assert(size > 0);
    assert(size <= SSIZE_MAX);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, buffer + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    close(fd);
    return (ssize_t)done;
}

static int api_key_from_file(struct loader *l, const struct jdoc_value *value, const char *path,
                             struct gw_upstream *upstream)
{
    if (!jdoc_is(value, JDOC_STRING) || value->count == 0 || value->count > GW_PATH_LENGTH_MAX)
        return gw_config_fail(l, value->line, path, "must be a file name of 1..%d bytes",
                              GW_PATH_LENGTH_MAX);
    char file[2 * GW_PATH_LENGTH_MAX + 2];
    bool relative = value->as.string[0] != '/' && l->directory[0] != '\0';
    snprintf(file, sizeof file, "%s%s%s", relative ? l->directory : "", relative ? "/" : "",
             value->as.string);
    char key[GW_API_KEY_BYTES_MAX + 3];
    ssize_t n = read_key_file(file, key, sizeof key);
    if (n < 0)
        return gw_config_fail(l, value->line, path, "%s: %s", file, strerror(errno));
    size_t length = (size_t)n;
    assert(length <= sizeof key);
    if (length > 0 && key[length - 1] == '\n')
        length--;
    if (length > 0 && key[length - 1] == '\r')
        length--;
    char source[2 * GW_PATH_LENGTH_MAX + 16];
    snprintf(source, sizeof source, "the key in %s", file);
    int result = api_key_check(l, value->line, path, key, length, source);
    if (result == 0) {
        upstream->api_key = gw_config_keep(l, key, length);
        result = upstream->api_key != NULL ? 0 : -1;
    }
    OPENSSL_cleanse(key, sizeof key);
    return result;
}

/* A string that must be one of names (count of them); its index. */
static int choice_value(struct loader *l, const struct jdoc_value *v, const char *path,
                        const char *const *names, unsigned count, const char *reason, unsigned *out)
{
    for (unsigned i = 0; jdoc_is(v, JDOC_STRING) && i < count; i++) {
        if (strcmp(v->as.string, names[i]) == 0 && strlen(names[i]) == v->count) {
            *out = i;
            return 0;
        }
    }
    return gw_config_fail(l, v->line, path, "%s", reason);
}

static int api_value(struct loader *l, const struct jdoc_value *v, const char *path,
                     enum gw_api *out)
{
    static const char *const names[] = {
        [GW_API_OPENAI] = "openai", [GW_API_ANTHROPIC] = "anthropic", [GW_API_GEMINI] = "gemini"};
    unsigned api = 0;
    if (choice_value(l, v, path, names, 3, "must be \"openai\", \"anthropic\" or \"gemini\"",
                     &api) != 0)
        return -1;
    *out = (enum gw_api)api;
    return 0;
}

static int upstream_field(struct loader *l, const struct jdoc_member *m, const char *entry,
                          struct gw_upstream *u, bool *key_seen)
{
    char path[96];
    field_path(path, sizeof path, entry, m->key);
    const struct jdoc_value *v = &m->value;
    uint64_t seconds = 0;
    if (strcmp(m->key, "name") == 0)
        return text_value(l, v, path, GW_NAME_LENGTH_MAX, TEXT_KEY, &u->name);
    if (strcmp(m->key, "base_url") == 0)
        return base_url_value(l, v, path, &u->base_url);
    if (strcmp(m->key, "api") == 0)
        return v->kind == JDOC_NULL ? 0 : api_value(l, v, path, &u->api);
    if (strcmp(m->key, "api_key_env") == 0 || strcmp(m->key, "api_key_file") == 0) {
        if (*key_seen)
            return gw_config_fail(l, v->line, path, "give api_key_env or api_key_file, not both");
        *key_seen = true;
        bool env = m->key[8] == 'e'; /* api_key_[e]nv, api_key_[f]ile */
        assert(env == (strcmp(m->key, "api_key_env") == 0));
        return env ? api_key_from_env(l, v, path, u) : api_key_from_file(l, v, path, u);
    }
    if (strcmp(m->key, "timeout_seconds") == 0 || strcmp(m->key, "connect_timeout_seconds") == 0) {
        if (integer_value(l, v, path, 1, GW_TIMEOUT_SECONDS_MAX, &seconds) != 0)
            return -1;
        bool whole = m->key[0] == 't'; /* [t]imeout_seconds, [c]onnect_timeout_seconds */
        assert(whole == (strcmp(m->key, "timeout_seconds") == 0));
        *(whole ? &u->timeout_seconds : &u->connect_timeout_seconds) = (uint32_t)seconds;
        return 0;
    }
    return gw_config_fail(l, v->line, path, "unknown field");
}

static int decode_upstream(struct loader *l, const struct jdoc_value *item, uint32_t i,
                           struct gw_upstream *u)
{
    assert(u->name == NULL && u->base_url == NULL && u->api_key == NULL); /* zeroed by the arena */
    char entry[32];
    snprintf(entry, sizeof entry, "upstreams[%u]", i);
    if (object_entry(l, item, entry) != 0)
        return -1;
    u->timeout_seconds = GW_TIMEOUT_SECONDS_DEFAULT;
    u->connect_timeout_seconds = GW_CONNECT_TIMEOUT_SECONDS_DEFAULT;
    bool key_seen = false;
    for (uint32_t k = 0; k < item->count; k++) {
        const struct jdoc_member *m = &item->as.members[k];
        if (upstream_field(l, m, entry, u, &key_seen) != 0)
            return -1;
    }
    if (u->name == NULL)
        return missing(l, item, entry, "name");
    if (u->base_url == NULL)
        return missing(l, item, entry, "base_url");
    for (uint32_t k = 0; k < i; k++) {
        char path[96];
        field_path(path, sizeof path, entry, "name");
        if (strcmp(l->config->upstreams[k].name, u->name) == 0)
            return gw_config_fail(l, jdoc_get(item, "name")->line, path,
                                  "duplicate of upstreams[%u]", k);
    }
    assert(u->timeout_seconds >= 1 && u->timeout_seconds <= GW_TIMEOUT_SECONDS_MAX);
    assert(u->connect_timeout_seconds >= 1 && u->connect_timeout_seconds <= GW_TIMEOUT_SECONDS_MAX);
    return 0;
}

/* Each section's items were checked by check_root (gw_config_load.c): an array
 * of 1..the section's bound. */
static void assert_section(const struct jdoc_value *items, uint32_t min, uint32_t max)
{
    assert(jdoc_is(items, JDOC_ARRAY));
    assert(items->count >= min);
    assert(items->count <= max);
}

int gw_config_decode_upstreams(struct loader *l, const struct jdoc_value *items)
{
    assert_section(items, 1, GW_UPSTREAMS_MAX);
    assert(l->config->upstream_count == 0); /* the first section */
    struct gw_upstream *upstreams = arena_alloc(l->arena, items->count * sizeof *upstreams);
    if (upstreams == NULL)
        return gw_config_fail(l, items->line, "upstreams", "out of memory");
    l->config->upstreams = upstreams;
    for (uint32_t i = 0; i < items->count; i++) {
        l->config->upstream_count = i + 1; /* a key read before a failure is wiped too */
        if (decode_upstream(l, &items->as.items[i], i, &upstreams[i]) != 0)
            return -1;
    }
    assert(l->config->upstream_count == items->count);
    return 0;
}

/* ---- models ---- */

static int model_upstream(struct loader *l, const struct jdoc_value *v, const char *path,
                          struct gw_model *model)
{
    if (!jdoc_is(v, JDOC_STRING))
        return gw_config_fail(l, v->line, path, "must be the name of an upstream");
    for (uint32_t k = 0; k < l->config->upstream_count; k++) {
        if (strcmp(l->config->upstreams[k].name, v->as.string) == 0) {
            model->upstream = &l->config->upstreams[k];
            assert(model->upstream->base_url != NULL); /* a whole upstream, not a partial one */
            return 0;
        }
    }
    char quoted[72];
    gw_config_quote(v->as.string, v->count, quoted);
    return gw_config_fail(l, v->line, path, "unknown upstream %s", quoted);
}

enum model_seen {
    SEEN_INPUT_PRICE = 1,
    SEEN_CACHED_PRICE = 2,
    SEEN_WRITE_5M_PRICE = 4,
    SEEN_WRITE_1H_PRICE = 8,
    SEEN_OUTPUT_PRICE = 16,
    SEEN_REASONING_PRICE = 32,
    SEEN_MAX_OUTPUT = 64,
    SEEN_DEFAULT_OUTPUT = 128,
};

/* The price fields, in the order of enum gw_price_field (the prices file's
 * fields fill the same slots). */
static const struct {
    const char *name;
    size_t offset;
    unsigned seen;
} price_fields[GW_PRICE_FIELDS] = {
    [GW_PRICE_INPUT] = {"input_usd_micros_per_mtok",
                        offsetof(struct gw_model, input_usd_micros_per_mtok), SEEN_INPUT_PRICE},
    [GW_PRICE_CACHED_INPUT] = {"cached_input_usd_micros_per_mtok",
                               offsetof(struct gw_model, cached_input_usd_micros_per_mtok),
                               SEEN_CACHED_PRICE},
    [GW_PRICE_CACHE_WRITE_5M] = {"cache_write_5m_input_usd_micros_per_mtok",
                                 offsetof(struct gw_model,
                                          cache_write_5m_input_usd_micros_per_mtok),
                                 SEEN_WRITE_5M_PRICE},
    [GW_PRICE_CACHE_WRITE_1H] = {"cache_write_1h_input_usd_micros_per_mtok",
                                 offsetof(struct gw_model,
                                          cache_write_1h_input_usd_micros_per_mtok),
                                 SEEN_WRITE_1H_PRICE},
    [GW_PRICE_OUTPUT] = {"output_usd_micros_per_mtok",
                         offsetof(struct gw_model, output_usd_micros_per_mtok), SEEN_OUTPUT_PRICE},
    [GW_PRICE_REASONING_OUTPUT] = {"reasoning_output_usd_micros_per_mtok",
                                   offsetof(struct gw_model, reasoning_output_usd_micros_per_mtok),
                                   SEEN_REASONING_PRICE},
};

static uint64_t *model_slot(struct gw_model *model, size_t offset)
{
    return (uint64_t *)(void *)((char *)model + offset);
}

static int model_number(struct loader *l, const struct jdoc_member *m, const char *path,
                        struct gw_model *model, unsigned *seen)
{
    static const struct {
        const char *name;
        size_t offset;
        uint64_t min, max;
        unsigned seen;
    } counts[] = {
        {"max_output_tokens", offsetof(struct gw_model, max_output_tokens), 1, GW_OUTPUT_TOKENS_MAX,
         SEEN_MAX_OUTPUT},
        {"default_max_output_tokens", offsetof(struct gw_model, default_max_output_tokens), 1,
         GW_OUTPUT_TOKENS_MAX, SEEN_DEFAULT_OUTPUT},
    };
    for (size_t i = 0; i < GW_PRICE_FIELDS; i++) {
        if (strcmp(m->key, price_fields[i].name) != 0)
            continue;
        /* Written through its offset: a whole uint64_t inside the model. */
        assert(price_fields[i].offset % _Alignof(uint64_t) == 0);
        assert(price_fields[i].offset + sizeof(uint64_t) <= sizeof *model);
        *seen |= price_fields[i].seen;
        return integer_value(l, &m->value, path, 0, AMOUNT_MAX,
                             model_slot(model, price_fields[i].offset));
    }
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (strcmp(m->key, counts[i].name) != 0)
            continue;
        assert(counts[i].offset % _Alignof(uint64_t) == 0);
        assert(counts[i].offset + sizeof(uint64_t) <= sizeof *model);
        *seen |= counts[i].seen;
        return integer_value(l, &m->value, path, counts[i].min, counts[i].max,
                             model_slot(model, counts[i].offset));
    }
    return gw_config_fail(l, m->value.line, path, "unknown field");
}

static int output_reservation_value(struct loader *l, const struct jdoc_value *v, const char *path,
                                    enum gw_output_reservation *out)
{
    static const char *const names[] = {[GW_OUTPUT_RESERVATION_MAX_TOKENS] = "max_tokens",
                                        [GW_OUTPUT_RESERVATION_OBSERVED] = "observed"};
    unsigned choice = 0;
    if (choice_value(l, v, path, names, 2, "must be \"max_tokens\" or \"observed\"", &choice) != 0)
        return -1;
    *out = (enum gw_output_reservation)choice;
    return 0;
}

static int model_field(struct loader *l, const struct jdoc_member *m, const char *entry,
                       struct gw_model *model, unsigned *seen)
{
    char path[96];
    field_path(path, sizeof path, entry, m->key);
    if (strcmp(m->key, "name") == 0)
        return text_value(l, &m->value, path, GW_NAME_LENGTH_MAX, TEXT_KEY, &model->name);
    if (strcmp(m->key, "upstream") == 0)
        return model_upstream(l, &m->value, path, model);
    if (strcmp(m->key, "upstream_model") == 0)
        return text_value(l, &m->value, path, GW_UPSTREAM_MODEL_LENGTH_MAX, TEXT_ANY,
                          &model->upstream_model);
    if (strcmp(m->key, "prices_from") == 0)
        return text_value(l, &m->value, path, GW_UPSTREAM_MODEL_LENGTH_MAX, TEXT_ANY,
                          &model->prices_from);
    if (strcmp(m->key, "output_reservation") == 0)
        return m->value.kind == JDOC_NULL
                   ? 0
                   : output_reservation_value(l, &m->value, path, &model->output_reservation);
    return model_number(l, m, path, model, seen);
}

/* The model's prices_from entry: every price and max_output_tokens the
 * model does not give itself (explicit prices win). */
static int model_prices_from(struct loader *l, const struct jdoc_value *item, const char *entry,
                             struct gw_model *model, unsigned *seen)
{
    char path[96], quoted[72];
    field_path(path, sizeof path, entry, "prices_from");
    uint32_t line = jdoc_get(item, "prices_from")->line;
    if (l->prices == NULL)
        return gw_config_fail(l, line, path, "needs prices_file at the top of the file");
    struct gw_price_entry e;
    char reason[GW_CONFIG_ERROR_SIZE];
    int found = gw_prices_find(l->prices, model->prices_from, strlen(model->prices_from), &e,
                               reason, sizeof reason);
    if (found < 0)
        return gw_config_fail(l, line, path, "%s", reason);
    gw_config_quote(model->prices_from, strlen(model->prices_from), quoted);
    if (found == 0)
        return gw_config_fail(l, line, path, "%s is not in %s", quoted, l->prices_path);
    for (int f = GW_PRICE_INPUT; f < GW_PRICE_FIELDS; f++) {
        if ((*seen & price_fields[f].seen) || !(e.present & (1u << f)))
            continue;
        *model_slot(model, price_fields[f].offset) = e.usd_micros_per_mtok[f];
        *seen |= price_fields[f].seen;
    }
    if (!(*seen & SEEN_MAX_OUTPUT) && e.max_output_tokens > 0) {
        model->max_output_tokens = e.max_output_tokens;
        *seen |= SEEN_MAX_OUTPUT;
    }
    return 0;
}

/* "required", with where the price could have come from. */
static int price_missing(struct loader *l, const struct jdoc_value *item, const char *entry,
                         const struct gw_model *model, const char *field, const char *file_field)
{
    char path[96], quoted[72];
    field_path(path, sizeof path, entry, field);
    if (model->prices_from == NULL)
        return gw_config_fail(l, item->line, path, "required");
    gw_config_quote(model->prices_from, strlen(model->prices_from), quoted);
    return gw_config_fail(l, item->line, path, "required: %s in %s has no %s", quoted,
                          l->prices_path, file_field);
}

/* Cache writes default to 1.25 and 2 times the input price, cache reads to
 * it, reasoning to the output price. A default above AMOUNT_MAX is an
 * error naming the field. */
static int price_defaults(struct loader *l, const struct jdoc_value *item, const char *entry,
                          struct gw_model *m, unsigned seen)
{
    typedef unsigned __int128 u128;
    u128 input = m->input_usd_micros_per_mtok;
    if (!(seen & SEEN_CACHED_PRICE))
        m->cached_input_usd_micros_per_mtok = m->input_usd_micros_per_mtok;
    if (!(seen & SEEN_REASONING_PRICE))
        m->reasoning_output_usd_micros_per_mtok = m->output_usd_micros_per_mtok;
    u128 write_5m = (input * 5 + 3) / 4, write_1h = input * 2;
    const char *field = NULL;
    if (!(seen & SEEN_WRITE_5M_PRICE) && write_5m > AMOUNT_MAX)
        field = "cache_write_5m_input_usd_micros_per_mtok";
    else if (!(seen & SEEN_WRITE_1H_PRICE) && write_1h > AMOUNT_MAX)
        field = "cache_write_1h_input_usd_micros_per_mtok";
    if (field != NULL) {
        char path[96];
        field_path(path, sizeof path, entry, field);
        return gw_config_fail(l, item->line, path,
                              "its default from the input price is above 9223372036854775807: "
                              "give it");
    }
    if (!(seen & SEEN_WRITE_5M_PRICE))
        m->cache_write_5m_input_usd_micros_per_mtok = (uint64_t)write_5m;
    if (!(seen & SEEN_WRITE_1H_PRICE))
        m->cache_write_1h_input_usd_micros_per_mtok = (uint64_t)write_1h;
    return 0;
}

static int model_check(struct loader *l, const struct jdoc_value *item, const char *entry,
                       struct gw_model *model, unsigned seen)
{
    if (model->name == NULL)
        return missing(l, item, entry, "name");
    if (model->upstream == NULL)
        return missing(l, item, entry, "upstream");
    if (model->prices_from != NULL && model_prices_from(l, item, entry, model, &seen) != 0)
        return -1;
    if (!(seen & (SEEN_INPUT_PRICE | SEEN_OUTPUT_PRICE)) && model->prices_from == NULL) {
        char quoted[72];
        gw_config_quote(model->name, strlen(model->name), quoted);
        return gw_config_fail(l, item->line, entry,
                              "model %s has no price: give input_usd_micros_per_mtok and "
                              "output_usd_micros_per_mtok, or prices_from (an unpriced model is "
                              "never served)",
                              quoted);
    }
    if (!(seen & SEEN_INPUT_PRICE))
        return price_missing(l, item, entry, model, "input_usd_micros_per_mtok",
                             "input_cost_per_token");
    if (!(seen & SEEN_OUTPUT_PRICE))
        return price_missing(l, item, entry, model, "output_usd_micros_per_mtok",
                             "output_cost_per_token");
    if (!(seen & SEEN_MAX_OUTPUT))
        return price_missing(l, item, entry, model, "max_output_tokens", "max_output_tokens");
    if (!(seen & SEEN_DEFAULT_OUTPUT))
        return missing(l, item, entry, "default_max_output_tokens");
    if (model->default_max_output_tokens > model->max_output_tokens) {
        char path[96];
        field_path(path, sizeof path, entry, "default_max_output_tokens");
        return gw_config_fail(l, jdoc_get(item, "default_max_output_tokens")->line, path,
                              "must be at most max_output_tokens (%llu)",
                              (unsigned long long)model->max_output_tokens);
    }
    if (price_defaults(l, item, entry, model, seen) != 0)
        return -1;
    if (model->upstream_model == NULL)
        model->upstream_model = model->name;
    /* What gw_cost and gw_estimate assume of every model. */
    assert(model->input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->cached_input_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->output_usd_micros_per_mtok <= AMOUNT_MAX);
    assert(model->default_max_output_tokens >= 1);
    assert(model->default_max_output_tokens <= model->max_output_tokens);
    assert(model->max_output_tokens <= GW_OUTPUT_TOKENS_MAX);
    return 0;
}

int gw_config_decode_models(struct loader *l, const struct jdoc_value *items)
{
    assert_section(items, 1, GW_MODELS_MAX);
    assert(l->config->upstream_count >= 1); /* models name upstreams: decoded before */
    struct gw_model *models = arena_alloc(l->arena, items->count * sizeof *models);
    if (models == NULL)
        return gw_config_fail(l, items->line, "models", "out of memory");
    l->config->models = models;
    for (uint32_t i = 0; i < items->count; i++) {
        const struct jdoc_value *item = &items->as.items[i];
        char entry[32];
        snprintf(entry, sizeof entry, "models[%u]", i);
        if (object_entry(l, item, entry) != 0)
            return -1;
        unsigned seen = 0;
        models[i].index = i;
        for (uint32_t k = 0; k < item->count; k++) {
            if (model_field(l, &item->as.members[k], entry, &models[i], &seen) != 0)
                return -1;
        }
        if (model_check(l, item, entry, &models[i], seen) != 0)
            return -1;
        assert(models[i].index == i);
    }
    l->config->model_count = items->count;
    return 0;
}

/* ---- limits ---- */

static enum gw_placeholder placeholder_named(const char *name, size_t length)
{
    static const struct {
        const char *name;
        enum gw_placeholder placeholder;
    } names[] = {{"model", GW_MODEL}, {"upstream", GW_UPSTREAM},     {"caller", GW_CALLER},
                 {"team", GW_TEAM},   {"mcp_server", GW_MCP_SERVER}, {"tool", GW_TOOL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) == length && memcmp(names[i].name, name, length) == 0)
            return names[i].placeholder;
    }
    return GW_TEXT;
}

/* The placeholder "{name}" at text[i] (closed by the '}' at close) into
 * *part; -1 with the error written for an unknown name. */
static int template_placeholder(struct loader *l, const struct jdoc_value *v, const char *path,
                                uint32_t i, const char *close, struct gw_template_part *part)
{
    const char *text = v->as.string;
    assert(text[i] == '{');
    assert(close > text + i && close < text + v->count && *close == '}');
    size_t name_length = (size_t)(close - text) - i - 1;
    enum gw_placeholder p = placeholder_named(text + i + 1, name_length);
    if (p == GW_TEXT) {
        char quoted[72];
        gw_config_quote(text + i, name_length + 2, quoted);
        return gw_config_fail(l, v->line, path,
                              "unknown placeholder %s (known: {model}, {upstream}, {caller}, "
                              "{team}, {mcp_server}, {tool})",
                              quoted);
    }
    *part = (struct gw_template_part){.placeholder = p};
    return 0;
}

/* The literal text from text[start] up to the next brace or the end into
 * *part, and *end past it; -1 with the error written for a stray '}' or a
 * byte a limit key may not hold. */
static int template_literal(struct loader *l, const struct jdoc_value *v, const char *path,
                            uint32_t start, struct gw_template_part *part, uint32_t *end)
{
    const char *text = v->as.string;
    assert(start < v->count && text[start] != '{');
    uint32_t i = start;
    while (i < v->count && text[i] != '{' && text[i] != '}')
        i++;
    if (i < v->count && text[i] == '}')
        return gw_config_fail(l, v->line, path, "'}' without an opening '{'");
    if (!key_chars(text + start, i - start))
        return gw_config_fail(l, v->line, path,
                              "text outside placeholders must be printable ASCII without "
                              "white space");
    assert(i > start); /* text[start] is neither brace: a literal has a byte at least */
    *part = (struct gw_template_part){
        .placeholder = GW_TEXT, .text = text + start, .length = i - start};
    *end = i;
    return 0;
}

/* Splits the template into literal parts and placeholders. parts has room
 * for length + 1 entries (each part takes at least one byte). */
static int template_parse(struct loader *l, const struct jdoc_value *v, const char *path,
                          struct gw_limit *limit, struct gw_template_part *parts)
{
    assert(jdoc_is(v, JDOC_STRING) && v->count >= 1);
    const char *text = v->as.string;
    uint32_t count = 0, i = 0;
    while (i < v->count) {
        assert(count < v->count); /* every part took a byte at least */
        if (text[i] != '{') {
            if (template_literal(l, v, path, i, &parts[count++], &i) != 0)
                return -1;
            continue;
        }
        const char *close = memchr(text + i, '}', v->count - i);
        if (close == NULL)
            return gw_config_fail(l, v->line, path, "'{' without a closing '}'");
        if (template_placeholder(l, v, path, i, close, &parts[count]) != 0)
            return -1;
        limit->uses_team |= parts[count++].placeholder == GW_TEAM;
        i = (uint32_t)(close - text) + 1;
    }
    assert(count >= 1);
    assert(count <= v->count);
    limit->part_count = count;
    return 0;
}

/* Literal parts point into the kept copy of the template. */
static int limit_key(struct loader *l, const struct jdoc_value *v, const char *path,
                     struct gw_limit *limit)
{
    if (!jdoc_is(v, JDOC_STRING) || v->count == 0 || v->count > GW_TEMPLATE_LENGTH_MAX)
        return gw_config_fail(l, v->line, path, "must be a key template of 1..%d bytes",
                              GW_TEMPLATE_LENGTH_MAX);
    char *kept = gw_config_keep(l, v->as.string, v->count);
    struct gw_template_part *parts = arena_alloc(l->arena, (v->count + 1) * sizeof *parts);
    if (kept == NULL || parts == NULL)
        return gw_config_fail(l, v->line, path, "out of memory");
    struct jdoc_value copy = *v;
    copy.as.string = kept;
    limit->key_template = kept;
    limit->parts = parts;
    return template_parse(l, &copy, path, limit, parts);
}

static int limit_amount(struct loader *l, const struct jdoc_value *v, const char *path,
                        struct gw_limit *limit)
{
    for (int a = GW_AMOUNT_REQUESTS; a <= GW_AMOUNT_LAST; a++) {
        enum gw_amount amount = (enum gw_amount)a;
        if (jdoc_is(v, JDOC_STRING) && strcmp(v->as.string, gw_amount_name(amount)) == 0) {
            limit->amount = amount;
            return 0;
        }
    }
    return gw_config_fail(l, v->line, path,
                          "must be requests, tokens, input_tokens, uncached_input_tokens, "
                          "output_tokens, usd_micros or tool_calls");
}

/* The key a template's default is checked with: the real one is the
 * instantiated template's, per call (and checked then). */
#define DEFAULT_STAND_IN_KEY "default"

/* "default": a limit definition without its key, checked exactly as PUT
 * /v1/admin/limits checks one (decode_definition_keyed); an error names the
 * field inside it and its line. */
static int limit_default(struct loader *l, const struct jdoc_value *v, const char *path,
                         struct gw_limit *limit)
{
    if (v->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(v, JDOC_OBJECT))
        return gw_config_fail(l, v->line, path,
                              "must be a limit definition without its key (an object: kind, "
                              "capacity, ...)");
    struct limit_definition *definition = arena_alloc(l->arena, sizeof *definition);
    if (definition == NULL)
        return gw_config_fail(l, v->line, path, "out of memory");
    char reason[DECODE_ERROR_SIZE];
    if (decode_definition_keyed(v, "", DEFAULT_STAND_IN_KEY, definition, reason, sizeof reason) !=
        0) {
        /* "<field>: <why>", the field a member of the default (or not in it). */
        const char *colon = strstr(reason, ": ");
        char field[64] = "", where[160];
        if (colon != NULL && (size_t)(colon - reason) < sizeof field)
            snprintf(field, sizeof field, "%.*s", (int)(colon - reason), reason);
        const struct jdoc_value *member = field[0] != '\0' ? jdoc_get(v, field) : NULL;
        snprintf(where, sizeof where, "%s%s%s", path, field[0] != '\0' ? "." : "", field);
        return gw_config_fail(l, member != NULL ? member->line : v->line, where, "%s",
                              field[0] != '\0' ? colon + 2 : reason);
    }
    assert(strcmp(definition->key, DEFAULT_STAND_IN_KEY) == 0);
    definition->key[0] = '\0'; /* each call's own */
    limit->default_definition = definition;
    return 0;
}

static void note_placeholders(struct loader *l, const struct gw_limit *limit, int32_t index)
{
    assert(index >= 0 && index < GW_LIMITS_MAX);
    for (uint32_t p = 0; p < limit->part_count; p++) {
        if (limit->parts[p].placeholder == GW_CALLER && l->caller_limit < 0)
            l->caller_limit = index;
        if (limit->parts[p].placeholder == GW_TEAM && l->team_limit < 0)
            l->team_limit = index;
    }
}

/* "calls": "model", "tool" or "all" (the default: as the key and amount
 * say), the calls the template applies to (docs/mcp.md "Who spent what"). */
static int limit_calls_field(struct loader *l, const struct jdoc_value *v, const char *path,
                             struct gw_limit *limit)
{
    if (jdoc_is(v, JDOC_STRING) && strcmp(v->as.string, "model") == 0)
        limit->model_calls_only = true;
    else if (jdoc_is(v, JDOC_STRING) && strcmp(v->as.string, "tool") == 0)
        limit->tool_calls_only = true;
    else if (!jdoc_is(v, JDOC_STRING) || strcmp(v->as.string, "all") != 0)
        return gw_config_fail(l, v->line, path, "must be model, tool or all");
    return 0;
}

/* Which calls the template applies to (docs/mcp.md): one that needs what
 * only a model call has and what only a tool call has applies to none, as
 * does one of "calls" whose key or amount is the other kind's. */
static int limit_calls(struct loader *l, const struct jdoc_value *item, const char *entry,
                       struct gw_limit *limit)
{
    for (uint32_t p = 0; p < limit->part_count; p++) {
        enum gw_placeholder placeholder = limit->parts[p].placeholder;
        limit->model_calls_only |= placeholder == GW_MODEL || placeholder == GW_UPSTREAM;
        limit->tool_calls_only |= placeholder == GW_MCP_SERVER || placeholder == GW_TOOL;
    }
    limit->tool_calls_only |= limit->amount == GW_AMOUNT_TOOL_CALLS;
    if (!limit->model_calls_only || !limit->tool_calls_only)
        return 0;
    char path[96];
    const char *field = jdoc_get(item, "calls") != NULL ? "calls" : "key";
    field_path(path, sizeof path, entry, field);
    return gw_config_fail(l, jdoc_get(item, field)->line, path,
                          "applies to no call: {model} and {upstream} are a model call's, "
                          "{mcp_server}, {tool} and the amount tool_calls an MCP tool call's");
}

static int decode_limit(struct loader *l, const struct jdoc_value *item, uint32_t i,
                        struct gw_limit *limit)
{
    char entry[32], path[96];
    snprintf(entry, sizeof entry, "limits[%u]", i);
    if (object_entry(l, item, entry) != 0)
        return -1;
    bool amount_seen = false;
    for (uint32_t k = 0; k < item->count; k++) {
        const struct jdoc_member *m = &item->as.members[k];
        field_path(path, sizeof path, entry, m->key);
        int result;
        if (strcmp(m->key, "key") == 0)
            result = limit_key(l, &m->value, path, limit);
        else if (strcmp(m->key, "amount") == 0)
            amount_seen = true, result = limit_amount(l, &m->value, path, limit);
        else if (strcmp(m->key, "default") == 0)
            result = limit_default(l, &m->value, path, limit);
        else if (strcmp(m->key, "calls") == 0)
            result = limit_calls_field(l, &m->value, path, limit);
        else
            result = gw_config_fail(l, m->value.line, path, "unknown field");
        if (result != 0)
            return -1;
    }
    if (limit->key_template == NULL)
        return missing(l, item, entry, "key");
    if (!amount_seen)
        return missing(l, item, entry, "amount");
    assert(limit->part_count >= 1);
    assert(limit->amount >= GW_AMOUNT_REQUESTS && limit->amount <= GW_AMOUNT_LAST);
    note_placeholders(l, limit, (int32_t)i);
    return limit_calls(l, item, entry, limit);
}

int gw_config_decode_limits(struct loader *l, const struct jdoc_value *items)
{
    assert_section(items, 1, GW_LIMITS_MAX);
    assert(l->caller_limit == -1 && l->team_limit == -1); /* set by this section only */
    struct gw_limit *limits = arena_alloc(l->arena, items->count * sizeof *limits);
    if (limits == NULL)
        return gw_config_fail(l, items->line, "limits", "out of memory");
    l->config->limits = limits;
    for (uint32_t i = 0; i < items->count; i++) {
        if (decode_limit(l, &items->as.items[i], i, &limits[i]) != 0)
            return -1;
    }
    l->config->limit_count = items->count;
    assert(l->caller_limit < (int32_t)items->count && l->team_limit < (int32_t)items->count);
    return 0;
}

/* ---- keys ---- */

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* A key's "mcp_servers" list: the servers' indexes, sorted. */
int gw_config_key_mcp_servers(struct loader *l, const struct jdoc_value *v, const char *path,
                              struct gw_key *key)
{
    if (v->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(v, JDOC_ARRAY) || v->count > GW_MCP_SERVERS_MAX)
        return gw_config_fail(l, v->line, path, "must be an array of at most %d MCP server names",
                              GW_MCP_SERVERS_MAX);
    uint32_t *servers = arena_alloc(l->arena, (v->count + 1) * sizeof *servers);
    if (servers == NULL)
        return gw_config_fail(l, v->line, path, "out of memory");
    for (uint32_t i = 0; i < v->count; i++) {
        const struct jdoc_value *name = &v->as.items[i];
        const struct gw_mcp_server *server =
            jdoc_is(name, JDOC_STRING)
                ? gw_config_find_mcp_server(l->config, name->as.string, name->count)
                : NULL;
        char item_path[112], quoted[72];
        snprintf(item_path, sizeof item_path, "%s[%u]", path, i);
        if (server == NULL) {
            gw_config_quote(jdoc_is(name, JDOC_STRING) ? name->as.string : "",
                            jdoc_is(name, JDOC_STRING) ? name->count : 0, quoted);
            return gw_config_fail(l, name->line, item_path,
                                  "unknown MCP server %s (mcp_servers names them)", quoted);
        }
        for (uint32_t k = 0; k < i; k++) {
            if (servers[k] == server->index)
                return gw_config_fail(l, name->line, item_path, "duplicate MCP server");
        }
        servers[i] = server->index;
    }
    qsort(servers, v->count, sizeof *servers, compare_u32);
    key->mcp_servers = servers;
    key->mcp_server_count = v->count;
    key->mcp_servers_listed = true;
    return 0;
}

static int key_models(struct loader *l, const struct jdoc_value *v, const char *path,
                      struct gw_key *key)
{
    /* Model names are looked up by gw_config_index_models' table. */
    assert(l->config->models_by_name != NULL);
    if (v->kind == JDOC_NULL)
        return 0;
    if (!jdoc_is(v, JDOC_ARRAY) || v->count > GW_MODELS_MAX)
        return gw_config_fail(l, v->line, path, "must be an array of at most %d model names",
                              GW_MODELS_MAX);
    uint32_t *models = arena_alloc(l->arena, (v->count + 1) * sizeof *models);
    if (models == NULL)
        return gw_config_fail(l, v->line, path, "out of memory");
    for (uint32_t i = 0; i < v->count; i++) {
        const struct jdoc_value *name = &v->as.items[i];
        const struct gw_model *model =
            jdoc_is(name, JDOC_STRING)
                ? gw_config_find_model(l->config, name->as.string, name->count)
                : NULL;
        char item_path[112], quoted[72];
        snprintf(item_path, sizeof item_path, "%s[%u]", path, i);
        if (model == NULL) {
            gw_config_quote(jdoc_is(name, JDOC_STRING) ? name->as.string : "", name->count, quoted);
            return gw_config_fail(l, name->line, item_path, "unknown model %s", quoted);
        }
        for (uint32_t k = 0; k < i; k++) {
            if (models[k] == model->index)
                return gw_config_fail(l, name->line, item_path, "duplicate model");
        }
        models[i] = model->index;
    }
    qsort(models, v->count, sizeof *models, compare_u32);
    /* gw_key_allows_model searches them: ascending, unique, each a model. */
    for (uint32_t i = 0; i < v->count; i++) {
        assert(models[i] < l->config->model_count);
        assert(i == 0 || models[i - 1] < models[i]);
    }
    key->models = models;
    key->model_count = v->count;
    return 0;
}

static int key_field(struct loader *l, const struct jdoc_member *m, const char *entry,
                     struct gw_key *key, bool *digest_seen)
{
    char path[96];
    field_path(path, sizeof path, entry, m->key);
    const struct jdoc_value *v = &m->value;
    if (strcmp(m->key, "sha256") == 0) {
        *digest_seen = true;
        if (!jdoc_is(v, JDOC_STRING) ||
            gw_hex_decode(v->as.string, v->count, key->sha256, GW_SHA256_BYTES) != 0)
            return gw_config_fail(l, v->line, path,
                                  "must be 64 lower-case hex digits (the SHA-256 of the secret)");
        return 0;
    }
    if (strcmp(m->key, "caller") == 0)
        return text_value(l, v, path, CALLER_LENGTH_MAX, TEXT_PRINTABLE, &key->caller);
    if (strcmp(m->key, "team") == 0)
        return v->kind == JDOC_NULL
                   ? 0
                   : text_value(l, v, path, GW_TEAM_LENGTH_MAX, TEXT_KEY, &key->team);
    if (strcmp(m->key, "models") == 0)
        return key_models(l, v, path, key);
    if (strcmp(m->key, "mcp_servers") == 0)
        return gw_config_key_mcp_servers(l, v, path, key);
    uint64_t number = 0;
    if (strcmp(m->key, "max_wait_seconds") == 0) {
        if (integer_value(l, v, path, 0, GW_KEY_WAIT_SECONDS_MAX, &number) != 0)
            return -1;
        key->max_wait_seconds = (uint32_t)number;
        return 0;
    }
    if (strcmp(m->key, "default_wait_seconds") == 0) {
        if (integer_value(l, v, path, 0, GW_KEY_WAIT_SECONDS_MAX, &number) != 0)
            return -1;
        key->default_wait_seconds = (uint32_t)number;
        return 0;
    }
    if (strcmp(m->key, "priority_floor") == 0) {
        if (integer_value(l, v, path, 0, GW_PRIORITY_MAX, &number) != 0)
            return -1;
        key->priority_floor = (uint32_t)number;
        return 0;
    }
    return gw_config_fail(l, v->line, path, "unknown field");
}

/* What the templates need of every key: a team when one uses {team}, a
 * caller fit for a limit key when one uses {caller}; and a default wait
 * within the key's longest. */
static int key_check(struct loader *l, const struct jdoc_value *item, const char *entry,
                     const struct gw_key *key, bool digest_seen)
{
    char path[96];
    if (!digest_seen)
        return missing(l, item, entry, "sha256");
    if (key->caller == NULL)
        return missing(l, item, entry, "caller");
    if (key->team == NULL && l->team_limit >= 0) {
        field_path(path, sizeof path, entry, "team");
        return gw_config_fail(l, item->line, path, "required: limits[%d].key uses {team}",
                              l->team_limit);
    }
    if (key->default_wait_seconds > key->max_wait_seconds) {
        field_path(path, sizeof path, entry, "default_wait_seconds");
        return gw_config_fail(l, jdoc_get(item, "default_wait_seconds")->line, path,
                              "must be at most max_wait_seconds (%u)", key->max_wait_seconds);
    }
    if (l->caller_limit >= 0 && !key_chars(key->caller, strlen(key->caller))) {
        field_path(path, sizeof path, entry, "caller");
        return gw_config_fail(l, jdoc_get(item, "caller")->line, path,
                              "must not hold white space: limits[%d].key uses {caller}",
                              l->caller_limit);
    }
    /* What gw_plan's instantiate assumes of every key. */
    assert(key->team != NULL || l->team_limit < 0);
    assert(strlen(key->caller) <= CALLER_LENGTH_MAX);
    return 0;
}

int gw_config_decode_keys(struct loader *l, const struct jdoc_value *items)
{
    assert_section(items, 0, GW_KEYS_MAX);
    assert(l->config->limit_count >= 1); /* the checks of keys need the templates */
    struct gw_key *keys = arena_alloc(l->arena, items->count * sizeof *keys);
    if (keys == NULL)
        return gw_config_fail(l, items->line, "keys", "out of memory");
    l->config->keys = keys;
    for (uint32_t i = 0; i < items->count; i++) {
        const struct jdoc_value *item = &items->as.items[i];
        char entry[32];
        snprintf(entry, sizeof entry, "keys[%u]", i);
        if (object_entry(l, item, entry) != 0)
            return -1;
        bool digest_seen = false;
        for (uint32_t k = 0; k < item->count; k++) {
            if (key_field(l, &item->as.members[k], entry, &keys[i], &digest_seen) != 0)
                return -1;
        }
        if (key_check(l, item, entry, &keys[i], digest_seen) != 0)
            return -1;
    }
    l->config->key_count = items->count;
    return 0;
}

/* ---- shared with gw_config_mcp.c ---- */

int gw_config_text(struct loader *l, const struct jdoc_value *v, const char *path, size_t max,
                   bool key_chars_only, const char **out)
{
    return text_value(l, v, path, max, key_chars_only ? TEXT_KEY : TEXT_ANY, out);
}

int gw_config_integer(struct loader *l, const struct jdoc_value *v, const char *path, uint64_t min,
                      uint64_t max, uint64_t *out)
{
    return integer_value(l, v, path, min, max, out);
}

int gw_config_base_url(struct loader *l, const struct jdoc_value *v, const char *path,
                       const char **out)
{
    return base_url_value(l, v, path, out);
}

int gw_config_api_key(struct loader *l, const struct jdoc_value *v, const char *path, bool env,
                      struct gw_upstream *upstream)
{
    return env ? api_key_from_env(l, v, path, upstream) : api_key_from_file(l, v, path, upstream);
}
