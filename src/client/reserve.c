/* Reserve, acquire and reserve batches (docs/client-c.md): unknown
 * outcomes are retried with the same lease_id until a definitive answer or
 * the deadline; acquire turns capacity denials into a wait and a new lease. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A lease id the caller passes fits the result whole: nothing is cut. */
_Static_assert(sizeof(((struct llmlimit_reserve_result *)0)->lease_id) >
                   LLMLIMIT_LEASE_ID_LENGTH_MAX,
               "lease_id holds the longest id");

static void result_reset(struct llmlimit_reserve_result *result)
{
    assert(result != NULL);
    memset(result, 0, sizeof(*result));
}

/* Checks a request before anything is sent; counts its requirements. */
static int request_check(const struct llmlimit_reserve_request *request)
{
    if (request == NULL || request->requirements == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (request->requirement_count == 0 || request->requirement_count > LLMLIMIT_REQUIREMENTS_MAX)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (request->lease_id != NULL && !client_lease_id_valid(request->lease_id))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (request->caller != NULL &&
        strnlen(request->caller, LLMLIMIT_CALLER_LENGTH_MAX + 1) > LLMLIMIT_CALLER_LENGTH_MAX)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < request->requirement_count; i++) {
        const struct llmlimit_requirement *requirement = &request->requirements[i];
        if (!client_key_valid(requirement->key))
            return LLMLIMIT_ERR_INVALID_ARGUMENT;
        if (requirement->amount == 0 || requirement->amount > LLMLIMIT_AMOUNT_MAX)
            return LLMLIMIT_ERR_INVALID_ARGUMENT;
    }
    return 0;
}

/* Gives the result its lease id: the request's, or a new UUIDv7. */
static int result_lease_id(const struct llmlimit_reserve_request *request,
                           struct llmlimit_reserve_result *result)
{
    if (request->lease_id != NULL) {
        copy_string(result->lease_id, sizeof(result->lease_id), request->lease_id);
        return 0;
    }
    return llmlimit_lease_id_new(result->lease_id);
}

/* {"lease_id","requirements":[{"key","amount"}],"caller"?}; NULL when out of
 * memory or a string is not valid UTF-8. */
static json_t *request_json(const struct llmlimit_reserve_request *request, const char *lease_id)
{
    json_t *requirements = json_array();
    json_t *object = json_object();
    if (requirements == NULL || object == NULL)
        goto fail;
    assert(lease_id[0] != '\0');
    for (size_t i = 0; i < request->requirement_count; i++) {
        const struct llmlimit_requirement *requirement = &request->requirements[i];
        assert(requirement->amount <= LLMLIMIT_AMOUNT_MAX); /* request_check */
        json_t *item = json_pack("{s:s,s:I}", "key", requirement->key, "amount",
                                 (json_int_t)requirement->amount);
        if (item == NULL || json_array_append_new(requirements, item) != 0)
            goto fail;
    }
    if (json_object_set_new(object, "lease_id", json_string(lease_id)) != 0)
        goto fail;
    if (json_object_set(object, "requirements", requirements) != 0)
        goto fail;
    if (request->caller != NULL &&
        json_object_set_new(object, "caller", json_string(request->caller)) != 0)
        goto fail;
    json_decref(requirements);
    return object;
fail:
    json_decref(requirements);
    json_decref(object);
    return NULL;
}

static uint64_t denied_mask(const json_t *denied_keys,
                            const struct llmlimit_reserve_request *request)
{
    assert(request->requirement_count <= 64); /* one bit each */
    uint64_t mask = 0;
    size_t index;
    const json_t *value;
    json_array_foreach(denied_keys, index, value)
    {
        const char *key = json_string_value(value);
        for (size_t i = 0; key != NULL && i < request->requirement_count; i++) {
            if (strcmp(request->requirements[i].key, key) == 0)
                mask |= UINT64_C(1) << i;
        }
    }
    return mask;
}

/* Reads one reserve answer object (a 200 body, or a batch item). Returns 0
 * or LLMLIMIT_ERR_PROTOCOL. */
static int result_from_json(const json_t *json, int http_status,
                            const struct llmlimit_reserve_request *request,
                            struct llmlimit_reserve_result *result)
{
    result->http_status = http_status;
    const char *error = json_field_string(json, "error");
    if (error == NULL)
        return LLMLIMIT_ERR_PROTOCOL;
    copy_string(result->error, sizeof(result->error), error);
    result->denial = http_status == 200 ? codec_denial(error) : LLMLIMIT_DENIAL_OTHER;
    if (http_status != 200)
        return 0; /* a batch item that failed: its error says why */
    const json_t *allowed = json_object_get(json, "allowed");
    const json_t *denied_keys = json_object_get(json, "denied_keys");
    if (!json_is_boolean(allowed))
        return LLMLIMIT_ERR_PROTOCOL;
    if (denied_keys != NULL && !json_is_array(denied_keys))
        return LLMLIMIT_ERR_PROTOCOL;
    result->allowed = json_is_true(allowed);
    if (!json_field_i64(json, "retry_after_ms", &result->retry_after_ms) ||
        !json_field_i64(json, "reserved_at_unix_ms", &result->reserved_at_unix_ms) ||
        !json_field_i64(json, "expires_at_unix_ms", &result->expires_at_unix_ms))
        return LLMLIMIT_ERR_PROTOCOL;
    result->denied_mask = denied_keys != NULL ? denied_mask(denied_keys, request) : 0;
    return 0;
}

