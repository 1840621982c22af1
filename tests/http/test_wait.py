"""Waiting for capacity over HTTP (docs/api.md and docs/semantics.md, "Waiting for
capacity"): wait_ms and priority on POST /v1/reserve, waited_ms in the answer.

- a waiting reserve is admitted as soon as the capacity it waits for frees, and says
  how long it waited; at its deadline it is denied as a plain reserve;
- definitive errors and a budget that cannot free in time never wait;
- waiters come through by priority, then arrival; a reserve that does not wait does
  not overtake them while their limit holds back (--wait-hold-ms); a batch item may
  not wait;
- a waiter asking a limit's whole capacity at the best priority holds back another
  client's small reserves for --wait-hold-ms at a time only, even when it renews its
  wait: they are admitted while capacity is free, and it keeps its place;
- a client that closes its connection leaves the queue at once and holds nothing;
- past --max-waiters a reserve is answered at once with x-llmlimit-queue: full;
- a deleted limit, or a capacity cut below what a waiter needs, answers its waiters;
- SIGTERM answers every waiter (5,000 of them) at once, denied, and exits 0;
- bad wait_ms and priority are a 400 naming the field, and change nothing.

Deadlines here are generous: they say what must happen eventually, never how fast.
The backend comes from --backend (default memory; tigerbeetle on a throw-away
single-replica cluster from TIGERBEETLE_BIN, skipped without it)."""

import json
import os
import socket
import sys
import threading
import time
import unittest
import uuid

from harness import Server, backend_from_argv, binary_from_argv, wait_until

BINARY = binary_from_argv()
BACKEND = backend_from_argv()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tigerbeetle"))
if BACKEND == "tigerbeetle" and not os.environ.get("TIGERBEETLE_BIN"):
    print("SKIPPED: TIGERBEETLE_BIN is not set (tigerbeetle backend)")
    sys.exit(77)


def start_server(args):
    """llmlimitd on BACKEND; on tigerbeetle with a fresh cluster, returned too."""
    cluster = None
    if BACKEND == "tigerbeetle":
        from tb_cluster import Cluster  # noqa: E402
        cluster = Cluster()
        cluster.format()
        cluster.start()
        args = args + ["--tb-addresses", cluster.address, "--tb-sessions", "2"]
    return Server(BINARY, backend=BACKEND, args=args).start(), cluster

SLOT = "wait:slot"


def lease():
    return str(uuid.uuid4())


def reserve_body(lease_id, key, amount=1, **extra):
    body = {"lease_id": lease_id, "requirements": [{"key": key, "amount": amount}]}
    body.update(extra)
    return body


class Waiter(threading.Thread):
    """A reserve with wait_ms on its own connection; its answer when it comes."""

    def __init__(self, server, body):
        super().__init__(daemon=True)
        self.server = server
        self.body = body
        self.answer = None
        self.answered_at = None

    def run(self):
        self.answer = self.server.request("POST", "/v1/reserve", self.body)
        self.answered_at = time.monotonic()


def send_post(sock, path, body):
    """A POST of body as JSON on sock; its answer is not read."""
    data = json.dumps(body).encode()
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % (path.encode(), len(data)) + data)


def read_answer(sock, data=b""):
    """The next whole answer on sock, after what was already read (data):
    (status, parsed JSON body, bytes read past it)."""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        assert piece, "connection closed before a whole answer: %r" % data[:200]
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        piece = sock.recv(65536)
        assert piece, "connection closed before a whole answer: %r" % data[:200]
        rest += piece
    return int(head.split(b" ")[1]), json.loads(rest[:length]), rest[length:]


def raw_request(server, body):
    """A reserve sent on a fresh socket, not read: the socket."""
    sock = socket.create_connection((server.host, server.port), timeout=30)
    send_post(sock, "/v1/reserve", body)
    return sock


def metric(server, name):
    """A metric's value from /metrics."""
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    raise AssertionError(name + " missing")


def waiting(server):
    return metric(server, "llmlimit_wait_waiting")


