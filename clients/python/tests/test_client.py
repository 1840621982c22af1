"""Client against the real llmlimitd: allowed, denied and unknown outcomes,
the lease block, and sharing one client between threads."""

import threading
import time
import unittest

import support
from support import concurrency, rolling, unique_key
from llmlimit import ApiError, Client, Denied


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.Server().start()
        cls.client = Client(cls.server.url)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()
        cls.server.cleanup()

    def usage(self, key):
        return self.server.usage_of(key)

    def test_reserve_allowed_then_complete(self):
        """An allowed reserve holds the amount; complete shrinks it to the actual."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))
        r = self.client.reserve({key: 400}, deadline_s=5)
        self.assertTrue(r.allowed)
        self.assertEqual((r.error, r.denied_keys, r.retry_after_ms), ("", [], 0))
        self.assertGreater(r.expires_at_unix_ms, r.reserved_at_unix_ms)
        self.assertEqual(self.usage(key)["reserved"], 400)
        done = self.client.complete(r.lease_id, {key: 150})
        self.assertTrue(done.ok and done.reconciled)
        self.assertEqual((self.usage(key)["reserved"], self.usage(key)["used"]), (0, 150))

    def test_reserve_capacity_denial(self):
        """A full limit answers allowed=false, error "", the key, retry_after_ms > 0; nothing held."""
        key = unique_key("rpm")
        self.server.put(rolling(key, 1))
        self.assertTrue(self.client.reserve({key: 1}).allowed)
        r = self.client.reserve({key: 1})
        self.assertFalse(r.allowed)
        self.assertEqual((r.error, r.denied_keys), ("", [key]))
        self.assertGreater(r.retry_after_ms, 0)
        self.assertEqual(self.usage(key)["reserved"], 1)

    def test_reserve_unknown_key(self):
        """A key with no limit is a definitive denial naming it, not an exception."""
        key = unique_key("missing")
        r = self.client.reserve({key: 1})
        self.assertFalse(r.allowed)
        self.assertEqual(r.error, "unknown_limit_key: " + key)
        self.assertEqual(r.denied_keys, [key])

    def test_reserve_same_lease_id_idempotent(self):
        """Reserving twice with the caller's lease id holds once, same timestamps."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 100))
        first = self.client.reserve({key: 30}, lease_id="order-17-call-1")
        again = self.client.reserve({key: 30}, lease_id="order-17-call-1")
        self.assertEqual(first, again)
        self.assertEqual(self.usage(key)["reserved"], 30)

    def test_lease_conflict(self):
        """The same lease id with other amounts raises ApiError 409 lease_conflict."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 100))
        lease_id = self.client.reserve({key: 10}).lease_id
        with self.assertRaises(ApiError) as raised:
            self.client.reserve({key: 11}, lease_id=lease_id)
        self.assertEqual((raised.exception.status, raised.exception.error),
                         (409, "lease_conflict"))

    def test_release_then_complete_is_already_finalized(self):
        """release frees the hold; a later complete raises ApiError 409 already_finalized."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 100))
        lease_id = self.client.reserve({key: 10}).lease_id
        self.client.release(lease_id)
        self.assertEqual(self.usage(key)["reserved"], 0)
        with self.assertRaises(ApiError) as raised:
            self.client.complete(lease_id, {key: 1})
        self.assertEqual((raised.exception.status, raised.exception.error),
                         (409, "already_finalized"))

    def test_usage(self):
        """usage returns the server's numbers; an unknown key raises ApiError 404."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 5))
        self.client.reserve({key: 2})
        u = self.client.usage(key)
        self.assertEqual((u.key, u.kind, u.capacity, u.reserved, u.available),
                         (key, "concurrency", 5, 2, 3))
        with self.assertRaises(ApiError) as raised:
            self.client.usage(unique_key("missing"))
        self.assertEqual(raised.exception.status, 404)

    def test_acquire_unknown_key_raises_at_once(self):
        """acquire raises Denied for an unknown key at once, not at the deadline."""
        key = unique_key("missing")
        started = time.monotonic()
        with self.assertRaises(Denied) as raised:
            self.client.acquire({key: 1}, deadline_s=10)
        self.assertLess(time.monotonic() - started, 2)
        self.assertEqual(raised.exception.error, "unknown_limit_key: " + key)

    def test_acquire_exceeds_capacity_raises_at_once(self):
        """An amount above the capacity can never fit: Denied at once."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 10))
        started = time.monotonic()
        with self.assertRaises(Denied) as raised:
            self.client.acquire({key: 11}, deadline_s=10)
        self.assertLess(time.monotonic() - started, 2)
        self.assertEqual(raised.exception.error, "exceeds_capacity:" + key)

    def test_acquire_denied_when_window_outlasts_deadline(self):
        """A full 60 s window with a 1 s deadline: Denied (capacity) within the deadline."""
        key = unique_key("rpm")
        self.server.put(rolling(key, 1))
        self.client.reserve({key: 1})
        started = time.monotonic()
        with self.assertRaises(Denied) as raised:
            self.client.acquire({key: 1}, deadline_s=1)
        self.assertLess(time.monotonic() - started, 1.5)
        self.assertEqual((raised.exception.error, raised.exception.denied_keys), ("", [key]))
        self.assertEqual(self.usage(key)["reserved"], 1)

    def test_acquire_waits_and_uses_new_lease_ids(self):
        """acquire waits for a freed slot, each retry with a new lease id, the last one wins."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 1))
        holder = self.client.reserve({key: 1}).lease_id
        proxy = support.FaultProxy(self.server)
        try:
            timer = threading.Timer(0.5, self.client.release, (holder,))
            timer.start()
            started = time.monotonic()
            with Client(proxy.url) as waiting:
                with waiting.acquire({key: 1}, deadline_s=10) as lease:
                    waited = time.monotonic() - started
            timer.join()
            ids = [body["lease_id"] for body in proxy.bodies("/v1/reserve")]
        finally:
            proxy.close()
        self.assertGreaterEqual(waited, 0.4)
        self.assertGreaterEqual(len(ids), 2)
        self.assertEqual(len(set(ids)), len(ids))
        self.assertEqual(ids[-1], lease.lease_id)
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_block_completes_with_actuals(self):
        """Leaving the block completes: rolling keeps the actual, concurrency is freed."""
        tpm, slots = unique_key("tpm"), unique_key("conc")
        self.server.put(rolling(tpm, 1000))
        self.server.put(concurrency(slots, 2))
        with self.client.acquire({tpm: 500, slots: 1}, deadline_s=5) as lease:
            self.assertEqual(self.usage(slots)["reserved"], 1)
            lease.actual(tpm, 320)
        self.assertEqual(lease.state, "completed")
        self.assertTrue(lease.completion.reconciled)
        self.assertEqual((self.usage(tpm)["reserved"], self.usage(tpm)["used"]), (0, 320))
        self.assertEqual(self.usage(slots)["reserved"], 0)

    def test_key_left_out_settles_at_reserved(self):
        """A key without an actual is settled at its reserved amount (pessimistic)."""
        tpm = unique_key("tpm")
        self.server.put(rolling(tpm, 1000))
        with self.client.acquire({tpm: 500}):
            pass
        self.assertEqual((self.usage(tpm)["reserved"], self.usage(tpm)["used"]), (0, 500))

    def test_exception_in_block_releases(self):
        """An exception inside the block releases every hold and is re-raised."""
        tpm, slots = unique_key("tpm"), unique_key("conc")
        self.server.put(rolling(tpm, 1000))
        self.server.put(concurrency(slots, 1))
        with self.assertRaises(RuntimeError):
            with self.client.acquire({tpm: 500, slots: 1}) as lease:
                raise RuntimeError("provider timed out")
        self.assertEqual(lease.state, "released")
        for key in (tpm, slots):
            u = self.usage(key)
            self.assertEqual((u["reserved"], u["used"]), (0, 0))

    def test_actual_for_foreign_key(self):
        """lease.actual for a key the lease does not hold raises KeyError (and releases)."""
        tpm = unique_key("tpm")
        self.server.put(rolling(tpm, 1000))
        with self.assertRaises(KeyError):
            with self.client.acquire({tpm: 5}) as lease:
                lease.actual(tpm + ":other", 1)
        self.assertEqual(self.usage(tpm)["reserved"], 0)

    def test_threads_share_one_client(self):
        """8 threads x 4 acquires on 3 slots through one client: never more than 3 inside, none leaked."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 3))
        inside, peak, done, lock = [0], [0], [0], threading.Lock()

        def work():
            for _ in range(4):
                with self.client.acquire({key: 1}, deadline_s=20):
                    with lock:
                        inside[0] += 1
                        peak[0] = max(peak[0], inside[0])
                    time.sleep(0.02)
                    with lock:
                        inside[0] -= 1
                with lock:
                    done[0] += 1

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(done[0], 32)
        self.assertLessEqual(peak[0], 3)
        self.assertGreaterEqual(peak[0], 2)
        self.assertEqual(self.usage(key)["reserved"], 0)


if __name__ == "__main__":
    unittest.main()
