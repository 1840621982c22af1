/* Unit tests of prices in LiteLLM's format (src/gateway/gw_prices.c): the
 * exact conversion of per-token USD literals to usd_micros per million
 * tokens (tricky literals, rounding up, zero, negative, too large, long
 * digit strings, bad syntax), the file of tests/gateway/prices_litellm.json
 * read entry by entry, entries nobody asks for left unchecked, every error
 * with its line, and the file's bounds one past. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/gw_prices.h"
#include "test.h"

#ifndef GW_TEST_DATA_DIR
#define GW_TEST_DATA_DIR "tests/gateway"
#endif

static char error[512];

/* The converted literal, or UINT64_MAX - result's code. */
static uint64_t convert(const char *literal)
{
    uint64_t out = 12345;
    enum gw_price_result result = gw_price_usd_per_token(literal, strlen(literal), &out);
    if (result != GW_PRICE_OK)
        return UINT64_MAX + (uint64_t)result; /* -1: MAX - 1, -2: MAX - 2, ... */
    return out;
}

#define NOT_A_NUMBER (UINT64_MAX - 1)
#define NEGATIVE (UINT64_MAX - 2)
#define TOO_LARGE (UINT64_MAX - 3)

static void tricky_literals_convert_exactly(void)
{
    CHECK_EQ_U64(convert("3e-06"), 3000000);
    CHECK_EQ_U64(convert("1.25e-07"), 125000);
    CHECK_EQ_U64(convert("0.000015"), 15000000);
    CHECK_EQ_U64(convert("3.75e-6"), 3750000);
    CHECK_EQ_U64(convert("1E-7"), 100000);
    CHECK_EQ_U64(convert("7.5e-08"), 75000); /* 0.075 USD per Mtok: no binary rounding */
    CHECK_EQ_U64(convert("1.875e-05"), 18750000);
    CHECK_EQ_U64(convert("0.1e+1"), 1000000000000);
    CHECK_EQ_U64(convert("2"), 2000000000000); /* an integer literal: 2 USD a token */
    CHECK_EQ_U64(convert("1e-12"), 1);
    /* Trailing zeros, leading zeros of the fraction, a 30-digit mantissa. */
    CHECK_EQ_U64(convert("3.000000000000000000000000000000e-6"), 3000000);
    CHECK_EQ_U64(convert("0.000000000000000000000000000003e24"), 3000000);
    CHECK_EQ_U64(convert("123456789012345678901234567890e-35"), 1234568); /* 1234567.89...: up */
}

static void a_fraction_left_rounds_up(void)
{
    CHECK_EQ_U64(convert("1.5e-12"), 2);
    CHECK_EQ_U64(convert("1e-13"), 1);
    CHECK_EQ_U64(convert("0.000003000000000000000000000001"), 3000001);
    CHECK_EQ_U64(convert("3.0000001e-6"), 3000001); /* 3000000.1 */
    CHECK_EQ_U64(convert("1e-999999999999999"), 1); /* any price above 0 costs something */
    CHECK_EQ_U64(convert("2.9999999e-6"), 3000000); /* 2999999.9 */
}

static void zero_and_negative(void)
{
    CHECK_EQ_U64(convert("0"), 0);
    CHECK_EQ_U64(convert("0.0"), 0);
    CHECK_EQ_U64(convert("0e-7"), 0);
    CHECK_EQ_U64(convert("-0.0"), 0); /* not below zero */
    CHECK_EQ_U64(convert("0.000e999999999"), 0);
    CHECK_EQ_U64(convert("-3e-06"), NEGATIVE);
    CHECK_EQ_U64(convert("-1e-999"), NEGATIVE);
    CHECK_STR(gw_price_result_text(GW_PRICE_NEGATIVE), "must be 0 or more");
}

static void the_largest_price_and_one_past(void)
{
    /* AMOUNT_MAX usd_micros per Mtok is 9223372.036854775807 USD a token. */
    CHECK_EQ_U64(convert("9223372.036854775807"), AMOUNT_MAX);
    CHECK_EQ_U64(convert("9223372.0368547758069"), AMOUNT_MAX); /* rounded up to it */
    CHECK_EQ_U64(convert("9223372.036854775808"), TOO_LARGE);
    CHECK_EQ_U64(convert("9223372.0368547758071"), TOO_LARGE); /* rounded up past it */
    CHECK_EQ_U64(convert("1e7"), TOO_LARGE);
    CHECK_EQ_U64(convert("1e999999999999999"), TOO_LARGE);
    CHECK_EQ_U64(convert("123456789012345678901234567890"), TOO_LARGE);
}

