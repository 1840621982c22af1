"""Crash safety of the sqlite backend through the real llmlimitd.

Each round restarts the server on the same data directory, runs concurrent
reserve+complete load, and kill -9s it at a random moment. After every
restart it checks, against what the clients saw:
  - every acknowledged commit is present (its lease completes as a no-op and
    its audit events carry the acknowledged actual amount);
  - the budget's spend is at least every acknowledged commit and at most that
    plus the commits that were in flight when the server died;
  - no reservation is lost or doubled: an acknowledged reserve answers its
    retry with the same timestamps, and every lease has all of its
    reservations or none (no partial transaction survives);
  - the registry is intact (every acknowledged limit change is there).
It also checks that a second llmlimitd on the same data directory is refused.
"""

import argparse
import http.client
import os
import random
import sys
import threading
import time
import traceback
import unittest
import urllib.parse
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server, ServerError, binary_from_argv  # noqa: E402

BINARY = binary_from_argv()
parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--rounds", type=int, default=20)
parser.add_argument("--threads", type=int, default=8)
ARGS, rest = parser.parse_known_args()
sys.argv = sys.argv[:1] + rest

USD = "crash:usd:month"
TPM = "crash:tpm"
SLOTS = "crash:slots"
KEYS = (USD, TPM, SLOTS)
RESERVE_USD = 100


