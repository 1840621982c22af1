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
