/* What the files of the gateway's HTTP side share (gateway.c: the routes
 * and the reserve; gateway_call.c: forwarding, streaming, settling;
 * gateway_reply.c: answers in the shape of the route's dialect and
 * rate-limit headers;
 * gateway_stats.c: figures per model and caller). */
#ifndef LLMLIMIT_SERVER_GATEWAY_INTERNAL_H
#define LLMLIMIT_SERVER_GATEWAY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/bounds.h"
#include "exchange.h"
#include "gateway.h"
#include "http/http.h"
#include "gateway/gw_config.h"
#include "gateway/gw_dialect.h"
#include "gateway/gw_estimate.h"
#include "gateway/gw_forward.h"
#include "gateway/gw_mcp.h"
#include "gateway/gw_observed.h"
#include "gateway/gw_owners.h"
#include "gateway/gw_plan.h"
#include "gateway/gw_secret.h"
#include "gateway/gw_request.h"
#include "gateway/gw_sse.h"
#include "gateway/gw_usage.h"
#include "util/arena.h"
#include "util/buffer.h"
#include "wait/wait.h"

/* ---- figures per (model, caller): gateway_stats.c */

#define GATEWAY_STATS_SERIES_MAX                                                                   \
    1000 /* model/caller pairs with their own series; the rest: "other" */
#define GATEWAY_LATENCY_BUCKETS 14

struct gateway_stats_series {
    char model[GW_NAME_LENGTH_MAX + 1];
    char caller[CALLER_LENGTH_MAX + 1];
    char team[GW_TEAM_LENGTH_MAX + 1]; /* the key's, "" when it has none */
    uint64_t calls;                    /* forwarded */
    uint64_t denials;                  /* 429: a limit did not fit */
    uint64_t upstream_errors;          /* the upstream answered 4xx/5xx, or failed */
    uint64_t input_tokens;             /* as settled */
    uint64_t output_tokens;
    uint64_t cost_usd_micros;
    uint64_t waited_calls; /* whose reserve waited for capacity, admitted or not */
    uint64_t waited_ms;    /* how long those reserves waited */
    uint64_t latency_buckets[GATEWAY_LATENCY_BUCKETS + 1]; /* upstream, to the first byte */
    uint64_t latency_sum_us;
};

/* MCP tool calls per (server, tool) (docs/mcp.md): a bounded set, the rest
 * under server="other", tool="other". */
#define GATEWAY_MCP_STATS_SERIES_MAX 256

enum gateway_mcp_stats_outcome {
    GATEWAY_MCP_STATS_RESULT = 0, /* a result: charged its price */
    GATEWAY_MCP_STATS_TOOL_ERROR, /* a result with isError */
    GATEWAY_MCP_STATS_RPC_ERROR,  /* a JSON-RPC error from the server */
    GATEWAY_MCP_STATS_NO_ANSWER,  /* none (a failure, a timeout, a client gone) */
    GATEWAY_MCP_STATS_DENIED,     /* a limit did not fit: never forwarded */
    GATEWAY_MCP_STATS_OUTCOMES,
};

struct gateway_mcp_series {
    char server[GW_NAME_LENGTH_MAX + 1];
    char tool[GW_NAME_LENGTH_MAX + 1];
    uint64_t calls[GATEWAY_MCP_STATS_OUTCOMES];
    uint64_t cost_usd_micros; /* as settled */
};

struct gateway_stats {
    pthread_mutex_t mutex;
    struct gateway_stats_series *series; /* GATEWAY_STATS_SERIES_MAX + 1 ("other" last) */
    uint32_t count;
    struct gateway_mcp_series *mcp; /* GATEWAY_MCP_STATS_SERIES_MAX + 1 ("other" last) */
    uint32_t mcp_count;
};

int gateway_stats_init(struct gateway_stats *stats);
void gateway_stats_free(struct gateway_stats *stats);

