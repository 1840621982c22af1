/* A tiny HTTP/1.1 server on a thread, for tests of the client's retry
 * rules: each request goes to a handler that decides the answer (or to
 * answer nothing, or to drop the connection). One connection at a time,
 * keep-alive, Content-Length bodies only. */
#ifndef LLMLIMIT_TESTS_FAKE_SERVER_H
#define LLMLIMIT_TESTS_FAKE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_REQUEST_BYTES_MAX (4 * 1024 * 1024)
#define FAKE_ANSWER_BYTES_MAX (4 * 1024 * 1024)
#define FAKE_HEADERS_BYTES_MAX 256

enum fake_action {
    FAKE_ANSWER = 0, /* send status and body */
    FAKE_HANG = 1,   /* say nothing; the client's attempt times out */
    FAKE_DROP = 2,   /* close the connection without an answer */
};

struct fake_request {
    const char *method;
    const char *path;
    const char *body; /* NUL-terminated */
    size_t body_length;
    uint32_t index; /* 0 for the first request the server got */
    /* The handler may write extra header lines of its answer here, each
     * "Name: value\r\n" (starts empty; FAKE_HEADERS_BYTES_MAX bytes). */
    char *answer_headers;
};

/* Writes the answer: *status and a NUL-terminated body of at most
 * body_size bytes. Runs on the server thread. */
typedef enum fake_action (*fake_handler_fn)(void *context, const struct fake_request *request,
                                            int *status, char *body, size_t body_size);

struct fake_server {
    int listen_fd;
    int port;
    char url[64];
    pthread_t thread;
    atomic_bool stop;
    atomic_uint requests;    /* seen so far */
    atomic_uint connections; /* accepted so far */
    fake_handler_fn handler;
    void *context;
};

/* Listens on 127.0.0.1:<free port> and serves on a new thread. 0 or -1. */
int fake_server_start(struct fake_server *server, fake_handler_fn handler, void *context);
void fake_server_stop(struct fake_server *server);

#endif
