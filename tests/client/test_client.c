/* libllmlimit against the real llmlimitd (memory backend): definitive
 * answers, acquire's waiting, waiting on the server, complete/release,
 * batches, admin calls, usage, and many threads sharing one client. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/server_process.h"
#include "llmlimit.h"
#include "test.h"

static struct server_process server;
static struct llmlimit_client *client;

static int64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int put_limit(const char *key, const char *kind, uint64_t capacity, uint32_t seconds)
{
    struct llmlimit_limit_definition definition = {.key = key, .kind = kind, .capacity = capacity};
    if (strcmp(kind, "rolling") == 0)
        definition.window_seconds = seconds;
    else if (strcmp(kind, "concurrency") == 0)
        definition.timeout_seconds = seconds;
    else
        definition.period = "month";
    struct llmlimit_status status;
    int rc = llmlimit_limit_put(client, &definition, NULL, &status);
    if (rc != 0)
        fprintf(stderr, "put %s: %s (%s)\n", key, llmlimit_strerror(rc), status.error);
    return rc;
}

static int reserve_one(const char *lease_id, const char *key, uint64_t amount,
                       struct llmlimit_reserve_result *result)
{
    struct llmlimit_requirement requirement = {key, amount};
    struct llmlimit_reserve_request request = {lease_id, &requirement, 1, NULL};
    return llmlimit_reserve(client, &request, 2000, result, NULL);
}

static void test_reserve_allowed_denied_and_unknown_key(void)
{
    REQUIRE(put_limit("c:rpm", "rolling", 10, 60) == 0);
    REQUIRE(put_limit("c:tpm", "rolling", 1000, 60) == 0);
    struct llmlimit_requirement requirements[2] = {{"c:rpm", 1}, {"c:tpm", 600}};
    struct llmlimit_reserve_request request = {NULL, requirements, 2, "tests"};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    REQUIRE(llmlimit_reserve(client, &request, 2000, &result, &status) == 0);
    CHECK(result.allowed);
    CHECK_EQ_I64(result.http_status, 200);
    CHECK_EQ_U64(strlen(result.lease_id), 36); /* generated UUIDv7 */
    CHECK(result.reserved_at_unix_ms > 0);
    CHECK(result.expires_at_unix_ms >= result.reserved_at_unix_ms + 59000);
    CHECK_EQ_U64(result.denied_mask, 0);
    CHECK_EQ_I64(status.attempts, 1);
    /* The tpm no longer fits: a capacity denial names it, holds nothing. */
    REQUIRE(llmlimit_reserve(client, &request, 2000, &result, &status) == 0);
    CHECK(!result.allowed);
    CHECK_STR(result.error, "");
    CHECK_EQ_U64(result.denied_mask, 2);
    CHECK(result.retry_after_ms > 0);
    struct llmlimit_usage usage;
    REQUIRE(llmlimit_usage(client, "c:rpm", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved, 1);
    CHECK_STR(usage.kind, "rolling");
    CHECK_EQ_U64(usage.capacity, 10);
    CHECK_EQ_I64(usage.available, 9);
    /* An unknown key is a definitive denial with its error. */
    REQUIRE(reserve_one(NULL, "c:nope", 1, &result) == 0);
    CHECK(!result.allowed);
    CHECK_STR(result.error, "unknown_limit_key: c:nope");
    CHECK_EQ_I64(result.denial, LLMLIMIT_DENIAL_UNKNOWN_LIMIT_KEY);
    CHECK_EQ_U64(result.denied_mask, 1);
}

