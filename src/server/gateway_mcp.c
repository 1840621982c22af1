/* The MCP route, /mcp/{server} (docs/mcp.md): MCP's Streamable HTTP
 * transport passed through to the team's MCP server with the server's own
 * credential, except that each tools/call first reserves every limit its
 * templates name, all or nothing, and is settled by the server's answer:
 * completed at the tool's price for a result, released for an error
 * (unless the tool charges errors), released when the client leaves.
 * Forwarding, streaming and settling are the gateway's (gateway_call.c),
 * reading the server's answers gateway_mcp_answer.c's; this file takes the
 * request. */
#include "gateway_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activity.h"
#include "core/clock.h"
#include "gateway/gw_endpoint.h"
#include "gateway/gw_error.h"
#include "keys.h"
#include "router.h"
#include "exchange.h"
#include "services.h"

/* The denial of a tools/call: JSON-RPC error -32000 naming the limits, with
 * data.retry_after_ms and data.denied_keys; HTTP 200, as any answer to a
 * request the transport carried. Nothing reached the server. */
static int reply_denied(struct exchange *ex, struct gateway_call *call)
{
    gateway_stats_add_tool_call(&call->gateway->stats, call->mcp_server->name, call->mcp.tool,
                                call->mcp.tool_length, GATEWAY_MCP_STATS_DENIED, 0);
    const struct reserve_result *r = &call->reserve_result;
    char names[1024] = "", number[24];
    size_t used = 0;
    /* data: every denied key, escaped (a key may hold '"' or '\\': the
     * tool's name under {tool} is the client's). */
    struct buffer data;
    buffer_init(&data, NULL, 0);
    snprintf(number, sizeof number, "%" PRId64, r->retry_after_ms);
    buffer_append_str(&data, "{\"retry_after_ms\":");
    buffer_append_str(&data, number);
    buffer_append_str(&data, ",\"denied_keys\":[");
    for (uint32_t i = 0; i < r->denied_count; i++) {
        const struct requirement *req = &call->reserve.requirements[r->denied_index[i]];
        if (i > 0)
            buffer_append_char(&data, ',');
        gw_json_string(&data, req->key, req->key_length);
        int n = snprintf(names + used, sizeof names - used, "%s'%s'", i > 0 ? ", " : "", req->key);
        if (n > 0 && (size_t)n < sizeof names - used)
            used += (size_t)n;
    }
    buffer_append_str(&data, "]}");
    buffer_append_char(&data, '\0');
    char message[1400], wait[64];
    gateway_wait_in_words(r->retry_after_ms, wait, sizeof wait);
    snprintf(message, sizeof message,
             "Limit reached: %s cannot take this call of the tool '%s' now; it has room again in "
             "%s. The tool was not called.",
             names, call->mcp.tool, wait);
    int result = gateway_mcp_reply(ex, 200, &call->mcp.id, GW_MCP_SERVER_ERROR, message,
                                   data.failed ? NULL : data.data);
    buffer_free(&data);
    return result;
}

/* A reserve that ended without a capacity answer: say why, in JSON-RPC. */
static int reply_reserve_error(struct exchange *ex, struct gateway_call *call)
{
    const struct reserve_result *r = &call->reserve_result;
    char message[512];
    const char *key = r->error_index < call->reserve.requirement_count
                          ? call->reserve.requirements[r->error_index].key
                          : "";
    unsigned status = 400;
    switch (r->error) {
    case BACKEND_UNKNOWN_LIMIT_KEY:
        snprintf(message, sizeof message,
                 "The gateway's limit '%s' is not defined: an operator must create it, or give "
                 "its template in gateway.json a \"default\". The tool was not called.",
                 key);
        break;
    case BACKEND_EXCEEDS_CAPACITY:
        snprintf(message, sizeof message,
                 "This tool call can never fit '%s': its price is more than the limit's whole "
                 "capacity. The tool was not called.",
                 key);
        break;
    case BACKEND_LIMIT_DECREASING:
        snprintf(message, sizeof message,
                 "The limit '%s' is being lowered; retry in %" PRId64 " ms.", key,
                 r->retry_after_ms);
        status = 200;
        break;
    case BACKEND_LEASE_CONFLICT:
        snprintf(message, sizeof message, "X-Request-Id was used for another request.");
        status = 409;
        break;
    default:
        snprintf(message, sizeof message,
                 "The limit backend is unavailable; retry the call. The tool was not called.");
        status = 503;
        break;
    }
    return gateway_mcp_reply(ex, status, &call->mcp.id, GW_MCP_SERVER_ERROR, message, NULL);
}

