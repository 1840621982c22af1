/* Unit tests of the MCP parts of the gateway (docs/mcp.md): gateway.json's
 * mcp_servers and a key's list with every rule's error, the templates a
 * tool call and a model call each take (gw_plan), and the JSON-RPC reading
 * of a client's tools/call and of a server's answer (gw_mcp), each bound
 * at it and one past. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_config.h"
#include "gateway/gw_mcp.h"
#include "gateway/gw_plan.h"
#include "test.h"

#define MCP_KEY_ENV "GW_TEST_MCP_KEY"
#define DIGEST_A "8f0d5b0aa1bbd0e0d4d5c1d1d1d3b0d2a9e6f3b5c7d9e1f3a5b7c9d1e3f5a7b9"
#define DIGEST_B "0000000000000000000000000000000000000000000000000000000000000001"

#define HEAD                                                                                       \
    "{\"upstreams\":[{\"name\":\"openai\",\"base_url\":\"https://api.openai.com/v1\"}],"           \
    "\"models\":[{\"name\":\"gpt-4o-mini\",\"upstream\":\"openai\","                               \
    "\"input_usd_micros_per_mtok\":150000,\"output_usd_micros_per_mtok\":600000,"                  \
    "\"max_output_tokens\":16384,\"default_max_output_tokens\":1024}],"
#define SERVERS                                                                                    \
    "[{\"name\":\"search\",\"url\":\"http://127.0.0.1:9/mcp\",\"api_key_env\":\"" MCP_KEY_ENV      \
    "\",\"timeout_seconds\":60,\"tools\":[{\"name\":\"web_search\",\"usd_micros_per_call\":5000}," \
    "{\"name\":\"broken\",\"usd_micros_per_call\":7,\"charge_errors\":true}],"                     \
    "\"default_usd_micros_per_call\":100},{\"name\":\"files\",\"url\":\"http://127.0.0.1:9\"}]"
#define LIMITS                                                                                     \
    "[{\"key\":\"team:{team}:usd:month\",\"amount\":\"usd_micros\"},"                              \
    "{\"key\":\"global:{model}:tpm\",\"amount\":\"tokens\"},"                                      \
    "{\"key\":\"mcp:{mcp_server}:{tool}:rpm\",\"amount\":\"requests\"},"                           \
    "{\"key\":\"team:{team}:tools\",\"amount\":\"tool_calls\"},"                                   \
    "{\"key\":\"caller:{caller}:concurrent\",\"amount\":\"requests\"}]"
#define KEYS                                                                                       \
    "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"bot\",\"team\":\"sales\"},"                        \
    "{\"sha256\":\"" DIGEST_B "\",\"caller\":\"ops\",\"team\":\"ops\","                            \
    "\"mcp_servers\":[\"files\"]}]"

static char error[GW_CONFIG_ERROR_SIZE];

static struct gw_config *parse_with(const char *servers, const char *limits, const char *keys)
{
    size_t size = strlen(servers) + strlen(limits) + strlen(keys) + 1024;
    char *text = malloc(size);
    snprintf(text, size, HEAD "\"mcp_servers\":%s,\"limits\":%s,\"keys\":%s}", servers, limits,
             keys);
    struct gw_config *config = NULL;
    error[0] = '\0';
    if (gw_config_parse("gateway.json", text, strlen(text), &config, error, sizeof error) != 0)
        config = NULL;
    free(text);
    return config;
}

static void fails_with(const char *servers, const char *limits, const char *keys,
                       const char *expected)
{
    struct gw_config *config = parse_with(servers, limits, keys);
    CHECK(config == NULL);
    CHECK_STR(error, expected);
    if (config != NULL)
        gw_config_release(config);
}

static void servers_load(void)
{
    struct gw_config *c = parse_with(SERVERS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    CHECK_EQ_U64(c->mcp_server_count, 2);
    const struct gw_mcp_server *s = gw_config_find_mcp_server(c, "search", 6);
    REQUIRE(s != NULL);
    CHECK_STR(s->upstream.base_url, "http://127.0.0.1:9/mcp");
    CHECK_STR(s->upstream.api_key, "mcp-secret");
    CHECK_EQ_U64(s->upstream.timeout_seconds, 60);
    CHECK_EQ_U64(s->tool_count, 2);
    bool charge_errors = true;
    CHECK_EQ_U64(gw_mcp_tool_price(s, "web_search", 10, &charge_errors), 5000);
    CHECK(!charge_errors);
    CHECK_EQ_U64(gw_mcp_tool_price(s, "broken", 6, &charge_errors), 7);
    CHECK(charge_errors);
    CHECK_EQ_U64(gw_mcp_tool_price(s, "other", 5, &charge_errors), 100); /* the default */
    CHECK(!charge_errors);
    const struct gw_mcp_server *files = gw_config_find_mcp_server(c, "files", 5);
    REQUIRE(files != NULL);
    CHECK(files->upstream.api_key == NULL);
    CHECK_EQ_U64(files->upstream.timeout_seconds, GW_MCP_TIMEOUT_SECONDS_DEFAULT);
    CHECK(gw_config_find_mcp_server(c, "searc", 5) == NULL);
    /* keys[0] lists none: every server; keys[1] lists files only */
    CHECK(gw_key_allows_mcp_server(&c->keys[0], s));
    CHECK(gw_key_allows_mcp_server(&c->keys[0], files));
    CHECK(!gw_key_allows_mcp_server(&c->keys[1], s));
    CHECK(gw_key_allows_mcp_server(&c->keys[1], files));
    /* which calls each template applies to */
    CHECK(!c->limits[0].model_calls_only && !c->limits[0].tool_calls_only);
    CHECK(c->limits[1].model_calls_only && !c->limits[1].tool_calls_only);
    CHECK(c->limits[2].tool_calls_only && !c->limits[2].model_calls_only);
    CHECK(c->limits[3].tool_calls_only);
    gw_config_release(c);
}

