"""The direct path (docs/architecture.md, "The direct path"): a plain POST of
the data path, whole in the socket, is served by llmlimitd's own workers;
anything else hands the connection, its request unread, to libmicrohttpd.
Checked through llmlimit_http_direct_requests_total and
llmlimit_http_direct_handovers_total, and by the answers themselves:

- a reserve is served direct, and its answer carries what libmicrohttpd's
  would (status, body, Content-Type, Retry-After on a denial);
- pipelined requests are answered in order, on the direct path;
- a request that arrives in pieces is answered, whatever the pauses between
  them (which path serves it depends on how soon the worker sees the rest,
  that is on the scheduler, so it is not asserted);
- a head over the direct path's 4 KiB, a chunked body, Expect:
  100-continue and a GET each hand the connection over, and the request is
  answered as before; a reserve after the hand-over is answered on the same
  connection;
- Connection: close is answered with Connection: close, then end of file;
- a client that pipelines thousands of requests and reads nothing for a
  while gets every answer, whole and in order, once it reads (which path
  serves them, and when, depends on how fast this machine is, so it is not
  asserted);
- a direct connection left idle is closed at the request deadline;
- a client that pipelines reserves and never reads is dropped once its
  answers have not moved for the connection timeout, while others are
  served.

The backend comes from --backend (default memory; sqlite answers from
another thread, so the answers there go through the workers' queue)."""

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest

from harness import Server, backend_from_argv, binary_from_argv

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

KEY = "direct:rpm"
SMALL = "direct:small"


def counts(server):
    """(served direct, connections handed over) from /metrics."""
    status, _, text = server.request("GET", "/metrics")
    assert status == 200, status
    found = {}
    for line in text.splitlines():
        for name in ("llmlimit_http_direct_requests_total",
                     "llmlimit_http_direct_handovers_total"):
            if line.startswith(name + " "):
                found[name] = int(line.split()[1])
    return (found["llmlimit_http_direct_requests_total"],
            found["llmlimit_http_direct_handovers_total"])


