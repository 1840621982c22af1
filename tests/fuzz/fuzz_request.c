/* libFuzzer harness: request bodies as llmlimitd decodes them (docs/api.md).
 * Every input goes through the JSON parser and every decoder (reserve,
 * complete, release, batches and their items, limit definitions, registry
 * states); a decoded request must satisfy the bounds the backends assume, and
 * a decoded definition must survive encode -> parse -> decode unchanged. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/buffer.h"
#include "wire/decode.h"
#include "wire/encode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const char *error)
{
    size_t length = strnlen(error, DECODE_ERROR_SIZE);
    assert(length > 0);
    assert(length < DECODE_ERROR_SIZE);
}

static bool keys_unique(const char *const *keys, const uint32_t *lengths, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        for (uint32_t j = 0; j < i; j++) {
            if (lengths[i] == lengths[j] && memcmp(keys[i], keys[j], lengths[i]) == 0)
                return false;
        }
    }
    return true;
}

static void fuzz_reserve(const struct jdoc_value *object, const char *path)
{
    struct reserve_request request;
    struct requirement requirements[REQUIREMENTS_PER_RESERVE_MAX];
    char error[DECODE_ERROR_SIZE] = "";
    if (decode_reserve(object, path, &request, requirements, error, sizeof error) != 0) {
        check_error(error);
        return;
    }
    assert(lease_id_valid(request.lease_id, request.lease_id_length));
    assert(request.requirement_count >= 1);
    assert(request.requirement_count <= REQUIREMENTS_PER_RESERVE_MAX);
    assert(request.caller == NULL || request.caller_length <= CALLER_LENGTH_MAX);
    const char *keys[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t lengths[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < request.requirement_count; i++) {
        const struct requirement *r = &request.requirements[i];
        assert(limit_key_valid(r->key, r->key_length));
        assert(strlen(r->key) == r->key_length); /* backends use it as a C string */
        assert(r->amount >= 1 && r->amount <= AMOUNT_MAX);
        keys[i] = r->key;
        lengths[i] = r->key_length;
    }
    assert(keys_unique(keys, lengths, request.requirement_count));
}

static void fuzz_complete(const struct jdoc_value *object, const char *path)
{
    struct complete_request request;
    struct actual actuals[REQUIREMENTS_PER_RESERVE_MAX];
    char error[DECODE_ERROR_SIZE] = "";
    if (decode_complete(object, path, &request, actuals, error, sizeof error) != 0) {
        check_error(error);
        return;
    }
    assert(lease_id_valid(request.lease_id, request.lease_id_length));
    assert(request.actual_count <= REQUIREMENTS_PER_RESERVE_MAX);
    const char *keys[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t lengths[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < request.actual_count; i++) {
        const struct actual *a = &request.actuals[i];
        assert(limit_key_valid(a->key, a->key_length));
        assert(strlen(a->key) == a->key_length);
        assert(a->actual_amount <= AMOUNT_MAX);
        keys[i] = a->key;
        lengths[i] = a->key_length;
    }
    assert(keys_unique(keys, lengths, request.actual_count));
}

static void fuzz_release(const struct jdoc_value *object)
{
    struct release_request request;
    char error[DECODE_ERROR_SIZE] = "";
    if (decode_release(object, "", &request, error, sizeof error) != 0) {
        check_error(error);
        return;
    }
    assert(lease_id_valid(request.lease_id, request.lease_id_length));
}

static void fuzz_batch(const struct jdoc_value *body)
{
    const struct jdoc_value *requests = NULL;
    char error[DECODE_ERROR_SIZE] = "";
    if (decode_batch(body, &requests, error, sizeof error) != 0) {
        check_error(error);
        return;
    }
    assert(jdoc_is(requests, JDOC_ARRAY));
    assert(requests->count >= 1 && requests->count <= BATCH_ITEMS_MAX);
    for (uint32_t i = 0; i < requests->count && i < 64; i++) {
        char path[32];
        snprintf(path, sizeof path, "requests[%u]", i);
        fuzz_reserve(&requests->as.items[i], path);
        fuzz_complete(&requests->as.items[i], path);
    }
}

static bool same_definition(const struct limit_definition *a, const struct limit_definition *b)
{
    return strcmp(a->key, b->key) == 0 && a->kind == b->kind && a->capacity == b->capacity &&
           a->window_seconds == b->window_seconds && a->timeout_seconds == b->timeout_seconds &&
           a->period == b->period && a->period_anchor_day == b->period_anchor_day &&
           strcmp(a->time_zone, b->time_zone) == 0 && a->zone == b->zone &&
           strcmp(a->unit, b->unit) == 0 && strcmp(a->description, b->description) == 0 &&
           a->overage == b->overage;
}

/* What the registry writes must read back as the same state. */
static void check_round_trip(const struct limit_state *state)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    encode_limit_state(&b, state);
    assert(!b.failed);
    struct arena arena;
    arena_init(&arena, NULL, 0);
    const struct jdoc_value *again = NULL;
    char error[DECODE_ERROR_SIZE] = "";
    int parsed = decode_parse(b.data, b.length, &arena, &again, error, sizeof error);
    assert(parsed == 0);
    struct limit_state decoded;
    int failed = decode_limit_state(again, "[0]", &decoded, error, sizeof error);
    assert(failed == 0);
    assert(same_definition(&state->definition, &decoded.definition));
    assert(decoded.status == state->status);
    assert(decoded.pending_decrease_to == state->pending_decrease_to);
    arena_free(&arena);
    buffer_free(&b);
}

static void fuzz_definition(const struct jdoc_value *object)
{
    struct limit_state state;
    memset(&state, 0, sizeof state);
    char error[DECODE_ERROR_SIZE] = "";
    if (decode_definition(object, "", &state.definition, error, sizeof error) != 0) {
        check_error(error);
    } else {
        struct limit_definition copy = state.definition;
        char again[DECODE_ERROR_SIZE];
        assert(limit_definition_validate(&copy, again, sizeof again) == 0);
        assert(same_definition(&copy, &state.definition)); /* normalising is idempotent */
        check_round_trip(&state);
    }
    if (decode_limit_state(object, "[0]", &state, error, sizeof error) != 0)
        check_error(error);
    else
        check_round_trip(&state);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The parser decodes strings in place: it gets its own copy, as the
     * server's body buffer. */
    char *body = malloc(size + 1);
    assert(body != NULL);
    memcpy(body, data, size);
    body[size] = '\0';
    static _Alignas(16) char storage[16384];
    struct arena arena;
    arena_init(&arena, storage, sizeof storage);
    const struct jdoc_value *root = NULL;
    char error[DECODE_ERROR_SIZE] = "";
    if (decode_parse(body, size, &arena, &root, error, sizeof error) != 0) {
        check_error(error);
    } else {
        assert(root != NULL);
        fuzz_reserve(root, "");
        fuzz_complete(root, "");
        fuzz_release(root);
        fuzz_batch(root);
        fuzz_definition(root);
    }
    arena_free(&arena);
    free(body);
    return 0;
}
