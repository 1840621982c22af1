/* Conformance: budget periods of every kind (docs/semantics.md "Budgets"):
 * prepaid budgets that never reset, months from an anchor day across
 * February, leap days, and local days of 23 and 25 hours where
 * daylight-saving time starts and ends. The times are absolute: on a
 * backend with its own clock (tigerbeetle) the tests run on a manual clock
 * that its period arithmetic reads (PERIOD_CLOCK_TEST_ENTRY). Expected
 * instants were computed apart from src/core (Python's zoneinfo). */
#include "conformance.h"
#include "test.h"

#define HOUR_MS INT64_C(3600000)
#define DAY_MS INT64_C(86400000)

#define UTC_2024_01_28 INT64_C(1706400000000)
#define UTC_2024_02_28 INT64_C(1709078400000)
#define UTC_2024_02_29 INT64_C(1709164800000)
#define UTC_2024_03_01 INT64_C(1709251200000)
#define UTC_2024_03_28 INT64_C(1711584000000)
#define UTC_2025_01_28 INT64_C(1738022400000)
#define UTC_2025_02_01 INT64_C(1738368000000)
#define UTC_2025_02_28 INT64_C(1740700800000)
#define UTC_2025_03_01 INT64_C(1740787200000)
#define UTC_2025_03_28 INT64_C(1743120000000)

/* Local midnights. */
#define BERLIN_2025_03_30 INT64_C(1743289200000)   /* 2025-03-29T23:00Z */
#define BERLIN_2025_03_31 INT64_C(1743372000000)   /* 2025-03-30T22:00Z */
#define BERLIN_2025_04_01 INT64_C(1743458400000)   /* 2025-03-31T22:00Z */
#define BERLIN_2025_03_01 INT64_C(1740783600000)   /* 2025-02-28T23:00Z */
#define BERLIN_2025_10_26 INT64_C(1761429600000)   /* 2025-10-25T22:00Z */
#define BERLIN_2025_10_27 INT64_C(1761519600000)   /* 2025-10-26T23:00Z */
#define NEW_YORK_2025_03_09 INT64_C(1741496400000) /* 05:00Z */
#define NEW_YORK_2025_03_10 INT64_C(1741579200000) /* 04:00Z */
#define NEW_YORK_2025_11_02 INT64_C(1762056000000) /* 04:00Z */
#define NEW_YORK_2025_11_03 INT64_C(1762146000000) /* 05:00Z */

static bool put_in(struct fixture *f, const char *key, uint64_t capacity, enum limit_period period,
                   uint8_t anchor_day, const char *time_zone)
{
    char error[RESULT_ERROR_SIZE] = "";
    enum backend_admin_result rc =
        put(f, budget_limit_in(key, capacity, period, anchor_day, time_zone), NULL, error);
    if (rc != BACKEND_ADMIN_OK)
        fprintf(stderr, "  put %s: %s\n", key, error);
    return rc == BACKEND_ADMIN_OK;
}

/* The period usage reports at at_ms is [start, end). */
#define CHECK_PERIOD_AT(f, key, at_ms, start, end)                                                 \
    do {                                                                                           \
        struct limit_usage period_u_ = usage_at((f), (key), (at_ms));                              \
        CHECK_EQ_I64(period_u_.period_start_unix_ms, (start));                                     \
        CHECK_EQ_I64(period_u_.period_end_unix_ms, (end));                                         \
    } while (0)

FIXTURE_TEST(prepaid_budget_never_resets)
{
    REQUIRE(put_in(f, "credits", 1000, PERIOD_PREPAID, 0, ""));
    REQUIRE(reserve1(f, "first", "credits", 600));
    REQUIRE(complete_none(f, "first").status == RESULT_OK);
    struct limit_usage u = usage(f, "credits");
    CHECK_EQ_U64(u.used, 600);
    CHECK_EQ_I64(u.period_start_unix_ms, 0);
    CHECK_EQ_I64(u.period_end_unix_ms, PERIOD_PREPAID_END_MS);
    /* Two years on, nothing came back: no month, day or year resets it. */
    set_time(f, T0_MS + 2 * 366 * DAY_MS);
    CHECK_EQ_U64(usage(f, "credits").used, 600);
    struct reservation denied = RESERVE(f, "too-much", {"credits", 500});
    CHECK(!denied.allowed);
    /* Nothing but a top-up makes room: no retry time inside the API's years. */
    CHECK(denied.retry_after_ms >= PERIOD_PREPAID_END_MS - now_ms(f) - 1000);
    CHECK(reserve1(f, "fits", "credits", 400));
    REQUIRE(complete_none(f, "fits").status == RESULT_OK);
    /* A top-up: raise the capacity; what was spent stays spent. */
    REQUIRE(put_in(f, "credits", 1500, PERIOD_PREPAID, 0, ""));
    u = usage(f, "credits");
    CHECK_EQ_U64(u.used, 1000);
    CHECK_EQ_I64(u.available, 500);
    CHECK(reserve1(f, "after-top-up", "credits", 500));
    /* Every time names the one period. */
    CHECK_EQ_U64(usage_at(f, "credits", T0_MS).used, 1000);
}

