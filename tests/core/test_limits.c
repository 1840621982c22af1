/* Unit tests of limit validation and UTC budget periods (docs/semantics.md). */
#include "core/limits.h"
#include "test.h"

/* 2026-11-25T22:03:00Z */
#define NOW_MS INT64_C(1795644180000)

static struct limit_definition rolling(void)
{
    struct limit_definition d = {0};
    snprintf(d.key, sizeof d.key, "global:llm:openai:gpt-4o:rpm");
    d.kind = LIMIT_ROLLING;
    d.capacity = 3000;
    d.window_seconds = 60;
    return d;
}

static void valid_rolling_passes(void)
{
    struct limit_definition d = rolling();
    char error[256];
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
}

static void each_bad_field_is_named(void)
{
    char error[256];
    struct limit_definition d = rolling();
    d.capacity = 0;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "capacity:", 9) == 0);

    d = rolling();
    d.window_seconds = 0;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "window_seconds:", 15) == 0);

    d = rolling();
    d.period = PERIOD_MONTH;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "period:", 7) == 0);

    d = rolling();
    d.kind = LIMIT_CONCURRENCY;
    d.timeout_seconds = 30;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "window_seconds:", 15) == 0);

    d = rolling();
    d.key[3] = ' ';
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "key:", 4) == 0);

    d = rolling();
    d.capacity = AMOUNT_MAX + 1;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
}

/* Alerts: each bound and rule named, one past each bound refused. */
static void alerts_are_checked(void)
{
    char error[256];
    struct limit_definition d = rolling();
    d.alert_count = LIMIT_ALERTS_MAX;
    for (uint32_t i = 0; i < LIMIT_ALERTS_MAX; i++)
        d.alerts[i].at_percent = (uint16_t)(ALERT_PERCENT_MAX - i);
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
    d.alert_count = LIMIT_ALERTS_MAX + 1;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "alerts:", 7) == 0);

    d = rolling();
    d.alert_count = 2;
    d.alerts[0].at_percent = ALERT_PERCENT_MIN;
    d.alerts[1].at_percent = ALERT_PERCENT_MAX + 1;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK_STR(error, "alerts[1].at_percent: must be an integer 1..1000");
    d.alerts[1].at_percent = ALERT_PERCENT_MIN;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "alerts[1]:", 10) == 0); /* the same threshold twice */
    d.alerts[1] = (struct limit_alert){.runout = true};
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "alerts[1].runout_before_period_end:", 35) == 0); /* budgets only */

    d = rolling();
    snprintf(d.webhook, sizeof d.webhook, "https://hooks.example/x");
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
    const char *bad[] = {"ftp://h/x", "https://", "http:///x", "https://h/a b", "hooks.example"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(d.webhook, sizeof d.webhook, "%s", bad[i]);
        CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
        CHECK(strncmp(error, "webhook:", 8) == 0);
    }
    memset(d.webhook, 'a', WEBHOOK_URL_LENGTH_MAX);
    memcpy(d.webhook, "https://", 8);
    d.webhook[WEBHOOK_URL_LENGTH_MAX] = '\0';
    CHECK(webhook_url_valid(d.webhook)); /* at the bound */
}

/* The text form the sqlite database keeps reads back as the same alerts;
 * a text that is not one is refused with no alert set. */
static void alerts_text_round_trips(void)
{
    struct limit_definition d = {.alert_count = LIMIT_ALERTS_MAX}, back = {0};
    for (uint32_t i = 0; i < LIMIT_ALERTS_MAX - 1; i++)
        d.alerts[i].at_percent = (uint16_t)(ALERT_PERCENT_MAX - i);
    d.alerts[LIMIT_ALERTS_MAX - 1].runout = true;
    char text[LIMIT_ALERTS_TEXT_SIZE];
    limit_alerts_text(&d, text);
    CHECK_STR(text, "1000,999,998,997,996,995,994,runout");
    CHECK_EQ_I64(limit_alerts_parse_text(text, &back), 0);
    CHECK(limit_alerts_same(&d, &back));
    CHECK_EQ_I64(limit_alerts_parse_text("", &back), 0);
    CHECK_EQ_U64(back.alert_count, 0);
    const char *bad[] = {"80,",   ",80",     "80,,90", "1001",
                         "10000", "runoutx", "x",      "1,2,3,4,5,6,7,8,9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_I64(limit_alerts_parse_text(bad[i], &back), -1);
        CHECK_EQ_U64(back.alert_count, 0);
    }
}

