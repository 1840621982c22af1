/* The event stream, line by line as the HTML standard defines it (data
 * lines joined with '\n', comments and other fields kept in the bytes but
 * not read), and each event's data read in the stream's dialect: an OpenAI
 * chunk, an Anthropic Messages event or a Responses event (the data's
 * "type" says which event it is in the last two; the SSE "event:" line
 * repeats it and is not needed). The parser keeps one event's bytes at a
 * time, so memory is bounded by GW_SSE_EVENT_BYTES_MAX whatever the
 * stream's length. */
#include "gw_sse.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/bounds.h"
#include "gw_dialect.h"
#include "gw_gemini.h"

#define DONE_DATA "[DONE]"

void gw_sse_init_with(struct gw_sse *sse, const struct gw_dialect *dialect,
                      const struct gw_surface *surface)
{
    memset(sse, 0, sizeof *sse);
    sse->endpoint = surface->endpoint;
    sse->read = dialect->stream_event;
    sse->usage_read = dialect->usage;
    sse->cut = surface->stream_cut;
    buffer_init(&sse->raw, NULL, 0);
    buffer_init(&sse->data, NULL, 0);
    arena_init(&sse->arena, sse->arena_storage, sizeof sse->arena_storage);
}

void gw_sse_free(struct gw_sse *sse)
{
    buffer_free(&sse->raw);
    buffer_free(&sse->data);
    arena_free(&sse->arena);
}

static void event_reset(struct gw_sse *sse)
{
    sse->raw.length = 0;
    sse->data.length = 0;
    sse->line_start = 0;
    sse->data_seen = false;
    sse->cr_pending = false;
}

/* ---- the chunk ---- */

static const struct jdoc_value *member(const struct jdoc_value *object, const char *name)
{
    const struct jdoc_value *value = jdoc_get(object, name);
    return value == NULL || value->kind == JDOC_NULL ? NULL : value;
}

struct texts {
    struct gw_sse_text *items;
    uint32_t count, capacity;
};

static void text_add(struct texts *t, uint32_t choice, const struct jdoc_value *value)
{
    if (!jdoc_is(value, JDOC_STRING) || value->count == 0)
        return;
    assert(t->count < t->capacity);
    t->items[t->count++] =
        (struct gw_sse_text){.choice = choice, .text = value->as.string, .length = value->count};
}

static void function_texts(struct texts *t, uint32_t choice, const struct jdoc_value *function)
{
    text_add(t, choice, member(function, "name"));
    text_add(t, choice, member(function, "arguments"));
}

static uint32_t choice_texts_max(const struct jdoc_value *choice)
{
    const struct jdoc_value *calls = member(member(choice, "delta"), "tool_calls");
    return 7 + (jdoc_is(calls, JDOC_ARRAY) ? 2 * calls->count : 0);
}

static void choice_texts(struct texts *t, const struct jdoc_value *choice, uint32_t position)
{
    const struct jdoc_value *index = member(choice, "index");
    uint32_t n =
        jdoc_is(index, JDOC_INTEGER) && index->as.integer >= 0 && index->as.integer <= UINT32_MAX
            ? (uint32_t)index->as.integer
            : position;
    text_add(t, n, member(choice, "text"));
    const struct jdoc_value *delta = member(choice, "delta");
    text_add(t, n, member(delta, "content"));
    text_add(t, n, member(delta, "refusal"));
    text_add(t, n, member(delta, "reasoning_content"));
    function_texts(t, n, member(delta, "function_call"));
    const struct jdoc_value *calls = member(delta, "tool_calls");
    for (uint32_t i = 0; jdoc_is(calls, JDOC_ARRAY) && i < calls->count; i++)
        function_texts(t, n, member(&calls->as.items[i], "function"));
}

