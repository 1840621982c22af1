"""Self-test of check.py: hand-made histories, some consistent with the model
and some not (over capacity, double reserve, lost reserve, spurious denial,
unwarned commit after expiry, wrong finalize answers, budgets across
midnight; waiting reserves answered late, denied early or admitted twice,
a queue full that was not, a client that left yet was admitted or left
behind, capacities that change). The checker must pass the good ones and
name the violation in each bad one."""

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

    def allow(self, lease, start, end, reserved_at=None, wait=None, **amounts):
        """wait: {"wait_ms", "priority", "waited_ms"} of a waiting reserve."""
        at = start if reserved_at is None else reserved_at
        body = {"allowed": True, "retry_after_ms": 0, "reserved_at_unix_ms": at,
                "expires_at_unix_ms": at + min(self.durations[k] for k in amounts),
                "error": "", "denied_keys": []}
        return self.reserve_op(lease, start, end, body, wait, amounts)

    def deny(self, lease, start, end, wait=None, denied=None, **amounts):
        body = {"allowed": False, "retry_after_ms": 100, "reserved_at_unix_ms": 0,
                "expires_at_unix_ms": 0, "error": "",
                "denied_keys": list(amounts) if denied is None else denied}
        return self.reserve_op(lease, start, end, body, wait, amounts)

    def fail(self, lease, start, end, error, **amounts):
        """A definitive error: error names its key."""
        body = {"allowed": False, "retry_after_ms": 0, "reserved_at_unix_ms": 0,
                "expires_at_unix_ms": 0, "error": error, "denied_keys": [error.split(":")[-1]]}
        return self.reserve_op(lease, start, end, body, None, amounts)

    def reserve_op(self, lease, start, end, body, wait, amounts, status=200, **fields):
        wait = dict(wait or {})
        if "waited_ms" in wait:
            body["waited_ms"] = wait.pop("waited_ms")
        fields.update(wait)
        return self.op("reserve", start, end, status, body, lease_id=lease,
                       requirements=[{"key": k, "amount": v} for k, v in amounts.items()],
                       **fields)

    def leave(self, lease, start, closed, wait_ms, **amounts):
        """A waiting reserve whose client closed its socket at closed: no answer."""
        return self.reserve_op(lease, start, closed, None, {"wait_ms": wait_ms}, amounts,
                               status=None, closed_ns=closed * MS)

    def put(self, key, start, end, capacity, status="active"):
        return self.op("put_limit", start, end, 200, {"ok": True, "status": status}, key=key,
                       capacity=capacity)

    def gauge(self, start, end, waiting):
        return self.op("metrics", start, end, 200, None, waiting=waiting)

    def complete(self, lease, start, end, status=200, warnings=(), **actuals):
        body = {"ok": status == 200, "reconciled": True, "warnings": list(warnings)}
        return self.op("complete", start, end, status, body, lease_id=lease,
                       actuals=[{"key": k, "actual_amount": v} for k, v in actuals.items()])

    def release(self, lease, start, end, status=200):
        return self.op("release", start, end, status, {"ok": status == 200}, lease_id=lease)

    def usage(self, key, start, end, reserved, used=0, debt=0, capacity=None, status="active"):
        if capacity is None:
            capacity = next(d["capacity"] for d in self.header["limits"] if d["key"] == key)
        available = capacity - reserved - used - (debt if key == "b" else 0)
        body = {"key": key, "reserved": reserved, "used": used, "debt": debt,
                "available": available, "capacity": capacity, "status": status}
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

    def test_a_rolling_keep_booked_late_may_outlive_the_window(self):
        """With keep_rounding_ms (tigerbeetle), what a rolling complete keeps
        may count past the window by the complete's time in flight plus the
        rounding; not past that, and not at all for a complete first tried
        after the window ended. Without it, the keep ends with the window."""
        roll = {"key": "r", "kind": "rolling", "capacity": 10, "window_seconds": 2}

        def history(rounding_ms, complete, read_at):
            h = Builder(roll)
            if rounding_ms is not None:
                h.header["keep_rounding_ms"] = rounding_ms
            h.allow("a", 0, 1, r=1).complete("a", *complete, r=1)
            return h.usage("r", read_at, read_at + 1, reserved=0, used=1).violations()
        # built at 500 with 1.5 s of the window left, landed at 2500: kept until 5000
        self.assertIn("usage", history(None, (500, 2500), 3000))
        self.assertEqual(dict(history(1000, (500, 2500), 3000)), {})
        self.assertEqual(dict(history(1000, (500, 2500), 4900)), {})
        self.assertIn("usage", history(1000, (500, 2500), 5100))
        # first tried after the window ended: nothing kept
        self.assertIn("usage", history(1000, (2100, 2200), 2500))

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


