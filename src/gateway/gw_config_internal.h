/* Shared by the files of the config loader: gw_config_load.c (the file,
 * the document as a whole, reference counting), gw_config_decode.c and
 * gw_config_mcp.c (each section's entries) and gw_config.c (lookups and
 * what they all share). Not for other modules. */
#ifndef LLMLIMIT_GATEWAY_CONFIG_INTERNAL_H
#define LLMLIMIT_GATEWAY_CONFIG_INTERNAL_H

#include "gw_config.h"
#include "gw_prices.h"
#include "util/arena.h"
#include "util/jdoc.h"

struct gw_config_memory {
    struct arena arena; /* every string and array of the config */
};

struct loader {
    const char *file;      /* the file's name in messages */
    const char *directory; /* where a relative api_key_file is looked for ("" = cwd) */
    struct arena *arena;   /* the config's memory */
    struct gw_config *config;
    /* The prices file (prices_file), while the models are decoded; NULL
     * when the config names none. */
    struct gw_prices *prices;
    const char *prices_path; /* as opened, for messages */
    /* What the templates use, for the checks of keys: the first limit
     * index using {caller} / {team}, or -1. */
    int32_t caller_limit;
    int32_t team_limit;
    char *error;
    size_t error_size;
};

/* Writes "<file>: line L: <path>: <reason>" and returns -1. */
int gw_config_fail(struct loader *l, uint32_t line, const char *path, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* A copy of text[0..length) with a NUL, in the config's memory; NULL (and
 * the error written) when out of memory. */
char *gw_config_keep(struct loader *l, const char *text, size_t length);

/* For error messages: up to 64 bytes of text between quotes, anything not
 * printable ASCII shown as '?'. */
void gw_config_quote(const char *text, size_t length, char out[72]);

/* Each section: the array `items` (already checked to be an array of at
 * most the section's bound). 0 or -1 with the error written. */
int gw_config_decode_upstreams(struct loader *l, const struct jdoc_value *items);
int gw_config_decode_models(struct loader *l, const struct jdoc_value *items);
int gw_config_decode_limits(struct loader *l, const struct jdoc_value *items);
int gw_config_decode_keys(struct loader *l, const struct jdoc_value *items);

/* mcp_servers (gw_config_mcp.c): any JSON value, checked there; before
 * the keys. A key's "mcp_servers" list (gw_config_decode.c): the value v
 * at path. */
int gw_config_decode_mcp_servers(struct loader *l, const struct jdoc_value *items);
int gw_config_key_mcp_servers(struct loader *l, const struct jdoc_value *v, const char *path,
                              struct gw_key *key);

/* Field readers of gw_config_decode.c that gw_config_mcp.c shares: a
 * string of 1..max bytes (key_chars: printable ASCII without white space,
 * else any), an integer min..max, an upstream's own fields (name,
 * base_url, api, api_key_env, api_key_file, timeout_seconds,
 * connect_timeout_seconds; *handled false for any other). 0 or -1 with the
 * error written. */
int gw_config_text(struct loader *l, const struct jdoc_value *v, const char *path, size_t max,
                   bool key_chars, const char **out);
int gw_config_integer(struct loader *l, const struct jdoc_value *v, const char *path, uint64_t min,
                      uint64_t max, uint64_t *out);
int gw_config_base_url(struct loader *l, const struct jdoc_value *v, const char *path,
                       const char **out);
int gw_config_api_key(struct loader *l, const struct jdoc_value *v, const char *path, bool env,
                      struct gw_upstream *upstream);

/* The model index built from the sorted names (after gw_config_decode_models). */
int gw_config_index_models(struct loader *l, const struct jdoc_value *items);
/* The digest table (after gw_config_decode_keys). */
int gw_config_index_keys(struct loader *l, const struct jdoc_value *items);

#endif
