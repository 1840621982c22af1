"""Races on money budgets, over HTTP against the real llmlimitd: concurrent
reserves that must admit an exact count, a release that unblocks waiting
callers, expiry, all-or-nothing across two budgets, the clock stepping back,
and a commit after expiry (docs/semantics.md "Budgets"). Amounts are in
usd_micros ($1.00 = 1000000). The backend comes from --backend (default
memory), so the sqlite backend runs the very same file.

Time travel uses the server's --test-clock offset (POST /v1/admin/clock), so
expiry tests do not sleep for the 5 s minimum budget timeout. That clock
still runs with real time, so holds that must stay held for a test last
300 s (the longest timeout), not 5 s a busy machine could outrun."""

import threading
import unittest
import uuid

import harness
from harness import Server, backend_from_argv, binary_from_argv

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

USD = 1000000  # usd_micros per dollar


def budget(key, capacity, timeout_seconds=300):
    return {"key": key, "kind": "budget", "capacity": capacity, "period": "month",
            "timeout_seconds": timeout_seconds, "unit": "usd_micros"}


def lease():
    return str(uuid.uuid4())


def concurrent(count, fn):
    """Runs fn(i) on count threads released together; returns the results."""
    results = [None] * count
    barrier = threading.Barrier(count)

    def run(i):
        barrier.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


class BudgetRaces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY, backend=BACKEND, args=["--test-clock"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        assert code == 0, "llmlimitd exit code %r" % code

    def put(self, definition):
        status, _, body = self.server.put_limit(definition)
        self.assertEqual(status, 200, body)

    def advance_clock(self, ms):
        status, _, body = self.server.request("POST", "/v1/admin/clock", {"advance_ms": ms})
        self.assertEqual(status, 200, body)

    def usage(self, key):
        status, _, body = self.server.usage(key)
        self.assertEqual(status, 200, body)
        return body

    def reserve_allowed(self, key, amount, lease_id=None):
        status, _, body = self.server.reserve(lease_id or lease(), {key: amount})
        self.assertEqual(status, 200, body)
        return body["allowed"], body

    def test_1_hundred_concurrent_reserves_exactly_twenty_fit(self):
        """100 concurrent reserves of $0.05 against $1.00: exactly 20 allowed, sum exact."""
        key = "races:t1:usd:month"
        self.put(budget(key, 1 * USD))
        results = concurrent(100, lambda i: self.reserve_allowed(key, 50000))
        allowed = [r for r in results if r[0]]
        denied = [r for r in results if not r[0]]
        self.assertEqual(len(allowed), 20)
        self.assertEqual(len(denied), 80)
        for _, body in denied:
            self.assertEqual(body["error"], "")
            self.assertEqual(body["denied_keys"], [key])
            self.assertGreater(body["retry_after_ms"], 0)
        u = self.usage(key)
        self.assertEqual(u["reserved"], 1 * USD)
        self.assertEqual(u["used"], 0)
        self.assertEqual(u["available"], 0)

    def test_2_block_release_then_allow_ten_of_fifty(self):
        """A $0.50 hold blocks 50 x $0.55; once released, exactly 10 of 50 x $0.10 fit.

        The blocked reserves ask $0.55 so that none fits beside the $0.50
        hold; after the release the whole dollar is free, so exactly ten
        $0.10 reserves fit."""
        key = "races:t2:usd:month"
        self.put(budget(key, 1 * USD))
        first = lease()
        ok, _ = self.reserve_allowed(key, 500000, first)
        self.assertTrue(ok)
        results = concurrent(50, lambda i: self.reserve_allowed(key, 550000))
        self.assertEqual(sum(1 for ok, _ in results if ok), 0)
        status, _, body = self.server.release(first)
        self.assertEqual(status, 200, body)
        results = concurrent(50, lambda i: self.reserve_allowed(key, 100000))
        self.assertEqual(sum(1 for ok, _ in results if ok), 10)
        self.assertEqual(self.usage(key)["reserved"], 1 * USD)

    def test_3_expiry_frees_budget_for_next_caller(self):
        """An uncommitted reservation stops counting once its timeout passes."""
        key = "races:t3:usd:month"
        self.put(budget(key, 100000, timeout_seconds=5))
        ok, _ = self.reserve_allowed(key, 100000)
        self.assertTrue(ok)
        ok, _ = self.reserve_allowed(key, 50000)
        self.assertFalse(ok)
        self.advance_clock(5001)
        ok, body = self.reserve_allowed(key, 50000)
        self.assertTrue(ok, body)
        self.assertEqual(self.usage(key)["reserved"], 50000)

    def test_4_no_partial_reservation(self):
        """A reserve whose second budget does not fit holds nothing in the first."""
        a, b = "races:t4a:usd:month", "races:t4b:usd:month"
        self.put(budget(a, 1 * USD))
        self.put(budget(b, 10000))
        status, _, body = self.server.reserve(lease(), [{"key": a, "amount": 50000},
                                                        {"key": b, "amount": 20000}])
        self.assertEqual(status, 200, body)
        self.assertFalse(body["allowed"])
        self.assertEqual(body["denied_keys"], [b])
        self.assertEqual(self.usage(a)["reserved"], 0)
        self.assertEqual(self.usage(b)["reserved"], 0)

    def test_5_clock_skew_backward(self):
        """A 30 s backward jump neither expires a live hold nor revives an expired one."""
        key = "races:t5:usd:month"
        self.put(budget(key, 500000, timeout_seconds=60))
        live = lease()
        ok, _ = self.reserve_allowed(key, 50000, live)
        self.assertTrue(ok)
        self.advance_clock(-30000)
        self.assertEqual(self.usage(key)["reserved"], 50000)
        status, _, body = self.server.complete(live, {key: 50000})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["reconciled"])
        self.assertEqual(body["warnings"], [])
        self.assertEqual(self.usage(key)["used"], 50000)
        # an expired hold stays expired after the clock goes back
        gone = lease()
        ok, _ = self.reserve_allowed(key, 100000, gone)
        self.assertTrue(ok)
        self.advance_clock(61000)
        self.assertEqual(self.usage(key)["reserved"], 0)
        self.advance_clock(-30000)
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_6_commit_after_expiry_is_charged(self):
        """A commit that lands after expiry is accepted, warned and counted in later gates."""
        key = "races:t6:usd:month"
        self.put(budget(key, 1 * USD, timeout_seconds=5))
        late = lease()
        ok, _ = self.reserve_allowed(key, 300000, late)
        self.assertTrue(ok)
        self.advance_clock(6000)
        status, _, body = self.server.complete(late, {key: 300000})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["ok"])
        self.assertIn("commit_after_expiry:" + key, body["warnings"])
        u = self.usage(key)
        self.assertEqual(u["used"], 300000)
        self.assertEqual(u["available"], 700000)
        ok, _ = self.reserve_allowed(key, 700000)
        self.assertTrue(ok)
        ok, _ = self.reserve_allowed(key, 10000)
        self.assertFalse(ok)


if __name__ == "__main__":
    harness.main()
