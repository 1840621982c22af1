"""Client against faults: 503s and lost answers in front of the real
llmlimitd, the server killed and restarted, a server that never answers."""

import threading
import time
import unittest

import support
from support import concurrency, rolling, unique_key
from llmlimit import Client, Unavailable


class ProxyFaultTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()

    def through_proxy(self, mode, failures, path="/v1/reserve"):
        proxy = support.FaultProxy(self.server, path, failures, mode)
        self.addCleanup(proxy.close)
        client = Client(proxy.url)
        self.addCleanup(client.close)
        return proxy, client

    def check_one_reservation(self, mode):
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))
        proxy, client = self.through_proxy(mode, 3)
        r = client.reserve({key: 70}, deadline_s=10)
        self.assertTrue(r.allowed)
        ids = [body["lease_id"] for body in proxy.bodies("/v1/reserve")]
        self.assertEqual(ids, [r.lease_id] * 4)
        self.assertEqual(self.server.usage_of(key)["reserved"], 70)

    def test_503_then_recovery_same_lease(self):
        """Three 503s then the server: 4 attempts, one lease id, 70 reserved once."""
        self.check_one_reservation("503")

    def test_lost_answers_reserve_once(self):
        """The server reserved but the client saw 503 three times: still exactly one reservation."""
        self.check_one_reservation("503_after")

    def test_dropped_connections_reserve_once(self):
        """The server reserved but the connection died before the answer: exactly one reservation."""
        self.check_one_reservation("drop_after")

    def test_acquire_through_lost_answers(self):
        """acquire through lost answers holds one lease and leaves nothing after the block."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 1))
        _, client = self.through_proxy("503_after", 2)
        with client.acquire({key: 1}, deadline_s=10):
            self.assertEqual(self.server.usage_of(key)["reserved"], 1)
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)

    def test_503_until_deadline(self):
        """503 on every attempt: Unavailable naming the lease, near the deadline."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 10))
        proxy, client = self.through_proxy("503", 10**6)
        started = time.monotonic()
        with self.assertRaises(Unavailable) as raised:
            client.reserve({key: 1}, deadline_s=1)
        elapsed = time.monotonic() - started
        self.assertTrue(0.9 <= elapsed < 2.0, elapsed)
        ids = {body["lease_id"] for body in proxy.bodies("/v1/reserve")}
        self.assertEqual(ids, {raised.exception.lease_id})
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)

    def test_complete_retried_after_lost_answer(self):
        """complete whose first answer is lost is retried and reconciles once."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))
        _, client = self.through_proxy("503_after", 1, "/v1/complete")
        with client.acquire({key: 100}) as lease:
            lease.actual(key, 40)
        self.assertTrue(lease.completion.reconciled)
        u = self.server.usage_of(key)
        self.assertEqual((u["reserved"], u["used"]), (0, 40))

    def test_release_gives_up_quietly_in_block(self):
        """A release that never gets through does not hide the block's exception."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))
        _, client = self.through_proxy("503", 10**6, "/v1/release")
        client.finalize_deadline_s = 0.5
        with self.assertRaises(ZeroDivisionError):
            with client.acquire({key: 100}):
                1 / 0
        # Never freed locally: the hold stays until it expires.
        self.assertEqual(self.server.usage_of(key)["reserved"], 100)


class RestartTest(unittest.TestCase):
    def setUp(self):
        self.server = support.Server().start()
        self.addCleanup(self.server.cleanup)
        self.client = Client(self.server.url)
        self.addCleanup(self.client.close)

    def test_call_while_down_succeeds_when_back(self):
        """Reserve made while the server is dead gets through once it restarts: one reservation."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))
        self.client.usage(key)  # a keep-alive connection that the kill breaks
        self.server.kill()
        outcome = {}

        def call():
            try:
                outcome["result"] = self.client.reserve({key: 25}, deadline_s=15)
            except Exception as error:  # noqa: BLE001 - reported below
                outcome["error"] = error

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.5)
        self.assertTrue(thread.is_alive(), outcome)
        self.server.start()
        thread.join(20)
        self.assertNotIn("error", outcome)
        self.assertTrue(outcome["result"].allowed)
        # The memory backend keeps the registry, not usage: all that is
        # reserved now is this one call.
        self.assertEqual(self.server.usage_of(key)["reserved"], 25)

    def test_killed_while_lease_held(self):
        """Server killed and restarted inside the block: the block ends cleanly, nothing held."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 1))
        with self.client.acquire({key: 1}, deadline_s=5) as lease:
            self.server.kill()
            self.server.start()
            lease.actual(key, 1)
        # The restarted memory backend never saw the lease: complete is a
        # success with nothing to reconcile, and the slot is free.
        self.assertEqual(lease.state, "completed")
        self.assertFalse(lease.completion.reconciled)
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)
        with self.client.acquire({key: 1}, deadline_s=5):
            self.assertEqual(self.server.usage_of(key)["reserved"], 1)

    def test_killed_for_good_raises_unavailable(self):
        """With the server gone for good, reserve raises Unavailable near its deadline."""
        self.server.kill()
        started = time.monotonic()
        with self.assertRaises(Unavailable):
            self.client.reserve({unique_key("tpm"): 1}, deadline_s=1)
        self.assertTrue(0.9 <= time.monotonic() - started < 2.0)


class NeverAnswersTest(unittest.TestCase):
    def setUp(self):
        self.silent = support.SilentServer()
        self.addCleanup(self.silent.close)
        self.client = Client(self.silent.url, attempt_timeout_s=0.4)
        self.addCleanup(self.client.close)

    def timed(self, fn):
        started = time.monotonic()
        with self.assertRaises(Unavailable):
            fn()
        return time.monotonic() - started

    def test_reserve_deadline(self):
        """reserve against a server that never answers raises Unavailable near its 1.5 s deadline."""
        elapsed = self.timed(lambda: self.client.reserve({"k": 1}, deadline_s=1.5))
        self.assertTrue(1.4 <= elapsed < 2.5, elapsed)

    def test_acquire_deadline(self):
        """acquire against a server that never answers stops near its 1 s deadline, not Denied."""
        elapsed = self.timed(lambda: self.client.acquire({"k": 1}, deadline_s=1))
        self.assertTrue(0.9 <= elapsed < 2.0, elapsed)

    def test_complete_deadline(self):
        """complete is bounded by its own deadline too."""
        elapsed = self.timed(lambda: self.client.complete("L", {"k": 1}, deadline_s=0.8))
        self.assertTrue(0.7 <= elapsed < 1.8, elapsed)


if __name__ == "__main__":
    unittest.main()
