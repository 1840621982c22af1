/* The fake HTTP server of the retry tests (see fake_server.h). Buffers are
 * allocated once per server; the handler runs on the server thread. */
#include "fake_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define POLL_MS 20

struct fake_connection {
    int fd;
    char *data;
    size_t length;
    char *answer;
};

static int write_all(int fd, const char *data, size_t length)
{
    while (length > 0) {
        ssize_t sent = send(fd, data, length, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent <= 0)
            return -1;
        data += sent;
        length -= (size_t)sent;
    }
    return 0;
}

/* Handles every complete request in the buffer. Returns -1 to close. */
static int serve_buffer(struct fake_server *server, struct fake_connection *connection)
{
    for (;;) {
        char *end = memmem(connection->data, connection->length, "\r\n\r\n", 4);
        if (end == NULL)
            return 0;
        *end = '\0';
        const char *length_header = strcasestr(connection->data, "\r\ncontent-length:");
        size_t body_length = length_header ? strtoul(length_header + 17, NULL, 10) : 0;
        size_t header_length = (size_t)(end - connection->data) + 4;
        if (connection->length < header_length + body_length) {
            *end = '\r';
            return 0;
        }
        char method[16] = "", path[1024] = "";
        sscanf(connection->data, "%15s %1023s", method, path);
        char *body = connection->data + header_length;
        char saved = body[body_length];
        body[body_length] = '\0';
        char answer_headers[FAKE_HEADERS_BYTES_MAX] = "";
        struct fake_request request = {
            method,        path, body, body_length, atomic_fetch_add(&server->requests, 1),
            answer_headers};
        int status = 200;
        connection->answer[0] = '\0';
        enum fake_action action = server->handler(server->context, &request, &status,
                                                  connection->answer, FAKE_ANSWER_BYTES_MAX);
        body[body_length] = saved;
        memmove(connection->data, connection->data + header_length + body_length,
                connection->length - header_length - body_length);
        connection->length -= header_length + body_length;
        if (action == FAKE_DROP)
            return -1;
        if (action == FAKE_HANG)
            continue; /* the client gives up and closes */
        char head[256 + FAKE_HEADERS_BYTES_MAX];
        size_t answer_length = strlen(connection->answer);
        answer_headers[FAKE_HEADERS_BYTES_MAX - 1] = '\0';
        int head_length = snprintf(head, sizeof(head),
                                   "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                                   "%sContent-Length: %zu\r\n\r\n",
                                   status, answer_headers, answer_length);
        if (write_all(connection->fd, head, (size_t)head_length) != 0 ||
            write_all(connection->fd, connection->answer, answer_length) != 0)
            return -1;
    }
}

static void connection_drop(struct fake_connection *connection)
{
    if (connection->fd >= 0)
        close(connection->fd);
    connection->fd = -1;
    connection->length = 0;
}

static void *serve(void *argument)
{
    struct fake_server *server = argument;
    struct fake_connection connection = {.fd = -1};
    connection.data = malloc(FAKE_REQUEST_BYTES_MAX + 1);
    connection.answer = malloc(FAKE_ANSWER_BYTES_MAX);
    while (!atomic_load(&server->stop) && connection.data && connection.answer) {
        struct pollfd polls[2] = {{.fd = server->listen_fd, .events = POLLIN},
                                  {.fd = connection.fd, .events = POLLIN}};
        if (poll(polls, connection.fd >= 0 ? 2 : 1, POLL_MS) <= 0)
            continue;
        if (polls[0].revents & POLLIN) {
            int fd = accept(server->listen_fd, NULL, NULL);
            if (fd >= 0) {
                atomic_fetch_add(&server->connections, 1);
                connection_drop(&connection); /* the client moved on */
                connection.fd = fd;
            }
            continue;
        }
        if (connection.fd < 0 || polls[1].revents == 0)
            continue;
        ssize_t got = recv(connection.fd, connection.data + connection.length,
                           FAKE_REQUEST_BYTES_MAX - connection.length, 0);
        if (got <= 0) {
            connection_drop(&connection);
            continue;
        }
        connection.length += (size_t)got;
        if (serve_buffer(server, &connection) != 0)
            connection_drop(&connection);
    }
    connection_drop(&connection);
    free(connection.data);
    free(connection.answer);
    return NULL;
}

int fake_server_start(struct fake_server *server, fake_handler_fn handler, void *context)
{
    memset(server, 0, sizeof(*server));
    server->handler = handler;
    server->context = context;
    atomic_init(&server->stop, false);
    atomic_init(&server->requests, 0);
    atomic_init(&server->connections, 0);
    server->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (server->listen_fd < 0 ||
        bind(server->listen_fd, (struct sockaddr *)&address, sizeof(address)) != 0 ||
        listen(server->listen_fd, 16) != 0 ||
        getsockname(server->listen_fd, (struct sockaddr *)&address, &length) != 0)
        return -1;
    server->port = ntohs(address.sin_port);
    snprintf(server->url, sizeof(server->url), "http://127.0.0.1:%d", server->port);
    return pthread_create(&server->thread, NULL, serve, server) == 0 ? 0 : -1;
}

void fake_server_stop(struct fake_server *server)
{
    atomic_store(&server->stop, true);
    pthread_join(server->thread, NULL);
    close(server->listen_fd);
}
