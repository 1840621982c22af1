"""HTTP tests of the tigerbeetle backend: the real llmlimitd in front of a
real TigerBeetle cluster (TIGERBEETLE_BIN; without it the file prints
SKIPPED and exits 77, which ctest reports as skipped).

- two llmlimitd on one cluster: either completes or releases the other's
  leases, and a shared limit is never over-admitted;
- kill -9 of TigerBeetle under load: reserves in the gap answer 503
  promptly, clients retrying with the same lease id end with exactly one
  reservation each, nothing is double-counted, llmlimitd recovers alone;
- differential: one seeded workload against memory and tigerbeetle, every
  decision compared (all within one window: TigerBeetle keeps its own
  clock, so nothing is let expire)."""

import os
import random
import signal
import sys
import threading
import time
import unittest
import uuid
import warnings

# The harness keeps one keep-alive connection per thread; threads that end
# leave theirs to the collector, which is fine here.
warnings.simplefilter("ignore", ResourceWarning)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server, binary_from_argv, wait_until  # noqa: E402
from tb_cluster import Cluster, metric, skip_unless_binary  # noqa: E402

BINARY = binary_from_argv()
skip_unless_binary("tigerbeetle HTTP tests")

# A 503 while TigerBeetle is down must come within PROMPT_S: the 2 s item
# deadline with room for a busy machine, and well inside DOWN_S, how long
# the faults below keep TigerBeetle away, so that an answer that waited for
# TigerBeetle's return can never pass for a prompt one.
PROMPT_S = 8.0
DOWN_S = 15.0


class FrontEnd(Server):
    """llmlimitd on the tigerbeetle backend; started means ready (/readyz)."""

    def start(self):
        super().start()
        if not wait_until(lambda: self.request("GET", "/readyz")[0] == 200, 30):
            raise RuntimeError("llmlimitd did not reach the cluster:\n" + self.stderr_text())
        return self

    def stop(self, sig=signal.SIGTERM, timeout_s=30.0, check=True):
        """As the harness's (a graceful stop must exit 0), with longer to drain:
        a front end may wait for its cluster."""
        return super().stop(sig, timeout_s, check)


def front_end(cluster, sessions=2):
    return FrontEnd(BINARY, backend="tigerbeetle",
                    args=["--tb-addresses", cluster.address, "--tb-sessions", str(sessions)])


def lease():
    return str(uuid.uuid4())


def put_all(servers, definitions):
    for server in servers:
        for d in definitions:
            status, _, body = server.put_limit(d)
            assert status == 200, (status, body)


