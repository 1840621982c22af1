"""HTTP tests of the tigerbeetle backend against a 3-replica cluster, as a
user runs it (llmlimitd --tb-addresses A,B,C; TIGERBEETLE_BIN, and the
tb_ping tool for the view; without the binary the file exits 77, skipped).

- reserve, complete and release work, and the sessions find the primary
  (a fresh cluster's primary is replica 1, not the first address);
- backups: SIGSTOP, kill -9 and restart of the backup last in the
  replication ring give no 503 at all; losing the ring's next backup slows
  every commit (TigerBeetle 0.15.3 replicates prepares in a ring, see
  docs/tigerbeetle.md) but loses nothing, and once restarted it carries the
  quorum while the other backup is killed, again without a 503;
- kill -9 and SIGSTOP of the primary: 503s only until the view change has
  happened, then service again (the unavailability is measured and
  printed).

Under load every client retries its lease with the same id while the answer
is 503, so at the end every lease is held exactly once: usage must equal 7
times the leases acknowledged, nothing lost, nothing twice.

A replica that dies of TigerBeetle 0.15.3's own known fault (known_faults.txt)
is started again by the cluster's watcher (tb_cluster.py): the 503s while it
comes back are printed, not failed, and a test whose fault plan it upset
says so; every lease is still checked to be held exactly once."""

import os
import signal
import sys
import threading
import time
import unittest
import uuid
import warnings

warnings.simplefilter("ignore", ResourceWarning)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import harness  # noqa: E402
from harness import Server, binary_from_argv, wait_until  # noqa: E402
from tb_cluster import Cluster, metric, ping_tool_from_argv, skip_unless_binary  # noqa: E402

BINARY = binary_from_argv()
ping_tool_from_argv()
skip_unless_binary("tigerbeetle 3-replica HTTP tests")

REPLICAS = 3
AMOUNT = 7
TOKENS = {"key": "tokens", "kind": "rolling", "capacity": 10 ** 12, "window_seconds": 3600}
# After the replicas have moved to a new view, the sessions need a resend
# or two (at most 1 s apart) to reach the new primary.
SETTLE_S = 3.0
# A view change this slow fails the test (TigerBeetle's backups wait 5 s
# for the primary's heartbeat before they start one).
VIEW_CHANGE_S_MAX = 30.0


class FrontEnd(Server):
    """llmlimitd on the tigerbeetle backend; started means ready (/readyz)."""

    def start(self):
        super().start()
        if not wait_until(lambda: self.request("GET", "/readyz")[0] == 200, 60):
            raise RuntimeError("llmlimitd did not reach the cluster:\n" + self.stderr_text())
        return self


def front_end(cluster, extra=()):
    return FrontEnd(BINARY, backend="tigerbeetle",
                    args=["--tb-addresses", cluster.address, "--tb-sessions", "4", *extra])


class Load:
    """Reserves of AMOUNT on `tokens` from `threads` clients, each lease
    retried with the same id while the answer is 503; every attempt is kept
    as (started, answered, status)."""

    def __init__(self, server, threads=8):
        self.server = server
        self.stop_event = threading.Event()
        self.attempts = []
        self.leases = []  # (lease id, status, allowed): one per lease, its final answer
        self.errors = []
        self.lock = threading.Lock()
        self.workers = [threading.Thread(target=self._client, args=(i,), daemon=True)
                        for i in range(threads)]

    def _client(self, index):
        while not self.stop_event.is_set():
            lease_id = "load-%d-%s" % (index, uuid.uuid4().hex[:12])
            give_up = time.monotonic() + 120
            while time.monotonic() < give_up:
                started = time.monotonic()
                try:
                    status, _, body = self.server.reserve(lease_id, {"tokens": AMOUNT})
                except Exception as error:  # noqa: BLE001 (a test reports all)
                    with self.lock:
                        self.errors.append(repr(error))
                    time.sleep(0.05)
                    continue
                with self.lock:
                    self.attempts.append((started, time.monotonic(), status,
                                          body.get("error") if isinstance(body, dict) else body))
                if status == 503:
                    time.sleep(0.05)
                    continue  # unknown outcome: the same lease id again
                with self.lock:
                    self.leases.append((lease_id, status, body.get("allowed")))
                break

    def __enter__(self):
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for w in self.workers:
            w.join(180)

    def unavailable(self):
        return [a for a in self.attempts if a[2] != 200]

    def longest_gap(self):
        """The longest time without any 200 answer."""
        answered = sorted(a[1] for a in self.attempts if a[2] == 200)
        return max((b - a for a, b in zip(answered, answered[1:])), default=0.0)

    def check(self, test, reserved_before):
        test.assertFalse(any(w.is_alive() for w in self.workers), "a client hung")
        test.assertEqual(self.errors, [])
        test.assertTrue(self.leases, "no lease was answered at all")
        test.assertTrue(all(status == 200 and allowed for _, status, allowed in self.leases),
                        self.leases[:5])
        test.assertEqual(len({lease for lease, _, _ in self.leases}), len(self.leases))
        for _, _, status, error in self.unavailable():
            test.assertEqual((status, error), (503, "backend_error"))
        _, _, usage = self.server.usage("tokens")
        # every lease held exactly once: nothing lost, nothing twice
        test.assertEqual(usage["reserved"] - reserved_before, AMOUNT * len(self.leases))


