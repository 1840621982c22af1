/* The upstream's Server-Sent Events stream, parsed as it arrives: fed byte
 * chunks split anywhere (inside a line or a UTF-8 character too), it hands
 * over whole events with their exact bytes (to relay unchanged, or to drop
 * the usage chunk the client did not ask for), the text they carry (to
 * count output tokens) and their usage. The line level is the same for
 * every surface; what an event's data means is read in the dialect of the
 * surface the stream answers (gw_sse_init_for): OpenAI chunks (chat and
 * completions), Anthropic Messages events, OpenAI Responses events. */
#ifndef LLMLIMIT_GATEWAY_SSE_H
#define LLMLIMIT_GATEWAY_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_estimate.h"
#include "gw_usage.h"
#include "util/arena.h"
#include "util/buffer.h"

#define GW_SSE_ERROR_SIZE 128

/* A piece of generated text in an event.
 * Chat: choices[].delta.content, .refusal, .reasoning_content,
 * .tool_calls[].function.name and .arguments, .function_call.name and
 * .arguments, or choices[].text (completions); choice = the choice's index.
 * Messages: content_block_start's content_block.text, .thinking, .name;
 * content_block_delta's delta.text, .partial_json, .thinking; choice = the
 * content block's index.
 * Responses: the `delta` of every "response.*.delta" event but
 * response.audio.delta (base64 sound, not text), and the name of an item
 * in response.output_item.added; choice = output_index. */
struct gw_sse_text {
    uint32_t choice; /* the choice's (block's, output item's) index */
    const char *text;
    size_t length;
};

struct gw_sse_event {
    const char *raw; /* every byte of the event, its blank line included */
    size_t raw_length;
    bool complete;        /* false for the unfinished tail handed over by gw_sse_finish, and for
                           * an oversized event */
    bool has_data;        /* it had data lines (else only comments or other fields) */
    bool done;            /* the data is [DONE] */
    bool json;            /* the data parsed as JSON */
    bool error;           /* the upstream failed mid-stream (below) */
    bool usage_only;      /* chat: choices is empty and a usage given (read or refused): the
                           * chunk include_usage adds */
    bool usage_malformed; /* a usage the dialect's reader refused */
    /* The event passed GW_SSE_EVENT_BYTES_MAX: nothing of it is read, and
     * its texts are what came of it (its bytes so far, then the piece that
     * passed the bound), each of no choice, to be counted as output; the
     * stream stops there (gw_sse_feed returns -1). */
    bool oversized;
    /* The event that ends a stream properly: chat's [DONE], Messages'
     * message_stop, Responses' response.completed, .incomplete or .failed. */
    bool stream_end;
    /* Chat: the chunk's usage. Messages: the stream's usage so far, on the
     * message_delta events that change it (present from the first
     * message_delta on: message_start alone does not know the output).
     * Responses: the usage of the final event. */
    struct gw_usage usage;
    /* Valid during the callback only: the data's "type" (Messages,
     * Responses; NULL for chat or when absent), the id of the response a
     * Responses event carries in response.id, and the id of the output item
     * a response.output_item.added or .done carries in item.id (NULL when
     * none). */
    const char *type;
    const char *response_id;
    size_t response_id_length;
    const char *item_id;
    size_t item_id_length;
    /* Valid during the callback only. Data that is not JSON (and not
     * [DONE]) is given as one text, so that it is counted, not lost. */
    const struct gw_sse_text *texts;
    uint32_t text_count;
    /* Valid during the callback only: its data lines joined by '\n' (not
     * NUL-terminated), NULL when it has none. */
    const char *data;
    size_t data_length;
};

/* Called for each event; a non-zero return stops gw_sse_feed, which
 * returns that value. */
typedef int (*gw_sse_event_fn)(void *context, const struct gw_sse_event *event);

struct gw_sse;
struct jdoc_value;
/* A dialect's reader of one event's parsed data (its stream_event,
 * gw_dialect.h): sets event->json, reads its texts, usage and end. 0, or
 * -1 out of memory. */
typedef int (*gw_sse_read_fn)(struct gw_sse *sse, const struct jdoc_value *root,
                              struct gw_sse_event *event);

/* A surface's reading of a stream that ended without its final usage
 * (its stream_cut, gw_dialect.h): the usage the stream told so far with
 * output as the output; 0, or -1 when it told none to go on. */
typedef int (*gw_sse_cut_fn)(const struct gw_sse *sse, uint64_t output, struct gw_usage *out,
                             char *error, size_t error_size);

