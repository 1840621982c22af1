/* Unit tests of reading an upstream answer's usage (src/gateway/gw_usage.c):
 * chat and embeddings shapes, cached tokens, missing usage reported as
 * missing, and every malformed field. */
#include <stdio.h>
#include <string.h>

#include "gateway/gw_answer.h"
#include "gateway/gw_estimate.h"
#include "gateway/gw_usage.h"
#include "test.h"

static struct arena arena;
static char text[4096];
static char error[GW_USAGE_ERROR_SIZE];

static struct jdoc_value *parse_answer(const char *json)
{
    arena_reset(&arena);
    snprintf(text, sizeof text, "%s", json);
    struct jdoc_value *root;
    char reason[256];
    if (jdoc_parse(text, strlen(text), &arena, &root, reason, sizeof reason) != 0) {
        fprintf(stderr, "  test answer does not parse: %s\n", reason);
        return NULL;
    }
    error[0] = '\0';
    return root;
}

static int read_usage(const char *json, struct gw_usage *usage)
{
    arena_reset(&arena);
    snprintf(text, sizeof text, "%s", json);
    struct jdoc_value *root;
    char reason[256];
    if (jdoc_parse(text, strlen(text), &arena, &root, reason, sizeof reason) != 0) {
        fprintf(stderr, "  test answer does not parse: %s\n", reason);
        return -2;
    }
    error[0] = '\0';
    return gw_usage_read(root, usage, error, sizeof error);
}

static void chat_usage_with_cached_tokens(void)
{
    struct gw_usage u;
    REQUIRE(read_usage("{\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,"
                       "\"completion_tokens\":300,\"total_tokens\":1500,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":1024,\"audio_tokens\":0},"
                       "\"completion_tokens_details\":{\"reasoning_tokens\":100}}}",
                       &u) == 0);
    CHECK(u.present);
    CHECK(u.has_completion_tokens);
    CHECK_EQ_U64(u.prompt_tokens, 1200);
    CHECK_EQ_U64(u.completion_tokens, 300);
    CHECK_EQ_U64(u.total_tokens, 1500);
    CHECK_EQ_U64(u.cached_tokens, 1024);
    struct gw_tokens t = gw_usage_tokens(&u);
    CHECK_EQ_U64(t.input, 1200);
    CHECK_EQ_U64(t.cached_input, 1024);
    CHECK_EQ_U64(t.output, 300);
}

static void embeddings_usage_has_no_completion(void)
{
    struct gw_usage u;
    REQUIRE(read_usage("{\"data\":[],\"usage\":{\"prompt_tokens\":8,\"total_tokens\":8}}", &u) ==
            0);
    CHECK(u.present);
    CHECK(!u.has_completion_tokens);
    CHECK_EQ_U64(u.completion_tokens, 0);
    CHECK_EQ_U64(u.total_tokens, 8);
    CHECK_EQ_U64(u.cached_tokens, 0);
}

static void missing_usage_is_missing(void)
{
    struct gw_usage u;
    REQUIRE(read_usage("{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}", &u) == 0);
    CHECK(!u.present);
    REQUIRE(read_usage("{\"choices\":[],\"usage\":null}", &u) == 0);
    CHECK(!u.present);
}

static void absent_total_is_the_sum(void)
{
    struct gw_usage u;
    REQUIRE(read_usage("{\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,"
                       "\"prompt_tokens_details\":null}}",
                       &u) == 0);
    CHECK_EQ_U64(u.total_tokens, 12);
}

