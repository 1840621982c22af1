/* Reserve, acquire and reserve batches (docs/client-c.md): unknown
 * outcomes are retried with the same lease_id until a definitive answer or
 * the deadline; acquire turns capacity denials into a wait and a new lease;
 * the _wait calls may have the server hold a reserve until it fits. */
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

/* What a reserve asks of the server beyond its requirements (the wait of
 * llmlimit_reserve_wait and llmlimit_acquire_wait), and what it reports. */
struct reserve_wait {
    int64_t wait_ms; /* the server may hold each lease this long (0: never) */
    int32_t priority;
    struct llmlimit_wait_result *out; /* of the last definitive answer */
};

/* {"lease_id","requirements":[{"key","amount"}],"caller"?,"wait_ms"?,
 * "priority"?}; the defaults (no wait, priority 5) are left out, so a plain
 * reserve is the same body it always was. NULL when out of memory or a
 * string is not valid UTF-8. */
static json_t *request_json(const struct llmlimit_reserve_request *request, const char *lease_id,
                            int64_t wait_ms, int32_t priority)
{
    json_t *requirements = json_array();
    json_t *object = json_object();
    if (requirements == NULL || object == NULL)
        goto fail;
    assert(lease_id[0] != '\0');
    assert(wait_ms >= 0 && wait_ms <= LLMLIMIT_WAIT_MS_MAX);
    assert(priority >= 0 && priority <= LLMLIMIT_PRIORITY_MAX);
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
    if (wait_ms > 0 && json_object_set_new(object, "wait_ms", json_integer(wait_ms)) != 0)
        goto fail;
    if (priority != LLMLIMIT_PRIORITY_DEFAULT &&
        json_object_set_new(object, "priority", json_integer(priority)) != 0)
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
    if (codec_error_copy(json, result->error, sizeof(result->error)) != 0)
        return LLMLIMIT_ERR_PROTOCOL;
    result->denial = http_status == 200 ? codec_denial(result->error) : LLMLIMIT_DENIAL_OTHER;
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

/* Reads how the answer went on the server: waited_ms (absent from servers
 * that do not wait: 0) and the queue-full header. */
static int wait_result_from_answer(const json_t *json, const struct http_answer *answer,
                                   struct llmlimit_wait_result *out)
{
    out->queue_full = answer->queue_full;
    if (json == NULL || answer->http_status != 200)
        return 0;
    if (!json_field_i64(json, "waited_ms", &out->waited_ms) || out->waited_ms < 0)
        return LLMLIMIT_ERR_PROTOCOL;
    return 0;
}

/* One HTTP attempt of a reserve (plan->attempts_max is 1), asking the
 * server to hold it plan->hold_ms. */
static int reserve_attempt(struct llmlimit_client *client,
                           const struct llmlimit_reserve_request *request,
                           const struct reserve_wait *wait, const struct retry_plan *plan,
                           uint32_t *backoff_round, struct llmlimit_reserve_result *result,
                           struct llmlimit_status *status)
{
    assert(plan->attempts_max == 1);
    json_t *body_json = request_json(request, result->lease_id, plan->hold_ms, wait->priority);
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
        if (rc == 0)
            rc = wait_result_from_answer(json, &answer, wait->out);
    } else {
        result->http_status = answer.http_status;
        copy_string(result->error, sizeof(result->error), status->error);
        result->denial = LLMLIMIT_DENIAL_OTHER;
    }
    json_decref(json);
    http_answer_clear(&answer);
    return rc;
}

/* How long the server may hold the next attempt: left, what is left of the
 * wait, cut so that the answer still has one attempt_timeout_ms before the
 * deadline (a server answers a waiter at its deadline plus one backend
 * reserve: docs/semantics.md "Waiting for capacity"). */
static int64_t attempt_wait_ms(const struct llmlimit_client *client, const struct retry_plan *plan,
                               int64_t left)
{
    if (left <= 0)
        return 0;
    int64_t now = client_monotonic_ms();
    int64_t room = plan->deadline_ms - now - client->options.attempt_timeout_ms;
    int64_t ms = left < room ? left : room;
    if (ms < 0)
        ms = 0;
    assert(ms <= LLMLIMIT_WAIT_MS_MAX); /* left never exceeds the wait_ms checked */
    return ms;
}

/* Sends one reserve until a definitive answer: unknown outcomes are
 * retried with the same lease id (and what is left of the wait). */
