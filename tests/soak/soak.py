"""Soak test: runs mixed load against the real llmlimitd for a configurable
time and watches the process from /proc.

Load: reserve / complete / release on rolling, concurrency and budget limits
with short windows and timeouts (so holds expire all the time), batches,
idempotent retries, usage and admin reads; an admin thread raises, lowers
(into `decreasing`), deletes and recreates limits and, with --test-clock,
moves the server clock forward so budget periods roll over; the server is
restarted (SIGTERM, and kill -9 for durable backends) a few times.

Every few seconds it samples the server's resident memory (VmRSS) and open
file descriptors. It fails if, after a warm-up, either grows beyond its bound
within one server lifetime, or if any answer is not one of the documented ones
(allowed, a capacity denial, limit_decreasing, unknown_limit_key for a limit
the admin thread deleted, exceeds_capacity after a decrease, reconciled=false
after a memory restart, commit_after_expiry warnings).

Usage: soak.py --binary build/llmlimitd [--backend memory|sqlite] [--seconds 600]
               [--threads 4] [--restarts 2] [--report FILE]
"""

import argparse
import json
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server  # noqa: E402

SAMPLE_S = 5.0
WARMUP_FRACTION = 0.3  # of each server lifetime; growth is measured after it
RSS_GROWTH_KIB_MAX = 8 * 1024  # after warm-up, within one lifetime
RSS_GROWTH_FRACTION_MAX = 0.10  # ... or this share of the warm RSS, whichever is larger
# Caches that may still be filling after the warm-up, by backend: the sqlite
# write connection's page cache (SQ_CACHE_KIB in src/backend/sqlite/sq_bounds.h).
CACHE_KIB = {"memory": 0, "sqlite": 65536}
FD_GROWTH_MAX = 8
ERROR_EXAMPLES_MAX = 20
RESTART_S_MAX = 10.0  # a restart slower than this is a finding (docs/configuration.md)
START_WAIT_S = 300.0  # but wait this long before giving up, to measure it
LEASE_RETENTION_S = 20  # small, so the lease cache reaches its steady state early
LEASE_CACHE_MAX = 50000
ADMIN_INTERVAL_S = 1.0
CLOCK_JUMP_MS = 6 * 3600 * 1000  # every admin round with probability CLOCK_JUMP_P
CLOCK_JUMP_P = 0.05

STATIC_LIMITS = [
    {"key": "soak:openai:rpm", "kind": "rolling", "capacity": 400, "window_seconds": 2},
    {"key": "soak:openai:tpm", "kind": "rolling", "capacity": 400000, "window_seconds": 3,
     "overage": "debt"},
    {"key": "soak:openai:tpm:strict", "kind": "rolling", "capacity": 200000,
     "window_seconds": 1, "overage": "deny"},
    {"key": "soak:llama:concurrency", "kind": "concurrency", "capacity": 8,
     "timeout_seconds": 1},
    {"key": "soak:team:usd:day", "kind": "budget", "capacity": 50000000, "period": "day",
     "timeout_seconds": 5, "unit": "usd_micros"},
    {"key": "soak:org:usd:month", "kind": "budget", "capacity": 10 ** 15, "period": "month",
     "timeout_seconds": 5, "unit": "usd_micros"},
    {"key": "soak:team:usd:week", "kind": "budget", "capacity": 20000000, "period": "week",
     "timeout_seconds": 5, "unit": "usd_micros"},
]
CHURN_KEY = "soak:churn:rpm"  # deleted and recreated by the admin thread
CHURN_LIMIT = {"key": CHURN_KEY, "kind": "rolling", "capacity": 1000, "window_seconds": 2}
KEYS = [d["key"] for d in STATIC_LIMITS] + [CHURN_KEY]
DOCUMENTED_ERRORS = ("limit_decreasing:", "unknown_limit_key", "exceeds_capacity:")


def amount_for(key, rng):
    if key.endswith(":rpm"):
        return 1
    if ":tpm" in key:
        return rng.randint(100, 4000)
    if key.endswith(":concurrency"):
        return 1
    return rng.randint(1000, 200000)


def process_sample(pid):
    rss_kib = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return rss_kib, len(os.listdir("/proc/%d/fd" % pid))


def file_sizes(path):
    """{file name: bytes} of the data directory."""
    sizes = {}
    for name in os.listdir(path):
        try:
            sizes[name] = os.path.getsize(os.path.join(path, name))
        except OSError:
            pass
    return sizes