class ReplicatedCluster(unittest.TestCase):
    """A fresh cluster and one llmlimitd for each class (a view change right
    after a replica's restart also waits for TigerBeetle to repair that
    replica, which is not what the tests measure); every test leaves all
    replicas running and answering again."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(replicas=REPLICAS).__enter__()
        try:
            cls.fresh_view = cls.cluster.view()
            cls.server = front_end(cls.cluster)
            cls.server.start()
            status, _, body = cls.server.put_limit(TOKENS)
            assert status == 200, (status, body)
        except BaseException:
            if hasattr(cls, "server"):
                cls.server.cleanup()
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.__exit__(None, None, None)  # stops it and removes its data directory
        finally:
            cls.cluster.stop()

    def setUp(self):
        self.revivals_before = len(self.cluster.revivals)

    def tearDown(self):
        for replica in self.cluster.replicas:
            if replica.paused:
                self.cluster.resume(replica.index)
            if replica.process is None:
                self.cluster.start(replica.index)
        for replica in range(REPLICAS):
            self.cluster.wait_answers(replica)

    def revived(self):
        """The replicas revived from TigerBeetle's known fault during this test."""
        return {v["replica"] for v in self.cluster.revivals[self.revivals_before:]}

    def unexplained(self, attempts):
        """The attempts no revival from TigerBeetle's known fault explains
        (those that do are counted and printed)."""
        windows = [(a / 1e9, b / 1e9) for a, b in
                   self.cluster.revival_windows(SETTLE_S)[self.revivals_before:]]
        left = [a for a in attempts
                if not any(start <= a[1] and a[0] <= end for start, end in windows)]
        if len(left) != len(attempts):
            print("  %d 503s while a replica came back from TigerBeetle's known fault"
                  % (len(attempts) - len(left)))
        return left

    def assert_view_unchanged(self, view):
        """No view change for a backup's faults (unless the known fault took the primary)."""
        if view % REPLICAS in self.revived():
            print("  the primary died of TigerBeetle's known fault: the view may move")
            return
        self.assertEqual(self.cluster.view(), view, "no view change for a backup")

    def reserved(self):
        return self.server.usage("tokens")[2]["reserved"]

    def run_load(self, phases):
        """Runs the load through `phases`: (name, action) pairs, each action
        returning when its phase is over; returns the load and the
        monotonic time each phase started."""
        reserved_before = self.reserved()
        marks = []
        with Load(self.server) as load:
            time.sleep(1.5)
            for name, action in phases:
                marks.append((name, time.monotonic()))
                action()
            marks.append(("end", time.monotonic()))
        load.check(self, reserved_before)
        return load, dict(marks)

    def fail_primary(self, what, fault, repair=None):
        """Takes the primary away under load (and brings it back, when
        `repair`): 503s only from the fault until the view change has
        settled."""
        view = self.cluster.view()
        primary = view % REPLICAS
        changed = {}

        def take_primary_away():
            fault(primary)
            changed["view"] = self.cluster.view(timeout_s=VIEW_CHANGE_S_MAX, after=view)
            changed["at"] = time.monotonic()
            time.sleep(SETTLE_S + 2)

        def bring_back():
            repair(primary)
            time.sleep(3)

        phases = [("fault", take_primary_away)]
        if repair is not None:
            phases.append(("back", bring_back))
        load, marks = self.run_load(phases)
        # The front end follows the cluster into the new view, and says so.
        self.assertGreaterEqual(metric(self.server, "llmlimit_tigerbeetle_view"), changed["view"])
        unavailable = load.unavailable()
        first = unavailable[0][1] - marks["fault"] if unavailable else 0.0
        last = max(a[1] for a in unavailable) - marks["fault"] if unavailable else 0.0
        print("  %s primary %d: view %d -> %d seen after %.1f s; 503s answered from %.1f s to"
              " %.1f s; longest without a 200: %.1f s; %d leases, %d 503s"
              % (what, primary, view, changed["view"], changed["at"] - marks["fault"], first,
                 last, load.longest_gap(), len(load.leases), len(unavailable)))
        for _, answered, _, _ in self.unexplained(unavailable):
            self.assertGreaterEqual(answered, marks["fault"], "a 503 before the fault")
            self.assertLess(answered, changed["at"] + SETTLE_S,
                            "a 503 after the view change had settled")
        return load


