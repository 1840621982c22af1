/* Recent reserve activity for the console: a ring of the latest denials
 * under one short mutex, and per-second counters that the data path bumps
 * with one atomic add (a bucket is reset, under a mutex, once per second). */
#include "activity.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/encode.h"

_Static_assert(ACTIVITY_SECONDS_REPORTED + 2 <= ACTIVITY_SECONDS, "slack in the ring");

struct second_bucket {
    int64_t second;    /* atomic: which second it counts */
    uint64_t reserves; /* atomic */
    uint64_t denials;  /* atomic */
};

struct activity {
    pthread_mutex_t roll_mutex; /* resets a bucket for a new second */
    struct second_bucket seconds[ACTIVITY_SECONDS];
    pthread_mutex_t denials_mutex;
    uint64_t denial_total; /* the id of the newest */
    struct activity_denial ring[ACTIVITY_DENIALS_MAX];
};

struct activity *activity_create(void)
{
    struct activity *activity = calloc(1, sizeof *activity);
    if (activity == NULL)
        return NULL;
    pthread_mutex_init(&activity->roll_mutex, NULL);
    pthread_mutex_init(&activity->denials_mutex, NULL);
    for (uint32_t i = 0; i < ACTIVITY_SECONDS; i++)
        activity->seconds[i].second = INT64_MIN;
    return activity;
}

void activity_destroy(struct activity *activity)
{
    if (activity == NULL)
        return;
    pthread_mutex_destroy(&activity->roll_mutex);
    pthread_mutex_destroy(&activity->denials_mutex);
    free(activity);
}

static int64_t second_of(int64_t unix_ms)
{
    return unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
}

static struct second_bucket *bucket_of(struct activity *activity, int64_t second)
{
    uint64_t index = (uint64_t)second % ACTIVITY_SECONDS;
    return &activity->seconds[index];
}

void activity_count(struct activity *activity, int64_t at_unix_ms, uint64_t reserves,
                    uint64_t denials)
{
    assert(denials <= reserves);
    if (reserves == 0)
        return;
    int64_t second = second_of(at_unix_ms);
    struct second_bucket *bucket = bucket_of(activity, second);
    if (__atomic_load_n(&bucket->second, __ATOMIC_ACQUIRE) != second) {
        /* The first count of a new second: the bucket still holds the
         * second one ring-length ago. A count that raced with the reset
         * may land in the old or new second; these are display figures. */
        pthread_mutex_lock(&activity->roll_mutex);
        if (__atomic_load_n(&bucket->second, __ATOMIC_RELAXED) != second) {
            __atomic_store_n(&bucket->reserves, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&bucket->denials, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&bucket->second, second, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&activity->roll_mutex);
    }
    __atomic_add_fetch(&bucket->reserves, reserves, __ATOMIC_RELAXED);
    if (denials > 0)
        __atomic_add_fetch(&bucket->denials, denials, __ATOMIC_RELAXED);
}

static void copy_text(char *out, size_t size, const char *text, size_t length)
{
    assert(size > 0);
    if (text == NULL)
        length = 0;
    if (length >= size)
        length = size - 1;
    if (length > 0)
        memcpy(out, text, length);
    out[length] = '\0';
}

static void keep_key(struct activity_denial *d, const struct requirement *r)
{
    if (d->key_count < ACTIVITY_DENIAL_KEYS_MAX) {
        copy_text(d->keys[d->key_count], sizeof d->keys[0], r->key, r->key_length);
        d->amounts[d->key_count] = r->amount;
    }
    d->key_count++;
}

/* The denial as kept: the keys that did not fit, or the key the error names. */
static void fill_denial(struct activity_denial *d, int64_t at_unix_ms, enum activity_source source,
                        const struct reserve_request *request, const struct reserve_result *result)
{
    d->at_unix_ms = at_unix_ms;
    d->source = source;
    d->retry_after_ms = result->retry_after_ms;
    copy_text(d->lease_id, sizeof d->lease_id, request->lease_id, request->lease_id_length);
    copy_text(d->caller, sizeof d->caller, request->caller, request->caller_length);
    d->key_count = 0;
    d->error[0] = '\0';
    if (result->error != BACKEND_OK) {
        const char *text = encode_backend_error_text(result->error);
        copy_text(d->error, sizeof d->error, text, strlen(text));
        if (backend_error_names_key(result->error) &&
            result->error_index < request->requirement_count)
            keep_key(d, &request->requirements[result->error_index]);
        return;
    }
    for (uint32_t i = 0; i < result->denied_count && i < REQUIREMENTS_PER_RESERVE_MAX; i++) {
        uint32_t index = result->denied_index[i];
        if (index < request->requirement_count)
            keep_key(d, &request->requirements[index]);
    }
}

void activity_denial(struct activity *activity, int64_t at_unix_ms, enum activity_source source,
                     const struct reserve_request *request, const struct reserve_result *result)
{
    assert(!result->allowed);
    pthread_mutex_lock(&activity->denials_mutex);
    uint64_t id = ++activity->denial_total;
    struct activity_denial *d = &activity->ring[(id - 1) % ACTIVITY_DENIALS_MAX];
    d->id = id;
    fill_denial(d, at_unix_ms, source, request, result);
    pthread_mutex_unlock(&activity->denials_mutex);
}

/* A definitive answer about capacity: allowed, or denied (for capacity or
 * a definitive error). */
static bool is_answer(const struct reserve_result *result)
{
    return result->error == BACKEND_OK || backend_error_is_denial(result->error);
}

void activity_reserve(struct activity *activity, int64_t at_unix_ms, enum activity_source source,
                      const struct reserve_request *request, const struct reserve_result *result)
{
    if (!is_answer(result))
        return;
    bool denied = !result->allowed;
    activity_count(activity, at_unix_ms, 1, denied ? 1 : 0);
    if (denied)
        activity_denial(activity, at_unix_ms, source, request, result);
}

size_t activity_denials(struct activity *activity, struct activity_denial *out, size_t max,
                        uint64_t *total)
{
    pthread_mutex_lock(&activity->denials_mutex);
    uint64_t newest = activity->denial_total;
    size_t kept = newest < ACTIVITY_DENIALS_MAX ? (size_t)newest : ACTIVITY_DENIALS_MAX;
    size_t n = kept < max ? kept : max;
    for (size_t i = 0; i < n; i++)
        out[i] = activity->ring[(newest - 1 - i) % ACTIVITY_DENIALS_MAX];
    pthread_mutex_unlock(&activity->denials_mutex);
    *total = newest;
    return n;
}

void activity_seconds(struct activity *activity, int64_t now_unix_ms, struct activity_second *out,
                      uint32_t count)
{
    assert(count <= ACTIVITY_SECONDS_REPORTED);
    int64_t now_second = second_of(now_unix_ms);
    for (uint32_t i = 0; i < count; i++) {
        int64_t second = now_second - (int64_t)count + (int64_t)i;
        const struct second_bucket *bucket = bucket_of(activity, second);
        out[i] = (struct activity_second){.at_unix_ms = second * 1000};
        if (__atomic_load_n(&bucket->second, __ATOMIC_ACQUIRE) == second) {
            out[i].reserves = __atomic_load_n(&bucket->reserves, __ATOMIC_RELAXED);
            out[i].denials = __atomic_load_n(&bucket->denials, __ATOMIC_RELAXED);
        }
    }
}
