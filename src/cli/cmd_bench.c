/* llmlimit bench: drives the load generator (src/loadgen/loadgen.h) against a
 * running llmlimitd and prints its figures. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loadgen.h"

static const char bench_usage[] =
    "usage: llmlimit bench [--connections N] [--threads N] [--duration S]\n"
    "                      [--mode reserve|reserve-complete|batch] [--batch-size N]\n"
    "                      --keys K1,K2,... [--amounts A1,A2,...] [--ids uuidv7|random]\n"
    "                      [--json] [--quiet]\n"
    "       llmlimit bench --mode post --path PATH --body-file FILE [--header \"Name: value\"]...\n"
    "                      [same options, no keys]\n"
    "Raw HTTP/1.1 over N keep-alive connections (default 50, one thread, 10 s).\n"
    "Every reserve asks AMOUNT (default 1) of every key, with a lease id unique to\n"
    "the request: a UUIDv7 (time-ordered, as the llmlimit clients make them) or,\n"
    "with --ids random, random bits. reserve-complete completes each allowed lease\n"
    "at the amounts reserved. batch sends --batch-size (default 64) reserves per request.\n"
    "Prints requests/s each second on stderr (--quiet: not), then the totals\n"
    "(--json: one JSON object): requests/s, reservations/s, allowed, denied,\n"
    "errors, latency p50/p99/p99.9/max. Plain http:// only.\n"
    "post sends FILE's bytes (at most 1 MiB, JSON) to PATH in every request, with the\n"
    "token as a bearer (a gateway's virtual key): a 200 counts as allowed, whether its\n"
    "answer has a Content-Length or is chunked (a stream read to its end).\n";

/* Splits a comma list in place into at most max items. */
static int split_list(char *text, const char **items, uint32_t max, uint32_t *count)
{
    assert(text != NULL);
    assert(max >= 1);
    *count = 0;
    for (char *item = strtok(text, ","); item != NULL; item = strtok(NULL, ",")) {
        if (*count == max)
            return -1;
        items[(*count)++] = item;
    }
    assert(*count <= max);
    return *count > 0 ? 0 : -1;
}

static int amounts_parse(char *text, struct loadgen_config *config)
{
    const char *items[LOADGEN_KEYS_MAX];
    uint32_t count;
    if (split_list(text, items, LOADGEN_KEYS_MAX, &count) != 0 || count != config->key_count)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        if (cli_parse_u64(items[i], &config->amounts[i]) != 0 || config->amounts[i] == 0 ||
            config->amounts[i] > LLMLIMIT_AMOUNT_MAX)
            return -1;
    }
    return 0;
}

static int number_flag(const struct cli *cli, const char *name, const char *value, uint32_t min,
                       uint32_t max, uint32_t *out)
{
    assert(min <= max);
    if (cli_parse_u32(value, out) != 0 || *out < min || *out > max)
        return cli_usage_error(cli, "%s: want %u..%u", name, min, max);
    return EXIT_OK;
}

/* The whole file at path into a new buffer (the caller frees it). */
static char *body_load(const struct cli *cli, const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    char *body = malloc(LOADGEN_POST_BODY_BYTES_MAX + 1);
    size_t n =
        file != NULL && body != NULL ? fread(body, 1, LOADGEN_POST_BODY_BYTES_MAX + 1, file) : 0;
    bool failed = file == NULL || body == NULL || ferror(file);
    if (file != NULL)
        fclose(file);
    if (failed || n == 0 || n > LOADGEN_POST_BODY_BYTES_MAX) {
        free(body);
        cli_usage_error(cli, "--body-file %s: cannot read it, empty or larger than 1 MiB", path);
        return NULL;
    }
    *length = n;
    return body;
}

