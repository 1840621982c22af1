"""Limit defaults in the gateway's templates (docs/gateway.md, "Limit
defaults"): the first call that needs a missing limit whose template has a
"default" creates it with that definition and is served at once; a limit
that exists is never changed by a default; a missing limit without a
default is a 400 naming it, and creates nothing; 200 concurrent first calls
of 100 new callers create each limit exactly once (limits.json, the
registry's list, the log, and on sqlite the audit log's limit_changed) and
never admit a call over a limit's capacity; on tigerbeetle two front ends on
one cluster creating the same default both serve, and the cluster holds the
default's capacity once.

Backend from --backend (memory, sqlite, tigerbeetle)."""

import copy
import json
import os
import threading
import time
import unittest
import urllib.parse

from gw_harness import (BACKEND, BINARY, CHAT, MESSAGES, RESPONSES, Caller, Gateway,
                        GatewayTest, Server, chat, cost, provider_env, run_concurrently,
                        skip_unless_backend, wait_until)
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it

CONCURRENCY = {"kind": "concurrency", "capacity": 5, "timeout_seconds": 300}
BUDGET = {"kind": "budget", "capacity": 10 ** 9, "period": "month", "unit": "usd_micros",
          "timeout_seconds": 120, "description": "the team's monthly budget"}
TOKENS = {"kind": "rolling", "capacity": 10 ** 7, "window_seconds": 60, "overage": "deny"}
DEFAULT_TEMPLATES = [
    ("conc", "dconc:{caller}", "requests", CONCURRENCY),
    ("usd", "dusd:{team}", "usd_micros", BUDGET),
    ("tok", "dtok:{caller}:{model}", "tokens", TOKENS),
]
CREATED_LOG = "limit created from its template's default"


def free_caller(gw):
    """A key of the configuration whose limits nobody has made."""
    secret, name, team = gw.free_keys.pop(0)
    return Caller(gw, secret, name, team)


def limit_of(server, key):
    """The LimitState of key, or None when it does not exist."""
    status, _, body = server.request("GET", "/v1/admin/limits/" + urllib.parse.quote(key, ""))
    if status == 404:
        return None
    assert status == 200, (status, body)
    return body["limit"]


def definition_of(key, default):
    """The definition a default gives key, with every field GET shows."""
    full = {"key": key, "window_seconds": 0, "timeout_seconds": 0, "period": "", "unit": "",
            "description": "", "overage": "debt"}
    full.update(default)
    return full


def registry_file(server):
    with open(os.path.join(server.data_dir, "limits.json")) as f:
        return json.load(f)


def created_lines(server, key):
    """How many times the log says key was created from a default."""
    return sum(1 for line in server.stderr_lines
               if CREATED_LOG in line and ' key="%s" ' % key in line)


def all_events(gw, key):
    """Every audit event of key (sqlite)."""
    events, since = [], 0
    while True:
        status, _, page = gw.events(key=key, since=since, limit=1000)
        assert status == 200, (status, page)
        if not page["events"]:
            return events
        events += page["events"]
        since = page["next_since"]


