"""Hostile clients against the real llmlimitd: slow headers and slow bodies
(slowloris), 2000 idle connections, the connection limit, pipelined
garbage, connections dropped mid-request, a client that never reads its
answers, oversized bodies and headers. While each attack runs, a well-behaved
client keeps reserving on fresh connections; every one of its reserves must be
answered (allowed) within PROBE_LATENCY_S_MAX (seconds, where a reserve takes
milliseconds: only a server stalled by the attack misses it). After the attack the server
must still be alive, its open file descriptors back near where they started,
and no truncated request may have reserved anything. Run on every local
backend: on sqlite a reserve's connection is suspended until its commit,
so dropped and never-reading clients meet the suspend/resume path too."""

import json
import os
import random
import socket
import struct
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server, backend_from_argv, binary_from_argv, wait_until  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

PROBE_LATENCY_S_MAX = 2.0
PROBE_INTERVAL_S = 0.05
ATTACK_S_MIN = 1.0  # the prober runs at least this long during each attack
PROBES_MIN = 5  # ... and until it has made this many reserves, however slow the machine
TIMEOUT_S = 2  # --connection-timeout-seconds of the servers below
# How late after TIMEOUT_S the server may close an idle socket: a deadline
# that proves the close comes from the timeout, with room for a busy machine.
CLOSE_SLACK_S = 10.0
FD_SLACK = 16  # descriptors the server may keep beyond its idle count (logs, sqlite, ...)
KEY = "hostile:rpm"
LIMIT = {"key": KEY, "kind": "rolling", "capacity": 1000000000, "window_seconds": 60}


def request_bytes(method, path, body=b"", extra=b""):
    head = b"%s %s HTTP/1.1\r\nHost: llmlimitd\r\n" % (method.encode(), path.encode())
    if body or method in ("POST", "PUT"):
        head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    return head + extra + b"\r\n" + body


def reserve_bytes(lease_id, amount=1):
    body = b'{"lease_id":"%s","requirements":[{"key":"%s","amount":%d}]}' % (
        lease_id.encode(), KEY.encode(), amount)
    return request_bytes("POST", "/v1/reserve", body)


def read_reply(sock, timeout_s=5.0):
    """Reads one HTTP reply (Content-Length framed); returns (status, body)
    or (None, b"") if the server closed the connection first."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, rest[:length]


def closed_by_peer(sock, timeout_s):
    """True once the server closes sock (EOF or reset) within timeout_s."""
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (socket.timeout, OSError):
        return False


class Prober(threading.Thread):
    """A well-behaved client: one reserve per fresh connection, every
    PROBE_INTERVAL_S, recording each latency and any failure."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server
        self.latencies = []
        self.failures = []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                with socket.create_connection((self.server.host, self.server.port),
                                              PROBE_LATENCY_S_MAX * 2) as sock:
                    sock.sendall(reserve_bytes(str(uuid.uuid4())))
                    status, body = read_reply(sock, PROBE_LATENCY_S_MAX * 2)
                if status != 200 or b'"allowed":true' not in body.replace(b" ", b""):
                    self.failures.append("status %s: %r" % (status, body[:200]))
            except OSError as error:
                self.failures.append("%s after %.2f s" % (error, time.monotonic() - started))
            self.latencies.append(time.monotonic() - started)
            self.stopping.wait(PROBE_INTERVAL_S)

    def stop(self):
        self.stopping.set()
        self.join(10)
        return self


def count_answers(sock):
    """The 200 answers a socket still delivers until it is closed (or 1 s of
    silence, or an error)."""
    answers = 0
    sock.settimeout(1)
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            answers += chunk.count(b"HTTP/1.1 200")
    except OSError:
        pass
    return answers


def open_fds(server):
    return len(os.listdir("/proc/%d/fd" % server.process.pid))


def settled_fds(server):
    """Descriptors once the server has closed what our last requests left open."""
    previous = open_fds(server)
    for _ in range(50):
        time.sleep(0.1)
        current = open_fds(server)
        if current == previous:
            return current
        previous = current
    return previous