static void budget_timeout_defaults_and_clamps(void)
{
    char error[256];
    struct limit_definition d = {0};
    snprintf(d.key, sizeof d.key, "team:sales:usd:month");
    d.kind = LIMIT_BUDGET;
    d.capacity = 100000000;
    d.period = PERIOD_MONTH;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
    CHECK_EQ_U64(d.timeout_seconds, 60);
    d.timeout_seconds = 1;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
    CHECK_EQ_U64(d.timeout_seconds, 5);
    d.timeout_seconds = 10000;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
    CHECK_EQ_U64(d.timeout_seconds, 300);
    d.period = PERIOD_NONE;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "period:", 7) == 0);
}

/* A validated budget of that period, anchor day and zone ("" for UTC). */
static struct limit_definition budget(enum limit_period period, uint8_t anchor_day,
                                      const char *time_zone)
{
    struct limit_definition d = {0};
    snprintf(d.key, sizeof d.key, "team:sales:usd");
    d.kind = LIMIT_BUDGET;
    d.capacity = 1000;
    d.period = period;
    d.period_anchor_day = anchor_day;
    snprintf(d.time_zone, sizeof d.time_zone, "%s", time_zone);
    char error[256];
    if (limit_definition_validate(&d, error, sizeof error) != 0)
        fprintf(stderr, "  invalid test budget: %s\n", error);
    return d;
}

static int64_t utc_start(enum limit_period period, int64_t unix_ms)
{
    struct limit_definition d = budget(period, 0, "");
    return period_span_at(&d, unix_ms).start_ms;
}

static int64_t utc_end(enum limit_period period, int64_t unix_ms)
{
    struct limit_definition d = budget(period, 0, "");
    return period_span_at(&d, unix_ms).end_ms;
}

static void periods_are_utc_calendar(void)
{
    /* day: 2026-11-25T00:00Z .. 2026-11-26T00:00Z */
    CHECK_EQ_I64(utc_start(PERIOD_DAY, NOW_MS), INT64_C(1795564800000));
    CHECK_EQ_I64(utc_end(PERIOD_DAY, NOW_MS), INT64_C(1795651200000));
    /* week: Monday 2026-11-23T00:00Z .. Monday 2026-11-30 */
    CHECK_EQ_I64(utc_start(PERIOD_WEEK, NOW_MS), INT64_C(1795392000000));
    CHECK_EQ_I64(utc_end(PERIOD_WEEK, NOW_MS), INT64_C(1795996800000));
    /* month: 2026-11-01 .. 2026-12-01 */
    CHECK_EQ_I64(utc_start(PERIOD_MONTH, NOW_MS), INT64_C(1793491200000));
    CHECK_EQ_I64(utc_end(PERIOD_MONTH, NOW_MS), INT64_C(1796083200000));
    /* December rolls into January: 2026-12-15 -> 2027-01-01 */
    CHECK_EQ_I64(utc_end(PERIOD_MONTH, INT64_C(1797292800000)), INT64_C(1798761600000));
    /* leap February: 2028-02-10 -> [2028-02-01, 2028-03-01) */
    CHECK_EQ_I64(utc_start(PERIOD_MONTH, INT64_C(1833753600000)), INT64_C(1832976000000));
    CHECK_EQ_I64(utc_end(PERIOD_MONTH, INT64_C(1833753600000)), INT64_C(1835481600000));
    /* the last millisecond of a period belongs to it; the next starts anew */
    int64_t end = utc_end(PERIOD_MONTH, NOW_MS);
    CHECK_EQ_I64(utc_start(PERIOD_MONTH, end - 1), INT64_C(1793491200000));
    CHECK_EQ_I64(utc_start(PERIOD_MONTH, end), end);
}

/* A span as [start, end) in ms, checked whole. */
#define CHECK_SPAN(d, at_ms, start, end)                                                           \
    do {                                                                                           \
        struct period_span span_ = period_span_at((d), (at_ms));                                   \
        CHECK_EQ_I64(span_.start_ms, (start));                                                     \
        CHECK_EQ_I64(span_.end_ms, (end));                                                         \
    } while (0)

