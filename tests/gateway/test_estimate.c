/* Unit tests of the token estimate (src/gateway/gw_estimate*.c): the
 * properties the text estimator keeps on any input (never lower after
 * text is appended, the same wherever text is split, CJK at least one
 * token per character, digits in groups of three, at most 1.5 tokens per
 * byte), and the request walk: what counts, fixed amounts, the output
 * reservation and every error. How close it is to a real tokenizer is
 * measured by test_estimate_real.sh. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_estimate.h"
#include "test.h"
#include "util/jdoc.h"

static uint64_t random_state = 0x2545f4914f6cdd1dull;

static uint64_t next_random(void)
{
    uint64_t x = random_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    random_state = x;
    return x;
}

/* Pieces of every class the estimator knows, and bytes that are not UTF-8. */
static const char *const pieces[] = {
    "a",    "e", "b",      "k",   "Z",    "Q",    "0",        "7",  " ",    "  ", "\t", "\n",
    "\r\n", ".", ",",      "(",   "\"",   "{",    "é",        "ü",  "ł",    "ş",  "ж",  "Я",
    "ש",    "ع", "क",      "ि",   "ก",    "α",    "你",       "の", "한",   "，", "—",  "’",
    "😀",    "🇵", "\u200d", "️", "\xff", "\xc3", "\xe4\xbd", "𠀀", "\x01",
};
#define PIECE_COUNT (sizeof pieces / sizeof pieces[0])

static size_t random_text(char *out, size_t size)
{
    size_t length = 0;
    size_t count = next_random() % 60;
    for (size_t i = 0; i < count; i++) {
        const char *p = pieces[next_random() % PIECE_COUNT];
        size_t n = strlen(p);
        if (length + n >= size)
            break;
        memcpy(out + length, p, n);
        length += n;
    }
    out[length] = '\0';
    return length;
}

static void empty_text_is_zero(void)
{
    CHECK_EQ_U64(gw_estimate_text("", 0), 0);
    struct gw_text_counter counter;
    gw_text_counter_init(&counter);
    gw_text_counter_break(&counter);
    CHECK_EQ_U64(gw_text_counter_tokens(&counter), 0);
}

static void small_texts_have_exact_counts(void)
{
    CHECK_EQ_U64(gw_estimate_text(" ", 1), 1);
    CHECK_EQ_U64(gw_estimate_text("123", 3), 1);
    CHECK_EQ_U64(gw_estimate_text("123456789", 9), 3); /* digits in groups of three */
    CHECK_EQ_U64(gw_estimate_text("1234567890", 10), 4);
    CHECK_EQ_U64(gw_estimate_text("你好", 6), 2);
    CHECK_EQ_U64(gw_estimate_text("😀", 4), 2);
    CHECK_EQ_U64(gw_estimate_text("\n\n", 2), 2); /* 1.01: counts are rounded up at the end */
    /* A word of up to three letters is just over a token: 2 alone, but
     * five of them with their spaces take 6. */
    CHECK_EQ_U64(gw_estimate_text("the", 3), 2);
    CHECK_EQ_U64(gw_estimate_text("the cat sat on it", 17), 6);
}

static void appending_never_lowers_the_count(void)
{
    char text[512];
    int violations = 0;
    for (int round = 0; round < 3000; round++) {
        size_t length = random_text(text, sizeof text);
        uint64_t previous = 0;
        for (size_t k = 0; k <= length; k++) { /* every byte prefix, UTF-8 split or not */
            uint64_t tokens = gw_estimate_text(text, k);
            if (tokens < previous && violations++ < 5)
                fprintf(stderr, "  lower after byte %zu of \"%s\": %llu < %llu\n", k, text,
                        (unsigned long long)tokens, (unsigned long long)previous);
            previous = tokens;
        }
    }
    CHECK_EQ_I64(violations, 0);
}

static void split_anywhere_counts_the_same(void)
{
    char text[512];
    int differences = 0;
    for (int round = 0; round < 3000; round++) {
        size_t length = random_text(text, sizeof text);
        struct gw_text_counter counter;
        gw_text_counter_init(&counter);
        size_t at = 0;
        while (at < length) { /* random pieces, cut inside characters too */
            size_t n = 1 + next_random() % 7;
            if (n > length - at)
                n = length - at;
            gw_text_counter_add(&counter, text + at, n);
            at += n;
        }
        differences += gw_text_counter_tokens(&counter) != gw_estimate_text(text, length);
    }
    CHECK_EQ_I64(differences, 0);
}

