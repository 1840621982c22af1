/* The chunked body decoder (see http_chunked.h). */
#include "http_chunked.h"

#include <assert.h>
#include <stdbool.h>

#include "core/hex.h"

enum state {
    SIZE = 0,  /* hex digits of the chunk size */
    EXTENSION, /* after ';' up to the CR */
    SIZE_LF,   /* the LF of the size line */
    DATA,      /* left bytes of data */
    DATA_CR,   /* the CRLF after the data */
    DATA_LF,
    TRAILER, /* the start of a trailer line, or the final CRLF */
    TRAILER_LINE,
    TRAILER_LF, /* the LF ending a trailer line */
    END_LF,     /* the LF of the final blank line */
    ENDED,
};

void http_chunked_init(struct http_chunked *d)
{
    *d = (struct http_chunked){.state = SIZE};
}

static enum http_chunked_result bad(const char **reason, const char *why)
{
    *reason = why;
    return HTTP_CHUNKED_BAD;
}

/* One byte of a size line; NULL when taken, else the reason it is bad. */
static const char *size_byte(struct http_chunked *d, char c)
{
    if (++d->line_bytes > HTTP_CHUNK_LINE_BYTES_MAX)
        return "a chunk size line longer than 1 KiB";
    if (d->state == SIZE) {
        int digit = hex_digit_value(c);
        if (digit >= 0) {
            if (d->size_digits == 15)
                return "a chunk size of more than 15 hex digits";
            d->size_digits++;
            d->left = d->left * 16 + (uint64_t)digit;
            return NULL;
        }
        if (d->size_digits == 0)
            return "a chunk size must start with a hex digit";
        if (c == ';') {
            d->state = EXTENSION;
            return NULL;
        }
    }
    if (c == '\r') {
        d->state = SIZE_LF;
        return NULL;
    }
    if (d->state == EXTENSION && (c == '\t' || ((unsigned char)c >= 0x20 && c != 0x7f)))
        return NULL;
    return "a malformed chunk size line";
}

/* One byte of the trailer section; NULL when taken, else the reason. */
static const char *trailer_byte(struct http_chunked *d, char c)
{
    if (++d->trailer_bytes > HTTP_TRAILER_BYTES_MAX)
        return "trailer fields longer than 8 KiB";
    if (d->state == TRAILER) {
        d->state = c == '\r' ? END_LF : TRAILER_LINE;
        return c == '\n' ? "a trailer line ending in a bare LF" : NULL;
    }
    if (d->state == TRAILER_LINE) {
        if (c == '\r')
            d->state = TRAILER_LF;
        else if (c == '\n')
            return "a trailer line ending in a bare LF";
        return NULL;
    }
    if (c != '\n')
        return "a CR not followed by LF";
    d->state = d->state == TRAILER_LF ? TRAILER : ENDED;
    return NULL;
}

enum http_chunked_result http_chunked_feed(struct http_chunked *d, const char *bytes, size_t length,
                                           size_t *consumed,
                                           int (*on_data)(void *, const char *, size_t),
                                           void *context, const char **reason)
{
    size_t at = 0;
    *reason = NULL;
    while (at < length && d->state != ENDED) {
        const char *why = NULL;
        char c = bytes[at];
        switch (d->state) {
        case SIZE:
        case EXTENSION:
            why = size_byte(d, c);
            at++;
            break;
        case SIZE_LF:
            if (c != '\n')
                why = "a CR not followed by LF";
            d->state = d->left > 0 ? DATA : TRAILER;
            d->line_bytes = 0;
            d->size_digits = 0;
            at++;
            break;
        case DATA: {
            size_t n = length - at < d->left ? length - at : (size_t)d->left;
            if (on_data(context, bytes + at, n) != 0) {
                *consumed = at;
                return HTTP_CHUNKED_BAD;
            }
            d->left -= n;
            at += n;
            if (d->left == 0)
                d->state = DATA_CR;
            break;
        }
        case DATA_CR:
        case DATA_LF:
            if (c != (d->state == DATA_CR ? '\r' : '\n'))
                why = "chunk data not followed by CRLF";
            d->state = d->state == DATA_CR ? DATA_LF : SIZE;
            at++;
            break;
        default:
            why = trailer_byte(d, c);
            at++;
            break;
        }
        if (why != NULL) {
            *consumed = at;
            return bad(reason, why);
        }
    }
    *consumed = at;
    assert(at <= length);
    return d->state == ENDED ? HTTP_CHUNKED_END : HTTP_CHUNKED_MORE;
}