/* The texts of every choice, in an array from the event's arena. */
static int chunk_texts(struct gw_sse *sse, const struct jdoc_value *choices,
                       struct gw_sse_event *event)
{
    struct texts t = {0};
    for (uint32_t i = 0; i < choices->count; i++)
        t.capacity += choice_texts_max(&choices->as.items[i]);
    t.items = arena_alloc(&sse->arena, (t.capacity + 1) * sizeof *t.items);
    if (t.items == NULL)
        return -1;
    for (uint32_t i = 0; i < choices->count; i++)
        choice_texts(&t, &choices->as.items[i], i);
    event->texts = t.items;
    event->text_count = t.count;
    return 0;
}

int gw_sse_read_chunk(struct gw_sse *sse, const struct jdoc_value *root, struct gw_sse_event *event)
{
    event->json = true;
    char usage_error[GW_USAGE_ERROR_SIZE];
    if (!jdoc_is(root, JDOC_OBJECT))
        return 0;
    event->error = member(root, "error") != NULL;
    /* The reader of the stream's surface: chat and completions need
     * completion_tokens in a usage (a missing count is never read as 0). */
    event->usage_malformed = gw_usage_read_with(sse->usage_read, sse->endpoint, root, &event->usage,
                                                usage_error, sizeof usage_error) != 0;
    const struct jdoc_value *choices = member(root, "choices");
    if (!jdoc_is(choices, JDOC_ARRAY))
        return 0;
    /* The chunk include_usage adds, even when its usage is refused: a
     * client that did not ask for it does not get it either way. */
    event->usage_only = choices->count == 0 && (event->usage.present || event->usage_malformed);
    return chunk_texts(sse, choices, event);
}

/* ---- Anthropic Messages events ---- */

static bool is_type(const struct gw_sse_event *event, const char *name)
{
    return event->type != NULL && strcmp(event->type, name) == 0;
}

/* The index member as a choice number (0 when absent or odd). */
static uint32_t index_of(const struct jdoc_value *object, const char *name)
{
    const struct jdoc_value *index = member(object, name);
    return jdoc_is(index, JDOC_INTEGER) && index->as.integer >= 0 && index->as.integer <= UINT32_MAX
               ? (uint32_t)index->as.integer
               : 0;
}

/* The string members `names` of object, as texts of one choice. */
static int named_texts(struct gw_sse *sse, const struct jdoc_value *object,
                       const char *const *names, uint32_t count, uint32_t choice,
                       struct gw_sse_event *event)
{
    struct texts t = {.capacity = count};
    t.items = arena_alloc(&sse->arena, count * sizeof *t.items);
    if (t.items == NULL)
        return -1;
    for (uint32_t i = 0; i < count; i++)
        text_add(&t, choice, member(object, names[i]));
    event->texts = t.items;
    event->text_count = t.count;
    return 0;
}

/* A usage that message_start or message_delta gives: merged, each field's
 * last value winning; from the first message_delta on, the stream's usage. */
static void messages_usage(struct gw_sse *sse, const struct jdoc_value *usage, bool delta,
                           struct gw_sse_event *event)
{
    char error[GW_USAGE_ERROR_SIZE];
    if (usage == NULL)
        return;
    if (gw_messages_usage_merge(&sse->messages_usage, usage, error, sizeof error) != 0) {
        event->usage_malformed = true;
        return;
    }
    sse->messages_delta_seen |= delta;
    if (!sse->messages_delta_seen)
        return;
    if (gw_messages_usage_result(&sse->messages_usage, &event->usage, error, sizeof error) != 0)
        event->usage_malformed = true;
}

/* The event's "type" into event->type; false for an event of none
 * (relayed, nothing read). */
static bool typed(const struct jdoc_value *root, struct gw_sse_event *event)
{
    event->json = true;
    const struct jdoc_value *type = member(root, "type");
    if (!jdoc_is(type, JDOC_STRING))
        return false;
    event->type = type->as.string;
    return true;
}