class Defaults(GatewayTest, unittest.TestCase):
    gateway_options = {"templates": tuple(DEFAULT_TEMPLATES)}

    def test_the_console_lists_the_templates_with_their_defaults(self):
        """GET /v1/console/gateway/limits: each template as written, its amount, which calls
        it takes (one naming {model} only model calls) and the kind of its default."""
        status, headers, body = self.gw.server.request("GET", "/v1/console/gateway/limits")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers.get("cache-control"), "no-store")
        self.assertEqual(body, {"limits": [
            {"key": "dconc:{caller}", "amount": "requests", "calls": "all",
             "default_kind": "concurrency"},
            {"key": "dusd:{team}", "amount": "usd_micros", "calls": "all",
             "default_kind": "budget"},
            {"key": "dtok:{caller}:{model}", "amount": "tokens", "calls": "model",
             "default_kind": "rolling"}]})

    def test_a_new_key_is_served_at_once_with_its_defaults(self):
        """A key whose limits do not exist: its first call (chat) is served, and creates each
        limit with its template's default (normalised as a PUT would), in the registry and
        limits.json; each is charged the call."""
        c = free_caller(self.gw)
        body = chat("m-counted", max_tokens=600)
        status, headers, answer = self.gw.call(c, CHAT, body)
        self.assertEqual(status, 200, answer)
        for name, _, _, default in DEFAULT_TEMPLATES:
            key = c.keys[name].replace("{model}", "m-counted")
            state = limit_of(self.gw.server, key)
            self.assertIsNotNone(state, name)
            self.assertEqual(state["definition"], definition_of(key, default), name)
            self.assertEqual(created_lines(self.gw.server, key), 1, name)
        on_file = {s["definition"]["key"]: s["definition"] for s in
                   registry_file(self.gw.server)}
        self.assertEqual(on_file[c.keys["conc"]], definition_of(c.keys["conc"], CONCURRENCY))
        self.assertEqual(on_file[c.keys["usd"]]["capacity"], BUDGET["capacity"])
        self.assertEqual(c.used("usd"), cost(1001, 499))
        self.assertEqual(self.gw.server.usage(c.keys["tok"].replace("{model}", "m-counted"))[2]
                         ["used"], 1001 + 499)
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0))

    def test_every_surface_creates_them(self):
        """Messages and Responses calls of new keys are served the same way."""
        for path, body in ((MESSAGES, {"model": "a-normal", "max_tokens": 100,
                                       "messages": [{"role": "user", "content": "one"}]}),
                           (RESPONSES, {"model": "r-normal", "input": "one two"})):
            c = free_caller(self.gw)
            status, _, answer = self.gw.call(c, path, body)
            self.assertEqual(status, 200, (path, answer))
            self.assertIsNotNone(limit_of(self.gw.server, c.keys["conc"]), path)
            self.assertGreater(c.used("usd"), 0, path)

    def test_a_first_call_with_a_request_id_is_reserved_once(self):
        """X-Request-Id on a first call: the reserve after the creation is the same lease (the
        one that found the key missing left nothing), so the call is served and charged once,
        and its retry is not forwarded again."""
        c = free_caller(self.gw)
        headers = {"X-Request-Id": "first-" + c.name}
        body = chat("m-counted", max_tokens=600)
        status, answer_headers, answer = self.gw.call(c, CHAT, body, headers=headers)
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer_headers["x-llmlimit-lease-id"], "gw:%s:first-%s" % (c.name,
                                                                                  c.name))
        forwarded = len(self.gw.upstream.requests())
        status, _, answer = self.gw.call(c, CHAT, body, headers=headers)
        self.assertEqual(status, 409, answer)
        self.assertEqual(len(self.gw.upstream.requests()), forwarded)
        self.assertEqual(c.used("usd"), cost(1001, 499))

    def test_a_default_never_changes_a_limit_that_exists(self):
        """The caller's concurrency limit put at 3 before its first call (the default says 5):
        it stays 3, and with 3 slots held the call is a 429."""
        c = free_caller(self.gw)
        status, _, body = self.gw.server.put_limit({"key": c.keys["conc"], "kind": "concurrency",
                                                    "capacity": 3, "timeout_seconds": 60})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        state = limit_of(self.gw.server, c.keys["conc"])
        self.assertEqual((state["definition"]["capacity"], state["definition"]["timeout_seconds"]),
                         (3, 60))
        self.assertEqual(created_lines(self.gw.server, c.keys["conc"]), 0)
        lease = "hold-" + c.name
        self.assertEqual(self.gw.server.reserve(lease, {c.keys["conc"]: 3})[0], 200)
        status, _, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 429, body)
        self.assertIn(c.keys["conc"], body["error"]["message"])
        self.assertEqual(self.gw.server.release(lease)[0], 200)

    def test_a_limit_deleted_is_made_again_by_the_next_call(self):
        c = free_caller(self.gw)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0))
        status, _, _ = self.gw.server.request(
            "DELETE", "/v1/admin/limits/" + urllib.parse.quote(c.keys["conc"], ""))
        self.assertEqual(status, 200)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        self.assertEqual(limit_of(self.gw.server, c.keys["conc"])["definition"]["capacity"], 5)
        self.assertEqual(created_lines(self.gw.server, c.keys["conc"]), 2)


