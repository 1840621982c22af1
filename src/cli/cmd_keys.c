/* llmlimit keys create|list|show|update|block|unblock|revoke|rotate: the
 * gateway's keys through the Keys API (docs/api.md "Keys"). Each prints the
 * server's answer as one JSON value; create and rotate print the secret,
 * which the server shows in that answer only (docs/cli.md). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define KEYS_PATH_LENGTH_MAX 2048 /* a route with its query: every value fits whole */
#define KEYS_ARGUMENT_LENGTH_MAX 256

static const char keys_usage[] =
    "usage: llmlimit keys create --caller C --team T [--model M]... [--expires-at-unix-ms N]\n"
    "                            [--mcp-server S]... [--no-mcp-servers]\n"
    "                            [--max-wait-seconds N] [--priority-floor N]\n"
    "                            [--metadata NAME=VALUE]... [--limits-file FILE]\n"
    "       (FILE: a JSON array of limit definitions made with the key, all or none;\n"
    "        - reads stdin)\n"
    "       llmlimit keys list [--team T] [--caller C] [--status S] [--limit N] [--cursor C]\n"
    "       llmlimit keys show ID\n"
    "       llmlimit keys update ID [--model M]... [--all-models] [--expires-at-unix-ms N]\n"
    "                            [--mcp-server S]... [--no-mcp-servers] [--all-mcp-servers]\n"
    "                            [--no-expiry] [--max-wait-seconds N] [--priority-floor N]\n"
    "                            [--metadata NAME=VALUE]...\n"
    "       llmlimit keys block ID | unblock ID | revoke ID\n"
    "       llmlimit keys rotate ID [--grace-seconds N]\n"
    "create and rotate print the secret: it is shown this once. Needs the admin token\n"
    "($LLMLIMIT_ADMIN_TOKEN or --token-file).\n";

/* Sends method path body (NULL: none); prints the answer. */
static int send(const struct cli *cli, const char *what, const char *method, const char *path,
                json_t *body)
{
    struct llmlimit_client *client = NULL;
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (body != NULL && text == NULL)
        return cli_usage_error(cli, "out of memory");
    int rc = cli_client(cli, TOKEN_ROLE_ADMIN, &client);
    if (rc != EXIT_OK) {
        free(text);
        return rc;
    }
    char *answer = NULL;
    struct llmlimit_status status;
    int error = llmlimit_request(client, method, path, text, 0, &answer, &status);
    llmlimit_client_free(client);
    free(text);
    json_t *json = answer != NULL ? json_loads(answer, 0, NULL) : NULL;
    llmlimit_free(answer);
    if (error == 0 && json == NULL)
        error = LLMLIMIT_ERR_PROTOCOL;
    if (error != 0) {
        json_decref(json);
        return cli_fail(cli, what, error, &status);
    }
    cli_print_json(cli, json);
    return EXIT_OK;
}

