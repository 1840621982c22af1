/* Unit tests of gateway.json loading (src/gateway/gw_config.c): a valid
 * file with its defaults and lookups, every rule's error with its exact
 * message (file, line, field), each bound one past, provider keys from the
 * environment and from files, and reference counting. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/gw_config.h"
#include "gateway/gw_secret.h"
#include "test.h"

#define KEY_ENV "GW_TEST_OPENAI_KEY"
#define DIGEST_A "8f0d5b0aa1bbd0e0d4d5c1d1d1d3b0d2a9e6f3b5c7d9e1f3a5b7c9d1e3f5a7b9"
#define DIGEST_B "0000000000000000000000000000000000000000000000000000000000000001"

#define UPSTREAMS                                                                                  \
    "[{\"name\":\"openai\",\"base_url\":\"https://api.openai.com/v1/\",\"api_key_env\":\"" KEY_ENV \
    "\"},{\"name\":\"local\",\"base_url\":\"http://127.0.0.1:8000\",\"timeout_seconds\":30,"       \
    "\"connect_timeout_seconds\":2}]"
#define MODELS                                                                                     \
    "[{\"name\":\"gpt-4o-mini\",\"upstream\":\"openai\",\"upstream_model\":\"gpt-4o-mini-2024\","  \
    "\"input_usd_micros_per_mtok\":150000,\"cached_input_usd_micros_per_mtok\":75000,"             \
    "\"output_usd_micros_per_mtok\":600000,\"max_output_tokens\":16384,"                           \
    "\"default_max_output_tokens\":1024},"                                                         \
    "{\"name\":\"llama\",\"upstream\":\"local\",\"input_usd_micros_per_mtok\":0,"                  \
    "\"output_usd_micros_per_mtok\":0,\"max_output_tokens\":4096,"                                 \
    "\"default_max_output_tokens\":4096}]"
#define LIMITS                                                                                     \
    "[{\"key\":\"global:{upstream}:{model}:rpm\",\"amount\":\"requests\"},"                        \
    "{\"key\":\"global:{upstream}:{model}:tpm\",\"amount\":\"tokens\"},"                           \
    "{\"key\":\"caller:{caller}:concurrent\",\"amount\":\"requests\"},"                            \
    "{\"key\":\"team:{team}:usd:month\",\"amount\":\"usd_micros\"}]"
#define KEYS                                                                                       \
    "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"sales-bot\",\"team\":\"sales\","                   \
    "\"models\":[\"llama\",\"gpt-4o-mini\"]},"                                                     \
    "{\"sha256\":\"" DIGEST_B "\",\"caller\":\"ops\",\"team\":\"ops\",\"models\":[]}]"

static char error[GW_CONFIG_ERROR_SIZE];

static struct gw_config *parse(const char *text)
{
    struct gw_config *config = NULL;
    error[0] = '\0';
    if (gw_config_parse("gateway.json", text, strlen(text), &config, error, sizeof error) != 0)
        return NULL;
    return config;
}

/* The four sections into one document. */
static struct gw_config *parse4(const char *upstreams, const char *models, const char *limits,
                                const char *keys)
{
    size_t size = strlen(upstreams) + strlen(models) + strlen(limits) + strlen(keys) + 128;
    char *text = malloc(size);
    snprintf(text, size, "{\"upstreams\":%s,\"models\":%s,\"limits\":%s,\"keys\":%s}", upstreams,
             models, limits, keys);
    struct gw_config *config = parse(text);
    free(text);
    return config;
}

/* Expects the document to fail with exactly `expected`. */
static void fails_with(const char *upstreams, const char *models, const char *limits,
                       const char *keys, const char *expected)
{
    struct gw_config *config = parse4(upstreams, models, limits, keys);
    CHECK(config == NULL);
    CHECK_STR(error, expected);
    gw_config_release(config);
}

