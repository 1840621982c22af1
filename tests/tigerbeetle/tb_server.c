/* Starting and killing a TigerBeetle test cluster (docs/tigerbeetle.md
 * "Tests"): `format --cluster=0 --replica=0 --replica-count=1` then `start
 * --addresses=... --cache-grid=256MiB`, readiness by polling connect(). */
#include "tb_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_TIMEOUT_MS 60000
#define FORMAT_TIMEOUT_MS 60000

const char *tb_test_server_binary(void)
{
    const char *binary = getenv("TIGERBEETLE_BIN");
    return (binary != NULL && binary[0] != '\0') ? binary : NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(address.sin_port);
}

/* Runs the binary with args, output to the log file; returns the pid. */
static pid_t spawn(const struct tb_test_server *server, char *const argv[])
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* If the test dies (an assert), the server goes with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int log = open(server->log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
        dup2(log, 1);
        dup2(log, 2);
    }
    execv(argv[0], argv);
    _exit(127);
}

static int wait_exit(pid_t pid, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        poll(NULL, 0, 50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* TigerBeetle binds its port before it allocates its ~3 GiB; only the log
 * line "listening on" says it will answer. */
static bool listening(const struct tb_test_server *server)
{
    FILE *log = fopen(server->log_file, "r");
    if (log == NULL)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, log) != NULL)
        found = strstr(line, "listening on") != NULL;
    fclose(log);
    return found;
}

static bool accepts(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&address, sizeof address) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* The end of the server's log on stderr, so a failed start says why. */
static void show_log(const struct tb_test_server *server)
{
    FILE *log = fopen(server->log_file, "r");
    if (log == NULL)
        return;
    char lines[8][512];
    int count = 0;
    while (fgets(lines[count % 8], sizeof lines[0], log) != NULL)
        count++;
    fclose(log);
    for (int i = count > 8 ? count - 8 : 0; i < count; i++)
        fprintf(stderr, "  tigerbeetle: %s", lines[i % 8]);
}

/* One attempt: 0 when listening, 1 when it exited at once, -1 on a timeout. */
static int launch_once(struct tb_test_server *server)
{
    const char *binary = tb_test_server_binary();
    char addresses[96];
    snprintf(addresses, sizeof addresses, "--addresses=%s", server->address);
    char *argv[] = {(char *)binary,        "start",           addresses,
                    "--cache-grid=256MiB", server->data_file, NULL};
    FILE *log = fopen(server->log_file, "w"); /* a fresh log: old lines must not count */
    if (log != NULL)
        fclose(log);
    server->pid = spawn(server, argv);
    for (int waited = 0; waited < START_TIMEOUT_MS; waited += 50) {
        if (listening(server) && accepts(server->port))
            return 0;
        if (waitpid(server->pid, NULL, WNOHANG) == server->pid) {
            server->pid = 0;
            return 1;
        }
        poll(NULL, 0, 50);
    }
    fprintf(stderr, "tigerbeetle did not listen within %d ms\n", START_TIMEOUT_MS);
    tb_test_server_kill(server);
    return -1;
}

/* A killed server's io_uring may keep the data file (and its lock) open a
 * moment after the process is gone: a start that finds the lock taken is
 * tried again. */
#define LAUNCH_ATTEMPTS 40

static int launch(struct tb_test_server *server)
{
    for (int attempt = 0; attempt < LAUNCH_ATTEMPTS; attempt++) {
        int rc = launch_once(server);
        if (rc <= 0)
            return rc;
        poll(NULL, 0, 250);
    }
    fprintf(stderr, "tigerbeetle exited at start:\n");
    show_log(server);
    return -1;
}

int tb_test_server_start(struct tb_test_server *server)
{
    memset(server, 0, sizeof *server);
    const char *binary = tb_test_server_binary();
    const char *base = getenv("TMPDIR");
    snprintf(server->directory, sizeof server->directory, "%s/llmlimit-tb-XXXXXX",
             base ? base : P_tmpdir);
    if (binary == NULL || mkdtemp(server->directory) == NULL)
        return -1;
    snprintf(server->data_file, sizeof server->data_file, "%s/0_0.tigerbeetle", server->directory);
    snprintf(server->log_file, sizeof server->log_file, "%s/tigerbeetle.log", server->directory);
    server->port = free_port();
    snprintf(server->address, sizeof server->address, "127.0.0.1:%d", server->port);
    char *format[] = {(char *)binary,      "format",          "--cluster=0", "--replica=0",
                      "--replica-count=1", server->data_file, NULL};
    pid_t pid = spawn(server, format);
    if (wait_exit(pid, FORMAT_TIMEOUT_MS) != 0) {
        fprintf(stderr, "tigerbeetle format failed; see %s\n", server->log_file);
        return -1;
    }
    return launch(server);
}

void tb_test_server_kill(struct tb_test_server *server)
{
    if (server->pid > 0) {
        kill(server->pid, SIGKILL);
        waitpid(server->pid, NULL, 0);
    }
    server->pid = 0;
}

int tb_test_server_restart(struct tb_test_server *server)
{
    tb_test_server_kill(server);
    return launch(server);
}

void tb_test_server_stop(struct tb_test_server *server)
{
    tb_test_server_kill(server);
    if (server->directory[0] != '\0') {
        unlink(server->data_file);
        unlink(server->log_file);
        rmdir(server->directory);
    }
}
