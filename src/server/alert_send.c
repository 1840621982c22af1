/* The alerts' sender (docs/alerts.md, "Delivery"): one thread with
 * libcurl's multi interface POSTs due alerts, up to
 * ALERT_SENDS_IN_FLIGHT_MAX at once, so a receiver that never answers
 * holds one slot until its timeout, never the others and never a reserve.
 * A failed send is tried again with a doubling delay until ALERT_GIVE_UP_MS
 * after the alert fired. */
#include "alerts_internal.h"

#include <assert.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct send {
    char id[ALERT_ID_HEX_LENGTH + 1];
    CURL *easy;
    struct curl_slist *headers;
    struct buffer body;
    char curl_error[CURL_ERROR_SIZE];
};

static size_t discard(char *data, size_t size, size_t count, void *context)
{
    (void)data;
    (void)context;
    return size * count;
}

/* The headers of one alert: JSON, its id, and the signature over body. */
static struct curl_slist *headers_for(const struct alerts *alerts, const struct alert *a,
                                      const struct buffer *body)
{
    char line[64 + 2 * SHA256_DIGEST_BYTES + ALERT_ID_HEX_LENGTH];
    struct curl_slist *list = curl_slist_append(NULL, "content-type: application/json");
    snprintf(line, sizeof line, "x-llmlimit-alert-id: %s", a->id);
    struct curl_slist *more = list != NULL ? curl_slist_append(list, line) : NULL;
    uint8_t mac[SHA256_DIGEST_BYTES];
    if (more != NULL && alerts->signed_) {
        if (hmac_sha256(alerts->secret, alerts->secret_length, body->data, body->length, mac) !=
            0) {
            curl_slist_free_all(more);
            return NULL;
        }
        int n = snprintf(line, sizeof line, "x-llmlimit-signature: sha256=");
        for (int i = 0; i < SHA256_DIGEST_BYTES; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%02x", mac[i]);
        more = curl_slist_append(more, line);
    }
    if (more == NULL)
        curl_slist_free_all(list);
    return more;
}

static void send_free(struct send *s)
{
    if (s == NULL)
        return;
    if (s->easy != NULL)
        curl_easy_cleanup(s->easy);
    curl_slist_free_all(s->headers);
    buffer_free(&s->body);
    free(s);
}

/* A new send of alert a (mutex held), or NULL when out of memory. */
static struct send *send_new(struct alerts *alerts, const struct alert *a)
{
    struct send *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    memcpy(s->id, a->id, sizeof s->id);
    buffer_init(&s->body, NULL, 0);
    alert_encode_body(a, &s->body);
    s->easy = curl_easy_init();
    s->headers = s->body.failed ? NULL : headers_for(alerts, a, &s->body);
    if (s->easy == NULL || s->headers == NULL) {
        send_free(s);
        return NULL;
    }
    CURL *e = s->easy;
    CURLcode rc = CURLE_OK;
    rc |= curl_easy_setopt(e, CURLOPT_URL, a->webhook);
    rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
    rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, s->body.data);
    rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)s->body.length);
    rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ALERT_SEND_TIMEOUT_MS);
    rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)ALERT_SEND_CONNECT_TIMEOUT_MS);
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->curl_error);
    rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, s);
    if (rc != CURLE_OK) {
        send_free(s);
        return NULL;
    }
    return s;
}

/* The sends in flight (the sender thread's own). */
struct flight {
    struct send *sends[ALERT_SENDS_IN_FLIGHT_MAX];
    uint32_t count;
};

/* Takes the due alerts (pending, saved, not in flight) into the multi
 * handle while there is room; gives up on those past ALERT_GIVE_UP_MS. */
static void take_due(struct alerts *alerts, struct flight *flight)
{
    int64_t now_ms = clock_now_ms(alerts->clock);
    pthread_mutex_lock(&alerts->mutex);
    for (uint32_t i = 0; i < alerts->kept_count && flight->count < ALERT_SENDS_IN_FLIGHT_MAX; i++) {
        struct alert *a = &alerts->kept[i];
        if (a->delivery != ALERT_PENDING || !a->saved || !a->claimed || a->in_flight ||
            a->next_attempt_unix_ms > now_ms)
            continue;
        if (now_ms - a->at_unix_ms >= ALERT_GIVE_UP_MS) {
            a->delivery = ALERT_FAILED;
            alerts->stats.failed++;
            alerts->dirty = true;
            log_write(LOG_WARN, "alert not delivered: given up after 24 h", "id", a->id, "key",
                      a->key, "last_error", a->last_error, NULL);
            continue;
        }
        struct send *s = send_new(alerts, a);
        if (s == NULL || curl_multi_add_handle(alerts->multi, s->easy) != CURLM_OK) {
            send_free(s);
            break; /* out of memory: the next round tries again */
        }
        a->in_flight = true;
        flight->sends[flight->count++] = s;
    }
    pthread_mutex_unlock(&alerts->mutex);
}

