"""Two real llmlimitd front ends sharing their limit definitions through a
real 3-member etcd cluster (--control), on the memory backend or on one
3-replica TigerBeetle cluster (--backend tigerbeetle, TIGERBEETLE_BIN):

- a limit created on A is in force on B (B's reserves are denied past its
  capacity); on tigerbeetle the capacity is moved once, not once per front
  end: A and B together admit exactly the capacity;
- a capacity change and a delete on B reach A;
- one etcd member killed changes nothing;
- every member killed: both keep serving reserves and say so in /metrics;
  an admin PUT answers 503 and changes nothing anywhere; once the members
  are back, both follow again and a change made then reaches the other;
- a front end started while a change was made elsewhere starts with it;
- a key made through the Keys API on A (in the store with its secret's
  SHA-256 only) is served by B's gateway; revoked on A, B refuses it with
  key_revoked; blocked on B, A refuses it; with every member down a key
  change answers 503 on both and changes nothing, while calls with the
  existing keys are still served;
- keys made on a front end C before it ran with --control are written to
  the store at its start with it, served by A, and never written again: one
  revoked on A while C is down is refused by C once it is back;
- a limit made from a template's default on A while every etcd member is
  down is written to the store once they are back, and is on B then;
- a limit made from a template's default by concurrent first calls on A and
  B is written to the store once, with its definition, and is one limit for
  both (on tigerbeetle they admit its capacity in all);
- on tigerbeetle, an alert of a limit put on A and spent past its threshold
  on B is delivered to the webhook once (its delivery claimed in the
  cluster), listed by both with one "sent" and one "elsewhere".

Skipped (exit 77) without etcd, or without TIGERBEETLE_BIN for tigerbeetle.
Delays until a change is seen are printed (they are not asserted: speed is
for benchmarks). Usage: test_control_http.py --binary LLMLIMITD
[--backend memory|tigerbeetle]"""

import os
import signal
import subprocess
import sys
import tempfile
import json
import threading
import http.server
import time
import unittest
import uuid
import warnings

warnings.simplefilter("ignore", ResourceWarning)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "http"))
sys.path.insert(0, os.path.join(HERE, "..", "tigerbeetle"))
import harness  # noqa: E402
from harness import Server, backend_from_argv, binary_from_argv, wait_until  # noqa: E402
import etcd_cluster  # noqa: E402
import tb_cluster  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv()
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
import fake_upstream  # noqa: E402
import gw_harness  # noqa: E402 (after harness took --binary and --backend)
tb_cluster.ping_tool_from_argv()
etcd_cluster.skip_unless_etcd("front ends sharing definitions through etcd")
if BACKEND == "tigerbeetle":
    tb_cluster.skip_unless_binary("front ends on one TigerBeetle cluster")
# How long a change may take to reach the other front end before the test
# fails: far above the 2 s the design aims at, for a busy machine.
SEEN_WITHIN_S = 20.0
CONTROL_CREATE_BATCH = 8192  # src/server/control.c
# A front end joining with a thousand limits new to it creates them all in
# the cluster before it listens: far longer than a bare start on a busy machine.
harness.START_TIMEOUT_S = 60.0


def metric(server, name):
    status, _, text = server.request("GET", "/metrics")
    assert status == 200, status
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


class FrontEnd(Server):
    def start(self):
        super().start()
        if not wait_until(lambda: self.request("GET", "/readyz")[0] == 200, 60):
            raise RuntimeError("llmlimitd not ready:\n" + self.stderr_text())
        return self

    def stop(self, sig=signal.SIGTERM, timeout_s=30.0, check=True):
        return super().stop(sig, timeout_s, check)


def rolling(key, capacity):
    return {"key": key, "kind": "rolling", "capacity": capacity, "window_seconds": 3600}


def capacity_of(server, key):
    status, _, body = server.request("GET", "/v1/admin/limits/" + key)
    return body["limit"]["definition"]["capacity"] if status == 200 else None


