/* Answers (see http.h): the status line and headers written piece by piece
 * (snprintf was a visible part of a reserve's CPU), whole bodies, chunked
 * streams, and the transport's own errors. Also the request accessors. */
#include "http_internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/buffer.h"

#define ANSWER_HEAD_BYTES 2048 /* the status line and every header of one answer */

void http_exchange_init(struct http_exchange *ex)
{
    memset(ex, 0, offsetof(struct http_exchange, head_inline));
    ex->head_bytes = ex->head_inline;
    ex->body = ex->body_inline;
    ex->body_capacity = sizeof ex->body_inline;
    ex->body_inline[0] = '\0';
}

const char *http_path(const struct http_exchange *ex, char *out, size_t out_size)
{
    size_t length = ex->head.path_length;
    if (length + 1 > out_size)
        return NULL;
    memcpy(out, ex->head_bytes + ex->head.target_offset, length);
    out[length] = '\0';
    return out;
}

const char *http_query(const struct http_exchange *ex, size_t *length)
{
    const struct http_head *h = &ex->head;
    if (h->path_length == h->target_length) {
        *length = 0;
        return "";
    }
    *length = h->target_length - h->path_length - 1;
    return ex->head_bytes + h->target_offset + h->path_length + 1;
}

const char *http_field(const struct http_exchange *ex, const char *name, size_t *length)
{
    return http_head_field(&ex->head, ex->head_bytes, name, length);
}

static const char *reason_phrase(unsigned status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 529: return "Site Overloaded";
    default: return "Unknown";
    }
}

/* An HTTP date for now; the text is kept per thread for the second. */
static const char *http_date(void)
{
    static __thread time_t cached = -1;
    static __thread char text[40];
    time_t now = time(NULL);
    if (now != cached) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached = now;
    }
    return text;
}

/* Does the connection close after this answer? Asked for by the client,
 * decided by the server (draining), or forced by a stream on HTTP/1.0. */
static bool closing(struct http_exchange *ex)
{
    struct http_conn *conn = ex->conn;
    if (http_draining(ex))
        conn->close_after = true;
    return conn->close_after;
}

/* The status line and headers into head; framing is "Content-Length: N",
 * "Transfer-Encoding: chunked" or NULL (closed at the end). */
static void write_head(struct http_exchange *ex, struct buffer *head, unsigned status,
                       const struct http_header *headers, size_t count, const char *framing,
                       uint64_t content_length)
{
    buffer_append_str(head, ex->head.version_minor == 0 ? "HTTP/1.0 " : "HTTP/1.1 ");
    buffer_append_u64(head, status);
    buffer_append_char(head, ' ');
    buffer_append_str(head, reason_phrase(status));
    buffer_append_str(head, "\r\nDate: ");
    buffer_append_str(head, http_date());
    if (framing != NULL && framing[0] == 'C') {
        buffer_append_str(head, "\r\nContent-Length: ");
        buffer_append_u64(head, content_length);
    } else if (framing != NULL) {
        buffer_append_str(head, "\r\nTransfer-Encoding: chunked");
    }
    buffer_append_str(head, "\r\n");
    for (size_t i = 0; i < count; i++) {
        assert(headers[i].name != NULL);
        assert(headers[i].value != NULL);
        buffer_append_str(head, headers[i].name);
        buffer_append_str(head, ": ");
        buffer_append_str(head, headers[i].value);
        buffer_append_str(head, "\r\n");
    }
    if (closing(ex))
        buffer_append_str(head, "Connection: close\r\n");
    else if (ex->head.version_minor == 0)
        buffer_append_str(head, "Connection: keep-alive\r\n");
    buffer_append_str(head, "\r\n");
}