static void server_errors(void)
{
    fails_with("{}", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers: must be an array of 0..256 entries");
    fails_with("[{\"url\":\"http://h\"}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].name: required");
    fails_with("[{\"name\":\"s\"}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].url: required");
    fails_with("[{\"name\":\"s\",\"url\":\"ftp://h\"}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].url: must start with http:// or https://");
    fails_with("[{\"name\":\"s s\",\"url\":\"http://h\"}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].name: must be a string of printable ASCII "
               "without white space of 1..128 bytes");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\"},{\"name\":\"s\",\"url\":\"http://h\"}]",
               LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[1].name: duplicate of mcp_servers[0]");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"base_url\":\"http://h\"}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].base_url: unknown field");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"api_key_env\":\"GW_TEST_MCP_UNSET\"}]",
               LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].api_key_env: environment variable "
               "GW_TEST_MCP_UNSET is not set");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"timeout_seconds\":0}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].timeout_seconds: must be an integer 1..86400");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"default_usd_micros_per_call\":-1}]", LIMITS,
               KEYS,
               "gateway.json: line 1: mcp_servers[0].default_usd_micros_per_call: must be an "
               "integer 0..9223372036854775807");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"tools\":[{\"name\":\"t\"}]}]", LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].tools[0].usd_micros_per_call: required");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"tools\":[{\"usd_micros_per_call\":1}]}]",
               LIMITS, KEYS, "gateway.json: line 1: mcp_servers[0].tools[0].name: required");
    fails_with(
        "[{\"name\":\"s\",\"url\":\"http://h\",\"tools\":[{\"name\":\"t\","
        "\"usd_micros_per_call\":1,\"charge_errors\":1}]}]",
        LIMITS, KEYS,
        "gateway.json: line 1: mcp_servers[0].tools[0].charge_errors: must be true or false");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"tools\":[{\"name\":\"t\","
               "\"usd_micros_per_call\":1},{\"name\":\"t\",\"usd_micros_per_call\":2}]}]",
               LIMITS, KEYS,
               "gateway.json: line 1: mcp_servers[0].tools[1]: duplicate of "
               "mcp_servers[0].tools[0]");
    fails_with("[{\"name\":\"s\",\"url\":\"http://h\",\"tools\":[{\"name\":\"t\","
               "\"usd_micros_per_call\":1,\"price\":2}]}]",
               LIMITS, KEYS, "gateway.json: line 1: mcp_servers[0].tools[0].price: unknown field");
}