/* ---- the reserve of a tools/call ---------------------------------------- */

_Static_assert(GW_NAME_LENGTH_MAX <= AUDIT_NAME_LENGTH_MAX,
               "a server's and a tool's names fit the audit log's");

static int after_reserve(struct exchange *ex);

static int after_defaults(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    if (call->defaults_outcome == GATEWAY_DEFAULTS_READY)
        return exchange_call_backend(ex, gateway_reserve_start, after_reserve);
    char message[512];
    snprintf(message, sizeof message,
             "The gateway's limit '%s' could not be created from its template's default%s%s. The "
             "tool was not called.",
             call->plan.key_text[call->defaults_key],
             call->defaults_outcome == GATEWAY_DEFAULTS_REJECTED ? ": " : "",
             call->defaults_outcome == GATEWAY_DEFAULTS_REJECTED ? call->defaults_error : "");
    bool retry = call->defaults_outcome != GATEWAY_DEFAULTS_REJECTED &&
                 call->defaults_outcome != GATEWAY_DEFAULTS_MISSING;
    return gateway_mcp_reply(ex, retry ? 503 : 400, &call->mcp.id, GW_MCP_SERVER_ERROR, message,
                             NULL);
}

static int after_reserve(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    const struct reserve_result *r = &call->reserve_result;
    if (r->wait_outcome == RESERVE_WAIT_CANCELLED) /* its client left while it waited */
        return gateway_mcp_reply(ex, 503, &call->mcp.id, GW_MCP_SERVER_ERROR,
                                 "The call was cancelled: its client left while it waited.", NULL);
    if (r->error == BACKEND_UNKNOWN_LIMIT_KEY && gateway_defaults_apply(call))
        return exchange_call_backend(ex, gateway_defaults_create, after_defaults);
    activity_reserve(ex->server->activity, clock_now_ms(ex->server->clock), ACTIVITY_SOURCE_GATEWAY,
                     &call->reserve, r);
    if (r->error != BACKEND_OK)
        return reply_reserve_error(ex, call);
    if (r->replayed)
        return gateway_mcp_reply(
            ex, 409, &call->mcp.id, GW_MCP_SERVER_ERROR,
            "A call with this X-Request-Id was made already; not forwarded twice.", NULL);
    if (!r->allowed)
        return reply_denied(ex, call);
    return gateway_call_forward(ex, call);
}

/* Plans and reserves the call's tools/call; the exchange then waits. */
static int reserve_tool_call(struct exchange *ex, struct gateway_call *call)
{
    const struct gw_mcp_server *server = call->mcp_server;
    call->mcp_price_usd_micros =
        gw_mcp_tool_price(server, call->mcp.tool, call->mcp.tool_length, &call->mcp_charge_errors);
    char error[GW_PLAN_ERROR_SIZE];
    if (gw_plan_tool_call(&call->plan, call->config, call->key, server->name, call->mcp.tool,
                          call->mcp.tool_length, call->mcp_price_usd_micros, error,
                          sizeof error) != 0)
        return gateway_mcp_reply(ex, 400, &call->mcp.id, GW_MCP_INVALID_PARAMS, error, NULL);
    if (gateway_lease_id(ex, call->key->caller, call->lease_id, sizeof call->lease_id) != 0)
        return gateway_mcp_reply(ex, 503, &call->mcp.id, GW_MCP_SERVER_ERROR,
                                 "No lease id could be made.", NULL);
    call->reserve = (struct reserve_request){
        .lease_id = call->lease_id,
        .lease_id_length = (uint32_t)strlen(call->lease_id),
        .caller = call->key->caller,
        .caller_length = (uint32_t)strlen(call->key->caller),
        .requirements = call->plan.requirements,
        .requirement_count = call->plan.requirement_count,
        .states = call->states,
        .mcp_server = server->name, /* named in the audit log */
        .tool = call->mcp.tool,
    };
    if (call->plan.requirement_count == 0) /* nothing to hold: every amount was 0 */
        return gateway_call_forward(ex, call);
    if (gateway_call_wait(ex, call) != 0)
        return 0;
    return exchange_call_backend(ex, gateway_reserve_start, after_reserve);
}

/* ---- the request --------------------------------------------------------- */

/* Adds "name: value" to what goes upstream when the client sent the
 * header; -1 with the answer given for a value that cannot go. */