class HostileCase(unittest.TestCase):
    SERVER_ARGS = ["--max-connections", "256", "--connection-timeout-seconds", str(TIMEOUT_S)]

    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY, backend=BACKEND, args=cls.SERVER_ARGS).start()
        status, _, body = cls.server.put_limit(LIMIT)
        assert status == 200, body
        cls.server.request("GET", "/healthz")
        cls.server._local.conn.close()  # no keep-alive connection of our own to count
        cls.server._local.conn = None
        cls.baseline_fds = settled_fds(cls.server)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        assert code == 0, "llmlimitd exited with %s:\n%s" % (code, cls.server.stderr_text())

    def connect(self):
        return socket.create_connection((self.server.host, self.server.port), 5)

    def under_attack(self, attack, *args):
        """Runs attack(*args) while a Prober runs; checks the prober's record."""
        prober = Prober(self.server)
        prober.start()
        started = time.monotonic()
        try:
            result = attack(*args)
            time.sleep(max(0.0, ATTACK_S_MIN - (time.monotonic() - started)))
            wait_until(lambda: len(prober.latencies) >= PROBES_MIN, timeout_s=60)
        finally:
            prober.stop()
        self.assertEqual(prober.failures, [])
        self.assertGreaterEqual(len(prober.latencies), PROBES_MIN, "the prober hardly ran")
        worst = max(prober.latencies)
        self.assertLess(worst, PROBE_LATENCY_S_MAX, "a reserve took %.2f s" % worst)
        self.assertIsNone(self.server.process.poll(), "llmlimitd died")
        self.probes_allowed = len(prober.latencies)  # each reserved 1 unit
        return result

    def assert_fds_settle(self):
        settled = wait_until(lambda: open_fds(self.server) <= self.baseline_fds + FD_SLACK,
                             timeout_s=TIMEOUT_S + CLOSE_SLACK_S + 5)
        self.assertTrue(settled, "open descriptors: %d, baseline %d" % (
            open_fds(self.server), self.baseline_fds))

    def reserved(self):
        status, _, body = self.server.usage(KEY)
        self.assertEqual(status, 200, body)
        self.server._local.conn.close()
        self.server._local.conn = None
        return body["reserved"]


class SlowClients(HostileCase):
    def trickle(self, sockets, payloads, seconds):
        """Sends each payload one byte at a time, every 0.25 s, for `seconds`."""
        deadline = time.monotonic() + seconds
        position = 0
        while time.monotonic() < deadline:
            for sock, payload in zip(sockets, payloads):
                if position < len(payload):
                    try:
                        sock.send(payload[position:position + 1])
                    except OSError:
                        pass
            position += 1
            time.sleep(0.25)

    def test_slow_headers_do_not_delay_others(self):
        """100 slowloris header senders: a normal reserve still answers in < 2 s."""
        sockets = [self.connect() for _ in range(100)]
        payload = reserve_bytes("slow-headers")
        self.under_attack(self.trickle, sockets, [payload] * len(sockets), 2 * TIMEOUT_S + 1)
        for sock in sockets:
            sock.close()
        self.assert_fds_settle()

    def test_slow_bodies_do_not_delay_others(self):
        """100 clients trickling a 10 KB body: a normal reserve still answers in < 2 s."""
        sockets = [self.connect() for _ in range(100)]
        body = b'{"lease_id":"x","requirements":[' + b" " * 10000 + b"]}"
        head = request_bytes("POST", "/v1/reserve", body)[:-len(body)]
        for sock in sockets:
            sock.sendall(head)
        self.under_attack(self.trickle, sockets, [body] * len(sockets), 2 * TIMEOUT_S + 1)
        for sock in sockets:
            sock.close()
        self.assert_fds_settle()

    def test_stalled_requests_are_closed_after_the_timeout(self):
        """Connections that stop mid-header, mid-body or send nothing are closed by the server."""
        stalls = [b"", b"POST /v1/reserve HTTP/1.1\r\nHost: x\r\n",
                  request_bytes("POST", "/v1/reserve", b"{" * 10)[:-5]]
        sockets = []
        for stall in stalls * 10:
            sock = self.connect()
            sock.sendall(stall)
            sockets.append(sock)
        before = self.reserved()
        started = time.monotonic()
        for sock in sockets:
            remaining = TIMEOUT_S + CLOSE_SLACK_S - (time.monotonic() - started)
            self.assertTrue(closed_by_peer(sock, max(remaining, 0.1)),
                            "a stalled connection was still open after %.1f s"
                            % (time.monotonic() - started))
            sock.close()
        self.assertEqual(self.reserved(), before)  # truncated reserves held nothing
        self.assert_fds_settle()


