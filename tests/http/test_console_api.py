"""The console's routes against the real binary (docs/api.md, docs/console.md):
the page's files and their headers, every /v1/console/ route with its
figures held to /v1/usage, its bounds one past each limit, its tokens, and
the spend rate and projection recomputed here from the samples the server reports.

The backend comes from --backend (default memory)."""

import http.client
import re
import unittest
import urllib.parse
import uuid

from harness import Server, backend_from_argv, binary_from_argv, wait_until

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HOSTILE = "evil:<img/src=x/onerror=alert(1)>"
WINDOW_MS = 600000  # the spend rate's window (SPEND_RATE_WINDOW_MS)
ASSETS = {"/console": "text/html; charset=utf-8",
          "/console/app.js": "text/javascript; charset=utf-8",
          "/console/app.css": "text/css; charset=utf-8"}


def lease():
    return str(uuid.uuid4())


def quote(key):
    return urllib.parse.quote(key, safe="")


def rolling(key, capacity, window_seconds=3600):
    return {"key": key, "kind": "rolling", "capacity": capacity, "window_seconds": window_seconds}


def concurrency(key, capacity, timeout_seconds=3600):
    return {"key": key, "kind": "concurrency", "capacity": capacity,
            "timeout_seconds": timeout_seconds}


def budget(key, capacity, period="month", timeout_seconds=300):
    return {"key": key, "kind": "budget", "capacity": capacity, "period": period,
            "timeout_seconds": timeout_seconds, "unit": "usd_micros"}


