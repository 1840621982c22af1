/* The load generator behind `llmlimit bench`: its histogram keeps values
 * within its stated precision, and against the real llmlimitd its counts
 * agree with what the server holds. */
#include <stdio.h>
#include <string.h>

#include "client/server_process.h"
#include "loadgen_histogram.h"
#include "llmlimit.h"
#include "loadgen.h"
#include "test.h"

static struct server_process server;
static struct llmlimit_client *client;

static void test_histogram_buckets_keep_precision(void)
{
    /* Every value maps to a bucket whose top is within 1/64 above it. */
    for (uint64_t value = 1; value < (UINT64_C(1) << 38); value = value * 3 / 2 + 1) {
        uint32_t bucket = loadgen_histogram_bucket(value);
        uint64_t high = loadgen_histogram_bucket_high(bucket);
        CHECK(high >= value);
        CHECK(high - value <= value / 64 + 1);
        CHECK(bucket == 0 || loadgen_histogram_bucket_high(bucket - 1) < value);
    }
    CHECK_EQ_U64(loadgen_histogram_bucket(UINT64_MAX), LOADGEN_HISTOGRAM_BUCKETS - 1);
}

static void test_histogram_percentiles(void)
{
    static struct loadgen_histogram histogram;
    loadgen_histogram_init(&histogram);
    CHECK_EQ_U64(loadgen_histogram_percentile(&histogram, 0.5), 0);
    for (uint64_t value = 1; value <= 1000; value++)
        loadgen_histogram_record(&histogram, value * 1000); /* 1..1000 microseconds */
    uint64_t p50 = loadgen_histogram_percentile(&histogram, 0.50);
    uint64_t p99 = loadgen_histogram_percentile(&histogram, 0.99);
    CHECK(p50 >= 500000 && p50 <= 500000 + 500000 / 64);
    CHECK(p99 >= 990000 && p99 <= 990000 + 990000 / 64);
    CHECK_EQ_U64(loadgen_histogram_percentile(&histogram, 1.0), 1000000);
    CHECK_EQ_U64(histogram.max, 1000000);
    static struct loadgen_histogram other;
    loadgen_histogram_init(&other);
    loadgen_histogram_record(&other, 5000000);
    loadgen_histogram_merge(&histogram, &other);
    CHECK_EQ_U64(histogram.total, 1001);
    CHECK_EQ_U64(histogram.max, 5000000);
}

static void test_url_parsing(void)
{
    struct loadgen_config config;
    loadgen_config_defaults(&config);
    CHECK_EQ_I64(loadgen_config_url(&config, "http://127.0.0.1:8470"), 0);
    CHECK_STR(config.host, "127.0.0.1");
    CHECK_STR(config.port, "8470");
    CHECK_EQ_I64(loadgen_config_url(&config, "http://[::1]:99/"), 0);
    CHECK_STR(config.host, "::1");
    CHECK_STR(config.port, "99");
    CHECK_EQ_I64(loadgen_config_url(&config, "https://x:1"), -1);
    CHECK_EQ_I64(loadgen_config_url(&config, "http://x:1/path"), -1);
}

static int put_limit(const char *key, const char *kind, uint64_t capacity)
{
    struct llmlimit_limit_definition definition = {.key = key, .kind = kind, .capacity = capacity};
    if (strcmp(kind, "rolling") == 0)
        definition.window_seconds = 60;
    else
        definition.timeout_seconds = 30;
    return llmlimit_limit_put(client, &definition, NULL, NULL);
}

static uint64_t reserved_of(const char *key)
{
    struct llmlimit_usage usage;
    return llmlimit_usage(client, key, 0, &usage, NULL) == 0 ? usage.reserved : UINT64_MAX;
}

static int run(struct loadgen_config *config, struct loadgen_report *report)
{
    char error[256];
    loadgen_config_url(config, server.url);
    config->progress = false;
    config->duration_seconds = 1;
    int rc = loadgen_run(config, report, error, sizeof(error));
    if (rc != 0)
        fprintf(stderr, "loadgen: %s\n", error);
    return rc;
}

/* Whatever this machine manages in the run's second: a small capacity, so
 * that any machine runs into it, and counts that hold for any number. */
