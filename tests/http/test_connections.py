"""llmlimitd's own HTTP/1.1 server (src/http, docs/architecture.md "HTTP"):
what a connection does, checked by the answers themselves.

- every request gets its answer, in order, whatever the route and however
  the bytes arrive: pipelined, in pieces, a request of exactly the size of a
  read followed by another in the same write;
- a client that reads late gets every answer, in order;
- Connection: close is answered with Connection: close, then end of file,
  and the whole answer reaches a slow reader even when a stray byte follows
  the request (the server shuts down writing and drains before it closes);
- an idle connection is closed at the request deadline; a client that never
  reads its answers is dropped after the connection timeout, while others
  are served;
- HTTP/1.0, chunked bodies, Expect: 100-continue, HEAD are served.

The backend comes from --backend (default memory; sqlite answers from
another thread, so its answers go through the workers' wake queue)."""

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest

from harness import Server, backend_from_argv, binary_from_argv, wait_until

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

KEY = "conn:rpm"
SMALL = "conn:small"


def requests_served(server):
    """llmlimit_http_requests_total from /metrics (the GET /metrics that asks included)."""
    status, _, text = server.request("GET", "/metrics")
    assert status == 200, status
    for line in text.splitlines():
        if line.startswith("llmlimit_http_requests_total "):
            return int(line.split()[1])
    raise AssertionError("llmlimit_http_requests_total missing")