static void flight_remove(struct flight *flight, const struct send *s)
{
    for (uint32_t i = 0; i < flight->count; i++) {
        if (flight->sends[i] == s) {
            flight->sends[i] = flight->sends[--flight->count];
            return;
        }
    }
    assert(false); /* every send in the multi handle is in flight */
}

/* A send finished: sent on a 2xx, else retried later (mutex taken). */
static void finish(struct alerts *alerts, struct send *s, CURLcode result)
{
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    int64_t now_ms = clock_now_ms(alerts->clock);
    pthread_mutex_lock(&alerts->mutex);
    struct alert *a = alerts_find_locked(alerts, s->id);
    assert(a != NULL); /* an alert in flight is never dropped */
    a->in_flight = false;
    a->attempts++;
    alerts->dirty = true;
    if (result == CURLE_OK && status >= 200 && status < 300) {
        a->delivery = ALERT_SENT;
        a->delivered_at_unix_ms = now_ms;
        a->last_error[0] = '\0';
        alerts->stats.sent++;
    } else {
        if (result != CURLE_OK)
            snprintf(a->last_error, sizeof a->last_error, "%.*s", ALERT_ERROR_LENGTH_MAX,
                     s->curl_error[0] != '\0' ? s->curl_error : curl_easy_strerror(result));
        else
            snprintf(a->last_error, sizeof a->last_error, "HTTP %ld", status);
        uint32_t shift = a->attempts - 1 < 22 ? a->attempts - 1 : 22;
        int64_t delay_ms = (int64_t)alerts->retry_ms << shift;
        a->next_attempt_unix_ms =
            now_ms + (delay_ms < ALERT_RETRY_MS_MAX ? delay_ms : ALERT_RETRY_MS_MAX);
    }
    pthread_mutex_unlock(&alerts->mutex);
}

static bool stopping(struct alerts *alerts)
{
    pthread_mutex_lock(&alerts->mutex);
    bool stop = alerts->sender_stopping;
    pthread_mutex_unlock(&alerts->mutex);
    return stop;
}

static void reap(struct alerts *alerts, struct flight *flight)
{
    int left = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(alerts->multi, &left)) != NULL) {
        if (message->msg != CURLMSG_DONE)
            continue;
        struct send *s = NULL;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        CURLcode result = message->data.result;
        curl_multi_remove_handle(alerts->multi, s->easy);
        finish(alerts, s, result);
        flight_remove(flight, s);
        send_free(s);
    }
}

/* Abandons the sends in flight at shutdown: they stay pending. */
static void abandon(struct alerts *alerts, struct flight *flight)
{
    for (uint32_t i = 0; i < flight->count; i++) {
        struct send *s = flight->sends[i];
        curl_multi_remove_handle(alerts->multi, s->easy);
        pthread_mutex_lock(&alerts->mutex);
        struct alert *a = alerts_find_locked(alerts, s->id);
        if (a != NULL)
            a->in_flight = false;
        pthread_mutex_unlock(&alerts->mutex);
        send_free(s);
    }
    flight->count = 0;
}

static void *sender_main(void *context)
{
    struct alerts *alerts = context;
    struct flight flight = {.count = 0};
    while (!stopping(alerts)) {
        take_due(alerts, &flight);
        int running = 0;
        curl_multi_perform(alerts->multi, &running);
        reap(alerts, &flight);
        curl_multi_poll(alerts->multi, NULL, 0, ALERT_SEND_POLL_MS, NULL);
    }
    abandon(alerts, &flight);
    return NULL;
}

void alert_send_wake(struct alerts *alerts)
{
    if (alerts->multi != NULL)
        curl_multi_wakeup(alerts->multi);
}

int alert_send_start(struct alerts *alerts)
{
    assert(!alerts->sender_started);
    alerts->multi = curl_multi_init();
    if (alerts->multi == NULL)
        return -1;
    alerts->sender_stopping = false;
    if (pthread_create(&alerts->sender, NULL, sender_main, alerts) != 0) {
        curl_multi_cleanup(alerts->multi);
        alerts->multi = NULL;
        return -1;
    }
    alerts->sender_started = true;
    return 0;
}

void alert_send_stop(struct alerts *alerts)
{
    if (!alerts->sender_started)
        return;
    pthread_mutex_lock(&alerts->mutex);
    alerts->sender_stopping = true;
    pthread_mutex_unlock(&alerts->mutex);
    curl_multi_wakeup(alerts->multi);
    pthread_join(alerts->sender, NULL);
    alerts->sender_started = false;
    curl_multi_cleanup(alerts->multi);
    alerts->multi = NULL;
}
