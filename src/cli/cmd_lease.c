/* llmlimit reserve / complete / release: one lease by hand, with the retry
 * rules of libllmlimit (reserve retries unknown outcomes with the same
 * lease id; --wait waits out capacity denials like llmlimit_acquire). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char reserve_usage[] =
    "usage: llmlimit reserve [--lease-id ID] [--caller C] [--wait] [--timeout-ms T]\n"
    "                        KEY=AMOUNT...\n"
    "Reserves AMOUNT on every KEY, all or nothing, and prints the lease id and the\n"
    "answer. Without --lease-id a UUIDv7 is generated. --wait retries capacity\n"
    "denials with new lease ids until allowed or the timeout (default 10000 ms).\n"
    "Exit status 1 when denied.\n";

static const char complete_usage[] =
    "usage: llmlimit complete [--timeout-ms T] LEASE_ID [KEY=ACTUAL...]\n"
    "Reconciles a lease with what the call really used; keys left out settle at\n"
    "their reserved amount.\n";

static const char release_usage[] = "usage: llmlimit release [--timeout-ms T] LEASE_ID\n"
                                    "Frees every hold of a lease whose call was never made.\n";

static json_t *reserve_json(const struct llmlimit_reserve_request *request,
                            const struct llmlimit_reserve_result *result)
{
    /* denied_mask has a bit per requirement. */
    assert(request->requirement_count <= 64);
    json_t *denied = json_array();
    for (size_t i = 0; i < request->requirement_count; i++) {
        if (result->denied_mask & (UINT64_C(1) << i))
            json_array_append_new(denied, json_string(request->requirements[i].key));
    }
    return json_pack("{s:s,s:b,s:I,s:I,s:I,s:s,s:o}", "lease_id", result->lease_id, "allowed",
                     result->allowed, "retry_after_ms", (json_int_t)result->retry_after_ms,
                     "reserved_at_unix_ms", (json_int_t)result->reserved_at_unix_ms,
                     "expires_at_unix_ms", (json_int_t)result->expires_at_unix_ms, "error",
                     result->error, "denied_keys", denied);
}

struct reserve_args {
    struct llmlimit_reserve_request request;
    struct llmlimit_requirement requirements[LLMLIMIT_REQUIREMENTS_MAX];
    bool wait;
    int64_t timeout_ms;
};

static int reserve_parse(const struct cli *cli, int argc, char **argv, struct reserve_args *args)
{
    memset(args, 0, sizeof(*args));
    args->request.requirements = args->requirements;
    for (int i = 1; i < argc; i++) {
        const char *value;
        int matched;
        if ((matched = cli_flag(argc, argv, &i, "--lease-id", &value)) == 1)
            args->request.lease_id = value;
        else if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--caller", &value)) == 1)
            args->request.caller = value;
        else if (matched == 0 &&
                 (matched = cli_flag(argc, argv, &i, "--timeout-ms", &value)) == 1) {
            if (cli_parse_i64(value, &args->timeout_ms) != 0)
                return cli_usage_error(cli, "--timeout-ms: want milliseconds");
        } else if (matched == 0 && strcmp(argv[i], "--wait") == 0) {
            args->wait = true;
            matched = 1;
        }
        if (matched < 0)
            return cli_usage_error(cli, "%s needs a value", argv[i]);
        if (matched == 1)
            continue;
        if (args->request.requirement_count == LLMLIMIT_REQUIREMENTS_MAX)
            return cli_usage_error(cli, "at most %d requirements", LLMLIMIT_REQUIREMENTS_MAX);
        struct llmlimit_requirement *requirement =
            &args->requirements[args->request.requirement_count++];
        if (cli_parse_key_amount(argv[i], &requirement->key, &requirement->amount) != 0 ||
            requirement->amount == 0)
            return cli_usage_error(cli, "want KEY=AMOUNT with AMOUNT >= 1, not \"%s\"", argv[i]);
    }
    if (args->request.requirement_count == 0)
        return cli_usage_error(cli, "want at least one KEY=AMOUNT");
    assert(args->request.requirement_count <= LLMLIMIT_REQUIREMENTS_MAX);
    return EXIT_OK;
}

