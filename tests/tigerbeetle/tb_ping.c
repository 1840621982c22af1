/* tb_ping HOST:PORT[,HOST:PORT...]: one ping_client to each replica, one
 * line each: "INDEX VIEW RELEASE", or "INDEX - -" when it did not answer
 * (down, stopped, or not in normal status). The HTTP tests use it to learn
 * the view, and so the primary (view % replicas). Exit 0 when at least one
 * replica answered, 1 when none did, 2 on bad arguments. */
#include <stdio.h>
#include <string.h>

#include "tbclient/tbc_session.h"
#include "tb_server.h"

#define PING_TIMEOUT_MS 500

int main(int argc, char **argv)
{
    struct tbc_address addresses[TBC_REPLICAS_MAX];
    char error[128];
    if (argc != 2 || tbc_addresses_parse(argv[1], addresses, error, sizeof error) < 0) {
        fprintf(stderr, "usage: tb_ping HOST:PORT[,HOST:PORT...]\n");
        return 2;
    }
    int answered = 0, index = 0;
    for (char *address = strtok(argv[1], ","); address != NULL; address = strtok(NULL, ",")) {
        uint32_t view, release;
        if (tb_test_ping(address, PING_TIMEOUT_MS, &view, &release) == 0) {
            printf("%d %u %u\n", index, view, release);
            answered++;
        } else {
            printf("%d - -\n", index);
        }
        index++;
    }
    return answered > 0 ? 0 : 1;
}
