"""Faults under load on a 3-replica TigerBeetle cluster (or --replicas N),
with the history checker recording throughout (TIGERBEETLE_BIN and the
tb_ping tool; without the binary, or without the memory for N replicas, it
exits 77, skipped).

Two llmlimitd front ends share the cluster; tests/checker/record.py's load
runs through both, each lease reserved through one front end and completed
or released through the other, every request recorded with its times. A
share of the reserves wait (wait_ms; some clients leave mid-wait); the
capacities stay as put (each front end keeps its own registry).
Two scenarios, each on a fresh cluster:

  primary  kill -9 of the primary: 503s only until the view change has
           settled (how long no reserve is decided is measured and
           printed); then the old primary is started again and rejoins;
  backup   the backup last in the replication ring (the one before the
           primary) frozen with SIGSTOP,
           then SIGCONT; then killed with kill -9, and restarted: not one
           503 while it is frozen or down.

Why two clusters: on 0.15.3 a replica that comes back more than its journal
(1024 requests: a second or two of this load) behind catches up by state
sync; losing the primary while a backup syncs stalls the cluster until it
is done, and a replica frozen during state sync was seen to panic
("incorrect alignment"). So the primary is lost on a fresh cluster, and the
backup frozen on another, before any replica has been restarted. A replica
starting takes the machine's cores for a moment; 503s while one restarts
are counted and printed, not failed. With the data files on the disk (no
room on tmpfs, as for 6 replicas here) the front ends wait 15 s for the
cluster (--tb-deadline-ms), not 2 s: a stall of a shared disk then makes a
slow answer, never a 503 that no fault caused.

A replica that dies of TigerBeetle 0.15.3's own known fault
(known_faults.txt: seen on 6 replicas while a restarted replica recovered)
is started again by the cluster's watcher (tb_cluster.py); the time until it
answers again is a "revival" window, where 503s are counted and printed,
not failed, like a restart's.

Then tests/checker/check.py must find no violation in either history (no
over-admission, every allowed reserve counted once, retries answered alike,
finalize answers right; a 503 is an unknown outcome), and each budget must
end charged exactly what the acknowledged completes spent: nothing lost,
nothing twice. --out PREFIX keeps the histories (PREFIX-primary.jsonl,
PREFIX-backup.jsonl)."""

import json
import os
import random
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "http"))
sys.path.insert(0, os.path.join(HERE, "..", "checker"))
from harness import Server, binary_from_argv, wait_until  # noqa: E402
from tb_cluster import Cluster, ping_tool_from_argv, skip_unless_binary  # noqa: E402

import check  # noqa: E402
import record  # noqa: E402

BINARY = binary_from_argv()
ping_tool_from_argv()

REPLICAS = 3  # --replicas N
FRONT_ENDS = 2
THREADS = 8
# TigerBeetle expires holds by its own clock, up to ~1.1 s after the
# deadline the checker computes from reserved_at (docs/tigerbeetle.md).
TOLERANCE_MS = 1500
WARM_S = 3.0
# After the replicas have moved to a new view, sessions need a resend or
# two (at most 1 s apart) to reach the new primary.
SETTLE_S = 3.0
VIEW_CHANGE_S_MAX = 30.0
FREEZE_S = 3.0
DOWN_S = 4.0
LOAD_S_MAX = 600.0
# The data files go to tmpfs when it has room: on a shared disk a replica's
# writes stall commits past the 2 s deadline now and then, which would be
# 503s no fault caused. A replica takes about 2.6 GiB of memory, its data
# file 1.1 GiB more.
TMPFS = "/dev/shm"
# Without room on tmpfs (6 replicas on this machine) the front ends wait this
# long for the cluster, so that a stall of the disk is a slow answer, not a
# 503 that no fault caused: a 503 still means a fault the test made.
DISK_DEADLINE_MS = 15000
TB_DEADLINE_MS = 2000  # --tb-deadline-ms by default
WAIT_SLACK_MS = 1000  # past the last attempt's round trip: the wait layer, the client
REPLICA_MEMORY = 2700 << 20
DATA_FILE = 1200 << 20
MEMORY_SPARE = 2 << 30  # for the front ends, the load and the system


