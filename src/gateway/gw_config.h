/* gateway.json: the gateway's upstreams, models, virtual keys and limit
 * templates (docs/gateway.md), loaded and checked strictly in one go. A
 * loaded config never changes; it is reference-counted so that a reload
 * (SIGHUP) can put a new one in place while calls still hold the old one. */
#ifndef LLMLIMIT_GATEWAY_CONFIG_H
#define LLMLIMIT_GATEWAY_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "gw_bounds.h"
#include "util/sha256.h"

#define GW_SHA256_BYTES SHA256_DIGEST_BYTES
/* Room for a load error: "<file>: line L: <path>: <reason>". */
#define GW_CONFIG_ERROR_SIZE 1024

/* The dialect an upstream speaks: a model is served only on the routes of
 * its upstream's dialect (docs/gateway.md, "Surfaces"). */
enum gw_api {
    GW_API_OPENAI = 0, /* chat completions, completions, embeddings, responses */
    GW_API_ANTHROPIC,  /* messages */
    GW_API_GEMINI,     /* generateContent, streamGenerateContent, countTokens */
};

struct gw_upstream {
    const char *name;
    enum gw_api api;
    const char *base_url; /* http:// or https://, no trailing '/' */
    /* The provider key sent as "Authorization: Bearer <api_key>" (Anthropic:
     * x-api-key, Gemini: x-goog-api-key), or NULL
     * when the upstream takes none (a local server). Read at load time;
     * never printed. */
    const char *api_key;
    uint32_t timeout_seconds;
    uint32_t connect_timeout_seconds;
};

/* How much output a call's reservation holds (docs/gateway.md, "Output
 * reservation"). */
enum gw_output_reservation {
    GW_OUTPUT_RESERVATION_MAX_TOKENS = 0, /* what the request allows: exact */
    GW_OUTPUT_RESERVATION_OBSERVED,       /* a high percentile of recent outputs (gw_observed) */
};

struct gw_model {
    const char *name; /* the public name clients send */
    const struct gw_upstream *upstream;
    const char *upstream_model; /* the name sent upstream */
    uint32_t index;             /* in gw_config.models */
    /* Prices in usd_micros per million tokens, 0..AMOUNT_MAX: given on the
     * model, else from its prices_from entry, else the default said. */
    uint64_t input_usd_micros_per_mtok;
    uint64_t cached_input_usd_micros_per_mtok;         /* cache reads; default: input */
    uint64_t cache_write_5m_input_usd_micros_per_mtok; /* default: 1.25 x input, rounded up */
    uint64_t cache_write_1h_input_usd_micros_per_mtok; /* default: 2 x input */
    uint64_t output_usd_micros_per_mtok;
    uint64_t
        reasoning_output_usd_micros_per_mtok; /* the reasoning part of output; default: output */
    uint64_t max_output_tokens;               /* 1..GW_OUTPUT_TOKENS_MAX */
    uint64_t default_max_output_tokens;       /* 1..max_output_tokens */
    enum gw_output_reservation output_reservation;
    const char *prices_from; /* its entry in the prices file, or NULL */
};

struct gw_key {
    uint8_t sha256[GW_SHA256_BYTES]; /* of the bearer secret */
    const char *caller;
    const char *team; /* NULL when the key has none */
    /* Indices into gw_config.models, ascending; model_count 0 means every
     * model. */
    const uint32_t *models;
    uint32_t model_count;
    /* A key of the Keys API names its models instead (they outlive a
     * reload of gateway.json): model_name_count 0 with model_count 0
     * means every model. */
    const char *const *model_names;
    uint32_t model_name_count;
    /* Waiting for capacity (docs/gateway.md): the longest a call of this key may
     * wait (0..GW_KEY_WAIT_SECONDS_MAX, 0: never), how long one that does
     * not say (no Prefer: wait) waits (0..max_wait_seconds), and the best
     * (lowest) priority it may ask for (0..GW_PRIORITY_MAX): a better one
     * asked is capped to this. */
    uint32_t max_wait_seconds;
    uint32_t default_wait_seconds;
    uint32_t priority_floor;
    /* The MCP servers it may call (docs/mcp.md): indices into
     * gw_config.mcp_servers, ascending; mcp_servers_listed false (no
     * "mcp_servers" field) means every server, an empty list none. */
    const uint32_t *mcp_servers;
    uint32_t mcp_server_count;
    bool mcp_servers_listed;
    /* A key of the Keys API names its servers instead (they outlive a
     * reload of gateway.json): with mcp_servers_listed, the names when
     * mcp_server_names is not NULL. */
    const char *const *mcp_server_names;
    uint32_t mcp_server_name_count;
};

/* A tool of an MCP server with its own price (docs/mcp.md). */
struct gw_mcp_tool {
    const char *name;
    uint64_t usd_micros_per_call; /* 0..AMOUNT_MAX */
    bool charge_errors;           /* an error result is charged too */
};

/* An MCP server behind the route /mcp/{name}: where it is (upstream's
 * base_url is its whole endpoint URL), its credential (upstream's
 * api_key, sent as Authorization: Bearer) and timeouts, and the price of
 * its tools' calls. */
struct gw_mcp_server {
    const char *name;
    uint32_t index; /* in gw_config.mcp_servers */
    struct gw_upstream upstream;
    const struct gw_mcp_tool *tools; /* in file order */
    uint32_t tool_count;
    uint64_t default_usd_micros_per_call; /* a tool not listed; 0..AMOUNT_MAX */
};

