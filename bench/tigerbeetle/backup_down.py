"""Reserves one at a time against a 3-replica TigerBeetle cluster with one
backup killed: where the time of each reserve goes (docs/tigerbeetle.md,
"Several replicas"). Each scenario gets a fresh cluster (data on tmpfs),
one llmlimitd on it (--tb-deadline-ms 15000 by default), a rolling limit,
a few reserves to warm up, then the fault, then RESERVES reserves, each
sent once its predecessor was answered. Printed per scenario: p50, p90 and
max of the reserve latency, the 503s, and what the front end's sessions
did meanwhile (/metrics: requests to the cluster, their mean round trip,
resends, connections, items failed; with --trace the submitter's own
trace, which counts requests by operation).

With --client node the same reserves (one pending transfer each) go
through TigerBeetle's own Node client instead (sequential.mjs, npm ci in
this directory first), to tell the cluster's share from llmlimitd's.

Scenarios: none (the baseline), ring_next (the backup the primary sends
its prepares to on 0.15.3), ring_last (the other backup).

Usage: TIGERBEETLE_BIN=... python3 bench/tigerbeetle/backup_down.py
           [--llmlimitd build/llmlimitd] [--ping build/tb_ping]
           [--scenarios none,ring_next,ring_last] [--reserves 50]
           [--deadline-ms 15000] [--sessions 4] [--rounds 1] [--trace]
           [--client llmlimitd|node]
           [--extra-args "--flag value ..."]
Figures printed, nothing kept."""

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
sys.path.insert(0, os.path.join(ROOT, "tests", "tigerbeetle"))
import tb_cluster  # noqa: E402
from harness import Server, wait_until  # noqa: E402

REPLICAS = 3
LIMIT = {"key": "tokens", "kind": "rolling", "capacity": 10 ** 12, "window_seconds": 3600}
WARM_UP = 5
# After the kill: the connections to the dead replica have been lost.
AFTER_FAULT_S = 1.0
METRICS = ("llmlimit_backend_batches_total", "llmlimit_tigerbeetle_round_trip_microseconds_total",
           "llmlimit_tigerbeetle_retransmissions_total", "llmlimit_tigerbeetle_connections_total",
           "llmlimit_tigerbeetle_failed_items_total", "llmlimit_tigerbeetle_evictions_total",
           "llmlimit_tigerbeetle_registrations_total", "llmlimit_tigerbeetle_view")
TRACE_REQUEST = re.compile(r"tb submitter: operation (\d+), (\d+) items")
OPERATIONS = {129: "create_accounts", 130: "create_transfers", 131: "lookup_accounts",
              132: "lookup_transfers"}


def metrics(server):
    status, _, text = server.request("GET", "/metrics")
    assert status == 200, status
    values = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] in METRICS:
            values[fields[0]] = int(fields[1])
    return values


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def trace_counts(lines):
    counts = {}
    for line in lines:
        match = TRACE_REQUEST.search(line)
        if match:
            name = OPERATIONS.get(int(match.group(1)), match.group(1))
            counts[name] = counts.get(name, 0) + 1
    return counts


def print_latencies(client, scenario, victim, latencies, elapsed, unavailable, other):
    print("%-9s %-9s killed %-4s p50 %6.3f s  p90 %6.3f s  max %6.3f s  (%d reserves in %.1f s)"
          "  503: %d  other: %d" % (
              client, scenario, "-" if victim is None else str(victim),
              percentile(latencies, 0.5), percentile(latencies, 0.9), max(latencies),
              len(latencies), elapsed, unavailable, other))


