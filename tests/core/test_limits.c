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

static void periods_are_utc_calendar(void)
{
    /* day: 2026-11-25T00:00Z .. 2026-11-26T00:00Z */
    CHECK_EQ_I64(period_start_ms(PERIOD_DAY, NOW_MS), INT64_C(1795564800000));
    CHECK_EQ_I64(period_end_ms(PERIOD_DAY, NOW_MS), INT64_C(1795651200000));
    /* week: Monday 2026-11-23T00:00Z .. Monday 2026-11-30 */
    CHECK_EQ_I64(period_start_ms(PERIOD_WEEK, NOW_MS), INT64_C(1795392000000));
    CHECK_EQ_I64(period_end_ms(PERIOD_WEEK, NOW_MS), INT64_C(1795996800000));
    /* month: 2026-11-01 .. 2026-12-01 */
    CHECK_EQ_I64(period_start_ms(PERIOD_MONTH, NOW_MS), INT64_C(1793491200000));
    CHECK_EQ_I64(period_end_ms(PERIOD_MONTH, NOW_MS), INT64_C(1796083200000));
    /* December rolls into January: 2026-12-15 -> 2027-01-01 */
    CHECK_EQ_I64(period_end_ms(PERIOD_MONTH, INT64_C(1797292800000)), INT64_C(1798761600000));
    /* leap February: 2028-02-10 -> [2028-02-01, 2028-03-01) */
    CHECK_EQ_I64(period_start_ms(PERIOD_MONTH, INT64_C(1833753600000)), INT64_C(1832976000000));
    CHECK_EQ_I64(period_end_ms(PERIOD_MONTH, INT64_C(1833753600000)), INT64_C(1835481600000));
    /* the last millisecond of a period belongs to it; the next starts anew */
    int64_t end = period_end_ms(PERIOD_MONTH, NOW_MS);
    CHECK_EQ_I64(period_start_ms(PERIOD_MONTH, end - 1), INT64_C(1793491200000));
    CHECK_EQ_I64(period_start_ms(PERIOD_MONTH, end), end);
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
    RUN(budget_timeout_defaults_and_clamps, "budget timeout defaults to 60 and clamps to 5..300");
    RUN(periods_are_utc_calendar, "day/week/month periods follow the UTC calendar");
    RUN(lease_and_key_syntax, "lease IDs and keys obey their syntax and length bounds");
    return test_summary();
}
