/* MCP's JSON-RPC messages, read and written (gw_mcp.h). */
#include "gw_mcp.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_error.h"
#include "util/arena.h"

static bool is_name(const struct jdoc_value *v, const char *name)
{
    return jdoc_is(v, JDOC_STRING) && v->count == strlen(name) &&
           memcmp(v->as.string, name, v->count) == 0;
}

/* The id of a message; -1 when it has one that is neither a string of at
 * most GW_MCP_ID_LENGTH_MAX bytes nor an integer. */
static int id_read(const struct jdoc_value *v, struct gw_mcp_id *id)
{
    memset(id, 0, sizeof *id);
    if (v == NULL || v->kind == JDOC_NULL)
        return 0;
    if (jdoc_is(v, JDOC_INTEGER)) {
        id->present = true;
        id->number = v->as.integer;
        snprintf(id->text, sizeof id->text, "%" PRId64, v->as.integer);
        return 0;
    }
    if (!jdoc_is(v, JDOC_STRING) || v->count > GW_MCP_ID_LENGTH_MAX)
        return -1;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_json_string(&b, v->as.string, v->count);
    bool fits = !b.failed && b.length < sizeof id->text;
    if (fits) {
        memcpy(id->text, b.data, b.length);
        id->text[b.length] = '\0';
    }
    buffer_free(&b);
    if (!fits)
        return -1; /* escaped past its room: refused rather than cut */
    id->present = true;
    id->is_string = true;
    memcpy(id->string, v->as.string, v->count);
    id->string_length = v->count;
    return 0;
}

int gw_mcp_request_read(const struct jdoc_value *root, struct gw_mcp_request *out, int *code,
                        char *error, size_t error_size)
{
    memset(out, 0, sizeof *out);
    *code = GW_MCP_INVALID_REQUEST;
    if (jdoc_is(root, JDOC_ARRAY)) {
        snprintf(error, error_size,
                 "JSON-RPC batches are not taken (MCP 2025-06-18 and later send none): send each "
                 "message on its own");
        return -1;
    }
    if (!jdoc_is(root, JDOC_OBJECT)) {
        snprintf(error, error_size, "a JSON-RPC message must be a JSON object");
        return -1;
    }
    if (id_read(jdoc_get(root, "id"), &out->id) != 0) {
        snprintf(error, error_size, "id: must be a string of at most %d bytes or an integer",
                 GW_MCP_ID_LENGTH_MAX);
        return -1;
    }
    if (!is_name(jdoc_get(root, "method"), "tools/call"))
        return 0; /* passed on as it is */
    if (!out->id.present) {
        snprintf(error, error_size, "tools/call: a request needs an id");
        return -1;
    }
    const struct jdoc_value *params = jdoc_get(root, "params");
    const struct jdoc_value *name = jdoc_is(params, JDOC_OBJECT) ? jdoc_get(params, "name") : NULL;
    if (!jdoc_is(name, JDOC_STRING) || name->count == 0 || name->count > GW_NAME_LENGTH_MAX ||
        memchr(name->as.string, '\0', name->count) != NULL) {
        *code = GW_MCP_INVALID_PARAMS;
        snprintf(error, error_size, "tools/call: params.name must be the tool's name, 1..%d bytes",
                 GW_NAME_LENGTH_MAX);
        return -1;
    }
    out->tool_call = true;
    memcpy(out->tool, name->as.string, name->count);
    out->tool[name->count] = '\0';
    out->tool_length = name->count;
    return 0;
}

static bool id_equal(const struct jdoc_value *v, const struct gw_mcp_id *id)
{
    if (id->is_string)
        return jdoc_is(v, JDOC_STRING) && v->count == id->string_length &&
               memcmp(v->as.string, id->string, v->count) == 0;
    return jdoc_is(v, JDOC_INTEGER) && v->as.integer == id->number;
}

static enum gw_mcp_outcome message_outcome(const struct jdoc_value *message,
                                           const struct gw_mcp_id *id)
{
    if (!jdoc_is(message, JDOC_OBJECT) || !id_equal(jdoc_get(message, "id"), id) ||
        jdoc_get(message, "method") != NULL) /* a request of the server's own */
        return GW_MCP_NO_ANSWER;
    const struct jdoc_value *result = jdoc_get(message, "result");
    if (jdoc_is(result, JDOC_OBJECT)) {
        const struct jdoc_value *is_error = jdoc_get(result, "isError");
        return is_error != NULL && is_error->kind == JDOC_TRUE ? GW_MCP_TOOL_ERROR : GW_MCP_RESULT;
    }
    if (jdoc_get(message, "error") != NULL)
        return GW_MCP_RPC_ERROR;
    return GW_MCP_NO_ANSWER; /* a result that is not an object is no tool result */
}

enum gw_mcp_outcome gw_mcp_answer_outcome(const char *text, size_t length,
                                          const struct gw_mcp_id *id)
{
    if (!id->present || length == 0)
        return GW_MCP_NO_ANSWER;
    char *copy = malloc(length + 1);
    if (copy == NULL)
        return GW_MCP_NO_ANSWER;
    memcpy(copy, text, length);
    copy[length] = '\0';
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[128];
    enum gw_mcp_outcome outcome = GW_MCP_NO_ANSWER;
    if (jdoc_parse_nested(copy, length, GW_JSON_DEPTH_MAX, &arena, &root, error, sizeof error) ==
        0) {
        if (jdoc_is(root, JDOC_ARRAY)) {
            for (uint32_t i = 0; i < root->count && outcome == GW_MCP_NO_ANSWER; i++)
                outcome = message_outcome(&root->as.items[i], id);
        } else {
            outcome = message_outcome(root, id);
        }
    }
    arena_free(&arena);
    free(copy);
    return outcome;
}

void gw_mcp_error(struct buffer *b, const struct gw_mcp_id *id, int code, const char *message,
                  const char *data_json)
{
    char number[16];
    snprintf(number, sizeof number, "%d", code);
    buffer_append_str(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    buffer_append_str(b, id != NULL && id->present ? id->text : "null");
    buffer_append_str(b, ",\"error\":{\"code\":");
    buffer_append_str(b, number);
    buffer_append_str(b, ",\"message\":");
    gw_json_string(b, message, strlen(message));
    if (data_json != NULL) {
        buffer_append_str(b, ",\"data\":");
        buffer_append_str(b, data_json);
    }
    buffer_append_str(b, "}}");
}
