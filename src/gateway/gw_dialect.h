/* The one interface every dialect of the gateway implements, as struct
 * backend_ops is for backends: its routes and surfaces, where a call's
 * virtual key comes from, what goes upstream with it and how its body is
 * rewritten, its estimate and usage readers, how a whole answer's output
 * is counted, its error shape and its rate-limit headers. One file per
 * dialect (gw_dialect_<name>.c), one table of them (gw_dialects.c): the
 * server builds its gateway routes from that table and names no dialect,
 * and the calls that take an endpoint look it up there (gw_dispatch.c;
 * docs/architecture.md, "Dialects"). */
#ifndef LLMLIMIT_GATEWAY_DIALECT_H
#define LLMLIMIT_GATEWAY_DIALECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_answer.h"
#include "gw_config.h"
#include "gw_endpoint.h"
#include "gw_estimate.h"
#include "gw_forward.h"
#include "gw_request.h"
#include "gw_sse.h"
#include "gw_usage.h"
#include "util/buffer.h"

struct gw_walk;
struct gw_dialect;

/* What the server does with a route's request. */
enum gw_route_kind {
    GW_ROUTE_CALL = 0,      /* a model's call, the model named in the JSON body */
    GW_ROUTE_MODEL_IN_PATH, /* a model's call, model and method in the path's {item} */
    GW_ROUTE_STORED,        /* an object an upstream stored for the key, its id the {item} */
    GW_ROUTE_MODELS,        /* the list of the models the key may call */
    GW_ROUTE_TOOLS,         /* a tool server's JSON-RPC, passed through (docs/mcp.md) */
};

/* A route's methods (GET answers HEAD too). */
enum {
    GW_ROUTE_POST = 1,
    GW_ROUTE_GET = 2,
    GW_ROUTE_DELETE = 4,
};

/* One route a client calls, as the server's router takes it. */
struct gw_route {
    const char *name; /* its label in metrics and logs */
    const char *path; /* exact, or with item the prefix (ending in '/') of {item} */
    unsigned methods; /* GW_ROUTE_* bits */
    bool item;
    enum gw_route_kind kind;
    enum gw_endpoint endpoint; /* CALL and STORED: the surface it calls */
    const struct gw_dialect *dialect;
};

/* One surface (an endpoint as estimate, usage and the stream know it). */
struct gw_surface {
    enum gw_endpoint endpoint;
    const char *route;         /* as clients call it, for messages */
    const char *upstream_path; /* after the upstream's base_url */
    bool charged;              /* reserved and charged; else forwarded only */
    bool checks_references;    /* ids the request names must be the key's (gw_references.h) */
    bool stores_answer;        /* the answer's ids become the key's */

    /* The request as it goes upstream (gw_request.h): the members that
     * bound its output, the first written when the call sets none (NULL:
     * none written; a dialect's own rewrite reads only whether there are
     * any); whether a stream asks for its usage (stream_options); whether
     * the route never streams ("stream": true passes, but no stream is
     * read). */
    const char *const *bound_fields;
    bool asks_stream_usage;
    bool never_streams;
    /* A whole answer (gw_answer.h): the output counted from its text
     * (NULL: 0); no_output: it generates none, so an answer that cannot be
     * read is charged no output either (embeddings). */
    gw_answer_output_fn output_tokens;
    bool no_output;
    /* A stream that ended without its final usage (gw_sse.h): the usage it
     * told so far; NULL: only the counted output. */
    gw_sse_cut_fn stream_cut;
};

/* A limit family of the rate-limit headers, and the figures of its
 * tightest limit. */
enum gw_limit_family {
    GW_FAMILY_REQUESTS = 0,
    GW_FAMILY_TOKENS,
    GW_FAMILY_INPUT_TOKENS,
    GW_FAMILY_OUTPUT_TOKENS,
};

struct gw_limit_figure {
    uint64_t capacity;
    bool remaining_known;
    int64_t remaining;
    bool reset_known;
    int64_t reset_at_unix_ms;
};

typedef void (*gw_header_add_fn)(void *context, const char *name, const char *value);

/* An error of the gateway's own (a denial, a refusal, a bad request). */
struct gw_error_args {
    unsigned status;
    const char *type; /* OpenAI's error type; NULL: from the status */
    const char *code; /* invalid_api_key, key_revoked, insufficient_quota, ...; or NULL */
    const char *message;
    int64_t retry_after_ms;         /* 0: no wait said */
    const char *const *denied_keys; /* the limits a 429 did not fit */
    uint32_t denied_count;
};

/* A client header passed upstream as it came, or value_default when the
 * client sent none (NULL: nothing then). */
struct gw_passed_header {
    const char *name;
    const char *value_default;
};

#define GW_PASSED_HEADERS_MAX 4
/* The {item} of a route that names its model in the path: the model's
 * name and a method. */
#define GW_PATH_TARGET_LENGTH_MAX (GW_NAME_LENGTH_MAX + 32)