class BasicsAndBackups(ReplicatedCluster):
    def test_ring_next_lost_with_a_longer_deadline(self):
        """With --tb-deadline-ms longer than the ring's next backup is away (commits
        all but stop on 0.15.3 meanwhile), its loss shows as slow answers, not 503s."""
        view = self.cluster.view()
        ring_next = (view % REPLICAS + 1) % REPLICAS
        patient = front_end(self.cluster, ["--tb-deadline-ms", "15000"])
        patient.start()
        try:
            status, _, body = patient.put_limit(TOKENS)
            self.assertEqual(status, 200, body)
            reserved_before = patient.usage("tokens")[2]["reserved"]
            with Load(patient) as load:
                time.sleep(1.5)
                killed = time.monotonic()
                self.cluster.kill(ring_next)
                time.sleep(5)
                restarted = time.monotonic()
                self.cluster.start(ring_next)
                self.cluster.wait_answers(ring_next)
                time.sleep(SETTLE_S)
            load.check(self, reserved_before)
            degraded = [a for a in load.attempts if killed <= a[1] < restarted]
            slowest = max(a[1] - a[0] for a in load.attempts)
            print("  replica %d (the ring's next) killed for 5 s, --tb-deadline-ms 15000: %d"
                  " answers while it was down, slowest answer %.1f s; %d 503s in %d leases"
                  % (ring_next, len(degraded), slowest, len(load.unavailable()),
                     len(load.leases)))
            self.assertEqual(self.unexplained(load.unavailable()), [],
                             "a longer deadline waits instead")
            self.assert_view_unchanged(view)
        finally:
            patient.__exit__(None, None, None)

    def test_reserve_complete_release(self):
        """reserve, complete and release through the primary of a 3-replica cluster."""
        # A fresh cluster starts in view 1: its primary is replica 1, and the
        # first address a backup (which drops a register on 0.15.3).
        self.assertEqual(self.fresh_view % REPLICAS, 1)
        self.server.put_limit({"key": "slots", "kind": "concurrency", "capacity": 2,
                               "timeout_seconds": 600})
        one, two = str(uuid.uuid4()), str(uuid.uuid4())
        status, _, body = self.server.reserve(one, {"tokens": 300, "slots": 1})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["allowed"], body)
        self.assertTrue(self.server.reserve(two, {"slots": 1})[2]["allowed"])
        self.assertFalse(self.server.reserve(str(uuid.uuid4()), {"slots": 1})[2]["allowed"])
        status, _, body = self.server.complete(one, {"tokens": 100})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["reconciled"], body)
        self.assertEqual(self.server.release(two)[0], 200)
        _, _, usage = self.server.usage("slots")
        self.assertEqual(usage["reserved"], 0)
        _, _, usage = self.server.usage("tokens")
        self.assertGreaterEqual(usage["used"], 100)
        self.assertEqual(self.server.complete(two, {"slots": 1})[0], 409)

    def test_backups_stopped_killed_restarted(self):
        """Backups: SIGSTOP, kill -9 and restart of one give no 503; the ring's next
        backup lost slows commits but loses nothing; restarted, it carries the quorum."""
        view = self.cluster.view()
        primary = view % REPLICAS
        after_next = (primary + 2) % REPLICAS  # last in the replication ring
        ring_next = (primary + 1) % REPLICAS

        def stop_and_resume():
            self.cluster.pause(after_next)
            time.sleep(3)
            self.cluster.resume(after_next)
            time.sleep(1)

        def kill_and_restart():
            self.cluster.kill(after_next)
            time.sleep(3)
            self.cluster.start(after_next)
            self.cluster.wait_answers(after_next)
            time.sleep(1)

        load, _ = self.run_load([("stop", stop_and_resume), ("kill", kill_and_restart)])
        print("  replica %d (backup) stopped, resumed, killed, restarted: %d leases, %d 503s"
              % (after_next, len(load.leases), len(load.unavailable())))
        self.assertEqual(self.unexplained(load.unavailable()), [],
                         "a backup's loss must not show")

        def kill_ring_next():
            self.cluster.kill(ring_next)
            time.sleep(5)

        def restart_ring_next():
            self.cluster.start(ring_next)
            self.cluster.wait_answers(ring_next)
            time.sleep(SETTLE_S)

        def kill_other():
            self.cluster.kill(after_next)
            time.sleep(4)

        load, marks = self.run_load([("kill", kill_ring_next), ("restart", restart_ring_next),
                                     ("other", kill_other)])
        degraded = [a for a in load.attempts if marks["kill"] <= a[0] < marks["restart"]]
        print("  replica %d (the ring's next) killed for 5 s: %d answers then, %d of them 503;"
              " restarted after %.1f s" % (ring_next, len(degraded),
                                           sum(1 for a in degraded if a[2] != 200),
                                           marks["other"] - marks["restart"]))
        late = [a for a in self.unexplained(load.unavailable()) if a[0] >= marks["other"]]
        self.assertEqual(late, [], "with the restarted replica the quorum is whole again")
        self.assert_view_unchanged(view)


class PrimaryKilled(ReplicatedCluster):
    def test_primary_killed(self):
        """kill -9 of the primary under load: 503s only until the view change, none
        lost or twice (tearDown restarts it; BasicsAndBackups restarts under load)."""
        self.fail_primary("kill -9 of", self.cluster.kill)


class PrimaryStopped(ReplicatedCluster):
    def test_primary_stopped(self):
        """SIGSTOP of the primary under load: the others move on without it (503s only
        until the view change); after SIGCONT it rejoins without a 503."""
        self.fail_primary("SIGSTOP of", self.cluster.pause, self.cluster.resume)


if __name__ == "__main__":
    harness.main(warnings="ignore")
