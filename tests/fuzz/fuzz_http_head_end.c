/* libFuzzer harness: where a head ends (src/http/http_head.c). The
 * connection finds a head's end with http_head_end and then parses exactly
 * those bytes with http_head_parse (src/http/http_conn.c); when the two
 * disagreed, four bytes stopped the server. Whatever the bytes, they agree:
 * no end found is a partial head (or 431 past 16 KiB); an end found is a
 * head that is whole there or refused, never partial, and parses the same
 * from its own bytes as from all of them; the end is the same whether the
 * bytes come at once, one at a time, or in pieces the input chooses, and
 * every prefix shorter than it holds no end. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "http/http_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct verdict {
    enum http_head_result result;
    unsigned status;
    uint32_t length;
};

static struct verdict parsed(const char *text, size_t length)
{
    static struct http_head head;
    struct verdict v = {0, 0, 0};
    const char *reason = NULL;
    v.result = http_head_parse(text, length, &head, &v.status, &reason);
    if (v.result == HTTP_HEAD_WHOLE)
        v.length = head.length;
    if (v.result == HTTP_HEAD_BAD)
        assert(reason != NULL);
    return v;
}

/* The end found when the bytes come `step` at a time, as the connection
 * reads them, its scan carried from call to call. */
static size_t end_in_pieces(const char *text, size_t size, size_t step)
{
    size_t scanned = 0;
    for (size_t length = 0;; length += step) {
        if (length > size)
            length = size;
        size_t end = http_head_end(text, length, &scanned);
        assert(scanned <= length);
        if (end > 0 || length == size)
            return end;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t scanned = 0;
    size_t end = http_head_end(text, size, &scanned);
    assert(end <= size);
    struct verdict all = parsed(text, size);
    if (end == 0 || end > HTTP_HEAD_BYTES_MAX) {
        /* No end within the bound: partial, or 431 once the bytes pass it. */
        if (size < HTTP_HEAD_BYTES_MAX) {
            assert(end == 0);
            assert(all.result == HTTP_HEAD_PARTIAL);
        } else {
            assert(all.result == HTTP_HEAD_BAD);
            assert(all.status == 431);
        }
    } else {
        assert(all.result != HTTP_HEAD_PARTIAL);
        assert(all.result == HTTP_HEAD_BAD || all.length == end);
        /* The connection parses exactly the head's bytes. */
        struct verdict own = parsed(text, end);
        assert(own.result == all.result);
        assert(own.status == all.status);
        assert(own.length == all.length);
        /* The end is the first: one byte fewer holds none. */
        size_t none = 0;
        assert(http_head_end(text, end - 1, &none) == 0);
        assert(parsed(text, end - 1).result == HTTP_HEAD_PARTIAL);
    }
    /* However the bytes come, the same end. */
    assert(end_in_pieces(text, size, 1) == end);
    size_t step = size > 0 ? (size_t)data[0] % 64 + 1 : 1;
    assert(end_in_pieces(text, size, step) == end);
    return 0;
}