static void bad_syntax_is_not_a_number(void)
{
    static const char *const bad[] = {"",    "abc",  "01", "1.", ".5",   "1e", "+1",    "1e+",
                                      "--1", "0x10", "1 ", " 1", "1.e5", "-",  "1e5.0", "NaN"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_U64(convert(bad[i]), NOT_A_NUMBER);
        if (convert(bad[i]) != NOT_A_NUMBER)
            fprintf(stderr, "  accepted '%s'\n", bad[i]);
    }
}

static struct gw_prices *load_test_file(void)
{
    struct gw_prices *prices = NULL;
    if (gw_prices_load(GW_TEST_DATA_DIR "/prices_litellm.json", &prices, error, sizeof error) != 0)
        fprintf(stderr, "  %s\n", error);
    return prices;
}

static void the_test_file_gives_every_price(void)
{
    struct gw_prices *prices = load_test_file();
    REQUIRE(prices != NULL);
    struct gw_price_entry e;
    const char *name = "claude-sonnet-4-5-20250929";
    REQUIRE(gw_prices_find(prices, name, strlen(name), &e, error, sizeof error) == 1);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_INPUT], 3000000);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_OUTPUT], 15000000);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_CACHE_WRITE_5M], 3750000);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_CACHE_WRITE_1H], 6000000);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_CACHED_INPUT], 300000);
    CHECK_EQ_U64(e.present, (1u << GW_PRICE_FIELDS) - 1 - (1u << GW_PRICE_REASONING_OUTPUT));
    CHECK_EQ_U64(e.max_output_tokens, 64000);
    CHECK_EQ_U64(e.line, 10);
    REQUIRE(gw_prices_find(prices, "gpt-4o-mini", 11, &e, error, sizeof error) == 1);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_INPUT], 150000);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_CACHED_INPUT], 75000);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_OUTPUT], 600000);
    CHECK(!(e.present & (1u << GW_PRICE_CACHE_WRITE_5M)));
    REQUIRE(gw_prices_find(prices, "o3", 2, &e, error, sizeof error) == 1);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_REASONING_OUTPUT], 8000000);
    /* A name differing in length or case is not found. */
    CHECK_EQ_I64(gw_prices_find(prices, "gpt-5-mini", 10, &e, error, sizeof error), 0);
    CHECK_EQ_I64(gw_prices_find(prices, "gpt-", 4, &e, error, sizeof error), 0);
    CHECK_EQ_I64(gw_prices_find(prices, "GPT-5", 5, &e, error, sizeof error), 0);
    CHECK_EQ_I64(gw_prices_find(prices, "gpt-5", 5, &e, error, sizeof error), 1);
    CHECK_EQ_U64(e.max_output_tokens, 128000);
    /* The sample entry holds a text max_tokens: never read, never an error. */
    CHECK_EQ_I64(gw_prices_find(prices, "sample_spec", 11, &e, error, sizeof error), 1);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_INPUT], 0);
    gw_prices_free(prices);
}

static struct gw_prices *parse(const char *text)
{
    struct gw_prices *prices = NULL;
    error[0] = '\0';
    if (gw_prices_parse("p.json", text, strlen(text), &prices, error, sizeof error) != 0)
        return NULL;
    return prices;
}

/* Finds name in text; the result (1, 0, -1) and error set. */
static int find_in(const char *text, const char *name, struct gw_price_entry *e)
{
    struct gw_prices *prices = parse(text);
    if (prices == NULL)
        return -2;
    int result = gw_prices_find(prices, name, strlen(name), e, error, sizeof error);
    gw_prices_free(prices);
    return result;
}

static void entries_nobody_asks_for_are_not_checked(void)
{
    struct gw_price_entry e;
    const char *text =
        "{\"odd\":{\"input_cost_per_token\":\"free\",\"x\":[1,{\"y\":\"}]\\\"\"}]},\n"
        "\"odd\":7,\"dup\":1,\"dup\":2,\"bare\":tru,"
        "\"m\":{\"input_cost_per_token\":1e-6,\"output_cost_per_token\":2e-6}}";
    CHECK_EQ_I64(find_in(text, "m", &e), 1);
    CHECK_EQ_U64(e.usd_micros_per_mtok[GW_PRICE_OUTPUT], 2000000);
    CHECK_EQ_I64(find_in(text, "odd", &e), -1); /* asked for: it appears twice */
    CHECK_STR(error, "p.json: line 2: 'odd': appears more than once (also on line 1)");
    CHECK_EQ_I64(find_in(text, "bare", &e), -1);
    CHECK(strncmp(error, "p.json: line 2: 'bare': invalid JSON", 36) == 0);
    /* Names with escapes are decoded. */
    CHECK_EQ_I64(find_in("{\"a\\u002fb\":{\"input_cost_per_token\":0}}", "a/b", &e), 1);
}

