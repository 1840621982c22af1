"""Every route that needs a token refuses a request without it or with a
wrong one, and changes nothing: each admin route (the limits, each method of
a limit by key, the test clock) and each data route (reserve, complete,
release, both batches, events, usage, metrics) answers 401 unauthorized with
WWW-Authenticate: Bearer for no token, a wrong token, a near miss, another
scheme and (admin routes) the client token; afterwards the limits, usage,
leases, audit events and the clock are exactly as before.

The backend comes from --backend (default memory)."""

import os
import shutil
import tempfile
import unittest
import uuid

import harness
from harness import Server, backend_from_argv, binary_from_argv

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

ADMIN = "admin-" + "a" * 40
CLIENT = "client-" + "c" * 40
RPM = "auth:rpm"
USD = "auth:usd"
CLOCK_STEP_MS = 10 * 24 * 3600 * 1000  # what a refused clock call asks for
CLOCK_SLACK_MS = 60 * 1000  # real time passing during the test


def rolling(key, capacity):
    return {"key": key, "kind": "rolling", "capacity": capacity, "window_seconds": 3600}


def reserve_body(lease_id, key=RPM, amount=1):
    return {"lease_id": lease_id, "requirements": [{"key": key, "amount": amount}]}


def complete_body(lease_id):
    return {"lease_id": lease_id, "actuals": []}


def bad_credentials(right):
    """(label, headers) for every way of not holding the right token."""
    return [("none", {}),
            ("empty", {"Authorization": "Bearer "}),
            ("wrong", {"Authorization": "Bearer wrong"}),
            ("one short", {"Authorization": "Bearer " + right[:-1]}),
            ("one long", {"Authorization": "Bearer " + right + "x"}),
            ("last changed", {"Authorization": "Bearer " + right[:-1] + "X"}),
            ("other scheme", {"Authorization": "Basic " + right}),
            ("no scheme", {"Authorization": right})]


