/* The client object of libllmlimit, its options, error names, and the retry
 * loop every call shares (an unknown outcome is retried, with the same
 * request, after an exponential backoff with jitter: docs/semantics.md
 * "Unknown outcomes and pessimism"). */
#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/bounds.h"
#include "core/ids.h"
#include "internal.h"

/* The public bounds must be the server's. */
_Static_assert(LLMLIMIT_KEY_LENGTH_MAX == LIMIT_KEY_LENGTH_MAX, "key bound");
_Static_assert(LLMLIMIT_LEASE_ID_LENGTH_MAX == LEASE_ID_LENGTH_MAX, "lease id bound");
_Static_assert(LLMLIMIT_CALLER_LENGTH_MAX == CALLER_LENGTH_MAX, "caller bound");
_Static_assert(LLMLIMIT_REQUIREMENTS_MAX == REQUIREMENTS_PER_RESERVE_MAX, "requirements bound");
_Static_assert(LLMLIMIT_BATCH_ITEMS_MAX == BATCH_ITEMS_MAX, "batch items bound");
_Static_assert(LLMLIMIT_BATCH_REQUIREMENTS_MAX == BATCH_REQUIREMENTS_MAX, "batch bound");
_Static_assert(LLMLIMIT_REQUIREMENTS_MAX <= 64, "denied_mask has 64 bits");

const char *llmlimit_strerror(int error)
{
    switch (error) {
    case LLMLIMIT_OK:
        return "success";
    case LLMLIMIT_ERR_INVALID_ARGUMENT:
        return "invalid argument";
    case LLMLIMIT_ERR_NO_MEMORY:
        return "out of memory";
    case LLMLIMIT_ERR_TRANSPORT:
        return "transport error (outcome unknown)";
    case LLMLIMIT_ERR_UNAVAILABLE:
        return "server unavailable (outcome unknown)";
    case LLMLIMIT_ERR_DEADLINE:
        return "deadline passed without a definitive answer";
    case LLMLIMIT_ERR_BAD_REQUEST:
        return "bad request";
    case LLMLIMIT_ERR_UNAUTHORIZED:
        return "unauthorized";
    case LLMLIMIT_ERR_NOT_FOUND:
        return "not found";
    case LLMLIMIT_ERR_CONFLICT:
        return "conflict";
    case LLMLIMIT_ERR_TOO_LARGE:
        return "request body too large";
    case LLMLIMIT_ERR_PROTOCOL:
        return "unexpected answer from the server";
    case LLMLIMIT_ERR_REJECTED:
        return "rejected (waiting cannot help)";
    case LLMLIMIT_ERR_SYSTEM:
        return "system error";
    default:
        return "unknown error";
    }
}

void llmlimit_options_defaults(struct llmlimit_options *options)
{
    assert(options != NULL);
    options->attempt_timeout_ms = 2000;
    options->connect_timeout_ms = 1000;
    options->default_timeout_ms = 10000;
    options->backoff_initial_ms = 10;
    options->backoff_max_ms = 1000;
    options->finalize_attempts_max = 5;
    options->connections_max = 8;
}

static bool options_valid(const struct llmlimit_options *options)
{
    return options->attempt_timeout_ms > 0 && options->connect_timeout_ms > 0 &&
           options->default_timeout_ms > 0 && options->backoff_initial_ms > 0 &&
           options->backoff_max_ms >= options->backoff_initial_ms &&
           options->finalize_attempts_max > 0 && options->connections_max > 0 &&
           options->connections_max <= CLIENT_CONNECTIONS_MAX;
}

static bool url_valid(const char *url)
{
    size_t length = strlen(url);
    if (length == 0 || length > CLIENT_URL_LENGTH_MAX)
        return false;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return false;
    return ids_visible_ascii(url, length);
}

static bool token_valid(const char *token)
{
    size_t length = strlen(token);
    if (length > CLIENT_TOKEN_LENGTH_MAX)
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)token[i];
        if (c < 0x20 || c == 0x7f)
            return false; /* would break the header */
    }
    return true;
}