/* The words most dialects share. */
#define GW_DIALECT_UNKNOWN_KEY_MESSAGE                                                             \
    "Incorrect API key provided. Send a virtual key of this gateway as 'Authorization: Bearer "    \
    "<key>' or 'x-api-key: <key>'."
#define GW_DIALECT_INVALID_JSON_PREFIX "We could not parse the JSON body of your request: "

struct gw_dialect {
    const char *name;
    enum gw_api api; /* the upstreams that serve its surfaces */
    const struct gw_route *routes;
    uint32_t route_count;
    const struct gw_surface *surfaces;
    uint32_t surface_count;

    /* Where the virtual key comes from besides "Authorization: Bearer":
     * a header (NULL: none of its own; every route takes every dialect's
     * header) and a query argument read on this dialect's routes only
     * (NULL: none; never logged, never sent upstream). */
    const char *key_header;
    const char *key_query;
    const char *unknown_key_message; /* the 401 of no known key */

    /* Upstream: how its key goes, which client headers go with the call,
     * whether the client's query goes (false: the path carries its own). */
    enum gw_key_header upstream_key;
    struct gw_passed_header passed_headers[GW_PASSED_HEADERS_MAX]; /* ended by a NULL name */
    bool passes_query;

    /* Words for the person behind a call. */
    const char *served_routes;       /* the routes of its models, for a 400 wrong_surface */
    const char *too_large_advice;    /* what shrinks a call that can never fit */
    const char *invalid_json_prefix; /* before the parser's reason */

    /* A model named in the path (GW_ROUTE_MODEL_IN_PATH): the model's
     * name in item and the surface; 0, or -1 with error. Then the path
     * upstream; 0, or -1 with error. stream_query (name=value) asks for
     * events when the client's query holds it. */
    int (*target)(const char *item, size_t length, const char **name, size_t *name_length,
                  enum gw_endpoint *endpoint, bool *stream, char *error, size_t error_size);
    int (*upstream_path)(const struct gw_model *model, enum gw_endpoint endpoint, bool stream,
                         bool events, char *path, size_t size, char *error, size_t error_size);
    const char *item_pattern;
    const char *stream_query_name;
    const char *stream_query_value;

    /* The models key may call, as its list route answers them
     * (GW_ROUTE_MODELS); NULL: it has no such route. */
    void (*model_list)(struct buffer *b, const struct gw_config *config, const struct gw_key *key);

    /* The request's estimate, the answer's usage and the stream's events
     * (gw_estimate.h, gw_usage.h, gw_sse.h). */
    int (*estimate)(struct gw_walk *w, const struct jdoc_value *body, enum gw_endpoint endpoint,
                    const struct gw_model *model, struct gw_estimate *out);
    gw_usage_read_fn usage;
    /* The reader of a stream's events (gw_sse.h); NULL: not read. */
    gw_sse_read_fn stream_event;
    /* The body upstream when it is not a JSON object naming its model
     * (gw_request.h); NULL: that one. A whole answer's tokens when not
     * its usage or its counted text (gw_answer.h); NULL: those. */
    gw_request_rewrite_fn rewrite;
    gw_answer_tokens_fn answer_tokens;

    /* Error shapes: the gateway's own; one of the HTTP layer's or the
     * server's (code as given, reason NULL or a sentence); a stream's
     * error event (gw_error_event). */
    void (*error)(struct buffer *b, const struct gw_error_args *args);
    void (*plain_error)(struct buffer *b, unsigned status, const char *code, const char *reason);
    void (*error_event)(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                        const char *message);

    /* Rate-limit headers in its own form, beside the x-ratelimit-* every
     * surface carries; NULL: none. */
    void (*limit_headers)(enum gw_limit_family family, const struct gw_limit_figure *figure,
                          int64_t now_unix_ms, gw_header_add_fn add, void *context);
};

/* The dialects (gw_dialects.c). */
uint32_t gw_dialect_count(void);
const struct gw_dialect *gw_dialect_at(uint32_t index);

/* The dialect of a surface; never NULL. */
const struct gw_dialect *gw_dialect_of(enum gw_endpoint endpoint);
/* The surface's row; never NULL. */
const struct gw_surface *gw_surface_of(enum gw_endpoint endpoint);
/* The first dialect whose upstreams speak api (how the upstream takes its
 * key, which headers go to it); never NULL. */
const struct gw_dialect *gw_dialect_for_api(enum gw_api api);

/* OpenAI's plain error: code as given, a sentence for the HTTP layer's
 * codes (shared by the dialects that answer in OpenAI's shape). */
void gw_dialect_openai_plain_error(struct buffer *b, unsigned status, const char *code,
                                   const char *reason);
/* `data: {"error":{...}}`, as chat and completions streams break (MCP's
 * event streams too). */
void gw_dialect_openai_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                                   const char *message);

#endif
