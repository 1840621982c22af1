"""The retry rules on scripted outcomes, without a server: which lease id each
attempt carries, when the rules wait, and when they give up."""

import time
import unittest
import uuid

import support  # noqa: F401  (puts the package on sys.path)
from llmlimit import _protocol as p
from llmlimit import ApiError, Denied, Unavailable, new_lease_id


def allowed():
    return p.Response(200, {"allowed": True, "retry_after_ms": 0, "reserved_at_unix_ms": 5,
                            "expires_at_unix_ms": 60005, "error": "", "denied_keys": []}, "")


def denied(error="", retry_after_ms=20):
    return p.Response(200, {"allowed": False, "retry_after_ms": retry_after_ms,
                            "reserved_at_unix_ms": 0, "expires_at_unix_ms": 0,
                            "error": error, "denied_keys": ["k"]}, error)


def drive(steps, outcomes):
    """Runs steps against scripted outcomes. Returns (value or exception,
    calls made, sleeps taken). Sleeps are recorded, not slept."""
    calls, sleeps, outcome = [], [], None
    outcomes = list(outcomes)
    try:
        while True:
            step = steps.send(outcome)
            if isinstance(step, p.Sleep):
                sleeps.append(step.seconds)
                outcome = None
            else:
                calls.append(step)
                outcome = outcomes.pop(0)
    except StopIteration as done:
        return done.value, calls, sleeps
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return error, calls, sleeps


def far():
    return time.monotonic() + 60


class LeaseIdTest(unittest.TestCase):
    def test_uuid7_layout(self):
        """new_lease_id is an RFC 9562 version-7 UUID carrying the current time."""
        before = int(time.time() * 1000)
        value = uuid.UUID(new_lease_id())
        after = int(time.time() * 1000)
        self.assertEqual(value.version, 7)
        self.assertEqual(value.variant, uuid.RFC_4122)
        self.assertTrue(before <= value.int >> 80 <= after)

    def test_uuid7_unique(self):
        """Ten thousand ids drawn in a tight loop are all distinct."""
        ids = {new_lease_id() for _ in range(10000)}
        self.assertEqual(len(ids), 10000)


class WaitsTest(unittest.TestCase):
    def test_backoff_grows_and_is_capped(self):
        """Backoff stays within [bound/2, bound] of base*2^n, capped at BACKOFF_MAX_S."""
        for attempt in range(12):
            bound = min(p.BACKOFF_MAX_S, p.BACKOFF_BASE_S * 2 ** attempt)
            for _ in range(50):
                wait = p.backoff_s(attempt)
                self.assertGreaterEqual(wait, bound / 2)
                self.assertLessEqual(wait, bound)

    def test_retry_after_wait_never_early(self):
        """A capacity denial is never retried before retry_after_ms, at most 20% later."""
        for _ in range(200):
            wait = p.retry_after_wait_s(250)
            self.assertGreaterEqual(wait, 0.25)
            self.assertLessEqual(wait, 0.25 * 1.2 + 1e-9)

    def test_actual_amounts_checked(self):
        """Actual amounts must be ints in 0..2^63-1; bools are not amounts."""
        p.check_actual("k", 0)
        p.check_actual("k", p.AMOUNT_MAX)
        for bad, error in ((True, TypeError), (1.5, TypeError), (-1, ValueError),
                           (p.AMOUNT_MAX + 1, ValueError)):
            with self.assertRaises(error):
                p.check_actual("k", bad)


class ReserveRulesTest(unittest.TestCase):
    def test_unknown_outcomes_keep_lease_id(self):
        """503, 502 and transport errors are retried with the same body, lease id included."""
        steps = p.reserve_steps("L1", {"k": 2}, far(), 1.0, None)
        outcomes = [p.Response(503, {"error": "backend_error"}, "backend_error"),
                    p.TransportError("reset"), p.Response(502, None, "bad gateway"), allowed()]
        result, calls, sleeps = drive(steps, outcomes)
        self.assertTrue(result.allowed)
        self.assertEqual(result.lease_id, "L1")
        self.assertEqual(len(calls), 4)
        self.assertTrue(all(c.body["lease_id"] == "L1" for c in calls))
        self.assertEqual(len(sleeps), 3)

    def test_definitive_error_not_retried(self):
        """A 409 lease_conflict raises ApiError after one attempt."""
        steps = p.reserve_steps("L1", {"k": 2}, far(), 1.0, None)
        error, calls, _ = drive(steps, [p.Response(409, {"error": "lease_conflict"},
                                                   "lease_conflict")])
        self.assertIsInstance(error, ApiError)
        self.assertEqual((error.status, error.error), (409, "lease_conflict"))
        self.assertEqual(len(calls), 1)

    def test_deadline_passed_is_unavailable(self):
        """With the deadline gone, reserve gives up with Unavailable naming the lease."""
        steps = p.reserve_steps("L1", {"k": 2}, time.monotonic() - 1, 1.0, None)
        error, calls, _ = drive(steps, [])
        self.assertIsInstance(error, Unavailable)
        self.assertEqual(error.lease_id, "L1")
        self.assertEqual(calls, [])

    def test_attempt_timeout_bounded_by_deadline(self):
        """No attempt is given more time than is left before the deadline."""
        steps = p.reserve_steps("L1", {"k": 2}, time.monotonic() + 0.5, 5.0, None)
        _, calls, _ = drive(steps, [allowed()])
        self.assertLessEqual(calls[0].timeout_s, 0.5)

    def test_caller_sent(self):
        """The caller name goes into the reserve body for the audit log."""
        _, calls, _ = drive(p.reserve_steps("L1", {"k": 2}, far(), 1.0, "svc-a"), [allowed()])
        self.assertEqual(calls[0].body["caller"], "svc-a")
        self.assertEqual(calls[0].body["requirements"], [{"key": "k", "amount": 2}])