static int pass_header(struct exchange *ex, struct gateway_call *call, const char *name,
                       const char *fallback)
{
    const char *value = exchange_header(ex, name);
    if (value == NULL || value[0] == '\0')
        value = fallback;
    if (value == NULL)
        return 0;
    bool plain = true;
    for (const char *c = value; *c != '\0' && plain; c++)
        plain = *c >= 0x20 && *c <= 0x7e;
    assert(call->header_count < GW_FORWARD_HEADERS_MAX);
    char *line = call->header_lines[call->header_count];
    int n = snprintf(line, GW_FORWARD_HEADER_LENGTH_MAX + 1, "%s: %s", name, value);
    if (!plain || n < 0 || n > GW_FORWARD_HEADER_LENGTH_MAX) {
        char message[160];
        snprintf(message, sizeof message, "%s: must be printable ASCII, at most %d bytes.", name,
                 GW_FORWARD_HEADER_LENGTH_MAX - (int)strlen(name) - 2);
        gateway_mcp_reply(ex, 400, NULL, GW_MCP_INVALID_REQUEST, message, NULL);
        return -1;
    }
    call->header_count++;
    return 0;
}

/* A session id the gateway saw the server give this key (on this server):
 * 0; one it gave another key, or one it never saw (or forgot), is MCP's
 * 404 for a session that is over (the client initializes a new one), and
 * nothing is forwarded: -1 with the answer given. */
static int session_of_key(struct exchange *ex, struct gateway_call *call, const char *session)
{
    char id[GW_SHA256_HEX_SIZE];
    if (gateway_mcp_session_key(call->mcp_server->name, session, id) == 0 &&
        gw_owners_lookup(call->gateway->mcp_sessions, id, GW_SHA256_HEX_SIZE - 1,
                         call->key->sha256) == GW_OWNER_THIS_KEY)
        return 0;
    char message[256];
    snprintf(message, sizeof message,
             "No MCP session with this Mcp-Session-Id for this key on the server '%s': "
             "initialize a new one.",
             call->mcp_server->name);
    gateway_mcp_reply(ex, 404, NULL, GW_MCP_SERVER_ERROR, message, NULL);
    return -1;
}

/* The client's Mcp-Session-Id: 1..GW_MCP_SESSION_ID_LENGTH_MAX visible
 * ASCII bytes (MCP's rule) or none; another is refused (400), never cut;
 * and one of this key's sessions (session_of_key). 0, or -1 with the
 * answer given. */
static int session_id_bounded(struct exchange *ex, struct gateway_call *call)
{
    const char *value = exchange_header(ex, "mcp-session-id");
    if (value == NULL || value[0] == '\0')
        return 0;
    size_t n = strlen(value);
    bool visible = true;
    for (size_t i = 0; i < n && visible; i++)
        visible = value[i] >= 0x21 && value[i] <= 0x7e;
    if (n <= GW_MCP_SESSION_ID_LENGTH_MAX && visible)
        return session_of_key(ex, call, value);
    char message[160];
    snprintf(message, sizeof message,
             "Mcp-Session-Id: must be 1-%d bytes of visible ASCII (this one has %zu bytes%s).",
             GW_MCP_SESSION_ID_LENGTH_MAX, n, visible ? "" : ", some not visible ASCII");
    gateway_mcp_reply(ex, 400, NULL, GW_MCP_INVALID_REQUEST, message, NULL);
    return -1;
}

/* Where and how the request goes: the server's URL with the client's
 * query, and the transport's headers (the client's Accept, session,
 * protocol version, and the event id a GET stream resumes from). */
static int upstream_request(struct exchange *ex, struct gateway_call *call)
{
    size_t query_length;
    const char *query = http_query(&ex->http, &query_length);
    int n = snprintf(call->upstream_path, sizeof call->upstream_path, "%s%.*s",
                     query_length > 0 ? "?" : "", (int)query_length, query);
    if (n < 0 || (size_t)n >= sizeof call->upstream_path)
        return gateway_mcp_reply(ex, 400, NULL, GW_MCP_INVALID_REQUEST,
                                 "The query string is too long.", NULL),
               -1;
    call->header_count = 0;
    call->method = ex->method == HTTP_GET      ? GW_METHOD_GET
                   : ex->method == HTTP_DELETE ? GW_METHOD_DELETE
                                               : GW_METHOD_POST;
    const char *accept =
        call->method == GW_METHOD_GET ? "text/event-stream" : "application/json, text/event-stream";
    if (session_id_bounded(ex, call) != 0 || pass_header(ex, call, "accept", accept) != 0 ||
        pass_header(ex, call, "mcp-session-id", NULL) != 0 ||
        pass_header(ex, call, "mcp-protocol-version", NULL) != 0 ||
        pass_header(ex, call, "last-event-id", NULL) != 0)
        return -1;
    return 0;
}