static void test_reserve_is_idempotent_and_conflicts_are_reported(void)
{
    REQUIRE(put_limit("c:idem", "rolling", 100, 60) == 0);
    struct llmlimit_reserve_result first, again;
    REQUIRE(reserve_one("idem-1", "c:idem", 5, &first) == 0);
    REQUIRE(reserve_one("idem-1", "c:idem", 5, &again) == 0);
    CHECK(first.allowed && again.allowed);
    CHECK_EQ_I64(again.reserved_at_unix_ms, first.reserved_at_unix_ms);
    struct llmlimit_usage usage;
    REQUIRE(llmlimit_usage(client, "c:idem", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved, 5);
    struct llmlimit_requirement requirement = {"c:idem", 6};
    struct llmlimit_reserve_request request = {"idem-1", &requirement, 1, NULL};
    struct llmlimit_status status;
    CHECK_EQ_I64(llmlimit_reserve(client, &request, 2000, &again, &status), LLMLIMIT_ERR_CONFLICT);
    CHECK_EQ_I64(status.http_status, 409);
    CHECK_STR(status.error, "lease_conflict");
    CHECK_EQ_I64(status.attempts, 1); /* a definitive error is not retried */
}

static void test_complete_release_and_their_errors(void)
{
    REQUIRE(put_limit("c:slots", "concurrency", 2, 30) == 0);
    REQUIRE(put_limit("c:budget", "budget", 1000, 0) == 0);
    struct llmlimit_requirement requirements[2] = {{"c:slots", 1}, {"c:budget", 100}};
    struct llmlimit_reserve_request request = {"fin-1", requirements, 2, NULL};
    struct llmlimit_reserve_result reserved;
    REQUIRE(llmlimit_reserve(client, &request, 2000, &reserved, NULL) == 0);
    REQUIRE(reserved.allowed);
    /* Overrun: 150 spent of 100 reserved is charged in full. */
    struct llmlimit_actual actual = {"c:budget", 150};
    struct llmlimit_complete_request complete = {"fin-1", &actual, 1};
    struct llmlimit_complete_result result;
    struct llmlimit_status status;
    REQUIRE(llmlimit_complete(client, &complete, 2000, &result, &status) == 0);
    CHECK(result.reconciled);
    struct llmlimit_usage usage;
    REQUIRE(llmlimit_usage(client, "c:budget", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.used + usage.debt, 150);
    CHECK(usage.period_end_unix_ms > usage.period_start_unix_ms);
    REQUIRE(llmlimit_usage(client, "c:slots", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved, 0);
    llmlimit_complete_result_clear(&result);
    /* Twice is a no-op success; release after complete is a conflict. */
    REQUIRE(llmlimit_complete(client, &complete, 2000, &result, &status) == 0);
    llmlimit_complete_result_clear(&result);
    CHECK_EQ_I64(llmlimit_release(client, "fin-1", 2000, &status), LLMLIMIT_ERR_CONFLICT);
    CHECK_STR(status.error, "already_finalized");
    /* An unknown lease completes with reconciled false. */
    complete.lease_id = "fin-never";
    REQUIRE(llmlimit_complete(client, &complete, 2000, &result, &status) == 0);
    CHECK(!result.reconciled);
    llmlimit_complete_result_clear(&result);
    /* Release frees the slot at once. */
    request.lease_id = "fin-2";
    REQUIRE(llmlimit_reserve(client, &request, 2000, &reserved, NULL) == 0);
    REQUIRE(llmlimit_usage(client, "c:slots", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved, 1);
    CHECK_EQ_I64(llmlimit_release(client, "fin-2", 2000, &status), 0);
    REQUIRE(llmlimit_usage(client, "c:slots", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved, 0);
    /* An actual for a key outside the lease is a 400 naming it. */
    request.lease_id = "fin-3";
    REQUIRE(llmlimit_reserve(client, &request, 2000, &reserved, NULL) == 0);
    struct llmlimit_actual stranger = {"c:rpm", 1};
    struct llmlimit_complete_request bad = {"fin-3", &stranger, 1};
    CHECK_EQ_I64(llmlimit_complete(client, &bad, 2000, &result, &status), LLMLIMIT_ERR_BAD_REQUEST);
    CHECK_STR(status.error, "actual_key_not_in_lease:c:rpm");
    CHECK_EQ_I64(status.attempts, 1);
    llmlimit_complete_result_clear(&result);
    llmlimit_release(client, "fin-3", 2000, NULL);
}

struct delayed_release {
    const char *lease_id;
    int64_t delay_ms;
};

static void *release_later(void *argument)
{
    struct delayed_release *delayed = argument;
    struct timespec nap = {delayed->delay_ms / 1000, (delayed->delay_ms % 1000) * 1000000};
    nanosleep(&nap, NULL);
    llmlimit_release(client, delayed->lease_id, 2000, NULL);
    return NULL;
}

static void test_acquire_waits_until_a_hold_is_released(void)
{
    REQUIRE(put_limit("c:gpu", "concurrency", 1, 30) == 0);
    struct llmlimit_reserve_result holder, result;
    REQUIRE(reserve_one("gpu-holder", "c:gpu", 1, &holder) == 0);
    REQUIRE(holder.allowed);
    struct delayed_release delayed = {"gpu-holder", 400};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, release_later, &delayed) == 0);
    struct llmlimit_requirement requirement = {"c:gpu", 1};
    struct llmlimit_reserve_request request = {"gpu-waiter", &requirement, 1, NULL};
    struct llmlimit_status status;
    int64_t started = now_ms();
    int rc = llmlimit_acquire(client, &request, 30000, &result, &status);
    int64_t elapsed = now_ms() - started;
    pthread_join(thread, NULL);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    /* after the release, and long before the deadline (room for a busy machine) */
    CHECK(elapsed >= 350 && elapsed < 15000);
    CHECK(status.attempts >= 2);
    /* The first attempt was denied; the allowed one used a new lease id. */
    CHECK(strcmp(result.lease_id, "gpu-waiter") != 0);
    llmlimit_release(client, result.lease_id, 2000, NULL);
}

static void test_acquire_gives_up_at_the_deadline(void)
{
    REQUIRE(put_limit("c:gpu2", "concurrency", 1, 30) == 0);
    struct llmlimit_reserve_result holder, result;
    REQUIRE(reserve_one("gpu2-holder", "c:gpu2", 1, &holder) == 0);
    REQUIRE(holder.allowed);
    struct llmlimit_requirement requirement = {"c:gpu2", 1};
    struct llmlimit_reserve_request request = {NULL, &requirement, 1, NULL};
    struct llmlimit_status status;
    int64_t started = now_ms();
    int rc = llmlimit_acquire(client, &request, 3000, &result, &status);
    int64_t elapsed = now_ms() - started;
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_DEADLINE);
    CHECK(!result.allowed);
    /* The last answer was a denial; or, the two documented outcomes, the
     * last attempt started with little time left and the deadline came
     * first (a loaded machine): no answer, never an allowance. */
    CHECK(result.http_status == 200 || result.http_status == 0);
    /* at the deadline: it gives up when its next wait would pass it (the
     * server's 250 ms poll times 0.8-1.2, plus the client's own 0-20%: at
     * most 360 ms), and never waits long after it */
    CHECK(elapsed >= 3000 - 360 && elapsed < 15000);
    CHECK(status.attempts >= 2);
    llmlimit_release(client, "gpu2-holder", 2000, NULL);
}

static void test_acquire_returns_at_once_on_definitive_errors(void)
{
    REQUIRE(put_limit("c:small", "rolling", 5, 60) == 0);
    struct llmlimit_requirement requirement = {"c:unknown-key", 1};
    struct llmlimit_reserve_request request = {NULL, &requirement, 1, NULL};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    /* A deadline of a minute each: returning at once is returning long before it. */
    int64_t started = now_ms();
    CHECK_EQ_I64(llmlimit_acquire(client, &request, 60000, &result, &status),
                 LLMLIMIT_ERR_REJECTED);
    CHECK_STR(result.error, "unknown_limit_key: c:unknown-key");
    CHECK_EQ_I64(result.denial, LLMLIMIT_DENIAL_UNKNOWN_LIMIT_KEY);
    CHECK_EQ_I64(status.attempts, 1);
    requirement = (struct llmlimit_requirement){"c:small", 6};
    CHECK_EQ_I64(llmlimit_acquire(client, &request, 60000, &result, &status),
                 LLMLIMIT_ERR_REJECTED);
    CHECK_STR(result.error, "exceeds_capacity:c:small");
    CHECK_EQ_I64(result.denial, LLMLIMIT_DENIAL_EXCEEDS_CAPACITY);
    CHECK_EQ_I64(status.attempts, 1);
    CHECK(now_ms() - started < 30000);
}

/* ---- waiting on the server -------------------------------------------------- */

/* Reserves waiting on the server now, from its metrics (-1 if unreadable). */
static int64_t waiting_now(struct llmlimit_client *on)
{
    char *body = NULL;
    int64_t waiting = -1;
    if (llmlimit_request(on, "GET", "/metrics", NULL, 2000, &body, NULL) == 0) {
        const char *line = strstr(body, "\nllmlimit_wait_waiting ");
        if (line != NULL)
            waiting = strtoll(line + strlen("\nllmlimit_wait_waiting "), NULL, 10);
    }
    llmlimit_free(body);
    return waiting;
}

/* Waits (at most 10 s) until count reserves wait on the server. */
static bool wait_queued(struct llmlimit_client *on, int64_t count)
{
    for (int i = 0; i < 1000; i++) {
        if (waiting_now(on) == count)
            return true;
        struct timespec nap = {0, 10 * 1000000};
        nanosleep(&nap, NULL);
    }
    return false;
}

struct queued_release {
    const char *lease_id;
    int64_t delay_ms; /* after the waiter is queued */
    bool queued;
};

static void *release_once_queued(void *argument)
{
    struct queued_release *release = argument;
    release->queued = wait_queued(client, 1);
    struct timespec nap = {release->delay_ms / 1000, (release->delay_ms % 1000) * 1000000};
    nanosleep(&nap, NULL);
    llmlimit_release(client, release->lease_id, 2000, NULL);
    return NULL;
}

static uint64_t reserved_now(const char *key)
{
    struct llmlimit_usage usage;
    return llmlimit_usage(client, key, 0, &usage, NULL) == 0 ? usage.reserved : UINT64_MAX;
}

static void test_reserve_wait_admitted_when_the_hold_is_released(void)
{
    REQUIRE(put_limit("c:wait-slot", "concurrency", 1, 30) == 0);
    struct llmlimit_reserve_result holder, result;
    REQUIRE(reserve_one("wait-holder", "c:wait-slot", 1, &holder) == 0);
    REQUIRE(holder.allowed);
    struct queued_release release = {"wait-holder", 300, false};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, release_once_queued, &release) == 0);
    struct llmlimit_requirement requirement = {"c:wait-slot", 1};
    struct llmlimit_reserve_request request = {"wait-waiter", &requirement, 1, NULL};
    struct llmlimit_wait_options wait = {.wait_ms = 5000, .priority = 5};
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    int rc = llmlimit_reserve_wait(client, &request, &wait, 0, &result, &waited, &status);
    pthread_join(thread, NULL);
    CHECK(release.queued);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    CHECK_STR(result.lease_id, "wait-waiter");
    CHECK(waited.waited_ms > 0);
    CHECK(!waited.queue_full);
    CHECK_EQ_I64(status.attempts, 1);
    CHECK_EQ_U64(reserved_now("c:wait-slot"), 1); /* the waiter's hold, nothing else */
    CHECK_EQ_I64(waiting_now(client), 0);
    llmlimit_release(client, "wait-waiter", 2000, NULL);
    CHECK_EQ_U64(reserved_now("c:wait-slot"), 0);
}

