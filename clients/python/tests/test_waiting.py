"""Waiting on the server (wait_s, priority): against the real llmlimitd a
waiting reserve is admitted when a hold is released and denied at its
deadline; a stub server shows the queue-full header read and the attempt
not cut by the attempt timeout."""

import asyncio
import http.server
import json
import threading
import time
import unittest

import support
from support import concurrency, unique_key
from llmlimit import AsyncClient, Client


class WaitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = support.Server().start()
        cls.client = Client(cls.server.url)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()
        cls.server.cleanup()

    def held_slot(self):
        """A concurrency limit of 1 and the lease holding it."""
        key = unique_key("conc")
        self.server.put(concurrency(key, 1))
        holder = self.client.reserve({key: 1})
        self.assertTrue(holder.allowed)
        return key, holder.lease_id

    def release_once_queued(self, lease_id):
        """Releases lease_id 0.3 s after a reserve waits on the server (a
        thread); join it and check .queued."""
        def run():
            thread.queued = self.server.wait_queued(1)
            time.sleep(0.3)
            self.client.release(lease_id)

        thread = threading.Thread(target=run)
        thread.queued = False
        thread.start()
        return thread

    def test_waiting_reserve_admitted_when_the_hold_is_released(self):
        """A reserve waiting 5 s is admitted once the holder releases; only it holds the slot."""
        key, holder = self.held_slot()
        releaser = self.release_once_queued(holder)
        r = self.client.reserve({key: 1}, wait_s=5)
        releaser.join()
        self.assertTrue(releaser.queued)
        self.assertTrue(r.allowed)
        self.assertGreater(r.waited_ms, 0)
        self.assertFalse(r.queue_full)
        self.assertEqual(self.server.usage_of(key)["reserved"], 1)
        self.client.release(r.lease_id)
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)

    def test_waiting_reserve_denied_at_its_deadline(self):
        """With the hold kept, a reserve waiting 1 s is denied for capacity after waiting it all."""
        key, holder = self.held_slot()
        r = self.client.reserve({key: 1}, wait_s=1)
        self.assertFalse(r.allowed)
        self.assertEqual((r.error, r.denied_keys), ("", [key]))
        self.assertGreaterEqual(r.waited_ms, 1000)
        self.assertGreater(r.retry_after_ms, 0)
        self.assertEqual(self.server.usage_of(key)["reserved"], 1)
        self.client.release(holder)

    def test_acquire_waits_on_the_server_in_one_request(self):
        """acquire with wait_s is admitted after the release by its first request, which carried the wait."""
        key, holder = self.held_slot()
        proxy = support.FaultProxy(self.server)
        try:
            releaser = self.release_once_queued(holder)
            with Client(proxy.url) as waiting:
                with waiting.acquire({key: 1}, deadline_s=10, wait_s=10, priority=1) as lease:
                    self.assertEqual(self.server.usage_of(key)["reserved"], 1)
            releaser.join()
            self.assertTrue(releaser.queued)
            bodies = proxy.bodies("/v1/reserve")
        finally:
            proxy.close()
        self.assertEqual(len(bodies), 1)
        self.assertEqual(bodies[0]["lease_id"], lease.lease_id)
        self.assertEqual(bodies[0]["priority"], 1)
        self.assertTrue(0 < bodies[0]["wait_ms"] <= 10000)
        self.assertGreater(lease.result.waited_ms, 0)
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)

    def test_async_waiter_admitted_while_another_task_releases(self):
        """AsyncClient: a waiting acquire is admitted when another task of the same client releases."""
        key, holder = self.held_slot()

        async def scenario():
            async with AsyncClient(self.server.url) as client:
                async def waiter():
                    async with client.acquire({key: 1}, deadline_s=10, wait_s=10) as lease:
                        return lease.result

                task = asyncio.ensure_future(waiter())
                queued = await asyncio.get_running_loop().run_in_executor(
                    None, self.server.wait_queued, 1)
                self.assertTrue(queued)
                await asyncio.sleep(0.3)
                await client.release(holder)
                return await task

        result = asyncio.run(scenario())
        self.assertTrue(result.allowed)
        self.assertGreater(result.waited_ms, 0)
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)

    def test_cancelled_async_waiter_leaves_the_queue(self):
        """Cancelling an AsyncClient task while its reserve waits takes it out of the server's queue; nothing is held for it."""
        key, holder = self.held_slot()

        async def scenario():
            async with AsyncClient(self.server.url) as client:
                task = asyncio.ensure_future(client.reserve({key: 1}, wait_s=30))
                loop = asyncio.get_running_loop()
                self.assertTrue(await loop.run_in_executor(None, self.server.wait_queued, 1))
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                return await loop.run_in_executor(None, self.server.wait_queued, 0)

        self.assertTrue(asyncio.run(scenario()))
        self.client.release(holder)
        self.assertEqual(self.server.usage_of(key)["reserved"], 0)

    def test_bad_wait_options_raise_before_sending(self):
        """wait_s 61 or priority 10 raise ValueError and send nothing (the URL is never reached)."""
        with Client("http://127.0.0.1:1") as nowhere:
            with self.assertRaises(ValueError):
                nowhere.reserve({"k": 1}, wait_s=61)
            with self.assertRaises(ValueError):
                nowhere.acquire({"k": 1}, priority=10)
            with self.assertRaises(TypeError):
                nowhere.reserve({"k": 1}, wait_s="5")


class StubWaitingServer:
    """Answers every reserve after holding it for the wait_ms it asked,
    denied, with "x-llmlimit-queue: full" when told to."""

    def __init__(self, queue_full):
        self.bodies = []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.bodies.append(body)
                waited_ms = 0 if queue_full else body.get("wait_ms", 0)
                time.sleep(waited_ms / 1000)
                data = json.dumps({"allowed": False, "retry_after_ms": 250,
                                   "reserved_at_unix_ms": 0, "expires_at_unix_ms": 0,
                                   "error": "", "denied_keys": ["k"],
                                   "waited_ms": waited_ms}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if queue_full:
                    self.send_header("x-llmlimit-queue", "full")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class StubWaitTest(unittest.TestCase):
    def test_queue_full_header_reported(self):
        """An answer with x-llmlimit-queue: full is a denial with queue_full and waited_ms 0."""
        stub = StubWaitingServer(queue_full=True)
        self.addCleanup(stub.close)
        with Client(stub.url) as client:
            r = client.reserve({"k": 1}, wait_s=5)
        self.assertEqual((r.allowed, r.queue_full, r.waited_ms), (False, True, 0))

    def test_attempt_outlasts_the_wait(self):
        """A server holding the answer 1.5 s, past the 1 s attempt timeout, is answered in one attempt."""
        stub = StubWaitingServer(queue_full=False)
        self.addCleanup(stub.close)
        with Client(stub.url, attempt_timeout_s=1.0) as client:
            r = client.reserve({"k": 1}, wait_s=1.5)
        self.assertEqual(len(stub.bodies), 1)
        self.assertFalse(r.allowed)
        self.assertEqual(r.waited_ms, stub.bodies[0]["wait_ms"])
        self.assertGreater(r.waited_ms, 1000)


if __name__ == "__main__":
    unittest.main()