class TwoFrontEnds(unittest.TestCase):
    def test_each_completes_and_releases_the_others_leases(self):
        """A lease reserved on one llmlimitd is completed or released on the other."""
        with Cluster() as cluster, front_end(cluster) as a, front_end(cluster) as b:
            put_all([a, b], [
                {"key": "tpm", "kind": "rolling", "capacity": 1000, "window_seconds": 600},
                {"key": "slots", "kind": "concurrency", "capacity": 2, "timeout_seconds": 600},
            ])
            one = lease()
            status, _, body = a.reserve(one, {"tpm": 300, "slots": 1})
            self.assertTrue(body["allowed"], body)
            status, _, body = b.complete(one, {"tpm": 100})
            self.assertEqual(status, 200, body)
            self.assertTrue(body["reconciled"], body)
            for server in (a, b):
                _, _, usage = server.usage("tpm")
                self.assertEqual(usage["used"], 100)
                self.assertEqual(usage["reserved"], 0)
                _, _, usage = server.usage("slots")
                self.assertEqual(usage["reserved"], 0)
            status, _, body = a.release(one)
            self.assertEqual(status, 409, body)
            two = lease()
            self.assertTrue(b.reserve(two, {"slots": 1})[2]["allowed"])
            self.assertEqual(a.release(two)[0], 200)
            self.assertEqual(b.usage("slots")[2]["reserved"], 0)
            self.assertEqual(b.complete(two, {"slots": 1})[0], 409)

    def test_shared_limit_never_over_admitted(self):
        """40 concurrent reserves through two llmlimitd admit exactly the capacity."""
        with Cluster() as cluster, front_end(cluster) as a, front_end(cluster) as b:
            put_all([a, b], [{"key": "gpu", "kind": "concurrency", "capacity": 5,
                              "timeout_seconds": 600}])
            results = [None] * 40
            barrier = threading.Barrier(40)

            def run(i):
                barrier.wait()
                server = a if i % 2 == 0 else b
                results[i] = server.reserve(lease(), {"gpu": 1})

            threads = [threading.Thread(target=run, args=(i,)) for i in range(40)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            allowed = [r for r in results if r[0] == 200 and r[2]["allowed"]]
            self.assertEqual(len(allowed), 5, results)
            self.assertEqual(a.usage("gpu")[2]["reserved"], 5)


def load_through_fault(test, server, fault, threads_count=16):
    """Reserves from threads_count clients (each lease retried with the same id
    while the answer is 503) while fault() runs, then checks: every 503 came
    promptly, no client hung, every lease was allowed once and is held once."""
    stop = threading.Event()
    outcomes = []   # (lease, status, allowed): one per lease
    slow_503 = []   # seconds of 503 answers that were not prompt
    errors = []
    lock = threading.Lock()

    def client(index):
        while not stop.is_set():
            lease_id = "load-%d-%s" % (index, uuid.uuid4().hex[:12])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                started = time.monotonic()
                try:
                    status, _, body = server.reserve(lease_id, {"tokens": 7})
                except Exception as error:  # noqa: BLE001 (a test reports all)
                    with lock:
                        errors.append(repr(error))
                    time.sleep(0.05)
                    continue
                took = time.monotonic() - started
                if status == 503:
                    if took > PROMPT_S:
                        with lock:
                            slow_503.append(took)
                    time.sleep(0.05)
                    continue  # unknown outcome: the same lease id again
                with lock:
                    outcomes.append((lease_id, status, body.get("allowed")))
                break

    workers = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(threads_count)]
    for w in workers:
        w.start()
    time.sleep(2.0)
    recovered = fault()
    time.sleep(3.0)
    stop.set()
    for w in workers:
        w.join(120)
    test.assertFalse(any(w.is_alive() for w in workers), "a client hung")
    test.assertEqual(errors, [])
    test.assertEqual(slow_503, [], "503s must be prompt")
    leases = [o[0] for o in outcomes]
    test.assertEqual(len(leases), len(set(leases)))
    test.assertTrue(all(o[1] == 200 and o[2] for o in outcomes), outcomes[:5])
    _, _, usage = server.usage("tokens")
    # every lease held exactly once: nothing lost, nothing twice
    test.assertEqual(usage["reserved"], 7 * len(outcomes))
    print("  %d leases, TigerBeetle back after %.1f s" % (len(outcomes), recovered))


TOKENS = [{"key": "tokens", "kind": "rolling", "capacity": 10 ** 12, "window_seconds": 3600},
          {"key": "probe", "kind": "rolling", "capacity": 10 ** 12, "window_seconds": 3600}]


class ClusterMetrics(unittest.TestCase):
    def test_metrics_show_the_cluster(self):
        """/metrics shows the sessions, the round trips and the view of the cluster."""
        with Cluster() as cluster, front_end(cluster, sessions=2) as server:
            put_all([server], TOKENS)
            for _ in range(20):
                self.assertTrue(server.reserve(lease(), {"tokens": 1})[2]["allowed"])
            self.assertEqual(metric(server, "llmlimit_tigerbeetle_sessions_ready"), 2)
            batches = metric(server, "llmlimit_backend_batches_total")
            self.assertGreaterEqual(batches, 20)  # one reserve at a time: one request each
            trips_us = metric(server, "llmlimit_tigerbeetle_round_trip_microseconds_total")
            self.assertGreater(trips_us, 0)
            self.assertLess(trips_us / batches, 1e6, "a mean round trip over a second")
            self.assertGreaterEqual(metric(server, "llmlimit_tigerbeetle_connections_total"), 2)
            for name in ("failed_items", "evictions"):
                self.assertEqual(metric(server, "llmlimit_tigerbeetle_%s_total" % name), 0, name)
            # each session registered once, and no session was started again
            self.assertEqual(metric(server, "llmlimit_tigerbeetle_registrations_total"), 2)
            # retransmissions: a request answered late on a busy machine is sent again
            self.assertIsNotNone(metric(server, "llmlimit_tigerbeetle_retransmissions_total"))
            self.assertIsNotNone(metric(server, "llmlimit_tigerbeetle_view"))