static void test_reserve_wait_denied_at_its_deadline(void)
{
    REQUIRE(put_limit("c:wait-kept", "concurrency", 1, 30) == 0);
    struct llmlimit_reserve_result holder, result;
    REQUIRE(reserve_one("kept-holder", "c:wait-kept", 1, &holder) == 0);
    REQUIRE(holder.allowed);
    struct llmlimit_requirement requirement = {"c:wait-kept", 1};
    struct llmlimit_reserve_request request = {NULL, &requirement, 1, NULL};
    struct llmlimit_wait_options wait = {.wait_ms = 1000, .priority = 5};
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    CHECK_EQ_I64(llmlimit_reserve_wait(client, &request, &wait, 0, &result, &waited, &status), 0);
    CHECK(!result.allowed);
    CHECK_STR(result.error, "");
    CHECK_EQ_U64(result.denied_mask, 1);
    CHECK(result.retry_after_ms > 0);
    CHECK(waited.waited_ms >= 1000);
    CHECK(!waited.queue_full);
    CHECK_EQ_I64(status.attempts, 1);
    CHECK_EQ_U64(reserved_now("c:wait-kept"), 1); /* the holder only */
    llmlimit_release(client, "kept-holder", 2000, NULL);
}

static void test_acquire_wait_admitted_by_its_first_request(void)
{
    REQUIRE(put_limit("c:wait-acquire", "concurrency", 1, 30) == 0);
    struct llmlimit_reserve_result holder, result;
    REQUIRE(reserve_one("acquire-holder", "c:wait-acquire", 1, &holder) == 0);
    REQUIRE(holder.allowed);
    struct queued_release release = {"acquire-holder", 300, false};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, release_once_queued, &release) == 0);
    struct llmlimit_requirement requirement = {"c:wait-acquire", 1};
    struct llmlimit_reserve_request request = {"acquire-waiter", &requirement, 1, NULL};
    struct llmlimit_wait_options wait = {.wait_ms = LLMLIMIT_WAIT_MS_MAX, .priority = 1};
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    int rc = llmlimit_acquire_wait(client, &request, &wait, 20000, &result, &waited, &status);
    pthread_join(thread, NULL);
    CHECK(release.queued);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    /* The server held the first request until the slot freed: no client
     * retry, no second lease id. */
    CHECK_EQ_I64(status.attempts, 1);
    CHECK_STR(result.lease_id, "acquire-waiter");
    CHECK(waited.waited_ms > 0);
    CHECK_EQ_U64(reserved_now("c:wait-acquire"), 1);
    llmlimit_release(client, "acquire-waiter", 2000, NULL);
}

