"""The registry's bound on the number of limits (LIMITS_COUNT_MAX = 100000),
one past it on both paths: a registry file with 100001 limits stops the
server at startup with the file and the reason; with exactly 100000 limits a
new key is refused with 400 while an existing one can still change."""

import json
import os
import shutil
import tempfile
import unittest

import harness
from harness import Server, ServerError, binary_from_argv

BINARY = binary_from_argv()
LIMITS_COUNT_MAX = 100000


def write_registry(path, count):
    states = [{"definition": {"key": "bound:k%06d" % i, "kind": "concurrency", "capacity": 1,
                              "window_seconds": 0, "timeout_seconds": 60, "period": "",
                              "unit": "", "description": "", "overage": "debt"},
               "status": "active", "pending_decrease_to": 0} for i in range(count)]
    with open(os.path.join(path, "limits.json"), "w") as f:
        json.dump(states, f)


class LimitCount(unittest.TestCase):
    def setUp(self):
        self.data_dir = tempfile.mkdtemp(prefix="llmlimit-count-")

    def tearDown(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def test_registry_one_past_the_bound_is_fatal(self):
        """A limits.json with 100001 limits stops startup with the file and the reason."""
        write_registry(self.data_dir, LIMITS_COUNT_MAX + 1)
        server = Server(BINARY, backend="memory", data_dir=self.data_dir)
        with self.assertRaises(ServerError):
            server.start()
        self.assertIn("limits.json", server.stderr_text())
        self.assertIn(str(LIMITS_COUNT_MAX), server.stderr_text())

    def test_put_one_past_the_bound_is_refused(self):
        """At 100000 limits a new key gets 400 and nothing changes; an update still works."""
        write_registry(self.data_dir, LIMITS_COUNT_MAX)
        with Server(BINARY, backend="memory", data_dir=self.data_dir) as server:
            status, _, body = server.put_limit({"key": "bound:new", "kind": "concurrency",
                                                "capacity": 1, "timeout_seconds": 5})
            self.assertEqual(status, 400, body)
            self.assertIn("at most %d limits" % LIMITS_COUNT_MAX, body["error"])
            status, _, body = server.request("GET", "/v1/admin/limits/bound:new")
            self.assertEqual(status, 404, body)
            status, _, body = server.put_limit({"key": "bound:k000001", "kind": "concurrency",
                                                "capacity": 2, "timeout_seconds": 60})
            self.assertEqual(status, 200, body)
        with open(os.path.join(self.data_dir, "limits.json")) as f:
            self.assertEqual(len(json.load(f)), LIMITS_COUNT_MAX)


if __name__ == "__main__":
    harness.main()
