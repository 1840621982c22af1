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
#define HTTP_LEADING_EMPTY_LINES_MAX 4 /* CRLFs skipped before a request line */

enum http_method {
    HTTP_GET = 1,
    HTTP_HEAD = 2,
    HTTP_POST = 4,
    HTTP_PUT = 8,
    HTTP_DELETE = 16,
    HTTP_OTHER = 32, /* any other token: routes answer 405 */
    HTTP_PATCH = 64,
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
    /* The request-target: path, then '?' and the query; of an absolute-form
     * target (http://host/path), what follows the authority. */
    uint32_t target_offset;
    uint32_t target_length;
    uint32_t path_length;  /* the part before '?'; 0 (http://host) is "/" */
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

/* Where the head at data[0, length) ends: the one rule, read by the
 * connection to find a head in what it has read and by http_head_parse to
 * know what it parses, so that the two never disagree. At most
 * HTTP_LEADING_EMPTY_LINES_MAX empty lines (CRLF) before the request line
 * are skipped (RFC 9112 section 2.2); the head then runs through its first
 * empty line, a line holding nothing before its LF but at most a CR. A
 * request line that is itself empty (a further CRLF, or a bare LF) ends the
 * head there, for the parser to refuse. What the lines hold is the parser's
 * business.
 *
 * Returns the head's length, blank line included, or 0 while data holds no
 * end. *scanned carries the search from one call to the next over the same
 * growing bytes, so that bytes arriving one at a time are scanned once: set
 * it to 0 before the first call and whenever the bytes move; the result is
 * the same as from 0. */
size_t http_head_end(const char *data, size_t length, size_t *scanned);

/* Parses the head at data[0, length): the bytes through the end that
 * http_head_end finds in them, never one past it. HTTP_HEAD_PARTIAL
 * exactly when http_head_end finds no end; else HTTP_HEAD_WHOLE with *head
 * filled (head->length is that end), or HTTP_HEAD_BAD with *status (400,
 * 417, 431, 501 or 505) and *reason (static text) set. Bytes past
 * HTTP_HEAD_BYTES_MAX without an end, or more than HTTP_FIELDS_MAX fields,
 * are 431. */
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
