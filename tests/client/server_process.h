/* Runs the real llmlimitd for a test: fork/exec on a free loopback port
 * with a fresh data directory, waits for its "llmlimitd listening on
 * HOST:PORT" line, and stops it (SIGTERM, then SIGKILL) at the end. */
#ifndef LLMLIMIT_TESTS_SERVER_PROCESS_H
#define LLMLIMIT_TESTS_SERVER_PROCESS_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#define SERVER_START_TIMEOUT_MS 10000
#define SERVER_STOP_TIMEOUT_MS 10000
#define SERVER_ARGS_MAX 16

struct server_process {
    pid_t pid;
    int stderr_fd; /* read end of the server's stderr */
    pthread_t drain_thread;
    bool draining;
    char host[64];
    int port;
    char url[96]; /* http://HOST:PORT */
    char data_dir[256];
};

/* The server binary: "--binary PATH" in argv (ctest passes it), else
 * $LLMLIMITD, else build/llmlimitd. */
const char *server_binary(int argc, char **argv);

/* Starts binary with --listen 127.0.0.1:0 --backend backend --data-dir
 * <new temporary directory> and extra_args (NULL-terminated, may be NULL).
 * Returns 0, or -1 after printing the server's output. */
int server_process_start(struct server_process *server, const char *binary, const char *backend,
                         const char *const *extra_args);

/* Stops the server, waits for it, removes the data directory. Returns the
 * exit status (0 for a clean SIGTERM shutdown), or -1. */
int server_process_stop(struct server_process *server);

#endif
