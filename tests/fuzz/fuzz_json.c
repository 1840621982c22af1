/* libFuzzer harness: llmlimitd's own JSON parser (src/util/jdoc.c), held
 * to jansson as a reference. Both must accept and refuse the same inputs
 * (except where jdoc is stricter by design: nesting past JSON_DEPTH_MAX, a
 * NUL byte, which jansson takes for the end of the input, and reals, whose
 * value jdoc does not keep), and where both accept they must
 * build the same document: kinds, integers, string bytes, array items,
 * object members. */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/jdoc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ERROR_SIZE 256

static bool same_value(const struct jdoc_value *mine, const json_t *reference)
{
    switch (mine->kind) {
    case JDOC_NULL:
        return json_is_null(reference);
    case JDOC_TRUE:
        return json_is_true(reference);
    case JDOC_FALSE:
        return json_is_false(reference);
    case JDOC_INTEGER:
        return json_is_integer(reference) && json_integer_value(reference) == mine->as.integer;
    case JDOC_REAL:
        return json_is_real(reference);
    case JDOC_STRING:
        return json_is_string(reference) && json_string_length(reference) == mine->count &&
               memcmp(json_string_value(reference), mine->as.string, mine->count) == 0 &&
               mine->as.string[mine->count] == '\0';
    case JDOC_ARRAY:
        if (!json_is_array(reference) || json_array_size(reference) != mine->count)
            return false;
        for (uint32_t i = 0; i < mine->count; i++) {
            if (!same_value(&mine->as.items[i], json_array_get(reference, i)))
                return false;
        }
        return true;
    case JDOC_OBJECT:
        if (!json_is_object(reference) || json_object_size(reference) != mine->count)
            return false;
        for (uint32_t i = 0; i < mine->count; i++) {
            const struct jdoc_member *m = &mine->as.members[i];
            assert(strlen(m->key) == m->key_length);
            if (jdoc_get(mine, m->key) != &m->value) /* keys are unique */
                return false;
            const json_t *other = json_object_get(reference, m->key);
            if (other == NULL || !same_value(&m->value, other))
                return false;
        }
        return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    assert(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    static _Alignas(16) char storage[8192];
    struct arena arena;
    arena_init(&arena, storage, sizeof storage);
    struct jdoc_value *root = NULL;
    char error[ERROR_SIZE] = "";
    int mine = jdoc_parse(text, size, &arena, &root, error, sizeof error);
    json_error_t reference_error;
    json_t *reference = json_loadb((const char *)data, size,
                                   JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &reference_error);
    if (mine != 0) {
        assert(root == NULL);
        assert(strncmp(error, "invalid JSON: ", 14) == 0);
        /* jansson stops at a NUL byte, jdoc refuses it */
        bool stricter = strstr(error, "nested deeper") != NULL || memchr(data, 0, size) != NULL;
        assert(reference == NULL || stricter); /* refused what jansson accepts */
    } else {
        bool real_trouble = strstr(reference_error.text, "real") != NULL;
        assert(reference != NULL || real_trouble); /* accepted what jansson refuses */
        if (reference != NULL)
            assert(same_value(root, reference));
    }
    json_decref(reference);
    arena_free(&arena);
    free(text);
    return 0;
}
