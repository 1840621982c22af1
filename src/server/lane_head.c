/* The direct path's request heads (see lane_head.h). */
#include "lane_head.h"

#include <assert.h>
#include <string.h>

static bool path_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
           c == '.' || c == '_' || c == '~' || c == '-';
}

/* RFC 9110 tchar. */
static bool token_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool value_char(char c)
{
    return (c >= 0x20 && c <= 0x7e) || c == '\t';
}

/* text[0, length) equals lower (all lower case), case aside. */
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

static bool parse_length(const char *text, size_t length, uint64_t *out)
{
    if (length == 0 || length > 19)
        return false;
    uint64_t value = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (uint64_t)(text[i] - '0'); /* 19 digits fit */
    }
    *out = value;
    return true;
}

/* One header line from *at: LANE_HEAD_WHOLE when it is acceptable (and
 * recorded), LANE_HEAD_PARTIAL when the bytes end inside it. */
static int field(const char *data, size_t length, size_t *at, struct lane_head *head,
                 bool *has_length)
{
    size_t i = *at;
    size_t name = i;
    while (i < length && token_char(data[i]))
        i++;
    if (i >= length)
        return LANE_HEAD_PARTIAL;
    if (i == name || data[i] != ':')
        return LANE_HEAD_REFUSED;
    size_t name_length = i - name;
    i++;
    while (i < length && (data[i] == ' ' || data[i] == '\t'))
        i++;
    size_t value = i;
    while (i < length && value_char(data[i]))
        i++;
    if (i >= length || (data[i] == '\r' && i + 1 == length))
        return LANE_HEAD_PARTIAL;
    if (data[i] != '\r' || data[i + 1] != '\n')
        return LANE_HEAD_REFUSED;
    size_t end = i;
    while (end > value && (data[end - 1] == ' ' || data[end - 1] == '\t'))
        end--;
    *at = i + 2;
    const char *n = data + name;
    const char *v = data + value;
    size_t v_length = end - value;
    if (same(n, name_length, "content-length")) {
        if (*has_length || !parse_length(v, v_length, &head->content_length))
            return LANE_HEAD_REFUSED;
        *has_length = true;
    } else if (same(n, name_length, "transfer-encoding") || same(n, name_length, "expect") ||
               same(n, name_length, "upgrade")) {
        return LANE_HEAD_REFUSED;
    } else if (same(n, name_length, "connection")) {
        if (same(v, v_length, "close"))
            head->close = true;
        else if (!same(v, v_length, "keep-alive"))
            return LANE_HEAD_REFUSED;
    } else if (same(n, name_length, "authorization")) {
        if (head->has_authorization)
            return LANE_HEAD_REFUSED;
        head->has_authorization = true;
        head->authorization_offset = value;
        head->authorization_length = v_length;
    }
    return LANE_HEAD_WHOLE;
}

/* data[0, length) against the start of text: the bytes agree with it, and
 * end before it does. */
static bool prefix_of(const char *data, size_t length, const char *text)
{
    return length < strlen(text) && memcmp(data, text, length) == 0;
}

int lane_head_parse(const char *data, size_t length, struct lane_head *head)
{
    memset(head, 0, sizeof *head);
    static const char method[] = "POST /";
    static const char version[] = " HTTP/1.1\r\n";
    if (length < sizeof method - 1)
        return prefix_of(data, length, method) ? LANE_HEAD_PARTIAL : LANE_HEAD_REFUSED;
    if (memcmp(data, method, sizeof method - 1) != 0)
        return LANE_HEAD_REFUSED;
    size_t at = sizeof method - 2; /* the '/' */
    head->path_offset = at;
    while (at < length && path_char(data[at]))
        at++;
    head->path_length = at - head->path_offset;
    if (length - at < sizeof version - 1)
        return prefix_of(data + at, length - at, version) ? LANE_HEAD_PARTIAL : LANE_HEAD_REFUSED;
    if (memcmp(data + at, version, sizeof version - 1) != 0)
        return LANE_HEAD_REFUSED;
    at += sizeof version - 1;
    bool has_length = false;
    for (unsigned lines = 0;; lines++) {
        if (at == length || (at + 1 == length && data[at] == '\r'))
            return LANE_HEAD_PARTIAL;
        if (data[at] == '\r') {
            if (data[at + 1] != '\n')
                return LANE_HEAD_REFUSED;
            at += 2;
            break;
        }
        if (lines == LANE_HEAD_FIELDS_MAX)
            return LANE_HEAD_REFUSED;
        int line = field(data, length, &at, head, &has_length);
        if (line != LANE_HEAD_WHOLE)
            return line;
        assert(at <= length);
    }
    if (!has_length)
        return LANE_HEAD_REFUSED;
    head->length = at;
    return LANE_HEAD_WHOLE;
}