static int reserve_send(struct llmlimit_client *client,
                        const struct llmlimit_reserve_request *request,
                        const struct reserve_wait *wait, const struct retry_plan *plan,
                        uint32_t *backoff_round, struct llmlimit_reserve_result *result,
                        struct llmlimit_status *status)
{
    int64_t wait_end_ms = client_monotonic_ms() + wait->wait_ms;
    for (bool first = true;; first = false) {
        *wait->out = (struct llmlimit_wait_result){0};
        struct retry_plan attempt = *plan;
        attempt.attempts_max = 1;
        /* The first attempt asks for the whole wait; a retry, for the rest. */
        int64_t left = first ? wait->wait_ms : wait_end_ms - client_monotonic_ms();
        attempt.hold_ms = attempt_wait_ms(client, plan, left);
        int rc = reserve_attempt(client, request, wait, &attempt, backoff_round, result, status);
        if (rc != LLMLIMIT_ERR_TRANSPORT && rc != LLMLIMIT_ERR_UNAVAILABLE)
            return rc;
        if (!client_backoff(client, plan, (*backoff_round)++))
            return LLMLIMIT_ERR_DEADLINE;
    }
}

/* What reserve and acquire do before their first attempt: check the
 * arguments, reset the result and pick the lease id. 0 or an error. */
static int reserve_prepare(struct llmlimit_client *client,
                           const struct llmlimit_reserve_request *request,
                           struct llmlimit_reserve_result *result)
{
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

void llmlimit_wait_options_defaults(struct llmlimit_wait_options *options)
{
    assert(options != NULL);
    options->wait_ms = 0;
    options->priority = LLMLIMIT_PRIORITY_DEFAULT;
}

/* Checks the wait options (NULL: the defaults) and sets up the wait; the
 * status names a bad field. 0 or LLMLIMIT_ERR_INVALID_ARGUMENT. */
static int wait_prepare(const struct llmlimit_wait_options *options,
                        struct llmlimit_wait_result *out, struct reserve_wait *wait,
                        struct llmlimit_status *status)
{
    assert(out != NULL);
    *out = (struct llmlimit_wait_result){0};
    struct llmlimit_wait_options defaults;
    llmlimit_wait_options_defaults(&defaults);
    if (options == NULL)
        options = &defaults;
    if (options->wait_ms < 0 || options->wait_ms > LLMLIMIT_WAIT_MS_MAX) {
        status_set_error(status, "wait_ms: must be an integer 0..60000");
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    }
    if (options->priority < 0 || options->priority > LLMLIMIT_PRIORITY_MAX) {
        status_set_error(status, "priority: must be an integer 0..9");
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    }
    *wait = (struct reserve_wait){
        .wait_ms = options->wait_ms, .priority = options->priority, .out = out};
    return 0;
}

/* True for denials that a wait can fix: capacity, or a decrease under way. */
static bool denial_retryable(const struct llmlimit_reserve_result *result)
{
    return result->denial == LLMLIMIT_DENIAL_NONE ||
           result->denial == LLMLIMIT_DENIAL_LIMIT_DECREASING;
}

/* After a denial acquire can wait out: sleeps what the server says (plus up
 * to 20% so that denied callers do not come back in step) and gives the
 * result a new lease id, since a denied lease stays denied. 0, or
 * LLMLIMIT_ERR_DEADLINE when the next try would come too late. */
static int acquire_next(struct llmlimit_client *client, const struct retry_plan *plan,
                        struct llmlimit_reserve_result *result)
{
    int64_t wait = result->retry_after_ms;
    if (wait < client->options.backoff_initial_ms)
        wait = client->options.backoff_initial_ms;
    assert(wait > 0);
    /* The server's figure may be anything up to 2^63-1: compared with what
     * is left before any sum that could overflow. */
    int64_t left = plan->deadline_ms - client_monotonic_ms();
    if (wait >= left)
        return LLMLIMIT_ERR_DEADLINE;
    wait += (int64_t)(client_random_u64() % (uint64_t)(wait / 5 + 1));
    if (wait >= left)
        return LLMLIMIT_ERR_DEADLINE;
    client_sleep_ms(wait);
    char previous[sizeof(result->lease_id)];
    copy_string(previous, sizeof(previous), result->lease_id);
    result_reset(result);
    if (llmlimit_lease_id_new(result->lease_id) != 0)
        return LLMLIMIT_ERR_SYSTEM;
    assert(strcmp(previous, result->lease_id) != 0);
    return 0;
}

/* llmlimit_reserve_wait, and with acquire llmlimit_acquire_wait: the same
 * checks and first lease; acquire then waits out the denials a wait can
 * fix, with a new lease each time. */
static int reserve_run(struct llmlimit_client *client,
                       const struct llmlimit_reserve_request *request,
                       const struct llmlimit_wait_options *options, int64_t timeout_ms,
                       bool acquire, struct llmlimit_reserve_result *result,
                       struct llmlimit_wait_result *waited, struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    struct llmlimit_wait_result local_waited;
    status = status_begin(status, &local_status);
    if (waited == NULL)
        waited = &local_waited;
    struct reserve_wait wait;
    int rc = reserve_prepare(client, request, result);
    if (rc == 0)
        rc = wait_prepare(options, waited, &wait, status);
    if (rc != 0)
        return rc;
    if (!acquire && timeout_ms <= 0 && wait.wait_ms > 0)
        timeout_ms =
            client->options.default_timeout_ms + wait.wait_ms; /* the wait, then as usual */
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, 0);
    uint32_t backoff_round = 0;
    for (;;) {
        /* Each lease may wait wait_ms on the server, never past the deadline. */
        rc = reserve_send(client, request, &wait, &plan, &backoff_round, result, status);
        if (rc != 0 || result->allowed || !acquire)
            return rc;
        if (!denial_retryable(result))
            return LLMLIMIT_ERR_REJECTED;
        if ((rc = acquire_next(client, &plan, result)) != 0)
            return rc;
    }
}

