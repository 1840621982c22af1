/* Unit tests of the surfaces' error bodies (src/gateway/gw_error.c): the
 * exact OpenAI and Anthropic shapes, the Anthropic type of each status,
 * the shape chosen per surface, and JSON strings that a strict parser
 * reads back whatever bytes went in (quotes, controls, bytes that are not
 * UTF-8, line separators, random bytes); which answers say not to retry. */
#include <stdio.h>
#include <string.h>

#include "gateway/gw_error.h"
#include "test.h"
#include "util/jdoc.h"

static char out[8192];

static const char *written(struct buffer *b)
{
    snprintf(out, sizeof out, "%.*s", (int)b->length, b->data != NULL ? b->data : "");
    buffer_free(b);
    buffer_init(b, NULL, 0);
    return out;
}

static void openai_shape(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_error_openai(&b, "Budget team:sales:usd:month is spent.", "insufficient_quota", NULL,
                    "insufficient_quota");
    CHECK_STR(written(&b), "{\"error\":{\"message\":\"Budget team:sales:usd:month is spent.\","
                           "\"type\":\"insufficient_quota\",\"param\":null,\"code\":"
                           "\"insufficient_quota\"}}");
    gw_error_openai(&b, "bad", "invalid_request_error", "max_output_tokens", NULL);
    CHECK_STR(written(&b), "{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\","
                           "\"param\":\"max_output_tokens\",\"code\":null}}");
    buffer_free(&b);
}

static void anthropic_shape_and_types(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_error_anthropic(&b, GW_ANTHROPIC_RATE_LIMIT,
                       "Number of requests has exceeded your rate "
                       "limit.",
                       NULL);
    CHECK_STR(written(&b), "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
                           "\"message\":\"Number of requests has exceeded your rate limit.\"}}");
    gw_error_anthropic(&b, GW_ANTHROPIC_NOT_FOUND, "x", "gw:bot:1");
    CHECK_STR(written(&b), "{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\","
                           "\"message\":\"x\"},\"request_id\":\"gw:bot:1\"}");
    static const struct {
        unsigned status;
        const char *type;
    } cases[] = {
        {400, "invalid_request_error"},
        {401, "authentication_error"},
        {403, "permission_error"},
        {404, "not_found_error"},
        {409, "invalid_request_error"},
        {413, "request_too_large"},
        {429, "rate_limit_error"},
        {500, "api_error"},
        {502, "api_error"},
        {503, "overloaded_error"},
        {504, "api_error"},
        {529, "overloaded_error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_STR(gw_anthropic_error_type(gw_anthropic_error_for_status(cases[i].status)),
                  cases[i].type);
    buffer_free(&b);
}

static void each_surface_its_shape(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_error_for(&b, GW_ENDPOINT_MESSAGES, 429, "insufficient_quota", "insufficient_quota",
                 "spent");
    CHECK_STR(written(&b), "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
                           "\"message\":\"spent\"}}");
    gw_error_for(&b, GW_ENDPOINT_MESSAGES_COUNT_TOKENS, 401, NULL, "invalid_api_key", "who?");
    CHECK_STR(written(&b), "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
                           "\"message\":\"who?\",\"code\":\"invalid_api_key\"}}");
    gw_error_for(&b, GW_ENDPOINT_RESPONSES, 429, "insufficient_quota", "insufficient_quota",
                 "spent");
    CHECK_STR(written(&b), "{\"error\":{\"message\":\"spent\",\"type\":\"insufficient_quota\","
                           "\"param\":null,\"code\":\"insufficient_quota\"}}");
    gw_error_for(&b, GW_ENDPOINT_CHAT_COMPLETIONS, 502, NULL, "upstream_error", "down");
    CHECK_STR(written(&b), "{\"error\":{\"message\":\"down\",\"type\":\"server_error\","
                           "\"param\":null,\"code\":\"upstream_error\"}}");
    gw_error_for(&b, GW_ENDPOINT_RESPONSES_INPUT_TOKENS, 400, NULL, NULL, "no");
    CHECK_STR(written(&b), "{\"error\":{\"message\":\"no\",\"type\":\"invalid_request_error\","
                           "\"param\":null,\"code\":null}}");
    buffer_free(&b);
}

/* The JSON string of text[0..length), parsed back strictly; its decoded
 * bytes into decoded (NUL-terminated), or -1 when it does not parse. */
static int round_trip(const char *text, size_t length, char *decoded, size_t size)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    gw_json_string(&b, text, length);
    static char copy[8192];
    int result = -1;
    if (!b.failed && b.length < sizeof copy) {
        memcpy(copy, b.data, b.length);
        struct arena arena;
        arena_init(&arena, NULL, 0);
        struct jdoc_value *root;
        char error[256];
        if (jdoc_parse(copy, b.length, &arena, &root, error, sizeof error) == 0 &&
            jdoc_is(root, JDOC_STRING) && root->count < size) {
            memcpy(decoded, root->as.string, root->count);
            decoded[root->count] = '\0';
            result = 0;
        }
        arena_free(&arena);
    }
    buffer_free(&b);
    return result;
}

