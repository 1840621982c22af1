"""GET /metrics does not hold an HTTP worker while the cluster does not answer
(docs/architecture.md "Threads": a handler never blocks on I/O of its own).
Found by the history checker's fault run: a waiting reserve was answered 3.6 s
after its deadline because a GET /metrics on the same worker read each limit's
usage from a cluster in a view change. Here: llmlimitd with one HTTP worker
(--threads 1) in front of a one-replica cluster with three limits; the replica
is frozen (SIGSTOP); a GET /metrics is sent, then a GET /healthz on another
connection: liveness must be answered before /metrics is (it needs nothing from
the cluster). And /metrics is answered while the replica stays frozen: without the
limits' usage gauges, llmlimit_usage_unread_limits counting them (docs/api.md
"GET /metrics"). Without TIGERBEETLE_BIN: SKIPPED, exit 77."""

import os
import re
import select
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "http"))
from harness import Server, binary_from_argv, wait_until  # noqa: E402
from tb_cluster import Cluster, skip_unless_binary  # noqa: E402

BINARY = binary_from_argv()
LIMITS = 3


def send_get(server, path):
    """GET path on a fresh socket, not read: the socket."""
    sock = socket.create_connection((server.host, server.port), timeout=120)
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path.encode())
    return sock


class MetricsStall(unittest.TestCase):
    def test_liveness_is_not_held_behind_metrics(self):
        """Frozen cluster, one worker: /healthz sent after /metrics is answered first."""
        with Cluster() as cluster:
            server = Server(BINARY, backend="tigerbeetle",
                            args=["--tb-addresses", cluster.address, "--threads", "1"]).start()
            try:
                self.assertTrue(wait_until(lambda: server.request("GET", "/readyz")[0] == 200,
                                           timeout_s=60))
                for i in range(LIMITS):
                    status, _, body = server.put_limit({"key": "stall:%d" % i,
                                                        "kind": "concurrency", "capacity": 1,
                                                        "timeout_seconds": 60})
                    self.assertEqual(status, 200, body)
                self.assertEqual(server.request("GET", "/metrics")[0], 200)
                cluster.pause(0)
                metrics = send_get(server, "/metrics")
                try:
                    time.sleep(0.3)  # /metrics is with the worker
                    status, _, _ = server.request("GET", "/healthz")
                    # Had /healthz waited behind /metrics on the one worker, the
                    # worker would have written /metrics' answer first.
                    metrics_answered = select.select([metrics], [], [], 0)[0] != []
                    cluster.resume(0)
                    self.assertEqual(status, 200)
                    self.assertFalse(metrics_answered, "/healthz was answered only after "
                                     "/metrics, which waited for the frozen cluster")
                    metrics.settimeout(120)
                    self.assertTrue(metrics.recv(65536).startswith(b"HTTP/1.1 200"))
                finally:
                    metrics.close()
            finally:
                cluster.resume(0)
                server.cleanup()

    def test_metrics_answer_without_usage_while_frozen(self):
        """Frozen cluster: /metrics is answered, the usage gauges left out and counted."""
        with Cluster() as cluster:
            server = Server(BINARY, backend="tigerbeetle",
                            args=["--tb-addresses", cluster.address]).start()
            try:
                self.assertTrue(wait_until(lambda: server.request("GET", "/readyz")[0] == 200,
                                           timeout_s=60))
                for i in range(LIMITS):
                    status, _, body = server.put_limit({"key": "frozen:%d" % i,
                                                        "kind": "concurrency", "capacity": 1,
                                                        "timeout_seconds": 60})
                    self.assertEqual(status, 200, body)
                status, _, text = server.request("GET", "/metrics")
                self.assertEqual(status, 200)
                self.assertIn('llmlimit_limit_capacity{key="frozen:0"} 1', text)
                self.assertIn("\nllmlimit_usage_unread_limits 0\n", text)
                cluster.pause(0)
                # Nothing can read the usage now: the answer, when it comes
                # (the request's own timeout is far longer than the
                # backend's deadline), has none of it.
                status, _, text = server.request("GET", "/metrics")
                cluster.resume(0)
                self.assertEqual(status, 200)
                self.assertIsNone(re.search(r"^llmlimit_limit_\w+\{", text, re.MULTILINE))
                self.assertIn("\nllmlimit_usage_unread_limits %d\n" % LIMITS, text)
                self.assertIn("llmlimit_requests_total{", text)  # the rest is all there
                self.assertTrue(wait_until(lambda: "\nllmlimit_usage_unread_limits 0\n" in
                                           server.request("GET", "/metrics")[2], timeout_s=60))
            finally:
                cluster.resume(0)
                server.cleanup()


if __name__ == "__main__":
    skip_unless_binary("/metrics with a frozen cluster", exit_code=77)
    unittest.main()
