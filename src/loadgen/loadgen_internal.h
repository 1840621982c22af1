/* What loadgen.c (threads, timing, report) and loadgen_connection.c (one
 * connection's requests and answers) share. */
#ifndef LLMLIMIT_LOADGEN_LOADGEN_INTERNAL_H
#define LLMLIMIT_LOADGEN_LOADGEN_INTERNAL_H

#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "loadgen.h"

/* Room in front of every body for the request line and headers. */
#define LOADGEN_HEADER_ROOM (2048 + LOADGEN_TOKEN_LENGTH_MAX + LOADGEN_HEADERS_BYTES_MAX)
#define LOADGEN_LEASE_ID_SIZE 64

/* Read-only once the run starts. */
struct loadgen_shared {
    const struct loadgen_config *config;
    struct sockaddr_storage address;
    socklen_t address_length;
    /* "POST <path> HTTP/1.1\r\n...Content-Length: " for each route. */
    char header_reserve[LOADGEN_HEADER_ROOM];
    size_t header_reserve_length;
    char header_batch[LOADGEN_HEADER_ROOM];
    size_t header_batch_length;
    char header_complete[LOADGEN_HEADER_ROOM];
    size_t header_complete_length;
    char header_post[LOADGEN_HEADER_ROOM]; /* LOADGEN_POST: to post_path */
    size_t header_post_length;
    /* Body tails after the lease id: `","requirements":[...]}` and
     * `","actuals":[...]}`. */
    char *requirements_tail;
    size_t requirements_tail_length;
    char *actuals_tail;
    size_t actuals_tail_length;
    size_t send_capacity;
    size_t receive_capacity;
    int64_t start_ns;
    int64_t end_ns;
};

enum request_kind {
    REQUEST_NONE = 0,
    REQUEST_RESERVE,
    REQUEST_BATCH,
    REQUEST_COMPLETE,
    REQUEST_POST,
};

struct connection {
    int fd;
    uint32_t index;        /* across all threads */
    uint64_t random_state; /* xorshift64 for the random bits of lease ids */
    enum request_kind in_flight;
    int64_t sent_at_ns;
    char *send_buffer; /* LOADGEN_HEADER_ROOM + body */
    const char *send_data;
    size_t send_length;
    size_t send_offset;
    char *receive_buffer;
    size_t receive_length;
    /* The lease of the last allowed reserve (reserve-complete mode). */
    char lease_id[LOADGEN_LEASE_ID_SIZE];
    size_t lease_id_length;
    bool want_write;
};

struct worker {
    pthread_t thread;
    struct loadgen_shared *shared;
    struct connection *connections;
    uint32_t connection_count;
    int epoll_fd;
    bool draining;
    uint32_t in_flight;
    int64_t last_answer_ns;
    struct loadgen_report report; /* this thread's share */
    /* Read by the progress printer while the run goes on. */
    _Atomic uint64_t progress_requests;
    _Atomic uint64_t progress_reserves;
    _Atomic bool finished;
};

int64_t loadgen_now_ns(void);

/* Opens the connection's socket (blocking connect, then non-blocking).
 * Returns 0 or -1. */
int loadgen_connection_open(struct connection *connection, const struct loadgen_shared *shared);
void loadgen_connection_close(struct worker *worker, struct connection *connection);

/* Builds and sends the next request of the mode. Returns 0 or -1 (the
 * connection failed: the caller reconnects). */
int loadgen_connection_send_next(struct worker *worker, struct connection *connection);
/* Continues a partial send (EPOLLOUT). 0 or -1. */
int loadgen_connection_send_more(struct worker *worker, struct connection *connection);
/* Reads what arrived; handles a complete answer (counts it, sends the next
 * request unless draining). 0, or -1 when the connection must be dropped. */
int loadgen_connection_readable(struct worker *worker, struct connection *connection);

#endif
