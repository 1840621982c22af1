"""Runs test_ctl_etcd (the etcd client and the follower) against a real
3-member etcd cluster on loopback; skipped (exit 77) without etcd.
Usage: test_ctl_etcd.py PATH_TO_test_ctl_etcd"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import etcd_cluster  # noqa: E402


def main():
    etcd_cluster.skip_unless_etcd("the etcd client against a real cluster")
    with etcd_cluster.EtcdCluster(3) as cluster:
        first = cluster.members[0].process.pid
        return subprocess.run([sys.argv[1], cluster.url(), str(first)], timeout=300).returncode


if __name__ == "__main__":
    sys.exit(main())
