"""Records a concurrent history against the real llmlimitd and checks it with
check.py: many threads mix reserve, complete, release and usage on rolling,
concurrency and budget limits with short windows, retry reserves with the same
lease_id (also after dropping the connection before the answer), finalize
leases twice or the wrong way, and let some holds expire.

Waiting for capacity (docs/semantics.md "Waiting for capacity"): a share of
the reserves wait (wait_ms 0..2000, random priorities; plain reserves
sometimes carry a priority too); some waiting clients close their socket
mid-wait and retry the same lease id later (an op with no answer and its
closed_ns); some waits are joined by a second request with the same lease id
on another connection; the server runs with a small --max-waiters, so that
the queue fills now and then (x-llmlimit-queue: full). With one front end, a
thread changes capacities during the run (PUT /v1/admin/limits, increases
and decreases; a pending decrease is followed by usage reads until it has
applied, so that each change's window is known), and another reads
llmlimit_wait_waiting from /metrics.

History format (JSON lines): a header {"type":"header","limits":[...],
"wall_minus_mono_ns":[...],"tolerance_ms":N, "wait_tolerance_ms": N,
"max_waiters": N, "unavailable_ok": bool, "keep_rounding_ms": N} then one {"type":"op", "op":
"reserve"|"complete"|"release"|"usage"|"put_limit"|"metrics", "thread",
"front_end", "lease_id" or "key", "requirements"/"actuals"/"capacity",
"wait_ms", "priority", "start_ns", "end_ns" (time.monotonic_ns), "status"
(null: no answer), "body", "retry_after_header", "queue_full",
"closed_ns" (a waiting client that left), "waiting" (metrics)} per request.

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
                  [--cross-midnight] [--no-waits] [--wait-tolerance-ms N]
                  [--server-arg=--tb-addresses=HOST:PORT ...]
Exit 0 when the history is consistent with the model and exercised it
(allowed and denied reserves, retries, expiries; waits admitted after
waiting and denied at their deadline, clients that left mid-wait, capacity
changes; with --cross-midnight, allowed reserves on both sides of
midnight), 1 otherwise.
"""

import argparse
import datetime
import http.client
import json
import os
import random
import select
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

# Waiting for capacity.
WAIT_SHARE = 0.4  # of the leases: their reserves wait
WAIT_MS_MAX = 2000
PLAIN_PRIORITY_SHARE = 0.3  # plain reserves that say a priority (whom they yield to)
# Of the waiting leases: the client leaves mid-wait, then retries the lease id.
# Such a wait is long, so that a waiter left behind by the server would still
# be there at the next /metrics read, and at the end of the run.
LEAVE_SHARE = 0.15
LEAVE_WAIT_MS = (5000, 60000)
LEAVE_AT_ONCE_SHARE = 0.3  # of those: it closes right after sending, its first try in flight
LEAVE_AFTER_S = (0.01, 0.3)
RETRY_AFTER_LEAVING_S = (0.1, 0.3)  # longer than the tolerance: a window to see a leak in
JOIN_SHARE = 0.06  # of the waiting leases: the same lease id again, on another connection
JOIN_AFTER_S_MAX = 0.05
MAX_WAITERS = 7  # --max-waiters: small, so that the queue fills now and then
# Capacity changes: the values each changed limit takes in turn.
CHANGES = {
    TAG + ":llama:concurrency": [2, 4, 8, 12],
    TAG + ":openai:rpm": [60, 120, 200],
    TAG + ":team:usd:month": [6000000, 8000000, 10000000],
}
CHANGE_EVERY_S = (0.3, 0.8)
DECREASE_APPLIES_S_MAX = 20.0  # then no more changes: the window would stay open
METRICS_EVERY_S = (0.1, 0.3)
# How late a waiter may be answered, and how long a client's leaving may take to
# reach the wait layer (docs/semantics.md: one pass of the wait layer's thread and
# one backend reserve; on sqlite a group commit), plus this client's own delays
# (Python threads on two shared cores): far above either, far below any bug (a
# waiter forgotten until another event, or until its client's 30 s timeout).
WAIT_TOLERANCE_MS = {"memory": 200, "sqlite": 300, "tigerbeetle": 2500}
# Backends that book a rolling complete's keep when it lands, for the rest of
# the window rounded up to this (check.py "keep_rounding_ms"; docs/tigerbeetle.md).
KEEP_ROUNDING_MS = {"tigerbeetle": 1000}


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


