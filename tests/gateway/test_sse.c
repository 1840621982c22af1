/* Unit tests of the upstream event stream parser (src/gateway/gw_sse.c): a
 * stream in OpenAI's shape gives the same events however it is split (byte
 * by byte, inside UTF-8 characters, at random), every event's bytes are
 * exactly the stream's, LF, CRLF and CR line ends, data lines joined,
 * comments, [DONE], the usage-only chunk, texts of every kind, errors
 * mid-stream, the unfinished tail, the event bound one past, and output
 * counting per choice. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_sse.h"
#include "test.h"

#define EVENTS_MAX 64
#define TEXT_BYTES_MAX 4096

/* What the tests keep of each event. */
struct seen {
    char raw[EVENTS_MAX][512];
    size_t raw_length[EVENTS_MAX];
    bool complete[EVENTS_MAX], has_data[EVENTS_MAX], done[EVENTS_MAX], json[EVENTS_MAX];
    bool error[EVENTS_MAX], usage_only[EVENTS_MAX], usage[EVENTS_MAX];
    uint64_t prompt_tokens[EVENTS_MAX], completion_tokens[EVENTS_MAX];
    char text[EVENTS_MAX][TEXT_BYTES_MAX]; /* "<choice>:<text>|" per text */
    int count;
    int stop_after; /* return 1 from this event on (0: never) */
    struct gw_sse_output output;
};

static int on_event(void *context, const struct gw_sse_event *event)
{
    struct seen *s = context;
    int i = s->count++;
    if (i >= EVENTS_MAX)
        return 2;
    size_t n = event->raw_length < sizeof s->raw[i] ? event->raw_length : sizeof s->raw[i] - 1;
    memcpy(s->raw[i], event->raw, n);
    s->raw[i][n] = '\0';
    s->raw_length[i] = event->raw_length;
    s->complete[i] = event->complete, s->has_data[i] = event->has_data;
    s->done[i] = event->done, s->json[i] = event->json, s->error[i] = event->error;
    s->usage_only[i] = event->usage_only, s->usage[i] = event->usage.present;
    s->prompt_tokens[i] = event->usage.prompt_tokens;
    s->completion_tokens[i] = event->usage.completion_tokens;
    s->text[i][0] = '\0';
    for (uint32_t k = 0; k < event->text_count; k++) {
        size_t used = strlen(s->text[i]);
        snprintf(s->text[i] + used, TEXT_BYTES_MAX - used, "%u:%.*s|", event->texts[k].choice,
                 (int)event->texts[k].length, event->texts[k].text);
    }
    gw_sse_output_add(&s->output, event);
    return s->stop_after > 0 && s->count >= s->stop_after ? 1 : 0;
}

static char error[GW_SSE_ERROR_SIZE];

/* Feeds stream in pieces of the given sizes (cycled; 0 = all at once). */
static int feed(struct seen *s, const char *stream, size_t length, const size_t *sizes,
                size_t size_count)
{
    memset(s, 0, sizeof *s);
    gw_sse_output_init(&s->output);
    struct gw_sse sse;
    gw_sse_init(&sse);
    int result = 0;
    size_t at = 0, k = 0;
    while (result == 0 && at < length) {
        size_t n = size_count == 0 ? length : sizes[k++ % size_count];
        if (n > length - at)
            n = length - at;
        result = gw_sse_feed(&sse, stream + at, n, on_event, s, error, sizeof error);
        at += n;
    }
    if (result == 0)
        result = gw_sse_finish(&sse, on_event, s);
    gw_sse_free(&sse);
    return result;
}

