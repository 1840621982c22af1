"""The HTTP API of llmlimitd, route by route, against the real binary:
happy paths and status codes (docs/api.md), tokens, metrics, health,
graceful shutdown, registry persistence and start-up failures.

The backend comes from --backend (default memory)."""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import unittest.mock
import urllib.parse
import uuid

import harness
from harness import Server, backend_from_argv, binary_from_argv, wait_until

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

DECREASE_RETRY_MS = 1500


def lease():
    return str(uuid.uuid4())


def rolling(key, capacity, window_seconds=60, **extra):
    return dict({"key": key, "kind": "rolling", "capacity": capacity,
                 "window_seconds": window_seconds}, **extra)


def concurrency(key, capacity, timeout_seconds=300):
    return {"key": key, "kind": "concurrency", "capacity": capacity,
            "timeout_seconds": timeout_seconds}


def budget(key, capacity, timeout_seconds=5):
    return {"key": key, "kind": "budget", "capacity": capacity, "period": "month",
            "timeout_seconds": timeout_seconds, "unit": "usd_micros"}


def quote(key):
    return urllib.parse.quote(key, safe="")


RESERVE_FIELDS = {"allowed", "retry_after_ms", "reserved_at_unix_ms", "expires_at_unix_ms",
                  "error", "denied_keys"}


