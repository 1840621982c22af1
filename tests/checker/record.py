"""Records a concurrent history against the real llmlimitd and checks it with
check.py: many threads mix reserve, complete, release and usage on rolling,
concurrency and budget limits with short windows, retry reserves with the same
lease_id (also after dropping the connection before the answer), finalize
leases twice or the wrong way, and let some holds expire.

History format (JSON lines): a header {"type":"header","limits":[...],
"wall_minus_mono_ns":[...],"tolerance_ms":N, "unavailable_ok": bool} then
one {"type":"op", "op": "reserve"|"complete"|"release"|"usage", "thread",
"front_end", "lease_id" or "key", "requirements"/"actuals", "start_ns",
"end_ns" (time.monotonic_ns), "status" (null: no answer), "body",
"retry_after_header"} per request.

Several front ends on one shared backend (tigerbeetle) may be given to the
Recorder: each lease is then reserved (and retried) through its thread's
front end and completed or released through another one. With
retry_unavailable (fault runs) a complete or release answered 503 is tried
again, as a client would, and 503s are not violations in themselves.

With --cross-midnight the server runs on --test-clock, moved so that the
middle of the run is a UTC midnight that starts a new month: the day and
month budgets roll over while the load runs (the day budget is made small
enough to run out before), and the header's clock_offset_ms tells the
checker how far the server's clock is ahead of the wall clock.

Usage: record.py --binary build/llmlimitd [--backend memory] [--seconds 8]
                  [--threads 8] [--seed N] [--out history.jsonl]
                  [--cross-midnight] [--server-arg=--tb-addresses=HOST:PORT ...]
Exit 0 when the history is consistent with the model and exercised it
(allowed and denied reserves, retries, expiries; with --cross-midnight,
allowed reserves on both sides of midnight), 1 otherwise.
"""

import argparse
import datetime
import http.client
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
from harness import Server  # noqa: E402

import check  # noqa: E402

TAG = "checker"


