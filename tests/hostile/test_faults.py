"""Faults a user can meet, against the real llmlimitd, with the behaviour
docs/hardening.md promises for each: clock jumps (server started with
--test-clock, moved by POST /v1/admin/clock): forward jumps expire holds and
roll budget periods over; backward jumps never free capacity early and keep
retry_after sane; a retry with the same lease_id after a long jump never
reserves twice, nor one across a month boundary (its commit goes to the old
month); after a step back over midnight reserves are charged to the earlier
day. A full disk is test_disk_full.py.

Usage: test_faults.py --binary build/llmlimitd [--backend memory|sqlite]
"""

import datetime
import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server, backend_from_argv, binary_from_argv  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

SECOND_MS = 1000
HOUR_MS = 3600 * SECOND_MS
DAY_MS = 24 * HOUR_MS


def unique(prefix):
    return "%s:%s" % (prefix, uuid.uuid4().hex[:12])


class ClockJumps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY, backend=BACKEND, args=["--test-clock"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.server.cleanup()
        assert code == 0, cls.server.stderr_text()

    def advance(self, delta_ms):
        status, _, body = self.server.request("POST", "/v1/admin/clock", {"advance_ms": delta_ms})
        self.assertEqual(status, 200, body)
        return body["now_unix_ms"]

    def limit(self, **definition):
        status, _, body = self.server.put_limit(definition)
        self.assertEqual(status, 200, body)
        return definition["key"]

    def reserve(self, requirements, lease_id=None):
        status, _, body = self.server.reserve(lease_id or str(uuid.uuid4()), requirements)
        self.assertEqual(status, 200, body)
        return body

    def usage(self, key, query=""):
        status, _, body = self.server.usage(key, query=query)
        self.assertEqual(status, 200, body)
        return body

    def test_forward_jump_expires_rolling_and_concurrency_holds(self):
        """A jump past the window/timeout frees the holds: full capacity again."""
        rolling = self.limit(key=unique("jump:rpm"), kind="rolling", capacity=10,
                             window_seconds=60)
        slots = self.limit(key=unique("jump:slots"), kind="concurrency", capacity=2,
                           timeout_seconds=30)
        self.assertTrue(self.reserve({rolling: 10, slots: 2})["allowed"])
        self.assertFalse(self.reserve({rolling: 1})["allowed"])
        self.assertFalse(self.reserve({slots: 1})["allowed"])
        self.advance(61 * SECOND_MS)
        self.assertEqual(self.usage(rolling)["reserved"], 0)
        self.assertEqual(self.usage(slots)["reserved"], 0)
        self.assertTrue(self.reserve({rolling: 10, slots: 2})["allowed"])

    def test_backward_jump_never_frees_capacity_early(self):
        """After the clock goes back an hour, a hold stays until the clock passes its expiry."""
        rolling = self.limit(key=unique("back:rpm"), kind="rolling", capacity=5,
                             window_seconds=60)
        slots = self.limit(key=unique("back:slots"), kind="concurrency", capacity=1,
                           timeout_seconds=30)
        held = self.reserve({rolling: 5, slots: 1})
        self.assertTrue(held["allowed"])
        self.advance(-HOUR_MS)
        for key in (rolling, slots):
            self.assertEqual(self.usage(key)["reserved"], held_amount(key, rolling))
            denied = self.reserve({key: 1})
            self.assertFalse(denied["allowed"], key)
            self.assertEqual(denied["error"], "")
            self.assertGreaterEqual(denied["retry_after_ms"], 0)
            self.assertLessEqual(denied["retry_after_ms"], HOUR_MS + 60 * SECOND_MS)
        self.advance(HOUR_MS + 61 * SECOND_MS)  # past the original expiry
        self.assertTrue(self.reserve({rolling: 5, slots: 1})["allowed"])

    def test_budget_hold_expires_and_late_commit_is_charged_with_warning(self):
        """A budget reservation expires after its timeout; a commit after that is charged."""
        budget = self.limit(key=unique("jump:usd"), kind="budget", capacity=1000,
                            period="month", timeout_seconds=5)
        lease_id = str(uuid.uuid4())
        self.assertTrue(self.reserve({budget: 600}, lease_id)["allowed"])
        self.advance(6 * SECOND_MS)
        self.assertEqual(self.usage(budget)["reserved"], 0)
        status, _, body = self.server.complete(lease_id, {budget: 700})
        self.assertEqual(status, 200, body)
        self.assertIn("commit_after_expiry:" + budget, body["warnings"])
        usage = self.usage(budget)
        self.assertEqual(usage["used"] + usage["debt"], 700)

    def test_period_rollover_starts_from_zero_and_old_period_stays_queryable(self):
        """A jump into the next day starts a fresh budget; the old day still reports its spend."""
        budget = self.limit(key=unique("jump:usd:day"), kind="budget", capacity=1000,
                            period="day", timeout_seconds=60)
        lease_id = str(uuid.uuid4())
        self.assertTrue(self.reserve({budget: 1000}, lease_id)["allowed"])
        self.assertEqual(self.server.complete(lease_id, {budget: 900})[0], 200)
        old = self.usage(budget)
        self.assertFalse(self.reserve({budget: 200})["allowed"])
        now = self.advance(0)
        self.advance(old["period_end_unix_ms"] - now + SECOND_MS)
        fresh = self.usage(budget)
        self.assertEqual(fresh["period_start_unix_ms"], old["period_end_unix_ms"])
        self.assertEqual(fresh["used"] + fresh["reserved"] + fresh["debt"], 0)
        self.assertTrue(self.reserve({budget: 1000})["allowed"])
        then = self.usage(budget, query="at_unix_ms=%d" % old["period_start_unix_ms"])
        self.assertEqual(then["used"], 900)

    def test_retry_after_a_long_jump_does_not_double_reserve(self):
        """A retry 90 minutes later (past the 1 h lease retention, inside the 2 h
        window) gets the same answer: a lease is kept while one of its holds lives."""
        rolling = self.limit(key=unique("jump:tpd"), kind="rolling", capacity=2000,
                             window_seconds=7200)
        lease_id = str(uuid.uuid4())
        first = self.reserve({rolling: 600}, lease_id)
        self.assertTrue(first["allowed"])
        self.advance(90 * 60 * SECOND_MS)
        again = self.reserve({rolling: 600}, lease_id)
        self.assertEqual(self.usage(rolling)["reserved"], 600, "a second hold for one lease")
        self.assertEqual(again, first)


    def move_to(self, target_ms):
        """Moves the server's clock to target_ms (its own reading); returns it."""
        return self.advance(target_ms - self.advance(0))

    def test_retry_across_a_month_boundary_answers_the_same_and_charges_the_old_month(self):
        """A lease reserved 30 s before a month ends, retried and completed after it: the same
        answer, no hold in the new month, the commit charged to the old one. (The test clock
        runs on with real time: 30 s leaves a busy machine room to reserve in time.)"""
        budget = self.limit(key=unique("month:usd"), kind="budget", capacity=1000,
                            period="month", timeout_seconds=300)
        start = self.move_to(next_month_start_ms(self.advance(0)) - 30 * SECOND_MS)
        lease_id = str(uuid.uuid4())
        first = self.reserve({budget: 600}, lease_id)
        self.assertTrue(first["allowed"])
        old_month = "at_unix_ms=%d" % start
        self.advance(60 * SECOND_MS)  # into the new month, the hold still live
        self.assertEqual(self.reserve({budget: 600}, lease_id), first)
        fresh = self.usage(budget)
        self.assertEqual(fresh["period_start_unix_ms"], next_month_start_ms(start))
        self.assertEqual((fresh["reserved"], fresh["used"], fresh["debt"]), (0, 0, 0))
        self.assertEqual(self.usage(budget, old_month)["reserved"], 600)
        self.assertTrue(self.reserve({budget: 1000})["allowed"])  # the old hold is not here
        status, _, body = self.server.complete(lease_id, {budget: 700})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["warnings"], [])
        old = self.usage(budget, old_month)
        self.assertEqual((old["reserved"], old["used"], old["debt"]), (0, 700, 0))
        self.assertEqual(self.usage(budget)["reserved"], 1000)
        self.assertEqual(self.usage(budget)["used"], 0)
        self.assertEqual(self.reserve({budget: 600}, lease_id), first)  # still the same answer
        self.assertEqual(self.usage(budget, old_month)["used"], 700)

    def test_clock_stepping_back_over_a_day_boundary(self):
        """After the clock steps back over midnight, reserves go to the earlier day (as spent
        there), a retry of a lease from the later day answers the same, and nothing moves.
        (Steps of 60 s: the test clock runs on with real time, and a busy machine must not
        carry a step's requests over midnight.)"""
        budget = self.limit(key=unique("back:usd:day"), kind="budget", capacity=1000,
                            period="day", timeout_seconds=300)
        midnight = next_day_start_ms(self.advance(0))
        self.move_to(midnight - 60 * SECOND_MS)
        early = str(uuid.uuid4())
        self.assertTrue(self.reserve({budget: 300}, early)["allowed"])
        self.assertEqual(self.server.complete(early, {budget: 300})[0], 200)
        self.advance(120 * SECOND_MS)  # the next day
        late = str(uuid.uuid4())
        late_answer = self.reserve({budget: 800}, late)
        self.assertTrue(late_answer["allowed"])
        self.assertEqual(self.server.complete(late, {budget: 800})[0], 200)
        day_before = "at_unix_ms=%d" % (midnight - 1)
        day_after = "at_unix_ms=%d" % midnight
        self.advance(-120 * SECOND_MS)  # back over midnight
        denied = self.reserve({budget: 800})
        self.assertFalse(denied["allowed"], "the earlier day had only 700 left")
        self.assertEqual(denied["error"], "")
        self.assertTrue(self.reserve({budget: 600})["allowed"])
        self.assertEqual(self.reserve({budget: 800}, late), late_answer)
        before = self.usage(budget, day_before)
        after = self.usage(budget, day_after)
        self.assertEqual((before["reserved"], before["used"]), (600, 300))
        self.assertEqual((after["reserved"], after["used"]), (0, 800))
        self.advance(120 * SECOND_MS)  # forward again: the later day is as it was
        after = self.usage(budget)
        self.assertEqual((after["reserved"], after["used"], after["debt"]), (0, 800, 0))
        self.assertFalse(self.reserve({budget: 300})["allowed"])


def next_day_start_ms(now_ms):
    day_ms = 24 * 3600 * 1000
    return (now_ms // day_ms + 1) * day_ms


def next_month_start_ms(now_ms):
    now = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.timezone.utc)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    start = datetime.datetime(year, month, 1, tzinfo=datetime.timezone.utc)
    return int(start.timestamp()) * 1000


def held_amount(key, rolling):
    return 5 if key == rolling else 1


if __name__ == "__main__":
    harness.main()