C2 = dict(CONC, capacity=2)
WAIT_TOLERANCE_MS = 20


def waiting_history(*limits, max_waiters=None):
    """A Builder whose waits may be answered 20 ms late."""
    h = Builder(*limits)
    h.header["wait_tolerance_ms"] = WAIT_TOLERANCE_MS
    if max_waiters is not None:
        h.header["max_waiters"] = max_waiters
    return h


def waits(wait_ms, waited_ms=None, priority=None):
    wait = {"wait_ms": wait_ms}
    if waited_ms is not None:
        wait["waited_ms"] = waited_ms
    if priority is not None:
        wait["priority"] = priority
    return wait


class Waiting(unittest.TestCase):
    """Waiting reserves: admitted at some instant of their interval, answered by
    their deadline, denied early only when nothing but time can make room."""

    def test_a_waiter_admitted_once_its_slot_frees_passes(self):
        """A waiter on a held slot, admitted after the release, waited_ms as seen."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1).release("a", 300, 301)
        h.allow("w", 10, 303, reserved_at=302, wait=waits(1000, 292), c=1)
        h.complete("w", 400, 401).usage("c", 500, 501, reserved=0)
        self.assertEqual(dict(h.violations()), {})

    def test_a_waiter_admitted_while_the_slot_stayed_held_is_flagged(self):
        """The slot is never released: admitting the waiter is over the capacity."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1)
        h.allow("w", 10, 303, reserved_at=302, wait=waits(1000, 292), c=1)
        found = h.violations()
        self.assertIn("admission", found)
        self.assertIn("capacity", found)

    def test_an_answer_after_the_deadline_is_flagged(self):
        """wait_ms 1000 answered 1100 ms later (tolerance 20 ms): deadline; 1010: fine."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1)
        h.deny("w", 10, 1020, wait=waits(1000, 1005), c=1)
        self.assertEqual(dict(h.violations()), {})
        h = waiting_history(CONC).allow("a", 0, 1, c=1)
        h.deny("w", 10, 1110, wait=waits(1000, 1095), c=1)
        self.assertIn("deadline", h.violations())

    def test_a_limit_put_may_hold_a_waiter_as_long_as_it_takes(self):
        """A put of 300 ms (limits.json fsynced on its HTTP worker) while the waiter
        was in flight: that much later is fine; more is not."""
        def history(late_ms):
            h = waiting_history(CONC).allow("a", 0, 1, c=1).put("c", 5, 305, 1)
            h.deny("w", 10, 1010 + late_ms, wait=waits(1000, 1000), c=1)
            return h.violations()
        self.assertEqual(dict(history(310)), {})
        self.assertIn("deadline", history(340))

    def test_an_early_denial_on_live_holds_is_flagged(self):
        """A slot held by a live reservation may be released any moment: a waiter
        denied at once is flagged."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1)
        h.deny("w", 10, 20, wait=waits(1000, 0), c=1)
        self.assertIn("early_denial", h.violations())

    def test_an_early_denial_on_a_spent_budget_passes(self):
        """A budget spent by a committed charge frees only next period: at once is right."""
        h = waiting_history(BUDGET).allow("a", 0, 1, b=100).complete("a", 2, 3, b=100)
        h.deny("w", 10, 20, wait=waits(1000, 0), b=1)
        self.assertEqual(dict(h.violations()), {})

    def test_a_replayed_denial_may_come_at_once(self):
        """A lease denied (and recorded) once is denied again at once, even when waiting."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1).deny("w", 5, 6, c=1)
        h.deny("w", 10, 12, wait=waits(1000, 0), c=1)
        self.assertEqual(dict(h.violations()), {})

    def test_a_denial_recorded_while_a_waiter_was_open_may_be_replayed_to_it(self):
        """A reserve of the same lease denied and recorded while the waiter was in flight
        (a plain one, or one answered as the queue was full) may be replayed to it at once."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1).deny("w", 12, 15, c=1)
        h.deny("w", 10, 20, wait=waits(1000, 0), c=1)
        self.assertEqual(dict(h.violations()), {})
        h = waiting_history(CONC).allow("a", 0, 1, c=1).deny("w", 12, 15, wait=waits(500, 0),
                                                               c=1)
        h.ops[-1]["queue_full"] = True  # answered as a plain reserve: recorded
        h.deny("w", 10, 20, wait=waits(1000, 0), c=1)
        self.assertEqual(dict(h.violations()), {})

    def test_a_denial_at_a_waits_deadline_may_be_replayed_to_a_later_retry(self):
        """A wait that reached its deadline ends with a recorded denial: a retry of the
        lease sent after that deadline, while the denial was on its way, is told it at
        once; one sent long before (it joined the wait) must wait on its own."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1)
        h.deny("w", 10, 47, wait=waits(35, 36), c=1)
        h.deny("w", 45, 48, wait=waits(695, 0), c=1)
        self.assertEqual(dict(h.violations()), {})
        h = waiting_history(CONC).allow("a", 0, 1, c=1)
        h.deny("w", 10, 1012, wait=waits(1000, 1001), c=1)
        h.deny("w", 100, 1013, wait=waits(5000, 912), c=1)
        self.assertIn("early_denial", h.violations())

    def test_waited_ms_is_checked(self):
        """waited_ms: in every waiting answer, in no plain one, never longer than
        the client waited."""
        h = waiting_history(CONC).allow("w", 0, 1, wait=waits(1000), c=1)
        self.assertIn("waited", h.violations())
        h = waiting_history(CONC).allow("w", 0, 1, wait={"waited_ms": 0}, c=1)
        self.assertIn("waited", h.violations())
        h = waiting_history(CONC).allow("w", 0, 100, reserved_at=99, wait=waits(1000, 500), c=1)
        self.assertIn("waited", h.violations())

    def test_a_lease_admitted_twice_is_flagged(self):
        """A waiting lease and a retry that joined it: admitted once, answered alike."""
        h = waiting_history(CONC).allow("w", 0, 50, reserved_at=40, wait=waits(1000, 40), c=1)
        h.allow("w", 10, 51, reserved_at=40, wait=waits(1000, 30), c=1)
        self.assertEqual(dict(h.violations()), {})
        h = waiting_history(ROLL).allow("w", 0, 50, reserved_at=40, wait=waits(1000, 40), r=6)
        h.allow("w", 10, 51, reserved_at=45, wait=waits(1000, 35), r=6)
        self.assertIn("idempotency", h.violations())

    def test_a_joined_retry_denied_at_its_own_deadline_passes(self):
        """A retry joins the wait with a shorter wait_ms: denied at its deadline, not
        recorded; the wait it joined is admitted later."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1).release("a", 700, 701)
        h.allow("w", 5, 800, reserved_at=702, wait=waits(1000, 697), c=1)
        h.deny("w", 10, 215, wait=waits(200, 204), c=1)
        self.assertEqual(dict(h.violations()), {})

    def test_a_full_queue_needs_max_waiters_waiting(self):
        """x-llmlimit-queue: full while max_waiters (1) others wait: fine; with nobody
        waiting, or on an allowed reserve: flagged."""
        def history(other_waiter, allowed=False):
            h = waiting_history(CONC, max_waiters=1).allow("a", 0, 1, c=1)
            h.release("a", 900, 901)
            if other_waiter:
                h.allow("x", 50, 903, reserved_at=902, wait=waits(1000, 850), c=1)
            if allowed:
                h.allow("y", 100, 101, wait=waits(1000, 0), c=1)
            else:
                h.deny("y", 100, 101, wait=waits(1000, 0), c=1)
            h.ops[-1]["queue_full"] = True
            return h.violations()
        self.assertEqual(dict(history(True)), {})
        self.assertIn("queue_full", history(False))
        self.assertIn("queue_full", history(True, allowed=True))


