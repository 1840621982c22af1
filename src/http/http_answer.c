/* Answers (see http.h): the status line and headers written piece by piece
 * (snprintf was a visible part of a reserve's CPU), whole bodies, chunked
 * streams, and the transport's own errors. Also the request accessors. */
#include "http_internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/buffer.h"


const char *http_path(const struct http_exchange *ex, char *out, size_t out_size)
{
    size_t length = ex->head.path_length;
    if (length + 1 > out_size || out_size < 2)
        return NULL;
    if (length == 0) /* an absolute-form target without a path */
        return strcpy(out, "/");
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
    buffer_append_str(head, http_reason_phrase(status));
    buffer_append_str(head, "\r\nDate: ");
    buffer_append_str(head, http_date_now());
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
    char storage[HTTP_ANSWER_HEAD_BYTES];
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

void http_stream_begin(struct http_exchange *ex, unsigned status, const struct http_header *headers,
                       size_t count)
{
    assert(ex->status == 0);
    assert(!ex->streaming);
    bool chunked = ex->head.version_minor >= 1;
    if (!chunked)
        ex->conn->close_after = true; /* the end of the stream is the close */
    char storage[HTTP_ANSWER_HEAD_BYTES];
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
    struct iovec parts[3] = {
        {at, (size_t)(size + sizeof size - at)}, {(void *)bytes, length}, {(void *)"\r\n", 2}};
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
