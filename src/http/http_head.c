/* Request heads (see http_head.h): the request line, then one field per
 * line, each line ending in CRLF, then a blank line. */
#include "http_head.h"

#include <assert.h>
#include <string.h>

/* RFC 9110 tchar. */
static bool token_char(unsigned char c)
{
    static const char others[] = "!#$%&'*+-.^_`|~";
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && memchr(others, c, sizeof others - 1) != NULL);
}

/* field-vchar, SP and HTAB (obs-text included: values are compared, never
 * interpreted as text). */
static bool value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* text[0, length) equals lower (lower case, NUL-terminated), case aside. */
static bool same(const char *text, size_t length, const char *lower)
{
    size_t n = strlen(lower);
    if (length != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lower[i])
            return false;
    }
    return true;
}

enum http_method http_method_of(const char *text, size_t length)
{
    static const struct {
        const char *name;
        enum http_method method;
    } methods[] = {{"POST", HTTP_POST},     {"GET", HTTP_GET},     {"PUT", HTTP_PUT},
                   {"DELETE", HTTP_DELETE}, {"PATCH", HTTP_PATCH}, {"HEAD", HTTP_HEAD}};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        if (strlen(methods[i].name) == length && memcmp(methods[i].name, text, length) == 0)
            return methods[i].method;
    }
    return HTTP_OTHER;
}

const char *http_method_name(enum http_method method)
{
    switch (method) {
    case HTTP_GET:
        return "GET";
    case HTTP_HEAD:
        return "HEAD";
    case HTTP_POST:
        return "POST";
    case HTTP_PUT:
        return "PUT";
    case HTTP_DELETE:
        return "DELETE";
    case HTTP_PATCH:
        return "PATCH";
    case HTTP_OTHER:
        break;
    }
    return "OTHER";
}

struct cursor {
    const char *data;
    size_t length;
    size_t at;
    unsigned status;
    const char *reason;
};

static enum http_head_result bad(struct cursor *c, unsigned status, const char *reason)
{
    c->status = status;
    c->reason = reason;
    return HTTP_HEAD_BAD;
}

/* The line starting at c->at, without its CRLF: *line and *length (the line
 * ends at c->at + *length, where its CR stands). BAD for a bare LF or a CR
 * inside the line. The cursor holds a whole head (http_head_end): every line
 * in it ends in LF. */
static enum http_head_result line_at(struct cursor *c, const char **line, size_t *length)
{
    const char *lf = memchr(c->data + c->at, '\n', c->length - c->at);
    if (lf == NULL)
        return HTTP_HEAD_PARTIAL; /* never in a whole head (parse) */
    size_t end = (size_t)(lf - c->data);
    if (end == c->at || c->data[end - 1] != '\r')
        return bad(c, 400, "a line ending in a bare LF");
    if (memchr(c->data + c->at, '\r', end - 1 - c->at) != NULL)
        return bad(c, 400, "a CR inside a line");
    *line = c->data + c->at;
    *length = end - 1 - c->at;
    return HTTP_HEAD_WHOLE;
}

/* "HTTP/1.0" or "HTTP/1.1" at text[0, length). */
static enum http_head_result version(struct cursor *c, const char *text, size_t length,
                                     struct http_head *head)
{
    if (length != 8 || memcmp(text, "HTTP/", 5) != 0 || text[6] != '.' || text[5] < '0' ||
        text[5] > '9' || text[7] < '0' || text[7] > '9')
        return bad(c, 400, "the request line's version is not HTTP/x.y");
    if (text[5] != '1' || (text[7] != '0' && text[7] != '1'))
        return bad(c, 505, "HTTP version not supported: only HTTP/1.0 and HTTP/1.1");
    head->version_minor = (uint8_t)(text[7] - '0');
    return HTTP_HEAD_WHOLE;
}

/* An absolute-form target (RFC 9112 section 3.2.2, which a server must
 * accept): "http://" or "https://", any case, then an authority that is not
 * empty and holds no userinfo (RFC 9110 section 4.2.4), then what an
 * origin-form target holds. *skip is the length of the scheme and
 * authority. */
