/* Unit tests of the Gemini dialect (src/gateway/gw_gemini.c): the route's
 * target, the upstream path, the estimate and its bounds, the output bound
 * written upstream, usageMetadata (every part, a missing count never zero,
 * every malformed field), a stream's cumulative usage read as its last
 * value, and errors in Google's shape. */
#include <stdio.h>
#include <string.h>

#include "gateway/gw_error.h"
#include "gateway/gw_gemini.h"
#include "gateway/gw_request.h"
#include "gateway/gw_sse.h"
#include "test.h"

static struct arena arena;
static char text[4096];
static char error[256];

static struct jdoc_value *parse(const char *json)
{
    arena_reset(&arena);
    snprintf(text, sizeof text, "%s", json);
    struct jdoc_value *root = NULL;
    if (jdoc_parse(text, strlen(text), &arena, &root, error, sizeof error) != 0) {
        fprintf(stderr, "  test JSON does not parse: %s\n", error);
        return NULL;
    }
    error[0] = '\0';
    return root;
}

static const struct gw_upstream upstream = {.name = "google", .api = GW_API_GEMINI};
static const struct gw_model model = {.name = "g",
                                      .upstream = &upstream,
                                      .upstream_model = "gemini-2.5-flash",
                                      .max_output_tokens = 1000,
                                      .default_max_output_tokens = 300};

static void targets_and_paths(void)
{
    const char *name;
    size_t length;
    enum gw_gemini_method method;
    static const char target[] = "gemini-2.5-flash:streamGenerateContent";
    REQUIRE(gw_gemini_target(target, strlen(target), &name, &length, &method, error,
                             sizeof error) == 0);
    CHECK(length == 16 && memcmp(name, "gemini-2.5-flash", 16) == 0);
    CHECK_EQ_I64(method, GW_GEMINI_STREAM);
    static const char colons[] = "a:b:countTokens"; /* split at the last ':' */
    REQUIRE(gw_gemini_target(colons, strlen(colons), &name, &length, &method, error,
                             sizeof error) == 0);
    CHECK(length == 3 && method == GW_GEMINI_COUNT_TOKENS);
    static const char *const bad[] = {"m", ":generateContent", "m:embedContent",
                                      "m:", "m:generatecontent"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_I64(
            gw_gemini_target(bad[i], strlen(bad[i]), &name, &length, &method, error, sizeof error),
            -1);
    char path[64];
    REQUIRE(gw_gemini_upstream_path("gemini-2.5-flash", GW_GEMINI_STREAM, true, path,
                                    sizeof path) == 0);
    CHECK_STR(path, "/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    CHECK_EQ_I64(gw_gemini_upstream_path("a?key=x", GW_GEMINI_GENERATE, false, path, sizeof path),
                 -1);
    CHECK_EQ_I64(gw_gemini_upstream_path("gemini-2.5-flash", GW_GEMINI_GENERATE, false, path, 20),
                 -1);
}

static int estimate(const char *json, struct gw_estimate *out)
{
    struct jdoc_value *root = parse(json);
    if (root == NULL)
        return -2;
    return gw_estimate_request(root, GW_ENDPOINT_GEMINI, &model, out, error, sizeof error);
}

static void estimates_and_bounds(void)
{
    struct gw_estimate e;
    REQUIRE(estimate("{\"contents\":[{\"parts\":[{\"text\":\"hello there\"}]}]}", &e) == 0);
    CHECK(e.input_tokens > 0);
    CHECK_EQ_U64(e.output_tokens, 300); /* the default */
    uint64_t plain = e.input_tokens;
    REQUIRE(estimate("{\"contents\":[{\"parts\":[{\"text\":\"hello there\"},{\"inlineData\":"
                     "{\"mimeType\":\"image/png\",\"data\":\"AAAA\"}}]}],\"generationConfig\":"
                     "{\"maxOutputTokens\":1000,\"candidateCount\":8}}",
                     &e) == 0);
    CHECK_EQ_U64(e.input_tokens, plain + GW_GEMINI_MEDIA_TOKENS);
    CHECK_EQ_U64(e.output_tokens, 8000);
    CHECK_EQ_U64(e.output_tokens_per_choice, 1000);
    static const char *const refused[] = {
        "{}",
        "{\"contents\":{}}",
        "{\"contents\":[7]}",
        "{\"contents\":[{\"parts\":[{\"text\":7}]}]}",
        "{\"contents\":[],\"generationConfig\":[]}",
        "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":1001}}",
        "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":0}}",
        "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":null}}",
        "{\"contents\":[],\"generationConfig\":{\"candidateCount\":9}}",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (estimate(refused[i], &e) != -1)
            fprintf(stderr, "  accepted: %s\n", refused[i]);
        CHECK(error[0] != '\0');
    }
}