class Yielding(unittest.TestCase):
    """A reserve that does not wait does not overtake a waiter of the same or a
    better priority: it is denied although it fits, and the denial is not recorded."""

    def history(self, waiter_priority):
        h = waiting_history(ROLL).allow("a", 0, 1, r=6).release("a", 500, 501)
        h.allow("w", 10, 600, reserved_at=550, wait=waits(1000, 540, waiter_priority), r=5)
        h.deny("p", 100, 101, r=1).allow("p", 200, 201, r=1)
        return h.violations()

    def test_a_plain_reserve_denied_behind_a_waiter_passes(self):
        """A waiter of priority 3 queued: a plain reserve (priority 5) that fits is
        denied, and the same lease id is admitted later."""
        self.assertEqual(dict(self.history(3)), {})

    def test_a_denial_with_no_waiter_ahead_is_flagged(self):
        """The waiter has priority 7: nobody is ahead of the plain reserve, so its
        denial is spurious, and, recorded, may not turn into an admission."""
        found = self.history(7)
        self.assertIn("spurious_denial", found)
        self.assertIn("idempotency", found)


class CapacityChanges(unittest.TestCase):
    """Capacities over the run: a change is in force from some instant of its window."""

    def test_an_increase_lets_more_in(self):
        """1 slot held, the capacity put to 2, a second admitted after it: fine; the
        second admitted before the put: flagged."""
        h = waiting_history(CONC).allow("a", 0, 1, c=1).put("c", 10, 11, 2)
        h.allow("b", 20, 21, c=1).usage("c", 30, 31, reserved=2, capacity=2)
        self.assertEqual(dict(h.violations()), {})
        h = waiting_history(CONC).allow("a", 0, 1, c=1).allow("b", 5, 6, c=1)
        h.put("c", 10, 11, 2)
        found = h.violations()
        self.assertIn("admission", found)
        self.assertIn("capacity", found)

    def test_a_decrease_applied_at_once_binds(self):
        """2 slots, 1 held, cut to 1 (applied at once): a second admission is over it."""
        h = waiting_history(C2).allow("a", 0, 1, c=1).put("c", 10, 11, 1)
        h.allow("b", 20, 21, c=1)
        found = h.violations()
        self.assertIn("admission", found)
        self.assertIn("capacity", found)

    def test_a_pending_decrease(self):
        """2 slots held, cut to 1: decreasing (reserves answered limit_decreasing)
        until a read shows it applied; limit_decreasing after that is flagged, and so
        is an admission over the new capacity."""
        def history(late_error, late_admission):
            h = waiting_history(C2).allow("a", 0, 1, c=1).allow("b", 2, 3, c=1)
            h.put("c", 10, 11, 1, status="decreasing")
            h.fail("x", 20, 21, "limit_decreasing:c", c=1)
            h.usage("c", 30, 31, reserved=2, capacity=2, status="decreasing")
            h.release("b", 40, 41).usage("c", 50, 51, reserved=1, capacity=1)
            if late_error:
                h.fail("y", 60, 61, "limit_decreasing:c", c=1)
            if late_admission:
                h.allow("z", 70, 71, c=1)
            return h.violations()
        self.assertEqual(dict(history(False, False)), {})
        self.assertIn("error", history(True, False))
        self.assertIn("admission", history(False, True))

    def test_exceeds_capacity_needs_an_amount_over_it(self):
        """exceeds_capacity for 2 on a 1-slot limit is right; for 1 it is flagged."""
        h = waiting_history(CONC).fail("x", 0, 1, "exceeds_capacity:c", c=2)
        self.assertEqual(dict(h.violations()), {})
        h = waiting_history(CONC).fail("x", 0, 1, "exceeds_capacity:c", c=1)
        self.assertIn("error", h.violations())

    def test_usage_with_a_capacity_not_in_force_is_flagged(self):
        """A usage read showing a capacity the limit never had then."""
        h = waiting_history(CONC).usage("c", 0, 1, reserved=0, capacity=5)
        self.assertIn("usage", h.violations())