static enum http_head_result absolute_form(struct cursor *c, const char *text, size_t length,
                                           size_t *skip)
{
    size_t at = 0;
    if (length >= 7 && same(text, 7, "http://"))
        at = 7;
    else if (length >= 8 && same(text, 8, "https://"))
        at = 8;
    else
        return bad(c, 400, "the request-target must be a path starting with '/' or http://");
    size_t authority = at;
    while (at < length && text[at] != '/' && text[at] != '?') {
        if (text[at] == '@')
            return bad(c, 400, "the request-target's authority holds userinfo ('@')");
        at++;
    }
    if (at == authority)
        return bad(c, 400, "the request-target's authority is empty");
    *skip = at;
    return HTTP_HEAD_WHOLE;
}

/* method SP request-target SP HTTP-version CRLF. */
static enum http_head_result request_line(struct cursor *c, struct http_head *head)
{
    const char *line;
    size_t length;
    enum http_head_result r = line_at(c, &line, &length);
    if (r != HTTP_HEAD_WHOLE)
        return r;
    size_t method = 0;
    while (method < length && token_char((unsigned char)line[method]))
        method++;
    if (method == 0 || method > HTTP_METHOD_LENGTH_MAX || method >= length || line[method] != ' ')
        return bad(c, 400, "the request line does not start with a method and one space");
    head->method = http_method_of(line, method);
    size_t target = method + 1;
    size_t end = target;
    while (end < length && line[end] > 0x20 && line[end] < 0x7f)
        end++;
    if (end == target || end >= length || line[end] != ' ')
        return bad(c, 400, "the request-target is missing or holds a control or non-ASCII byte");
    size_t path = target;
    if (line[target] != '/') {
        size_t skip = 0;
        r = absolute_form(c, line + target, end - target, &skip);
        if (r != HTTP_HEAD_WHOLE)
            return r;
        path += skip;
    }
    head->target_offset = (uint32_t)(c->at + path);
    head->target_length = (uint32_t)(end - path);
    const char *question = memchr(line + path, '?', end - path);
    head->path_length =
        (uint32_t)(question != NULL ? (size_t)(question - (line + path)) : end - path);
    r = version(c, line + end + 1, length - end - 1, head);
    c->at += length + 2; /* past the CRLF */
    return r;
}

/* 1*DIGIT, saturating: a length past any bound is refused by its caller as
 * too large, never wrapped around. */
static bool decimal(const char *text, size_t length, uint64_t *out)
{
    if (length == 0)
        return false;
    uint64_t value = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        uint64_t digit = (uint64_t)(text[i] - '0');
        value = value > (UINT64_MAX - digit) / 10 ? UINT64_MAX : value * 10 + digit;
    }
    *out = value;
    return true;
}

/* The comma-separated tokens of a Connection value. */
static void connection_tokens(const char *value, size_t length, struct http_head *head,
                              bool *keep_alive)
{
    size_t i = 0;
    while (i < length) {
        while (i < length && (value[i] == ' ' || value[i] == '\t' || value[i] == ','))
            i++;
        size_t start = i;
        while (i < length && value[i] != ',' && value[i] != ' ' && value[i] != '\t')
            i++;
        if (same(value + start, i - start, "close"))
            head->close = true;
        else if (same(value + start, i - start, "keep-alive"))
            *keep_alive = true;
    }
}

struct seen {
    bool host;
    bool transfer_encoding;
    bool keep_alive;
};

