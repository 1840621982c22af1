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
With --instructions llmlimitd runs under valgrind's callgrind and each
round gives the instructions it executed per request (every thread's: the
control plane's watcher and prober count too; counters zeroed after a warm-up,
dumped after the round, the dump's total divided by the requests the
generator completed), which the machine's load does not move, unlike
requests/s and CPU time: PAIRS alternating pairs of INSTR_ROUNDS rounds on
either backend; requests/s are then callgrind's, not llmlimitd's. Each
round is followed by INSTR_IDLE_S without requests, counted too: the
instructions per second of llmlimitd's periodic work, and the round's count
per request net of that (the periodic work, the same whatever the load, is
spread over fewer requests when the cluster answers more slowly). With
--profiles DIR the callgrind dumps are kept there (for callgrind_annotate),
named after the run.
Usage: python3 bench/control/bench_control.py [BUILD_DIR] [--backend memory|tigerbeetle]
       [--instructions [--profiles DIR]]
(default build, memory)"""

import contextlib
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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
INSTRUCTIONS = "--instructions" in sys.argv
if INSTRUCTIONS:
    sys.argv.remove("--instructions")
PROFILES = None  # --profiles DIR: where the callgrind dumps are kept
if "--profiles" in sys.argv:
    at = sys.argv.index("--profiles")
    PROFILES = os.path.abspath(sys.argv[at + 1])
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
# --instructions: rounds per run, their length, and an unmeasured warm-up
# first (the first requests fill caches and tables once).
INSTR_ROUNDS = 2
INSTR_DURATION_S = 10
INSTR_WARMUP_S = 3
# After each round, this long without requests: the instructions llmlimitd
# runs per second idle (its ticks, the backend's housekeeping, the control
# plane's watch), which a slower round spreads over fewer requests. The
# round's count net of that rate is the cost of the requests themselves.
INSTR_IDLE_S = 5
# A TigerBeetle operation's deadline under callgrind, where llmlimitd runs
# many times slower: a reserve queued behind the others must not turn into a
# 503 (the default is 2 s; a round with errors stops the bench).
INSTR_TB_DEADLINE_MS = 60000


def cpu_seconds(pid):
    """utime + stime of the process, all its threads (fields 14 and 15 of
    /proc/PID/stat; the fields after the command's closing parenthesis)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def load_bench(url, duration_s):
    """One `llmlimit bench` run against url: its JSON figures."""
    out = subprocess.run(
        [os.path.join(BUILD, "llmlimit"), "--url", url, "bench", "--connections",
         str(CONNECTIONS), "--duration", str(duration_s), "--mode", "reserve-complete",
         "--keys", "bench", "--json", "--quiet"],
        capture_output=True, text=True, check=True).stdout
    figures = json.loads(out)
    assert figures["errors"] == 0, figures
    return figures


class CallgrindServer(Server):
    """llmlimitd under valgrind's callgrind, its dumps in profiles (valgrind
    runs llmlimitd in its own process: the pid is llmlimitd's)."""

    def __init__(self, *args, profiles, name, **kwargs):
        super().__init__(*args, **kwargs)
        self.profiles = profiles
        self.name = name

    def command(self):
        return ["valgrind", "--tool=callgrind", "--quiet",
                "--callgrind-out-file=" + os.path.join(self.profiles, self.name + ".%p")
                ] + super().command()

    def callgrind(self, option):
        subprocess.run(["callgrind_control", option, str(self.process.pid)],
                       check=True, capture_output=True)

    def instructions_since_zero(self):
        """Dumps the counters (all threads) and returns the dump's total Ir."""
        before = set(glob.glob(os.path.join(self.profiles, self.name + ".*")))
        self.callgrind("-d")
        deadline = time.monotonic() + 60
        while True:
            new = set(glob.glob(os.path.join(self.profiles, self.name + ".*"))) - before
            for path in new:
                with open(path) as f:
                    for line in f:
                        if line.startswith(("totals:", "summary:")):
                            return int(line.split()[1])
            assert time.monotonic() < deadline, "no callgrind dump in %s" % self.profiles
            time.sleep(0.1)


RUN_NUMBER = [0]  # names each callgrind run's dumps


def bench_instructions(args, label, profiles):
    """INSTR_ROUNDS rounds on a fresh llmlimitd under callgrind, each
    followed by INSTR_IDLE_S without requests: a dict of lists, per round,
    of requests/s, instructions per request, instructions per second idle,
    and instructions per request net of the idle rate over the round."""
    RUN_NUMBER[0] += 1
    name = "callgrind.%s.%d.%s" % (BACKEND, RUN_NUMBER[0],
                                   "with" if "--control" in args else "without")
    extra = ["--tb-deadline-ms", str(INSTR_TB_DEADLINE_MS)] if BACKEND == "tigerbeetle" else []
    server = CallgrindServer(os.path.join(BUILD, "llmlimitd"), backend=BACKEND,
                             args=args + TB_ARGS + extra + ["--threads", "1"],
                             profiles=profiles, name=name).start()
    figures_of = {"rate": [], "ir": [], "idle": [], "net": []}
    try:
        server.put_limit({"key": "bench", "kind": "rolling", "capacity": 10**15,
                          "window_seconds": 60})
        load_bench(server.url, INSTR_WARMUP_S)
        for _ in range(INSTR_ROUNDS):
            server.callgrind("-z")
            started = time.monotonic()
            figures = load_bench(server.url, INSTR_DURATION_S)
            ir_round = server.instructions_since_zero()
            round_s = time.monotonic() - started
            server.callgrind("-z")
            started = time.monotonic()
            time.sleep(INSTR_IDLE_S)
            idle = server.instructions_since_zero() / (time.monotonic() - started)
            requests = max(figures["requests"], 1)
            figures_of["rate"].append(figures["requests_per_second"])
            figures_of["ir"].append(round(ir_round / requests))
            figures_of["idle"].append(round(idle))
            figures_of["net"].append(round((ir_round - idle * round_s) / requests))
            print("%-18s round: %d instructions per request (%d net of idle), %d requests"
                  " (%d/s under callgrind); idle %d instructions/s; load %.2f"
                  % (label, figures_of["ir"][-1], figures_of["net"][-1], figures["requests"],
                     figures["requests_per_second"], idle, os.getloadavg()[0]), flush=True)
        return figures_of
    finally:
        server.stop(timeout_s=120.0, check=False)
        server.cleanup()


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
            figures = load_bench(server.url, DURATION_S)
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


def main_instructions():
    """PAIRS alternating pairs under callgrind, on memory or a 3-replica
    TigerBeetle cluster: instructions per request with and without."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("bench_control: --instructions needs valgrind (apt-get install valgrind)")
    profiles = PROFILES or tempfile.mkdtemp(prefix="llmlimit-bench-callgrind-")
    os.makedirs(profiles, exist_ok=True)
    loads = [os.getloadavg()[0]]
    try:
        with contextlib.ExitStack() as stack:
            cluster = stack.enter_context(etcd_cluster.EtcdCluster(3))
            if BACKEND == "tigerbeetle":
                import tb_cluster
                tb_cluster._ping_tool = os.path.abspath(os.path.join(BUILD, "tb_ping"))
                tb = stack.enter_context(tb_cluster.Cluster(replicas=TB_REPLICAS))
                TB_ARGS.extend(["--tb-addresses", tb.address])
            runs = [("without --control", []), ("with --control", ["--control", cluster.url()])]
            results = {label: {"rate": [], "ir": [], "idle": [], "net": []} for label, _ in runs}
            for pair in range(PAIRS):
                for label, args in reversed(runs) if pair % 2 == 1 else runs:
                    for what, values in bench_instructions(args, label, profiles).items():
                        results[label][what] += values
                    loads.append(os.getloadavg()[0])
        names = {"ir": "instructions/request", "net": "instructions/request net of idle",
                 "idle": "instructions/s idle", "rate": "requests/s under callgrind"}
        for what in ("ir", "net", "idle", "rate"):
            for label in results:
                values = results[label][what]
                print("%-18s %s: %s  median %d" % (label, names[what], values,
                                                   statistics.median(values)))
            if what != "rate":
                print("%s with/without: %.3f" % (names[what], (
                    statistics.median(results["with --control"][what]) /
                    statistics.median(results["without --control"][what]))))
        print("backend %s%s; load average %.2f-%.2f over the run, now %s"
              % (BACKEND, " (%d replicas)" % TB_REPLICAS if BACKEND == "tigerbeetle" else "",
                 min(loads), max(loads), " ".join("%.2f" % x for x in os.getloadavg())))
    finally:
        if PROFILES is None:
            shutil.rmtree(profiles, ignore_errors=True)
        else:
            print("callgrind dumps in %s" % profiles)


def main():
    etcd_cluster.skip_unless_etcd("bench_control", exit_code=0)
    if INSTRUCTIONS:
        return main_instructions()
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