void http_answer(struct http_exchange *ex, unsigned status, const struct http_header *headers,
                 size_t count, const char *body, size_t length)
{
    /* One answer per exchange. */
    assert(ex->status == 0);
    assert(status >= 200);
    assert(status <= 599);
    assert(body != NULL || length == 0);
    char storage[ANSWER_HEAD_BYTES];
    struct buffer head;
    buffer_init(&head, storage, sizeof storage);
    write_head(ex, &head, status, headers, count, "C", length);
    ex->status = status;
    ex->answered = true;
    if (head.failed) { /* headers past ANSWER_HEAD_BYTES: a server bug, never input */
        ex->conn->close_after = true;
        ex->conn->write_failed = true;
        buffer_free(&head);
        return;
    }
    bool no_body = ex->head.method == HTTP_HEAD;
    struct iovec parts[2] = {{head.data, head.length}, {(void *)body, length}};
    http_conn_send(ex->conn, parts, no_body || length == 0 ? 1 : 2);
    buffer_free(&head);
}

void http_stream_begin(struct http_exchange *ex, unsigned status,
                       const struct http_header *headers, size_t count)
{
    assert(ex->status == 0);
    assert(!ex->streaming);
    bool chunked = ex->head.version_minor >= 1;
    if (!chunked)
        ex->conn->close_after = true; /* the end of the stream is the close */
    char storage[ANSWER_HEAD_BYTES];
    struct buffer head;
    buffer_init(&head, storage, sizeof storage);
    write_head(ex, &head, status, headers, count, chunked ? "T" : NULL, 0);
    ex->status = status;
    ex->streaming = true;
    struct iovec part = {head.data, head.length};
    if (!head.failed)
        http_conn_send(ex->conn, &part, 1);
    else
        ex->conn->write_failed = true;
    buffer_free(&head);
}

void http_stream_write(struct http_exchange *ex, const char *bytes, size_t length)
{
    assert(ex->streaming);
    if (length == 0 || ex->head.method == HTTP_HEAD)
        return;
    if (ex->head.version_minor == 0) {
        struct iovec part = {(void *)bytes, length};
        http_conn_send(ex->conn, &part, 1);
        return;
    }
    char size[24];
    static const char digits[] = "0123456789abcdef";
    char *at = size + sizeof size;
    *--at = '\n';
    *--at = '\r';
    size_t n = length;
    do {
        *--at = digits[n & 15];
        n >>= 4;
    } while (n > 0);
    struct iovec parts[3] = {{at, (size_t)(size + sizeof size - at)},
                             {(void *)bytes, length},
                             {(void *)"\r\n", 2}};
    http_conn_send(ex->conn, parts, 3);
}

void http_stream_end(struct http_exchange *ex)
{
    assert(ex->streaming);
    ex->streaming = false;
    ex->answered = true;
    if (ex->head.version_minor >= 1 && ex->head.method != HTTP_HEAD) {
        struct iovec part = {(void *)"0\r\n\r\n", 5};
        http_conn_send(ex->conn, &part, 1);
    }
}

size_t http_stream_pending(const struct http_exchange *ex)
{
    return ex->conn->out_length - ex->conn->out_start;
}

void http_conn_refuse(struct http_conn *conn, const char *path, size_t path_length,
                      unsigned status, const char *reason)
{
    struct http_server *server = conn->worker->server;
    __atomic_add_fetch(&server->stats_bad_requests, 1, __ATOMIC_RELAXED);
    char body[1024];
    const char *content_type = "application/json";
    size_t length = server->config.handlers->error_body(server->config.context, path, path_length,
                                                        status, reason, body, sizeof body,
                                                        &content_type);
    assert(length <= sizeof body);
    char storage[ANSWER_HEAD_BYTES];
    struct buffer head;
    buffer_init(&head, storage, sizeof storage);
    buffer_append_str(&head, "HTTP/1.1 ");
    buffer_append_u64(&head, status);
    buffer_append_char(&head, ' ');
    buffer_append_str(&head, reason_phrase(status));
    buffer_append_str(&head, "\r\nDate: ");
    buffer_append_str(&head, http_date());
    buffer_append_str(&head, "\r\nContent-Length: ");
    buffer_append_u64(&head, length);
    buffer_append_str(&head, "\r\nContent-Type: ");
    buffer_append_str(&head, content_type);
    buffer_append_str(&head, "\r\nConnection: close\r\n\r\n");
    assert(!head.failed);
    struct iovec parts[2] = {{head.data, head.length}, {body, length}};
    http_conn_send(conn, parts, 2);
    conn->close_after = true;
    conn->state = CONN_HEAD;
}