/* An id as it goes into a path: [a-z0-9_] only (what the server makes). */
static int key_path(const struct cli *cli, const char *id, const char *suffix, char *path,
                    size_t size)
{
    size_t length = strlen(id);
    if (length == 0 || length > 64 || strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789_") != length)
        return cli_usage_error(cli, "%s: not a key id", id);
    snprintf(path, size, "/v1/admin/keys/%s%s", id, suffix);
    return EXIT_OK;
}

/* --metadata NAME=VALUE into object. */
static int metadata_add(const struct cli *cli, json_t *object, const char *text)
{
    const char *equals = strchr(text, '=');
    if (equals == NULL || equals == text)
        return cli_usage_error(cli, "--metadata: want NAME=VALUE");
    char name[KEYS_ARGUMENT_LENGTH_MAX + 1];
    size_t length = (size_t)(equals - text);
    if (length > KEYS_ARGUMENT_LENGTH_MAX)
        return cli_usage_error(cli, "--metadata: name too long");
    memcpy(name, text, length);
    name[length] = '\0';
    json_t *metadata = json_object_get(object, "metadata");
    if (metadata == NULL) {
        metadata = json_object();
        json_object_set_new(object, "metadata", metadata);
    }
    json_object_set_new(metadata, name, json_string(equals + 1));
    return EXIT_OK;
}

static int limits_add(const struct cli *cli, json_t *object, const char *path)
{
    json_error_t error;
    FILE *file = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (file == NULL)
        return cli_usage_error(cli, "%s: cannot open", path);
    json_t *limits = json_loadf(file, JSON_REJECT_DUPLICATES, &error);
    if (file != stdin)
        fclose(file);
    if (limits == NULL)
        return cli_usage_error(cli, "%s: line %d: %s", path, error.line, error.text);
    if (!json_is_array(limits)) {
        json_decref(limits);
        return cli_usage_error(cli, "%s: want a JSON array of limit definitions", path);
    }
    json_object_set_new(object, "limits", limits);
    return EXIT_OK;
}

/* A flag with a number: 1 matched (set in object), 0 not it, EXIT_USAGE
 * (as -1) on a bad value. */
static int number_flag(const struct cli *cli, int argc, char **argv, int *i, const char *flag,
                       const char *field, json_t *object)
{
    const char *value;
    int matched = cli_flag(argc, argv, i, flag, &value);
    int64_t number;
    if (matched == 0)
        return 0;
    if (matched < 0 || cli_parse_i64(value, &number) != 0 || number < 0) {
        cli_usage_error(cli, "%s: want a non-negative number", flag);
        return -1;
    }
    json_object_set_new(object, field, json_integer((json_int_t)number));
    return 1;
}

/* The fields a create or an update takes from argv[from..]. */
static int fields(const struct cli *cli, int argc, char **argv, int from, bool create,
                  json_t *object)
{
    static const char *const numbers[][2] = {{"--expires-at-unix-ms", "expires_at_unix_ms"},
                                             {"--max-wait-seconds", "max_wait_seconds"},
                                             {"--priority-floor", "priority_floor"}};
    for (int i = from; i < argc; i++) {
        const char *value;
        int matched = 0;
        for (size_t n = 0; n < 3 && matched == 0; n++)
            matched = number_flag(cli, argc, argv, &i, numbers[n][0], numbers[n][1], object);
        if (matched < 0)
            return EXIT_USAGE;
        if (matched > 0)
            continue;
        int rc = EXIT_OK;
        if (create && (matched = cli_flag(argc, argv, &i, "--caller", &value)) == 1)
            json_object_set_new(object, "caller", json_string(value));
        else if (create && matched == 0 &&
                 (matched = cli_flag(argc, argv, &i, "--team", &value)) == 1)
            json_object_set_new(object, "team", json_string(value));
        else if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--model", &value)) == 1) {
            json_t *models = json_object_get(object, "models");
            if (!json_is_array(models))
                json_object_set_new(object, "models", models = json_array());
            json_array_append_new(models, json_string(value));
        } else if (matched == 0 &&
                   (matched = cli_flag(argc, argv, &i, "--mcp-server", &value)) == 1) {
            json_t *servers = json_object_get(object, "mcp_servers");
            if (!json_is_array(servers))
                json_object_set_new(object, "mcp_servers", servers = json_array());
            json_array_append_new(servers, json_string(value));
        } else if (matched == 0 && strcmp(argv[i], "--no-mcp-servers") == 0)
            matched = 1, json_object_set_new(object, "mcp_servers", json_array());
        else if (!create && matched == 0 && strcmp(argv[i], "--all-mcp-servers") == 0)
            matched = 1, json_object_set_new(object, "mcp_servers", json_null());
        else if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--metadata", &value)) == 1)
            rc = metadata_add(cli, object, value);
        else if (create && matched == 0 &&
                 (matched = cli_flag(argc, argv, &i, "--limits-file", &value)) == 1)
            rc = limits_add(cli, object, value);
        else if (!create && matched == 0 && strcmp(argv[i], "--all-models") == 0)
            matched = 1, json_object_set_new(object, "models", json_null());
        else if (!create && matched == 0 && strcmp(argv[i], "--no-expiry") == 0)
            matched = 1, json_object_set_new(object, "expires_at_unix_ms", json_null());
        if (matched < 0)
            return cli_usage_error(cli, "%s needs a value", argv[i]);
        if (matched == 0)
            return cli_usage_error(cli, "unknown argument \"%s\"", argv[i]);
        if (rc != EXIT_OK)
            return rc;
    }
    return EXIT_OK;
}

static int create(const struct cli *cli, int argc, char **argv)
{
    json_t *body = json_object();
    int rc = fields(cli, argc, argv, 1, true, body);
    if (rc == EXIT_OK && (!json_is_string(json_object_get(body, "caller")) ||
                          !json_is_string(json_object_get(body, "team"))))
        rc = cli_usage_error(cli, "create needs --caller and --team");
    if (rc != EXIT_OK) {
        json_decref(body);
        return rc;
    }
    return send(cli, "create", "POST", "/v1/admin/keys", body);
}

