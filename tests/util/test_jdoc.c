/* Unit tests of what src/util/jdoc.c keeps of a real number: its text as
 * written, byte for byte, wherever it sits (a root, an array, an object,
 * next to strings that are unescaped in place), and integers unchanged. */
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "util/jdoc.h"

static struct arena arena;
static char text[1024];

static const struct jdoc_value *parse(const char *json)
{
    arena_reset(&arena);
    snprintf(text, sizeof text, "%s", json);
    struct jdoc_value *root;
    char error[256];
    if (jdoc_parse(text, strlen(text), &arena, &root, error, sizeof error) != 0) {
        fprintf(stderr, "  does not parse: %s\n", error);
        return NULL;
    }
    return root;
}

static void check_number(const struct jdoc_value *value, const char *expected)
{
    CHECK(jdoc_is(value, JDOC_REAL));
    if (!jdoc_is(value, JDOC_REAL))
        return;
    CHECK_EQ_U64(value->count, strlen(expected));
    CHECK(memcmp(value->as.number, expected, strlen(expected)) == 0);
}

static void a_real_keeps_its_text(void)
{
    static const char *const reals[] = {"3e-06",
                                        "1.25e-07",
                                        "0.000015",
                                        "-0.0",
                                        "1E+5",
                                        "2.50",
                                        "0.000003000000000000000000000001",
                                        "123456789012345678901234567890.5"};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        const struct jdoc_value *root = parse(reals[i]);
        REQUIRE(root != NULL);
        check_number(root, reals[i]);
    }
}

static void reals_inside_documents_keep_their_text(void)
{
    const struct jdoc_value *root =
        parse("{\"a\\n\\u00e9\":1.5e-3,\"list\":[\"x\\\"y\",7e0 ,\"\\\\\",-2.25],\"n\":12}");
    REQUIRE(root != NULL);
    check_number(jdoc_get(root, "a\n\xc3\xa9"), "1.5e-3");
    const struct jdoc_value *list = jdoc_get(root, "list");
    REQUIRE(jdoc_is(list, JDOC_ARRAY) && list->count == 4);
    CHECK_STR(list->as.items[0].as.string, "x\"y");
    check_number(&list->as.items[1], "7e0");
    CHECK_STR(list->as.items[2].as.string, "\\");
    check_number(&list->as.items[3], "-2.25");
    const struct jdoc_value *n = jdoc_get(root, "n");
    CHECK(jdoc_is(n, JDOC_INTEGER) && n->as.integer == 12);
}

int main(void)
{
    arena_init(&arena, NULL, 0);
    RUN(a_real_keeps_its_text, "a real number keeps its text exactly as written");
    RUN(reals_inside_documents_keep_their_text,
        "reals among escaped strings keep their text; integers keep their value");
    arena_free(&arena);
    return test_summary();
}