static void key_and_template_errors(void)
{
    fails_with(SERVERS, LIMITS,
               "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"t\","
               "\"mcp_servers\":[\"nope\"]}]",
               "gateway.json: line 1: keys[0].mcp_servers[0]: unknown MCP server 'nope' "
               "(mcp_servers names them)");
    fails_with(SERVERS, LIMITS,
               "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"t\","
               "\"mcp_servers\":[\"files\",\"files\"]}]",
               "gateway.json: line 1: keys[0].mcp_servers[1]: duplicate MCP server");
    fails_with(SERVERS, LIMITS,
               "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"t\","
               "\"mcp_servers\":\"files\"}]",
               "gateway.json: line 1: keys[0].mcp_servers: must be an array of at most 256 MCP "
               "server names");
    fails_with(SERVERS, "[{\"key\":\"x:{model}:{tool}\",\"amount\":\"requests\"}]", KEYS,
               "gateway.json: line 1: limits[0].key: applies to no call: {model} and {upstream} "
               "are a model call's, {mcp_server}, {tool} and the amount tool_calls an MCP tool "
               "call's");
    fails_with(SERVERS, "[{\"key\":\"x:{upstream}\",\"amount\":\"tool_calls\"}]", KEYS,
               "gateway.json: line 1: limits[0].key: applies to no call: {model} and {upstream} "
               "are a model call's, {mcp_server}, {tool} and the amount tool_calls an MCP tool "
               "call's");
    /* without the section: no server, and a key may list none */
    struct gw_config *c =
        parse_with("[]", LIMITS,
                   "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"t\","
                   "\"mcp_servers\":[]}]");
    REQUIRE(c != NULL);
    CHECK_EQ_U64(c->mcp_server_count, 0);
    CHECK(c->keys[0].mcp_servers_listed);
    gw_config_release(c);
}

/* A server list of n entries (names s0, s1, ...) / a tools list of n. */
static char *many_servers(uint32_t n)
{
    size_t size = 64 + (size_t)n * 64;
    char *text = malloc(size);
    size_t at = (size_t)snprintf(text, size, "[");
    for (uint32_t i = 0; i < n; i++)
        at += (size_t)snprintf(text + at, size - at, "%s{\"name\":\"s%u\",\"url\":\"http://h\"}",
                               i > 0 ? "," : "", i);
    snprintf(text + at, size - at, "]");
    return text;
}

static char *many_tools(uint32_t n)
{
    size_t size = 128 + (size_t)n * 64;
    char *text = malloc(size);
    size_t at = (size_t)snprintf(text, size, "[{\"name\":\"s\",\"url\":\"http://h\",\"tools\":[");
    for (uint32_t i = 0; i < n; i++)
        at +=
            (size_t)snprintf(text + at, size - at, "%s{\"name\":\"t%u\",\"usd_micros_per_call\":1}",
                             i > 0 ? "," : "", i);
    snprintf(text + at, size - at, "]}]");
    return text;
}

static void bounds_one_past(void)
{
    char *servers = many_servers(GW_MCP_SERVERS_MAX);
    struct gw_config *c = parse_with(servers, LIMITS, KEYS);
    CHECK(c == NULL); /* KEYS names "files": absent here */
    free(servers);
    servers = many_servers(GW_MCP_SERVERS_MAX);
    const char *keys = "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"t\"}]";
    c = parse_with(servers, LIMITS, keys);
    CHECK(c != NULL);
    if (c != NULL)
        gw_config_release(c);
    free(servers);
    servers = many_servers(GW_MCP_SERVERS_MAX + 1);
    fails_with(servers, LIMITS, keys,
               "gateway.json: line 1: mcp_servers: must be an array of 0..256 entries");
    free(servers);
    char *tools = many_tools(GW_MCP_TOOLS_MAX);
    c = parse_with(tools, LIMITS, keys);
    CHECK(c != NULL);
    if (c != NULL)
        gw_config_release(c);
    free(tools);
    tools = many_tools(GW_MCP_TOOLS_MAX + 1);
    fails_with(tools, LIMITS, keys,
               "gateway.json: line 1: mcp_servers[0].tools: must be an array of at most 1024 "
               "tools");
    free(tools);
}

static const char *plan_key(const struct gw_plan *plan, uint32_t r)
{
    return plan->requirements[r].key;
}