class ManyConnections(HostileCase):
    SERVER_ARGS = ["--connection-timeout-seconds", str(TIMEOUT_S)]  # default --max-connections
    IDLE = 2000

    def test_two_thousand_idle_connections(self):
        """2000 idle connections: others are served meanwhile, and the idle ones are closed."""
        sockets = self.under_attack(self.open_idle, self.IDLE)
        started = time.monotonic()
        still_open = [s for s in sockets
                      if not closed_by_peer(s, max(0.1, TIMEOUT_S + CLOSE_SLACK_S
                                                   - (time.monotonic() - started)))]
        for sock in sockets:
            sock.close()
        self.assertEqual(len(still_open), 0, "%d idle connections never closed" % len(still_open))
        self.assert_fds_settle()

    def open_idle(self, count):
        sockets = []
        for _ in range(count):
            sockets.append(self.connect())
        time.sleep(1.0)  # the prober runs while all of them are open
        return sockets


class LowDescriptorLimit(Server):
    """llmlimitd started under prlimit with few file descriptors."""
    DESCRIPTORS = 64

    def command(self):
        return ["prlimit", "--nofile=%d:%d" % (self.DESCRIPTORS, self.DESCRIPTORS), "--"] + \
            super().command()


class DescriptorExhaustion(unittest.TestCase):
    CLIENTS = 100  # more than LowDescriptorLimit.DESCRIPTORS

    def test_out_of_descriptors_serves_on_and_accepts_again(self):
        """Out of file descriptors: open connections are served, one warning is logged, and
        once descriptors free up the clients waiting in the listen queue are served."""
        server = LowDescriptorLimit(BINARY, backend=BACKEND).start()
        try:
            sockets = [socket.create_connection((server.host, server.port), 5)
                       for _ in range(self.CLIENTS)]
            # The accepting thread runs into the limit and retries.
            self.assertTrue(wait_until(lambda: any("cannot accept connections for now" in line
                                                   for line in server.stderr_lines)),
                            "the limit was never reached")
            self.assertLessEqual(open_fds(server), LowDescriptorLimit.DESCRIPTORS)
            # The first connections were accepted before the limit: they are served.
            sockets[0].sendall(request_bytes("GET", "/healthz"))
            self.assertEqual(read_reply(sockets[0])[0], 200)
            # The last one waits in the listen queue; freeing descriptors lets it in.
            waiting = sockets.pop()
            for sock in sockets:
                sock.close()
            waiting.sendall(request_bytes("GET", "/healthz"))
            self.assertEqual(read_reply(waiting, 30.0)[0], 200)
            waiting.close()
            # The log is read by another thread: wait for the line, not a moment.
            self.assertTrue(wait_until(lambda: any("accepting connections again" in line
                                                   for line in server.stderr_lines)))
            warnings = [line for line in server.stderr_lines
                        if "cannot accept connections for now" in line]
            self.assertLessEqual(len(warnings), 3, "a warning per retry")
            self.assertIsNone(server.process.poll(), "llmlimitd died")
        finally:
            server.stop()
            server.cleanup()


