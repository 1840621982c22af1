/* libFuzzer harness: the upstream's event stream parser (src/gateway/gw_sse.c)
 * on arbitrary bytes. The input's first byte says how many split points
 * follow (two bytes each); the rest is the stream. It is read as an OpenAI
 * chat stream and as a Gemini one, and in each dialect fed whole, split
 * at those points, and byte by byte (up to BYTE_BY_BYTE_MAX), and every way
 * must give the same events: the same bytes, flags, usage and texts, and
 * the same output count. Within one feed: each event's bytes are the
 * stream's next bytes (together, all of it), a complete event ends in a
 * blank line, only the last may be incomplete, and flags, usage and texts
 * hold their bounds. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_sse.h"
#include "util/buffer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SPLITS_MAX 15
/* Streams fed one byte at a time too: a feed per byte costs about a
 * microsecond under the sanitizers, and longer inputs are mostly
 * repetition; their splits are still the fuzzer's. */
#define BYTE_BY_BYTE_MAX 512

/* One feed: the stream, how far its bytes were handed over, and a record
 * of every event to compare feeds by. */
struct feed {
    const char *stream;
    size_t length;
    size_t offset;
    bool ended; /* an incomplete event came: nothing may follow */
    struct buffer record;
    struct gw_sse_output output;
    uint64_t tokens;
};

static bool line_end_at(const char *raw, size_t end)
{
    return raw[end - 1] == '\n' || raw[end - 1] == '\r';
}

/* A complete event ends with a line end right after another (a blank line). */
static void check_event_end(const struct gw_sse_event *event)
{
    const char *raw = event->raw;
    size_t n = event->raw_length;
    assert(n >= 1);
    assert(line_end_at(raw, n));
    size_t last = n >= 2 && raw[n - 2] == '\r' && raw[n - 1] == '\n' ? 2 : 1;
    assert(n == last || line_end_at(raw, n - last));
}

static void check_usage(const struct gw_sse_event *event)
{
    const struct gw_usage *u = &event->usage;
    if (!u->present) {
        assert(!event->usage_only || event->usage_malformed); /* a refused usage chunk */
        return;
    }
    assert(event->json);
    assert(!event->usage_malformed);
    assert(u->prompt_tokens <= AMOUNT_MAX);
    assert(u->completion_tokens <= AMOUNT_MAX);
    assert(u->cached_tokens <= u->prompt_tokens);
}

static void check_texts(const struct gw_sse_event *event)
{
    assert(event->text_count == 0 || event->texts != NULL);
    if (!event->has_data || event->done)
        assert(event->text_count == 0);
    for (uint32_t i = 0; i < event->text_count; i++) {
        assert(event->texts[i].text != NULL);
        assert(event->texts[i].length >= 1);
        assert(event->texts[i].length <= event->raw_length); /* decoding only shortens */
    }
}

static void record_event(struct buffer *b, const struct gw_sse_event *event)
{
    unsigned flags = (unsigned)event->complete | (unsigned)event->has_data << 1 |
                     (unsigned)event->done << 2 | (unsigned)event->json << 3 |
                     (unsigned)event->error << 4 | (unsigned)event->usage_only << 5 |
                     (unsigned)event->usage_malformed << 6 | (unsigned)event->usage.present << 7;
    buffer_printf(b, "event %u %zu:", flags, event->raw_length);
    buffer_append(b, event->raw, event->raw_length);
    const struct gw_usage *u = &event->usage;
    buffer_printf(b, " usage %llu %llu %llu %llu %d", (unsigned long long)u->prompt_tokens,
                  (unsigned long long)u->completion_tokens, (unsigned long long)u->total_tokens,
                  (unsigned long long)u->cached_tokens, u->has_completion_tokens);
    for (uint32_t i = 0; i < event->text_count; i++) {
        buffer_printf(b, " text %u %zu:", event->texts[i].choice, event->texts[i].length);
        buffer_append(b, event->texts[i].text, event->texts[i].length);
    }
    buffer_append_char(b, '\n');
}