static void tool_call_plan_takes_its_templates(void)
{
    struct gw_config *c = parse_with(SERVERS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    static struct gw_plan plan;
    char plan_error[GW_PLAN_ERROR_SIZE];
    REQUIRE(gw_plan_tool_call(&plan, c, &c->keys[0], "search", "web_search", 10, 5000, plan_error,
                              sizeof plan_error) == 0);
    /* team usd (price), mcp rpm (1), team tools (1), caller concurrent (1); no tpm */
    REQUIRE(plan.requirement_count == 4);
    CHECK_STR(plan_key(&plan, 0), "team:sales:usd:month");
    CHECK_EQ_U64(plan.requirements[0].amount, 5000);
    CHECK_STR(plan_key(&plan, 1), "mcp:search:web_search:rpm");
    CHECK_EQ_U64(plan.requirements[1].amount, 1);
    CHECK_STR(plan_key(&plan, 2), "team:sales:tools");
    CHECK_EQ_U64(plan.requirements[2].amount, 1);
    CHECK_STR(plan_key(&plan, 3), "caller:bot:concurrent");
    /* a free tool: its usd template is left out */
    REQUIRE(gw_plan_tool_call(&plan, c, &c->keys[0], "search", "free", 4, 0, plan_error,
                              sizeof plan_error) == 0);
    CHECK_EQ_U64(plan.requirement_count, 3);
    CHECK_STR(plan_key(&plan, 0), "mcp:search:free:rpm");
    /* a tool name that cannot be in a key under {tool}: an error naming it */
    CHECK(gw_plan_tool_call(&plan, c, &c->keys[0], "search", "web search", 10, 1, plan_error,
                            sizeof plan_error) != 0);
    CHECK(strstr(plan_error, "mcp:search:web search:rpm") != NULL);
    gw_config_release(c);
}

static void model_call_plan_leaves_tool_templates_out(void)
{
    struct gw_config *c = parse_with(SERVERS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    static struct gw_plan plan;
    char plan_error[GW_PLAN_ERROR_SIZE];
    struct gw_tokens estimate = {.input = 1000, .output = 1000};
    REQUIRE(gw_plan_reserve(&plan, c, &c->keys[0], &c->models[0], &estimate, plan_error,
                            sizeof plan_error) == 0);
    /* team usd, tpm, caller concurrent; neither mcp rpm nor team tools */
    REQUIRE(plan.requirement_count == 3);
    CHECK_STR(plan_key(&plan, 0), "team:sales:usd:month");
    CHECK_EQ_U64(plan.requirements[0].amount, 750); /* 1000 * 0.15 + 1000 * 0.6 */
    CHECK_STR(plan_key(&plan, 1), "global:gpt-4o-mini:tpm");
    CHECK_STR(plan_key(&plan, 2), "caller:bot:concurrent");
    struct actual actuals[GW_LIMITS_MAX];
    uint32_t count = 0;
    struct gw_tokens used = {.input = 10, .output = 10};
    REQUIRE(gw_plan_complete(&plan, &used, actuals, &count, plan_error, sizeof plan_error) == 0);
    CHECK_EQ_U64(count, 3);
    CHECK_EQ_U64(actuals[1].actual_amount, 20);
    gw_config_release(c);
}

/* "calls": a team's tool spend and model spend apart, beside the budget
 * both share: each plan takes its own kind's template and the shared one. */
static void calls_split_tool_and_model_spend(void)
{
    const char *limits =
        "[{\"key\":\"team:{team}:usd:month\",\"amount\":\"usd_micros\",\"calls\":\"all\"},"
        "{\"key\":\"team:{team}:tools:usd:month\",\"amount\":\"usd_micros\",\"calls\":\"tool\"},"
        "{\"key\":\"team:{team}:models:usd:month\",\"amount\":\"usd_micros\","
        "\"calls\":\"model\"}]";
    struct gw_config *c = parse_with(SERVERS, limits, KEYS);
    REQUIRE(c != NULL);
    CHECK(!c->limits[0].model_calls_only && !c->limits[0].tool_calls_only);
    CHECK(c->limits[1].tool_calls_only && !c->limits[1].model_calls_only);
    CHECK(c->limits[2].model_calls_only && !c->limits[2].tool_calls_only);
    static struct gw_plan plan;
    char plan_error[GW_PLAN_ERROR_SIZE];
    REQUIRE(gw_plan_tool_call(&plan, c, &c->keys[0], "search", "web_search", 10, 5000, plan_error,
                              sizeof plan_error) == 0);
    REQUIRE(plan.requirement_count == 2);
    CHECK_STR(plan_key(&plan, 0), "team:sales:usd:month");
    CHECK_STR(plan_key(&plan, 1), "team:sales:tools:usd:month");
    CHECK_EQ_U64(plan.requirements[1].amount, 5000);
    struct gw_tokens estimate = {.input = 1000, .output = 1000};
    REQUIRE(gw_plan_reserve(&plan, c, &c->keys[0], &c->models[0], &estimate, plan_error,
                            sizeof plan_error) == 0);
    REQUIRE(plan.requirement_count == 2);
    CHECK_STR(plan_key(&plan, 0), "team:sales:usd:month");
    CHECK_STR(plan_key(&plan, 1), "team:sales:models:usd:month");
    CHECK_EQ_U64(plan.requirements[1].amount, 750);
    gw_config_release(c);
    /* a "calls" its key or amount contradicts, or no kind at all */
    fails_with(SERVERS, "[{\"key\":\"x:{model}\",\"amount\":\"tokens\",\"calls\":\"tool\"}]", KEYS,
               "gateway.json: line 1: limits[0].calls: applies to no call: {model} and {upstream} "
               "are a model call's, {mcp_server}, {tool} and the amount tool_calls an MCP tool "
               "call's");
    fails_with(SERVERS, "[{\"key\":\"x:{caller}\",\"amount\":\"tool_calls\",\"calls\":\"model\"}]",
               KEYS,
               "gateway.json: line 1: limits[0].calls: applies to no call: {model} and {upstream} "
               "are a model call's, {mcp_server}, {tool} and the amount tool_calls an MCP tool "
               "call's");
    fails_with(SERVERS, "[{\"key\":\"x:{caller}\",\"amount\":\"requests\",\"calls\":\"tools\"}]",
               KEYS, "gateway.json: line 1: limits[0].calls: must be model, tool or all");
    fails_with(SERVERS, "[{\"key\":\"x:{caller}\",\"amount\":\"requests\",\"calls\":null}]", KEYS,
               "gateway.json: line 1: limits[0].calls: must be model, tool or all");
}

static int read_request(const char *text, struct gw_mcp_request *out, int *code, char *why)
{
    char *copy = strdup(text);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char parse_error[128];
    int result = -2;
    if (jdoc_parse_nested(copy, strlen(copy), 64, &arena, &root, parse_error, sizeof parse_error) ==
        0)
        result = gw_mcp_request_read(root, out, code, why, 256);
    arena_free(&arena);
    free(copy);
    return result;
}

static void requests_are_read(void)
{
    struct gw_mcp_request r;
    int code = 0;
    char why[256];
    REQUIRE(read_request("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                         "\"params\":{\"name\":\"web_search\",\"arguments\":{}}}",
                         &r, &code, why) == 0);
    CHECK(r.tool_call);
    CHECK_STR(r.tool, "web_search");
    CHECK_STR(r.id.text, "7");
    REQUIRE(read_request("{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"tools/call\","
                         "\"params\":{\"name\":\"t\"}}",
                         &r, &code, why) == 0);
    CHECK(r.id.is_string);
    CHECK_STR(r.id.text, "\"a\\\"b\"");
    REQUIRE(read_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &r, &code,
                         why) == 0);
    CHECK(!r.tool_call);
    REQUIRE(read_request("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r,
                         &code, why) == 0);
    CHECK(!r.tool_call && !r.id.present);
    /* errors */
    CHECK(read_request("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &r, &code, why) ==
          -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_REQUEST);
    CHECK(strstr(why, "batches") != NULL);
    CHECK(read_request("\"x\"", &r, &code, why) == -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_REQUEST);
    CHECK(
        read_request("{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}",
                     &r, &code, why) == -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_REQUEST);
    CHECK(read_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", &r,
                       &code, why) == -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_PARAMS);
    CHECK(read_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}", &r, &code,
                       why) == -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_PARAMS);
    CHECK(read_request("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", &r, &code, why) ==
          -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_REQUEST);
}

