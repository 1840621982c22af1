/* A throw-away single-replica TigerBeetle cluster for integration tests:
 * formats a data file in a fresh temporary directory, starts the binary
 * named by TIGERBEETLE_BIN on a free loopback port, and kills it (always
 * with SIGKILL, which TigerBeetle is built to survive) when done. */
#ifndef LLMLIMIT_TB_SERVER_H
#define LLMLIMIT_TB_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

struct tb_test_server {
    char directory[256];
    char data_file[300];
    char address[64]; /* "127.0.0.1:PORT" */
    int port;
    pid_t pid;
    char log_file[300];
};

/* The binary from TIGERBEETLE_BIN, or NULL: then the caller prints
 * "SKIPPED: TIGERBEETLE_BIN not set" and passes. */
const char *tb_test_server_binary(void);

/* Formats and starts a cluster (cluster id 0) and waits until it accepts
 * connections. 0, or -1 with a message on stderr. */
int tb_test_server_start(struct tb_test_server *server);
/* kill -9, then start again on the same data file (same port). 0 or -1. */
int tb_test_server_restart(struct tb_test_server *server);
/* kill -9 only (the data file stays). */
void tb_test_server_kill(struct tb_test_server *server);
/* kill -9 and remove the directory. */
void tb_test_server_stop(struct tb_test_server *server);

#endif
