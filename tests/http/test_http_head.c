/* Request heads and chunked bodies (src/http/http_head.c,
 * src/http/http_chunked.c): what is read, and every framing a front proxy
 * could read differently refused (docs/hardening.md, "One parser"). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "http/http_chunked.h"
#include "http/http_head.h"
#include "test.h"

static struct http_head head;
static unsigned status;
static const char *reason;

static enum http_head_result parse(const char *text)
{
    status = 0;
    reason = NULL;
    return http_head_parse(text, strlen(text), &head, &status, &reason);
}

/* The value of a field as a string (for checks). */
static const char *field(const char *text, const char *name)
{
    static char value[256];
    size_t length;
    const char *at = http_head_field(&head, text, name, &length);
    if (at == NULL || length >= sizeof value)
        return NULL;
    memcpy(value, at, length);
    value[length] = '\0';
    return value;
}

/* Refused with `expected`, for a reason other than a missing Host (unless
 * that is what is tested: no_host). */
static void refused_for(const char *text, unsigned expected, bool no_host)
{
    enum http_head_result r = parse(text);
    CHECK_EQ_I64(r, HTTP_HEAD_BAD);
    CHECK_EQ_U64(status, expected);
    CHECK(reason != NULL);
    if (reason != NULL)
        CHECK_EQ_I64(strstr(reason, "Host: missing") != NULL, no_host);
    if (r != HTTP_HEAD_BAD)
        fprintf(stderr, "  accepted: %s\n", text);
}

static void refused(const char *text, unsigned expected)
{
    refused_for(text, expected, false);
}

static void a_plain_request_is_read(void)
{
    const char *text = "POST /v1/reserve?x=1&y HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n"
                       "Authorization: Bearer tok\r\n\r\n{\"body\":1}..";
    CHECK_EQ_I64(parse(text), HTTP_HEAD_WHOLE);
    CHECK_EQ_I64(head.method, HTTP_POST);
    CHECK_EQ_U64(head.length, strlen(text) - 12);
    CHECK_EQ_U64(head.path_length, strlen("/v1/reserve"));
    CHECK_EQ_U64(head.target_length, strlen("/v1/reserve?x=1&y"));
    CHECK(memcmp(text + head.target_offset, "/v1/reserve?", 12) == 0);
    CHECK_EQ_U64(head.version_minor, 1);
    CHECK(head.has_content_length);
    CHECK_EQ_U64(head.content_length, 12);
    CHECK(!head.close);
    CHECK(!head.chunked);
    CHECK_EQ_U64(head.field_count, 3);
    CHECK_EQ_I64(head.authorization, 2);
    CHECK_STR(field(text, "authorization"), "Bearer tok");
    CHECK_STR(field(text, "host"), "a");
    CHECK(field(text, "x-missing") == NULL);
}

static void every_prefix_of_a_head_is_partial(void)
{
    const char *text = "GET /healthz HTTP/1.1\r\nHost: a\r\nX-Y: z\r\n\r\n";
    char copy[128];
    for (size_t n = 0; n < strlen(text); n++) {
        memcpy(copy, text, n);
        status = 0;
        enum http_head_result r = http_head_parse(copy, n, &head, &status, &reason);
        CHECK_EQ_I64(r, HTTP_HEAD_PARTIAL);
    }
    CHECK_EQ_I64(parse(text), HTTP_HEAD_WHOLE);
}

/* http_head_end over text, fed all at once and one byte at a time. */
static size_t end_of(const char *text)
{
    size_t length = strlen(text), scanned = 0;
    size_t end = http_head_end(text, length, &scanned);
    size_t step_scanned = 0, step_end = 0;
    for (size_t n = 0; n <= length && step_end == 0; n++)
        step_end = http_head_end(text, n, &step_scanned);
    CHECK_EQ_U64(step_end, end);
    return end;
}