int llmlimit_reserve_wait(struct llmlimit_client *client,
                          const struct llmlimit_reserve_request *request,
                          const struct llmlimit_wait_options *options, int64_t timeout_ms,
                          struct llmlimit_reserve_result *result,
                          struct llmlimit_wait_result *waited, struct llmlimit_status *status)
{
    return reserve_run(client, request, options, timeout_ms, false, result, waited, status);
}

int llmlimit_reserve(struct llmlimit_client *client, const struct llmlimit_reserve_request *request,
                     int64_t timeout_ms, struct llmlimit_reserve_result *result,
                     struct llmlimit_status *status)
{
    return llmlimit_reserve_wait(client, request, NULL, timeout_ms, result, NULL, status);
}

int llmlimit_acquire_wait(struct llmlimit_client *client,
                          const struct llmlimit_reserve_request *request,
                          const struct llmlimit_wait_options *options, int64_t timeout_ms,
                          struct llmlimit_reserve_result *result,
                          struct llmlimit_wait_result *waited, struct llmlimit_status *status)
{
    return reserve_run(client, request, options, timeout_ms, true, result, waited, status);
}

int llmlimit_acquire(struct llmlimit_client *client, const struct llmlimit_reserve_request *request,
                     int64_t timeout_ms, struct llmlimit_reserve_result *result,
                     struct llmlimit_status *status)
{
    return llmlimit_acquire_wait(client, request, NULL, timeout_ms, result, NULL, status);
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

/* The caller's arrays, for the batch helpers' callbacks. */
struct reserve_batch {
    const struct llmlimit_reserve_request *requests;
    struct llmlimit_reserve_result *results;
};

static json_t *batch_item_json(uint32_t index, const void *context)
{
    const struct reserve_batch *batch = context;
    return request_json(&batch->requests[index], batch->results[index].lease_id, 0,
                        LLMLIMIT_PRIORITY_DEFAULT); /* batches never wait */
}

/* One item's answer; the lease id chosen for it stays (a retry reuses it). */
static int batch_item_read(const json_t *item, int status, uint32_t index, void *context)
{
    struct reserve_batch *batch = context;
    struct llmlimit_reserve_result *result = &batch->results[index];
    char lease_id[sizeof(result->lease_id)];
    copy_string(lease_id, sizeof(lease_id), result->lease_id);
    result_reset(result);
    copy_string(result->lease_id, sizeof(result->lease_id), lease_id);
    return result_from_json(item, status, &batch->requests[index], result);
}

int llmlimit_reserve_batch(struct llmlimit_client *client,
                           const struct llmlimit_reserve_request *requests, size_t count,
                           int64_t timeout_ms, struct llmlimit_reserve_result *results,
                           struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
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
        struct reserve_batch batch = {requests, results};
        rc = batch_round(client, "/v1/reserve/batch", pending, &pending_count, batch_item_json,
                         batch_item_read, &batch, &plan, &backoff_round, status);
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