static void bounds_of_requests_one_past(void)
{
    struct gw_mcp_request r;
    int code = 0;
    char why[256], text[1024], name[GW_NAME_LENGTH_MAX + 2], id[GW_MCP_ID_LENGTH_MAX + 2];
    memset(name, 'n', sizeof name);
    name[GW_NAME_LENGTH_MAX] = '\0';
    snprintf(text, sizeof text, "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}",
             name);
    CHECK(read_request(text, &r, &code, why) == 0);
    name[GW_NAME_LENGTH_MAX] = 'n';
    name[GW_NAME_LENGTH_MAX + 1] = '\0';
    snprintf(text, sizeof text, "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}",
             name);
    CHECK(read_request(text, &r, &code, why) == -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_PARAMS);
    memset(id, 'i', sizeof id);
    id[GW_MCP_ID_LENGTH_MAX] = '\0';
    snprintf(text, sizeof text, "{\"id\":\"%s\",\"method\":\"ping\"}", id);
    CHECK(read_request(text, &r, &code, why) == 0);
    id[GW_MCP_ID_LENGTH_MAX] = 'i';
    id[GW_MCP_ID_LENGTH_MAX + 1] = '\0';
    snprintf(text, sizeof text, "{\"id\":\"%s\",\"method\":\"ping\"}", id);
    CHECK(read_request(text, &r, &code, why) == -1);
    CHECK_EQ_I64(code, GW_MCP_INVALID_REQUEST);
}