static void hostile_text_is_escaped(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    const char hostile[] = "say \"}\\ \n\r\t\x01\x1f\x7f done";
    gw_json_string(&b, hostile, sizeof hostile - 1);
    CHECK_STR(written(&b), "\"say \\\"}\\\\ \\n\\r\\t\\u0001\\u001f\x7f done\"");
    /* Bytes that are not UTF-8: a lone 0xff, a cut sequence, an overlong
     * '/', a surrogate, a code point past U+10FFFF: each byte U+FFFD. */
    const char bad[] = "a\xff"
                       "b\xe2\x82"
                       "c\xc0\xaf"
                       "d\xed\xa0\x80"
                       "e\xf4\x90\x80\x80";
    gw_json_string(&b, bad, sizeof bad - 1);
    CHECK_STR(written(&b), "\"a\\ufffdb\\ufffd\\ufffdc\\ufffd\\ufffdd\\ufffd\\ufffd\\ufffde"
                           "\\ufffd\\ufffd\\ufffd\\ufffd\"");
    /* Valid UTF-8 passes; the line separators are escaped; NUL is U+FFFD. */
    const char good[] = "\xc3\xa9\xe4\xb8\x96\xf0\x9f\x8e\x89\xe2\x80\xa8\xe2\x80\xa9\0z";
    gw_json_string(&b, good, sizeof good - 1);
    CHECK_STR(written(&b), "\"\xc3\xa9\xe4\xb8\x96\xf0\x9f\x8e\x89\\u2028\\u2029\\ufffdz\"");
    buffer_free(&b);
    char decoded[256];
    REQUIRE(round_trip(hostile, sizeof hostile - 1, decoded, sizeof decoded) == 0);
    CHECK_STR(decoded, hostile);
}

static void random_bytes_always_parse(void)
{
    uint64_t x = 0x2545f4914f6cdd1dull;
    int failures = 0, changed = 0;
    for (int round = 0; round < 5000; round++) {
        char text[64], decoded[512];
        size_t length = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = x % sizeof text;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* Mostly ASCII, some high bytes, some controls. */
            unsigned r = (unsigned)(x >> 32) % 10;
            text[length++] = (char)(r < 6 ? 0x20 + (x % 95) : r < 9 ? 0x80 + (x % 128) : x % 32);
        }
        if (round_trip(text, length, decoded, sizeof decoded) != 0) {
            failures++;
            continue;
        }
        /* Text without high bytes and NUL comes back as it was. */
        bool plain = true;
        for (size_t i = 0; i < length; i++)
            plain = plain && (unsigned char)text[i] < 0x80 && text[i] != 0;
        changed += plain && (strlen(decoded) != length || memcmp(decoded, text, length) != 0);
    }
    CHECK_EQ_I64(failures, 0);
    CHECK_EQ_I64(changed, 0);
}

static void should_not_retry(void)
{
    /* Every 4xx a retry cannot change; not those a retry may pass. */
    static const unsigned final[] = {400, 401, 403, 404, 405, 411, 413, 414, 415, 422, 431, 499};
    for (size_t i = 0; i < sizeof final / sizeof final[0]; i++)
        CHECK(gw_should_not_retry(final[i], 0));
    CHECK(!gw_should_not_retry(408, 0));
    CHECK(!gw_should_not_retry(409, 0));
    CHECK(!gw_should_not_retry(425, 0));
    /* A 429 only when its retry is further than an SDK waits. */
    CHECK(!gw_should_not_retry(429, 0));
    CHECK(!gw_should_not_retry(429, 1000));
    CHECK(!gw_should_not_retry(429, GW_SHOULD_RETRY_MS_MAX));
    CHECK(gw_should_not_retry(429, GW_SHOULD_RETRY_MS_MAX + 1));
    CHECK(gw_should_not_retry(429, INT64_MAX));
    /* 5xx: a retry may pass, but a method or version never taken. */
    static const unsigned passing[] = {500, 502, 503, 504, 529, 599};
    for (size_t i = 0; i < sizeof passing / sizeof passing[0]; i++)
        CHECK(!gw_should_not_retry(passing[i], 1000));
    CHECK(gw_should_not_retry(501, 0));
    CHECK(gw_should_not_retry(505, 0));
    /* Not errors, and any number an upstream may send. */
    CHECK(!gw_should_not_retry(200, 0));
    CHECK(!gw_should_not_retry(307, 0));
    CHECK(!gw_should_not_retry(0, 0));
    CHECK(!gw_should_not_retry(999, 0));
}

int main(void)
{
    RUN(openai_shape, "OpenAI's error object, param and code null or set");
    RUN(anthropic_shape_and_types, "Anthropic's error shape, and its type for each status");
    RUN(each_surface_its_shape, "Messages routes get Anthropic's shape, the others OpenAI's");
    RUN(hostile_text_is_escaped,
        "quotes, controls, bytes that are not UTF-8 and line separators are escaped");
    RUN(random_bytes_always_parse, "any bytes make a JSON string a strict parser reads back");
    RUN(should_not_retry, "x-should-retry: false on a 4xx but 408, 409, 425, a 429 over 60 s");
    return test_summary();
}
