/* Proleptic Gregorian calendar arithmetic on days since 1970-01-01, with
 * 400-year eras, exact for every day count an int64 of milliseconds holds:
 * shared by budget periods (limits.c) and time zone rules (tz.c). */
#ifndef LLMLIMIT_CIVIL_H
#define LLMLIMIT_CIVIL_H

#include <stdbool.h>
#include <stdint.h>

#define CIVIL_SECONDS_PER_DAY INT64_C(86400)

/* Floor division (rounds toward minus infinity); b > 0. */
static inline int64_t civil_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && a < 0)
        q--;
    return q;
}

/* Days since 1970-01-01 -> year, month (1..12), day (1..31). */
static inline void civil_from_days(int64_t days, int64_t *year, int *month, int *day)
{
    days += 719468;
    int64_t era = civil_floor_div(days, 146097);
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (m <= 2 ? 1 : 0);
    *month = m;
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
}

/* Year, month (1..12), day (1..31) -> days since 1970-01-01. */
static inline int64_t civil_to_days(int64_t year, int month, int day)
{
    year -= month <= 2 ? 1 : 0;
    int64_t era = civil_floor_div(year, 400);
    int64_t yoe = year - era * 400;
    int64_t mp = month > 2 ? month - 3 : month + 9;
    int64_t doy = (153 * mp + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static inline bool civil_leap_year(int64_t year)
{
    return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

static inline int civil_month_days(int64_t year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && civil_leap_year(year) ? 29 : days[month - 1];
}

/* Day of the week of a day count: 0 Sunday .. 6 Saturday (1970-01-01 was a
 * Thursday). */
static inline int civil_weekday(int64_t days)
{
    return (int)(((days + 4) % 7 + 7) % 7);
}

#endif
