"""A waiting reserve whose client leaves holds nothing afterwards, and a retry of
its lease id (what docs/semantics.md tells a client to do after an unknown
outcome) is never answered allowed for a lease that holds nothing: allowed means
held (usage counts it, and its complete answers 200), or it is denied, or it is
a new reserve, or the lease was released for the client that left and the
retry is told so (409 already_finalized). The history checker's long runs find the same thing now and then
(tests/checker/check.py, "cancel"); this test makes the race happen every time
it can: each client closes its socket right after sending, while the reserve's
first attempt may still be in flight (on sqlite, a group commit).

Usage: test_left_mid_wait.py --binary build/llmlimitd [--backend memory]"""

import json
import os
import socket
import sys
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
from harness import Server, backend_from_argv, binary_from_argv, wait_until  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv()
ROUNDS = 30
KEY = "left:slots"


def waiting(server):
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    for line in text.splitlines():
        if line.startswith("llmlimit_wait_waiting "):
            return int(float(line.split()[1]))
    raise AssertionError("llmlimit_wait_waiting missing")


def send_and_leave(server, lease_id, wait_ms):
    body = json.dumps({"lease_id": lease_id, "wait_ms": wait_ms,
                       "requirements": [{"key": KEY, "amount": 1}]}).encode()
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                     b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


class LeftMidWait(unittest.TestCase):
    def test_a_retry_is_never_told_allowed_without_a_hold(self):
        """30 waiting reserves on a free 100-slot limit, each client gone right after
        sending; then the same lease id again, plain: if allowed, it is held (usage
        counts it) and its complete answers 200, never 409 already_finalized; if the
        server released it for the client that left, the retry is 409 already_finalized."""
        with Server(BINARY, backend=BACKEND) as server:
            status, _, body = server.put_limit({"key": KEY, "kind": "concurrency",
                                                "capacity": 100, "timeout_seconds": 300})
            self.assertEqual(status, 200, body)
            phantoms = []
            released = 0
            for _ in range(ROUNDS):
                lease_id = str(uuid.uuid4())
                send_and_leave(server, lease_id, 60000)
                self.assertTrue(wait_until(lambda: waiting(server) == 0, timeout_s=30))
                status, _, answer = server.reserve(lease_id, {KEY: 1})
                if status == 409:  # released for the client that left: it holds nothing
                    self.assertEqual(answer["error"], "already_finalized", answer)
                    released += 1
                    continue
                self.assertEqual(status, 200, answer)
                if not answer["allowed"]:
                    continue
                held = server.usage(KEY)[2]["reserved"]
                completed, _, result = server.complete(lease_id, {KEY: 1})
                if completed != 200:
                    phantoms.append((lease_id, held, completed, result))
            self.assertEqual(server.usage(KEY)[2]["reserved"], 0)
        self.assertEqual(phantoms, [], "retries answered allowed for a lease the server had "
                         "released for the client that left: (lease, reserved after the "
                         "retry, complete status, answer)")


if __name__ == "__main__":
    unittest.main()