def not_kept(server, key):
    """A change server could not save is not kept: it retries it from the store
    until it can, each time creating the limit, failing to write limits.json and
    undoing the creation (as a put through the API is undone), so one read may
    land inside a retry; the limit must be absent at a read within SEEN_WITHIN_S
    (a front end that kept it would never answer 404)."""
    return wait_until(lambda: capacity_of(server, key) is None, SEEN_WITHIN_S, 0.005)


def seen(server, key, capacity, label):
    """Waits until server has key at capacity (None: no such limit); prints the delay."""
    started = time.monotonic()
    ok = wait_until(lambda: capacity_of(server, key) == capacity, SEEN_WITHIN_S, 0.01)
    print("  %s: seen after %.0f ms" % (label, (time.monotonic() - started) * 1000))
    return ok


def admitted(server, key, tries, amount=1):
    """How many of `tries` reserves of amount on key server admits."""
    count = 0
    for _ in range(tries):
        status, _, body = server.reserve(str(uuid.uuid4()), {key: amount})
        assert status == 200 and body["error"] == "", (status, body)
        count += body["allowed"] is True
    return count


KEYS = "/v1/admin/keys"
# The gateway's templates: each call takes one request of req:{caller} (made
# with the key) and one of dflt:{caller}, made by the first call that needs
# it from the template's default.
DEFAULT_CAPACITY = 6
TEMPLATES = [("req", "req:{caller}", "requests"),
             ("dflt", "dflt:{caller}", "requests",
              {"kind": "rolling", "capacity": DEFAULT_CAPACITY, "window_seconds": 3600})]


def gateway_call(server, secret, path="/v1/models"):
    """(status, body) of a gateway call with secret: GET /v1/models, or a chat."""
    if path == "/v1/models":
        status, _, body = server.request("GET", path, token=secret)
    else:
        status, _, body = server.request("POST", path, gw_harness.chat("m-normal"), token=secret)
    return status, body


class Receiver:
    """A webhook on loopback that keeps every body POSTed to it."""

    def __init__(self):
        self.bodies = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("content-length", "0"))
                owner.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hook" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def refusal(body):
    """The code of a gateway refusal in OpenAI's shape."""
    return body.get("error", {}).get("code") if isinstance(body, dict) else None