static const char *llmlimitd_binary;

struct background_reserve {
    struct llmlimit_client *on;
    struct llmlimit_reserve_request request;
    struct llmlimit_wait_options wait;
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    int rc;
};

static void *reserve_in_background(void *argument)
{
    struct background_reserve *call = argument;
    call->rc = llmlimit_reserve_wait(call->on, &call->request, &call->wait, 0, &call->result,
                                     &call->waited, NULL);
    return NULL;
}

static void test_queue_full_reported_by_the_server(void)
{
    struct server_process small;
    const char *const args[] = {"--max-waiters", "1", NULL};
    REQUIRE(server_process_start(&small, llmlimitd_binary, "memory", args) == 0);
    struct llmlimit_client *on = NULL;
    REQUIRE(llmlimit_client_new(small.url, NULL, NULL, &on) == 0);
    struct llmlimit_limit_definition slot = {
        .key = "q:slot", .kind = "concurrency", .capacity = 1, .timeout_seconds = 30};
    REQUIRE(llmlimit_limit_put(on, &slot, NULL, NULL) == 0);
    struct llmlimit_requirement requirement = {"q:slot", 1};
    struct llmlimit_reserve_request holder = {"q-holder", &requirement, 1, NULL};
    struct llmlimit_reserve_result held;
    REQUIRE(llmlimit_reserve(on, &holder, 2000, &held, NULL) == 0 && held.allowed);
    /* One waiter fills the queue of one... */
    struct background_reserve first = {
        .on = on, .request = {"q-first", &requirement, 1, NULL}, .wait = {10000, 5}};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, reserve_in_background, &first) == 0);
    CHECK(wait_queued(on, 1));
    /* ...so the next is answered at once, denied, and told why. */
    struct llmlimit_reserve_request second = {"q-second", &requirement, 1, NULL};
    struct llmlimit_wait_options wait = {.wait_ms = 5000, .priority = 0};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    CHECK_EQ_I64(llmlimit_reserve_wait(on, &second, &wait, 0, &result, &waited, NULL), 0);
    CHECK(!result.allowed);
    CHECK(waited.queue_full);
    CHECK_EQ_I64(waited.waited_ms, 0);
    CHECK_EQ_I64(llmlimit_release(on, "q-holder", 2000, NULL), 0);
    pthread_join(thread, NULL);
    CHECK_EQ_I64(first.rc, 0);
    CHECK(first.result.allowed); /* the waiter got the slot */
    CHECK(!first.waited.queue_full);
    llmlimit_client_free(on);
    CHECK_EQ_I64(server_process_stop(&small), 0);
}

