/* fork/exec of llmlimitd for the C tests. The server's stderr is read until
 * the listening line, then drained by a thread so that a chatty server never
 * blocks on a full pipe. */
#include "server_process.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

const char *server_binary(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--binary") == 0)
            return argv[i + 1];
    }
    const char *env = getenv("LLMLIMITD");
    return env != NULL && env[0] != '\0' ? env : "build/llmlimitd";
}

static void child_exec(const char *binary, const char *backend, const char *data_dir,
                       const char *const *extra_args, int stderr_write)
{
    const char *argv[SERVER_ARGS_MAX + 8];
    int argc = 0;
    argv[argc++] = binary;
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--backend";
    argv[argc++] = backend;
    argv[argc++] = "--data-dir";
    argv[argc++] = data_dir;
    for (int i = 0; extra_args != NULL && extra_args[i] != NULL && i < SERVER_ARGS_MAX; i++)
        argv[argc++] = extra_args[i];
    argv[argc] = NULL;
    dup2(stderr_write, STDERR_FILENO);
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
    }
    execv(binary, (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", binary, strerror(errno));
    _exit(127);
}

/* Reads stderr until the listening line; fills host and port. */
static int wait_listening(struct server_process *server)
{
    char text[16384];
    size_t length = 0;
    long long deadline = now_ms() + SERVER_START_TIMEOUT_MS;
    for (;;) {
        long long left = deadline - now_ms();
        struct pollfd poller = {.fd = server->stderr_fd, .events = POLLIN};
        if (left <= 0 || poll(&poller, 1, (int)left) <= 0)
            break;
        ssize_t got = read(server->stderr_fd, text + length, sizeof(text) - 1 - length);
        if (got <= 0)
            break;
        length += (size_t)got;
        text[length] = '\0';
        const char *line = strstr(text, "llmlimitd listening on ");
        if (line != NULL && strchr(line, '\n') != NULL &&
            sscanf(line, "llmlimitd listening on %63[0-9.]:%d", server->host, &server->port) == 2)
            return 0;
        if (length == sizeof(text) - 1)
            length = 0; /* keep reading; the line is yet to come */
    }
    fprintf(stderr, "llmlimitd did not start; its output:\n%s\n", text);
    return -1;
}

static void *drain(void *argument)
{
    struct server_process *server = argument;
    char buffer[4096];
    while (read(server->stderr_fd, buffer, sizeof(buffer)) > 0) {
    }
    return NULL;
}

int server_process_start(struct server_process *server, const char *binary, const char *backend,
                         const char *const *extra_args)
{
    memset(server, 0, sizeof(*server));
    server->pid = -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(server->data_dir, sizeof(server->data_dir), "%s/llmlimit-test-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : P_tmpdir);
    if (mkdtemp(server->data_dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        child_exec(binary, backend, server->data_dir, extra_args, pipe_fds[1]);
    close(pipe_fds[1]);
    server->pid = pid;
    server->stderr_fd = pipe_fds[0];
    if (wait_listening(server) != 0) {
        server_process_stop(server);
        return -1;
    }
    snprintf(server->url, sizeof(server->url), "http://%s:%d", server->host, server->port);
    server->draining = pthread_create(&server->drain_thread, NULL, drain, server) == 0;
    return 0;
}

static int remove_entry(const char *path, const struct stat *info, int flag, struct FTW *ftw)
{
    (void)info, (void)flag, (void)ftw;
    return remove(path);
}

int server_process_stop(struct server_process *server)
{
    int exit_status = -1;
    if (server->pid > 0) {
        kill(server->pid, SIGTERM);
        long long deadline = now_ms() + SERVER_STOP_TIMEOUT_MS;
        int status = 0;
        pid_t done = 0;
        while ((done = waitpid(server->pid, &status, WNOHANG)) == 0 && now_ms() < deadline) {
            struct timespec nap = {0, 10 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        if (done == 0) {
            fprintf(stderr, "llmlimitd ignored SIGTERM; killing it\n");
            kill(server->pid, SIGKILL);
            waitpid(server->pid, &status, 0);
        } else if (done > 0 && WIFEXITED(status)) {
            exit_status = WEXITSTATUS(status);
        }
        server->pid = -1;
    }
    if (server->draining)
        pthread_join(server->drain_thread, NULL);
    server->draining = false;
    if (server->stderr_fd > 0)
        close(server->stderr_fd);
    server->stderr_fd = -1;
    if (server->data_dir[0] != '\0')
        nftw(server->data_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    server->data_dir[0] = '\0';
    return exit_status;
}