/* The body the gateway sends upstream for json with the bound. */
static const char *rewritten(const char *json, uint64_t bound, char *out, size_t size)
{
    struct jdoc_value *root = parse(json);
    if (root == NULL)
        return "";
    static char body[1024];
    snprintf(body, sizeof body, "%s", json); /* the parse decoded `text` in place */
    struct buffer b;
    buffer_init(&b, NULL, 0);
    struct gw_request_info info;
    if (gw_request_rewrite_for(GW_ENDPOINT_GEMINI, body, strlen(body), root, &model, bound, &b,
                               &info, error, sizeof error) != 0)
        snprintf(out, size, "error: %s", error);
    else
        snprintf(out, size, "%.*s", (int)b.length, b.data);
    buffer_free(&b);
    return out;
}

static void the_bound_is_written_when_absent(void)
{
    char out[1024];
    CHECK_STR(rewritten("{\"contents\":[]}", 300, out, sizeof out),
              "{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":300}}");
    CHECK_STR(rewritten("{}", 300, out, sizeof out),
              "{\"generationConfig\":{\"maxOutputTokens\":300}}");
    CHECK_STR(
        rewritten("{\"generationConfig\": { \"topK\": 64 },\"contents\":[]}", 300, out, sizeof out),
        "{\"generationConfig\":{\"maxOutputTokens\":300, \"topK\": 64 },\"contents\":[]}");
    CHECK_STR(rewritten("{\"generationConfig\":{ },\"contents\":[]}", 300, out, sizeof out),
              "{\"generationConfig\":{\"maxOutputTokens\":300 },\"contents\":[]}");
    CHECK_STR(rewritten("{\"generationConfig\":null}", 300, out, sizeof out),
              "{\"generationConfig\":{\"maxOutputTokens\":300}}");
    /* given: byte for byte; no bound (count tokens): byte for byte */
    static const char given[] = "{ \"generationConfig\" : {\"maxOutputTokens\": 12} }";
    CHECK_STR(rewritten(given, 300, out, sizeof out), given);
    CHECK_STR(rewritten("{\"contents\": []}", 0, out, sizeof out), "{\"contents\": []}");
}

static void usage_metadata_is_read_exactly(void)
{
    struct gw_usage u;
    struct jdoc_value *root = parse(
        "{\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":3000,"
        "\"cachedContentTokenCount\":2000,\"candidatesTokenCount\":400,\"thoughtsTokenCount\":"
        "100,\"toolUsePromptTokenCount\":50,\"totalTokenCount\":3550}}");
    REQUIRE(root != NULL);
    REQUIRE(gw_usage_read_answer(GW_ENDPOINT_GEMINI, root, &u, error, sizeof error) == 0);
    CHECK(u.present && u.has_completion_tokens);
    struct gw_tokens t = gw_usage_tokens(&u);
    CHECK_EQ_U64(t.input, 3050);
    CHECK_EQ_U64(t.cached_input, 2000);
    CHECK_EQ_U64(t.output, 500);
    CHECK_EQ_U64(t.reasoning, 100);
    /* an array (a stream without alt=sse): the last element that has one */
    root = parse("[{\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":1}},"
                 "{\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":5}},"
                 "{\"candidates\":[]}]");
    REQUIRE(root != NULL);
    REQUIRE(gw_gemini_usage_read(root, &u, error, sizeof error) == 0);
    CHECK_EQ_U64(u.completion_tokens, 5);
    /* none at all: missing, not zero */
    root = parse("{\"candidates\":[]}");
    REQUIRE(gw_gemini_usage_read(root, &u, error, sizeof error) == 0);
    CHECK(!u.present);
}

static void a_missing_count_is_never_zero(void)
{
    static const char answer[] =
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"alpha bravo charlie\"}]}}],"
        "\"usageMetadata\":{\"promptTokenCount\":1001,\"thoughtsTokenCount\":4}}";
    struct jdoc_value *root = parse(answer);
    REQUIRE(root != NULL);
    struct gw_tokens t;
    CHECK(gw_gemini_answer_tokens(root, answer, strlen(answer), 7, &t));
    CHECK_EQ_U64(t.input, 1001);
    CHECK_EQ_U64(t.output, 4 + gw_estimate_text("alpha bravo charlie", 19));
    CHECK_EQ_U64(t.reasoning, 4);
    static const char *const malformed[] = {
        "{\"usageMetadata\":{\"candidatesTokenCount\":1}}",
        "{\"usageMetadata\":{\"promptTokenCount\":-1}}",
        "{\"usageMetadata\":{\"promptTokenCount\":1.5}}",
        "{\"usageMetadata\":{\"promptTokenCount\":\"3\"}}",
        "{\"usageMetadata\":{\"promptTokenCount\":3,\"cachedContentTokenCount\":4}}",
        "{\"usageMetadata\":{\"promptTokenCount\":9223372036854775807,"
        "\"toolUsePromptTokenCount\":1}}",
        "{\"usageMetadata\":7}",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        struct gw_usage u;
        root = parse(malformed[i]);
        REQUIRE(root != NULL);
        CHECK_EQ_I64(gw_gemini_usage_read(root, &u, error, sizeof error), -1);
        CHECK(!u.present);
        CHECK(strncmp(error, "usageMetadata", 13) == 0);
    }
}

