/* The MCP route's side of the gateway's forwarding (docs/mcp.md): what
 * gateway_call.c and gateway_reply.c ask of an MCP call. Whether a server's
 * message answers the call's tools/call (and so whether its lease is
 * completed or released), the JSON-RPC errors the gateway answers with, and
 * the notifications/cancelled a server gets when its client left. Calls
 * nothing of the gateway's other files, which call it. */
#include "gateway_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exchange.h"
#include "services.h"
#include "util/log.h"

/* ---- answers in JSON-RPC ------------------------------------------------- */

void gateway_mcp_error_body(struct buffer *b, const struct gateway_call *call, unsigned status,
                            const char *code, const char *message)
{
    char data[128];
    snprintf(data, sizeof data, "{\"status\":%u,\"code\":\"%s\"}", status,
             code != NULL ? code : (status >= 500 ? "server_error" : "invalid_request"));
    gw_mcp_error(b, &call->mcp.id, GW_MCP_SERVER_ERROR, message, data);
}

int gateway_mcp_reply(struct exchange *ex, unsigned status, const struct gw_mcp_id *id, int code,
                      const char *message, const char *data_json)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_mcp_error(&b, id, code, message, data_json);
    buffer_append_char(&b, '\n');
    struct http_header headers[2] = {{"Content-Type", "application/json"}};
    size_t count = 1;
    struct gateway_call *call = gateway_call_of(ex);
    if (call != NULL && call->lease_id[0] != '\0')
        headers[count++] = (struct http_header){"x-llmlimit-lease-id", call->lease_id};
    if (b.failed) {
        buffer_free(&b);
        return exchange_error(ex, 503, "out of memory");
    }
    exchange_answer_raw(ex, status, headers, count, b.data, b.length);
    buffer_free(&b);
    return 0;
}

/* ---- the server's answer ------------------------------------------------- */

bool gateway_mcp_event(struct gateway_call *call, const struct gw_sse_event *event)
{
    if (!call->mcp.tool_call || call->mcp_outcome != GW_MCP_NO_ANSWER || !event->complete ||
        event->data == NULL)
        return false;
    call->mcp_outcome = gw_mcp_answer_outcome(event->data, event->data_length, &call->mcp.id);
    return call->mcp_outcome != GW_MCP_NO_ANSWER;
}

bool gateway_mcp_charged(struct gateway_call *call)
{
    if (!call->mcp.tool_call)
        return false;
    bool whole = call->mode == GATEWAY_MODE_BUFFER && call->upstream_result == GW_FORWARD_OK &&
                 call->upstream_status >= 200 && call->upstream_status < 300;
    if (whole && call->mcp_outcome == GW_MCP_NO_ANSWER)
        call->mcp_outcome =
            gw_mcp_answer_outcome(call->answer.data, call->answer.length, &call->mcp.id);
    switch (call->mcp_outcome) {
    case GW_MCP_RESULT:
        return true;
    case GW_MCP_TOOL_ERROR:
    case GW_MCP_RPC_ERROR:
        return call->mcp_charge_errors;
    case GW_MCP_NO_ANSWER:
        break;
    }
    return false;
}

int gateway_mcp_session_key(const char *server, const char *session_id,
                            char out[GW_SHA256_HEX_SIZE])
{
    char text[GW_NAME_LENGTH_MAX + GW_MCP_SESSION_ID_LENGTH_MAX + 2];
    int n = snprintf(text, sizeof text, "%s\n%s", server, session_id);
    uint8_t digest[GW_SHA256_BYTES];
    if (n < 0 || (size_t)n >= sizeof text || sha256_digest(text, (size_t)n, digest) != 0)
        return -1;
    gw_hex_encode(digest, GW_SHA256_BYTES, out);
    return 0;
}

void gateway_mcp_session_made(struct gateway_call *call, const char *session_id)
{
    char id[GW_SHA256_HEX_SIZE];
    if (gateway_mcp_session_key(call->mcp_server->name, session_id, id) == 0)
        (void)gw_owners_remember(call->gateway->mcp_sessions, id, GW_SHA256_HEX_SIZE - 1,
                                 call->key->sha256);
}

void gateway_mcp_note_settled(const struct gateway_call *call)
{
    enum gateway_mcp_stats_outcome outcome = GATEWAY_MCP_STATS_NO_ANSWER;
    bool made = false;
    switch (call->mcp_outcome) {
    case GW_MCP_RESULT:
        outcome = GATEWAY_MCP_STATS_RESULT;
        made = true;
        break;
    case GW_MCP_TOOL_ERROR:
        outcome = GATEWAY_MCP_STATS_TOOL_ERROR;
        made = call->mcp_charge_errors;
        break;
    case GW_MCP_RPC_ERROR:
        outcome = GATEWAY_MCP_STATS_RPC_ERROR;
        made = call->mcp_charge_errors;
        break;
    case GW_MCP_NO_ANSWER:
        break;
    }
    gateway_stats_add_tool_call(&call->gateway->stats, call->mcp_server->name, call->mcp.tool,
                                call->mcp.tool_length, outcome,
                                made ? call->mcp_price_usd_micros : 0);
}

