/* What every backend does the same way, written once: the common config's
 * defaults and checks, opening through the ops, filling results (definitive
 * errors, unknown outcomes, warnings), the precedence of the definitive
 * errors, answering a retried reserve from the lease it names, the shape a
 * put may not change, and the blocking wrappers over the asynchronous data
 * path. Each backend links this; none links another backend. */
#include "backend.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void backend_config_defaults(struct backend_config *config)
{
    memset(config, 0, sizeof *config);
    config->clock = clock_system();
    config->data_dir = "./data";
    config->lease_cache_entries = LEASE_CACHE_ENTRIES_DEFAULT;
    config->lease_retention_ms = LEASE_RETENTION_MS_DEFAULT;
    config->concurrency_poll_ms = CONCURRENCY_POLL_MS_DEFAULT;
    config->decrease_retry_ms = DECREASE_RETRY_MS_DEFAULT;
    char error[128];
    assert(backend_config_check(config, error, sizeof error) == 0); /* defaults are valid */
}

int backend_config_check(const struct backend_config *config, char *error, size_t error_size)
{
    if (config->clock == NULL)
        snprintf(error, error_size, "clock: required");
    else if (config->lease_cache_entries < 1 ||
             config->lease_cache_entries > LEASE_CACHE_ENTRIES_MAX)
        snprintf(error, error_size, "lease_cache_entries: must be 1..%u",
                 (unsigned)LEASE_CACHE_ENTRIES_MAX);
    else if (config->lease_retention_ms < 1)
        snprintf(error, error_size, "lease_retention_ms: must be > 0");
    else if (config->concurrency_poll_ms < 1 || config->concurrency_poll_ms > POLL_MS_MAX)
        snprintf(error, error_size, "concurrency_poll_ms: must be 1..%d", POLL_MS_MAX);
    else if (config->decrease_retry_ms < 1)
        snprintf(error, error_size, "decrease_retry_ms: must be > 0");
    else
        return 0;
    return -1;
}

void reserve_result_fail(struct reserve_result *result, enum backend_error error,
                         uint32_t requirement_index)
{
    assert(error != BACKEND_OK);
    assert(requirement_index < REQUIREMENTS_PER_RESERVE_MAX);
    reserve_result_clear(result);
    result->error = error;
    result->error_index = (uint8_t)requirement_index;
}

void reserve_result_unavailable(struct reserve_result *result)
{
    reserve_result_fail(result, BACKEND_UNAVAILABLE, 0);
}

void complete_result_fail(struct complete_result *result, enum backend_error error,
                          uint32_t actual_index)
{
    assert(error != BACKEND_OK);
    assert(actual_index < REQUIREMENTS_PER_RESERVE_MAX);
    free(result->warnings);
    complete_result_clear(result);
    result->error = error;
    result->error_index = (uint8_t)actual_index;
}

void complete_result_unavailable(struct complete_result *result)
{
    complete_result_fail(result, BACKEND_UNAVAILABLE, 0);
}

