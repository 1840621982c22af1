/* HTTP for libllmlimit: a pool of libcurl easy handles, each keeping its own
 * keep-alive connection. A thread borrows one handle per attempt, so calls
 * from many threads share connections without ever sharing a handle. */
#include <assert.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

struct transport_handle {
    CURL *curl;
    char error_buffer[CURL_ERROR_SIZE];
    /* The body being received: grows by doubling up to the bound. */
    char *body;
    size_t body_length;
    size_t body_capacity;
    bool body_too_large;
    bool body_no_memory;
    bool queue_full; /* the answer said "x-llmlimit-queue: full" */
};

int transport_pool_init(struct llmlimit_client *client)
{
    uint32_t slots = client->options.connections_max;
    assert(slots >= 1);
    assert(slots <= CLIENT_CONNECTIONS_MAX);
    client->handles = calloc(slots, sizeof(*client->handles));
    client->handle_busy = calloc(slots, sizeof(*client->handle_busy));
    if (client->handles == NULL || client->handle_busy == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    client->handle_count = 0;
    return 0;
}

void transport_pool_free(struct llmlimit_client *client)
{
    for (uint32_t i = 0; i < client->handle_count; i++) {
        assert(!client->handle_busy[i]);
        curl_easy_cleanup(client->handles[i]->curl);
        free(client->handles[i]->body);
        free(client->handles[i]);
    }
    free(client->handles);
    free(client->handle_busy);
    client->handles = NULL;
    client->handle_busy = NULL;
    client->handle_count = 0;
}

static struct transport_handle *handle_new(void)
{
    struct transport_handle *handle = calloc(1, sizeof(*handle));
    if (handle == NULL)
        return NULL;
    handle->curl = curl_easy_init();
    if (handle->curl == NULL) {
        free(handle);
        return NULL;
    }
    return handle;
}

/* Takes an idle handle, creates one while under the bound, else waits. */
static int pool_take(struct llmlimit_client *client, uint32_t *slot_out)
{
    int rc = 0;
    pthread_mutex_lock(&client->pool_mutex);
    for (;;) {
        assert(client->handle_count <= client->options.connections_max);
        for (uint32_t i = 0; i < client->handle_count; i++) {
            if (!client->handle_busy[i]) {
                client->handle_busy[i] = true;
                *slot_out = i;
                goto done;
            }
        }
        if (client->handle_count < client->options.connections_max) {
            struct transport_handle *handle = handle_new();
            if (handle == NULL) {
                rc = LLMLIMIT_ERR_NO_MEMORY;
                goto done;
            }
            uint32_t slot = client->handle_count++;
            client->handles[slot] = handle;
            client->handle_busy[slot] = true;
            *slot_out = slot;
            goto done;
        }
        pthread_cond_wait(&client->pool_idle, &client->pool_mutex);
    }
done:
    assert(rc != 0 || *slot_out < client->handle_count);
    assert(rc != 0 || client->handle_busy[*slot_out]);
    pthread_mutex_unlock(&client->pool_mutex);
    return rc;
}

static void pool_give_back(struct llmlimit_client *client, uint32_t slot)
{
    pthread_mutex_lock(&client->pool_mutex);
    assert(slot < client->handle_count);
    assert(client->handle_busy[slot]);
    client->handle_busy[slot] = false;
    pthread_cond_signal(&client->pool_idle);
    pthread_mutex_unlock(&client->pool_mutex);
}

static size_t on_body(char *data, size_t size, size_t count, void *context)
{
    struct transport_handle *handle = context;
    size_t length = size * count;
    if (handle->body_length + length + 1 > CLIENT_RESPONSE_BYTES_MAX) {
        handle->body_too_large = true;
        return 0; /* aborts the transfer */
    }
    if (handle->body_length + length + 1 > handle->body_capacity) {
        size_t capacity = handle->body_capacity ? handle->body_capacity : 4096;
        while (capacity < handle->body_length + length + 1)
            capacity *= 2;
        char *grown = realloc(handle->body, capacity);
        if (grown == NULL) {
            handle->body_no_memory = true;
            return 0;
        }
        handle->body = grown;
        handle->body_capacity = capacity;
    }
    assert(handle->body_length + length + 1 <= handle->body_capacity);
    memcpy(handle->body + handle->body_length, data, length);
    handle->body_length += length;
    handle->body[handle->body_length] = '\0';
    return length;
}

/* Watches the answer's header lines for the server's queue-full signal;
 * libcurl passes each line with its CRLF, not NUL-terminated. */
static size_t on_header(char *data, size_t size, size_t count, void *context)
{
    struct transport_handle *handle = context;
    size_t length = size * count;
    static const char name[] = "x-llmlimit-queue:";
    size_t name_length = sizeof(name) - 1;
    if (length <= name_length || strncasecmp(data, name, name_length) != 0)
        return length;
    size_t at = name_length;
    while (at < length && (data[at] == ' ' || data[at] == '\t'))
        at++;
    size_t end = length;
    while (end > at && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' ' ||
                        data[end - 1] == '\t'))
        end--;
    handle->queue_full = end - at == 4 && strncasecmp(data + at, "full", 4) == 0;
    return length;
}

/* Sets every option of one attempt; curl_easy_reset() cleared the last
 * attempt's options but kept its live connection. */