class Soak:
    def __init__(self, args):
        self.args = args
        self.server_args = ["--lease-retention-seconds", str(LEASE_RETENTION_S),
                            "--lease-cache-max", str(LEASE_CACHE_MAX)]
        if args.test_clock:
            self.server_args.append("--test-clock")
        self.server = Server(os.path.abspath(args.binary), backend=args.backend,
                             args=self.server_args)
        self.counts = Counter()
        self.errors = []
        self.samples = []  # (elapsed_s, lifetime, rss_kib, fds, data_bytes, ops)
        self.lifetime = 0
        self.restart_seconds = []
        self.file_bytes_max = {}  # largest size seen of each data-dir file
        self.stop = threading.Event()
        self.gate = threading.Condition()
        self.paused = False
        self.busy = 0
        self.count_lock = threading.Lock()

    # -- bookkeeping ----------------------------------------------------------

    def count(self, name, n=1):
        with self.count_lock:
            self.counts[name] += n

    def error(self, what, status, body):
        with self.count_lock:
            self.counts["errors"] += 1
            if len(self.errors) < ERROR_EXAMPLES_MAX:
                self.errors.append("%s: %s %s" % (what, status, str(body)[:300]))

    def epoch(self):
        """Changes whenever the server may have forgotten leases: a restart, or
        a clock jump (begun or finished) past the lease retention."""
        with self.count_lock:
            return (self.lifetime, self.counts["clock_jumps_begun"], self.counts["clock_jump_ok"])

    def enter(self):
        """Workers call this around each operation, so a restart waits for
        in-flight requests and no request meets a stopped server."""
        with self.gate:
            while self.paused:
                self.gate.wait()
            self.busy += 1

    def leave(self):
        with self.gate:
            self.busy -= 1
            self.gate.notify_all()

    def request(self, method, path, body=None):
        self.enter()
        try:
            return self.server.request(method, path, body)
        except OSError as error:
            return None, {}, str(error)
        finally:
            self.leave()

    # -- answers ----------------------------------------------------------------

    def check_reserve(self, status, body):
        """Counts a reserve answer; returns "allowed", "capacity" (a denial
        recorded against the lease), "other" (a documented error) or None."""
        if status != 200 or not isinstance(body, dict):
            self.error("reserve", status, body)
            return None
        if body["allowed"]:
            self.count("reserve_allowed")
            return "allowed"
        error = body.get("error", "")
        if error == "":
            self.count("reserve_denied_capacity")
            return "capacity"
        if error.startswith(DOCUMENTED_ERRORS):
            self.count("reserve_denied_" + error.split(":")[0])
            return "other"
        self.error("reserve", status, body)
        return None

    def check_complete(self, status, body):
        if status != 200 or not isinstance(body, dict) or not body.get("ok"):
            self.error("complete", status, body)
            return
        self.count("complete_ok" if body.get("reconciled") else "complete_unreconciled")
        for warning in body.get("warnings") or []:
            self.count("warning_" + warning.split(":")[0])

    # -- load ---------------------------------------------------------------------

    def lease_cycle(self, rng):
        keys = rng.sample(KEYS, rng.randint(1, 3))
        requirements = [{"key": k, "amount": amount_for(k, rng)} for k in keys]
        lease_id = str(uuid.uuid4())
        body = {"lease_id": lease_id, "requirements": requirements}
        epoch = self.epoch()
        status, _, reply = self.request("POST", "/v1/reserve", body)
        outcome = self.check_reserve(status, reply)
        if outcome in ("allowed", "capacity") and rng.random() < 0.05:
            # A retry with the same lease_id gets the same answer (unless a
            # restart of the memory backend, or a clock jump past the lease
            # retention, forgot the lease in between).
            status, _, again = self.request("POST", "/v1/reserve", body)
            same = status == 200 and isinstance(again, dict) and again.get("allowed") == (
                outcome == "allowed")
            if not same and epoch == self.epoch():
                self.error("reserve retry", status, again)
            self.count("reserve_retries")
        if outcome != "allowed":
            return
        roll = rng.random()
        if roll < 0.6:
            actuals = [{"key": r["key"], "actual_amount": rng.randint(0, r["amount"] * 2)}
                       for r in requirements if rng.random() < 0.8]
            status, _, reply = self.request("POST", "/v1/complete",
                                            {"lease_id": lease_id, "actuals": actuals})
            self.check_complete(status, reply)
        elif roll < 0.85:
            status, _, reply = self.request("POST", "/v1/release", {"lease_id": lease_id})
            if status != 200:
                self.error("release", status, reply)
            else:
                self.count("release_ok")
        else:
            self.count("abandoned")

    def batch_cycle(self, rng):
        items = []
        for _ in range(rng.randint(2, 8)):
            key = rng.choice(KEYS)
            items.append({"lease_id": str(uuid.uuid4()),
                          "requirements": [{"key": key, "amount": amount_for(key, rng)}]})
        status, _, reply = self.request("POST", "/v1/reserve/batch", {"requests": items})
        if status != 200 or not isinstance(reply, dict) or len(reply.get("results", [])) != len(
                items):
            self.error("reserve batch", status, reply)
            return
        done = []
        for item, result in zip(items, reply["results"]):
            if self.check_reserve(200, result) == "allowed":
                done.append({"lease_id": item["lease_id"], "actuals": []})
        if done:
            status, _, reply = self.request("POST", "/v1/complete/batch", {"requests": done})
            if status != 200 or not isinstance(reply, dict):
                self.error("complete batch", status, reply)
                return
            for result in reply.get("results", []):
                self.check_complete(200, result)

    def read_cycle(self, rng):
        roll = rng.random()
        if roll < 0.8:
            key = rng.choice(KEYS)
            status, _, reply = self.request("GET", "/v1/usage/" + key.replace(":", "%3A"))
            if status == 404 and key == CHURN_KEY:
                self.count("usage_unknown_churn")
            elif status != 200:
                self.error("usage " + key, status, reply)
            else:
                self.count("usage_ok")
        elif roll < 0.9:
            self.expect_ok("metrics", *self.request("GET", "/metrics"))
        else:
            self.expect_ok("limits", *self.request("GET", "/v1/admin/limits"))

    def expect_ok(self, what, status, _headers, reply):
        if status == 200:
            self.count(what + "_ok")
        else:
            self.error(what, status, reply)

    def worker(self, index):
        rng = random.Random(self.args.seed * 100 + index)
        while not self.stop.is_set():
            roll = rng.random()
            if roll < 0.75:
                self.lease_cycle(rng)
            elif roll < 0.85:
                self.batch_cycle(rng)
            else:
                self.read_cycle(rng)
            self.count("cycles")

    # -- admin ----------------------------------------------------------------------

    def put(self, definition):
        status, _, reply = self.request("PUT", "/v1/admin/limits", definition)
        if status != 200:
            self.error("put " + definition["key"], status, reply)
        else:
            self.count("admin_put_" + reply.get("status", "?"))

    def admin_round(self, rng):
        roll = rng.random()
        if roll < 0.4:
            base = rng.choice(STATIC_LIMITS[:4])
            factor = rng.choice([0.25, 0.5, 1.0, 1.0, 2.0])
            self.put(dict(base, capacity=max(1, int(base["capacity"] * factor))))
        elif roll < 0.6:
            base = rng.choice(STATIC_LIMITS[4:])
            self.put(dict(base, capacity=int(base["capacity"] * rng.choice([0.5, 1.0, 2.0]))))
        elif roll < 0.8:  # the churn limit flips between deleted and present
            status, _, reply = self.request("DELETE", "/v1/admin/limits/"
                                            + CHURN_KEY.replace(":", "%3A"))
            if status == 200:
                self.count("admin_delete")
            elif status == 404:
                self.put(CHURN_LIMIT)
            else:
                self.error("delete", status, reply)
        else:
            for base in STATIC_LIMITS:  # back to the documented capacities
                self.put(base)
        if self.args.test_clock and rng.random() < CLOCK_JUMP_P:
            self.count("clock_jumps_begun")
            self.expect_ok("clock_jump", *self.request("POST", "/v1/admin/clock",
                                                       {"advance_ms": CLOCK_JUMP_MS}))

    def admin(self):
        rng = random.Random(self.args.seed)
        while not self.stop.wait(ADMIN_INTERVAL_S):
            self.admin_round(rng)

    # -- server lifetimes and sampling --------------------------------------------------

    def restart(self, index):
        with self.gate:
            self.paused = True
            while self.busy:
                self.gate.wait()
        try:
            hard = self.args.backend != "memory" and index % 2 == 1
            if hard:
                self.server.kill()
                self.count("restarts_kill9")
            else:
                code = self.server.stop()
                if code != 0:
                    self.error("SIGTERM exit", code, self.server.stderr_text()[-500:])
                self.count("restarts_sigterm")
            started = time.monotonic()
            self.server.start()
            self.restart_seconds.append(round(time.monotonic() - started, 2))
            self.lifetime += 1
        finally:
            with self.gate:
                self.paused = False
                self.gate.notify_all()

    def sample(self, started):
        with self.gate:  # not while a restart swaps the process
            while self.paused:
                self.gate.wait()
            pid = self.server.process.pid
            rss_kib, fds = process_sample(pid)
        sizes = file_sizes(self.server.data_dir)
        self.samples.append((round(time.monotonic() - started), self.lifetime, rss_kib, fds,
                             sum(sizes.values()), self.counts["cycles"]))
        for name, size in sizes.items():
            self.file_bytes_max[name] = max(size, self.file_bytes_max.get(name, 0))

    def run(self):
        self.server.start()
        for definition in STATIC_LIMITS + [CHURN_LIMIT]:
            self.put(definition)
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True)
                   for i in range(self.args.threads)]
        threads.append(threading.Thread(target=self.admin, daemon=True))
        for t in threads:
            t.start()
        started = time.monotonic()
        lifetime_s = self.args.seconds / (self.args.restarts + 1)
        next_restart = started + lifetime_s
        restarts = 0
        while time.monotonic() - started < self.args.seconds:
            time.sleep(SAMPLE_S)
            self.sample(started)
            if restarts < self.args.restarts and time.monotonic() >= next_restart:
                restarts += 1
                self.restart(restarts)
                next_restart += lifetime_s
        self.stop.set()
        for t in threads:
            t.join(30)
        self.sample(started)
        code = self.server.stop()
        if code != 0:
            self.error("final SIGTERM exit", code, self.server.stderr_text()[-500:])
        self.server.cleanup()