int gw_sse_read_messages_event(struct gw_sse *sse, const struct jdoc_value *root,
                               struct gw_sse_event *event)
{
    if (!typed(root, event))
        return 0;
    static const char *const block_texts[] = {"text", "thinking", "name"};
    static const char *const delta_texts[] = {"text", "partial_json", "thinking"};
    if (is_type(event, "error")) {
        event->error = true;
    } else if (is_type(event, "message_start")) {
        messages_usage(sse, member(member(root, "message"), "usage"), false, event);
    } else if (is_type(event, "message_delta")) {
        messages_usage(sse, member(root, "usage"), true, event);
    } else if (is_type(event, "message_stop")) {
        event->stream_end = true;
    } else if (is_type(event, "content_block_start")) {
        return named_texts(sse, member(root, "content_block"), block_texts, 3,
                           index_of(root, "index"), event);
    } else if (is_type(event, "content_block_delta")) {
        return named_texts(sse, member(root, "delta"), delta_texts, 3, index_of(root, "index"),
                           event);
    }
    return 0;
}

/* ---- OpenAI Responses events ---- */

static bool ends_with(const char *text, const char *end)
{
    size_t n = strlen(text), m = strlen(end);
    return n >= m && memcmp(text + n - m, end, m) == 0;
}

static void responses_final(const struct jdoc_value *root, struct gw_sse_event *event)
{
    char error[GW_USAGE_ERROR_SIZE];
    event->stream_end = true;
    event->error = is_type(event, "response.failed");
    const struct jdoc_value *response = member(root, "response");
    if (response != NULL &&
        gw_usage_read_responses(response, &event->usage, error, sizeof error) != 0)
        event->usage_malformed = true;
}

int gw_sse_read_responses_event(struct gw_sse *sse, const struct jdoc_value *root,
                                struct gw_sse_event *event)
{
    if (!typed(root, event))
        return 0;
    static const char *const delta_text[] = {"delta"};
    static const char *const item_text[] = {"name"};
    const struct jdoc_value *id = member(member(root, "response"), "id");
    if (jdoc_is(id, JDOC_STRING)) {
        event->response_id = id->as.string;
        event->response_id_length = id->count;
    }
    const struct jdoc_value *item_id = member(member(root, "item"), "id");
    if (jdoc_is(item_id, JDOC_STRING) && (is_type(event, "response.output_item.added") ||
                                          is_type(event, "response.output_item.done"))) {
        event->item_id = item_id->as.string;
        event->item_id_length = item_id->count;
    }
    if (is_type(event, "error"))
        event->error = true;
    else if (is_type(event, "response.completed") || is_type(event, "response.incomplete") ||
             is_type(event, "response.failed"))
        responses_final(root, event);
    else if (is_type(event, "response.output_item.added"))
        return named_texts(sse, member(root, "item"), item_text, 1, index_of(root, "output_index"),
                           event);
    else if (event->type != NULL && ends_with(event->type, ".delta") &&
             !is_type(event, "response.audio.delta"))
        return named_texts(sse, root, delta_text, 1, index_of(root, "output_index"), event);
    return 0;
}

/* ---- Gemini chunks ---- */

/* A GenerateContentResponse: its candidates' text, its usageMetadata (each
 * chunk's is the whole call's so far: the last one wins, as any usage
 * does), and the end of the answer once a candidate has a finishReason. */
int gw_sse_read_gemini_chunk(struct gw_sse *sse, const struct jdoc_value *root,
                             struct gw_sse_event *event)
{
    event->json = true;
    char usage_error[GW_USAGE_ERROR_SIZE];
    if (!jdoc_is(root, JDOC_OBJECT))
        return 0;
    event->error = member(root, "error") != NULL;
    event->usage_malformed =
        gw_gemini_usage_read(root, &event->usage, usage_error, sizeof usage_error) != 0;
    event->stream_end = gw_gemini_chunk_final(root);
    uint32_t most = gw_gemini_chunk_texts_max(root);
    struct gw_sse_text *items = arena_alloc(&sse->arena, (most + 1) * sizeof *items);
    if (items == NULL)
        return -1;
    event->texts = items;
    event->text_count = gw_gemini_chunk_texts(root, items);
    assert(event->text_count <= most);
    return 0;
}