#define HOUR_MS INT64_C(3600000)
#define DAY_MS INT64_C(86400000)
/* Local midnights (computed apart, with Python's zoneinfo). */
#define BERLIN_2025_03_30 INT64_C(1743289200000) /* 2025-03-29T23:00Z */
#define BERLIN_2025_03_31 INT64_C(1743372000000) /* 2025-03-30T22:00Z */
#define BERLIN_2025_10_26 INT64_C(1761429600000) /* 2025-10-25T22:00Z */
#define BERLIN_2025_10_27 INT64_C(1761519600000) /* 2025-10-26T23:00Z */
#define BERLIN_2025_03_01 INT64_C(1740783600000)
#define BERLIN_2025_04_01 INT64_C(1743458400000)
#define BERLIN_2025_03_24 INT64_C(1742770800000)   /* a Monday */
#define NEW_YORK_2025_03_09 INT64_C(1741496400000) /* 05:00Z */
#define NEW_YORK_2025_03_10 INT64_C(1741579200000) /* 04:00Z */
#define NEW_YORK_2025_11_02 INT64_C(1762056000000) /* 04:00Z */
#define NEW_YORK_2025_11_03 INT64_C(1762146000000) /* 05:00Z */

static void zoned_days_follow_daylight_saving(void)
{
    struct limit_definition berlin = budget(PERIOD_DAY, 0, "Europe/Berlin");
    struct limit_definition new_york = budget(PERIOD_DAY, 0, "America/New_York");
    REQUIRE(berlin.zone != NULL);
    REQUIRE(new_york.zone != NULL);
    /* Spring: 23 hours; the last millisecond before local midnight is the day before. */
    CHECK_SPAN(&berlin, BERLIN_2025_03_30 + HOUR_MS, BERLIN_2025_03_30, BERLIN_2025_03_31);
    CHECK_EQ_I64(BERLIN_2025_03_31 - BERLIN_2025_03_30, 23 * HOUR_MS);
    CHECK_SPAN(&berlin, BERLIN_2025_03_30 - 1, BERLIN_2025_03_30 - DAY_MS, BERLIN_2025_03_30);
    CHECK_SPAN(&berlin, BERLIN_2025_03_31, BERLIN_2025_03_31, BERLIN_2025_03_31 + DAY_MS);
    /* Autumn: 25 hours, the repeated hour inside. */
    CHECK_SPAN(&berlin, BERLIN_2025_10_27 - 1, BERLIN_2025_10_26, BERLIN_2025_10_27);
    CHECK_EQ_I64(BERLIN_2025_10_27 - BERLIN_2025_10_26, 25 * HOUR_MS);
    CHECK_SPAN(&new_york, NEW_YORK_2025_03_09 + 3 * HOUR_MS, NEW_YORK_2025_03_09,
               NEW_YORK_2025_03_10);
    CHECK_EQ_I64(NEW_YORK_2025_03_10 - NEW_YORK_2025_03_09, 23 * HOUR_MS);
    CHECK_SPAN(&new_york, NEW_YORK_2025_11_02 + 2 * HOUR_MS, NEW_YORK_2025_11_02,
               NEW_YORK_2025_11_03);
    CHECK_EQ_I64(NEW_YORK_2025_11_03 - NEW_YORK_2025_11_02, 25 * HOUR_MS);
    /* Weeks and months start at local midnight too. */
    struct limit_definition week = budget(PERIOD_WEEK, 0, "Europe/Berlin");
    CHECK_SPAN(&week, BERLIN_2025_03_30 + HOUR_MS, BERLIN_2025_03_24, BERLIN_2025_03_31);
    struct limit_definition month = budget(PERIOD_MONTH, 0, "Europe/Berlin");
    CHECK_SPAN(&month, BERLIN_2025_03_30, BERLIN_2025_03_01, BERLIN_2025_04_01);
    CHECK_SPAN(&month, BERLIN_2025_03_01 - 1, BERLIN_2025_03_01 - 28 * DAY_MS, BERLIN_2025_03_01);
}

#define UTC_2024_01_28 INT64_C(1706400000000)
#define UTC_2024_02_28 INT64_C(1709078400000)
#define UTC_2024_02_29 INT64_C(1709164800000)
#define UTC_2024_03_01 INT64_C(1709251200000)
#define UTC_2024_03_28 INT64_C(1711584000000)
#define UTC_2025_01_28 INT64_C(1738022400000)
#define UTC_2025_01_31 INT64_C(1738281600000)
#define UTC_2025_02_01 INT64_C(1738368000000)
#define UTC_2025_02_28 INT64_C(1740700800000)
#define UTC_2025_03_01 INT64_C(1740787200000)
#define UTC_2025_03_28 INT64_C(1743120000000)

