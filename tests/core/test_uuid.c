/* UUIDv7 lease ids (core/uuid.h): the ids made here read back with their
 * timestamp, and nothing else passes for one. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/uuid.h"
#include "test.h"

static void a_made_id_reads_back_with_its_timestamp(void)
{
    const int64_t times[] = {0, 1, INT64_C(1768478400000), (INT64_C(1) << 48) - 1};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        char text[UUID_TEXT_SIZE];
        REQUIRE(uuid_v7(times[i], text) == 0);
        int64_t unix_ms = -1;
        CHECK(uuid_v7_unix_ms(text, strlen(text), &unix_ms));
        CHECK_EQ_I64(unix_ms, times[i]);
    }
}

static void either_case_reads(void)
{
    int64_t unix_ms = -1;
    CHECK(uuid_v7_unix_ms("01936F0E-8C2A-7B3D-9A4F-2C6E8D1B5A90", 36, &unix_ms));
    CHECK_EQ_I64(unix_ms, INT64_C(0x01936f0e8c2a));
}

static void anything_else_is_not_one(void)
{
    const char *others[] = {
        "01936f0e-8c2a-4b3d-9a4f-2c6e8d1b5a90",  /* version 4 */
        "01936f0e-8c2a-7b3d-ca4f-2c6e8d1b5a90",  /* variant 110 */
        "01936f0e-8c2a-7b3d-7a4f-2c6e8d1b5a90",  /* variant 0 */
        "01936f0e-8c2a-7b3d-9a4f-2c6e8d1b5a9",   /* short */
        "01936f0e-8c2a-7b3d-9a4f-2c6e8d1b5a900", /* long */
        "01936f0e8c2a-7b3d-9a4f-2c6e8d1b5a90-",  /* hyphens moved */
        "01936f0g-8c2a-7b3d-9a4f-2c6e8d1b5a90",  /* not hex */
        "lease-1",
        "",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        int64_t unix_ms = -1;
        CHECK(!uuid_v7_unix_ms(others[i], strlen(others[i]), &unix_ms));
        CHECK_EQ_I64(unix_ms, -1);
    }
    /* Length is what counts, not a terminating NUL. */
    int64_t unix_ms = -1;
    CHECK(!uuid_v7_unix_ms("01936f0e-8c2a-7b3d-9a4f-2c6e8d1b5a90", 35, &unix_ms));
}

int main(void)
{
    RUN(a_made_id_reads_back_with_its_timestamp,
        "an id made for a time reads back as a UUIDv7 of that time");
    RUN(either_case_reads, "upper-case hex reads as well");
    RUN(anything_else_is_not_one,
        "another version or variant, another length, misplaced hyphens or non-hex are not UUIDv7");
    return test_summary();
}
