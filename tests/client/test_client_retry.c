/* The retry rules of libllmlimit (docs/client-c.md), proved against a fake HTTP
 * server that answers 503, hangs or drops on purpose, in front of the real
 * llmlimitd where a test needs real answers. */
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/fake_server.h"
#include "client/server_process.h"
#include "llmlimit.h"
#include "test.h"

#define RECORDED_MAX 64

static struct server_process real;
static struct llmlimit_client *real_client; /* talks to the real server directly */

/* What the fake server saw, and how it should behave. */
struct scenario {
    uint32_t unavailable_first; /* answer 503 to the first N requests */
    uint32_t hang_first;        /* or say nothing to the first N */
    bool forward_unavailable;   /* forward those 503'd requests too (answer lost) */
    bool always_unavailable;
    uint32_t recorded;
    char lease_ids[RECORDED_MAX][LLMLIMIT_LEASE_ID_LENGTH_MAX + 1];
    char bodies[RECORDED_MAX][2048];
};

static void record(struct scenario *scenario, const struct fake_request *request)
{
    if (scenario->recorded >= RECORDED_MAX)
        return;
    uint32_t slot = scenario->recorded++;
    snprintf(scenario->bodies[slot], sizeof(scenario->bodies[slot]), "%s", request->body);
    json_t *json = json_loads(request->body, 0, NULL);
    const char *lease_id = json_string_value(json_object_get(json, "lease_id"));
    snprintf(scenario->lease_ids[slot], sizeof(scenario->lease_ids[slot]), "%s",
             lease_id ? lease_id : "");
    json_decref(json);
}

/* Sends the request on to the real server; copies its answer. */
static void forward(const struct fake_request *request, int *status, char *body, size_t size)
{
    char *answer = NULL;
    struct llmlimit_status answer_status;
    llmlimit_request(real_client, request->method, request->path,
                     request->body_length ? request->body : NULL, 5000, &answer, &answer_status);
    *status = answer_status.http_status;
    snprintf(body, size, "%s", answer ? answer : "");
    llmlimit_free(answer);
}

static enum fake_action scenario_handler(void *context, const struct fake_request *request,
                                         int *status, char *body, size_t size)
{
    struct scenario *scenario = context;
    record(scenario, request);
    if (request->index < scenario->hang_first)
        return FAKE_HANG;
    if (scenario->always_unavailable || request->index < scenario->unavailable_first) {
        if (scenario->forward_unavailable)
            forward(request, status, body, size); /* the reservation happens... */
        *status = 503;                            /* ...but its answer is lost */
        snprintf(body, size, "{\"error\":\"backend_error\"}");
        return FAKE_ANSWER;
    }
    forward(request, status, body, size);
    return FAKE_ANSWER;
}

static int64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void put_rolling(const char *key, uint64_t capacity)
{
    struct llmlimit_limit_definition definition = {
        .key = key, .kind = "rolling", .capacity = capacity, .window_seconds = 60};
    int rc = llmlimit_limit_put(real_client, &definition, NULL, NULL);
    if (rc != 0)
        fprintf(stderr, "put %s: %s\n", key, llmlimit_strerror(rc));
}

static uint64_t reserved_of(const char *key)
{
    struct llmlimit_usage usage;
    return llmlimit_usage(real_client, key, 0, &usage, NULL) == 0 ? usage.reserved : UINT64_MAX;
}

static struct llmlimit_client *client_for(const char *url, int64_t attempt_timeout_ms)
{
    struct llmlimit_options options;
    llmlimit_options_defaults(&options);
    options.attempt_timeout_ms = attempt_timeout_ms;
    options.finalize_attempts_max = 3;
    struct llmlimit_client *client = NULL;
    llmlimit_client_new(url, NULL, &options, &client);
    return client;
}

static void test_reserve_retries_503_with_same_lease_id(void)
{
    put_rolling("retry:rpm", 100);
    static struct scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.unavailable_first = 2;
    scenario.forward_unavailable = true;
    struct fake_server fake;
    REQUIRE(fake_server_start(&fake, scenario_handler, &scenario) == 0);
    struct llmlimit_client *client = client_for(fake.url, 2000);
    struct llmlimit_requirement requirement = {"retry:rpm", 7};
    struct llmlimit_reserve_request request = {.requirements = &requirement,
                                               .requirement_count = 1};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    int rc = llmlimit_reserve(client, &request, 5000, &result, &status);
    fake_server_stop(&fake);
    llmlimit_client_free(client);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    CHECK_EQ_I64(status.attempts, 3);
    REQUIRE(scenario.recorded == 3);
    CHECK_STR(scenario.lease_ids[0], result.lease_id);
    CHECK_STR(scenario.lease_ids[1], result.lease_id);
    CHECK_STR(scenario.lease_ids[2], result.lease_id);
    /* Three requests reached the server; exactly one reservation exists. */
    CHECK_EQ_U64(reserved_of("retry:rpm"), 7);
}