class Api(unittest.TestCase):
    """One server for the whole class; every test uses its own keys."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY, backend=BACKEND, args=[
            "--test-clock", "--decrease-retry-ms", str(DECREASE_RETRY_MS)]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        assert code == 0, "llmlimitd exit code %r" % code

    def put(self, definition, expect_status="active"):
        status, _, body = self.server.put_limit(definition)
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {"ok": True, "status": expect_status})

    def reserve(self, lease_id, requirements, **kw):
        status, headers, body = self.server.reserve(lease_id, requirements, **kw)
        self.assertEqual(status, 200, body)
        self.assertEqual(set(body), RESERVE_FIELDS, body)
        return body, headers

    def usage(self, key):
        status, _, body = self.server.usage(key)
        self.assertEqual(status, 200, body)
        return body

    # -- health --------------------------------------------------------------

    def test_healthz_and_readyz(self):
        """/healthz and /readyz answer 200 {"ok":true} without a token."""
        for path in ("/healthz", "/readyz"):
            status, headers, body = self.server.request("GET", path)
            self.assertEqual((status, body), (200, {"ok": True}), path)
            self.assertEqual(headers["content-type"], "application/json")

    def raw_exchange(self, data):
        """Sends data on a fresh connection, reads until the server closes or
        2 s of silence; returns every byte that came."""
        with socket.create_connection((self.server.host, self.server.port), timeout=10) as sock:
            sock.sendall(data)
            sock.settimeout(2)
            received = b""
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    received += chunk
            except socket.timeout:
                pass
        return received

    def test_root_points_at_the_console(self):
        """GET / is 200 with {"service":"llmlimitd","console":"/console"}; HEAD / the same head
        and no body (a HEAD then a GET on one connection: the GET's answer follows at once)."""
        body = b'{"service":"llmlimitd","console":"/console"}\n'
        got = self.raw_exchange(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, _, rest = got.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), got)
        self.assertIn(b"\r\nContent-Type: application/json", head)
        self.assertEqual(rest, body)
        got = self.raw_exchange(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
                                b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, _, rest = got.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), got)
        self.assertIn(b"\r\nContent-Length: %d" % len(body), head)
        self.assertTrue(rest.startswith(b"HTTP/1.1 200 "), got)  # no body before it
        self.assertTrue(rest.endswith(b'{"ok":true}\n'), got)
        status, headers, answer = self.server.request("POST", "/")
        self.assertEqual((status, answer, headers["allow"]),
                         (405, {"error": "method_not_allowed"}, "GET, HEAD"))
        self.assertEqual(self.server.request("GET", "/x")[0], 404)

    def test_json_answers_end_with_a_newline(self):
        """Every JSON answer is one line ended by a newline (so curl's answers do not run
        together): a route's answer, allowed or denied, a handler's error, a refusal before
        any route, a refusal of the transport; /metrics' text is unchanged."""
        key = "api:newline:rpm"
        self.put(rolling(key, 1))
        reserve = json.dumps({"lease_id": lease(), "requirements": [{"key": key, "amount": 1}]})
        denied = json.dumps({"lease_id": lease(), "requirements": [{"key": key, "amount": 1}]})

        def post(path, body):
            data = body.encode()
            return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n" % (path.encode(), len(data))) + data

        cases = [("GET /healthz", b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                  200),
                 ("reserve allowed", post("/v1/reserve", reserve), 200),
                 ("reserve denied", post("/v1/reserve", denied), 200),
                 ("malformed body", post("/v1/reserve", "{"), 400),
                 ("unknown route", b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                  404),
                 ("bad request line", b"GET /v1/usage/x HTTP/9.9\r\nHost: x\r\n\r\n", 505)]
        for name, request, status in cases:
            got = self.raw_exchange(request)
            head, _, rest = got.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 %d " % status), (name, got))
            self.assertIn(b"\r\nContent-Type: application/json", head, name)
            length = int(re.search(rb"\r\nContent-Length: ([0-9]+)", head).group(1))
            self.assertEqual(len(rest), length, (name, got))
            self.assertTrue(rest.endswith(b"}\n"), (name, got))
            self.assertEqual(rest.count(b"\n"), 1, (name, got))
            json.loads(rest)
        got = self.raw_exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        rest = got.partition(b"\r\n\r\n")[2]
        self.assertTrue(rest.endswith(b"\n") and not rest.endswith(b"\n\n"), rest[-200:])

    # -- admin ---------------------------------------------------------------

    def test_admin_put_get_list_delete(self):
        """PUT creates, GET shows the LimitState, the list is sorted, DELETE removes."""
        keys = ["api:admin:b", "api:admin:a"]
        self.put(rolling(keys[0], 100, unit="tokens", description="b limit"))
        self.put(budget(keys[1], 5000000, timeout_seconds=1000))  # clamped to 300
        status, _, body = self.server.request("GET", "/v1/admin/limits/" + quote(keys[0]))
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {"limit": {
            "definition": {"key": keys[0], "kind": "rolling", "capacity": 100,
                           "window_seconds": 60, "timeout_seconds": 0, "period": "",
                           "unit": "tokens", "description": "b limit", "overage": "debt"},
            "status": "active", "pending_decrease_to": 0}})
        status, _, body = self.server.request("GET", "/v1/admin/limits")
        self.assertEqual(status, 200, body)
        listed = [s["definition"]["key"] for s in body["limits"]]
        self.assertEqual(listed, sorted(listed))
        mine = [s for s in body["limits"] if s["definition"]["key"] in keys]
        self.assertEqual([s["definition"]["key"] for s in mine], sorted(keys))
        self.assertEqual(mine[0]["definition"]["timeout_seconds"], 300)
        self.assertEqual(mine[0]["definition"]["period"], "month")
        status, _, body = self.server.request("DELETE", "/v1/admin/limits/" + quote(keys[0]))
        self.assertEqual((status, body), (200, {"ok": True}))
        for method in ("GET", "DELETE"):
            status, _, body = self.server.request(method, "/v1/admin/limits/" + quote(keys[0]))
            self.assertEqual(status, 404, body)
            self.assertEqual(body, {"error": "unknown_limit_key: " + keys[0]})
        status, _, body = self.server.usage(keys[0])
        self.assertEqual((status, body), (404, {"error": "unknown_limit_key: " + keys[0]}))

    def test_admin_put_updates_and_rejects_kind_change(self):
        """Raising capacity applies at once; changing kind is a 400 naming kind."""
        key = "api:admin:change"
        self.put(rolling(key, 10))
        self.put(rolling(key, 20))
        self.assertEqual(self.usage(key)["capacity"], 20)
        status, _, body = self.server.put_limit(concurrency(key, 5))
        self.assertEqual(status, 400, body)
        self.assertTrue(body["error"].startswith("kind:"), body)
        self.assertEqual(self.usage(key)["kind"], "rolling")

    def test_deleted_limit_is_unknown_to_reserve_but_leases_complete(self):
        """After DELETE a reserve names the key unknown; an existing lease still completes."""
        key = "api:admin:deleted"
        self.put(concurrency(key, 5))
        held = lease()
        body, _ = self.reserve(held, {key: 1})
        self.assertTrue(body["allowed"])
        self.assertEqual(self.server.request("DELETE", "/v1/admin/limits/" + quote(key))[0], 200)
        body, _ = self.reserve(lease(), {key: 1})
        self.assertEqual((body["allowed"], body["error"], body["denied_keys"]),
                         (False, "unknown_limit_key: " + key, [key]))
        status, _, body = self.server.complete(held, {key: 1})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["ok"])

    # -- reserve -------------------------------------------------------------

    def test_reserve_allowed_then_denied_with_retry_after(self):
        """Allowed reserves hold capacity; a denial names the key and sends Retry-After."""
        rpm, tpm = "api:reserve:rpm", "api:reserve:tpm"
        self.put(rolling(rpm, 10))
        self.put(rolling(tpm, 1000))
        body, headers = self.reserve(lease(), {rpm: 1, tpm: 600})
        self.assertTrue(body["allowed"])
        self.assertEqual((body["error"], body["denied_keys"], body["retry_after_ms"]), ("", [], 0))
        self.assertGreater(body["reserved_at_unix_ms"], 1700000000000)
        self.assertEqual(body["expires_at_unix_ms"] - body["reserved_at_unix_ms"], 60000)
        self.assertNotIn("retry-after", headers)
        body, headers = self.reserve(lease(), {rpm: 1, tpm: 600})
        self.assertFalse(body["allowed"])
        self.assertEqual((body["error"], body["denied_keys"]), ("", [tpm]))
        self.assertGreater(body["retry_after_ms"], 0)
        self.assertLessEqual(body["retry_after_ms"], 60000)
        self.assertEqual(body["reserved_at_unix_ms"], 0)
        self.assertEqual(int(headers["retry-after"]), (body["retry_after_ms"] + 999) // 1000)
        self.assertEqual(self.usage(rpm)["reserved"], 1)  # nothing held by the denial
        self.assertEqual(self.usage(tpm)["reserved"], 600)

    def test_reserve_is_idempotent_and_conflicts(self):
        """Same lease and requirements (any order) give the same answer; different ones 409."""
        a, b = "api:idem:a", "api:idem:b"
        self.put(rolling(a, 100))
        self.put(rolling(b, 100))
        lease_id = lease()
        first, _ = self.reserve(lease_id, [{"key": a, "amount": 5}, {"key": b, "amount": 7}])
        again, _ = self.reserve(lease_id, [{"key": b, "amount": 7}, {"key": a, "amount": 5}])
        self.assertTrue(first["allowed"])
        self.assertEqual(again, first)
        self.assertEqual(self.usage(a)["reserved"], 5)
        status, _, body = self.server.reserve(lease_id, {a: 6, b: 7})
        self.assertEqual((status, body), (409, {"error": "lease_conflict"}))

    def test_denied_lease_stays_denied(self):
        """A lease denied for capacity is denied again even after capacity frees."""
        key = "api:denied:conc"
        self.put(concurrency(key, 1))
        holder = lease()
        self.assertTrue(self.reserve(holder, {key: 1})[0]["allowed"])
        denied = lease()
        first, _ = self.reserve(denied, {key: 1})
        self.assertFalse(first["allowed"])
        self.assertEqual(self.server.release(holder)[0], 200)
        again, _ = self.reserve(denied, {key: 1})
        self.assertFalse(again["allowed"])
        self.assertEqual(again["denied_keys"], [key])
        self.assertTrue(self.reserve(lease(), {key: 1})[0]["allowed"])

    def test_definitive_denials(self):
        """unknown_limit_key and exceeds_capacity are 200 denials naming the key, retry 0."""
        key = "api:definitive:cap"
        self.put(rolling(key, 10))
        body, headers = self.reserve(lease(), {"api:definitive:missing": 1})
        self.assertEqual((body["allowed"], body["error"], body["denied_keys"], body["retry_after_ms"]),
                         (False, "unknown_limit_key: api:definitive:missing",
                          ["api:definitive:missing"], 0))
        self.assertNotIn("retry-after", headers)
        body, _ = self.reserve(lease(), {key: 11})
        self.assertEqual((body["allowed"], body["error"], body["denied_keys"], body["retry_after_ms"]),
                         (False, "exceeds_capacity:" + key, [key], 0))
        body, _ = self.reserve(lease(), {key: 9223372036854775807})
        self.assertEqual(body["error"], "exceeds_capacity:" + key)
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_caller_is_accepted(self):
        """A reserve may name its caller (up to 256 bytes)."""
        key = "api:caller"
        self.put(rolling(key, 10))
        body, _ = self.reserve(lease(), {key: 1}, caller="sales-bot " + "x" * 246)
        self.assertTrue(body["allowed"])

    # -- complete / release --------------------------------------------------

    def test_complete_release_lifecycle(self):
        """complete twice is ok; release after complete and complete after release are 409."""
        key = "api:life:conc"
        self.put(concurrency(key, 3))
        done = lease()
        self.assertTrue(self.reserve(done, {key: 2})[0]["allowed"])
        self.assertEqual(self.usage(key)["reserved"], 2)
        for _ in range(2):
            status, _, body = self.server.complete(done, {key: 2})
            self.assertEqual((status, body), (200, {"ok": True, "reconciled": True, "warnings": []}))
        self.assertEqual(self.usage(key)["reserved"], 0)
        status, _, body = self.server.release(done)
        self.assertEqual((status, body), (409, {"ok": False, "error": "already_finalized"}))
        released = lease()
        self.assertTrue(self.reserve(released, {key: 1})[0]["allowed"])
        for _ in range(2):
            status, _, body = self.server.release(released)
            self.assertEqual((status, body), (200, {"ok": True}))
        status, _, body = self.server.complete(released, {key: 1})
        self.assertEqual((status, body), (409, {"ok": False, "error": "already_finalized"}))
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_complete_unknown_lease_and_foreign_key(self):
        """Unknown lease: 200 reconciled false; an actual outside the lease: 400 naming it."""
        key = "api:complete:roll"
        self.put(rolling(key, 100))
        status, _, body = self.server.complete(lease(), {key: 1})
        self.assertEqual((status, body), (200, {"ok": True, "reconciled": False, "warnings": []}))
        lease_id = lease()
        self.assertTrue(self.reserve(lease_id, {key: 10})[0]["allowed"])
        status, _, body = self.server.complete(lease_id, {key: 5, "api:complete:other": 1})
        self.assertEqual((status, body), (400, {"ok": False,
                                               "error": "actual_key_not_in_lease:api:complete:other"}))
        self.assertEqual(self.usage(key)["reserved"], 10)
        status, _, body = self.server.complete(lease_id, {key: 4})
        self.assertEqual(status, 200, body)
        u = self.usage(key)
        self.assertEqual((u["reserved"], u["used"], u["available"]), (0, 4, 96))

    def test_complete_without_actuals_settles_at_reserved(self):
        """A complete with no actuals field settles every key at its reserved amount."""
        key = "api:complete:settle"
        self.put(rolling(key, 100))
        lease_id = lease()
        self.assertTrue(self.reserve(lease_id, {key: 30})[0]["allowed"])
        status, _, body = self.server.request("POST", "/v1/complete", {"lease_id": lease_id})
        self.assertEqual((status, body["reconciled"]), (200, True), body)
        self.assertEqual(self.usage(key)["used"], 30)

    def test_overage_warnings(self):
        """Rolling overage that does not fit: debt warns overage_debt, deny overage_denied."""
        debt, deny = "api:overage:debt", "api:overage:deny"
        self.put(rolling(debt, 100))
        self.put(rolling(deny, 100, overage="deny"))
        a, b = lease(), lease()
        self.assertTrue(self.reserve(a, {debt: 100})[0]["allowed"])
        self.assertTrue(self.reserve(b, {deny: 100})[0]["allowed"])
        status, _, body = self.server.complete(a, {debt: 150})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["warnings"], ["overage_debt:" + debt])
        self.assertEqual(self.usage(debt)["debt"], 50)
        status, _, body = self.server.complete(b, {deny: 150})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["warnings"], ["overage_denied:" + deny])
        self.assertEqual(self.usage(deny)["debt"], 0)

    def test_budget_commit_after_expiry_and_usage_fields(self):
        """Budget usage has period bounds; a commit after expiry is charged and warned."""
        key = "api:budget:late"
        self.put(budget(key, 1000000, timeout_seconds=5))
        lease_id = lease()
        self.assertTrue(self.reserve(lease_id, {key: 300000})[0]["allowed"])
        u = self.usage(key)
        self.assertEqual(set(u), {"key", "kind", "status", "capacity", "reserved", "used", "debt",
                                  "available", "period_start_unix_ms", "period_end_unix_ms",
                                  "period_start_local", "period_end_local"})
        self.assertEqual((u["kind"], u["status"], u["reserved"], u["available"]),
                         ("budget", "active", 300000, 700000))
        self.assertLess(u["period_start_unix_ms"], u["period_end_unix_ms"])
        status, _, body = self.server.request("POST", "/v1/admin/clock", {"advance_ms": 6000})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.usage(key)["reserved"], 0)
        status, _, body = self.server.complete(lease_id, {key: 1200000})
        self.assertEqual(status, 200, body)
        self.assertIn("commit_after_expiry:" + key, body["warnings"])
        u = self.usage(key)
        self.assertEqual((u["used"] + u["debt"], u["available"]), (1200000, -200000))
        # the period before this one has nothing
        status, _, before = self.server.usage(key, query="at_unix_ms=%d" % (u["period_start_unix_ms"] - 1))
        self.assertEqual(status, 200, before)
        self.assertEqual((before["used"], before["period_end_unix_ms"]), (0, u["period_start_unix_ms"]))

    def test_budget_periods_in_their_time_zone(self):
        """A zoned budget reports its period's local start and end (RFC 3339 with the offset in
        force), its definition echoes time_zone and period_anchor_day; a prepaid budget has one
        period and no local bounds; an old UTC budget reads as before."""
        berlin = dict(budget("api:period:berlin", 100), period="day", time_zone="Europe/Berlin")
        anchored = dict(budget("api:period:ny", 100), period_anchor_day=15,
                        time_zone="America/New_York")
        prepaid = dict(budget("api:period:prepaid", 100), period="none")
        for definition in (berlin, anchored, prepaid):
            self.put(definition)
        status, _, body = self.server.request("GET", "/v1/admin/limits/" + quote(anchored["key"]))
        self.assertEqual(status, 200, body)
        self.assertEqual((body["limit"]["definition"]["period_anchor_day"],
                          body["limit"]["definition"]["time_zone"]), (15, "America/New_York"))
        # 2025-03-30T12:00Z: Berlin's spring day runs 23 hours, from UTC+1 to UTC+2
        at = "at_unix_ms=%d" % 1743336000000
        status, _, u = self.server.usage(berlin["key"], query=at)
        self.assertEqual(status, 200, u)
        self.assertEqual((u["period_start_unix_ms"], u["period_end_unix_ms"]),
                         (1743289200000, 1743372000000))
        self.assertEqual((u["period_start_local"], u["period_end_local"]),
                         ("2025-03-30T00:00:00+01:00", "2025-03-31T00:00:00+02:00"))
        # New York, months from the 15th: March 15 (EDT) to April 15
        status, _, u = self.server.usage(anchored["key"], query=at)
        self.assertEqual((u["period_start_local"], u["period_end_local"]),
                         ("2025-03-15T00:00:00-04:00", "2025-04-15T00:00:00-04:00"))
        self.assertEqual(u["period_start_unix_ms"], 1742011200000)
        status, _, u = self.server.usage(prepaid["key"], query=at)
        self.assertEqual((u["period_start_unix_ms"], u["period_end_unix_ms"]),
                         (0, 253402300800000))
        self.assertNotIn("period_start_local", u)
        # an old UTC month: the same fields as before, local bounds in UTC
        old = budget("api:period:utc", 100)
        self.put(old)
        status, _, listed = self.server.request("GET", "/v1/admin/limits/" + quote(old["key"]))
        self.assertNotIn("time_zone", listed["limit"]["definition"])
        self.assertNotIn("period_anchor_day", listed["limit"]["definition"])
        status, _, u = self.server.usage(old["key"], query=at)
        self.assertEqual((u["period_start_local"], u["period_end_local"]),
                         ("2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z"))

    # -- capacity decrease ---------------------------------------------------

    def test_decrease_waits_then_applies_by_ticker(self):
        """A decrease that does not fit makes the limit decreasing; the ticker applies it."""
        key = "api:decrease:conc"
        self.put(concurrency(key, 2))
        first, second = lease(), lease()
        self.assertTrue(self.reserve(first, {key: 1})[0]["allowed"])
        self.assertTrue(self.reserve(second, {key: 1})[0]["allowed"])
        self.put(concurrency(key, 1), expect_status="decreasing")
        status, _, body = self.server.request("GET", "/v1/admin/limits/" + quote(key))
        self.assertEqual((body["limit"]["status"], body["limit"]["pending_decrease_to"],
                          body["limit"]["definition"]["capacity"]), ("decreasing", 1, 2))
        body, headers = self.reserve(lease(), {key: 1})
        self.assertEqual((body["allowed"], body["error"], body["denied_keys"], body["retry_after_ms"]),
                         (False, "limit_decreasing:" + key, [key], DECREASE_RETRY_MS))
        self.assertEqual(headers["retry-after"], "2")
        self.assertEqual(self.server.release(first)[0], 200)

        def applied():
            state = self.server.request("GET", "/v1/admin/limits/" + quote(key))[2]["limit"]
            return state["status"] == "active" and state["definition"]["capacity"] == 1
        self.assertTrue(wait_until(applied), "decrease never applied")
        self.assertEqual(self.usage(key)["capacity"], 1)

        def persisted():
            with open(os.path.join(self.server.data_dir, "limits.json")) as f:
                states = {s["definition"]["key"]: s for s in json.load(f)}
            return states[key]["status"] == "active" and states[key]["definition"]["capacity"] == 1
        self.assertTrue(wait_until(persisted), "limits.json not rewritten")

    # -- batches -------------------------------------------------------------

    def test_reserve_batch_per_item_results(self):
        """Each batch item gets its own result and status, in order; the batch is 200."""
        key = "api:batch:conc"
        self.put(concurrency(key, 2))
        ok_lease = lease()
        requests = [
            {"lease_id": ok_lease, "requirements": [{"key": key, "amount": 1}]},
            {"lease_id": lease(), "requirements": [{"key": key, "amount": -1}]},
            {"lease_id": lease(), "requirements": [{"key": key, "amount": 5}]},
            {"lease_id": ok_lease, "requirements": [{"key": key, "amount": 2}]},
            {"lease_id": lease(), "requirements": [{"key": "api:batch:none", "amount": 1}]},
        ]
        status, _, body = self.server.request("POST", "/v1/reserve/batch", {"requests": requests})
        self.assertEqual(status, 200, body)
        results = body["results"]
        self.assertEqual(len(results), 5)
        self.assertEqual(results[0]["status"], 200)
        self.assertTrue(results[0]["allowed"])
        self.assertEqual(set(results[0]), RESERVE_FIELDS | {"status"})
        self.assertEqual(results[1], {"status": 400, "error":
                         "requests[1].requirements[0].amount: must be an integer 1..9223372036854775807"})
        self.assertEqual((results[2]["status"], results[2]["error"]), (200, "exceeds_capacity:" + key))
        self.assertEqual(results[3], {"status": 409, "error": "lease_conflict"})
        self.assertEqual(results[4]["error"], "unknown_limit_key: api:batch:none")
        self.assertEqual(self.usage(key)["reserved"], 1)

    def test_complete_batch_per_item_results(self):
        """complete/batch answers each item as the single endpoint would, plus status."""
        key = "api:batch:roll"
        self.put(rolling(key, 100))
        leases = [lease(), lease()]
        for lease_id in leases:
            self.assertTrue(self.reserve(lease_id, {key: 10})[0]["allowed"])
        self.assertEqual(self.server.release(leases[1])[0], 200)
        requests = [
            {"lease_id": leases[0], "actuals": [{"key": key, "actual_amount": 3}]},
            {"lease_id": leases[1], "actuals": [{"key": key, "actual_amount": 3}]},
            {"lease_id": lease(), "actuals": []},
            {"lease_id": "bad id", "actuals": []},
        ]
        status, _, body = self.server.request("POST", "/v1/complete/batch", {"requests": requests})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["results"], [
            {"status": 200, "ok": True, "reconciled": True, "warnings": []},
            {"status": 409, "ok": False, "error": "already_finalized"},
            {"status": 200, "ok": True, "reconciled": False, "warnings": []},
            {"status": 400, "error": "requests[3].lease_id: must be 1-128 bytes of [A-Za-z0-9._:-]"},
        ])
        self.assertEqual(self.usage(key)["used"], 3)

    # -- routes --------------------------------------------------------------

    def test_unknown_route_and_wrong_method(self):
        """Unknown paths are 404 not_found; a wrong method is 405 with Allow."""
        status, _, body = self.server.request("GET", "/v1/nothing")
        self.assertEqual((status, body), (404, {"error": "not_found"}))
        status, headers, body = self.server.request("GET", "/v1/reserve")
        self.assertEqual((status, body), (405, {"error": "method_not_allowed"}))
        self.assertEqual(headers["allow"], "POST")
        status, headers, body = self.server.request("POST", "/v1/admin/limits/x")
        self.assertEqual(status, 405)
        self.assertEqual(headers["allow"], "GET, HEAD, DELETE")

    def test_percent_encoded_keys_in_paths(self):
        """Keys with reserved characters round-trip through percent-encoding."""
        key = "team:a/b?c%d#e"
        self.put(rolling(key, 7))
        self.assertEqual(self.usage(key)["capacity"], 7)
        status, _, body = self.server.request("GET", "/v1/admin/limits/" + quote(key))
        self.assertEqual((status, body["limit"]["definition"]["key"]), (200, key))

    def test_optional_routes_without_backend_support(self):
        """events is 404 not_supported_by_backend on memory; usage?group_by=caller answers on both."""
        key = "api:optional"
        self.put(rolling(key, 7))
        self.assertTrue(self.reserve(lease(), {key: 3}, caller="who")[0]["allowed"])
        status, _, events = self.server.request("GET", "/v1/events?limit=5")
        status_by, _, by_caller = self.server.usage(key, query="group_by=caller")
        if BACKEND == "memory":
            self.assertEqual((status, events), (404, {"error": "not_supported_by_backend"}))
        else:
            self.assertEqual(status, 200, events)
            self.assertIn("events", events)
        self.assertEqual(status_by, 200, by_caller)
        self.assertEqual(by_caller["callers"],
                         [{"caller": "who", "reserved": 3, "used": 0, "debt": 0, "spent": 0,
                           "calls": 1}])

    def test_usage_by_caller_carries_an_overrun(self):
        """group_by=caller: a budget overrun's debt is its caller's, spent is used + debt, the
        callers add up to the budget's spend, and the largest spender comes first."""
        key = "api:by-caller:usd"
        self.put(budget(key, 5000000))
        self.assertTrue(self.reserve("by-caller-big", {key: 3000000}, caller="careful")[0]["allowed"])
        self.assertEqual(self.server.complete("by-caller-big", {key: 3000000})[0], 200)
        self.assertTrue(self.reserve("by-caller-over", {key: 2000000}, caller="overrun")[0]["allowed"])
        self.assertEqual(self.server.complete("by-caller-over", {key: 3600000})[0], 200)
        usage = self.usage(key)
        self.assertEqual((usage["used"], usage["debt"]), (5000000, 1600000))
        status, _, body = self.server.usage(key, query="group_by=caller")
        self.assertEqual(status, 200, body)
        # overrun used less than careful, but spent more.
        self.assertEqual(body["callers"], [
            {"caller": "overrun", "reserved": 0, "used": 2000000, "debt": 1600000,
             "spent": 3600000, "calls": 1},
            {"caller": "careful", "reserved": 0, "used": 3000000, "debt": 0, "spent": 3000000,
             "calls": 1}])
        self.assertEqual(sum(c["spent"] for c in body["callers"]), usage["used"] + usage["debt"])

    # -- metrics -------------------------------------------------------------

    def test_metrics_has_expected_series(self):
        """After traffic /metrics carries request, latency, denial, limit and backend series."""
        key = "api:metrics:conc"
        self.put(concurrency(key, 1))
        self.assertTrue(self.reserve(lease(), {key: 1})[0]["allowed"])
        self.assertFalse(self.reserve(lease(), {key: 1})[0]["allowed"])
        status, headers, text = self.server.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain"))
        for needle in [
            'llmlimit_requests_total{route="reserve",status="200"} ',
            'llmlimit_request_duration_seconds_bucket{route="reserve",le="0.001"} ',
            'llmlimit_request_duration_seconds_bucket{route="reserve",le="+Inf"} ',
            'llmlimit_request_duration_seconds_count{route="reserve"} ',
            'llmlimit_reserve_denials_total{key="%s"} 1' % key,
            'llmlimit_limit_capacity{key="%s"} 1' % key,
            'llmlimit_limit_reserved{key="%s"} 1' % key,
            'llmlimit_limit_used{key="%s"} 0' % key,
            'llmlimit_limit_debt{key="%s"} 0' % key,
            "llmlimit_backend_batches_total ",
            "llmlimit_backend_batched_items_total ",
            "llmlimit_lease_cache_entries ",
            "llmlimit_overage_denied_total ",
            "\nllmlimit_usage_unread_limits 0\n",  # every limit's usage was read
        ]:
            self.assertIn(needle, text)
        self.assertNotIn("llmlimit_tigerbeetle_", text)  # no cluster behind this backend
        counted = re.search(r'llmlimit_requests_total\{route="reserve",status="200"\} (\d+)', text)
        self.assertGreaterEqual(int(counted.group(1)), 2)

    def test_test_clock_route(self):
        """POST /v1/admin/clock moves the clock and reports the offset."""
        status, _, body = self.server.request("POST", "/v1/admin/clock", {"advance_ms": 0})
        self.assertEqual(status, 200, body)
        self.assertEqual(set(body), {"ok", "offset_ms", "now_unix_ms"})


