"""Waiting for capacity over HTTP, side by side (issue 25, BENCHMARKS.md "Waiting
for capacity"): 1,000 callers on a 10-slot concurrency limit, each
completing at once when admitted, in three modes (bench_wait_http --mode):

  wait   the reserve carries wait_ms: the server answers when a slot frees
  loop   denied: again at once, with a new lease id (the busy loop)
  retry  denied: sleep retry_after_ms (x 0.8..1.2), then a new lease id (today's client)

With --burst the callers fan out in rounds instead: one call each, all at once,
and the next round once every call of this one has completed (an orchestrator
that sends a thousand agents' calls and waits for all of them); each round's
length is printed too.

Each mode runs against a fresh llmlimitd; the backend "floor" runs
bench/wait_http/floor_wait.c instead (the HTTP exchanges and one limit's
bookkeeping, nothing else: what any server would reach here). The backends
alternate run by run (memory, sqlite, sqlite, memory, ...), and so do the modes
within a backend's pair (wait, retry; retry, wait; ...), so that a change in the
machine's load falls on both. Each run also says what share of the machine's
CPU time the hypervisor gave to other guests meanwhile ("steal", /proc/stat),
the noise a load average does not show. Prints each run's figures, the median (and
range) of each, and waiting's admissions over retrying's within each pair.
Asserts nothing.

Usage: python3 bench/wait_http/run.py [--build build] [--backends memory,sqlite,floor]
           [--modes wait,loop,retry] [--pairs 3] [--callers 1000] [--capacity 10]
           [--warmup 2] [--duration 10] [--max-load 1.5] [--burst] [--json FILE]"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "http"))
from harness import Server  # noqa: E402

KEY = "bench:slots"
FIGURES = [  # (label, path in the JSON line, format)
    ("admitted/s", ("admitted_per_s",), "%.0f"),
    ("call p50 ms", ("call_ms", "p50"), "%.1f"),
    ("call p99 ms", ("call_ms", "p99"), "%.1f"),
    ("call max ms", ("call_ms", "max"), "%.0f"),
    ("pending max ms", ("pending", "max_ms"), "%.0f"),
    ("served", ("callers_served",), "%.0f"),
    ("handover p50 ms", ("handover_ms", "p50"), "%.3f"),
    ("handover p99 ms", ("handover_ms", "p99"), "%.3f"),
    ("server CPU us/admitted", ("server_cpu_us_per_admitted",), "%.0f"),
    ("server user us/admitted", ("server_user_us_per_admitted",), "%.1f"),
    ("server system us/admitted", ("server_system_us_per_admitted",), "%.1f"),
    ("requests/s", ("requests_per_s",), "%.0f"),
    ("steal %", ("steal_percent",), "%.1f"),
]
ROUND_FIGURES = [  # with --burst
    ("round p50 ms", ("round_ms", "p50"), "%.1f"),
    ("round p99 ms", ("round_ms", "p99"), "%.1f"),
    ("rounds", ("round_ms", "rounds"), "%.0f"),
]


def figures_of(args):
    return FIGURES + (ROUND_FIGURES if args.burst else [])


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_times():
    """(steal, total) jiffies of all CPUs so far (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[7], sum(fields[:8])


def wait_for_quiet(max_load, give_up_s=600):
    """On a shared machine: until the 1-minute load average is at most max_load
    (or give_up_s has passed: the run then says so by its load figures)."""
    deadline = time.monotonic() + give_up_s
    while max_load and float(load_average().split()[0]) > max_load:
        if time.monotonic() > deadline:
            return
        time.sleep(5)


class Floor:
    """bench/wait_http/floor_wait.c on a free port: the HTTP exchanges and one
    concurrency limit's bookkeeping, nothing else (the "floor" backend)."""

    def __init__(self, args):
        self.args = args

    def __enter__(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        threads = self.args.threads or os.cpu_count()
        self.process = subprocess.Popen(
            [os.path.join(self.args.build, "floor_wait"), "--port", str(port),
             "--threads", str(threads), "--capacity", str(self.args.capacity)],
            stdout=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d" % port
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.01)
        self.process.kill()
        raise RuntimeError("floor_wait did not listen on %d" % port)

    def __exit__(self, *_):
        self.process.kill()
        self.process.wait()


def one_mode(args, backend, mode):
    if backend == "floor":
        with Floor(args) as server:
            return run_client(args, backend, mode, server)
    server_args = ["--log-level", "warn", "--max-connections", str(args.callers + 100)]
    if args.threads:
        server_args += ["--threads", str(args.threads)]
    with Server(os.path.join(args.build, "llmlimitd"), backend=backend,
                args=server_args) as server:
        status, _, body = server.put_limit({"key": KEY, "kind": "concurrency",
                                            "capacity": args.capacity,
                                            "timeout_seconds": 60})
        assert status == 200, body
        return run_client(args, backend, mode, server)


def run_client(args, backend, mode, server):
    done = subprocess.run(
        [os.path.join(args.build, "bench_wait_http"), "--url", server.url, "--mode", mode,
         "--key", KEY, "--callers", str(args.callers), "--warmup", str(args.warmup),
         "--duration", str(args.duration), "--server-pid", str(server.process.pid),
         "--call-ms", str(args.call_ms), "--think-ms", str(args.think_ms)] +
        (["--burst"] if args.burst else []),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError("bench_wait_http %s on %s: %s" % (mode, backend, done.stderr))
    figures = json.loads(done.stdout)
    figures["backend"] = backend
    return figures


def value(figures, path):
    for part in path:
        figures = figures[part]
    return figures


def show(results, args):
    print("\nmedian (min..max) over %d run(s) of %d callers%s, %d slots, %g s each:"
          % (args.pairs, args.callers, " in rounds (--burst)" if args.burst else "",
             args.capacity, args.duration))
    for backend in args.backends:
        print("\n%s" % backend)
        print("  %-26s" % "" + "".join("%-26s" % mode for mode in args.modes))
        for label, path, fmt in figures_of(args):
            cells = []
            for mode in args.modes:
                seen = [value(r, path) for r in results
                        if r["backend"] == backend and r["mode"] == mode]
                if not seen:
                    cells.append("-")
                    continue
                cells.append((fmt + " (" + fmt + ".." + fmt + ")") % (
                    statistics.median(seen), min(seen), max(seen)))
            print("  %-26s" % label + "".join("%-26s" % cell for cell in cells))
        ratios = pair_ratios(results, backend)
        if ratios:
            print("  %-26s" % "wait/retry, each pair" + " ".join("%.2f" % r for r in ratios) +
                  "  (median %.2f)" % statistics.median(ratios))


def pair_ratios(results, backend):
    """Admitted/s waiting over retrying within each pair: the two runs of a
    pair are minutes apart at most, so the machine's load, which moves the
    figures of different pairs far more, moves both alike."""
    ratios = []
    for pair in sorted({r["pair"] for r in results}):
        runs = {r["mode"]: r["admitted_per_s"] for r in results
                if r["backend"] == backend and r["pair"] == pair}
        if runs.get("wait") and runs.get("retry"):
            ratios.append(runs["wait"] / runs["retry"])
    return ratios


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--backends", default="memory,sqlite")
    parser.add_argument("--modes", default="wait,loop,retry")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--callers", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=10)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--call-ms", type=int, default=0,
                        help="each admitted call holds its slot this long before its complete")
    parser.add_argument("--think-ms", type=int, default=0,
                        help="each caller waits this long after a complete before its next call")
    parser.add_argument("--burst", action="store_true",
                        help="rounds of one call per caller, all at once (no --think-ms)")
    parser.add_argument("--threads", type=int, default=0,
                        help="llmlimitd --threads (0: its default)")
    parser.add_argument("--max-load", type=float, default=0,
                        help="before each run, wait (up to 10 min) for a 1-minute load "
                             "average at most this (0: do not wait)")
    parser.add_argument("--json", default=None, help="also write every run's figures here")
    args = parser.parse_args(argv)
    args.backends = args.backends.split(",")
    args.modes = args.modes.split(",")
    return args


def main(argv):
    args = parse_args(argv)
    results = []
    for pair in range(args.pairs):
        order = args.backends if pair % 2 == 0 else list(reversed(args.backends))
        for backend in order:
            for mode in args.modes if pair % 2 == 0 else list(reversed(args.modes)):
                wait_for_quiet(args.max_load)
                before = load_average()
                steal_before, total_before = cpu_times()
                figures = one_mode(args, backend, mode)
                steal_after, total_after = cpu_times()
                figures["load_before"], figures["load_after"] = before, load_average()
                figures["steal_percent"] = 100.0 * (steal_after - steal_before) / max(
                    1, total_after - total_before)
                figures["pair"] = pair
                results.append(figures)
                print("pair %d %-7s %-6s load %s: %s" % (
                    pair, backend, mode, before, " ".join(
                        "%s=%s" % (label.replace(" ", "_"), fmt % value(figures, path))
                        for label, path, fmt in figures_of(args))))
                sys.stdout.flush()
    show(results, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