class ControlPlane(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Each part is ended by its own class cleanup, also when a later
        # part fails to start.
        cls.etcd = etcd_cluster.EtcdCluster(3).__enter__()
        cls.addClassCleanup(cls.etcd.__exit__, None, None, None)
        args = ["--control", cls.etcd.url()]
        if BACKEND == "tigerbeetle":
            tb = tb_cluster.Cluster(replicas=3).__enter__()
            cls.addClassCleanup(tb.__exit__, None, None, None)
            args += ["--tb-addresses", tb.address, "--tb-sessions", "2"]
        # A gateway on both, in front of one fake upstream, with no key of
        # its own: every key comes from the Keys API.
        provider_key = "sk-provider-" + uuid.uuid4().hex
        cls.upstream = fake_upstream.start(api_key=provider_key)
        cls.addClassCleanup(cls.upstream.stop)
        cls.config_dir = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.config_dir.cleanup)
        config_path = os.path.join(cls.config_dir.name, "gateway.json")
        with open(config_path, "w") as f:
            json.dump(gw_harness.gateway_config(cls.upstream.base_url, [], templates=TEMPLATES), f)
        args += ["--gateway-config", config_path]
        # Alerts of limits with thresholds go to one webhook.
        cls.receiver = Receiver()
        cls.addClassCleanup(cls.receiver.close)
        args += ["--alert-webhook", cls.receiver.url, "--alert-scan-ms", "50",
                 "--alert-retry-ms", "100"]
        env = gw_harness.provider_env(provider_key)
        cls.args, cls.env = args, env
        cls.a = FrontEnd(BINARY, backend=BACKEND, args=args, env=env)
        cls.b = FrontEnd(BINARY, backend=BACKEND, args=args, env=env)
        for server in (cls.a, cls.b):
            cls.addClassCleanup(server.cleanup)
            cls.addClassCleanup(server.stop, check=False)
            server.start()

    def setUp(self):
        # Every test starts with every member up and both front ends following.
        for i, m in enumerate(self.etcd.members):
            if not m.alive():
                self.etcd.start(i)
        for server in (self.a, self.b):
            self.assertTrue(wait_until(lambda: metric(server, "llmlimit_control_connected") == 1
                                       and metric(server, "llmlimit_control_keys_connected") == 1,
                                       SEEN_WITHIN_S), server.stderr_text())

    def test_0_a_bad_control_url_stops_the_start(self):
        for url in ("http://127.0.0.1:2379", "etcd://127.0.0.1", "etcd://a:1,,b:2"):
            with tempfile.TemporaryDirectory() as data_dir:
                done = subprocess.run([BINARY, "--listen", "127.0.0.1:0", "--backend", "memory",
                                       "--data-dir", data_dir, "--control", url],
                                      capture_output=True, text=True, timeout=30)
            self.assertEqual(done.returncode, 1, done.stderr)
            self.assertIn("invalid --control", done.stderr)

    def test_1_a_limit_made_on_a_is_enforced_on_b(self):
        key = "shared-" + uuid.uuid4().hex[:8]
        status, _, body = self.a.put_limit(rolling(key, 10))
        self.assertEqual(status, 200, body)
        self.assertIn('"capacity":10', self.etcd.get("/llmlimit/limits/" + key))
        self.assertTrue(seen(self.b, key, 10, "a put on A, on B"))
        # 10 in all, whichever front end asks: the capacity is B's too, and
        # on tigerbeetle the one account was topped up once, not twice.
        from_b = admitted(self.b, key, 6)
        from_a = admitted(self.a, key, 6)
        self.assertEqual(from_b, 6)
        if BACKEND == "tigerbeetle":
            self.assertEqual(from_a, 4)  # one shared account of capacity 10
            self.assertEqual(admitted(self.b, key, 2), 0)
        else:
            self.assertEqual(from_a, 6)  # each memory front end its own 10
            self.assertEqual(admitted(self.b, key, 6), 4)

    def test_2_a_change_on_b_reaches_a(self):
        key = "changed-" + uuid.uuid4().hex[:8]
        self.assertEqual(self.a.put_limit(rolling(key, 5))[0], 200)
        self.assertTrue(seen(self.b, key, 5, "a put on A, on B"))
        status, _, body = self.b.put_limit(rolling(key, 8))
        self.assertEqual(status, 200, body)
        self.assertTrue(seen(self.a, key, 8, "an increase on B, on A"))
        if BACKEND == "tigerbeetle":
            self.assertEqual(admitted(self.a, key, 10), 8)  # 8 once, not 5 + 3 + 3
        status, _, _ = self.b.request("DELETE", "/v1/admin/limits/" + key)
        self.assertEqual(status, 200)
        self.assertTrue(seen(self.a, key, None, "a delete on B, on A"))
        self.assertIsNone(self.etcd.get("/llmlimit/limits/" + key))

    def test_3_one_member_killed_changes_nothing(self):
        self.etcd.kill(0)
        key = "one-down-" + uuid.uuid4().hex[:8]
        status, _, body = self.a.put_limit(rolling(key, 3))
        self.assertEqual(status, 200, body)
        self.assertTrue(seen(self.b, key, 3, "a put on A with a member down, on B"))
        self.assertEqual(self.b.put_limit(rolling(key, 4))[0], 200)
        self.assertTrue(seen(self.a, key, 4, "a put on B with a member down, on A"))
        self.assertTrue(wait_until(lambda: metric(self.a, "llmlimit_control_connected") == 1 and
                                   metric(self.b, "llmlimit_control_connected") == 1,
                                   SEEN_WITHIN_S))

    def test_4_every_member_killed_then_back(self):
        key = "kept-" + uuid.uuid4().hex[:8]
        self.assertEqual(self.a.put_limit(rolling(key, 100))[0], 200)
        self.assertTrue(seen(self.b, key, 100, "a put on A, on B"))
        revision = metric(self.a, "llmlimit_control_revision")
        self.assertGreater(revision, 0)
        self.etcd.kill()
        for server in (self.a, self.b):
            self.assertTrue(wait_until(
                lambda: metric(server, "llmlimit_control_connected") == 0, SEEN_WITHIN_S))
            self.assertTrue(any("store unreachable" in line for line in server.stderr_lines))
            status, _, body = server.request("GET", "/v1/console/status")
            self.assertEqual((status, body["control"]["connected"]), (200, False))
        # Reserves are served from the last view.
        self.assertEqual(admitted(self.a, key, 3), 3)
        self.assertEqual(admitted(self.b, key, 3), 3)
        # A change cannot be written: 503, and nothing changed here or there.
        status, _, body = self.a.put_limit(rolling(key, 7))
        self.assertEqual((status, body), (503, {"error": "control_store_unavailable"}))
        status, _, body = self.b.request("DELETE", "/v1/admin/limits/" + key)
        self.assertEqual((status, body), (503, {"error": "control_store_unavailable"}))
        other = "never-" + uuid.uuid4().hex[:8]
        self.assertEqual(self.b.put_limit(rolling(other, 1))[0], 503)
        for server in (self.a, self.b):
            self.assertEqual(capacity_of(server, key), 100)
            self.assertIsNone(capacity_of(server, other))
        # Back: both follow again, and a change made now reaches the other.
        self.etcd.start()
        for server in (self.a, self.b):
            self.assertTrue(wait_until(
                lambda: metric(server, "llmlimit_control_connected") == 1, SEEN_WITHIN_S))
        self.assertIsNone(self.etcd.get("/llmlimit/limits/" + other))
        status, _, body = self.a.request("GET", "/v1/console/status")
        self.assertTrue(body["control"]["connected"])
        self.assertGreaterEqual(body["control"]["revision"], revision)
        self.assertEqual(self.b.put_limit(rolling(key, 50))[0], 200)
        self.assertTrue(seen(self.a, key, 50, "a put on B after the store came back, on A"))
        self.assertTrue(wait_until(
            lambda: metric(self.a, "llmlimit_control_revision") > revision, SEEN_WITHIN_S))

    def test_4b_a_member_that_hangs_is_left_for_another(self):
        # Each member in turn hangs (SIGSTOP: its connections stay open, so
        # a watch on it would wait for ever): changes still reach both.
        key = "hang-" + uuid.uuid4().hex[:8]
        self.assertEqual(self.a.put_limit(rolling(key, 1))[0], 200)
        capacity = 1
        for member in self.etcd.members:
            member.pause()
            try:
                for writer, reader in ((self.a, self.b), (self.b, self.a)):
                    capacity += 1
                    status, _, body = writer.put_limit(rolling(key, capacity))
                    self.assertEqual(status, 200, body)
                    self.assertTrue(seen(reader, key, capacity,
                                         "a put with %s hung, on the other" % member.name))
            finally:
                member.resume()

    def test_5_a_front_end_started_later_starts_with_the_store(self):
        key = "later-" + uuid.uuid4().hex[:8]
        self.b.stop()
        self.assertEqual(self.a.put_limit(rolling(key, 9))[0], 200)
        # More new limits than one batch of creations (CONTROL_CREATE_BATCH) on
        # memory; on tigerbeetle fewer, each an account made in the cluster.
        count = CONTROL_CREATE_BATCH + 1 if BACKEND == "memory" else 1100
        many = ["many-%s-%05d" % (key, i) for i in range(count)]
        self.etcd.put_many([(
            "/llmlimit/limits/" + name,
            '{"key":"%s","kind":"concurrency","capacity":2,"timeout_seconds":30}' % name)
            for name in many])
        self.b.start()
        self.assertEqual(capacity_of(self.b, key), 9)  # read at start, before listening
        status, _, body = self.b.request("GET", "/v1/admin/limits")
        listed = {item["definition"]["key"] for item in body["limits"]}
        self.assertEqual(set(many) - listed, set())
        self.assertEqual(capacity_of(self.b, many[-1]), 2)

    def test_6_a_change_written_to_the_store_by_hand_is_applied(self):
        key = "by-hand-" + uuid.uuid4().hex[:8]
        self.etcd.put("/llmlimit/limits/" + key,
                      '{"key":"%s","kind":"rolling","capacity":6,"window_seconds":60}' % key)
        self.assertTrue(seen(self.a, key, 6, "etcdctl-style put, on A"))
        self.assertTrue(seen(self.b, key, 6, "etcdctl-style put, on B"))
        # An invalid value is skipped (logged), and the front ends stay up.
        bad = "bad-" + uuid.uuid4().hex[:8]
        self.etcd.put("/llmlimit/limits/" + bad, '{"key":"%s","kind":"rolling"}' % bad)
        self.etcd.put("/llmlimit/limits/" + key,
                      '{"key":"%s","kind":"rolling","capacity":7,"window_seconds":60}' % key)
        self.assertTrue(seen(self.a, key, 7, "the put after an invalid one, on A"))
        self.assertIsNone(capacity_of(self.a, bad))
        self.assertTrue(any("stored definition is invalid" in line
                            for line in self.a.stderr_lines))

    def test_7_a_change_this_front_end_cannot_apply_is_applied_later(self):
        # B's registry file cannot be written (a directory where its temporary
        # file goes): a change from A is not applied on B, and is once B can.
        blocker = os.path.join(self.b.data_dir, "limits.json.tmp")
        key = "disk-" + uuid.uuid4().hex[:8]
        def blocked():
            try:
                os.mkdir(blocker)  # fails while a rewrite of B's has its file there
                return True
            except FileExistsError:
                return False
        self.assertTrue(wait_until(blocked, SEEN_WITHIN_S, 0.005))
        try:
            logged = len(self.b.stderr_lines)  # B's lines from here on
            self.assertEqual(self.a.put_limit(rolling(key, 4))[0], 200)
            self.assertTrue(wait_until(lambda: any(
                "did not apply here" in line for line in self.b.stderr_lines[logged:]),
                SEEN_WITHIN_S))
            self.assertTrue(not_kept(self.b, key))
            # B's own change: in the store (so on A), not yet on B.
            status, _, body = self.b.put_limit(rolling(key, 5))
            self.assertEqual((status, body), (503, {"error": "registry_write_failed:in_force"}))
            self.assertTrue(seen(self.a, key, 5, "a put B could not apply, on A"))
            self.assertTrue(not_kept(self.b, key))
        finally:
            os.rmdir(blocker)
        self.assertTrue(seen(self.b, key, 5, "the same on B once its disk works"))

    def new_key(self, server):
        """A key made on server through the Keys API, with its req limit made there too."""
        caller = "k-" + uuid.uuid4().hex[:8]
        status, _, body = server.request("POST", KEYS, {"caller": caller, "team": "t-" + caller})
        self.assertEqual(status, 201, body)
        self.assertEqual(server.put_limit(rolling("req:" + caller, 1000))[0], 200)
        return body

    def served(self, server, secret, status, code=None, label=""):
        """Waits until server answers a call with secret with status (and code)."""
        started = time.monotonic()
        ok = wait_until(lambda: (lambda s, b: s == status and (code is None or refusal(b) == code))
                        (*gateway_call(server, secret)), SEEN_WITHIN_S, 0.01)
        print("  %s: seen after %.0f ms" % (label, (time.monotonic() - started) * 1000))
        return ok

    def test_8_a_key_made_on_a_is_served_and_revoked_on_b(self):
        key = self.new_key(self.a)
        stored = json.loads(self.etcd.get("/llmlimit/keys/" + key["id"]))
        self.assertEqual(stored["sha256"], key["sha256"])
        self.assertNotIn(key["secret"], self.etcd.get("/llmlimit/keys/" + key["id"]))
        self.assertTrue(self.served(self.b, key["secret"], 200, label="a key made on A, on B"))
        self.assertTrue(wait_until(lambda: capacity_of(self.b, "req:" + key["caller"]) == 1000,
                                   SEEN_WITHIN_S))
        status, body = gateway_call(self.b, key["secret"], gw_harness.CHAT)
        self.assertEqual(status, 200, body)
        status, _, listed = self.b.request("GET", KEYS + "/" + key["id"])
        self.assertEqual((status, listed["status"]), (200, "active"), listed)
        # Revoked on A: refused on B.
        status, _, body = self.a.request("DELETE", KEYS + "/" + key["id"])
        self.assertEqual((status, body["status"]), (200, "revoked"), body)
        self.assertTrue(self.served(self.b, key["secret"], 401, "key_revoked",
                                    "a key revoked on A, refused on B"))
        # Blocked on B: refused on A; unblocked on A: served on B.
        other = self.new_key(self.a)
        self.assertTrue(self.served(self.b, other["secret"], 200, label="another key, on B"))
        status, _, body = self.b.request("PATCH", KEYS + "/" + other["id"], {"blocked": True})
        self.assertEqual(status, 200, body)
        self.assertTrue(self.served(self.a, other["secret"], 401, "key_blocked",
                                    "a key blocked on B, refused on A"))
        status, _, body = self.a.request("PATCH", KEYS + "/" + other["id"], {"blocked": False})
        self.assertEqual(status, 200, body)
        self.assertTrue(self.served(self.b, other["secret"], 200, label="unblocked on A, on B"))
        # Rotated on B: the new secret works on A.
        status, _, body = self.b.request("POST", KEYS + "/" + other["id"] + "/rotate",
                                         {"grace_seconds": 0})
        self.assertEqual(status, 200, body)
        self.assertTrue(self.served(self.a, body["secret"], 200, label="rotated on B, on A"))
        self.assertTrue(self.served(self.a, other["secret"], 401, "invalid_api_key",
                                    "the old secret, refused on A"))

    def test_9_a_key_change_with_the_store_down_is_refused_everywhere(self):
        key = self.new_key(self.a)
        self.assertTrue(self.served(self.b, key["secret"], 200, label="a key made on A, on B"))
        self.etcd.kill()
        for server in (self.a, self.b):
            self.assertTrue(wait_until(
                lambda: metric(server, "llmlimit_control_keys_connected") == 0, SEEN_WITHIN_S))
        for server in (self.a, self.b):
            status, _, body = server.request("POST", KEYS, {"caller": "never", "team": "never"})
            self.assertEqual((status, body), (503, {"error": "control_store_unavailable"}))
            status, _, body = server.request("DELETE", KEYS + "/" + key["id"])
            self.assertEqual((status, body), (503, {"error": "control_store_unavailable"}))
            status, _, body = server.request("GET", KEYS + "/" + key["id"])
            self.assertEqual((status, body["status"]), (200, "active"), body)
            status, _, body = server.request("GET", KEYS + "?caller=never")
            self.assertEqual((status, body["keys"]), (200, []), body)
            # The existing key is still served.
            self.assertEqual(gateway_call(server, key["secret"], gw_harness.CHAT)[0], 200)
        self.etcd.start()
        for server in (self.a, self.b):
            self.assertTrue(wait_until(
                lambda: metric(server, "llmlimit_control_keys_connected") == 1, SEEN_WITHIN_S))
        status, _, body = self.b.request("DELETE", KEYS + "/" + key["id"])
        self.assertEqual(status, 200, body)
        self.assertTrue(self.served(self.a, key["secret"], 401, "key_revoked",
                                    "revoked on B after the store came back, on A"))

    def test_9b_a_limit_from_a_default_is_made_once_for_both(self):
        key = self.new_key(self.a)
        self.assertTrue(self.served(self.b, key["secret"], 200, label="a key made on A, on B"))
        self.assertTrue(wait_until(lambda: capacity_of(self.b, "req:" + key["caller"]) == 1000,
                                   SEEN_WITHIN_S))
        limit = "dflt:" + key["caller"]
        self.assertIsNone(capacity_of(self.a, limit))
        # The first calls of the new caller, on both at once.
        answers = {}
        barrier = threading.Barrier(4)

        def call(server, n):
            barrier.wait()
            answers[n] = gateway_call(server, key["secret"], gw_harness.CHAT)[0]
        threads = [threading.Thread(target=call, args=(server, n))
                   for n, server in enumerate((self.a, self.b, self.a, self.b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(answers.values()), [200] * 4, answers)
        self.assertTrue(wait_until(lambda: self.etcd.get("/llmlimit/limits/" + limit) is not None,
                                   SEEN_WITHIN_S))
        stored = json.loads(self.etcd.get("/llmlimit/limits/" + limit))
        self.assertEqual((stored["key"], stored["capacity"]), (limit, DEFAULT_CAPACITY))
        self.assertEqual(self.etcd.version("/llmlimit/limits/" + limit), 1)  # written once
        for server in (self.a, self.b):
            self.assertEqual(capacity_of(server, limit), DEFAULT_CAPACITY)
        # One limit for both: a change on B reaches A.
        self.assertEqual(self.b.put_limit(rolling(limit, DEFAULT_CAPACITY + 2))[0], 200)
        self.assertTrue(seen(self.a, limit, DEFAULT_CAPACITY + 2, "a default's limit put on B"))
        if BACKEND == "tigerbeetle":
            # 4 taken; the rest of 8, whichever front end calls.
            statuses = [gateway_call(server, key["secret"], gw_harness.CHAT)[0]
                        for server in (self.a, self.b) * 3]
            self.assertEqual(statuses.count(200), 4, statuses)

    def test_9bb_keys_made_before_control_are_written_to_the_store_once(self):
        # C runs without --control first: its keys are in its keys.json alone.
        local = [a for a in self.args if a != "--control" and a != self.etcd.url()]
        c = FrontEnd(BINARY, backend=BACKEND, args=local, env=self.env)
        self.addCleanup(c.cleanup)
        self.addCleanup(c.stop, check=False)
        c.start()
        made = []
        for _ in range(2):
            caller = "pre-" + uuid.uuid4().hex[:8]
            status, _, body = c.request("POST", KEYS, {"caller": caller, "team": "t-" + caller})
            self.assertEqual(status, 201, body)
            made.append(body)
        c.stop()
        for key in made:
            self.assertIsNone(self.etcd.get("/llmlimit/keys/" + key["id"]))
            self.assertEqual(self.a.put_limit(rolling("req:" + key["caller"], 1000))[0], 200)
        # Started with --control: both written to the store, served by A.
        c.args = list(self.args)
        c.start()
        for key in made:
            stored = json.loads(self.etcd.get("/llmlimit/keys/" + key["id"]))
            self.assertEqual((stored["sha256"], stored["revoked_at_unix_ms"]),
                             (key["sha256"], 0))
            self.assertTrue(self.served(self.a, key["secret"], 200,
                                        label="a key made before --control, on A"))
        # One revoked on A while C is down; C starts again: the store's
        # revocation wins over C's copy, and neither key is written again.
        c.stop()
        status, _, body = self.a.request("DELETE", KEYS + "/" + made[1]["id"])
        self.assertEqual((status, body["status"]), (200, "revoked"), body)
        c.start()
        self.assertTrue(self.served(c, made[1]["secret"], 401, "key_revoked",
                                    "revoked on A while C was down, on C"))
        self.assertTrue(self.served(c, made[0]["secret"], 200, label="the other, on C"))
        self.assertEqual(self.etcd.version("/llmlimit/keys/" + made[0]["id"]), 1)
        self.assertEqual(self.etcd.version("/llmlimit/keys/" + made[1]["id"]), 2)
        self.assertNotEqual(json.loads(
            self.etcd.get("/llmlimit/keys/" + made[1]["id"]))["revoked_at_unix_ms"], 0)
        self.assertTrue(self.served(self.a, made[1]["secret"], 401, "key_revoked",
                                    "still revoked, on A"))

    def test_9bc_a_default_made_with_the_store_down_is_written_when_it_is_back(self):
        key = self.new_key(self.a)
        self.assertTrue(self.served(self.b, key["secret"], 200, label="a key made on A, on B"))
        self.assertTrue(wait_until(lambda: capacity_of(self.b, "req:" + key["caller"]) == 1000,
                                   SEEN_WITHIN_S))
        limit = "dflt:" + key["caller"]
        self.etcd.kill()
        self.assertTrue(wait_until(lambda: metric(self.a, "llmlimit_control_connected") == 0,
                                   SEEN_WITHIN_S))
        # The first call of the caller, on A: its default is made there alone.
        self.assertEqual(gateway_call(self.a, key["secret"], gw_harness.CHAT)[0], 200)
        self.assertEqual(capacity_of(self.a, limit), DEFAULT_CAPACITY)
        self.assertIsNone(capacity_of(self.b, limit))
        self.etcd.start()
        self.assertTrue(seen(self.b, limit, DEFAULT_CAPACITY,
                             "a default made with the store down, on B once it is back"))
        stored = json.loads(self.etcd.get("/llmlimit/limits/" + limit))
        self.assertEqual((stored["key"], stored["capacity"]), (limit, DEFAULT_CAPACITY))
        self.assertEqual(self.etcd.version("/llmlimit/limits/" + limit), 1)
        # One limit for both: a change on B reaches A.
        self.assertEqual(self.b.put_limit(rolling(limit, DEFAULT_CAPACITY + 1))[0], 200)
        self.assertTrue(seen(self.a, limit, DEFAULT_CAPACITY + 1, "then put on B, on A"))

    def test_9c_an_alert_is_delivered_once_by_the_two(self):
        if BACKEND != "tigerbeetle":
            self.skipTest("front ends share a limit's usage on tigerbeetle only")
        key = "alerted-" + uuid.uuid4().hex[:8]
        status, _, body = self.a.put_limit({"key": key, "kind": "budget", "capacity": 100,
                                            "period": "month", "alerts": [{"at_percent": 50}]})
        self.assertEqual(status, 200, body)
        self.assertTrue(seen(self.b, key, 100, "a limit with an alert put on A, on B"))
        lease = str(uuid.uuid4())
        status, _, body = self.b.reserve(lease, {key: 60})
        self.assertTrue(status == 200 and body["allowed"], body)
        self.assertEqual(self.b.complete(lease, {key: 60})[0], 200)

        def mine():
            return [b for b in self.receiver.bodies if b.get("key") == key]
        self.assertTrue(wait_until(lambda: len(mine()) >= 1, SEEN_WITHIN_S))

        def listed(server):
            status, _, body = server.request("GET", "/v1/alerts")
            return [a for a in body["alerts"] if a["key"] == key] if status == 200 else []
        self.assertTrue(wait_until(lambda: all(len(listed(s)) == 1 and listed(s)[0]["claimed"]
                                               for s in (self.a, self.b)), SEEN_WITHIN_S))
        time.sleep(1.5)  # 30 scans: an alert that would be sent again would be by now
        self.assertEqual(len(mine()), 1, mine())
        deliveries = sorted(listed(s)[0]["delivery"] for s in (self.a, self.b))
        self.assertEqual(deliveries, ["elsewhere", "sent"])
        self.assertEqual({listed(s)[0]["id"] for s in (self.a, self.b)}, {mine()[0]["id"]})


if __name__ == "__main__":
    harness.main()
