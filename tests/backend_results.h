/* Backend results as the backend tests check them: the class of the answer
 * (the HTTP status it becomes) and the error and warnings as their wire text
 * (docs/api.md). The texts here are the tests' own statement of that
 * contract, written apart from the server's table in src/wire/encode.c so
 * that a change to either shows. */
#ifndef LLMLIMIT_TESTS_BACKEND_RESULTS_H
#define LLMLIMIT_TESTS_BACKEND_RESULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

enum result_status {
    RESULT_OK = 0,      /* 200: a definitive answer (a reserve may be denied) */
    RESULT_INVALID,     /* 400 */
    RESULT_CONFLICT,    /* 409 */
    RESULT_UNAVAILABLE, /* 503 */
};

#define RESULT_ERROR_SIZE (LIMIT_KEY_LENGTH_MAX + 64)
#define WARNINGS_MAX 8

enum result_status result_status_of(enum backend_error error);

struct reservation {
    enum result_status status;
    bool allowed;
    int64_t retry_after_ms;
    int64_t reserved_at_unix_ms;
    int64_t expires_at_unix_ms;
    bool replayed;
    bool finished;
    char error[RESULT_ERROR_SIZE]; /* "" when allowed or denied for capacity */
    uint32_t denied_count;
    uint8_t denied_index[REQUIREMENTS_PER_RESERVE_MAX];
};

struct reservation reservation_of(const struct reserve_request *request,
                                  const struct reserve_result *result);

struct completion {
    enum result_status status;
    bool reconciled;
    char error[RESULT_ERROR_SIZE];
    uint32_t warning_count;
    char warnings[WARNINGS_MAX][RESULT_ERROR_SIZE];
};

/* Also frees the result's warnings. */
struct completion completion_of(const struct complete_request *request,
                                struct complete_result *result);
bool has_warning(const struct completion *c, const char *warning);

struct release_outcome {
    enum result_status status;
    char error[RESULT_ERROR_SIZE];
};

struct release_outcome release_outcome_of(const struct release_result *result);

/* The wire text of an admin call's failure (docs/api.md) into out
 * (RESULT_ERROR_SIZE bytes): key is the key the call named, wanted and
 * in_force what a put asked and the limit in force (KIND_CHANGED,
 * PERIOD_CHANGED). "" for BACKEND_ADMIN_OK and BACKEND_ADMIN_INVALID, whose
 * text is the validator's. */
void admin_error_text(char *out, enum backend_admin_result result, const char *key,
                      const struct limit_definition *wanted, const struct limit_state *in_force);

#endif