class WithoutDefault(GatewayTest, unittest.TestCase):
    """A template without a default beside ones with: its missing limit is a 400 naming it,
    and the call creates nothing."""

    gateway_options = {"templates": tuple(DEFAULT_TEMPLATES[:1] + [
        ("man", "manual:{caller}", "requests")])}

    def test_the_console_lists_a_template_without_default(self):
        status, _, body = self.gw.server.request("GET", "/v1/console/gateway/limits")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["limits"][1], {"key": "manual:{caller}", "amount": "requests",
                                             "calls": "all", "default_kind": None})

    def test_a_missing_limit_without_default_is_a_400_and_creates_nothing(self):
        c = free_caller(self.gw)
        forwarded = len(self.gw.upstream.requests())
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual((status, body["error"]["code"]), (400, "unknown_limit_key"), body)
        self.assertIn("'%s'" % c.keys["man"], body["error"]["message"])
        self.assertEqual(headers["x-should-retry"], "false")
        self.assertIsNone(limit_of(self.gw.server, c.keys["conc"]))
        self.assertEqual(len(self.gw.upstream.requests()), forwarded)
        status, _, body = self.gw.server.put_limit({"key": c.keys["man"], "kind": "rolling",
                                                    "capacity": 10, "window_seconds": 60})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.gw.call(c, CHAT, chat("m-normal"))[0], 200)
        self.assertEqual(limit_of(self.gw.server, c.keys["conc"])["definition"]["capacity"], 5)


# 100 new callers, two calls each at once; every caller may run one call at a time, and the
# team they share 60 calls an hour.
CALLERS = 100
SHARED_TEAM = "shared"
CALLER_SLOT = {"kind": "concurrency", "capacity": 1, "timeout_seconds": 120}
TEAM_CALLS = {"kind": "rolling", "capacity": 60, "window_seconds": 3600}


def shared_team(_index):
    return {"team": SHARED_TEAM}


