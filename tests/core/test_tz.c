/* Unit tests of the TZif reader (src/core/tz.c): zone names, files built
 * here field by field (RFC 8536), every bound one past, the footer's TZ
 * rule against the system's zoneinfo, and the first instant of a local
 * day across daylight-saving changes and gaps over midnight. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/civil.h"
#include "core/tz.h"
#include "test.h"

#define DAY_S INT64_C(86400)

/* ---- building TZif files -------------------------------------------------- */

struct tzif {
    char version;           /* 0 (version 1 only) or '2'..'4' */
    uint32_t timecnt;       /* transitions */
    const int64_t *times;   /* timecnt */
    const uint8_t *types;   /* timecnt */
    uint32_t typecnt;       /* local time types */
    const int32_t *offsets; /* typecnt */
    uint32_t leapcnt;       /* leap records (all zero) */
    const char *footer;     /* version 2+: the TZ string */
};

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return p + 4;
}

static uint8_t *put64(uint8_t *p, int64_t v)
{
    p = put32(p, (uint32_t)((uint64_t)v >> 32));
    return put32(p, (uint32_t)v);
}

static uint8_t *header(uint8_t *p, char version, uint32_t timecnt, uint32_t typecnt,
                       uint32_t leapcnt)
{
    memcpy(p, "TZif", 4);
    p[4] = (uint8_t)version;
    memset(p + 5, 0, 15);
    p = put32(p + 20, 0); /* isutcnt */
    p = put32(p, 0);      /* isstdcnt */
    p = put32(p, leapcnt);
    p = put32(p, timecnt);
    p = put32(p, typecnt);
    return put32(p, 4); /* charcnt: "XYZ\0" */
}

/* The data block of z with times of time_bytes; returns the end. */
static uint8_t *data(uint8_t *p, const struct tzif *z, int time_bytes)
{
    for (uint32_t i = 0; i < z->timecnt; i++)
        p = time_bytes == 8 ? put64(p, z->times[i]) : put32(p, (uint32_t)z->times[i]);
    for (uint32_t i = 0; i < z->timecnt; i++)
        *p++ = z->types[i];
    for (uint32_t i = 0; i < z->typecnt; i++) {
        p = put32(p, (uint32_t)z->offsets[i]);
        *p++ = 0; /* isdst */
        *p++ = 0; /* desigidx */
    }
    memcpy(p, "XYZ", 4);
    p += 4;
    memset(p, 0, (size_t)z->leapcnt * (size_t)(time_bytes + 4));
    return p + (size_t)z->leapcnt * (size_t)(time_bytes + 4);
}

/* Writes the file of z into out (room enough); returns its size. */
static size_t tzif_build(uint8_t *out, const struct tzif *z)
{
    uint8_t *p = header(out, z->version, z->timecnt, z->typecnt, z->leapcnt);
    p = data(p, z, 4);
    if (z->version != 0) {
        p = header(p, z->version, z->timecnt, z->typecnt, z->leapcnt);
        p = data(p, z, 8);
        size_t length = strlen(z->footer);
        *p++ = '\n';
        memcpy(p, z->footer, length);
        p += length;
        *p++ = '\n';
    }
    return (size_t)(p - out);
}

static uint8_t file_buffer[TZ_FILE_BYTES_MAX + 64];
static int64_t many_times[TZ_TRANSITIONS_MAX + 1];
static uint8_t many_types[TZ_TRANSITIONS_MAX + 1];
static int32_t many_offsets[TZ_TYPES_MAX + 1];

/* Parses z; 0 or -1 with the reason in error. */
static int parse(const struct tzif *z, struct tz_zone **out, char *error)
{
    size_t size = tzif_build(file_buffer, z);
    return tz_zone_parse("test", file_buffer, size, out, error, 128);
}

/* A zone of only a footer rule (as zic's slim output is after its last
 * listed change). */
static struct tz_zone *rule_zone(const char *footer)
{
    int32_t offset = 0;
    struct tzif z = {.version = '2', .typecnt = 1, .offsets = &offset, .footer = footer};
    struct tz_zone *zone = NULL;
    char error[128];
    if (parse(&z, &zone, error) != 0)
        fprintf(stderr, "  rule zone %s: %s\n", footer, error);
    return zone;
}