static void test_batches_answer_per_item(void)
{
    REQUIRE(put_limit("c:batch", "rolling", 25, 60) == 0);
    struct llmlimit_requirement ten = {"c:batch", 10};
    struct llmlimit_requirement twice[2] = {{"c:batch", 1}, {"c:batch", 1}};
    struct llmlimit_reserve_request requests[4] = {
        {"b-1", &ten, 1, NULL},
        {"b-2", &ten, 1, NULL},
        {"b-3", &ten, 1, NULL},
        {"b-4", twice, 2, NULL}, /* duplicate key: a 400 for this item only */
    };
    struct llmlimit_reserve_result results[4];
    struct llmlimit_status status;
    REQUIRE(llmlimit_reserve_batch(client, requests, 4, 2000, results, &status) == 0);
    CHECK(results[0].allowed && results[1].allowed);
    CHECK(!results[2].allowed);
    CHECK_EQ_U64(results[2].denied_mask, 1);
    CHECK_EQ_I64(results[3].http_status, 400);
    CHECK(strstr(results[3].error, "duplicate key") != NULL);
    CHECK_STR(results[1].lease_id, "b-2");
    struct llmlimit_actual actual = {"c:batch", 4};
    struct llmlimit_complete_request completes[3] = {
        {"b-1", &actual, 1}, {"b-2", NULL, 0}, {"b-never", NULL, 0}};
    struct llmlimit_complete_result completed[3];
    REQUIRE(llmlimit_complete_batch(client, completes, 3, 2000, completed, &status) == 0);
    CHECK(completed[0].reconciled && completed[1].reconciled);
    CHECK(!completed[2].reconciled);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_I64(completed[i].http_status, 200);
        llmlimit_complete_result_clear(&completed[i]);
    }
    struct llmlimit_usage usage;
    REQUIRE(llmlimit_usage(client, "c:batch", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved + usage.used, 14); /* b-1 shrank to 4, b-2 kept 10 */
}