static int reserve_send(struct llmlimit_client *client,
                        const struct llmlimit_reserve_request *request,
                        const struct retry_plan *plan, uint32_t *backoff_round,
                        struct llmlimit_reserve_result *result, struct llmlimit_status *status)
{
    json_t *body_json = request_json(request, result->lease_id);
    if (body_json == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT; /* caller not UTF-8, or no memory */
    size_t body_length;
    char *body = json_dump_compact(body_json, &body_length);
    json_decref(body_json);
    if (body == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    struct http_answer answer = {0};
    int rc = client_send_retrying(client, "POST", "/v1/reserve", body, body_length, plan,
                                  backoff_round, &answer, status);
    free(body);
    if (rc != 0)
        return rc;
    json_t *json = answer_json(&answer);
    client_status_from_body(status, json);
    rc = client_status_error(answer.http_status);
    if (rc == 0) {
        rc = json != NULL ? result_from_json(json, answer.http_status, request, result)
                          : LLMLIMIT_ERR_PROTOCOL;
    } else {
        result->http_status = answer.http_status;
        copy_string(result->error, sizeof(result->error), status->error);
        result->denial = LLMLIMIT_DENIAL_OTHER;
    }
    json_decref(json);
    http_answer_clear(&answer);
    return rc;
}

/* What reserve and acquire do before their first attempt: check the
 * arguments, reset the result and pick the lease id. 0 or an error. */
static int reserve_prepare(struct llmlimit_client *client,
                           const struct llmlimit_reserve_request *request,
                           struct llmlimit_reserve_result *result, struct llmlimit_status *status)
{
    status_reset(status);
    if (result == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    result_reset(result);
    if (client == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    int rc = request_check(request);
    if (rc != 0)
        return rc;
    return result_lease_id(request, result);
}

int llmlimit_reserve(struct llmlimit_client *client, const struct llmlimit_reserve_request *request,
                     int64_t timeout_ms, struct llmlimit_reserve_result *result,
                     struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    if (status == NULL)
        status = &local_status;
    int rc = reserve_prepare(client, request, result, status);
    if (rc != 0)
        return rc;
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, 0);
    uint32_t backoff_round = 0;
    return reserve_send(client, request, &plan, &backoff_round, result, status);
}

/* True for denials that a wait can fix: capacity, or a decrease under way. */
static bool denial_retryable(const struct llmlimit_reserve_result *result)
{
    return result->denial == LLMLIMIT_DENIAL_NONE ||
           result->denial == LLMLIMIT_DENIAL_LIMIT_DECREASING;
}

int llmlimit_acquire(struct llmlimit_client *client, const struct llmlimit_reserve_request *request,
                     int64_t timeout_ms, struct llmlimit_reserve_result *result,
                     struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    if (status == NULL)
        status = &local_status;
    int rc = reserve_prepare(client, request, result, status);
    if (rc != 0)
        return rc;
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, 0);
    uint32_t backoff_round = 0;
    for (;;) {
        rc = reserve_send(client, request, &plan, &backoff_round, result, status);
        if (rc != 0 || result->allowed)
            return rc;
        if (!denial_retryable(result))
            return LLMLIMIT_ERR_REJECTED;
        /* Wait what the server says, plus up to 20% so that denied callers
         * do not come back in step. */
        int64_t wait = result->retry_after_ms;
        if (wait < client->options.backoff_initial_ms)
            wait = client->options.backoff_initial_ms;
        assert(wait > 0);
        wait += (int64_t)(client_random_u64() % (uint64_t)(wait / 5 + 1));
        if (client_monotonic_ms() + wait >= plan.deadline_ms)
            return LLMLIMIT_ERR_DEADLINE; /* the next try would come too late */
        client_sleep_ms(wait);
        /* A denied lease stays denied: the next attempt needs a new one. */
        char previous[sizeof(result->lease_id)];
        copy_string(previous, sizeof(previous), result->lease_id);
        result_reset(result);
        if (llmlimit_lease_id_new(result->lease_id) != 0)
            return LLMLIMIT_ERR_SYSTEM;
        assert(strcmp(previous, result->lease_id) != 0);
    }
}

/* ---- batches ---------------------------------------------------------------- */

static int batch_check(const struct llmlimit_reserve_request *requests, size_t count)
{
    if (requests == NULL || count == 0 || count > LLMLIMIT_BATCH_ITEMS_MAX)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    size_t requirements = 0;
    for (size_t i = 0; i < count; i++) {
        int rc = request_check(&requests[i]);
        if (rc != 0)
            return rc;
        requirements += requests[i].requirement_count;
    }
    return requirements <= LLMLIMIT_BATCH_REQUIREMENTS_MAX ? 0 : LLMLIMIT_ERR_INVALID_ARGUMENT;
}

/* {"requests":[...]} of the items still pending; NULL on no memory. */
static char *batch_body(const struct llmlimit_reserve_request *requests,
                        const struct llmlimit_reserve_result *results, const uint32_t *pending,
                        size_t pending_count, size_t *length)
{
    json_t *items = json_array();
    json_t *object = json_object();
    char *body = NULL;
    if (items == NULL || object == NULL || json_object_set(object, "requests", items) != 0)
        goto done;
    for (size_t i = 0; i < pending_count; i++) {
        uint32_t index = pending[i];
        json_t *item = request_json(&requests[index], results[index].lease_id);
        if (item == NULL || json_array_append_new(items, item) != 0)
            goto done;
    }
    body = json_dump_compact(object, length);
done:
    json_decref(items);
    json_decref(object);
    return body;
}

/* Reads the results of one round; marks which items are still unknown. */
static int batch_read(const json_t *json, const struct llmlimit_reserve_request *requests,
                      struct llmlimit_reserve_result *results, uint32_t *pending,
                      size_t *pending_count)
{
    const json_t *items = json != NULL ? json_object_get(json, "results") : NULL;
    if (!json_is_array(items) || json_array_size(items) != *pending_count)
        return LLMLIMIT_ERR_PROTOCOL;
    size_t still = 0;
    for (size_t i = 0; i < *pending_count; i++) {
        uint32_t index = pending[i];
        const json_t *item = json_array_get(items, i);
        int64_t item_status;
        if (!json_is_object(item) || !json_field_i64(item, "status", &item_status) ||
            item_status < 100 || item_status > 599)
            return LLMLIMIT_ERR_PROTOCOL;
        char lease_id[sizeof(results[index].lease_id)];
        copy_string(lease_id, sizeof(lease_id), results[index].lease_id);
        result_reset(&results[index]);
        copy_string(results[index].lease_id, sizeof(results[index].lease_id), lease_id);
        int rc = result_from_json(item, (int)item_status, &requests[index], &results[index]);
        if (rc != 0)
            return rc;
        if (item_status >= 500)
            pending[still++] = index; /* unknown outcome: same lease again */
        assert(still <= i + 1);
    }
    *pending_count = still;
    return 0;
}

static int batch_round(struct llmlimit_client *client,
                       const struct llmlimit_reserve_request *requests,
                       struct llmlimit_reserve_result *results, uint32_t *pending,
                       size_t *pending_count, const struct retry_plan *plan,
                       uint32_t *backoff_round, struct llmlimit_status *status)
{
    size_t body_length;
    char *body = batch_body(requests, results, pending, *pending_count, &body_length);
    if (body == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    struct http_answer answer = {0};
    int rc = client_send_retrying(client, "POST", "/v1/reserve/batch", body, body_length, plan,
                                  backoff_round, &answer, status);
    free(body);
    if (rc != 0)
        return rc;
    json_t *json;
    rc = answer_take(&answer, status, &json);
    if (rc == 0)
        rc = batch_read(json, requests, results, pending, pending_count);
    json_decref(json);
    return rc;
}

int llmlimit_reserve_batch(struct llmlimit_client *client,
                           const struct llmlimit_reserve_request *requests, size_t count,
                           int64_t timeout_ms, struct llmlimit_reserve_result *results,
                           struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    if (status == NULL)
        status = &local_status;
    status_reset(status);
    if (client == NULL || results == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    int rc = batch_check(requests, count);
    if (rc != 0)
        return rc;
    uint32_t *pending = malloc(count * sizeof(*pending));
    if (pending == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    for (size_t i = 0; i < count; i++) {
        result_reset(&results[i]);
        pending[i] = (uint32_t)i;
        if ((rc = result_lease_id(&requests[i], &results[i])) != 0)
            goto done;
    }
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, 0);
    uint32_t backoff_round = 0;
    size_t pending_count = count;
    while (pending_count > 0) {
        rc = batch_round(client, requests, results, pending, &pending_count, &plan, &backoff_round,
                         status);
        if (rc != 0 || pending_count == 0)
            break;
        assert(pending_count <= count); /* a round only ever drops items */
        if (!client_backoff(client, &plan, backoff_round++)) {
            rc = LLMLIMIT_ERR_DEADLINE;
            break;
        }
    }
done:
    free(pending);
    return rc;
}