class Console(unittest.TestCase):
    """One server (no tokens, test clock) for the class; each test its own keys."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY, backend=BACKEND, args=["--test-clock"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        assert code == 0, "llmlimitd exit code %r" % code

    def get(self, path, expect=200):
        status, headers, body = self.server.request("GET", path)
        self.assertEqual(status, expect, body)
        return body, headers

    def put(self, definition):
        status, _, body = self.server.put_limit(definition)
        self.assertEqual(status, 200, body)

    def reserve(self, requirements, caller=None, lease_id=None):
        status, _, body = self.server.reserve(lease_id or lease(), requirements, caller=caller)
        self.assertEqual(status, 200, body)
        return body

    def complete(self, lease_id, actuals):
        status, _, body = self.server.complete(lease_id, actuals)
        self.assertEqual(status, 200, body)

    def advance(self, ms):
        status, _, body = self.server.request("POST", "/v1/admin/clock", {"advance_ms": ms})
        self.assertEqual(status, 200, body)
        return body["now_unix_ms"]

    def limits(self, query=""):
        return self.get("/v1/console/limits" + ("?" + query if query else ""))[0]

    def rejected(self, path, error, status=400):
        got, _, body = self.server.request("GET", path)
        self.assertEqual((got, body), (status, {"error": error}), path)

    # -- the page ------------------------------------------------------------

    def test_page_files_and_headers(self):
        """The page, script and style: strict CSP, nosniff, no-cache with an ETag; 304 when unchanged."""
        for path, content_type in ASSETS.items():
            conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
            conn.request("GET", path)
            response = conn.getresponse()
            data = response.read()
            self.assertEqual(response.status, 200, path)
            self.assertEqual(response.getheader("Content-Type"), content_type)
            self.assertEqual(response.getheader("Content-Security-Policy"), CSP)
            self.assertEqual(response.getheader("X-Content-Type-Options"), "nosniff")
            self.assertEqual(response.getheader("Cache-Control"), "no-cache")
            etag = response.getheader("ETag")
            self.assertRegex(etag, r'^"[0-9a-f]{32}"$')
            self.assertGreater(len(data), 100)
            conn.request("GET", path, headers={"If-None-Match": etag})
            again = conn.getresponse()
            self.assertEqual((again.status, again.read()), (304, b""), path)
            conn.request("GET", path, headers={"If-None-Match": '"other"'})
            self.assertEqual(conn.getresponse().read(), data)
            conn.request("HEAD", path)
            head = conn.getresponse()
            self.assertEqual((head.status, head.read()), (200, b""))
            conn.close()

    def test_page_loads_nothing_from_elsewhere(self):
        """No inline script or style and no remote source in the page's files."""
        html = self.server.request("GET", "/console")[2]
        scripts = re.findall(r"<script[^>]*>", html)
        self.assertEqual(scripts, ['<script src="/console/app.js" defer>'])
        self.assertNotIn(" style=", html)
        self.assertNotIn("<style", html)
        self.assertNotRegex(html, r"https?://")
        script = self.server.request("GET", "/console/app.js")[2]
        self.assertEqual(re.findall(r"https?://[^'\"]*", script), ["http://www.w3.org/2000/svg"])
        self.assertNotIn("innerHTML", script)
        self.assertNotIn("localStorage", script)
        css = self.server.request("GET", "/console/app.css")[2]
        self.assertNotRegex(css, r"url\(|@import|https?://")

    def test_page_routes_refuse_other_methods(self):
        """The page's routes answer GET and HEAD only."""
        status, headers, body = self.server.request("POST", "/console", raw="x")
        self.assertEqual((status, body), (405, {"error": "method_not_allowed"}))
        self.assertEqual(headers["allow"], "GET, HEAD")

    # -- limits ----------------------------------------------------------------

    def test_limits_equal_usage(self):
        """Every field of a limit in /v1/console/limits equals its LimitState and /v1/usage/{key}."""
        keys = ["eq:budget", "eq:conc", "eq:tpm", "eq:" + HOSTILE]
        self.put(budget(keys[0], 10000000))
        self.put(concurrency(keys[1], 3, timeout_seconds=600))
        self.put(rolling(keys[2], 1000))
        self.put(rolling(keys[3], 10))
        first = lease()
        self.reserve({keys[0]: 300000, keys[1]: 1, keys[2]: 100}, caller="a", lease_id=first)
        self.complete(first, {keys[0]: 250000, keys[2]: 60})
        self.reserve({keys[1]: 2, keys[2]: 200}, caller="b")
        page = self.limits("prefix=eq%3A")
        self.assertEqual([l["key"] for l in page["limits"]], sorted(keys))
        self.assertIsNone(page["next_after"])
        self.assertEqual(page["soon_ms"], 10000)
        self.assertFalse(page["holds_seen_here_only"])
        for limit in page["limits"]:
            usage, _ = self.get("/v1/usage/" + quote(limit["key"]))
            state, _ = self.get("/v1/admin/limits/" + quote(limit["key"]))
            for field in ("kind", "status", "capacity", "reserved", "used", "debt", "available",
                          "period_start_unix_ms", "period_end_unix_ms"):
                self.assertEqual(limit[field], usage[field], (limit["key"], field))
            for field, value in state["limit"]["definition"].items():
                self.assertEqual(limit[field], value, (limit["key"], field))
            self.assertEqual(limit["pending_decrease_to"], state["limit"]["pending_decrease_to"])
        by_key = {l["key"]: l for l in page["limits"]}
        conc = by_key[keys[1]]
        self.assertEqual(conc["holds"]["count"], 1)  # the first lease was completed
        self.assertEqual(conc["holds"]["oldest_expires_at_unix_ms"],
                         conc["holds"]["oldest_at_unix_ms"] + 600000)
        self.assertEqual(conc["reset_at_unix_ms"], conc["holds"]["oldest_expires_at_unix_ms"])
        tpm = by_key[keys[2]]
        self.assertEqual((tpm["reserved"], tpm["used"], tpm["holds"]["count"]), (200, 60, 1))
        self.assertEqual(by_key[keys[0]]["reset_at_unix_ms"], by_key[keys[0]]["period_end_unix_ms"])
        idle = by_key[keys[3]]
        self.assertEqual(idle["holds"], {"count": 0, "oldest_at_unix_ms": None,
                                         "oldest_expires_at_unix_ms": None, "expiring_soon": 0,
                                         "exact": True})
        self.assertIsNone(idle["reset_at_unix_ms"])

    def test_limits_page_by_key_and_filter_by_kind(self):
        """Pages follow next_after to the end, in key order; kind filters; a prefix may match nothing."""
        keys = ["page:%02d" % i for i in range(7)]
        for i, key in enumerate(keys):
            self.put(budget(key, 100) if i % 2 else rolling(key, 100))
        seen, after = [], ""
        for _ in range(10):
            page = self.limits("prefix=page%3A&limit=3" + ("&after=" + quote(after) if after else ""))
            self.assertLessEqual(len(page["limits"]), 3)
            seen += [l["key"] for l in page["limits"]]
            if page["next_after"] is None:
                break
            self.assertEqual(page["next_after"], page["limits"][-1]["key"])
            after = page["next_after"]
        self.assertEqual(seen, keys)
        budgets = self.limits("prefix=page%3A&kind=budget")
        self.assertEqual([l["key"] for l in budgets["limits"]], keys[1::2])
        self.assertEqual(self.limits("prefix=nothing%3A")["limits"], [])
        self.assertEqual(self.limits("prefix=page%3A&limit=1000")["next_after"], None)

    def test_limits_bounds(self):
        """limit 1..1000, a key-shaped prefix and after, a known kind: one past each is a 400."""
        limit_error = "limit: must be an integer 1..1000"
        self.rejected("/v1/console/limits?limit=0", limit_error)
        self.rejected("/v1/console/limits?limit=1001", limit_error)
        self.rejected("/v1/console/limits?limit=x", limit_error)
        self.get("/v1/console/limits?limit=1000")
        self.rejected("/v1/console/limits?kind=token", "kind: must be rolling, concurrency or budget")
        self.rejected("/v1/console/limits?prefix=a%20b",
                      "prefix: must be at most 256 bytes of printable ASCII without whitespace")
        self.rejected("/v1/console/limits?after=" + "a" * 257,
                      "after: invalid percent-encoding or too long")
        self.get("/v1/console/limits?after=" + "a" * 256)
        self.rejected("/v1/console/limits?prefix=%zz",
                      "prefix: invalid percent-encoding or too long")

    def test_expiring_soon_and_expiry(self):
        """expiring_soon counts holds due within 10 s; a due hold is gone from the page."""
        key = "soon:slots"
        self.put(concurrency(key, 5, timeout_seconds=30))
        self.reserve({key: 1})
        self.advance(25000)
        self.reserve({key: 2})
        limit = self.limits("prefix=soon%3A")["limits"][0]
        self.assertEqual((limit["holds"]["count"], limit["holds"]["expiring_soon"]), (2, 1))
        self.advance(6000)
        limit = self.limits("prefix=soon%3A")["limits"][0]
        self.assertEqual((limit["holds"]["count"], limit["reserved"]), (1, 2))
        self.assertEqual(limit["holds"]["expiring_soon"], 0)

    # -- holds by caller -----------------------------------------------------------

    def test_holds_by_caller(self):
        """Live holds grouped by caller, most first; the rest under others; limit is the top N."""
        key = "holds:tpm"
        self.put(rolling(key, 10000))
        for caller, count in (("a", 3), ("b", 2), (HOSTILE, 1), (None, 1)):
            for _ in range(count):
                self.reserve({key: 10}, caller=caller)
        done = lease()
        self.reserve({key: 500}, caller="gone", lease_id=done)
        self.complete(done, {key: 100})
        body, headers = self.get("/v1/console/holds/" + quote(key))
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertEqual(headers["x-content-type-options"], "nosniff")
        self.assertEqual((body["key"], body["holds"], body["amount"], body["complete"]),
                         (key, 7, 70, True))
        callers = [(c["caller"], c["holds"], c["amount"]) for c in body["callers"]]
        self.assertEqual(callers, [("a", 3, 30), ("b", 2, 20), ("", 1, 10), (HOSTILE, 1, 10)])
        self.assertEqual(body["others"], {"holds": 0, "amount": 0})
        top, _ = self.get("/v1/console/holds/" + quote(key) + "?limit=1")
        self.assertEqual([c["caller"] for c in top["callers"]], ["a"])
        self.assertEqual(top["others"], {"holds": 4, "amount": 40})
        self.get("/v1/console/holds/" + quote(key) + "?limit=100")
        self.rejected("/v1/console/holds/" + quote(key) + "?limit=101",
                      "limit: must be an integer 1..100")
        self.rejected("/v1/console/holds/" + quote(key) + "?limit=0",
                      "limit: must be an integer 1..100")
        self.rejected("/v1/console/holds/holds%3Anope", "unknown_limit_key: holds:nope", 404)
        self.rejected("/v1/console/holds/a%20b",
                      "key: must be 1-256 bytes of printable ASCII without whitespace")

    # -- denials ---------------------------------------------------------------------

    def test_denials_newest_first(self):
        """Capacity and definitive denials, single and batch, newest first with what did not fit."""
        key = "den:slots"
        self.put(concurrency(key, 1))
        self.reserve({key: 1}, caller="holder")
        capacity = self.reserve({key: 1}, caller=HOSTILE, lease_id="den-capacity")
        self.assertFalse(capacity["allowed"])
        self.reserve({"den:nope": 3}, lease_id="den-unknown")
        status, _, body = self.server.request("POST", "/v1/reserve/batch", {"requests": [
            {"lease_id": "den-batch", "requirements": [{"key": key, "amount": 1}],
             "caller": "batcher"},
            {"lease_id": "den-batch-ok", "requirements": [{"key": "den:nope2", "amount": -1}]}]})
        self.assertEqual(status, 200, body)
        answer, _ = self.get("/v1/console/denials?limit=3")
        denials = answer["denials"]
        self.assertEqual([d["lease_id"] for d in denials],
                         ["den-batch", "den-unknown", "den-capacity"])
        self.assertEqual(denials[0]["caller"], "batcher")
        self.assertEqual(denials[1]["error"], "unknown_limit_key: den:nope")
        self.assertEqual(denials[1]["keys"], [{"key": "den:nope", "amount": 3, "unit": None}])
        self.assertEqual(denials[2]["caller"], HOSTILE)
        self.assertEqual((denials[2]["error"], denials[2]["keys"], denials[2]["keys_total"]),
                         ("", [{"key": key, "amount": 1, "unit": ""}], 1))
        self.assertEqual(denials[2]["source"], "api")
        self.assertGreater(denials[2]["retry_after_ms"], 0)
        self.assertEqual(denials[0]["id"], answer["denials_total"])
        self.assertGreater(denials[0]["id"], denials[1]["id"])
        self.get("/v1/console/denials?limit=256")
        self.rejected("/v1/console/denials?limit=257", "limit: must be an integer 1..256")
        self.rejected("/v1/console/denials?limit=0", "limit: must be an integer 1..256")

    def test_denials_name_units(self):
        """Each denied key carries its limit's unit now (money shows in dollars); a key whose
        limit is gone has none; one key asked twice has the same unit both times."""
        money, tokens = "den:usd:month", "den:tokens"
        self.put(budget(money, 1000))
        self.put(dict(rolling(tokens, 10), unit="tokens"))
        self.reserve({money: 2000, tokens: 1}, lease_id="den-units-1")  # more than the budget
        self.reserve({tokens: 11, money: 1}, lease_id="den-units-2")
        self.reserve({money: 1500}, lease_id="den-units-3")
        answer, _ = self.get("/v1/console/denials?limit=3")
        keys = [d["keys"] for d in answer["denials"]]
        self.assertEqual(keys, [[{"key": money, "amount": 1500, "unit": "usd_micros"}],
                                [{"key": tokens, "amount": 11, "unit": "tokens"}],
                                [{"key": money, "amount": 2000, "unit": "usd_micros"}]])
        self.server.request("DELETE", "/v1/admin/limits/" + quote(tokens))
        answer, _ = self.get("/v1/console/denials?limit=3")
        self.assertEqual(answer["denials"][1]["keys"], [{"key": tokens, "amount": 11, "unit": None}])

    # -- status and throughput -----------------------------------------------------------

    def test_status_counts_reserves_and_denials(self):
        """status: server facts, and reserves and denials of the last whole seconds."""
        key = "st:tpm"
        self.put(rolling(key, 5))
        before, _ = self.get("/v1/console/status")
        for _ in range(6):
            self.reserve({key: 1})  # the sixth is denied
        status, _, body = self.server.request("POST", "/v1/reserve/batch", {"requests": [
            {"lease_id": lease(), "requirements": [{"key": key, "amount": 1}]}]})
        self.assertEqual(status, 200, body)
        self.advance(1000)  # the second they happened in is now a whole one
        after, headers = self.get("/v1/console/status")
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertEqual((after["backend"], after["admin"]), (BACKEND, True))
        self.assertTrue(after["holds_by_caller"])
        self.assertTrue(after["usage_by_caller"])
        self.assertFalse(after["gateway_enabled"])
        self.assertEqual(after["denials_total"] - before["denials_total"], 2)
        t = after["throughput"]
        self.assertEqual(len(t["seconds"]["reserves"]), 60)
        self.assertEqual(len(t["seconds"]["denials"]), 60)
        self.assertEqual(t["seconds"]["from_unix_ms"] % 1000, 0)
        self.assertGreaterEqual(t["reserves_10s"], 7)
        self.assertGreaterEqual(t["denials_10s"], 2)
        self.assertEqual(sum(t["seconds"]["reserves"][-10:]), t["reserves_10s"])
        self.assertEqual(sum(t["seconds"]["denials"]), t["denials_60s"])
        self.assertEqual(t["reserves_per_second_10s"], t["reserves_10s"] * 10 // 10 / 10)

    # -- spend -------------------------------------------------------------------------

    def spend(self, key):
        return self.get("/v1/console/spend/" + quote(key))[0]

    def spend_with(self, key, spent):
        """The spend answer once a sample shows `spent` (waits for the sampler)."""
        wait_until(lambda: any(p["spent"] == spent for p in self.spend(key)["points"]),
                   timeout_s=10)
        return self.spend(key)

    def test_spend_history_and_projection(self):
        """Samples every budget; the rate (the spend of the last 10 minutes) and the run-out
        time equal this test's own integer math from the samples."""
        key = "sp:usd"
        self.put(budget(key, 10000000))
        for step in range(4):
            done = lease()
            self.reserve({key: 500000}, caller="bot", lease_id=done)
            self.complete(done, {key: 400000})
            self.spend_with(key, 400000 * (step + 1))
            self.advance(300000 if step == 3 else 600000)
        self.reserve({key: 100000})
        s = self.spend(key)
        usage, _ = self.get("/v1/usage/" + quote(key))
        for field in ("capacity", "reserved", "used", "debt", "available",
                      "period_start_unix_ms", "period_end_unix_ms"):
            self.assertEqual(s[field], usage[field], field)
        self.assertEqual(s["spent"], s["used"] + s["debt"])
        self.assertTrue(s["tracked"])
        points = s["points"]
        self.assertGreaterEqual(len(points), 4)
        self.assertEqual(s["history_since_unix_ms"], points[0]["at_unix_ms"])
        self.assertEqual(points[0]["spent"], 0)  # made after the server started: from zero
        for p in points:
            self.assertEqual(p["spent"], p["used"] + p["debt"])
        now = s["now_unix_ms"]
        self.assertEqual(s["rate_window_min_ms"], WINDOW_MS)
        origin = [p for p in points if p["at_unix_ms"] <= now - WINDOW_MS][-1]
        window = now - origin["at_unix_ms"]
        delta = s["spent"] - origin["spent"]
        self.assertEqual(delta, 400000)  # the last call: 5 minutes ago
        self.assertEqual(s["rate_window_ms"], window)
        self.assertEqual(s["rate_window_spent"], delta)
        self.assertEqual(s["rate_per_hour"], delta * 3600000 // window)
        left = (s["available"] * window + delta - 1) // delta
        expected = now + left if left < s["period_end_unix_ms"] - now else None
        self.assertEqual(s["runs_out_at_unix_ms"], expected)
        self.assertEqual(s["projected_at_period_end"],
                         s["spent"] + delta * (s["period_end_unix_ms"] - now) // window)

    def test_spend_rate_is_recent(self):
        """A budget charged right after it was made counts the charge in its rate 75 s later
        (exactly 10 minutes: it had spent nothing before); 10 minutes of nothing later the
        rate is zero and it does not run out."""
        over, idle = "sp:over", "sp:idle"
        self.put(budget(over, 5000000))
        self.put(budget(idle, 10000000))
        end = self.spend(idle)["period_end_unix_ms"]
        now = self.get("/v1/console/status")[0]["now_unix_ms"]
        if end - now < 3600000:  # stay in one period
            self.advance(end - now + 1000)
        first = lease()
        self.reserve({over: 5000000}, caller="over", lease_id=first)
        self.complete(first, {over: 5600000})
        second = lease()
        self.reserve({idle: 7400000}, caller="idle", lease_id=second)
        self.complete(second, {idle: 7400000})
        self.spend_with(over, 5600000)
        self.spend_with(idle, 7400000)
        self.advance(75000)
        for key, spent in ((over, 5600000), (idle, 7400000)):
            s = self.spend(key)
            self.assertEqual(s["rate_window_ms"], WINDOW_MS, key)
            self.assertEqual(s["rate_window_spent"], spent, key)
            self.assertEqual(s["rate_per_hour"], spent * 3600000 // WINDOW_MS, key)
        s = self.spend(over)
        self.assertEqual(s["runs_out_at_unix_ms"], s["now_unix_ms"])  # used up
        s = self.spend(idle)
        self.assertEqual(s["runs_out_at_unix_ms"] - s["now_unix_ms"],
                         (2600000 * WINDOW_MS + 7400000 - 1) // 7400000)
        self.advance(WINDOW_MS + 60000)
        s = self.spend(idle)
        self.assertGreaterEqual(s["rate_window_ms"], WINDOW_MS)
        self.assertEqual((s["rate_window_spent"], s["rate_per_hour"]), (0, 0))
        self.assertIsNone(s["runs_out_at_unix_ms"])
        self.assertEqual(s["projected_at_period_end"], s["spent"])

    def test_spend_errors(self):
        """spend: 400 for a limit that is not a budget, 404 for an unknown key; a new budget
        spends nothing."""
        self.put(rolling("sp:tpm", 10))
        self.rejected("/v1/console/spend/sp%3Atpm", "key: not a budget")
        self.rejected("/v1/console/spend/sp%3Anope", "unknown_limit_key: sp:nope", 404)
        fresh = "sp:fresh"
        self.put(budget(fresh, 10))
        wait_until(lambda: self.spend(fresh)["tracked"], timeout_s=10)
        s = self.spend(fresh)
        self.assertEqual((s["rate_window_spent"], s["rate_per_hour"]), (0, 0))
        self.assertIsNone(s["runs_out_at_unix_ms"])

    def test_gateway_not_enabled(self):
        """The gateway panel's route says the gateway is off."""
        self.rejected("/v1/console/gateway", "gateway_not_enabled", 404)
        self.rejected("/v1/console/gateway/limits", "gateway_not_enabled", 404)

    def test_metrics_name_console_routes(self):
        """Console routes are counted under their own route labels."""
        self.get("/v1/console/status")
        self.get("/console")
        text = self.server.request("GET", "/metrics")[2]
        self.assertIn('llmlimit_requests_total{route="console_status",status="200"}', text)
        self.assertIn('llmlimit_requests_total{route="console",status="200"}', text)


class ConsoleTokens(unittest.TestCase):
    """Tokens on every console route: the page's files need none, data needs the
    client (or admin) token, callers and lease ids need the admin token."""

    CLIENT = "console-client-token"
    ADMIN = "console-admin-token"

    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY, backend=BACKEND, env={
            "LLMLIMIT_CLIENT_TOKEN": cls.CLIENT, "LLMLIMIT_ADMIN_TOKEN": cls.ADMIN}).start()
        status, _, body = cls.server.put_limit(budget("tok:usd", 100), token=cls.ADMIN)
        assert status == 200, body

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()

    def status_of(self, path, token):
        return self.server.request("GET", path, token=token)[0]

    def test_page_files_need_no_token(self):
        """The page holds no data: its files answer without a token."""
        for path in ASSETS:
            self.assertEqual(self.status_of(path, None), 200, path)

    def test_client_routes(self):
        """status, limits, spend, gateway: 401 without or with a wrong token; the client token opens."""
        for path, ok in (("/v1/console/status", 200), ("/v1/console/limits", 200),
                         ("/v1/console/spend/tok%3Ausd", 200), ("/v1/console/gateway", 404)):
            for token in (None, "wrong", self.CLIENT + "x"):
                status, headers, body = self.server.request("GET", path, token=token)
                self.assertEqual((status, body), (401, {"error": "unauthorized"}), (path, token))
                self.assertEqual(headers["www-authenticate"], "Bearer")
            self.assertEqual(self.status_of(path, self.CLIENT), ok, path)
            self.assertEqual(self.status_of(path, self.ADMIN), ok, path)

    def test_admin_routes(self):
        """holds by caller and denials name callers and leases: the admin token only."""
        for path in ("/v1/console/holds/tok%3Ausd", "/v1/console/denials"):
            for token in (None, "wrong", self.CLIENT):
                self.assertEqual(self.status_of(path, token), 401, (path, token))
            self.assertEqual(self.status_of(path, self.ADMIN), 200, path)

    def test_status_says_whether_the_token_is_admin(self):
        """status.admin is true for the admin token only."""
        for token, admin in ((self.CLIENT, False), (self.ADMIN, True)):
            body = self.server.request("GET", "/v1/console/status", token=token)[2]
            self.assertEqual(body["admin"], admin)


if __name__ == "__main__":
    unittest.main(verbosity=2)