static void test_reserve_retries_a_hung_attempt_with_same_lease_id(void)
{
    put_rolling("retry:hang", 100);
    static struct scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.hang_first = 1;
    struct fake_server fake;
    REQUIRE(fake_server_start(&fake, scenario_handler, &scenario) == 0);
    struct llmlimit_client *client = client_for(fake.url, 200);
    struct llmlimit_requirement requirement = {"retry:hang", 3};
    struct llmlimit_reserve_request request = {
        .lease_id = "hang-lease-1", .requirements = &requirement, .requirement_count = 1};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    int rc = llmlimit_reserve(client, &request, 5000, &result, &status);
    fake_server_stop(&fake);
    llmlimit_client_free(client);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    CHECK_EQ_I64(status.attempts, 2);
    REQUIRE(scenario.recorded == 2);
    CHECK_STR(scenario.lease_ids[0], "hang-lease-1");
    CHECK_STR(scenario.lease_ids[1], "hang-lease-1");
    CHECK_EQ_U64(reserved_of("retry:hang"), 3);
}

static void test_reserve_honours_deadline_when_always_unavailable(void)
{
    static struct scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.always_unavailable = true;
    struct fake_server fake;
    REQUIRE(fake_server_start(&fake, scenario_handler, &scenario) == 0);
    struct llmlimit_client *client = client_for(fake.url, 2000);
    struct llmlimit_requirement requirement = {"any", 1};
    struct llmlimit_reserve_request request = {.requirements = &requirement,
                                               .requirement_count = 1};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    int64_t started = now_ms();
    int rc = llmlimit_reserve(client, &request, 2000, &result, &status);
    int64_t elapsed = now_ms() - started;
    fake_server_stop(&fake);
    llmlimit_client_free(client);
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_DEADLINE);
    CHECK(!result.allowed);
    /* at the deadline, far below the 10 s default (with room for a busy machine) */
    CHECK(elapsed >= 1980 && elapsed < 8000);
    CHECK(status.attempts >= 3);
    CHECK_EQ_I64(status.http_status, 503);
    CHECK_STR(status.error, "backend_error");
    for (uint32_t i = 1; i < scenario.recorded; i++)
        CHECK_STR(scenario.lease_ids[i], scenario.lease_ids[0]);
}

static void test_reserve_honours_deadline_when_server_down(void)
{
    /* A port nobody listens on: bind, read the port, close. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    REQUIRE(bind(fd, (struct sockaddr *)&address, sizeof(address)) == 0);
    REQUIRE(getsockname(fd, (struct sockaddr *)&address, &length) == 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(address.sin_port));
    struct llmlimit_client *client = client_for(url, 2000);
    struct llmlimit_requirement requirement = {"any", 1};
    struct llmlimit_reserve_request request = {.requirements = &requirement,
                                               .requirement_count = 1};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    int64_t started = now_ms();
    int rc = llmlimit_reserve(client, &request, 2000, &result, &status);
    int64_t elapsed = now_ms() - started;
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_DEADLINE);
    CHECK(elapsed >= 1980 && elapsed < 8000); /* far below the 10 s default */
    CHECK(status.attempts >= 2);
    CHECK_EQ_I64(status.http_status, 0);
    CHECK(status.error[0] != '\0');
    /* complete and release give up after their bounded attempts. */
    struct llmlimit_complete_request complete = {.lease_id = "down-lease"};
    struct llmlimit_complete_result completed;
    rc = llmlimit_complete(client, &complete, 5000, &completed, &status);
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_TRANSPORT);
    CHECK_EQ_I64(status.attempts, 3);
    llmlimit_complete_result_clear(&completed);
    llmlimit_client_free(client);
}

static void test_complete_and_release_make_bounded_attempts(void)
{
    static struct scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.always_unavailable = true;
    struct fake_server fake;
    REQUIRE(fake_server_start(&fake, scenario_handler, &scenario) == 0);
    struct llmlimit_client *client = client_for(fake.url, 2000);
    struct llmlimit_actual actual = {"k", 5};
    struct llmlimit_complete_request request = {"bounded-1", &actual, 1};
    struct llmlimit_complete_result result;
    struct llmlimit_status status;
    int rc = llmlimit_complete(client, &request, 10000, &result, &status);
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_UNAVAILABLE);
    CHECK_EQ_I64(status.attempts, 3);
    CHECK_EQ_I64(scenario.recorded, 3);
    llmlimit_complete_result_clear(&result);
    rc = llmlimit_release(client, "bounded-2", 10000, &status);
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_UNAVAILABLE);
    CHECK_EQ_I64(status.attempts, 3);
    CHECK_EQ_I64(scenario.recorded, 6);
    CHECK_STR(scenario.lease_ids[5], "bounded-2");
    fake_server_stop(&fake);
    llmlimit_client_free(client);
}

/* A batch whose second item is answered 503 once: only that item is sent
 * again, with its lease id. */