static void valid_config_loads_with_defaults(void)
{
    struct gw_config *c = parse4(UPSTREAMS, MODELS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    CHECK_EQ_U64(c->upstream_count, 2);
    CHECK_STR(c->upstreams[0].base_url, "https://api.openai.com/v1"); /* trailing '/' gone */
    CHECK_STR(c->upstreams[0].api_key, "sk-test-123");
    CHECK_EQ_U64(c->upstreams[0].timeout_seconds, 600);
    CHECK_EQ_U64(c->upstreams[0].connect_timeout_seconds, 10);
    CHECK(c->upstreams[1].api_key == NULL);
    CHECK_EQ_U64(c->upstreams[1].timeout_seconds, 30);
    CHECK_EQ_U64(c->upstreams[1].connect_timeout_seconds, 2);
    CHECK_EQ_U64(c->model_count, 2);
    CHECK_STR(c->models[0].upstream_model, "gpt-4o-mini-2024");
    CHECK_STR(c->models[1].upstream_model, "llama"); /* defaults to the name */
    CHECK(c->models[1].upstream == &c->upstreams[1]);
    CHECK_EQ_U64(c->models[0].cached_input_usd_micros_per_mtok, 75000);
    CHECK_EQ_U64(c->models[1].cached_input_usd_micros_per_mtok, 0);
    CHECK_EQ_U64(c->limit_count, 4);
    CHECK_EQ_U64(c->limits[3].amount, GW_AMOUNT_USD_MICROS);
    CHECK(c->limits[3].uses_team);
    CHECK(!c->limits[0].uses_team);
    CHECK_EQ_U64(c->key_count, 2);
    CHECK_STR(c->keys[0].team, "sales");
    CHECK_EQ_U64(c->keys[0].model_count, 2);
    CHECK_EQ_U64(c->keys[1].model_count, 0);
    CHECK_STR(c->path, "gateway.json");
    gw_config_release(c);
}

static void templates_split_into_parts(void)
{
    struct gw_config *c = parse4(UPSTREAMS, MODELS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    const struct gw_limit *l = &c->limits[0]; /* global:{upstream}:{model}:rpm */
    REQUIRE(l->part_count == 5);
    CHECK(l->parts[0].placeholder == GW_TEXT && l->parts[0].length == 7 &&
          memcmp(l->parts[0].text, "global:", 7) == 0);
    CHECK(l->parts[1].placeholder == GW_UPSTREAM);
    CHECK(l->parts[2].placeholder == GW_TEXT && l->parts[2].length == 1);
    CHECK(l->parts[3].placeholder == GW_MODEL);
    CHECK(l->parts[4].placeholder == GW_TEXT && l->parts[4].length == 4 &&
          memcmp(l->parts[4].text, ":rpm", 4) == 0);
    gw_config_release(c);
}

static void lookups_find_keys_and_models(void)
{
    struct gw_config *c = parse4(UPSTREAMS, MODELS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    uint8_t digest[GW_SHA256_BYTES];
    REQUIRE(gw_hex_decode(DIGEST_A, 64, digest, sizeof digest) == 0);
    const struct gw_key *a = gw_config_find_key(c, digest);
    CHECK(a == &c->keys[0]);
    digest[31] ^= 1;
    CHECK(gw_config_find_key(c, digest) == NULL);
    REQUIRE(gw_hex_decode(DIGEST_B, 64, digest, sizeof digest) == 0);
    CHECK(gw_config_find_key(c, digest) == &c->keys[1]);
    CHECK(gw_config_find_model(c, "llama", 5) == &c->models[1]);
    CHECK(gw_config_find_model(c, "gpt-4o-mini", 11) == &c->models[0]);
    CHECK(gw_config_find_model(c, "gpt-4o-minix", 11) == &c->models[0]); /* length counts */
    CHECK(gw_config_find_model(c, "gpt-4o", 6) == NULL);
    CHECK(gw_config_find_model(c, "zzz", 3) == NULL);
    CHECK(gw_key_allows_model(&c->keys[0], &c->models[0]));
    CHECK(gw_key_allows_model(&c->keys[0], &c->models[1]));
    CHECK(gw_key_allows_model(&c->keys[1], &c->models[1])); /* empty list: every model */
    gw_config_release(c);
}

static void key_model_list_restricts(void)
{
    struct gw_config *c = parse4(
        UPSTREAMS, MODELS, LIMITS,
        "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"a\",\"team\":\"t\",\"models\":[\"llama\"]},"
        "{\"sha256\":\"" DIGEST_B "\",\"caller\":\"b\",\"team\":\"t\",\"models\":null}]");
    REQUIRE(c != NULL);
    CHECK(!gw_key_allows_model(&c->keys[0], &c->models[0]));
    CHECK(gw_key_allows_model(&c->keys[0], &c->models[1]));
    CHECK(gw_key_allows_model(&c->keys[1], &c->models[0]));
    gw_config_release(c);
}

static void many_keys_are_all_found(void)
{
    enum { COUNT = 5000 };
    size_t size = COUNT * 120 + 64;
    char *keys = malloc(size), *p = keys;
    p += sprintf(p, "[");
    for (int i = 0; i < COUNT; i++)
        p += sprintf(p, "%s{\"sha256\":\"%064x\",\"caller\":\"c%d\",\"team\":\"t\"}",
                     i > 0 ? "," : "", i * 7919, i);
    sprintf(p, "]");
    struct gw_config *c = parse4(UPSTREAMS, MODELS, LIMITS, keys);
    free(keys);
    REQUIRE(c != NULL);
    int found = 0;
    for (int i = 0; i < COUNT; i++) {
        char hex[65];
        uint8_t digest[GW_SHA256_BYTES];
        snprintf(hex, sizeof hex, "%064x", i * 7919);
        REQUIRE(gw_hex_decode(hex, 64, digest, sizeof digest) == 0);
        found += gw_config_find_key(c, digest) == &c->keys[i];
    }
    CHECK_EQ_I64(found, COUNT);
    gw_config_release(c);
}

static void retain_and_release_count_holders(void)
{
    struct gw_config *c = parse4(UPSTREAMS, MODELS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    CHECK(gw_config_retain(c) == c);
    CHECK_EQ_U64(atomic_load(&c->references), 2);
    gw_config_release(c);
    CHECK_EQ_U64(atomic_load(&c->references), 1);
    gw_config_release(c); /* frees: the sanitizer build would report a leak otherwise */
    gw_config_release(NULL);
}

static void error_names_file_line_and_field(void)
{
    const char *text = "{\n"
                       "  \"upstreams\": [{\"name\": \"openai\",\n"
                       "                 \"base_url\": \"https://api.openai.com/v1\"}],\n"
                       "  \"models\": [\n"
                       "    {\n"
                       "      \"name\": \"gpt-4o-mini\",\n"
                       "      \"upstream\": \"opnai\",\n"
                       "      \"input_usd_micros_per_mtok\": 150000\n"
                       "    }\n"
                       "  ],\n"
                       "  \"limits\": [{\"key\": \"k\", \"amount\": \"tokens\"}],\n"
                       "  \"keys\": [{\"sha256\": \"" DIGEST_B "\", \"caller\": \"c\"}]\n"
                       "}\n";
    CHECK(parse(text) == NULL);
    CHECK_STR(error, "gateway.json: line 7: models[0].upstream: unknown upstream 'opnai'");
}

static void document_errors(void)
{
    CHECK(parse("{\"upstreams\":") == NULL);
    CHECK(strncmp(error, "gateway.json: invalid JSON: ", 28) == 0);
    CHECK(parse("[]") == NULL);
    CHECK_STR(error, "gateway.json: line 1: must be a JSON object");
    CHECK(parse("{\"upstreams\":[],\"extra\":1}") == NULL);
    CHECK_STR(error, "gateway.json: line 1: extra: unknown field");
    fails_with("[]", MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams: must be an array of 1..64 entries");
    fails_with(UPSTREAMS, "{}", LIMITS, KEYS,
               "gateway.json: line 1: models: must be an array of 1..1024 entries");
    fails_with(UPSTREAMS, MODELS, "[]", KEYS,
               "gateway.json: line 1: limits: must be an array of 1..64 entries");
    fails_with(UPSTREAMS, MODELS, LIMITS, "{}",
               "gateway.json: line 1: keys: must be an array of 0..100000 entries");
    CHECK(parse("{\"upstreams\":" UPSTREAMS ",\"models\":" MODELS ",\"keys\":" KEYS "}") == NULL);
    CHECK_STR(error, "gateway.json: line 1: limits: required");
}

/* Keys may all come from the Keys API: absent, null or [] is a config with
 * no file key, which finds none. */
static void keys_may_be_left_out(void)
{
    static const char *const texts[] = {
        "{\"upstreams\":" UPSTREAMS ",\"models\":" MODELS ",\"limits\":" LIMITS "}",
        "{\"upstreams\":" UPSTREAMS ",\"models\":" MODELS ",\"limits\":" LIMITS ",\"keys\":null}",
        "{\"upstreams\":" UPSTREAMS ",\"models\":" MODELS ",\"limits\":" LIMITS ",\"keys\":[]}",
    };
    uint8_t digest[GW_SHA256_BYTES];
    memset(digest, 0, sizeof digest);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct gw_config *c = parse(texts[i]);
        REQUIRE(c != NULL);
        CHECK_EQ_U64(c->key_count, 0);
        CHECK_EQ_U64(c->limit_count, 4);
        CHECK(gw_config_find_key(c, digest) == NULL);
        gw_config_release(c);
    }
}

static void file_errors(void)
{
    struct gw_config *c = NULL;
    CHECK(gw_config_load("/nonexistent/gateway.json", &c, error, sizeof error) == -1);
    CHECK(c == NULL);
    CHECK_STR(error, "/nonexistent/gateway.json: No such file or directory");
    char *big = malloc(GW_CONFIG_BYTES_MAX + 1);
    memset(big, ' ', GW_CONFIG_BYTES_MAX + 1);
    CHECK(gw_config_parse("big.json", big, GW_CONFIG_BYTES_MAX + 1, &c, error, sizeof error) == -1);
    CHECK_STR(error, "big.json: larger than 16777216 bytes");
    free(big);
}

static void upstream_errors(void)
{
#define U(body) "[{" body "}]"
    fails_with(U("\"base_url\":\"http://h\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].name: required");
    fails_with(U("\"name\":\"openai\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].base_url: required");
    fails_with(U("\"name\":\"a b\",\"base_url\":\"http://h\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].name: must be a string of printable ASCII "
               "without white space of 1..128 bytes");
    fails_with(U("\"name\":\"openai\",\"base_url\":\"ftp://h\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].base_url: must start with http:// or https://");
    fails_with(U("\"name\":\"openai\",\"base_url\":\"https:///v1\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].base_url: has no host");
    fails_with(U("\"name\":\"openai\",\"base_url\":\"http://h/v1?x=1\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].base_url: must be printable ASCII without "
               "white space, '?' or '#'");
    fails_with(U("\"name\":\"openai\",\"base_url\":\"http://h\",\"timeout_seconds\":0"), MODELS,
               LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].timeout_seconds: must be an integer 1..86400");
    fails_with(U("\"name\":\"openai\",\"base_url\":\"http://h\",\"connect_timeout_seconds\":"
                 "86401"),
               MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].connect_timeout_seconds: must be an integer "
               "1..86400");
    fails_with(U("\"name\":\"openai\",\"base_url\":\"http://h\",\"proxy\":\"x\""), MODELS, LIMITS,
               KEYS, "gateway.json: line 1: upstreams[0].proxy: unknown field");
    fails_with("[{\"name\":\"openai\",\"base_url\":\"http://h\"},{\"name\":\"openai\",\"base_url\":"
               "\"http://i\"}]",
               MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[1].name: duplicate of upstreams[0]");
#undef U
}

static void api_key_from_environment(void)
{
#define U(body) "[{\"name\":\"openai\",\"base_url\":\"http://h\"," body "}]"
    fails_with(U("\"api_key_env\":\"GW_TEST_UNSET\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_env: environment variable "
               "GW_TEST_UNSET is not set");
    setenv("GW_TEST_EMPTY", "", 1);
    fails_with(U("\"api_key_env\":\"GW_TEST_EMPTY\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_env: environment variable "
               "GW_TEST_EMPTY is empty");
    setenv("GW_TEST_NEWLINE", "sk-secret\r\nX-Evil: 1", 1);
    fails_with(U("\"api_key_env\":\"GW_TEST_NEWLINE\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_env: environment variable "
               "GW_TEST_NEWLINE holds white space or a character that is not printable ASCII");
    CHECK(strstr(error, "sk-secret") == NULL); /* the key is never printed */
    fails_with(U("\"api_key_env\":\"1BAD\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_env: must name an environment "
               "variable ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)");
    fails_with(U("\"api_key_env\":\"" KEY_ENV "\",\"api_key_file\":\"k\""), MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_file: give api_key_env or "
               "api_key_file, not both");
#undef U
}

static void write_file(const char *path, const char *content, size_t length)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    fwrite(content, 1, length, f);
    fclose(f);
}

static void api_key_from_file(void)
{
    char dir[] = "/tmp/gw_config_test_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char path[128], name[160], expected[512];
    snprintf(path, sizeof path, "%s/openai.key", dir);
    write_file(path, "sk-from-file\n", 13);
    char upstreams[512];
    snprintf(upstreams, sizeof upstreams,
             "[{\"name\":\"openai\",\"base_url\":\"http://h\",\"api_key_file\":\"openai.key\"},"
             "{\"name\":\"local\",\"base_url\":\"http://l\"}]");
    /* A relative file is found next to the config file. */
    snprintf(name, sizeof name, "%s/gateway.json", dir);
    char text[4096];
    snprintf(text, sizeof text, "{\"upstreams\":%s,\"models\":%s,\"limits\":%s,\"keys\":%s}",
             upstreams, MODELS, LIMITS, KEYS);
    struct gw_config *c = NULL;
    CHECK(gw_config_parse(name, text, strlen(text), &c, error, sizeof error) == 0);
    if (c == NULL)
        fprintf(stderr, "  %s\n", error);
    if (c != NULL)
        CHECK_STR(c->upstreams[0].api_key, "sk-from-file");
    gw_config_release(c);
    write_file(path, "\n", 1);
    CHECK(gw_config_parse(name, text, strlen(text), &c, error, sizeof error) == -1);
    snprintf(expected, sizeof expected,
             "%s: line 1: upstreams[0].api_key_file: the key in %s is empty", name, path);
    CHECK_STR(error, expected);
    char long_key[GW_API_KEY_BYTES_MAX + 2];
    memset(long_key, 'k', sizeof long_key);
    write_file(path, long_key, sizeof long_key);
    CHECK(gw_config_parse(name, text, strlen(text), &c, error, sizeof error) == -1);
    snprintf(expected, sizeof expected,
             "%s: line 1: upstreams[0].api_key_file: the key in %s is longer than 4096 bytes", name,
             path);
    CHECK_STR(error, expected);
    unlink(path);
    CHECK(gw_config_parse(name, text, strlen(text), &c, error, sizeof error) == -1);
    snprintf(expected, sizeof expected,
             "%s: line 1: upstreams[0].api_key_file: %s: No such file or directory", name, path);
    CHECK_STR(error, expected);
    rmdir(dir);
}

#define M(body) "[{\"name\":\"m\",\"upstream\":\"openai\"," body "}]"
#define PRICES                                                                                     \
    "\"input_usd_micros_per_mtok\":1,\"output_usd_micros_per_mtok\":2,\"max_output_tokens\":10,"   \
    "\"default_max_output_tokens\":5"

static void model_errors(void)
{
    fails_with(UPSTREAMS, "[{\"upstream\":\"openai\"}]", LIMITS, KEYS,
               "gateway.json: line 1: models[0].name: required");
    fails_with(UPSTREAMS, M("\"output_usd_micros_per_mtok\":2"), LIMITS, KEYS,
               "gateway.json: line 1: models[0].input_usd_micros_per_mtok: required");
    fails_with(UPSTREAMS, M("\"input_usd_micros_per_mtok\":-1"), LIMITS, KEYS,
               "gateway.json: line 1: models[0].input_usd_micros_per_mtok: must be an integer "
               "0..9223372036854775807");
    fails_with(UPSTREAMS, M("\"input_usd_micros_per_mtok\":1.5"), LIMITS, KEYS,
               "gateway.json: line 1: models[0].input_usd_micros_per_mtok: must be an integer "
               "0..9223372036854775807");
    fails_with(UPSTREAMS, M("\"output_usd_micros_per_mtok\":\"2\""), LIMITS, KEYS,
               "gateway.json: line 1: models[0].output_usd_micros_per_mtok: must be an integer "
               "0..9223372036854775807");
    fails_with(UPSTREAMS,
               M("\"input_usd_micros_per_mtok\":1,\"output_usd_micros_per_mtok\":2,"
                 "\"max_output_tokens\":0"),
               LIMITS, KEYS,
               "gateway.json: line 1: models[0].max_output_tokens: must be an integer "
               "1..16777216");
    fails_with(UPSTREAMS,
               M("\"input_usd_micros_per_mtok\":1,\"output_usd_micros_per_mtok\":2,"
                 "\"max_output_tokens\":10,\"default_max_output_tokens\":11"),
               LIMITS, KEYS,
               "gateway.json: line 1: models[0].default_max_output_tokens: must be at most "
               "max_output_tokens (10)");
    fails_with(UPSTREAMS, M(PRICES ",\"price\":1"), LIMITS, KEYS,
               "gateway.json: line 1: models[0].price: unknown field");
    fails_with(UPSTREAMS,
               "[{\"name\":\"m\",\"upstream\":\"openai\"," PRICES "},{\"name\":\"m\","
               "\"upstream\":\"local\"," PRICES "}]",
               LIMITS, KEYS, "gateway.json: line 1: models[1].name: duplicate model name");
}

static void limit_errors(void)
{
#define L(key, amount) "[{\"key\":\"" key "\",\"amount\":\"" amount "\"}]"
    fails_with(UPSTREAMS, MODELS, L("a:{modle}", "tokens"), KEYS,
               "gateway.json: line 1: limits[0].key: unknown placeholder '{modle}' (known: "
               "{model}, {upstream}, {caller}, {team}, {mcp_server}, {tool})");
    fails_with(UPSTREAMS, MODELS, L("a:{model", "tokens"), KEYS,
               "gateway.json: line 1: limits[0].key: '{' without a closing '}'");
    fails_with(UPSTREAMS, MODELS, L("a:model}", "tokens"), KEYS,
               "gateway.json: line 1: limits[0].key: '}' without an opening '{'");
    fails_with(UPSTREAMS, MODELS, L("a :{model}", "tokens"), KEYS,
               "gateway.json: line 1: limits[0].key: text outside placeholders must be "
               "printable ASCII without white space");
    fails_with(UPSTREAMS, MODELS, L("a:{model}", "dollars"), KEYS,
               "gateway.json: line 1: limits[0].amount: must be requests, tokens, input_tokens, "
               "uncached_input_tokens, output_tokens, usd_micros or tool_calls");
    fails_with(UPSTREAMS, MODELS, "[{\"amount\":\"tokens\"}]", KEYS,
               "gateway.json: line 1: limits[0].key: required");
    fails_with(UPSTREAMS, MODELS, "[{\"key\":\"k\"}]", KEYS,
               "gateway.json: line 1: limits[0].amount: required");
    fails_with(UPSTREAMS, MODELS, "[{\"key\":\"k\",\"amount\":\"tokens\",\"x\":1}]", KEYS,
               "gateway.json: line 1: limits[0].x: unknown field");
#undef L
}

#define K(body) "[{\"sha256\":\"" DIGEST_A "\"," body "}]"

static void key_errors(void)
{
    fails_with(UPSTREAMS, MODELS, LIMITS, "[{\"caller\":\"a\",\"team\":\"t\"}]",
               "gateway.json: line 1: keys[0].sha256: required");
    fails_with(
        UPSTREAMS, MODELS, LIMITS,
        "[{\"sha256\":\"8F0D5B0AA1BBD0E0D4D5C1D1D1D3B0D2A9E6F3B5C7D9E1F3A5B7C9D1E3F5A7B9\"}]",
        "gateway.json: line 1: keys[0].sha256: must be 64 lower-case hex digits (the "
        "SHA-256 of the secret)");
    fails_with(UPSTREAMS, MODELS, LIMITS, "[{\"sha256\":\"abc\"}]",
               "gateway.json: line 1: keys[0].sha256: must be 64 lower-case hex digits (the "
               "SHA-256 of the secret)");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"team\":\"t\""),
               "gateway.json: line 1: keys[0].caller: required");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a\""),
               "gateway.json: line 1: keys[0].team: required: limits[3].key uses {team}");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a b\",\"team\":\"t\""),
               "gateway.json: line 1: keys[0].caller: must not hold white space: limits[2].key "
               "uses {caller}");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a\\u0001\",\"team\":\"t\""),
               "gateway.json: line 1: keys[0].caller: must be a string of printable ASCII of "
               "1..256 bytes");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a\",\"team\":\"t t\""),
               "gateway.json: line 1: keys[0].team: must be a string of printable ASCII without "
               "white space of 1..256 bytes");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a\",\"team\":\"t\",\"models\":[\"gpt\"]"),
               "gateway.json: line 1: keys[0].models[0]: unknown model 'gpt'");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"a\",\"team\":\"t\",\"models\":[\"llama\",\"llama\"]"),
               "gateway.json: line 1: keys[0].models[1]: duplicate model");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a\",\"team\":\"t\",\"models\":\"llama\""),
               "gateway.json: line 1: keys[0].models: must be an array of at most 1024 model "
               "names");
    fails_with(UPSTREAMS, MODELS, LIMITS, K("\"caller\":\"a\",\"team\":\"t\",\"role\":\"x\""),
               "gateway.json: line 1: keys[0].role: unknown field");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"a\",\"team\":\"t\"},"
               "{\"sha256\":\"" DIGEST_A "\",\"caller\":\"b\",\"team\":\"t\"}]",
               "gateway.json: line 1: keys[1].sha256: duplicate of keys[0]");
}