class AcquireRulesTest(unittest.TestCase):
    def test_new_lease_id_after_capacity_denial(self):
        """After a capacity denial acquire waits retry_after and retries with a new lease id."""
        steps = p.acquire_steps({"k": 1}, far(), 1.0, None)
        result, calls, sleeps = drive(steps, [denied(retry_after_ms=100), allowed()])
        self.assertTrue(result.allowed)
        ids = [c.body["lease_id"] for c in calls]
        self.assertEqual(len(ids), 2)
        self.assertNotEqual(ids[0], ids[1])
        self.assertEqual(result.lease_id, ids[1])
        self.assertGreaterEqual(sleeps[0], 0.1)

    def test_same_lease_id_within_one_reserve(self):
        """Inside acquire, a 503 is retried with the lease id it already sent."""
        outcomes = [p.Response(503, None, "backend_error"), allowed()]
        result, calls, _ = drive(p.acquire_steps({"k": 1}, far(), 1.0, None), outcomes)
        self.assertEqual(calls[0].body["lease_id"], calls[1].body["lease_id"])
        self.assertEqual(result.lease_id, calls[0].body["lease_id"])

    def test_permanent_denials_raise_at_once(self):
        """unknown_limit_key and exceeds_capacity raise Denied without a second try."""
        for error in ("unknown_limit_key: k", "exceeds_capacity:k"):
            raised, calls, sleeps = drive(p.acquire_steps({"k": 1}, far(), 1.0, None),
                                          [denied(error, 0)])
            self.assertIsInstance(raised, Denied)
            self.assertEqual(raised.error, error)
            self.assertEqual((len(calls), sleeps), (1, []))

    def test_decreasing_limit_is_waited_for(self):
        """limit_decreasing is temporary: acquire waits and retries."""
        outcomes = [denied("limit_decreasing:k", 50), allowed()]
        result, calls, _ = drive(p.acquire_steps({"k": 1}, far(), 1.0, None), outcomes)
        self.assertTrue(result.allowed)
        self.assertEqual(len(calls), 2)

    def test_denied_when_retry_after_passes_deadline(self):
        """If retry_after_ms ends after the deadline, acquire raises Denied now."""
        steps = p.acquire_steps({"k": 1}, time.monotonic() + 1.0, 1.0, None)
        raised, calls, sleeps = drive(steps, [denied(retry_after_ms=5000)])
        self.assertIsInstance(raised, Denied)
        self.assertEqual(raised.retry_after_ms, 5000)
        self.assertEqual((len(calls), sleeps), (1, []))