static int client_strings_init(struct llmlimit_client *client, const char *url, const char *token)
{
    size_t url_length = strlen(url);
    while (url_length > 0 && url[url_length - 1] == '/')
        url_length--;
    client->base_url = strndup(url, url_length);
    if (client->base_url == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    if (token != NULL && token[0] != '\0') {
        static const char prefix[] = "Authorization: Bearer ";
        size_t length = sizeof(prefix) + strlen(token);
        client->authorization = malloc(length);
        if (client->authorization == NULL)
            return LLMLIMIT_ERR_NO_MEMORY;
        memcpy(client->authorization, prefix, sizeof(prefix) - 1);
        memcpy(client->authorization + sizeof(prefix) - 1, token, strlen(token) + 1);
    }
    return 0;
}

int llmlimit_client_new(const char *url, const char *token, const struct llmlimit_options *options,
                        struct llmlimit_client **out)
{
    if (url == NULL || out == NULL || !url_valid(url))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (token != NULL && !token_valid(token))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    if (options != NULL && !options_valid(options))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return LLMLIMIT_ERR_SYSTEM;
    struct llmlimit_client *client = calloc(1, sizeof(*client));
    if (client == NULL) {
        curl_global_cleanup();
        return LLMLIMIT_ERR_NO_MEMORY;
    }
    if (options != NULL)
        client->options = *options;
    else
        llmlimit_options_defaults(&client->options);
    int rc = client_strings_init(client, url, token);
    if (rc == 0)
        rc = transport_pool_init(client);
    if (rc == 0 && pthread_mutex_init(&client->pool_mutex, NULL) != 0)
        rc = LLMLIMIT_ERR_SYSTEM;
    if (rc == 0 && pthread_cond_init(&client->pool_idle, NULL) != 0) {
        pthread_mutex_destroy(&client->pool_mutex);
        rc = LLMLIMIT_ERR_SYSTEM;
    }
    if (rc != 0) {
        transport_pool_free(client);
        free(client->base_url);
        free(client->authorization);
        free(client);
        curl_global_cleanup();
        return rc;
    }
    assert(options_valid(&client->options)); /* the defaults too */
    assert(client->base_url[strlen(client->base_url) - 1] != '/');
    *out = client;
    return 0;
}

void llmlimit_client_free(struct llmlimit_client *client)
{
    if (client == NULL)
        return;
    transport_pool_free(client);
    pthread_cond_destroy(&client->pool_idle);
    pthread_mutex_destroy(&client->pool_mutex);
    free(client->base_url);
    if (client->authorization != NULL) {
        /* The token is a secret: do not leave it in freed memory. */
        explicit_bzero(client->authorization, strlen(client->authorization));
        free(client->authorization);
    }
    free(client);
    curl_global_cleanup();
}

void llmlimit_free(void *pointer)
{
    free(pointer);
}

/* ---- time (a call's status is status.c's) ---------------------------------- */

int64_t client_monotonic_ms(void)
{
    struct timespec now;
    int rc = clock_gettime(CLOCK_MONOTONIC, &now);
    assert(rc == 0);
    (void)rc;
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

void client_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec wait = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {
    }
}

uint64_t client_random_u64(void)
{
    uint64_t value = 0;
    if (getrandom(&value, sizeof(value), 0) != (ssize_t)sizeof(value)) {
        /* Jitter only spreads retries out; the time is an acceptable seed. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        value = (uint64_t)now.tv_nsec * 0x9e3779b97f4a7c15u;
    }
    return value;
}

/* ---- the retry loop --------------------------------------------------------- */

void retry_plan_init(struct retry_plan *plan, const struct llmlimit_client *client,
                     int64_t timeout_ms, uint32_t attempts_max)
{
    if (timeout_ms <= 0)
        timeout_ms = client->options.default_timeout_ms;
    assert(timeout_ms > 0);
    plan->deadline_ms = client_monotonic_ms() + timeout_ms;
    plan->attempts_max = attempts_max;
    plan->hold_ms = 0;
}

bool client_backoff(const struct llmlimit_client *client, const struct retry_plan *plan,
                    uint32_t round)
{
    int64_t base = client->options.backoff_initial_ms;
    for (uint32_t i = 0; i < round && base < client->options.backoff_max_ms; i++)
        base *= 2;
    if (base > client->options.backoff_max_ms)
        base = client->options.backoff_max_ms;
    assert(base >= 1);
    assert(base <= client->options.backoff_max_ms);
    /* Jitter in [base/2, base] so that many clients do not retry in step. */
    int64_t half = base / 2;
    int64_t wait = half + (int64_t)(client_random_u64() % (uint64_t)(base - half + 1));
    assert(wait >= half);
    assert(wait <= base);
    int64_t remaining = plan->deadline_ms - client_monotonic_ms();
    if (remaining <= 0)
        return false;
    client_sleep_ms(wait < remaining ? wait : remaining);
    return plan->deadline_ms - client_monotonic_ms() > 0;
}

static int attempt_timeout(const struct llmlimit_client *client, const struct retry_plan *plan,
                           int64_t *timeout_ms)
{
    int64_t remaining = plan->deadline_ms - client_monotonic_ms();
    if (remaining <= 0)
        return LLMLIMIT_ERR_DEADLINE;
    /* A server that holds the request (a waiting reserve) answers only
     * after the hold: an attempt cut before it would be retried for nothing. */
    assert(plan->hold_ms >= 0);
    int64_t attempt = client->options.attempt_timeout_ms + plan->hold_ms;
    *timeout_ms = attempt < remaining ? attempt : remaining;
    assert(*timeout_ms > 0);
    return 0;
}

int client_send_retrying(struct llmlimit_client *client, const char *method, const char *path,
                         const char *body, size_t body_length, const struct retry_plan *plan,
                         uint32_t *backoff_round, struct http_answer *answer,
                         struct llmlimit_status *status)
{
    assert(backoff_round != NULL);
    assert(body != NULL || body_length == 0);
    for (uint32_t attempt = 0;; attempt++) {
        int64_t timeout_ms;
        if (attempt_timeout(client, plan, &timeout_ms) != 0)
            return LLMLIMIT_ERR_DEADLINE;
        int rc =
            transport_send(client, method, path, body, body_length, timeout_ms, answer, status);
        if (rc == 0 && answer->http_status < 500)
            return 0; /* definitive: the caller maps the status */
        if (rc == 0) {
            json_t *json = answer_json(answer);
            client_status_from_body(status, json);
            json_decref(json);
            rc = LLMLIMIT_ERR_UNAVAILABLE;
        } else if (rc != LLMLIMIT_ERR_TRANSPORT) {
            return rc; /* no memory, oversized body: retrying will not help */
        }
        /* Only a definitive answer is handed back: drop this one. */
        http_answer_clear(answer);
        if (plan->attempts_max != 0 && attempt + 1 >= plan->attempts_max)
            return rc;
        if (!client_backoff(client, plan, (*backoff_round)++))
            return LLMLIMIT_ERR_DEADLINE;
    }
}

int client_post_json(struct llmlimit_client *client, const char *path, const char *body,
                     size_t body_length, const struct retry_plan *plan, uint32_t *backoff_round,
                     int *http_status, json_t **json_out, struct llmlimit_status *status)
{
    assert(path[0] == '/');
    *json_out = NULL;
    if (http_status != NULL)
        *http_status = 0;
    struct http_answer answer = {0};
    int rc = client_send_retrying(client, "POST", path, body, body_length, plan, backoff_round,
                                  &answer, status);
    if (rc != 0)
        return rc;
    if (http_status != NULL)
        *http_status = answer.http_status;
    return answer_take(&answer, status, json_out);
}

/* One round of a batch: the pending items posted, their answers read. */
int batch_round(struct llmlimit_client *client, const char *path, uint32_t *pending,
                size_t *pending_count, batch_item_json_fn item_json, batch_item_read_fn item_read,
                void *context, const struct retry_plan *plan, uint32_t *backoff_round,
                struct llmlimit_status *status)
{
    size_t body_length;
    char *body = batch_body(pending, *pending_count, item_json, context, &body_length);
    if (body == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    json_t *json;
    int rc =
        client_post_json(client, path, body, body_length, plan, backoff_round, NULL, &json, status);
    free(body);
    if (rc == 0)
        rc = batch_read(json, pending, pending_count, item_read, context);
    json_decref(json);
    return rc;
}