static void caller_with_space_is_fine_without_caller_template(void)
{
    struct gw_config *c =
        parse4(UPSTREAMS, MODELS, "[{\"key\":\"global:{model}:rpm\",\"amount\":\"requests\"}]",
               K("\"caller\":\"sales bot\""));
    CHECK(c != NULL);
    if (c != NULL)
        CHECK_STR(c->keys[0].caller, "sales bot");
    gw_config_release(c);
}

/* A JSON array of count copies of item (item may hold one %u for the index). */
static char *repeat(const char *item, uint32_t count)
{
    size_t size = (strlen(item) + 80) * (size_t)count + 3; /* %064x writes 64 bytes */
    char *text = malloc(size), *p = text;
    *p++ = '[';
    for (uint32_t i = 0; i < count; i++) {
        if (i > 0)
            *p++ = ',';
        p += sprintf(p, item, i);
    }
    *p++ = ']';
    *p = '\0';
    return text;
}

static void bounds_one_past(void)
{
    char *list = repeat("{\"name\":\"u%u\",\"base_url\":\"http://h\"}", GW_UPSTREAMS_MAX + 1);
    fails_with(list, MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams: must be an array of 1..64 entries");
    free(list);
    list = repeat("{\"name\":\"m%u\",\"upstream\":\"openai\"," PRICES "}", GW_MODELS_MAX + 1);
    fails_with(UPSTREAMS, list, LIMITS, KEYS,
               "gateway.json: line 1: models: must be an array of 1..1024 entries");
    free(list);
    list = repeat("{\"key\":\"k%u\",\"amount\":\"requests\"}", GW_LIMITS_MAX + 1);
    fails_with(UPSTREAMS, MODELS, list, KEYS,
               "gateway.json: line 1: limits: must be an array of 1..64 entries");
    free(list);
    list = repeat("{\"sha256\":\"%064x\",\"caller\":\"c\",\"team\":\"t\"}", GW_KEYS_MAX + 1);
    fails_with(UPSTREAMS, MODELS, LIMITS, list,
               "gateway.json: line 1: keys: must be an array of 0..100000 entries");
    free(list);
    /* Lengths: at the bound loads, one past fails. */
    char name[GW_NAME_LENGTH_MAX + 2], models[512];
    memset(name, 'n', sizeof name);
    name[GW_NAME_LENGTH_MAX] = '\0';
    snprintf(models, sizeof models, "[{\"name\":\"%s\",\"upstream\":\"openai\"," PRICES "}]", name);
    struct gw_config *c = parse4(UPSTREAMS, models, LIMITS, K("\"caller\":\"c\",\"team\":\"t\""));
    CHECK(c != NULL);
    gw_config_release(c);
    name[GW_NAME_LENGTH_MAX] = 'n';
    name[GW_NAME_LENGTH_MAX + 1] = '\0';
    snprintf(models, sizeof models, "[{\"name\":\"%s\",\"upstream\":\"openai\"," PRICES "}]", name);
    fails_with(UPSTREAMS, models, LIMITS, KEYS,
               "gateway.json: line 1: models[0].name: must be a string of printable ASCII "
               "without white space of 1..128 bytes");
    char key[GW_TEMPLATE_LENGTH_MAX + 2], limits[1024];
    memset(key, 'k', sizeof key);
    key[GW_TEMPLATE_LENGTH_MAX + 1] = '\0';
    snprintf(limits, sizeof limits, "[{\"key\":\"%s\",\"amount\":\"tokens\"}]", key);
    fails_with(UPSTREAMS, MODELS, limits, KEYS,
               "gateway.json: line 1: limits[0].key: must be a key template of 1..512 bytes");
    char url[GW_BASE_URL_LENGTH_MAX + 2], upstreams[GW_BASE_URL_LENGTH_MAX + 128];
    memset(url, 'h', sizeof url);
    memcpy(url, "http://", 7);
    url[GW_BASE_URL_LENGTH_MAX + 1] = '\0';
    snprintf(upstreams, sizeof upstreams, "[{\"name\":\"openai\",\"base_url\":\"%s\"}]", url);
    fails_with(upstreams, MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].base_url: must be a string of at most 2048 "
               "bytes");
    char team[GW_TEAM_LENGTH_MAX + 2], keys[1024];
    memset(team, 't', sizeof team);
    team[GW_TEAM_LENGTH_MAX + 1] = '\0';
    snprintf(keys, sizeof keys, "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"%s\"}]",
             team);
    fails_with(UPSTREAMS, MODELS, LIMITS, keys,
               "gateway.json: line 1: keys[0].team: must be a string of printable ASCII without "
               "white space of 1..256 bytes");
}

