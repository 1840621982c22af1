/* Unit tests of the upstream body (src/gateway/gw_request.c): model
 * replaced, stream_options.include_usage set on streaming calls (the
 * client's own options kept, its own request for usage remembered), every
 * other member passed byte for byte, the output parsing as JSON with every
 * original member, and each error. */
#include <stdio.h>
#include <string.h>

#include "gateway/gw_request.h"
#include "test.h"

static struct arena arena;
static char copy[8192];
static char error[GW_REQUEST_ERROR_SIZE];
static char output[8192];
static struct gw_request_info info;

static const struct gw_upstream upstream = {.name = "openai"};
static const struct gw_model model = {
    .name = "fast", .upstream = &upstream, .upstream_model = "gpt-4o-mini-2024-07-18"};

static enum gw_endpoint endpoint = GW_ENDPOINT_CHAT_COMPLETIONS;
static uint64_t output_bound; /* 0: none written (gw_request_rewrite_for) */

/* Rewrites body; the output (NUL-terminated) goes to `output`. */
static int rewrite_with(const char *body, const struct gw_model *m)
{
    arena_reset(&arena);
    snprintf(copy, sizeof copy, "%s", body);
    struct jdoc_value *root;
    char reason[256];
    if (jdoc_parse(copy, strlen(copy), &arena, &root, reason, sizeof reason) != 0) {
        fprintf(stderr, "  test body does not parse: %s\n", reason);
        return -2;
    }
    struct buffer out;
    buffer_init(&out, NULL, 0);
    int result =
        endpoint == GW_ENDPOINT_CHAT_COMPLETIONS && output_bound == 0
            ? gw_request_rewrite(body, strlen(body), root, m, &out, &info, error, sizeof error)
            : gw_request_rewrite_for(endpoint, body, strlen(body), root, m, output_bound, &out,
                                     &info, error, sizeof error);
    snprintf(output, sizeof output, "%.*s", (int)out.length, out.data != NULL ? out.data : "");
    buffer_free(&out);
    return result;
}

static int rewrite(const char *body)
{
    return rewrite_with(body, &model);
}

/* The output parses; its member names, in order, are `names` (space-separated). */
static void check_output_members(const char *names)
{
    static char parsed[8192];
    static struct arena out_arena;
    arena_init(&out_arena, NULL, 0);
    snprintf(parsed, sizeof parsed, "%s", output);
    struct jdoc_value *root;
    char reason[256];
    int ok = jdoc_parse(parsed, strlen(parsed), &out_arena, &root, reason, sizeof reason);
    CHECK_EQ_I64(ok, 0);
    if (ok == 0) {
        char seen[512] = "";
        for (uint32_t i = 0; i < root->count; i++) {
            strncat(seen, i > 0 ? " " : "", sizeof seen - strlen(seen) - 1);
            strncat(seen, root->as.members[i].key, sizeof seen - strlen(seen) - 1);
        }
        CHECK_STR(seen, names);
    }
    arena_free(&out_arena);
}

static void model_is_replaced_and_the_rest_passes(void)
{
    const char *body =
        "{\"model\":\"fast\",\"messages\":[{\"role\":\"user\",\"content\":\"say \\\"}\\\" {]\"}],"
        "\"temperature\":0.70,\"top_p\":1e-1,\"max_tokens\":100,\"stop\":[\"\\n\",\"]}\"],"
        "\"logit_bias\":{\"50256\":-100},\"user\":\"u\\\\\",\"metadata\":null,\"seed\":-3}";
    REQUIRE(rewrite(body) == 0);
    CHECK(!info.stream && !info.client_include_usage);
    CHECK_STR(output,
              "{\"model\":\"gpt-4o-mini-2024-07-18\",\"messages\":[{\"role\":\"user\",\"content\":"
              "\"say \\\"}\\\" {]\"}],\"temperature\":0.70,\"top_p\":1e-1,\"max_tokens\":100,"
              "\"stop\":[\"\\n\",\"]}\"],\"logit_bias\":{\"50256\":-100},\"user\":\"u\\\\\","
              "\"metadata\":null,\"seed\":-3}");
    check_output_members(
        "model messages temperature top_p max_tokens stop logit_bias user metadata seed");
}

static void pretty_bodies_keep_their_members_verbatim(void)
{
    const char *body = "\n  {\n    \"messages\" : [ {\"role\": \"user\", \"content\": \"hi\"} ],\n"
                       "    \"model\" :\t\"fast\" ,\n    \"n\": 2\n  }\n";
    REQUIRE(rewrite(body) == 0);
    CHECK_STR(output, "{\"messages\" : [ {\"role\": \"user\", \"content\": \"hi\"} ],"
                      "\"model\":\"gpt-4o-mini-2024-07-18\",\"n\": 2}");
    check_output_members("messages model n");
}

static void streaming_asks_for_usage(void)
{
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true,\"messages\":[]}") == 0);
    CHECK(info.stream && !info.client_include_usage);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true,\"messages\":[],"
                      "\"stream_options\":{\"include_usage\":true}}");
    check_output_members("model stream messages stream_options");
}

