/* UTF-8 validation, one sequence at a time: the JSON parser (jdoc.c) and the
 * gateway's JSON string writer (gateway/gw_error.c) accept exactly the same
 * text, RFC 3629's, with no overlong forms, surrogates or code points above
 * U+10FFFF. Inline: both call it once per non-ASCII character. */
#ifndef LLMLIMIT_UTIL_UTF8_H
#define LLMLIMIT_UTIL_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1..4; s holds `available` bytes,
 * at least 1), or 0 if it is not one. */
static inline size_t utf8_sequence_length(const unsigned char *s, size_t available)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (n == 0 || n > available)
        return 0;
    unsigned low = 0x80, high = 0xBF; /* range of the second byte */
    if (c == 0xE0)
        low = 0xA0; /* overlong */
    else if (c == 0xED)
        high = 0x9F; /* surrogates */
    else if (c == 0xF0)
        low = 0x90; /* overlong */
    else if (c == 0xF4)
        high = 0x8F; /* above U+10FFFF */
    if (s[1] < low || s[1] > high)
        return 0;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    }
    return n;
}

#endif
