/* The chunked transfer coding of a request body (RFC 9112 section 7.1),
 * decoded as it arrives: fed bytes split anywhere, it hands over the data
 * and says where the body ends. Chunk extensions and trailer fields are
 * read and dropped, within bounds. */
#ifndef LLMLIMIT_HTTP_CHUNKED_H
#define LLMLIMIT_HTTP_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_CHUNK_LINE_BYTES_MAX 1024 /* a size line, extensions included */
#define HTTP_TRAILER_BYTES_MAX 8192    /* every trailer line together */

struct http_chunked {
    uint8_t state;
    uint8_t size_digits;
    uint32_t line_bytes; /* of the size line or the trailer being read */
    uint32_t trailer_bytes;
    uint64_t left; /* data bytes left in the current chunk */
};

enum http_chunked_result {
    HTTP_CHUNKED_MORE = 0, /* every byte given was taken; the body goes on */
    HTTP_CHUNKED_END = 1,  /* the body ended: *consumed bytes were its last */
    HTTP_CHUNKED_BAD = 2,  /* malformed: *reason says how */
};

void http_chunked_init(struct http_chunked *decoder);

/* Takes bytes[0, length): the data of the chunks is handed to on_data (a
 * non-zero return stops and is passed on as HTTP_CHUNKED_BAD with the
 * reason left NULL). *consumed is how many bytes belonged to the body. */
enum http_chunked_result
http_chunked_feed(struct http_chunked *decoder, const char *bytes, size_t length, size_t *consumed,
                  int (*on_data)(void *context, const char *data, size_t length), void *context,
                  const char **reason);

#endif