static const struct tz_zone *system_zone(const char *name)
{
    const struct tz_zone *zone = NULL;
    char error[128];
    if (tz_zone_get(name, &zone, error, sizeof error) != 0)
        fprintf(stderr, "  %s: %s\n", name, error);
    return zone;
}

static int64_t midnight_s(int64_t year, int month, int day)
{
    return civil_to_days(year, month, day) * DAY_S;
}

/* ---- tests ---------------------------------------------------------------- */

static void names_are_checked_before_any_file(void)
{
    CHECK(tz_name_valid("Europe/Berlin"));
    CHECK(tz_name_valid("America/Argentina/Buenos_Aires"));
    CHECK(tz_name_valid("Etc/GMT+5"));
    CHECK(tz_name_valid("UTC"));
    CHECK(!tz_name_valid(""));
    CHECK(!tz_name_valid("/etc/passwd"));
    CHECK(!tz_name_valid("../../etc/passwd"));
    CHECK(!tz_name_valid("Europe/../../etc/passwd"));
    CHECK(!tz_name_valid("zone.tab"));
    CHECK(!tz_name_valid("Europe//Berlin"));
    CHECK(!tz_name_valid("Europe/"));
    CHECK(!tz_name_valid("Europe Berlin"));
    char name[TZ_NAME_LENGTH_MAX + 2];
    memset(name, 'a', sizeof name);
    name[TZ_NAME_LENGTH_MAX] = '\0';
    CHECK(tz_name_valid(name));
    name[TZ_NAME_LENGTH_MAX] = 'a';
    name[TZ_NAME_LENGTH_MAX + 1] = '\0';
    CHECK(!tz_name_valid(name)); /* one past */
    const struct tz_zone *zone = NULL;
    char error[128];
    CHECK_EQ_I64(tz_zone_get("../../etc/passwd", &zone, error, sizeof error), -1);
    CHECK(strstr(error, "zone name") != NULL);
    CHECK_EQ_I64(tz_zone_get("Mars/Olympus_Mons", &zone, error, sizeof error), -1);
    CHECK_STR(error, "unknown time zone");
    CHECK_EQ_I64(tz_zone_get("Europe", &zone, error, sizeof error), -1);
    CHECK(strstr(error, "not a TZif file") != NULL);
}

static void transitions_and_types_give_offsets(void)
{
    int64_t times[2] = {1000, 2000};
    uint8_t types[2] = {1, 0};
    int32_t offsets[2] = {3600, 7200};
    struct tzif z = {.version = '2',
                     .timecnt = 2,
                     .times = times,
                     .types = types,
                     .typecnt = 2,
                     .offsets = offsets,
                     .footer = ""};
    struct tz_zone *zone = NULL;
    char error[128];
    REQUIRE(parse(&z, &zone, error) == 0);
    CHECK_EQ_I64(tz_offset_at(zone, 999), 3600); /* before the first: type 0 */
    CHECK_EQ_I64(tz_offset_at(zone, 1000), 7200);
    CHECK_EQ_I64(tz_offset_at(zone, 1999), 7200);
    CHECK_EQ_I64(tz_offset_at(zone, 2000), 3600); /* after the last, no rule: its type */
    struct tz_segment s = tz_segment_at(zone, 1500);
    CHECK_EQ_I64(s.start_s, 1000);
    CHECK_EQ_I64(s.end_s, 2000);
    tz_zone_free(zone);
    /* Version 1: 32-bit times, no footer. */
    z.version = 0;
    REQUIRE(parse(&z, &zone, error) == 0);
    CHECK_EQ_I64(tz_offset_at(zone, 1500), 7200);
    tz_zone_free(zone);
}