/* What one call did, added once it is settled (or denied). */
struct gateway_stats_delta {
    bool forwarded;
    bool denied;
    bool upstream_error;
    int64_t latency_us; /* < 0: no first byte */
    uint64_t input_tokens;
    uint64_t output_tokens;
    uint64_t cost_usd_micros;
    int64_t waited_ms; /* > 0: the call's reserve waited this long */
};

/* team: the key's team, NULL when it has none. */
void gateway_stats_add(struct gateway_stats *stats, const char *model, const char *caller,
                       const char *team, const struct gateway_stats_delta *delta);

/* One tool call of server's tool (tool_length bytes, any bytes: the
 * client's) ended with outcome, cost_usd_micros charged. */
void gateway_stats_add_tool_call(struct gateway_stats *stats, const char *server, const char *tool,
                                 size_t tool_length, enum gateway_mcp_stats_outcome outcome,
                                 uint64_t cost_usd_micros);

/* ---- the gateway --------------------------------------------------------- */

/* What goes after an upstream's base_url: the route's path (with a
 * response id) and the client's query; a longer one is refused (400). */
#define GW_UPSTREAM_PATH_LENGTH_MAX 2048
/* A whole answer up to this size goes to the client with its head in one
 * write (one system call, one TCP segment when it fits); a larger one is
 * given from its block as the client's socket takes it (gateway_reply.c). */
#define GW_ANSWER_ONE_WRITE_BYTES (16u << 10)
/* A virtual key sent in the query (a dialect's key_query): a longer one
 * is refused (400), as no key of the gateway is that long. */
#define GW_QUERY_KEY_LENGTH_MAX 512

struct gateway_call;
struct keys_record;

struct gateway {
    struct server *server;
    char config_path[4096];
    pthread_mutex_t config_mutex; /* swapping `config` and retaining it */
    struct gw_config *config;
    /* The forwarding thread: one for every call (with a second one, a
     * thread per core, the gateway benchmark's p99 was worse). */
    struct gw_forward *engine;
    pthread_mutex_t calls_mutex; /* the calls list and `quiescing` */
    pthread_cond_t calls_idle;   /* signalled when `calls` becomes empty */
    struct gateway_call *calls;  /* forwarded, not yet settled */
    uint32_t call_count;
    bool quiescing;
    struct gateway_stats stats;
    /* Kept across reloads: the outputs of recent calls per (model,
     * caller), for models whose output_reservation is "observed", and
     * which key created which Responses id, and which item id. */
    struct gw_observed *observed;
    struct gw_owners *owners;
    struct gw_owners *items;
    /* Which key opened which MCP session (its server and id, hashed), so
     * that no other key uses it (docs/mcp.md); at most GW_MCP_SESSIONS_MAX. */
    struct gw_owners *mcp_sessions;
    /* Ended calls kept for the next ones: a fresh malloc of one (about
     * 30 KiB) per call made glibc consolidate its small-chunk bins every
     * time, as exchanges did before their pool (src/server/exchange.c). */
    pthread_mutex_t pool_mutex;
    struct gateway_call *pool;
    uint32_t pool_count;
    /* The bytes allocated for whole (not streamed) answers, from their
     * upstream's head (or first byte) until their clients have taken the
     * last (or left): at most answer_bytes_max
     * (--max-gateway-answer-bytes). Atomic. */
    uint64_t answer_bytes_held;
    uint64_t answer_bytes_max;
    /* Calls waiting for the limits their templates' defaults create
     * (gateway_defaults.c), and whether the offload thread has the job
     * that creates them queued or running. */
    pthread_mutex_t defaults_mutex;
    struct gateway_call *defaults_queue;
    bool defaults_job;
};

/* The config in force, retained: release it with gw_config_release. */
struct gw_config *gateway_config_get(struct gateway *gateway);

/* The identity gw_owners remembers a Responses id under: the key that
 * created it, on the upstream that holds it. 0, or -1 (libcrypto failed). */
int gateway_owner_digest(const struct gw_key *key, const struct gw_upstream *upstream,
                         uint8_t out[GW_SHA256_BYTES]);

