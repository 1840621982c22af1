"""Waiting for capacity through the gateway (docs/gateway.md, "Waiting for
capacity"): Prefer: wait=N and x-llmlimit-priority on a gateway call, capped by
the key's max_wait_seconds and priority_floor.

- the official openai SDK (Node) makes 50 calls at once on a 5-slot limit with
  Prefer: wait=60 and no retries: all 50 succeed, never more than 5 run upstream
  at once, and each is charged once;
- on a 1-slot limit, calls queued with mixed priorities reach the upstream by
  priority, then in arrival order;
- a key without max_wait_seconds never waits (429 at once); a key's cap shortens
  a longer Prefer: wait; a key's default_wait_seconds makes a call that sends no
  Prefer wait, and Prefer: wait=0 opts out; a bad x-llmlimit-priority is a 400
  (the floor's cap is gw_key_priority's, tested in gateway_test_config);
- a client that leaves while its call waits leaves the queue: nothing is held for
  it and it is never forwarded;
- a key that may wait at priority 0 (the default priority_floor) and asks for a
  shared limit's whole capacity holds back another key's small calls, waiting or
  not, for --wait-hold-ms only while capacity is free (docs/gateway.md).

Backend from --backend. Exits 77 (skipped) when node or the installed SDK
(npm ci --prefix tests/gateway/node) is missing, for the SDK tests only."""

import json
import os
import subprocess
import time
import unittest

from gw_harness import CHAT, MODELS, TEMPLATES, Gateway, GatewayTest, chat, estimate
from gw_harness import skip_unless_backend
from gw_harness import tearDownModule  # noqa: F401 - unittest calls it
from harness import wait_until
from node_sdk import NODE_DIR, missing_prerequisite, node_from_argv

NODE = node_from_argv()
WAIT_KEYS = 4  # the first keys may wait 60 s at any priority; the others as the test says


def key_fields(index):
    if index < WAIT_KEYS:
        return {"max_wait_seconds": 60, "priority_floor": 0}
    if index == WAIT_KEYS:
        return {"max_wait_seconds": 1, "priority_floor": 0}   # a short cap
    if index == WAIT_KEYS + 1:
        return {"max_wait_seconds": 60, "priority_floor": 6}  # may not ask better than 6
    if index == WAIT_KEYS + 3:
        return {"max_wait_seconds": 60, "default_wait_seconds": 30}  # waits unless it says
    return {}                                                  # never waits


def most_at_once(records):
    """The most of these upstream calls running at one moment."""
    events = sorted([(r["received_unix_ms"], 1) for r in records] +
                    [(r["ended_unix_ms"], -1) for r in records])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