class ConnectionLimit(HostileCase):
    LIMIT_CONNECTIONS = 32
    SERVER_ARGS = ["--max-connections", str(LIMIT_CONNECTIONS),
                   "--connection-timeout-seconds", str(TIMEOUT_S)]

    def ask_healthz(self, sock, timeout_s):
        """Sends GET /healthz; returns (status or None, seconds waited)."""
        started = time.monotonic()
        try:
            sock.sendall(request_bytes("GET", "/healthz"))
            status, _ = read_reply(sock, timeout_s)
        except OSError:
            status = None
        return status, time.monotonic() - started

    def test_past_the_limit_waits_for_an_idle_timeout(self):
        """Connection max+1 waits in the listen queue and is served once idle ones time out."""
        opened = time.monotonic()  # no idle connection can time out before TIMEOUT_S from here
        idle = [self.connect() for _ in range(self.LIMIT_CONNECTIONS)]
        time.sleep(0.3)
        with self.connect() as extra:
            status, waited = self.ask_healthz(extra, TIMEOUT_S + CLOSE_SLACK_S)
        served_s = time.monotonic() - opened
        self.assertEqual(status, 200, "not served within %.1f s" % waited)
        # (less half a second for the server's timers)
        self.assertGreater(served_s, TIMEOUT_S - 0.5, "served at once: the limit did not apply")
        for sock in idle:
            self.assertTrue(closed_by_peer(sock, TIMEOUT_S + CLOSE_SLACK_S))
            sock.close()
        self.assert_fds_settle()

    def test_trickling_clients_at_the_limit_do_not_lock_others_out(self):
        """Slowloris clients at max-connections that send a byte every 0.5 s are
        closed by the request deadline, so a new client is served."""
        sockets = [self.connect() for _ in range(self.LIMIT_CONNECTIONS)]
        stop = threading.Event()

        def trickle():
            payload = request_bytes("GET", "/healthz", extra=b"X-Slow: 1\r\n" * 1000)
            position = 0
            while not stop.wait(0.5):
                for sock in sockets:
                    try:
                        sock.send(payload[position:position + 1])
                    except OSError:
                        pass
                position += 1

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            with self.connect() as extra:
                status, waited = self.ask_healthz(extra, 3 * TIMEOUT_S + CLOSE_SLACK_S)
        finally:
            stop.set()
            thread.join()
            for sock in sockets:
                sock.close()
        self.assert_fds_settle()
        self.assertEqual(status, 200, "locked out for %.1f s" % waited)


