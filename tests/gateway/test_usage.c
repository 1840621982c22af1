/* Unit tests of reading an upstream answer's usage (src/gateway/gw_usage.c):
 * chat and embeddings shapes, cached tokens, missing usage reported as
 * missing, and every malformed field. */
#include <stdio.h>
#include <string.h>

#include "gateway/gw_usage.h"
#include "test.h"

static struct arena arena;
static char text[4096];
static char error[GW_USAGE_ERROR_SIZE];

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

int main(void)
{
    arena_init(&arena, NULL, 0);
    RUN(chat_usage_with_cached_tokens, "a chat usage with cached tokens is read exactly");
    RUN(embeddings_usage_has_no_completion, "an embeddings usage has no completion count");
    RUN(missing_usage_is_missing, "no usage, or usage null, is reported missing, not zero");
    RUN(absent_total_is_the_sum, "an absent total is prompt plus completion");
    RUN(malformed_usage_is_an_error, "every malformed field is an error naming it");
    RUN(largest_counts_are_read, "the largest counts are read");
    arena_free(&arena);
    return test_summary();
}