/* A POST's JSON-RPC message: read (tools/call recognised) and kept to go
 * upstream as it came. 0, or -1 with the answer given. */
static int read_message(struct exchange *ex, struct gateway_call *call)
{
    char *copy = arena_alloc(&ex->arena, ex->body_length + 1);
    if (copy == NULL)
        return gateway_mcp_reply(ex, 503, NULL, GW_MCP_SERVER_ERROR, "Out of memory.", NULL), -1;
    memcpy(copy, ex->body, ex->body_length);
    copy[ex->body_length] = '\0';
    struct jdoc_value *root = NULL;
    char error[256], message[320];
    if (jdoc_parse_nested(copy, ex->body_length, GW_JSON_DEPTH_MAX, &ex->arena, &root, error,
                          sizeof error) != 0) {
        snprintf(message, sizeof message, "Parse error: the body is not JSON: %s", error);
        return gateway_mcp_reply(ex, 400, NULL, GW_MCP_PARSE_ERROR, message, NULL), -1;
    }
    int code;
    if (gw_mcp_request_read(root, &call->mcp, &code, error, sizeof error) != 0) {
        snprintf(message, sizeof message, "Invalid request: %s", error);
        struct gw_mcp_id id = call->mcp.id;
        call->mcp.tool_call = false;
        return gateway_mcp_reply(ex, 400, &id, code, message, NULL), -1;
    }
    buffer_append(&call->upstream_body, ex->body, ex->body_length);
    if (call->upstream_body.failed)
        return gateway_mcp_reply(ex, 503, NULL, GW_MCP_SERVER_ERROR, "Out of memory.", NULL), -1;
    return 0;
}

/* The server named by the path, for the key; NULL with the answer given
 * (404 unknown, 403 not the key's). */
static const struct gw_mcp_server *route_server(struct exchange *ex, const struct gw_config *config,
                                                const struct gw_key *key)
{
    char name[GW_NAME_LENGTH_MAX + 1], message[256];
    size_t length = 0;
    const struct gw_mcp_server *server = NULL;
    if (percent_decode(ex->key_encoded, name, sizeof name, &length) == 0)
        server = gw_config_find_mcp_server(config, name, length);
    else
        snprintf(name, sizeof name, "(too long or badly escaped)");
    if (server == NULL) {
        snprintf(message, sizeof message,
                 "No MCP server '%.128s' is behind this gateway (gateway.json's mcp_servers).",
                 name);
        gateway_mcp_reply(ex, 404, NULL, GW_MCP_SERVER_ERROR, message, NULL);
        return NULL;
    }
    if (!gw_key_allows_mcp_server(key, server)) {
        snprintf(message, sizeof message, "This key may not use the MCP server '%s'.",
                 server->name);
        gateway_mcp_reply(ex, 403, NULL, GW_MCP_SERVER_ERROR, message, NULL);
        return NULL;
    }
    return server;
}

int handle_gateway_mcp(struct exchange *ex)
{
    struct gw_config *config;
    struct keys_record *record;
    const struct gw_key *key = gateway_route_start(ex, &config, &record);
    if (key == NULL)
        return 0;
    const struct gw_mcp_server *server = route_server(ex, config, key);
    if (server == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return 0;
    }
    /* takes the config and the record */
    struct gateway_call *call = gateway_call_new(ex, config, key, record, GW_ENDPOINT_MCP);
    if (call == NULL) {
        gw_config_release(config);
        keys_record_release(record);
        return gateway_mcp_reply(ex, 503, NULL, GW_MCP_SERVER_ERROR, "Out of memory.", NULL);
    }
    call->mcp_server = server;
    call->upstream = &server->upstream;
    call->stream = true; /* an event-stream answer is relayed as it comes */
    if (upstream_request(ex, call) != 0)
        return 0;
    if (call->method == GW_METHOD_POST && read_message(ex, call) != 0)
        return 0;
    if (!call->mcp.tool_call)
        return gateway_call_forward(ex, call);
    return reserve_tool_call(ex, call);
}