class Waiting(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The longest hold: no limit lets others pass within a test.
        cls.server, cls.cluster = start_server(["--max-waiters", "50", "--wait-hold-ms", "60000"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()
        if cls.cluster is not None:
            cls.cluster.stop()

    def slot(self, capacity=1):
        """A fresh concurrency limit of this capacity; its key."""
        key = "%s:%s" % (SLOT, uuid.uuid4().hex[:8])
        status, _, body = self.server.put_limit({"key": key, "kind": "concurrency",
                                                 "capacity": capacity, "timeout_seconds": 300})
        self.assertEqual(status, 200, body)
        return key

    def hold(self, key, amount=1):
        lease_id = lease()
        status, _, body = self.server.reserve(lease_id, {key: amount})
        self.assertEqual((status, body["allowed"]), (200, True), body)
        return lease_id

    def reserved(self, key):
        return self.server.usage(key)[2]["reserved"]

    def wait_queued(self, count):
        self.assertTrue(wait_until(lambda: waiting(self.server) == count, timeout_s=30),
                        "waiting: %d, expected %d" % (waiting(self.server), count))

    def test_a_waiter_is_admitted_when_the_slot_frees(self):
        """Held slot, a reserve waiting up to 30 s: admitted once the hold is released,
        with waited_ms; holding exactly one."""
        key = self.slot()
        holder = self.hold(key)
        waiter = Waiter(self.server, reserve_body(lease(), key, wait_ms=30000))
        waiter.start()
        self.wait_queued(1)
        time.sleep(0.2)  # it has waited a while
        released_at = time.monotonic()
        self.assertEqual(self.server.release(holder)[0], 200)
        waiter.join(30)
        status, headers, body = waiter.answer
        self.assertEqual((status, body["allowed"], body["error"]), (200, True, ""), body)
        self.assertGreaterEqual(body["waited_ms"], 150)
        self.assertGreaterEqual(waiter.answered_at, released_at)
        self.assertNotIn("x-llmlimit-queue", headers)
        self.assertEqual(self.reserved(key), 1)
        self.assertEqual(waiting(self.server), 0)

    def test_a_waiter_is_denied_at_its_deadline(self):
        """Nothing frees: denied at the deadline as a plain reserve, waited_ms at least
        wait_ms, retry_after_ms recomputed, Retry-After sent."""
        key = self.slot()
        self.hold(key)
        status, headers, body = self.server.request(
            "POST", "/v1/reserve", reserve_body(lease(), key, wait_ms=300))
        self.assertEqual((status, body["allowed"], body["denied_keys"]), (200, False, [key]))
        self.assertGreaterEqual(body["waited_ms"], 300)
        self.assertGreater(body["retry_after_ms"], 0)
        self.assertGreaterEqual(int(headers["retry-after"]), 1)
        self.assertEqual(self.reserved(key), 1)

    def test_a_reserve_that_fits_does_not_wait(self):
        """A reserve with wait_ms that fits at once: allowed, waited_ms 0."""
        key = self.slot()
        status, _, body = self.server.request("POST", "/v1/reserve",
                                              reserve_body(lease(), key, wait_ms=5000))
        self.assertEqual((status, body["allowed"], body["waited_ms"]), (200, True, 0))

    def test_definitive_errors_never_wait(self):
        """An unknown key, an amount over the capacity: answered at once with their error."""
        key = self.slot()
        for body, error in ((reserve_body(lease(), "wait:nope", wait_ms=60000),
                             "unknown_limit_key: wait:nope"),
                            (reserve_body(lease(), key, amount=2, wait_ms=60000),
                             "exceeds_capacity:" + key)):
            started = time.monotonic()
            status, _, answer = self.server.request("POST", "/v1/reserve", body)
            self.assertEqual((status, answer["allowed"], answer["error"]), (200, False, error))
            self.assertLess(time.monotonic() - started, 30)  # never the 60 s wait
            self.assertEqual(answer["waited_ms"], 0)

    def test_a_budget_that_cannot_free_in_time_answers_at_once(self):
        """A monthly budget used up by a committed charge cannot free before the deadline:
        answered at once, denied."""
        key = "wait:budget:" + uuid.uuid4().hex[:8]
        self.assertEqual(self.server.put_limit({"key": key, "kind": "budget", "capacity": 10,
                                                "period": "month"})[0], 200)
        spent = lease()
        self.server.reserve(spent, {key: 10})
        self.assertEqual(self.server.complete(spent, {key: 10})[0], 200)
        status, _, body = self.server.request("POST", "/v1/reserve",
                                              reserve_body(lease(), key, wait_ms=60000))
        self.assertEqual((status, body["allowed"]), (200, False))
        self.assertLess(body["waited_ms"], 30000)

    def test_priority_then_arrival(self):
        """Five waiters (priorities 7, 3, 5, 3, 9) on a held slot: each release admits the
        next by priority, and arrival order among equals."""
        key = self.slot()
        holder = self.hold(key)
        waiters = []
        for priority in (7, 3, 5, 3, 9):
            waiter = Waiter(self.server, reserve_body(lease(), key, wait_ms=60000,
                                                      priority=priority))
            waiter.priority = priority
            waiter.start()
            waiters.append(waiter)
            self.wait_queued(len(waiters))
        order = []
        current = holder
        for _ in waiters:
            self.assertEqual(self.server.release(current)[0], 200)
            self.assertTrue(wait_until(lambda: sum(w.answer is not None for w in waiters)
                                       == len(order) + 1, timeout_s=30))
            admitted = [w for w in waiters if w.answer is not None and w not in order]
            self.assertEqual(len(admitted), 1)
            order.append(admitted[0])
            self.assertTrue(admitted[0].answer[2]["allowed"])
            current = admitted[0].body["lease_id"]
        self.assertEqual([w.priority for w in order], [3, 3, 5, 7, 9])
        self.assertIs(order[0], waiters[1])  # the first 3 came first
        self.server.release(current)

    def test_a_reserve_that_does_not_wait_does_not_overtake(self):
        """With a waiter queued for a slot of 2 that has 1 free but needs 2, a later
        reserve of 1 without wait_ms is denied, not squeezed in ahead of it."""
        key = self.slot(capacity=2)
        holder = self.hold(key)
        waiter = Waiter(self.server, reserve_body(lease(), key, amount=2, wait_ms=60000))
        waiter.start()
        self.wait_queued(1)
        status, _, body = self.server.reserve(lease(), {key: 1})
        self.assertEqual((status, body["allowed"]), (200, False))
        self.assertEqual(self.reserved(key), 1)
        self.server.release(holder)
        waiter.join(30)
        self.assertTrue(waiter.answer[2]["allowed"])
        self.assertEqual(self.reserved(key), 2)

    def test_a_batch_item_may_not_wait(self):
        """wait_ms or priority in a batch item: that item is a 400 naming the field."""
        key = self.slot()
        status, _, body = self.server.request("POST", "/v1/reserve/batch", {"requests": [
            reserve_body(lease(), key, wait_ms=10), reserve_body(lease(), key, priority=1)]})
        self.assertEqual(status, 200)
        self.assertEqual([(r["status"], r["error"]) for r in body["results"]], [
            (400, "requests[0].wait_ms: a batch item does not wait"),
            (400, "requests[1].priority: a batch item does not wait")])
        self.assertEqual(self.reserved(key), 0)

    def test_bad_wait_and_priority_are_400_naming_the_field(self):
        """Out of range or of the wrong type: 400 naming the field; nothing reserved."""
        key = self.slot()
        cases = [({"wait_ms": -1}, "wait_ms"), ({"wait_ms": 60001}, "wait_ms"),
                 ({"wait_ms": "5"}, "wait_ms"), ({"wait_ms": 1.5}, "wait_ms"),
                 ({"wait_ms": None}, "wait_ms"), ({"priority": 10}, "priority"),
                 ({"priority": -1}, "priority"), ({"priority": True}, "priority")]
        for extra, field in cases:
            with self.subTest(extra=extra):
                status, _, body = self.server.request("POST", "/v1/reserve",
                                                      reserve_body(lease(), key, **extra))
                self.assertEqual(status, 400, body)
                self.assertTrue(body["error"].startswith(field + ": must be"), body)
        self.assertEqual(self.reserved(key), 0)

    def test_a_client_that_leaves_leaves_the_queue(self):
        """A waiter whose client closes leaves the queue at once; the slot it waited for
        goes to the next waiter, and it holds nothing."""
        key = self.slot()
        holder = self.hold(key)
        gone = raw_request(self.server, reserve_body(lease(), key, wait_ms=60000))
        self.wait_queued(1)
        gone.close()
        self.wait_queued(0)
        next_one = Waiter(self.server, reserve_body(lease(), key, wait_ms=60000))
        next_one.start()
        self.wait_queued(1)
        self.server.release(holder)
        next_one.join(30)
        self.assertTrue(next_one.answer[2]["allowed"])
        self.assertEqual(self.reserved(key), 1)

    def test_past_max_waiters_the_queue_is_full(self):
        """50 waiters (--max-waiters 50): the 51st is answered at once, denied, with
        x-llmlimit-queue: full."""
        key = self.slot()
        holder = self.hold(key)
        socks = [raw_request(self.server, reserve_body(lease(), key, wait_ms=60000))
                 for _ in range(50)]
        try:
            self.wait_queued(50)
            status, headers, body = self.server.request(
                "POST", "/v1/reserve", reserve_body(lease(), key, wait_ms=60000))
            self.assertEqual((status, body["allowed"]), (200, False))
            self.assertEqual(headers.get("x-llmlimit-queue"), "full")
            self.assertLess(body["waited_ms"], 30000)
        finally:
            for sock in socks:
                sock.close()
        self.wait_queued(0)
        self.server.release(holder)

    def test_a_deleted_limit_answers_its_waiters(self):
        """A limit deleted under its waiters: each is answered unknown_limit_key."""
        key = self.slot()
        self.hold(key)
        waiter = Waiter(self.server, reserve_body(lease(), key, wait_ms=60000))
        waiter.start()
        self.wait_queued(1)
        status, _, _ = self.server.request("DELETE", "/v1/admin/limits/" + key)
        self.assertEqual(status, 200)
        waiter.join(30)
        self.assertEqual(waiter.answer[2]["error"], "unknown_limit_key: " + key)
        self.assertEqual(waiting(self.server), 0)

    def test_a_cut_below_the_need_answers_its_waiters(self):
        """A capacity cut below what a waiter needs: answered exceeds_capacity."""
        key = self.slot(capacity=3)
        self.hold(key, 2)
        waiter = Waiter(self.server, reserve_body(lease(), key, amount=3, wait_ms=60000))
        waiter.start()
        self.wait_queued(1)
        status, _, body = self.server.put_limit({"key": key, "kind": "concurrency",
                                                 "capacity": 2, "timeout_seconds": 300})
        self.assertEqual(status, 200, body)
        waiter.join(30)
        self.assertEqual(waiter.answer[2]["error"], "exceeds_capacity:" + key)


class HoldingBack(unittest.TestCase):
    """--wait-hold-ms 2000: a limit's waiters hold back later requests for 2 s at a
    time, then let those that fit pass for as long (docs/semantics.md, "Order"). An
    attacker holds one slot of four and waits, at priority 0, for all four: it can
    never fit, yet it may not keep the three free slots from the others."""

    HOLD_MS = 2000
    # Past the hold, what a busy machine may add before a small reserve goes
    # through; far below the attacker's 60 s, which was the bound before.
    SLACK_S = 10

    @classmethod
    def setUpClass(cls):
        cls.server, cls.cluster = start_server(["--wait-hold-ms", str(cls.HOLD_MS)])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()
        if cls.cluster is not None:
            cls.cluster.stop()

    def limit(self):
        """A fresh 4-slot limit, one slot held by the attacker: its key and that
        hold's lease id."""
        key = "%s:%s" % (SLOT, uuid.uuid4().hex[:8])
        status, _, body = self.server.put_limit({"key": key, "kind": "concurrency",
                                                 "capacity": 4, "timeout_seconds": 300})
        self.assertEqual(status, 200, body)
        held = lease()
        status, _, body = self.server.reserve(held, {key: 1})
        self.assertEqual((status, body["allowed"]), (200, True), body)
        return key, held

    def attack(self, key):
        """The attacker's wait for the whole capacity, queued: its socket."""
        before = waiting(self.server)
        sock = raw_request(self.server, reserve_body(lease(), key, amount=4, wait_ms=60000,
                                                     priority=0))
        self.assertTrue(wait_until(lambda: waiting(self.server) > before, timeout_s=30))
        return sock

    def plain_admitted_within(self, key, seconds):
        """Plain reserves of 1 every 0.1 s until one is allowed (then released):
        how long that took, or None after `seconds`."""
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            lease_id = lease()
            status, _, body = self.server.reserve(lease_id, {key: 1})
            self.assertEqual(status, 200, body)
            if body["allowed"]:
                self.assertEqual(self.server.release(lease_id)[0], 200)
                return time.monotonic() - started
            time.sleep(0.1)
        return None

    def test_a_waiter_asking_everything_holds_back_others_for_the_hold_only(self):
        """A waiting and a plain reserve of 1 are admitted within the hold (plus slack),
        not at the attacker's 60 s deadline; the attacker keeps its place and is admitted
        once all four slots are free."""
        key, held = self.limit()
        attacker = self.attack(key)
        try:
            waiter = Waiter(self.server, reserve_body(lease(), key, wait_ms=30000))
            waiter.start()
            took = self.plain_admitted_within(key, self.HOLD_MS / 1000 + self.SLACK_S)
            self.assertIsNotNone(took, "the plain reserves were held back past the bound")
            waiter.join(60)
            status, _, body = waiter.answer
            self.assertEqual((status, body["allowed"]), (200, True), body)
            self.assertLess(body["waited_ms"], self.HOLD_MS + self.SLACK_S * 1000)
            self.assertEqual(waiting(self.server), 1)  # the attacker still waits
            # Everything freed: the attacker, first in line, gets all four.
            self.assertEqual(self.server.release(waiter.body["lease_id"])[0], 200)
            self.assertEqual(self.server.release(held)[0], 200)
            attacker.settimeout(60)
            status, answer, _ = read_answer(attacker)
            self.assertEqual((status, answer["allowed"]), (200, True), answer)
            self.assertEqual(self.server.usage(key)[2]["reserved"], 4)
        finally:
            attacker.close()
        self.assertTrue(wait_until(lambda: waiting(self.server) == 0, timeout_s=30))

    def test_renewing_the_wait_does_not_hold_back_longer(self):
        """The attacker renews its wait every half second (a new one queued, then the old
        one closed) for 16 s: plain reserves of 1 still get through at least every hold
        plus slack, and a waiting one is admitted within it."""
        key, _ = self.limit()
        stop = threading.Event()
        errors = []

        def renew():
            socks = []
            try:
                socks.append(self.attack(key))
                while not stop.wait(0.5):
                    socks.append(self.attack(key))
                    socks.pop(0).close()
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
            finally:
                for sock in socks:
                    sock.close()

        attacker = threading.Thread(target=renew, daemon=True)
        attacker.start()
        try:
            self.assertTrue(wait_until(lambda: waiting(self.server) >= 1, timeout_s=30))
            waiter = Waiter(self.server, reserve_body(lease(), key, wait_ms=30000))
            waiter.start()
            admitted = [time.monotonic()]
            ended = admitted[0] + 16
            while time.monotonic() < ended:
                took = self.plain_admitted_within(key, ended - time.monotonic())
                if took is None:
                    break
                admitted.append(time.monotonic())
            admitted.append(ended)
            longest = max(b - a for a, b in zip(admitted, admitted[1:]))
            self.assertLess(longest, self.HOLD_MS / 1000 + self.SLACK_S,
                            "plain reserves held back for %.1f s" % longest)
            waiter.join(60)
            status, _, body = waiter.answer
            self.assertEqual((status, body["allowed"]), (200, True), body)
            self.assertLess(body["waited_ms"], self.HOLD_MS + self.SLACK_S * 1000)
            self.server.release(waiter.body["lease_id"])
        finally:
            stop.set()
            attacker.join(60)
        self.assertEqual(errors, [])
        self.assertTrue(wait_until(lambda: waiting(self.server) == 0, timeout_s=30))


class KeepAlive:
    """One keep-alive connection of our own: requests written, answers read whole."""

    def __init__(self, server):
        self.sock = socket.create_connection((server.host, server.port), timeout=30)
        self.data = b""

    def send(self, path, body):
        send_post(self.sock, path, body)

    def answer(self):
        status, body, self.data = read_answer(self.sock, self.data)
        return status, body

    def close(self):
        self.sock.close()


class TwoThreads(unittest.TestCase):
    """--threads 2: connections alternate between the two HTTP threads, so a slot
    freed on one is handed to a waiter on the other (docs/architecture.md "HTTP":
    the freeing thread answers it itself while the other sleeps)."""

    ROUNDS = 100  # the take-over asserted on memory needs the other thread asleep once

    def test_a_release_on_one_thread_admits_a_waiter_on_the_other(self):
        server, cluster = start_server(["--threads", "2"])
        holder = waiter = None
        try:
            key = "wait:threads"
            self.assertEqual(server.put_limit({"key": key, "kind": "concurrency", "capacity": 1,
                                               "timeout_seconds": 300})[0], 200)
            taken_before = metric(server, "llmlimit_http_wakes_taken_over_total")
            # Accepted one after the other, with nothing between: one on each thread.
            holder = KeepAlive(server)
            waiter = KeepAlive(server)
            for round_ in range(self.ROUNDS):
                held = lease()
                holder.send("/v1/reserve", reserve_body(held, key))
                status, body = holder.answer()
                self.assertEqual((status, body["allowed"]), (200, True), body)
                waited = lease()
                waiter.send("/v1/reserve", reserve_body(waited, key, wait_ms=30000))
                self.assertTrue(wait_until(lambda: waiting(server) == 1, timeout_s=30))
                holder.send("/v1/complete", {"lease_id": held})
                status, body = holder.answer()
                self.assertEqual(status, 200, body)
                status, body = waiter.answer()
                self.assertEqual((status, body["allowed"]), (200, True), (round_, body))
                self.assertEqual(server.usage(key)[2]["reserved"], 1)
                waiter.send("/v1/complete", {"lease_id": waited})
                status, body = waiter.answer()
                self.assertEqual(status, 200, body)
            self.assertEqual(server.usage(key)[2]["reserved"], 0)
            taken = metric(server, "llmlimit_http_wakes_taken_over_total") - taken_before
            self.assertLessEqual(taken, self.ROUNDS)
            if BACKEND == "memory":
                # The complete hands the slot over on the holder's thread; the
                # waiter's has nothing else to do: asleep at nearly every hand-over
                # (it may still be finishing its last answer on a busy machine, or
                # looking at its timers, once a second), so at least once. (sqlite and
                # tigerbeetle hand over on a thread of their own, which wakes
                # the waiter's thread instead.)
                self.assertGreater(taken, 0)
        finally:
            for conn in (holder, waiter):
                if conn is not None:
                    conn.close()
            server.stop()
            server.cleanup()
            if cluster is not None:
                cluster.stop()


class Shutdown(unittest.TestCase):
    WAITERS = 5000

    def test_sigterm_answers_every_waiter(self):
        """5,000 reserves waiting up to 60 s: SIGTERM answers each, denied with
        retry_after_ms, and the server exits 0 well before the waits would end."""
        server, cluster = start_server(["--max-waiters", str(self.WAITERS),
                                        "--max-connections", str(2 * self.WAITERS)])
        socks = []
        try:
            key = "wait:shutdown"
            server.put_limit({"key": key, "kind": "concurrency", "capacity": 1,
                              "timeout_seconds": 300})
            server.reserve(lease(), {key: 1})
            for _ in range(self.WAITERS):
                socks.append(raw_request(server, reserve_body(lease(), key, wait_ms=60000)))
            self.assertTrue(wait_until(lambda: waiting(server) == self.WAITERS, timeout_s=60))
            server._local.conn.close()
            server._local.conn = None
            started = time.monotonic()
            self.assertEqual(server.stop(timeout_s=30), 0)
            self.assertLess(time.monotonic() - started, 30)
            denied = 0
            for sock in socks:
                sock.settimeout(30)
                status, answer, _ = read_answer(sock)
                self.assertEqual(status, 200, answer)
                self.assertFalse(answer["allowed"])
                self.assertGreater(answer["retry_after_ms"], 0)
                denied += 1
            self.assertEqual(denied, self.WAITERS)
        finally:
            for sock in socks:
                sock.close()
            server.cleanup()
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    unittest.main()
