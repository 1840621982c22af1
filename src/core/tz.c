/* TZif files (RFC 8536) read into immutable zones, and the offset arithmetic
 * of budget periods. Every count is bounded before anything is read or
 * allocated; every field is checked as the RFC says; times after the last
 * transition come from the footer's POSIX TZ rule. */
#include "tz.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "civil.h"

/* Rule arithmetic is exact within this many seconds of 1970 (nine billion
 * years); every int64 of milliseconds is inside it. */
#define TZ_RULE_SECONDS_MAX (INT64_C(1) << 58)
/* The years of footer-rule changes looked at around an instant. */
#define RULE_YEARS 7

struct tz_rule_date {
    char form;      /* 'J' (1..365, February 29 never counted), 'D' (0..365), 'M' */
    uint16_t day;   /* J and D: the day; M: the weekday, 0 (Sunday)..6 */
    uint8_t month;  /* M: 1..12 */
    uint8_t week;   /* M: 1..5 (5: the last) */
    int32_t time_s; /* local time of day of the change, -167..167 hours */
};

struct tz_rule {
    int32_t std_offset_s; /* local = UTC + offset */
    int32_t dst_offset_s;
    bool has_dst;
    struct tz_rule_date start, end; /* into daylight time, out of it */
};

struct tz_zone {
    char name[TZ_NAME_LENGTH_MAX + 1];
    uint32_t transition_count;
    int64_t *transitions;      /* unix seconds, strictly increasing */
    uint8_t *transition_types; /* < type_count */
    uint32_t type_count;       /* 1..TZ_TYPES_MAX */
    int32_t offsets[TZ_TYPES_MAX];
    bool has_rule; /* the footer's: after the last transition */
    struct tz_rule rule;
};

static int fail(char *error, size_t error_size, const char *message)
{
    if (error_size > 0)
        snprintf(error, error_size, "%s", message);
    return -1;
}

int tz_name_valid(const char *name)
{
    size_t length = strnlen(name, TZ_NAME_LENGTH_MAX + 1);
    if (length == 0 || length > TZ_NAME_LENGTH_MAX || name[0] == '/' || name[length - 1] == '/')
        return 0;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '+' || c == '-' || c == '/';
        if (!ok || (c == '/' && name[i + 1] == '/'))
            return 0;
    }
    return 1;
}

/* ---- reading the bytes --------------------------------------------------- */

struct reader {
    const uint8_t *data;
    size_t size;
    size_t at;
};

