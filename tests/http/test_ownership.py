"""One llmlimitd per data directory, whatever the backend: limits.json is
the server's, so a second server on the same directory (memory, sqlite or
tigerbeetle, or a mix) is refused at start with a clear error naming the
owner's pid, and the owner's registry is left alone. A crashed owner
(kill -9) never blocks the next start."""

import json
import os
import subprocess
import tempfile
import unittest

import harness
from harness import Server, binary_from_argv

BINARY = binary_from_argv()
BACKENDS = ("memory", "sqlite", "tigerbeetle")
# The tigerbeetle backend starts without its cluster (it keeps trying), so
# the rule is tested without a TigerBeetle binary: nothing listens here.
TB_ARGS = ["--tb-addresses", "127.0.0.1:1"]


def server_args(backend):
    return TB_ARGS if backend == "tigerbeetle" else []


def run_second(backend, data_dir, timeout_s=5):
    """Starts a server that must refuse to run: (exit code, stderr); one
    still running after timeout_s was let in (then killed: code None)."""
    try:
        process = subprocess.run(
            [BINARY, "--listen", "127.0.0.1:0", "--backend", backend, "--data-dir", data_dir]
            + server_args(backend), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as expired:
        return None, "still running after %d s:\n%s" % (timeout_s, expired.stderr or "")
    return process.returncode, process.stderr


def rolling(key, capacity):
    return {"key": key, "kind": "rolling", "capacity": capacity, "window_seconds": 60}


class OneOwner(unittest.TestCase):
    def owner(self, backend, data_dir=None):
        server = Server(BINARY, backend=backend, data_dir=data_dir, args=server_args(backend))
        self.addCleanup(server.cleanup)
        return server.start()

    def assert_refused(self, owner, backend):
        code, stderr = run_second(backend, owner.data_dir)
        self.assertEqual(code, 1, stderr)
        self.assertIn("data directory %s is in use by another llmlimitd (pid %d)"
                      % (owner.data_dir, owner.process.pid), stderr)
        self.assertNotIn("listening on", stderr)

    def test_a_second_server_is_refused_for_every_backend(self):
        """For each backend pair: the second server exits 1 naming the owner; the owner's limits stay."""
        for first in BACKENDS:
            for second in BACKENDS:
                with self.subTest(first=first, second=second):
                    owner = self.owner(first)
                    self.assertEqual(owner.put_limit(rolling("own:a", 5))[0], 200)
                    self.assert_refused(owner, second)
                    self.assertEqual(owner.put_limit(rolling("own:b", 7))[0], 200)
                    self.assertEqual(owner.stop(), 0)
                    with open(os.path.join(owner.data_dir, "limits.json")) as f:
                        keys = [s["definition"]["key"] for s in json.load(f)]
                    self.assertEqual(keys, ["own:a", "own:b"])

    def test_the_directory_is_free_after_a_stop_or_a_crash(self):
        """After SIGTERM or kill -9 of the owner, the next server starts on the directory."""
        for backend in ("memory", "sqlite"):
            with self.subTest(backend=backend):
                data_dir = tempfile.mkdtemp(prefix="llmlimit-owner-")
                self.addCleanup(subprocess.run, ["rm", "-rf", data_dir])
                first = self.owner(backend, data_dir)
                self.assertEqual(first.put_limit(rolling("own:c", 3))[0], 200)
                first.kill()
                second = self.owner(backend, data_dir)
                self.assertEqual(second.request("GET", "/v1/admin/limits/own:c")[0], 200)
                self.assert_refused(second, backend)
                self.assertEqual(second.stop(), 0)
                third = self.owner(backend, data_dir)
                self.assertEqual(third.stop(), 0)


if __name__ == "__main__":
    harness.main()