class WaitRulesTest(unittest.TestCase):
    def test_wait_and_priority_sent_and_attempt_outlasts_the_wait(self):
        """A waiting reserve sends wait_ms and priority, and its attempt timeout is the wait plus one attempt."""
        steps = p.reserve_steps("L1", {"k": 1}, far(), 1.0, None, 3.0, 2)
        _, calls, _ = drive(steps, [allowed()])
        wait_ms = calls[0].body["wait_ms"]
        self.assertEqual(wait_ms, 3000)  # the first attempt asks for the whole wait
        self.assertEqual(calls[0].body["priority"], 2)
        self.assertEqual(calls[0].body["lease_id"], "L1")
        self.assertAlmostEqual(calls[0].timeout_s, 1.0 + wait_ms / 1000)

    def test_no_wait_sends_neither_field(self):
        """Without a wait, and at the default priority, the body is the plain reserve's."""
        _, calls, _ = drive(p.reserve_steps("L1", {"k": 1}, far(), 1.0, None), [allowed()])
        self.assertNotIn("wait_ms", calls[0].body)
        self.assertNotIn("priority", calls[0].body)
        self.assertEqual(calls[0].timeout_s, 1.0)
        _, calls, _ = drive(p.reserve_steps("L1", {"k": 1}, far(), 1.0, None, 0, 0),
                            [allowed()])
        self.assertEqual(calls[0].body["priority"], 0)  # a priority alone is sent
        self.assertNotIn("wait_ms", calls[0].body)

    def test_waited_ms_and_queue_full_read(self):
        """waited_ms comes from the answer, queue_full from its header."""
        body = dict(allowed().body, waited_ms=420)
        result, _, _ = drive(p.reserve_steps("L1", {"k": 1}, far(), 1.0, None, 30.0, 5),
                             [p.Response(200, body, "")])
        self.assertEqual((result.allowed, result.waited_ms, result.queue_full), (True, 420, False))
        full = p.Response(200, denied().body, "", queue_full=True)
        result, _, _ = drive(p.reserve_steps("L1", {"k": 1}, far(), 1.0, None, 30.0, 5), [full])
        self.assertEqual((result.allowed, result.waited_ms, result.queue_full), (False, 0, True))

    def test_wait_cut_to_leave_an_attempt_before_the_deadline(self):
        """5 s asked with 3 s left and 1 s attempts: the server is asked for at most 2 s."""
        now = time.monotonic()
        steps = p.reserve_steps("L1", {"k": 1}, now + 3.0, 1.0, None, 5.0, 5)
        _, calls, _ = drive(steps, [allowed()])
        self.assertTrue(0 < calls[0].body["wait_ms"] <= 2000)
        self.assertLessEqual(calls[0].timeout_s, 3.0)

    def test_retry_keeps_lease_and_asks_what_is_left(self):
        """A 503 during a wait is retried with the same lease id and no more wait than before."""
        steps = p.reserve_steps("L1", {"k": 1}, far(), 1.0, None, 4.0, 7)
        outcomes = [p.Response(503, None, "backend_error"), allowed()]
        _, calls, _ = drive(steps, outcomes)
        self.assertEqual([c.body["lease_id"] for c in calls], ["L1", "L1"])
        self.assertEqual([c.body["priority"] for c in calls], [7, 7])
        self.assertLessEqual(calls[1].body["wait_ms"], calls[0].body["wait_ms"])

    def test_acquire_waits_on_the_server_with_each_lease(self):
        """acquire with wait_s asks the server to wait; after a denial a new lease waits again."""
        steps = p.acquire_steps({"k": 1}, far(), 1.0, None, 10.0, 3)
        result, calls, sleeps = drive(steps, [denied(retry_after_ms=30), allowed()])
        self.assertTrue(result.allowed)
        self.assertEqual(len(calls), 2)
        self.assertNotEqual(calls[0].body["lease_id"], calls[1].body["lease_id"])
        for call in calls:
            self.assertTrue(0 < call.body["wait_ms"] <= 10000)
            self.assertEqual(call.body["priority"], 3)
        self.assertGreaterEqual(sleeps[0], 0.03)

    def test_acquire_wait_never_past_its_deadline(self):
        """acquire's wait is what the deadline leaves less one attempt timeout, capped at 60 s."""
        now = time.monotonic()
        _, calls, _ = drive(p.acquire_steps({"k": 1}, now + 4.0, 1.0, None, 60.0, 5),
                            [allowed()])
        self.assertTrue(0 < calls[0].body["wait_ms"] <= 3000)
        _, calls, _ = drive(p.acquire_steps({"k": 1}, now + 600.0, 1.0, None, 60.0, 5),
                            [allowed()])
        self.assertEqual(calls[0].body["wait_ms"], p.WAIT_MS_MAX)

    def test_bad_wait_options_refused(self):
        """wait_s outside 0..60 and priority outside 0..9 (or of the wrong type) raise, naming the field."""
        p.check_wait(0, 0)
        p.check_wait(60, 9)
        p.check_wait(0.25, 5)
        for wait_s, priority, error, field in (
                (-1, 5, ValueError, "wait_s"), (60.001, 5, ValueError, "wait_s"),
                (True, 5, TypeError, "wait_s"), ("5", 5, TypeError, "wait_s"),
                (1, -1, ValueError, "priority"), (1, 10, ValueError, "priority"),
                (1, 1.5, TypeError, "priority"), (1, True, TypeError, "priority")):
            with self.assertRaises(error) as raised:
                p.check_wait(wait_s, priority)
            self.assertTrue(str(raised.exception).startswith(field))


class FinalizeRulesTest(unittest.TestCase):
    def test_bounded_attempts(self):
        """complete gives up with Unavailable after FINALIZE_ATTEMPTS_MAX failed attempts."""
        outcomes = [p.TransportError("refused")] * p.FINALIZE_ATTEMPTS_MAX
        steps = p.finalize_steps("/v1/complete", {"lease_id": "L", "actuals": []}, far(), 1.0)
        raised, calls, sleeps = drive(steps, outcomes)
        self.assertIsInstance(raised, Unavailable)
        self.assertEqual(len(calls), p.FINALIZE_ATTEMPTS_MAX)
        self.assertEqual(len(sleeps), p.FINALIZE_ATTEMPTS_MAX - 1)


if __name__ == "__main__":
    unittest.main()
