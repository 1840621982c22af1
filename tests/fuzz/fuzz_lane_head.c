/* libFuzzer harness: the request heads the direct path takes
 * (src/server/lane_head.c). Whatever the bytes, a head it accepts lies
 * inside them and ends in a blank line; its path and Authorization value
 * lie inside the head and hold only what the parser allows; and the head
 * alone, without what follows it, is accepted the same. Bytes that end
 * inside a head it would take are a partial head, and so is each shorter
 * prefix of them. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/lane_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct lane_head head;
    int parsed = lane_head_parse(text, size, &head);
    assert(parsed == LANE_HEAD_REFUSED || parsed == LANE_HEAD_WHOLE || parsed == LANE_HEAD_PARTIAL);
    if (parsed == LANE_HEAD_PARTIAL && size > 0) {
        /* a prefix of a head it would take is one too */
        struct lane_head shorter;
        assert(lane_head_parse(text, size - 1, &shorter) == LANE_HEAD_PARTIAL);
    }
    if (parsed != LANE_HEAD_WHOLE)
        return 0;
    assert(head.length >= 4 && head.length <= size);
    assert(memcmp(text + head.length - 4, "\r\n\r\n", 4) == 0);
    assert(memcmp(text, "POST /", 6) == 0);
    assert(head.path_offset == 5);
    assert(head.path_length >= 1 && head.path_offset + head.path_length < head.length);
    for (size_t i = 0; i < head.path_length; i++) {
        char c = text[head.path_offset + i];
        assert(c != ' ' && c != '\r' && c != '\n' && c != '%' && c != '?' && c != '\0');
    }
    assert(head.content_length <= UINT64_C(9999999999999999999));
    for (size_t i = 0; i < head.length; i++)
        assert(text[i] != '\0');
    if (head.has_authorization) {
        assert(head.authorization_offset + head.authorization_length <= head.length - 4);
        for (size_t i = 0; i < head.authorization_length; i++) {
            char c = text[head.authorization_offset + i];
            assert(c != '\r' && c != '\n');
        }
    }
    struct lane_head again;
    int accepted = lane_head_parse(text, head.length, &again);
    assert(accepted == LANE_HEAD_WHOLE);
    assert(memcmp(&again, &head, sizeof head) == 0);
    return 0;
}
