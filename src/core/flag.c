/* Flags described by a table (see flag.h). */
#include "flag.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct flag *flag_find(const struct flag *rows, size_t count, const char *name, size_t length)
{
    for (size_t i = 0; i < count; i++) {
        if (strlen(rows[i].name) == length && memcmp(rows[i].name, name, length) == 0)
            return &rows[i];
    }
    return NULL;
}

int flag_parse_u64(const char *text, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = value;
    return 0;
}

int flag_apply(const struct flag *row, void *object, const char *text)
{
    assert(text != NULL);
    assert(row->min <= row->max);
    char *field = (char *)object + row->offset;
    uint64_t number;
    switch (row->kind) {
    case FLAG_STRING:
        if (text[0] == '\0')
            return -1;
        *(const char **)(void *)field = text;
        return 0;
    case FLAG_U32:
    case FLAG_U64:
    case FLAG_I64_SCALED:
        if (flag_parse_u64(text, &number) != 0 || number < row->min || number > row->max)
            return -1;
        if (row->kind == FLAG_U32) {
            assert(row->max <= UINT32_MAX);
            *(uint32_t *)(void *)field = (uint32_t)number;
        } else if (row->kind == FLAG_U64) {
            *(uint64_t *)(void *)field = number;
        } else {
            assert(row->scale > 0);
            assert(row->max <= (uint64_t)(INT64_MAX / row->scale));
            *(int64_t *)(void *)field = (int64_t)number * row->scale;
        }
        return 0;
    case FLAG_CHOICE:
        assert(row->choices != NULL);
        for (int i = 0; i < 2; i++) {
            if (strcmp(text, row->choices[i]) == 0) {
                *(bool *)(void *)field = i == 1;
                return 0;
            }
        }
        return -1;
    case FLAG_SWITCH:
        *(bool *)(void *)field = true;
        return 0;
    case FLAG_OTHER:
        break;
    }
    return -1;
}

void flag_value_text(const struct flag *row, const void *object, char *text, size_t size)
{
    const char *field = (const char *)object + row->offset;
    switch (row->kind) {
    case FLAG_STRING: {
        const char *s = *(const char *const *)(const void *)field;
        snprintf(text, size, "%s", s != NULL ? s : "none");
        return;
    }
    case FLAG_U32:
        snprintf(text, size, "%" PRIu32, *(const uint32_t *)(const void *)field);
        return;
    case FLAG_U64:
        snprintf(text, size, "%" PRIu64, *(const uint64_t *)(const void *)field);
        return;
    case FLAG_I64_SCALED:
        snprintf(text, size, "%" PRId64, *(const int64_t *)(const void *)field / row->scale);
        return;
    case FLAG_CHOICE:
        snprintf(text, size, "%s", row->choices[*(const bool *)(const void *)field ? 1 : 0]);
        return;
    case FLAG_SWITCH:
        snprintf(text, size, "%s", *(const bool *)(const void *)field ? "on" : "off");
        return;
    case FLAG_OTHER:
        break;
    }
    snprintf(text, size, "?");
}

void flag_expected_text(const struct flag *row, char *text, size_t size)
{
    if (row->kind == FLAG_U32 || row->kind == FLAG_U64 || row->kind == FLAG_I64_SCALED)
        snprintf(text, size, "%s in %" PRIu64 "..%" PRIu64, row->metavar, row->min, row->max);
    else
        snprintf(text, size, "%s", row->metavar != NULL ? row->metavar : "no value");
}