/* A string of n copies of c (static storage, one at a time). */
static const char *filled(char c, size_t n)
{
    static char text[GW_PATH_LENGTH_MAX + 8];
    memset(text, c, n);
    text[n] = '\0';
    return text;
}

static void more_bounds_one_past(void)
{
    char section[8192];
    snprintf(section, sizeof section,
             "[{\"name\":\"m\",\"upstream\":\"openai\",\"upstream_model\":\"%s\"," PRICES "}]",
             filled('u', GW_UPSTREAM_MODEL_LENGTH_MAX + 1));
    fails_with(UPSTREAMS, section, LIMITS, KEYS,
               "gateway.json: line 1: models[0].upstream_model: must be a string of 1..256 bytes");
    snprintf(section, sizeof section,
             "[{\"name\":\"m\",\"upstream\":\"openai\",\"input_usd_micros_per_mtok\":1,"
             "\"output_usd_micros_per_mtok\":1,\"max_output_tokens\":%u,"
             "\"default_max_output_tokens\":1}]",
             GW_OUTPUT_TOKENS_MAX + 1);
    fails_with(UPSTREAMS, section, LIMITS, KEYS,
               "gateway.json: line 1: models[0].max_output_tokens: must be an integer "
               "1..16777216");
    snprintf(section, sizeof section,
             "[{\"name\":\"u\",\"base_url\":\"http://h\",\"api_key_env\":\"%s\"}]",
             filled('E', GW_ENV_NAME_LENGTH_MAX + 1));
    fails_with(section, MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_env: must name an environment "
               "variable ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)");
    snprintf(section, sizeof section,
             "[{\"name\":\"u\",\"base_url\":\"http://h\",\"api_key_file\":\"%s\"}]",
             filled('f', GW_PATH_LENGTH_MAX + 1));
    fails_with(section, MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_file: must be a file name of "
               "1..4095 bytes");
    setenv("GW_TEST_LONG_KEY", filled('k', GW_API_KEY_BYTES_MAX + 1), 1);
    fails_with("[{\"name\":\"openai\",\"base_url\":\"http://h\",\"api_key_env\":"
               "\"GW_TEST_LONG_KEY\"},{\"name\":\"local\",\"base_url\":\"http://l\"}]",
               MODELS, LIMITS, KEYS,
               "gateway.json: line 1: upstreams[0].api_key_env: environment variable "
               "GW_TEST_LONG_KEY is longer than 4096 bytes");
    setenv("GW_TEST_LONG_KEY", filled('k', GW_API_KEY_BYTES_MAX), 1);
    struct gw_config *c =
        parse4("[{\"name\":\"openai\",\"base_url\":\"http://h\",\"api_key_env\":"
               "\"GW_TEST_LONG_KEY\"},{\"name\":\"local\",\"base_url\":\"http://l\"}]",
               MODELS, LIMITS, KEYS);
    CHECK(c != NULL);
    if (c != NULL)
        CHECK_EQ_U64(strlen(c->upstreams[0].api_key), GW_API_KEY_BYTES_MAX);
    gw_config_release(c);
    snprintf(section, sizeof section,
             "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"%s\",\"team\":\"t\"}]",
             filled('c', CALLER_LENGTH_MAX + 1));
    fails_with(UPSTREAMS, MODELS, LIMITS, section,
               "gateway.json: line 1: keys[0].caller: must be a string of printable ASCII of "
               "1..256 bytes");
    char *names = repeat("\"llama\"", GW_MODELS_MAX + 1);
    char *keys = malloc(strlen(names) + 256);
    sprintf(keys, "[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"c\",\"team\":\"t\",\"models\":%s}]",
            names);
    fails_with(UPSTREAMS, MODELS, LIMITS, keys,
               "gateway.json: line 1: keys[0].models: must be an array of at most 1024 model "
               "names");
    free(names);
    free(keys);
}