static void malformed_files_are_refused_with_a_reason(void)
{
    int64_t times[2] = {2000, 1000};
    uint8_t types[2] = {0, 0};
    int32_t offsets[1] = {0};
    struct tzif z = {.version = '2', .typecnt = 1, .offsets = offsets, .footer = ""};
    struct tz_zone *zone = NULL;
    char error[128];
    CHECK_EQ_I64(tz_zone_parse("x", (const uint8_t *)"# a text file\n", 14, &zone, error, 128), -1);
    CHECK_STR(error, "not a TZif file");
    size_t size = tzif_build(file_buffer, &z);
    CHECK_EQ_I64(tz_zone_parse("x", file_buffer, size - 3, &zone, error, 128), -1); /* cut */
    file_buffer[4] = '5';
    CHECK_EQ_I64(tz_zone_parse("x", file_buffer, size, &zone, error, 128), -1);
    CHECK_STR(error, "unsupported TZif version");
    z.timecnt = 2, z.times = times, z.types = types;
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "TZif transition times not increasing");
    times[0] = 500;
    types[1] = 1;
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "TZif transition names no type");
    types[1] = 0;
    z.leapcnt = 1;
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "zones with leap seconds are not supported");
    z.leapcnt = 0;
    offsets[0] = TZ_OFFSET_SECONDS_MAX + 1;
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "TZif offset out of range");
    offsets[0] = 0;
    const char *bad_footers[] = {"CET",
                                 "CET-1CEST",
                                 "CET-1CEST,M3.5.0",
                                 "CET-1CEST,M13.5.0,M10.5.0",
                                 "CET-1CEST,M3.5.0,M10.5.0/168",
                                 "C-1",
                                 "CET-1 ",
                                 "CET-25"};
    for (size_t i = 0; i < sizeof bad_footers / sizeof bad_footers[0]; i++) {
        z.footer = bad_footers[i];
        if (parse(&z, &zone, error) == 0) {
            fprintf(stderr, "  footer %s was taken\n", bad_footers[i]);
            tz_zone_free(zone);
            CHECK(false);
        } else {
            CHECK_STR(error, "TZif footer is not a TZ rule");
        }
    }
    z.footer = "UTC0";
    size = tzif_build(file_buffer, &z);
    file_buffer[size++] = 'x';
    CHECK_EQ_I64(tz_zone_parse("x", file_buffer, size, &zone, error, 128), -1);
}

static void every_bound_is_taken_and_one_past_refused(void)
{
    struct tz_zone *zone = NULL;
    char error[128];
    for (uint32_t i = 0; i <= TZ_TRANSITIONS_MAX; i++)
        many_times[i] = (int64_t)i * 3600;
    for (uint32_t i = 0; i <= TZ_TYPES_MAX; i++)
        many_offsets[i] = (int32_t)i * 60;
    struct tzif z = {.version = '2',
                     .timecnt = TZ_TRANSITIONS_MAX,
                     .times = many_times,
                     .types = many_types,
                     .typecnt = TZ_TYPES_MAX,
                     .offsets = many_offsets,
                     .footer = ""};
    REQUIRE(parse(&z, &zone, error) == 0);
    tz_zone_free(zone);
    z.timecnt = TZ_TRANSITIONS_MAX + 1;
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "TZif counts out of bounds");
    z.timecnt = 1;
    z.typecnt = TZ_TYPES_MAX + 1;
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "TZif counts out of bounds");
    z.typecnt = 1;
    char footer[TZ_FOOTER_LENGTH_MAX + 2];
    memset(footer, 'A', sizeof footer);
    footer[TZ_FOOTER_LENGTH_MAX - 1] = '0'; /* "AAA...A0": a name and offset 0 */
    footer[TZ_FOOTER_LENGTH_MAX] = '\0';
    z.footer = footer;
    REQUIRE(parse(&z, &zone, error) == 0);
    tz_zone_free(zone);
    footer[TZ_FOOTER_LENGTH_MAX - 1] = 'A';
    footer[TZ_FOOTER_LENGTH_MAX] = '0';
    footer[TZ_FOOTER_LENGTH_MAX + 1] = '\0';
    CHECK_EQ_I64(parse(&z, &zone, error), -1);
    CHECK_STR(error, "TZif footer too long");
    /* A file one byte past the bound is refused before it is read. */
    CHECK_EQ_I64(tz_zone_parse("x", file_buffer, TZ_FILE_BYTES_MAX + 1, &zone, error, 128), -1);
    CHECK_STR(error, "TZif file too large");
}

/* The footer rules that the system's zones end with give the same offsets
 * as their listed transitions, every hour of 2008..2036, and carry on after
 * the last one (2037) with the daylight-saving days where the rule says. */