class ConcurrentFirstCalls(GatewayTest, unittest.TestCase):
    gateway_options = {"keys": CALLERS, "key_fields": shared_team, "args": ("--log-level", "debug"),
                       "templates": (
        ("slot", "slot:{caller}", "requests", CALLER_SLOT),
        ("team", "team:{team}:calls", "requests", TEAM_CALLS))}

    def test_200_first_calls_create_each_limit_once_and_never_pass_one(self):
        callers = [free_caller(self.gw) for _ in range(CALLERS)]
        since = len(self.gw.upstream.requests())
        started = time.monotonic()
        # Each caller's name in its text, so that the upstream's log tells whose call it is.
        results = run_concurrently(2 * CALLERS, lambda i: self.gw.call(
            callers[i // 2], CHAT, chat("m-slow-plain", text=callers[i // 2].name),
            timeout_s=120))
        print("  200 first calls answered in %.1f s" % (time.monotonic() - started))
        for result in results:
            self.assertIsInstance(result, tuple, result)
        statuses = [status for status, _, _ in results]
        self.assertEqual(set(statuses) - {200, 429}, set(), [r for r in results
                                                             if r[0] not in (200, 429)][:3])
        served = statuses.count(200)
        self.assertGreater(served, 0)
        self.assertLessEqual(served, TEAM_CALLS["capacity"])
        # Each limit exists once, as its default says, in the registry and in limits.json.
        team_key = "team:%s:calls" % SHARED_TEAM
        keys = [c.keys["slot"] for c in callers] + [team_key]
        status, _, listed = self.gw.server.request("GET", "/v1/admin/limits")
        self.assertEqual(status, 200)
        listed = [s["definition"]["key"] for s in listed["limits"]]
        on_file = [s["definition"]["key"] for s in registry_file(self.gw.server)]
        for key in keys:
            self.assertEqual((listed.count(key), on_file.count(key)), (1, 1), key)
            self.assertEqual(created_lines(self.gw.server, key), 1, key)
        for c in callers:
            self.assertEqual(limit_of(self.gw.server, c.keys["slot"])["definition"]["capacity"],
                             1)
        if self.gw.backend == "sqlite":
            for key in keys:
                changes = [e for e in all_events(self.gw, key) if e["type"] == "limit_changed"]
                self.assertEqual(len(changes), 1, (key, changes))
        # No caller ran two calls at once, and the team never took more than its 60.
        posts = [r for r in self.gw.upstream.wait_for(
            lambda rs: sum(1 for r in rs[since:] if r["end"]) == served)[since:]]
        self.assertEqual(len(posts), served)
        by_caller = {}
        for post in posts:
            text = post["body"]["messages"][0]["content"]
            by_caller.setdefault(text, []).append((post["received_unix_ms"],
                                                   post["ended_unix_ms"]))
        for name, spans in by_caller.items():
            spans.sort()
            for (_, ended), (started_ms, _) in zip(spans, spans[1:]):
                self.assertGreaterEqual(started_ms, ended - 50, (name, spans))
        self.assertTrue(wait_until(lambda: all(
            self.gw.server.usage(c.keys["slot"])[2]["reserved"] == 0 for c in callers)))
        status, _, usage = self.gw.server.usage(team_key)
        self.assertEqual((usage["used"], usage["reserved"]), (served, 0))
        batches = [line for line in self.gw.server.stderr_lines
                   if "limits created in one registry write" in line]
        print("  %d limits created in %d registry writes" % (len(keys), len(batches)))


TWO_SLOTS = {"kind": "concurrency", "capacity": 2, "timeout_seconds": 120}


class TwoFrontEnds(unittest.TestCase):
    """Two llmlimitd on one TigerBeetle cluster, each with its own data directory and the same
    gateway.json: a new caller's first calls through both at once are both served; each front
    end creates the limits in its own registry, and the cluster's account holds the default's
    capacity once (2 slots, not 4: both held through one front end, the other's call is a
    429)."""

    def test_both_create_the_same_default_and_the_cluster_holds_it_once(self):
        gw = Gateway.start(backend="tigerbeetle", templates=(
            ("slot", "slot:{caller}", "requests", TWO_SLOTS),
            ("usd", "dusd:{team}", "usd_micros", BUDGET)))
        second = Server(BINARY, backend="tigerbeetle",
                        args=["--gateway-config", gw.config_path, "--tb-addresses",
                              gw.cluster.address, "--tb-sessions", "2"],
                        env=provider_env(gw.provider_key, gw.wrong_key))
        try:
            second.start()
            self.assertTrue(wait_until(lambda: second.request("GET", "/readyz")[0] == 200, 30))
            fronts = [gw.server, second]
            through = [gw, copy.copy(gw)]  # gw.call goes to its .server
            through[1].server = second
            c = free_caller(gw)
            results = run_concurrently(2, lambda i: through[i].call(c, CHAT, chat("m-normal")))
            self.assertEqual([r[0] for r in results], [200, 200], results)
            for front in fronts:
                for name in ("slot", "usd"):
                    self.assertIsNotNone(limit_of(front, c.keys[name]), name)
                    self.assertEqual(created_lines(front, c.keys[name]), 1, name)
                    self.assertIn(c.keys[name], [s["definition"]["key"]
                                                 for s in registry_file(front)])
            # Both slots held through the first front end: the second's call does not fit.
            lease = "hold-" + c.name
            self.assertTrue(wait_until(lambda: gw.server.usage(c.keys["slot"])[2]["reserved"]
                                       == 0))
            status, _, body = gw.server.reserve(lease, {c.keys["slot"]: 2})
            self.assertEqual((status, body["allowed"]), (200, True), body)
            status, _, body = through[1].call(c, CHAT, chat("m-normal"))
            self.assertEqual(status, 429, body)
            self.assertEqual(gw.server.release(lease)[0], 200)
            self.assertEqual(through[1].call(c, CHAT, chat("m-normal"))[0], 200)
            self.assertEqual(second.usage(c.keys["usd"])[2]["used"],
                             gw.server.usage(c.keys["usd"])[2]["used"])
        finally:
            second.cleanup()
            gw.stop()


if __name__ == "__main__":
    skip_unless_backend()
    if BACKEND != "tigerbeetle":
        del TwoFrontEnds
    unittest.main(verbosity=2)