/* ---- agent surfaces: dialects, prices, reservation, key fields ---- */

static void a_config_written_before_loads_the_same(void)
{
    /* A gateway.json as docs/gateway.md first documented it, untouched. */
    const char *text =
        "{\"upstreams\":[{\"name\":\"openai\",\"base_url\":\"https://api.openai.com/v1\","
        "\"api_key_env\":\"" KEY_ENV "\",\"timeout_seconds\":600}],"
        "\"models\":[{\"name\":\"gpt-4o-mini\",\"upstream\":\"openai\",\"upstream_model\":"
        "\"gpt-4o-mini\",\"input_usd_micros_per_mtok\":150000,\"cached_input_usd_micros_per_mtok\":"
        "75000,\"output_usd_micros_per_mtok\":600000,\"max_output_tokens\":16384,"
        "\"default_max_output_tokens\":1024}],"
        "\"keys\":[{\"sha256\":\"" DIGEST_A "\",\"caller\":\"sales-bot\",\"team\":\"sales\","
        "\"models\":[\"gpt-4o-mini\"]}],"
        "\"limits\":[{\"key\":\"global:openai:{model}:rpm\",\"amount\":\"requests\"},"
        "{\"key\":\"global:openai:{model}:tpm\",\"amount\":\"tokens\"},"
        "{\"key\":\"caller:{caller}:concurrent\",\"amount\":\"requests\"},"
        "{\"key\":\"team:{team}:usd:month\",\"amount\":\"usd_micros\"}]}";
    struct gw_config *c = parse(text);
    REQUIRE(c != NULL);
    CHECK(c->upstreams[0].api == GW_API_OPENAI);
    CHECK(c->prices_file == NULL);
    const struct gw_model *m = &c->models[0];
    CHECK_EQ_U64(m->input_usd_micros_per_mtok, 150000);
    CHECK_EQ_U64(m->cached_input_usd_micros_per_mtok, 75000);
    CHECK_EQ_U64(m->output_usd_micros_per_mtok, 600000);
    /* The new prices default so that no chat usage costs anything else:
     * chat has no cache writes, and reasoning costs the output price. */
    CHECK_EQ_U64(m->reasoning_output_usd_micros_per_mtok, 600000);
    CHECK_EQ_U64(m->cache_write_5m_input_usd_micros_per_mtok, 187500);
    CHECK_EQ_U64(m->cache_write_1h_input_usd_micros_per_mtok, 300000);
    CHECK(m->output_reservation == GW_OUTPUT_RESERVATION_MAX_TOKENS);
    CHECK(m->prices_from == NULL);
    CHECK_EQ_U64(m->max_output_tokens, 16384);
    CHECK_EQ_U64(m->default_max_output_tokens, 1024);
    CHECK_EQ_U64(c->keys[0].max_wait_seconds, 0);
    CHECK_EQ_U64(c->keys[0].default_wait_seconds, 0);
    CHECK_EQ_U64(c->keys[0].priority_floor, 0);
    CHECK_EQ_U64(c->limits[1].amount, GW_AMOUNT_TOKENS);
    gw_config_release(c);
}

#define ANTHROPIC_UPSTREAMS                                                                        \
    "[{\"name\":\"anthropic\",\"api\":\"anthropic\",\"base_url\":\"https://api.anthropic.com/"     \
    "v1\"},"                                                                                       \
    "{\"name\":\"openai\",\"api\":\"openai\",\"base_url\":\"http://h\"},"                          \
    "{\"name\":\"local\",\"api\":null,\"base_url\":\"http://l\"},"                                 \
    "{\"name\":\"google\",\"api\":\"gemini\",\"base_url\":\"http://g/v1beta\"}]"

static void upstream_api_is_read(void)
{
    struct gw_config *c = parse4(ANTHROPIC_UPSTREAMS, MODELS, LIMITS, KEYS);
    REQUIRE(c != NULL);
    CHECK(c->upstreams[0].api == GW_API_ANTHROPIC);
    CHECK(c->upstreams[1].api == GW_API_OPENAI);
    CHECK(c->upstreams[2].api == GW_API_OPENAI);
    CHECK(c->upstreams[3].api == GW_API_GEMINI);
    CHECK_STR(gw_api_name(GW_API_ANTHROPIC), "anthropic");
    CHECK_STR(gw_api_name(GW_API_GEMINI), "gemini");
    gw_config_release(c);
    static const char *const bad[] = {"\"Anthropic\"", "\"\"",           "1",
                                      "[\"openai\"]",  "\"anthropic \"", "\"google\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char upstreams[256];
        snprintf(upstreams, sizeof upstreams,
                 "[{\"name\":\"openai\",\"base_url\":\"http://h\",\"api\":%s}]", bad[i]);
        fails_with(upstreams, MODELS, LIMITS, KEYS,
                   "gateway.json: line 1: upstreams[0].api: must be \"openai\", \"anthropic\" or "
                   "\"gemini\"");
    }
}

#define BASE "\"max_output_tokens\":10,\"default_max_output_tokens\":5"

static void every_price_field_is_read_with_its_default(void)
{
    struct gw_config *c =
        parse4(UPSTREAMS,
               "[{\"name\":\"all\",\"upstream\":\"openai\",\"input_usd_micros_per_mtok\":3000000,"
               "\"cached_input_usd_micros_per_mtok\":300000,"
               "\"cache_write_5m_input_usd_micros_per_mtok\":3750001,"
               "\"cache_write_1h_input_usd_micros_per_mtok\":6000001,"
               "\"output_usd_micros_per_mtok\":15000000,"
               "\"reasoning_output_usd_micros_per_mtok\":20000000," BASE "},"
               "{\"name\":\"defaults\",\"upstream\":\"openai\",\"input_usd_micros_per_mtok\":3,"
               "\"output_usd_micros_per_mtok\":7," BASE "}]",
               LIMITS, K("\"caller\":\"c\",\"team\":\"t\""));
    REQUIRE(c != NULL);
    const struct gw_model *a = &c->models[0], *d = &c->models[1];
    CHECK_EQ_U64(a->cached_input_usd_micros_per_mtok, 300000);
    CHECK_EQ_U64(a->cache_write_5m_input_usd_micros_per_mtok, 3750001);
    CHECK_EQ_U64(a->cache_write_1h_input_usd_micros_per_mtok, 6000001);
    CHECK_EQ_U64(a->reasoning_output_usd_micros_per_mtok, 20000000);
    CHECK_EQ_U64(d->cached_input_usd_micros_per_mtok, 3);
    CHECK_EQ_U64(d->cache_write_5m_input_usd_micros_per_mtok, 4); /* 3.75, rounded up */
    CHECK_EQ_U64(d->cache_write_1h_input_usd_micros_per_mtok, 6);
    CHECK_EQ_U64(d->reasoning_output_usd_micros_per_mtok, 7);
    gw_config_release(c);
    static const char *const fields[] = {
        "cache_write_5m_input_usd_micros_per_mtok", "cache_write_1h_input_usd_micros_per_mtok",
        "reasoning_output_usd_micros_per_mtok", "cached_input_usd_micros_per_mtok"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        for (int bad = 0; bad < 2; bad++) {
            char models[512], expected[256];
            snprintf(models, sizeof models, M(PRICES ",\"%s\":%s"), fields[i], bad ? "1.5" : "-1");
            snprintf(expected, sizeof expected,
                     "gateway.json: line 1: models[0].%s: must be an integer "
                     "0..9223372036854775807",
                     fields[i]);
            fails_with(UPSTREAMS, models, LIMITS, KEYS, expected);
        }
    }
}

