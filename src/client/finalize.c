/* Complete and release (docs/client-c.md): best effort with a bounded
 * number of attempts. Nothing is ever freed locally: when these fail, the
 * holds expire on the server by themselves (docs/semantics.md "Unknown
 * outcomes and pessimism"). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void llmlimit_complete_result_clear(struct llmlimit_complete_result *result)
{
    if (result == NULL)
        return;
    free((void *)result->warnings);
    memset(result, 0, sizeof(*result));
}

static int complete_check(const struct llmlimit_complete_request *request)
{
    if (request == NULL || !client_lease_id_valid(request->lease_id))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (request->actual_count > LLMLIMIT_REQUIREMENTS_MAX)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (request->actual_count > 0 && request->actuals == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < request->actual_count; i++) {
        if (!client_key_valid(request->actuals[i].key))
            return LLMLIMIT_ERR_INVALID_ARGUMENT;
        if (request->actuals[i].actual_amount > LLMLIMIT_AMOUNT_MAX)
            return LLMLIMIT_ERR_INVALID_ARGUMENT;
    }
    return 0;
}

static json_t *complete_json(const struct llmlimit_complete_request *request)
{
    json_t *actuals = json_array();
    json_t *object = json_object();
    if (actuals == NULL || object == NULL)
        goto fail;
    assert(request->actual_count <= LLMLIMIT_REQUIREMENTS_MAX); /* complete_check */
    for (size_t i = 0; i < request->actual_count; i++) {
        const struct llmlimit_actual *actual = &request->actuals[i];
        json_t *item = json_pack("{s:s,s:I}", "key", actual->key, "actual_amount",
                                 (json_int_t)actual->actual_amount);
        if (item == NULL || json_array_append_new(actuals, item) != 0)
            goto fail;
    }
    if (json_object_set_new(object, "lease_id", json_string(request->lease_id)) != 0 ||
        json_object_set(object, "actuals", actuals) != 0)
        goto fail;
    json_decref(actuals);
    return object;
fail:
    json_decref(actuals);
    json_decref(object);
    return NULL;
}

/* Copies the warnings into one allocation: the pointer array, then the
 * strings it points at. */