def growth_findings(samples, cache_kib):
    """Per server lifetime: growth of RSS and descriptors after the warm-up."""
    findings, figures = [], []
    for lifetime in sorted({s[1] for s in samples}):
        own = [s for s in samples if s[1] == lifetime]
        if len(own) < 4:
            continue
        warm = own[int(len(own) * WARMUP_FRACTION):]
        rss_warm, fds_warm = warm[0][2], max(s[3] for s in warm[:2])
        rss_end = warm[-1][2]
        rss_max = max(s[2] for s in warm)
        fds_max = max(s[3] for s in warm)
        allowed_kib = max(RSS_GROWTH_KIB_MAX, rss_warm * RSS_GROWTH_FRACTION_MAX) + cache_kib
        figures.append({"lifetime": lifetime, "rss_warm_kib": rss_warm, "rss_end_kib": rss_end,
                        "rss_max_kib": rss_max, "fds_warm": fds_warm, "fds_max": fds_max,
                        "seconds": round(own[-1][0] - own[0][0])})
        if rss_max - rss_warm > allowed_kib:
            findings.append("lifetime %d: RSS grew from %d to %d KiB after warm-up (bound %d)"
                            % (lifetime, rss_warm, rss_max, allowed_kib))
        if fds_max - fds_warm > FD_GROWTH_MAX:
            findings.append("lifetime %d: descriptors grew from %d to %d after warm-up"
                            % (lifetime, fds_warm, fds_max))
    return findings, figures