enum gw_amount {
    GW_AMOUNT_REQUESTS = 0, /* 1 per call */
    GW_AMOUNT_TOKENS,       /* input + output */
    GW_AMOUNT_INPUT_TOKENS,
    GW_AMOUNT_OUTPUT_TOKENS,
    GW_AMOUNT_USD_MICROS,
    GW_AMOUNT_UNCACHED_INPUT_TOKENS, /* input without cache reads */
    GW_AMOUNT_TOOL_CALLS,            /* 1 per MCP tool call */
};

#define GW_AMOUNT_LAST GW_AMOUNT_TOOL_CALLS

enum gw_placeholder {
    GW_TEXT = 0, /* a literal part */
    GW_MODEL,
    GW_UPSTREAM,
    GW_CALLER,
    GW_TEAM,
    GW_MCP_SERVER, /* an MCP tool call's server */
    GW_TOOL,       /* ... and tool */
};

struct gw_template_part {
    enum gw_placeholder placeholder;
    const char *text; /* GW_TEXT only: not NUL-terminated */
    uint32_t length;
};

struct gw_limit {
    const char *key_template; /* as written, for error messages */
    enum gw_amount amount;
    const struct gw_template_part *parts;
    uint32_t part_count;
    bool uses_team;
    /* Which calls the template applies to (docs/mcp.md): one naming
     * {model} or {upstream} only to model calls, one naming {mcp_server}
     * or {tool} or counting tool_calls only to MCP tool calls; never both. */
    bool model_calls_only;
    bool tool_calls_only;
    /* "default": the definition (checked and normalised as PUT
     * /v1/admin/limits does, its key empty) of the limit a call creates
     * when its instantiated key does not exist yet; NULL when the template
     * has none (a missing limit is then an error). */
    const struct limit_definition *default_definition;
};

struct gw_config_memory;

struct gw_config {
    _Atomic uint32_t references;
    const char *path;        /* as given to gw_config_load */
    const char *prices_file; /* as written in the file, or NULL */
    const struct gw_upstream *upstreams;
    uint32_t upstream_count;
    const struct gw_model *models; /* in file order */
    uint32_t model_count;
    const struct gw_key *keys; /* in file order */
    uint32_t key_count;
    const struct gw_limit *limits;
    uint32_t limit_count;
    const struct gw_mcp_server *mcp_servers; /* in file order; none without the section */
    uint32_t mcp_server_count;
    /* Lookup tables, built at load time. */
    const uint32_t *models_by_name; /* model indices sorted by name */
    const uint32_t *key_slots;      /* open addressing by digest: key index + 1, 0 empty */
    uint32_t key_slot_mask;
    struct gw_config_memory *memory; /* everything above lives here */
};

/* Reads, checks and loads the file at path. The provider keys are read
 * from the environment or their files now. Returns 0 with *out (one
 * reference, the caller's), or -1 with "<file>: line L: <path>: <reason>"
 * (or "<file>: <reason>" for the file as a whole) in error; nothing is
 * kept on failure. */
int gw_config_load(const char *path, struct gw_config **out, char *error, size_t error_size);

/* The same from text already in memory; `name` stands for the file in
 * messages and resolves a relative api_key_file. text is not modified. */
int gw_config_parse(const char *name, const char *text, size_t length, struct gw_config **out,
                    char *error, size_t error_size);

/* Reference counting, safe from any thread: each holder retains once and
 * releases once; the last release frees the config (and wipes the provider
 * keys from memory). */
struct gw_config *gw_config_retain(struct gw_config *config);
void gw_config_release(struct gw_config *config);

/* The key whose secret hashes to digest, or NULL. Each candidate is
 * compared in constant time. */
const struct gw_key *gw_config_find_key(const struct gw_config *config,
                                        const uint8_t digest[GW_SHA256_BYTES]);

/* The model with this public name (name need not be NUL-terminated), or NULL. */
const struct gw_model *gw_config_find_model(const struct gw_config *config, const char *name,
                                            size_t length);

/* Whether the key may call the model (a key without a models list may call
 * every model). */
bool gw_key_allows_model(const struct gw_key *key, const struct gw_model *model);

/* The MCP server with this name (need not be NUL-terminated), or NULL. */
const struct gw_mcp_server *gw_config_find_mcp_server(const struct gw_config *config,
                                                      const char *name, size_t length);

/* Whether the key may use the MCP server. */
bool gw_key_allows_mcp_server(const struct gw_key *key, const struct gw_mcp_server *server);

/* A tool call's price on server: the tool's usd_micros_per_call, else the
 * server's default; *charge_errors from the tool (false when not listed). */
uint64_t gw_mcp_tool_price(const struct gw_mcp_server *server, const char *tool, size_t length,
                           bool *charge_errors);

/* "requests", "tokens", ... */
const char *gw_amount_name(enum gw_amount amount);

/* "openai", "anthropic", "gemini" */
const char *gw_api_name(enum gw_api api);

/* The priority a call of key runs at when it asks for `asked` (0..9, 0
 * first; docs/gateway.md "Waiting for capacity"): never better than the key's priority_floor. */
uint32_t gw_key_priority(const struct gw_key *key, uint32_t asked);

/* The longest a call of key waits for capacity when it asks for
 * asked_seconds (Prefer: wait=N): never more than max_wait_seconds; -1 (it
 * did not ask): default_wait_seconds. */
uint32_t gw_key_wait_seconds(const struct gw_key *key, int64_t asked_seconds);

#endif