class Ledger:
    """What the clients were told, across every round."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reserved = {}          # lease -> (reserved_at, expires_at), acknowledged allowed
        self.reserve_unknown = set()  # reserve sent, no answer or 503
        self.committed = {}         # lease -> actual usd, acknowledged
        self.commit_unknown = {}    # lease -> actual usd, complete sent, no answer or 503
        self.limits = {}            # key -> capacity, acknowledged puts
        self.answers = 0            # answers received (any status)
        self.errors = {}            # status -> count of answers other than 200
        self.odd = []               # 200 answers the load cannot produce (a denial, unreconciled)
        self.crashes = []           # a worker's own exception: a bug of the test, never ignored

    def answered(self, status, body):
        """Counts an answer; True when it is a 200."""
        with self.lock:
            self.answers += 1
            if status != 200:
                self.errors[status] = self.errors.get(status, 0) + 1
        return status == 200

    def error_count(self):
        with self.lock:
            return sum(self.errors.values())


def requirements():
    return [{"key": USD, "amount": RESERVE_USD}, {"key": TPM, "amount": 10},
            {"key": SLOTS, "amount": 1}]


def guarded_worker(server, ledger, stop, seed):
    try:
        worker(server, ledger, stop, seed)
    except Exception:  # noqa: BLE001 - recorded, and the test fails on it
        with ledger.lock:
            ledger.crashes.append(traceback.format_exc())


def worker(server, ledger, stop, seed):
    """Reserves and completes until the server dies under it. A request
    without an answer (the kill) or answered 503 has an unknown outcome; every
    other status is counted, so a run where most answers are errors fails."""
    rng = random.Random(seed)
    while not stop.is_set():
        lease = str(uuid.uuid4())
        try:
            status, _, body = server.reserve(lease, requirements(), caller="crash")
        except (OSError, http.client.HTTPException):
            with ledger.lock:
                ledger.reserve_unknown.add(lease)
            return
        if not ledger.answered(status, body):
            if status == 503:
                with ledger.lock:
                    ledger.reserve_unknown.add(lease)
            continue
        if not body.get("allowed"):
            with ledger.lock:
                ledger.odd.append((lease, body))  # capacities are far above the load
            continue
        with ledger.lock:
            ledger.reserved[lease] = (body["reserved_at_unix_ms"], body["expires_at_unix_ms"])
        actual = rng.randint(1, RESERVE_USD)
        try:
            status, _, body = server.complete(lease, {USD: actual, TPM: rng.randint(0, 10)})
        except (OSError, http.client.HTTPException):
            with ledger.lock:
                ledger.commit_unknown[lease] = actual
            return
        answered = ledger.answered(status, body)
        with ledger.lock:
            if answered and body.get("reconciled"):
                ledger.committed[lease] = actual
            else:
                ledger.commit_unknown[lease] = actual
                if answered:
                    ledger.odd.append((lease, body))


def events_of(server, lease):
    status, _, body = server.request(
        "GET", "/v1/events?lease_id=%s&limit=100" % urllib.parse.quote(lease))
    assert status == 200, body
    return body["events"]


class CrashSafety(unittest.TestCase):
    def test_kill_9_under_load_loses_nothing_acknowledged(self):
        ledger = Ledger()
        server = Server(BINARY, backend="sqlite")
        try:
            server.start()
            self.put(server, ledger, {"key": USD, "kind": "budget", "capacity": 10 ** 15,
                                      "period": "month", "timeout_seconds": 300})
            self.put(server, ledger, {"key": TPM, "kind": "rolling", "capacity": 10 ** 15,
                                      "window_seconds": 3600})
            self.put(server, ledger, {"key": SLOTS, "kind": "concurrency",
                                      "capacity": 10 ** 9, "timeout_seconds": 3600})
            rng = random.Random(1234)
            for round_number in range(ARGS.rounds):
                self.put(server, ledger, {"key": "crash:round:%d" % round_number,
                                          "kind": "rolling", "capacity": round_number + 1,
                                          "window_seconds": 60})
                before = len(ledger.committed)
                self.load_then_kill(server, ledger, rng, round_number)
                server.start()
                self.check(server, ledger)
                print("round %d: %d commits acknowledged, %d in flight at the kill" % (
                    round_number, len(ledger.committed) - before, len(ledger.commit_unknown)),
                    flush=True)
            self.assertGreaterEqual(len(ledger.committed), ARGS.rounds)
            self.assert_mostly_answered(ledger)
        finally:
            server.cleanup()

    def assert_mostly_answered(self, ledger):
        """Only a 503 may come back besides 200, and errors are never most answers."""
        print("answers: %d, errors by status: %s" % (ledger.answers, ledger.errors), flush=True)
        self.assertEqual(ledger.crashes[:1], [], "a worker failed")
        self.assertEqual(ledger.odd[:5], [], "answers the load cannot produce")
        self.assertEqual(set(ledger.errors) - {503}, set(), ledger.errors)
        self.assertLessEqual(2 * ledger.error_count(), ledger.answers,
                             "most answers were errors: %s of %d" % (ledger.errors,
                                                                    ledger.answers))

    def put(self, server, ledger, definition):
        status, _, body = server.put_limit(definition)
        self.assertEqual(status, 200, body)
        ledger.limits[definition["key"]] = definition["capacity"]

    def load_then_kill(self, server, ledger, rng, round_number):
        stop = threading.Event()
        threads = [threading.Thread(target=guarded_worker,
                                    args=(server, ledger, stop, round_number * 100 + i))
                   for i in range(ARGS.threads)]
        committed = len(ledger.committed)
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.2, 1.2))
        # Not before the round has had a commit acknowledged, however slow the disk.
        harness.wait_until(lambda: len(ledger.committed) > committed or ledger.crashes,
                           timeout_s=60, interval_s=0.01)
        server.kill()
        stop.set()
        for t in threads:
            t.join(60)

    def check(self, server, ledger):
        # Registry: every acknowledged limit, as acknowledged.
        status, _, body = server.request("GET", "/v1/admin/limits")
        self.assertEqual(status, 200, body)
        found = {s["definition"]["key"]: s["definition"]["capacity"] for s in body["limits"]}
        for key, capacity in ledger.limits.items():
            self.assertEqual(found.get(key), capacity, key)
        # Spend: acknowledged <= used <= acknowledged + in flight.
        status, _, usage = server.usage(USD)
        self.assertEqual(status, 200, usage)
        acknowledged = sum(ledger.committed.values())
        in_flight = sum(ledger.commit_unknown.values())
        self.assertGreaterEqual(usage["used"], acknowledged)
        self.assertLessEqual(usage["used"], acknowledged + in_flight)
        # Holds: no lease holds more than once, none acknowledged is lost.
        live_acknowledged = len([l for l in ledger.reserved
                                 if l not in ledger.committed and l not in ledger.commit_unknown])
        status, _, slots = server.usage(SLOTS)
        self.assertGreaterEqual(slots["reserved"], live_acknowledged)
        self.assertLessEqual(slots["reserved"], live_acknowledged + len(ledger.reserve_unknown)
                             + len(ledger.commit_unknown))
        # Every acknowledged commit is there with its amount (a sample of the
        # older ones plus everything of the last round keeps this quick).
        recent = list(ledger.committed.items())[-300:]
        older = list(ledger.committed.items())[:-300]
        sample = recent + random.sample(older, min(len(older), 100))
        for lease, actual in sample:
            events = events_of(server, lease)
            committed = [e for e in events if e["type"] == "committed" and e["key"] == USD]
            self.assertEqual(len(committed), 1, (lease, events))
            self.assertEqual(committed[0]["actual_amount"], actual)
            self.assertEqual(len([e for e in events if e["type"] == "reserved"]), 3)
        for lease, (reserved_at, _expires_at) in list(ledger.reserved.items())[-200:]:
            status, _, body = server.reserve(lease, requirements(), caller="crash")
            self.assertEqual(status, 200, body)
            self.assertTrue(body["allowed"], (lease, body))
            self.assertEqual(body["reserved_at_unix_ms"], reserved_at)
        # In-flight reserves: all three reservations of a lease, or none.
        for lease in list(ledger.reserve_unknown)[-100:]:
            reserved = [e for e in events_of(server, lease) if e["type"] == "reserved"]
            self.assertIn(len(reserved), (0, 3), lease)

    def test_second_server_on_the_same_data_dir_is_refused(self):
        first = Server(BINARY, backend="sqlite")
        try:
            first.start()
            second = Server(BINARY, backend="sqlite", data_dir=first.data_dir)
            with self.assertRaises(ServerError) as caught:
                second.start()
            self.assertIn("is in use by another llmlimitd (pid %d)" % first.process.pid,
                          str(caught.exception))
            second.cleanup()
            status, _, _ = first.request("GET", "/readyz")
            self.assertEqual(status, 200)
        finally:
            first.cleanup()


if __name__ == "__main__":
    harness.main()