static void the_end_of_a_head_is_one_rule(void)
{
    /* Two empty lines alone: skipped, the request line still to come. */
    CHECK_EQ_U64(end_of("\r\n\r\n"), 0);
    CHECK_EQ_I64(parse("\r\n\r\n"), HTTP_HEAD_PARTIAL);
    CHECK_EQ_U64(end_of("\r\n\r\n\r"), 0);
    /* Up to four, then a request: one head, from the first byte. */
    const char *text = "\r\n\r\n\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET";
    CHECK_EQ_U64(end_of(text), strlen(text) - 3);
    CHECK_EQ_I64(parse(text), HTTP_HEAD_WHOLE);
    CHECK_EQ_U64(head.length, strlen(text) - 3);
    CHECK(memcmp(text + head.target_offset, "/healthz ", 9) == 0);
    /* A fifth is an empty request line: the head ends there, refused. */
    CHECK_EQ_U64(end_of("\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\n\r\n"), 10);
    refused("\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    /* A bare LF ending the head, after a field or the request line, or alone. */
    const char *bare[] = {"GET /healthz HTTP/1.1\r\nHost: x\r\n\n", "GET / HTTP/1.1\r\n\n", "\n",
                          "\r\n\n"};
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++) {
        CHECK_EQ_U64(end_of(bare[i]), strlen(bare[i]));
        refused(bare[i], 400);
        CHECK(reason != NULL && strstr(reason, "bare LF") != NULL);
    }
    /* The end is the first empty line: what follows is not read. */
    CHECK_EQ_U64(end_of("GET / HTTP/1.1\r\nHost: a\r\n\r\n\n\n"),
                 strlen("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
    CHECK_EQ_U64(end_of("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n"),
                 strlen("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n"));
    CHECK_EQ_U64(end_of("GET / HTTP/1.1\r\nHost: a\r\n\r"), 0);
}

static void blanks_around_values_are_not_part_of_them(void)
{
    /* The two cases a reviewer found answered differently by the two old
     * paths: a tab after the token, blanks after a length. */
    const char *text = "POST /x HTTP/1.1\r\nHost: a\r\nAuthorization: \tBearer tok\t\r\n"
                       "Content-Length: 5 \t\r\n\r\n";
    CHECK_EQ_I64(parse(text), HTTP_HEAD_WHOLE);
    CHECK_STR(field(text, "authorization"), "Bearer tok");
    CHECK_EQ_U64(head.content_length, 5);
}

static void http10_closes_unless_it_keeps_alive(void)
{
    CHECK_EQ_I64(parse("GET / HTTP/1.0\r\n\r\n"), HTTP_HEAD_WHOLE);
    CHECK_EQ_U64(head.version_minor, 0);
    CHECK(head.close);
    CHECK_EQ_I64(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), HTTP_HEAD_WHOLE);
    CHECK(!head.close);
    CHECK_EQ_I64(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, close\r\n\r\n"),
                 HTTP_HEAD_WHOLE);
    CHECK(head.close);
}

static void framing_that_could_be_read_two_ways_is_refused(void)
{
    refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            400);
    refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
    refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400);
    refused("POST / HTTP/1.1\nHost: a\n\n", 400);
    refused("POST / HTTP/1.1\r\nHost: a\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nX-A: a\x01\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\n: a\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nX A: a\r\n\r\n", 400);
}

static void request_lines_out_of_shape_are_refused(void)
{
    refused("GET  / HTTP/1.1\r\n\r\n", 400);
    refused("GET / HTTP/1.1 \r\n\r\n", 400);
    refused("GET /\x7f HTTP/1.1\r\n\r\n", 400);
    refused("GET / HTTP/2.0\r\n\r\n", 505);
    refused("GET / HTTP/1.2\r\n\r\n", 505);
    refused("GET / HTTX/1.1\r\n\r\n", 400);
    refused("GET / HTTP/11\r\n\r\n", 400);
    refused("AVERYVERYLONGMETHOD / HTTP/1.1\r\n\r\n", 400);
    refused("\x01\x02garbage\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nExpect: 101-later\r\n\r\n", 417);
    CHECK_EQ_I64(parse("BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n"), HTTP_HEAD_WHOLE);
    CHECK_EQ_I64(head.method, HTTP_OTHER);
    CHECK_EQ_I64(parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n"),
                 HTTP_HEAD_WHOLE);
    CHECK(head.expect_continue);
}