def uuid_v7():
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, variant 10,
    the rest random."""
    value = (time.time_ns() // 1000000) << 80 | int.from_bytes(os.urandom(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76
    value = value & ~(0x3 << 62) | 0x2 << 62
    return str(uuid.UUID(int=value))

LIMITS = [
    {"key": TAG + ":openai:rpm", "kind": "rolling", "capacity": 120, "window_seconds": 2,
     "unit": "requests"},
    {"key": TAG + ":openai:tpm", "kind": "rolling", "capacity": 120000, "window_seconds": 3,
     "unit": "tokens", "overage": "debt"},
    {"key": TAG + ":llama:concurrency", "kind": "concurrency", "capacity": 8,
     "timeout_seconds": 1},
    {"key": TAG + ":team:usd:month", "kind": "budget", "capacity": 8000000, "period": "month",
     "timeout_seconds": 5, "unit": "usd_micros"},
    {"key": TAG + ":org:usd:day", "kind": "budget", "capacity": 400000000, "period": "day",
     "timeout_seconds": 5, "unit": "usd_micros"},
]
MIDNIGHT_DAY_CAPACITY = 20000000  # runs out within the first half of a run
THINK_S_MAX = 0.003
FINALIZE_SOON_S_MAX = 0.3
FINALIZE_LATE_S = (1.0, 7.0)  # past every hold duration, so some commits land after expiry
SETTLE_S = 5.5  # longer than every hold, so the last usage reads see nothing held
FINALIZE_RETRY_S = 60.0  # how long a fault run retries a request answered 503


def amount_for(definition, rng):
    key = definition["key"]
    if key.endswith(":rpm"):
        return 1
    if key.endswith(":tpm"):
        return rng.randint(100, 3000)
    if definition["kind"] == "concurrency":
        return rng.randint(1, 2)
    return rng.randint(5000, 60000)


def actual_for(definition, amount, rng):
    if definition["kind"] == "budget" or definition["key"].endswith(":tpm"):
        return rng.randint(0, amount * 3 // 2)  # sometimes an overrun
    return amount


def unknown(op):
    """No answer, or 503: the outcome is unknown (docs/semantics.md)."""
    return op["status"] is None or op["status"] >= 500


class Recorder:
    """servers: one llmlimitd, or several on one shared backend."""

    def __init__(self, servers, seed, threads, seconds, retry_unavailable=False):
        self.servers = list(servers) if isinstance(servers, (list, tuple)) else [servers]
        self.seed = seed
        self.threads = threads
        self.seconds = seconds
        self.retry_unavailable = retry_unavailable
        self.stopping = threading.Event()  # ends the load before `seconds` have passed
        self.ops = []  # list.append is atomic in CPython
        self.by_key = {d["key"]: d for d in LIMITS}

    def home(self, thread):
        """The front end a thread reserves through."""
        return thread % len(self.servers)

    def other(self, thread):
        """The front end a thread completes and releases through: another
        one when there are several, so leases cross front ends."""
        return (thread + 1) % len(self.servers)

    # -- one request, timed ------------------------------------------------

    def call(self, thread, kind, fields, method, path, body, via):
        start = time.monotonic_ns()
        try:
            status, headers, reply = self.servers[via].request(method, path, body)
        except (OSError, http.client.HTTPException):
            status, headers, reply = None, {}, None
        end = time.monotonic_ns()
        op = {"type": "op", "thread": thread, "front_end": via, "op": kind, "start_ns": start,
              "end_ns": end, "status": status, "body": reply}
        if "retry-after" in headers:
            op["retry_after_header"] = headers["retry-after"]
        op.update(fields)
        self.ops.append(op)
        return op

    def reserve(self, thread, lease_id, requirements):
        return self.call(thread, "reserve", {"lease_id": lease_id, "requirements": requirements},
                         "POST", "/v1/reserve", {"lease_id": lease_id,
                                                 "requirements": requirements},
                         self.home(thread))

    def reserve_dropped(self, thread, lease_id, requirements):
        """Sends a whole reserve and closes the connection without reading
        the answer: the outcome is unknown to the client, as after a timeout."""
        payload = json.dumps({"lease_id": lease_id, "requirements": requirements}).encode()
        server = self.servers[self.home(thread)]
        start = time.monotonic_ns()
        try:
            with socket.create_connection((server.host, server.port), 5) as sock:
                sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: llmlimitd\r\n"
                             b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(payload), payload))
        except OSError:
            pass
        self.ops.append({"type": "op", "thread": thread, "front_end": self.home(thread),
                         "op": "reserve", "lease_id": lease_id, "requirements": requirements,
                         "start_ns": start, "end_ns": time.monotonic_ns(), "status": None,
                         "body": None})

    def finalizing(self, thread, kind, fields, body, via):
        """A complete or release; in a fault run tried again while its
        outcome is unknown (best effort, bounded, as clients do)."""
        give_up = time.monotonic() + FINALIZE_RETRY_S
        while True:
            op = self.call(thread, kind, fields, "POST", "/v1/" + kind, body, via)
            if not self.retry_unavailable or not unknown(op) or time.monotonic() > give_up:
                return op
            time.sleep(0.05)

    def complete(self, thread, lease_id, actuals, via=None):
        via = self.other(thread) if via is None else via
        return self.finalizing(thread, "complete", {"lease_id": lease_id, "actuals": actuals},
                               {"lease_id": lease_id, "actuals": actuals}, via)

    def release(self, thread, lease_id, via=None):
        via = self.other(thread) if via is None else via
        return self.finalizing(thread, "release", {"lease_id": lease_id},
                               {"lease_id": lease_id}, via)

    def usage(self, thread, key):
        path = "/v1/usage/" + key.replace(":", "%3A")
        return self.call(thread, "usage", {"key": key}, "GET", path, None,
                         self.home(max(thread, 0)))

    # -- the workload --------------------------------------------------------

    def requirements(self, rng):
        chosen = [d for d in LIMITS if rng.random() < 0.45] or [rng.choice(LIMITS)]
        return [{"key": d["key"], "amount": amount_for(d, rng)} for d in chosen]

    def finalize(self, thread, rng, lease_id, requirements, how):
        if how == "complete":
            actuals = [{"key": r["key"],
                        "actual_amount": actual_for(self.by_key[r["key"]], r["amount"], rng)}
                       for r in requirements if rng.random() < 0.8]  # the rest settle as reserved
            self.complete(thread, lease_id, actuals)
            if rng.random() < 0.1:
                self.complete(thread, lease_id, actuals)  # a retry: no-op success
            if rng.random() < 0.05:
                self.release(thread, lease_id, self.home(thread))  # wrong way: 409
        else:
            self.release(thread, lease_id)
            if rng.random() < 0.1:
                self.release(thread, lease_id)
            if rng.random() < 0.05:
                self.complete(thread, lease_id, [], self.home(thread))
        if rng.random() < 0.05:
            self.reserve(thread, lease_id, requirements)  # a late duplicate: same answer, no hold

    def one_lease(self, thread, rng, pending):
        # Half UUIDv7, as the clients make them (time-ordered transfer ids on
        # a tigerbeetle cluster: docs/tigerbeetle.md "Account model"), half
        # UUIDv4 (label ids).
        lease_id = uuid_v7() if rng.random() < 0.5 else str(uuid.uuid4())
        requirements = self.requirements(rng)
        if rng.random() < 0.08:
            self.reserve_dropped(thread, lease_id, requirements)
        op = self.reserve(thread, lease_id, requirements)
        give_up = time.monotonic() + FINALIZE_RETRY_S
        while unknown(op):
            if self.retry_unavailable:
                if time.monotonic() > give_up:
                    return  # the outcome stays unknown, as for a client at its deadline
                time.sleep(0.05)
            op = self.reserve(thread, lease_id, requirements)  # same lease_id until definitive
        if rng.random() < 0.08:
            self.reserve(thread, lease_id, requirements)
        if rng.random() < 0.03:
            other = [dict(r, amount=r["amount"] + 1) for r in requirements]
            self.reserve(thread, lease_id, other)  # 409 lease_conflict
        if op["status"] != 200 or not op["body"]["allowed"]:
            return
        roll = rng.random()
        now = time.monotonic()
        if roll < 0.5:
            pending.append((now + rng.uniform(0, FINALIZE_SOON_S_MAX), lease_id, requirements,
                            "complete"))
        elif roll < 0.7:
            pending.append((now + rng.uniform(0, FINALIZE_SOON_S_MAX), lease_id, requirements,
                            "release"))
        elif roll < 0.8:
            pending.append((now + rng.uniform(*FINALIZE_LATE_S), lease_id, requirements,
                            "complete"))
        # else: abandoned, its holds expire by themselves

    def worker(self, thread):
        rng = random.Random(self.seed * 1000 + thread)
        pending = []
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline and not self.stopping.is_set():
            now = time.monotonic()
            due = [p for p in pending if p[0] <= now]
            pending[:] = [p for p in pending if p[0] > now]
            for _, lease_id, requirements, how in due:
                self.finalize(thread, rng, lease_id, requirements, how)
            if rng.random() < 0.15:
                self.usage(thread, rng.choice(LIMITS)["key"])
            else:
                self.one_lease(thread, rng, pending)
            time.sleep(rng.uniform(0, THINK_S_MAX))
        for _, lease_id, requirements, how in pending:  # those not yet due: finish now
            self.finalize(thread, rng, lease_id, requirements, how)

    def run(self):
        workers = [threading.Thread(target=self.worker, args=(i,)) for i in range(self.threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        for definition in LIMITS:
            self.usage(-1, definition["key"])
        time.sleep(SETTLE_S)
        for definition in LIMITS:
            self.usage(-1, definition["key"])


def wall_minus_mono_ns():
    return time.time_ns() - time.monotonic_ns()


def summary(ops):
    reserves = [op for op in ops if op["op"] == "reserve" and op["status"] == 200]
    allowed = {op["lease_id"] for op in reserves if op["body"]["allowed"]}
    denied = {op["lease_id"] for op in reserves
              if not op["body"]["allowed"] and op["body"]["error"] == ""}
    counts = {"operations": len(ops), "allowed": len(allowed), "denied": len(denied),
              "dropped_reserves": sum(1 for op in ops if op["status"] is None),
              "late_commits": sum(1 for op in ops if op["op"] == "complete" and op["status"] == 200
                                  and any(w.startswith("commit_after_expiry")
                                          for w in op["body"].get("warnings") or [])),
              "conflicts_409": sum(1 for op in ops if op["status"] == 409),
              "usage_reads": sum(1 for op in ops if op["op"] == "usage"),
              "unavailable_503": sum(1 for op in ops if op["status"] == 503)}
    return counts


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.environ.get("LLMLIMITD", "build/llmlimitd"))
    parser.add_argument("--backend", default="memory")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default=None, help="keep the history in this file")
    parser.add_argument("--tolerance-ms", type=int, default=check.TOLERANCE_MS_DEFAULT)
    parser.add_argument("--cross-midnight", action="store_true",
                        help="move the server's clock so that a month starts mid-run")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="extra llmlimitd flag, e.g. --server-arg=--tb-addresses=HOST:PORT")
    return parser.parse_args(argv)


def next_month_start_ms(now_ms):
    day = datetime.date(1970, 1, 1) + datetime.timedelta(days=now_ms // check.DAY_MS)
    first = datetime.date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return (first - datetime.date(1970, 1, 1)).days * check.DAY_MS


def move_before_midnight(server, seconds):
    """Moves the server's clock to seconds/2 before the next month's first
    midnight; returns (clock offset ms, that midnight in the server's ms)."""
    status, _, body = server.request("POST", "/v1/admin/clock", {"advance_ms": 0})
    assert status == 200, body
    midnight = next_month_start_ms(body["now_unix_ms"] + int(seconds * 1000))
    target = midnight - int(seconds * 500)
    status, _, body = server.request("POST", "/v1/admin/clock",
                                     {"advance_ms": target - body["now_unix_ms"]})
    assert status == 200, body
    return body["offset_ms"], midnight


def sides_of_midnight(ops, midnight):
    """Allowed reserves before and after midnight (server time)."""
    times = [op["body"]["reserved_at_unix_ms"] for op in ops if op["op"] == "reserve"
             and op["status"] == 200 and op["body"]["allowed"]]
    return sum(1 for t in times if t < midnight), sum(1 for t in times if t >= midnight)


def main(argv):
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print("seed %d, backend %s, %d threads, %.1f s%s" % (
        seed, args.backend, args.threads, args.seconds,
        ", across midnight" if args.cross_midnight else ""))
    server_args = list(args.server_arg)
    clock_offset_ms, midnight = 0, None
    if args.cross_midnight:
        server_args.append("--test-clock")
        for definition in LIMITS:
            if definition["kind"] == "budget" and definition["period"] == "day":
                definition["capacity"] = MIDNIGHT_DAY_CAPACITY
    offsets = [wall_minus_mono_ns()]
    with Server(os.path.abspath(args.binary), backend=args.backend,
                args=server_args) as server:
        if args.cross_midnight:
            clock_offset_ms, midnight = move_before_midnight(server, args.seconds)
        for definition in LIMITS:
            status, _, body = server.put_limit(definition)
            if status != 200:
                print("put_limit %s: %s %s" % (definition["key"], status, body))
                return 1
        recorder = Recorder(server, seed, args.threads, args.seconds)
        recorder.run()
    offsets.append(wall_minus_mono_ns())
    header = {"type": "header", "limits": LIMITS, "wall_minus_mono_ns": offsets,
              "tolerance_ms": args.tolerance_ms, "seed": seed, "backend": args.backend,
              "clock_offset_ms": clock_offset_ms, "unavailable_ok": False}
    out = args.out or tempfile.mkstemp(prefix="llmlimit-history-", suffix=".jsonl")[1]
    with open(out, "w") as f:
        for line in [header] + recorder.ops:
            f.write(json.dumps(line) + "\n")
    counts = summary(recorder.ops)
    print(" ".join("%s=%d" % item for item in counts.items()))
    violations = check.check(header, recorder.ops)
    print("%d violation(s)" % violations.count())
    violations.report(sys.stdout)
    exercised = counts["allowed"] > 0 and counts["denied"] > 0 and counts["late_commits"] > 0
    if midnight is not None:
        before, after = sides_of_midnight(recorder.ops, midnight)
        print("allowed before midnight %d, after %d" % (before, after))
        exercised = exercised and before > 0 and after > 0
    if not exercised:
        print("the history did not exercise the model (need allowed, denied, late commits"
              "%s)" % (", and allowed on both sides of midnight" if midnight else ""))
    if violations.count() or not exercised:
        print("history kept in %s" % out)
        return 1
    if args.out is None:
        os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
