/* MCP's JSON-RPC as the gateway reads it (docs/mcp.md): which message of a
 * client is a tools/call (its id and tool), whether a server's message
 * answers it with a result, a tool error (isError) or a JSON-RPC error,
 * and the JSON-RPC error bodies the gateway writes itself. Nothing here
 * trusts a byte: every field is checked and bounded. */
#ifndef LLMLIMIT_GATEWAY_MCP_H
#define LLMLIMIT_GATEWAY_MCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_bounds.h"
#include "util/buffer.h"
#include "util/jdoc.h"

/* JSON-RPC's error codes the gateway answers with. */
#define GW_MCP_PARSE_ERROR (-32700)
#define GW_MCP_INVALID_REQUEST (-32600)
#define GW_MCP_INVALID_PARAMS (-32602)
#define GW_MCP_SERVER_ERROR (-32000) /* a denial, an unreachable server, ... */

/* A request's id: a string or an integer (JSON-RPC allows no other for a
 * request the gateway answers). text: its JSON form, to write it back. */
struct gw_mcp_id {
    bool present;
    bool is_string;
    int64_t number;
    char text[GW_MCP_ID_LENGTH_MAX + 3]; /* a string's quotes too; NUL-terminated */
    char string[GW_MCP_ID_LENGTH_MAX + 1];
    size_t string_length;
};

struct gw_mcp_request {
    bool tool_call; /* a request (with an id) whose method is tools/call */
    struct gw_mcp_id id;
    char tool[GW_NAME_LENGTH_MAX + 1]; /* params.name of a tools/call */
    size_t tool_length;
};

/* Reads a client's POST body, parsed as root: a tools/call is recognised
 * (id and params.name required), anything else is passed on as it is. 0
 * with out filled, or -1 with *code (GW_MCP_INVALID_REQUEST: not an
 * object, a batch, an id neither a string nor an integer or too long, a
 * tools/call without an id; GW_MCP_INVALID_PARAMS: a tools/call without a
 * name of 1..GW_NAME_LENGTH_MAX bytes) and the reason in error; out->id is
 * set whenever the message had a usable id. */
int gw_mcp_request_read(const struct jdoc_value *root, struct gw_mcp_request *out, int *code,
                        char *error, size_t error_size);

/* How a server's message answers the request with id. */
enum gw_mcp_outcome {
    GW_MCP_NO_ANSWER = 0, /* not an answer to it (a notification, a progress, garbage) */
    GW_MCP_RESULT,        /* a result */
    GW_MCP_TOOL_ERROR,    /* a result with "isError": true */
    GW_MCP_RPC_ERROR,     /* a JSON-RPC error */
};

/* The outcome a message (text[0..length), one JSON value: an object, or an
 * array of them) gives the request with id. Works on a copy. */
enum gw_mcp_outcome gw_mcp_answer_outcome(const char *text, size_t length,
                                          const struct gw_mcp_id *id);

/* Appends {"jsonrpc":"2.0","id":<id or null>,"error":{"code","message"
 * [,"data":<data_json>]}} to b. data_json: JSON text or NULL. */
void gw_mcp_error(struct buffer *b, const struct gw_mcp_id *id, int code, const char *message,
                  const char *data_json);

#endif
