/* Time zones for budget periods (docs/semantics.md "Budgets"): TZif files
 * (the format of the system's zoneinfo, RFC 8536) read and checked here, a
 * zone's UTC offset at any instant, and the first instant of a local wall
 * time. No localtime() and no TZ variable: those are process-wide state.
 * A zone is parsed once and interned for the life of the process
 * (tz_zone_get), immutable, so any thread may use it without a lock. */
#ifndef LLMLIMIT_TZ_H
#define LLMLIMIT_TZ_H

#include <stddef.h>
#include <stdint.h>

/* Bounds (each has a test one past it, tests/core/test_tz.c). */
#define TZ_NAME_LENGTH_MAX 64          /* bytes of a zone name ("Europe/Berlin") */
#define TZ_FILE_BYTES_MAX (256 * 1024) /* a TZif file */
#define TZ_TRANSITIONS_MAX 4096        /* transition times of one zone */
#define TZ_TYPES_MAX 256               /* local time types (their index is one byte) */
#define TZ_CHARS_MAX 1024              /* bytes of the abbreviations */
#define TZ_FOOTER_LENGTH_MAX 128       /* the POSIX TZ string after the data */
#define TZ_ZONES_MAX 1024              /* distinct zones interned by one process */
/* Every UTC offset a zone may have, in seconds (RFC 8536: -25..+26 hours). */
#define TZ_OFFSET_SECONDS_MIN (-89999)
#define TZ_OFFSET_SECONDS_MAX 93599

#define TZ_DIRECTORY_DEFAULT "/usr/share/zoneinfo"

struct tz_zone; /* immutable once made */

/* Whether name is a zone name this module will look up: 1..TZ_NAME_LENGTH_MAX
 * bytes of [A-Za-z0-9_+-/], not starting or ending with '/', no empty
 * component; no '.' at all, so ".." cannot climb out of the directory. */
int tz_name_valid(const char *name);

/* Sets the directory zones are read from (default TZ_DIRECTORY_DEFAULT).
 * Call before the first tz_zone_get (startup, a test); the text is copied.
 * 0, or -1 when path is empty or longer than 4095 bytes. */
int tz_directory_set(const char *path);

/* The zone named `name`, read from <directory>/<name> on first use and kept
 * for the life of the process (never freed: definitions point at it).
 * Thread-safe. 0 with *out set; -1 with error (NUL-terminated, of
 * error_size bytes) saying why: an invalid name, no such zone, a file that
 * is not TZif or breaks RFC 8536, leap-second data ("right/" zones), more
 * than TZ_ZONES_MAX zones. The text names no field; the caller prefixes it. */
int tz_zone_get(const char *name, const struct tz_zone **out, char *error, size_t error_size);

/* Parses TZif bytes (RFC 8536 versions 1 to 4) into a new zone named name
 * (truncated to TZ_NAME_LENGTH_MAX): for tz_zone_get, the fuzz harness and
 * tests. 0 with *out (free with tz_zone_free), or -1 with error as above. */
int tz_zone_parse(const char *name, const uint8_t *data, size_t size, struct tz_zone **out,
                  char *error, size_t error_size);
void tz_zone_free(struct tz_zone *zone);

const char *tz_zone_name(const struct tz_zone *zone);

/* One stretch of time with one UTC offset: [start_s, end_s), unix seconds
 * (INT64_MIN and INT64_MAX for unbounded ends). */
struct tz_segment {
    int64_t start_s;
    int64_t end_s;
    int32_t offset_s; /* local = UTC + offset */
};

/* The segment containing unix_s; start_s <= unix_s < end_s. */
struct tz_segment tz_segment_at(const struct tz_zone *zone, int64_t unix_s);

static inline int32_t tz_offset_at(const struct tz_zone *zone, int64_t unix_s)
{
    return tz_segment_at(zone, unix_s).offset_s;
}

/* The first instant (unix seconds) whose local wall time is at or after
 * local_s (seconds since 1970-01-01 00:00 of the local calendar): local
 * midnight where it exists, else the end of the gap that skips it. */
int64_t tz_first_local(const struct tz_zone *zone, int64_t local_s);

#endif