static void never_more_than_one_and_a_half_per_byte(void)
{
    char text[512];
    int over = 0;
    for (int round = 0; round < 3000; round++) {
        size_t length = random_text(text, sizeof text);
        over += gw_estimate_text(text, length) * 2 > length * 3 + 2;
    }
    CHECK_EQ_I64(over, 0);
    /* The worst case for letters: accented consonant clusters. */
    const char *cluster = "ÅBCDFGHJKLMNPQRSTVWXZBCDFGHJKLMNPQRSTVWXZ";
    CHECK(gw_estimate_text(cluster, strlen(cluster)) * 2 <= strlen(cluster) * 3 + 2);
}

static void cjk_counts_at_least_one_per_character(void)
{
    static const char *const characters[] = {"的", "世", "界", "の", "ア", "한", "국", "语", "𠀀"};
    char text[1024];
    for (int round = 0; round < 500; round++) {
        size_t count = 1 + next_random() % 60, length = 0;
        for (size_t i = 0; i < count; i++) {
            const char *c = characters[next_random() % 9];
            memcpy(text + length, c, strlen(c));
            length += strlen(c);
        }
        CHECK(gw_estimate_text(text, length) >= count);
    }
}

static void separate_texts_count_at_least_their_concatenation(void)
{
    struct gw_text_counter counter;
    gw_text_counter_init(&counter);
    gw_text_counter_add(&counter, "inter", 5);
    gw_text_counter_break(&counter);
    gw_text_counter_add(&counter, "national", 8);
    CHECK(gw_text_counter_tokens(&counter) >= gw_estimate_text("international", 13));
    CHECK(gw_text_counter_tokens(&counter) <=
          gw_estimate_text("inter", 5) + gw_estimate_text("national", 8));
}

static void rare_words_cost_more_than_common_ones(void)
{
    /* Same length: a random consonant string takes more than a word. */
    CHECK(gw_estimate_text("qzxvbkt", 7) > gw_estimate_text("example", 7));
    CHECK(gw_estimate_text("GLLQUWLZp", 9) > gw_estimate_text("community", 9));
    CHECK(gw_estimate_text("prázdniny", 10) > gw_estimate_text("provinces", 9));
}

/* ---- requests ---- */

static struct arena arena;
static char body_text[65536];
static char error[GW_ESTIMATE_ERROR_SIZE];

static const struct gw_model model = {
    .name = "m",
    .upstream_model = "m",
    .max_output_tokens = 1000,
    .default_max_output_tokens = 100,
};

static int estimate(const char *json, enum gw_endpoint endpoint, struct gw_estimate *out)
{
    arena_reset(&arena);
    snprintf(body_text, sizeof body_text, "%s", json);
    struct jdoc_value *root;
    char reason[256];
    if (jdoc_parse(body_text, strlen(body_text), &arena, &root, reason, sizeof reason) != 0) {
        fprintf(stderr, "  test body does not parse: %s\n", reason);
        return -2;
    }
    return gw_estimate_request(root, endpoint, &model, out, error, sizeof error);
}

static int chat(const char *json, struct gw_estimate *out)
{
    return estimate(json, GW_ENDPOINT_CHAT_COMPLETIONS, out);
}

/* The count of texts fed as separate texts, as the walk does. */
static uint64_t texts(int count, ...)
{
    struct gw_text_counter counter;
    gw_text_counter_init(&counter);
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++) {
        const char *t = va_arg(ap, const char *);
        gw_text_counter_add(&counter, t, strlen(t));
        gw_text_counter_break(&counter);
    }
    va_end(ap);
    return gw_text_counter_tokens(&counter);
}