static const char stream[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo, \"}}],"
    "\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"世界 🎉\"}}],"
    "\"usage\":null}\n\n"
    ": keep-alive\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
    "\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,"
    "\"total_tokens\":13}}\n\n"
    "data: [DONE]\n\n";

static void check_stream_events(const struct seen *s)
{
    REQUIRE(s->count == 7);
    CHECK(s->json[0] && s->has_data[0] && s->complete[0]);
    CHECK_STR(s->text[0], ""); /* an empty content is no text */
    CHECK_STR(s->text[1], "0:Héllo, |");
    CHECK_STR(s->text[2], "0:世界 🎉|");
    CHECK(!s->has_data[3]); /* the comment */
    CHECK_STR(s->raw[3], ": keep-alive\n\n");
    CHECK(!s->usage_only[4] && !s->usage[4]);
    CHECK(s->usage_only[5] && s->usage[5]);
    CHECK_EQ_U64(s->prompt_tokens[5], 9);
    CHECK_EQ_U64(s->completion_tokens[5], 4);
    CHECK(s->done[6] && !s->json[6]);
    CHECK_STR(s->raw[6], "data: [DONE]\n\n");
}

/* The events' bytes, one after the other, are the stream. */
static void check_bytes_are_the_stream(const struct seen *s, const char *expected)
{
    char all[4096] = "";
    for (int i = 0; i < s->count; i++)
        strncat(all, s->raw[i], sizeof all - strlen(all) - 1);
    CHECK_STR(all, expected);
}

static void whole_stream_gives_each_event(void)
{
    struct seen s;
    REQUIRE(feed(&s, stream, strlen(stream), NULL, 0) == 0);
    check_stream_events(&s);
    check_bytes_are_the_stream(&s, stream);
}

static void byte_by_byte_gives_the_same_events(void)
{
    static struct seen whole, split;
    REQUIRE(feed(&whole, stream, strlen(stream), NULL, 0) == 0);
    size_t one = 1;
    REQUIRE(feed(&split, stream, strlen(stream), &one, 1) == 0);
    check_stream_events(&split);
    REQUIRE(split.count == whole.count);
    for (int i = 0; i < whole.count; i++) {
        CHECK_STR(split.raw[i], whole.raw[i]);
        CHECK_STR(split.text[i], whole.text[i]);
    }
}

static void random_splits_give_the_same_events(void)
{
    static struct seen whole, split;
    REQUIRE(feed(&whole, stream, strlen(stream), NULL, 0) == 0);
    uint64_t x = 88172645463325252ull;
    int differences = 0;
    for (int round = 0; round < 300; round++) {
        size_t sizes[16];
        for (size_t k = 0; k < 16; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sizes[k] = 1 + x % 40;
        }
        REQUIRE(feed(&split, stream, strlen(stream), sizes, 16) == 0);
        differences += split.count != whole.count;
        for (int i = 0; i < whole.count && i < split.count; i++)
            differences += strcmp(split.raw[i], whole.raw[i]) != 0 ||
                           strcmp(split.text[i], whole.text[i]) != 0;
    }
    CHECK_EQ_I64(differences, 0);
}

static void crlf_and_cr_line_ends(void)
{
    const char *crlf = "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\ndata: [DONE]\r\n\r\n";
    struct seen s;
    REQUIRE(feed(&s, crlf, strlen(crlf), NULL, 0) == 0);
    REQUIRE(s.count == 2);
    CHECK_STR(s.raw[0], "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\n");
    CHECK_STR(s.text[0], "0:a|");
    CHECK(s.done[1]);
    /* Split between a CR and its LF, also at the end of an event: the CR
     * waits for the next byte, so the events and their bytes are the same
     * as whole (an event's CRLF is never cut in two). */
    size_t sizes[] = {34, 2, 15, 1};
    REQUIRE(feed(&s, crlf, strlen(crlf), sizes, 4) == 0);
    REQUIRE(s.count == 2);
    CHECK_STR(s.raw[0], "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\n");
    CHECK_STR(s.text[0], "0:a|");
    CHECK(s.done[1] && s.complete[1]);
    CHECK_STR(s.raw[1], "data: [DONE]\r\n\r\n");
    check_bytes_are_the_stream(&s, crlf);
    const char *cr = "data: {\"choices\":[{\"text\":\"b\"}]}\r\rdata: [DONE]\r\r";
    REQUIRE(feed(&s, cr, strlen(cr), NULL, 0) == 0);
    REQUIRE(s.count == 2);
    CHECK_STR(s.text[0], "0:b|");
    CHECK(s.done[1]);
    /* Lines that end in a lone CR, each chunk ending with one: an event
     * waits for the next bytes, and the last one for the end of the
     * stream, which takes its CR as a line end (a complete event). */
    size_t cr_sizes[] = {34, 14};
    REQUIRE(feed(&s, cr, strlen(cr), cr_sizes, 2) == 0);
    REQUIRE(s.count == 2);
    CHECK_STR(s.raw[0], "data: {\"choices\":[{\"text\":\"b\"}]}\r\r");
    CHECK(s.done[1] && s.complete[1]);
    CHECK_STR(s.raw[1], "data: [DONE]\r\r");
}

static void data_lines_are_joined(void)
{
    const char *lines = "event: message\nid: 7\ndata: first\ndata:second\ndata\n\n";
    struct seen s;
    REQUIRE(feed(&s, lines, strlen(lines), NULL, 0) == 0);
    REQUIRE(s.count == 1);
    CHECK(s.has_data[0] && !s.json[0]);
    CHECK_STR(s.text[0], "0:first\nsecond\n|"); /* not JSON: counted as it stands */
    const char *json = "data: {\"choices\":[{\"index\":0,\ndata: \"text\":\"ok\"}]}\n\n";
    REQUIRE(feed(&s, json, strlen(json), NULL, 0) == 0);
    REQUIRE(s.count == 1);
    CHECK(s.json[0]);
    CHECK_STR(s.text[0], "0:ok|");
}

static void texts_of_every_kind(void)
{
    const char *chunk =
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"c\",\"refusal\":\"r\","
        "\"reasoning_content\":\"think\",\"tool_calls\":[{\"index\":0,\"function\":{\"name\":"
        "\"get\",\"arguments\":\"{\\\"a\\\":\"}},{\"function\":{\"arguments\":\"1}\"}}],"
        "\"function_call\":{\"name\":\"old\",\"arguments\":\"{}\"}}},"
        "{\"delta\":{\"content\":\"second\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":3,\"text\":\"completion text\"}]}\n\n"
        "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n";
    struct seen s;
    REQUIRE(feed(&s, chunk, strlen(chunk), NULL, 0) == 0);
    REQUIRE(s.count == 3);
    CHECK_STR(s.text[0], "1:c|1:r|1:think|1:old|1:{}|1:get|1:{\"a\":|1:1}|1:second|");
    CHECK_STR(s.text[1], "3:completion text|");
    CHECK(s.error[2] && !s.error[1]);
}

static void unfinished_tail_comes_last(void)
{
    const char *cut = "data: [DONE]\n\ndata: {\"choices\":[{\"text\":\"partial\"}]}";
    struct seen s;
    REQUIRE(feed(&s, cut, strlen(cut), NULL, 0) == 0);
    REQUIRE(s.count == 2);
    CHECK(s.complete[0]);
    CHECK(!s.complete[1]);
    CHECK_STR(s.raw[1], "data: {\"choices\":[{\"text\":\"partial\"}]}");
    CHECK_STR(s.text[1], "0:partial|");
    const char *clean = "data: [DONE]\n\n";
    REQUIRE(feed(&s, clean, strlen(clean), NULL, 0) == 0);
    CHECK_EQ_I64(s.count, 1); /* nothing left: no extra event */
}

static void callback_stops_the_feed(void)
{
    struct seen s;
    memset(&s, 0, sizeof s);
    gw_sse_output_init(&s.output);
    s.stop_after = 2;
    struct gw_sse sse;
    gw_sse_init(&sse);
    CHECK_EQ_I64(gw_sse_feed(&sse, stream, strlen(stream), on_event, &s, error, sizeof error), 1);
    CHECK_EQ_I64(s.count, 2);
    gw_sse_free(&sse);
}

static void event_size_bound_one_past(void)
{
    /* "data: " + payload + "\n\n" of exactly GW_SSE_EVENT_BYTES_MAX bytes. */
    size_t payload = GW_SSE_EVENT_BYTES_MAX - 8;
    char *text = malloc(GW_SSE_EVENT_BYTES_MAX + 2);
    memcpy(text, "data: ", 6);
    memset(text + 6, 'x', payload + 1);
    memcpy(text + 6 + payload, "\n\n", 2);
    struct seen s;
    CHECK_EQ_I64(feed(&s, text, GW_SSE_EVENT_BYTES_MAX, NULL, 0), 0);
    CHECK_EQ_I64(s.count, 1);
    CHECK_EQ_U64(s.raw_length[0], GW_SSE_EVENT_BYTES_MAX);
    memset(text + 6, 'x', payload + 1);
    memcpy(text + 7 + payload, "\n\n", 2);
    size_t chunk = 4096;
    CHECK_EQ_I64(feed(&s, text, GW_SSE_EVENT_BYTES_MAX + 1, &chunk, 1), -1);
    CHECK_STR(error, "an event of the stream is larger than 1048576 bytes");
    CHECK_EQ_I64(s.count, 0);
    free(text);
}

static void output_is_counted_per_choice(void)
{
    const char *two = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"inter\"}}]}\n\n"
                      "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"Hello \"}}]}\n\n"
                      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"national\"}}]}\n\n"
                      "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"world\"}}]}\n\n";
    struct seen s;
    REQUIRE(feed(&s, two, strlen(two), NULL, 0) == 0);
    CHECK_EQ_U64(gw_sse_output_tokens(&s.output),
                 gw_estimate_text("international", 13) + gw_estimate_text("Hello world", 11));
    const char *far = "data: {\"choices\":[{\"index\":500,\"delta\":{\"content\":\"ab\"}},"
                      "{\"index\":501,\"delta\":{\"content\":\"cd\"}}]}\n\n";
    REQUIRE(feed(&s, far, strlen(far), NULL, 0) == 0);
    CHECK_EQ_U64(gw_sse_output_tokens(&s.output), 3); /* two texts, counted apart: 1.03 each */
}

/* ---- dialects: Anthropic Messages and OpenAI Responses ---- */

/* Every event as one line of text (flags, type, texts, usage), every
 * event's bytes, and what the stream as a whole said at its end. */
struct summary {
    char text[16384];
    size_t length;
    char raw[16384]; /* every event's bytes, one after the other */
    size_t raw_length;
    struct gw_sse_output output;
    int events;
};

static int summarize(void *context, const struct gw_sse_event *e)
{
    struct summary *s = context;
    char line[1024];
    if (e->raw_length < sizeof s->raw - s->raw_length) {
        memcpy(s->raw + s->raw_length, e->raw, e->raw_length);
        s->raw_length += e->raw_length;
    }
    int n =
        snprintf(line, sizeof line, "%s%s%s%s%s%s %s", e->complete ? "c" : "-", e->json ? "j" : "-",
                 e->error ? "E" : "-", e->stream_end ? "S" : "-", e->usage_malformed ? "M" : "-",
                 e->done ? "D" : "-", e->type != NULL ? e->type : "(none)");
    if (e->response_id != NULL)
        n += snprintf(line + n, sizeof line - (size_t)n, " id=%.*s", (int)e->response_id_length,
                      e->response_id);
    if (e->item_id != NULL)
        n += snprintf(line + n, sizeof line - (size_t)n, " item=%.*s", (int)e->item_id_length,
                      e->item_id);
    for (uint32_t k = 0; k < e->text_count; k++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %u:%.*s|", e->texts[k].choice,
                      (int)e->texts[k].length, e->texts[k].text);
    if (e->usage.present)
        n += snprintf(line + n, sizeof line - (size_t)n,
                      " usage=%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64,
                      e->usage.prompt_tokens, e->usage.cached_tokens,
                      e->usage.cache_write_5m_tokens, e->usage.cache_write_1h_tokens,
                      e->usage.completion_tokens, e->usage.reasoning_tokens);
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    size_t room = sizeof s->text - s->length - 1;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(s->text + s->length, line, take);
    s->length += take;
    s->text[s->length] = '\0';
    s->events++;
    gw_sse_output_add(&s->output, e);
    return 0;
}

struct stream_result {
    struct summary summary;
    bool ended, from_usage;
    struct gw_tokens tokens;
};

/* Feeds text to a parser of endpoint's dialect, cut at the given points
 * (ascending; none: at once), then finishes it. */
static int feed_dialect(enum gw_endpoint endpoint, const char *text, const size_t *cuts,
                        size_t cut_count, struct stream_result *r)
{
    memset(r, 0, sizeof *r);
    gw_sse_output_init(&r->summary.output);
    struct gw_sse sse;
    gw_sse_init_for(&sse, endpoint);
    size_t length = strlen(text), at = 0;
    int result = 0;
    for (size_t k = 0; k <= cut_count && result == 0; k++) {
        size_t end = k < cut_count ? cuts[k] : length;
        result =
            gw_sse_feed(&sse, text + at, end - at, summarize, &r->summary, error, sizeof error);
        at = end;
    }
    if (result == 0)
        result = gw_sse_finish(&sse, summarize, &r->summary);
    /* Whatever the cuts, the events' bytes are the stream's. */
    CHECK(r->summary.raw_length == length && memcmp(r->summary.raw, text, length) == 0);
    r->ended = gw_sse_ended(&sse);
    r->from_usage = gw_sse_stream_tokens(&sse, &r->summary.output, 777, &r->tokens);
    gw_sse_free(&sse);
    return result;
}

/* Split at every byte (two pieces each), then one byte at a time: every
 * way gives what the whole stream gives at once. */
static void check_every_split(enum gw_endpoint endpoint, const char *text,
                              const struct stream_result *whole)
{
    static struct stream_result split;
    size_t length = strlen(text);
    int differences = 0;
    for (size_t cut = 1; cut < length; cut++) {
        REQUIRE(feed_dialect(endpoint, text, &cut, 1, &split) == 0);
        differences += strcmp(split.summary.text, whole->summary.text) != 0 ||
                       split.ended != whole->ended ||
                       memcmp(&split.tokens, &whole->tokens, sizeof split.tokens) != 0;
    }
    static size_t cuts[8192];
    REQUIRE(length <= sizeof cuts / sizeof cuts[0]);
    for (size_t k = 0; k + 1 < length; k++)
        cuts[k] = k + 1;
    REQUIRE(feed_dialect(endpoint, text, cuts, length - 1, &split) == 0);
    differences += strcmp(split.summary.text, whole->summary.text) != 0;
    CHECK_EQ_I64(differences, 0);
}

static const char messages_stream[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\","
    "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,"
    "\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":1000,"
    "\"cache_read_input_tokens\":2000,\"cache_creation\":{\"ephemeral_5m_input_tokens\":400,"
    "\"ephemeral_1h_input_tokens\":600},\"output_tokens\":1}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
    "\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\","
    "\"thinking\":\"Let me think\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\","
    "\"signature\":\"EqQBCgIYAh\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\r\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\","
    "\"text\":\"\"}}\r\n\r\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"Hello w\xc3\xb6rld \xf0\x9f\x8e\x89\"}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\","
    "\"id\":\"toolu_01\",\"name\":\"get_weather\",\"input\":{}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"{\\\"city\\\": \\\"Par\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\","
    "\"partial_json\":\"is\\\"}\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
    "\"usage\":{\"output_tokens\":30}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
    "\"usage\":{\"output_tokens\":89}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

static void messages_stream_is_read(void)
{
    static struct stream_result r;
    REQUIRE(feed_dialect(GW_ENDPOINT_MESSAGES, messages_stream, NULL, 0, &r) == 0);
    CHECK_STR(r.summary.text, "cj---- message_start\n"
                              "cj---- content_block_start\n"
                              "cj---- ping\n"
                              "cj---- content_block_delta 0:Let me think|\n"
                              "cj---- content_block_delta\n"
                              "cj---- content_block_stop\n"
                              "cj---- content_block_start\n"
                              "cj---- content_block_delta 1:Hello w\xc3\xb6rld \xf0\x9f\x8e\x89|\n"
                              "cj---- content_block_start 2:get_weather|\n"
                              "cj---- content_block_delta 2:{\"city\": \"Par|\n"
                              "cj---- content_block_delta 2:is\"}|\n"
                              "cj---- message_delta usage=3025/2000/400/600/30/0\n"
                              "cj---- message_delta usage=3025/2000/400/600/89/0\n"
                              "cj-S-- message_stop\n");
    CHECK(r.ended);
    CHECK(r.from_usage);
    /* The last output_tokens, not their sum (30 + 89). */
    CHECK_EQ_U64(r.tokens.output, 89);
    CHECK_EQ_U64(r.tokens.input, 3025);
    CHECK_EQ_U64(r.tokens.cached_input, 2000);
    CHECK_EQ_U64(r.tokens.cache_write_5m, 400);
    CHECK_EQ_U64(r.tokens.cache_write_1h, 600);
    check_every_split(GW_ENDPOINT_MESSAGES, messages_stream, &r);
}

static void messages_stream_cut_counts_its_text(void)
{
    /* Cut before any message_delta: the input its start told, the output
     * counted from the text sent. */
    static char cut[sizeof messages_stream];
    const char *at = strstr(messages_stream, "event: message_delta");
    REQUIRE(at != NULL);
    memcpy(cut, messages_stream, (size_t)(at - messages_stream));
    cut[at - messages_stream] = '\0';
    static struct stream_result r;
    REQUIRE(feed_dialect(GW_ENDPOINT_MESSAGES, cut, NULL, 0, &r) == 0);
    CHECK(!r.ended);
    CHECK(!r.from_usage);
    CHECK_EQ_U64(r.tokens.input, 3025);
    CHECK_EQ_U64(r.tokens.cache_write_1h, 600);
    uint64_t counted = gw_sse_output_tokens(&r.summary.output);
    CHECK(counted >= 10);
    CHECK_EQ_U64(r.tokens.output, counted);
    check_every_split(GW_ENDPOINT_MESSAGES, cut, &r);
    /* Cut after a message_delta, more text after it: the larger count. */
    const char *late = "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":"
                       "5,\"output_tokens\":1}}}\n\n"
                       "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}\n\n"
                       "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"text\":"
                       "\"and then a great deal more text that was never counted upstream\"}}\n\n";
    REQUIRE(feed_dialect(GW_ENDPOINT_MESSAGES, late, NULL, 0, &r) == 0);
    CHECK(r.from_usage && !r.ended);
    CHECK_EQ_U64(r.tokens.output, gw_sse_output_tokens(&r.summary.output));
    CHECK(r.tokens.output > 2);
    CHECK_EQ_U64(r.tokens.input, 5);
    /* Cut before message_start: the estimate. */
    const char *nothing = "event: ping\ndata: {\"type\":\"ping\"}\n\n";
    REQUIRE(feed_dialect(GW_ENDPOINT_MESSAGES, nothing, NULL, 0, &r) == 0);
    CHECK(!r.from_usage);
    CHECK_EQ_U64(r.tokens.input, 777);
    CHECK_EQ_U64(r.tokens.output, 0);
}

static void messages_errors_and_malformed_usage(void)
{
    const char *events =
        "event: message_start\n"
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,"
        "\"output_tokens\":1}}}\n\n"
        "event: message_delta\n"
        "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"many\"}}\n\n"
        "event: error\n"
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
        "\"Overloaded\"}}\n\n"
        "data: not json at all\n\n"
        "data: {\"no_type\":1}\n\n";
    static struct stream_result r;
    REQUIRE(feed_dialect(GW_ENDPOINT_MESSAGES, events, NULL, 0, &r) == 0);
    CHECK_STR(r.summary.text, "cj---- message_start\n"
                              "cj--M- message_delta\n"
                              "cjE--- error\n"
                              "c----- (none) 0:not json at all|\n"
                              "cj---- (none)\n");
    CHECK(!r.ended && !r.from_usage); /* the malformed delta was not taken */
    CHECK_EQ_U64(r.tokens.input, 5);
    check_every_split(GW_ENDPOINT_MESSAGES, events, &r);
}

static const char responses_stream[] =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_abc\","
    "\"object\":\"response\",\"status\":\"in_progress\",\"usage\":null}}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,"
    "\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]}}\n\n"
    "event: response.reasoning_summary_text.delta\n"
    "data: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":2,"
    "\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"delta\":\"Thinking it "
    "over\"}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":3,\"output_index\":1,"
    "\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":"
    "\"shell\",\"arguments\":\"\"}}\n\n"
    "event: response.function_call_arguments.delta\n"
    "data: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":4,"
    "\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"{\\\"cmd\\\":[\\\"ls\\\"]}\"}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":5,\"item_id\":\"msg_1\","
    "\"output_index\":2,\"content_index\":0,\"delta\":\"Done \xe2\x80\x93 ok\",\"logprobs\":[]}\n\n"
    "event: response.refusal.delta\n"
    "data: {\"type\":\"response.refusal.delta\",\"sequence_number\":6,\"output_index\":3,"
    "\"delta\":\"no\"}\n\n"
    "event: response.audio.delta\n"
    "data: {\"type\":\"response.audio.delta\",\"sequence_number\":7,\"delta\":"
    "\"UklGRiQAAABXQVZF\"}\n\n"
    "event: response.output_text.done\n"
    "data: {\"type\":\"response.output_text.done\",\"sequence_number\":8,\"output_index\":2,"
    "\"text\":\"Done \xe2\x80\x93 ok\"}\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":"
    "\"resp_abc\",\"object\":\"response\",\"status\":\"completed\",\"usage\":{\"input_tokens\":"
    "120,\"input_tokens_details\":{\"cached_tokens\":100},\"output_tokens\":60,"
    "\"output_tokens_details\":{\"reasoning_tokens\":40},\"total_tokens\":180}}}\n\n";

static void responses_stream_is_read(void)
{
    static struct stream_result r;
    REQUIRE(feed_dialect(GW_ENDPOINT_RESPONSES, responses_stream, NULL, 0, &r) == 0);
    CHECK_STR(r.summary.text,
              "cj---- response.created id=resp_abc\n"
              "cj---- response.output_item.added item=rs_1\n"
              "cj---- response.reasoning_summary_text.delta 0:Thinking it over|\n"
              "cj---- response.output_item.added item=fc_1 1:shell|\n"
              "cj---- response.function_call_arguments.delta 1:{\"cmd\":[\"ls\"]}|\n"
              "cj---- response.output_text.delta 2:Done \xe2\x80\x93 ok|\n"
              "cj---- response.refusal.delta 3:no|\n"
              "cj---- response.audio.delta\n"
              "cj---- response.output_text.done\n"
              "cj-S-- response.completed id=resp_abc usage=120/100/0/0/60/40\n");
    CHECK(r.ended && r.from_usage);
    CHECK_EQ_U64(r.tokens.input, 120);
    CHECK_EQ_U64(r.tokens.cached_input, 100);
    CHECK_EQ_U64(r.tokens.output, 60);
    CHECK_EQ_U64(r.tokens.reasoning, 40);
    check_every_split(GW_ENDPOINT_RESPONSES, responses_stream, &r);
}

static void responses_ends_and_errors(void)
{
    const char *failed =
        "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null,"
        "\"sequence_number\":1}\n\n"
        "data: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_f\",\"status\":\"failed\","
        "\"usage\":{\"input_tokens\":9,\"output_tokens\":0}}}\n\n";
    static struct stream_result r;
    REQUIRE(feed_dialect(GW_ENDPOINT_RESPONSES, failed, NULL, 0, &r) == 0);
    CHECK_STR(r.summary.text, "cjE--- error\n"
                              "cjES-- response.failed id=resp_f usage=9/0/0/0/0/0\n");
    CHECK(r.ended && r.from_usage);
    CHECK_EQ_U64(r.tokens.input, 9);
    const char *incomplete =
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"abc\"}\n\n"
        "data: {\"type\":\"response.incomplete\",\"response\":{\"usage\":{\"input_tokens\":3,"
        "\"output_tokens\":\"x\"}}}\n\n";
    REQUIRE(feed_dialect(GW_ENDPOINT_RESPONSES, incomplete, NULL, 0, &r) == 0);
    CHECK_STR(r.summary.text, "cj---- response.output_text.delta 0:abc|\n"
                              "cj-SM- response.incomplete\n");
    CHECK(r.ended && !r.from_usage); /* its usage was malformed: counted instead */
    CHECK_EQ_U64(r.tokens.input, 777);
    CHECK_EQ_U64(r.tokens.output, gw_sse_output_tokens(&r.summary.output));
    check_every_split(GW_ENDPOINT_RESPONSES, incomplete, &r);
}

static void chat_stream_ends_with_done(void)
{
    static struct stream_result r;
    REQUIRE(feed_dialect(GW_ENDPOINT_CHAT_COMPLETIONS, stream, NULL, 0, &r) == 0);
    CHECK(r.ended && r.from_usage);
    CHECK_EQ_U64(r.tokens.input, 9);
    CHECK_EQ_U64(r.tokens.output, 4);
    const char *cut = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello there\"}}]}"
                      "\n\n";
    REQUIRE(feed_dialect(GW_ENDPOINT_CHAT_COMPLETIONS, cut, NULL, 0, &r) == 0);
    CHECK(!r.ended && !r.from_usage);
    CHECK_EQ_U64(r.tokens.input, 777);
    CHECK_EQ_U64(r.tokens.output, gw_estimate_text("Hello there", 11));
    check_every_split(GW_ENDPOINT_CHAT_COMPLETIONS, cut, &r);
    REQUIRE(feed_dialect(GW_ENDPOINT_CHAT_COMPLETIONS, stream, NULL, 0, &r) == 0);
    check_every_split(GW_ENDPOINT_CHAT_COMPLETIONS, stream, &r);
}

int main(void)
{
    RUN(whole_stream_gives_each_event, "a stream gives each event with its bytes and contents");
    RUN(byte_by_byte_gives_the_same_events, "fed byte by byte, the events are the same");
    RUN(random_splits_give_the_same_events, "fed in random pieces, the events are the same");
    RUN(crlf_and_cr_line_ends, "CRLF and CR end lines too, also split between chunks");
    RUN(data_lines_are_joined, "data lines are joined with newlines; other fields ignored");
    RUN(texts_of_every_kind, "content, refusal, reasoning, tool and function calls, text");
    RUN(unfinished_tail_comes_last, "an unfinished tail is handed over, marked incomplete");
    RUN(callback_stops_the_feed, "a callback's non-zero value stops the feed");
    RUN(event_size_bound_one_past, "an event at the bound passes, one byte past is an error");
    RUN(output_is_counted_per_choice, "output tokens are counted per choice");
    RUN(messages_stream_is_read,
        "Messages: texts of every block kind, cumulative usage (last wins), the end; every split");
    RUN(messages_stream_cut_counts_its_text,
        "Messages cut: the start's exact input and the counted output; before the start, the "
        "estimate");
    RUN(messages_errors_and_malformed_usage,
        "Messages: error events, a malformed usage not taken, data of no type passed");
    RUN(responses_stream_is_read,
        "Responses: every delta but audio counted, the id, the final usage; every split");
    RUN(responses_ends_and_errors, "Responses: failed and incomplete end a stream; error events");
    RUN(chat_stream_ends_with_done, "chat: [DONE] ends a stream; a cut one is counted");
    return test_summary();
}