def reserve_payload(lease_id, requirements, wait):
    body = {"lease_id": lease_id, "requirements": requirements}
    body.update(wait)
    return body


def read_answer(sock):
    """One HTTP/1.1 answer from a blocking socket: (status, headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            raise ConnectionError("closed before the answer's head")
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        piece = sock.recv(65536)
        if not piece:
            raise ConnectionError("closed before the answer's body")
        rest += piece
    text = rest[:length].decode("utf-8", "replace")
    try:
        return status, headers, json.loads(text) if text else None
    except ValueError:
        return status, headers, text


def waiting_gauge(text):
    for line in text.splitlines():
        if line.startswith("llmlimit_wait_waiting "):
            return int(float(line.split()[1]))
    return None


class Recorder:
    """servers: one llmlimitd, or several on one shared backend. waits: a share
    of the reserves wait, some clients leave mid-wait, some waits are joined.
    changes: capacities change during the run (one front end only: each
    front end keeps its own registry)."""

    def __init__(self, servers, seed, threads, seconds, retry_unavailable=False, waits=True,
                 changes=None):
        self.servers = list(servers) if isinstance(servers, (list, tuple)) else [servers]
        self.seed = seed
        self.threads = threads
        self.seconds = seconds
        self.retry_unavailable = retry_unavailable
        self.waits = waits
        self.changes = (len(self.servers) == 1) if changes is None else changes
        self.stopping = threading.Event()  # ends the load before `seconds` have passed
        self.load_done = threading.Event()
        self.ops = []  # list.append is atomic in CPython
        self.by_key = {d["key"]: d for d in LIMITS}
        self.changed = 0

    def home(self, thread):
        """The front end a thread reserves through."""
        return thread % len(self.servers)

    def other(self, thread):
        """The front end a thread completes and releases through: another
        one when there are several, so leases cross front ends."""
        return (thread + 1) % len(self.servers)

    def running(self, deadline):
        return time.monotonic() < deadline and not self.stopping.is_set()

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
        if headers.get("x-llmlimit-queue") == "full":
            op["queue_full"] = True
        op.update(fields)
        self.ops.append(op)
        return op

    def reserve(self, thread, lease_id, requirements, wait=None):
        wait = wait or {}
        fields = {"lease_id": lease_id, "requirements": requirements}
        fields.update(wait)
        return self.call(thread, "reserve", fields, "POST", "/v1/reserve",
                         reserve_payload(lease_id, requirements, wait), self.home(thread))

    def raw_reserve(self, lease_id, requirements, wait, thread):
        payload = json.dumps(reserve_payload(lease_id, requirements, wait)).encode()
        server = self.servers[self.home(thread)]
        sock = socket.create_connection((server.host, server.port), 5)
        sock.sendall(b"POST /v1/reserve HTTP/1.1\r\nHost: llmlimitd\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(payload), payload))
        return sock

    def reserve_dropped(self, thread, lease_id, requirements):
        """Sends a whole reserve and closes the connection without reading
        the answer: the outcome is unknown to the client, as after a timeout."""
        start = time.monotonic_ns()
        try:
            self.raw_reserve(lease_id, requirements, {}, thread).close()
        except OSError:
            pass
        self.ops.append({"type": "op", "thread": thread, "front_end": self.home(thread),
                         "op": "reserve", "lease_id": lease_id, "requirements": requirements,
                         "start_ns": start, "end_ns": time.monotonic_ns(), "status": None,
                         "body": None})

    def reserve_leaving(self, thread, lease_id, requirements, wait, after_s):
        """A waiting reserve whose client leaves after after_s: if no answer has
        come by then, the socket is closed (recorded with closed_ns, no
        answer); if one has, it is read and recorded as any answer."""
        fields = {"type": "op", "thread": thread, "front_end": self.home(thread),
                  "op": "reserve", "lease_id": lease_id, "requirements": requirements,
                  "status": None, "body": None}
        fields.update(wait)
        fields["start_ns"] = time.monotonic_ns()
        try:
            sock = self.raw_reserve(lease_id, requirements, wait, thread)
        except OSError:
            fields["end_ns"] = fields["closed_ns"] = time.monotonic_ns()
            self.ops.append(fields)
            return
        with sock:
            ready = select.select([sock], [], [], after_s)[0]
            if not ready:
                fields["end_ns"] = fields["closed_ns"] = time.monotonic_ns()
                sock.close()
                self.ops.append(fields)
                return
            sock.settimeout(35)
            try:
                status, headers, body = read_answer(sock)
            except (OSError, ValueError):
                status, headers, body = None, {}, None
        fields.update(end_ns=time.monotonic_ns(), status=status, body=body)
        if "retry-after" in headers:
            fields["retry_after_header"] = headers["retry-after"]
        if headers.get("x-llmlimit-queue") == "full":
            fields["queue_full"] = True
        self.ops.append(fields)

    def reserve_twin(self, thread, lease_id, requirements, wait, delay_s):
        """The same lease id on another connection while the first may wait:
        it joins that wait (docs/semantics.md), never a second hold."""
        time.sleep(delay_s)
        self.reserve(thread, lease_id, requirements, wait)
        server = self.servers[self.home(thread)]
        conn = getattr(server._local, "conn", None)
        if conn is not None:  # this thread's connection ends with it
            conn.close()
            server._local.conn = None

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

    def usage(self, thread, key, via=None):
        path = "/v1/usage/" + key.replace(":", "%3A")
        via = self.home(max(thread, 0)) if via is None else via
        return self.call(thread, "usage", {"key": key}, "GET", path, None, via)

    def metrics(self, thread, via=0):
        """llmlimit_wait_waiting, read from /metrics."""
        op = self.call(thread, "metrics", {}, "GET", "/metrics", None, via)
        if op["status"] == 200 and isinstance(op["body"], str):
            op["waiting"] = waiting_gauge(op["body"])
        op["body"] = None  # the gauge is all the checker reads
        return op

    # -- the workload --------------------------------------------------------

    def requirements(self, rng):
        chosen = [d for d in LIMITS if rng.random() < 0.45] or [rng.choice(LIMITS)]
        return [{"key": d["key"], "amount": amount_for(d, rng)} for d in chosen]

    def wait_for(self, rng):
        """How a lease's reserves wait: {} (plain), or wait_ms and priority."""
        if not self.waits:
            return {}
        if rng.random() < WAIT_SHARE:
            wait = {"wait_ms": rng.randint(0, WAIT_MS_MAX)}
            if rng.random() < 0.9:
                wait["priority"] = rng.randint(0, 9)
            return wait
        return {"priority": rng.randint(0, 9)} if rng.random() < PLAIN_PRIORITY_SHARE else {}

    def finalize(self, thread, rng, lease_id, requirements, how):
        if how in ("complete", "complete late"):
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

    def first_reserve(self, thread, rng, lease_id, requirements, wait):
        """The lease's first reserve, as it waits: plain, left mid-wait, or
        joined by a twin on another connection."""
        if wait.get("wait_ms") and rng.random() < LEAVE_SHARE:
            leaving = dict(wait, wait_ms=rng.randint(*LEAVE_WAIT_MS))
            after_s = 0 if rng.random() < LEAVE_AT_ONCE_SHARE else rng.uniform(*LEAVE_AFTER_S)
            self.reserve_leaving(thread, lease_id, requirements, leaving, after_s)
            time.sleep(rng.uniform(*RETRY_AFTER_LEAVING_S))
            return self.reserve(thread, lease_id, requirements, wait)  # the same lease id
        twin = None
        if wait.get("wait_ms") and rng.random() < JOIN_SHARE:
            twin_wait = dict(wait, wait_ms=rng.randint(0, WAIT_MS_MAX))
            twin = threading.Thread(target=self.reserve_twin, args=(
                thread + 1000, lease_id, requirements, twin_wait,
                rng.uniform(0, JOIN_AFTER_S_MAX)))
            twin.start()
        op = self.reserve(thread, lease_id, requirements, wait)
        if twin is not None:
            twin.join()
        return op

    def one_lease(self, thread, rng, pending):
        # Half UUIDv7, as the clients make them (time-ordered transfer ids on
        # a tigerbeetle cluster: docs/tigerbeetle.md "Account model"), half
        # UUIDv4 (label ids).
        lease_id = uuid_v7() if rng.random() < 0.5 else str(uuid.uuid4())
        requirements = self.requirements(rng)
        wait = self.wait_for(rng)
        if rng.random() < 0.08:
            self.reserve_dropped(thread, lease_id, requirements)
        op = self.first_reserve(thread, rng, lease_id, requirements, wait)
        give_up = time.monotonic() + FINALIZE_RETRY_S
        while unknown(op):
            if self.retry_unavailable:
                if time.monotonic() > give_up:
                    return  # the outcome stays unknown, as for a client at its deadline
                time.sleep(0.05)
            op = self.reserve(thread, lease_id, requirements, wait)  # same lease_id until definitive
        if rng.random() < 0.08:
            self.reserve(thread, lease_id, requirements, wait)
        if op["status"] != 200 or not op["body"]["allowed"]:
            return
        if rng.random() < 0.03:  # a known lease: other requirements are a conflict
            other = [dict(r, amount=r["amount"] + 1) for r in requirements]
            self.reserve(thread, lease_id, other)  # 409 lease_conflict
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
                            "complete late"))
        # else: abandoned, its holds expire by themselves

    def worker(self, thread):
        rng = random.Random(self.seed * 1000 + thread)
        pending = []
        deadline = time.monotonic() + self.seconds
        while self.running(deadline):
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
        # Those not yet due: finished now, but a late complete when it is due
        # (at most FINALIZE_LATE_S after its lease), so that commits after
        # expiry are in every run, however few leases a slow build admits.
        for due, lease_id, requirements, how in sorted(pending, key=lambda p: p[0]):
            if how == "complete late" and not self.stopping.is_set():
                time.sleep(max(0.0, due - time.monotonic()))
            self.finalize(thread, rng, lease_id, requirements, how)

    # -- capacity changes and the queue's gauge ---------------------------------

    def change_once(self, rng, current):
        """One capacity change; waits until a pending decrease has applied
        (usage reads: its window is then known). False: stop changing."""
        key = rng.choice(sorted(CHANGES))
        capacity = rng.choice([c for c in CHANGES[key] if c != current[key]])
        definition = dict(self.by_key[key], capacity=capacity)
        op = self.call(-2, "put_limit", {"key": key, "capacity": capacity}, "PUT",
                       "/v1/admin/limits", definition, 0)
        if op["status"] != 200:
            return False
        current[key] = capacity
        self.changed += 1
        if op["body"].get("status") != "decreasing":
            return True
        give_up = time.monotonic() + DECREASE_APPLIES_S_MAX
        while time.monotonic() < give_up:
            time.sleep(0.05)
            read = self.usage(-2, key, via=0)
            if read["status"] == 200 and read["body"]["status"] == "active":
                return read["body"]["capacity"] == capacity
        return False

    def changer(self):
        rng = random.Random(self.seed * 1000 + 999)
        current = {key: self.by_key[key]["capacity"] for key in CHANGES}
        deadline = time.monotonic() + self.seconds
        while self.running(deadline):
            time.sleep(rng.uniform(*CHANGE_EVERY_S))
            if not self.running(deadline) or not self.change_once(rng, current):
                return

    def monitor(self):
        rng = random.Random(self.seed * 1000 + 998)
        while not self.load_done.is_set():
            self.metrics(-3)
            self.load_done.wait(rng.uniform(*METRICS_EVERY_S))

    def run(self):
        workers = [threading.Thread(target=self.worker, args=(i,)) for i in range(self.threads)]
        if self.changes:
            workers.append(threading.Thread(target=self.changer))
        # Not in fault runs: on the tigerbeetle backend GET /metrics reads each
        # limit's usage from the cluster on its HTTP worker, which then stalls
        # for as long as the cluster does not answer.
        monitored = self.waits and not self.retry_unavailable
        side = [threading.Thread(target=self.monitor)] if monitored else []
        for t in workers + side:
            t.start()
        for t in workers:
            t.join()
        self.load_done.set()
        for t in side:
            t.join()
        for definition in LIMITS:
            self.usage(-1, definition["key"])
        if monitored:
            # Every client is gone: nobody may be waiting once the tolerance has passed.
            time.sleep(max(WAIT_TOLERANCE_MS.values()) / 1000.0)
            for via in range(len(self.servers)):
                self.metrics(-1, via)
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
    waits = [op for op in reserves if op.get("wait_ms")]
    counts = {"operations": len(ops), "allowed": len(allowed), "denied": len(denied),
              "dropped_reserves": sum(1 for op in ops if op["status"] is None
                                      and op["op"] == "reserve" and "closed_ns" not in op),
              "late_commits": sum(1 for op in ops if op["op"] == "complete" and op["status"] == 200
                                  and any(w.startswith("commit_after_expiry")
                                          for w in op["body"].get("warnings") or [])),
              "conflicts_409": sum(1 for op in ops if op["status"] == 409),
              "usage_reads": sum(1 for op in ops if op["op"] == "usage"),
              "unavailable_503": sum(1 for op in ops if op["status"] == 503),
              "waits": len(waits),
              "admitted_after_waiting": sum(1 for op in waits if op["body"]["allowed"]
                                            and op["body"].get("waited_ms", 0) > 0),
              "denied_at_deadline": sum(1 for op in waits if not op["body"]["allowed"]
                                        and op["body"]["error"] == "" and not op.get("queue_full")
                                        and op["end_ns"] - op["start_ns"]
                                        >= op["wait_ms"] * 1000000),
              "queue_full": sum(1 for op in waits if op.get("queue_full")),
              "left_mid_wait": sum(1 for op in ops if "closed_ns" in op),
              "capacity_changes": sum(1 for op in ops if op["op"] == "put_limit"
                                      and op["status"] == 200),
              "definitive_errors": sum(1 for op in reserves if op["body"]["error"] != "")}
    return counts