/* What the server itself reads from a field. */
static enum http_head_result field_meaning(struct cursor *c, struct http_head *head,
                                           const struct http_field *f, struct seen *seen)
{
    const char *name = c->data + f->name_offset;
    const char *value = c->data + f->value_offset;
    size_t length = f->value_length;
    if (same(name, f->name_length, "content-length")) {
        if (head->has_content_length)
            return bad(c, 400, "Content-Length: given more than once");
        if (!decimal(value, length, &head->content_length))
            return bad(c, 400, "Content-Length: must be a decimal number");
        head->has_content_length = true;
    } else if (same(name, f->name_length, "transfer-encoding")) {
        if (seen->transfer_encoding)
            return bad(c, 400, "Transfer-Encoding: given more than once");
        seen->transfer_encoding = true;
        if (!same(value, length, "chunked"))
            return bad(c, 501, "Transfer-Encoding: only chunked is supported");
        head->chunked = true;
    } else if (same(name, f->name_length, "connection")) {
        connection_tokens(value, length, head, &seen->keep_alive);
    } else if (same(name, f->name_length, "expect")) {
        if (!same(value, length, "100-continue"))
            return bad(c, 417, "Expect: only 100-continue is supported");
        head->expect_continue = true;
    } else if (same(name, f->name_length, "host")) {
        if (seen->host)
            return bad(c, 400, "Host: given more than once");
        seen->host = true;
    } else if (same(name, f->name_length, "authorization")) {
        if (head->authorization >= 0)
            return bad(c, 400, "Authorization: given more than once");
        head->authorization = (int32_t)head->field_count;
    }
    return HTTP_HEAD_WHOLE;
}

/* field-name ":" OWS field-value OWS CRLF: line[0, length) at c->at, not
 * empty. */
static enum http_head_result field_line(struct cursor *c, struct http_head *head, struct seen *seen,
                                        const char *line, size_t length)
{
    if (line[0] == ' ' || line[0] == '\t')
        return bad(c, 400, "a folded header line (obs-fold)");
    size_t colon = 0;
    while (colon < length && token_char((unsigned char)line[colon]))
        colon++;
    if (colon == 0 || colon >= length || line[colon] != ':')
        return bad(c, 400, "a header name must be a token followed at once by ':'");
    size_t value = colon + 1;
    while (value < length && (line[value] == ' ' || line[value] == '\t'))
        value++;
    size_t end = length;
    while (end > value && (line[end - 1] == ' ' || line[end - 1] == '\t'))
        end--;
    for (size_t i = value; i < end; i++) {
        if (!value_char((unsigned char)line[i]))
            return bad(c, 400, "a header value holds a control byte");
    }
    if (head->field_count == HTTP_FIELDS_MAX)
        return bad(c, 431, "too many header fields");
    struct http_field *f = &head->fields[head->field_count];
    f->name_offset = (uint32_t)c->at;
    f->name_length = (uint16_t)colon;
    f->value_offset = (uint32_t)(c->at + value);
    f->value_length = (uint32_t)(end - value);
    enum http_head_result r = field_meaning(c, head, f, seen);
    if (r != HTTP_HEAD_WHOLE)
        return r;
    head->field_count++;
    c->at += length + 2; /* past the CRLF */
    return HTTP_HEAD_WHOLE;
}

/* What the fields mean together (RFC 9112 sections 6.1 and 9.3). */
static enum http_head_result framing(struct cursor *c, struct http_head *head,
                                     const struct seen *seen)
{
    if (head->chunked && head->has_content_length)
        return bad(c, 400, "Content-Length and Transfer-Encoding together");
    if (head->chunked && head->version_minor == 0)
        return bad(c, 400, "Transfer-Encoding in an HTTP/1.0 request");
    if (head->version_minor == 1 && !seen->host)
        return bad(c, 400, "Host: missing (required in HTTP/1.1)");
    if (head->version_minor == 0 && !seen->keep_alive)
        head->close = true;
    return HTTP_HEAD_WHOLE;
}

/* The CRLFs before the request line that are skipped: their length. */
static size_t leading_empty_lines(const char *data, size_t length)
{
    size_t at = 0;
    for (int i = 0; i < HTTP_LEADING_EMPTY_LINES_MAX && length - at >= 2 && data[at] == '\r' &&
                    data[at + 1] == '\n';
         i++)
        at += 2;
    return at;
}

enum line_kind { LINE_EMPTY, LINE_NOT_EMPTY, LINE_UNKNOWN };

/* Is the line starting at data[at] empty (then *end is where it ends), or
 * do the bytes end before that shows? */