def report(soak, args, findings, figures, seconds):
    samples = soak.samples
    ops = soak.counts["cycles"]
    summary = {
        "backend": args.backend, "seconds": round(seconds), "threads": args.threads,
        "cycles": ops, "cycles_per_s": round(ops / max(seconds, 1)),
        "rss_start_kib": samples[0][2], "rss_end_kib": samples[-1][2],
        "rss_max_kib": max(s[2] for s in samples),
        "fds_start": samples[0][3], "fds_end": samples[-1][3],
        "fds_max": max(s[3] for s in samples),
        "data_dir_bytes_max": max(s[4] for s in samples),
        "data_dir_bytes_per_cycle": round(samples[-1][4] / max(ops, 1)),
        "file_bytes_max": soak.file_bytes_max,
        "errors": soak.counts["errors"], "restart_seconds": soak.restart_seconds,
        "lifetimes": figures,
        "counts": dict(sorted(soak.counts.items())),
    }
    print(json.dumps(summary, indent=1))
    print("samples (s, lifetime, rss_kib, fds, data_bytes, cycles): %s" % json.dumps(samples))
    for line in soak.errors:
        print("error example: " + line)
    for line in findings:
        print("FAIL " + line)
    if args.report:
        with open(args.report, "a") as f:
            f.write(json.dumps(summary) + "\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.environ.get("LLMLIMITD", "build/llmlimitd"))
    parser.add_argument("--backend", default="memory")
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-test-clock", dest="test_clock", action="store_false",
                        help="do not move the server clock (for servers without --test-clock)")
    parser.add_argument("--report", default=None, help="append the summary (JSON) to FILE")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    harness.START_TIMEOUT_S = START_WAIT_S
    soak = Soak(args)
    started = time.monotonic()
    findings = []
    try:
        soak.run()
    except harness.ServerError as error:
        findings.append("the server did not come back: %s" % str(error)[-500:])
    finally:
        soak.stop.set()
        soak.server.cleanup()
    growth, figures = growth_findings(soak.samples, CACHE_KIB.get(args.backend, 0))
    findings += growth
    slow = [s for s in soak.restart_seconds if s > RESTART_S_MAX]
    if slow:
        findings.append("restarts took %s s (bound %.0f s)" % (slow, RESTART_S_MAX))
    if soak.counts["errors"]:
        findings.append("%d answers outside the documented ones" % soak.counts["errors"])
    if soak.counts["reserve_allowed"] == 0 or soak.counts["reserve_denied_capacity"] == 0:
        findings.append("the load never reached the limits (no allowed or no denied reserve)")
    report(soak, args, findings, figures, time.monotonic() - started)
    print("soak %s" % ("FAILED" if findings else "passed"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