static void malformed_usage_is_an_error(void)
{
    static const struct {
        const char *answer, *error;
    } cases[] = {
        {"[]", "answer: must be a JSON object"},
        {"{\"usage\":5}", "usage: must be an object"},
        {"{\"usage\":{\"completion_tokens\":1}}", "usage.prompt_tokens: required"},
        {"{\"usage\":{\"prompt_tokens\":-1}}",
         "usage.prompt_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"prompt_tokens\":1.5}}",
         "usage.prompt_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":\"2\"}}",
         "usage.completion_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"prompt_tokens\":1,\"total_tokens\":true}}",
         "usage.total_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":[]}}",
         "usage.prompt_tokens_details: must be an object"},
        {"{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":-3}}}",
         "usage.prompt_tokens_details.cached_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":11}}}",
         "usage.prompt_tokens_details.cached_tokens: more than prompt_tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_usage u;
        u.present = true;
        CHECK_EQ_I64(read_usage(cases[i].answer, &u), -1);
        CHECK_STR(error, cases[i].error);
        CHECK(!u.present);
    }
}

static void largest_counts_are_read(void)
{
    struct gw_usage u;
    REQUIRE(read_usage("{\"usage\":{\"prompt_tokens\":9223372036854775807,"
                       "\"completion_tokens\":9223372036854775807}}",
                       &u) == 0);
    CHECK_EQ_U64(u.prompt_tokens, AMOUNT_MAX);
    CHECK_EQ_U64(u.total_tokens, 2 * AMOUNT_MAX); /* computed without wrapping */
}

static int read_as(enum gw_endpoint endpoint, const char *json, struct gw_usage *usage)
{
    const struct jdoc_value *root = parse_answer(json);
    if (root == NULL)
        return -2;
    return gw_usage_read_answer(endpoint, root, usage, error, sizeof error);
}

static void chat_reasoning_is_read(void)
{
    struct gw_usage u;
    REQUIRE(read_usage("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":300,"
                       "\"completion_tokens_details\":{\"reasoning_tokens\":256,"
                       "\"accepted_prediction_tokens\":0}}}",
                       &u) == 0);
    CHECK_EQ_U64(u.reasoning_tokens, 256);
    CHECK_EQ_U64(gw_usage_tokens(&u).reasoning, 256);
    CHECK_EQ_U64(gw_usage_tokens(&u).output, 300);
    REQUIRE(read_usage("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,"
                       "\"completion_tokens_details\":null}}",
                       &u) == 0);
    CHECK_EQ_U64(u.reasoning_tokens, 0);
    CHECK_EQ_I64(read_usage("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,"
                            "\"completion_tokens_details\":{\"reasoning_tokens\":4}}}",
                            &u),
                 -1);
    CHECK_STR(error, "usage.completion_tokens_details.reasoning_tokens: more than "
                     "completion_tokens");
    CHECK_EQ_I64(read_usage("{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,"
                            "\"completion_tokens_details\":{\"reasoning_tokens\":1.0}}}",
                            &u),
                 -1);
    CHECK_STR(error, "usage.completion_tokens_details.reasoning_tokens: must be an integer "
                     "0..9223372036854775807");
    CHECK(!u.present);
}