class TigerBeetleFaults(unittest.TestCase):
    def test_kill_under_load(self):
        """kill -9 under load: prompt 503s, one reservation per lease, recovery."""
        with Cluster() as cluster, front_end(cluster, sessions=4) as server:
            put_all([server], TOKENS)

            def fault():
                cluster.kill()
                gap_started = time.monotonic()
                time.sleep(DOWN_S)
                status, _, _ = server.request("GET", "/readyz")
                self.assertNotEqual(status, 200, "readyz while TigerBeetle is down")
                cluster.start()
                self.assertTrue(
                    wait_until(lambda: server.request("GET", "/readyz")[0] == 200, 30),
                    "llmlimitd did not recover by itself")
                return time.monotonic() - gap_started

            load_through_fault(self, server, fault)
            # The 4 sessions connected again to the restarted cluster, and say so.
            self.assertGreater(metric(server, "llmlimit_tigerbeetle_connections_total"), 4)
            self.assertEqual(metric(server, "llmlimit_tigerbeetle_sessions_ready"), 4)

    def test_frozen_under_load(self):
        """A TigerBeetle that stops answering for DOWN_S (SIGSTOP): prompt 503s, no
        hang, one reservation per lease, service resumes once it answers again."""
        with Cluster() as cluster, front_end(cluster, sessions=4) as server:
            put_all([server], TOKENS)

            def fault():
                cluster.process.send_signal(signal.SIGSTOP)
                frozen = time.monotonic()
                try:
                    time.sleep(0.5)
                    started = time.monotonic()
                    status, _, body = server.reserve(lease(), {"probe": 1})
                    took = time.monotonic() - started
                    self.assertEqual(status, 503, body)  # no answer: outcome unknown
                    self.assertLess(took, PROMPT_S, "a frozen TigerBeetle must not hang llmlimitd")
                    time.sleep(max(0.0, DOWN_S - (time.monotonic() - frozen)))
                finally:
                    cluster.process.send_signal(signal.SIGCONT)
                status, _, body = server.reserve(lease(), {"probe": 1})
                deadline = time.monotonic() + 30
                while status != 200 and time.monotonic() < deadline:
                    time.sleep(0.1)
                    status, _, body = server.reserve(lease(), {"probe": 1})
                self.assertEqual(status, 200, body)
                return time.monotonic() - frozen

            load_through_fault(self, server, fault)
            # The items the frozen cluster did not answer in time are counted.
            self.assertGreaterEqual(metric(server, "llmlimit_tigerbeetle_failed_items_total"), 1)


class HistoryOnTigerBeetle(unittest.TestCase):
    def test_recorded_history_is_consistent(self):
        """tests/checker/record.py against a real cluster: no over-admission, every
        allowed reserve in usage, retries never double-reserve (timing tolerance
        1.5 s: TigerBeetle expires holds on its own clock, up to ~1.1 s late)."""
        import subprocess
        record = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checker",
                              "record.py")
        with Cluster() as cluster:
            done = subprocess.run(
                [sys.executable, record, "--binary", BINARY, "--backend", "tigerbeetle",
                 "--seconds", "8", "--tolerance-ms", "1500",
                 "--server-arg=--tb-addresses=" + cluster.address],
                capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout[-4000:] + done.stderr[-2000:])
        self.assertIn("0 violation(s)", done.stdout)


# ---- differential --------------------------------------------------------