static const uint8_t *take(struct reader *r, size_t bytes)
{
    if (bytes > r->size - r->at)
        return NULL;
    const uint8_t *p = r->data + r->at;
    r->at += bytes;
    return p;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int64_t be_time(const uint8_t *p, size_t bytes)
{
    if (bytes == 4)
        return (int64_t)(int32_t)be32(p);
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct header {
    char version; /* 0, '2', '3' or '4' */
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

static int header_read(struct reader *r, struct header *h, char *error, size_t error_size)
{
    const uint8_t *p = take(r, 44);
    if (p == NULL || memcmp(p, "TZif", 4) != 0)
        return fail(error, error_size, "not a TZif file");
    h->version = (char)p[4];
    if (h->version != 0 && (h->version < '2' || h->version > '4'))
        return fail(error, error_size, "unsupported TZif version");
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    /* Bounds first, so that no size below can overflow. */
    if (h->timecnt > TZ_TRANSITIONS_MAX || h->typecnt > TZ_TYPES_MAX || h->charcnt > TZ_CHARS_MAX ||
        h->leapcnt > TZ_TRANSITIONS_MAX || h->isutcnt > TZ_TYPES_MAX || h->isstdcnt > TZ_TYPES_MAX)
        return fail(error, error_size, "TZif counts out of bounds");
    return 0;
}

static size_t data_size(const struct header *h, size_t time_bytes)
{
    return (size_t)h->timecnt * time_bytes + h->timecnt + (size_t)h->typecnt * 6 + h->charcnt +
           (size_t)h->leapcnt * (time_bytes + 4) + h->isstdcnt + h->isutcnt;
}

/* The data block the zone is made from (RFC 8536 section 3.2), into zone
 * (whose arrays have room for h->timecnt). */
static int data_read(struct reader *r, const struct header *h, size_t time_bytes,
                     struct tz_zone *zone, char *error, size_t error_size)
{
    if (h->typecnt == 0 || h->charcnt == 0)
        return fail(error, error_size, "TZif data without local time types");
    if ((h->isutcnt != 0 && h->isutcnt != h->typecnt) ||
        (h->isstdcnt != 0 && h->isstdcnt != h->typecnt))
        return fail(error, error_size, "TZif indicator counts do not match the types");
    if (h->leapcnt != 0)
        return fail(error, error_size, "zones with leap seconds are not supported");
    const uint8_t *times = take(r, (size_t)h->timecnt * time_bytes);
    const uint8_t *types = take(r, h->timecnt);
    const uint8_t *infos = take(r, (size_t)h->typecnt * 6);
    const uint8_t *chars = take(r, h->charcnt);
    const uint8_t *isstd = take(r, h->isstdcnt);
    const uint8_t *isut = take(r, h->isutcnt);
    if (times == NULL || types == NULL || infos == NULL || chars == NULL || isstd == NULL ||
        isut == NULL)
        return fail(error, error_size, "TZif file cut short");
    for (uint32_t i = 0; i < h->timecnt; i++) {
        zone->transitions[i] = be_time(times + (size_t)i * time_bytes, time_bytes);
        if (i > 0 && zone->transitions[i] <= zone->transitions[i - 1])
            return fail(error, error_size, "TZif transition times not increasing");
        if (types[i] >= h->typecnt)
            return fail(error, error_size, "TZif transition names no type");
        zone->transition_types[i] = types[i];
    }
    zone->transition_count = h->timecnt;
    for (uint32_t i = 0; i < h->typecnt; i++) {
        int32_t offset = (int32_t)be32(infos + (size_t)i * 6);
        if (offset < TZ_OFFSET_SECONDS_MIN || offset > TZ_OFFSET_SECONDS_MAX)
            return fail(error, error_size, "TZif offset out of range");
        if (infos[i * 6 + 4] > 1 || infos[i * 6 + 5] >= h->charcnt)
            return fail(error, error_size, "TZif local time type malformed");
        zone->offsets[i] = offset;
        if ((h->isstdcnt != 0 && isstd[i] > 1) || (h->isutcnt != 0 && isut[i] > 1) ||
            (h->isutcnt != 0 && isut[i] == 1 && (h->isstdcnt == 0 || isstd[i] != 1)))
            return fail(error, error_size, "TZif indicators malformed");
    }
    zone->type_count = h->typecnt;
    return 0;
}

/* ---- the footer: a POSIX TZ string (RFC 8536 section 3.3) ---------------- */

static bool is_alpha(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool rule_name(const char **p)
{
    const char *s = *p;
    size_t length = 0;
    if (*s == '<') {
        s++;
        while (is_alpha(s[length]) || is_digit(s[length]) || s[length] == '+' || s[length] == '-')
            length++;
        if (s[length] != '>' || length < 3)
            return false;
        *p = s + length + 1;
        return true;
    }
    while (is_alpha(s[length]))
        length++;
    if (length < 3)
        return false;
    *p = s + length;
    return true;
}

/* Takes c, if it is next. */
static bool rule_expect(const char **p, char c)
{
    if (**p != c)
        return false;
    (*p)++;
    return true;
}

static bool rule_number(const char **p, int digits_max, int max, int *out)
{
    int value = 0, digits = 0;
    while (is_digit(**p) && digits < digits_max) {
        value = value * 10 + (**p - '0');
        (*p)++;
        digits++;
    }
    if (digits == 0 || is_digit(**p) || value > max)
        return false;
    *out = value;
    return true;
}

/* [+-]hh[:mm[:ss]] with hh up to hours_max, in seconds. */
static bool rule_clock(const char **p, int hours_max, int32_t *out)
{
    int sign = 1;
    if (**p == '+' || **p == '-') {
        sign = **p == '-' ? -1 : 1;
        (*p)++;
    }
    int hours, minutes = 0, seconds = 0;
    if (!rule_number(p, 3, hours_max, &hours))
        return false;
    if (**p == ':') {
        (*p)++;
        if (!rule_number(p, 2, 59, &minutes))
            return false;
        if (**p == ':') {
            (*p)++;
            if (!rule_number(p, 2, 59, &seconds))
                return false;
        }
    }
    *out = sign * (hours * 3600 + minutes * 60 + seconds);
    return true;
}

static bool rule_date(const char **p, struct tz_rule_date *date)
{
    int n, week, weekday;
    memset(date, 0, sizeof *date);
    if (rule_expect(p, 'J')) {
        if (!rule_number(p, 3, 365, &n) || n < 1)
            return false;
        date->form = 'J';
        date->day = (uint16_t)n;
    } else if (rule_expect(p, 'M')) {
        if (!rule_number(p, 2, 12, &n) || n < 1 || !rule_expect(p, '.') ||
            !rule_number(p, 1, 5, &week) || week < 1 || !rule_expect(p, '.') ||
            !rule_number(p, 1, 6, &weekday))
            return false;
        date->form = 'M';
        date->month = (uint8_t)n;
        date->week = (uint8_t)week;
        date->day = (uint16_t)weekday;
    } else {
        if (!rule_number(p, 3, 365, &n))
            return false;
        date->form = 'D';
        date->day = (uint16_t)n;
    }
    date->time_s = 7200; /* 02:00 unless said */
    return !rule_expect(p, '/') || rule_clock(p, 167, &date->time_s);
}

/* std offset [dst [offset] ,start[/time],end[/time]]; an empty string is no
 * rule. POSIX offsets count west of Greenwich: the UTC offset is minus it. */
static int rule_parse(const char *text, struct tz_zone *zone)
{
    zone->has_rule = false;
    if (text[0] == '\0')
        return 0;
    struct tz_rule *rule = &zone->rule;
    memset(rule, 0, sizeof *rule);
    const char *p = text;
    int32_t offset;
    if (!rule_name(&p) || !rule_clock(&p, 24, &offset))
        return -1;
    rule->std_offset_s = -offset;
    rule->dst_offset_s = rule->std_offset_s + 3600;
    if (*p != '\0') {
        if (!rule_name(&p))
            return -1;
        if (*p != ',') {
            if (!rule_clock(&p, 24, &offset))
                return -1;
            rule->dst_offset_s = -offset;
        }
        /* A daylight time needs its rule: POSIX leaves the default open. */
        if (!rule_expect(&p, ',') || !rule_date(&p, &rule->start) || !rule_expect(&p, ',') ||
            !rule_date(&p, &rule->end))
            return -1;
        rule->has_dst = true;
    }
    if (*p != '\0')
        return -1;
    zone->has_rule = true;
    return 0;
}

static int footer_read(struct reader *r, struct tz_zone *zone, char *error, size_t error_size)
{
    const uint8_t *newline = take(r, 1);
    size_t left = r->size - r->at;
    if (newline == NULL || *newline != '\n' || left == 0 || r->data[r->size - 1] != '\n')
        return fail(error, error_size, "TZif footer missing");
    size_t length = left - 1;
    if (length > TZ_FOOTER_LENGTH_MAX)
        return fail(error, error_size, "TZif footer too long");
    char text[TZ_FOOTER_LENGTH_MAX + 1];
    for (size_t i = 0; i < length; i++) {
        char c = (char)r->data[r->at + i];
        if (c < 0x20 || c > 0x7e)
            return fail(error, error_size, "TZif footer malformed");
        text[i] = c;
    }
    text[length] = '\0';
    r->at = r->size;
    if (rule_parse(text, zone) != 0)
        return fail(error, error_size, "TZif footer is not a TZ rule");
    return 0;
}

int tz_zone_parse(const char *name, const uint8_t *data, size_t size, struct tz_zone **out,
                  char *error, size_t error_size)
{
    if (size > TZ_FILE_BYTES_MAX)
        return fail(error, error_size, "TZif file too large");
    struct reader r = {data, size, 0};
    struct header h;
    if (header_read(&r, &h, error, error_size) != 0)
        return -1;
    size_t time_bytes = 4;
    if (h.version != 0) {
        /* Version 2 and later: skip the 32-bit data, read the 64-bit one. */
        if (take(&r, data_size(&h, 4)) == NULL)
            return fail(error, error_size, "TZif file cut short");
        char version = h.version;
        if (header_read(&r, &h, error, error_size) != 0)
            return -1;
        if (h.version != version)
            return fail(error, error_size, "TZif headers disagree");
        time_bytes = 8;
    }
    /* One block: the zone, then its transitions and their types. */
    size_t bytes = sizeof(struct tz_zone) + (size_t)h.timecnt * (sizeof(int64_t) + 1);
    struct tz_zone *zone = calloc(1, bytes);
    if (zone == NULL)
        return fail(error, error_size, "out of memory");
    snprintf(zone->name, sizeof zone->name, "%s", name);
    zone->transitions = (int64_t *)(zone + 1);
    zone->transition_types = (uint8_t *)(zone->transitions + h.timecnt);
    int rc = data_read(&r, &h, time_bytes, zone, error, error_size);
    if (rc == 0 && h.version != 0)
        rc = footer_read(&r, zone, error, error_size);
    if (rc == 0 && r.at != r.size)
        rc = fail(error, error_size, "TZif file has trailing bytes");
    if (rc != 0) {
        free(zone);
        return -1;
    }
    *out = zone;
    return 0;
}

void tz_zone_free(struct tz_zone *zone)
{
    free(zone);
}

const char *tz_zone_name(const struct tz_zone *zone)
{
    return zone->name;
}

/* ---- offsets ------------------------------------------------------------- */

/* The unix second at which date (at its time of day, local time with
 * offset_s) falls in year. */
static int64_t rule_instant(const struct tz_rule_date *date, int64_t year, int32_t offset_s)
{
    int64_t day;
    int64_t january_1 = civil_to_days(year, 1, 1);
    if (date->form == 'J') {
        day = january_1 + date->day - 1 + (civil_leap_year(year) && date->day >= 60 ? 1 : 0);
    } else if (date->form == 'D') {
        day = january_1 + date->day;
    } else {
        int64_t first = civil_to_days(year, date->month, 1);
        day = first + (date->day - civil_weekday(first) + 7) % 7 + (date->week - 1) * 7;
        int64_t last = first + civil_month_days(year, date->month) - 1;
        while (day > last) /* at most once: the fifth week is "the last" */
            day -= 7;
    }
    return day * CIVIL_SECONDS_PER_DAY + date->time_s - offset_s;
}

/* The footer rule's segment containing unix_s. */
static struct tz_segment rule_segment(const struct tz_rule *rule, int64_t unix_s)
{
    struct tz_segment all = {INT64_MIN, INT64_MAX, rule->std_offset_s};
    if (!rule->has_dst)
        return all;
    if (unix_s > TZ_RULE_SECONDS_MAX || unix_s < -TZ_RULE_SECONDS_MAX) {
        /* Out of the calendar's range: standard time, still containing it. */
        if (unix_s > 0)
            all.start_s = unix_s;
        else
            all.end_s = unix_s + 1;
        return all;
    }
    int64_t year;
    int month, day;
    civil_from_days(civil_floor_div(unix_s + rule->std_offset_s, CIVIL_SECONDS_PER_DAY), &year,
                    &month, &day);
    /* The changes of the years around it, in time order (ties keep the
     * year order, so an end meets the next start after it). A rule may put
     * a change a week into the year beside its own: three years each way
     * hold the changes on both sides of unix_s whatever the rule. */
    struct change {
        int64_t at_s;
        int32_t offset_s;
    } changes[2 * RULE_YEARS];
    for (int i = 0; i < RULE_YEARS; i++) {
        int64_t y = year - RULE_YEARS / 2 + i;
        changes[2 * i] =
            (struct change){rule_instant(&rule->start, y, rule->std_offset_s), rule->dst_offset_s};
        changes[2 * i + 1] =
            (struct change){rule_instant(&rule->end, y, rule->dst_offset_s), rule->std_offset_s};
    }
    for (int i = 1; i < 2 * RULE_YEARS; i++) {
        for (int j = i; j > 0 && changes[j - 1].at_s > changes[j].at_s; j--) {
            struct change c = changes[j];
            changes[j] = changes[j - 1];
            changes[j - 1] = c;
        }
    }
    struct tz_segment s = {INT64_MIN, INT64_MAX, 0};
    /* Before the first change, the offset it changes away from. */
    s.offset_s =
        changes[0].offset_s == rule->dst_offset_s ? rule->std_offset_s : rule->dst_offset_s;
    for (int i = 0; i < 2 * RULE_YEARS; i++) {
        if (changes[i].at_s <= unix_s) {
            s.start_s = changes[i].at_s;
            s.offset_s = changes[i].offset_s;
        } else {
            s.end_s = changes[i].at_s;
            break;
        }
    }
    return s;
}

struct tz_segment tz_segment_at(const struct tz_zone *zone, int64_t unix_s)
{
    uint32_t n = zone->transition_count;
    if (n == 0 || unix_s >= zone->transitions[n - 1]) {
        int64_t last_s = n == 0 ? INT64_MIN : zone->transitions[n - 1];
        if (!zone->has_rule) {
            int32_t offset = zone->offsets[n == 0 ? 0 : zone->transition_types[n - 1]];
            return (struct tz_segment){last_s, INT64_MAX, offset};
        }
        struct tz_segment s = rule_segment(&zone->rule, unix_s);
        if (s.start_s < last_s)
            s.start_s = last_s;
        return s;
    }
    if (unix_s < zone->transitions[0])
        return (struct tz_segment){INT64_MIN, zone->transitions[0], zone->offsets[0]};
    /* The last transition at or before unix_s: transitions[low]. */
    uint32_t low = 0, high = n - 1; /* transitions[low] <= unix_s < transitions[high] */
    while (high - low > 1) {
        uint32_t middle = low + (high - low) / 2;
        if (zone->transitions[middle] <= unix_s)
            low = middle;
        else
            high = middle;
    }
    return (struct tz_segment){zone->transitions[low], zone->transitions[low + 1],
                               zone->offsets[zone->transition_types[low]]};
}

int64_t tz_first_local(const struct tz_zone *zone, int64_t local_s)
{
    /* local(u) = u + offset(u) rises inside each segment. Start where it is
     * surely below local_s and take the first segment that reaches it. */
    int64_t u = local_s - TZ_OFFSET_SECONDS_MAX - 1;
    /* Each step moves to the next segment; those that end before local_s
     * + TZ_OFFSET_SECONDS_MAX are the zone's transitions and at most a few
     * rule changes. */
    for (uint32_t step = 0; step < zone->transition_count + 16; step++) {
        struct tz_segment s = tz_segment_at(zone, u);
        int64_t candidate = local_s - s.offset_s;
        if (candidate < s.start_s)
            candidate = s.start_s;
        if (candidate < s.end_s)
            return candidate;
        u = s.end_s;
    }
    return u;
}

/* ---- the interned zones -------------------------------------------------- */

static pthread_mutex_t zones_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tz_zone *zones[TZ_ZONES_MAX];
static uint32_t zone_count;
static char directory[4096] = TZ_DIRECTORY_DEFAULT;

int tz_directory_set(const char *path)
{
    size_t length = strlen(path);
    if (length == 0 || length >= sizeof directory)
        return -1;
    pthread_mutex_lock(&zones_lock);
    memcpy(directory, path, length + 1);
    pthread_mutex_unlock(&zones_lock);
    return 0;
}

/* Reads <directory>/<name> whole, at most TZ_FILE_BYTES_MAX + 1 bytes. */
static int zone_file_read(const char *name, uint8_t *buffer, size_t *size, char *error,
                          size_t error_size)
{
    char path[sizeof directory + TZ_NAME_LENGTH_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", directory, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(error, error_size,
                    errno == ENOENT || errno == ENOTDIR ? "unknown time zone" : strerror(errno));
    size_t got = 0;
    while (got < TZ_FILE_BYTES_MAX + 1) {
        ssize_t n = read(fd, buffer + got, TZ_FILE_BYTES_MAX + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            close(fd);
            return fail(error, error_size,
                        saved == EISDIR ? "not a TZif file (a directory)" : strerror(saved));
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *size = got;
    return 0;
}

static int zone_load(const char *name, struct tz_zone **out, char *error, size_t error_size)
{
    uint8_t *buffer = malloc(TZ_FILE_BYTES_MAX + 1);
    if (buffer == NULL)
        return fail(error, error_size, "out of memory");
    size_t size = 0;
    int rc = zone_file_read(name, buffer, &size, error, error_size);
    if (rc == 0)
        rc = tz_zone_parse(name, buffer, size, out, error, error_size);
    free(buffer);
    return rc;
}

int tz_zone_get(const char *name, const struct tz_zone **out, char *error, size_t error_size)
{
    if (!tz_name_valid(name))
        return fail(error, error_size,
                    "must be a zone name of 1..64 bytes of [A-Za-z0-9_+-/] (e.g. Europe/Berlin)");
    pthread_mutex_lock(&zones_lock);
    int rc = 0;
    const struct tz_zone *found = NULL;
    for (uint32_t i = 0; i < zone_count && found == NULL; i++) {
        if (strcmp(zones[i]->name, name) == 0)
            found = zones[i];
    }
    if (found == NULL && zone_count == TZ_ZONES_MAX) {
        rc = fail(error, error_size, "too many distinct time zones (at most 1024)");
    } else if (found == NULL) {
        /* Loaded under the lock: only definitions wait, never the data path. */
        struct tz_zone *zone = NULL;
        rc = zone_load(name, &zone, error, error_size);
        if (rc == 0)
            found = zones[zone_count++] = zone;
    }
    pthread_mutex_unlock(&zones_lock);
    if (rc == 0)
        *out = found;
    return rc;
}