def post(path, body, extra=""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
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

    def answer(self, head_only=False):
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(headers.get("content-length", "0"))
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


class Connections(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="llmlimit-conn-")
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
        return "conn-%s-%d" % (self.id().rsplit(".", 1)[1], time.monotonic_ns())

    def test_reserve_answer_has_its_headers(self):
        """A reserve's answer: status, JSON body, Content-Type, Date; a denial's Retry-After."""
        sock, reader = self.connect()
        first = self.lease()
        sock.sendall(reserve_bytes(first, SMALL))
        status, headers, body = reader.answer()
        self.assertEqual(status, 200)
        self.assertTrue(body["allowed"])
        self.assertEqual(headers["content-type"], "application/json")
        self.assertIn("date", headers)
        sock.sendall(reserve_bytes(self.lease(), SMALL))  # over the capacity of 1
        status, headers, body = reader.answer()
        self.assertEqual(status, 200)
        self.assertFalse(body["allowed"])
        self.assertEqual(body["denied_keys"], [SMALL])
        self.assertGreaterEqual(int(headers["retry-after"]), 1)
        self.assertEqual(self.server.release(first)[0], 200)

    def test_pipelined_requests_answered_in_order(self):
        """Three pipelined requests on one connection: three answers, in order."""
        sock, reader = self.connect()
        before = requests_served(self.server)
        lease = self.lease()
        sock.sendall(reserve_bytes(lease, amount=1) + reserve_bytes(lease, amount=2) +
                     post("/v1/release", {"lease_id": lease}))
        status, _, body = reader.answer()
        self.assertEqual((status, body["allowed"]), (200, True))
        status, _, body = reader.answer()
        self.assertEqual((status, body["error"]), (409, "lease_conflict"))
        status, _, body = reader.answer()
        self.assertEqual((status, body), (200, {"ok": True}))
        self.assertGreaterEqual(requests_served(self.server), before + 3)

    def test_a_request_of_exactly_a_read_and_one_behind_it(self):
        """A request that fills a read exactly (4096 and 16384 bytes, and one byte either
        side), with a second one behind it in the same write: both are answered."""
        for size in (4095, 4096, 4097, 16383, 16384, 16385):
            with self.subTest(size=size):
                sock, reader = self.connect()
                lease = self.lease()
                body = json.dumps({"lease_id": lease,
                                   "requirements": [{"key": KEY, "amount": 1}]}).encode()
                first = post("/v1/reserve", body)
                padded = body + b" " * (size - len(first))
                first = post("/v1/reserve", padded)
                if len(first) != size:  # the Content-Length grew a digit
                    first = post("/v1/reserve", padded[:len(padded) - (len(first) - size)])
                self.assertEqual(len(first), size)
                sock.sendall(first + post("/v1/release", {"lease_id": lease}))
                self.assertEqual(reader.answer()[0], 200)
                self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_what_libmicrohttpd_used_to_take_is_served(self):
        """A head over 4 KiB, a chunked body, Expect: 100-continue, HTTP/1.0 and HEAD are
        answered, and the connection goes on."""
        for case in ("large head", "chunked", "expect", "http/1.0"):
            with self.subTest(case=case):
                sock, reader = self.connect()
                lease = self.lease()
                whole = reserve_bytes(lease)
                if case == "large head":
                    sock.sendall(reserve_bytes(lease, extra="X-Filler: %s\r\n" % ("f" * 5000)))
                elif case == "chunked":
                    body = whole.split(b"\r\n\r\n", 1)[1]
                    sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: t\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n" +
                                 b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
                elif case == "expect":
                    sock.sendall(whole.split(b"\r\n\r\n")[0] +
                                 b"\r\nExpect: 100-continue\r\n\r\n")
                    self.assertEqual(reader.answer(head_only=True)[0], 100)
                    sock.sendall(whole.split(b"\r\n\r\n", 1)[1])
                else:
                    sock.sendall(whole.replace(b"HTTP/1.1", b"HTTP/1.0", 1)
                                 .replace(b"Host: test\r\n", b"Connection: keep-alive\r\n"))
                status, headers, body = reader.answer()
                self.assertEqual((status, body["allowed"]), (200, True))
                sock.sendall(post("/v1/release", {"lease_id": lease}))
                self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        sock, reader = self.connect()
        sock.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
                     b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        status, headers, _ = reader.answer(head_only=True)
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-length"], str(len(b'{"ok":true}\n')))
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_http10_without_keep_alive_is_closed_after_its_answer(self):
        """An HTTP/1.0 request without keep-alive: answered, then the connection closes."""
        sock, reader = self.connect()
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        status, headers, body = reader.answer()
        self.assertEqual((status, body), (200, {"ok": True}))
        self.assertTrue(reader.at_end(5))

    def test_a_request_in_pieces(self):
        """A request in five pieces, 1 ms or 200 ms apart: answered once whole."""
        for pause_s in (0.001, 0.2):
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
        """A reserve, a GET of its usage and a release on one connection."""
        sock, reader = self.connect()
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

    def test_connection_close_is_honoured(self):
        """Connection: close: the answer says so, then end of file."""
        sock, reader = self.connect()
        sock.sendall(reserve_bytes(self.lease(), extra="Connection: close\r\n"))
        status, headers, _ = reader.answer()
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("connection"), "close")
        self.assertTrue(reader.at_end(5))

    def test_connection_close_with_a_stray_byte_delivers_the_whole_answer(self):
        """Connection: close and one stray byte after the request, read slowly: every byte
        of a large answer arrives (no reset over unread input)."""
        for i in range(60):
            status, _, body = self.server.put_limit(
                {"key": "conn:big:%03d" % i, "kind": "concurrency", "capacity": 1,
                 "timeout_seconds": 1, "description": "d" * 1000})
            self.assertEqual(status, 200, body)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", self.server.port))
        self.addCleanup(sock.close)
        sock.sendall(b"GET /v1/admin/limits HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nX")
        time.sleep(0.5)  # the answer fills the socket; the server has closed its side
        received = b""
        sock.settimeout(10)
        while True:
            data = sock.recv(1024)
            if not data:
                break
            received += data
            time.sleep(0.001)
        head, body = received.split(b"\r\n\r\n", 1)
        length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")][0])
        self.assertGreater(length, 60000)
        self.assertEqual(len(body), length)
        self.assertEqual(len(json.loads(body)["limits"]) >= 60, True)
        for i in range(60):
            self.server.request("DELETE", "/v1/admin/limits/conn:big:%03d" % i)

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
                return reserve_bytes("%s-%d" % (prefix, i), key="conn:late:%d" % i)
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
                key = "conn:late:%d" % i
                self.assertEqual((status, body["allowed"], body["error"], body["denied_keys"]),
                                 (200, False, "unknown_limit_key: " + key, [key]), i)
            else:
                self.assertEqual((status, body["allowed"]), (200, True), i)
        sender.join()
        self.assertEqual(failed, [])
        self.assertEqual(reader.buffer, b"")  # nothing more than the answers
        sock.sendall(post("/v1/release", {"lease_id": "%s-%d" % (prefix, count - 2)}))
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_idle_connection_closed_at_the_deadline(self):
        """An idle keep-alive connection is closed after the request deadline (2 s here),
        not before."""
        sock, reader = self.connect()
        lease = self.lease()
        sock.sendall(reserve_bytes(lease))
        self.assertEqual(reader.answer()[0], 200)
        started = time.monotonic()
        self.assertTrue(reader.at_end(30))
        self.assertGreaterEqual(time.monotonic() - started, 1.5)
        # On a new connection: the harness's own has been idle as long and
        # may be closed by the same deadline as the release is sent.
        sock, reader = self.connect()
        sock.sendall(post("/v1/release", {"lease_id": lease}))
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))


