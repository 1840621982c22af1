/* Starting and killing TigerBeetle test clusters (docs/tigerbeetle.md, "Tests"): "format
 * --cluster=0
 * --replica=I --replica-count=N" then "start --addresses=A,B,C
 * --cache-grid=256MiB" for each replica; readiness by the log line and
 * connect(), the view by ping_client. */
#include "tb_server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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

#include "core/clock.h"
#include "tbclient/tbc_ids.h"
#include "tbclient/tbc_message.h"
#include "tbclient/tbc_session.h"

#define START_TIMEOUT_MS 60000
#define FORMAT_TIMEOUT_MS 60000
/* Known faults of TigerBeetle itself (tests/tigerbeetle/known_faults.txt). */
#define KNOWN_FAULTS_MAX 8
#define KNOWN_FAULT_BYTES 128
#define LOG_TAIL_BYTES 4096
/* A replica that dies of a known fault this often is not started again. */
#define REVIVALS_MAX 3

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

/* The known faults, one a line of TB_KNOWN_FAULTS_FILE (# starts a
 * comment), read once; a file that cannot be read counts as none, said. */
static int known_faults(char faults[KNOWN_FAULTS_MAX][KNOWN_FAULT_BYTES])
{
    FILE *file = fopen(TB_KNOWN_FAULTS_FILE, "r");
    if (file == NULL) {
        fprintf(stderr, "cannot read %s: no TigerBeetle fault counts as known\n",
                TB_KNOWN_FAULTS_FILE);
        return 0;
    }
    int count = 0;
    char line[KNOWN_FAULT_BYTES];
    while (count < KNOWN_FAULTS_MAX && fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0' && line[0] != '#')
            snprintf(faults[count++], KNOWN_FAULT_BYTES, "%s", line);
    }
    fclose(file);
    return count;
}

/* The known fault the end of the server's log shows, or NULL. */
static const char *known_fault(const struct tb_test_server *server)
{
    static char faults[KNOWN_FAULTS_MAX][KNOWN_FAULT_BYTES];
    static int count = -1;
    if (count < 0)
        count = known_faults(faults);
    FILE *log = fopen(server->log_file, "r");
    if (log == NULL)
        return NULL;
    char tail[LOG_TAIL_BYTES + 1];
    if (fseek(log, -LOG_TAIL_BYTES, SEEK_END) != 0)
        rewind(log);
    size_t size = fread(tail, 1, LOG_TAIL_BYTES, log);
    fclose(log);
    for (size_t i = 0; i < size; i++)
        tail[i] = tail[i] == '\0' ? ' ' : tail[i];
    tail[size] = '\0';
    for (int i = 0; i < count; i++) {
        if (strstr(tail, faults[i]) != NULL)
            return faults[i];
    }
    return NULL;
}

static void say_revived(const struct tb_test_server *server, const char *fault)
{
    fprintf(stderr, "  tigerbeetle on %s died of TigerBeetle's known fault (%s); started again\n",
            server->address, fault);
}

/* Starts the binary on the server's data file (with a fresh log). */
static void launch_spawn(struct tb_test_server *server)
{
    const char *binary = tb_test_server_binary();
    char addresses[sizeof server->addresses + 16];
    snprintf(addresses, sizeof addresses, "--addresses=%s", server->addresses);
    char *argv[] = {(char *)binary,        "start",           addresses,
                    "--cache-grid=256MiB", server->data_file, NULL};
    FILE *log = fopen(server->log_file, "w"); /* a fresh log: old lines must not count */
    if (log != NULL)
        fclose(log);
    server->paused = false;
    server->pid = spawn(server, argv);
}

/* 0 when listening, 1 when it exited at once, -1 on a timeout. */
static int launch_wait(struct tb_test_server *server)
{
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

/* One attempt: 0 when listening, 1 when it exited at once, -1 on a timeout. */
static int launch_once(struct tb_test_server *server)
{
    launch_spawn(server);
    return launch_wait(server);
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
        const char *fault = known_fault(server);
        if (fault != NULL)
            say_revived(server, fault);
        poll(NULL, 0, 250);
    }
    fprintf(stderr, "tigerbeetle exited at start:\n");
    show_log(server);
    return -1;
}

/* A fresh directory, data and log file names, and a free port. 0 or -1. */
static int prepare(struct tb_test_server *server)
{
    memset(server, 0, sizeof *server);
    const char *base = getenv("TMPDIR");
    snprintf(server->directory, sizeof server->directory, "%s/llmlimit-tb-XXXXXX",
             base ? base : P_tmpdir);
    if (tb_test_server_binary() == NULL || mkdtemp(server->directory) == NULL)
        return -1;
    snprintf(server->data_file, sizeof server->data_file, "%s/0_0.tigerbeetle", server->directory);
    snprintf(server->log_file, sizeof server->log_file, "%s/tigerbeetle.log", server->directory);
    server->port = free_port();
    snprintf(server->address, sizeof server->address, "127.0.0.1:%d", server->port);
    snprintf(server->addresses, sizeof server->addresses, "%s", server->address);
    return server->port > 0 ? 0 : -1;
}

