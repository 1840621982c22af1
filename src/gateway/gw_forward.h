/* Forwarding calls upstream without a thread per call: one engine thread
 * drives every transfer through libcurl's multi interface, keeping upstream
 * connections alive between calls, and hands the answer back through
 * callbacks as it arrives (docs/gateway.md, "Forwarding"). */
#ifndef LLMLIMIT_GATEWAY_FORWARD_H
#define LLMLIMIT_GATEWAY_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_FORWARD_ERROR_SIZE 256

/* What a data callback answers. */
enum gw_data_verdict {
    GW_DATA_MORE = 0,  /* keep going */
    GW_DATA_PAUSE = 1, /* the bytes were NOT taken: they come again after gw_forward_unpause */
    GW_DATA_ABORT = 2, /* stop the transfer (on_done follows with GW_FORWARD_ABORTED) */
};

/* How a transfer ended. */
enum gw_forward_result {
    GW_FORWARD_OK = 0,         /* the upstream answered in full */
    GW_FORWARD_CANCELLED = -1, /* gw_forward_cancel, or the engine stopping */
    GW_FORWARD_TIMEOUT = -2,   /* the upstream's timeout passed */
    GW_FORWARD_CONNECT = -3,   /* no connection to the upstream */
    GW_FORWARD_FAILED = -4,    /* the connection broke, or a protocol error */
    GW_FORWARD_ABORTED = -5,   /* a callback asked to stop */
    /* The upstream answered what is not an answer: a final status outside
     * 200..599 (curl takes any three digits, and a 101 as final), a body
     * before any final status, a Content-Encoding that cannot be decoded.
     * The error says which, in words that hold nothing of the upstream's
     * address: it may go to the client. */
    GW_FORWARD_INVALID = -6,
};

/* Called on the engine thread, in this order: on_head once the upstream's
 * status and headers are in (not for a transfer that fails before), on_data
 * for each piece of the body, then on_done exactly once. The status on_head
 * gives is always 200..599. The engine asks for no content coding
 * (Accept-Encoding: identity); an upstream that compresses anyway is
 * decoded before on_data sees its bytes (gzip, deflate, and what libcurl
 * was built with: br, zstd), and one it cannot decode ends the transfer
 * with GW_FORWARD_INVALID. */
struct gw_head {
    long status;
    const char *content_type;   /* "" when none; the strings live until on_head returns */
    const char *retry_after;    /* "" when none */
    const char *retry_after_ms; /* "" when none */
    int64_t content_length;     /* what the head announces (before any decoding); -1: none */
    const char *mcp_session_id; /* an MCP server's Mcp-Session-Id; "" when none */
};

struct gw_transfer_ops {
    void (*on_head)(void *context, const struct gw_head *head);
    enum gw_data_verdict (*on_data)(void *context, const char *bytes, size_t length);
    /* error: a short reason when result is not GW_FORWARD_OK. After
     * on_done returns, the transfer is gone: its handle must not be used. */
    void (*on_done)(void *context, enum gw_forward_result result, const char *error);
};

/* The request's method: a POST carries the body, a GET or DELETE none. */
enum gw_method {
    GW_METHOD_POST = 0,
    GW_METHOD_GET,
    GW_METHOD_DELETE,
};

/* How the provider key goes upstream: OpenAI's bearer token, Anthropic's
 * x-api-key header, or Google's x-goog-api-key. */
enum gw_key_header {
    GW_KEY_BEARER = 0,     /* Authorization: Bearer <key> */
    GW_KEY_X_API_KEY,      /* x-api-key: <key> */
    GW_KEY_X_GOOG_API_KEY, /* x-goog-api-key: <key> */
};

#define GW_FORWARD_HEADERS_MAX 4          /* extra header lines of one transfer */
#define GW_FORWARD_HEADER_LENGTH_MAX 1024 /* one such line, "Name: value" */

struct gw_transfer_spec {
    const char *url; /* copied */
    enum gw_method method;
    const char *api_key; /* the provider key; NULL: none; copied */
    enum gw_key_header key_header;
    /* Extra lines, "Name: value" each (printable ASCII, at most
     * GW_FORWARD_HEADER_LENGTH_MAX bytes: the caller checks), copied. */
    const char *headers[GW_FORWARD_HEADERS_MAX];
    uint32_t header_count;
    const char *body; /* POST: NOT copied: valid until on_done; NULL: empty */
    size_t body_length;
    uint32_t timeout_ms;         /* of the whole transfer */
    uint32_t connect_timeout_ms; /* of the connection */
};

struct gw_forward;
struct gw_transfer;

/* Starts the engine thread. tick (NULL: none) is called on it about every
 * tick_interval_ms: the gateway checks there whether waiting clients are
 * still connected. 0 with *out, or -1 with the reason in error. */
int gw_forward_start(struct gw_forward **out, void (*tick)(void *context), void *tick_context,
                     uint32_t tick_interval_ms, char *error, size_t error_size);
/* Cancels every transfer (each gets on_done with GW_FORWARD_CANCELLED),
 * stops the thread and frees the engine. */
void gw_forward_stop(struct gw_forward *engine);

/* Starts a transfer; the callbacks run later on the engine thread. Returns
 * the transfer, or NULL when out of memory (no callback then). Any thread. */
struct gw_transfer *gw_forward_submit(struct gw_forward *engine,
                                      const struct gw_transfer_spec *spec,
                                      const struct gw_transfer_ops *ops, void *context);
/* Asks for the transfer to stop: on_done follows with GW_FORWARD_CANCELLED
 * unless it has ended already. Any thread, but never after on_done has
 * returned (the caller keeps track, under its own lock). */
void gw_forward_cancel(struct gw_forward *engine, struct gw_transfer *transfer);
/* A transfer whose on_data answered GW_DATA_PAUSE goes on. Same rules. */
void gw_forward_unpause(struct gw_forward *engine, struct gw_transfer *transfer);

struct gw_forward_stats {
    uint64_t transfers;       /* submitted so far */
    uint64_t active;          /* not yet done */
    uint64_t connections_new; /* upstream connections opened (keep-alive reuses the rest) */
};

void gw_forward_stats(struct gw_forward *engine, struct gw_forward_stats *out);

#endif