static void chat_counts_roles_contents_and_overheads(void)
{
    struct gw_estimate e;
    REQUIRE(chat("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                 "{\"role\":\"user\",\"content\":\"Hello there, how are you?\"}]}",
                 &e) == 0);
    CHECK_EQ_U64(e.input_tokens,
                 texts(4, "system", "Be brief.", "user", "Hello there, how are you?") + 2 * 4 + 3);
    CHECK_EQ_U64(e.output_tokens_per_choice, 100); /* the model's default */
    CHECK_EQ_U64(e.choices, 1);
    CHECK_EQ_U64(e.output_tokens, 100);
}

static void chat_parts_images_and_audio(void)
{
    struct gw_estimate e;
    REQUIRE(
        chat("{\"messages\":[{\"role\":\"user\",\"content\":["
             "{\"type\":\"text\",\"text\":\"What is this?\"},"
             "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/y.png\"}},"
             "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,\",\"detail\":\"low\"}}]}]}",
             &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(2, "user", "What is this?") + 4 + 3 + 1445 + 85);
    /* 40000 base64 characters: 30000 bytes; mp3 at 4000 B/s is 7.5 s: 75 tokens;
     * wav at 32000 B/s is under a second: the minimum of 10. */
    char json[41000], data[40001];
    memset(data, 'A', 40000);
    data[40000] = '\0';
    snprintf(json, sizeof json,
             "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
             "\"input_audio\":{\"data\":\"%s\",\"format\":\"mp3\"}}]}]}",
             data);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(1, "user") + 4 + 3 + 75);
    snprintf(json, sizeof json,
             "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
             "\"input_audio\":{\"data\":\"%s\",\"format\":\"wav\"}}]}]}",
             data);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(1, "user") + 4 + 3 + 10);
}

static void chat_counts_names_tool_calls_and_unknown_parts(void)
{
    struct gw_estimate e;
    REQUIRE(chat("{\"messages\":[{\"role\":\"user\",\"name\":\"ana\",\"content\":\"hi\"},"
                 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
                 "\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":"
                 "\"{\\\"q\\\":1}\"}}]},"
                 "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}]}",
                 &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(9, "user", "hi", "ana", "assistant", "get", "{\"q\":1}",
                                       "tool", "42", "c1") +
                                     3 * 4 + 1 + 3);
    REQUIRE(chat("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
                 "\"file\":{\"file_id\":\"f1\"}}]}]}",
                 &e) == 0);
    CHECK_EQ_U64(e.input_tokens,
                 texts(2, "user", "{\"type\":\"file\",\"file\":{\"file_id\":\"f1\"}}") + 4 + 3);
}

static void tools_and_schemas_count_as_json_text(void)
{
    struct gw_estimate e;
    REQUIRE(chat("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"tools\":[ {\"type\": \"function\", \"function\": {\"name\": \"f\", "
                 "\"parameters\": {\"type\":\"object\",\"properties\":{}}}} ],"
                 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"strict\":true,"
                 "\"max\":2,\"temperature\":0.5}},\"tool_choice\":\"auto\"}",
                 &e) == 0);
    CHECK_EQ_U64(e.input_tokens,
                 texts(4, "user", "x",
                       "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
                       "\"type\":\"object\",\"properties\":{}}}}]",
                       "{\"type\":\"json_schema\",\"json_schema\":{\"strict\":true,\"max\":2,"
                       "\"temperature\":0.0001}}") +
                     4 + 3);
}

static void output_reservation(void)
{
    struct gw_estimate e;
    const char *messages = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char json[256];
    snprintf(json, sizeof json, "{%s,\"max_tokens\":50,\"n\":3}", messages);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.output_tokens_per_choice, 50);
    CHECK_EQ_U64(e.choices, 3);
    CHECK_EQ_U64(e.output_tokens, 150);
    snprintf(json, sizeof json, "{%s,\"max_tokens\":50,\"max_completion_tokens\":70}", messages);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 70); /* max_completion_tokens wins */
    snprintf(json, sizeof json, "{%s,\"max_tokens\":null,\"n\":null}", messages);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 100);
    snprintf(json, sizeof json, "{%s,\"max_tokens\":1000,\"n\":128}", messages);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 128000);
    snprintf(json, sizeof json, "{%s,\"max_tokens\":0}", messages);
    REQUIRE(chat(json, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 0);
}