/* Data that is neither JSON nor [DONE] is counted as it stands. */
static int raw_text(struct gw_sse *sse, struct gw_sse_event *event)
{
    struct gw_sse_text *text = arena_alloc(&sse->arena, sizeof *text);
    if (text == NULL)
        return -1;
    *text = (struct gw_sse_text){.text = sse->data.data, .length = sse->data.length};
    event->texts = text;
    event->text_count = 1;
    return 0;
}

static int read_data(struct gw_sse *sse, struct gw_sse_event *event)
{
    event->has_data = true;
    event->data = sse->data.data;
    event->data_length = sse->data.length;
    if (sse->read == NULL)
        return 0; /* not a model's events (JSON-RPC: read by the MCP route, gw_mcp) */
    size_t length = sse->data.length;
    if (length == strlen(DONE_DATA) && memcmp(sse->data.data, DONE_DATA, length) == 0) {
        event->done = true;
        event->stream_end = true;
        return 0;
    }
    if (length == 0)
        return 0;
    /* Copied: the parser decodes strings in place, and an event that
     * does not parse is counted from its text as it came. */
    char *text = arena_alloc_uninit(&sse->arena, length + 1);
    if (text == NULL)
        return -1;
    memcpy(text, sse->data.data, length);
    struct jdoc_value *root;
    char reason[128];
    if (jdoc_parse_nested(text, length, GW_JSON_DEPTH_MAX, &sse->arena, &root, reason,
                          sizeof reason) == 0)
        return sse->read(sse, root, event); /* in the stream's dialect */
    return raw_text(sse, event);
}

/* ---- lines and events ---- */

static int dispatch(struct gw_sse *sse, bool complete, gw_sse_event_fn on_event, void *context,
                    char *error, size_t error_size)
{
    /* A large event's heap blocks go at once: a stream that is mostly idle
     * keeps only its inline storage. */
    arena_free(&sse->arena);
    struct gw_sse_event event = {
        .raw = sse->raw.data, .raw_length = sse->raw.length, .complete = complete};
    if (sse->data_seen && read_data(sse, &event) != 0) {
        snprintf(error, error_size, "out of memory");
        event_reset(sse);
        return -1;
    }
    /* What the stream has said so far is kept across events. */
    sse->ended |= event.stream_end && complete;
    if (event.usage.present) /* the upstream's own count, even in a cut tail */
        sse->usage = event.usage;
    int result = on_event(context, &event);
    event_reset(sse);
    return result;
}

/* A line of the event (without its end): a data field's value is added to
 * the data; comments and other fields stay in the bytes only. */
static int take_line(struct gw_sse *sse, const char *line, size_t length)
{
    static const char field[] = "data";
    size_t n = strlen(field);
    if (length < n || memcmp(line, field, n) != 0 || (length > n && line[n] != ':'))
        return 0;
    const char *value = line + n + (length > n); /* past "data:" */
    size_t value_length = length - n - (length > n);
    if (value_length > 0 && value[0] == ' ') {
        value++;
        value_length--;
    }
    if (sse->data_seen)
        buffer_append_char(&sse->data, '\n');
    buffer_append(&sse->data, value, value_length);
    sse->data_seen = true;
    return sse->data.failed ? -1 : 0;
}

/* An event past GW_SSE_EVENT_BYTES_MAX: what came of it, its bytes so far
 * and the piece that passed the bound, is handed over as the texts of an
 * incomplete, oversized event (to be counted as output, never relayed),
 * and the stream stops. -1 with the reason in error. */