def measure_node(args, cluster, scenario, victim):
    """The same reserves through tigerbeetle-node (sequential.mjs)."""
    node = subprocess.Popen(["node", os.path.join(HERE, "sequential.mjs"), cluster.address,
                             "--reserves", str(args.reserves)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        if node.stdout.readline().strip() != "ready":
            raise RuntimeError("sequential.mjs did not start")
        if victim is not None:
            cluster.kill(victim)
            time.sleep(AFTER_FAULT_S)
        started_all = time.monotonic()
        node.stdin.write("go\n")
        node.stdin.flush()
        latencies = []
        for line in node.stdout:
            if line.strip() == "done":
                break
            latencies.append(float(line))
        elapsed = time.monotonic() - started_all
        if len(latencies) != args.reserves:
            raise RuntimeError("sequential.mjs answered %d reserves" % len(latencies))
        print_latencies("node", scenario, victim, latencies, elapsed, 0, 0)
        return latencies
    finally:
        if node.poll() is None:
            node.kill()
        node.wait()


def run_scenario(args, scenario):
    cluster = tb_cluster.Cluster(replicas=REPLICAS, parent=args.data_parent).__enter__()
    server = None
    try:
        view = cluster.view()
        primary = view % REPLICAS
        victim = {"none": None, "ring_next": (primary + 1) % REPLICAS,
                  "ring_last": (primary + 2) % REPLICAS}[scenario]
        if args.client == "node":
            return measure_node(args, cluster, scenario, victim)
        env = {"LLMLIMIT_TB_TRACE": "1"} if args.trace else {}
        server = Server(args.llmlimitd, backend="tigerbeetle", env=env,
                        args=["--tb-addresses", cluster.address, "--tb-sessions",
                              str(args.sessions), "--tb-deadline-ms", str(args.deadline_ms),
                              *shlex.split(args.extra_args)])
        server.start()
        if not wait_until(lambda: server.request("GET", "/readyz")[0] == 200, 60):
            raise RuntimeError("llmlimitd did not reach the cluster")
        status, _, body = server.put_limit(LIMIT)
        assert status == 200, (status, body)
        for _ in range(WARM_UP):
            server.reserve("warm-" + uuid.uuid4().hex, {"tokens": 1})
        if victim is not None:
            cluster.kill(victim)
            time.sleep(AFTER_FAULT_S)
        before = metrics(server)
        trace_from = len(server.stderr_lines)
        latencies, unavailable, other = [], 0, 0
        started_all = time.monotonic()
        for _ in range(args.reserves):
            started = time.monotonic()
            status, _, body = server.reserve(str(uuid.uuid7()) if hasattr(uuid, "uuid7")
                                             else uuid.uuid4().hex, {"tokens": 1})
            latencies.append(time.monotonic() - started)
            if status == 503:
                unavailable += 1
            elif status != 200:
                other += 1
        elapsed = time.monotonic() - started_all
        after = metrics(server)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in METRICS
                 if k != "llmlimit_tigerbeetle_view"}
        requests = delta["llmlimit_backend_batches_total"]
        mean_trip_ms = (delta["llmlimit_tigerbeetle_round_trip_microseconds_total"] / 1000
                        / requests) if requests else 0.0
        print_latencies("llmlimitd", scenario, victim, latencies, elapsed, unavailable, other)
        print("          cluster: %d requests answered (mean round trip %.0f ms), %d resends,"
              " %d connections, %d items failed, %d registrations, %d evictions, view %d -> %d"
              % (requests, mean_trip_ms, delta["llmlimit_tigerbeetle_retransmissions_total"],
                 delta["llmlimit_tigerbeetle_connections_total"],
                 delta["llmlimit_tigerbeetle_failed_items_total"],
                 delta["llmlimit_tigerbeetle_registrations_total"],
                 delta["llmlimit_tigerbeetle_evictions_total"], view,
                 after.get("llmlimit_tigerbeetle_view", 0)))
        if args.trace:
            print("          requests sent, by operation: %s"
                  % trace_counts(server.stderr_lines[trace_from:]))
        sys.stdout.flush()
        return latencies
    finally:
        if server is not None:
            server.cleanup()
        cluster.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=("llmlimitd", "node"), default="llmlimitd")
    parser.add_argument("--llmlimitd", default=os.path.join("build", "llmlimitd"))
    parser.add_argument("--ping", default=os.path.join("build", "tb_ping"))
    parser.add_argument("--scenarios", default="none,ring_next,ring_last")
    parser.add_argument("--reserves", type=int, default=50)
    parser.add_argument("--deadline-ms", type=int, default=15000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--extra-args", default="")
    parser.add_argument("--data-parent", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = parser.parse_args()
    if args.client == "node" and not os.path.isdir(
            os.path.join(HERE, "node_modules", "tigerbeetle-node")):
        subprocess.run(["npm", "ci", "--prefix", HERE, "--no-audit", "--no-fund",
                        "--loglevel=error"], check=True)
    if tb_cluster.binary() is None:
        print("bench/tigerbeetle/backup_down.py: set TIGERBEETLE_BIN", file=sys.stderr)
        return 1
    # Three replicas allocating their memory at once on a busy machine may
    # take longer than the tests allow.
    tb_cluster.START_TIMEOUT_S = 300.0
    sys.argv[1:] = ["--ping", args.ping]
    tb_cluster.ping_tool_from_argv()
    scenarios = args.scenarios.split(",")
    for name in scenarios:
        if name not in ("none", "ring_next", "ring_last"):
            parser.error("unknown scenario %r" % name)
    for _ in range(args.rounds):
        for name in scenarios:
            run_scenario(args, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
