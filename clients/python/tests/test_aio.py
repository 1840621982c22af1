"""AsyncClient against the real llmlimitd: the same rules as Client, with
awaits: lease blocks, denials, lost answers, deadlines, many tasks."""

import asyncio
import time
import unittest

import support
from support import concurrency, rolling, unique_key
from llmlimit import AsyncClient, Denied, Unavailable


class AsyncClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.Server().start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()

    def run_async(self, coroutine_fn, url=None):
        async def main():
            async with AsyncClient(url or self.server.url) as client:
                return await coroutine_fn(client)

        return asyncio.run(main())

    def usage(self, key):
        return self.server.usage_of(key)

    def test_block_completes_with_actuals(self):
        """async with acquire: leaving the block completes with the recorded actual."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))

        async def body(client):
            async with client.acquire({key: 600}, deadline_s=5) as lease:
                self.assertEqual(self.usage(key)["reserved"], 600)
                lease.actual(key, 222)
            return lease

        lease = self.run_async(body)
        self.assertTrue(lease.completion.reconciled)
        self.assertEqual((self.usage(key)["reserved"], self.usage(key)["used"]), (0, 222))

    def test_exception_releases(self):
        """An exception inside async with releases the hold and propagates."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 1))

        async def body(client):
            async with client.acquire({key: 1}):
                raise LookupError("no model")

        with self.assertRaises(LookupError):
            self.run_async(body)
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_await_acquire_and_reserve(self):
        """await acquire returns a lease to finish by hand; reserve reports a denial."""
        key = unique_key("rpm")
        self.server.put(rolling(key, 1))

        async def body(client):
            lease = await client.acquire({key: 1})
            denied = await client.reserve({key: 1})
            await lease.release()
            return denied

        denied = self.run_async(body)
        self.assertFalse(denied.allowed)
        self.assertEqual(denied.denied_keys, [key])
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_denied_and_unknown_key(self):
        """Denied for a full window within the deadline, and at once for an unknown key."""
        key, missing = unique_key("rpm"), unique_key("missing")
        self.server.put(rolling(key, 1))

        async def body(client):
            await client.reserve({key: 1})
            errors = []
            for requirements in ({key: 1}, {missing: 1}):
                try:
                    await client.acquire({**requirements}, deadline_s=1)
                except Denied as error:
                    errors.append(error.error)
            return errors

        started = time.monotonic()
        self.assertEqual(self.run_async(body), ["", "unknown_limit_key: " + missing])
        self.assertLess(time.monotonic() - started, 2.5)

    def test_lost_answers_reserve_once(self):
        """Lost answers are retried with the same lease id: one reservation."""
        key = unique_key("tpm")
        self.server.put(rolling(key, 1000))
        proxy = support.FaultProxy(self.server, "/v1/reserve", 2, "503_after")
        try:
            result = self.run_async(lambda client: client.reserve({key: 9}), proxy.url)
            ids = [body["lease_id"] for body in proxy.bodies("/v1/reserve")]
        finally:
            proxy.close()
        self.assertEqual(ids, [result.lease_id] * 3)
        self.assertEqual(self.usage(key)["reserved"], 9)

    def test_many_tasks_share_one_client(self):
        """20 tasks acquire 2 slots through one client: all finish, at most 2 inside, none leaked."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 2))
        state = {"inside": 0, "peak": 0}

        async def one(client):
            async with client.acquire({key: 1}, deadline_s=30):
                state["inside"] += 1
                state["peak"] = max(state["peak"], state["inside"])
                await asyncio.sleep(0.02)
                state["inside"] -= 1

        async def body(client):
            await asyncio.gather(*(one(client) for _ in range(20)))

        self.run_async(body)
        self.assertLessEqual(state["peak"], 2)
        self.assertEqual(self.usage(key)["reserved"], 0)

    def test_never_answers_deadline(self):
        """Against a server that never answers, reserve raises Unavailable near its deadline."""
        silent = support.SilentServer()
        try:
            async def body(client):
                client.attempt_timeout_s = 0.4
                await client.reserve({"k": 1}, deadline_s=1)

            started = time.monotonic()
            with self.assertRaises(Unavailable):
                self.run_async(body, silent.url)
            elapsed = time.monotonic() - started
        finally:
            silent.close()
        self.assertTrue(0.9 <= elapsed < 2.0, elapsed)


if __name__ == "__main__":
    unittest.main()