def raw_answers(sock, timeout_s=5):
    """Every byte the server sends until it closes."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    except (socket.timeout, ConnectionResetError):
        pass
    return data


class OneParser(unittest.TestCase):
    """Every request is read by one parser (src/http/http_head.c), whatever its route:
    framing a front proxy could read differently is refused with one answer, in the
    route's error shape, and the connection closed (docs/hardening.md, "One parser")."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="llmlimit-conn-")
        cls.server = Server(BINARY, backend=BACKEND, data_dir=cls.directory,
                            args=["--max-body-bytes", "65536"]).start()
        status, _, body = cls.server.put_limit({"key": KEY, "kind": "rolling",
                                                "capacity": 10 ** 9, "window_seconds": 3600})
        assert status == 200, body

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def exchange(self, data):
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        self.addCleanup(sock.close)
        sock.sendall(data)
        return raw_answers(sock)

    def refused_once(self, data, status, code, openai=False):
        raw = self.exchange(data)
        self.assertEqual(raw.count(b"HTTP/1.1 "), 1, raw)  # one status line, never two
        head, body = raw.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 %d " % status), head)
        self.assertIn(b"\r\nConnection: close", head)
        self.assertIn(b"\r\nContent-Type: application/json", head)
        answer = json.loads(body)
        if openai:
            self.assertEqual(answer["error"]["code"], code, answer)
            self.assertIn(answer["error"]["type"], ("invalid_request_error", "server_error"))
        else:
            self.assertTrue(answer["error"].startswith(code), answer)
        return answer

    def test_ambiguous_framing_is_one_400(self):
        """Two Content-Lengths (equal or not), a signed or hex length, a space before the
        colon, Content-Length beside chunked, chunked then length: one 400 each."""
        body = b'{"lease_id":"p","requirements":[{"key":"conn:rpm","amount":1}]}'
        cases = [
            b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(body), len(body)),
            b"Content-Length: %d\r\nContent-Length: 5\r\n" % len(body),
            b"Content-Length: +%d\r\n" % len(body),
            b"Content-Length: 0x40\r\n",
            b"Content-Length : %d\r\n" % len(body),
            b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(body),
            b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(body),
            b"X-Folded: a\r\n b\r\nContent-Length: %d\r\n" % len(body),
        ]
        for extra in cases:
            for path, openai in ((b"/v1/reserve", False), (b"/v1/chat/completions", True)):
                with self.subTest(extra=extra, path=path):
                    self.refused_once(b"POST " + path + b" HTTP/1.1\r\nHost: t\r\n" + extra +
                                      b"\r\n" + body, 400, "bad_request", openai)

    def test_a_huge_length_is_one_413_in_the_route_shape(self):
        """A Content-Length of 2^64 is 413 body_too_large, OpenAI-shaped on a gateway route,
        without reading the body."""
        for path, openai in ((b"/v1/reserve", False), (b"/v1/chat/completions", True)):
            with self.subTest(path=path):
                answer = self.refused_once(b"POST " + path + b" HTTP/1.1\r\nHost: t\r\n"
                                           b"Content-Length: 18446744073709551616\r\n\r\n",
                                           413, "body_too_large", openai)
                if openai:
                    self.assertIn("larger", answer["error"]["message"])

    def test_blanks_around_values_are_read_the_same_everywhere(self):
        """A tab after the bearer token and blanks after a length: accepted on every route,
        as RFC 9110 reads them (before, one path took them and the other refused)."""
        body = json.dumps({"lease_id": "blanks-%d" % time.monotonic_ns(),
                           "requirements": [{"key": KEY, "amount": 1}]}).encode()
        for method, path, payload in ((b"POST", b"/v1/reserve", body),
                                      (b"GET", b"/v1/usage/conn%3Arpm", b"")):
            with self.subTest(path=path):
                raw = self.exchange(method + b" " + path + b" HTTP/1.1\r\nHost: t\r\n"
                                    b"Authorization: Bearer anything\t\r\n"
                                    b"Content-Length: %d \t\r\nConnection: close\r\n\r\n"
                                    % len(payload) + payload)
                self.assertTrue(raw.startswith(b"HTTP/1.1 200 "), raw[:200])

    def test_http11_without_host_is_one_400(self):
        """An HTTP/1.1 request without Host: one 400 naming Host (RFC 9112 section 3.2), in
        the route's shape; HTTP/1.0 needs none."""
        answer = self.refused_once(b"GET /healthz HTTP/1.1\r\n\r\n", 400, "bad_request")
        self.assertIn("Host", answer["error"])
        answer = self.refused_once(b"POST /v1/chat/completions HTTP/1.1\r\n"
                                   b"Content-Length: 2\r\n\r\n{}", 400, "bad_request", True)
        self.assertIn("Host", answer["error"]["message"])
        raw = self.exchange(b"GET /healthz HTTP/1.0\r\n\r\n")
        self.assertTrue(raw.startswith(b"HTTP/1.0 200 "), raw)

    def test_absolute_form_targets_are_served(self):
        """A target of the absolute form (http://host/path, which RFC 9112 section 3.2.2 says a
        server must accept) is served as its path: any case of scheme, a port, a query, a
        body; no path at all is "/". An authority that is empty or holds userinfo, another
        scheme, or a single slash is one 400."""
        body = json.dumps({"lease_id": "absolute-%d" % time.monotonic_ns(),
                           "requirements": [{"key": KEY, "amount": 1}]}).encode()
        served = [
            (b"GET http://t/healthz", b"", {"ok": True}),
            (b"GET HTTPS://T:8080/v1/usage/conn%3Arpm?x=1", b"", {"key": KEY}),
            (b"POST http://t/v1/reserve", body, {"allowed": True}),
            (b"GET http://t", b"", {"service": "llmlimitd"}),
            (b"GET http://t?x=1", b"", {"service": "llmlimitd"}),
        ]
        for line, payload, expected in served:
            with self.subTest(line=line):
                raw = self.exchange(line + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                                    b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
                self.assertTrue(raw.startswith(b"HTTP/1.1 200 "), raw[:300])
                answer = json.loads(raw.split(b"\r\n\r\n", 1)[1])
                for name, value in expected.items():
                    self.assertEqual(answer[name], value, answer)
        for target in (b"http:///healthz", b"ftp://t/healthz", b"http:/healthz",
                       b"http://u@t/healthz", b"healthz"):
            with self.subTest(target=target):
                self.refused_once(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n\r\n", 400,
                                  "bad_request")

    def test_a_nul_before_a_request_is_one_400(self):
        """A NUL byte before a request line: one 400 once the head ends, then the connection
        closed (docs/hardening.md)."""
        answer = self.refused_once(b"\x00GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", 400,
                                   "bad_request")
        self.assertIn("method", answer["error"])

    def test_refused_heads_do_not_flood_the_log(self):
        """200 malformed requests write no log line each: the log does not grow with them."""
        before = len(self.server.stderr_lines)
        for _ in range(200):
            self.exchange(b"POST /v1/reserve HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\n"
                          b"hello")
        time.sleep(0.5)  # whatever the server would log has been read by now
        self.assertLess(len(self.server.stderr_lines) - before, 10)
        status, _, body = self.server.request("GET", "/healthz")
        self.assertEqual(status, 200)


class WhereAHeadEnds(unittest.TestCase):
    """Where a head ends is one rule, read by the connection and the parser alike
    (src/http/http_head.c, http_head_end): up to four empty lines before a request are
    skipped (RFC 9112 section 2.2), then the head runs to its first empty line. Before,
    the two disagreed and four bytes stopped the server (an assert in http_conn.c)."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="llmlimit-conn-")
        cls.server = Server(BINARY, backend=BACKEND, data_dir=cls.directory).start()
        status, _, body = cls.server.put_limit({"key": KEY, "kind": "rolling",
                                                "capacity": 10 ** 9, "window_seconds": 3600})
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

    def assert_alive(self):
        self.assertIsNone(self.server.process.poll(), "llmlimitd died:\n%s"
                          % self.server.stderr_tail())
        sock, reader = self.connect()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))

    def test_empty_lines_before_a_request_are_skipped(self):
        """Two CRLFs alone (the four bytes that stopped the server), then a request on the
        same connection; one to four CRLFs and a request in one write: each answered 200."""
        sock, reader = self.connect()
        sock.sendall(b"\r\n\r\n")
        time.sleep(0.2)  # read on their own, as a client pausing would have them
        self.assert_alive()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        for count in range(1, 5):
            with self.subTest(count=count):
                sock.sendall(b"\r\n" * count + b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        sock, reader = self.connect()
        sock.sendall(b"\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        self.assertTrue(reader.at_end(10), "empty lines then a close: closed without an answer")
        self.assert_alive()

    def test_a_crlf_after_a_body_is_skipped(self):
        """A CRLF after a POST body (some old clients send one): the request is answered,
        and so is the next on the connection; a CRLF then a close ends it quietly."""
        sock, reader = self.connect()
        lease = "crlf-%d" % time.monotonic_ns()
        sock.sendall(reserve_bytes(lease) + b"\r\n")
        status, _, body = reader.answer()
        self.assertEqual((status, body["allowed"]), (200, True))
        sock.sendall(post("/v1/release", {"lease_id": lease}) + b"\r\n" +
                     b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n\r\n")
        self.assertEqual(reader.answer()[:3:2], (200, {"ok": True}))
        sock.shutdown(socket.SHUT_WR)
        self.assertTrue(reader.at_end(10))
        self.assert_alive()

    def test_a_head_ending_in_a_bare_lf_is_one_400(self):
        """A last field line followed by a bare LF, or a request line alone followed by
        one: one 400 naming the bare LF, then the connection closed."""
        for data in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\n",
                     b"GET /healthz HTTP/1.1\r\n\n", b"\n", b"\r\n\n"):
            with self.subTest(data=data):
                sock, reader = self.connect()
                sock.sendall(data)
                raw = raw_answers(sock)
                self.assertEqual(raw.count(b"HTTP/1.1 "), 1, raw)
                self.assertTrue(raw.startswith(b"HTTP/1.1 400 "), raw)
                self.assertIn(b"bare LF", raw)
                self.assert_alive()

    def test_past_four_empty_lines_is_one_400(self):
        """Five empty lines before a request: 400, the connection closed."""
        sock, reader = self.connect()
        sock.sendall(b"\r\n" * 5 + b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        raw = raw_answers(sock)
        self.assertEqual(raw.count(b"HTTP/1.1 "), 1, raw)
        self.assertTrue(raw.startswith(b"HTTP/1.1 400 "), raw)
        self.assert_alive()


class StalledReader(unittest.TestCase):
    TIMEOUT_S = 2

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="llmlimit-conn-")
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
        """Pipelined reserves never read: served until the answers fill the socket, others
        served meanwhile, the connection dropped once its answers stop moving."""
        served = requests_served(self.server)
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
        # Served until the answers fill the socket, then stalled: only the
        # GET /metrics of each look counts from then on.
        last = None
        while True:
            time.sleep(0.3)
            now = requests_served(self.server)
            if last is not None and now <= last + 1:
                break
            last = now
        stalled = time.monotonic()
        self.assertGreater(last, served + 1)
        # Others are served meanwhile.
        self.assertEqual(self.server.reserve("stall-other", [{"key": KEY, "amount": 1}])[0], 200)
        self.assertEqual(self.open_fds(), baseline + 1)
        dropped = wait_until(lambda: self.open_fds() <= baseline,
                             timeout_s=self.TIMEOUT_S + 30)
        self.assertTrue(dropped, "the stalled connection was not dropped")
        self.assertGreaterEqual(time.monotonic() - stalled, self.TIMEOUT_S - 1)


if __name__ == "__main__":
    unittest.main()