int complete_result_warn(struct complete_result *result, enum backend_warning kind, const char *key,
                         uint32_t key_length)
{
    assert(kind >= BACKEND_WARNING_COMMIT_AFTER_EXPIRY);
    assert(kind <= BACKEND_WARNING_OVERAGE_DENIED);
    assert(key != NULL);
    assert(key_length >= 1);
    assert(key_length <= LIMIT_KEY_LENGTH_MAX);
    /* At most two warnings per lease item (an overage and a late commit). */
    assert(result->warning_count < 2 * REQUIREMENTS_PER_RESERVE_MAX);
    struct complete_warning *grown =
        realloc(result->warnings, (result->warning_count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    result->warnings = grown;
    struct complete_warning *w = &grown[result->warning_count++];
    w->kind = kind;
    w->key_length = key_length;
    memcpy(w->key, key, key_length);
    w->key[key_length] = '\0';
    return 0;
}

void release_result_unavailable(struct release_result *result)
{
    result->error = BACKEND_UNAVAILABLE;
}

bool requirements_match(const struct reserve_request *request, const struct lease_item_key *items,
                        uint32_t item_count, uint8_t *item_of)
{
    assert(item_count <= REQUIREMENTS_PER_RESERVE_MAX);
    if (item_count != request->requirement_count)
        return false;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[i];
        uint32_t j = 0;
        while (j < item_count && (items[j].key_length != r->key_length ||
                                  memcmp(items[j].key, r->key, r->key_length) != 0))
            j++;
        if (j == item_count || items[j].amount != r->amount)
            return false;
        assert(j < item_count);
        item_of[i] = (uint8_t)j;
    }
    return true;
}

void reserve_definitive_fail(const struct reserve_request *request, const struct limit_view *views,
                             int64_t decrease_retry_ms, struct reserve_result *result)
{
    uint32_t n = request->requirement_count;
    assert(n >= 1);
    assert(n <= REQUIREMENTS_PER_RESERVE_MAX);
    assert(decrease_retry_ms >= 1);
    /* Three passes, so that the precedence is by error and not by where a
     * requirement stands: any unknown key comes before any decrease. */
    for (uint32_t i = 0; i < n; i++) {
        if (!views[i].found) {
            reserve_result_fail(result, BACKEND_UNKNOWN_LIMIT_KEY, i);
            return;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (views[i].decreasing) {
            reserve_result_fail(result, BACKEND_LIMIT_DECREASING, i);
            result->retry_after_ms = decrease_retry_ms;
            return;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        assert(request->requirements[i].amount >= 1);
        assert(views[i].capacity >= 1); /* a live limit holds a valid definition */
        if (request->requirements[i].amount > views[i].capacity) {
            reserve_result_fail(result, BACKEND_EXCEEDS_CAPACITY, i);
            return;
        }
    }
    assert(!"called with nothing wrong");
}

void reserve_denial_add(struct reserve_result *result, struct denial_times times)
{
    assert(times.retry_ms >= 1);
    assert(times.may_fit_at_ms <= times.fits_at_ms); /* fitting by time alone is one way */
    if (times.retry_ms > result->retry_after_ms)
        result->retry_after_ms = times.retry_ms;
    if (times.fits_at_ms > result->fits_at_unix_ms)
        result->fits_at_unix_ms = times.fits_at_ms;
    if (times.may_fit_at_ms > result->may_fit_at_unix_ms)
        result->may_fit_at_unix_ms = times.may_fit_at_ms;
}

bool reserve_denial_waitable(const struct reserve_request *request,
                             const struct reserve_result *result)
{
    assert(result->denied_count >= 1);
    return request->yield_mask != 0 || (request->wait_until_unix_ms != 0 &&
                                        result->may_fit_at_unix_ms <= request->wait_until_unix_ms);
}

void reserve_replay(const struct reserve_request *request, const struct lease_view *lease,
                    struct reserve_result *result)
{
    assert(lease->state >= LEASE_VIEW_ALLOWED);
    assert(lease->state <= LEASE_VIEW_DENIED);
    assert(lease->item_count >= 1);
    assert(lease->item_count <= REQUIREMENTS_PER_RESERVE_MAX);
    reserve_result_clear(result);
    uint8_t item_of[REQUIREMENTS_PER_RESERVE_MAX];
    if (!requirements_match(request, lease->items, lease->item_count, item_of)) {
        reserve_result_fail(result, BACKEND_LEASE_CONFLICT, 0);
        return;
    }
    result->replayed = true;
    result->finished = lease->state == LEASE_VIEW_COMPLETED || lease->state == LEASE_VIEW_RELEASED;
    result->released = lease->state == LEASE_VIEW_RELEASED;
    if (result->released) {
        /* Released holds nothing (by its caller, or by the server for a
         * client that left while it waited): "allowed" would tell a retry
         * it holds what it does not (docs/semantics.md). */
        result->error = BACKEND_ALREADY_FINALIZED;
        return;
    }
    if (lease->state == LEASE_VIEW_DENIED) {
        /* A recorded denial named at least one item. */
        assert(lease->denied_items != 0);
        assert(lease->retry_after_ms >= 1);
        result->retry_after_ms = lease->retry_after_ms;
        for (uint32_t i = 0; i < request->requirement_count; i++) {
            if ((lease->denied_items >> item_of[i] & 1) != 0)
                result->denied_index[result->denied_count++] = (uint8_t)i;
        }
        assert(result->denied_count >= 1);
        return;
    }
    result->allowed = true;
    result->reserved_at_unix_ms = lease->reserved_at_unix_ms;
    result->expires_at_unix_ms = lease->expires_at_unix_ms;
}

enum backend_admin_result limit_reshape_check(const struct limit_definition *in_force,
                                              const struct limit_definition *wanted)
{
    assert(strcmp(in_force->key, wanted->key) == 0);
    if (in_force->kind != wanted->kind)
        return BACKEND_ADMIN_KIND_CHANGED;
    if (in_force->kind == LIMIT_BUDGET && !limit_period_same(in_force, wanted))
        return BACKEND_ADMIN_PERIOD_CHANGED;
    return BACKEND_ADMIN_OK;
}

enum backend_admin_result backend_put_limit(struct backend *backend,
                                            const struct limit_definition *definition,
                                            struct limit_state *state_out, char *error,
                                            size_t error_size)
{
    struct limit_definition checked = *definition;
    if (limit_definition_validate(&checked, error, error_size) != 0)
        return BACKEND_ADMIN_INVALID;
    struct limit_state ignored;
    struct limit_state *out = state_out != NULL ? state_out : &ignored;
    enum backend_admin_result result = backend->ops->put_limit(backend, &checked, out);
    assert(result != BACKEND_ADMIN_INVALID);
    assert(result != BACKEND_ADMIN_UNKNOWN_KEY);
    assert(result != BACKEND_ADMIN_ALREADY_LOADED);
    /* What is in force is the key's, taken or kept (a refused change). */
    assert(result == BACKEND_ADMIN_TOO_MANY_LIMITS || result == BACKEND_ADMIN_UNAVAILABLE ||
           strcmp(out->definition.key, checked.key) == 0);
    return result;
}

enum backend_admin_result backend_restore_limit(struct backend *backend,
                                                const struct limit_state *state, char *error,
                                                size_t error_size)
{
    struct limit_state checked = *state;
    if (limit_state_validate(state, &checked.definition, error, error_size) != 0)
        return BACKEND_ADMIN_INVALID;
    if (checked.status != LIMIT_DECREASING)
        checked.pending_decrease_to = 0;
    enum backend_admin_result result = backend->ops->restore_limit(backend, &checked);
    assert(result != BACKEND_ADMIN_INVALID);
    assert(result != BACKEND_ADMIN_UNKNOWN_KEY);
    assert(result != BACKEND_ADMIN_KIND_CHANGED);
    assert(result != BACKEND_ADMIN_PERIOD_CHANGED);
    return result;
}

int backend_open(const struct backend_ops *ops, const struct backend_config *config,
                 const void *options, struct backend **out, char *error, size_t error_size)
{
    assert(ops != NULL);
    if (backend_config_check(config, error, error_size) != 0)
        return -1;
    struct backend *backend = NULL;
    if (ops->open(config, options, &backend, error, error_size) != 0)
        return -1;
    assert(backend != NULL);
    assert(backend->ops == ops);
    *out = backend;
    return 0;
}

struct waiter {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
};

static void waiter_done(void *context)
{
    struct waiter *w = context;
    pthread_mutex_lock(&w->mutex);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
}

static void waiter_init(struct waiter *w)
{
    pthread_mutex_init(&w->mutex, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = false;
}

static void waiter_wait(struct waiter *w)
{
    pthread_mutex_lock(&w->mutex);
    while (!w->done)
        pthread_cond_wait(&w->cond, &w->mutex);
    pthread_mutex_unlock(&w->mutex);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mutex);
}

void limit_names_free(struct limit_name *names, size_t count)
{
    for (size_t i = 0; names != NULL && i < count; i++)
        free(names[i].key);
    free(names);
}

enum backend_admin_result backend_list_names(struct backend *backend, struct limit_name **out,
                                             size_t *count)
{
    *out = NULL;
    *count = 0;
    if (backend->ops->list_names != NULL)
        return backend->ops->list_names(backend, out, count);
    struct limit_state *states = NULL;
    size_t live = 0;
    enum backend_admin_result listed = backend_list_limits(backend, &states, &live);
    if (listed != BACKEND_ADMIN_OK)
        return listed;
    struct limit_name *names = calloc(live + 1, sizeof *names);
    size_t n = 0;
    for (; names != NULL && n < live; n++) {
        names[n].key = strdup(states[n].definition.key);
        names[n].kind = states[n].definition.kind;
        if (names[n].key == NULL)
            break;
    }
    free(states);
    if (names == NULL || n < live) {
        limit_names_free(names, n);
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    *out = names;
    *count = live;
    return BACKEND_ADMIN_OK;
}

void backend_usage_batch(struct backend *backend, const struct usage_request *requests,
                         struct usage_result *results, uint32_t count, backend_done_fn done,
                         void *context)
{
    assert(count <= USAGE_BATCH_MAX);
    assert(done != NULL);
    if (backend->ops->usage_batch != NULL) {
        backend->ops->usage_batch(backend, requests, results, count, done, context);
        return;
    }
    for (uint32_t i = 0; i < count; i++)
        results[i].result = backend->ops->usage(backend, requests[i].key, requests[i].at_unix_ms,
                                                &results[i].usage);
    done(context);
}

/* The three blocking forms differ only in the kind of their batch: each starts it
 * with a waiter as its completion and sleeps until the waiter is signalled. */
#define BACKEND_WAIT(kind)                                                                         \
    void backend_##kind##_wait(struct backend *backend, const struct kind##_request *requests,     \
                               struct kind##_result *results, uint32_t count)                      \
    {                                                                                              \
        struct waiter w;                                                                           \
        waiter_init(&w);                                                                           \
        backend_##kind(backend, requests, results, count, waiter_done, &w);                        \
        waiter_wait(&w);                                                                           \
    }

BACKEND_WAIT(reserve)
BACKEND_WAIT(complete)
BACKEND_WAIT(release)
