/* llmlimit gateway: the gateway's offline helpers. new-key makes a virtual
 * key (the secret is printed once, gateway.json keeps only its SHA-256),
 * hash-key gives the SHA-256 of an existing secret, check loads a
 * gateway.json exactly as llmlimitd would. */
#include <assert.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gateway/gw_config.h"
#include "gateway/gw_secret.h"

static const char gateway_usage[] =
    "usage: llmlimit gateway new-key | hash-key | check FILE\n"
    "  new-key    make a virtual key: prints {\"secret\": ..., \"sha256\": ...}; give the\n"
    "             secret to the client, put the sha256 into gateway.json's keys\n"
    "  hash-key   read a secret from stdin (its first line) and print its sha256\n"
    "  check FILE load FILE as llmlimitd --gateway-config would (provider keys are read\n"
    "             from their environment variables or files) and print what it holds\n";

static int new_key(const struct cli *cli)
{
    char secret[GW_SECRET_SIZE], sha256[GW_SHA256_HEX_SIZE];
    if (gw_secret_new(secret, sha256) != 0) {
        fprintf(stderr, "llmlimit %s: no random bytes: %s\n", cli->command, strerror(errno));
        return EXIT_SERVER;
    }
    cli_print_json(cli, json_pack("{s:s,s:s}", "secret", secret, "sha256", sha256));
    OPENSSL_cleanse(secret, sizeof secret);
    return EXIT_OK;
}

static int hash_key(const struct cli *cli)
{
    char line[GW_API_KEY_BYTES_MAX + 2];
    if (fgets(line, sizeof line, stdin) == NULL)
        return cli_usage_error(cli, "want the secret on stdin");
    size_t length = strcspn(line, "\r\n");
    assert(length < sizeof line);
    line[length] = '\0';
    uint8_t digest[GW_SHA256_BYTES];
    char hex[GW_SHA256_HEX_SIZE];
    int result = length == 0 ? -2 : sha256_digest(line, length, digest);
    OPENSSL_cleanse(line, sizeof line);
    if (result == -2)
        return cli_usage_error(cli, "the secret is empty");
    if (result != 0) {
        fprintf(stderr, "llmlimit %s: SHA-256 failed\n", cli->command);
        return EXIT_SERVER;
    }
    gw_hex_encode(digest, sizeof digest, hex);
    assert(strlen(hex) == 2 * GW_SHA256_BYTES);
    cli_print_json(cli, json_pack("{s:s}", "sha256", hex));
    return EXIT_OK;
}

static int check(const struct cli *cli, const char *path)
{
    struct gw_config *config;
    char error[GW_CONFIG_ERROR_SIZE];
    if (gw_config_load(path, &config, error, sizeof error) != 0) {
        fprintf(stderr, "llmlimit %s: %s\n", cli->command, error);
        return EXIT_USAGE;
    }
    cli_print_json(cli,
                   json_pack("{s:b,s:s,s:I,s:I,s:I,s:I}", "ok", 1, "file", path, "upstreams",
                             (json_int_t)config->upstream_count, "models",
                             (json_int_t)config->model_count, "keys", (json_int_t)config->key_count,
                             "limits", (json_int_t)config->limit_count));
    gw_config_release(config);
    return EXIT_OK;
}

int cmd_gateway(const struct cli *cli, int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        fputs(gateway_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "new-key") == 0 && argc == 2)
        return new_key(cli);
    if (strcmp(sub, "hash-key") == 0 && argc == 2)
        return hash_key(cli);
    if (strcmp(sub, "check") == 0 && argc == 3)
        return check(cli, argv[2]);
    return cli_usage_error(cli, "want new-key, hash-key or check FILE");
}