/* ---- one call ------------------------------------------------------------ */

/* How the creation of a call's missing limits from their templates'
 * defaults went (gateway_defaults.c). */
enum gateway_defaults_outcome {
    GATEWAY_DEFAULTS_PENDING = 0,
    GATEWAY_DEFAULTS_READY,        /* every limit with a default exists now: reserve again */
    GATEWAY_DEFAULTS_MISSING,      /* defaults_key has no default and does not exist */
    GATEWAY_DEFAULTS_REJECTED,     /* the registry refused defaults_key (defaults_error) */
    GATEWAY_DEFAULTS_WRITE_FAILED, /* limits.json could not be written: nothing created */
    GATEWAY_DEFAULTS_UNAVAILABLE,  /* the backend failed (or memory ran out) */
    GATEWAY_DEFAULTS_BUSY,         /* the offload thread was full, or stopping */
};

/* Where a call is in its life; it only moves forward (gateway_call_advance
 * asserts it). The mode (buffer or stream) and the exchange's side (waiting
 * for the answer, woken, streaming) are kept beside it. */
enum gateway_call_state {
    GATEWAY_CALL_PLANNED = 0, /* checked, estimated, its reserve planned or made */
    GATEWAY_CALL_FORWARDED,   /* handed to the engine: settling the lease is the transfer's */
    GATEWAY_CALL_ANSWERED,    /* the upstream is done (answered, failed or cut) */
    GATEWAY_CALL_SETTLING,    /* its lease is being completed or released */
    GATEWAY_CALL_SETTLED,     /* completed or released: the end is given to the client */
};

enum gateway_call_mode {
    GATEWAY_MODE_UNDECIDED = 0, /* no answer head yet */
    GATEWAY_MODE_BUFFER,        /* the whole answer is read, then given */
    GATEWAY_MODE_STREAM,        /* events are relayed as they come */
};

/* One gateway call, shared by its exchange (until the transport frees it
 * after its answer) and the work in flight (reserve, transfer, settle).
 * Freed when the last reference goes. */
struct gateway_call {
    pthread_mutex_t mutex; /* everything below that other threads touch */
    uint32_t references;
    struct gateway *gateway;
    struct gw_config *config; /* retained */
    const struct gw_key *key;
    /* The version of a Keys API key the call was admitted with (key
     * points into it), held until the call ends; NULL for gateway.json's. */
    struct keys_record *key_record;
    const struct gw_model *model; /* NULL on the routes of a stored response */
    const struct gw_upstream *upstream;
    enum gw_endpoint endpoint;
    bool charged;              /* reserved and settled; false: forwarded only (count_tokens, ...) */
    struct exchange *exchange; /* NULL once the transport freed it */

    /* before the call */
    struct gw_estimate estimate;
    struct gw_plan plan;
    /* Where and how it goes upstream, besides the body: the path after
     * base_url (with the client's query), the method, the header lines
     * (Anthropic's version and beta). Not zeroed for a new call: the
     * counts say what is set. */
    char upstream_path[GW_UPSTREAM_PATH_LENGTH_MAX + 1];
    char header_lines[GW_FORWARD_HEADERS_MAX][GW_FORWARD_HEADER_LENGTH_MAX + 1];
    /* From here on zeroed for a new call (call_new). */
    bool stream;               /* the client asked for a stream */
    bool client_include_usage; /* ... and for the usage chunk itself */
    uint32_t header_count;
    enum gw_method method;
    char lease_id[LEASE_ID_LENGTH_MAX + 1];
    uint32_t attempt; /* of this X-Request-Id: 0, or the retries after a denial or a release */
    /* Its limits' defaults: created at most once a call, after a reserve
     * that named a missing key whose template has one. */
    bool defaults_tried;
    enum gateway_defaults_outcome defaults_outcome;
    uint8_t defaults_key; /* the plan's key the outcome names */
    char defaults_error[160];
    struct gateway_call *next_default; /* in gateway.defaults_queue */
    /* Responses: remember the id it creates and its items' ids (or the
     * items a stored response's read lists), for the key (and upstream)
     * that made it (gateway_owner_digest); not for "store": false. */
    bool remember_response;
    bool response_remembered;
    uint8_t owner_digest[GW_SHA256_BYTES];
    struct reserve_request reserve;
    struct reserve_result reserve_result;
    struct requirement_state states[GW_LIMITS_MAX];
    int64_t wait_ms;           /* how long its reserve may wait (Prefer: wait) */
    uint8_t priority;          /* among the reserves waiting on its limits */
    bool reserving;            /* its reserve went to the wait layer (ticket in use) */
    struct wait_ticket ticket; /* ... while it waits */
    struct buffer upstream_body;

