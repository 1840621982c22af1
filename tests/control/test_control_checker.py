"""The history checker across two front ends that share their definitions
through etcd (--control) and their money through one 3-replica TigerBeetle
cluster: tests/checker's limits are put through front end A only, reach B by
the control plane, and tests/checker/record.py's load runs through both
(each lease reserved through one and completed or released through the
other, a share of the reserves waiting) for LOAD_S seconds. Then
tests/checker/check.py must find no violation: no admission over a limit
across the two, every allowed reserve counted once, finalize answers right.

Skipped (exit 77) without etcd or TIGERBEETLE_BIN. Usage:
test_control_checker.py --binary LLMLIMITD [--ping TB_PING] [--out FILE]"""

import json
import os
import random
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "http"))
sys.path.insert(0, os.path.join(HERE, "..", "tigerbeetle"))
sys.path.insert(0, os.path.join(HERE, "..", "checker"))
from harness import Server, binary_from_argv, wait_until  # noqa: E402
import etcd_cluster  # noqa: E402
import tb_cluster  # noqa: E402
import check  # noqa: E402
import record  # noqa: E402

BINARY = binary_from_argv()
tb_cluster.ping_tool_from_argv()
etcd_cluster.skip_unless_etcd("the history checker across front ends sharing etcd")
tb_cluster.skip_unless_binary("the history checker across front ends sharing etcd")

THREADS = 8
LOAD_S = 20.0
# TigerBeetle expires holds by its own clock, up to ~1.1 s after the
# deadline the checker computes from reserved_at (docs/tigerbeetle.md).
TOLERANCE_MS = 1500
TB_DEADLINE_MS = 2000
WAIT_SLACK_MS = 1000
SEEN_WITHIN_S = 20.0


class FrontEnd(Server):
    def start(self):
        super().start()
        if not wait_until(lambda: self.request("GET", "/readyz")[0] == 200, 60):
            raise RuntimeError("llmlimitd did not reach the cluster:\n" + self.stderr_text())
        return self


def definition_of(server, key):
    status, _, body = server.request("GET", "/v1/admin/limits/" + key)
    return body["limit"]["definition"] if status == 200 else None


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    seed = random.randrange(1 << 30)
    with etcd_cluster.EtcdCluster(3) as etcd, tb_cluster.Cluster(replicas=3) as tb:
        args = ["--control", etcd.url(), "--tb-addresses", tb.address, "--tb-sessions", "4"]
        fronts = [FrontEnd(BINARY, backend="tigerbeetle", args=args) for _ in range(2)]
        try:
            for front in fronts:
                front.start()
            for definition in record.LIMITS:  # through A only
                status, _, body = fronts[0].put_limit(definition)
                assert status == 200, (definition["key"], status, body)
            for definition in record.LIMITS:  # B has them from the store
                assert wait_until(lambda: (definition_of(fronts[1], definition["key"]) or {})
                                  .get("capacity") == definition["capacity"], SEEN_WITHIN_S), \
                    "%s did not reach B" % definition["key"]
            print("seed %d: %d limits put through A, in force on B; load through both for %.0f s"
                  % (seed, len(record.LIMITS), LOAD_S))
            sys.stdout.flush()
            recorder = record.Recorder(fronts, seed, THREADS, LOAD_S, retry_unavailable=True)
            offsets = [record.wall_minus_mono_ns()]
            load = threading.Thread(target=recorder.run)
            load.start()
            load.join()
            offsets.append(record.wall_minus_mono_ns())
            ops = recorder.ops
        finally:
            for front in fronts:
                front.stop(check=False)
                front.cleanup()
    header = {"type": "header", "limits": record.LIMITS, "wall_minus_mono_ns": offsets,
              "tolerance_ms": TOLERANCE_MS, "wait_tolerance_ms": TB_DEADLINE_MS + WAIT_SLACK_MS,
              "seed": seed, "backend": "tigerbeetle", "unavailable_ok": True,
              "keep_rounding_ms": record.KEEP_ROUNDING_MS["tigerbeetle"]}
    violations = check.check(header, ops)
    counts = record.summary(ops)
    print("  " + " ".join("%s=%d" % item for item in counts.items()))
    print("  %d violation(s)" % violations.count())
    violations.report(sys.stdout)
    failures = []
    if counts["allowed"] == 0 or counts["denied"] == 0:
        failures.append("the history did not exercise the limits (allowed and denied)")
    if violations.count():
        failures.append("%d violation(s)" % violations.count())
    if out or failures:
        path = out or tempfile.mkstemp(prefix="llmlimit-history-control-", suffix=".jsonl")[1]
        with open(path, "w") as f:
            for line in [header] + ops:
                f.write(json.dumps(line) + "\n")
        print("  history kept in %s" % path)
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
