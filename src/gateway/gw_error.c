/* One JSON string writer that validates UTF-8 as it goes (a run of plain
 * bytes is copied in one go), and the encoders on top of it. */
#include "gw_error.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "util/utf8.h"

/* The escape for the n bytes at s, or NULL when they pass as they are. */
static const char *escape_for(const unsigned char *s, size_t n, char out[8])
{
    static const char hex[] = "0123456789abcdef";
    if (n == 0 || s[0] == 0)
        return "\\ufffd"; /* not UTF-8; or NUL, where a C reader would cut the text */
    if (n == 3 && s[0] == 0xE2 && s[1] == 0x80 && (s[2] == 0xA8 || s[2] == 0xA9))
        return s[2] == 0xA8 ? "\\u2028" : "\\u2029";
    if (n > 1 || (s[0] >= 0x20 && s[0] != '"' && s[0] != '\\'))
        return NULL;
    switch (s[0]) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        memcpy(out, "\\u00", 4);
        out[4] = hex[s[0] >> 4], out[5] = hex[s[0] & 15], out[6] = '\0';
        return out;
    }
}

void gw_json_string(struct buffer *b, const char *text, size_t length)
{
    assert(text != NULL || length == 0);
    const unsigned char *s = (const unsigned char *)text;
    buffer_append_char(b, '"');
    size_t run = 0, i = 0; /* bytes from run to i pass as they are */
    while (i < length) {
        size_t n = utf8_sequence_length(s + i, length - i);
        char scratch[8];
        const char *escape = escape_for(s + i, n, scratch);
        if (escape == NULL) {
            i += n;
            continue;
        }
        buffer_append(b, text + run, i - run);
        buffer_append_str(b, escape);
        i += n > 0 ? n : 1;
        run = i;
    }
    buffer_append(b, text + run, length - run);
    buffer_append_char(b, '"');
}

static void string_or_null(struct buffer *b, const char *text)
{
    if (text == NULL)
        buffer_append_str(b, "null");
    else
        gw_json_string(b, text, strlen(text));
}

void gw_error_openai(struct buffer *b, const char *message, const char *type, const char *param,
                     const char *code)
{
    assert(message != NULL && type != NULL);
    buffer_append_str(b, "{\"error\":{\"message\":");
    gw_json_string(b, message, strlen(message));
    buffer_append_str(b, ",\"type\":");
    gw_json_string(b, type, strlen(type));
    buffer_append_str(b, ",\"param\":");
    string_or_null(b, param);
    buffer_append_str(b, ",\"code\":");
    string_or_null(b, code);
    buffer_append_str(b, "}}");
}

const char *gw_anthropic_error_type(enum gw_anthropic_error error)
{
    static const char *const types[] = {
        [GW_ANTHROPIC_INVALID_REQUEST] = "invalid_request_error",
        [GW_ANTHROPIC_AUTHENTICATION] = "authentication_error",
        [GW_ANTHROPIC_PERMISSION] = "permission_error",
        [GW_ANTHROPIC_NOT_FOUND] = "not_found_error",
        [GW_ANTHROPIC_REQUEST_TOO_LARGE] = "request_too_large",
        [GW_ANTHROPIC_RATE_LIMIT] = "rate_limit_error",
        [GW_ANTHROPIC_API_ERROR] = "api_error",
        [GW_ANTHROPIC_OVERLOADED] = "overloaded_error",
    };
    assert(error >= GW_ANTHROPIC_INVALID_REQUEST && error <= GW_ANTHROPIC_OVERLOADED);
    return types[error];
}

enum gw_anthropic_error gw_anthropic_error_for_status(unsigned status)
{
    switch (status) {
    case 401:
        return GW_ANTHROPIC_AUTHENTICATION;
    case 403:
        return GW_ANTHROPIC_PERMISSION;
    case 404:
        return GW_ANTHROPIC_NOT_FOUND;
    case 413:
        return GW_ANTHROPIC_REQUEST_TOO_LARGE;
    case 429:
        return GW_ANTHROPIC_RATE_LIMIT;
    case 503:
    case 529:
        return GW_ANTHROPIC_OVERLOADED;
    default:
        return status >= 500 ? GW_ANTHROPIC_API_ERROR : GW_ANTHROPIC_INVALID_REQUEST;
    }
}

void gw_error_anthropic(struct buffer *b, enum gw_anthropic_error error, const char *message,
                        const char *request_id)
{
    assert(message != NULL);
    buffer_append_str(b, "{\"type\":\"error\",\"error\":{\"type\":");
    gw_json_string(b, gw_anthropic_error_type(error), strlen(gw_anthropic_error_type(error)));
    buffer_append_str(b, ",\"message\":");
    gw_json_string(b, message, strlen(message));
    buffer_append_char(b, '}');
    if (request_id != NULL) {
        buffer_append_str(b, ",\"request_id\":");
        gw_json_string(b, request_id, strlen(request_id));
    }
    buffer_append_char(b, '}');
}

bool gw_should_not_retry(unsigned status, int64_t retry_after_ms)
{
    assert(retry_after_ms >= 0); /* the status may be an upstream's: any number */
    switch (status) {
    case 408:
    case 409:
    case 425:
        return false;
    case 429:
        return retry_after_ms > GW_SHOULD_RETRY_MS_MAX;
    case 501:
    case 505:
        return true;
    default:
        return status >= 400 && status <= 499;
    }
}
