/* Command-line flags described by a table (docs/configuration.md): each row
 * names a flag, its value's kind and bounds, where the value goes in some
 * struct, and its help line, so that --help can never drift from the
 * parser. llmlimitd's own flags are a table (src/server/config.c), and so are
 * each backend's (backend_ops.flags): a backend owns its flags the way it
 * owns its options struct. */
#ifndef LLMLIMIT_CORE_FLAG_H
#define LLMLIMIT_CORE_FLAG_H

#include <stddef.h>
#include <stdint.h>

enum flag_kind {
    FLAG_STRING,     /* const char *, not empty */
    FLAG_U32,        /* uint32_t in min..max */
    FLAG_U64,        /* uint64_t in min..max */
    FLAG_I64_SCALED, /* int64_t: the value in min..max times scale (days to ms, ...) */
    FLAG_CHOICE,     /* bool: choices[0] false, choices[1] true */
    FLAG_SWITCH,     /* bool, set by the flag alone (no value) */
    FLAG_OTHER,      /* parsed by the table's owner itself */
};

struct flag {
    const char *name; /* "--tb-sessions" */
    const char *metavar;
    enum flag_kind kind;
    size_t offset; /* of the value in the struct it fills */
    uint64_t min, max;
    const char *help;
    int64_t scale;              /* FLAG_I64_SCALED */
    const char *const *choices; /* FLAG_CHOICE: two words */
};

/* text as a decimal uint64_t: digits only (no sign, spaces or hex), and
 * no overflow. 0, or -1 with *out unchanged. */
int flag_parse_u64(const char *text, uint64_t *out);

/* The row of `name` (name[0, length): no NUL needed) in rows, or NULL. */
const struct flag *flag_find(const struct flag *rows, size_t count, const char *name,
                             size_t length);

/* Sets the value the row describes in object from text. 0, or -1 when the
 * text is not a value of the row's kind within its bounds (FLAG_OTHER:
 * always -1). Strings are kept as pointers: text must outlive object. */
int flag_apply(const struct flag *row, void *object, const char *text);

/* The value the row describes in object, as --help shows a default. */
void flag_value_text(const struct flag *row, const void *object, char *text, size_t size);

/* What a value of the row looks like, for an error message ("N in 1..64"). */
void flag_expected_text(const struct flag *row, char *text, size_t size);

#endif