class GatewayWait(GatewayTest, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        skip_unless_backend()
        cls.gw = Gateway(key_fields=key_fields)
        cls.gw.server.start()
        cls.keys = list(cls.gw.free_keys)  # in key_fields' order

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()  # its own gateway: tearDownModule stops only the shared one

    def caller_of(self, index, **capacities):
        """The index-th key (key_fields says how it may wait), its limits defined."""
        from gw_harness import Caller
        secret, name, team = self.keys[index]
        return Caller(self.gw, secret, name, team).define(**capacities)

    def sdk(self, caller, model, priorities, wait_seconds=60):
        reason = missing_prerequisite(NODE)
        if reason is not None:
            self.skipTest(reason)
        env = dict(os.environ, GW_BASE_URL=self.gw.server.url + "/v1", GW_API_KEY=caller.secret,
                   GW_MODEL=model, GW_WAIT_SECONDS=str(wait_seconds),
                   GW_PRIORITIES=",".join(str(p) for p in priorities))
        return subprocess.Popen([NODE, os.path.join(NODE_DIR, "sdk_wait.mjs")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def results(self, process):
        out, err = process.communicate(timeout=300)
        self.assertEqual(process.returncode, 0, err)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def test_fifty_sdk_calls_on_five_slots_all_succeed(self):
        """50 SDK calls at once, Prefer: wait=60, 5 slots, no retries: all succeed, at most
        5 run upstream at once, 50 charged."""
        c = self.caller_of(0, conc=5)
        before = len(self.gw.upstream.requests())
        results = self.results(self.sdk(c, "m-paced", [5] * 50))
        self.assertEqual(sorted(r["status"] for r in results), ["ok"] * 50, results)
        self.assertTrue(any(r["waited_ms"] > 0 for r in results), "nobody waited")
        # Only this test's calls: another test's hanging call may be logged late.
        sent_as = MODELS["m-paced"][1]  # the model name the upstream sees
        records = [r for r in self.gw.upstream.requests()[before:]
                   if r["body"] and r["body"].get("model") == sent_as]
        self.assertEqual(len(records), 50)
        self.assertLessEqual(most_at_once(records), 5)
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=30))
        self.assertEqual(c.used("req"), 50)

    def test_waiters_reach_the_upstream_by_priority(self):
        """On a 1-slot limit held by a slow call, 8 SDK calls queued with priorities
        7,3,5,3,9,0,5,1 reach the upstream as 0,1,3,3,5,5,7,9, equals in arrival order."""
        c = self.caller_of(1, conc=1)
        holder = self.gw.raw_request(c, CHAT, chat("m-slow-plain"))  # holds the slot ~3 s
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 1, timeout_s=30))
        priorities = [7, 3, 5, 3, 9, 0, 5, 1]
        before = len(self.gw.upstream.requests())
        process = self.sdk(c, "m-paced", priorities)
        try:
            self.assertTrue(wait_until(lambda: self.gw.waiting() == len(priorities),
                                       timeout_s=60), "the calls did not all queue")
        finally:
            results = self.results(process)
            holder.close()
        self.assertEqual([r["status"] for r in results], ["ok"] * len(priorities), results)
        arrived = [int(r["body"]["messages"][0]["content"].split()[1])
                   for r in self.gw.upstream.requests()[before:]
                   if r["body"] and r["body"].get("model") and r["body"]["messages"]
                   [0]["content"].startswith("call ")]
        by_priority = sorted(range(len(priorities)), key=lambda i: (priorities[i], i))
        # Equal priorities keep arrival order at the server, which the SDK's
        # concurrent sends may not keep: compare priorities, then the pairs.
        self.assertEqual([priorities[i] for i in arrived], [priorities[i] for i in by_priority])

    def test_a_key_without_a_wait_never_waits(self):
        """max_wait_seconds 0: Prefer: wait=60 is ignored, the full slot answers 429 at once."""
        c = self.caller_of(WAIT_KEYS + 2, conc=1)
        holder = self.gw.raw_request(c, CHAT, chat("m-slow-plain"))
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 1, timeout_s=30))
        started = time.monotonic()
        status, headers, _ = self.gw.call(c, CHAT, chat("m-normal"), headers={"Prefer": "wait=60"})
        self.assertEqual(status, 429)
        self.assertLess(time.monotonic() - started, 30)  # never the 60 s
        self.assertNotIn("x-llmlimit-waited-ms", headers)
        holder.close()

    def test_the_key_caps_the_wait(self):
        """max_wait_seconds 1 and Prefer: wait=60: a 429 after about a second of waiting."""
        c = self.caller_of(WAIT_KEYS, conc=1)
        holder = self.gw.raw_request(c, CHAT, chat("m-hang-long"))
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 1, timeout_s=30))
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"),
                                             headers={"Prefer": "respond-async, wait=60"})
        self.assertEqual(status, 429, body)
        self.assertGreaterEqual(int(headers["x-llmlimit-waited-ms"]), 1000)
        self.assertLess(int(headers["x-llmlimit-waited-ms"]), 60000)
        self.assertEqual(self.gw.caller_total("waited_calls", c.name), 1)  # denied, but waited
        holder.close()

    def test_a_key_default_wait_holds_a_call_that_does_not_ask(self):
        """default_wait_seconds 30: a call with no Prefer waits for the slot a slow call
        holds and goes through once it is free; Prefer: wait=0 is answered 429 at once."""
        c = self.caller_of(WAIT_KEYS + 3, conc=1)
        holder = self.gw.raw_request(c, CHAT, chat("m-slow-plain"))  # holds the slot ~3 s
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 1, timeout_s=30))
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"))
        self.assertEqual(status, 200, body)
        waited_ms = int(headers["x-llmlimit-waited-ms"])
        self.assertGreater(waited_ms, 0)
        self.assertLess(waited_ms, 30000)
        # /metrics counts it for the caller: one call that waited, and how long.
        self.assertEqual(self.gw.caller_total("waited_calls", c.name), 1)
        self.assertEqual(self.gw.caller_total("waited_ms", c.name), waited_ms)
        holder.close()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=30))
        holder = self.gw.raw_request(c, CHAT, chat("m-hang-long"))
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 1, timeout_s=30))
        started = time.monotonic()
        status, headers, body = self.gw.call(c, CHAT, chat("m-normal"),
                                             headers={"Prefer": "wait=0"})
        self.assertEqual(status, 429, body)
        self.assertLess(time.monotonic() - started, 15)  # never the 30 s
        self.assertNotIn("x-llmlimit-waited-ms", headers)
        self.assertEqual(self.gw.caller_total("waited_calls", c.name), 1)  # not this one
        holder.close()

    def test_a_bad_priority_is_400(self):
        """x-llmlimit-priority not a digit 0..9: 400 naming the header, nothing reserved."""
        c = self.caller_of(2)
        for value in ("10", "-1", "high", ""):
            status, _, body = self.gw.call(c, CHAT, chat("m-normal"),
                                           headers={"x-llmlimit-priority": value})
            self.assertEqual(status, 400, (value, body))
            self.assertIn("x-llmlimit-priority", body["error"]["message"])
        self.assertEqual(c.used("req"), 0)

    def test_a_client_that_leaves_while_waiting_is_not_forwarded(self):
        """A waiting call whose client closes leaves the queue; it is never forwarded and
        holds nothing."""
        c = self.caller_of(2, conc=1)
        before = len(self.gw.upstream.requests())
        holder = self.gw.raw_request(c, CHAT, chat("m-hang-long"))
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 1, timeout_s=30))
        gone = self.gw.raw_request(c, CHAT, chat("m-normal"), headers={"Prefer": "wait=60"})
        self.assertTrue(wait_until(lambda: self.gw.waiting() == 1, timeout_s=30))
        gone.close()
        self.assertTrue(wait_until(lambda: self.gw.waiting() == 0, timeout_s=30))
        holder.close()
        self.assertTrue(wait_until(lambda: c.reserved("conc") == 0, timeout_s=30))
        sent_as = MODELS["m-normal"][1]  # the model name the upstream sees
        forwarded = [r for r in self.gw.upstream.requests()[before:]
                     if r["body"] and r["body"].get("model") == sent_as]
        self.assertEqual(forwarded, [])  # never forwarded (the holder's own may log late)