static void price_defaults_at_the_bound_and_one_past(void)
{
    /* 1.25 x 7378697629483820645 rounded up is exactly 2^63 - 1. */
    struct gw_config *c = parse4(UPSTREAMS,
                                 M("\"input_usd_micros_per_mtok\":7378697629483820645,"
                                   "\"cache_write_1h_input_usd_micros_per_mtok\":1,"
                                   "\"output_usd_micros_per_mtok\":2," BASE),
                                 LIMITS, K("\"caller\":\"c\",\"team\":\"t\""));
    REQUIRE(c != NULL);
    CHECK_EQ_U64(c->models[0].cache_write_5m_input_usd_micros_per_mtok, AMOUNT_MAX);
    gw_config_release(c);
    fails_with(UPSTREAMS,
               M("\"input_usd_micros_per_mtok\":7378697629483820646,"
                 "\"cache_write_1h_input_usd_micros_per_mtok\":1,"
                 "\"output_usd_micros_per_mtok\":2," BASE),
               LIMITS, KEYS,
               "gateway.json: line 1: models[0].cache_write_5m_input_usd_micros_per_mtok: its "
               "default from the input price is above 9223372036854775807: give it");
    c = parse4(UPSTREAMS,
               M("\"input_usd_micros_per_mtok\":4611686018427387903,"
                 "\"output_usd_micros_per_mtok\":2," BASE),
               LIMITS, K("\"caller\":\"c\",\"team\":\"t\""));
    REQUIRE(c != NULL);
    CHECK_EQ_U64(c->models[0].cache_write_1h_input_usd_micros_per_mtok, AMOUNT_MAX - 1);
    gw_config_release(c);
    fails_with(UPSTREAMS,
               M("\"input_usd_micros_per_mtok\":4611686018427387904,"
                 "\"output_usd_micros_per_mtok\":2," BASE),
               LIMITS, KEYS,
               "gateway.json: line 1: models[0].cache_write_1h_input_usd_micros_per_mtok: its "
               "default from the input price is above 9223372036854775807: give it");
    /* Given explicitly, the largest price is fine. */
    c = parse4(UPSTREAMS,
               M("\"input_usd_micros_per_mtok\":9223372036854775807,"
                 "\"cache_write_5m_input_usd_micros_per_mtok\":0,"
                 "\"cache_write_1h_input_usd_micros_per_mtok\":0,"
                 "\"output_usd_micros_per_mtok\":2," BASE),
               LIMITS, K("\"caller\":\"c\",\"team\":\"t\""));
    CHECK(c != NULL);
    gw_config_release(c);
}

static void an_unpriced_model_is_an_error(void)
{
    fails_with(UPSTREAMS, M(BASE), LIMITS, KEYS,
               "gateway.json: line 1: models[0]: model 'm' has no price: give "
               "input_usd_micros_per_mtok and output_usd_micros_per_mtok, or prices_from (an "
               "unpriced model is never served)");
    fails_with(UPSTREAMS, M("\"input_usd_micros_per_mtok\":1," BASE), LIMITS, KEYS,
               "gateway.json: line 1: models[0].output_usd_micros_per_mtok: required");
}

/* A config of models (JSON array text) with prices_file, parsed as if the
 * config were in the test data directory. */
static struct gw_config *parse_with_prices(const char *prices_file, const char *models)
{
    char text[8192];
    snprintf(text, sizeof text,
             "{\"prices_file\":%s,\"upstreams\":" ANTHROPIC_UPSTREAMS ",\"models\":%s,"
             "\"limits\":" LIMITS ",\"keys\":" K("\"caller\":\"c\",\"team\":\"t\"") "}",
             prices_file, models);
    struct gw_config *config = NULL;
    error[0] = '\0';
    if (gw_config_parse(GW_TEST_DATA_DIR "/gateway.json", text, strlen(text), &config, error,
                        sizeof error) != 0)
        return NULL;
    return config;
}

static void prices_come_from_the_prices_file(void)
{
    struct gw_config *c = parse_with_prices(
        "\"prices_litellm.json\"",
        "[{\"name\":\"sonnet\",\"upstream\":\"anthropic\",\"prices_from\":"
        "\"claude-sonnet-4-5-20250929\",\"default_max_output_tokens\":4096},"
        "{\"name\":\"mini\",\"upstream\":\"openai\",\"prices_from\":\"gpt-4o-mini\","
        "\"default_max_output_tokens\":1024,\"output_reservation\":\"observed\"},"
        "{\"name\":\"o3-cheap\",\"upstream\":\"openai\",\"prices_from\":\"o3\","
        "\"input_usd_micros_per_mtok\":1000000,\"max_output_tokens\":5000,"
        "\"default_max_output_tokens\":1000,\"output_reservation\":null}]");
    if (c == NULL)
        fprintf(stderr, "  %s\n", error);
    REQUIRE(c != NULL);
    CHECK_STR(c->prices_file, "prices_litellm.json");
    const struct gw_model *s = &c->models[0], *m = &c->models[1], *o = &c->models[2];
    CHECK_STR(s->prices_from, "claude-sonnet-4-5-20250929");
    CHECK_EQ_U64(s->input_usd_micros_per_mtok, 3000000);
    CHECK_EQ_U64(s->cached_input_usd_micros_per_mtok, 300000);
    CHECK_EQ_U64(s->cache_write_5m_input_usd_micros_per_mtok, 3750000);
    CHECK_EQ_U64(s->cache_write_1h_input_usd_micros_per_mtok, 6000000);
    CHECK_EQ_U64(s->output_usd_micros_per_mtok, 15000000);
    CHECK_EQ_U64(s->reasoning_output_usd_micros_per_mtok, 15000000);
    CHECK_EQ_U64(s->max_output_tokens, 64000);
    CHECK(s->upstream->api == GW_API_ANTHROPIC);
    /* No cache writes in the file: the defaults, from the file's input price. */
    CHECK_EQ_U64(m->input_usd_micros_per_mtok, 150000);
    CHECK_EQ_U64(m->cached_input_usd_micros_per_mtok, 75000);
    CHECK_EQ_U64(m->cache_write_5m_input_usd_micros_per_mtok, 187500);
    CHECK_EQ_U64(m->cache_write_1h_input_usd_micros_per_mtok, 300000);
    CHECK_EQ_U64(m->max_output_tokens, 16384);
    CHECK(m->output_reservation == GW_OUTPUT_RESERVATION_OBSERVED);
    /* Explicit values on the model win over the file. */
    CHECK_EQ_U64(o->input_usd_micros_per_mtok, 1000000);
    CHECK_EQ_U64(o->cached_input_usd_micros_per_mtok, 500000);
    CHECK_EQ_U64(o->cache_write_5m_input_usd_micros_per_mtok, 1250000); /* from the model's */
    CHECK_EQ_U64(o->reasoning_output_usd_micros_per_mtok, 8000000);
    CHECK_EQ_U64(o->max_output_tokens, 5000);
    CHECK(o->output_reservation == GW_OUTPUT_RESERVATION_MAX_TOKENS);
    gw_config_release(c);
}