static void anthropic_cache_tokens_are_outside_its_input(void)
{
    struct gw_usage u;
    REQUIRE(read_as(GW_ENDPOINT_MESSAGES,
                    "{\"id\":\"msg_1\",\"type\":\"message\",\"usage\":{\"input_tokens\":50,"
                    "\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":2000,"
                    "\"output_tokens\":300,\"service_tier\":\"standard\"}}",
                    &u) == 0);
    CHECK(u.present && u.has_completion_tokens);
    CHECK_EQ_U64(u.prompt_tokens, 3050);
    CHECK_EQ_U64(u.cached_tokens, 2000);
    CHECK_EQ_U64(u.cache_write_5m_tokens, 1000); /* no split given: all 5-minute */
    CHECK_EQ_U64(u.cache_write_1h_tokens, 0);
    CHECK_EQ_U64(u.completion_tokens, 300);
    CHECK_EQ_U64(u.total_tokens, 3350);
    struct gw_tokens t = gw_usage_tokens(&u);
    CHECK_EQ_U64(gw_tokens_uncached_input(&t), 50);
    /* The split, when given, says which writes are which. */
    REQUIRE(read_as(GW_ENDPOINT_MESSAGES,
                    "{\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":1000,"
                    "\"cache_creation\":{\"ephemeral_5m_input_tokens\":400,"
                    "\"ephemeral_1h_input_tokens\":600},\"output_tokens\":1}}",
                    &u) == 0);
    CHECK_EQ_U64(u.cache_write_5m_tokens, 400);
    CHECK_EQ_U64(u.cache_write_1h_tokens, 600);
    CHECK_EQ_U64(u.prompt_tokens, 1005);
    /* A total above the split: the rest is charged as 5-minute writes. */
    REQUIRE(read_as(GW_ENDPOINT_MESSAGES,
                    "{\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":1200,"
                    "\"cache_creation\":{\"ephemeral_5m_input_tokens\":400,"
                    "\"ephemeral_1h_input_tokens\":600},\"output_tokens\":1}}",
                    &u) == 0);
    CHECK_EQ_U64(u.cache_write_5m_tokens, 600);
    CHECK_EQ_U64(u.cache_write_1h_tokens, 600);
    /* ...below it, or absent: the split as it is. */
    REQUIRE(read_as(GW_ENDPOINT_MESSAGES,
                    "{\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":800,"
                    "\"cache_creation\":{\"ephemeral_1h_input_tokens\":900},\"output_tokens\":1}}",
                    &u) == 0);
    CHECK_EQ_U64(u.cache_write_5m_tokens, 0);
    CHECK_EQ_U64(u.cache_write_1h_tokens, 900);
    REQUIRE(read_as(GW_ENDPOINT_MESSAGES, "{\"usage\":{\"input_tokens\":7,\"output_tokens\":2}}",
                    &u) == 0);
    CHECK_EQ_U64(u.prompt_tokens, 7);
    CHECK_EQ_U64(u.cached_tokens + u.cache_write_5m_tokens + u.cache_write_1h_tokens, 0);
    REQUIRE(read_as(GW_ENDPOINT_MESSAGES, "{\"type\":\"message\",\"content\":[]}", &u) == 0);
    CHECK(!u.present);
}