FIXTURE_TEST(anchor_day_28_across_february)
{
    set_time(f, UTC_2025_02_28 - 1);
    REQUIRE(put_in(f, "usd", 100, PERIOD_MONTH, 28, ""));
    /* The 27th of February still belongs to the month from January 28. */
    REQUIRE(reserve1(f, "late", "usd", 100));
    CHECK(!reserve1(f, "full", "usd", 1));
    CHECK_PERIOD_AT(f, "usd", now_ms(f), UTC_2025_01_28, UTC_2025_02_28);
    set_time(f, UTC_2025_02_28);
    CHECK(reserve1(f, "new-month", "usd", 100));
    CHECK_PERIOD_AT(f, "usd", now_ms(f), UTC_2025_02_28, UTC_2025_03_28);
    CHECK_EQ_U64(usage_at(f, "usd", UTC_2025_02_28 - 1).reserved, 100);
    CHECK_EQ_U64(usage(f, "usd").reserved, 100);
    /* A leap year: February 29 lies in the month from the 28th. */
    CHECK_PERIOD_AT(f, "usd", UTC_2024_02_29, UTC_2024_02_28, UTC_2024_03_28);
    CHECK_PERIOD_AT(f, "usd", UTC_2024_02_28 - 1, UTC_2024_01_28, UTC_2024_02_28);
}

FIXTURE_TEST(days_and_months_across_leap_days)
{
    set_time(f, UTC_2024_02_29 - 1);
    REQUIRE(put_in(f, "daily", 100, PERIOD_DAY, 0, ""));
    REQUIRE(put_in(f, "monthly", 100, PERIOD_MONTH, 0, ""));
    REQUIRE(reserve1(f, "feb-28", "daily", 100));
    set_time(f, UTC_2024_02_29);
    /* February 29 is a day of its own, not March 1. */
    CHECK(reserve1(f, "feb-29", "daily", 100));
    CHECK_PERIOD_AT(f, "daily", now_ms(f), UTC_2024_02_29, UTC_2024_03_01);
    CHECK_PERIOD_AT(f, "monthly", now_ms(f), UTC_2024_03_01 - 29 * DAY_MS, UTC_2024_03_01);
    set_time(f, UTC_2024_03_01);
    CHECK(reserve1(f, "mar-1", "daily", 100));
    /* Not a leap year: February 28 is followed by March 1. */
    CHECK_PERIOD_AT(f, "daily", UTC_2025_03_01 - 1, UTC_2025_02_28, UTC_2025_03_01);
    CHECK_PERIOD_AT(f, "monthly", UTC_2025_03_01 - 1, UTC_2025_02_01, UTC_2025_03_01);
}

FIXTURE_TEST(zoned_month_ends_at_local_midnight)
{
    set_time(f, BERLIN_2025_04_01 - 1); /* 2025-03-31T23:59:59.999+02:00 */
    REQUIRE(put_in(f, "usd", 100, PERIOD_MONTH, 0, "Europe/Berlin"));
    REQUIRE(reserve1(f, "march", "usd", 100));
    CHECK_PERIOD_AT(f, "usd", now_ms(f), BERLIN_2025_03_01, BERLIN_2025_04_01);
    CHECK(!reserve1(f, "still-march", "usd", 1));
    set_time(f, BERLIN_2025_04_01); /* 22:00Z on the 31st: April in Berlin */
    CHECK(reserve1(f, "april", "usd", 100));
    CHECK_EQ_U64(usage_at(f, "usd", BERLIN_2025_04_01 - 1).reserved, 100);
}