static void query_add(char *path, size_t size, const char *name, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t length = strlen(path);
    length += (size_t)snprintf(path + length, size - length, "%c%s=", strchr(path, '?') ? '&' : '?',
                               name);
    for (const char *p = value; *p != '\0' && length + 4 < size; p++) {
        unsigned char c = (unsigned char)*p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '.' || c == '_' || c == '~';
        if (plain) {
            path[length++] = (char)c;
        } else {
            path[length++] = '%';
            path[length++] = hex[c >> 4];
            path[length++] = hex[c & 15];
        }
    }
    path[length] = '\0';
}

static int list(const struct cli *cli, int argc, char **argv)
{
    static const char *const flags[] = {"--team", "--caller", "--status", "--limit", "--cursor"};
    char path[KEYS_PATH_LENGTH_MAX] = "/v1/admin/keys";
    for (int i = 1; i < argc; i++) {
        int matched = 0;
        for (size_t f = 0; f < sizeof flags / sizeof flags[0] && matched == 0; f++) {
            const char *value;
            matched = cli_flag(argc, argv, &i, flags[f], &value);
            if (matched < 0)
                return cli_usage_error(cli, "%s needs a value", flags[f]);
            if (matched == 1 && strlen(value) > KEYS_ARGUMENT_LENGTH_MAX)
                return cli_usage_error(cli, "%s: too long", flags[f]);
            if (matched == 1)
                query_add(path, sizeof path, flags[f] + 2, value);
        }
        if (matched == 0)
            return cli_usage_error(cli, "unknown argument \"%s\"", argv[i]);
    }
    return send(cli, "list", "GET", path, NULL);
}

static int rotate(const struct cli *cli, int argc, char **argv, const char *path)
{
    json_t *body = json_object();
    for (int i = 2; i < argc; i++) {
        int matched = number_flag(cli, argc, argv, &i, "--grace-seconds", "grace_seconds", body);
        if (matched <= 0) {
            json_decref(body);
            return matched < 0 ? EXIT_USAGE
                               : cli_usage_error(cli, "unknown argument \"%s\"", argv[i]);
        }
    }
    return send(cli, "rotate", "POST", path, body);
}

/* show, update, block, unblock, revoke, rotate: argv[1] is the id. */
static int on_one(const struct cli *cli, int argc, char **argv, const char *verb)
{
    if (argc < 2)
        return cli_usage_error(cli, "%s needs a key id", verb);
    char path[KEYS_PATH_LENGTH_MAX];
    bool rotating = strcmp(verb, "rotate") == 0;
    int rc = key_path(cli, argv[1], rotating ? "/rotate" : "", path, sizeof path);
    if (rc != EXIT_OK)
        return rc;
    if (rotating)
        return rotate(cli, argc, argv, path);
    bool simple = strcmp(verb, "update") != 0;
    if (simple && argc > 2)
        return cli_usage_error(cli, "unknown argument \"%s\"", argv[2]);
    if (strcmp(verb, "show") == 0)
        return send(cli, verb, "GET", path, NULL);
    if (strcmp(verb, "revoke") == 0)
        return send(cli, verb, "DELETE", path, NULL);
    json_t *body = json_object();
    if (simple) {
        json_object_set_new(body, "blocked", json_boolean(strcmp(verb, "block") == 0));
        return send(cli, verb, "PATCH", path, body);
    }
    rc = fields(cli, argc, argv, 2, false, body);
    if (rc == EXIT_OK && json_object_size(body) == 0)
        rc = cli_usage_error(cli, "update needs a field to change");
    if (rc != EXIT_OK) {
        json_decref(body);
        return rc;
    }
    return send(cli, verb, "PATCH", path, body);
}

int cmd_keys(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, keys_usage))
        return EXIT_OK;
    if (argc < 2)
        return cli_usage_error(cli, "want a subcommand");
    const char *verb = argv[1];
    if (strcmp(verb, "create") == 0)
        return create(cli, argc - 1, argv + 1);
    if (strcmp(verb, "list") == 0)
        return list(cli, argc - 1, argv + 1);
    static const char *const verbs[] = {"show", "update", "block", "unblock", "revoke", "rotate"};
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        if (strcmp(verb, verbs[i]) == 0)
            return on_one(cli, argc - 1, argv + 1, verb);
    }
    return cli_usage_error(cli, "unknown subcommand \"%s\"", verb);
}