static void client_stream_options_are_kept(void)
{
    REQUIRE(rewrite("{\"stream_options\":{\"include_usage\":false,\"continuous_usage_stats\":"
                    "true},\"model\":\"fast\",\"stream\":true}") == 0);
    CHECK(info.stream && !info.client_include_usage);
    CHECK_STR(output, "{\"stream_options\":{\"continuous_usage_stats\":true,"
                      "\"include_usage\":true},\"model\":\"gpt-4o-mini-2024-07-18\","
                      "\"stream\":true}");
    check_output_members("stream_options model stream");
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true,\"stream_options\":{\"include_usage\":"
                    "true}}") == 0);
    CHECK(info.client_include_usage);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true}}");
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true,\"stream_options\":null}") == 0);
    CHECK(!info.client_include_usage);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true}}");
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true,\"stream_options\":{}}") == 0);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true}}");
}

static void non_streaming_calls_keep_stream_options(void)
{
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":false,\"stream_options\":{\"include_usage\":"
                    "7}}") == 0);
    CHECK(!info.stream && !info.client_include_usage);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":false,"
                      "\"stream_options\":{\"include_usage\":7}}");
}

static void upstream_names_are_escaped(void)
{
    struct gw_model odd = model;
    odd.upstream_model = "a \"quoted\"\\name";
    REQUIRE(rewrite_with("{\"model\":\"fast\"}", &odd) == 0);
    CHECK_STR(output, "{\"model\":\"a \\\"quoted\\\"\\\\name\"}");
    check_output_members("model");
}

static void errors_name_the_field(void)
{
    static const struct {
        const char *body, *error;
    } cases[] = {
        {"[1]", "body: must be a JSON object"},
        {"{\"messages\":[]}", "model: must be a string"},
        {"{\"model\":7}", "model: must be a string"},
        {"{\"model\":\"fast\",\"stream\":\"yes\"}", "stream: must be a boolean"},
        {"{\"model\":\"fast\",\"stream\":true,\"stream_options\":[]}",
         "stream_options: must be an object"},
        {"{\"model\":\"fast\",\"stream\":true,\"stream_options\":{\"include_usage\":1}}",
         "stream_options.include_usage: must be a boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_I64(rewrite(cases[i].body), -1);
        CHECK_STR(error, cases[i].error);
    }
}

/* Random bodies of tricky members: each one but model comes out byte for
 * byte, in order, and the output parses. */
static void random_bodies_pass_every_member(void)
{
    static const char *const values[] = {"\"a}b{c]d[\"",
                                         "\"\\\"\"",
                                         "\"\\\\\"",
                                         "\"\\u00e9\\n\"",
                                         "3.14159265358979",
                                         "-0.0",
                                         "1E+5",
                                         "true",
                                         "null",
                                         "[]",
                                         "{}",
                                         "[[1,[2,{\"x\":\"]\"}]],3]",
                                         "{ \"k\" : [ \"v\" , { } ] }",
                                         "\"\""};
    static const char *const keys[] = {"\"messages\"", "\"temperature\"", "\"a b\"",
                                       "\"\\\"q\"",    "\"tools\"",       "\"x\\u0041\""};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int failures = 0;
    for (int round = 0; round < 500; round++) {
        char body[2048] = "{ \"model\" : \"fast\"", members[8][256];
        int count = 0;
        bool used[6] = {false};
        for (int i = 0; i < 6; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (used[x % 6])
                continue; /* keys are unique in a body */
            used[x % 6] = true;
            snprintf(members[count], sizeof members[count], "%s%s:%s%s", keys[x % 6],
                     (x >> 8) % 2 ? " " : "", (x >> 9) % 2 ? "\t" : "", values[(x >> 16) % 14]);
            strcat(body, " ,\n ");
            strcat(body, members[count++]);
        }
        strcat(body, " }");
        if (rewrite(body) != 0) {
            failures++;
            continue;
        }
        const char *at = output;
        for (int i = 0; i < count; i++) {
            const char *found = strstr(at, members[i]);
            failures += found == NULL;
            at = found != NULL ? found + strlen(members[i]) : at;
        }
        static char parsed[8192];
        snprintf(parsed, sizeof parsed, "%s", output);
        struct jdoc_value *root;
        char reason[256];
        struct arena out_arena;
        arena_init(&out_arena, NULL, 0);
        failures +=
            jdoc_parse(parsed, strlen(parsed), &out_arena, &root, reason, sizeof reason) != 0 ||
            root->count != (uint32_t)count + 1;
        arena_free(&out_arena);
    }
    CHECK_EQ_I64(failures, 0);
}

static void agent_surfaces_change_only_the_model(void)
{
    endpoint = GW_ENDPOINT_MESSAGES;
    const char *body = "{\"model\":\"fast\",\"max_tokens\":64000,\"stream\":true,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},"
                       "\"temperature\":1.0e0}";
    REQUIRE(rewrite(body) == 0);
    CHECK(info.stream && !info.client_include_usage);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"max_tokens\":64000,\"stream\":true,"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                      "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},"
                      "\"temperature\":1.0e0}");
    endpoint = GW_ENDPOINT_RESPONSES;
    REQUIRE(rewrite("{\"model\":\"fast\",\"input\":\"hi\",\"stream\":true,"
                    "\"stream_options\":{\"include_obfuscation\":false}}") == 0);
    CHECK(info.stream);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"input\":\"hi\",\"stream\":true,"
                      "\"stream_options\":{\"include_obfuscation\":false}}");
    REQUIRE(rewrite("{\"input\":\"hi\",\"model\":\"fast\"}") == 0);
    CHECK(!info.stream);
    CHECK_STR(output, "{\"input\":\"hi\",\"model\":\"gpt-4o-mini-2024-07-18\"}");
    /* The routes that never stream say so, whatever the body holds. */
    endpoint = GW_ENDPOINT_MESSAGES_COUNT_TOKENS;
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true}") == 0);
    CHECK(!info.stream);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true}");
    endpoint = GW_ENDPOINT_RESPONSES_INPUT_TOKENS;
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true}") == 0);
    CHECK(!info.stream);
    endpoint = GW_ENDPOINT_MESSAGES;
    CHECK_EQ_I64(rewrite("{\"model\":\"fast\",\"stream\":1}"), -1);
    CHECK_STR(error, "stream: must be a boolean");
    CHECK_EQ_I64(rewrite("{\"max_tokens\":1}"), -1);
    CHECK_STR(error, "model: must be a string");
    /* stream_options are not the gateway's business here: any shape passes. */
    REQUIRE(rewrite("{\"model\":\"fast\",\"stream\":true,\"stream_options\":[1]}") == 0);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true,"
                      "\"stream_options\":[1]}");
    endpoint = GW_ENDPOINT_CHAT_COMPLETIONS;
}