/* A day budget in zone across the local day [start, end) of `hours`
 * hours: a reservation made before its midnight is charged to the day
 * before even when completed after it; the day holds until its last
 * millisecond; the next starts at its local midnight. */
static void check_zoned_day(struct fixture *f, const char *zone, int64_t start, int64_t end,
                            int64_t hours)
{
    CHECK_EQ_I64(end - start, hours * HOUR_MS);
    set_time(f, start - 1);
    REQUIRE(put_in(f, "usd", 100, PERIOD_DAY, 0, zone));
    REQUIRE(reserve1(f, "before-midnight", "usd", 100));
    CHECK_PERIOD_AT(f, "usd", now_ms(f), start - 24 * HOUR_MS, start);
    set_time(f, start);
    REQUIRE(reserve1(f, "after-midnight", "usd", 100));
    REQUIRE(complete_none(f, "after-midnight").status == RESULT_OK);
    CHECK_EQ_I64(COMPLETE(f, "before-midnight", {"usd", 100}).status, RESULT_OK);
    struct limit_usage day_before = usage_at(f, "usd", start - 1);
    CHECK_EQ_U64(day_before.used, 100);
    CHECK_EQ_U64(day_before.reserved, 0);
    struct limit_usage today = usage(f, "usd");
    CHECK_EQ_U64(today.used, 100);
    CHECK_EQ_I64(today.period_start_unix_ms, start);
    CHECK_EQ_I64(today.period_end_unix_ms, end);
    /* The whole day is one period: full until its last millisecond. */
    set_time(f, end - 1);
    struct reservation late = RESERVE(f, "last-millisecond", {"usd", 1});
    CHECK(!late.allowed);
    CHECK_EQ_I64(late.retry_after_ms, 1);
    set_time(f, end);
    CHECK(reserve1(f, "next-day", "usd", 100));
    CHECK_PERIOD_AT(f, "usd", now_ms(f), end, end + 24 * HOUR_MS);
}

FIXTURE_TEST(berlin_spring_day_has_23_hours)
{
    check_zoned_day(f, "Europe/Berlin", BERLIN_2025_03_30, BERLIN_2025_03_31, 23);
}

FIXTURE_TEST(berlin_autumn_day_has_25_hours)
{
    check_zoned_day(f, "Europe/Berlin", BERLIN_2025_10_26, BERLIN_2025_10_27, 25);
}

FIXTURE_TEST(new_york_spring_day_has_23_hours)
{
    check_zoned_day(f, "America/New_York", NEW_YORK_2025_03_09, NEW_YORK_2025_03_10, 23);
}

FIXTURE_TEST(new_york_autumn_day_has_25_hours)
{
    check_zoned_day(f, "America/New_York", NEW_YORK_2025_11_02, NEW_YORK_2025_11_03, 25);
}

/* A budget of the old fields keeps its periods: saying the 1st changes
 * nothing; another anchor day, zone or period is refused, naming it. */
FIXTURE_TEST(period_fields_cannot_change_in_place)
{
    REQUIRE(put_budget(f, "usd", 1000, PERIOD_MONTH, 60));
    REQUIRE(reserve1(f, "spent", "usd", 10));
    REQUIRE(complete_none(f, "spent").status == RESULT_OK);
    struct limit_usage before = usage(f, "usd");
    CHECK_EQ_I64(put(f, budget_limit_in("usd", 1000, PERIOD_MONTH, 1, ""), NULL, NULL),
                 BACKEND_ADMIN_OK);
    struct limit_usage after = usage(f, "usd");
    CHECK_EQ_U64(after.used, 10);
    CHECK_EQ_I64(after.period_start_unix_ms, before.period_start_unix_ms);
    CHECK_EQ_I64(after.period_end_unix_ms, before.period_end_unix_ms);
    char error[RESULT_ERROR_SIZE];
    CHECK_EQ_I64(put(f, budget_limit_in("usd", 1000, PERIOD_MONTH, 15, ""), NULL, error),
                 BACKEND_ADMIN_PERIOD_CHANGED);
    CHECK_STR(error, "period_anchor_day: cannot change 1 to 15; delete the limit first");
    CHECK_EQ_I64(
        put(f, budget_limit_in("usd", 1000, PERIOD_MONTH, 0, "Europe/Berlin"), NULL, error),
        BACKEND_ADMIN_PERIOD_CHANGED);
    CHECK_STR(error, "time_zone: cannot change UTC to Europe/Berlin; delete the limit first");
    CHECK_EQ_I64(put(f, budget_limit_in("usd", 1000, PERIOD_PREPAID, 0, ""), NULL, error),
                 BACKEND_ADMIN_PERIOD_CHANGED);
    CHECK_STR(error, "period: cannot change month to none; delete the limit first");
    enum backend_admin_result rc;
    struct limit_state state = get_limit(f, "usd", &rc);
    CHECK_EQ_I64(rc, BACKEND_ADMIN_OK);
    CHECK(state.definition.period_anchor_day <= 1);
    CHECK_STR(state.definition.time_zone, "");
    CHECK_EQ_U64(usage(f, "usd").used, 10);
}