static void entry_errors_name_the_field_and_line(void)
{
    struct gw_price_entry e;
    static const struct {
        const char *text, *name, *error;
    } cases[] = {
        {"{\"m\":[1]}", "m", "p.json: line 1: 'm': must be an object"},
        {"{\n\"m\":{\n\"input_cost_per_token\":\"3e-06\"}}", "m",
         "p.json: line 3: 'm'.input_cost_per_token: must be a number (USD per token)"},
        {"{\"m\":{\"output_cost_per_token\":-1e-6}}", "m",
         "p.json: line 1: 'm'.output_cost_per_token: must be 0 or more"},
        {"{\"m\":{\"cache_read_input_token_cost\":1e7}}", "m",
         "p.json: line 1: 'm'.cache_read_input_token_cost: is above 9223372036854775807 "
         "usd_micros per million tokens"},
        {"{\"m\":{\n\n\"max_output_tokens\":16777217}}", "m",
         "p.json: line 3: 'm'.max_output_tokens: must be an integer 1..16777216"},
        {"{\"m\":{\"max_output_tokens\":8192.0}}", "m",
         "p.json: line 1: 'm'.max_output_tokens: must be an integer 1..16777216"},
        {"{\"m\":{\"max_output_tokens\":0}}", "m",
         "p.json: line 1: 'm'.max_output_tokens: must be an integer 1..16777216"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_I64(find_in(cases[i].text, cases[i].name, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
    CHECK_EQ_I64(
        find_in("{\"m\":{\"max_output_tokens\":16777216,\"input_cost_per_token\":null}}", "m", &e),
        1);
    CHECK_EQ_U64(e.max_output_tokens, 16777216);
    CHECK_EQ_U64(e.present, 0);
}

static void file_errors(void)
{
    static const struct {
        const char *text, *error;
    } cases[] = {
        {"[]", "p.json: line 1: must be a JSON object"},
        {"", "p.json: line 1: must be a JSON object"},
        {"{\"a\":1", "p.json: line 1: ',' or '}' expected"},
        {"{\"a\":{\"b\":[1,2}", "p.json: line 1: unexpected end of the file"},
        {"{\"a\" 1}", "p.json: line 1: ':' expected"},
        {"{\n\"a\":1,\n7:1}", "p.json: line 3: a string (a model's name) expected"},
        {"{\"a\":\"open}", "p.json: line 1: unterminated string"},
        {"{\"a\":}", "p.json: line 1: a value expected"},
        {"{\"a\":1} x", "p.json: line 1: end of the file expected"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(parse(cases[i].text) == NULL);
        CHECK_STR(error, cases[i].error);
    }
    struct gw_prices *prices = NULL;
    CHECK_EQ_I64(gw_prices_load("/nonexistent/prices.json", &prices, error, sizeof error), -1);
    CHECK_STR(error, "/nonexistent/prices.json: No such file or directory");
    struct gw_prices *empty = parse("{ }");
    CHECK(empty != NULL);
    gw_prices_free(empty);
}

static void nesting_bound_one_past(void)
{
    char text[512];
    size_t n = 0;
    n += (size_t)snprintf(text, sizeof text, "{\"a\":");
    for (int i = 0; i < GW_JSON_DEPTH_MAX; i++)
        text[n++] = '[';
    for (int i = 0; i < GW_JSON_DEPTH_MAX; i++)
        text[n++] = ']';
    snprintf(text + n, sizeof text - n, "}");
    struct gw_prices *prices = parse(text);
    CHECK(prices != NULL);
    gw_prices_free(prices);
    n = (size_t)snprintf(text, sizeof text, "{\"a\":");
    for (int i = 0; i < GW_JSON_DEPTH_MAX + 1; i++)
        text[n++] = '[';
    snprintf(text + n, sizeof text - n, "}");
    CHECK(parse(text) == NULL);
    CHECK_STR(error, "p.json: line 1: nested deeper than 64 levels");
}

static void size_and_entry_bounds_one_past(void)
{
    /* Size: a file one byte past the bound is refused before it is read
     * (a sparse file: nothing is written); at the bound it parses. */
    char path[] = "/tmp/gw_prices_test_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, GW_PRICES_FILE_BYTES_MAX + 1) == 0);
    close(fd);
    struct gw_prices *prices = NULL;
    CHECK_EQ_I64(gw_prices_load(path, &prices, error, sizeof error), -1);
    char expected[128];
    snprintf(expected, sizeof expected, "%s: larger than 16777216 bytes", path);
    CHECK_STR(error, expected);
    unlink(path);
    char *big = malloc(GW_PRICES_FILE_BYTES_MAX + 1);
    REQUIRE(big != NULL);
    memset(big, ' ', GW_PRICES_FILE_BYTES_MAX);
    big[0] = '{', big[GW_PRICES_FILE_BYTES_MAX - 1] = '}';
    CHECK_EQ_I64(
        gw_prices_parse("p.json", big, GW_PRICES_FILE_BYTES_MAX, &prices, error, sizeof error), 0);
    gw_prices_free(prices);
    CHECK_EQ_I64(
        gw_prices_parse("p.json", big, GW_PRICES_FILE_BYTES_MAX + 1, &prices, error, sizeof error),
        -1);
    CHECK_STR(error, "p.json: larger than 16777216 bytes");
    /* Entries: at the bound every one is found; one more is refused. */
    char *p = big;
    p += sprintf(p, "{");
    for (int i = 0; i <= GW_PRICES_ENTRIES_MAX; i++)
        p += sprintf(p, "%s\"m%d\":{\"input_cost_per_token\":%d}", i > 0 ? "," : "", i, i % 3);
    char *last = strrchr(big, ',');
    *last = '}', last[1] = '\0';
    CHECK_EQ_I64(gw_prices_parse("p.json", big, strlen(big), &prices, error, sizeof error), 0);
    struct gw_price_entry e;
    int found = 0;
    for (int i = 0; prices != NULL && i < GW_PRICES_ENTRIES_MAX; i += 997) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        found += gw_prices_find(prices, name, strlen(name), &e, error, sizeof error) == 1 &&
                 e.usd_micros_per_mtok[GW_PRICE_INPUT] == (uint64_t)(i % 3) * 1000000000000u;
    }
    CHECK_EQ_I64(found, (GW_PRICES_ENTRIES_MAX + 996) / 997);
    gw_prices_free(prices);
    *last = ',';
    CHECK_EQ_I64(gw_prices_parse("p.json", big, strlen(big), &prices, error, sizeof error), -1);
    CHECK_STR(error, "p.json: line 1: more than 65536 entries");
    free(big);
}

/* The test file cut short and with bytes changed at random: every damaged
 * copy is either refused with a line, or indexed, and every name asked for
 * then answers found, not found or an error: nothing is read out of bounds
 * (the sanitizer build runs this too). */
static void damaged_files_are_refused_or_read(void)
{
    FILE *f = fopen(GW_TEST_DATA_DIR "/prices_litellm.json", "rb");
    REQUIRE(f != NULL);
    static char original[8192], damaged[8192];
    size_t length = fread(original, 1, sizeof original, f);
    fclose(f);
    REQUIRE(length > 100 && length < sizeof original);
    static const char *const names[] = {"gpt-5", "o3", "claude-haiku-4-5-20251001", "sample_spec"};
    static const char bytes[] = "{}[]\",:\\ 0e-.\nax\xff";
    uint64_t x = 0x853c49e6748fea9bull;
    int bad_errors = 0;
    for (int round = 0; round < 3000; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = round % 3 == 0 ? x % length : length;
        memcpy(damaged, original, n);
        for (int k = 0; k < 1 + (int)(x >> 40) % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (n > 0)
                damaged[x % n] = bytes[(x >> 20) % (sizeof bytes - 1)];
        }
        struct gw_prices *prices = NULL;
        if (gw_prices_parse("p.json", damaged, n, &prices, error, sizeof error) != 0) {
            bad_errors += strncmp(error, "p.json: ", 8) != 0;
            continue;
        }
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            struct gw_price_entry e;
            int found = gw_prices_find(prices, names[i], strlen(names[i]), &e, error, sizeof error);
            bad_errors += found < 0 && strncmp(error, "p.json: line ", 13) != 0;
        }
        gw_prices_free(prices);
    }
    CHECK_EQ_I64(bad_errors, 0);
}

int main(void)
{
    RUN(tricky_literals_convert_exactly, "per-token literals convert exactly, without doubles");
    RUN(a_fraction_left_rounds_up, "a fraction of a usd_micro left over rounds up");
    RUN(zero_and_negative, "zero (and -0) is 0; a negative price is an error");
    RUN(the_largest_price_and_one_past, "the largest price converts; one past is an error");
    RUN(bad_syntax_is_not_a_number, "anything but a JSON number is refused");
    RUN(the_test_file_gives_every_price, "the LiteLLM-format test file gives every field");
    RUN(entries_nobody_asks_for_are_not_checked,
        "entries nobody asks for are only skipped; asked for, they are checked");
    RUN(entry_errors_name_the_field_and_line, "each entry error names the field and its line");
    RUN(file_errors, "a file that is not one JSON object of entries is an error with its line");
    RUN(nesting_bound_one_past, "nesting at the bound is skipped, one past is an error");
    RUN(size_and_entry_bounds_one_past, "file size and entry count: at the bound, one past");
    RUN(damaged_files_are_refused_or_read,
        "damaged files are refused with their line or read; nothing read out of bounds");
    return test_summary();
}
