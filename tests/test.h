/* A minimal test harness: each test is a function that says in one line what
 * it proves; CHECK* record failures with file:line and keep going; the run
 * ends with the line "N passed, N failed" and a non-zero exit on failure. */
#ifndef LLMLIMIT_TEST_H
#define LLMLIMIT_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One set of counters per program, not per file, where a runner outside
 * the test files counts (the conformance suite defines them once). */
#ifdef TEST_COUNTERS_SHARED
extern int test_failures_in_current;
extern int test_passed_count;
extern int test_failed_count;
#else
static int test_failures_in_current;
static int test_passed_count;
static int test_failed_count;
#endif

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                      \
            test_failures_in_current++;                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                                         \
    do {                                                                                           \
        int64_t check_a_ = (int64_t)(a), check_b_ = (int64_t)(b);                                  \
        if (check_a_ != check_b_) {                                                                \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (%" PRId64 " != %" PRId64 ")\n", __FILE__,     \
                    __LINE__, #a, #b, check_a_, check_b_);                                         \
            test_failures_in_current++;                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t check_a_ = (uint64_t)(a), check_b_ = (uint64_t)(b);                               \
        if (check_a_ != check_b_) {                                                                \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (%" PRIu64 " != %" PRIu64 ")\n", __FILE__,     \
                    __LINE__, #a, #b, check_a_, check_b_);                                         \
            test_failures_in_current++;                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *check_a_ = (a), *check_b_ = (b);                                               \
        if (check_a_ == NULL || check_b_ == NULL || strcmp(check_a_, check_b_) != 0) {             \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (\"%s\" != \"%s\")\n", __FILE__, __LINE__, #a, \
                    #b, check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");           \
            test_failures_in_current++;                                                            \
        }                                                                                          \
    } while (0)

/* Stops the current test when a precondition fails (the rest would crash). */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  FAIL %s:%d: required %s\n", __FILE__, __LINE__, #cond);             \
            test_failures_in_current++;                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* RUN(function, "what it proves") */
#define RUN(fn, proves)                                                                            \
    do {                                                                                           \
        test_failures_in_current = 0;                                                              \
        fn();                                                                                      \
        if (test_failures_in_current == 0) {                                                       \
            test_passed_count++;                                                                   \
            printf("ok   %s: %s\n", #fn, proves);                                                  \
        } else {                                                                                   \
            test_failed_count++;                                                                   \
            printf("FAIL %s: %s\n", #fn, proves);                                                  \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

static inline int test_summary(void)
{
    printf("%d passed, %d failed\n", test_passed_count, test_failed_count);
    return test_failed_count == 0 ? 0 : 1;
}

#endif
