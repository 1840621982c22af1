/* The llmlimit command: shared pieces of its subcommands (the client they
 * talk through, argument helpers, JSON output, exit codes). */
#ifndef LLMLIMIT_CLI_H
#define LLMLIMIT_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "llmlimit.h"

/* Exit codes (docs/cli.md). */
#define EXIT_OK 0
#define EXIT_DENIED 1 /* a reserve was denied */
#define EXIT_USAGE 2  /* bad arguments, or the server found the request invalid */
#define EXIT_SERVER 3 /* transport, server or authorization errors */

#define CLI_URL_DEFAULT "http://127.0.0.1:8470"
#define CLI_TOKEN_FILE_BYTES_MAX 4096
#define CLI_DEFINITION_FILE_BYTES_MAX (16 * 1024 * 1024)

/* Which token a command prefers when none is given by file. */
enum token_role {
    TOKEN_ROLE_CLIENT, /* LLMLIMIT_TOKEN, else LLMLIMIT_ADMIN_TOKEN */
    TOKEN_ROLE_ADMIN,  /* LLMLIMIT_ADMIN_TOKEN, else LLMLIMIT_TOKEN */
};

/* How an answer is printed: always JSON, one value per answer. */
enum cli_json_style {
    CLI_JSON_LINE,    /* one line, a blank after ':' and ',' (the default) */
    CLI_JSON_COMPACT, /* one line, no blanks (--compact) */
    CLI_JSON_PRETTY,  /* indented by 2, one member per line (--pretty) */
};

struct cli {
    const char *url;
    const char *token_file; /* NULL: environment */
    enum cli_json_style json_style;
    const char *command; /* for messages: the subcommand (main sets it) */
};

/* Opens a client for the command. Returns EXIT_OK with *out, else prints
 * why and returns EXIT_USAGE (bad URL, unreadable token file). */
int cli_client(const struct cli *cli, enum token_role role, struct llmlimit_client **out);

/* Reads a token file: its first line, trailing whitespace removed. A new
 * string (free()), or NULL after printing why. */
char *cli_token_from_file(const char *path);

/* Prints a JSON value to stdout in the chosen style, then a newline, and
 * steals it. */
void cli_print_json(const struct cli *cli, json_t *value);

/* Prints "llmlimit <command>: <what>: <error> [(HTTP n: message)]" to
 * stderr and returns the exit code for the error. */
int cli_fail(const struct cli *cli, const char *what, int error,
             const struct llmlimit_status *status);
/* Prints a usage error and returns EXIT_USAGE. */
int cli_usage_error(const struct cli *cli, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Parsers: 0 on success, -1 on anything else. */
int cli_parse_u64(const char *text, uint64_t *out);
int cli_parse_u32(const char *text, uint32_t *out);
int cli_parse_i64(const char *text, int64_t *out);
/* Splits "KEY=AMOUNT" at the last '='; the key points into text (which is
 * modified). */
int cli_parse_key_amount(char *text, const char **key, uint64_t *amount);

/* Matches "--name VALUE" and "--name=VALUE" at argv[*index]; advances
 * *index past the value. 1 matched, 0 not this flag, -1 value missing. */
int cli_flag(int argc, char **argv, int *index, const char *name, const char **value);
bool cli_is_help(const char *arg);
/* Whether argv[1..argc) asks for help; if so, prints usage to stdout. */
bool cli_wants_help(int argc, char **argv, const char *usage);

/* The subcommands: each returns an exit code. argv[0] is the subcommand. */
int cmd_limits(const struct cli *cli, int argc, char **argv);
int cmd_reserve(const struct cli *cli, int argc, char **argv);
int cmd_complete(const struct cli *cli, int argc, char **argv);
int cmd_release(const struct cli *cli, int argc, char **argv);
int cmd_usage(const struct cli *cli, int argc, char **argv);
int cmd_events(const struct cli *cli, int argc, char **argv);
int cmd_bench(const struct cli *cli, int argc, char **argv);
int cmd_gateway(const struct cli *cli, int argc, char **argv);
int cmd_keys(const struct cli *cli, int argc, char **argv);

#endif
