"""The history checker's load on the tigerbeetle backend: tests/checker/record.py
against llmlimitd in front of a one-replica cluster from TIGERBEETLE_BIN, with
waiting reserves (wait_ms, priorities, clients that leave mid-wait, retries that
join a wait, a small --max-waiters) and capacity changes, then
tests/checker/check.py on the history. Without TIGERBEETLE_BIN it prints
SKIPPED and exits 77.

Tolerances: 1500 ms for expiries (TigerBeetle expires holds on its own clock, up
to about 1.1 s late: docs/tigerbeetle.md) and 2500 ms for a waiter's answer after
its deadline (its last attempt is one round trip to the cluster, at most
--tb-deadline-ms, 2 s).

Usage: test_tb_checker.py --binary build/llmlimitd [--seconds 8]"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "http"))
from harness import binary_from_argv  # noqa: E402
from tb_cluster import Cluster, skip_unless_binary  # noqa: E402

BINARY = binary_from_argv()
RECORD = os.path.join(HERE, "..", "checker", "record.py")


def main(argv):
    skip_unless_binary("the history checker on tigerbeetle", exit_code=77)
    seconds = argv[argv.index("--seconds") + 1] if "--seconds" in argv else "8"
    with Cluster() as cluster:
        done = subprocess.run(
            [sys.executable, RECORD, "--binary", BINARY, "--backend", "tigerbeetle",
             "--seconds", seconds, "--tolerance-ms", "1500", "--wait-tolerance-ms", "2500",
             "--server-arg=--tb-addresses=" + cluster.address],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    sys.stdout.write(done.stdout)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
