/* llmlimit usage / events: what a limit holds now (or in a past budget
 * period), and the audit log of the backends that keep one. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define EVENTS_PATH_LENGTH_MAX (128 + 3 * (LLMLIMIT_KEY_LENGTH_MAX + LLMLIMIT_LEASE_ID_LENGTH_MAX))

static const char usage_usage[] =
    "usage: llmlimit usage [--at-unix-ms T] KEY\n"
    "Prints capacity, reserved, used, debt and available of a limit; for a budget,\n"
    "of the period containing T (default now).\n";

static const char events_usage[] =
    "usage: llmlimit events [--key K] [--lease-id L] [--since N] [--limit N]\n"
    "Prints audit-log events (backends with an audit log: sqlite), oldest first,\n"
    "with id > N; pass the last id seen as --since to page on.\n";

int cmd_usage(const struct cli *cli, int argc, char **argv)
{
    const char *key = NULL;
    int64_t at_unix_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *value;
        int matched;
        if (cli_is_help(argv[i])) {
            fputs(usage_usage, stdout);
            return EXIT_OK;
        }
        if ((matched = cli_flag(argc, argv, &i, "--at-unix-ms", &value)) != 0) {
            if (matched < 0 || cli_parse_i64(value, &at_unix_ms) != 0)
                return cli_usage_error(cli, "--at-unix-ms: want unix milliseconds");
        } else if (key == NULL) {
            key = argv[i];
        } else {
            return cli_usage_error(cli, "want exactly one KEY");
        }
    }
    if (key == NULL)
        return cli_usage_error(cli, "want a KEY");
    assert(at_unix_ms >= 0);
    struct llmlimit_client *client;
    int rc = cli_client(cli, TOKEN_ROLE_CLIENT, &client);
    if (rc != EXIT_OK)
        return rc;
    struct llmlimit_usage usage;
    struct llmlimit_status status;
    int error = llmlimit_usage(client, key, at_unix_ms, &usage, &status);
    llmlimit_client_free(client);
    if (error != 0)
        return cli_fail(cli, key, error, &status);
    cli_print_json(
        cli, json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "key", usage.key, "kind",
                       usage.kind, "status", usage.status, "capacity", (json_int_t)usage.capacity,
                       "reserved", (json_int_t)usage.reserved, "used", (json_int_t)usage.used,
                       "debt", (json_int_t)usage.debt, "available", (json_int_t)usage.available,
                       "period_start_unix_ms", (json_int_t)usage.period_start_unix_ms,
                       "period_end_unix_ms", (json_int_t)usage.period_end_unix_ms));
    return EXIT_OK;
}

/* Appends "&name=<percent-encoded value>" (the first one with '?'). */
static void query_add(char *path, size_t size, const char *name, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t length = strlen(path);
    length += (size_t)snprintf(path + length, size - length, "%c%s=", strchr(path, '?') ? '&' : '?',
                               name);
    assert(length < size);
    const char *p = value;
    for (; *p != '\0' && length + 4 < size; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            path[length++] = (char)c;
        } else {
            path[length++] = '%';
            path[length++] = hex[c >> 4];
            path[length++] = hex[c & 15];
        }
    }
    assert(*p == '\0'); /* EVENTS_PATH_LENGTH_MAX has room for every value whole */
    path[length] = '\0';
}

static int events_path(const struct cli *cli, int argc, char **argv, char *path, size_t size)
{
    static const char *const flags[] = {"--key", "--lease-id", "--since", "--limit"};
    static const char *const names[] = {"key", "lease_id", "since", "limit"};
    assert(size == EVENTS_PATH_LENGTH_MAX);
    snprintf(path, size, "/v1/events");
    for (int i = 1; i < argc; i++) {
        const char *value;
        int matched = 0;
        for (size_t f = 0; f < 4 && matched == 0; f++) {
            matched = cli_flag(argc, argv, &i, flags[f], &value);
            if (matched < 0)
                return cli_usage_error(cli, "%s needs a value", flags[f]);
            if (matched == 0)
                continue;
            uint64_t number;
            if (f >= 2 && cli_parse_u64(value, &number) != 0)
                return cli_usage_error(cli, "%s: want a number", flags[f]);
            if (strlen(value) > LLMLIMIT_KEY_LENGTH_MAX)
                return cli_usage_error(cli, "%s: too long", flags[f]);
            query_add(path, size, names[f], value);
        }
        if (matched == 0)
            return cli_usage_error(cli, "unknown argument \"%s\"", argv[i]);
    }
    return EXIT_OK;
}

int cmd_events(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, events_usage))
        return EXIT_OK;
    char path[EVENTS_PATH_LENGTH_MAX];
    int rc = events_path(cli, argc, argv, path, sizeof(path));
    struct llmlimit_client *client = NULL;
    if (rc == EXIT_OK)
        rc = cli_client(cli, TOKEN_ROLE_CLIENT, &client);
    if (rc != EXIT_OK)
        return rc;
    char *body = NULL;
    struct llmlimit_status status;
    int error = llmlimit_request(client, "GET", path, NULL, 0, &body, &status);
    llmlimit_client_free(client);
    json_t *json = body != NULL ? json_loads(body, 0, NULL) : NULL;
    llmlimit_free(body);
    if (error == 0 && json == NULL)
        error = LLMLIMIT_ERR_PROTOCOL;
    if (error != 0) {
        json_decref(json);
        return cli_fail(cli, "events", error, &status);
    }
    cli_print_json(cli, json);
    return EXIT_OK;
}
