/* libFuzzer harness: the MCP route's JSON-RPC reading (src/gateway/gw_mcp.c)
 * on any bytes a client or an MCP server may send: a client's message read
 * for its tools/call (id and tool within their bounds), a server's message
 * read as the answer to it, and the JSON-RPC error written back for that
 * id, which must parse and carry the id it was given. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_mcp.h"
#include "util/arena.h"
#include "util/jdoc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The error written for id parses, and its id is the request's. */
static void error_round_trips(const struct gw_mcp_id *id)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_mcp_error(&b, id, GW_MCP_SERVER_ERROR, "denied", "{\"retry_after_ms\":1}");
    if (b.failed) {
        buffer_free(&b);
        return;
    }
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[128];
    int parsed = jdoc_parse_nested(b.data, b.length, 64, &arena, &root, error, sizeof error);
    assert(parsed == 0);
    const struct jdoc_value *echo = jdoc_get(root, "id");
    assert(echo != NULL);
    if (!id->present) {
        assert(echo->kind == JDOC_NULL);
    } else if (id->is_string) {
        assert(echo->kind == JDOC_STRING);
        assert(echo->count == id->string_length);
        assert(memcmp(echo->as.string, id->string, echo->count) == 0);
    } else {
        assert(echo->kind == JDOC_INTEGER);
        assert(echo->as.integer == id->number);
    }
    arena_free(&arena);
    buffer_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[256];
    struct gw_mcp_request request;
    int code = 0;
    if (jdoc_parse_nested(copy, size, GW_JSON_DEPTH_MAX, &arena, &root, error, sizeof error) == 0) {
        if (gw_mcp_request_read(root, &request, &code, error, sizeof error) == 0) {
            if (request.tool_call) {
                assert(request.id.present);
                assert(request.tool_length >= 1 && request.tool_length <= GW_NAME_LENGTH_MAX);
                assert(strlen(request.tool) <= request.tool_length);
            }
        } else {
            assert(code == GW_MCP_INVALID_REQUEST || code == GW_MCP_INVALID_PARAMS);
            assert(error[0] != '\0');
            request.tool_call = false;
        }
        if (request.id.present)
            assert(request.id.string_length <= GW_MCP_ID_LENGTH_MAX);
        error_round_trips(&request.id);
    } else {
        memset(&request, 0, sizeof request);
    }
    /* The same bytes as a server's message, for the request's id and for 1. */
    struct gw_mcp_id one = {.present = true, .number = 1, .text = "1"};
    enum gw_mcp_outcome outcome = gw_mcp_answer_outcome((const char *)data, size, &one);
    assert(outcome >= GW_MCP_NO_ANSWER && outcome <= GW_MCP_RPC_ERROR);
    outcome = gw_mcp_answer_outcome((const char *)data, size, &request.id);
    assert(request.id.present || outcome == GW_MCP_NO_ANSWER);
    arena_free(&arena);
    free(copy);
    return 0;
}
