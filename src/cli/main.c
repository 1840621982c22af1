/* llmlimit: the command line of llmlimit. Admin of limit definitions,
 * reserve/complete/release by hand, usage, the audit log, the `bench`
 * load generator, and the gateway's virtual keys. Global options may stand
 * anywhere before "--". */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: llmlimit [--url URL] [--token-file FILE] [--compact|--pretty] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  limits put|get|list|delete   manage limit definitions (admin token)\n"
    "  reserve KEY=AMOUNT...        reserve capacity on every key, atomically\n"
    "  complete LEASE_ID KEY=ACTUAL...  reconcile a lease with what was used\n"
    "  release LEASE_ID             free a lease whose call was never made\n"
    "  usage KEY                    capacity, reserved, used, debt, available\n"
    "  events                       the audit log (sqlite backend)\n"
    "  bench                        HTTP load generator\n"
    "  gateway new-key|hash-key|check  virtual keys and gateway.json (offline)\n"
    "  keys create|list|show|update|block|unblock|revoke|rotate  the gateway's keys\n"
    "                               through the Keys API (admin token)\n"
    "\n"
    "options:\n"
    "  --url URL          server (default $LLMLIMIT_URL, else " CLI_URL_DEFAULT ")\n"
    "  --token-file FILE  bearer token from a file; without it the token comes from\n"
    "                     $LLMLIMIT_ADMIN_TOKEN (limits, keys) or $LLMLIMIT_TOKEN (others),\n"
    "                     each falling back to the other\n"
    "  --compact          JSON without blanks (answers are one line of JSON each)\n"
    "  --pretty           indented JSON, one member per line\n"
    "  --help             this text; `llmlimit COMMAND --help` for a command\n"
    "  --version          print the version\n"
    "\n"
    "exit status: 0 success, 1 reserve denied, 2 usage error (or the server found\n"
    "the request invalid), 3 server or transport error.\n";

/* Takes the global options out of argv wherever they stand. */
static int globals_extract(struct cli *cli, int *argc, char **argv)
{
    int kept = 1;
    bool literal = false;
    for (int i = 1; i < *argc; i++) {
        const char *value;
        int matched = 0;
        if (!literal && strcmp(argv[i], "--") == 0) {
            literal = true;
        } else if (!literal) {
            if ((matched = cli_flag(*argc, argv, &i, "--url", &value)) == 1)
                cli->url = value;
            else if (matched == 0 &&
                     (matched = cli_flag(*argc, argv, &i, "--token-file", &value)) == 1)
                cli->token_file = value;
            else if (matched == 0 && strcmp(argv[i], "--compact") == 0)
                matched = 1, cli->json_style = CLI_JSON_COMPACT;
            else if (matched == 0 && strcmp(argv[i], "--pretty") == 0)
                matched = 1, cli->json_style = CLI_JSON_PRETTY;
            if (matched < 0)
                return cli_usage_error(cli, "%s needs a value", argv[i]);
        }
        if (matched == 0)
            argv[kept++] = argv[i];
    }
    assert(kept >= 1); /* the program's name stays */
    assert(kept <= *argc);
    *argc = kept;
    argv[kept] = NULL;
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    struct cli cli = {.url = getenv("LLMLIMIT_URL"), .command = ""};
    if (cli.url == NULL || cli.url[0] == '\0')
        cli.url = CLI_URL_DEFAULT;
    int rc = globals_extract(&cli, &argc, argv);
    if (rc != EXIT_OK)
        return rc;
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    const char *command = argv[1];
    cli.command = command;
    if (cli_is_help(command) || strcmp(command, "help") == 0) {
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    if (strcmp(command, "--version") == 0) {
        printf("llmlimit %s\n", LLMLIMIT_VERSION);
        return EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*run)(const struct cli *, int, char **);
    } commands[] = {
        {"limits", cmd_limits},   {"reserve", cmd_reserve}, {"complete", cmd_complete},
        {"release", cmd_release}, {"usage", cmd_usage},     {"events", cmd_events},
        {"bench", cmd_bench},     {"gateway", cmd_gateway}, {"keys", cmd_keys},
    };
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(command, commands[i].name) == 0)
            return commands[i].run(&cli, argc - 1, argv + 1);
    }
    fprintf(stderr, "llmlimit: unknown command \"%s\"\n\n%s", command, usage_text);
    return EXIT_USAGE;
}