def post(path, body, extra=""):
    data = json.dumps(body).encode()
    head = ("POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            "%sContent-Length: %d\r\n\r\n" % (path, extra, len(data)))
    return head.encode() + data


def reserve_bytes(lease, key=KEY, amount=1, extra=""):
    return post("/v1/reserve", {"lease_id": lease, "requirements": [{"key": key,
                                                                    "amount": amount}]},
                extra)


class Reader:
    """Reads HTTP/1.1 answers (Content-Length bodies) off a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("the server closed the connection")
        self.buffer += data

    def answer(self):
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, json.loads(body) if body else None

    def at_end(self, timeout_s):
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False


class Direct(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="llmlimit-direct-")
        cls.server = Server(BINARY, backend=BACKEND, data_dir=cls.directory,
                            args=["--request-timeout-seconds", "2"]).start()
        for key, capacity in ((KEY, 10 ** 9), (SMALL, 1)):
            status, _, body = cls.server.put_limit({"key": key, "kind": "rolling",
                                                    "capacity": capacity,
                                                    "window_seconds": 3600})
            assert status == 200, body

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        self.addCleanup(sock.close)
        return sock, Reader(sock)

    def lease(self):
        return "direct-%s-%d" % (self.id().rsplit(".", 1)[1], time.monotonic_ns())

    def test_reserve_served_direct_answers_as_libmicrohttpd_does(self):
        sock, reader = self.connect()
        served, handed = counts(self.server)
        first = self.lease()
        sock.sendall(reserve_bytes(first, SMALL))
        status, headers, body = reader.answer()
        self.assertEqual(status, 200)
        self.assertTrue(body["allowed"])
        self.assertEqual(headers["content-type"], "application/json")
        self.assertIn("date", headers)
        sock.sendall(reserve_bytes(self.lease(), SMALL))  # over the capacity of 1
        direct = reader.answer()
        self.assertEqual(counts(self.server), (served + 2, handed))
        # The same denial through libmicrohttpd (Expect hands the
        # connection over; the answer to it is 100 Continue first).
        other, other_reader = self.connect()
        other.sendall(reserve_bytes(self.lease(), SMALL, extra="Expect: 100-continue\r\n"))
        self.assertEqual(other_reader.answer()[0], 100)
        served_mhd = other_reader.answer()
        self.assertEqual(counts(self.server)[1], handed + 1)
        for answer in (direct, served_mhd):
            status, headers, body = answer
            self.assertEqual(status, 200)
            self.assertFalse(body["allowed"])
            self.assertEqual(body["denied_keys"], [SMALL])
            self.assertGreaterEqual(int(headers["retry-after"]), 1)
        self.assertEqual(set(direct[1]), set(served_mhd[1]))
        self.assertEqual(set(direct[2]), set(served_mhd[2]))
        self.assertEqual(self.server.release(first)[0], 200)

    def test_pipelined_requests_answered_in_order(self):
        sock, reader = self.connect()
        served, handed = counts(self.server)
        lease = self.lease()
        sock.sendall(reserve_bytes(lease, amount=1) + reserve_bytes(lease, amount=2) +
                     post("/v1/release", {"lease_id": lease}))
        status, _, body = reader.answer()
        self.assertEqual((status, body["allowed"]), (200, True))
        status, _, body = reader.answer()
        self.assertEqual((status, body["error"]), (409, "lease_conflict"))
        status, _, body = reader.answer()
        self.assertEqual((status, body), (200, {"ok": True}))
        self.assertEqual(counts(self.server), (served + 3, handed))

    def test_what_is_not_plain_goes_to_libmicrohttpd(self):
        for case in ("a head over 4 KiB", "chunked", "expect"):
            with self.subTest(case=case):
                sock, reader = self.connect()
                _, handed = counts(self.server)
                lease = self.lease()
                whole = reserve_bytes(lease)
                if case == "a head over 4 KiB":
                    sock.sendall(reserve_bytes(lease, extra="X-Filler: %s\r\n" % ("f" * 5000)))
                elif case == "chunked":
                    body = whole.split(b"\r\n\r\n", 1)[1]
                    sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: t\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n" +
                                 b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
                else:
                    sock.sendall(reserve_bytes(lease, extra="Expect: 100-continue\r\n"))
                    self.assertEqual(reader.answer()[0], 100)
                status, _, body = reader.answer()
                self.assertEqual((status, body["allowed"]), (200, True))
                self.assertEqual(counts(self.server)[1], handed + 1)
                # The connection stays libmicrohttpd's, and keeps working.
                sock.sendall(post("/v1/release", {"lease_id": lease}))
                self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_a_request_in_pieces(self):
        """A request in five pieces is answered, with pauses shorter and longer
        than the worker's 20 ms wait for the rest (LANE_PARTIAL_MS), and the
        connection serves on; all stay well within the 2 s request deadline."""
        for pause_s in (0.001, 0.02, 0.2):
            with self.subTest(pause_s=pause_s):
                sock, reader = self.connect()
                lease = self.lease()
                whole = reserve_bytes(lease)
                head_end = whole.index(b"\r\n\r\n")
                for piece in (whole[:3], whole[3:20], whole[20:head_end + 1],
                              whole[head_end + 1:-5], whole[-5:]):
                    sock.sendall(piece)
                    time.sleep(pause_s)
                status, _, body = reader.answer()
                self.assertEqual((status, body["allowed"]), (200, True))
                sock.sendall(post("/v1/release", {"lease_id": lease}))
                self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_mixed_routes_on_one_connection(self):
        sock, reader = self.connect()
        served, handed = counts(self.server)
        lease = self.lease()
        sock.sendall(reserve_bytes(lease, amount=5))
        self.assertEqual(reader.answer()[0], 200)
        sock.sendall(b"GET /v1/usage/" + KEY.replace(":", "%3A").encode() +
                     b" HTTP/1.1\r\nHost: t\r\n\r\n")
        status, _, usage = reader.answer()
        self.assertEqual(status, 200)
        self.assertGreaterEqual(usage["reserved"], 5)
        sock.sendall(post("/v1/release", {"lease_id": lease}))
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        self.assertEqual(counts(self.server), (served + 1, handed + 1))

    def test_connection_close_is_honoured(self):
        sock, reader = self.connect()
        sock.sendall(reserve_bytes(self.lease(), extra="Connection: close\r\n"))
        status, headers, _ = reader.answer()
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("connection"), "close")
        self.assertTrue(reader.at_end(5))

    def test_a_client_that_reads_late_gets_every_answer(self):
        """3,000 pipelined requests read only after a pause: every answer comes,
        whole and in order. Every other request names a key that does not
        exist, so its answer names its position; the others reserve (on
        sqlite, through the writer thread, so their answers are ready later
        than the denials behind them)."""
        sock = socket.socket()
        # A small receive buffer: the answers fill it well before the pause ends.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect(("127.0.0.1", self.server.port))
        self.addCleanup(sock.close)
        reader = Reader(sock)
        count = 3000
        prefix = self.lease()

        def request(i):
            if i % 2:
                return reserve_bytes("%s-%d" % (prefix, i), key="direct:late:%d" % i)
            return reserve_bytes("%s-%d" % (prefix, i))
        requests = b"".join(request(i) for i in range(count))
        failed = []

        def send():
            try:
                sock.sendall(requests)
            except OSError as error:
                failed.append(error)
        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(1.0)  # reads nothing meanwhile
        for i in range(count):
            status, _, body = reader.answer()
            if i % 2:
                key = "direct:late:%d" % i
                self.assertEqual((status, body["allowed"], body["error"], body["denied_keys"]),
                                 (200, False, "unknown_limit_key: " + key, [key]), i)
            else:
                self.assertEqual((status, body["allowed"]), (200, True), i)
        sender.join()
        self.assertEqual(failed, [])
        self.assertEqual(reader.buffer, b"")  # nothing more than the answers
        sock.sendall(post("/v1/release", {"lease_id": "%s-%d" % (prefix, count - 2)}))
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_idle_direct_connection_closed_at_the_deadline(self):
        """Closed by the 2 s request deadline: not long before it, and not never
        (the upper bound leaves a busy machine room to be late)."""
        sock, reader = self.connect()
        lease = self.lease()
        started = time.monotonic()
        sock.sendall(reserve_bytes(lease))
        self.assertEqual(reader.answer()[0], 200)
        self.assertTrue(reader.at_end(30))
        waited = time.monotonic() - started
        self.assertGreaterEqual(waited, 1.5)
        self.assertLess(waited, 20.0)
        self.assertEqual(self.server.release(lease)[0], 200)


class StalledReader(unittest.TestCase):
    TIMEOUT_S = 2

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="llmlimit-direct-")
        self.server = Server(BINARY, backend=BACKEND, data_dir=self.directory,
                             args=["--connection-timeout-seconds", str(self.TIMEOUT_S)]).start()
        status, _, body = self.server.put_limit({"key": KEY, "kind": "rolling",
                                                 "capacity": 10 ** 9, "window_seconds": 3600})
        self.assertEqual(status, 200, body)

    def tearDown(self):
        self.server.stop()
        self.server.cleanup()
        shutil.rmtree(self.directory, ignore_errors=True)

    def open_fds(self):
        return len(os.listdir("/proc/%d/fd" % self.server.process.pid))

    def test_a_client_that_never_reads_is_dropped(self):
        served, _ = counts(self.server)
        baseline = self.open_fds()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", self.server.port))
        self.addCleanup(sock.close)
        requests = b"".join(reserve_bytes("stall-%d" % i) for i in range(20000))

        def send():
            try:
                sock.sendall(requests)
            except OSError:
                pass  # the server dropped the connection first
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        # Served until the answers fill the socket, then stalled: `moved` is
        # the last poll before the count last changed, so the server's last
        # progress on this connection came after it.
        last, moved = None, time.monotonic()
        give_up = moved + 60
        while time.monotonic() < give_up:
            polled = time.monotonic()
            time.sleep(0.3)
            now = counts(self.server)[0]
            if now == last:
                break
            last, moved = now, polled
        else:
            self.fail("the server never stopped serving a client that does not read")
        self.assertGreater(last, served)
        # Others are served meanwhile.
        self.assertEqual(self.server.reserve("stall-other", [{"key": KEY, "amount": 1}])[0], 200)
        self.assertEqual(self.open_fds(), baseline + 1)
        deadline = time.monotonic() + self.TIMEOUT_S + 30
        while self.open_fds() > baseline and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.open_fds(), baseline, "the stalled connection was not dropped")
        # Not before the timeout (less a second for the server's coarse timer).
        self.assertGreaterEqual(time.monotonic() - moved, self.TIMEOUT_S - 1)


if __name__ == "__main__":
    unittest.main()