    /* forwarding */
    enum gateway_call_state state;
    struct gw_transfer *transfer; /* NULL when none is running */
    bool waiting;                 /* the exchange waits for the answer (or its head) */
    bool woken;                   /* ... and has been woken */
    enum gateway_call_mode mode;
    long upstream_status;
    char upstream_content_type[GW_CONTENT_TYPE_LENGTH_MAX + 1];
    char upstream_retry_after[GW_RETRY_AFTER_LENGTH_MAX + 1];    /* relayed on its errors */
    char upstream_retry_after_ms[GW_RETRY_AFTER_LENGTH_MAX + 1]; /* ... */
    enum gw_forward_result upstream_result;
    char upstream_error[GW_FORWARD_ERROR_SIZE];
    bool upstream_paused;
    bool client_gone;
    int64_t forwarded_ns;
    int64_t first_byte_ns;

    /* the answer */
    struct buffer answer; /* buffered: the whole body; stream: bytes for the client */
    size_t answer_sent;   /* bytes of `answer` the client has been given */
    bool pumping_answer;  /* buffered: being given (gateway_reply_answer) */
    /* stream: the event that ends it ([DONE], message_stop,
     * response.completed, ...) and any after it, given once the lease is
     * settled */
    struct buffer held;
    bool streaming;    /* stream: the head is out; what comes wakes the exchange */
    bool stream_ended; /* stream: nothing more will come */
    bool answer_too_large;
    /* The answer would have passed the gateway's answer_bytes_max: while
     * it came (refused, charged), or before it was forwarded (not sent). */
    bool answer_memory_full;
    bool memory_full_before;
    bool event_too_large;          /* stream: an event over GW_SSE_EVENT_BYTES_MAX */
    uint64_t answer_bytes_counted; /* its part of gateway.answer_bytes_held: answer's block */
    struct gw_sse sse;
    struct gw_sse_output output;

    /* settling */
    struct complete_request complete;
    struct complete_result complete_result;
    struct actual actuals[GW_LIMITS_MAX];
    struct release_request release;
    struct release_result release_result;
    struct gw_tokens reserved; /* what the reserve was made of */
    struct gw_tokens used;
    bool used_from_usage; /* `used` is the upstream's usage of a call that ended properly */
    /* Answered upstream but not readable (too large, past the answers'
     * memory, an encoding not decoded): completed at its reservation. */
    bool at_reservation;
    uint64_t cost_usd_micros;

    /* MCP (gateway_mcp.c): the server of a call on /mcp/{server}, the
     * tools/call it carries (mcp.tool_call), that call's price and rule,
     * how the server answered it, and the server's Mcp-Session-Id. */
    const struct gw_mcp_server *mcp_server;
    struct gw_mcp_request mcp;
    uint64_t mcp_price_usd_micros;
    bool mcp_charge_errors;
    enum gw_mcp_outcome mcp_outcome;
    char upstream_session_id[GW_MCP_SESSION_ID_LENGTH_MAX + 1];

    bool linked; /* in gateway.calls: forwarded, not yet settled */
    struct gateway_call *previous_active;
    struct gateway_call *next_active;
    struct gateway_call *next_free; /* in gateway.pool */
};