struct stream_seen {
    int events, ends;
};

static int count_event(void *context, const struct gw_sse_event *event)
{
    struct stream_seen *s = context;
    s->events++;
    s->ends += event->stream_end;
    return 0;
}

static void a_stream_is_charged_its_last_usage(void)
{
    static const char stream[] =
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"alpha\"}]},\"index\":0}],"
        "\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":1}}\r\n\r\n"
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" bravo\"}]},\"index\":0}],"
        "\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":2}}\r\n\r\n"
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" charlie\"}]},"
        "\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":10,"
        "\"candidatesTokenCount\":3,\"thoughtsTokenCount\":2}}\r\n\r\n";
    struct gw_sse sse;
    gw_sse_init_for(&sse, GW_ENDPOINT_GEMINI);
    struct gw_sse_output output;
    gw_sse_output_init(&output);
    struct stream_seen seen = {0};
    char sse_error[GW_SSE_ERROR_SIZE];
    for (size_t at = 0; at < sizeof stream - 1; at += 7) { /* split anywhere */
        size_t n = sizeof stream - 1 - at < 7 ? sizeof stream - 1 - at : 7;
        REQUIRE(gw_sse_feed(&sse, stream + at, n, count_event, &seen, sse_error,
                            sizeof sse_error) == 0);
    }
    CHECK_EQ_I64(seen.events, 3);
    CHECK_EQ_I64(seen.ends, 1);
    CHECK(gw_sse_ended(&sse));
    struct gw_tokens t;
    CHECK(gw_sse_stream_tokens(&sse, &output, 99, &t));
    CHECK_EQ_U64(t.input, 10);
    CHECK_EQ_U64(t.output, 5); /* the last: 3 + 2 thoughts, never 1 + 2 + 3 */
    CHECK_EQ_U64(t.reasoning, 2);
    gw_sse_free(&sse);
}

static void errors_have_googles_shape(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    const char *limits[] = {"team:x:usd:month", "a\"b"};
    gw_gemini_error(&b, 429, "Budget exhausted", 2419199001, limits, 2, NULL);
    buffer_append_char(&b, '\0');
    CHECK_STR(b.data, "{\"error\":{\"code\":429,\"message\":\"Budget exhausted\",\"status\":"
                      "\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/"
                      "google.rpc.RetryInfo\",\"retryDelay\":\"2419200s\"},{\"@type\":"
                      "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{"
                      "\"subject\":\"team:x:usd:month\",\"description\":\"a limit of the "
                      "gateway that this call does not fit\"},{\"subject\":\"a\\\"b\","
                      "\"description\":\"a limit of the gateway that this call does not "
                      "fit\"}]}]}}");
    b.length = 0;
    gw_error_for(&b, GW_ENDPOINT_GEMINI_COUNT_TOKENS, 401, NULL, NULL, "no key");
    buffer_append_char(&b, '\0');
    CHECK_STR(b.data, "{\"error\":{\"code\":401,\"message\":\"no key\",\"status\":"
                      "\"UNAUTHENTICATED\"}}");
    CHECK_STR(gw_gemini_status(404), "NOT_FOUND");
    CHECK_STR(gw_gemini_status(400), "INVALID_ARGUMENT");
    CHECK_STR(gw_gemini_status(504), "DEADLINE_EXCEEDED");
    buffer_free(&b);
}

int main(void)
{
    arena_init(&arena, NULL, 0);
    RUN(targets_and_paths, "{model}:{method} split at the last ':'; unserved methods refused; "
                           "the upstream path and its refusals");
    RUN(estimates_and_bounds, "contents, media and candidates estimated; every bound and type "
                              "checked, one past refused");
    RUN(the_bound_is_written_when_absent,
        "maxOutputTokens written first in generationConfig when absent; a given one untouched");
    RUN(usage_metadata_is_read_exactly,
        "cached inside the prompt, tool use added to it, thoughts the reasoning of the output");
    RUN(a_missing_count_is_never_zero,
        "no candidatesTokenCount: the text counted; every malformed count an error");
    RUN(a_stream_is_charged_its_last_usage, "a stream's cumulative usageMetadata: the last wins");
    RUN(errors_have_googles_shape, "Google's error with RetryInfo and QuotaFailure details");
    arena_free(&arena);
    return test_summary();
}
