/* What decode.c and decode_limits.c share: the error text of a field. */
#ifndef LLMLIMIT_WIRE_DECODE_INTERNAL_H
#define LLMLIMIT_WIRE_DECODE_INTERNAL_H

#include <stddef.h>

/* "<path>.<field>: <reason>", or "<field>: <reason>" at the top level, into
 * error; returns -1. */
int decode_fail(char *error, size_t error_size, const char *path, const char *field,
                const char *reason);
/* The same, with the field name built from a format (slow path only). */
int decode_failf(char *error, size_t error_size, const char *path, const char *reason,
                 const char *field_format, ...) __attribute__((format(printf, 5, 6)));

#endif
