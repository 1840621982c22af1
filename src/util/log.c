/* Log lines for llmlimitd. Values are escaped so a key or lease ID chosen by a
 * client can never forge a second line or break the JSON. */
#include "log.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level current_level = LOG_INFO;
static enum log_format current_format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_setup(enum log_level level, enum log_format format)
{
    assert(level >= LOG_ERROR);
    assert(level <= LOG_DEBUG);
    assert(format == LOG_FORMAT_TEXT || format == LOG_FORMAT_JSON);
    current_level = level;
    current_format = format;
}

bool log_enabled(enum log_level level)
{
    return level <= current_level;
}

int log_level_parse(const char *name, enum log_level *out)
{
    assert(name != NULL);
    assert(out != NULL);
    for (int i = LOG_ERROR; i <= LOG_DEBUG; i++) {
        if (strcmp(level_names[i], name) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

const char *log_level_name(enum log_level level)
{
    return (level >= LOG_ERROR && level <= LOG_DEBUG) ? level_names[level] : "info";
}

int log_format_parse(const char *name, enum log_format *out)
{
    assert(name != NULL);
    assert(out != NULL);
    if (strcmp(name, "text") == 0)
        *out = LOG_FORMAT_TEXT;
    else if (strcmp(name, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
}

const char *log_format_name(enum log_format format)
{
    return format == LOG_FORMAT_JSON ? "json" : "text";
}

struct line {
    char text[LOG_LINE_BYTES_MAX];
    size_t length;
};

/* Content stops LOG_LINE_RESERVE bytes short of the end, so the closing quote,
 * brace and newline always fit and a cut line stays well-formed. Each piece
 * (one character or one escape) goes in whole or not at all. */
#define LOG_LINE_RESERVE 8

static void line_add(struct line *line, const char *bytes, size_t length)
{
    if (line->length + length > sizeof line->text - LOG_LINE_RESERVE)
        return;
    memcpy(line->text + line->length, bytes, length);
    line->length += length;
    assert(line->length <= sizeof line->text - LOG_LINE_RESERVE);
}

static void line_close(struct line *line, char c)
{
    assert(line->length < sizeof line->text);
    line->text[line->length++] = c;
}

static void line_add_str(struct line *line, const char *s)
{
    line_add(line, s, strlen(s));
}

/* Quoted and escaped: the same rules serve both formats. */
static void line_add_quoted(struct line *line, const char *s)
{
    line_add(line, "\"", 1);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        char escaped[8];
        if (c == '"' || c == '\\') {
            escaped[0] = '\\';
            escaped[1] = (char)c;
            line_add(line, escaped, 2);
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(escaped, sizeof escaped, "\\u%04x", c);
            line_add(line, escaped, 6);
        } else {
            line_add(line, (const char *)&c, 1);
        }
    }
    line_close(line, '"');
}

static void line_add_time(struct line *line)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[40];
    int n =
        snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    if (n > 0)
        line_add(line, stamp, (size_t)n);
}

static void line_add_field(struct line *line, const char *name, const char *value)
{
    if (line->length + 64 > sizeof line->text)
        return; /* no room left for another whole field */
    if (current_format == LOG_FORMAT_JSON) {
        line_add(line, ",", 1);
        line_add_quoted(line, name);
        line_add(line, ":", 1);
    } else {
        line_add(line, " ", 1);
        line_add_str(line, name);
        line_add(line, "=", 1);
    }
    line_add_quoted(line, value);
}

void log_write(enum log_level level, const char *message, ...)
{
    assert(message != NULL);
    if (!log_enabled(level))
        return;
    struct line line = {.length = 0};
    if (current_format == LOG_FORMAT_JSON) {
        line_add_str(&line, "{\"ts\":\"");
        line_add_time(&line);
        line_add_str(&line, "\",\"level\":\"");
        line_add_str(&line, log_level_name(level));
        line_add_str(&line, "\",\"msg\":");
        line_add_quoted(&line, message);
    } else {
        line_add_time(&line);
        line_add_str(&line, " level=");
        line_add_str(&line, log_level_name(level));
        line_add_str(&line, " msg=");
        line_add_quoted(&line, message);
    }
    va_list ap;
    va_start(ap, message);
    for (;;) {
        const char *name = va_arg(ap, const char *);
        if (name == NULL)
            break;
        const char *value = va_arg(ap, const char *);
        line_add_field(&line, name, value != NULL ? value : "");
    }
    va_end(ap);
    if (current_format == LOG_FORMAT_JSON)
        line_close(&line, '}');
    line_close(&line, '\n');
    /* One write per line so lines from different threads never interleave. */
    ssize_t written = write(STDERR_FILENO, line.text, line.length);
    (void)written;
}