LIMITS = [
    {"key": "r", "kind": "rolling", "capacity": 50, "window_seconds": 3600},
    {"key": "r-deny", "kind": "rolling", "capacity": 30, "window_seconds": 3600,
     "overage": "deny"},
    {"key": "c", "kind": "concurrency", "capacity": 5, "timeout_seconds": 3600},
    {"key": "b", "kind": "budget", "capacity": 1000, "period": "month",
     "timeout_seconds": 300},
]
AMOUNT_MAX = {"r": 30, "r-deny": 20, "c": 3, "b": 400}


def decision(reply):
    """The parts of an answer both backends must agree on."""
    status, _, body = reply
    if not isinstance(body, dict):
        return (status, body)
    keep = {}
    for field in ("allowed", "error", "reconciled", "ok"):
        if field in body:
            keep[field] = body[field]
    if "denied_keys" in body:
        keep["denied_keys"] = sorted(body["denied_keys"])
    if "warnings" in body:
        keep["warnings"] = sorted(body["warnings"])
    if body.get("allowed") is False and not body.get("error"):
        keep["retry_after_positive"] = body.get("retry_after_ms", 0) > 0
    return (status, keep)


def usage_view(server):
    view = {}
    for limit in LIMITS:
        _, _, u = server.usage(limit["key"])
        # used and debt may split differently on a budget once later
        # releases pay debt; their sum, and everything else, may not
        view[limit["key"]] = (u["reserved"], u["used"] + u["debt"], u["available"])
    return view


class Differential(unittest.TestCase):
    def test_memory_and_tigerbeetle_decide_alike(self):
        """A seeded workload gets the same decision from memory and tigerbeetle."""
        seed = int(os.environ.get("LLMLIMIT_DIFF_SEED", "20261125"))
        steps = int(os.environ.get("LLMLIMIT_DIFF_STEPS", "300"))
        rng = random.Random(seed)
        with Cluster() as cluster, front_end(cluster) as tb, \
                Server(BINARY, backend="memory") as memory:
            put_all([memory, tb], LIMITS)
            leases = []  # (lease id, requirements)
            for step in range(steps):
                op, args = self.next_op(rng, leases, step)
                got = [decision(getattr(server, op)(*args)) for server in (memory, tb)]
                self.assertEqual(got[0], got[1], "seed %d step %d: %s%r" % (seed, step, op, args))
                if step % 10 == 9:
                    self.assertEqual(usage_view(memory), usage_view(tb),
                                     "seed %d after step %d" % (seed, step))

    @staticmethod
    def next_op(rng, leases, step):
        roll = rng.random()
        if roll < 0.45 or not leases:
            keys = rng.sample([l["key"] for l in LIMITS], rng.randint(1, 3))
            requirements = {k: rng.randint(1, AMOUNT_MAX[k]) for k in keys}
            if rng.random() < 0.05:
                requirements["no-such-key"] = 1
            if rng.random() < 0.03:
                requirements[keys[0]] = 10 ** 6  # over the capacity
            lease_id = "diff-%d" % step
            leases.append((lease_id, requirements))
            return "reserve", (lease_id, requirements)
        lease_id, requirements = rng.choice(leases)
        if roll < 0.55:
            return "reserve", (lease_id, requirements)  # a retry: same answer
        if roll < 0.60:
            changed = dict(requirements)
            first = next(iter(changed))
            changed[first] += 1
            return "reserve", (lease_id, changed)  # conflict
        if roll < 0.85:
            actuals = {}
            for key, amount in requirements.items():
                pick = rng.random()
                if pick < 0.2:
                    continue  # left out: settled at the reserved amount
                actuals[key] = rng.choice([0, max(0, amount - 1), amount, amount + rng.randint(1, 40)])
            if rng.random() < 0.03:
                actuals["c" if "c" not in requirements else "r"] = 1  # maybe not in the lease
            return "complete", (lease_id, actuals)
        return "release", (lease_id,)


if __name__ == "__main__":
    harness.main(warnings="ignore")