static void anthropic_malformed_usage_is_an_error(void)
{
    static const struct {
        const char *answer, *error;
    } cases[] = {
        {"{\"usage\":[]}", "usage: must be an object"},
        {"{\"usage\":{\"output_tokens\":1}}", "usage.input_tokens: required"},
        {"{\"usage\":{\"input_tokens\":1}}", "usage.output_tokens: required"},
        {"{\"usage\":{\"input_tokens\":\"1\",\"output_tokens\":1}}",
         "usage.input_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"cache_read_input_tokens\":-1}}",
         "usage.cache_read_input_tokens: must be an integer 0..9223372036854775807"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"cache_creation\":7}}",
         "usage.cache_creation: must be an object"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"cache_creation\":"
         "{\"ephemeral_1h_input_tokens\":0.5}}}",
         "usage.cache_creation.ephemeral_1h_input_tokens: must be an integer "
         "0..9223372036854775807"},
        {"{\"usage\":{\"input_tokens\":9223372036854775807,\"output_tokens\":1,"
         "\"cache_read_input_tokens\":1}}",
         "usage.input_tokens: with cache reads and writes, above 9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_usage u;
        CHECK_EQ_I64(read_as(GW_ENDPOINT_MESSAGES, cases[i].answer, &u), -1);
        CHECK_STR(error, cases[i].error);
        CHECK(!u.present);
    }
}

static void anthropic_stream_usage_last_value_wins(void)
{
    struct gw_messages_usage state = {0};
    struct gw_usage u;
    const struct jdoc_value *start = parse_answer(
        "{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"cache_creation_input_tokens\":0,"
        "\"output_tokens\":1}");
    REQUIRE(start != NULL);
    REQUIRE(gw_messages_usage_merge(&state, start, error, sizeof error) == 0);
    CHECK(gw_messages_usage_has_input(&state));
    /* message_delta values are cumulative: each replaces, none is added. */
    const char *deltas[] = {"{\"output_tokens\":20}", "{\"output_tokens\":45}",
                            "{\"output_tokens\":45,\"input_tokens\":12,"
                            "\"server_tool_use\":{\"web_search_requests\":1}}"};
    for (int i = 0; i < 3; i++) {
        const struct jdoc_value *delta = parse_answer(deltas[i]);
        REQUIRE(delta != NULL);
        REQUIRE(gw_messages_usage_merge(&state, delta, error, sizeof error) == 0);
    }
    REQUIRE(gw_messages_usage_result(&state, &u, error, sizeof error) == 0);
    CHECK_EQ_U64(u.completion_tokens, 45);
    CHECK_EQ_U64(u.prompt_tokens, 17); /* 12, its last value, + 5 read */
    CHECK_EQ_U64(u.cached_tokens, 5);
    /* A malformed delta changes nothing. */
    const struct jdoc_value *bad = parse_answer("{\"output_tokens\":50,\"input_tokens\":-1}");
    REQUIRE(bad != NULL);
    CHECK_EQ_I64(gw_messages_usage_merge(&state, bad, error, sizeof error), -1);
    CHECK_STR(error, "usage.input_tokens: must be an integer 0..9223372036854775807");
    REQUIRE(gw_messages_usage_result(&state, &u, error, sizeof error) == 0);
    CHECK_EQ_U64(u.completion_tokens, 45);
    /* Nothing seen: no usage to give. */
    struct gw_messages_usage empty = {0};
    CHECK(!gw_messages_usage_has_input(&empty));
    CHECK_EQ_I64(gw_messages_usage_result(&empty, &u, error, sizeof error), -1);
    CHECK_STR(error, "usage.input_tokens: required");
}

static void responses_usage_has_cached_and_reasoning_inside(void)
{
    struct gw_usage u;
    REQUIRE(read_as(GW_ENDPOINT_RESPONSES,
                    "{\"id\":\"resp_1\",\"object\":\"response\",\"usage\":{\"input_tokens\":100,"
                    "\"input_tokens_details\":{\"cached_tokens\":40},\"output_tokens\":50,"
                    "\"output_tokens_details\":{\"reasoning_tokens\":30},\"total_tokens\":150}}",
                    &u) == 0);
    CHECK(u.present);
    CHECK_EQ_U64(u.prompt_tokens, 100);
    CHECK_EQ_U64(u.cached_tokens, 40);
    CHECK_EQ_U64(u.completion_tokens, 50);
    CHECK_EQ_U64(u.reasoning_tokens, 30);
    CHECK_EQ_U64(u.total_tokens, 150);
    struct gw_tokens t = gw_usage_tokens(&u);
    CHECK_EQ_U64(t.input, 100);
    CHECK_EQ_U64(t.cached_input, 40);
    CHECK_EQ_U64(t.reasoning, 30);
    REQUIRE(read_as(GW_ENDPOINT_RESPONSES, "{\"object\":\"response\",\"usage\":null}", &u) == 0);
    CHECK(!u.present);
    static const struct {
        const char *answer, *error;
    } cases[] = {
        {"{\"usage\":{\"output_tokens\":1}}", "usage.input_tokens: required"},
        {"{\"usage\":{\"input_tokens\":1}}", "usage.output_tokens: required"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"input_tokens_details\":"
         "{\"cached_tokens\":2}}}",
         "usage.input_tokens_details.cached_tokens: more than input_tokens"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"output_tokens_details\":"
         "{\"reasoning_tokens\":2}}}",
         "usage.output_tokens_details.reasoning_tokens: more than output_tokens"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"output_tokens_details\":[]}}",
         "usage.output_tokens_details: must be an object"},
        {"{\"usage\":{\"input_tokens\":1,\"output_tokens\":true}}",
         "usage.output_tokens: must be an integer 0..9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_I64(read_as(GW_ENDPOINT_RESPONSES, cases[i].answer, &u), -1);
        CHECK_STR(error, cases[i].error);
        CHECK(!u.present);
    }
}

static void chat_surfaces_read_as_before(void)
{
    struct gw_usage u;
    REQUIRE(read_as(GW_ENDPOINT_EMBEDDINGS, "{\"usage\":{\"prompt_tokens\":8,\"total_tokens\":8}}",
                    &u) == 0);
    CHECK(u.present && !u.has_completion_tokens);
    CHECK_EQ_I64(read_as(GW_ENDPOINT_CHAT_COMPLETIONS, "{\"usage\":{\"input_tokens\":8}}", &u), -1);
    CHECK_STR(error, "usage.prompt_tokens: required");
    /* chat and completions generate: a usage without their count is never 0 output */
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_I64(read_as(i == 0 ? GW_ENDPOINT_CHAT_COMPLETIONS : GW_ENDPOINT_COMPLETIONS,
                             "{\"usage\":{\"prompt_tokens\":8,\"total_tokens\":8}}", &u),
                     -1);
        CHECK_STR(error, "usage.completion_tokens: required");
        CHECK(!u.present);
    }
}

static void answers_that_cannot_be_read_are_counted_whole(void)
{
    static const char body[] = "{\"choices\":[{\"message\":{\"content\":\"Hi there\"}}],"
                               "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":"
                               "18446744073709551616}}";
    struct gw_tokens used;
    /* not parsed (the count is past 2^63 - 1): every byte is text */
    CHECK(!gw_answer_tokens(GW_ENDPOINT_CHAT_COMPLETIONS, NULL, body, strlen(body), 40, &used));
    CHECK_EQ_U64(used.input, 40);
    CHECK_EQ_U64(used.output, gw_estimate_text(body, strlen(body)));
    const struct jdoc_value *root = parse_answer("\"an answer that is a string\"");
    REQUIRE(root != NULL);
    CHECK(!gw_answer_tokens(GW_ENDPOINT_RESPONSES, root, "\"x y\"", 5, 40, &used));
    CHECK_EQ_U64(used.output, gw_estimate_text("\"x y\"", 5));
    /* an embedding generates nothing, read or not */
    CHECK(!gw_answer_tokens(GW_ENDPOINT_EMBEDDINGS, NULL, body, strlen(body), 40, &used));
    CHECK_EQ_U64(used.output, 0);
    /* read, without completion_tokens: its text counted, not 0 */
    root = parse_answer("{\"choices\":[{\"message\":{\"content\":\"Hi there\"}}],"
                        "\"usage\":{\"prompt_tokens\":5}}");
    REQUIRE(root != NULL);
    CHECK(!gw_answer_tokens(GW_ENDPOINT_CHAT_COMPLETIONS, root, "", 0, 40, &used));
    CHECK_EQ_U64(used.input, 40);
    CHECK_EQ_U64(used.output, gw_estimate_text("Hi there", 8));
    root = parse_answer("{\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}");
    REQUIRE(root != NULL);
    CHECK(gw_answer_tokens(GW_ENDPOINT_CHAT_COMPLETIONS, root, "", 0, 40, &used));
    CHECK_EQ_U64(used.input, 5);
    CHECK_EQ_U64(used.output, 3);
}

/* The count of texts, each a text of its own. */
static uint64_t texts_of(const char *const *pieces, size_t count)
{
    struct gw_text_counter counter;
    gw_text_counter_init(&counter);
    for (size_t i = 0; i < count; i++) {
        gw_text_counter_add(&counter, pieces[i], strlen(pieces[i]));
        gw_text_counter_break(&counter);
    }
    return gw_text_counter_tokens(&counter);
}

static void answers_without_usage_are_counted(void)
{
    const struct jdoc_value *root = parse_answer(
        "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"Hello there\","
        "\"tool_calls\":[{\"function\":{\"name\":\"get\",\"arguments\":\"{}\"}}]}},"
        "{\"text\":\"done\"}]}");
    REQUIRE(root != NULL);
    static const char *const chat[] = {"Hello there", "get", "{}", "done"};
    CHECK_EQ_U64(gw_answer_output_tokens(GW_ENDPOINT_CHAT_COMPLETIONS, root), texts_of(chat, 4));
    root = parse_answer("{\"type\":\"message\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
                        "\"Let me see\",\"signature\":\"abc\"},{\"type\":\"text\",\"text\":"
                        "\"Paris\"},{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"look\","
                        "\"input\":{\"q\":\"x\"}}]}");
    REQUIRE(root != NULL);
    static const char *const messages[] = {"Let me see", "Paris", "look", "{\"q\":\"x\"}"};
    CHECK_EQ_U64(gw_answer_output_tokens(GW_ENDPOINT_MESSAGES, root), texts_of(messages, 4));
    root = parse_answer(
        "{\"id\":\"resp_9\",\"object\":\"response\",\"output\":[{\"type\":\"reasoning\","
        "\"summary\":[{\"type\":\"summary_text\",\"text\":\"Thinking\"}]},{\"type\":"
        "\"function_call\",\"name\":\"shell\",\"arguments\":\"{\\\"cmd\\\":1}\"},{\"type\":"
        "\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"All done\"},{\"type\":"
        "\"refusal\",\"refusal\":\"no\"}]}]}");
    REQUIRE(root != NULL);
    static const char *const responses[] = {"Thinking", "shell", "{\"cmd\":1}", "All done", "no"};
    CHECK_EQ_U64(gw_answer_output_tokens(GW_ENDPOINT_RESPONSES, root), texts_of(responses, 5));
    const char *id;
    size_t length;
    REQUIRE(gw_answer_response_id(root, &id, &length) == 0);
    CHECK(length == 6 && memcmp(id, "resp_9", 6) == 0);
    CHECK_EQ_U64(gw_answer_output_tokens(GW_ENDPOINT_EMBEDDINGS, root), 0);
    root = parse_answer("[1]");
    REQUIRE(root != NULL);
    CHECK_EQ_U64(gw_answer_output_tokens(GW_ENDPOINT_RESPONSES, root), 0);
    CHECK_EQ_I64(gw_answer_response_id(root, &id, &length), -1);
}

int main(void)
{
    arena_init(&arena, NULL, 0);
    RUN(chat_usage_with_cached_tokens, "a chat usage with cached tokens is read exactly");
    RUN(embeddings_usage_has_no_completion, "an embeddings usage has no completion count");
    RUN(missing_usage_is_missing, "no usage, or usage null, is reported missing, not zero");
    RUN(absent_total_is_the_sum, "an absent total is prompt plus completion");
    RUN(malformed_usage_is_an_error, "every malformed field is an error naming it");
    RUN(largest_counts_are_read, "the largest counts are read");
    RUN(chat_reasoning_is_read, "chat reasoning tokens are read, and checked against the output");
    RUN(anthropic_cache_tokens_are_outside_its_input,
        "Anthropic: cache reads and both writes added to its input, the split honoured");
    RUN(anthropic_malformed_usage_is_an_error, "Anthropic: every malformed field is an error");
    RUN(anthropic_stream_usage_last_value_wins, "Anthropic stream: each field's last value wins, "
                                                "never summed; a bad delta changes nothing");
    RUN(responses_usage_has_cached_and_reasoning_inside,
        "Responses: cached inside input, reasoning inside output; every malformed field");
    RUN(chat_surfaces_read_as_before, "chat, completions and embeddings read their own shape");
    RUN(answers_that_cannot_be_read_are_counted_whole,
        "an answer not read, or read without completion_tokens, is counted from its text");
    RUN(answers_without_usage_are_counted,
        "an answer without usage: its generated text counted per surface; a response's id");
    arena_free(&arena);
    return test_summary();
}