int cmd_reserve(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, reserve_usage))
        return EXIT_OK;
    struct reserve_args args;
    int rc = reserve_parse(cli, argc, argv, &args);
    struct llmlimit_client *client = NULL;
    if (rc == EXIT_OK)
        rc = cli_client(cli, TOKEN_ROLE_CLIENT, &client);
    if (rc != EXIT_OK)
        return rc;
    struct llmlimit_reserve_result result;
    struct llmlimit_status status;
    int error = args.wait
                    ? llmlimit_acquire(client, &args.request, args.timeout_ms, &result, &status)
                    : llmlimit_reserve(client, &args.request, args.timeout_ms, &result, &status);
    llmlimit_client_free(client);
    /* A definitive denial (also the last one before an acquire's deadline)
     * is an answer to print, not a failure. */
    bool answered = error == 0 || error == LLMLIMIT_ERR_REJECTED ||
                    (error == LLMLIMIT_ERR_DEADLINE && result.http_status == 200);
    if (!answered)
        return cli_fail(cli, "reserve", error, &status);
    cli_print_json(cli, reserve_json(&args.request, &result));
    return result.allowed ? EXIT_OK : EXIT_DENIED;
}

/* Takes "--timeout-ms T" out of the arguments; the rest stay in order. */
static int timeout_extract(const struct cli *cli, int *argc, char **argv, int64_t *timeout_ms)
{
    int kept = 1;
    *timeout_ms = 0;
    for (int i = 1; i < *argc; i++) {
        const char *value;
        int matched = cli_flag(*argc, argv, &i, "--timeout-ms", &value);
        if (matched < 0 || (matched == 1 && cli_parse_i64(value, timeout_ms) != 0))
            return cli_usage_error(cli, "--timeout-ms: want milliseconds");
        if (matched == 0) {
            if (strncmp(argv[i], "--", 2) == 0)
                return cli_usage_error(cli, "unknown option \"%s\"", argv[i]);
            argv[kept++] = argv[i];
        }
    }
    assert(kept <= *argc);
    *argc = kept;
    return EXIT_OK;
}

int cmd_complete(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, complete_usage))
        return EXIT_OK;
    int64_t timeout_ms;
    int rc = timeout_extract(cli, &argc, argv, &timeout_ms);
    if (rc != EXIT_OK)
        return rc;
    if (argc < 2)
        return cli_usage_error(cli, "want LEASE_ID [KEY=ACTUAL...]");
    if (argc - 2 > LLMLIMIT_REQUIREMENTS_MAX)
        return cli_usage_error(cli, "at most %d actuals", LLMLIMIT_REQUIREMENTS_MAX);
    struct llmlimit_actual actuals[LLMLIMIT_REQUIREMENTS_MAX];
    struct llmlimit_complete_request request = {.lease_id = argv[1], .actuals = actuals};
    for (int i = 2; i < argc; i++) {
        struct llmlimit_actual *actual = &actuals[request.actual_count++];
        if (cli_parse_key_amount(argv[i], &actual->key, &actual->actual_amount) != 0)
            return cli_usage_error(cli, "want KEY=ACTUAL, not \"%s\"", argv[i]);
    }
    assert(request.actual_count == (size_t)(argc - 2));
    struct llmlimit_client *client;
    if ((rc = cli_client(cli, TOKEN_ROLE_CLIENT, &client)) != EXIT_OK)
        return rc;
    struct llmlimit_complete_result result;
    struct llmlimit_status status;
    int error = llmlimit_complete(client, &request, timeout_ms, &result, &status);
    llmlimit_client_free(client);
    if (error != 0) {
        llmlimit_complete_result_clear(&result);
        return cli_fail(cli, request.lease_id, error, &status);
    }
    json_t *warnings = json_array();
    for (size_t i = 0; i < result.warning_count; i++)
        json_array_append_new(warnings, json_string(result.warnings[i]));
    cli_print_json(cli, json_pack("{s:b,s:b,s:o}", "ok", 1, "reconciled", result.reconciled,
                                  "warnings", warnings));
    llmlimit_complete_result_clear(&result);
    return EXIT_OK;
}

int cmd_release(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, release_usage))
        return EXIT_OK;
    int64_t timeout_ms;
    int rc = timeout_extract(cli, &argc, argv, &timeout_ms);
    if (rc != EXIT_OK)
        return rc;
    if (argc != 2)
        return cli_usage_error(cli, "want exactly one LEASE_ID");
    struct llmlimit_client *client;
    if ((rc = cli_client(cli, TOKEN_ROLE_CLIENT, &client)) != EXIT_OK)
        return rc;
    struct llmlimit_status status;
    int error = llmlimit_release(client, argv[1], timeout_ms, &status);
    llmlimit_client_free(client);
    if (error != 0)
        return cli_fail(cli, argv[1], error, &status);
    cli_print_json(cli, json_pack("{s:b}", "ok", 1));
    return EXIT_OK;
}