static enum fake_action batch_handler(void *context, const struct fake_request *request,
                                      int *status, char *body, size_t size)
{
    struct scenario *scenario = context;
    record(scenario, request);
    forward(request, status, body, size);
    if (request->index != 0)
        return FAKE_ANSWER;
    json_t *json = json_loads(body, 0, NULL);
    json_t *results = json_object_get(json, "results");
    json_array_set_new(results, 1, json_pack("{s:i,s:s}", "status", 503, "error", "backend_error"));
    char *text = json_dumps(json, JSON_COMPACT);
    snprintf(body, size, "%s", text);
    free(text);
    json_decref(json);
    return FAKE_ANSWER;
}

static void test_batch_retries_unknown_items_only(void)
{
    put_rolling("retry:batch", 1000);
    static struct scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    struct fake_server fake;
    REQUIRE(fake_server_start(&fake, batch_handler, &scenario) == 0);
    struct llmlimit_client *client = client_for(fake.url, 2000);
    struct llmlimit_requirement requirement = {"retry:batch", 10};
    struct llmlimit_reserve_request requests[3] = {
        {"batch-a", &requirement, 1, NULL},
        {"batch-b", &requirement, 1, NULL},
        {"batch-c", &requirement, 1, NULL},
    };
    struct llmlimit_reserve_result results[3];
    struct llmlimit_status status;
    int rc = llmlimit_reserve_batch(client, requests, 3, 5000, results, &status);
    fake_server_stop(&fake);
    llmlimit_client_free(client);
    CHECK_EQ_I64(rc, 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_I64(results[i].http_status, 200);
        CHECK(results[i].allowed);
    }
    CHECK_STR(results[1].lease_id, "batch-b");
    REQUIRE(scenario.recorded == 2);
    json_t *second = json_loads(scenario.bodies[1], 0, NULL);
    json_t *items = json_object_get(second, "requests");
    CHECK_EQ_U64(json_array_size(items), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(items, 0), "lease_id")), "batch-b");
    json_decref(second);
    /* The lost answer was a real reservation, retried idempotently. */
    CHECK_EQ_U64(reserved_of("retry:batch"), 30);
}

static void test_sequential_calls_reuse_one_connection(void)
{
    static struct scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    struct fake_server fake;
    REQUIRE(fake_server_start(&fake, scenario_handler, &scenario) == 0);
    struct llmlimit_client *client = client_for(fake.url, 2000);
    struct llmlimit_usage usage;
    int ok = 0;
    for (int i = 0; i < 20; i++)
        ok += llmlimit_usage(client, "retry:rpm", 0, &usage, NULL) == 0;
    llmlimit_client_free(client);
    fake_server_stop(&fake);
    CHECK_EQ_I64(ok, 20);
    CHECK_EQ_U64(atomic_load(&fake.requests), 20);
    CHECK_EQ_U64(atomic_load(&fake.connections), 1);
}

/* ---- waiting on the server (llmlimit_reserve_wait, llmlimit_acquire_wait) ---- */

#define WAIT_STEPS_MAX 8
#define HOLD_ALL_WAIT (-1) /* hold the answer for the wait_ms the request asked */

/* How the fake server answers the n-th reserve (the last step repeats). */
struct wait_step {
    int status;      /* 200, or 503 backend_error */
    bool allowed;    /* of a 200 */
    int64_t hold_ms; /* sleep before answering; HOLD_ALL_WAIT: the wait asked */
    bool queue_full; /* send "x-llmlimit-queue: full" */
    int64_t retry_after_ms;
};

struct wait_scenario {
    struct wait_step steps[WAIT_STEPS_MAX];
    uint32_t step_count;
    int64_t started_ms; /* the test's clock when its call began */
    uint32_t seen;
    int64_t received_ms[WAIT_STEPS_MAX]; /* since started_ms */
    int64_t answered_ms[WAIT_STEPS_MAX]; /* since started_ms, after the hold */
    int64_t wait_ms[WAIT_STEPS_MAX];     /* -1: the field was absent */
    int64_t priority[WAIT_STEPS_MAX];    /* -1: the field was absent */
    char lease_ids[WAIT_STEPS_MAX][LLMLIMIT_LEASE_ID_LENGTH_MAX + 1];
};

static int64_t body_integer(const json_t *body, const char *name)
{
    const json_t *value = json_object_get(body, name);
    return json_is_integer(value) ? (int64_t)json_integer_value(value) : -1;
}

static void wait_record(struct wait_scenario *scenario, const struct fake_request *request,
                        uint32_t slot)
{
    scenario->received_ms[slot] = now_ms() - scenario->started_ms;
    json_t *body = json_loads(request->body, 0, NULL);
    scenario->wait_ms[slot] = body_integer(body, "wait_ms");
    scenario->priority[slot] = body_integer(body, "priority");
    const char *lease_id = json_string_value(json_object_get(body, "lease_id"));
    snprintf(scenario->lease_ids[slot], sizeof(scenario->lease_ids[slot]), "%s",
             lease_id ? lease_id : "");
    json_decref(body);
}

