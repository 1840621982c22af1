"""A budget decrease holds after a reservation expires (docs/semantics.md,
"Capacity changes": a budget decrease applies at once), found by the history
checker's capacity changes on the tigerbeetle backend: a month budget of 100,
30 spent, 40 held by a reservation nobody finishes, cut to 60 (the cut owes 10
of what is held); once the reservation has expired, a reserve of 35 must be
denied (30 spent + 35 > 60), as the memory and sqlite backends do. On
tigerbeetle the expired 40 went back to the limit before the owed 10 was taken,
and the 35 was admitted (usage then shows available -5).

Runs on --backend memory or sqlite, or tigerbeetle against a one-replica cluster
from TIGERBEETLE_BIN (without it: SKIPPED, exit 77)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "http"))
from harness import Server, backend_from_argv, binary_from_argv, wait_until  # noqa: E402
from tb_cluster import Cluster, skip_unless_binary  # noqa: E402

BINARY = binary_from_argv()
BACKEND = backend_from_argv("tigerbeetle")
KEY = "cut:usd:month"


def budget(capacity):
    return {"key": KEY, "kind": "budget", "capacity": capacity, "period": "month",
            "timeout_seconds": 5}


class BudgetCut(unittest.TestCase):
    def run_on(self, server):
        self.assertEqual(server.put_limit(budget(100))[0], 200)
        self.assertTrue(server.reserve("spent", {KEY: 30})[2]["allowed"])
        self.assertEqual(server.complete("spent", {KEY: 30})[0], 200)
        self.assertTrue(server.reserve("abandoned", {KEY: 40})[2]["allowed"])
        status, _, body = server.put_limit(budget(60))
        self.assertEqual((status, body["status"]), (200, "active"), body)
        self.assertTrue(wait_until(lambda: server.usage(KEY)[2]["reserved"] == 0, timeout_s=60),
                        "the abandoned reservation never expired")
        status, _, answer = server.reserve("over", {KEY: 35})
        usage = server.usage(KEY)[2]
        self.assertEqual((status, answer["allowed"]), (200, False),
                         "30 spent + 35 admitted on a budget cut to 60: %s" % usage)
        self.assertEqual((usage["used"], usage["reserved"], usage["available"]), (30, 0, 30))

    def test_an_expired_reservation_does_not_undo_a_cut(self):
        """Budget 100, 30 spent, 40 held then expired, cut to 60 before: 35 more is denied."""
        if BACKEND != "tigerbeetle":
            with Server(BINARY, backend=BACKEND) as server:
                self.run_on(server)
            return
        with Cluster() as cluster:
            server = Server(BINARY, backend="tigerbeetle",
                            args=["--tb-addresses", cluster.address]).start()
            try:
                self.assertTrue(wait_until(lambda: server.request("GET", "/readyz")[0] == 200,
                                           timeout_s=60))
                self.run_on(server)
            finally:
                server.cleanup()


if __name__ == "__main__":
    if BACKEND == "tigerbeetle":
        skip_unless_binary("a budget cut after an expiry on tigerbeetle", exit_code=77)
    unittest.main()