/* Moves the call on to `to` (call->mutex held): never back, never twice. */
void gateway_call_advance(struct gateway_call *call, enum gateway_call_state to);

/* A new call for the exchange (NULL: out of memory), holding config and
 * key_record (NULL or a Keys API key's: the caller's references are taken)
 * and the exchange's reference: freed when the exchange is (its cleanup)
 * and the work in flight let go. */
struct gateway_call *gateway_call_new(struct exchange *exchange, struct gw_config *config,
                                      const struct gw_key *key, struct keys_record *key_record,
                                      enum gw_endpoint endpoint);

/* The call of an exchange of a gateway route: its handler_state, set by
 * gateway_call_new (NULL before, and once its cleanup let it go). */
static inline struct gateway_call *gateway_call_of(const struct exchange *exchange)
{
    return exchange->handler_state;
}

/* References: the caller holds one more / drops one (the last frees). */
void gateway_call_retain(struct gateway_call *call);
void gateway_call_release(struct gateway_call *call);

/* gateway_call.c: after an allowed reserve, forwards the call; the
 * exchange waits until the answer (or its head, for a stream). */
int gateway_call_forward(struct exchange *exchange, struct gateway_call *call);
/* The exchange is being freed: forget it, cancel what is still forwarding. */
void gateway_call_exchange_gone(struct gateway_call *call);
/* on_gone of a gateway exchange: its client closed the connection. */
void gateway_call_client_gone(struct http_exchange *exchange);

/* ---- what gateway.c shares with the other routes' files ---------------- */

/* The config in force (retained: the caller releases it) and the caller's
 * key; NULL with the answer given (no gateway, 401). */
const struct gw_key *gateway_route_start(struct exchange *exchange, struct gw_config **config_out,
                                         struct keys_record **record);
/* The call's lease id (attempt 0; gateway.c's lease_id_of). 0, or -1. */
int gateway_lease_id(struct exchange *exchange, const char *caller, char *out, size_t out_size);
/* Prefer: wait and x-llmlimit-priority for the call; 0, or -1 with the
 * 400 given. */
int gateway_call_wait(struct exchange *exchange, struct gateway_call *call);
/* A wait in words for the person who reads a denial: "250 ms", "42 s",
 * "28 days 5 h". */
void gateway_wait_in_words(int64_t ms, char *out, size_t size);
/* As exchange_call_backend's call: the call's reserve through the wait layer. */
void gateway_reserve_start(struct exchange *exchange);

/* ---- MCP: gateway_mcp_answer.c (the route: gateway_mcp.c) --------------- */

/* A settled tools/call into the gateway's figures: its outcome, and its
 * price when it was charged. */
void gateway_mcp_note_settled(const struct gateway_call *call);
/* The server of call answered with session id (2xx): remembered as the
 * call's key's. */
void gateway_mcp_session_made(struct gateway_call *call, const char *session_id);
/* The id under which (server, session) is remembered: 64 hex digits. -1
 * when no digest could be made. */
int gateway_mcp_session_key(const char *server, const char *session_id,
                            char out[GW_SHA256_HEX_SIZE]);

/* A JSON-RPC error answer (id: the request's, or NULL for null) with its
 * code, message and data (JSON text or NULL). 0. */
int gateway_mcp_reply(struct exchange *exchange, unsigned status, const struct gw_mcp_id *id,
                      int code, const char *message, const char *data_json);

/* An event of an MCP server's stream (call->mutex held): whether it is
 * the answer to the call's tools/call (held, like a stream's end, until
 * the lease is settled). */
bool gateway_mcp_event(struct gateway_call *call, const struct gw_sse_event *event);
/* At settling (call->mutex held): whether the tools/call is charged (its
 * result, or an error of a tool that charges errors). */
bool gateway_mcp_charged(struct gateway_call *call);
/* A whole 2xx answer that does not answer the call's tools/call: the
 * JSON-RPC error given instead (true), or false (answer it as it came). */