/* A state restored from the registry keeps its anchor day and zone. */
FIXTURE_TEST(restore_keeps_anchor_day_and_zone)
{
    set_time(f, BERLIN_2025_03_30 + HOUR_MS);
    struct limit_state state = {0};
    state.definition = budget_limit_in("usd", 100, PERIOD_MONTH, 15, "Europe/Berlin");
    char error[RESULT_ERROR_SIZE] = "";
    REQUIRE(restore(f, state, error) == BACKEND_ADMIN_OK);
    enum backend_admin_result rc;
    struct limit_state got = get_limit(f, "usd", &rc);
    REQUIRE(rc == BACKEND_ADMIN_OK);
    CHECK_EQ_U64(got.definition.period_anchor_day, 15);
    CHECK_STR(got.definition.time_zone, "Europe/Berlin");
    /* March 15 to April 15, from Berlin's midnights (UTC+1, then UTC+2). */
    CHECK_PERIOD_AT(f, "usd", now_ms(f), BERLIN_2025_03_01 + 14 * DAY_MS,
                    BERLIN_2025_04_01 + 14 * DAY_MS);
    CHECK(reserve1(f, "one", "usd", 100));
}

const struct conformance_test period_tests[] = {
    PERIOD_CLOCK_TEST_ENTRY(prepaid_budget_never_resets,
                            "period none never resets, over years; a top-up is a higher "
                            "capacity, and what was spent stays spent"),
    PERIOD_CLOCK_TEST_ENTRY(anchor_day_28_across_february,
                            "a month from the 28th: February 27 is January's month, February 28 "
                            "starts the next; February 29 of a leap year lies inside"),
    PERIOD_CLOCK_TEST_ENTRY(days_and_months_across_leap_days,
                            "UTC days and months across February 28 and 29 in a leap year and "
                            "in another"),
    PERIOD_CLOCK_TEST_ENTRY(zoned_month_ends_at_local_midnight,
                            "a Berlin month ends at Berlin's midnight of the 31st (22:00Z)"),
    PERIOD_CLOCK_TEST_ENTRY(berlin_spring_day_has_23_hours,
                            "Europe/Berlin's spring day is a period of 23 hours; a reservation "
                            "made before local midnight is charged to its own day"),
    PERIOD_CLOCK_TEST_ENTRY(berlin_autumn_day_has_25_hours,
                            "Europe/Berlin's autumn day is a period of 25 hours; a reservation "
                            "made before local midnight is charged to its own day"),
    PERIOD_CLOCK_TEST_ENTRY(new_york_spring_day_has_23_hours,
                            "America/New_York's spring day is a period of 23 hours; a "
                            "reservation made before local midnight is charged to its own day"),
    PERIOD_CLOCK_TEST_ENTRY(new_york_autumn_day_has_25_hours,
                            "America/New_York's autumn day is a period of 25 hours; a "
                            "reservation made before local midnight is charged to its own day"),
    TEST_ENTRY(period_fields_cannot_change_in_place,
               "an old UTC budget keeps its periods when the 1st is said; another anchor day, "
               "zone or period is refused naming the field, nothing changed"),
    PERIOD_CLOCK_TEST_ENTRY(restore_keeps_anchor_day_and_zone,
                            "a restored state keeps its anchor day and zone, and its periods "
                            "follow them"),
};
const uint32_t period_test_count = sizeof period_tests / sizeof period_tests[0];