HOLD_MS = 2000
# Past the hold, what a busy machine may add before a small call goes through; far
# below the attacker's 60 s wait, which bounded it before.
SLACK_S = 10
ATTACKER, WAITING_VICTIM, PLAIN_VICTIM = 0, 1, 2


def shared_key_fields(index):
    """Three keys of one team, so that they share its limits: an attacker that may
    wait 60 s at priority 0 (the default floor), a victim that may wait, one that
    may not."""
    fields = {"team": "shared"}
    if index == ATTACKER:
        fields.update(max_wait_seconds=60)
    if index == WAITING_VICTIM:
        fields.update(max_wait_seconds=60)
    return fields


class GatewayHoldBack(unittest.TestCase):
    """--wait-hold-ms 2000; the keys' team shares a concurrency limit on tokens,
    pool:{team}, as large as the attacker's big call estimates. The attacker holds a
    few tokens with a hanging call and waits for the whole pool: it can never fit,
    yet the victims' small calls go through within the hold (plus slack), and it
    keeps its place: once the pool is free it is forwarded."""

    @classmethod
    def setUpClass(cls):
        skip_unless_backend()
        cls.gw = Gateway(keys=3, key_fields=shared_key_fields,
                         templates=TEMPLATES + [("pool", "pool:{team}", "tokens")],
                         args=["--wait-hold-ms", str(HOLD_MS)])
        cls.gw.server.start()
        cls.keys = list(cls.gw.free_keys)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def caller_of(self, index):
        from gw_harness import Caller
        secret, name, _ = self.keys[index]
        return Caller(self.gw, secret, name, "shared").define()

    def test_an_attacker_cannot_hold_back_small_calls_beyond_the_hold(self):
        attacker, victim, plain = (self.caller_of(i)
                                   for i in (ATTACKER, WAITING_VICTIM, PLAIN_VICTIM))
        big = chat("m-normal", max_tokens=4096)
        capacity = sum(estimate("chat", big))
        status, _, body = self.gw.server.put_limit({
            "key": "pool:shared", "kind": "concurrency", "capacity": capacity,
            "timeout_seconds": 300})
        self.assertEqual(status, 200, body)
        pool = lambda: self.gw.server.usage("pool:shared")[2]["reserved"]  # noqa: E731
        holder = self.gw.raw_request(attacker, CHAT, chat("m-hang-long", max_tokens=1))
        waiting_call = None
        try:
            self.assertTrue(wait_until(lambda: pool() > 0, timeout_s=30))
            waiting_call = self.gw.raw_request(attacker, CHAT, big, headers={
                "Prefer": "wait=60", "x-llmlimit-priority": "0"})
            self.assertTrue(wait_until(lambda: self.gw.waiting() == 1, timeout_s=30))
            small = chat("m-normal", max_tokens=1)
            # A victim that may wait: through, having waited the hold at most.
            status, headers, body = self.gw.call(victim, CHAT, small, timeout_s=90,
                                                 headers={"Prefer": "wait=60",
                                                          "x-llmlimit-priority": "9"})
            self.assertEqual(status, 200, body)
            self.assertLess(int(headers["x-llmlimit-waited-ms"]), HOLD_MS + SLACK_S * 1000)
            # One that may not wait: 429 at most while the hold lasts.
            started = time.monotonic()
            while True:
                status, headers, body = self.gw.call(plain, CHAT, small)
                if status == 200:
                    break
                self.assertEqual(status, 429, body)
                self.assertLess(time.monotonic() - started, HOLD_MS / 1000 + SLACK_S,
                                "the plain calls were held back past the bound")
                time.sleep(0.1)
            self.assertEqual(self.gw.waiting(), 1)  # the attacker waits on
            holder.close()  # its own hold goes: the whole pool is free, and its
            waiting_call.settimeout(60)
            answer = waiting_call.recv(65536)  # call is forwarded and answered
            self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:200])
        finally:
            holder.close()
            if waiting_call is not None:
                waiting_call.close()
        self.assertTrue(wait_until(lambda: pool() == 0, timeout_s=30))


if __name__ == "__main__":
    unittest.main()
