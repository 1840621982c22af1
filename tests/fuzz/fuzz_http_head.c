/* libFuzzer harness: request heads and chunked bodies (src/http/http_head.c,
 * src/http/http_chunked.c), the bytes every request of llmlimitd goes
 * through. Whatever the bytes: a head the parser accepts lies inside them,
 * ends in a blank line, and is accepted the same from exactly its own bytes;
 * its target, fields and framing lie inside it and mean one thing (never
 * Content-Length beside chunked); its path starts with '/' or is empty (an
 * absolute-form target without one); on HTTP/1.1 it has a Host; a partial
 * head's every prefix is partial too; a refusal names a status and a
 * reason. What follows an accepted chunked head decodes to the same data
 * however the bytes are split. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_chunked.h"
#include "http/http_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
    char data[4096];
    size_t length;
    size_t total;
};

static int collect(void *context, const char *bytes, size_t length)
{
    struct sink *sink = context;
    assert(length > 0);
    for (size_t i = 0; i < length && sink->length < sizeof sink->data; i++)
        sink->data[sink->length++] = bytes[i];
    sink->total += length;
    return 0;
}

/* Decodes bytes as a chunked body in two pieces split at `split`. */
static enum http_chunked_result decode(const char *bytes, size_t length, size_t split,
                                       struct sink *sink, size_t *consumed)
{
    struct http_chunked decoder;
    http_chunked_init(&decoder);
    memset(sink, 0, sizeof *sink);
    const char *reason = NULL;
    size_t first = 0;
    enum http_chunked_result r =
        http_chunked_feed(&decoder, bytes, split, &first, collect, sink, &reason);
    assert(first <= split);
    if (r != HTTP_CHUNKED_MORE) {
        *consumed = first;
        assert(r == HTTP_CHUNKED_END || reason != NULL);
        return r;
    }
    assert(first == split);
    size_t second = 0;
    r = http_chunked_feed(&decoder, bytes + split, length - split, &second, collect, sink,
                          &reason);
    assert(second <= length - split);
    assert(r != HTTP_CHUNKED_BAD || reason != NULL);
    *consumed = split + second;
    return r;
}

static void check_chunked(const char *bytes, size_t length)
{
    struct sink whole, split;
    size_t whole_consumed, split_consumed;
    enum http_chunked_result a = decode(bytes, length, length, &whole, &whole_consumed);
    enum http_chunked_result b = decode(bytes, length, length / 2, &split, &split_consumed);
    assert(a == b);
    assert(whole_consumed == split_consumed);
    assert(whole.total == split.total);
    assert(whole.length == split.length);
    assert(memcmp(whole.data, split.data, whole.length) == 0);
}

static void check_whole(const char *text, size_t size, const struct http_head *head)
{
    assert(head->length >= 4 && head->length <= size);
    assert(memcmp(text + head->length - 4, "\r\n\r\n", 4) == 0);
    /* The path (after the authority of an absolute-form target) starts with
     * '/', or is empty (http://host: "/"). */
    assert(head->target_offset + head->target_length < head->length);
    assert(head->path_length <= head->target_length);
    assert(head->path_length == 0 || text[head->target_offset] == '/');
    assert(head->path_length == head->target_length ||
           text[head->target_offset + head->path_length] == '?');
    assert(head->version_minor <= 1);
    assert(!(head->chunked && head->has_content_length));
    assert(head->field_count <= HTTP_FIELDS_MAX);
    for (uint32_t i = 0; i < head->field_count; i++) {
        const struct http_field *f = &head->fields[i];
        assert(f->name_length > 0);
        assert(f->value_offset + f->value_length <= head->length - 2);
        for (uint32_t j = 0; j < f->value_length; j++) {
            char c = text[f->value_offset + j];
            assert(c != '\r' && c != '\n' && c != '\0');
        }
        assert(f->value_length == 0 || (text[f->value_offset] != ' ' &&
                                         text[f->value_offset + f->value_length - 1] != ' '));
    }
    assert(head->authorization < (int32_t)head->field_count);
    size_t host_length;
    assert(head->version_minor == 0 || http_head_field(head, text, "host", &host_length) != NULL);
    struct http_head again;
    unsigned status = 0;
    const char *reason = NULL;
    assert(http_head_parse(text, head->length, &again, &status, &reason) == HTTP_HEAD_WHOLE);
    assert(again.length == head->length);
    assert(again.field_count == head->field_count);
    assert(again.content_length == head->content_length);
    if (head->chunked)
        check_chunked(text + head->length, size - head->length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    static struct http_head head;
    unsigned status = 0;
    const char *reason = NULL;
    enum http_head_result r = http_head_parse(text, size, &head, &status, &reason);
    if (r == HTTP_HEAD_BAD) {
        assert(reason != NULL);
        assert(status == 400 || status == 417 || status == 431 || status == 501 ||
               status == 505);
        return 0;
    }
    if (r == HTTP_HEAD_PARTIAL) {
        if (size > 0) {
            static struct http_head shorter;
            assert(http_head_parse(text, size - 1, &shorter, &status, &reason) ==
                   HTTP_HEAD_PARTIAL);
        }
        return 0;
    }
    assert(r == HTTP_HEAD_WHOLE);
    check_whole(text, size, &head);
    return 0;
}