/* A server that waits as llmlimitd does: it holds the answer, then says
 * how long it waited. */
static enum fake_action wait_handler(void *context, const struct fake_request *request, int *status,
                                     char *body, size_t size)
{
    struct wait_scenario *scenario = context;
    uint32_t slot = scenario->seen < WAIT_STEPS_MAX ? scenario->seen : WAIT_STEPS_MAX - 1;
    scenario->seen++;
    wait_record(scenario, request, slot);
    uint32_t index = slot < scenario->step_count ? slot : scenario->step_count - 1;
    const struct wait_step *step = &scenario->steps[index];
    int64_t hold = step->hold_ms == HOLD_ALL_WAIT ? scenario->wait_ms[slot] : step->hold_ms;
    if (hold > 0) {
        struct timespec pause = {.tv_sec = hold / 1000, .tv_nsec = (hold % 1000) * 1000000};
        nanosleep(&pause, NULL);
    }
    scenario->answered_ms[slot] = now_ms() - scenario->started_ms;
    if (step->queue_full)
        snprintf(request->answer_headers, FAKE_HEADERS_BYTES_MAX, "x-llmlimit-queue: full\r\n");
    *status = step->status;
    if (step->status != 200) {
        snprintf(body, size, "{\"error\":\"backend_error\"}");
        return FAKE_ANSWER;
    }
    snprintf(body, size,
             "{\"allowed\":%s,\"retry_after_ms\":%lld,\"reserved_at_unix_ms\":%d,"
             "\"expires_at_unix_ms\":%d,\"error\":\"\",\"denied_keys\":%s,\"waited_ms\":%lld}",
             step->allowed ? "true" : "false", (long long)step->retry_after_ms,
             step->allowed ? 5 : 0, step->allowed ? 60005 : 0, step->allowed ? "[]" : "[\"k\"]",
             (long long)(hold > 0 ? hold : 0));
    return FAKE_ANSWER;
}

/* Runs one reserve_wait (acquire: acquire_wait) against a fake server
 * playing scenario, with the given attempt timeout. */
static int run_wait_call(struct wait_scenario *scenario, bool acquire, int64_t attempt_timeout_ms,
                         const struct llmlimit_wait_options *wait, int64_t timeout_ms,
                         struct llmlimit_reserve_result *result,
                         struct llmlimit_wait_result *waited, struct llmlimit_status *status)
{
    struct fake_server fake;
    if (fake_server_start(&fake, wait_handler, scenario) != 0)
        return -100;
    struct llmlimit_client *client = client_for(fake.url, attempt_timeout_ms);
    struct llmlimit_requirement requirement = {"k", 1};
    struct llmlimit_reserve_request request = {"wait-lease-1", &requirement, 1, NULL};
    scenario->started_ms = now_ms();
    int rc =
        acquire ? llmlimit_acquire_wait(client, &request, wait, timeout_ms, result, waited, status)
                : llmlimit_reserve_wait(client, &request, wait, timeout_ms, result, waited, status);
    fake_server_stop(&fake);
    llmlimit_client_free(client);
    return rc;
}

static void test_reserve_wait_sends_its_fields_and_reads_waited_ms(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 200, .allowed = true, .hold_ms = 400};
    scenario.step_count = 1;
    struct llmlimit_wait_options wait = {.wait_ms = 3000, .priority = 2};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    int rc = run_wait_call(&scenario, false, 2000, &wait, 0, &result, &waited, &status);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    CHECK_EQ_I64(waited.waited_ms, 400); /* the server's figure, read from the answer */
    CHECK(!waited.queue_full);
    REQUIRE(scenario.seen == 1);
    CHECK_STR(scenario.lease_ids[0], "wait-lease-1");
    CHECK_EQ_I64(scenario.priority[0], 2);
    CHECK_EQ_I64(scenario.wait_ms[0], 3000); /* the first attempt asks for the whole wait */
}

static void test_plain_reserve_sends_no_wait_fields(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 200, .allowed = true};
    scenario.step_count = 1;
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited = {.waited_ms = 99, .queue_full = true};
    struct llmlimit_wait_options defaults;
    llmlimit_wait_options_defaults(&defaults);
    CHECK_EQ_I64(defaults.wait_ms, 0);
    CHECK_EQ_I64(defaults.priority, LLMLIMIT_PRIORITY_DEFAULT);
    /* NULL options, and the defaults spelled out: the body of a plain reserve. */
    CHECK_EQ_I64(run_wait_call(&scenario, false, 2000, NULL, 0, &result, &waited, NULL), 0);
    CHECK_EQ_I64(run_wait_call(&scenario, false, 2000, &defaults, 0, &result, &waited, NULL), 0);
    CHECK_EQ_I64(waited.waited_ms, 0);
    CHECK(!waited.queue_full);
    /* A priority alone is sent without a wait. */
    struct llmlimit_wait_options urgent = {.wait_ms = 0, .priority = 0};
    CHECK_EQ_I64(run_wait_call(&scenario, false, 2000, &urgent, 0, &result, &waited, NULL), 0);
    REQUIRE(scenario.seen == 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_I64(scenario.wait_ms[i], -1);
    CHECK_EQ_I64(scenario.priority[0], -1);
    CHECK_EQ_I64(scenario.priority[1], -1);
    CHECK_EQ_I64(scenario.priority[2], 0);
}