class LeavingMidWait(unittest.TestCase):
    """A client that closes its socket mid-wait leaves the queue at once (within the
    wait tolerance), and nothing is held for it."""

    def test_admitted_after_its_client_left_is_flagged(self):
        """The slot frees after the client left; its retry finds the lease admitted
        before it asked: the server kept the wait. Admitted by the retry: fine."""
        def history(reserved_at):
            h = waiting_history(CONC).allow("a", 0, 1, c=1)
            h.leave("w", 10, 100, 60000, c=1).release("a", 200, 201)
            h.allow("w", 400, 401, reserved_at=reserved_at, c=1).complete("w", 500, 501)
            return h.violations()
        self.assertIn("cancel", history(250))
        self.assertEqual(dict(history(400)), {})

    def test_released_for_the_client_that_left_yet_told_allowed_is_flagged(self):
        """Admitted as its client left, then released for it: the retry is answered
        allowed with the old reserved_at, and its complete 409."""
        h = waiting_history(CONC).leave("w", 10, 12, 60000, c=1)
        h.allow("w", 100, 101, reserved_at=11, c=1).complete("w", 200, 201, status=409)
        self.assertIn("cancel", h.violations())
        h = waiting_history(CONC).leave("w", 10, 12, 60000, c=1)
        h.allow("w", 100, 101, reserved_at=11, c=1).complete("w", 200, 201)
        self.assertEqual(dict(h.violations()), {})

    def test_a_hold_left_for_a_client_that_left_shows_in_usage(self):
        """Its client left; its retry was denied (behind a waiter, so not recorded):
        nothing may be held for it, so usage showing it is flagged."""
        def history(reserved):
            h = waiting_history(ROLL).allow("a", 0, 1, r=1)
            h.deny("z", 5, 1006, wait=waits(1000, 1000, priority=0), r=10)
            h.leave("w", 10, 50, 60000, r=1).deny("w", 200, 201, r=1)
            return h.usage("r", 300, 301, reserved=reserved).violations()
        self.assertEqual(dict(history(1)), {})
        self.assertIn("usage", history(2))

    def test_a_waiter_left_behind_shows_in_the_gauge(self):
        """llmlimit_wait_waiting 1 long after the only waiting client left: flagged;
        within the tolerance after it, or 0: fine."""
        def history(at, waiting):
            h = waiting_history(CONC).allow("a", 0, 1, c=1).leave("w", 10, 100, 60000, c=1)
            return h.gauge(at, at + 1, waiting).violations()
        self.assertIn("waiting", history(500, 1))
        self.assertEqual(dict(history(110, 1)), {})
        self.assertEqual(dict(history(500, 0)), {})


if __name__ == "__main__":
    unittest.main(verbosity=2)