def exercised(counts, waits, changes):
    """What a run must have seen to prove anything; the missing ones."""
    want = ["allowed", "denied", "late_commits"]
    if waits:
        want += ["admitted_after_waiting", "denied_at_deadline", "left_mid_wait"]
    if changes:
        want += ["capacity_changes"]
    return [name for name in want if counts[name] == 0]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.environ.get("LLMLIMITD", "build/llmlimitd"))
    parser.add_argument("--backend", default="memory")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default=None, help="keep the history in this file")
    parser.add_argument("--tolerance-ms", type=int, default=check.TOLERANCE_MS_DEFAULT)
    parser.add_argument("--wait-tolerance-ms", type=int, default=None,
                        help="how late a waiter may be answered (default: by backend)")
    parser.add_argument("--no-waits", action="store_true",
                        help="no waiting reserves and no capacity changes (the old load)")
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


def history_header(args, offsets, clock_offset_ms, waits):
    wait_tolerance_ms = args.wait_tolerance_ms
    if wait_tolerance_ms is None:
        wait_tolerance_ms = WAIT_TOLERANCE_MS.get(args.backend, max(WAIT_TOLERANCE_MS.values()))
    header = {"type": "header", "limits": LIMITS, "wall_minus_mono_ns": offsets,
              "tolerance_ms": args.tolerance_ms, "wait_tolerance_ms": wait_tolerance_ms,
              "seed": None, "backend": args.backend, "clock_offset_ms": clock_offset_ms,
              "unavailable_ok": False}
    if waits:
        header["max_waiters"] = MAX_WAITERS
    if args.backend in KEEP_ROUNDING_MS:
        header["keep_rounding_ms"] = KEEP_ROUNDING_MS[args.backend]
    return header