static void anchored_months_and_leap_days(void)
{
    struct limit_definition day28 = budget(PERIOD_MONTH, 28, "");
    /* The 27th of February is still January's period; the 28th starts February's. */
    CHECK_SPAN(&day28, UTC_2025_02_28 - 1, UTC_2025_01_28, UTC_2025_02_28);
    CHECK_SPAN(&day28, UTC_2025_02_28, UTC_2025_02_28, UTC_2025_03_28);
    /* A leap year: February 29 lies in the period from the 28th. */
    CHECK_SPAN(&day28, UTC_2024_02_29, UTC_2024_02_28, UTC_2024_03_28);
    CHECK_SPAN(&day28, UTC_2024_02_28 - 1, UTC_2024_01_28, UTC_2024_02_28);
    /* Month ends of the 1st: the 31st and the 28th/29th of February. */
    struct limit_definition first = budget(PERIOD_MONTH, 1, "");
    struct limit_definition unset = budget(PERIOD_MONTH, 0, "");
    CHECK_SPAN(&first, UTC_2025_02_01 - 1, UTC_2025_02_01 - 31 * DAY_MS, UTC_2025_02_01);
    CHECK_SPAN(&first, UTC_2025_03_01 - 1, UTC_2025_02_01, UTC_2025_03_01);
    CHECK_SPAN(&first, UTC_2024_03_01 - 1, UTC_2024_03_01 - 29 * DAY_MS, UTC_2024_03_01);
    CHECK_SPAN(&unset, UTC_2025_01_31, UTC_2025_02_01 - 31 * DAY_MS, UTC_2025_02_01);
    /* Days across leap days. */
    struct limit_definition day = budget(PERIOD_DAY, 0, "");
    CHECK_SPAN(&day, UTC_2024_02_29 - 1, UTC_2024_02_28, UTC_2024_02_29);
    CHECK_SPAN(&day, UTC_2024_02_29, UTC_2024_02_29, UTC_2024_03_01);
    CHECK_SPAN(&day, UTC_2025_03_01 - 1, UTC_2025_02_28, UTC_2025_03_01);
}

static void prepaid_has_one_period_forever(void)
{
    struct limit_definition prepaid = budget(PERIOD_PREPAID, 0, "");
    CHECK_SPAN(&prepaid, NOW_MS, 0, PERIOD_PREPAID_END_MS);
    CHECK_SPAN(&prepaid, 0, 0, PERIOD_PREPAID_END_MS);
    CHECK_SPAN(&prepaid, PERIOD_PREPAID_END_MS - 1, 0, PERIOD_PREPAID_END_MS);
    CHECK_STR(limit_period_name(PERIOD_PREPAID), "none");
    enum limit_period parsed = PERIOD_DAY;
    CHECK_EQ_I64(limit_period_parse("none", &parsed), 0);
    CHECK_EQ_I64(parsed, PERIOD_PREPAID);
}

static void period_fields_are_checked_and_named(void)
{
    char error[256];
    struct limit_definition d = budget(PERIOD_MONTH, 28, "Europe/Berlin");
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), 0);
    d.period_anchor_day = 29; /* one past */
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK_STR(error, "period_anchor_day: must be 1..28");
    d = budget(PERIOD_MONTH, 0, "");
    d.period = PERIOD_DAY;
    d.period_anchor_day = 3;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK_STR(error, "period_anchor_day: only for period month");
    d = budget(PERIOD_DAY, 0, "");
    snprintf(d.time_zone, sizeof d.time_zone, "Mars/Olympus_Mons");
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK_STR(error, "time_zone: Mars/Olympus_Mons: unknown time zone");
    snprintf(d.time_zone, sizeof d.time_zone, "../../etc/passwd");
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "time_zone: ../../etc/passwd: must be a zone name", 48) == 0);
    d = budget(PERIOD_PREPAID, 0, "");
    snprintf(d.time_zone, sizeof d.time_zone, "Europe/Berlin");
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK(strncmp(error, "time_zone: not allowed with period none", 39) == 0);
    d = rolling();
    snprintf(d.time_zone, sizeof d.time_zone, "Europe/Berlin");
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK_STR(error, "time_zone: not allowed on a rolling limit");
    d = rolling();
    d.period_anchor_day = 1;
    CHECK_EQ_I64(limit_definition_validate(&d, error, sizeof error), -1);
    CHECK_STR(error, "period_anchor_day: not allowed on a rolling limit");
}

