/* Throw-away TigerBeetle clusters for integration tests, of one replica or
 * several: each replica formats a data file in a fresh temporary directory
 * and runs the binary named by TIGERBEETLE_BIN on a free loopback port; it
 * can be killed (always with SIGKILL, which TigerBeetle is built to
 * survive), stopped, resumed and started again; ping_client tells a
 * replica's view, and so which replica is the primary. */
#ifndef LLMLIMIT_TB_SERVER_H
#define LLMLIMIT_TB_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TB_TEST_REPLICAS_MAX 3

struct tb_test_server {
    char directory[256];
    char data_file[300];
    char address[64];    /* "127.0.0.1:PORT" */
    char addresses[200]; /* what --addresses= gets: every replica's address, in order */
    int port;
    pid_t pid;
    bool paused; /* SIGSTOP'd */
    char log_file[300];
};

/* The binary from TIGERBEETLE_BIN, or NULL: then the caller prints
 * "SKIPPED: TIGERBEETLE_BIN not set" and exits 77 (skipped, to ctest). */
const char *tb_test_server_binary(void);

/* Formats and starts a cluster (cluster id 0) and waits until it accepts
 * connections. 0, or -1 with a message on stderr. */
int tb_test_server_start(struct tb_test_server *server);
/* Waits until the server answers a ping_client (normal status). One that
 * died of a fault of TigerBeetle itself (tests/tigerbeetle/known_faults.txt)
 * is said on stderr and started again (a few times at most): a test rides
 * that out. 0, or -1 (it exited otherwise, or timeout_ms passed; its log
 * ends on stderr). */
int tb_test_server_wait_answers(struct tb_test_server *server, int timeout_ms);
/* kill -9, then start again on the same data file (same port), and wait
 * until it answers (tb_test_server_wait_answers). 0 or -1. */
int tb_test_server_restart(struct tb_test_server *server);
/* kill -9 only (the data file stays). */
void tb_test_server_kill(struct tb_test_server *server);
/* kill -9 and remove the directory. */
void tb_test_server_stop(struct tb_test_server *server);

/* A cluster of replica_count replicas, replica i listening on
 * replicas[i].address; `addresses` lists them in order (for clients). */
struct tb_test_cluster {
    uint32_t replica_count;
    char addresses[200];
    struct tb_test_server replicas[TB_TEST_REPLICAS_MAX];
};

/* Formats (in parallel) and starts every replica, and waits until a
 * primary answers (tb_test_cluster_view). 0, or -1 with a message on
 * stderr (then call tb_test_cluster_stop). */
int tb_test_cluster_start(struct tb_test_cluster *cluster, uint32_t replica_count);
/* kill -9 of one replica (its data file stays). */
void tb_test_cluster_kill(struct tb_test_cluster *cluster, uint32_t replica);
/* Starts a killed replica again on its data file and port, and waits until
 * it answers, riding out TigerBeetle's known faults (as
 * tb_test_server_restart). 0 or -1. */
int tb_test_cluster_restart(struct tb_test_cluster *cluster, uint32_t replica);
/* SIGSTOP / SIGCONT of one replica. */
void tb_test_cluster_pause(struct tb_test_cluster *cluster, uint32_t replica);
void tb_test_cluster_resume(struct tb_test_cluster *cluster, uint32_t replica);
/* kill -9 of every replica and removal of their directories. */
void tb_test_cluster_stop(struct tb_test_cluster *cluster);
/* The highest view any running replica answers a ping_client with, waiting
 * up to timeout_ms for one to answer (a replica only answers in normal
 * status, so the view it gives has started; its primary is view %
 * replica_count). 0, or -1 when none answered. */
int tb_test_cluster_view(const struct tb_test_cluster *cluster, int timeout_ms, uint32_t *view);

/* One ping_client/pong_client exchange with the replica at address
 * ("HOST:PORT"): its view and release. 0, or -1 (no pong within
 * timeout_ms: down, stopped, or not in normal status). */
int tb_test_ping(const char *address, int timeout_ms, uint32_t *view, uint32_t *release);

#endif