/* Starts `format` for replica `replica` of `count`; returns its pid. */
static pid_t spawn_format(const struct tb_test_server *server, uint32_t replica, uint32_t count)
{
    char replica_flag[32], count_flag[32];
    snprintf(replica_flag, sizeof replica_flag, "--replica=%u", replica);
    snprintf(count_flag, sizeof count_flag, "--replica-count=%u", count);
    char *format[] = {
        (char *)tb_test_server_binary(), "format", "--cluster=0", replica_flag, count_flag,
        (char *)server->data_file,       NULL};
    return spawn(server, format);
}

int tb_test_server_start(struct tb_test_server *server)
{
    if (prepare(server) != 0)
        return -1;
    if (wait_exit(spawn_format(server, 0, 1), FORMAT_TIMEOUT_MS) != 0) {
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

int tb_test_server_wait_answers(struct tb_test_server *server, int timeout_ms)
{
    int revivals = 0;
    int64_t deadline_ms = clock_monotonic_ms() + timeout_ms;
    while (clock_monotonic_ms() < deadline_ms) {
        uint32_t view, release;
        if (server->pid > 0 && tb_test_ping(server->address, 500, &view, &release) == 0)
            return 0;
        if (server->pid > 0 && waitpid(server->pid, NULL, WNOHANG) == server->pid) {
            server->pid = 0;
            const char *fault = known_fault(server);
            if (fault == NULL || revivals++ == REVIVALS_MAX) {
                fprintf(stderr, "tigerbeetle on %s exited:\n", server->address);
                show_log(server);
                return -1;
            }
            say_revived(server, fault);
            if (launch(server) != 0)
                return -1;
            deadline_ms = clock_monotonic_ms() + timeout_ms;
            continue;
        }
        poll(NULL, 0, 100);
    }
    fprintf(stderr, "tigerbeetle on %s did not answer within %d ms:\n", server->address,
            timeout_ms);
    show_log(server);
    return -1;
}

int tb_test_server_restart(struct tb_test_server *server)
{
    tb_test_server_kill(server);
    if (launch(server) != 0)
        return -1;
    return tb_test_server_wait_answers(server, START_TIMEOUT_MS);
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

/* ---- clusters of several replicas ---- */

int tb_test_cluster_start(struct tb_test_cluster *cluster, uint32_t replica_count)
{
    memset(cluster, 0, sizeof *cluster);
    if (replica_count < 1 || replica_count > TB_TEST_REPLICAS_MAX)
        return -1;
    cluster->replica_count = replica_count;
    size_t length = 0;
    for (uint32_t i = 0; i < replica_count; i++) {
        struct tb_test_server *replica = &cluster->replicas[i];
        if (prepare(replica) != 0)
            return -1;
        for (uint32_t j = 0; j < i; j++) {
            if (cluster->replicas[j].port == replica->port)
                return -1; /* the kernel handed the same free port twice */
        }
        length += (size_t)snprintf(cluster->addresses + length, sizeof cluster->addresses - length,
                                   "%s%s", i > 0 ? "," : "", replica->address);
    }
    pid_t formats[TB_TEST_REPLICAS_MAX];
    for (uint32_t i = 0; i < replica_count; i++) {
        snprintf(cluster->replicas[i].addresses, sizeof cluster->replicas[i].addresses, "%s",
                 cluster->addresses);
        formats[i] = spawn_format(&cluster->replicas[i], i, replica_count);
    }
    int failed = 0;
    for (uint32_t i = 0; i < replica_count; i++)
        failed |= wait_exit(formats[i], FORMAT_TIMEOUT_MS) != 0;
    if (failed) {
        fprintf(stderr, "tigerbeetle format failed; see %s\n", cluster->replicas[0].log_file);
        return -1;
    }
    /* All at once: each replica allocates its memory before it listens. */
    for (uint32_t i = 0; i < replica_count; i++)
        launch_spawn(&cluster->replicas[i]);
    for (uint32_t i = 0; i < replica_count; i++) {
        int rc = launch_wait(&cluster->replicas[i]);
        if (rc == 1)
            rc = launch(&cluster->replicas[i]);
        if (rc != 0)
            return -1;
    }
    uint32_t view;
    if (tb_test_cluster_view(cluster, START_TIMEOUT_MS, &view) != 0) {
        fprintf(stderr, "no tigerbeetle replica reached normal status\n");
        return -1;
    }
    return 0;
}

void tb_test_cluster_kill(struct tb_test_cluster *cluster, uint32_t replica)
{
    assert(replica < cluster->replica_count);
    tb_test_server_kill(&cluster->replicas[replica]);
}

int tb_test_cluster_restart(struct tb_test_cluster *cluster, uint32_t replica)
{
    assert(replica < cluster->replica_count);
    return tb_test_server_restart(&cluster->replicas[replica]);
}

void tb_test_cluster_pause(struct tb_test_cluster *cluster, uint32_t replica)
{
    assert(replica < cluster->replica_count);
    struct tb_test_server *server = &cluster->replicas[replica];
    if (server->pid > 0 && kill(server->pid, SIGSTOP) == 0)
        server->paused = true;
}

void tb_test_cluster_resume(struct tb_test_cluster *cluster, uint32_t replica)
{
    assert(replica < cluster->replica_count);
    struct tb_test_server *server = &cluster->replicas[replica];
    if (server->pid > 0 && kill(server->pid, SIGCONT) == 0)
        server->paused = false;
}

void tb_test_cluster_stop(struct tb_test_cluster *cluster)
{
    for (uint32_t i = 0; i < cluster->replica_count; i++)
        tb_test_server_stop(&cluster->replicas[i]);
}

int tb_test_cluster_view(const struct tb_test_cluster *cluster, int timeout_ms, uint32_t *view)
{
    int64_t deadline_ms = clock_monotonic_ms() + timeout_ms;
    do {
        bool answered = false;
        *view = 0;
        for (uint32_t i = 0; i < cluster->replica_count; i++) {
            const struct tb_test_server *replica = &cluster->replicas[i];
            uint32_t replica_view, release;
            if (replica->pid <= 0 || replica->paused ||
                tb_test_ping(replica->address, 500, &replica_view, &release) != 0)
                continue;
            answered = true;
            if (replica_view > *view)
                *view = replica_view;
        }
        if (answered)
            return 0;
        poll(NULL, 0, 100);
    } while (clock_monotonic_ms() < deadline_ms);
    return -1;
}

/* connect() by deadline_ms. The socket, or -1. */
static int connect_by(const char *address, int64_t deadline_ms)
{
    struct tbc_address parsed[TBC_REPLICAS_MAX];
    char error[128];
    if (tbc_addresses_parse(address, parsed, error, sizeof error) != 1)
        return -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *found = NULL;
    if (getaddrinfo(parsed[0].host, parsed[0].port, &hints, &found) != 0 || found == NULL)
        return -1;
    int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK, found->ai_protocol);
    int rc = fd < 0 ? -1 : connect(fd, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0 && fd >= 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int error_code = 0;
        socklen_t length = sizeof error_code;
        int64_t wait = deadline_ms - clock_monotonic_ms();
        if (wait > 0 && poll(&p, 1, (int)wait) == 1 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error_code, &length) == 0 && error_code == 0)
            rc = 0;
    }
    if (rc != 0 && fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Reads exactly size bytes by deadline_ms. 0 or -1. */
static int read_by(int fd, uint8_t *data, size_t size, int64_t deadline_ms)
{
    size_t got = 0;
    while (got < size) {
        int64_t wait = deadline_ms - clock_monotonic_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (wait <= 0 || poll(&p, 1, (int)wait) != 1)
            return -1;
        ssize_t n = recv(fd, data + got, size - got, 0);
        if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN)))
            return -1;
        if (n > 0)
            got += (size_t)n;
    }
    return 0;
}

int tb_test_ping(const char *address, int timeout_ms, uint32_t *view, uint32_t *release)
{
    int64_t deadline_ms = clock_monotonic_ms() + timeout_ms;
    int fd = connect_by(address, deadline_ms);
    if (fd < 0)
        return -1;
    uint8_t header[TBC_HEADER_SIZE];
    tbc_message_ping_client(header, tbc_u128_from_u64(0), TBC_RELEASE_0_15_3, tbc_id_random());
    int rc = send(fd, header, sizeof header, MSG_NOSIGNAL) == (ssize_t)sizeof header ? 0 : -1;
    /* Skip whatever is not the pong (nothing else should come). */
    while (rc == 0 && read_by(fd, header, sizeof header, deadline_ms) == 0) {
        if (tbc_message_header_verify(header, tbc_u128_from_u64(0)) != TBC_MESSAGE_OK ||
            tbc_message_size(header) != TBC_HEADER_SIZE) {
            rc = -1;
        } else if (tbc_message_command(header) == TBC_COMMAND_PONG_CLIENT) {
            *view = tbc_message_view(header);
            *release = tbc_message_release(header);
            close(fd);
            return 0;
        }
    }
    close(fd);
    return -1;
}