static void footer_rules_agree_with_the_zone_files(void)
{
    struct {
        const char *name, *footer;
    } zones[] = {{"Europe/Berlin", "CET-1CEST,M3.5.0,M10.5.0/3"},
                 {"America/New_York", "EST5EDT,M3.2.0,M11.1.0"},
                 {"Australia/Sydney", "AEST-10AEDT,M10.1.0,M4.1.0/3"}};
    for (size_t i = 0; i < sizeof zones / sizeof zones[0]; i++) {
        const struct tz_zone *file = system_zone(zones[i].name);
        struct tz_zone *rule = rule_zone(zones[i].footer);
        REQUIRE(file != NULL);
        REQUIRE(rule != NULL);
        int mismatches = 0;
        for (int64_t t = midnight_s(2008, 1, 1); t < midnight_s(2037, 1, 1); t += 3600)
            mismatches += tz_offset_at(file, t) != tz_offset_at(rule, t);
        CHECK_EQ_I64(mismatches, 0);
        tz_zone_free(rule);
    }
    const struct tz_zone *berlin = system_zone("Europe/Berlin");
    REQUIRE(berlin != NULL);
    /* 2040: summer time from Sunday March 25 01:00Z to Sunday October 28 01:00Z. */
    int64_t march_25 = midnight_s(2040, 3, 25), october_28 = midnight_s(2040, 10, 28);
    CHECK_EQ_I64(tz_offset_at(berlin, march_25 + 3599), 3600);
    CHECK_EQ_I64(tz_offset_at(berlin, march_25 + 3600), 7200);
    CHECK_EQ_I64(tz_offset_at(berlin, october_28 + 3599), 7200);
    CHECK_EQ_I64(tz_offset_at(berlin, october_28 + 3600), 3600);
}

/* Local midnights across both changes of 2025: days of 23 and 25 hours. */
static void local_midnights_across_daylight_saving(void)
{
    const struct tz_zone *berlin = system_zone("Europe/Berlin");
    const struct tz_zone *new_york = system_zone("America/New_York");
    REQUIRE(berlin != NULL);
    REQUIRE(new_york != NULL);
    CHECK_EQ_I64(tz_first_local(berlin, midnight_s(2025, 3, 30)), INT64_C(1743289200));
    CHECK_EQ_I64(tz_first_local(berlin, midnight_s(2025, 3, 31)), INT64_C(1743372000));
    CHECK_EQ_I64(tz_first_local(berlin, midnight_s(2025, 3, 31)) -
                     tz_first_local(berlin, midnight_s(2025, 3, 30)),
                 23 * 3600);
    CHECK_EQ_I64(tz_first_local(berlin, midnight_s(2025, 10, 26)), INT64_C(1761429600));
    CHECK_EQ_I64(tz_first_local(berlin, midnight_s(2025, 10, 27)), INT64_C(1761519600));
    CHECK_EQ_I64(tz_first_local(new_york, midnight_s(2025, 3, 9)), INT64_C(1741496400));
    CHECK_EQ_I64(tz_first_local(new_york, midnight_s(2025, 3, 10)), INT64_C(1741579200));
    CHECK_EQ_I64(tz_first_local(new_york, midnight_s(2025, 11, 2)), INT64_C(1762056000));
    CHECK_EQ_I64(tz_first_local(new_york, midnight_s(2025, 11, 3)), INT64_C(1762146000));
}

/* Where a change skips midnight, the day starts at the end of the gap;
 * where it repeats midnight, at the first one. */
static void gaps_and_repeats_over_midnight(void)
{
    int64_t day = midnight_s(2030, 6, 10);
    /* 00:00 UTC+0 becomes 01:00 UTC+1: midnight is skipped. */
    int64_t spring[1] = {day};
    uint8_t to_summer[1] = {1};
    int32_t offsets[2] = {0, 3600};
    struct tzif z = {.version = '2',
                     .timecnt = 1,
                     .times = spring,
                     .types = to_summer,
                     .typecnt = 2,
                     .offsets = offsets,
                     .footer = ""};
    struct tz_zone *zone = NULL;
    char error[128];
    REQUIRE(parse(&z, &zone, error) == 0);
    CHECK_EQ_I64(tz_first_local(zone, day), day);
    CHECK_EQ_I64(tz_first_local(zone, day + DAY_S), day + DAY_S - 3600);
    tz_zone_free(zone);
    /* 00:30 UTC+1 falls back to 23:30 UTC+0: midnight comes twice. */
    int64_t autumn[1] = {day - 1800};
    uint8_t to_winter[1] = {1};
    int32_t winter[2] = {3600, 0}; /* before: UTC+1, after: UTC+0 */
    z.times = autumn;
    z.types = to_winter;
    z.offsets = winter;
    REQUIRE(parse(&z, &zone, error) == 0);
    CHECK_EQ_I64(tz_first_local(zone, day), day - 3600);
    CHECK_EQ_I64(tz_first_local(zone, day + DAY_S), day + DAY_S);
    tz_zone_free(zone);
}