def main(argv):
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    waits = not args.no_waits
    print("seed %d, backend %s, %d threads, %.1f s%s%s" % (
        seed, args.backend, args.threads, args.seconds,
        ", across midnight" if args.cross_midnight else "",
        "" if waits else ", no waits"))
    server_args = list(args.server_arg)
    if waits:
        server_args += ["--max-waiters", str(MAX_WAITERS)]
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
        recorder = Recorder(server, seed, args.threads, args.seconds, waits=waits,
                            changes=waits)
        recorder.run()
    offsets.append(wall_minus_mono_ns())
    header = history_header(args, offsets, clock_offset_ms, waits)
    header["seed"] = seed
    out = args.out or tempfile.mkstemp(prefix="llmlimit-history-", suffix=".jsonl")[1]
    with open(out, "w") as f:
        for line in [header] + recorder.ops:
            f.write(json.dumps(line) + "\n")
    counts = summary(recorder.ops)
    print(" ".join("%s=%d" % item for item in counts.items()))
    violations = check.check(header, recorder.ops)
    print("%d violation(s)" % violations.count())
    violations.report(sys.stdout)
    missing = exercised(counts, waits, waits)
    if midnight is not None:
        before, after = sides_of_midnight(recorder.ops, midnight)
        print("allowed before midnight %d, after %d" % (before, after))
        if before == 0 or after == 0:
            missing.append("allowed on both sides of midnight")
    if missing:
        print("the history did not exercise the model: none of %s" % ", ".join(missing))
    if violations.count() or missing:
        print("history kept in %s" % out)
        return 1
    if args.out is None:
        os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