class FrontEnd(Server):
    """llmlimitd on the tigerbeetle backend; started means ready (/readyz)."""

    def start(self):
        super().start()
        if not wait_until(lambda: self.request("GET", "/readyz")[0] == 200, 60):
            raise RuntimeError("llmlimitd did not reach the cluster:\n" + self.stderr_text())
        return self


def memory_available():
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024


def data_parent():
    """TMPFS when it and the machine have room for the replicas and their
    data files, else None (the temporary directory)."""
    try:
        stat = os.statvfs(TMPFS)
        available = memory_available()
    except (OSError, KeyError, ValueError):
        return None
    data = REPLICAS * DATA_FILE
    if (stat.f_bavail * stat.f_frsize >= data and
            available >= REPLICAS * REPLICA_MEMORY + data + MEMORY_SPARE):
        return TMPFS
    return None


class Faults:
    """Runs a fault schedule against a cluster. `marks` are the monotonic
    times (ns) each step began; `windows` where a 503 may be seen: an
    "outage" (the view change after the primary's loss: the cluster answers
    nothing and expires nothing), a "restart" (a replica starting) or a
    "revival" (a replica started again after TigerBeetle's known fault)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.marks = {}
        self.windows = []  # (from_ns, to_ns, what, kind)
        self.notes = []

    def mark(self, name):
        self.marks[name] = time.monotonic_ns()
        return self.marks[name]

    def restart(self, replica, name):
        started = self.mark(name + "_restart")
        self.cluster.start(replica)
        self.cluster.wait_answers(replica)
        back = self.mark(name + "_back")
        self.windows.append((started, back + int(SETTLE_S * 1e9),
                             "restart of replica %d" % replica, "restart"))
        time.sleep(SETTLE_S)

    def primary(self):
        view = self.cluster.view()
        primary = view % REPLICAS
        killed = self.mark("primary_killed")
        self.cluster.kill(primary)
        new_view = self.cluster.view(timeout_s=VIEW_CHANGE_S_MAX, after=view)
        seen = self.mark("view_seen")
        self.windows.append((killed, seen + int(SETTLE_S * 1e9),
                             "kill -9 of the primary %d" % primary, "outage"))
        self.notes.append("view %d -> %d, the new view seen by ping %.1f s after the kill"
                          % (view, new_view, (seen - killed) / 1e9))
        time.sleep(SETTLE_S)
        # The old primary is the new view's last in the ring unless the view
        # moved by more than one: then its absence slows every commit.
        if primary == (new_view % REPLICAS + 1) % REPLICAS:
            self.notes.append("the old primary is the new view's next in the ring")
        self.restart(primary, "primary")

    def backup(self):
        view = self.cluster.view()
        last = (view % REPLICAS + REPLICAS - 1) % REPLICAS
        self.mark("backup_frozen")
        self.cluster.pause(last)
        time.sleep(FREEZE_S)
        self.cluster.resume(last)
        self.mark("backup_thawed")
        time.sleep(SETTLE_S)
        self.mark("backup_killed")
        self.cluster.kill(last)
        time.sleep(DOWN_S)
        self.restart(last, "backup")
        self.notes.append("replica %d (the backup last in the ring of view %d) frozen %.0f s,"
                          " then killed and restarted after %.0f s" % (last, view, FREEZE_S,
                                                                      DOWN_S))
        if self.cluster.view() != view:
            self.notes.append("the view changed during the backup's faults")

    def run(self, scenario):
        time.sleep(WARM_S)
        getattr(self, scenario)()
        self.mark("end")

    def add_revivals(self):
        """The cluster's revivals from TigerBeetle's known fault, as windows."""
        for revival, (start, end) in zip(self.cluster.revivals,
                                         self.cluster.revival_windows(SETTLE_S)):
            what = "replica %d started again after TigerBeetle's known fault (%s)" % (
                revival["replica"], revival["fault"])
            self.windows.append((start, end, what, "revival"))
            self.notes.append(what)


def in_window(op, window):
    return window[0] <= op["end_ns"] and op["start_ns"] <= window[1]


def decisions(ops):
    """When each lease's reserve was first answered 200: the answers that
    needed the cluster (a retry of a decided lease is answered from the
    front end's cache)."""
    first = {}
    for op in ops:
        if op["op"] == "reserve" and op["status"] == 200:
            lease = op["lease_id"]
            first[lease] = min(first.get(lease, op["end_ns"]), op["end_ns"])
    return sorted(first.values())


def unavailability(ops, faults):
    """Figures of the primary's failure: its 503s by time after the kill, and
    the longest time in which no lease's reserve was decided around it."""
    killed = faults.marks["primary_killed"]
    outage = next(w for w in faults.windows if w[3] == "outage")
    unavailable = [op for op in ops if op["status"] == 503 and in_window(op, outage)]
    first = min((op["end_ns"] for op in unavailable), default=killed)
    last = max((op["end_ns"] for op in unavailable), default=killed)
    answered = decisions(ops)
    revivals = [w for w in faults.windows if w[3] == "revival"]
    gaps = [(b - a, a) for a, b in zip(answered, answered[1:]) if b > killed
            and not any(w[0] <= b and a <= w[1] for w in revivals)]
    gap, gap_from = max(gaps, default=(0, killed))
    return {"first_503_s": (first - killed) / 1e9, "last_503_s": (last - killed) / 1e9,
            "undecided_s": gap / 1e9, "undecided_from_s": (gap_from - killed) / 1e9,
            "view_seen_s": (faults.marks["view_seen"] - killed) / 1e9,
            "count_503": len(unavailable)}


def budget_charges(ops):
    """key -> what the acknowledged completes of allowed leases spent (each
    lease once), or None when a complete's outcome stayed unknown. A lease
    released with a 200, or whose complete was refused as already_finalized, was
    finalized without any complete of it: an unanswered complete of the same
    lease took no effect (had it, its retry would have been answered 200)."""
    by_lease = {}
    for op in ops:
        if op["op"] in ("reserve", "complete", "release"):
            by_lease.setdefault(op["lease_id"], []).append(op)
    budgets = [d["key"] for d in record.LIMITS if d["kind"] == "budget"]
    charged = {key: 0 for key in budgets}
    for lease_ops in by_lease.values():
        # A lease is admitted once; a denial before it may not have been
        # recorded (it yielded to a waiter, or it was a retry that joined a wait).
        reserves = [op for op in lease_ops if op["op"] == "reserve" and op["status"] == 200
                    and op["body"]["allowed"]]
        if not reserves:
            continue
        requirements = {r["key"]: r["amount"] for r in reserves[0]["requirements"]}
        completes = sorted((op for op in lease_ops if op["op"] == "complete"),
                           key=lambda op: op["start_ns"])
        done = [op for op in completes if op["status"] == 200]
        if not done:
            settled = any(op["status"] == 409 and op["body"].get("error") == "already_finalized"
                          for op in completes) or any(
                op["op"] == "release" and op["status"] == 200 for op in lease_ops)
            if any(record.unknown(op) for op in completes) and not settled:
                return None
            continue
        actuals = {a["key"]: a["actual_amount"] for a in done[0]["actuals"]}
        for key in budgets:
            if key in requirements:
                charged[key] += actuals.get(key, requirements[key])
    return charged


def final_usage(ops, key):
    reads = [op for op in ops if op["op"] == "usage" and op["key"] == key and op["status"] == 200]
    return reads[-1]["body"] if reads else None


def deadline_args(cluster):
    """--tb-deadline-ms for the front ends: the default (2 s) with the data
    on tmpfs, DISK_DEADLINE_MS with it on the disk."""
    on_tmpfs = os.path.commonpath([cluster.directory, TMPFS]) == TMPFS
    return [] if on_tmpfs else ["--tb-deadline-ms", str(DISK_DEADLINE_MS)]


def record_with_faults(cluster, seed, scenario):
    fronts = [FrontEnd(BINARY, backend="tigerbeetle",
                       args=["--tb-addresses", cluster.address, "--tb-sessions", "4"]
                       + deadline_args(cluster))
              for _ in range(FRONT_ENDS)]
    try:
        for front in fronts:
            front.start()
            for definition in record.LIMITS:
                status, _, body = front.put_limit(definition)
                if status != 200:
                    raise RuntimeError("put_limit %s: %s %s" % (definition["key"], status, body))
        recorder = record.Recorder(fronts, seed, THREADS, LOAD_S_MAX, retry_unavailable=True)
        offsets = [record.wall_minus_mono_ns()]
        load = threading.Thread(target=recorder.run)
        load.start()
        faults = Faults(cluster)
        try:
            faults.run(scenario)
        finally:
            recorder.stopping.set()
            load.join()
        offsets.append(record.wall_minus_mono_ns())
        faults.add_revivals()
        return recorder.ops, faults, offsets
    finally:
        for front in fronts:
            front.__exit__(None, None, None)


def show_logs(cluster, lines=6):
    """From each replica's log its warnings and errors, then its end, so a
    failed run says why."""
    for replica in cluster.replicas:
        with open(replica.log_file, errors="replace") as log:
            text = log.read().splitlines()
        notable = [line for line in text if "warning" in line or "error" in line
                   or "panic" in line or "sync" in line]
        print("--- replica %d log (%d notable lines, the last %d; its end):"
              % (replica.index, len(notable), lines))
        for line in notable[-lines:] + ["..."] + text[-lines:]:
            print("    " + line[:300])


def report_faults(ops, faults):
    """Prints the steps and the 503s of each window; returns failures."""
    failures = []
    start = min(faults.marks.values())
    for note in faults.notes:
        print("  " + note)
    print("  steps (s): " + ", ".join(
        "%s %.1f" % (name, (at - start) / 1e9) for name, at in faults.marks.items()))
    for window in faults.windows:
        print("  %s: %d 503s (window %.1f-%.1f s)" % (
            window[2], sum(1 for op in ops if op["status"] == 503 and in_window(op, window)),
            (window[0] - start) / 1e9, (window[1] - start) / 1e9))
    unexpected = [op for op in ops if op["status"] == 503
                  and not any(in_window(op, window) for window in faults.windows)]
    for op in unexpected[:5]:
        failures.append("a 503 no fault explains: %s of %s at %.1f s" % (
            op["op"], op.get("lease_id", op.get("key")), (op["end_ns"] - start) / 1e9))
    if "primary_killed" in faults.marks:
        figures = unavailability(ops, faults)
        print("  kill -9 of the primary: 503s answered from %.1f s to %.1f s after the kill (%d);"
              " no reserve decided for %.1f s (from %.1f s)"
              % (figures["first_503_s"], figures["last_503_s"], figures["count_503"],
                 figures["undecided_s"], figures["undecided_from_s"]))
        print("RESULT " + json.dumps(figures))
        if figures["undecided_s"] > VIEW_CHANGE_S_MAX:
            failures.append("unavailable for %.1f s" % figures["undecided_s"])
    return failures


def report_history(ops, violations):
    """Prints the checker's verdict and the budgets' ends; returns failures."""
    failures = []
    counts = record.summary(ops)
    print("  " + " ".join("%s=%d" % item for item in counts.items()))
    if counts["allowed"] == 0 or counts["denied"] == 0 or counts["late_commits"] == 0:
        failures.append("the history did not exercise the model (allowed, denied, late commits)")
    print("  %d violation(s)" % violations.count())
    violations.report(sys.stdout)
    charged = budget_charges(ops)
    if charged is None:
        failures.append("a complete's outcome stayed unknown")
    for key, spent in (charged or {}).items():
        usage = final_usage(ops, key)
        seen = None if usage is None else (usage["reserved"], usage["used"] + usage["debt"])
        print("  %s: acknowledged completes spent %d; at the end reserved %s, charged %s"
              % (key, spent, seen and seen[0], seen and seen[1]))
        if seen != (0, spent):
            failures.append("%s charged %s at the end, the completes spent %d" % (key, seen, spent))
    return failures


def run_scenario(scenario, seed, out):
    """One fresh cluster, the load through two front ends, the scenario's
    faults, then the checks. Returns the failures."""
    print("%s: seed %d, %d front ends, %d threads, %d replicas"
          % (scenario, seed, FRONT_ENDS, THREADS, REPLICAS))
    sys.stdout.flush()
    with Cluster(replicas=REPLICAS, parent=data_parent()) as cluster:
        print("  front ends: %s" % (" ".join(deadline_args(cluster)) or
                                    "--tb-deadline-ms 2000 (the default)"))
        try:
            ops, faults, offsets = record_with_faults(cluster, seed, scenario)
        except BaseException:
            show_logs(cluster)
            raise
    # A waiter's last attempt is one round trip, at most the front ends' deadline.
    deadline_ms = DISK_DEADLINE_MS if deadline_args(cluster) else TB_DEADLINE_MS
    header = {"type": "header", "limits": record.LIMITS, "wall_minus_mono_ns": offsets,
              "tolerance_ms": TOLERANCE_MS, "wait_tolerance_ms": deadline_ms + WAIT_SLACK_MS,
              "seed": seed, "backend": "tigerbeetle",
              "unavailable_ok": True,
              "keep_rounding_ms": record.KEEP_ROUNDING_MS["tigerbeetle"],
              # the cluster expires nothing while it changes views
              "outages": [[w[0], w[1]] for w in faults.windows if w[3] == "outage"],
              "fault_marks": faults.marks}
    violations = check.check(header, ops)
    failures = report_faults(ops, faults) + report_history(ops, violations)
    if out or failures or violations.count():
        path = ("%s-%s.jsonl" % (out, scenario) if out else
                tempfile.mkstemp(prefix="llmlimit-history-%s-" % scenario, suffix=".jsonl")[1])
        with open(path, "w") as f:
            for line in [header] + ops:
                f.write(json.dumps(line) + "\n")
        print("  history kept in %s" % path)
    for failure in failures:
        print("FAIL %s: %s" % (scenario, failure))
    sys.stdout.flush()
    return failures + ["%d violation(s)" % violations.count()] * (violations.count() > 0)


def main(argv):
    global REPLICAS
    skip_unless_binary("tigerbeetle replicas' faults with the history checker", exit_code=77)
    options = dict(zip(argv[0::2], argv[1::2]))
    if len(argv) % 2 or set(options) - {"--out", "--replicas"}:
        print("usage: test_tb_replicas_checker.py [--replicas N] [--out PREFIX]")
        return 2
    out = options.get("--out")
    REPLICAS = int(options.get("--replicas", REPLICAS))
    needed = REPLICAS * REPLICA_MEMORY + MEMORY_SPARE
    if memory_available() < needed:
        print("SKIPPED: %d replicas need %.1f GiB of memory available, this machine has %.1f"
              % (REPLICAS, needed / (1 << 30), memory_available() / (1 << 30)))
        return 77
    # A termination (a test timeout) still removes the clusters: their data
    # files may be on tmpfs, which is memory.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    print("data files in %s" % (data_parent() or tempfile.gettempdir()))
    failures = []
    for scenario in ("primary", "backup"):
        failures += run_scenario(scenario, random.randrange(1 << 30), out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
