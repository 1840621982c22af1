"""Concurrent reserves against an RPM + TPM + budget triple through the real
llmlimitd: no limit is ever exceeded, and usage equals exactly what the
server said it allowed (then completed). Also: the registry survives restarts
(clean and kill -9), including a limit that is mid-decrease."""

import random
import threading
import unittest
import uuid

import harness
from harness import Server, backend_from_argv, binary_from_argv

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

RPM = "global:llm:openai:gpt-4o:rpm"
TPM = "global:llm:openai:gpt-4o:tpm"
BUDGET = "team:sales:usd:month"
LIMITS = [
    {"key": RPM, "kind": "rolling", "capacity": 300, "window_seconds": 60, "unit": "requests"},
    {"key": TPM, "kind": "rolling", "capacity": 200000, "window_seconds": 60, "unit": "tokens"},
    {"key": BUDGET, "kind": "budget", "capacity": 2000000, "period": "month",
     "unit": "usd_micros", "description": "Sales team monthly spend"},
]
THREADS = 16
RESERVES_PER_THREAD = 40


class TripleUnderLoad(unittest.TestCase):
    def test_no_limit_exceeded_and_usage_matches(self):
        """16 threads x 40 reserves: allowed sums fit every limit and equal usage."""
        with Server(BINARY, backend=BACKEND) as server:
            for definition in LIMITS:
                status, _, body = server.put_limit(definition)
                self.assertEqual(status, 200, body)
            lock = threading.Lock()
            allowed = []  # (lease_id, tokens, dollars)
            statuses = []

            def worker(seed):
                rng = random.Random(seed)
                for _ in range(RESERVES_PER_THREAD):
                    tokens = rng.randint(100, 2000)
                    dollars = rng.randint(1000, 20000)
                    lease_id = str(uuid.uuid4())
                    status, _, body = server.reserve(lease_id, {RPM: 1, TPM: tokens, BUDGET: dollars})
                    with lock:
                        statuses.append(status)
                        if status == 200 and body["allowed"]:
                            allowed.append((lease_id, tokens, dollars))

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(set(statuses), {200})
            self.assertGreater(len(allowed), 0)
            self.assertLess(len(allowed), THREADS * RESERVES_PER_THREAD)  # something was denied
            sums = {RPM: len(allowed), TPM: sum(a[1] for a in allowed),
                    BUDGET: sum(a[2] for a in allowed)}
            for definition in LIMITS:
                key = definition["key"]
                self.assertLessEqual(sums[key], definition["capacity"], key)
                status, _, usage = server.usage(key)
                self.assertEqual(status, 200, usage)
                self.assertEqual(usage["reserved"], sums[key], key)
                self.assertEqual(usage["used"], 0, key)

            # Complete every allowed lease with half its tokens and dollars.
            def complete(chunk):
                for lease_id, tokens, dollars in chunk:
                    status, _, body = server.complete(lease_id, {TPM: tokens // 2,
                                                                 BUDGET: dollars // 2})
                    self.assertEqual(status, 200, body)
                    self.assertTrue(body["reconciled"])

            chunks = [allowed[i::THREADS] for i in range(THREADS)]
            threads = [threading.Thread(target=complete, args=(c,)) for c in chunks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            expected_used = {RPM: len(allowed), TPM: sum(a[1] // 2 for a in allowed),
                             BUDGET: sum(a[2] // 2 for a in allowed)}
            for key, used in expected_used.items():
                _, _, usage = server.usage(key)
                self.assertEqual(usage["reserved"], 0, key)
                self.assertEqual(usage["used"], used, key)


class RegistryRestart(unittest.TestCase):
    def definitions(self, server):
        status, _, body = server.request("GET", "/v1/admin/limits")
        self.assertEqual(status, 200, body)
        return body["limits"]

    def assert_same_registry(self, before, after):
        """Equal, except that the decrease may have been applied since (on the
        memory backend the holds that blocked it are gone after a restart)."""
        self.assertEqual(len(after), len(before))
        for old, new in zip(before, after):
            if old["status"] == "decreasing" and new["status"] == "active":
                self.assertEqual(new["definition"]["capacity"], old["pending_decrease_to"])
                self.assertEqual(new["pending_decrease_to"], 0)
                old = dict(old, status="active", pending_decrease_to=0,
                           definition=dict(old["definition"], capacity=old["pending_decrease_to"]))
            self.assertEqual(new, old)

    def test_registry_survives_clean_and_hard_restart(self):
        """Limits, including one mid-decrease, come back identical after SIGTERM and kill -9."""
        with Server(BINARY, backend=BACKEND) as server:
            for definition in LIMITS:
                self.assertEqual(server.put_limit(definition)[0], 200)
            concurrency = {"key": "local:llama:concurrency", "kind": "concurrency",
                           "capacity": 4, "timeout_seconds": 300}
            self.assertEqual(server.put_limit(concurrency)[0], 200)
            status, _, body = server.reserve(str(uuid.uuid4()), {"local:llama:concurrency": 3})
            self.assertTrue(body["allowed"], body)
            shrink = dict(concurrency, capacity=2)
            status, _, body = server.put_limit(shrink)
            self.assertEqual(status, 200, body)
            self.assertEqual(body["status"], "decreasing")
            before = self.definitions(server)
            self.assertEqual(len(before), 4)

            server.restart()
            self.assert_same_registry(before, self.definitions(server))
            server.kill()
            server.start()
            self.assert_same_registry(before, self.definitions(server))
            status, _, body = server.request("DELETE", "/v1/admin/limits/" + RPM.replace(":", "%3A"))
            self.assertEqual(status, 200, body)
            server.restart()
            self.assertEqual([l["definition"]["key"] for l in self.definitions(server)],
                             sorted(["local:llama:concurrency", TPM, BUDGET]))


if __name__ == "__main__":
    harness.main()
