"""Alerts on limits over HTTP (docs/alerts.md), against the real llmlimitd and a
real HTTP receiver in this process:

- a budget's thresholds fire once each, signed (HMAC-SHA256 of the body, checked
  here with the hmac module), and never again: not on later scans, not after a
  restart, not after kill -9, not after a capacity cut and raised back;
- a receiver that answers 500 gets the alert again until it takes it; one that answers
  slowly gets it once; one that never answers holds back neither reserves nor another
  limit's alert;
- "format": "slack" sends {"text": ...}; GET /v1/alerts lists alerts with their
  delivery state; /metrics counts them; a pending alert is given up after 24 h;
- a rolling limit alerts once it has been full for a whole window, a concurrency limit
  once its slots have been held for a whole timeout; a budget spending
  fast enough to run out before its period ends alerts "budget.runout";
- bad alerts and webhooks are a 400 naming the field, and change nothing;
- on tigerbeetle, two front ends on one cluster deliver a threshold once: the one that
  claims it in the cluster.

The backend comes from --backend (default memory; tigerbeetle on a throw-away
single-replica cluster from TIGERBEETLE_BIN, skipped without it). Deadlines are
generous: they say what must happen eventually, never how fast."""

import hashlib
import hmac
import http.server
import json
import os
import signal
import sys
import tempfile
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tigerbeetle"))
from harness import Server, backend_from_argv, binary_from_argv, main, wait_until  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv()
if BACKEND == "tigerbeetle" and not os.environ.get("TIGERBEETLE_BIN"):
    print("SKIPPED: TIGERBEETLE_BIN is not set (tigerbeetle backend)")
    sys.exit(77)

SECRET = b"alert-secret-for-tests"
SCAN_MS = 50
QUIET_S = 1.5  # scans enough (30) for an alert that would fire again to have fired


class Receiver:
    """An HTTP server on a free port that records each POST. `answers` is the
    list of statuses for the first requests (then 200); hang=True never
    answers (the connection stays open until the receiver stops); delay_s
    answers that late."""

    def __init__(self, answers=(), hang=False, delay_s=0.0):
        self.requests = []
        self.answers = list(answers)
        self.hang = hang
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.lock:
                    receiver.requests.append(({k.lower(): v for k, v in self.headers.items()},
                                              body))
                    status = receiver.answers.pop(0) if receiver.answers else 200
                if receiver.hang:
                    receiver.stopping.wait(30)
                    return
                if receiver.delay_s:
                    receiver.stopping.wait(receiver.delay_s)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/hook" % self.httpd.server_address[1]

    def bodies(self):
        with self.lock:
            return [json.loads(body) for _, body in self.requests]

    def close(self):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def signature_ok(headers, body):
    expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("x-llmlimit-signature", ""), expected)


def spend(server, key, amount):
    lease_id = str(uuid.uuid4())
    status, _, body = server.reserve(lease_id, {key: amount})
    assert status == 200 and body["allowed"], (status, body)
    status, _, body = server.complete(lease_id, {key: amount})
    assert status == 200, (status, body)