class Tokens(unittest.TestCase):
    """Admin and client tokens from files and the environment."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="llmlimit-tokens-")
        cls.admin, cls.client = "admin-" + "a" * 40, "client-" + "c" * 40
        admin_file = os.path.join(cls.dir, "admin")
        client_file = os.path.join(cls.dir, "client")
        with open(admin_file, "w") as f:
            f.write(cls.admin + "\n")
        with open(client_file, "w") as f:
            f.write(cls.client + "\r\n")
        cls.server = Server(BINARY, backend=BACKEND, args=[
            "--admin-token-file", admin_file, "--client-token-file", client_file]).start()
        status, _, body = cls.server.put_limit(rolling("tok:a", 100), token=cls.admin)
        assert status == 200, body

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        assert code == 0

    def wrong_tokens(self, right):
        return [None, "", right[:-1], right + "x", right[:-1] + "X", "x" * len(right),
                "Basic " + right]

    def test_admin_routes_need_the_admin_token(self):
        """Admin routes: 401 unauthorized + WWW-Authenticate without the admin token."""
        for token in self.wrong_tokens(self.admin) + [self.client]:
            status, headers, body = self.server.request("GET", "/v1/admin/limits", token=token)
            self.assertEqual((status, body), (401, {"error": "unauthorized"}), token)
            self.assertEqual(headers["www-authenticate"], "Bearer")
        status, _, body = self.server.put_limit(rolling("tok:b", 1), token=self.client)
        self.assertEqual(status, 401)
        status, _, body = self.server.request("GET", "/v1/admin/limits", token=self.admin)
        self.assertEqual(status, 200)
        self.assertNotIn("tok:b", [s["definition"]["key"] for s in body["limits"]])

    def test_data_routes_need_client_or_admin_token(self):
        """Data routes and /metrics take the client or admin token, nothing else."""
        for token in self.wrong_tokens(self.client):
            status, _, body = self.server.reserve(lease(), {"tok:a": 1}, token=token)
            self.assertEqual((status, body), (401, {"error": "unauthorized"}), token)
            self.assertEqual(self.server.usage("tok:a", token=token)[0], 401)
            self.assertEqual(self.server.request("GET", "/metrics", token=token)[0], 401)
        self.assertEqual(self.server.usage("tok:a", token=self.admin)[2]["reserved"], 0)
        for token in (self.client, self.admin):
            status, _, body = self.server.reserve(lease(), {"tok:a": 1}, token=token)
            self.assertEqual(status, 200, body)
            self.assertTrue(body["allowed"])
            self.assertEqual(self.server.request("GET", "/metrics", token=token)[0], 200)
        self.assertEqual(self.server.usage("tok:a", token=self.client)[2]["reserved"], 2)

    def test_health_needs_no_token(self):
        """/healthz, /readyz and / answer without any token."""
        self.assertEqual(self.server.request("GET", "/healthz")[0], 200)
        self.assertEqual(self.server.request("GET", "/readyz")[0], 200)
        self.assertEqual(self.server.request("GET", "/"),
                         (200, unittest.mock.ANY, {"service": "llmlimitd", "console": "/console"}))
        self.assertEqual(self.server.request("HEAD", "/")[0], 200)

    def test_tokens_from_environment(self):
        """LLMLIMIT_ADMIN_TOKEN / LLMLIMIT_CLIENT_TOKEN work like the files."""
        env = {"LLMLIMIT_ADMIN_TOKEN": "env-admin", "LLMLIMIT_CLIENT_TOKEN": "env-client"}
        with Server(BINARY, backend=BACKEND, env=env) as server:
            self.assertEqual(server.put_limit(rolling("env:a", 5))[0], 401)
            self.assertEqual(server.put_limit(rolling("env:a", 5), token="env-admin")[0], 200)
            self.assertEqual(server.reserve(lease(), {"env:a": 1})[0], 401)
            self.assertEqual(server.reserve(lease(), {"env:a": 1}, token="env-client")[0], 200)
            self.assertEqual(server.stop(), 0)

    def test_no_admin_token_off_loopback(self):
        """Without an admin token, admin routes refuse on a non-loopback address."""
        env = {"LLMLIMIT_ADMIN_TOKEN": "", "LLMLIMIT_CLIENT_TOKEN": ""}
        with Server(BINARY, backend=BACKEND, env=env, args=["--listen", "0.0.0.0:0"]) as server:
            status, _, body = server.request("GET", "/v1/admin/limits")
            self.assertEqual((status, body), (401, {"error": "admin_token_required"}))
            self.assertEqual(server.request("GET", "/healthz")[0], 200)
            self.assertEqual(server.stop(), 0)

    def test_unreadable_token_file_is_fatal(self):
        """A token file that cannot be read stops start-up with exit 1 and the reason."""
        missing = os.path.join(self.dir, "missing")
        code, stderr = run_to_exit(["--admin-token-file", missing])
        self.assertEqual(code, 1, stderr)
        self.assertIn(missing, stderr)


def run_to_exit(args, data_dir=None, timeout_s=10):
    """Runs llmlimitd expecting it to exit by itself: (exit code, stderr)."""
    owned = data_dir is None
    data_dir = data_dir or tempfile.mkdtemp(prefix="llmlimit-exit-")
    try:
        process = subprocess.run(
            [BINARY, "--listen", "127.0.0.1:0", "--backend", BACKEND, "--data-dir", data_dir] + args,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, timeout=timeout_s)
        return process.returncode, process.stderr + process.stdout
    finally:
        if owned:
            subprocess.run(["rm", "-rf", data_dir])


def open_fds(server):
    return len(os.listdir("/proc/%d/fd" % server.process.pid))


def start_reserve(server, key):
    """Sends a reserve of key up to the 10th byte of its body, and waits until
    the server has taken the connection; returns the socket and the rest of
    the body. The drain waits for such a request."""
    body = json.dumps({"lease_id": lease(), "requirements": [{"key": key, "amount": 1}]}).encode()
    before = open_fds(server)
    sock = socket.create_connection((server.host, server.port), timeout=10)
    head = ("POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % len(body)).encode()
    sock.sendall(head + body[:10])
    assert wait_until(lambda: open_fds(server) > before), "the connection was never accepted"
    # Nothing outside tells when it has read those bytes: a moment to do so.
    time.sleep(0.3)
    return sock, body[10:]


def connection_refused(server):
    """True when a new connection is refused (the drain has closed the listener)."""
    try:
        socket.create_connection((server.host, server.port), timeout=5).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # Taken into the listen queue as the listener closed, then reset by
        # the kernel: the closing has begun; the next attempt is refused.
        return False


class Lifecycle(unittest.TestCase):
    def test_sigterm_answers_in_flight_request_and_exits_zero(self):
        """SIGTERM mid-request: the request is answered, then the process exits 0 promptly."""
        with Server(BINARY, backend=BACKEND) as server:
            self.assertEqual(server.put_limit(rolling("life:a", 100))[0], 200)
            sock, rest = start_reserve(server, "life:a")
            server.process.send_signal(signal.SIGTERM)
            # The rest, once the drain has begun (and within its 1 s grace for bodies).
            self.assertTrue(wait_until(lambda: connection_refused(server), interval_s=0.01))
            sock.sendall(rest)
            started = time.monotonic()
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            sock.close()
            self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply)
            self.assertIn(b'"allowed":true', reply)
            self.assertIn(b"Connection: close", reply)
            code = server.process.wait(30)
            server.process = None
            self.assertEqual(code, 0)
            # Once its last request is answered, not after the 10 s drain time.
            self.assertLess(time.monotonic() - started, 8.0)

    def test_sigterm_under_load_exits_zero(self):
        """SIGTERM while 8 clients send reserves: every answer received is whole; exit 0."""
        with Server(BINARY, backend=BACKEND) as server:
            self.assertEqual(server.put_limit(rolling("life:b", 10 ** 12))[0], 200)
            answers, failures = [], []
            stop = threading.Event()

            def client():
                while not stop.is_set():
                    try:
                        status, _, body = server.reserve(lease(), {"life:b": 1})
                    except Exception:  # refused or closed once shutdown starts
                        return
                    answers.append(status)
                    # a request that lands after the drain is refused whole
                    refused = (status, body) == (503, {"error": "shutting_down"})
                    allowed = status == 200 and isinstance(body, dict) and body.get("allowed")
                    if not (allowed or refused):
                        failures.append((status, body))

            threads = [threading.Thread(target=client) for _ in range(8)]
            for t in threads:
                t.start()
            time.sleep(0.5)
            started = time.monotonic()
            code = server.stop(timeout_s=10.0)
            stop.set()
            for t in threads:
                t.join(10)
            self.assertEqual(code, 0)
            # Once the requests in flight are answered, not after the 10 s drain time.
            self.assertLess(time.monotonic() - started, 8.0)
            self.assertGreater(len(answers), 0)
            self.assertEqual(failures, [])
            self.assertNotIn("LeakSanitizer", server.stderr_text())

    def test_address_in_use_exits_one_with_the_reason(self):
        """A port another process listens on: exit 1 at once, the address and the reason logged."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            data_dir = tempfile.mkdtemp(prefix="llmlimit-test-")
            try:
                run = subprocess.run([BINARY, "--listen", "127.0.0.1:%d" % port, "--backend", BACKEND,
                                      "--data-dir", data_dir], capture_output=True, text=True,
                                     timeout=10)
            finally:
                subprocess.run(["rm", "-rf", data_dir])
        self.assertEqual(run.returncode, 1)
        self.assertIn("127.0.0.1:%d: Address already in use" % port, run.stderr)

    def test_sigterm_refuses_new_connections_while_draining(self):
        """Once SIGTERM arrives a new connection is refused, while a request in flight
        still gets its answer."""
        with Server(BINARY, backend=BACKEND) as server:
            self.assertEqual(server.put_limit(rolling("life:c", 100))[0], 200)
            held, rest = start_reserve(server, "life:c")
            server.process.send_signal(signal.SIGTERM)
            self.assertTrue(wait_until(lambda: connection_refused(server), interval_s=0.01),
                            "new connections still accepted after SIGTERM")
            held.sendall(rest)
            reply = held.recv(4096)
            held.close()
            self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply)
            self.assertIn(b'"allowed":true', reply)
            self.assertEqual(server.process.wait(10), 0)
            server.process = None

    def test_sigterm_while_clients_connect_exits_zero(self):
        """SIGTERM while clients keep opening connections, 20 times: each run exits 0."""
        for _ in range(20):
            with Server(BINARY, backend=BACKEND) as server:
                def client(stop):
                    while not stop.is_set():
                        try:
                            with socket.create_connection((server.host, server.port), 2) as s:
                                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                                s.recv(4096)
                        except OSError:  # refused once the drain starts
                            pass

                self.assertEqual(harness.stop_under_load(server, client, 4, 0.2), 0)

    def test_registry_persists_across_restart(self):
        """Limits written by PUT come back after a restart, in the same states."""
        with Server(BINARY, backend=BACKEND) as server:
            for definition in (rolling("reg:a", 5, unit="requests", description="x\"y"),
                               budget("reg:b", 100), concurrency("reg:c", 2),
                               dict(budget("reg:d", 100), period_anchor_day=28,
                                    time_zone="Europe/Berlin"),
                               dict(budget("reg:e", 100), period="none")):
                self.assertEqual(server.put_limit(definition)[0], 200)
            before = server.request("GET", "/v1/admin/limits")[2]
            server.restart()
            self.assertEqual(server.request("GET", "/v1/admin/limits")[2], before)
            with open(os.path.join(server.data_dir, "limits.json")) as f:
                self.assertEqual(json.load(f), before["limits"])
            self.assertFalse(os.path.exists(os.path.join(server.data_dir, "limits.json.tmp")))
            self.assertEqual(server.stop(), 0)

    def test_registry_write_failure_is_503(self):
        """When limits.json cannot be rewritten the change answers 503, is undone, and is logged."""
        with Server(BINARY, backend=BACKEND) as server:
            self.assertEqual(server.put_limit(rolling("wf:a", 5))[0], 200)
            before = server.request("GET", "/v1/admin/limits")[2]
            blocker = os.path.join(server.data_dir, "limits.json.tmp")
            os.mkdir(blocker)  # the temporary file cannot be created, even by root
            status, _, body = server.put_limit(rolling("wf:b", 5))
            self.assertEqual((status, body), (503, {"error": "registry_write_failed"}))
            status, _, body = server.put_limit(rolling("wf:a", 9))
            self.assertEqual((status, body), (503, {"error": "registry_write_failed"}))
            status, _, body = server.request("DELETE", "/v1/admin/limits/wf:a")
            self.assertEqual((status, body), (503, {"error": "registry_write_failed"}))
            self.assertEqual(server.request("GET", "/v1/admin/limits")[2], before)
            self.assertTrue(wait_until(lambda: "registry write failed" in server.stderr_text()))
            os.rmdir(blocker)
            self.assertEqual(server.put_limit(rolling("wf:c", 5))[0], 200)
            with open(os.path.join(server.data_dir, "limits.json")) as f:
                self.assertEqual([s["definition"]["key"] for s in json.load(f)], ["wf:a", "wf:c"])
            listed = server.request("GET", "/v1/admin/limits")[2]
            server.restart()
            self.assertEqual(server.request("GET", "/v1/admin/limits")[2], listed)
            self.assertEqual(server.stop(), 0)

    def test_invalid_registry_is_fatal(self):
        """A broken limits.json stops start-up with exit 1, naming the file, line and reason."""
        cases = [
            ('[\n{"definition":{"key":"a","kind":"rolling","capacity":1,"window_seconds":1},\n'
             '"status":"active","pending_decrease_to":0}\n,,\n]', "line 4"),
            ('[\n{"definition":{"key":"a","kind":"rolling","capacity":1,"window_seconds":1}},\n'
             '{"definition":{"key":"b","kind":"rolling","capacity":0,"window_seconds":1}}\n]',
             "line 3"),
            ('{"not":"an array"}', "line 1"),
            ('[\n{"definition":{"key":"a","kind":"rolling","capacity":1,"window_seconds":1}},\n'
             '{"definition":{"key":"a","kind":"rolling","capacity":2,"window_seconds":1}}\n]',
             "duplicate key"),
            ("", "line"),
        ]
        for text, needle in cases:
            data_dir = tempfile.mkdtemp(prefix="llmlimit-registry-")
            path = os.path.join(data_dir, "limits.json")
            with open(path, "w") as f:
                f.write(text)
            code, stderr = run_to_exit([], data_dir=data_dir)
            subprocess.run(["rm", "-rf", data_dir])
            self.assertEqual(code, 1, stderr)
            self.assertIn(path, stderr)
            self.assertIn(needle, stderr)
            self.assertNotIn("listening on", stderr)
        data_dir = tempfile.mkdtemp(prefix="llmlimit-registry-")
        with open(os.path.join(data_dir, "limits.json"), "w") as f:
            f.write('[{"definition":{"key":"b","kind":"rolling","capacity":0,"window_seconds":1}}]')
        code, stderr = run_to_exit([], data_dir=data_dir)
        subprocess.run(["rm", "-rf", data_dir])
        self.assertIn("capacity", stderr)

    def test_help_version_and_bad_flags(self):
        """--help lists every flag with its default; unknown flags exit 2."""
        process = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(process.returncode, 0)
        for flag, default in [
                ("--listen", "127.0.0.1:8470"), ("--backend", ""), ("--data-dir", "./data"),
                ("--admin-token-file", "none"), ("--client-token-file", "none"),
                ("--threads", ""), ("--max-body-bytes", "1048576"),
                ("--max-connections", "4096"), ("--connection-timeout-seconds", "30"),
                ("--lease-cache-max", "1000000"), ("--lease-retention-seconds", "3600"),
                ("--concurrency-poll-ms", "250"), ("--decrease-retry-ms", "10000"),
                ("--max-waiters", "10000"), ("--wait-hold-ms", "10000"),
                ("--log-format", "text"), ("--log-level", "info"),
                ("--sqlite-synchronous", "full"), ("--sqlite-retention-days", "0"),
                ("--tb-cluster", "0"),
                ("--tb-addresses", "127.0.0.1:3000"), ("--tb-sessions", "4"),
                ("--tb-deadline-ms", "2000"), ("--version", "")]:
            line = [l for l in process.stdout.splitlines() if l.strip().startswith(flag + " ")]
            self.assertEqual(len(line), 1, flag)
            if default:
                self.assertIn("[%s]" % default, line[0])
        process = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=10)
        self.assertEqual(process.returncode, 0)
        self.assertTrue(process.stdout.startswith("llmlimitd "))
        for args in (["--no-such-flag"], ["--threads", "0"], ["--max-body-bytes", "x"],
                     ["--log-format", "xml"], ["--backend", "nope"], ["--listen", "nohost"],
                     ["--sqlite-retention-days", "36601"], ["--sqlite-retention-days", "-1"],
                     ["--listen", "example.com:80"], ["--tb-deadline-ms", "99"],
                     ["--tb-deadline-ms", "60001"], ["--wait-hold-ms", "60001"]):
            process = subprocess.run([BINARY] + args, capture_output=True, text=True, timeout=10)
            self.assertEqual(process.returncode, 2, args)
            self.assertIn("llmlimitd:", process.stderr)

    def test_start_says_gateway_mode_is_off_and_why(self):
        """Without a gateway config the start log says gateway mode is off, and where it looked."""
        with Server(BINARY, backend=BACKEND) as server:
            self.assertEqual(server.stop(), 0)
        looked_for = os.path.join(server.data_dir, "gateway.json")
        lines = [l for l in server.stderr_lines if "gateway mode" in l]
        self.assertEqual(len(lines), 1, server.stderr_text())
        self.assertIn('msg="gateway mode off"', lines[0])
        self.assertIn('looked_for="%s"' % looked_for, lines[0])
        started = next(i for i, l in enumerate(server.stderr_lines) if 'msg="started"' in l)
        self.assertIn("gateway mode", server.stderr_lines[started + 1])  # beside "started"

    def test_json_logs(self):
        """--log-format json writes one JSON object per line (the listening line aside)."""
        with Server(BINARY, backend=BACKEND, args=["--log-format", "json"]) as server:
            self.assertEqual(server.put_limit(rolling("log:a", 5))[0], 200)
            self.assertEqual(server.stop(), 0)
            lines = [l for l in server.stderr_lines if not l.startswith("llmlimitd listening on")]
            parsed = [json.loads(l) for l in lines]
            self.assertTrue(any(p["msg"] == "limit put" and p["key"] == "log:a" for p in parsed))
            self.assertTrue(all(p["level"] in ("error", "warn", "info", "debug") for p in parsed))


if __name__ == "__main__":
    harness.main()