static void a_call_without_an_output_bound_gets_the_reserved_one(void)
{
    output_bound = 256;
    /* chat: max_completion_tokens after the rest; null bounds dropped */
    REQUIRE(rewrite("{\"model\":\"fast\",\"n\":3}") == 0);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"n\":3,"
                      "\"max_completion_tokens\":256}");
    REQUIRE(rewrite("{\"max_tokens\":null,\"model\":\"fast\",\"max_completion_tokens\":null,"
                    "\"stream\":true}") == 0);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true},"
                      "\"max_completion_tokens\":256}");
    /* a bound the client set, either one: passed as it is, nothing added */
    REQUIRE(rewrite("{\"model\":\"fast\",\"max_tokens\":7,\"max_completion_tokens\":null}") == 0);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"max_tokens\":7,"
                      "\"max_completion_tokens\":null}");
    endpoint = GW_ENDPOINT_COMPLETIONS;
    REQUIRE(rewrite("{\"model\":\"fast\",\"prompt\":\"x\",\"max_tokens\":null}") == 0);
    CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"prompt\":\"x\",\"max_tokens\":256}");
    endpoint = GW_ENDPOINT_RESPONSES;
    REQUIRE(rewrite("{\"model\":\"fast\",\"input\":\"x\"}") == 0);
    CHECK_STR(output,
              "{\"model\":\"gpt-4o-mini-2024-07-18\",\"input\":\"x\",\"max_output_tokens\":256}");
    /* no output to bound, or a bound the API requires already (Gemini, whose body names no
     * model, is test_gemini.c's) */
    for (enum gw_endpoint e = GW_ENDPOINT_CHAT_COMPLETIONS; e <= GW_ENDPOINT_LAST; e++) {
        if (e == GW_ENDPOINT_CHAT_COMPLETIONS || e == GW_ENDPOINT_COMPLETIONS ||
            e == GW_ENDPOINT_RESPONSES || gw_endpoint_api(e) == GW_API_GEMINI)
            continue;
        endpoint = e;
        REQUIRE(rewrite("{\"model\":\"fast\",\"input\":\"x\"}") == 0);
        CHECK_STR(output, "{\"model\":\"gpt-4o-mini-2024-07-18\",\"input\":\"x\"}");
    }
    endpoint = GW_ENDPOINT_CHAT_COMPLETIONS;
    output_bound = 0;
}

int main(void)
{
    arena_init(&arena, NULL, 0);
    RUN(model_is_replaced_and_the_rest_passes,
        "model is replaced, every other member passes as is");
    RUN(pretty_bodies_keep_their_members_verbatim, "members of a pretty body keep their bytes");
    RUN(streaming_asks_for_usage, "a streaming call asks for usage");
    RUN(client_stream_options_are_kept, "the client's stream_options stay, include_usage set");
    RUN(non_streaming_calls_keep_stream_options, "a call that does not stream is left alone");
    RUN(upstream_names_are_escaped, "the upstream model name is written as a JSON string");
    RUN(errors_name_the_field, "each error names the field");
    RUN(random_bodies_pass_every_member, "random tricky members all pass byte for byte");
    RUN(agent_surfaces_change_only_the_model,
        "messages and responses: only model changes, no usage asked; routes that never stream");
    RUN(a_call_without_an_output_bound_gets_the_reserved_one,
        "a call without an output bound gets the reserved one in its surface's field");
    arena_free(&arena);
    return test_summary();
}
