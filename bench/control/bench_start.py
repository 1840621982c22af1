"""How long a front end with --control takes to start and sync when the
store holds LIMITS limit definitions and KEYS Keys API keys (100,000 each by
default): a 3-member etcd cluster (tests/control/etcd_cluster.py) is filled
through its txn API, then llmlimitd is started on an empty data directory
(every limit and key new to it: it creates them all and writes limits.json
and keys.json) and started again on that directory (every one in force
already: nothing to write). Each time is from the process's start to its
listening line, which it prints after its whole read of the store was
applied; the script then checks the last limit and key are there.
Usage: python3 bench/control/bench_start.py [BUILD_DIR] [--backend memory|tigerbeetle]
[--limits N] [--keys N]"""

import argparse
import base64
import hashlib
import json
import os
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "http"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tigerbeetle"))
import etcd_cluster  # noqa: E402
import harness  # noqa: E402
from harness import Server  # noqa: E402

TXN_OPS = 128  # etcd's --max-txn-ops default
WRITERS = 4


def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def limit_value(i):
    key = "bench-limit-%06d" % i
    return key, json.dumps({"key": key, "kind": "rolling", "capacity": 1000 + i,
                            "window_seconds": 3600}, separators=(",", ":"))


def key_value(i):
    """A key's record as the store holds it (keys.json's entry)."""
    kid = "key_%016x" % i
    digest = hashlib.sha256(b"bench-secret-%d" % i).hexdigest()
    return kid, json.dumps({
        "id": kid, "sha256": digest, "first_sha256": digest, "caller": "c%06d" % i,
        "team": "t%03d" % (i % 1000), "models": None, "metadata": {},
        "created_at_unix_ms": 1790000000000, "expires_at_unix_ms": None,
        "revoked_at_unix_ms": 0, "last_used_unix_ms": 0, "blocked": False,
        "max_wait_seconds": 0, "priority_floor": 0}, separators=(",", ":"))


def fill(cluster, prefix, make, count):
    """Puts count values under prefix, TXN_OPS a txn, WRITERS at a time."""
    endpoints = cluster.url()[len("etcd://"):].split(",")
    chunks = [range(start, min(start + TXN_OPS, count)) for start in range(0, count, TXN_OPS)]
    failures = []

    def writer(n):
        url = "http://%s/v3/kv/txn" % endpoints[n % len(endpoints)]
        for chunk in chunks[n::WRITERS]:
            ops = []
            for i in chunk:
                name, value = make(i)
                ops.append({"requestPut": {"key": b64(prefix + name), "value": b64(value)}})
            body = json.dumps({"success": ops}).encode()
            req = urllib.request.Request(url, data=body, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=60) as answer:
                    answer.read()
            except OSError as e:
                failures.append(e)
                return
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError("filling the store failed: %r" % failures[0])


def cpu_seconds(pid):
    """User and system CPU time the process has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_timed(binary, backend, data_dir, args):
    server = Server(binary, backend=backend, data_dir=data_dir, args=args)
    started = time.monotonic()
    server.start()
    return server, time.monotonic() - started, cpu_seconds(server.process.pid)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--backend", default="memory")
    parser.add_argument("--limits", type=int, default=100000)
    parser.add_argument("--keys", type=int, default=100000)
    options = parser.parse_args()
    etcd_cluster.skip_unless_etcd("bench_start", exit_code=0)
    harness.START_TIMEOUT_S = 600.0
    binary = os.path.join(options.build, "llmlimitd")
    with etcd_cluster.EtcdCluster(3) as cluster:
        began = time.monotonic()
        fill(cluster, "/llmlimit/limits/", limit_value, options.limits)
        fill(cluster, "/llmlimit/keys/", key_value, options.keys)
        print("store filled: %d limits, %d keys in %.1f s"
              % (options.limits, options.keys, time.monotonic() - began))
        args = ["--control", cluster.url()]
        tb = None
        if options.backend == "tigerbeetle":
            import tb_cluster
            tb_cluster._ping_tool = os.path.abspath(os.path.join(options.build, "tb_ping"))
            tb = tb_cluster.Cluster(replicas=1).__enter__()
            args += ["--tb-addresses", tb.address]
        data_dir = None
        first = None
        try:
            for label in ("first start (all new)", "start again (all in force)"):
                server, seconds, cpu = start_timed(binary, options.backend, data_dir, args)
                data_dir = server.data_dir
                first = first or server
                try:
                    last_limit = limit_value(options.limits - 1)[0]
                    last_key = key_value(options.keys - 1)[0]
                    assert server.request("GET", "/v1/admin/limits/" + last_limit)[0] == 200
                    assert server.request("GET", "/v1/admin/keys/" + last_key)[0] == 200
                    print("%-28s listening and synced after %.2f s (%.2f s of CPU)"
                          % (label, seconds, cpu))
                finally:
                    server.stop(check=False)
            first.cleanup()
        finally:
            if tb is not None:
                tb.__exit__(None, None, None)
    print("backend %s; load average: %s" % (options.backend,
                                            " ".join("%.2f" % x for x in os.getloadavg())))


if __name__ == "__main__":
    main()