static void test_reserve_counts_match_the_server(void)
{
    REQUIRE(put_limit("lg:rpm", "rolling", 50) == 0);
    REQUIRE(put_limit("lg:tpm", "rolling", 1000000) == 0);
    static struct loadgen_config config;
    static struct loadgen_report report;
    loadgen_config_defaults(&config);
    config.connections = 4;
    config.key_count = 2;
    config.keys[0] = "lg:rpm";
    config.keys[1] = "lg:tpm";
    config.amounts[0] = 1;
    config.amounts[1] = 100;
    REQUIRE(run(&config, &report) == 0);
    CHECK(report.requests > 0);
    CHECK_EQ_U64(report.errors, 0);
    CHECK_EQ_U64(report.connection_errors, 0);
    uint64_t fit = report.requests < 50 ? report.requests : 50;
    CHECK_EQ_U64(report.allowed, fit);
    CHECK_EQ_U64(report.allowed + report.denied, report.requests);
    CHECK_EQ_U64(report.latency_ns.total, report.requests);
    CHECK_EQ_U64(reserved_of("lg:rpm"), fit);
    CHECK_EQ_U64(reserved_of("lg:tpm"), fit * 100);
}

static void test_batch_counts_match_the_server(void)
{
    REQUIRE(put_limit("lg:batch", "rolling", 200) == 0);
    static struct loadgen_config config;
    static struct loadgen_report report;
    loadgen_config_defaults(&config);
    config.connections = 2;
    config.mode = LOADGEN_BATCH;
    config.batch_size = 64;
    config.key_count = 1;
    config.keys[0] = "lg:batch";
    config.amounts[0] = 1;
    REQUIRE(run(&config, &report) == 0);
    CHECK(report.requests > 0);
    CHECK_EQ_U64(report.errors, 0);
    CHECK_EQ_U64(report.reserves, report.requests * 64);
    uint64_t fit = report.reserves < 200 ? report.reserves : 200;
    CHECK_EQ_U64(report.allowed, fit);
    CHECK_EQ_U64(report.allowed + report.denied, report.reserves);
    CHECK_EQ_U64(reserved_of("lg:batch"), fit);
}

static void test_reserve_complete_frees_the_slots(void)
{
    REQUIRE(put_limit("lg:slots", "concurrency", 2) == 0);
    static struct loadgen_config config;
    static struct loadgen_report report;
    loadgen_config_defaults(&config);
    config.connections = 4;
    config.mode = LOADGEN_RESERVE_COMPLETE;
    config.key_count = 1;
    config.keys[0] = "lg:slots";
    config.amounts[0] = 1;
    REQUIRE(run(&config, &report) == 0);
    CHECK_EQ_U64(report.errors, 0);
    /* Two slots, but completes free them: far more than two get through. */
    CHECK(report.allowed > 100);
    CHECK(report.completes + config.connections >= report.allowed);
    CHECK_EQ_U64(report.requests, report.reserves + report.completes);
    CHECK(reserved_of("lg:slots") == report.allowed - report.completes);
}

static void test_unreachable_server_is_an_error(void)
{
    static struct loadgen_config config;
    static struct loadgen_report report;
    loadgen_config_defaults(&config);
    config.connections = 1;
    config.key_count = 1;
    config.keys[0] = "x";
    config.amounts[0] = 1;
    loadgen_config_url(&config, "http://127.0.0.1:1");
    char error[256];
    CHECK_EQ_I64(loadgen_run(&config, &report, error, sizeof(error)), -1);
    CHECK(strstr(error, "cannot connect") != NULL);
}

int main(int argc, char **argv)
{
    RUN(test_histogram_buckets_keep_precision, "histogram buckets are within 1/64 of the value");
    RUN(test_histogram_percentiles, "percentiles, max and merge of the histogram are right");
    RUN(test_url_parsing, "bench takes host and port from http:// URLs only");
    RUN(test_unreachable_server_is_an_error, "a server that cannot be reached fails the run");
    if (server_process_start(&server, server_binary(argc, argv), "memory", NULL) != 0 ||
        llmlimit_client_new(server.url, NULL, NULL, &client) != 0)
        return 1;
    RUN(test_reserve_counts_match_the_server,
        "reserve mode counts exactly the capacity as allowed, as the server holds");
    RUN(test_batch_counts_match_the_server,
        "batch mode counts 64 decisions per request, allowed equal to the capacity");
    RUN(test_reserve_complete_frees_the_slots,
        "reserve-complete completes each allowed lease, freeing concurrency slots");
    llmlimit_client_free(client);
    server_process_stop(&server);
    return test_summary();
}
