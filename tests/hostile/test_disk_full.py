"""A full disk under the real llmlimitd (a small tmpfs as the data
directory, so the test needs root; without it every test is skipped and the
file exits 77, which ctest reports as skipped):

- the registry, on every local backend: a PUT or DELETE whose limits.json
  cannot be written answers 503 and changes nothing, neither the old file
  nor the live limits, also after a restart; once space is back the same
  change succeeds;
- the sqlite backend's data path: writes answer 503 backend_error, never a
  false "allowed" and never a crash; reads keep working; nothing
  acknowledged is lost; once space is back the server serves again without
  a restart.

Usage: test_disk_full.py --binary build/llmlimitd [--backend memory|sqlite]
"""

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server, backend_from_argv, binary_from_argv, wait_until  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv()

DISK_BYTES = 4 * 1024 * 1024  # the tmpfs the sqlite database fills
DISK_RESERVES_MAX = 100000  # bound of the fill loop
FILLER_CHUNK = 64 * 1024


def can_mount_tmpfs():
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = tempfile.mkdtemp(prefix="llmlimit-tmpfs-")
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe],
                              capture_output=True).returncode == 0
        if done:
            subprocess.run(["umount", probe], check=True)
        return done
    finally:
        os.rmdir(probe)


MOUNTABLE = can_mount_tmpfs()


@unittest.skipUnless(MOUNTABLE, "needs root and tmpfs to fill a disk")
class FullDisk(unittest.TestCase):
    def setUp(self):
        self.mount = tempfile.mkdtemp(prefix="llmlimit-full-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % DISK_BYTES, "tmpfs",
                        self.mount], check=True)
        self.server = Server(BINARY, backend=BACKEND, data_dir=self.mount)

    def tearDown(self):
        try:
            self.server.cleanup()
        finally:
            subprocess.run(["umount", self.mount], check=False)
            os.rmdir(self.mount)

    def fill_with_a_file(self):
        """Writes a file until the disk is full; returns its path."""
        path = os.path.join(self.mount, "filler")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for size in (FILLER_CHUNK, 512, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as error:
                    self.assertEqual(error.errno, errno.ENOSPC)
        finally:
            os.close(fd)
        return path

    def limits(self):
        status, _, body = self.server.request("GET", "/v1/admin/limits")
        self.assertEqual(status, 200, body)
        return body["limits"]

    def file_limits(self):
        with open(os.path.join(self.mount, "limits.json")) as f:
            return json.load(f)


class RegistryOnAFullDisk(FullDisk):
    def test_admin_change_on_a_full_disk_is_503_and_changes_nothing(self):
        """PUT/DELETE with no room for limits.json: 503, old file and live limits kept, restart too."""
        self.server.start()
        definition = {"key": "full:a", "kind": "budget", "capacity": 1000, "period": "month"}
        self.assertEqual(self.server.put_limit(definition)[0], 200)
        before = self.limits()
        self.assertEqual(self.file_limits(), before)
        filler = self.fill_with_a_file()
        changes = [("PUT", "/v1/admin/limits", {"key": "full:new", "kind": "rolling",
                                                 "capacity": 5, "window_seconds": 60}),
                   ("PUT", "/v1/admin/limits", dict(definition, capacity=9000)),
                   ("DELETE", "/v1/admin/limits/full:a", None)]
        for method, path, body in changes:
            status, _, answer = self.server.request(method, path, body)
            self.assertEqual(status, 503, (method, body, answer))
            # the file could not be written (or, for sqlite, the database refused first)
            self.assertIn(answer["error"], ("registry_write_failed", "backend_error"))
            self.assertEqual(self.limits(), before)
            self.assertEqual(self.file_limits(), before)
        self.server.kill()
        os.unlink(filler)
        self.server.start()
        self.assertEqual(self.limits(), before)
        self.assertEqual(self.file_limits(), before)
        status, _, _ = self.server.put_limit(dict(definition, capacity=9000))
        self.assertEqual(status, 200)
        self.assertEqual(self.file_limits(), self.limits())


@unittest.skipUnless(BACKEND == "sqlite", "the data path's writes concern the sqlite backend")
class SqliteOnAFullDisk(FullDisk):
    def fill(self, key):
        """Reserves until the disk is full; returns (acknowledged amounts, statuses seen)."""
        acknowledged, statuses = 0, set()
        for _ in range(DISK_RESERVES_MAX):
            status, _, body = self.server.reserve(str(uuid.uuid4()), {key: 1},
                                                  caller="c" * 200)
            statuses.add(status)
            if status == 200:
                self.assertTrue(body["allowed"], body)
                acknowledged += 1
            else:
                self.assertEqual(status, 503, body)
                self.assertEqual(body["error"], "backend_error")
                break
        return acknowledged, statuses

    def test_disk_full_is_503_then_recovers_without_losing_anything(self):
        """Full disk: 503 backend_error (never a false allowed), reads work, recovery, no loss."""
        self.server.start()
        key = "full:rpm"
        self.assertEqual(self.server.put_limit({"key": key, "kind": "rolling",
                                                "capacity": 10 ** 12,
                                                "window_seconds": 3600})[0], 200)
        acknowledged, statuses = self.fill(key)
        self.assertIn(503, statuses, "the disk never filled")
        self.assertIsNone(self.server.process.poll(), "llmlimitd died on a full disk")
        for _ in range(20):  # it keeps refusing writes without a crash
            status, _, _ = self.server.reserve(str(uuid.uuid4()), {key: 1})
            self.assertIn(status, (200, 503))
        status, _, usage = self.server.usage(key)
        self.assertEqual(status, 200, usage)
        self.assertGreaterEqual(usage["reserved"], acknowledged)
        subprocess.run(["mount", "-o", "remount,size=%d" % (16 * DISK_BYTES), self.mount],
                       check=True)
        served = wait_until(lambda: self.server.reserve(str(uuid.uuid4()), {key: 1})[0] == 200)
        self.assertTrue(served, "no reserve succeeded after space came back")
        self.server.kill()
        self.server.start()
        self.assertIsNone(self.server.process.poll(), self.server.stderr_text())
        status, _, usage = self.server.usage(key)
        self.assertEqual(status, 200, usage)
        self.assertGreaterEqual(usage["reserved"], acknowledged + 1)


if __name__ == "__main__":
    harness.main()
