"""Self-test of check.py: hand-made histories, some consistent with the model
and some not (over capacity, double reserve, lost reserve, spurious denial,
unwarned commit after expiry, wrong finalize answers, budgets across
midnight). The checker must pass
the good ones and name the violation in each bad one."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

MS = 1000 * 1000  # ns per ms: histories below are written in milliseconds

CONC = {"key": "c", "kind": "concurrency", "capacity": 1, "timeout_seconds": 10}
ROLL = {"key": "r", "kind": "rolling", "capacity": 10, "window_seconds": 60}
BUDGET = {"key": "b", "kind": "budget", "capacity": 100, "period": "month",
          "timeout_seconds": 5}


class Builder:
    """Builds a history; wall clock == monotonic clock, times in ms."""

    def __init__(self, *limits):
        self.header = {"type": "header", "limits": list(limits), "wall_minus_mono_ns": [0],
                       "tolerance_ms": 1}
        self.ops = []
        self.durations = {d["key"]: check.Limit(d).duration_ns // MS for d in limits}

    def op(self, kind, start, end, status, body, **fields):
        op = {"type": "op", "op": kind, "start_ns": start * MS, "end_ns": end * MS,
              "status": status, "body": body}
        op.update(fields)
        self.ops.append(op)
        return self

    def allow(self, lease, start, end, reserved_at=None, **amounts):
        at = start if reserved_at is None else reserved_at
        body = {"allowed": True, "retry_after_ms": 0, "reserved_at_unix_ms": at,
                "expires_at_unix_ms": at + min(self.durations[k] for k in amounts),
                "error": "", "denied_keys": []}
        return self.op("reserve", start, end, 200, body, lease_id=lease,
                       requirements=[{"key": k, "amount": v} for k, v in amounts.items()])

    def deny(self, lease, start, end, **amounts):
        body = {"allowed": False, "retry_after_ms": 100, "reserved_at_unix_ms": 0,
                "expires_at_unix_ms": 0, "error": "", "denied_keys": list(amounts)}
        return self.op("reserve", start, end, 200, body, lease_id=lease,
                       requirements=[{"key": k, "amount": v} for k, v in amounts.items()])

    def complete(self, lease, start, end, status=200, warnings=(), **actuals):
        body = {"ok": status == 200, "reconciled": True, "warnings": list(warnings)}
        return self.op("complete", start, end, status, body, lease_id=lease,
                       actuals=[{"key": k, "actual_amount": v} for k, v in actuals.items()])

    def release(self, lease, start, end, status=200):
        return self.op("release", start, end, status, {"ok": status == 200}, lease_id=lease)

    def usage(self, key, start, end, reserved, used=0, debt=0):
        capacity = next(d["capacity"] for d in self.header["limits"] if d["key"] == key)
        available = capacity - reserved - used - (debt if key == "b" else 0)
        body = {"key": key, "reserved": reserved, "used": used, "debt": debt,
                "available": available}
        return self.op("usage", start, end, 200, body, key=key)

    def violations(self):
        return check.check(self.header, self.ops).by_kind


class GoodHistories(unittest.TestCase):
    def test_sequential_concurrency_passes(self):
        """Two leases on a 1-slot limit, one after the other: no violation."""
        h = Builder(CONC).allow("a", 0, 1, c=1).usage("c", 2, 3, reserved=1)
        h.complete("a", 4, 5).allow("b", 6, 7, c=1).release("b", 8, 9).usage("c", 10, 11, 0)
        self.assertEqual(dict(h.violations()), {})

    def test_overlapping_requests_may_order_either_way(self):
        """A reserve concurrent with the release that made room is fine."""
        h = Builder(CONC).allow("a", 0, 1, c=1).release("a", 10, 20).allow("b", 15, 25, c=1)
        h.usage("c", 12, 13, reserved=1)
        self.assertEqual(dict(h.violations()), {})

    def test_budget_overrun_and_justified_denial_pass(self):
        """Complete over the cap becomes debt; the next reserve is rightly denied."""
        h = Builder(BUDGET).allow("a", 0, 1, b=50).complete("a", 2, 3, b=150)
        h.usage("b", 4, 5, reserved=0, used=100, debt=50).deny("x", 6, 7, b=1)
        self.assertEqual(dict(h.violations()), {})

    def test_retry_with_same_answer_passes(self):
        """An identical retry of an allowed reserve is not a second hold."""
        h = Builder(ROLL).allow("a", 0, 1, r=6).allow("a", 2, 3, reserved_at=0, r=6)
        h.usage("r", 4, 5, reserved=6).complete("a", 6, 7, r=6).usage("r", 8, 9, 0, used=6)
        self.assertEqual(dict(h.violations()), {})


DAY = {"key": "d", "kind": "budget", "capacity": 100, "period": "day", "timeout_seconds": 300}
MIDNIGHT = check.DAY_MS  # 1970-01-02T00:00Z, in the histories' milliseconds


class PeriodRollover(unittest.TestCase):
    """Budgets roll over at UTC midnight: what a day spent does not count in the next."""

    def spent_day(self):
        """A day budget filled just before midnight, and a justified denial."""
        h = Builder(DAY).allow("a", MIDNIGHT - 40, MIDNIGHT - 39, d=100)
        return h.complete("a", MIDNIGHT - 30, MIDNIGHT - 29, d=100).deny("x", MIDNIGHT - 20,
                                                                           MIDNIGHT - 19, d=1)

    def test_a_new_day_starts_from_zero(self):
        """After midnight the whole capacity is there again; usage shows the new day only."""
        h = self.spent_day().allow("b", MIDNIGHT + 10, MIDNIGHT + 11, d=100)
        h.usage("d", MIDNIGHT + 20, MIDNIGHT + 21, reserved=100)
        self.assertEqual(dict(h.violations()), {})

    def test_commit_after_midnight_is_charged_to_its_own_day(self):
        """A lease reserved before midnight and completed after it does not count in the new day."""
        h = Builder(DAY).allow("a", MIDNIGHT - 40, MIDNIGHT - 39, d=100)
        h.complete("a", MIDNIGHT + 5, MIDNIGHT + 6, d=100).allow("b", MIDNIGHT + 10,
                                                                  MIDNIGHT + 11, d=100)
        h.usage("d", MIDNIGHT + 20, MIDNIGHT + 21, reserved=100)
        self.assertEqual(dict(h.violations()), {})

    def test_over_capacity_within_the_new_day_is_flagged(self):
        """Two allowed reserves past the capacity after midnight are still a violation."""
        h = self.spent_day().allow("b", MIDNIGHT + 10, MIDNIGHT + 11, d=100)
        h.allow("c", MIDNIGHT + 12, MIDNIGHT + 13, d=50)
        self.assertIn("admission", h.violations())

    def test_old_spend_in_new_day_usage_is_flagged(self):
        """Usage after midnight that still shows the old day's spend is flagged."""
        h = self.spent_day().usage("d", MIDNIGHT + 20, MIDNIGHT + 21, reserved=0, used=100)
        self.assertIn("usage", h.violations())

    def test_server_clock_ahead_of_the_wall_clock(self):
        """With clock_offset_ms the server's timestamps are read on its own clock."""
        offset = check.DAY_MS  # a day ahead: the same midnight, a day later
        h = Builder(DAY)
        h.header["clock_offset_ms"] = offset
        h.allow("a", MIDNIGHT - 40, MIDNIGHT - 39, reserved_at=MIDNIGHT - 40 + offset, d=100)
        h.allow("b", MIDNIGHT + 10, MIDNIGHT + 11, reserved_at=MIDNIGHT + 10 + offset, d=100)
        self.assertEqual(dict(h.violations()), {})
        h.header["clock_offset_ms"] = offset - 1000  # read a second wrong
        self.assertIn("timestamps", h.violations())