class AlertsTest(unittest.TestCase):
    # One cluster for the class (tigerbeetle): each test's keys are its own, and a
    # cluster takes long to start on a busy machine.
    cluster = None

    @classmethod
    def tearDownClass(cls):
        if AlertsTest.cluster is not None:
            AlertsTest.cluster.stop()
            AlertsTest.cluster = None

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="llmlimit-alerts-")
        self.secret_file = os.path.join(self.dir, "secret")
        with open(self.secret_file, "wb") as f:
            f.write(SECRET + b"\n")  # the trailing newline is not the secret's
        self.receiver = Receiver()
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.cleanup()
        self.receiver.close()

    def start(self, args=(), data_dir=None, webhook=True):
        args = ["--alert-scan-ms", str(SCAN_MS), "--alert-retry-ms", "100",
                "--alert-secret-file", self.secret_file] + list(args)
        if webhook:
            args += ["--alert-webhook", self.receiver.url]
        if BACKEND == "tigerbeetle":
            if AlertsTest.cluster is None:
                from tb_cluster import Cluster
                AlertsTest.cluster = Cluster()
                AlertsTest.cluster.format()
                AlertsTest.cluster.start()
            args += ["--tb-addresses", AlertsTest.cluster.address, "--tb-sessions", "2"]
        server = Server(BINARY, backend=BACKEND, data_dir=data_dir, args=args).start()
        self.servers.append(server)
        return server

    def put(self, server, definition):
        status, _, body = server.put_limit(definition)
        self.assertEqual(status, 200, body)

    def alerts(self, server):
        status, headers, body = server.request("GET", "/v1/alerts")
        self.assertEqual(status, 200, body)
        return body["alerts"]

    def received(self, count, receiver=None):
        receiver = receiver or self.receiver
        self.assertTrue(wait_until(lambda: len(receiver.requests) >= count),
                        "%d alerts expected, got %r" % (count, receiver.bodies()))
        return receiver.bodies()

    def assert_quiet(self, count, receiver=None):
        time.sleep(QUIET_S)
        receiver = receiver or self.receiver
        self.assertEqual(len(receiver.requests), count, receiver.bodies())

    def saved_sent(self, server, count):
        """alerts.json on disk says `count` alerts were sent."""
        def done():
            try:
                with open(os.path.join(server.data_dir, "alerts.json")) as f:
                    kept = json.load(f)
            except (OSError, ValueError):
                return False
            return sum(1 for a in kept if a["delivery"] == "sent") >= count
        self.assertTrue(wait_until(done))

    def test_thresholds_fire_once_signed_and_never_again_after_restart_or_kill(self):
        """Each threshold of a budget fires once, signed; scans, a restart and
        kill -9 never fire it again."""
        server = self.start()
        self.put(server, {"key": "team:usd", "kind": "budget", "capacity": 1000, "period": "month",
                          "alerts": [{"at_percent": 50}, {"at_percent": 80}]})
        spend(server, "team:usd", 600)
        bodies = self.received(1)
        first = bodies[0]
        self.assertEqual(first["type"], "limit.threshold")
        self.assertEqual(first["key"], "team:usd")
        self.assertEqual(first["kind"], "budget")
        self.assertEqual(first["at_percent"], 50)
        self.assertEqual((first["used"], first["debt"], first["capacity"]), (600, 0, 1000))
        self.assertLess(first["period_start_unix_ms"], first["at_unix_ms"])
        self.assertLess(first["at_unix_ms"], first["period_end_unix_ms"])
        self.assertEqual(len(first["id"]), 64)
        headers, raw = self.receiver.requests[0]
        self.assertTrue(signature_ok(headers, raw), headers)
        self.assertEqual(headers["x-llmlimit-alert-id"], first["id"])
        self.assert_quiet(1)
        spend(server, "team:usd", 250)  # 850: 80 %
        bodies = self.received(2)
        self.assertEqual(bodies[1]["at_percent"], 80)
        self.assertNotEqual(bodies[1]["id"], first["id"])
        self.saved_sent(server, 2)
        server.restart()
        self.assert_quiet(2)
        self.saved_sent(server, 2)
        server.kill()
        server.start()
        self.assert_quiet(2)
        listed = self.alerts(server)
        self.assertEqual([a["at_percent"] for a in listed], [80, 50])  # newest first
        self.assertTrue(all(a["delivery"] == "sent" and a["attempts"] == 1 for a in listed))

    def test_capacity_cut_and_raised_back_does_not_fire_again(self):
        """A threshold fired in a period stays fired when capacity goes down
        and back up: the id is the limit's, the threshold's and the period's."""
        server = self.start()
        definition = {"key": "cap", "kind": "budget", "capacity": 100, "period": "day",
                      "alerts": [{"at_percent": 80}]}
        self.put(server, definition)
        spend(server, "cap", 85)
        first = self.received(1)[0]
        self.put(server, dict(definition, capacity=1000))  # 8.5 %
        self.assert_quiet(1)
        self.put(server, definition)  # 85 % again
        self.assert_quiet(1)
        self.assertEqual(len(self.alerts(server)), 1)
        self.assertEqual(self.alerts(server)[0]["id"], first["id"])

    def test_receiver_that_fails_then_recovers_gets_the_alert(self):
        """A receiver answering 500 twice gets the same signed alert a third
        time; GET /v1/alerts then says sent after 3 attempts."""
        self.receiver.close()
        self.receiver = Receiver(answers=[500, 500])
        server = self.start()
        self.put(server, {"key": "flaky", "kind": "budget", "capacity": 10, "period": "day",
                          "alerts": [{"at_percent": 100}]})
        spend(server, "flaky", 10)
        bodies = self.received(3)
        self.assertEqual(len({b["id"] for b in bodies}), 1)
        for headers, raw in self.receiver.requests:
            self.assertTrue(signature_ok(headers, raw))
        self.assertTrue(wait_until(lambda: self.alerts(server)[0]["delivery"] == "sent"))
        alert = self.alerts(server)[0]
        self.assertEqual(alert["attempts"], 3)
        self.assertEqual(alert["last_error"], "")
        status, _, text = server.request("GET", "/metrics")
        self.assertIn("llmlimit_alerts_sent_total 1", text)
        self.assertIn("llmlimit_alerts_pending 0", text)

    def test_a_pending_alert_survives_kill_and_is_delivered_after(self):
        """An alert its receiver refuses is still pending after kill -9, and
        the restarted server delivers it, once, with the same id."""
        self.receiver.close()
        self.receiver = Receiver(answers=[503] * 100000)
        server = self.start()
        self.put(server, {"key": "kept", "kind": "budget", "capacity": 10, "period": "month",
                          "alerts": [{"at_percent": 50}]})
        spend(server, "kept", 6)
        self.assertTrue(wait_until(lambda: len(self.receiver.requests) >= 2))
        pending = self.alerts(server)[0]
        self.assertEqual(pending["delivery"], "pending")
        server.kill()
        with self.receiver.lock:
            self.receiver.answers = []  # takes what comes from now on
            refused = len(self.receiver.requests)
        server.start()
        self.assertTrue(wait_until(lambda: self.alerts(server)[0]["delivery"] == "sent"))
        bodies = self.receiver.bodies()
        self.assertEqual({b["id"] for b in bodies}, {pending["id"]})
        self.assert_quiet(refused + 1)

    def test_receiver_that_never_answers_blocks_neither_reserves_nor_other_alerts(self):
        """One limit's webhook never answers: reserves keep being answered and
        another limit's alert is delivered meanwhile."""
        dead = Receiver(hang=True)
        try:
            server = self.start()
            self.put(server, {"key": "dead", "kind": "budget", "capacity": 10, "period": "day",
                              "alerts": [{"at_percent": 10}], "webhook": dead.url})
            self.put(server, {"key": "live", "kind": "budget", "capacity": 10, "period": "day",
                              "alerts": [{"at_percent": 10}]})
            self.put(server, {"key": "rps", "kind": "rolling", "capacity": 1000000,
                              "window_seconds": 60})
            spend(server, "dead", 5)
            self.assertTrue(wait_until(lambda: len(dead.requests) == 1))
            spend(server, "live", 5)
            body = self.received(1)[0]
            self.assertEqual(body["key"], "live")
            self.assertEqual(len(dead.requests), 1)  # still hanging
            for _ in range(50):
                spend(server, "rps", 1)
            alerts = {a["key"]: a for a in self.alerts(server)}
            self.assertEqual(alerts["dead"]["delivery"], "pending")
            self.assertEqual(alerts["live"]["delivery"], "sent")
            status, _, text = server.request("GET", "/metrics")
            self.assertIn("llmlimit_alerts_pending 1", text)
        finally:
            dead.close()

    def test_slack_format_sends_a_text_message(self):
        """A webhook with "format": "slack" gets {"text": ...} naming the limit
        and the threshold."""
        slack = Receiver()
        try:
            server = self.start()
            self.put(server, {"key": "chat", "kind": "budget", "capacity": 100, "period": "week",
                              "alerts": [{"at_percent": 90}],
                              "webhook": {"url": slack.url, "format": "slack"}})
            status, _, body = server.request("GET", "/v1/admin/limits/chat")
            self.assertEqual(body["limit"]["definition"]["webhook"],
                             {"url": slack.url, "format": "slack"})
            spend(server, "chat", 95)
            message = self.received(1, slack)[0]
            self.assertEqual(list(message), ["text"])
            self.assertIn("chat", message["text"])
            self.assertIn("90%", message["text"])
            self.assertEqual(self.receiver.requests, [])  # the limit's own webhook only
            self.assertEqual(self.alerts(server)[0]["format"], "slack")
        finally:
            slack.close()

    def test_alerts_without_a_webhook_are_listed_and_a_pending_one_gives_up_after_a_day(self):
        """Without any webhook an alert is listed with delivery "none"; one that
        its receiver never takes is "failed" 24 h after it fired."""
        self.receiver.close()
        self.receiver = Receiver(answers=[503] * 1000)
        server = self.start(args=["--test-clock"])
        self.put(server, {"key": "nowhere", "kind": "budget", "capacity": 10, "period": "month",
                          "alerts": [{"at_percent": 50}], "webhook": None})
        spend(server, "nowhere", 6)
        self.assertTrue(wait_until(lambda: len(self.alerts(server)) == 1))
        alert = self.alerts(server)[0]
        self.assertEqual(alert["delivery"], "pending")
        self.assertTrue(wait_until(lambda: self.alerts(server)[0]["attempts"] >= 2))
        self.assertEqual(self.alerts(server)[0]["last_error"], "HTTP 503")
        status, _, _ = server.request("POST", "/v1/admin/clock", {"advance_ms": 25 * 3600 * 1000})
        self.assertEqual(status, 200)
        self.assertTrue(wait_until(lambda: self.alerts(server)[0]["delivery"] == "failed"))
        status, _, text = server.request("GET", "/metrics")
        self.assertIn("llmlimit_alerts_failed_total 1", text)
        quiet = self.start(webhook=False)
        self.put(quiet, {"key": "q", "kind": "budget", "capacity": 10, "period": "month",
                         "alerts": [{"at_percent": 50}]})
        spend(quiet, "q", 6)
        self.assertTrue(wait_until(lambda: len(self.alerts(quiet)) == 1))
        self.assertEqual(self.alerts(quiet)[0]["delivery"], "none")
        self.assertEqual(self.alerts(quiet)[0]["webhook"], "")

    def test_rolling_limit_full_for_a_whole_window_alerts(self):
        """A rolling limit alerts once it has been full for its whole window,
        not when it was full for a moment."""
        server = self.start()
        self.put(server, {"key": "rpm", "kind": "rolling", "capacity": 3, "window_seconds": 3,
                          "alerts": [{"at_percent": 100}]})
        spend(server, "rpm", 3)  # full now, for a window at most
        time.sleep(1.5)  # half the window (a backend may expire it late, never early)
        self.assertEqual(self.receiver.requests, [])
        stop = threading.Event()

        def keep_full():
            while not stop.is_set():
                lease_id = str(uuid.uuid4())
                status, _, body = server.reserve(lease_id, {"rpm": 1})
                if status == 200 and body["allowed"]:
                    server.complete(lease_id, {"rpm": 1})
                time.sleep(0.02)
        thread = threading.Thread(target=keep_full, daemon=True)
        thread.start()
        try:
            body = self.received(1)[0]
        finally:
            stop.set()
            thread.join()
        self.assertEqual((body["kind"], body["at_percent"], body["capacity"]), ("rolling", 100, 3))
        self.assertEqual(len(self.receiver.requests), 1)
        self.assertEqual(body["period_end_unix_ms"] - body["period_start_unix_ms"], 86400000)

    def test_receiver_that_answers_slowly_gets_the_alert_once(self):
        """A receiver that takes 3 s to answer (under the send timeout) gets the
        alert once, marked sent after one attempt; reserves are answered while
        it is being delivered."""
        self.receiver.close()
        self.receiver = Receiver(delay_s=3.0)
        server = self.start()
        self.put(server, {"key": "slow", "kind": "budget", "capacity": 10, "period": "day",
                          "alerts": [{"at_percent": 50}]})
        self.put(server, {"key": "rps", "kind": "rolling", "capacity": 1000000,
                          "window_seconds": 60})
        spend(server, "slow", 5)
        self.assertTrue(wait_until(lambda: len(self.receiver.requests) == 1))
        for _ in range(20):  # answered while the receiver holds the alert
            spend(server, "rps", 1)
        self.assertTrue(wait_until(lambda: self.alerts(server)[0]["delivery"] == "sent"))
        alert = self.alerts(server)[0]
        self.assertEqual((alert["attempts"], alert["last_error"]), (1, ""))
        self.assert_quiet(1)

    def test_concurrency_limit_full_for_a_whole_timeout_alerts(self):
        """A concurrency limit alerts once its slots have all been held for a
        whole timeout_seconds, not when they were full for a moment."""
        server = self.start()
        self.put(server, {"key": "slots", "kind": "concurrency", "capacity": 2,
                          "timeout_seconds": 6, "alerts": [{"at_percent": 100}]})
        held = []
        for _ in range(2):
            lease_id = str(uuid.uuid4())
            status, _, body = server.reserve(lease_id, {"slots": 1})
            self.assertTrue(status == 200 and body["allowed"], body)
            held.append(lease_id)
        time.sleep(1.5)  # full for a quarter of its timeout (a slow machine may take longer)
        for lease_id in held:
            status, _, body = server.release(lease_id)
            self.assertEqual(status, 200, body)
        self.assert_quiet(0)
        stop = threading.Event()

        def keep_full():
            # Takes every free slot at once and never gives one back: a held slot
            # frees itself after timeout_seconds and is taken again.
            while not stop.is_set():
                server.reserve(str(uuid.uuid4()), {"slots": 1})
                time.sleep(0.02)
        thread = threading.Thread(target=keep_full, daemon=True)
        thread.start()
        try:
            body = self.received(1)[0]
        finally:
            stop.set()
            thread.join()
        self.assertEqual((body["type"], body["key"], body["kind"], body["at_percent"]),
                         ("limit.threshold", "slots", "concurrency", 100))
        self.assertEqual(body["capacity"], 2)
        self.assert_quiet(1)

    def test_budget_spending_fast_runs_out_before_its_period_ends(self):
        """A budget whose spend rate empties it before its period ends sends
        one "budget.runout" alert."""
        server = self.start()
        self.put(server, {"key": "burn", "kind": "budget", "capacity": 1000000, "period": "month",
                          "alerts": [{"runout_before_period_end": True}]})
        time.sleep(6)  # the spend sampler's first sample: nothing spent
        spend(server, "burn", 1000)
        body = self.received(1)[0]
        self.assertEqual(body["type"], "budget.runout")
        self.assertIsNone(body["at_percent"])
        self.assert_quiet(1)

    def test_bad_alerts_are_a_400_naming_the_field_and_change_nothing(self):
        server = self.start()
        good = {"key": "bad", "kind": "budget", "capacity": 100, "period": "day",
                "alerts": [{"at_percent": 80}]}
        self.put(server, good)
        _, _, before = server.request("GET", "/v1/admin/limits/bad")
        cases = [
            ({"alerts": [{"at_percent": 0}]}, "alerts[0].at_percent"),
            ({"alerts": [{"at_percent": 1001}]}, "alerts[0].at_percent"),
            ({"alerts": [{"at_percent": "80"}]}, "alerts[0].at_percent"),
            ({"alerts": [{"at_percent": 80}, {"at_percent": 80}]}, "alerts[1]"),
            ({"alerts": [{"at_percent": p} for p in range(1, 10)]}, "alerts"),
            ({"alerts": [{"at_percent": 80, "extra": 1}]}, "alerts[0]"),
            ({"alerts": [{"bogus": True}]}, "alerts[0].bogus"),
            ({"alerts": [{"runout_before_period_end": False}]},
             "alerts[0].runout_before_period_end"),
            ({"alerts": {"at_percent": 80}}, "alerts"),
            ({"webhook": "ftp://hooks.example/x"}, "webhook"),
            ({"webhook": "hooks.example/x"}, "webhook"),
            ({"webhook": "http://"}, "webhook"),
            ({"webhook": "https://" + "a" * 600}, "webhook"),
            ({"webhook": {"url": "https://h.example", "format": "xml"}}, "webhook.format"),
            ({"webhook": {"url": "https://h.example", "secret": "x"}}, "webhook.secret"),
            ({"webhook": {"format": "slack"}}, "webhook.url"),
        ]
        for change, field in cases:
            status, headers, body = server.put_limit(dict(good, **change))
            self.assertEqual(status, 400, (change, body))
            self.assertTrue(body["error"].startswith(field + ":"), (change, body))
        status, _, body = server.put_limit({"key": "r", "kind": "rolling", "capacity": 1,
                                            "window_seconds": 60,
                                            "alerts": [{"runout_before_period_end": True}]})
        self.assertEqual(status, 400)
        self.assertTrue(body["error"].startswith("alerts[0].runout_before_period_end:"), body)
        _, _, after = server.request("GET", "/v1/admin/limits/bad")
        self.assertEqual(after, before)
        status, _, _ = server.request("GET", "/v1/admin/limits/r")
        self.assertEqual(status, 404)
        status, _, body = server.request("GET", "/v1/alerts?limit=0")
        self.assertEqual(status, 400)
        status, _, body = server.request("GET", "/v1/alerts?limit=1001")
        self.assertEqual(status, 400)

    def test_bad_flags_and_a_broken_alerts_file_stop_the_start(self):
        """A webhook flag that is not http(s), a missing or empty secret file and an
        alerts.json that is not one stop llmlimitd at start (exit 1), naming what;
        a stale alerts.json.tmp is removed and never read."""
        from harness import ServerError
        empty = os.path.join(self.dir, "empty")
        open(empty, "w").close()
        cases = [(["--alert-webhook", "ftp://hooks.example/x"], "--alert-webhook"),
                 (["--alert-secret-file", os.path.join(self.dir, "missing")], "missing"),
                 (["--alert-secret-file", empty], "empty")]
        for args, named in cases:
            server = Server(BINARY, backend="memory", args=args)
            self.servers.append(server)
            with self.assertRaises(ServerError) as failed:
                server.start()
            self.assertIn(named, str(failed.exception))
        data_dir = tempfile.mkdtemp(prefix="llmlimit-alerts-file-")
        with open(os.path.join(data_dir, "alerts.json"), "w") as f:
            f.write('[{"id": "not an alert"}]\n')
        server = Server(BINARY, backend="memory", data_dir=data_dir)
        self.servers.append(server)
        with self.assertRaises(ServerError) as failed:
            server.start()
        self.assertIn("alerts.json: line 1: not an alert", str(failed.exception))
        with open(os.path.join(data_dir, "alerts.json"), "w") as f:
            f.write("[]\n")
        with open(os.path.join(data_dir, "alerts.json.tmp"), "w") as f:
            f.write("garbage")
        server.start()
        self.assertFalse(os.path.exists(os.path.join(data_dir, "alerts.json.tmp")))
        self.assertEqual(self.alerts(server), [])

    def test_two_front_ends_on_one_cluster_deliver_a_threshold_once(self):
        """Two front ends on one TigerBeetle cluster, the same definition in
        each: both see the threshold, with the same id; the one that claims it
        in the cluster delivers it, the other lists it as "elsewhere", and a
        restart of either changes nothing."""
        if BACKEND != "tigerbeetle":
            self.skipTest("front ends share a limit on tigerbeetle only")
        first = self.start()
        second = self.start()
        definition = {"key": "shared", "kind": "budget", "capacity": 100, "period": "month",
                      "alerts": [{"at_percent": 50}]}
        self.put(first, definition)
        self.put(second, definition)
        spend(first, "shared", 60)
        body = self.received(1)[0]

        def both_listed():
            return all(len(self.alerts(s)) == 1 and self.alerts(s)[0]["claimed"]
                       for s in (first, second))
        self.assertTrue(wait_until(both_listed))
        listed = sorted((self.alerts(s)[0] for s in (first, second)),
                        key=lambda a: a["delivery"])
        self.assertEqual([a["delivery"] for a in listed], ["elsewhere", "sent"])
        self.assertEqual({a["id"] for a in listed}, {body["id"]})
        self.assert_quiet(1)
        first.restart()
        second.restart()
        self.assert_quiet(1)

if __name__ == "__main__":
    main(warnings="ignore")