static void same_periods_and_local_text(void)
{
    struct limit_definition a = budget(PERIOD_MONTH, 0, ""), b = budget(PERIOD_MONTH, 1, "");
    CHECK(limit_period_same(&a, &b)); /* the 1st, said or not */
    b = budget(PERIOD_MONTH, 2, "");
    CHECK(!limit_period_same(&a, &b));
    b = budget(PERIOD_MONTH, 0, "UTC");
    CHECK(!limit_period_same(&a, &b));
    char text[PERIOD_LOCAL_TEXT_SIZE];
    struct limit_definition berlin = budget(PERIOD_DAY, 0, "Europe/Berlin");
    CHECK(period_local_text(&berlin, BERLIN_2025_03_30, text));
    CHECK_STR(text, "2025-03-30T00:00:00+01:00");
    CHECK(period_local_text(&berlin, BERLIN_2025_03_31, text));
    CHECK_STR(text, "2025-03-31T00:00:00+02:00");
    struct limit_definition new_york = budget(PERIOD_DAY, 0, "America/New_York");
    CHECK(period_local_text(&new_york, NEW_YORK_2025_11_03, text));
    CHECK_STR(text, "2025-11-03T00:00:00-05:00");
    CHECK(period_local_text(&a, UTC_2025_03_01, text));
    CHECK_STR(text, "2025-03-01T00:00:00Z");
    CHECK(!period_local_text(&a, PERIOD_PREPAID_END_MS, text)); /* year 10000 */
}

/* The memo answers as the arithmetic, over period changes both ways. */
static void memo_answers_as_the_arithmetic(void)
{
    struct limit_definition berlin = budget(PERIOD_DAY, 0, "Europe/Berlin");
    struct period_memo memo = {0};
    int64_t times[] = {BERLIN_2025_03_30,     BERLIN_2025_03_30 + 1, BERLIN_2025_03_31 - 1,
                       BERLIN_2025_03_31,     BERLIN_2025_03_30 - 1, BERLIN_2025_10_26,
                       BERLIN_2025_10_27 - 1, BERLIN_2025_10_27};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        struct period_span memoised = period_memo_span(&berlin, &memo, times[i]);
        struct period_span computed = period_span_at(&berlin, times[i]);
        CHECK_EQ_I64(memoised.start_ms, computed.start_ms);
        CHECK_EQ_I64(memoised.end_ms, computed.end_ms);
    }
}

static void lease_and_key_syntax(void)
{
    CHECK(lease_id_valid("0190c2a4-7b7e-7c3e-8f00-1234abcd.x_y:z", 38));
    CHECK(!lease_id_valid("a b", 3));
    CHECK(!lease_id_valid("", 0));
    char long_id[LEASE_ID_LENGTH_MAX + 1];
    memset(long_id, 'a', sizeof long_id);
    CHECK(lease_id_valid(long_id, LEASE_ID_LENGTH_MAX));
    CHECK(!lease_id_valid(long_id, LEASE_ID_LENGTH_MAX + 1));
    char long_key[LIMIT_KEY_LENGTH_MAX + 1];
    memset(long_key, 'k', sizeof long_key);
    CHECK(limit_key_valid(long_key, LIMIT_KEY_LENGTH_MAX));
    CHECK(!limit_key_valid(long_key, LIMIT_KEY_LENGTH_MAX + 1));
    CHECK(!limit_key_valid("tab\there", 8));
}

int main(void)
{
    RUN(valid_rolling_passes, "a complete rolling definition validates");
    RUN(each_bad_field_is_named, "each invalid field is rejected with its name");
    RUN(alerts_are_checked, "alerts and webhooks: bounds, duplicates, runout on budgets only");
    RUN(alerts_text_round_trips, "the alerts' text form reads back the same; bad text sets none");
    RUN(budget_timeout_defaults_and_clamps, "budget timeout defaults to 60 and clamps to 5..300");
    RUN(periods_are_utc_calendar, "day/week/month periods follow the UTC calendar");
    RUN(zoned_days_follow_daylight_saving,
        "Berlin and New York days of 23 and 25 hours, weeks and months from local midnight");
    RUN(anchored_months_and_leap_days,
        "anchor day 28 across February in leap and other years; month ends of the 1st");
    RUN(prepaid_has_one_period_forever, "period none is one period, [0, year 10000)");
    RUN(period_fields_are_checked_and_named,
        "anchor day 29, an anchor off months, unknown or escaping zones, a zone on none or on "
        "another kind: each refused naming its field");
    RUN(same_periods_and_local_text,
        "anchor 0 and 1 are the same periods, another zone is not; local RFC 3339 text with the "
        "offset in force");
    RUN(memo_answers_as_the_arithmetic, "the period memo answers what period_span_at does");
    RUN(lease_and_key_syntax, "lease IDs and keys obey their syntax and length bounds");
    return test_summary();
}
