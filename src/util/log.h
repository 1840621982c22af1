/* Structured logs to stderr: one line per event, as text (key=value) or JSON,
 * filtered by level. Set up once at startup, then safe from any thread (each
 * line is written with a single write(2)). */
#ifndef LLMLIMIT_UTIL_LOG_H
#define LLMLIMIT_UTIL_LOG_H

#include <stdbool.h>

enum log_level {
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3,
};

enum log_format {
    LOG_FORMAT_TEXT = 0,
    LOG_FORMAT_JSON = 1,
};

/* Called once, before any thread starts. */
void log_setup(enum log_level level, enum log_format format);

bool log_enabled(enum log_level level);

/* Writes one line: the message, then NULL-terminated pairs of field name and
 * string value, e.g. log_write(LOG_INFO, "limit_put", "key", key, NULL).
 * Lines longer than LOG_LINE_BYTES_MAX are cut. */
void log_write(enum log_level level, const char *message, ...) __attribute__((sentinel));

/* Names <-> levels and formats; parsers return 0 or -1. */
int log_level_parse(const char *name, enum log_level *out);
const char *log_level_name(enum log_level level);
int log_format_parse(const char *name, enum log_format *out);
const char *log_format_name(enum log_format format);

#define LOG_LINE_BYTES_MAX 4096

#endif
