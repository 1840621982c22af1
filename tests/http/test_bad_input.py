"""Bad input against the real llmlimitd: every malformed or out-of-bounds
request gets its documented status and error (docs/api.md), changes nothing
(usage and the registry are the same before and after), and the server
keeps serving (a valid reserve afterwards is allowed).

The backend comes from --backend (default memory)."""

import http.client
import json
import os
import shutil
import socket
import tempfile
import unittest
import uuid

import harness
from harness import Server, backend_from_argv, binary_from_argv

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

KEY = "bad:rolling"
OTHER = "bad:conc"
BUDGET = "bad:budget"
SYSTEM_ZONEINFO = "/usr/share/zoneinfo"
MAX_BODY = 4096
AMOUNT_RANGE = "must be an integer 1..9223372036854775807"
KEY_SYNTAX = "must be 1-256 bytes of printable ASCII without whitespace"
LEASE_SYNTAX = "must be 1-128 bytes of [A-Za-z0-9._:-]"


def lease():
    return str(uuid.uuid4())


def req(key=KEY, amount=1):
    return {"key": key, "amount": amount}


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Zones come from a directory of our own: Berlin, and a file that is not TZif.
        cls.zoneinfo = tempfile.mkdtemp(prefix="llmlimit-zoneinfo-")
        os.makedirs(os.path.join(cls.zoneinfo, "Europe"))
        shutil.copy(os.path.join(SYSTEM_ZONEINFO, "Europe", "Berlin"),
                    os.path.join(cls.zoneinfo, "Europe", "Berlin"))
        with open(os.path.join(cls.zoneinfo, "Text"), "w") as f:
            f.write("# a time zone that is not a TZif file\n")
        cls.server = Server(BINARY, backend=BACKEND,
                            args=["--max-body-bytes", str(MAX_BODY),
                                  "--zoneinfo-dir", cls.zoneinfo]).start()
        for definition in ({"key": KEY, "kind": "rolling", "capacity": 1000000,
                            "window_seconds": 600},
                           {"key": OTHER, "kind": "concurrency", "capacity": 10,
                            "timeout_seconds": 600},
                           {"key": BUDGET, "kind": "budget", "capacity": 10, "period": "month",
                            "period_anchor_day": 15, "time_zone": "Europe/Berlin"}):
            status, _, body = cls.server.put_limit(definition)
            assert status == 200, body
        cls.held = lease()  # a lease to complete and release against
        status, _, body = cls.server.reserve(cls.held, {KEY: 5, OTHER: 1})
        assert status == 200 and body["allowed"], body

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        shutil.rmtree(cls.zoneinfo)
        assert code == 0, "llmlimitd exit code %r" % code

    # -- helpers -----------------------------------------------------------

    def snapshot(self):
        state = {}
        for key in (KEY, OTHER, BUDGET):
            status, _, body = self.server.usage(key)
            self.assertEqual(status, 200, body)
            state[key] = body
        state["limits"] = self.server.request("GET", "/v1/admin/limits")[2]
        return state

    def rejected(self, method, path, status, error, body=None, raw=None, token=None,
                 headers=None, starts=False):
        """Sends one bad request; checks status, error, no change, still serving."""
        before = self.snapshot()
        got_status, got_headers, got = self.server.request(method, path, body=body, raw=raw,
                                                          token=token, headers=headers)
        self.assertEqual(got_status, status, got)
        self.assertIsInstance(got, dict, got)
        self.assertIsInstance(got.get("error"), str, got)
        if starts:
            self.assertTrue(got["error"].startswith(error), got)
        else:
            self.assertEqual(got["error"], error)
        self.assertEqual(self.snapshot(), before)
        status_ok, _, ok = self.server.reserve(lease(), {KEY: 1})
        self.assertEqual(status_ok, 200, ok)
        self.assertTrue(ok["allowed"], ok)
        return got, got_headers

    def bad_reserve(self, body, error, status=400, raw=None, starts=False):
        return self.rejected("POST", "/v1/reserve", status, error, body=body, raw=raw,
                             starts=starts)

    # -- malformed bodies ----------------------------------------------------

    def test_malformed_json(self):
        """Unparseable bodies are 400 "invalid JSON: ... (line L, column C)"."""
        for raw in ('{"lease_id":', "", "nul", '{"lease_id":"a"} trailing', "{'a':1}",
                    '{"lease_id":"a","lease_id":"b","requirements":[]}', "\xff\xfe"):
            got, _ = self.bad_reserve(None, "invalid JSON: ", raw=raw, starts=True)
            self.assertRegex(got["error"], r"\(line \d+, column -?\d+\)$")

    def test_body_not_an_object(self):
        """A body that is valid JSON but not an object is 400 body: must be a JSON object."""
        for raw in ("[1]", '"text"', "42", "null"):
            self.bad_reserve(None, "body: must be a JSON object", raw=raw)

    def test_wrong_types(self):
        """Each field of the wrong type is a 400 naming the field path."""
        cases = [
            ({"lease_id": 5, "requirements": [req()]}, "lease_id: must be a string"),
            ({"lease_id": lease(), "requirements": "x"}, "requirements: must be an array"),
            ({"lease_id": lease(), "requirements": {"key": KEY}}, "requirements: must be an array"),
            ({"lease_id": lease(), "requirements": [5]}, "requirements[0]: must be an object"),
            ({"lease_id": lease(), "requirements": [req(), {"key": 5, "amount": 1}]},
             "requirements[1].key: must be a string"),
            ({"lease_id": lease(), "requirements": [req(amount="5")]},
             "requirements[0].amount: " + AMOUNT_RANGE),
            ({"lease_id": lease(), "requirements": [req(amount=True)]},
             "requirements[0].amount: " + AMOUNT_RANGE),
            ({"lease_id": lease(), "requirements": [req(amount=None)]},
             "requirements[0].amount: " + AMOUNT_RANGE),
            ({"lease_id": lease(), "requirements": [req()], "caller": 5},
             "caller: must be a string of at most 256 bytes"),
        ]
        for body, error in cases:
            self.bad_reserve(body, error)

    def test_missing_fields(self):
        """A missing required field is 400 "<path>: required"."""
        cases = [
            ({"requirements": [req()]}, "lease_id: required"),
            ({"lease_id": lease()}, "requirements: required"),
            ({"lease_id": lease(), "requirements": [{"amount": 1}]},
             "requirements[0].key: required"),
            ({"lease_id": lease(), "requirements": [req(), {"key": OTHER}]},
             "requirements[1].amount: required"),
        ]
        for body, error in cases:
            self.bad_reserve(body, error)

    def test_unknown_fields(self):
        """Unknown fields are rejected at every level."""
        self.bad_reserve({"lease_id": lease(), "requirements": [req()], "foo": 1},
                         "foo: unknown field")
        self.bad_reserve({"lease_id": lease(), "requirements": [dict(req(), extra=1)]},
                         "requirements[0].extra: unknown field")
        self.rejected("POST", "/v1/release", 400, "actuals: unknown field",
                      body={"lease_id": self.held, "actuals": []})

    def test_bad_amounts(self):
        """Negative, zero, float, 2^63 and 2^64 amounts are 400; none reaches the backend."""
        for amount in (-1, 0, 1.5, 1.0, 1e3, -9223372036854775808):
            self.bad_reserve({"lease_id": lease(), "requirements": [req(amount=amount)]},
                             "requirements[0].amount: " + AMOUNT_RANGE)
        for literal in ("9223372036854775808", "18446744073709551616", "1" + "0" * 40,
                        "-9223372036854775809"):
            raw = '{"lease_id":"%s","requirements":[{"key":"%s","amount":%s}]}' % (
                lease(), KEY, literal)
            got, _ = self.bad_reserve(None, "invalid JSON: ", raw=raw, starts=True)
            self.assertIn("9223372036854775807", got["error"])
        # the largest amount is valid input (and can never fit)
        status, _, body = self.server.reserve(lease(), {KEY: 9223372036854775807})
        self.assertEqual((status, body["error"]), (200, "exceeds_capacity:" + KEY))

    def test_bad_actual_amounts(self):
        """complete: actual_amount must be 0..2^63-1; the lease stays open."""
        for amount in (-1, 0.5, "1"):
            self.rejected("POST", "/v1/complete", 400,
                          "actuals[0].actual_amount: must be an integer 0..9223372036854775807",
                          body={"lease_id": self.held,
                                "actuals": [{"key": KEY, "actual_amount": amount}]})
        self.rejected("POST", "/v1/complete", 400, "actuals[1].key: duplicate key",
                      body={"lease_id": self.held,
                            "actuals": [{"key": KEY, "actual_amount": 1},
                                        {"key": KEY, "actual_amount": 2}]})
        self.rejected("POST", "/v1/complete", 400, "actuals: 0..64 items",
                      body={"lease_id": self.held,
                            "actuals": [{"key": "k%d" % i, "actual_amount": 1}
                                        for i in range(65)]})

    def test_duplicate_keys(self):
        """The same key twice in one reserve is 400 naming the second one."""
        self.bad_reserve({"lease_id": lease(), "requirements": [req(), req(OTHER), req(amount=2)]},
                         "requirements[2].key: duplicate key")

    def test_requirement_count_bounds(self):
        """0 and 65 requirements are 400; 64 is valid input."""
        self.bad_reserve({"lease_id": lease(), "requirements": []}, "requirements: 1..64 items")
        many = [req("bad:k%d" % i) for i in range(65)]
        self.bad_reserve({"lease_id": lease(), "requirements": many}, "requirements: 1..64 items")
        status, _, body = self.server.reserve(lease(), many[:64])
        self.assertEqual(status, 200, body)
        self.assertFalse(body["allowed"])
        self.assertTrue(body["error"].startswith("unknown_limit_key: "), body)

    def test_lease_id_bounds_and_syntax(self):
        """lease_id: 129 bytes or a character outside [A-Za-z0-9._:-] is 400; 128 is fine."""
        for lease_id in ("a" * 129, "", "a b", "a/b", "é", "a\nb"):
            self.bad_reserve({"lease_id": lease_id, "requirements": [req()]},
                             "lease_id: " + LEASE_SYNTAX)
        self.bad_reserve({"lease_id": "a\u0000b", "requirements": [req()]}, "invalid JSON: ",
                         starts=True)
        status, _, body = self.server.reserve("A._:-" + "z" * 123, {KEY: 1})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["allowed"])

    def test_key_bounds(self):
        """A key of 257 bytes, with whitespace or control bytes is 400; 256 is fine."""
        for key in ("k" * 257, "", "a b", "tab\tkey", "\u00e9"):
            self.bad_reserve({"lease_id": lease(), "requirements": [req(key)]},
                             "requirements[0].key: " + KEY_SYNTAX)
        status, _, body = self.server.reserve(lease(), {"k" * 256: 1})
        self.assertEqual((status, body["error"]), (200, "unknown_limit_key: " + "k" * 256))

    def test_caller_bound(self):
        """caller longer than 256 bytes is 400."""
        self.bad_reserve({"lease_id": lease(), "requirements": [req()], "caller": "c" * 257},
                         "caller: must be a string of at most 256 bytes")

    # -- batches ---------------------------------------------------------------

    def test_batch_bounds(self):
        """Batches: 0 or 8190 items, or 8190 requirements in all, are 400 for the whole batch."""
        self.rejected("POST", "/v1/reserve/batch", 400, "requests: 1..8189 items",
                      body={"requests": []})
        self.rejected("POST", "/v1/reserve/batch", 400, "requests: required", body={})
        self.rejected("POST", "/v1/reserve/batch", 400, "requests: must be an array",
                      body={"requests": {}})
        self.rejected("POST", "/v1/complete/batch", 400, "x: unknown field",
                      body={"requests": [], "x": 1})

    def test_batch_over_8189_requirements(self):
        """8190 requirements over 128 items is 400; 8189 is answered item by item."""
        with Server(BINARY, backend=BACKEND) as big:
            self.assertEqual(big.put_limit({"key": "b", "kind": "rolling",
                                            "capacity": 10 ** 12, "window_seconds": 60})[0], 200)
            items = [{"lease_id": "l%d" % i,
                      "requirements": [{"key": "k%d" % j, "amount": 1} for j in range(64)]}
                     for i in range(127)]
            tail = {"lease_id": "tail", "requirements": [{"key": "b", "amount": 1}]}
            over = items + [dict(tail, requirements=[{"key": "k%d" % j, "amount": 1}
                                                     for j in range(62)])]
            status, _, body = big.request("POST", "/v1/reserve/batch", {"requests": over})
            self.assertEqual((status, body),
                             (400, {"error": "requests: at most 8189 requirements in all"}))
            self.assertEqual(big.usage("b")[2]["reserved"], 0)
            exact = items + [dict(tail, requirements=[{"key": "b", "amount": 1}] +
                                  [{"key": "k%d" % j, "amount": 1} for j in range(60)])]
            status, _, body = big.request("POST", "/v1/reserve/batch", {"requests": exact})
            self.assertEqual(status, 200, body)
            self.assertEqual(len(body["results"]), 128)
            self.assertTrue(all(r["status"] == 200 for r in body["results"]))
            many = [{"lease_id": "m%d" % i, "requirements": [{"key": "b", "amount": 1}]}
                    for i in range(8190)]
            status, _, body = big.request("POST", "/v1/reserve/batch", {"requests": many})
            self.assertEqual((status, body), (400, {"error": "requests: 1..8189 items"}))
            status, _, body = big.request("POST", "/v1/reserve/batch", {"requests": many[:8189]})
            self.assertEqual(status, 200)
            self.assertEqual(len(body["results"]), 8189)
            self.assertEqual(big.usage("b")[2]["reserved"], 8189)
            self.assertEqual(big.stop(), 0)

    def test_batch_item_errors_are_per_item(self):
        """A bad item in a batch is its own 400 result; the others proceed."""
        before = self.server.usage(KEY)[2]["reserved"]
        status, _, body = self.server.request("POST", "/v1/reserve/batch", {"requests": [
            {"lease_id": lease(), "requirements": [req()]},
            "not an object",
            {"lease_id": lease(), "requirements": [req(), req()]},
            {"lease_id": lease(), "requirements": [req()], "bogus": True},
        ]})
        self.assertEqual(status, 200, body)
        self.assertEqual([r["status"] for r in body["results"]], [200, 400, 400, 400])
        self.assertEqual([r.get("error") for r in body["results"][1:]], [
            "requests[1]: must be a JSON object",
            "requests[2].requirements[1].key: duplicate key",
            "requests[3].bogus: unknown field"])
        self.assertEqual(self.server.usage(KEY)[2]["reserved"], before + 1)

    # -- size and depth --------------------------------------------------------

    def test_body_size_limit(self):
        """A body of exactly --max-body-bytes is read; one byte more is 413 body_too_large."""
        body = json.dumps({"lease_id": lease(), "requirements": [req()]})
        exact = body[:-1] + " " * (MAX_BODY - len(body)) + "}"
        self.assertEqual(len(exact), MAX_BODY)
        status, _, got = self.server.request("POST", "/v1/reserve", raw=exact)
        self.assertEqual(status, 200, got)
        self.assertTrue(got["allowed"])
        over = body[:-1] + " " * (MAX_BODY + 1 - len(body)) + "}"
        self.bad_reserve(None, "body_too_large", status=413, raw=over)

    def test_chunked_body_over_limit(self):
        """A chunked body that grows past the limit is 413 too."""
        before = self.snapshot()
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
        chunks = [b'{"lease_id":"' + lease().encode() + b'","requirements":[', b" " * 3000,
                  b" " * 3000, b'{"key":"bad:rolling","amount":1}]}']
        conn.request("POST", "/v1/reserve", body=iter(chunks), encode_chunked=True,
                     headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        response = conn.getresponse()
        self.assertEqual(response.status, 413)
        self.assertEqual(json.loads(response.read()), {"error": "body_too_large"})
        conn.close()
        self.assertEqual(self.snapshot(), before)

    def test_endless_chunked_body_is_cut(self):
        """A chunked body that keeps coming past twice the limit gets its connection closed."""
        before = self.snapshot()
        sock = socket.create_connection((self.server.host, self.server.port), timeout=10)
        sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: x\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (1000, b" " * 1000)
        closed = False
        try:
            for _ in range(3 * MAX_BODY // 1000):
                sock.sendall(chunk)
            reply = sock.recv(4096)
            closed = reply == b""
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        sock.close()
        self.assertTrue(closed)
        self.assertEqual(self.snapshot(), before)
        status, _, body = self.server.reserve(lease(), {KEY: 1})
        self.assertEqual((status, body["allowed"]), (200, True))

    def test_json_depth_bound(self):
        """Nesting of 9 levels is 400 invalid JSON; 8 levels is parsed."""
        deep = '{"lease_id":"a","requirements":[' + "[" * 7 + "]" * 7 + "]}"
        self.bad_reserve(None, "invalid JSON: nested deeper than 8 levels", raw=deep, starts=True)
        eight = '{"lease_id":"a","requirements":[' + "[" * 6 + "]" * 6 + "]}"
        self.bad_reserve(None, "requirements[0]: must be an object", raw=eight)
        # brackets inside strings do not count
        status, _, body = self.server.reserve(lease(), {KEY: 1}, caller="[" * 100)
        self.assertEqual(status, 200, body)

    # -- routes, methods, tokens, paths ---------------------------------------------

    def test_unknown_route_and_method(self):
        """Unknown route 404 not_found; wrong method 405 with Allow."""
        self.rejected("GET", "/v2/reserve", 404, "not_found")
        self.rejected("POST", "/v1/usage", 404, "not_found")
        self.rejected("POST", "/v1/admin/clock", 404, "not_found", body={"advance_ms": 1})
        _, headers = self.rejected("PUT", "/v1/reserve", 405, "method_not_allowed",
                                   body={"lease_id": lease(), "requirements": [req()]})
        self.assertEqual(headers["allow"], "POST")
        _, headers = self.rejected("DELETE", "/v1/admin/limits", 405, "method_not_allowed")
        self.assertEqual(headers["allow"], "GET, HEAD, PUT")
        _, headers = self.rejected("PATCH", "/v1/usage/" + KEY, 405, "method_not_allowed")
        self.assertEqual(headers["allow"], "GET, HEAD")

    def test_bad_percent_encoding(self):
        """Invalid escapes, %00 and over-long keys in paths are 400."""
        for path in ("/v1/usage/%zz", "/v1/usage/a%4", "/v1/usage/a%", "/v1/usage/a%00b",
                     "/v1/admin/limits/%g0"):
            self.rejected("GET", path, 400, "key: invalid percent-encoding")
        self.rejected("GET", "/v1/usage/" + "k" * 257, 400, "key: " + KEY_SYNTAX)
        self.rejected("GET", "/v1/usage/a%20b", 400, "key: " + KEY_SYNTAX)
        self.rejected("DELETE", "/v1/admin/limits/%zz", 400, "key: invalid percent-encoding")
        self.rejected("GET", "/v1/usage/" + KEY + "?at_unix_ms=abc", 400,
                      "at_unix_ms: must be an integer 0..253402300799999")
        self.rejected("GET", "/v1/usage/" + KEY + "?at_unix_ms=%zz", 400,
                      "at_unix_ms: invalid percent-encoding or too long")
        self.rejected("GET", "/v1/usage/" + KEY + "?group_by=team", 400, "group_by: must be caller")
        status, _, body = self.server.request("GET", "/v1/usage/bad%3Arolling")
        self.assertEqual((status, body["key"]), (200, KEY))

    def test_bad_admin_definitions(self):
        """Invalid limit definitions are 400 naming the field; the registry is unchanged."""
        base = {"key": "bad:new", "kind": "rolling", "capacity": 10, "window_seconds": 60}
        cases = [
            (dict(base, capacity=0), "capacity: must be an integer 1..9223372036854775807"),
            (dict(base, capacity=-5), "capacity: must be an integer 1..9223372036854775807"),
            (dict(base, capacity=2.5), "capacity: must be an integer 1..9223372036854775807"),
            (dict(base, kind="hourly"), "kind: must be rolling, concurrency or budget"),
            (dict(base, key="k" * 257), "key: " + KEY_SYNTAX),
            (dict(base, extra=1), "extra: unknown field"),
            (dict(base, overage="maybe"), "overage: must be deny or debt"),
            (dict(base, period="year"), "period: must be day, week, month or none"),
            (dict(base, window_seconds=0), "window_seconds: required (> 0) for a rolling limit"),
            (dict(base, window_seconds=-1), "window_seconds: must be an integer 0..31622400"),
            (dict(base, unit="u" * 65), "unit: must be a string of at most 64 bytes"),
            (dict(base, description="d" * 1025),
             "description: must be a string of at most 1024 bytes"),
            (dict(base, period="day"), "period: not allowed on a rolling limit"),
            ({"key": "bad:new", "kind": "concurrency", "capacity": 1, "timeout_seconds": 5,
              "window_seconds": 5}, "window_seconds: not allowed on a concurrency limit"),
            ({"kind": "rolling", "capacity": 1, "window_seconds": 1}, "key: required"),
            ({"key": "bad:new", "capacity": 1}, "kind: required"),
            ({"key": "bad:new", "kind": "rolling", "window_seconds": 1}, "capacity: required"),
            (dict(base, kind="concurrency", window_seconds=0), "timeout_seconds: required (> 0) "
             "for a concurrency limit"),
            ({"key": KEY, "kind": "concurrency", "capacity": 1, "timeout_seconds": 5},
             None),  # kind change of a live limit
        ]
        for body, error in cases:
            if error is None:
                got, _ = self.rejected("PUT", "/v1/admin/limits", 400, "kind:", body=body,
                                       starts=True)
            else:
                self.rejected("PUT", "/v1/admin/limits", 400, error, body=body)
        self.rejected("PUT", "/v1/admin/limits", 400, "body: must be a JSON object", raw="[]")

    def test_bad_budget_periods(self):
        """An anchor day off 1..28 or off months, an unknown zone, a zone name that would climb
        out of the zoneinfo directory, a zone file that is not TZif, and a change of a live
        budget's periods: 400 naming the field, nothing changed."""
        base = {"key": "bad:new-budget", "kind": "budget", "capacity": 10, "period": "month"}
        anchor_range = "period_anchor_day: must be an integer 1..28"
        zone_name = ("must be a zone name of 1..64 bytes of [A-Za-z0-9_+-/] "
                     "(e.g. Europe/Berlin)")
        cases = [
            (dict(base, period_anchor_day=29), anchor_range),
            (dict(base, period_anchor_day=-1), anchor_range),
            (dict(base, period_anchor_day="1"), anchor_range),
            (dict(base, period="day", period_anchor_day=3),
             "period_anchor_day: only for period month"),
            (dict(base, time_zone="Mars/Olympus_Mons"),
             "time_zone: Mars/Olympus_Mons: unknown time zone"),
            (dict(base, time_zone="Text"), "time_zone: Text: not a TZif file"),
            (dict(base, time_zone="Europe"), "time_zone: Europe: not a TZif file (a directory)"),
            (dict(base, time_zone="../../../etc/passwd"),
             "time_zone: ../../../etc/passwd: " + zone_name),
            (dict(base, time_zone="/etc/passwd"), "time_zone: /etc/passwd: " + zone_name),
            (dict(base, time_zone="z" * 65),
             "time_zone: must be a zone name of at most 64 bytes (e.g. Europe/Berlin)"),
            (dict(base, time_zone=5),
             "time_zone: must be a zone name of at most 64 bytes (e.g. Europe/Berlin)"),
            (dict(base, period="none", time_zone="Europe/Berlin"),
             "time_zone: not allowed with period none (it never resets)"),
            ({"key": "bad:new", "kind": "rolling", "capacity": 10, "window_seconds": 60,
              "time_zone": "Europe/Berlin"}, "time_zone: not allowed on a rolling limit"),
            ({"key": "bad:new", "kind": "concurrency", "capacity": 10, "timeout_seconds": 60,
              "period_anchor_day": 1}, "period_anchor_day: not allowed on a concurrency limit"),
            ({"key": BUDGET, "kind": "budget", "capacity": 10, "period": "month",
              "period_anchor_day": 15},
             "time_zone: cannot change Europe/Berlin to UTC; delete the limit first"),
            ({"key": BUDGET, "kind": "budget", "capacity": 10, "period": "month",
              "time_zone": "Europe/Berlin"},
             "period_anchor_day: cannot change 15 to 1; delete the limit first"),
            ({"key": BUDGET, "kind": "budget", "capacity": 10, "period": "none"},
             "period: cannot change month to none; delete the limit first"),
        ]
        for body, error in cases:
            self.rejected("PUT", "/v1/admin/limits", 400, error, body=body)

    def test_wrong_token(self):
        """With tokens configured, a wrong token is 401 and changes nothing."""
        env = {"LLMLIMIT_ADMIN_TOKEN": "right-admin", "LLMLIMIT_CLIENT_TOKEN": "right-client"}
        with Server(BINARY, backend=BACKEND, env=env) as guarded:
            definition = {"key": "t", "kind": "rolling", "capacity": 5, "window_seconds": 60}
            self.assertEqual(guarded.put_limit(definition, token="right-admin")[0], 200)
            for token in ("wrong", "right-admi", "right-adminn", "right-client"):
                status, headers, body = guarded.put_limit(dict(definition, capacity=1),
                                                          token=token)
                self.assertEqual((status, body), (401, {"error": "unauthorized"}))
                self.assertEqual(headers["www-authenticate"], "Bearer")
            for token in ("wrong", "right-clien", None):
                status, _, body = guarded.reserve(lease(), {"t": 1}, token=token)
                self.assertEqual((status, body), (401, {"error": "unauthorized"}))
            status, _, body = guarded.usage("t", token="right-client")
            self.assertEqual((body["capacity"], body["reserved"]), (5, 0))
            status, _, body = guarded.reserve(lease(), {"t": 1}, token="right-client")
            self.assertTrue(body["allowed"])
            self.assertEqual(guarded.stop(), 0)

    def test_garbage_on_the_socket(self):
        """Raw garbage and a truncated request do not disturb the server."""
        for garbage in (b"\x00\x01\x02garbage\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n",
                        b"POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"):
            before = self.snapshot()
            sock = socket.create_connection((self.server.host, self.server.port), timeout=5)
            sock.sendall(garbage)
            sock.close()
            self.assertEqual(self.snapshot(), before)
        status, _, body = self.server.reserve(lease(), {KEY: 1})
        self.assertEqual((status, body["allowed"]), (200, True))


if __name__ == "__main__":
    harness.main()
