/* Flags described by a table (src/core/flag.c): each kind parsed within its
 * bounds, one past refused, values shown as --help shows defaults. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/flag.h"
#include "test.h"

struct settings {
    const char *name;
    uint32_t count;
    uint64_t bytes;
    int64_t retention_ms;
    bool normal;
    bool on;
};

static const char *const modes[] = {"full", "normal"};

static const struct flag rows[] = {
    {"--name", "TEXT", FLAG_STRING, offsetof(struct settings, name), 0, 0, "a name", 0, NULL},
    {"--count", "N", FLAG_U32, offsetof(struct settings, count), 1, 64, "a count", 0, NULL},
    {"--bytes", "N", FLAG_U64, offsetof(struct settings, bytes), 0, UINT64_MAX, "bytes", 0, NULL},
    {"--retention-days", "N", FLAG_I64_SCALED, offsetof(struct settings, retention_ms), 0, 36600,
     "days", INT64_C(86400000), NULL},
    {"--mode", "full|normal", FLAG_CHOICE, offsetof(struct settings, normal), 0, 0, "a mode", 0,
     modes},
    {"--on", NULL, FLAG_SWITCH, offsetof(struct settings, on), 0, 0, "a switch", 0, NULL},
};
#define ROWS (sizeof rows / sizeof rows[0])

static const struct flag *row(const char *name)
{
    return flag_find(rows, ROWS, name, strlen(name));
}

static void each_kind_is_parsed_into_its_field(void)
{
    struct settings s = {0};
    CHECK_EQ_I64(flag_apply(row("--name"), &s, "x"), 0);
    CHECK_STR(s.name, "x");
    CHECK_EQ_I64(flag_apply(row("--count"), &s, "64"), 0);
    CHECK_EQ_U64(s.count, 64);
    CHECK_EQ_I64(flag_apply(row("--bytes"), &s, "18446744073709551615"), 0);
    CHECK_EQ_U64(s.bytes, UINT64_MAX);
    CHECK_EQ_I64(flag_apply(row("--retention-days"), &s, "2"), 0);
    CHECK_EQ_I64(s.retention_ms, 2 * 86400000);
    CHECK_EQ_I64(flag_apply(row("--mode"), &s, "normal"), 0);
    CHECK(s.normal);
    CHECK_EQ_I64(flag_apply(row("--mode"), &s, "full"), 0);
    CHECK(!s.normal);
    CHECK_EQ_I64(flag_apply(row("--on"), &s, ""), 0);
    CHECK(s.on);
}

static void one_past_a_bound_and_strangers_are_refused(void)
{
    struct settings s = {.count = 7};
    const char *bad_counts[] = {"0", "65", "-1", "+5", " 5", "5 ", "0x10", "", "1e2",
                                "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_counts / sizeof bad_counts[0]; i++)
        CHECK_EQ_I64(flag_apply(row("--count"), &s, bad_counts[i]), -1);
    CHECK_EQ_U64(s.count, 7); /* nothing written on a refusal */
    CHECK_EQ_I64(flag_apply(row("--bytes"), &s, "18446744073709551616"), -1);
    CHECK_EQ_I64(flag_apply(row("--retention-days"), &s, "36601"), -1);
    CHECK_EQ_I64(flag_apply(row("--mode"), &s, "Normal"), -1);
    CHECK_EQ_I64(flag_apply(row("--name"), &s, ""), -1);
    CHECK(row("--nope") == NULL);
    CHECK(flag_find(rows, ROWS, "--count=3", 7) == row("--count"));
}

static void values_read_back_as_help_shows_them(void)
{
    struct settings s = {.name = NULL, .count = 4, .bytes = 9, .retention_ms = 3 * 86400000,
                         .normal = true, .on = false};
    char text[64], expected[64];
    flag_value_text(row("--name"), &s, text, sizeof text);
    CHECK_STR(text, "none");
    flag_value_text(row("--count"), &s, text, sizeof text);
    CHECK_STR(text, "4");
    flag_value_text(row("--retention-days"), &s, text, sizeof text);
    CHECK_STR(text, "3");
    flag_value_text(row("--mode"), &s, text, sizeof text);
    CHECK_STR(text, "normal");
    flag_value_text(row("--on"), &s, text, sizeof text);
    CHECK_STR(text, "off");
    flag_expected_text(row("--count"), expected, sizeof expected);
    CHECK_STR(expected, "N in 1..64");
    flag_expected_text(row("--mode"), expected, sizeof expected);
    CHECK_STR(expected, "full|normal");
}

int main(void)
{
    RUN(each_kind_is_parsed_into_its_field, "strings, counts, scaled days, choices and switches");
    RUN(one_past_a_bound_and_strangers_are_refused,
        "one past each bound, signs, blanks, hex and unknown words are refused, nothing written");
    RUN(values_read_back_as_help_shows_them, "a value reads back as --help shows a default");
    return test_summary();
}
