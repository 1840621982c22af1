"""Reserves per second with and without --control (limit definitions in
etcd): the control plane is off the data path, so the two should match.
Starts a 3-member etcd cluster (tests/control/etcd_cluster.py) and, in
turn, llmlimitd on the memory backend without and with --control; each
runs `llmlimit bench --mode reserve-complete` ROUNDS times and prints the
figures, then the medians. Beside each round's requests/s it prints
llmlimitd's own CPU time per request (utime + stime of /proc/PID/stat over
the round, divided by the requests the generator completed), which moves
less with the machine's load than requests/s. Also prints how long a limit
put on one front end takes to be seen on another (the control plane's
delay), over REPEATS puts.
With --backend tigerbeetle (TIGERBEETLE_BIN; a 3-replica cluster from
tests/tigerbeetle/tb_cluster.py) the front ends run on it instead, PAIRS
alternating pairs of one run without and one with --control (every other
pair the one with first).
Usage: python3 bench/control/bench_control.py [BUILD_DIR] [--backend memory|tigerbeetle]
(default build, memory)"""

import json
import os
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "http"))
import etcd_cluster  # noqa: E402
from harness import Server  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tigerbeetle"))
BACKEND = "memory"
if "--backend" in sys.argv:
    at = sys.argv.index("--backend")
    BACKEND = sys.argv[at + 1]
    del sys.argv[at:at + 2]
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
TB_ARGS = []  # --tb-addresses of the cluster, on tigerbeetle
PAIRS = 3
TB_REPLICAS = int(os.environ.get("BENCH_TB_REPLICAS", "3"))
ROUNDS = 3
CONNECTIONS = 16
DURATION_S = 5
REPEATS = 50
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of the process, all its threads (fields 14 and 15 of
    /proc/PID/stat; the fields after the command's closing parenthesis)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def bench(args, label):
    """ROUNDS rounds on a fresh llmlimitd: (requests/s, µs of its CPU per request) each."""
    server = Server(os.path.join(BUILD, "llmlimitd"), backend=BACKEND,
                    args=args + TB_ARGS + ["--threads", "1"]).start()
    try:
        server.put_limit({"key": "bench", "kind": "rolling", "capacity": 10**15,
                          "window_seconds": 60})
        rates, cpus = [], []
        for _ in range(ROUNDS):
            cpu_before = cpu_seconds(server.process.pid)
            out = subprocess.run(
                [os.path.join(BUILD, "llmlimit"), "--url", server.url, "bench", "--connections",
                 str(CONNECTIONS), "--duration", str(DURATION_S), "--mode", "reserve-complete",
                 "--keys", "bench", "--json", "--quiet"],
                capture_output=True, text=True, check=True).stdout
            figures = json.loads(out)
            assert figures["errors"] == 0, figures
            cpu_us = ((cpu_seconds(server.process.pid) - cpu_before) * 1e6
                      / max(figures["requests"], 1))
            rates.append(figures["requests_per_second"])
            cpus.append(round(cpu_us, 1))
            print("%-18s round: %d requests/s, %.1f us of CPU per request (load %.2f)"
                  % (label, figures["requests_per_second"], cpu_us, os.getloadavg()[0]),
                  flush=True)
        return rates, cpus
    finally:
        server.stop(check=False)
        server.cleanup()


def propagation_ms(url):
    """Delay from a put's answer on A to the limit on B, REPEATS times."""
    args = ["--control", url]
    a = Server(os.path.join(BUILD, "llmlimitd"), backend="memory", args=args).start()
    b = Server(os.path.join(BUILD, "llmlimitd"), backend="memory", args=args).start()
    delays = []
    try:
        for i in range(REPEATS):
            key = "p-" + uuid.uuid4().hex[:8]
            a.put_limit({"key": key, "kind": "rolling", "capacity": i + 1, "window_seconds": 60})
            started = time.monotonic()
            while b.request("GET", "/v1/admin/limits/" + key)[0] != 200:
                time.sleep(0.0005)
            delays.append((time.monotonic() - started) * 1000)
    finally:
        for s in (a, b):
            s.stop(check=False)
            s.cleanup()
    return delays


def run_pair(results, cpus, control_url, first_with=False):
    """One run without --control and one with (first_with: in that order);
    each run's figures added."""
    runs = [("without --control", []), ("with --control", ["--control", control_url])]
    for label, args in reversed(runs) if first_with else runs:
        rates, cpu = bench(args, label)
        results[label] += rates
        cpus[label] += cpu


def print_medians(results, cpus):
    for label, rates in results.items():
        print("%-18s requests/s: %s  median %d" % (label, rates, statistics.median(rates)))
    for label, cpu in cpus.items():
        print("%-18s CPU us/request: %s  median %.1f" % (label, cpu, statistics.median(cpu)))


def print_cpu_ratio(cpus):
    print("CPU per request with/without: %.3f" % (statistics.median(cpus["with --control"]) /
                                                 statistics.median(cpus["without --control"])))


def main_tigerbeetle():
    """PAIRS alternating pairs on one 3-replica cluster: without then with,
    with then without, ..."""
    import tb_cluster
    tb_cluster._ping_tool = os.path.abspath(os.path.join(BUILD, "tb_ping"))
    with etcd_cluster.EtcdCluster(3) as cluster, tb_cluster.Cluster(replicas=TB_REPLICAS) as tb:
        TB_ARGS.extend(["--tb-addresses", tb.address])
        results = {"without --control": [], "with --control": []}
        cpus = {"without --control": [], "with --control": []}
        # Reserves/s on one cluster fell from pair to pair (4-10x over three
        # pairs, whichever run), so the pairs alternate which run goes first.
        for pair in range(PAIRS):
            run_pair(results, cpus, cluster.url(), first_with=pair % 2 == 1)
        print_medians(results, cpus)
        ratio = (statistics.median(results["with --control"]) /
                 statistics.median(results["without --control"]))
        print("with/without: %.3f" % ratio)
        print_cpu_ratio(cpus)
    print("backend tigerbeetle (%d replicas); load average: %s" % (TB_REPLICAS,
          " ".join("%.2f" % x for x in os.getloadavg())))


def main():
    etcd_cluster.skip_unless_etcd("bench_control", exit_code=0)
    if BACKEND == "tigerbeetle":
        return main_tigerbeetle()
    with etcd_cluster.EtcdCluster(3) as cluster:
        results = {"without --control": [], "with --control": []}
        cpus = {"without --control": [], "with --control": []}
        for _ in range(2):  # interleaved, so drifting load falls on both
            run_pair(results, cpus, cluster.url())
        print_medians(results, cpus)
        print_cpu_ratio(cpus)
        delays = propagation_ms(cluster.url())
        print("put on A seen on B: median %.1f ms, max %.1f ms over %d puts"
              % (statistics.median(delays), max(delays), len(delays)))
    print("load average: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