static void test_reserve_wait_attempt_outlasts_the_wait(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    /* The server holds the answer for the whole wait asked, 1500 ms, longer
     * than the 1000 ms one attempt gets: the attempt must not be cut. */
    scenario.steps[0] = (struct wait_step){
        .status = 200, .allowed = false, .hold_ms = HOLD_ALL_WAIT, .retry_after_ms = 250};
    scenario.step_count = 1;
    struct llmlimit_wait_options wait = {.wait_ms = 1500, .priority = 5};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    int rc = run_wait_call(&scenario, false, 1000, &wait, 0, &result, &waited, &status);
    CHECK_EQ_I64(rc, 0);
    CHECK(!result.allowed); /* denied at the deadline, as the server said */
    CHECK_EQ_I64(result.retry_after_ms, 250);
    CHECK_EQ_I64(status.attempts, 1);
    CHECK_EQ_I64(scenario.seen, 1);
    CHECK(waited.waited_ms > 1000);
    CHECK_EQ_I64(waited.waited_ms, scenario.wait_ms[0]);
}

static void test_reserve_wait_is_cut_to_the_deadline(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 200, .allowed = true};
    scenario.step_count = 1;
    /* 5 s asked, 3 s given: the server may wait until one attempt timeout
     * (1 s) before the deadline, no longer. */
    struct llmlimit_wait_options wait = {.wait_ms = 5000, .priority = 5};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    CHECK_EQ_I64(run_wait_call(&scenario, false, 1000, &wait, 3000, &result, &waited, NULL), 0);
    REQUIRE(scenario.seen == 1);
    CHECK(scenario.wait_ms[0] <= 2000);
    CHECK(scenario.wait_ms[0] >= 2000 - scenario.received_ms[0]);
}

static void test_reserve_wait_retry_keeps_lease_and_asks_what_is_left(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 503, .hold_ms = 300};
    scenario.steps[1] = (struct wait_step){.status = 200, .allowed = true, .hold_ms = 100};
    scenario.step_count = 2;
    struct llmlimit_wait_options wait = {.wait_ms = 4000, .priority = 7};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    int rc = run_wait_call(&scenario, false, 2000, &wait, 0, &result, &waited, &status);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    CHECK_EQ_I64(status.attempts, 2);
    REQUIRE(scenario.seen == 2);
    CHECK_STR(scenario.lease_ids[1], "wait-lease-1");
    CHECK_EQ_I64(scenario.priority[1], 7);
    /* The retry asks only for what is left of the 4 s: the call began before
     * the first request came, the retry was sent after its answer. */
    CHECK(scenario.wait_ms[1] <= 4000 - (scenario.answered_ms[0] - scenario.received_ms[0]));
    CHECK(scenario.wait_ms[1] < scenario.wait_ms[0]);
    CHECK_EQ_I64(waited.waited_ms, 100);
}

static void test_queue_full_is_reported(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 200, .queue_full = true, .retry_after_ms = 40};
    scenario.step_count = 1;
    struct llmlimit_wait_options wait = {.wait_ms = 5000, .priority = 5};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    CHECK_EQ_I64(run_wait_call(&scenario, false, 2000, &wait, 0, &result, &waited, NULL), 0);
    CHECK(!result.allowed);
    CHECK(waited.queue_full);
    CHECK_EQ_I64(waited.waited_ms, 0);
    /* acquire goes on after a full queue as after any denial: it sleeps
     * retry_after_ms, then asks again, waiting, with a new lease id. */
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 200, .queue_full = true, .retry_after_ms = 40};
    scenario.steps[1] = (struct wait_step){.status = 200, .allowed = true, .hold_ms = 50};
    scenario.step_count = 2;
    struct llmlimit_status status;
    CHECK_EQ_I64(run_wait_call(&scenario, true, 2000, &wait, 10000, &result, &waited, &status), 0);
    CHECK(result.allowed);
    CHECK(!waited.queue_full); /* the last answer */
    CHECK_EQ_I64(waited.waited_ms, 50);
    REQUIRE(scenario.seen == 2);
    CHECK(strcmp(scenario.lease_ids[0], scenario.lease_ids[1]) != 0);
    CHECK_STR(result.lease_id, scenario.lease_ids[1]);
    CHECK(scenario.wait_ms[1] > 0);
    CHECK(scenario.received_ms[1] - scenario.received_ms[0] >= 40); /* not before retry_after */
}