/* A directory of tiny zones, for the interned table's bound. */
static void zones_past_the_bound_are_refused(void)
{
    char dir[] = "/tmp/test_tz_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    int32_t offset = 0;
    struct tzif z = {.version = '2', .typecnt = 1, .offsets = &offset, .footer = "UTC0"};
    size_t size = tzif_build(file_buffer, &z);
    char path[128];
    for (int i = 0; i <= TZ_ZONES_MAX; i++) {
        snprintf(path, sizeof path, "%s/Z%d", dir, i);
        FILE *file = fopen(path, "wb");
        REQUIRE(file != NULL);
        CHECK_EQ_U64(fwrite(file_buffer, 1, size, file), size);
        fclose(file);
    }
    snprintf(path, sizeof path, "%s/not_tzif", dir);
    FILE *text = fopen(path, "w");
    REQUIRE(text != NULL);
    fputs("# not a zone\n", text);
    fclose(text);
    REQUIRE(tz_directory_set(dir) == 0);
    const struct tz_zone *zone = NULL;
    char error[128];
    CHECK_EQ_I64(tz_zone_get("not_tzif", &zone, error, sizeof error), -1);
    CHECK_STR(error, "not a TZif file");
    /* The zones read before (the system's) count too. */
    int taken = 0;
    for (int i = 0; i <= TZ_ZONES_MAX; i++) {
        char name[16];
        snprintf(name, sizeof name, "Z%d", i);
        if (tz_zone_get(name, &zone, error, sizeof error) == 0)
            taken++;
        else
            CHECK_STR(error, "too many distinct time zones (at most 1024)");
    }
    CHECK(taken < TZ_ZONES_MAX + 1);
    CHECK(taken > TZ_ZONES_MAX - 8);
    /* Those interned still answer. */
    CHECK_EQ_I64(tz_zone_get("Z0", &zone, error, sizeof error), 0);
    for (int i = 0; i <= TZ_ZONES_MAX; i++) {
        snprintf(path, sizeof path, "%s/Z%d", dir, i);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/not_tzif", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    if (access(TZ_DIRECTORY_DEFAULT "/Europe/Berlin", R_OK) != 0) {
        printf("SKIPPED: no %s (Debian's tzdata package)\n", TZ_DIRECTORY_DEFAULT);
        return 77;
    }
    RUN(names_are_checked_before_any_file,
        "a zone name is only [A-Za-z0-9_+-/] components, at most 64 bytes, and cannot climb out "
        "of the directory; unknown names and directories are refused");
    RUN(transitions_and_types_give_offsets,
        "version 1 and 2 files: the offset before, between and after the transitions");
    RUN(malformed_files_are_refused_with_a_reason,
        "text, cut, unknown versions, unordered times, bad type indices, leap seconds, offsets "
        "out of range, bad footers and trailing bytes are refused with a reason");
    RUN(every_bound_is_taken_and_one_past_refused,
        "transitions, types, footer length and file size: the bound is taken, one past refused");
    RUN(footer_rules_agree_with_the_zone_files,
        "the footer rules of Berlin, New York and Sydney give the offsets of their zone files "
        "hour by hour, and go on after 2037");
    RUN(local_midnights_across_daylight_saving,
        "Berlin and New York local midnights across both 2025 changes: days of 23 and 25 hours");
    RUN(gaps_and_repeats_over_midnight,
        "a change that skips midnight starts the day at the end of the gap; one that repeats it, "
        "at the first");
    RUN(zones_past_the_bound_are_refused,
        "a file that is not TZif is refused by name, and the 1025th distinct zone is refused");
    return test_summary();
}