static void test_admin_calls_round_trip(void)
{
    struct llmlimit_limit_definition definition = {.key = "team:sales:usd:month",
                                                   .kind = "budget",
                                                   .capacity = 100000000,
                                                   .period = "month",
                                                   .unit = "usd_micros",
                                                   .description = "Sales team monthly spend",
                                                   .overage = "debt"};
    bool decreasing = true;
    struct llmlimit_status status;
    REQUIRE(llmlimit_limit_put(client, &definition, &decreasing, &status) == 0);
    CHECK(!decreasing);
    struct llmlimit_limit_state *state;
    REQUIRE(llmlimit_limit_get(client, "team:sales:usd:month", &state, &status) == 0);
    CHECK_STR(state->definition.kind, "budget");
    CHECK_STR(state->definition.period, "month");
    CHECK_STR(state->definition.description, "Sales team monthly spend");
    CHECK_EQ_U64(state->definition.capacity, 100000000);
    CHECK_EQ_U64(state->definition.timeout_seconds, 60); /* the server's default */
    CHECK_STR(state->status, "active");
    llmlimit_limit_state_free(state);
    struct llmlimit_limit_list *list;
    REQUIRE(llmlimit_limit_list(client, &list, &status) == 0);
    bool found = false;
    for (size_t i = 0; i < list->count; i++) {
        found = found || strcmp(list->limits[i].definition.key, "team:sales:usd:month") == 0;
        if (i > 0)
            CHECK(strcmp(list->limits[i - 1].definition.key, list->limits[i].definition.key) < 0);
    }
    CHECK(found);
    llmlimit_limit_list_free(list);
    definition.kind = "nonsense";
    CHECK_EQ_I64(llmlimit_limit_put(client, &definition, NULL, &status), LLMLIMIT_ERR_BAD_REQUEST);
    CHECK(strncmp(status.error, "kind", 4) == 0);
    REQUIRE(llmlimit_limit_delete(client, "team:sales:usd:month", &status) == 0);
    CHECK_EQ_I64(llmlimit_limit_get(client, "team:sales:usd:month", &state, &status),
                 LLMLIMIT_ERR_NOT_FOUND);
    CHECK(state == NULL);
    CHECK_EQ_I64(llmlimit_limit_delete(client, "team:sales:usd:month", &status),
                 LLMLIMIT_ERR_NOT_FOUND);
    struct llmlimit_usage usage;
    CHECK_EQ_I64(llmlimit_usage(client, "team:sales:usd:month", 0, &usage, &status),
                 LLMLIMIT_ERR_NOT_FOUND);
    /* A key with characters that must be percent-encoded in the path. */
    REQUIRE(put_limit("odd/key%?#", "rolling", 3, 60) == 0);
    REQUIRE(llmlimit_usage(client, "odd/key%?#", 0, &usage, &status) == 0);
    CHECK_STR(usage.key, "odd/key%?#");
}

#define THREADS 8
#define RESERVES_PER_THREAD 100
#define SHARED_CAPACITY 500

struct worker {
    int index;
    int allowed;
    int denied;
    int errors;
    int mismatched;
};

static void *reserve_many(void *argument)
{
    struct worker *worker = argument;
    for (int i = 0; i < RESERVES_PER_THREAD; i++) {
        char lease_id[64];
        snprintf(lease_id, sizeof(lease_id), "thread-%d-%d", worker->index, i);
        struct llmlimit_reserve_result result;
        if (reserve_one(lease_id, "c:shared", 1, &result) != 0)
            worker->errors++;
        else if (strcmp(result.lease_id, lease_id) != 0)
            worker->mismatched++;
        else if (result.allowed)
            worker->allowed++;
        else
            worker->denied++;
    }
    return NULL;
}