static void output_errors(void)
{
    struct gw_estimate e;
    const char *messages = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    static const struct {
        const char *members, *error;
    } cases[] = {
        {"\"max_tokens\":1001", "max_tokens: must be at most 1000 for model m"},
        {"\"max_completion_tokens\":1001",
         "max_completion_tokens: must be at most 1000 for model m"},
        {"\"max_tokens\":-1", "max_tokens: must be an integer >= 0"},
        {"\"max_tokens\":1.5", "max_tokens: must be an integer >= 0"},
        {"\"max_tokens\":\"5\"", "max_tokens: must be an integer >= 0"},
        {"\"n\":0", "n: must be an integer 1..128"},
        {"\"n\":129", "n: must be an integer 1..128"},
        {"\"n\":true", "n: must be an integer 1..128"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[256];
        snprintf(json, sizeof json, "{%s,%s}", messages, cases[i].members);
        CHECK_EQ_I64(chat(json, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
}

static void chat_errors_name_the_field(void)
{
    struct gw_estimate e;
    static const struct {
        const char *body, *error;
    } cases[] = {
        {"[]", "body: must be a JSON object"},
        {"{}", "messages: must be a non-empty array"},
        {"{\"messages\":[]}", "messages: must be a non-empty array"},
        {"{\"messages\":{}}", "messages: must be a non-empty array"},
        {"{\"messages\":[1]}", "messages[0]: must be an object"},
        {"{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role: must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}",
         "messages[0].content: must be a string, an array of parts or null"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[\"x\"]}]}",
         "messages[0].content[0]: must be an object"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}",
         "messages[0].content[0].type: must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0].text: must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]"
         "}]}",
         "messages[0].content[0].image_url: must be an object with a url string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
         "{\"url\":\"u\",\"detail\":1}}]}]}",
         "messages[0].content[0].image_url.detail: must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
         "\"input_audio\":{\"format\":\"wav\"}}]}]}",
         "messages[0].content[0].input_audio: must be an object with a data string"},
        {"{\"messages\":[{\"role\":\"user\",\"name\":5,\"content\":\"x\"}]}",
         "messages[0].name: must be a string"},
        {"{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":[],\"content\":\"x\"}]}",
         "messages[0].tool_call_id: must be a string"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":{}}]}",
         "messages[0].tool_calls: must be an array"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[7]}]}",
         "messages[0].tool_calls[0]: must be an object"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":[]}]}]}",
         "messages[0].tool_calls[0].function: must be an object"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":1}}]}]}",
         "messages[0].tool_calls[0].function.name: must be a string"},
        {"{\"messages\":[{\"role\":\"assistant\",\"function_call\":{\"arguments\":{}}}]}",
         "messages[0].function_call.arguments: must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}",
         "tools: must be an array"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":\"f\"}",
         "functions: must be an array"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":\"json\"}",
         "response_format: must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_I64(chat(cases[i].body, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
}

static int completion(const char *json, struct gw_estimate *out)
{
    return estimate(json, GW_ENDPOINT_COMPLETIONS, out);
}

static void completion_prompts(void)
{
    struct gw_estimate e;
    REQUIRE(completion("{\"prompt\":\"Once upon a time\",\"max_tokens\":10}", &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(1, "Once upon a time"));
    CHECK_EQ_U64(e.output_tokens, 10);
    REQUIRE(completion("{\"prompt\":[\"a b\",\"c d\"],\"max_tokens\":10,\"n\":2}", &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(2, "a b", "c d"));
    CHECK_EQ_U64(e.choices, 4); /* two prompts, two choices each */
    CHECK_EQ_U64(e.output_tokens, 40);
    REQUIRE(completion("{\"prompt\":[1,2,3,4,5],\"max_tokens\":10,\"best_of\":3}", &e) == 0);
    CHECK_EQ_U64(e.input_tokens, 5); /* token ids: exact */
    CHECK_EQ_U64(e.choices, 3);      /* best_of are made, n returned */
    REQUIRE(completion("{\"prompt\":[[1,2],[3],\"x y\"],\"max_tokens\":1}", &e) == 0);
    CHECK_EQ_U64(e.input_tokens, 3 + texts(1, "x y"));
    CHECK_EQ_U64(e.choices, 3);
    REQUIRE(completion("{\"max_tokens\":1,\"suffix\":\"the end\"}", &e) == 0);
    CHECK_EQ_U64(e.input_tokens, 1 + texts(1, "the end"));
}

static void completion_errors(void)
{
    struct gw_estimate e;
    static const struct {
        const char *body, *error;
    } cases[] = {
        {"{\"prompt\":5}", "prompt: must be a string or an array"},
        {"{\"prompt\":[]}", "prompt: must have 1..2048 items"},
        {"{\"prompt\":[true]}", "prompt[0]: must be a string or an array of token ids"},
        {"{\"prompt\":[1,-2]}", "prompt[1]: must be a token id (an integer >= 0)"},
        {"{\"prompt\":[[1],[2.5]]}", "prompt[1][0]: must be a token id (an integer >= 0)"},
        {"{\"prompt\":\"x\",\"suffix\":3}", "suffix: must be a string"},
        {"{\"prompt\":\"x\",\"n\":3,\"best_of\":2}", "best_of: must be at least n"},
        {"{\"prompt\":\"x\",\"best_of\":129}", "best_of: must be an integer 1..128"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_I64(completion(cases[i].body, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
    /* The number of prompts: at the bound and one past. */
    for (int count = GW_PROMPTS_MAX; count <= GW_PROMPTS_MAX + 1; count++) {
        char *json = malloc(8 * (size_t)count + 32), *p = json;
        p += sprintf(p, "{\"prompt\":[");
        for (int i = 0; i < count; i++)
            p += sprintf(p, "%s\"p\"", i > 0 ? "," : "");
        sprintf(p, "],\"max_tokens\":1}");
        if (count == GW_PROMPTS_MAX) {
            CHECK_EQ_I64(completion(json, &e), 0);
            CHECK_EQ_U64(e.choices, GW_PROMPTS_MAX);
        } else {
            CHECK_EQ_I64(completion(json, &e), -1);
            CHECK_STR(error, "prompt: must have 1..2048 items");
        }
        free(json);
    }
}

static void embeddings_reserve_no_output(void)
{
    struct gw_estimate e;
    REQUIRE(estimate("{\"input\":[\"one\",\"two\"],\"max_tokens\":5000}", GW_ENDPOINT_EMBEDDINGS,
                     &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(2, "one", "two"));
    CHECK_EQ_U64(e.output_tokens, 0);
    CHECK_EQ_U64(e.choices, 0);
    CHECK_EQ_I64(estimate("{\"model\":\"m\"}", GW_ENDPOINT_EMBEDDINGS, &e), -1);
    CHECK_STR(error, "input: required");
    CHECK_EQ_I64(estimate("{\"input\":{}}", GW_ENDPOINT_EMBEDDINGS, &e), -1);
    CHECK_STR(error, "input: must be a string or an array");
}

/* ---- Anthropic Messages ---- */

static int messages(const char *json, struct gw_estimate *out)
{
    return estimate(json, GW_ENDPOINT_MESSAGES, out);
}

static void messages_counts_system_blocks_and_tools(void)
{
    struct gw_estimate e;
    REQUIRE(messages("{\"model\":\"m\",\"max_tokens\":64,\"system\":\"Be brief.\","
                     "\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}",
                     &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(3, "Be brief.", "user", "Hello there") + 4 + 3);
    CHECK_EQ_U64(e.output_tokens, 64);
    CHECK_EQ_U64(e.choices, 1);
    CHECK(e.cache_write == GW_CACHE_WRITE_NONE);
    /* System as blocks; every kind of content block. */
    REQUIRE(
        messages("{\"max_tokens\":10,\"system\":[{\"type\":\"text\",\"text\":\"You code.\"}],"
                 "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                 "\"Look\"},{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":"
                 "\"image/png\",\"data\":\"iVBORw0KGgo=\"}},{\"type\":\"document\",\"source\":"
                 "{\"type\":\"base64\",\"media_type\":\"application/pdf\",\"data\":\"JVBERi0=\"}},"
                 "{\"type\":\"document\",\"title\":\"Notes\",\"source\":{\"type\":\"text\","
                 "\"media_type\":\"text/plain\",\"data\":\"plain words\"}}]},"
                 "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
                 "\"hmm\",\"signature\":\"sig\"},{\"type\":\"redacted_thinking\",\"data\":"
                 "\"ZZZZ\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\","
                 "\"input\":{\"path\":\"a.c\"}}]},"
                 "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
                 "\"toolu_1\",\"content\":[{\"type\":\"text\",\"text\":\"int main\"},"
                 "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://x\"}}]},"
                 "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"ok\"},"
                 "{\"type\":\"search_result\",\"source\":\"s\",\"title\":\"t\",\"content\":[]}]}],"
                 "\"tools\":[{\"name\":\"read\",\"description\":\"Reads\",\"input_schema\":"
                 "{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"auto\"}}",
                 &e) == 0);
    uint64_t text = texts(15, "You code.", "user", "Look", "Notes", "plain words", "assistant",
                          "hmm", "read", "{\"path\":\"a.c\"}", "user", "int main", "ok",
                          "{\"type\":\"search_result\",\"source\":\"s\",\"title\":\"t\","
                          "\"content\":[]}",
                          "[{\"name\":\"read\",\"description\":\"Reads\",\"input_schema\":{"
                          "\"type\":\"object\"}}]",
                          "{\"type\":\"auto\"}");
    CHECK_EQ_U64(e.input_tokens, text + 3 * 4 + 3 + 2 * GW_MESSAGES_IMAGE_TOKENS +
                                     GW_DOCUMENT_TOKENS + GW_MESSAGES_TOOLS_OVERHEAD_TOKENS);
}

static void messages_output_is_max_tokens(void)
{
    struct gw_estimate e;
    const char *body = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char json[512];
    snprintf(json, sizeof json,
             "{%s,\"max_tokens\":1000,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":800}}",
             body);
    REQUIRE(messages(json, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 1000); /* thinking is inside max_tokens */
    static const struct {
        const char *members, *error;
    } cases[] = {
        {"", "max_tokens: required"},
        {",\"max_tokens\":null", "max_tokens: required"},
        {",\"max_tokens\":1001", "max_tokens: must be at most 1000 for model m"},
        {",\"max_tokens\":-1", "max_tokens: must be an integer >= 0"},
        {",\"max_tokens\":1.5", "max_tokens: must be an integer >= 0"},
        {",\"max_tokens\":5,\"thinking\":true", "thinking: must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(json, sizeof json, "{%s%s}", body, cases[i].members);
        CHECK_EQ_I64(messages(json, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
    /* count_tokens takes no max_tokens and reserves no output. */
    snprintf(json, sizeof json, "{%s}", body);
    REQUIRE(estimate(json, GW_ENDPOINT_MESSAGES_COUNT_TOKENS, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 0);
    CHECK_EQ_U64(e.input_tokens, texts(2, "user", "x") + 4 + 3);
}

static void messages_errors_name_the_field(void)
{
    static const struct {
        const char *body, *error;
    } cases[] = {
        {"{\"max_tokens\":1}", "messages: must be a non-empty array"},
        {"{\"max_tokens\":1,\"messages\":[]}", "messages: must be a non-empty array"},
        {"{\"max_tokens\":1,\"messages\":[7]}", "messages[0]: must be an object"},
        {"{\"max_tokens\":1,\"messages\":[{\"content\":\"x\"}]}",
         "messages[0].role: must be a string"},
        {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\"}]}", "messages[0].content: required"},
        {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":5}]}",
         "messages[0].content: must be a string or an array of blocks"},
        {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}",
         "messages[0].content[0].type: must be a string"},
        {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0].text: must be a string"},
        {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"tool_result\",\"content\":[{\"type\":\"text\",\"text\":1}]}]}]}",
         "messages[0].content[0].content[0].text: must be a string"},
        {"{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"document\",\"source\":\"x\"}]}]}",
         "messages[0].content[0].source: must be an object"},
        {"{\"max_tokens\":1,\"system\":7,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
         "system: must be a string or an array of text blocks"},
        {"{\"max_tokens\":1,\"system\":[{\"type\":\"text\"}],\"messages\":[{\"role\":\"user\","
         "\"content\":\"x\"}]}",
         "system[0].text: must be a string"},
        {"{\"max_tokens\":1,\"tools\":{},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
         "tools: must be an array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_estimate e;
        CHECK_EQ_I64(messages(cases[i].body, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
}

static void messages_cache_control_prices_input_as_written(void)
{
    struct gw_estimate e;
    REQUIRE(messages("{\"max_tokens\":5,\"system\":[{\"type\":\"text\",\"text\":\"Long rules\","
                     "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":"
                     "\"user\",\"content\":\"x\"}]}",
                     &e) == 0);
    CHECK(e.cache_write == GW_CACHE_WRITE_5M);
    struct gw_tokens t = gw_estimate_tokens(&e, 5);
    CHECK_EQ_U64(t.input, e.input_tokens);
    CHECK_EQ_U64(t.cache_write_5m, e.input_tokens);
    CHECK_EQ_U64(t.cache_write_1h, 0);
    CHECK_EQ_U64(t.output, 5);
    REQUIRE(messages("{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                     "\"text\",\"text\":\"a\",\"cache_control\":{\"type\":\"ephemeral\"}},"
                     "{\"type\":\"text\",\"text\":\"b\",\"cache_control\":{\"type\":\"ephemeral\","
                     "\"ttl\":\"1h\"}}]}]}",
                     &e) == 0);
    CHECK(e.cache_write == GW_CACHE_WRITE_1H);
    t = gw_estimate_tokens(&e, 7);
    CHECK_EQ_U64(t.cache_write_1h, e.input_tokens);
    CHECK_EQ_U64(t.cache_write_5m, 0);
    /* A cache_control in a tool counts too; no cache_control, no writes. */
    REQUIRE(messages("{\"max_tokens\":5,\"tools\":[{\"name\":\"t\",\"input_schema\":{},"
                     "\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"5m\"}}],"
                     "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                     &e) == 0);
    CHECK(e.cache_write == GW_CACHE_WRITE_5M);
    REQUIRE(chat("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &e) == 0);
    t = gw_estimate_tokens(&e, e.output_tokens);
    CHECK_EQ_U64(t.cache_write_5m + t.cache_write_1h, 0);
}

/* ---- OpenAI Responses ---- */

static int responses(const char *json, struct gw_estimate *out)
{
    return estimate(json, GW_ENDPOINT_RESPONSES, out);
}

static void responses_counts_instructions_input_and_tools(void)
{
    struct gw_estimate e;
    REQUIRE(responses("{\"model\":\"m\",\"instructions\":\"Be brief.\",\"input\":\"Hi there\"}",
                      &e) == 0);
    CHECK_EQ_U64(e.input_tokens, texts(2, "Be brief.", "Hi there") + 4 + 3);
    CHECK_EQ_U64(e.output_tokens, 100); /* the model's default */
    REQUIRE(
        responses("{\"input\":[{\"role\":\"developer\",\"content\":\"Rules\"},"
                  "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                  "\"text\":\"Fix it\"},{\"type\":\"input_image\",\"image_url\":\"https://x\","
                  "\"detail\":\"low\"},{\"type\":\"input_image\",\"file_id\":\"f\"},"
                  "{\"type\":\"input_file\",\"file_id\":\"f2\",\"filename\":\"a.pdf\"}]},"
                  "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\","
                  "\"text\":\"I should look\"}],\"encrypted_content\":\"gAAAA\"},"
                  "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"shell\",\"arguments\":"
                  "\"{\\\"cmd\\\":[\\\"ls\\\"]}\"},"
                  "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"a.c\\nb.c\"},"
                  "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":"
                  "\"output_text\",\"text\":\"Done\"},{\"type\":\"refusal\",\"refusal\":\"no\"}]},"
                  "{\"type\":\"item_reference\",\"id\":\"msg_9\"},"
                  "{\"type\":\"web_search_call\",\"id\":\"ws\",\"status\":\"completed\"}],"
                  "\"tools\":[{\"type\":\"function\",\"name\":\"shell\",\"parameters\":{}}],"
                  "\"text\":{\"format\":{\"type\":\"text\"}},\"max_output_tokens\":300}",
                  &e) == 0);
    uint64_t text = texts(15, "developer", "Rules", "user", "Fix it", "a.pdf", "I should look",
                          "shell", "{\"cmd\":[\"ls\"]}", "a.c\nb.c", "assistant", "Done", "no",
                          "{\"type\":\"web_search_call\",\"id\":\"ws\",\"status\":\"completed\"}",
                          "{\"format\":{\"type\":\"text\"}}",
                          "[{\"type\":\"function\",\"name\":\"shell\",\"parameters\":{}}]");
    CHECK_EQ_U64(e.input_tokens, text + 3 * 4 + 3 + GW_IMAGE_LOW_DETAIL_TOKENS + GW_IMAGE_TOKENS +
                                     GW_DOCUMENT_TOKENS);
    CHECK_EQ_U64(e.output_tokens, 300);
    CHECK(e.cache_write == GW_CACHE_WRITE_NONE);
}

static void responses_output_and_errors(void)
{
    struct gw_estimate e;
    static const struct {
        const char *body, *error;
    } cases[] = {
        {"{\"input\":\"x\",\"background\":true}",
         "background: not supported: a background response is billed after the call is "
         "answered, so the gateway cannot charge it exactly; call without background"},
        {"{\"input\":\"x\",\"background\":\"yes\"}", "background: must be a boolean"},
        {"{\"input\":\"x\",\"max_output_tokens\":1001}",
         "max_output_tokens: must be at most 1000 for model m"},
        {"{\"input\":\"x\",\"max_output_tokens\":\"9\"}",
         "max_output_tokens: must be an integer >= 0"},
        {"{\"input\":7}", "input: must be a string or an array of items"},
        {"{\"input\":[\"x\"]}", "input[0]: must be an object"},
        {"{\"input\":[{\"content\":\"x\"}]}", "input[0].role: must be a string"},
        {"{\"input\":[{\"role\":\"user\",\"content\":5}]}",
         "input[0].content: must be a string or an array of parts"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\"}]}]}",
         "input[0].content[0].text: must be a string"},
        {"{\"input\":[{\"type\":\"function_call\",\"name\":3}]}",
         "input[0].name: must be a string"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"output\":{}}]}",
         "input[0].output: must be a string or an array of parts"},
        {"{\"instructions\":5,\"input\":\"x\"}",
         "instructions: must be a string or an array of items"},
        {"{\"input\":\"x\",\"text\":\"plain\"}", "text: must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_I64(responses(cases[i].body, &e), -1);
        CHECK_STR(error, cases[i].error);
    }
    REQUIRE(responses("{\"input\":\"x\",\"background\":false,\"max_output_tokens\":null}", &e) ==
            0);
    CHECK_EQ_U64(e.output_tokens, 100);
    REQUIRE(responses("{\"previous_response_id\":\"resp_1\"}", &e) == 0); /* no input: allowed */
    CHECK_EQ_U64(e.input_tokens, 3);
    REQUIRE(estimate("{\"input\":\"x\",\"max_output_tokens\":50000}",
                     GW_ENDPOINT_RESPONSES_INPUT_TOKENS, &e) == 0);
    CHECK_EQ_U64(e.output_tokens, 0); /* input_tokens reserves no output */
}

int main(void)
{
    arena_init(&arena, NULL, 0);
    RUN(empty_text_is_zero, "no text counts no tokens");
    RUN(small_texts_have_exact_counts, "small texts have the documented counts");
    RUN(appending_never_lowers_the_count, "appending text never lowers the count");
    RUN(split_anywhere_counts_the_same, "text fed in pieces counts as the whole");
    RUN(never_more_than_one_and_a_half_per_byte, "at most 1.5 tokens per byte, plus one");
    RUN(cjk_counts_at_least_one_per_character, "CJK text counts at least one per character");
    RUN(separate_texts_count_at_least_their_concatenation,
        "a break between texts never lowers the count");
    RUN(rare_words_cost_more_than_common_ones, "random strings and accents cost more");
    RUN(chat_counts_roles_contents_and_overheads, "chat: roles, contents and overheads");
    RUN(chat_parts_images_and_audio, "chat: text parts, images and audio by their fixed amounts");
    RUN(chat_counts_names_tool_calls_and_unknown_parts,
        "chat: names, tool calls, tool ids and unknown parts");
    RUN(tools_and_schemas_count_as_json_text, "tools and schemas count as their JSON text");
    RUN(output_reservation, "output: max_completion_tokens, max_tokens or default, times n");
    RUN(output_errors, "output: bad values are errors naming the field");
    RUN(chat_errors_name_the_field, "chat: every wrong type is an error naming the field");
    RUN(completion_prompts, "completions: every prompt form, best_of and suffix");
    RUN(completion_errors, "completions: every error, and the prompt bound one past");
    RUN(embeddings_reserve_no_output, "embeddings: input counted, no output");
    RUN(messages_counts_system_blocks_and_tools,
        "messages: system, every block kind, images and documents, tools and their prompt");
    RUN(messages_output_is_max_tokens,
        "messages: max_tokens is required and reserved, thinking inside it; count_tokens none");
    RUN(messages_errors_name_the_field, "messages: every wrong type is an error naming it");
    RUN(messages_cache_control_prices_input_as_written,
        "messages: a cache_control prices the input as a 5-minute or 1-hour write");
    RUN(responses_counts_instructions_input_and_tools,
        "responses: instructions, every item kind, tools and text format");
    RUN(responses_output_and_errors,
        "responses: max_output_tokens or the default, background refused, every error");
    arena_free(&arena);
    return test_summary();
}