static enum line_kind line_kind(const char *data, size_t length, size_t at, size_t *end)
{
    if (at == length)
        return LINE_UNKNOWN;
    if (data[at] == '\n') {
        *end = at + 1;
        return LINE_EMPTY;
    }
    if (data[at] != '\r')
        return LINE_NOT_EMPTY;
    if (at + 1 == length)
        return LINE_UNKNOWN;
    if (data[at + 1] != '\n')
        return LINE_NOT_EMPTY;
    *end = at + 2;
    return LINE_EMPTY;
}

size_t http_head_end(const char *data, size_t length, size_t *scanned)
{
    assert(*scanned <= length);
    size_t start = leading_empty_lines(data, length);
    /* Past start, *scanned is where to look for the next LF, in a line
     * known not to be empty; so start stays where it is as bytes come. */
    size_t at = *scanned;
    size_t end = 0;
    if (at <= start) {
        enum line_kind kind = line_kind(data, length, start, &end);
        if (kind == LINE_EMPTY)
            return end;
        if (kind == LINE_UNKNOWN) {
            *scanned = 0;
            return 0;
        }
        at = start + 1;
    }
    while (at < length) {
        const char *lf = memchr(data + at, '\n', length - at);
        if (lf == NULL)
            break;
        size_t next = (size_t)(lf - data) + 1;
        enum line_kind kind = line_kind(data, length, next, &end);
        if (kind == LINE_EMPTY)
            return end;
        if (kind == LINE_UNKNOWN) {
            *scanned = next - 1; /* this LF is found again */
            return 0;
        }
        at = next + 1;
    }
    *scanned = length;
    return 0;
}

/* The head in c->data[0, c->length), whose end http_head_end found: each
 * line in it ends in LF, and the first empty one is its last. */
static enum http_head_result parse(struct cursor *c, struct http_head *head)
{
    c->at = leading_empty_lines(c->data, c->length);
    enum http_head_result r = request_line(c, head);
    if (r != HTTP_HEAD_WHOLE)
        return r;
    struct seen seen = {0};
    for (;;) {
        const char *line;
        size_t length;
        r = line_at(c, &line, &length);
        if (r != HTTP_HEAD_WHOLE)
            return r;
        if (length == 0) {
            c->at += 2;
            break;
        }
        r = field_line(c, head, &seen, line, length);
        if (r != HTTP_HEAD_WHOLE)
            return r;
    }
    head->length = (uint32_t)c->at;
    return framing(c, head, &seen);
}

enum http_head_result http_head_parse(const char *data, size_t length, struct http_head *head,
                                      unsigned *status, const char **reason)
{
    head->length = 0;
    head->method = HTTP_OTHER;
    head->target_offset = head->target_length = head->path_length = 0;
    head->version_minor = 1;
    head->has_content_length = head->chunked = head->close = head->expect_continue = false;
    head->content_length = 0;
    head->authorization = -1;
    head->field_count = 0;
    size_t scanned = 0;
    size_t end =
        http_head_end(data, length < HTTP_HEAD_BYTES_MAX ? length : HTTP_HEAD_BYTES_MAX, &scanned);
    struct cursor c = {data, end, 0, 0, NULL};
    enum http_head_result r = HTTP_HEAD_PARTIAL;
    if (end > 0)
        r = parse(&c, head);
    else if (length >= HTTP_HEAD_BYTES_MAX)
        r = bad(&c, 431, "the request head is larger than 16 KiB");
    if (r == HTTP_HEAD_BAD) {
        assert(c.status >= 400);
        *status = c.status;
        *reason = c.reason;
        return r;
    }
    assert(r == HTTP_HEAD_PARTIAL || head->length == end);
    return r;
}

const char *http_head_field(const struct http_head *head, const char *data, const char *name,
                            size_t *length)
{
    for (uint32_t i = 0; i < head->field_count; i++) {
        const struct http_field *f = &head->fields[i];
        if (same(data + f->name_offset, f->name_length, name)) {
            *length = f->value_length;
            return data + f->value_offset;
        }
    }
    *length = 0;
    return NULL;
}