static void answers_are_read(void)
{
    struct gw_mcp_id seven = {.present = true, .number = 7};
    struct gw_mcp_id text_id = {
        .present = true, .is_string = true, .string = "x", .string_length = 1};
#define OUTCOME(text, id) gw_mcp_answer_outcome(text, strlen(text), id)
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}", &seven) ==
          GW_MCP_RESULT);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":true}}", &seven) ==
          GW_MCP_TOOL_ERROR);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":false}}", &seven) ==
          GW_MCP_RESULT);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-1}}", &seven) ==
          GW_MCP_RPC_ERROR);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}", &seven) == GW_MCP_NO_ANSWER);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}", &seven) == GW_MCP_NO_ANSWER);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}", &text_id) == GW_MCP_RESULT);
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sampling/createMessage\"}", &seven) ==
          GW_MCP_NO_ANSWER); /* the server's own request */
    CHECK(OUTCOME("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}", &seven) ==
          GW_MCP_NO_ANSWER);
    CHECK(OUTCOME("[{\"id\":1,\"result\":{}},{\"id\":7,\"result\":{}}]", &seven) == GW_MCP_RESULT);
    CHECK(OUTCOME("not json {", &seven) == GW_MCP_NO_ANSWER);
    CHECK(OUTCOME("{\"id\":7,\"result\":3}", &seven) == GW_MCP_NO_ANSWER);
    CHECK(OUTCOME("", &seven) == GW_MCP_NO_ANSWER);
#undef OUTCOME
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_mcp_error(&b, NULL, -32000, "say \"no\"", "{\"retry_after_ms\":5}");
    buffer_append_char(&b, '\0');
    CHECK_STR(b.data, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,"
                      "\"message\":\"say \\\"no\\\"\",\"data\":{\"retry_after_ms\":5}}}");
    buffer_free(&b);
}

int main(void)
{
    setenv(MCP_KEY_ENV, "mcp-secret", 1);
    unsetenv("GW_TEST_MCP_UNSET");
    RUN(servers_load, "mcp_servers load: URL, credential, timeouts, prices, keys' lists");
    RUN(server_errors, "each mcp_servers rule has its error naming the field and line");
    RUN(key_and_template_errors,
        "a key's mcp_servers names known servers once; a template for no call is an error");
    RUN(bounds_one_past, "mcp_servers and tools at their bounds load, one past fails");
    RUN(tool_call_plan_takes_its_templates,
        "a tool call takes every template but {model}'s: price, requests and tool_calls");
    RUN(model_call_plan_leaves_tool_templates_out,
        "a model call leaves {mcp_server}, {tool} and tool_calls templates out");
    RUN(calls_split_tool_and_model_spend,
        "\"calls\": tool and model spend apart; a contradicting or unknown one is an error");
    RUN(requests_are_read, "a tools/call is read with its id and tool; bad messages are errors");
    RUN(bounds_of_requests_one_past, "a tool name and an id at their bounds read, one past fail");
    RUN(answers_are_read, "a server's answer: result, isError, error, or none of them");
    return test_summary();
}