struct gw_sse {
    enum gw_endpoint endpoint;   /* whose dialect the events are read in */
    gw_sse_read_fn read;         /* that dialect's reader; NULL: events not read */
    gw_usage_read_fn usage_read; /* its usage reader (chunks' usage); NULL: none */
    gw_sse_cut_fn cut;           /* the surface's reading of a cut stream; NULL: none */
    /* What the stream said so far, across events. */
    bool ended;                              /* its proper end was seen (stream_end) */
    bool messages_delta_seen;                /* Messages: a message_delta with usage */
    struct gw_messages_usage messages_usage; /* Messages: each usage field's last value */
    struct gw_usage usage;                   /* the last usage an event gave (present or not) */
    struct buffer raw;                       /* the event being read */
    struct buffer data;                      /* its data lines, joined by '\n' */
    size_t line_start;                       /* in raw */
    bool data_seen;
    /* The last chunk ended with a CR, kept in raw but not yet taken as a
     * line end: the next byte says whether it is a CRLF. */
    bool cr_pending;
    struct arena arena; /* the parsed data of one event */
    /* The arena's own storage: a usual chunk event parses here, so a
     * thousand open streams hold no heap block each. */
    _Alignas(16) char arena_storage[GW_SSE_ARENA_INLINE_BYTES];
};

/* The dialects' readers: OpenAI's chat and completions chunks,
 * Anthropic's Messages events, Responses' events, Gemini's chunks. */
int gw_sse_read_chunk(struct gw_sse *sse, const struct jdoc_value *root,
                      struct gw_sse_event *event);
int gw_sse_read_messages_event(struct gw_sse *sse, const struct jdoc_value *root,
                               struct gw_sse_event *event);
int gw_sse_read_responses_event(struct gw_sse *sse, const struct jdoc_value *root,
                                struct gw_sse_event *event);
int gw_sse_read_gemini_chunk(struct gw_sse *sse, const struct jdoc_value *root,
                             struct gw_sse_event *event);
/* Messages' reading of a stream cut before its final usage: the input
 * its message_start told, with the counted output. */
int gw_sse_messages_cut(const struct gw_sse *sse, uint64_t output, struct gw_usage *out,
                        char *error, size_t error_size);

/* A parser for a chat or completions stream (OpenAI chunks). */
void gw_sse_init(struct gw_sse *sse);
/* A parser for a stream answering endpoint (chat, completions, messages,
 * responses). */
void gw_sse_init_for(struct gw_sse *sse, enum gw_endpoint endpoint);
/* The same with the surface and its dialect given (gw_sse_init_for looks
 * them up in the dialects' table). */
struct gw_dialect;
struct gw_surface;
void gw_sse_init_with(struct gw_sse *sse, const struct gw_dialect *dialect,
                      const struct gw_surface *surface);
/* Frees what the parser holds; it may be initialised again. */
void gw_sse_free(struct gw_sse *sse);

/* Feeds bytes[0..length). Lines end with LF, CRLF or CR; a blank line ends
 * an event. A CR that ends a chunk waits for the next byte (or
 * gw_sse_finish) to tell a CR from a CRLF, so that the events and their
 * bytes are the same however the stream is split. 0, the callback's
 * non-zero value, or -1 with the reason in error: an event longer than
 * GW_SSE_EVENT_BYTES_MAX (handed over first as an oversized event), out of
 * memory. */
int gw_sse_feed(struct gw_sse *sse, const char *bytes, size_t length, gw_sse_event_fn on_event,
                void *context, char *error, size_t error_size);

/* At the end of the stream: a CR still waiting ends its line; bytes of an
 * unfinished event, if any, come as one last event with complete false (a
 * client discards such an event; whether to relay it is the caller's
 * choice). 0, the callback's value, or -1 when out of memory. */
int gw_sse_finish(struct gw_sse *sse, gw_sse_event_fn on_event, void *context);

/* Output tokens of a stream, one text counter per choice (choices at or
 * past GW_N_MAX share one more). */
struct gw_sse_output {
    struct gw_text_counter choices[GW_N_MAX];
    struct gw_text_counter other;
};

void gw_sse_output_init(struct gw_sse_output *output);
void gw_sse_output_add(struct gw_sse_output *output, const struct gw_sse_event *event);
uint64_t gw_sse_output_tokens(const struct gw_sse_output *output);

/* Whether the stream ended properly (an event with stream_end came): a
 * stream cut before that was cut (timeout, client gone, upstream closed). */
bool gw_sse_ended(const struct gw_sse *sse);

/* What a stream used, for its complete: its usage when it gave one (a
 * stream that did not end properly takes the larger of that output and the
 * output counted from its text, as text may have followed the last usage);
 * else its input from what it said of it (Messages' message_start), or
 * input_estimate, and the output counted from its text. Returns true when
 * the counts come from the upstream's usage, false when counted. */
bool gw_sse_stream_tokens(const struct gw_sse *sse, const struct gw_sse_output *output,
                          uint64_t input_estimate, struct gw_tokens *out);

#endif