bool gateway_mcp_reply_unanswered(struct exchange *exchange, struct gateway_call *call);
/* A tools/call's event stream ended without its answer (call->mutex
 * held, the lease settled): a JSON-RPC error event for its id is added
 * to what the client gets, so that it does not wait for an answer that
 * will never come. Nothing for any other call. */
void gateway_mcp_stream_unanswered(struct gateway_call *call);
/* The client of a forwarded tools/call left: tell the server
 * (notifications/cancelled), fire and forget. */
void gateway_mcp_cancel_upstream(struct gateway_call *call);
/* The JSON-RPC error that answers the call's request (its id). */
void gateway_mcp_error_body(struct buffer *b, const struct gateway_call *call, unsigned status,
                            const char *code, const char *message);

/* ---- limits from their templates' defaults: gateway_defaults.c ---------- */

void gateway_defaults_init(struct gateway *gateway);
void gateway_defaults_free(struct gateway *gateway);
/* Whether the key the call's reserve found missing (unknown_limit_key) has
 * a template with a default, and the call has not created its defaults
 * yet. */
bool gateway_defaults_apply(const struct gateway_call *call);
/* As exchange_call_backend's call: creates (on the offload thread) every
 * limit with a default the call's plan reserves that does not exist, and
 * sets defaults_outcome before the exchange is woken. */
void gateway_defaults_create(struct exchange *exchange);

/* ---- answers: gateway_reply.c -------------------------------------------- */

#define GATEWAY_HEADERS_MAX 32

/* An answer's headers, with room for their names and values. */
struct gateway_headers {
    struct http_header list[GATEWAY_HEADERS_MAX];
    char names[GATEWAY_HEADERS_MAX][64];
    char values[GATEWAY_HEADERS_MAX][GW_CONTENT_TYPE_LENGTH_MAX + 64];
    size_t count;
};

/* Adds a header; name and value are copied. */
void gateway_headers_add(struct gateway_headers *headers, const char *name, const char *value);

/* An error in the shape of the route's surface: OpenAI's
 * {"error":{"message","type","param","code"}}, or on the Messages routes
 * Anthropic's {"type":"error","error":{"type","message"}} (its type from
 * the status). retry_after_ms > 0 adds Retry-After and retry-after-ms;
 * x-should-retry: false goes on an answer a retry cannot change
 * (gw_should_not_retry: a 4xx, a 429 more than 60 s away). */
int gateway_reply_error(struct exchange *exchange, unsigned status, const char *type,
                        const char *code, int64_t retry_after_ms, const char *format, ...)
    __attribute__((format(printf, 6, 7)));
/* The same with x-should-retry: false and no retry delay: for a call that
 * was charged although its answer could not be given, where an SDK's
 * automatic retry would be charged again. */
int gateway_reply_error_no_retry(struct exchange *exchange, unsigned status, const char *type,
                                 const char *code, const char *format, ...)
    __attribute__((format(printf, 5, 6)));
/* The 429 of a call whose reserve was denied for capacity: the same, with
 * the reserve's retry and the rate-limit headers of the limits that did
 * not fit. */
int gateway_reply_denied(struct exchange *exchange, struct gateway_call *call, const char *type,
                         const char *code, const char *format, ...)
    __attribute__((format(printf, 5, 6)));
/* Adds x-llmlimit-lease-id and the x-ratelimit-* headers of the call. */
void gateway_reply_headers(struct gateway_headers *headers, const struct gateway_call *call,
                           int64_t now_unix_ms);
/* The answer of a call that did not stream: the upstream's body as it
 * came, its status and content type, and the call's headers; given in
 * pieces as the client takes them (the exchange's on_wake). */
int gateway_reply_answer(struct exchange *exchange, struct gateway_call *call);
/* Begins the streamed answer: the head now, events as they come. */
int gateway_reply_stream(struct exchange *exchange, struct gateway_call *call);

#endif