bool gateway_mcp_reply_unanswered(struct exchange *ex, struct gateway_call *call)
{
    if (call->endpoint != GW_ENDPOINT_MCP || !call->mcp.tool_call)
        return false;
    pthread_mutex_lock(&call->mutex);
    bool answered = call->mcp_outcome != GW_MCP_NO_ANSWER || call->upstream_status >= 300;
    pthread_mutex_unlock(&call->mutex);
    if (answered)
        return false;
    log_write(LOG_WARN, "gateway: an MCP server's answer to tools/call is not one", "lease",
              call->lease_id, "server", call->mcp_server->name, NULL);
    gateway_mcp_reply(ex, 502, &call->mcp.id, GW_MCP_SERVER_ERROR,
                      "The MCP server's answer to this tools/call is not a JSON-RPC answer to it; "
                      "nothing was charged.",
                      "{\"status\":502,\"code\":\"upstream_error\"}");
    return true;
}

void gateway_mcp_stream_unanswered(struct gateway_call *call)
{
    if (call->endpoint != GW_ENDPOINT_MCP || !call->mcp.tool_call ||
        call->mcp_outcome != GW_MCP_NO_ANSWER || call->client_gone)
        return;
    buffer_append_str(&call->answer, "event: message\ndata: ");
    gw_mcp_error(&call->answer, &call->mcp.id, GW_MCP_SERVER_ERROR,
                 "The MCP server's stream ended without an answer to this tools/call; nothing "
                 "was charged.",
                 "{\"status\":502,\"code\":\"upstream_error\"}");
    buffer_append_str(&call->answer, "\n\n");
}

/* ---- telling the server its call was cancelled --------------------------- */

struct cancel_note {
    struct buffer body;
    struct gw_forward *engine;
};

static void cancel_head(void *context, const struct gw_head *head)
{
    (void)context;
    (void)head;
}

static enum gw_data_verdict cancel_data(void *context, const char *bytes, size_t length)
{
    (void)context;
    (void)bytes;
    (void)length;
    return GW_DATA_MORE; /* whatever it answers is dropped */
}

static void cancel_done(void *context, enum gw_forward_result result, const char *error)
{
    struct cancel_note *note = context;
    (void)result;
    (void)error;
    buffer_free(&note->body);
    free(note);
}

static const struct gw_transfer_ops cancel_ops = {cancel_head, cancel_data, cancel_done};

void gateway_mcp_cancel_upstream(struct gateway_call *call)
{
    struct cancel_note *note = malloc(sizeof *note);
    if (note == NULL)
        return; /* the server finishes the call unasked: nothing is charged either way */
    buffer_init(&note->body, NULL, 0);
    buffer_append_str(&note->body, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                                   "\"params\":{\"requestId\":");
    buffer_append_str(&note->body, call->mcp.id.text);
    buffer_append_str(&note->body, ",\"reason\":\"the client left\"}}");
    const struct gw_upstream *upstream = call->upstream;
    char url[GW_BASE_URL_LENGTH_MAX + GW_UPSTREAM_PATH_LENGTH_MAX + 1];
    snprintf(url, sizeof url, "%s%s", upstream->base_url, call->upstream_path);
    struct gw_transfer_spec spec = {
        .url = url,
        .method = GW_METHOD_POST,
        .api_key = upstream->api_key,
        .key_header = GW_KEY_BEARER,
        .body = note->body.data,
        .body_length = note->body.length,
        .timeout_ms = upstream->connect_timeout_seconds * 1000u + 5000u,
        .connect_timeout_ms = upstream->connect_timeout_seconds * 1000u,
    };
    /* The client's transport headers (session, version, Accept) as the
     * call sent them. */
    for (uint32_t i = 0; i < call->header_count && i < GW_FORWARD_HEADERS_MAX; i++) {
        if (strncasecmp(call->header_lines[i], "last-event-id:", 14) != 0)
            spec.headers[spec.header_count++] = call->header_lines[i];
    }
    if (note->body.failed ||
        gw_forward_submit(call->gateway->engine, &spec, &cancel_ops, note) == NULL) {
        buffer_free(&note->body);
        free(note);
    }
}