class BadBytes(HostileCase):
    SERVER_ARGS = HostileCase.SERVER_ARGS + ["--max-body-bytes", "65536"]

    def test_pipelined_garbage_answers_then_closes(self):
        """A valid request, then garbage, pipelined: the first is answered, then 400 or close."""
        with self.connect() as sock:
            sock.sendall(reserve_bytes(str(uuid.uuid4())) + b"GARBAGE \x00\xff\r\n\r\n"
                         + reserve_bytes(str(uuid.uuid4())))
            self.assertEqual(read_reply(sock)[0], 200)
            status, _ = read_reply(sock)
            self.assertIn(status, (400, None))
            self.assertTrue(closed_by_peer(sock, TIMEOUT_S + CLOSE_SLACK_S))

    def test_random_garbage_never_kills_the_server(self):
        """500 connections of random bytes (and half-HTTP): the server serves on."""
        rng = random.Random(6)
        templates = [reserve_bytes("garbage"), request_bytes("GET", "/v1/usage/" + KEY),
                     request_bytes("PUT", "/v1/admin/limits", b'{"key":"x"}')]

        def attack():
            for i in range(500):
                template = rng.choice(templates)
                if i % 2:
                    data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 2000)))
                else:  # a real request with a few bytes flipped
                    data = bytearray(template)
                    for _ in range(rng.randint(1, 8)):
                        data[rng.randrange(len(data))] = rng.randrange(256)
                    data = bytes(data)
                with self.connect() as sock:
                    try:
                        sock.sendall(data)
                        sock.shutdown(socket.SHUT_WR)
                        read_reply(sock, 2.0)
                    except OSError:
                        pass

        self.under_attack(attack)
        self.assert_fds_settle()

    def test_bytes_that_once_stopped_the_server(self):
        """Each input that once reached an assert (docs/hardening.md, "One parser"), many times
        over, alone or cut off by a close: the prober's reserves are answered throughout, and
        the server serves on. Two CRLFs, four bytes, used to stop it."""
        inputs = [
            b"\r\n\r\n",
            b"\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\n",
            b"GET /healthz HTTP/1.1\r\n\n",
            b"\r\n" * 5 + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            reserve_bytes(str(uuid.uuid4())) + b"\r\n",
            reserve_bytes(str(uuid.uuid4())) + b"\r\n\r\n",
        ]

        def attack():
            for _ in range(20):
                for data in inputs:
                    with self.connect() as sock:
                        try:
                            sock.sendall(data)
                            sock.shutdown(socket.SHUT_WR)
                            read_reply(sock, 2.0)
                        except OSError:
                            pass

        self.under_attack(attack)
        self.assertEqual(self.server.request("GET", "/healthz")[0], 200)

    def test_requests_dropped_midway_hold_nothing(self):
        """1000 reserves cut at a random byte and dropped: nothing reserved, no descriptor kept."""
        rng = random.Random(7)
        before = self.reserved()

        def attack():
            for _ in range(1000):
                data = reserve_bytes(str(uuid.uuid4()), amount=1000)
                with self.connect() as sock:
                    sock.sendall(data[:rng.randrange(1, len(data))])
        self.under_attack(attack)
        self.assertEqual(self.reserved(), before + self.probes_allowed)  # none of the 1000s
        self.assert_fds_settle()

    def test_client_that_never_reads(self):
        """A client pipelining requests for ~25 MB of answers and never reading
        does not stall others, and the server gives up on it after the timeout."""
        for i in range(100):  # makes GET /v1/admin/limits ~130 KB
            status, _, body = self.server.put_limit(
                {"key": "hostile:big:%03d" % i, "kind": "concurrency", "capacity": 1,
                 "timeout_seconds": 1, "description": "d" * 1000})
            self.assertEqual(status, 200, body)
        self.reserved()  # drops our keep-alive connection
        requests = 200
        before = settled_fds(self.server)

        def attack():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((self.server.host, self.server.port))
            sock.settimeout(3)
            try:
                sock.sendall(request_bytes("GET", "/v1/admin/limits") * requests)
            except (socket.timeout, OSError):
                pass
            return sock

        sock = self.under_attack(attack)
        try:  # still not reading: the server must give up on the connection by itself
            dropped = wait_until(lambda: open_fds(self.server) <= before,
                                 timeout_s=TIMEOUT_S + CLOSE_SLACK_S)
            self.assertTrue(dropped, "a client that never reads kept its connection: "
                            "%d descriptors, %d before" % (open_fds(self.server), before))
            answers = count_answers(sock)
            self.assertLess(answers, requests, "every answer was delivered: nothing stalled")
        finally:
            sock.close()
        self.assert_fds_settle()

    def test_oversized_body_is_413_without_reading_it(self):
        """Content-Length past --max-body-bytes is 413 before the body is sent."""
        with self.connect() as sock:
            sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/json\r\nContent-Length: 65537\r\n\r\n")
            self.assertEqual(read_reply(sock)[0], 413)
        with self.connect() as sock:  # chunked: the size is only known while reading
            sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            status = None
            try:
                for _ in range(20):
                    sock.sendall(b"1000\r\n" + b" " * 4096 + b"\r\n")
                status, _ = read_reply(sock)
            except OSError:
                pass
            self.assertIn(status, (413, None))

    def test_huge_header_is_refused(self):
        """A 100 KB header line and 5000 headers are refused with an error, not a crash."""
        for extra in (b"X-Big: " + b"a" * 100000 + b"\r\n",
                      b"".join(b"X-H%d: v\r\n" % i for i in range(5000))):
            with self.connect() as sock:
                try:
                    sock.sendall(request_bytes("GET", "/healthz", extra=extra))
                    status, _ = read_reply(sock)
                except (ConnectionResetError, BrokenPipeError):
                    status = None
                self.assertIn(status, (400, 413, 414, 431, None))
        self.assertEqual(self.server.request("GET", "/healthz")[0], 200)


class BusyConnections(HostileCase):
    """Connections that pipeline large batches and never read their answers hold a worker
    for one bounded turn at a time: the prober's reserves are answered meanwhile."""
    SERVER_ARGS = HostileCase.SERVER_ARGS + ["--max-body-bytes", str(1 << 20)]
    CONNECTIONS = 100
    BATCHES = 250  # of ~3.5 KB each, per connection: ~0.9 MB

    def test_busy_connections_do_not_stall_a_worker(self):
        """100 connections each pipelining ~0.9 MB of small reserve batches, never reading:
        every probe answered within the prober's bound, then the connections dropped."""
        items = [{"lease_id": "busy-%d" % i, "requirements": [{"key": KEY, "amount": 1}]}
                 for i in range(40)]
        batch = request_bytes("POST", "/v1/reserve/batch",
                              json.dumps({"requests": items}).encode())
        sockets = []

        def attack():
            for _ in range(self.CONNECTIONS):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect((self.server.host, self.server.port))
                sock.setblocking(False)
                sockets.append([sock, batch * self.BATCHES])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(left for _, left in sockets):
                for entry in sockets:
                    sock, left = entry
                    if not left:
                        continue
                    try:
                        sent = sock.send(left[:65536])
                        entry[1] = left[sent:]
                    except (BlockingIOError, OSError):
                        pass
                time.sleep(0.01)

        try:
            self.under_attack(attack)
        finally:
            for sock, _ in sockets:
                sock.close()
        self.assert_fds_settle()