class Auth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="llmlimit-auth-")
        files = {}
        for name, token in (("admin", ADMIN), ("client", CLIENT)):
            files[name] = os.path.join(cls.dir, name)
            with open(files[name], "w") as f:
                f.write(token + "\n")
        cls.server = Server(BINARY, backend=BACKEND, args=[
            "--test-clock", "--admin-token-file", files["admin"],
            "--client-token-file", files["client"]]).start()
        cls.admin({"method": "PUT", "path": "/v1/admin/limits", "body": rolling(RPM, 1000)})
        cls.admin({"method": "PUT", "path": "/v1/admin/limits",
                   "body": {"key": USD, "kind": "budget", "capacity": 10 ** 9,
                            "period": "month", "timeout_seconds": 300}})
        cls.live = str(uuid.uuid4())  # a lease a refused complete/release must not touch
        status, _, body = cls.server.request("POST", "/v1/reserve",
                                             {"lease_id": cls.live, "requirements": [
                                                 {"key": RPM, "amount": 5},
                                                 {"key": USD, "amount": 700}]}, token=CLIENT)
        assert status == 200 and body["allowed"], body

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.cleanup()
        finally:
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def admin(cls, call):
        status, _, body = cls.server.request(call["method"], call["path"], call.get("body"),
                                             token=ADMIN)
        assert status == 200, (call, status, body)
        return body

    def snapshot(self):
        """Everything a refused request could have changed."""
        state = {"limits": self.admin({"method": "GET", "path": "/v1/admin/limits"})}
        for key in (RPM, USD, "auth:new"):
            state["usage " + key] = self.server.usage(key, token=CLIENT)[::2]
        state["events"] = self.server.request("GET", "/v1/events?limit=1000", token=CLIENT)[::2]
        state["retry of the live lease"] = self.server.request(
            "POST", "/v1/reserve", {"lease_id": self.live, "requirements": [
                {"key": RPM, "amount": 5}, {"key": USD, "amount": 700}]}, token=CLIENT)[::2]
        return state

    def clock_now_ms(self):
        return self.admin({"method": "POST", "path": "/v1/admin/clock",
                           "body": {"advance_ms": 0}})["now_unix_ms"]

    def admin_calls(self):
        limit = "/v1/admin/limits/" + RPM
        return [("GET", "/v1/admin/limits", None), ("HEAD", "/v1/admin/limits", None),
                ("PUT", "/v1/admin/limits", rolling("auth:new", 1)),
                ("PUT", "/v1/admin/limits", rolling(RPM, 1)),
                ("GET", limit, None), ("HEAD", limit, None), ("DELETE", limit, None),
                ("POST", "/v1/admin/clock", {"advance_ms": CLOCK_STEP_MS}),
                ("GET", "/v1/console/holds/" + RPM, None), ("HEAD", "/v1/console/holds/" + RPM, None),
                ("GET", "/v1/console/denials", None), ("HEAD", "/v1/console/denials", None)]

    def data_calls(self):
        fresh = str(uuid.uuid4())
        return [("POST", "/v1/reserve", reserve_body(fresh)),
                ("POST", "/v1/reserve", reserve_body(str(uuid.uuid4()), "auth:new")),
                ("POST", "/v1/complete", complete_body(self.live)),
                ("POST", "/v1/release", {"lease_id": self.live}),
                ("POST", "/v1/reserve/batch", {"requests": [reserve_body(fresh),
                                                            reserve_body(str(uuid.uuid4()))]}),
                ("POST", "/v1/complete/batch", {"requests": [complete_body(self.live)]}),
                ("GET", "/v1/events", None), ("HEAD", "/v1/events", None),
                ("GET", "/v1/events?lease_id=" + self.live, None),
                ("GET", "/v1/usage/" + RPM, None), ("HEAD", "/v1/usage/" + RPM, None),
                ("GET", "/v1/usage/" + USD + "?group_by=caller", None),
                ("GET", "/metrics", None), ("HEAD", "/metrics", None),
                ("GET", "/v1/console/status", None), ("HEAD", "/v1/console/status", None),
                ("GET", "/v1/console/limits", None), ("GET", "/v1/console/spend/" + USD, None),
                ("GET", "/v1/console/gateway", None), ("GET", "/v1/console/gateway/limits", None)]

    def assert_refused(self, calls, credentials):
        for method, path, body in calls:
            for label, headers in credentials:
                status, reply_headers, reply = self.server.request(method, path, body,
                                                                   headers=headers)
                where = (method, path, label)
                self.assertEqual(status, 401, (where, reply))
                self.assertEqual(reply_headers.get("www-authenticate"), "Bearer", where)
                if method != "HEAD":  # complete and release errors also carry "ok": false
                    self.assertIn(reply, ({"error": "unauthorized"},
                                          {"ok": False, "error": "unauthorized"}), where)

    def test_every_admin_route_refuses_without_the_admin_token(self):
        """Admin routes: 401 for no, wrong and near-miss tokens and the client token; nothing changes."""
        before, clock_before = self.snapshot(), self.clock_now_ms()
        credentials = bad_credentials(ADMIN) + [("client token",
                                                 {"Authorization": "Bearer " + CLIENT})]
        self.assert_refused(self.admin_calls(), credentials)
        self.assertEqual(self.snapshot(), before)
        moved_ms = self.clock_now_ms() - clock_before
        self.assertLess(moved_ms, CLOCK_SLACK_MS, "a refused clock call moved the clock")

    def test_every_data_route_refuses_without_a_client_token(self):
        """Data routes: 401 for no, wrong and near-miss tokens; nothing reserved, freed or read."""
        before = self.snapshot()
        self.assert_refused(self.data_calls(), bad_credentials(CLIENT))
        self.assertEqual(self.snapshot(), before)
        self.assertEqual(self.server.usage(RPM, token=CLIENT)[2]["reserved"], 5)

    def test_the_right_tokens_are_let_in(self):
        """The same routes answer (not 401) with the right token: the refusals are about the token."""
        for method, path, body in self.admin_calls()[:2] + [self.admin_calls()[4]]:
            self.assertNotEqual(self.server.request(method, path, body, token=ADMIN)[0], 401)
        for method, path, body in self.data_calls()[-5:]:
            for token in (CLIENT, ADMIN):
                self.assertNotEqual(self.server.request(method, path, body, token=token)[0], 401)

    def test_a_token_does_not_carry_over_to_the_next_request(self):
        """On one keep-alive connection, a request with the admin token among many header
        fields, then requests with fewer and no token: each of these is refused (a reused
        request object's earlier fields are never read)."""
        # The token last, so that its field's index and bytes lie past the
        # shorter heads that follow.
        padded = {"X-Pad-%02d" % i: "p" * 10 for i in range(20)}  # a head under 1 KiB
        padded["Authorization"] = "Bearer " + ADMIN
        for _ in range(3):
            status, _, _ = self.server.request("GET", "/v1/admin/limits", headers=padded)
            self.assertEqual(status, 200)
            for headers in ({}, {"X-Pad-00": "p"}, {"Authorization": "Bearer " + CLIENT}):
                status, reply_headers, reply = self.server.request(
                    "GET", "/v1/admin/limits", headers=headers)
                self.assertEqual(status, 401, (headers, reply))
                self.assertEqual(reply_headers.get("www-authenticate"), "Bearer")


if __name__ == "__main__":
    harness.main()
