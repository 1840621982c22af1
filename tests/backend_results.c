/* Backend results as wire text for the tests (backend_results.h). */
#include "backend_results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum result_status result_status_of(enum backend_error error)
{
    switch (error) {
    case BACKEND_OK:
    case BACKEND_UNKNOWN_LIMIT_KEY:
    case BACKEND_LIMIT_DECREASING:
    case BACKEND_EXCEEDS_CAPACITY:
        return RESULT_OK;
    case BACKEND_ACTUAL_KEY_NOT_IN_LEASE:
        return RESULT_INVALID;
    case BACKEND_LEASE_CONFLICT:
    case BACKEND_ALREADY_FINALIZED:
        return RESULT_CONFLICT;
    case BACKEND_UNAVAILABLE:
        return RESULT_UNAVAILABLE;
    }
    return RESULT_UNAVAILABLE;
}

static const char *error_prefix(enum backend_error error)
{
    switch (error) {
    case BACKEND_OK:
        return "";
    case BACKEND_UNKNOWN_LIMIT_KEY:
        return "unknown_limit_key: ";
    case BACKEND_LIMIT_DECREASING:
        return "limit_decreasing:";
    case BACKEND_EXCEEDS_CAPACITY:
        return "exceeds_capacity:";
    case BACKEND_LEASE_CONFLICT:
        return "lease_conflict";
    case BACKEND_ALREADY_FINALIZED:
        return "already_finalized";
    case BACKEND_ACTUAL_KEY_NOT_IN_LEASE:
        return "actual_key_not_in_lease:";
    case BACKEND_UNAVAILABLE:
        return "backend_error";
    }
    return "?";
}

/* The text of an error, with the key it names (key NULL: none). */
static void error_text(char *out, enum backend_error error, const char *key, uint32_t key_length)
{
    snprintf(out, RESULT_ERROR_SIZE, "%s%.*s", error_prefix(error),
             key != NULL ? (int)key_length : 0, key != NULL ? key : "");
}

struct reservation reservation_of(const struct reserve_request *request,
                                  const struct reserve_result *result)
{
    struct reservation r;
    memset(&r, 0, sizeof r);
    r.status = result_status_of(result->error);
    r.allowed = result->allowed;
    r.retry_after_ms = result->retry_after_ms;
    r.reserved_at_unix_ms = result->reserved_at_unix_ms;
    r.expires_at_unix_ms = result->expires_at_unix_ms;
    r.replayed = result->replayed;
    r.finished = result->finished;
    const struct requirement *named = NULL;
    if (backend_error_names_key(result->error) && result->error_index < request->requirement_count)
        named = &request->requirements[result->error_index];
    error_text(r.error, result->error, named != NULL ? named->key : NULL,
               named != NULL ? named->key_length : 0);
    r.denied_count = result->denied_count;
    if (r.denied_count <= REQUIREMENTS_PER_RESERVE_MAX)
        memcpy(r.denied_index, result->denied_index, r.denied_count);
    return r;
}

static const char *warning_prefix(enum backend_warning kind)
{
    switch (kind) {
    case BACKEND_WARNING_COMMIT_AFTER_EXPIRY:
        return "commit_after_expiry:";
    case BACKEND_WARNING_OVERAGE_DEBT:
        return "overage_debt:";
    case BACKEND_WARNING_OVERAGE_DENIED:
        return "overage_denied:";
    }
    return "?";
}

struct completion completion_of(const struct complete_request *request,
                                struct complete_result *result)
{
    struct completion c;
    memset(&c, 0, sizeof c);
    c.status = result_status_of(result->error);
    c.reconciled = result->reconciled;
    const struct actual *named = NULL;
    if (result->error == BACKEND_ACTUAL_KEY_NOT_IN_LEASE &&
        result->error_index < request->actual_count)
        named = &request->actuals[result->error_index];
    error_text(c.error, result->error, named != NULL ? named->key : NULL,
               named != NULL ? named->key_length : 0);
    c.warning_count = result->warning_count;
    for (uint32_t i = 0; i < result->warning_count && i < WARNINGS_MAX; i++) {
        const struct complete_warning *w = &result->warnings[i];
        snprintf(c.warnings[i], sizeof c.warnings[i], "%s%s", warning_prefix(w->kind), w->key);
    }
    free(result->warnings);
    result->warnings = NULL;
    return c;
}

bool has_warning(const struct completion *c, const char *warning)
{
    for (uint32_t i = 0; i < c->warning_count && i < WARNINGS_MAX; i++) {
        if (strcmp(c->warnings[i], warning) == 0)
            return true;
    }
    return false;
}

struct release_outcome release_outcome_of(const struct release_result *result)
{
    struct release_outcome r;
    memset(&r, 0, sizeof r);
    r.status = result_status_of(result->error);
    error_text(r.error, result->error, NULL, 0);
    return r;
}

void admin_error_text(char *out, enum backend_admin_result result, const char *key,
                      const struct limit_definition *wanted, const struct limit_state *in_force)
{
    switch (result) {
    case BACKEND_ADMIN_OK:
    case BACKEND_ADMIN_INVALID:
        out[0] = '\0';
        return;
    case BACKEND_ADMIN_UNKNOWN_KEY:
        snprintf(out, RESULT_ERROR_SIZE, "unknown_limit_key: %s", key);
        return;
    case BACKEND_ADMIN_KIND_CHANGED:
        snprintf(out, RESULT_ERROR_SIZE, "kind: cannot change %s to %s; delete the limit first",
                 limit_kind_name(in_force->definition.kind), limit_kind_name(wanted->kind));
        return;
    case BACKEND_ADMIN_PERIOD_CHANGED: {
        const struct limit_definition *from = &in_force->definition;
        if (from->period != wanted->period)
            snprintf(out, RESULT_ERROR_SIZE,
                     "period: cannot change %s to %s; delete the limit first",
                     limit_period_name(from->period), limit_period_name(wanted->period));
        else if (strcmp(from->time_zone, wanted->time_zone) != 0)
            snprintf(out, RESULT_ERROR_SIZE,
                     "time_zone: cannot change %s to %s; delete the limit first",
                     from->time_zone[0] != '\0' ? from->time_zone : "UTC",
                     wanted->time_zone[0] != '\0' ? wanted->time_zone : "UTC");
        else
            snprintf(out, RESULT_ERROR_SIZE,
                     "period_anchor_day: cannot change %d to %d; delete the limit first",
                     from->period_anchor_day == 0 ? 1 : from->period_anchor_day,
                     wanted->period_anchor_day == 0 ? 1 : wanted->period_anchor_day);
        return;
    }
    case BACKEND_ADMIN_TOO_MANY_LIMITS:
        snprintf(out, RESULT_ERROR_SIZE, "key: at most %d limits", LIMITS_COUNT_MAX);
        return;
    case BACKEND_ADMIN_ALREADY_LOADED:
        snprintf(out, RESULT_ERROR_SIZE, "key: %s is already loaded", key);
        return;
    case BACKEND_ADMIN_UNAVAILABLE:
        snprintf(out, RESULT_ERROR_SIZE, "backend_error");
        return;
    }
    snprintf(out, RESULT_ERROR_SIZE, "?");
}