static int oversized(struct gw_sse *sse, const char *bytes, size_t length, gw_sse_event_fn on_event,
                     void *context, char *error, size_t error_size)
{
    snprintf(error, error_size, "an event of the stream is larger than %d bytes",
             GW_SSE_EVENT_BYTES_MAX);
    arena_free(&sse->arena);
    struct gw_sse_text *texts = arena_alloc(&sse->arena, 2 * sizeof *texts);
    if (texts != NULL) {
        struct gw_sse_event event = {
            .raw = sse->raw.data, .raw_length = sse->raw.length, .oversized = true, .texts = texts};
        /* Each its own text, of no one choice (gw_sse_output_add counts
         * such texts apart). */
        if (sse->raw.length > 0)
            texts[event.text_count++] = (struct gw_sse_text){
                .choice = UINT32_MAX, .text = sse->raw.data, .length = sse->raw.length};
        if (length > 0)
            texts[event.text_count++] =
                (struct gw_sse_text){.choice = UINT32_MAX, .text = bytes, .length = length};
        (void)on_event(context, &event);
    }
    event_reset(sse);
    return -1;
}

static int append_raw(struct gw_sse *sse, const char *bytes, size_t length,
                      gw_sse_event_fn on_event, void *context, char *error, size_t error_size)
{
    if (length > GW_SSE_EVENT_BYTES_MAX - sse->raw.length)
        return oversized(sse, bytes, length, on_event, context, error, error_size);
    buffer_append(&sse->raw, bytes, length);
    if (!sse->raw.failed)
        return 0;
    snprintf(error, error_size, "out of memory");
    event_reset(sse);
    return -1;
}

static size_t line_content_length(const char *bytes, size_t length)
{
    size_t n = 0;
    while (n < length && bytes[n] != '\n' && bytes[n] != '\r')
        n++;
    return n;
}

/* The line whose end (end_length bytes) was just appended; a blank one
 * ends the event. */
static int line_end(struct gw_sse *sse, size_t end_length, gw_sse_event_fn on_event, void *context,
                    char *error, size_t error_size)
{
    size_t end = sse->raw.length - end_length;
    const char *line = sse->raw.data + sse->line_start;
    size_t length = end - sse->line_start;
    sse->line_start = sse->raw.length;
    if (length > 0) {
        if (take_line(sse, line, length) == 0)
            return 0;
        snprintf(error, error_size, "out of memory");
        event_reset(sse);
        return -1;
    }
    return dispatch(sse, true, on_event, context, error, error_size);
}

/* The CR that ended the last chunk, now that the next byte is here (or
 * the stream ended): a CRLF when that byte is an LF, taken off *bytes, else
 * a line end on its own. 0, the callback's value, or -1 with the error. */
static int pending_cr_end(struct gw_sse *sse, const char **bytes, size_t *length,
                          gw_sse_event_fn on_event, void *context, char *error, size_t error_size)
{
    assert(sse->cr_pending);
    assert(sse->raw.length >= 1 && sse->raw.data[sse->raw.length - 1] == '\r');
    sse->cr_pending = false;
    size_t end = 1;
    if (*length > 0 && (*bytes)[0] == '\n') {
        if (append_raw(sse, *bytes, 1, on_event, context, error, error_size) != 0)
            return -1;
        (*bytes)++, (*length)--;
        end = 2;
    }
    return line_end(sse, end, on_event, context, error, error_size);
}

int gw_sse_feed(struct gw_sse *sse, const char *bytes, size_t length, gw_sse_event_fn on_event,
                void *context, char *error, size_t error_size)
{
    assert(bytes != NULL || length == 0);
    if (length > 0 && sse->cr_pending) {
        int result = pending_cr_end(sse, &bytes, &length, on_event, context, error, error_size);
        if (result != 0)
            return result;
    }
    while (length > 0) {
        size_t n = line_content_length(bytes, length);
        /* The line end: LF, CR, or CRLF; none when the chunk ends first. */
        size_t end = n == length                                                  ? 0
                     : bytes[n] == '\r' && n + 1 < length && bytes[n + 1] == '\n' ? 2
                                                                                  : 1;
        if (append_raw(sse, bytes, n + end, on_event, context, error, error_size) != 0)
            return -1;
        bytes += n + end;
        length -= n + end;
        if (end == 0)
            break;
        if (end == 1 && bytes[-1] == '\r' && length == 0) {
            sse->cr_pending = true; /* its LF may be the next chunk's first byte */
            break;
        }
        int result = line_end(sse, end, on_event, context, error, error_size);
        if (result != 0)
            return result;
    }
    return 0;
}

