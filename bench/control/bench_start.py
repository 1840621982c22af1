"""How long a front end with --control takes to start and sync when the
store holds LIMITS limit definitions and KEYS Keys API keys (100,000 each by
default): a 3-member etcd cluster (tests/control/etcd_cluster.py) is filled
through its txn API, then llmlimitd is started on an empty data directory
(every limit and key new to it: it creates them all and writes limits.json
and keys.json) and started again on that directory (every one in force
already: nothing to write). Each time is from the process's start to its
listening line, which it prints after its whole read of the store was
applied; the script then checks the last limit and key are there.
The floors, measured on the same store and data directory: the cheapest
read of both prefixes a client can do (curl, one request per prefix for the
whole of it, both at once: etcd 3.4's gateway answers a range of any size),
and llmlimitd started on the data directory without --control (its load of
limits.json and keys.log alone).
With --before BUILD, the two starts of that build and of BUILD_DIR's
alternate, --pairs times, on the one filled store.
Usage: python3 bench/control/bench_start.py [BUILD_DIR] [--backend memory|tigerbeetle]
[--limits N] [--keys N] [--before BUILD] [--pairs N]"""

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
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


def read_floor(cluster):
    """Seconds for curl to read both prefixes whole, one request each, at once."""
    if shutil.which("curl") is None:
        return None
    endpoints = cluster.url()[len("etcd://"):].split(",")
    commands = []
    for n, prefix in enumerate(("/llmlimit/limits/", "/llmlimit/keys/")):
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps({"key": b64(prefix), "range_end": b64(end)})
        commands.append(["curl", "-sS", "--fail", "-o", "/dev/null", "-X", "POST", "--data", body,
                         "http://%s/v3/kv/range" % endpoints[n % len(endpoints)]])
    began = time.monotonic()
    processes = [subprocess.Popen(c) for c in commands]
    if any(p.wait() != 0 for p in processes):
        raise RuntimeError("curl could not read the store")
    return time.monotonic() - began


def two_starts(binary, options, args, label):
    """The first start on an empty data directory, then again on it; the
    data directory (the caller removes it)."""
    data_dir = None
    for what in ("first start (all new)", "start again (all in force)"):
        server, seconds, cpu = start_timed(binary, options.backend, data_dir, args)
        data_dir = server.data_dir
        try:
            last_limit = limit_value(options.limits - 1)[0]
            last_key = key_value(options.keys - 1)[0]
            assert server.request("GET", "/v1/admin/limits/" + last_limit)[0] == 200
            assert server.request("GET", "/v1/admin/keys/" + last_key)[0] == 200
            print("%-8s %-28s listening and synced after %.2f s (%.2f s of CPU), load %.2f"
                  % (label, what, seconds, cpu, os.getloadavg()[0]))
        finally:
            server.stop(check=False)
    return data_dir


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--backend", default="memory")
    parser.add_argument("--limits", type=int, default=100000)
    parser.add_argument("--keys", type=int, default=100000)
    parser.add_argument("--before", help="a build to alternate with BUILD_DIR's")
    parser.add_argument("--pairs", type=int, default=1)
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
        builds = [("after", binary)]
        if options.before:
            builds.append(("before", os.path.join(options.before, "llmlimitd")))
        data_dir = None
        try:
            for pair in range(options.pairs if options.before else 1):
                for label, build in (builds if pair % 2 == 0 else builds[::-1]):
                    if data_dir is not None:
                        shutil.rmtree(data_dir, ignore_errors=True)
                    data_dir = two_starts(build, options, args, label)
            floor = read_floor(cluster)
            if floor is not None:
                print("floor: curl reading both prefixes whole, at once: %.2f s, load %.2f"
                      % (floor, os.getloadavg()[0]))
            server, seconds, cpu = start_timed(binary, options.backend, data_dir,
                                               args[2:] if tb is not None else [])
            server.stop(check=False)
            print("floor: llmlimitd without --control on that data directory: %.2f s "
                  "(%.2f s of CPU), load %.2f" % (seconds, cpu, os.getloadavg()[0]))
            shutil.rmtree(data_dir, ignore_errors=True)
        finally:
            if tb is not None:
                tb.__exit__(None, None, None)
    print("backend %s; load average: %s" % (options.backend,
                                            " ".join("%.2f" % x for x in os.getloadavg())))


if __name__ == "__main__":
    main()