class BadHistories(unittest.TestCase):
    def test_over_capacity_is_flagged(self):
        """Two certain holds of a 1-slot limit at once: capacity and admission."""
        h = Builder(CONC).allow("a", 0, 1, c=1).allow("b", 2, 3, c=1).complete("a", 10, 11)
        found = h.violations()
        self.assertIn("capacity", found)
        self.assertIn("admission", found)

    def test_double_reserve_on_retry_is_flagged(self):
        """A retry with the same lease_id that reserves again: idempotency and usage."""
        h = Builder(ROLL).allow("a", 0, 1, r=6).allow("a", 2, 3, reserved_at=2, r=6)
        h.usage("r", 4, 5, reserved=12)
        found = h.violations()
        self.assertIn("idempotency", found)
        self.assertIn("usage", found)
        self.assertIn("capacity", found)  # 12 > 10 in the server's own usage

    def test_lost_reserve_is_flagged(self):
        """An allowed reserve missing from usage is flagged."""
        h = Builder(ROLL).allow("a", 0, 1, r=5).usage("r", 2, 3, reserved=0)
        self.assertIn("usage", h.violations())

    def test_spurious_denial_is_flagged(self):
        """A capacity denial on an empty limit is flagged."""
        self.assertIn("spurious_denial", Builder(ROLL).deny("a", 0, 1, r=5).violations())

    def test_expired_hold_still_counted_is_flagged(self):
        """Usage that still counts a hold well after it expired is flagged."""
        h = Builder(CONC).allow("a", 0, 1, c=1).usage("c", 10500, 10501, reserved=1)
        self.assertIn("usage", h.violations())

    def test_unwarned_commit_after_expiry_is_flagged(self):
        """A budget commit 6 s after a 5 s hold without commit_after_expiry."""
        h = Builder(BUDGET).allow("a", 0, 1, b=10).complete("a", 6000, 6001, b=10)
        self.assertIn("warning", h.violations())
        h = Builder(BUDGET).allow("a", 0, 1, b=10)
        h.complete("a", 6000, 6001, warnings=["commit_after_expiry:b"], b=10)
        self.assertNotIn("warning", h.violations())

    def test_debt_ignored_by_admission_is_flagged(self):
        """A reserve allowed after the budget was overrun is flagged."""
        h = Builder(BUDGET).allow("a", 0, 1, b=50).complete("a", 2, 3, b=150)
        h.allow("x", 6, 7, b=1)
        self.assertIn("admission", h.violations())

    def test_wrong_finalize_answers_are_flagged(self):
        """Release after complete must be 409; a 409 without cause is flagged too."""
        h = Builder(CONC).allow("a", 0, 1, c=1).complete("a", 2, 3).release("a", 4, 5)
        self.assertIn("finalize", h.violations())
        h = Builder(CONC).allow("a", 0, 1, c=1).release("a", 2, 3, status=409)
        self.assertIn("finalize", h.violations())

    def test_server_error_is_flagged(self):
        """A 500 answer is reported even though the model treats it as unknown."""
        h = Builder(CONC).op("reserve", 0, 1, 500, {"error": "x"}, lease_id="a",
                             requirements=[{"key": "c", "amount": 1}])
        self.assertIn("status", h.violations())

    def test_hold_due_in_an_outage_may_count_until_its_end(self):
        """A hold that fell due while the backend was unavailable may still
        count just after the outage (a cluster expires nothing in a view
        change); without the outage, or long after it, it is flagged."""
        def history(outages, read_at):
            h = Builder(CONC)
            h.header["outages"] = [[a * MS, b * MS] for a, b in outages]
            h.allow("a", 0, 1, c=1).usage("c", read_at, read_at + 1, reserved=1)
            return h.violations()
        self.assertIn("usage", history([], 10500))
        self.assertEqual(dict(history([(5000, 11000)], 10500)), {})
        self.assertIn("usage", history([(5000, 11000)], 12000))
        self.assertIn("usage", history([(20000, 30000)], 10500))

    def test_unavailable_is_flagged_unless_the_run_allows_it(self):
        """A 503 backend_error is a status violation, except in a fault run
        (header unavailable_ok), where it stays an unknown outcome: a reserve
        retried to allowed and a complete retried to success still count once,
        and a 503 of another kind is still flagged."""
        def history(unavailable_ok, error="backend_error"):
            h = Builder(BUDGET)
            h.header["unavailable_ok"] = unavailable_ok
            h.op("reserve", 0, 1, 503, {"error": error}, lease_id="a",
                 requirements=[{"key": "b", "amount": 40}])
            h.allow("a", 2, 3, reserved_at=1, b=40)
            h.op("complete", 4, 5, 503, {"error": error}, lease_id="a", actuals=[])
            h.complete("a", 6, 7, b=30)
            h.usage("b", 8, 9, reserved=0, used=30)
            return h.violations()
        self.assertIn("status", history(False))
        self.assertEqual(dict(history(True)), {})
        self.assertIn("status", history(True, error="internal"))
        # the retried complete counted twice would show in usage
        h = Builder(BUDGET)
        h.header["unavailable_ok"] = True
        h.allow("a", 0, 1, b=40)
        h.op("complete", 2, 3, 503, {"error": "backend_error"}, lease_id="a", actuals=[])
        h.complete("a", 4, 5, b=30)
        h.usage("b", 6, 7, reserved=0, used=60)
        self.assertIn("usage", h.violations())


if __name__ == "__main__":
    unittest.main(verbosity=2)
