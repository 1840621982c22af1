"""The cluster harness (tb_cluster.py) rides out a known fault of TigerBeetle
itself and nothing else: against a stand-in for the tigerbeetle binary, a
replica that dies with a line of known_faults.txt in its log is said on
stderr, started again and recorded in Cluster.revivals (with a window that
ends once it runs again); one that dies of anything else is left dead, for
the test to fail on. Python standard library only; needs no TigerBeetle."""

import os
import shutil
import stat
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "http"))
import tb_cluster  # noqa: E402
from harness import binary_from_argv, wait_until  # noqa: E402

binary_from_argv()  # ctest passes llmlimitd; the stand-in replaces TigerBeetle

# `format` makes the data file; `start` says it listens, then, on its first
# start only, ends as FAKE_TB_FATE says: "known" (a known fault), "other"
# (any other failure) or "none" (runs on).
STAND_IN = r"""#!%s
import os, sys, time
command, data_file = sys.argv[1], sys.argv[-1]
if command == "format":
    open(data_file, "w").close()
    sys.exit(0)
starts_file = data_file + ".starts"
starts = int(open(starts_file).read()) if os.path.exists(starts_file) else 0
open(starts_file, "w").write(str(starts + 1))
print("info(main): listening on 127.0.0.1", flush=True)
fate = os.environ.get("FAKE_TB_FATE", "none")
if starts == 0 and fate != "none":
    time.sleep(0.5)
    print("thread 7 panic: incorrect alignment" if fate == "known" else
          "error(replica): something else went wrong", flush=True)
    os._exit(134)
while True:
    time.sleep(1)
"""


class KnownFaults(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="llmlimit-tb-harness-")
        self.addCleanup(shutil.rmtree, self.directory, True)
        path = os.path.join(self.directory, "tigerbeetle")
        with open(path, "w") as f:
            f.write(STAND_IN % sys.executable)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        os.environ["TIGERBEETLE_BIN"] = path

    def cluster(self, fate):
        os.environ["FAKE_TB_FATE"] = fate
        cluster = tb_cluster.Cluster(parent=self.directory).__enter__()
        self.addCleanup(cluster.stop)
        return cluster

    def starts(self, cluster):
        with open(cluster.replicas[0].data_file + ".starts") as f:
            return int(f.read())

    def test_the_known_fault_is_ridden_out(self):
        """A replica dead of `panic: incorrect alignment` is started again and recorded."""
        cluster = self.cluster("known")
        self.assertTrue(wait_until(lambda: cluster.revivals and cluster.revivals[0]["to_ns"],
                                   timeout_s=30), "no revival")
        revival = cluster.revivals[0]
        self.assertEqual((revival["replica"], revival["fault"]),
                         (0, "panic: incorrect alignment"))
        self.assertEqual(self.starts(cluster), 2)
        self.assertFalse(cluster.replicas[0].exited())
        (start, end), = cluster.revival_windows(settle_s=1.0)
        self.assertLess(start, revival["to_ns"])
        self.assertEqual(end, revival["to_ns"] + 10 ** 9)

    def test_any_other_death_is_left_for_the_test(self):
        """A replica dead of anything else stays dead, and nothing is recorded."""
        cluster = self.cluster("other")
        self.assertTrue(wait_until(cluster.replicas[0].exited, timeout_s=30))
        time.sleep(3 * tb_cluster.WATCH_INTERVAL_S)  # the watcher has looked at it
        self.assertEqual(cluster.revivals, [])
        self.assertTrue(cluster.replicas[0].exited())
        self.assertEqual(self.starts(cluster), 1)

    def test_a_replica_the_test_kills_is_not_revived(self):
        """kill -9 by the test is the test's fault plan: the watcher leaves it."""
        cluster = self.cluster("none")
        cluster.kill(0)
        time.sleep(3 * tb_cluster.WATCH_INTERVAL_S)
        self.assertEqual((cluster.revivals, cluster.replicas[0].process), ([], None))
        self.assertEqual(self.starts(cluster), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