static void prices_file_errors(void)
{
    const char *sonnet = "[{\"name\":\"s\",\"upstream\":\"anthropic\",\"prices_from\":"
                         "\"claude-sonnet-4-5-20250929\",\"default_max_output_tokens\":5}]";
    CHECK(parse_with_prices("\"missing.json\"", sonnet) == NULL);
    CHECK_STR(error, GW_TEST_DATA_DIR "/gateway.json: line 1: prices_file: " GW_TEST_DATA_DIR
                                      "/missing.json: No such file or directory");
    CHECK(parse_with_prices("7", sonnet) == NULL);
    CHECK_STR(error, GW_TEST_DATA_DIR
              "/gateway.json: line 1: prices_file: must be a file name of 1..4095 bytes");
    CHECK(parse_with_prices("\"prices_litellm.json\"",
                            "[{\"name\":\"s\",\"upstream\":\"anthropic\",\"prices_from\":"
                            "\"claude-sonnet-9\",\"default_max_output_tokens\":5}]") == NULL);
    CHECK_STR(error, GW_TEST_DATA_DIR "/gateway.json: line 1: models[0].prices_from: "
                                      "'claude-sonnet-9' is not in " GW_TEST_DATA_DIR
                                      "/prices_litellm.json");
    CHECK(parse_with_prices("\"prices_litellm.json\"",
                            "[{\"name\":\"s\",\"upstream\":\"anthropic\",\"prices_from\":"
                            "\"sample_spec\",\"default_max_output_tokens\":5}]") == NULL);
    CHECK_STR(error, GW_TEST_DATA_DIR "/gateway.json: line 1: models[0].max_output_tokens: "
                                      "required: 'sample_spec' in " GW_TEST_DATA_DIR
                                      "/prices_litellm.json has no max_output_tokens");
    fails_with(UPSTREAMS, M("\"prices_from\":\"gpt-5\"," BASE), LIMITS, KEYS,
               "gateway.json: line 1: models[0].prices_from: needs prices_file at the top of the "
               "file");
    fails_with(UPSTREAMS, M("\"prices_from\":\"\"," BASE), LIMITS, KEYS,
               "gateway.json: line 1: models[0].prices_from: must be a string of 1..256 bytes");
    /* Lengths one past: a prices_from name, a prices_file name. */
    char models[GW_PATH_LENGTH_MAX + 256];
    snprintf(models, sizeof models, M("\"prices_from\":\"%s\"," BASE),
             filled('p', GW_UPSTREAM_MODEL_LENGTH_MAX + 1));
    fails_with(UPSTREAMS, models, LIMITS, KEYS,
               "gateway.json: line 1: models[0].prices_from: must be a string of 1..256 bytes");
    char name[GW_PATH_LENGTH_MAX + 16];
    snprintf(name, sizeof name, "\"%s\"", filled('f', GW_PATH_LENGTH_MAX + 1));
    CHECK(parse_with_prices(name, sonnet) == NULL);
    CHECK_STR(error, GW_TEST_DATA_DIR
              "/gateway.json: line 1: prices_file: must be a file name of 1..4095 bytes");
    snprintf(name, sizeof name, "\"%s\"", filled('f', GW_PATH_LENGTH_MAX));
    CHECK(parse_with_prices(name, sonnet) == NULL); /* at the bound: read, and not there */
    CHECK(strstr(error, "prices_file: ") != NULL && strstr(error, "must be") == NULL);
}

/* A prices file of one's own in a temporary directory, next to the config. */
static void prices_file_entries_are_checked(void)
{
    char dir[] = "/tmp/gw_config_prices_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char path[128], name[160], text[2048], expected[512];
    snprintf(path, sizeof path, "%s/prices.json", dir);
    snprintf(name, sizeof name, "%s/gateway.json", dir);
    const char *prices = "{\"no-input\":{\"output_cost_per_token\":1e-6,\"max_output_tokens\":9},\n"
                         "\"bad\":{\"input_cost_per_token\":-1e-6}}";
    write_file(path, prices, strlen(prices));
    const char *models[] = {"no-input", "bad"};
    const char *errors[] = {
        "%s: line 1: models[0].input_usd_micros_per_mtok: required: 'no-input' in "
        "%s/prices.json has no input_cost_per_token",
        "%s: line 1: models[0].prices_from: %s/prices.json: line 2: 'bad'.input_cost_per_token: "
        "must be 0 or more"};
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text,
                 "{\"prices_file\":\"prices.json\",\"upstreams\":" UPSTREAMS ",\"models\":"
                 "[{\"name\":\"m\",\"upstream\":\"openai\",\"prices_from\":\"%s\","
                 "\"default_max_output_tokens\":5}],\"limits\":" LIMITS
                 ",\"keys\":" K("\"caller\":\"c\",\"team\":\"t\"") "}",
                 models[i]);
        struct gw_config *c = NULL;
        CHECK(gw_config_parse(name, text, strlen(text), &c, error, sizeof error) == -1);
        snprintf(expected, sizeof expected, errors[i], name, dir);
        CHECK_STR(error, expected);
    }
    /* The input price given on the model fills the gap. */
    snprintf(text, sizeof text,
             "{\"prices_file\":\"%s\",\"upstreams\":" UPSTREAMS ",\"models\":"
             "[{\"name\":\"m\",\"upstream\":\"openai\",\"prices_from\":\"no-input\","
             "\"input_usd_micros_per_mtok\":5,\"default_max_output_tokens\":5}],"
             "\"limits\":" LIMITS ",\"keys\":" K("\"caller\":\"c\",\"team\":\"t\"") "}",
             path);
    struct gw_config *c = NULL;
    CHECK(gw_config_parse("elsewhere/gateway.json", text, strlen(text), &c, error, sizeof error) ==
          0); /* an absolute prices_file */
    if (c != NULL) {
        CHECK_EQ_U64(c->models[0].output_usd_micros_per_mtok, 1000000);
        CHECK_EQ_U64(c->models[0].max_output_tokens, 9);
    }
    gw_config_release(c);
    unlink(path);
    rmdir(dir);
}

static void output_reservation_is_read(void)
{
    fails_with(UPSTREAMS, M(PRICES ",\"output_reservation\":\"p99\""), LIMITS, KEYS,
               "gateway.json: line 1: models[0].output_reservation: must be \"max_tokens\" or "
               "\"observed\"");
    fails_with(UPSTREAMS, M(PRICES ",\"output_reservation\":1"), LIMITS, KEYS,
               "gateway.json: line 1: models[0].output_reservation: must be \"max_tokens\" or "
               "\"observed\"");
    struct gw_config *c = parse4(UPSTREAMS, M(PRICES ",\"output_reservation\":\"max_tokens\""),
                                 LIMITS, K("\"caller\":\"c\",\"team\":\"t\""));
    REQUIRE(c != NULL);
    CHECK(c->models[0].output_reservation == GW_OUTPUT_RESERVATION_MAX_TOKENS);
    gw_config_release(c);
}

static void key_wait_and_priority_at_their_bounds_and_one_past(void)
{
    struct gw_config *c =
        parse4(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"max_wait_seconds\":60,\"priority_floor\":9"));
    REQUIRE(c != NULL);
    const struct gw_key *key = &c->keys[0];
    CHECK_EQ_U64(key->max_wait_seconds, 60);
    CHECK_EQ_U64(key->priority_floor, 9);
    CHECK_EQ_U64(gw_key_priority(key, 0), 9); /* a better priority is capped */
    CHECK_EQ_U64(gw_key_wait_seconds(key, 3600), 60);
    CHECK_EQ_U64(gw_key_wait_seconds(key, 5), 5);
    CHECK_EQ_U64(gw_key_wait_seconds(key, 0), 0);
    CHECK_EQ_U64(gw_key_wait_seconds(key, -1), 0); /* no Prefer: wait, no default: none */
    gw_config_release(c);
    /* A default wait: for a call that does not say; Prefer: wait=N still
     * wins (0 included), within the key's longest. */
    c = parse4(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"max_wait_seconds\":60,"
                 "\"default_wait_seconds\":20"));
    REQUIRE(c != NULL);
    CHECK_EQ_U64(c->keys[0].default_wait_seconds, 20);
    CHECK_EQ_U64(gw_key_wait_seconds(&c->keys[0], -1), 20);
    CHECK_EQ_U64(gw_key_wait_seconds(&c->keys[0], 0), 0);
    CHECK_EQ_U64(gw_key_wait_seconds(&c->keys[0], 45), 45);
    CHECK_EQ_U64(gw_key_wait_seconds(&c->keys[0], 600), 60);
    gw_config_release(c);
    c = parse4(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"max_wait_seconds\":60,"
                 "\"default_wait_seconds\":60"));
    REQUIRE(c != NULL);
    CHECK_EQ_U64(gw_key_wait_seconds(&c->keys[0], -1), 60);
    gw_config_release(c);
    c = parse4(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"priority_floor\":3"));
    REQUIRE(c != NULL);
    CHECK_EQ_U64(gw_key_priority(&c->keys[0], 1), 3);
    CHECK_EQ_U64(gw_key_priority(&c->keys[0], 3), 3);
    CHECK_EQ_U64(gw_key_priority(&c->keys[0], 7), 7);
    CHECK_EQ_U64(gw_key_priority(&c->keys[0], 12), 9);
    CHECK_EQ_U64(gw_key_wait_seconds(&c->keys[0], 30), 0); /* default: never waits */
    gw_config_release(c);
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"max_wait_seconds\":61"),
               "gateway.json: line 1: keys[0].max_wait_seconds: must be an integer 0..60");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"max_wait_seconds\":-1"),
               "gateway.json: line 1: keys[0].max_wait_seconds: must be an integer 0..60");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"max_wait_seconds\":30,"
                 "\"default_wait_seconds\":31"),
               "gateway.json: line 1: keys[0].default_wait_seconds: must be at most "
               "max_wait_seconds (30)");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"default_wait_seconds\":5"),
               "gateway.json: line 1: keys[0].default_wait_seconds: must be at most "
               "max_wait_seconds (0)");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"default_wait_seconds\":61"),
               "gateway.json: line 1: keys[0].default_wait_seconds: must be an integer 0..60");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"default_wait_seconds\":\"5\""),
               "gateway.json: line 1: keys[0].default_wait_seconds: must be an integer 0..60");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"priority_floor\":10"),
               "gateway.json: line 1: keys[0].priority_floor: must be an integer 0..9");
    fails_with(UPSTREAMS, MODELS, LIMITS,
               K("\"caller\":\"c\",\"team\":\"t\",\"priority_floor\":\"1\""),
               "gateway.json: line 1: keys[0].priority_floor: must be an integer 0..9");
}