static void test_acquire_stops_at_a_retry_after_past_its_deadline(void)
{
    /* A denial whose retry_after_ms is past the deadline, up to the largest
     * integer a server can send: acquire stops at once, without asking again
     * (the sleep it added jitter to once overflowed). */
    int64_t retry_after[] = {5000, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
    for (size_t i = 0; i < sizeof retry_after / sizeof retry_after[0]; i++) {
        static struct wait_scenario scenario;
        memset(&scenario, 0, sizeof(scenario));
        scenario.steps[0] = (struct wait_step){.status = 200, .retry_after_ms = retry_after[i]};
        scenario.step_count = 1;
        struct llmlimit_reserve_result result;
        struct llmlimit_wait_result waited;
        struct llmlimit_status status;
        int rc = run_wait_call(&scenario, true, 500, NULL, 1000, &result, &waited, &status);
        CHECK_EQ_I64(rc, LLMLIMIT_ERR_DEADLINE);
        CHECK(!result.allowed);
        CHECK_EQ_U64(scenario.seen, 1);
    }
}

static void test_acquire_wait_asks_for_the_rest_of_its_deadline(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    /* Denied after holding the whole wait, then denied at once: acquire
     * never asks for more than is left, and stops at its deadline. */
    scenario.steps[0] =
        (struct wait_step){.status = 200, .hold_ms = HOLD_ALL_WAIT, .retry_after_ms = 100};
    scenario.steps[1] = (struct wait_step){.status = 200, .retry_after_ms = 100};
    scenario.step_count = 2;
    struct llmlimit_wait_options wait = {.wait_ms = LLMLIMIT_WAIT_MS_MAX, .priority = 5};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    int rc = run_wait_call(&scenario, true, 500, &wait, 2500, &result, &waited, &status);
    CHECK_EQ_I64(rc, LLMLIMIT_ERR_DEADLINE);
    CHECK(!result.allowed);
    CHECK_EQ_I64(result.http_status, 200);
    REQUIRE(scenario.seen >= 1);
    /* the 2.5 s deadline less one attempt timeout for the answer */
    CHECK(scenario.wait_ms[0] <= 2000);
    CHECK(scenario.wait_ms[0] >= 2000 - scenario.received_ms[0]);
    /* Later attempts wait no further than the first was allowed to: the call
     * began before the first request came, each was sent after the last answer. */
    int64_t wait_end_ms = scenario.received_ms[0] + 2000;
    for (uint32_t i = 1; i < scenario.seen && i < WAIT_STEPS_MAX; i++) {
        CHECK(strcmp(scenario.lease_ids[i], scenario.lease_ids[i - 1]) != 0);
        CHECK(scenario.wait_ms[i] == -1 ||
              scenario.wait_ms[i] <= wait_end_ms - scenario.answered_ms[i - 1]);
    }
}

static void test_bad_wait_options_are_refused_before_sending(void)
{
    struct llmlimit_client *client = NULL;
    REQUIRE(llmlimit_client_new("http://127.0.0.1:1", NULL, NULL, &client) == 0);
    struct llmlimit_requirement requirement = {"k", 1};
    struct llmlimit_reserve_request request = {"bad-wait", &requirement, 1, NULL};
    struct llmlimit_reserve_result result;
    struct llmlimit_wait_result waited;
    struct llmlimit_status status;
    const struct {
        struct llmlimit_wait_options options;
        const char *field;
    } bad[] = {
        {{.wait_ms = -1, .priority = 5}, "wait_ms: must be an integer 0..60000"},
        {{.wait_ms = LLMLIMIT_WAIT_MS_MAX + 1, .priority = 5},
         "wait_ms: must be an integer 0..60000"},
        {{.wait_ms = 100, .priority = -1}, "priority: must be an integer 0..9"},
        {{.wait_ms = 100, .priority = LLMLIMIT_PRIORITY_MAX + 1},
         "priority: must be an integer 0..9"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_I64(llmlimit_reserve_wait(client, &request, &bad[i].options, 100, &result, &waited,
                                           &status),
                     LLMLIMIT_ERR_INVALID_ARGUMENT);
        CHECK_EQ_I64(status.attempts, 0);
        CHECK_STR(status.error, bad[i].field);
        CHECK_EQ_I64(llmlimit_acquire_wait(client, &request, &bad[i].options, 100, &result, &waited,
                                           &status),
                     LLMLIMIT_ERR_INVALID_ARGUMENT);
        CHECK_EQ_I64(status.attempts, 0);
        CHECK_STR(status.error, bad[i].field);
    }
    llmlimit_client_free(client);
}

static void test_wait_bounds_are_accepted(void)
{
    static struct wait_scenario scenario;
    memset(&scenario, 0, sizeof(scenario));
    scenario.steps[0] = (struct wait_step){.status = 200, .allowed = true};
    scenario.step_count = 1;
    struct llmlimit_wait_options most = {.wait_ms = LLMLIMIT_WAIT_MS_MAX,
                                         .priority = LLMLIMIT_PRIORITY_MAX};
    struct llmlimit_reserve_result result;
    CHECK_EQ_I64(run_wait_call(&scenario, false, 2000, &most, 0, &result, NULL, NULL), 0);
    CHECK(result.allowed);
    REQUIRE(scenario.seen == 1);
    CHECK_EQ_I64(scenario.wait_ms[0], LLMLIMIT_WAIT_MS_MAX);
    CHECK_EQ_I64(scenario.priority[0], LLMLIMIT_PRIORITY_MAX);
}

static void test_lease_ids_are_uuidv7(void)
{
    char first[LLMLIMIT_UUID_SIZE], second[LLMLIMIT_UUID_SIZE];
    REQUIRE(llmlimit_lease_id_new(first) == 0);
    REQUIRE(llmlimit_lease_id_new(second) == 0);
    CHECK_EQ_U64(strlen(first), 36);
    CHECK(first[8] == '-' && first[13] == '-' && first[18] == '-' && first[23] == '-');
    CHECK(first[14] == '7');
    CHECK(strchr("89ab", first[19]) != NULL);
    CHECK(strcmp(first, second) != 0);
    /* The leading 48 bits are unix milliseconds: ids sort by time. */
    CHECK(strncmp(first, second, 8) <= 0);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char expected[16];
    unsigned long long ms =
        (unsigned long long)now.tv_sec * 1000 + (unsigned long long)now.tv_nsec / 1000000;
    snprintf(expected, sizeof(expected), "%08llx", ms >> 16);
    CHECK(strncmp(first, expected, 6) == 0); /* the same 2^24 ms span */
}

static void test_invalid_arguments_are_caught_before_sending(void)
{
    struct llmlimit_client *client = NULL;
    CHECK_EQ_I64(llmlimit_client_new("ftp://x", NULL, NULL, &client),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    CHECK_EQ_I64(llmlimit_client_new("http://x", "bad\ntoken", NULL, &client),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    REQUIRE(llmlimit_client_new("http://127.0.0.1:1", NULL, NULL, &client) == 0);
    struct llmlimit_requirement requirements[LLMLIMIT_REQUIREMENTS_MAX + 1];
    for (int i = 0; i <= LLMLIMIT_REQUIREMENTS_MAX; i++)
        requirements[i] = (struct llmlimit_requirement){"k", 1};
    struct llmlimit_reserve_request request = {"ok-lease", requirements,
                                               LLMLIMIT_REQUIREMENTS_MAX + 1, NULL};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    /* 65 requirements: one past the bound. */
    CHECK_EQ_I64(llmlimit_reserve(client, &request, 100, &result, &status),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    CHECK_EQ_I64(status.attempts, 0);
    request.requirement_count = 1;
    requirements[0].amount = LLMLIMIT_AMOUNT_MAX + 1;
    CHECK_EQ_I64(llmlimit_reserve(client, &request, 100, &result, &status),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    requirements[0].amount = 0;
    CHECK_EQ_I64(llmlimit_reserve(client, &request, 100, &result, &status),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    requirements[0].amount = 1;
    request.lease_id = "has space";
    CHECK_EQ_I64(llmlimit_reserve(client, &request, 100, &result, &status),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    char long_lease[LLMLIMIT_LEASE_ID_LENGTH_MAX + 2];
    memset(long_lease, 'a', sizeof(long_lease) - 1);
    long_lease[sizeof(long_lease) - 1] = '\0';
    request.lease_id = long_lease; /* 129 bytes: one past the bound */
    CHECK_EQ_I64(llmlimit_reserve(client, &request, 100, &result, &status),
                 LLMLIMIT_ERR_INVALID_ARGUMENT);
    CHECK_EQ_I64(status.attempts, 0);
    llmlimit_client_free(client);
}

/* Restarts llmlimitd on the port and data directory of a killed one. */
struct restart_plan {
    const char *binary;
    const struct server_process *killed;
    struct server_process restarted;
    int64_t delay_ms;
    int rc;
};

static void *restart_later(void *argument)
{
    struct restart_plan *plan = argument;
    struct timespec pause = {.tv_sec = plan->delay_ms / 1000,
                             .tv_nsec = (plan->delay_ms % 1000) * 1000000};
    nanosleep(&pause, NULL);
    char listen[96];
    snprintf(listen, sizeof(listen), "%s:%d", plan->killed->host, plan->killed->port);
    const char *const args[] = {"--listen", listen, "--data-dir", plan->killed->data_dir, NULL};
    plan->rc = server_process_start(&plan->restarted, plan->binary, "sqlite", args);
    return NULL;
}

static const char *restart_binary;

static void test_reserve_survives_server_killed_and_restarted(void)
{
    struct server_process first;
    REQUIRE(server_process_start(&first, restart_binary, "sqlite", NULL) == 0);
    struct llmlimit_client *client = client_for(first.url, 1000);
    struct llmlimit_limit_definition definition = {
        .key = "restart:rpm", .kind = "rolling", .capacity = 100, .window_seconds = 60};
    CHECK_EQ_I64(llmlimit_limit_put(client, &definition, NULL, NULL), 0);
    kill(first.pid, SIGKILL); /* a crash: no shutdown, nothing flushed on purpose */
    waitpid(first.pid, NULL, 0);
    first.pid = 0;
    struct restart_plan plan = {.binary = restart_binary, .killed = &first, .delay_ms = 500};
    pthread_t restarter;
    REQUIRE(pthread_create(&restarter, NULL, restart_later, &plan) == 0);
    struct llmlimit_requirement requirement = {"restart:rpm", 9};
    struct llmlimit_reserve_request request = {.requirements = &requirement,
                                               .requirement_count = 1};
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    int rc = llmlimit_reserve(client, &request, 8000, &result, &status);
    pthread_join(restarter, NULL);
    CHECK_EQ_I64(plan.rc, 0);
    CHECK_EQ_I64(rc, 0);
    CHECK(result.allowed);
    CHECK(status.attempts >= 2); /* the first attempts met a dead server */
    struct llmlimit_usage usage;
    CHECK_EQ_I64(llmlimit_usage(client, "restart:rpm", 0, &usage, NULL), 0);
    CHECK_EQ_U64(usage.reserved, 9); /* exactly one reservation, on the restarted server */
    llmlimit_client_free(client);
    if (plan.rc == 0)
        CHECK_EQ_I64(server_process_stop(&plan.restarted), 0);
    server_process_stop(&first); /* removes the shared data directory */
}

int main(int argc, char **argv)
{
    RUN(test_lease_ids_are_uuidv7, "lease ids are RFC 9562 UUIDv7 text, unique, time-ordered");
    RUN(test_invalid_arguments_are_caught_before_sending,
        "bad URLs, tokens, lease ids, amounts and counts fail before any request");
    RUN(test_bad_wait_options_are_refused_before_sending,
        "wait_ms outside 0..60000 and priority outside 0..9 fail before any request, naming "
        "the field");
    RUN(test_reserve_wait_sends_its_fields_and_reads_waited_ms,
        "reserve_wait sends wait_ms and priority with its lease id and reads waited_ms");
    RUN(test_plain_reserve_sends_no_wait_fields,
        "a reserve without a wait sends neither field (a priority alone is sent)");
    RUN(test_wait_bounds_are_accepted, "wait_ms 60000 and priority 9 are sent as they are");
    RUN(test_reserve_wait_attempt_outlasts_the_wait,
        "an attempt held for the whole wait is not cut by the attempt timeout: one attempt");
    RUN(test_reserve_wait_is_cut_to_the_deadline, "a wait longer than the deadline allows is cut "
                                                  "to leave one attempt timeout for the answer");
    RUN(test_reserve_wait_retry_keeps_lease_and_asks_what_is_left,
        "a 503 during a wait is retried with the same lease id, asking only what is left");
    RUN(test_queue_full_is_reported,
        "x-llmlimit-queue: full is reported; acquire sleeps retry_after and asks again");
    RUN(test_acquire_stops_at_a_retry_after_past_its_deadline,
        "a denial whose retry_after_ms is past the deadline (up to 2^63-1) ends acquire at once");
    RUN(test_acquire_wait_asks_for_the_rest_of_its_deadline,
        "acquire_wait asks the server to wait for the rest of its deadline, never past it");
    if (server_process_start(&real, server_binary(argc, argv), "memory", NULL) != 0 ||
        llmlimit_client_new(real.url, NULL, NULL, &real_client) != 0) {
        fprintf(stderr, "cannot start llmlimitd\n");
        return 1;
    }
    RUN(test_reserve_retries_503_with_same_lease_id,
        "reserve retries 503s with the same lease id and exactly one reservation results");
    RUN(test_reserve_retries_a_hung_attempt_with_same_lease_id,
        "an attempt that times out is retried with the same lease id");
    RUN(test_reserve_honours_deadline_when_always_unavailable,
        "reserve against a server that always answers 503 returns DEADLINE on time");
    RUN(test_reserve_honours_deadline_when_server_down,
        "reserve with the server down returns DEADLINE on time; complete gives up after its "
        "attempts");
    RUN(test_complete_and_release_make_bounded_attempts,
        "complete and release stop after finalize_attempts_max attempts");
    RUN(test_sequential_calls_reuse_one_connection,
        "20 sequential calls on one client use one keep-alive connection");
    RUN(test_batch_retries_unknown_items_only,
        "a batch resends only the items answered 503, with their lease ids");
    restart_binary = server_binary(argc, argv);
    RUN(test_reserve_survives_server_killed_and_restarted,
        "a reserve made while llmlimitd is killed succeeds once it restarts, reserving once");
    llmlimit_client_free(real_client);
    server_process_stop(&real);
    return test_summary();
}
