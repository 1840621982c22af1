"""What one request costs llmlimitd, counted rather than timed (docs/benchmarks-history.md
"Counting what a waited admission costs"): the server runs under valgrind's cachegrind (one HTTP
thread, a simulated 512 KiB last-level cache, this machine's L2 per core) while
bench_wait_http drives the issue-25 scenario (1,000 callers, a 10-slot concurrency
limit, calls that complete at once). Prints the instructions and the cache misses
per request and per admission (a complete per admitted call); with --top N, the N
functions that account for most of one event.

On a shared two-core machine the time of one request moves by 10-40% from run to
run; these counts move by less than 1%, so a change of a few percent in what the
server does shows in one run of each tree. They are not times: the server runs
some ten times slower under valgrind, so the callers' mix shifts (retrying callers
make more requests per admission than at full speed), and a cache miss costs
nothing here. Compare trees in one mode, per request.

Usage: python3 bench/wait_http/cost.py [--build build] [--mode wait|retry|loop]
           [--callers 1000] [--duration 12] [--top 20] [--event Ir]"""

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

KEY = "bench:slots"
LAST_LEVEL = "524288,8,64"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http(method, url, body=None):
    request = urllib.request.Request(url, method=method, data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read().decode()


def requests_served(url):
    """(requests, completes) from the server's llmlimit_requests_total."""
    total = completes = 0.0
    for line in http("GET", url + "/metrics").splitlines():
        if line.startswith("llmlimit_requests_total"):
            value = float(line.split()[-1])
            total += value
            if "complete" in line:
                completes += value
    return total, completes


def read_counts(path):
    """The events, the program's totals and the totals by function."""
    events, totals = [], []
    by_function = collections.defaultdict(lambda: [0] * len(events))
    function = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("fn="):
                function = line[3:].strip()
            elif line.startswith("summary:"):
                totals = [int(v) for v in line.split()[1:]]
            elif line[:1].isdigit() and function is not None:
                seen = by_function[function]
                for i, v in enumerate(line.split()[1:]):
                    seen[i] += int(v)
    return events, totals, by_function


def run(args, data_dir, out):
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    server = subprocess.Popen(
        ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--LL=" + LAST_LEVEL,
         "--cachegrind-out-file=" + out, os.path.join(args.build, "llmlimitd"),
         "--backend", "memory", "--listen", "127.0.0.1:%d" % port, "--data-dir", data_dir,
         "--threads", "1", "--log-level", "warn",
         "--max-connections", str(args.callers + 100)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                http("GET", url + "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("llmlimitd under valgrind did not answer on %s" % url)
        http("PUT", url + "/v1/admin/limits", json.dumps(
            {"key": KEY, "kind": "concurrency", "capacity": 10,
             "timeout_seconds": 60}).encode())
        done = subprocess.run(
            [os.path.join(args.build, "bench_wait_http"), "--url", url, "--mode", args.mode,
             "--key", KEY, "--callers", str(args.callers), "--warmup", "3",
             "--duration", str(args.duration)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError("bench_wait_http: " + done.stderr)
        served = requests_served(url)
    finally:
        server.send_signal(signal.SIGINT)  # a clean stop: cachegrind writes its counts
        server.wait(timeout=120)
    return served


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--mode", default="wait", choices=["wait", "retry", "loop"])
    parser.add_argument("--callers", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=12)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--event", default="Ir")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.exit("cost.py needs valgrind (Debian: apt install valgrind)")
    data_dir = tempfile.mkdtemp(prefix="llmlimit-cost-")
    out = os.path.join(data_dir, "cachegrind.out")
    try:
        (requests, completes) = run(args, data_dir, out)
        events, totals, by_function = read_counts(out)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    # The counts cover the server's whole life; start-up and the admin calls
    # are a few hundred requests' worth against some 100,000.
    print("mode %s: %d requests, %d completes (admissions), %.2f requests per admission"
          % (args.mode, requests, completes, requests / completes))
    print("  %-8s %14s %14s" % ("event", "per request", "per admission"))
    for name, total in zip(events, totals):
        print("  %-8s %14.1f %14.1f" % (name, total / requests, total / completes))
    if args.top:
        i = events.index(args.event)
        ranked = sorted(by_function.items(), key=lambda kv: -kv[1][i])[:args.top]
        print("\n  %s per request, by function:" % args.event)
        for function, counts in ranked:
            print("  %10.1f  %s" % (counts[i] / requests, function))


if __name__ == "__main__":
    main(sys.argv[1:])
