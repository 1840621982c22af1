/* llmlimitd: the HTTP service that reserves capacity across several limits
 * before an LLM call and reconciles after it. Flags: llmlimitd --help. */
#include <stdio.h>

#include "config.h"
#include "server.h"

int main(int argc, char **argv)
{
    struct server_config config;
    switch (config_parse(&config, argc, argv, stdout, stderr)) {
    case CONFIG_EXIT:
        return 0;
    case CONFIG_USAGE:
        return 2;
    case CONFIG_RUN:
        break;
    }
    return server_run(&config);
}