int gw_sse_finish(struct gw_sse *sse, gw_sse_event_fn on_event, void *context)
{
    char error[GW_SSE_ERROR_SIZE];
    if (sse->cr_pending) { /* no LF will come: the CR ends its line */
        const char *none = NULL;
        size_t zero = 0;
        int result = pending_cr_end(sse, &none, &zero, on_event, context, error, sizeof error);
        if (result != 0)
            return result;
    }
    if (sse->raw.length == 0)
        return 0;
    if (sse->line_start < sse->raw.length) /* the last line had no end */
        take_line(sse, sse->raw.data + sse->line_start, sse->raw.length - sse->line_start);
    return dispatch(sse, false, on_event, context, error, sizeof error);
}

/* ---- counting the output ---- */

void gw_sse_output_init(struct gw_sse_output *output)
{
    for (uint32_t i = 0; i < GW_N_MAX; i++)
        gw_text_counter_init(&output->choices[i]);
    gw_text_counter_init(&output->other);
}

void gw_sse_output_add(struct gw_sse_output *output, const struct gw_sse_event *event)
{
    for (uint32_t i = 0; i < event->text_count; i++) {
        const struct gw_sse_text *t = &event->texts[i];
        struct gw_text_counter *counter =
            t->choice < GW_N_MAX ? &output->choices[t->choice] : &output->other;
        gw_text_counter_add(counter, t->text, t->length);
        if (counter == &output->other)
            gw_text_counter_break(counter); /* choices mixed here: no text runs on */
    }
}

uint64_t gw_sse_output_tokens(const struct gw_sse_output *output)
{
    uint64_t tokens = gw_text_counter_tokens(&output->other);
    for (uint32_t i = 0; i < GW_N_MAX; i++)
        tokens += gw_text_counter_tokens(&output->choices[i]);
    return tokens;
}

bool gw_sse_ended(const struct gw_sse *sse)
{
    return sse->ended;
}

int gw_sse_messages_cut(const struct gw_sse *sse, uint64_t output, struct gw_usage *out,
                        char *error, size_t error_size)
{
    return gw_messages_usage_cut(&sse->messages_usage, output, out, error, error_size);
}

/* A stream without a final usage whose surface reads what it told so far
 * (Messages: the input it told at its start), with the counted output. */
static bool cut_counted(const struct gw_sse *sse, uint64_t output, struct gw_tokens *out)
{
    struct gw_usage usage;
    char error[GW_USAGE_ERROR_SIZE];
    if (sse->cut == NULL || sse->cut(sse, output, &usage, error, sizeof error) != 0)
        return false;
    *out = gw_usage_tokens(&usage);
    return true;
}

bool gw_sse_stream_tokens(const struct gw_sse *sse, const struct gw_sse_output *output,
                          uint64_t input_estimate, struct gw_tokens *out)
{
    uint64_t counted = gw_sse_output_tokens(output);
    if (sse->usage.present) {
        *out = gw_usage_tokens(&sse->usage);
        if (!sse->usage.has_completion_tokens) /* Gemini's, without candidatesTokenCount */
            out->output = counted > AMOUNT_MAX - out->output ? AMOUNT_MAX : out->output + counted;
        else if (!sse->ended && counted > out->output)
            out->output = counted; /* text may have followed the last usage */
        return true;
    }
    if (!cut_counted(sse, counted, out))
        *out = (struct gw_tokens){.input = input_estimate, .output = counted};
    return false;
}