static void uncached_input_tokens_is_an_amount(void)
{
    struct gw_config *c =
        parse4(UPSTREAMS, MODELS, "[{\"key\":\"in:{model}\",\"amount\":\"uncached_input_tokens\"}]",
               K("\"caller\":\"c\",\"team\":\"t\""));
    REQUIRE(c != NULL);
    CHECK(c->limits[0].amount == GW_AMOUNT_UNCACHED_INPUT_TOKENS);
    CHECK_STR(gw_amount_name(GW_AMOUNT_UNCACHED_INPUT_TOKENS), "uncached_input_tokens");
    gw_config_release(c);
}

static void a_default_is_read_as_a_limit_definition(void)
{
    struct gw_config *c =
        parse4(UPSTREAMS, MODELS,
               "[{\"key\":\"caller:{caller}:concurrent\",\"amount\":\"requests\",\"default\":"
               "{\"kind\":\"concurrency\",\"capacity\":5,\"timeout_seconds\":300}},"
               "{\"key\":\"team:{team}:usd:month\",\"amount\":\"usd_micros\",\"default\":"
               "{\"kind\":\"budget\",\"capacity\":200000000,\"period\":\"month\",\"unit\":"
               "\"usd_micros\",\"overage\":\"deny\"}},"
               "{\"key\":\"global:{model}:tpm\",\"amount\":\"tokens\",\"default\":null},"
               "{\"key\":\"global:{model}:rpm\",\"amount\":\"requests\"}]",
               KEYS);
    REQUIRE(c != NULL);
    const struct limit_definition *d = c->limits[0].default_definition;
    REQUIRE(d != NULL);
    CHECK(d->kind == LIMIT_CONCURRENCY);
    CHECK_EQ_U64(d->capacity, 5);
    CHECK_EQ_U64(d->timeout_seconds, 300);
    CHECK_STR(d->key, ""); /* each call's own */
    d = c->limits[1].default_definition;
    REQUIRE(d != NULL);
    CHECK(d->kind == LIMIT_BUDGET && d->period == PERIOD_MONTH);
    CHECK_EQ_U64(d->capacity, 200000000);
    CHECK_EQ_U64(d->timeout_seconds, 60); /* normalised: a budget's default hold */
    CHECK_STR(d->unit, "usd_micros");
    CHECK(d->overage == OVERAGE_DENY);
    CHECK(c->limits[2].default_definition == NULL);
    CHECK(c->limits[3].default_definition == NULL);
    gw_config_release(c);
}

static void an_invalid_default_names_its_field_and_line(void)
{
#define D(definition)                                                                              \
    "[{\"key\":\"k:{caller}\",\"amount\":\"requests\",\n\"default\":" definition "}]"
    fails_with(UPSTREAMS, MODELS,
               D("{\"kind\":\"concurrency\",\n\"capacity\":0,\"timeout_seconds\":1}"), KEYS,
               "gateway.json: line 3: limits[0].default.capacity: must be an integer "
               "1..9223372036854775807");
    fails_with(UPSTREAMS, MODELS, D("{\"kind\":\"rolling\",\"capacity\":5}"), KEYS,
               "gateway.json: line 2: limits[0].default.window_seconds: required (> 0) for a "
               "rolling limit");
    fails_with(
        UPSTREAMS, MODELS,
        D("{\"kind\":\"concurrency\",\"capacity\":5,\n\n\"period\":"
          "\"month\",\"timeout_seconds\":9}"),
        KEYS, "gateway.json: line 4: limits[0].default.period: not allowed on a concurrency limit");
    fails_with(UPSTREAMS, MODELS, D("{\"capacity\":5}"), KEYS,
               "gateway.json: line 2: limits[0].default.kind: required");
    fails_with(UPSTREAMS, MODELS,
               D("{\"key\":\"k:x\",\"kind\":\"concurrency\",\"capacity\":5,"
                 "\"timeout_seconds\":9}"),
               KEYS,
               "gateway.json: line 2: limits[0].default.key: not allowed: the template gives it");
    fails_with(UPSTREAMS, MODELS, D("{\"kind\":\"budget\",\"capacity\":5,\"period\":\"year\"}"),
               KEYS,
               "gateway.json: line 2: limits[0].default.period: must be day, week, month or none");
    fails_with(UPSTREAMS, MODELS,
               D("{\"kind\":\"concurrency\",\"capacity\":5,\"timeout_seconds\":9,\"x\":1}"), KEYS,
               "gateway.json: line 2: limits[0].default.x: unknown field");
    fails_with(UPSTREAMS, MODELS, D("5"), KEYS,
               "gateway.json: line 2: limits[0].default: must be a limit definition without its "
               "key (an object: kind, capacity, ...)");
#undef D
}

int main(void)
{
    setenv(KEY_ENV, "sk-test-123", 1);
    unsetenv("GW_TEST_UNSET");
    RUN(valid_config_loads_with_defaults, "a valid file loads, with defaults filled in");
    RUN(templates_split_into_parts, "a template splits into text and placeholders");
    RUN(lookups_find_keys_and_models, "keys by digest and models by name are found, others not");
    RUN(key_model_list_restricts, "a key's models list restricts it; null or empty allows all");
    RUN(many_keys_are_all_found, "every one of 5000 keys is found by its digest");
    RUN(retain_and_release_count_holders, "retain and release count the holders");
    RUN(error_names_file_line_and_field, "an error names the file, the line and the field");
    RUN(document_errors, "bad JSON, a bad root and bad sections are errors");
    RUN(keys_may_be_left_out, "keys absent, null or [] load with no file key");
    RUN(file_errors, "a missing or too large file is an error");
    RUN(upstream_errors, "each upstream rule has its error");
    RUN(api_key_from_environment, "provider keys from the environment are checked, never shown");
    RUN(api_key_from_file, "provider keys from files: newline stripped, empty, long, missing");
    RUN(model_errors, "each model rule has its error");
    RUN(limit_errors, "each template rule has its error");
    RUN(key_errors, "each key rule has its error");
    RUN(caller_with_space_is_fine_without_caller_template,
        "a caller may hold a space when no template uses {caller}");
    RUN(bounds_one_past, "every bound: at it loads, one past fails");
    RUN(more_bounds_one_past, "lengths of names, keys, files and lists: one past fails");
    RUN(a_config_written_before_loads_the_same,
        "an OpenAI chat config written before the new fields loads with the same meaning");
    RUN(upstream_api_is_read, "an upstream's api is openai (default) or anthropic, else an error");
    RUN(every_price_field_is_read_with_its_default,
        "every price field is read, with its default, and refused when not an integer");
    RUN(price_defaults_at_the_bound_and_one_past,
        "cache write defaults at 2^63-1 load, one past is an error naming the field");
    RUN(an_unpriced_model_is_an_error, "a model without any price is an error naming it");
    RUN(prices_come_from_the_prices_file,
        "prices_from takes prices and max_output_tokens from the file; explicit values win");
    RUN(prices_file_errors, "a missing file, a name not in it, a price it lacks: errors");
    RUN(prices_file_entries_are_checked,
        "an entry's bad price is an error with its line; the model can fill a gap");
    RUN(output_reservation_is_read, "output_reservation is max_tokens or observed");
    RUN(key_wait_and_priority_at_their_bounds_and_one_past,
        "max_wait_seconds 0..60 and priority_floor 0..9, capping what a call asks");
    RUN(uncached_input_tokens_is_an_amount, "uncached_input_tokens is an amount");
    RUN(a_default_is_read_as_a_limit_definition,
        "a template's default is a limit definition, normalised, its key left to each call");
    RUN(an_invalid_default_names_its_field_and_line,
        "an invalid default is an error naming the field inside it and its line");
    return test_summary();
}
