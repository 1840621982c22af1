/* libFuzzer harness: the reserve fast scanner (src/wire/reserve_scan.c)
 * held to the general path it stands in for (decode_parse +
 * decode_reserve_wait for one reserve, decode_batch + decode_reserve for a
 * batch), as src/server/handlers_data.c uses them: whatever the scanner
 * accepts, the general path accepts with the same request (lease id,
 * caller, requirements in order, NUL-terminated in place; wait_ms and
 * priority); whatever the general path refuses, the scanner refuses; and a
 * body the scanner refuses is left untouched for the general path. Every
 * input is tried both as one reserve and as a batch. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/decode.h"
#include "wire/reserve_scan.h"
#include "util/arena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_text(const char *a, uint32_t a_length, const char *b, uint32_t b_length)
{
    if (a == NULL || b == NULL)
        return a == b && a_length == 0 && b_length == 0;
    return a_length == b_length && memcmp(a, b, a_length) == 0;
}

/* What the scanner gives must be what the decoder gives. */
static void check_same_request(const struct reserve_request *scanned,
                               const struct reserve_request *decoded)
{
    assert(same_text(scanned->lease_id, scanned->lease_id_length, decoded->lease_id,
                     decoded->lease_id_length));
    assert(scanned->lease_id[scanned->lease_id_length] == '\0');
    assert(same_text(scanned->caller, scanned->caller_length, decoded->caller,
                     decoded->caller_length));
    assert(scanned->caller == NULL || scanned->caller[scanned->caller_length] == '\0');
    assert(scanned->requirement_count == decoded->requirement_count);
    assert(scanned->requirement_count >= 1);
    assert(scanned->requirement_count <= REQUIREMENTS_PER_RESERVE_MAX);
    for (uint32_t i = 0; i < scanned->requirement_count; i++) {
        const struct requirement *s = &scanned->requirements[i];
        const struct requirement *d = &decoded->requirements[i];
        assert(same_text(s->key, s->key_length, d->key, d->key_length));
        assert(s->key[s->key_length] == '\0'); /* backends use it as a C string */
        assert(s->amount == d->amount);
        assert(s->amount >= 1 && s->amount <= AMOUNT_MAX);
    }
    assert(scanned->states == NULL);
}

/* The general path's verdict on a body: 0 with its document, or -1. */
static int general_parse(const uint8_t *data, size_t size, char **body, struct arena *arena,
                         const struct jdoc_value **root)
{
    *body = malloc(size + 1);
    assert(*body != NULL);
    memcpy(*body, data, size);
    (*body)[size] = '\0';
    char error[DECODE_ERROR_SIZE];
    return decode_parse(*body, size, arena, root, error, sizeof error);
}

static void fuzz_one(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    assert(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    struct reserve_request scanned;
    struct requirement scanned_requirements[REQUIREMENTS_PER_RESERVE_MAX];
    struct reserve_wait scanned_wait;
    int scan = reserve_scan_one(text, size, &scanned, scanned_requirements, &scanned_wait);
    assert(scan == 0 || scan == -1);
    if (scan != 0)
        assert(memcmp(text, data, size) == 0); /* untouched for the general path */

    struct arena arena;
    arena_init(&arena, NULL, 0);
    char *body;
    const struct jdoc_value *root = NULL;
    struct reserve_request decoded;
    struct requirement decoded_requirements[REQUIREMENTS_PER_RESERVE_MAX];
    char error[DECODE_ERROR_SIZE];
    struct reserve_wait decoded_wait;
    int general = general_parse(data, size, &body, &arena, &root) == 0 &&
                          decode_reserve_wait(root, "", &decoded, decoded_requirements,
                                              &decoded_wait, error, sizeof error) == 0
                      ? 0
                      : -1;
    if (general != 0)
        assert(scan != 0); /* what the decoder refuses, the scanner refuses */
    if (scan == 0) {
        check_same_request(&scanned, &decoded);
        assert(scanned_wait.wait_ms == decoded_wait.wait_ms);
        assert(scanned_wait.priority == decoded_wait.priority);
    }
    arena_free(&arena);
    free(body);
    free(text);
}

/* The general path of a batch, as handle_reserve_batch takes it: the body
 * must decode as a batch, and every item as a reserve, for the scanner's
 * acceptance to stand. */
static void check_batch_decodes(const struct jdoc_value *root,
                                const struct reserve_request *scanned, uint32_t count)
{
    const struct jdoc_value *requests = NULL;
    char error[DECODE_ERROR_SIZE];
    assert(decode_batch(root, &requests, error, sizeof error) == 0);
    assert(requests->count == count);
    size_t entries = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct reserve_request decoded;
        struct requirement requirements[REQUIREMENTS_PER_RESERVE_MAX];
        assert(decode_reserve(&requests->as.items[i], "", &decoded, requirements, error,
                              sizeof error) == 0);
        check_same_request(&scanned[i], &decoded);
        entries += decoded.requirement_count;
    }
    assert(entries <= BATCH_REQUIREMENTS_MAX);
}

static void fuzz_batch(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    assert(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    struct arena scan_arena;
    arena_init(&scan_arena, NULL, 0);
    struct reserve_request *scanned = NULL;
    uint32_t count = 0;
    int scan = reserve_scan_batch(text, size, &scan_arena, &scanned, &count);
    assert(scan == 0 || scan == -1);
    if (scan != 0) {
        assert(memcmp(text, data, size) == 0);
    } else {
        assert(count >= 1 && count <= BATCH_ITEMS_MAX);
        struct arena arena;
        arena_init(&arena, NULL, 0);
        char *body;
        const struct jdoc_value *root = NULL;
        assert(general_parse(data, size, &body, &arena, &root) == 0);
        check_batch_decodes(root, scanned, count);
        arena_free(&arena);
        free(body);
    }
    arena_free(&scan_arena);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(data, size);
    fuzz_batch(data, size);
    return 0;
}