static int on_event(void *context, const struct gw_sse_event *event)
{
    struct feed *f = context;
    assert(!f->ended);
    assert(event->raw_length <= GW_SSE_EVENT_BYTES_MAX);
    assert(event->raw_length <= f->length - f->offset);
    assert(event->raw_length == 0 ||
           memcmp(event->raw, f->stream + f->offset, event->raw_length) == 0);
    f->offset += event->raw_length;
    if (event->complete)
        check_event_end(event);
    else
        f->ended = true;
    if (event->done)
        assert(event->has_data && !event->json);
    if (event->json || event->error || event->usage_only)
        assert(event->has_data);
    check_usage(event);
    check_texts(event);
    record_event(&f->record, event);
    gw_sse_output_add(&f->output, event);
    uint64_t tokens = gw_sse_output_tokens(&f->output);
    assert(tokens >= f->tokens); /* more text never counts fewer tokens */
    f->tokens = tokens;
    return 0;
}

/* Feeds the stream in pieces ending at cuts[0..count) (ascending) and then
 * at its end. */
static void run_feed(struct feed *f, enum gw_endpoint endpoint, const char *stream, size_t length,
                     const size_t *cuts, size_t count)
{
    memset(f, 0, sizeof *f);
    f->stream = stream;
    f->length = length;
    buffer_init(&f->record, NULL, 0);
    f->record.capacity_max = SIZE_MAX / 2;
    gw_sse_output_init(&f->output);
    struct gw_sse sse;
    gw_sse_init_for(&sse, endpoint);
    char error[GW_SSE_ERROR_SIZE];
    size_t at = 0;
    for (size_t i = 0; i <= count; i++) {
        size_t cut = i < count ? cuts[i] : length;
        assert(cut >= at && cut <= length);
        int result = gw_sse_feed(&sse, stream + at, cut - at, on_event, f, error, sizeof error);
        assert(result == 0); /* no event can pass GW_SSE_EVENT_BYTES_MAX here */
        at = cut;
    }
    int finished = gw_sse_finish(&sse, on_event, f);
    assert(finished == 0);
    assert(f->offset == length); /* every byte went out in exactly one event */
    assert(!f->record.failed);
    gw_sse_free(&sse);
}

static int compare_cuts(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void check_same(const struct feed *a, const struct feed *b)
{
    assert(a->record.length == b->record.length);
    assert(memcmp(a->record.data, b->record.data, a->record.length) == 0);
    assert(a->tokens == b->tokens);
}

/* The stream in one dialect, fed every way. */
static void run_dialect(enum gw_endpoint endpoint, const char *stream, size_t length,
                        const size_t *cuts, size_t count)
{
    static struct feed whole, split, bytes;
    run_feed(&whole, endpoint, stream, length, NULL, 0);
    run_feed(&split, endpoint, stream, length, cuts, count);
    check_same(&whole, &split);
    if (length <= BYTE_BY_BYTE_MAX) {
        size_t *each = malloc((length + 1) * sizeof *each);
        assert(each != NULL);
        for (size_t i = 0; i < length; i++)
            each[i] = i;
        run_feed(&bytes, endpoint, stream, length, each, length);
        check_same(&whole, &bytes);
        buffer_free(&bytes.record);
        free(each);
    }
    buffer_free(&whole.record);
    buffer_free(&split.record);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t count = data[0] % (SPLITS_MAX + 1);
    if (size < 1 + 2 * count)
        return 0;
    const char *stream = (const char *)data + 1 + 2 * count;
    size_t length = size - 1 - 2 * count;
    if (length >= GW_SSE_EVENT_BYTES_MAX)
        return 0;
    size_t cuts[SPLITS_MAX];
    for (size_t i = 0; i < count; i++)
        cuts[i] = ((size_t)data[1 + 2 * i] | (size_t)data[2 + 2 * i] << 8) % (length + 1);
    qsort(cuts, count, sizeof cuts[0], compare_cuts);

    static const enum gw_endpoint dialects[] = {GW_ENDPOINT_CHAT_COMPLETIONS, GW_ENDPOINT_GEMINI};
    for (size_t d = 0; d < sizeof dialects / sizeof dialects[0]; d++)
        run_dialect(dialects[d], stream, length, cuts, count);
    return 0;
}