/* post: its path and body; no keys. */
static int post_parse(const struct cli *cli, const char *path, const char *body_file, bool has_keys,
                      struct loadgen_config *config, char **body_owned)
{
    if (has_keys)
        return cli_usage_error(cli, "--mode post takes no --keys or --amounts");
    if (config->threads > config->connections)
        return cli_usage_error(cli, "--threads: at most one per connection");
    if (path == NULL || path[0] != '/' || strlen(path) > 1024 || strpbrk(path, " \r\n") != NULL)
        return cli_usage_error(cli, "--path: want a path starting with '/', at most 1024 bytes");
    if (body_file == NULL)
        return cli_usage_error(cli, "--body-file: required with --mode post");
    *body_owned = body_load(cli, body_file, &config->post_body_length);
    if (*body_owned == NULL)
        return EXIT_USAGE;
    config->post_path = path;
    config->post_body = *body_owned;
    return EXIT_OK;
}

/* --header "Name: value": a name of letters, digits and '-', printable
 * ASCII, appended to config->headers within LOADGEN_HEADERS_BYTES_MAX. */
static int header_add(const struct cli *cli, const char *text, struct loadgen_config *config)
{
    size_t name = strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-");
    bool printable = true;
    for (const char *c = text; *c != '\0' && printable; c++)
        printable = *c >= 0x20 && *c <= 0x7e;
    size_t used = strlen(config->headers), length = strlen(text);
    if (name == 0 || text[name] != ':' || !printable)
        return cli_usage_error(cli, "--header: want \"Name: value\" in printable ASCII");
    if (used + length + 2 > LOADGEN_HEADERS_BYTES_MAX)
        return cli_usage_error(cli, "--header: at most %d bytes of headers",
                               LOADGEN_HEADERS_BYTES_MAX);
    memcpy(config->headers + used, text, length);
    memcpy(config->headers + used + length, "\r\n", 3);
    return EXIT_OK;
}

static int bench_parse(const struct cli *cli, int argc, char **argv, struct loadgen_config *config,
                       bool *json, char **body_owned)
{
    char *keys = NULL, *amounts = NULL;
    const char *path = NULL, *body_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *value = NULL;
        int rc = EXIT_OK, matched;
        if ((matched = cli_flag(argc, argv, &i, "--connections", &value)) == 1)
            rc = number_flag(cli, "--connections", value, 1, LOADGEN_CONNECTIONS_MAX,
                             &config->connections);
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--threads", &value)) == 1)
            rc = number_flag(cli, "--threads", value, 1, LOADGEN_THREADS_MAX, &config->threads);
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--duration", &value)) == 1)
            rc = number_flag(cli, "--duration", value, 1, LOADGEN_DURATION_SECONDS_MAX,
                             &config->duration_seconds);
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--batch-size", &value)) == 1)
            rc = number_flag(cli, "--batch-size", value, 1, LOADGEN_BATCH_SIZE_MAX,
                             &config->batch_size);
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--mode", &value)) == 1) {
            if (loadgen_mode_parse(value, &config->mode) != 0)
                rc = cli_usage_error(cli, "--mode: want reserve, reserve-complete, batch or post");
        } else if (!matched && (matched = cli_flag(argc, argv, &i, "--ids", &value)) == 1) {
            if (strcmp(value, "uuidv7") == 0)
                config->ids = LOADGEN_IDS_UUIDV7;
            else if (strcmp(value, "random") == 0)
                config->ids = LOADGEN_IDS_RANDOM;
            else
                rc = cli_usage_error(cli, "--ids: want uuidv7 or random");
        } else if (!matched && (matched = cli_flag(argc, argv, &i, "--keys", &value)) == 1)
            keys = (char *)value;
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--amounts", &value)) == 1)
            amounts = (char *)value;
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--path", &value)) == 1)
            path = value;
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--body-file", &value)) == 1)
            body_file = value;
        else if (!matched && (matched = cli_flag(argc, argv, &i, "--header", &value)) == 1)
            rc = header_add(cli, value, config);
        else if (!matched && strcmp(argv[i], "--json") == 0)
            matched = 1, *json = true;
        else if (!matched && strcmp(argv[i], "--quiet") == 0)
            matched = 1, config->progress = false;
        if (matched < 0)
            return cli_usage_error(cli, "%s needs a value", argv[i]);
        if (matched == 0)
            return cli_usage_error(cli, "unknown argument \"%s\"", argv[i]);
        if (rc != EXIT_OK)
            return rc;
    }
    if (config->mode == LOADGEN_POST)
        return post_parse(cli, path, body_file, keys != NULL || amounts != NULL, config,
                          body_owned);
    if (path != NULL || body_file != NULL)
        return cli_usage_error(cli, "--path and --body-file go with --mode post");
    if (keys == NULL || split_list(keys, config->keys, LOADGEN_KEYS_MAX, &config->key_count) != 0)
        return cli_usage_error(cli, "--keys: want 1..%d comma-separated keys", LOADGEN_KEYS_MAX);
    for (uint32_t i = 0; i < config->key_count; i++)
        config->amounts[i] = 1;
    if (amounts != NULL && amounts_parse(amounts, config) != 0)
        return cli_usage_error(cli, "--amounts: want one amount >= 1 per key");
    if (config->threads > config->connections)
        return cli_usage_error(cli, "--threads: at most one per connection");
    if (config->mode == LOADGEN_BATCH &&
        (uint64_t)config->batch_size * config->key_count > LLMLIMIT_BATCH_REQUIREMENTS_MAX)
        return cli_usage_error(cli, "--batch-size x keys: at most %d requirements per batch",
                               LLMLIMIT_BATCH_REQUIREMENTS_MAX);
    assert(config->key_count >= 1);
    assert(config->key_count <= LOADGEN_KEYS_MAX);
    return EXIT_OK;
}