static int warnings_copy(const json_t *warnings, struct llmlimit_complete_result *result)
{
    size_t count = json_array_size(warnings);
    if (count == 0)
        return 0;
    size_t bytes = count * sizeof(char *);
    for (size_t i = 0; i < count; i++) {
        const char *text = json_string_value(json_array_get(warnings, i));
        if (text == NULL)
            return LLMLIMIT_ERR_PROTOCOL;
        bytes += strlen(text) + 1;
    }
    const char **pointers = malloc(bytes);
    if (pointers == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    char *strings = (char *)(pointers + count);
    for (size_t i = 0; i < count; i++) {
        const char *text = json_string_value(json_array_get(warnings, i));
        assert(text != NULL); /* checked in the sizing pass */
        size_t length = strlen(text) + 1;
        memcpy(strings, text, length);
        pointers[i] = strings;
        result->warning_flags |= codec_warning_flag(text);
        strings += length;
    }
    assert(strings == (char *)pointers + bytes); /* the strings fill the block exactly */
    result->warnings = pointers;
    result->warning_count = count;
    return 0;
}

static int complete_from_json(const json_t *json, int http_status,
                              struct llmlimit_complete_result *result)
{
    result->http_status = http_status;
    if (codec_error_copy(json, result->error, sizeof(result->error)) != 0)
        return LLMLIMIT_ERR_PROTOCOL;
    if (http_status != 200)
        return 0;
    const json_t *reconciled = json_object_get(json, "reconciled");
    const json_t *warnings = json_object_get(json, "warnings");
    if (!json_is_boolean(reconciled) || (warnings != NULL && !json_is_array(warnings)))
        return LLMLIMIT_ERR_PROTOCOL;
    result->reconciled = json_is_true(reconciled);
    return warnings != NULL ? warnings_copy(warnings, result) : 0;
}

/* Sends one finalizing request (complete or release) with bounded retries;
 * returns the mapped status and the parsed body (json_decref). Takes
 * body_json (NULL: it could not be built, out of memory). */
static int finalize_send(struct llmlimit_client *client, const char *path, json_t *body_json,
                         int64_t timeout_ms, json_t **json_out, int *http_status,
                         struct llmlimit_status *status)
{
    assert(path[0] == '/');
    assert(client->options.finalize_attempts_max > 0); /* bounded, never "until the deadline" */
    *json_out = NULL;
    *http_status = 0;
    if (body_json == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    size_t body_length;
    char *body = json_dump_compact(body_json, &body_length);
    json_decref(body_json);
    if (body == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, client->options.finalize_attempts_max);
    uint32_t backoff_round = 0;
    int rc = client_post_json(client, path, body, body_length, &plan, &backoff_round, http_status,
                              json_out, status);
    free(body);
    return rc;
}

int llmlimit_complete(struct llmlimit_client *client,
                      const struct llmlimit_complete_request *request, int64_t timeout_ms,
                      struct llmlimit_complete_result *result, struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (result == NULL)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    memset(result, 0, sizeof(*result));
    if (client == NULL || complete_check(request) != 0)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    json_t *json;
    int http_status;
    int rc = finalize_send(client, "/v1/complete", complete_json(request), timeout_ms, &json,
                           &http_status, status);
    if (rc == 0)
        rc = complete_from_json(json, http_status, result);
    else if (http_status != 0)
        result->http_status = http_status;
    copy_string(result->error, sizeof(result->error), status->error);
    json_decref(json);
    return rc;
}

int llmlimit_release(struct llmlimit_client *client, const char *lease_id, int64_t timeout_ms,
                     struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (client == NULL || !client_lease_id_valid(lease_id))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    json_t *json;
    int http_status;
    int rc = finalize_send(client, "/v1/release", json_pack("{s:s}", "lease_id", lease_id),
                           timeout_ms, &json, &http_status, status);
    if (rc == 0 && !json_is_true(json_object_get(json, "ok")))
        rc = LLMLIMIT_ERR_PROTOCOL;
    json_decref(json);
    return rc;
}

/* ---- complete batches ------------------------------------------------------ */

/* The caller's arrays, for the batch helpers' callbacks. */
struct complete_batch {
    const struct llmlimit_complete_request *requests;
    struct llmlimit_complete_result *results;
};

static json_t *complete_item_json(uint32_t index, const void *context)
{
    const struct complete_batch *batch = context;
    return complete_json(&batch->requests[index]);
}

static int complete_item_read(const json_t *item, int status, uint32_t index, void *context)
{
    struct complete_batch *batch = context;
    llmlimit_complete_result_clear(&batch->results[index]);
    return complete_from_json(item, status, &batch->results[index]);
}

static int complete_batch_check(const struct llmlimit_complete_request *requests, size_t count)
{
    if (requests == NULL || count == 0 || count > LLMLIMIT_BATCH_ITEMS_MAX)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    size_t actuals = 0;
    for (size_t i = 0; i < count; i++) {
        if (complete_check(&requests[i]) != 0)
            return LLMLIMIT_ERR_INVALID_ARGUMENT;
        actuals += requests[i].actual_count;
    }
    return actuals <= LLMLIMIT_BATCH_REQUIREMENTS_MAX ? 0 : LLMLIMIT_ERR_INVALID_ARGUMENT;
}

static int complete_batch_round(struct llmlimit_client *client,
                                const struct llmlimit_complete_request *requests,
                                struct llmlimit_complete_result *results, uint32_t *pending,
                                size_t *pending_count, int64_t timeout_ms,
                                struct llmlimit_status *status)
{
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, client->options.finalize_attempts_max);
    uint32_t backoff_round = 0;
    struct complete_batch batch = {requests, results};
    return batch_round(client, "/v1/complete/batch", pending, pending_count, complete_item_json,
                       complete_item_read, &batch, &plan, &backoff_round, status);
}

int llmlimit_complete_batch(struct llmlimit_client *client,
                            const struct llmlimit_complete_request *requests, size_t count,
                            int64_t timeout_ms, struct llmlimit_complete_result *results,
                            struct llmlimit_status *status)
{
    struct llmlimit_status local_status;
    status = status_begin(status, &local_status);
    if (client == NULL || results == NULL || requests == NULL || count == 0 ||
        count > LLMLIMIT_BATCH_ITEMS_MAX)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < count; i++)
        memset(&results[i], 0, sizeof(results[i]));
    if (complete_batch_check(requests, count) != 0)
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    uint32_t *pending = malloc(count * sizeof(*pending));
    if (pending == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    for (size_t i = 0; i < count; i++)
        pending[i] = (uint32_t)i;
    size_t pending_count = count;
    struct retry_plan plan;
    retry_plan_init(&plan, client, timeout_ms, 0);
    int rc = 0;
    /* Items answered 503 are retried, a bounded number of rounds. */
    for (uint32_t round = 0; pending_count > 0; round++) {
        if (round >= client->options.finalize_attempts_max) {
            rc = LLMLIMIT_ERR_UNAVAILABLE;
            break;
        }
        if (round > 0 && !client_backoff(client, &plan, round - 1)) {
            rc = LLMLIMIT_ERR_DEADLINE;
            break;
        }
        int64_t remaining = plan.deadline_ms - client_monotonic_ms();
        if (remaining <= 0) {
            rc = LLMLIMIT_ERR_DEADLINE;
            break;
        }
        rc = complete_batch_round(client, requests, results, pending, &pending_count, remaining,
                                  status);
        if (rc != 0)
            break;
    }
    free(pending);
    return rc;
}
