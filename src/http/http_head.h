/* HTTP/1.x request heads (RFC 9112), parsed strictly and in one place: every
 * request llmlimitd serves goes through http_head_parse, so one request
 * always gets one answer (docs/hardening.md, "One parser"). What a front
 * proxy might read differently (two Content-Length fields, a space before a
 * colon, Content-Length beside Transfer-Encoding, folded lines, a bare LF)
 * is refused with 400 instead of being guessed at. */
#ifndef LLMLIMIT_HTTP_HEAD_H
#define LLMLIMIT_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_HEAD_BYTES_MAX (16 * 1024) /* request line and fields, blank line included */
#define HTTP_FIELDS_MAX 100             /* header fields of one head */
#define HTTP_METHOD_LENGTH_MAX 16

enum http_method {
    HTTP_GET = 1,
    HTTP_HEAD = 2,
    HTTP_POST = 4,
    HTTP_PUT = 8,
    HTTP_DELETE = 16,
    HTTP_OTHER = 32, /* any other token: routes answer 405 */
};

/* A field, as offsets into the bytes parsed; the value without the blanks
 * around it. */
struct http_field {
    uint32_t name_offset;
    uint16_t name_length;
    uint32_t value_offset;
    uint32_t value_length;
};

struct http_head {
    uint32_t length; /* through the blank line */
    enum http_method method;
    uint32_t target_offset; /* the request-target: path, then '?' and the query */
    uint32_t target_length;
    uint32_t path_length;  /* the part before '?' */
    uint8_t version_minor; /* HTTP/1.0 or HTTP/1.1 */
    bool has_content_length;
    bool chunked; /* Transfer-Encoding: chunked */
    bool close;   /* no further request on this connection */
    bool expect_continue;
    uint64_t content_length; /* 0 unless has_content_length; saturates at UINT64_MAX */
    int32_t authorization;   /* index into fields, -1: none (looked up on every request) */
    uint32_t field_count;
    struct http_field fields[HTTP_FIELDS_MAX];
};

enum http_head_result {
    HTTP_HEAD_WHOLE = 0,
    HTTP_HEAD_PARTIAL = 1, /* the bytes end inside the head; nothing so far is wrong */
    HTTP_HEAD_BAD = 2,     /* refused: see status and reason */
};

/* Parses the head at data[0, length). HTTP_HEAD_WHOLE with *head filled;
 * HTTP_HEAD_PARTIAL; or HTTP_HEAD_BAD with *status (400, 417, 431, 501 or
 * 505) and *reason (static text) set. A head longer than
 * HTTP_HEAD_BYTES_MAX, or with more than HTTP_FIELDS_MAX fields, is 431
 * even while partial. Empty lines before the request line are skipped (at
 * most a few). */
enum http_head_result http_head_parse(const char *data, size_t length, struct http_head *head,
                                      unsigned *status, const char **reason);

/* The value of the one field named `name` (lower case), or NULL; *length set.
 * When the field comes more than once, the first. */
const char *http_head_field(const struct http_head *head, const char *data, const char *name,
                            size_t *length);

/* "POST" -> HTTP_POST ...; anything else HTTP_OTHER. */
enum http_method http_method_of(const char *text, size_t length);
const char *http_method_name(enum http_method method);

#endif
