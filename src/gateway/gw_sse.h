/* The upstream's Server-Sent Events stream of a chat or completions call,
 * parsed as it arrives: fed byte chunks split anywhere (inside a line or a
 * UTF-8 character too), it hands over whole events with their exact bytes
 * (to relay unchanged, or to drop the usage chunk the client did not ask
 * for), the text they carry (to count output tokens) and their usage. */
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

/* A piece of generated text in an event: choices[].delta.content, .refusal,
 * .reasoning_content, .tool_calls[].function.name and .arguments,
 * .function_call.name and .arguments, or choices[].text (completions). */
struct gw_sse_text {
    uint32_t choice; /* the choice's index */
    const char *text;
    size_t length;
};

struct gw_sse_event {
    const char *raw; /* every byte of the event, its blank line included */
    size_t raw_length;
    bool complete;        /* false only for the unfinished tail handed over by gw_sse_finish */
    bool has_data;        /* it had data lines (else only comments or other fields) */
    bool done;            /* the data is [DONE] */
    bool json;            /* the data parsed as JSON */
    bool error;           /* an object with an "error" member: the upstream failed mid-stream */
    bool usage_only;      /* choices is empty and usage present: the chunk include_usage adds */
    bool usage_malformed; /* a usage member that gw_usage_read refused */
    struct gw_usage usage;
    /* Valid during the callback only. Data that is not JSON (and not
     * [DONE]) is given as one text, so that it is counted, not lost. */
    const struct gw_sse_text *texts;
    uint32_t text_count;
};

/* Called for each event; a non-zero return stops gw_sse_feed, which
 * returns that value. */
typedef int (*gw_sse_event_fn)(void *context, const struct gw_sse_event *event);

struct gw_sse {
    struct buffer raw;  /* the event being read */
    struct buffer data; /* its data lines, joined by '\n' */
    size_t line_start;  /* in raw */
    bool data_seen;
    /* The last chunk ended with a CR, kept in raw but not yet taken as a
     * line end: the next byte says whether it is a CRLF. */
    bool cr_pending;
    struct arena arena; /* the parsed data of one event */
    /* The arena's own storage: a usual chunk event parses here, so a
     * thousand open streams hold no heap block each. */
    _Alignas(16) char arena_storage[GW_SSE_ARENA_INLINE_BYTES];
};

void gw_sse_init(struct gw_sse *sse);
/* Frees what the parser holds; it may be initialised again. */
void gw_sse_free(struct gw_sse *sse);

/* Feeds bytes[0..length). Lines end with LF, CRLF or CR; a blank line ends
 * an event. A CR that ends a chunk waits for the next byte (or
 * gw_sse_finish) to tell a CR from a CRLF, so that the events and their
 * bytes are the same however the stream is split. 0, the callback's
 * non-zero value, or -1 with the reason in error: an event longer than
 * GW_SSE_EVENT_BYTES_MAX, out of memory. */
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

#endif