static int handle_prepare(struct llmlimit_client *client, struct transport_handle *handle,
                          const char *method, const char *url, const char *body, size_t body_length,
                          int64_t timeout_ms, struct curl_slist *headers)
{
    assert(timeout_ms > 0);
    assert(body != NULL || body_length == 0);
    CURL *curl = handle->curl;
    curl_easy_reset(curl);
    handle->error_buffer[0] = '\0';
    handle->body_length = 0;
    handle->body_too_large = false;
    handle->body_no_memory = false;
    handle->queue_full = false;
    int64_t connect_ms = client->options.connect_timeout_ms;
    if (connect_ms > timeout_ms)
        connect_ms = timeout_ms;
    assert(connect_ms > 0);
    CURLcode code = CURLE_OK;
    code |= curl_easy_setopt(curl, CURLOPT_URL, url);
    code |= curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    code |= curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    code |= curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
    code |= curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    code |= curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    code |= curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, handle->error_buffer);
    code |= curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    code |= curl_easy_setopt(curl, CURLOPT_WRITEDATA, handle);
    code |= curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    code |= curl_easy_setopt(curl, CURLOPT_HEADERDATA, handle);
    code |= curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (body != NULL) {
        code |= curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
        code |= curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    }
    if (strcmp(method, "GET") == 0 && body == NULL)
        code |= curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    else if (strcmp(method, "POST") != 0 || body == NULL)
        code |= curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    return code == CURLE_OK ? 0 : LLMLIMIT_ERR_SYSTEM;
}

static struct curl_slist *headers_new(const struct llmlimit_client *client, bool has_body)
{
    struct curl_slist *headers = NULL, *next;
    /* Without this libcurl waits for "100 Continue" on larger bodies. */
    if ((next = curl_slist_append(headers, "Expect:")) == NULL)
        goto fail;
    headers = next;
    if (has_body) {
        if ((next = curl_slist_append(headers, "Content-Type: application/json")) == NULL)
            goto fail;
        headers = next;
    }
    if (client->authorization != NULL) {
        if ((next = curl_slist_append(headers, client->authorization)) == NULL)
            goto fail;
        headers = next;
    }
    return headers;
fail:
    curl_slist_free_all(headers);
    return NULL;
}

/* Moves the received body into the answer (the handle keeps no copy). */
static int answer_take_body(struct transport_handle *handle, struct http_answer *answer)
{
    char *body = malloc(handle->body_length + 1);
    if (body == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    if (handle->body_length > 0)
        memcpy(body, handle->body, handle->body_length);
    body[handle->body_length] = '\0';
    answer->body = body;
    answer->body_length = handle->body_length;
    return 0;
}

static int perform(struct llmlimit_client *client, struct transport_handle *handle,
                   const char *method, const char *url, const char *body, size_t body_length,
                   int64_t timeout_ms, struct http_answer *answer, struct llmlimit_status *status)
{
    struct curl_slist *headers = headers_new(client, body != NULL);
    if (headers == NULL)
        return LLMLIMIT_ERR_NO_MEMORY;
    int rc = handle_prepare(client, handle, method, url, body, body_length, timeout_ms, headers);
    if (rc == 0) {
        CURLcode code = curl_easy_perform(handle->curl);
        if (handle->body_no_memory) {
            rc = LLMLIMIT_ERR_NO_MEMORY;
        } else if (handle->body_too_large) {
            status_set_error(status, "response body over the client's bound");
            rc = LLMLIMIT_ERR_PROTOCOL;
        } else if (code != CURLE_OK) {
            status_set_error(status, handle->error_buffer[0] ? handle->error_buffer
                                                             : curl_easy_strerror(code));
            rc = LLMLIMIT_ERR_TRANSPORT;
        } else {
            long http_status = 0;
            curl_easy_getinfo(handle->curl, CURLINFO_RESPONSE_CODE, &http_status);
            answer->http_status = (int)http_status;
            answer->queue_full = handle->queue_full;
            rc = answer_take_body(handle, answer);
            assert(rc != 0 || answer->body != NULL);
        }
    }
    /* The options point at these headers: unset before freeing them. */
    curl_easy_setopt(handle->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);
    return rc;
}

void http_answer_clear(struct http_answer *answer)
{
    free(answer->body);
    *answer = (struct http_answer){0};
}

int transport_send(struct llmlimit_client *client, const char *method, const char *path,
                   const char *body, size_t body_length, int64_t timeout_ms,
                   struct http_answer *answer, struct llmlimit_status *status)
{
    assert(method != NULL);
    assert(path[0] == '/');
    assert(timeout_ms > 0);
    assert(body != NULL || body_length == 0);
    http_answer_clear(answer);
    char url[CLIENT_URL_LENGTH_MAX + CLIENT_PATH_LENGTH_MAX + 1];
    int written = snprintf(url, sizeof(url), "%s%s", client->base_url, path);
    if (written < 0 || (size_t)written >= sizeof(url))
        return LLMLIMIT_ERR_INVALID_ARGUMENT;
    uint32_t slot;
    int rc = pool_take(client, &slot);
    if (rc != 0)
        return rc;
    if (status != NULL)
        status->attempts++;
    rc = perform(client, client->handles[slot], method, url, body, body_length, timeout_ms, answer,
                 status);
    pool_give_back(client, slot);
    if (rc == 0 && status != NULL) {
        status->http_status = answer->http_status;
        status->error[0] = '\0';
    }
    return rc;
}
