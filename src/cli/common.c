/* Helpers every llmlimit subcommand uses: opening the client with the right
 * token, argument parsing, JSON output and the mapping of errors to exit
 * codes. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/flag.h"

char *cli_token_from_file(const char *path)
{
    assert(path != NULL);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        fprintf(stderr, "llmlimit: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *token = malloc(CLI_TOKEN_FILE_BYTES_MAX + 1);
    size_t length = token != NULL ? fread(token, 1, CLI_TOKEN_FILE_BYTES_MAX + 1, file) : 0;
    fclose(file);
    if (token == NULL || length > CLI_TOKEN_FILE_BYTES_MAX) {
        fprintf(stderr, "llmlimit: %s: not a token file (over %d bytes)\n", path,
                CLI_TOKEN_FILE_BYTES_MAX);
        free(token);
        return NULL;
    }
    token[length] = '\0';
    token[strcspn(token, "\r\n")] = '\0';
    length = strlen(token);
    while (length > 0 && (token[length - 1] == ' ' || token[length - 1] == '\t'))
        token[--length] = '\0';
    assert(length <= CLI_TOKEN_FILE_BYTES_MAX);
    assert(strchr(token, '\n') == NULL); /* one line: it goes into a header */
    return token;
}

static const char *token_from_environment(enum token_role role)
{
    const char *client = getenv("LLMLIMIT_TOKEN");
    const char *admin = getenv("LLMLIMIT_ADMIN_TOKEN");
    if (client != NULL && client[0] == '\0')
        client = NULL;
    if (admin != NULL && admin[0] == '\0')
        admin = NULL;
    if (role == TOKEN_ROLE_ADMIN)
        return admin != NULL ? admin : client;
    return client != NULL ? client : admin;
}

int cli_client(const struct cli *cli, enum token_role role, struct llmlimit_client **out)
{
    assert(cli->url != NULL); /* the flag, $LLMLIMIT_URL or the default */
    char *token_owned = NULL;
    const char *token;
    if (cli->token_file != NULL) {
        token_owned = cli_token_from_file(cli->token_file);
        if (token_owned == NULL)
            return EXIT_USAGE;
        token = token_owned;
    } else {
        token = token_from_environment(role);
    }
    int rc = llmlimit_client_new(cli->url, token, NULL, out);
    free(token_owned);
    if (rc == LLMLIMIT_ERR_INVALID_ARGUMENT)
        return cli_usage_error(cli, "bad --url or token (want http://HOST:PORT): %s", cli->url);
    if (rc != 0)
        return cli_fail(cli, "client", rc, NULL);
    assert(*out != NULL);
    return EXIT_OK;
}

void cli_print_json(const struct cli *cli, json_t *value)
{
    assert(value != NULL); /* json_pack of a format this program wrote */
    size_t flags = JSON_PRESERVE_ORDER;
    if (cli->json_style == CLI_JSON_COMPACT)
        flags |= JSON_COMPACT;
    else if (cli->json_style == CLI_JSON_PRETTY)
        flags |= JSON_INDENT(2);
    json_dumpf(value, stdout, flags);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(value);
}

static int exit_code_of(int error)
{
    switch (error) {
    case LLMLIMIT_OK:
        return EXIT_OK;
    case LLMLIMIT_ERR_INVALID_ARGUMENT:
    case LLMLIMIT_ERR_BAD_REQUEST:
    case LLMLIMIT_ERR_TOO_LARGE:
        return EXIT_USAGE;
    default:
        return EXIT_SERVER;
    }
}

int cli_fail(const struct cli *cli, const char *what, int error,
             const struct llmlimit_status *status)
{
    assert(error != LLMLIMIT_OK); /* only failures are reported */
    assert(what != NULL);
    fprintf(stderr, "llmlimit %s: %s: %s", cli->command, what, llmlimit_strerror(error));
    if (status != NULL && status->http_status != 0)
        fprintf(stderr, " (HTTP %d%s%s)", status->http_status, status->error[0] ? ": " : "",
                status->error);
    else if (status != NULL && status->error[0] != '\0')
        fprintf(stderr, " (%s)", status->error);
    fputc('\n', stderr);
    return exit_code_of(error);
}

int cli_usage_error(const struct cli *cli, const char *format, ...)
{
    assert(cli->command != NULL);
    va_list args;
    va_start(args, format);
    fprintf(stderr, "llmlimit %s: ", cli->command);
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n(see llmlimit %s --help)\n", cli->command);
    va_end(args);
    return EXIT_USAGE;
}

int cli_parse_u64(const char *text, uint64_t *out)
{
    return text != NULL ? flag_parse_u64(text, out) : -1;
}

int cli_parse_u32(const char *text, uint32_t *out)
{
    uint64_t value;
    if (cli_parse_u64(text, &value) != 0 || value > UINT32_MAX)
        return -1;
    *out = (uint32_t)value;
    return 0;
}

int cli_parse_i64(const char *text, int64_t *out)
{
    uint64_t value;
    if (cli_parse_u64(text, &value) != 0 || value > INT64_MAX)
        return -1;
    *out = (int64_t)value;
    return 0;
}

int cli_parse_key_amount(char *text, const char **key, uint64_t *amount)
{
    assert(text != NULL);
    char *equals = strrchr(text, '=');
    if (equals == NULL || equals == text)
        return -1;
    *equals = '\0';
    *key = text;
    assert((*key)[0] != '\0'); /* the '=' was not first */
    return cli_parse_u64(equals + 1, amount);
}

int cli_flag(int argc, char **argv, int *index, const char *name, const char **value)
{
    assert(*index >= 1);
    assert(*index < argc);
    assert(strncmp(name, "--", 2) == 0); /* flags are long options */
    const char *arg = argv[*index];
    size_t length = strlen(name);
    if (strncmp(arg, name, length) != 0)
        return 0;
    if (arg[length] == '=') {
        *value = arg + length + 1;
        return 1;
    }
    if (arg[length] != '\0')
        return 0;
    if (*index + 1 >= argc)
        return -1;
    *value = argv[++*index];
    assert(*value != NULL); /* argv[argc] is the only NULL */
    return 1;
}

bool cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

bool cli_wants_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(usage, stdout);
            return true;
        }
    }
    return false;
}