class SuspendedAnswers(HostileCase):
    """Clients that vanish or never read while their reserve is at the
    backend: on sqlite the connection is suspended until the writer commits,
    and resumed to answer a client that may be gone. Whatever reached the
    backend holds exactly once: retrying every lease id afterwards leaves
    exactly one hold per lease."""

    DROPPED = 300
    PIPELINED_LEASES = 2000  # per batch: an answer of ~300 KB
    PIPELINED_BATCHES = 20

    def settled_reserved(self, low, high):
        """Usage once the backend has answered every call in flight."""
        previous = None
        for _ in range(50):
            current = self.reserved()
            if current == previous:
                break
            previous = current
            time.sleep(0.1)
        self.assertGreaterEqual(current, low)
        self.assertLessEqual(current, high)
        return current

    def retry_all(self, leases):
        for lease_id in leases:
            status, _, body = self.server.reserve(lease_id, {KEY: 1})
            self.assertEqual(status, 200, body)
            self.assertTrue(body["allowed"], (lease_id, body))
        self.server._local.conn.close()
        self.server._local.conn = None

    def test_reserves_dropped_before_their_answer_hold_once(self):
        """300 whole reserves whose client closes (FIN or RST) before the answer: each holds
        at most once, and once after a retry with its lease id."""
        before = self.reserved()
        leases = [str(uuid.uuid4()) for _ in range(self.DROPPED)]

        def attack():
            for i, lease_id in enumerate(leases):
                sock = self.connect()
                if i % 2:  # reset instead of a clean close
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                sock.sendall(reserve_bytes(lease_id))
                sock.close()

        self.under_attack(attack)
        floor = before + self.probes_allowed
        self.settled_reserved(floor, floor + self.DROPPED)
        self.assert_fds_settle()
        self.retry_all(leases)
        self.assertEqual(self.reserved(), floor + self.DROPPED)

    def test_pipelined_reserve_batches_never_read(self):
        """A client pipelining reserve batches (the same 2000 leases each time, ~6 MB of
        answers) that never reads: others are served, the server gives up on it after the
        timeout, and every lease holds exactly once."""
        before = self.reserved()
        leases = [str(uuid.uuid4()) for _ in range(self.PIPELINED_LEASES)]
        batch = json.dumps({"requests": [{"lease_id": lease_id, "requirements": [
            {"key": KEY, "amount": 1}]} for lease_id in leases]}).encode()
        fds_before = settled_fds(self.server)

        def attack():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((self.server.host, self.server.port))
            sock.settimeout(3)
            try:
                sock.sendall(request_bytes("POST", "/v1/reserve/batch", batch)
                             * self.PIPELINED_BATCHES)
            except (socket.timeout, OSError):
                pass
            return sock

        sock = self.under_attack(attack)
        try:
            dropped = wait_until(lambda: open_fds(self.server) <= fds_before,
                                 timeout_s=TIMEOUT_S + CLOSE_SLACK_S + 5)
            self.assertTrue(dropped, "a client that never reads kept its connection")
            answers = count_answers(sock)
            self.assertLess(answers, self.PIPELINED_BATCHES, "every answer was delivered")
        finally:
            sock.close()
        floor = before + self.probes_allowed
        self.settled_reserved(floor, floor + len(leases))
        status, _, body = self.server.request("POST", "/v1/reserve/batch", json.loads(batch))
        self.assertEqual(status, 200, body)
        self.assertTrue(all(result["allowed"] for result in body["results"]))
        self.assertEqual(self.reserved(), floor + len(leases))
        self.assert_fds_settle()


if __name__ == "__main__":
    harness.main()