static const char *bench_token(const struct cli *cli, char **owned)
{
    *owned = NULL;
    if (cli->token_file != NULL)
        return *owned = cli_token_from_file(cli->token_file);
    const char *token = getenv("LLMLIMIT_TOKEN");
    if (token == NULL || token[0] == '\0')
        token = getenv("LLMLIMIT_ADMIN_TOKEN");
    return token != NULL && token[0] != '\0' ? token : NULL;
}

/* Runs the load and prints its figures. */
static int bench_execute(const struct cli *cli, struct loadgen_config *config, bool json)
{
    int rc;
    if (loadgen_config_url(config, cli->url) != 0)
        return cli_usage_error(cli, "--url: want http://HOST:PORT, not %s", cli->url);
    char *token_owned;
    config->token = bench_token(cli, &token_owned);
    if (cli->token_file != NULL && config->token == NULL)
        return EXIT_USAGE;
    if (config->token != NULL && strlen(config->token) > LOADGEN_TOKEN_LENGTH_MAX) {
        free(token_owned);
        return cli_usage_error(cli, "token too long");
    }
    struct loadgen_report *report = malloc(sizeof(*report));
    char error[256];
    if (report == NULL || loadgen_run(config, report, error, sizeof(error)) != 0) {
        fprintf(stderr, "llmlimit bench: %s\n", report == NULL ? "out of memory" : error);
        free(report);
        free(token_owned);
        return EXIT_SERVER;
    }
    if (json)
        loadgen_report_print_json(stdout, config, report);
    else
        loadgen_report_print(stdout, config, report);
    rc = report->requests > 0 && report->errors == 0 ? EXIT_OK : EXIT_SERVER;
    free(report);
    free(token_owned);
    return rc;
}

int cmd_bench(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, bench_usage))
        return EXIT_OK;
    struct loadgen_config config;
    loadgen_config_defaults(&config);
    bool json = false;
    char *body_owned = NULL;
    int rc = bench_parse(cli, argc, argv, &config, &json, &body_owned);
    if (rc == EXIT_OK)
        rc = bench_execute(cli, &config, json);
    free(body_owned);
    return rc;
}