static void http11_needs_a_host(void)
{
    refused_for("GET / HTTP/1.1\r\n\r\n", 400, true);
    refused_for("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 400, true);
    CHECK_EQ_I64(parse("GET / HTTP/1.0\r\n\r\n"), HTTP_HEAD_WHOLE);
    CHECK_EQ_I64(parse("GET / HTTP/1.1\r\nhOST: a\r\n\r\n"), HTTP_HEAD_WHOLE);
}

/* The path and query an accepted head's target holds. */
static void target_is(const char *text, const char *target, size_t path_length)
{
    CHECK_EQ_I64(parse(text), HTTP_HEAD_WHOLE);
    CHECK_EQ_U64(head.target_length, strlen(target));
    CHECK(memcmp(text + head.target_offset, target, strlen(target)) == 0);
    CHECK_EQ_U64(head.path_length, path_length);
}

static void absolute_form_targets_are_read_as_their_path(void)
{
    target_is("GET http://x/v1/usage/k?y=1 HTTP/1.1\r\nHost: x\r\n\r\n", "/v1/usage/k?y=1",
              strlen("/v1/usage/k"));
    target_is("GET HTTPS://X:8080/a HTTP/1.1\r\nHost: x\r\n\r\n", "/a", 2);
    target_is("GET hTTp://[::1]:80/ HTTP/1.1\r\nHost: x\r\n\r\n", "/", 1);
    target_is("GET http://x HTTP/1.1\r\nHost: x\r\n\r\n", "", 0);
    target_is("GET http://x?q HTTP/1.1\r\nHost: x\r\n\r\n", "?q", 0);
    refused("GET http:///a HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("GET http://?a HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("GET http://u:p@x/a HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("GET http:/a HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("GET ftp://x/a HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("GET http HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("GET a/b HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    refused("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

static void a_length_past_any_bound_saturates(void)
{
    CHECK_EQ_I64(
        parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n"),
        HTTP_HEAD_WHOLE);
    CHECK_EQ_U64(head.content_length, UINT64_MAX);
    CHECK_EQ_I64(
        parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 00000000000000000000000007\r\n\r\n"),
        HTTP_HEAD_WHOLE);
    CHECK_EQ_U64(head.content_length, 7);
}

static void a_head_over_its_bounds_is_431(void)
{
    static char text[HTTP_HEAD_BYTES_MAX + 64];
    strcpy(text, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i <= HTTP_FIELDS_MAX; i++)
        sprintf(text + strlen(text), "X-%d: v\r\n", i);
    strcat(text, "\r\n");
    refused(text, 431);
    /* One field fewer is read. */
    strcpy(text, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i < HTTP_FIELDS_MAX; i++)
        sprintf(text + strlen(text), "X-%d: v\r\n", i);
    strcat(text, "\r\n");
    CHECK_EQ_I64(parse(text), HTTP_HEAD_WHOLE);
    /* 16 KiB without its end. */
    strcpy(text, "GET / HTTP/1.1\r\nX-Big: ");
    memset(text + strlen(text), 'a', HTTP_HEAD_BYTES_MAX);
    text[HTTP_HEAD_BYTES_MAX] = '\0';
    refused(text, 431);
}

struct sink {
    char data[256];
    size_t length;
};

static int collect(void *context, const char *bytes, size_t length)
{
    struct sink *sink = context;
    if (sink->length + length > sizeof sink->data)
        return -1;
    memcpy(sink->data + sink->length, bytes, length);
    sink->length += length;
    return 0;
}

static enum http_chunked_result chunked(const char *text, size_t split, struct sink *sink,
                                        size_t *consumed)
{
    struct http_chunked decoder;
    http_chunked_init(&decoder);
    memset(sink, 0, sizeof *sink);
    size_t length = strlen(text), first = 0, second = 0;
    const char *why = NULL;
    enum http_chunked_result r =
        http_chunked_feed(&decoder, text, split, &first, collect, sink, &why);
    *consumed = first;
    if (r != HTTP_CHUNKED_MORE)
        return r;
    r = http_chunked_feed(&decoder, text + split, length - split, &second, collect, sink, &why);
    *consumed += second;
    return r;
}

static void chunked_bodies_decode_wherever_they_are_split(void)
{
    const char *text = "5;name=value\r\nhello\r\nA\r\n 0123456\r\n\r\n0\r\nX-T: 1\r\n\r\nNEXT";
    size_t body = strlen(text) - 4;
    for (size_t split = 0; split <= strlen(text); split++) {
        struct sink sink;
        size_t consumed;
        CHECK_EQ_I64(chunked(text, split, &sink, &consumed), HTTP_CHUNKED_END);
        CHECK_EQ_U64(consumed, body);
        CHECK_EQ_U64(sink.length, 15);
        CHECK(memcmp(sink.data, "hello 0123456\r\n", 15) == 0);
    }
}

static void chunked_bodies_out_of_shape_are_refused(void)
{
    const char *bad[] = {
        "x\r\n",                    /* not hex */
        "5 \r\nhello\r\n0\r\n\r\n", /* blank after the size */
        "5\nhello\r\n0\r\n\r\n",    /* bare LF */
        "5\r\nhelloX\r\n0\r\n\r\n", /* data longer than its size */
        "1234567890abcdef0\r\n",    /* 17 hex digits */
        "0\r\nX-T: 1\n\r\n",        /* a trailer's bare LF */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sink sink;
        size_t consumed;
        CHECK_EQ_I64(chunked(bad[i], strlen(bad[i]), &sink, &consumed), HTTP_CHUNKED_BAD);
    }
    static char line[HTTP_CHUNK_LINE_BYTES_MAX + 16];
    strcpy(line, "1;");
    memset(line + 2, 'e', HTTP_CHUNK_LINE_BYTES_MAX);
    struct sink sink;
    size_t consumed;
    CHECK_EQ_I64(chunked(line, strlen(line), &sink, &consumed), HTTP_CHUNKED_BAD);
}

int main(void)
{
    RUN(a_plain_request_is_read, "a request's method, target, version, fields and length");
    RUN(every_prefix_of_a_head_is_partial, "every prefix of a head is partial, the whole is whole");
    RUN(the_end_of_a_head_is_one_rule,
        "empty lines before a request are skipped (four at most), a head ends at its first "
        "empty line, a bare LF there is 400, and the parser reads the same end");
    RUN(blanks_around_values_are_not_part_of_them,
        "blanks and tabs around a value are not part of it (Authorization, Content-Length)");
    RUN(http10_closes_unless_it_keeps_alive, "HTTP/1.0 closes unless keep-alive; close is read");
    RUN(framing_that_could_be_read_two_ways_is_refused,
        "two lengths, a signed length, CL beside chunked, folds, bare LF, a space before ':' "
        "are 400 (501 for an unknown coding)");
    RUN(request_lines_out_of_shape_are_refused,
        "request lines out of shape are 400, other versions 505, other expectations 417");
    RUN(http11_needs_a_host, "HTTP/1.1 without Host is 400; HTTP/1.0 needs none");
    RUN(absolute_form_targets_are_read_as_their_path,
        "http://host/path is read as /path (any case, a port, a query; none is \"/\"); an "
        "empty authority, userinfo, another scheme are 400");
    RUN(a_length_past_any_bound_saturates, "a length past 2^64 saturates, never wraps");
    RUN(a_head_over_its_bounds_is_431, "one field past the bound, or 16 KiB, is 431");
    RUN(chunked_bodies_decode_wherever_they_are_split,
        "a chunked body with extensions and trailers decodes the same at every split");
    RUN(chunked_bodies_out_of_shape_are_refused, "chunk sizes, CRLFs and bounds are checked");
    return test_summary();
}