static void test_one_client_is_safe_across_threads(void)
{
    REQUIRE(put_limit("c:shared", "rolling", SHARED_CAPACITY, 60) == 0);
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){.index = t};
        REQUIRE(pthread_create(&threads[t], NULL, reserve_many, &workers[t]) == 0);
    }
    int allowed = 0, denied = 0, errors = 0, mismatched = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        allowed += workers[t].allowed;
        denied += workers[t].denied;
        errors += workers[t].errors;
        mismatched += workers[t].mismatched;
    }
    CHECK_EQ_I64(errors, 0);
    CHECK_EQ_I64(mismatched, 0);
    CHECK_EQ_I64(allowed, SHARED_CAPACITY);
    CHECK_EQ_I64(denied, THREADS * RESERVES_PER_THREAD - SHARED_CAPACITY);
    struct llmlimit_usage usage;
    REQUIRE(llmlimit_usage(client, "c:shared", 0, &usage, NULL) == 0);
    CHECK_EQ_U64(usage.reserved, SHARED_CAPACITY);
}

static void test_raw_request_reaches_other_routes(void)
{
    char *body = NULL;
    struct llmlimit_status status;
    CHECK_EQ_I64(llmlimit_request(client, "GET", "/healthz", NULL, 0, &body, &status), 0);
    CHECK_EQ_I64(status.http_status, 200);
    llmlimit_free(body);
    CHECK_EQ_I64(llmlimit_request(client, "GET", "/v1/nowhere", NULL, 0, &body, &status),
                 LLMLIMIT_ERR_NOT_FOUND);
    CHECK(body != NULL && strstr(body, "not_found") != NULL);
    llmlimit_free(body);
}

int main(int argc, char **argv)
{
    if (server_process_start(&server, server_binary(argc, argv), "memory", NULL) != 0)
        return 1;
    struct llmlimit_options options;
    llmlimit_options_defaults(&options);
    options.connections_max = 4; /* fewer than the threads of the thread test */
    if (llmlimit_client_new(server.url, NULL, &options, &client) != 0)
        return 1;
    RUN(test_reserve_allowed_denied_and_unknown_key,
        "reserve answers allowed, capacity denial (naming the key) and unknown key");
    RUN(test_reserve_is_idempotent_and_conflicts_are_reported,
        "the same lease reserves once; other requirements give CONFLICT without retry");
    RUN(test_complete_release_and_their_errors,
        "complete settles and frees, release frees, and their errors map to codes");
    RUN(test_acquire_waits_until_a_hold_is_released,
        "acquire waits out a full concurrency limit and succeeds with a new lease id");
    RUN(test_acquire_gives_up_at_the_deadline,
        "acquire returns DEADLINE with the last denial when the hold stays");
    RUN(test_acquire_returns_at_once_on_definitive_errors,
        "acquire does not wait on unknown_limit_key or exceeds_capacity");
    RUN(test_reserve_wait_admitted_when_the_hold_is_released,
        "a reserve waiting 5 s on a held slot is admitted when it is released, holding only it");
    RUN(test_reserve_wait_denied_at_its_deadline,
        "a reserve waiting 1 s on a slot kept held is denied after waiting at least 1 s");
    RUN(test_acquire_wait_admitted_by_its_first_request,
        "acquire_wait is admitted by the server when the slot frees, in one request");
    llmlimitd_binary = server_binary(argc, argv);
    RUN(test_queue_full_reported_by_the_server,
        "past --max-waiters the server's x-llmlimit-queue: full is reported, no wait");
    RUN(test_batches_answer_per_item, "reserve and complete batches give one result per item");
    RUN(test_admin_calls_round_trip, "limit put/get/list/delete and usage round-trip");
    RUN(test_one_client_is_safe_across_threads,
        "8 threads on one client with 4 connections: exactly capacity allowed, no crossed answers");
    RUN(test_raw_request_reaches_other_routes, "llmlimit_request reaches routes without a call");
    llmlimit_client_free(client);
    int stopped = server_process_stop(&server);
    if (stopped != 0)
        fprintf(stderr, "llmlimitd exited with %d\n", stopped);
    return test_summary();
}
