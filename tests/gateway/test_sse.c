/* Unit tests of the upstream event stream parser (src/gateway/gw_sse.c): a
 * stream in OpenAI's shape gives the same events however it is split (byte
 * by byte, inside UTF-8 characters, at random), every event's bytes are
 * exactly the stream's, LF, CRLF and CR line ends, data lines joined,
 * comments, [DONE], the usage-only chunk, texts of every kind, errors
 * mid-stream, the unfinished tail, the event bound one past, and output
 * counting per choice. */
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
    return test_summary();
}
