"""Checks a recorded llmlimitd history against the sequential model of
docs/semantics.md (see record.py for the history format). Python standard
library.

Each operation is known only by its client-side [start, end] interval, so the
checker reasons with bounds. For every lease and limit it builds a *lower*
function (capacity the lease certainly holds at time t: from the end of the
reserve that answered allowed to the start of the first complete/release that
may have freed it, or its expiry) and an *upper* function (capacity it may
hold: from the first reserve attempt's start, or its reserved_at less the
tolerance, to the end of the complete or release that freed it, or its
expiry). A violation is only reported when no order of the operations inside
their intervals could explain what was seen:

  capacity       rolling/concurrency: at some instant the certain holds exceed
                 the largest capacity that may be in force then
  admission      an allowed reserve could not have fitted at any instant of its
                 interval (narrowed to its reserved_at, give or take the tolerance)
  spurious_denial a capacity denial when the request fitted at every instant, and
                 no waiter it yields to may have been queued on that limit
  usage          a usage answer outside [sum of lower, sum of upper] over its interval
                 (a double reserve or a lost reserve shows up here), or a capacity
                 that cannot be in force then
  error          a definitive error the history cannot explain (exceeds_capacity
                 while every capacity in force covered the amount, limit_decreasing
                 with no decrease pending, an unknown key)

Capacities change during a run (put_limit ops): a change is in force from some
instant of its window, the PUT's interval, or for a pending decrease (answered
"decreasing") from the PUT's start to the end of the first usage read that
shows it applied. At an instant the capacity in force is one of the values
from the last change surely applied to the last one possibly begun.

Budget holds count in the UTC period (day, week, month) their lease was
reserved in and end with it: a run across midnight sees the new period start
from zero. The server's clock may be ahead of the wall clock by
clock_offset_ms (a --test-clock run started just before midnight).
  idempotency    a retry with the same lease_id answered differently (a denial
                 that may not have been recorded, see below, may be followed by an
                 admission; an admission is answered alike every time)
  timestamps, finalize, status, warning: answers that contradict the model

Waiting for capacity (docs/semantics.md "Waiting for capacity"): a reserve
with wait_ms takes effect at some instant of its interval, like any other.
A capacity denial is not recorded against its lease (the same lease id may be
admitted later) when others waited ahead of it (a waiter of the same or a
better priority on one of its limits may have been queued during its
interval) or when another waiting request of the same lease overlapped it;
else it is. Then:
  deadline       a waiting reserve answered later than wait_ms + the wait tolerance
  early_denial   a waiting reserve denied for capacity before wait_ms had passed,
                 though it was not a replay of an earlier denial, the queue was not
                 full, and on every denied limit what only time frees (completed
                 rolling holds, a budget's committed spend and debt) left room for it
  waited         waited_ms missing from a waiting reserve's answer (or present in a
                 plain one), or longer than the client waited
  queue_full     x-llmlimit-queue: full on anything but a waiting reserve's capacity
                 denial, or while fewer than max_waiters other waiting requests
                 were open
  cancel         a lease admitted after its client left mid-wait, before any later
                 request of the lease could have asked for it; or released for the
                 client that left, yet a retry of it answered allowed (its complete
                 then answers 409 although the client never released it)
  waiting        llmlimit_wait_waiting above the number of waiting requests that
                 were open (a client that left counts until the wait tolerance
                 after it closed): a waiter left behind

The wait tolerance (header wait_tolerance_ms) is how late a waiter may be
answered after its deadline, or leave the queue after its client closed: one
pass of the wait layer's thread plus one backend reserve (its last attempt;
on sqlite a group commit, on tigerbeetle one round trip), plus the client's
own delays in reading the answer. A limit put holds its HTTP worker while
limits.json is written and fsynced, and every request on that worker waits
(seen: 290 ms on a busy disk): the time a put_limit op overlaps a waiting
request is added to its tolerance.

A fault run's header may list "outages" ([start_ns, end_ns] on the
monotonic clock) in which the backend could not answer: a backend on its own
clock (a TigerBeetle cluster in a view change) expires nothing then, so a
hold due inside an outage may count until its end (plus the tolerance).

A header's "keep_rounding_ms" says the backend books what a rolling complete
keeps when the complete lands, for what was left of the window when the
complete was built, rounded up to that (tigerbeetle: whole seconds, as its
timeouts are): the kept actual may then count past the hold's expiry by the
complete's time in flight plus the rounding. Absent, it ends with the window.

Usage: check.py HISTORY.jsonl  (exit 0 if no violation, 1 otherwise)
"""

import bisect
import datetime
import json
import sys
from collections import defaultdict

INF = float("inf")
TOLERANCE_MS_DEFAULT = 50
WAIT_TOLERANCE_MS_DEFAULT = 300
PRIORITY_DEFAULT = 5
MS = 1000 * 1000
BUCKET_NS = 100 * 1000 * 1000  # index granularity of hold segments
HOUR_NS = 3600 * 1000 * 1000 * 1000
REPORT_PER_KIND_MAX = 10
BUDGET_TIMEOUT_SECONDS_DEFAULT = 60
BUDGET_TIMEOUT_SECONDS_MIN = 5
BUDGET_TIMEOUT_SECONDS_MAX = 300
WHICH = ("lower", "upper", "fixed")


DAY_MS = 24 * 3600 * 1000


def period_end_ms(period, wall_ms):
    """End (exclusive, unix ms) of the UTC calendar period containing wall_ms:
    days from 00:00, ISO weeks from Monday 00:00, months from the 1st."""
    days = wall_ms // DAY_MS
    if period == "day":
        return (days + 1) * DAY_MS
    if period == "week":
        monday = days - (days + 3) % 7  # 1970-01-01 was a Thursday
        return (monday + 7) * DAY_MS
    assert period == "month", period
    date = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    first = datetime.date(date.year + date.month // 12, date.month % 12 + 1, 1)
    return (first - datetime.date(1970, 1, 1)).days * DAY_MS


class Limit:
    def __init__(self, definition):
        self.key = definition["key"]
        self.kind = definition["kind"]
        self.capacity = Capacity(definition["capacity"])
        self.period = definition.get("period") or None
        if self.kind == "rolling":
            seconds = definition["window_seconds"]
        elif self.kind == "concurrency":
            seconds = definition["timeout_seconds"]
        else:
            seconds = definition.get("timeout_seconds") or BUDGET_TIMEOUT_SECONDS_DEFAULT
            seconds = min(max(seconds, BUDGET_TIMEOUT_SECONDS_MIN), BUDGET_TIMEOUT_SECONDS_MAX)
        self.duration_ns = seconds * 1000 * 1000 * 1000


class Capacity:
    """A limit's capacity over the run: the one it was put with, then each
    change (lo, hi, value, decreasing): in force from some instant of
    [lo, hi]. Changes are made one at a time, so at an instant t the
    capacity in force is one of the values from the last change surely
    applied (hi <= t) to the last one possibly begun (lo <= t)."""

    def __init__(self, initial):
        self.initial = initial
        self.changes = []
        self.points = [-INF]  # pieces [points[i], points[i+1]): possible values
        self.highs = [initial]
        self.lows = [initial]

    def change(self, lo, hi, value, decreasing):
        self.changes.append((lo, hi, value, decreasing))

    def seal(self):
        self.changes.sort(key=lambda c: c[0])
        values = [self.initial] + [c[2] for c in self.changes]
        points = sorted({c[0] for c in self.changes} | {c[1] for c in self.changes} - {INF})
        for at in points:
            surely = 0
            while surely < len(self.changes) and self.changes[surely][1] <= at:
                surely += 1
            begun = sum(1 for c in self.changes if c[0] <= at)
            possible = values[surely:begun + 1]
            self.points.append(at)
            self.highs.append(max(possible))
            self.lows.append(min(possible))

    def _pieces(self, a, b):
        return (bisect.bisect_right(self.points, a) - 1, bisect.bisect_right(self.points, b) - 1)

    def most(self, a, b):
        """The largest capacity that may be in force at some instant of [a, b]."""
        i, j = self._pieces(a, b)
        return max(self.highs[i:j + 1])

    def least(self, a, b):
        """The smallest capacity that may be in force at some instant of [a, b]."""
        i, j = self._pieces(a, b)
        return min(self.lows[i:j + 1])

    def decreasing_during(self, a, b):
        return any(d and lo <= b and hi >= a for lo, hi, _, d in self.changes)


class Steps:
    """The sum of hold segments at each instant minus a capacity step
    function (points, values): range minimum and maximum by pieces."""

    def __init__(self, segments, cap_points, cap_values):
        delta = defaultdict(int)
        for start, end, amount in segments:
            delta[start] += amount
            if end != INF:
                delta[end] -= amount
        times = sorted(set(delta) | set(cap_points[1:]))
        self.times = [-INF] + times
        self.values = [-cap_values[0]]
        level, c = 0, 0
        for at in times:
            level += delta.get(at, 0)
            while c + 1 < len(cap_points) and cap_points[c + 1] <= at:
                c += 1
            self.values.append(level - cap_values[c])

    def _pieces(self, a, b):
        return (bisect.bisect_right(self.times, a) - 1, bisect.bisect_right(self.times, b) - 1)

    def low(self, a, b):
        i, j = self._pieces(a, b)
        return min(self.values[i:j + 1])

    def high(self, a, b):
        i, j = self._pieces(a, b)
        return max(self.values[i:j + 1])

    def peak(self):
        """(largest value, the instant it starts)."""
        best = max(range(len(self.values)), key=self.values.__getitem__)
        return self.values[best], self.times[best]


def op_succeeded(op):
    return op.get("status") == 200


def op_unknown(op):
    """No answer came back, or a 503 (unknown outcome, docs/semantics.md): the
    operation may or may not have taken effect."""
    return op.get("status") is None or op["status"] >= 500


def wait_ms_of(op):
    return op.get("wait_ms") or 0


def priority_of(op):
    priority = op.get("priority")
    return PRIORITY_DEFAULT if priority is None else priority


def is_denial(op):
    """A capacity denial (200, not allowed, no error)."""
    return (op_succeeded(op) and isinstance(op.get("body"), dict)
            and not op["body"].get("allowed") and op["body"].get("error") in ("", None))


def requirement_map(op):
    return {r["key"]: r["amount"] for r in op["requirements"]}


class Lease:
    """Everything the history says about one lease_id."""

    def __init__(self, lease_id):
        self.lease_id = lease_id
        self.reserves = []
        self.completes = []
        self.releases = []
        self.requirements = None  # key -> amount of the first reserve
        self.same = []  # the reserves with those requirements
        self.outcome = None  # "allowed", "denied", "rejected" or None (unknown)
        self.answer = None  # body of the answer that settled it
        self.first_start_ns = None
        self.decided_end_ns = None
        self.sticky = None  # the recorded denial that settled it

    def actual(self, key):
        """The settled amount of key: its actual, or the reserved amount if left out."""
        for op in self.completes:
            for item in op["actuals"]:
                if item["key"] == key:
                    return item["actual_amount"]
        return self.requirements[key]

    def left_mid_wait(self):
        return [op for op in self.reserves if "closed_ns" in op]


def same_answer(a, b):
    if a["allowed"] != b["allowed"] or a.get("error") != b.get("error"):
        return False
    if a["allowed"]:
        return (a["reserved_at_unix_ms"] == b["reserved_at_unix_ms"]
                and a["expires_at_unix_ms"] == b["expires_at_unix_ms"])
    return True


def summary(body):
    if not isinstance(body, dict):
        return repr(body)
    if body.get("allowed"):
        return "allowed(reserved_at=%s, expires_at=%s)" % (
            body.get("reserved_at_unix_ms"), body.get("expires_at_unix_ms"))
    return "denied(error=%r, denied_keys=%s)" % (body.get("error"), body.get("denied_keys"))


class Violations:
    def __init__(self):
        self.by_kind = defaultdict(list)
        self.checked = defaultdict(int)  # how many times each check ran

    def add(self, kind, message, op=None):
        if op is not None:
            message += " [op %s %s]" % (op.get("op"), op.get("seq"))
        self.by_kind[kind].append(message)

    def count(self):
        return sum(len(v) for v in self.by_kind.values())

    def report(self, out):
        out.write("checked: %s\n" % ", ".join(
            "%s=%d" % item for item in sorted(self.checked.items())))
        for kind in sorted(self.by_kind):
            messages = self.by_kind[kind]
            out.write("%s: %d violation(s)\n" % (kind, len(messages)))
            for message in messages[:REPORT_PER_KIND_MAX]:
                out.write("  %s\n" % message)


class Timeline:
    """The lower, upper and fixed hold functions of every lease on one limit,
    with an index so that a window query only looks at leases alive near it.
    fixed: what only time frees, at most (completed rolling holds until they
    leave the window, a budget's committed spend), for early denials."""

    def __init__(self, limit):
        self.limit = limit
        self.segments = {which: defaultdict(list) for which in WHICH}
        self.buckets = {which: defaultdict(set) for which in WHICH}
        self.forever = {which: {} for which in WHICH}  # lease_id -> (start, amount)
        self.forever_sorted = {}
        self.steps = {}

    @property
    def lower(self):
        return self.segments["lower"]

    @property
    def upper(self):
        return self.segments["upper"]

    def add(self, which, lease_id, start, end, amount):
        if end <= start or amount < 0:
            return
        if end == INF:
            if lease_id in self.forever[which]:  # only the upper bounds of odd histories
                assert which != "lower"
                old_start, old_amount = self.forever[which][lease_id]
                start, amount = min(start, old_start), max(amount, old_amount)
                self.segments[which][lease_id].remove((old_start, INF, old_amount))
            self.forever[which][lease_id] = (start, amount)
            self.buckets[which][int(start // BUCKET_NS)].add(lease_id)
        else:
            for bucket in range(int(start // BUCKET_NS), int(end // BUCKET_NS) + 1):
                self.buckets[which][bucket].add(lease_id)
        self.segments[which][lease_id].append((start, end, amount))

    def seal(self):
        for which in WHICH:
            for segments in self.segments[which].values():
                segments.sort()
            items = sorted((s, amount, lease) for lease, (s, amount) in self.forever[which].items())
            starts = [s for s, _, _ in items]
            prefix = [0]
            for _, amount, _ in items:
                prefix.append(prefix[-1] + amount)
            self.forever_sorted[which] = (starts, prefix)
        capacity = self.limit.capacity
        # lower against the largest capacity (over it: nothing could fit),
        # upper and fixed against the smallest (under it: everything fitted)
        for which, values in (("lower", capacity.highs), ("upper", capacity.lows),
                              ("fixed", capacity.lows)):
            everything = (s for segments in self.segments[which].values() for s in segments)
            self.steps[which] = Steps(everything, capacity.points, values)

    def _candidates(self, which, a, b):
        found = set()
        for bucket in range(int(a // BUCKET_NS), int(b // BUCKET_NS) + 1):
            found |= self.buckets[which].get(bucket, set())
        return found

    def _forever_before(self, which, a):
        starts, prefix = self.forever_sorted[which]
        return prefix[bisect.bisect_right(starts, a)]

    def certain(self, a, b, exclude=None):
        """Sum over leases of the least each certainly holds during [a, b]."""
        total = self._forever_before("lower", a)
        if exclude in self.forever["lower"] and self.forever["lower"][exclude][0] <= a:
            total -= self.forever["lower"][exclude][1]
        for lease_id in self._candidates("lower", a, b):
            if lease_id == exclude:
                continue
            started = self.forever["lower"].get(lease_id)
            if started is not None and started[0] <= a:
                continue  # already in the prefix sum
            total += covered_min(self.lower[lease_id], a, b)
        return total

    def possible(self, a, b, exclude=None):
        """Sum over leases of the most each may hold at some instant of [a, b]."""
        total = self._forever_before("upper", a)
        if exclude in self.forever["upper"] and self.forever["upper"][exclude][0] <= a:
            total -= self.forever["upper"][exclude][1]
        for lease_id in self._candidates("upper", a, b):
            if lease_id == exclude:
                continue
            started = self.forever["upper"].get(lease_id)
            if started is not None and started[0] <= a:
                continue
            total += overlap_max(self.upper[lease_id], a, b)
        return total

    def holders_at(self, at):
        return sorted(lease for lease, segments in self.lower.items()
                      if any(s <= at < e for s, e, _ in segments))


def covered_min(segments, a, b):
    """Least value of a piecewise function (non-overlapping segments, zero
    elsewhere) over the closed window [a, b]."""
    t, least = a, INF
    for start, end, amount in segments:
        if end <= t:
            continue
        if start > t:
            return 0
        least = min(least, amount)
        t = end
        if t > b:
            return least
    return 0


def overlap_max(segments, a, b):
    best = 0
    for start, end, amount in segments:
        if start <= b and end > a:
            best = max(best, amount)
    return best


class WaitIndex:
    """The waiting requests (wait_ms > 0) of a history: who a request may
    have yielded to, and how many were open at once. A request is open from
    its start to its answer; one whose client left until the wait tolerance
    after it closed (it leaves the queue by then); one without an answer
    until the tolerance after its end. open_until(op) says until when."""

    def __init__(self, ops, open_until):
        self.by_key = defaultdict(list)
        self.longest = 0
        spans = []
        for op in ops:
            if op["op"] != "reserve" or wait_ms_of(op) <= 0:
                continue
            end = open_until(op)
            spans.append((op["start_ns"], end, 1))
            self.longest = max(self.longest, end - op["start_ns"])
            for r in op["requirements"]:
                self.by_key[r["key"]].append((op["start_ns"], end, priority_of(op), op["seq"]))
        for entries in self.by_key.values():
            entries.sort()
        self.open = Steps(spans, [-INF], [0])

    def ahead(self, op, key):
        """May a waiter of the same or a better priority have been queued on
        key while op was in flight (op not counted)?"""
        entries = self.by_key.get(key, [])
        first = bisect.bisect_left(entries, (op["start_ns"] - self.longest,))
        last = bisect.bisect_right(entries, (op["end_ns"], INF))
        mine = priority_of(op)
        return any(seq != op["seq"] and priority <= mine and end >= op["start_ns"]
                   for _, end, priority, seq in entries[first:last])


class History:
    def __init__(self, header, ops, tolerance_ms=None):
        self.limits = {d["key"]: Limit(d) for d in header["limits"]}
        offsets = header["wall_minus_mono_ns"]
        self.offset_ns = sum(offsets) / len(offsets)
        # The server's clock may run ahead of the wall clock (--test-clock):
        # its timestamps are the wall clock plus this.
        self.clock_offset_ms = header.get("clock_offset_ms", 0)
        tolerance_ms = tolerance_ms if tolerance_ms is not None else header.get(
            "tolerance_ms", TOLERANCE_MS_DEFAULT)
        drift_ns = max(offsets) - min(offsets)
        self.tolerance_ns = tolerance_ms * MS + drift_ns
        self.wait_tolerance_ns = header.get("wait_tolerance_ms",
                                            WAIT_TOLERANCE_MS_DEFAULT) * MS + drift_ns
        self.max_waiters = header.get("max_waiters")
        self.ops = ops
        self.unavailable_ok = bool(header.get("unavailable_ok"))
        self.outages = [(start, end) for start, end in header.get("outages", [])]
        keep_rounding_ms = header.get("keep_rounding_ms")
        self.keep_rounding_ns = None if keep_rounding_ms is None else keep_rounding_ms * MS
        self.leases = {}
        self.usages = []
        self.puts = []
        self.gauges = []
        self.timelines = {key: Timeline(limit) for key, limit in self.limits.items()}
        self.violations = Violations()
        self.waits = None

    def mono_from_wall_ms(self, wall_ms):
        """The monotonic instant of a server timestamp."""
        return (wall_ms - self.clock_offset_ms) * 1000 * 1000 - self.offset_ns

    def wall_ms_from_mono(self, mono_ns):
        """The server's clock reading at a monotonic instant."""
        return int((mono_ns + self.offset_ns) // (1000 * 1000)) + self.clock_offset_ms

    def period_bounds(self, limit, lease, reserved):
        """(lower, upper) monotonic bound of the end of the budget period the
        lease's reservation belongs to: the one containing reserved_at, or
        for an unknown outcome the latest its reserve may have run in. INF
        when it ends after the history (no clipping needed)."""
        if limit.kind != "budget":
            return INF, INF
        if reserved is None:
            latest = max(op["end_ns"] for op in lease.reserves)
            at_ms = self.wall_ms_from_mono(latest + self.tolerance_ns)
        else:
            at_ms = lease.answer["reserved_at_unix_ms"]
        end = self.mono_from_wall_ms(period_end_ms(limit.period, at_ms))
        if end > self.history_end_ns:
            return INF, INF
        return end - self.tolerance_ns, end + self.tolerance_ns

    def expiry_latest(self, due_ns):
        """The latest a hold due at due_ns may still count: the tolerance
        after it, or after the end of an outage it fell due in."""
        latest = due_ns + self.tolerance_ns
        for start, end in self.outages:
            if start - self.tolerance_ns <= due_ns <= end:
                latest = max(latest, end + self.tolerance_ns)
        return latest

    def unavailable_allowed(self, op):
        """A fault run (header unavailable_ok) may see 503 backend_error: an
        unknown outcome, which the model bounds like a lost answer."""
        body = op.get("body")
        return (self.unavailable_ok and op.get("status") == 503 and isinstance(body, dict)
                and body.get("error") == "backend_error")

    def lease(self, lease_id):
        if lease_id not in self.leases:
            self.leases[lease_id] = Lease(lease_id)
        return self.leases[lease_id]

    def sort_ops(self):
        for seq, op in enumerate(self.ops):
            op.setdefault("seq", seq)
            kind = op["op"]
            if kind == "usage":
                self.usages.append(op)
                continue
            if kind == "metrics":
                self.gauges.append(op)
                continue
            if kind == "put_limit":
                self.puts.append(op)
            else:
                target = self.lease(op["lease_id"])
                {"reserve": target.reserves, "complete": target.completes,
                 "release": target.releases}[kind].append(op)
            if op.get("status") not in (200, 409, None) and not op.get("expect_error") \
                    and not self.unavailable_allowed(op):
                self.violations.add("status", "%s of %s answered %s: %s" % (
                    kind, op.get("lease_id", op.get("key")), op.get("status"), op.get("body")),
                    op)

    def build_capacities(self):
        """Each answered PUT is a change, in force from some instant of its
        window; a pending decrease until the first read that shows it."""
        for op in sorted(self.puts, key=lambda op: op["start_ns"]):
            limit = self.limits.get(op["key"])
            if limit is None or not (op_succeeded(op) or op_unknown(op)):
                continue
            decreasing = op_unknown(op) or op["body"].get("status") == "decreasing"
            hi = INF if op_unknown(op) else op["end_ns"]
            if decreasing and not op_unknown(op):
                shown = [read["end_ns"] for read in self.usages
                         if read["key"] == op["key"] and read["start_ns"] >= op["start_ns"]
                         and op_succeeded(read) and read["body"].get("status") == "active"
                         and read["body"].get("capacity") == op["capacity"]]
                hi = min(shown, default=INF)
            limit.capacity.change(op["start_ns"], hi, op["capacity"], decreasing)
        for limit in self.limits.values():
            limit.capacity.seal()

    def run(self):
        self.history_end_ns = max((op["end_ns"] for op in self.ops), default=0) + HOUR_NS
        self.sort_ops()
        self.build_capacities()
        self.stalls = sorted((op["start_ns"], op["end_ns"]) for op in self.puts)
        self.waits = WaitIndex(self.ops, self.open_until)
        for lease in self.leases.values():
            if lease.reserves:
                self.decide(lease)
                self.check_reserve_answers(lease)
            self.check_finalize(lease)
            if lease.reserves and lease.requirements:
                self.build_segments(lease)
        for timeline in self.timelines.values():
            timeline.seal()
        for lease in self.leases.values():
            self.check_waits(lease)
        self.check_capacity()
        self.check_admission()
        self.check_errors()
        self.check_usage()
        self.check_gauges()
        for lease in self.leases.values():
            self.check_cancel(lease)
        return self.violations

    # -- reserve answers ------------------------------------------------------

    def may_be_unrecorded(self, op, lease):
        """A capacity denial the backend may not have recorded: a waiter may
        have been ahead of it on one of its limits, or another waiting request
        of the lease overlapped it (a retry that joined a wait, or the wait it
        joined)."""
        if any(self.waits.ahead(op, r["key"]) for r in op["requirements"]):
            return True
        return any(other is not op and wait_ms_of(other) > 0
                   and other["start_ns"] <= op["end_ns"]
                   and self.open_until(other) >= op["start_ns"] for other in lease.same)

    def open_until(self, op):
        """Until when a request may wait on the server: its answer, or the
        wait tolerance after its client left."""
        if op.get("status") is None:
            left = op.get("closed_ns", op["end_ns"])
            return left + self.wait_tolerance(left, left + self.wait_tolerance_ns)
        return op["end_ns"]

    def wait_tolerance(self, a, b):
        """The wait tolerance, and the time limit puts (which hold an HTTP
        worker while limits.json is fsynced) overlap [a, b]."""
        stalled = sum(max(0, min(b, end) - max(a, start)) for start, end in self.stalls
                      if start < b)
        return self.wait_tolerance_ns + stalled

    def decide(self, lease):
        """Settles the reserve outcome and checks that retries agree: one
        admission, answered alike; a recorded denial stays; a denial that may
        not have been recorded may come before an admission."""
        violations = self.violations
        lease.reserves.sort(key=lambda op: op["start_ns"])
        lease.first_start_ns = lease.reserves[0]["start_ns"]
        lease.requirements = requirement_map(lease.reserves[0])
        others = []
        for op in lease.reserves:
            if requirement_map(op) != lease.requirements:
                others.append(op)
                continue
            lease.same.append(op)
            if op.get("status") == 409 and not self.may_be_released(op, lease):
                violations.add("idempotency", "lease %s: a retry with the same requirements "
                               "answered 409" % lease.lease_id, op)
        answered = [op for op in lease.same if op_succeeded(op)]
        allowed = [op for op in answered if op["body"]["allowed"]]
        denials = [op for op in answered if is_denial(op)]
        sticky = [op for op in denials if not self.may_be_unrecorded(op, lease)]
        if allowed:
            self.decide_allowed(lease, allowed, denials, sticky)
        elif sticky:
            first = min(sticky, key=lambda op: op["end_ns"])
            lease.outcome, lease.answer, lease.sticky = "denied", first["body"], first
            lease.decided_end_ns = first["end_ns"]
        elif any(self.may_have_admitted(op, lease) for op in lease.same):
            lease.outcome = None  # a lost request may have admitted it
        elif denials:
            lease.outcome, lease.answer = "denied", denials[0]["body"]
            lease.decided_end_ns = min(op["end_ns"] for op in denials)
        elif answered or any(op.get("status") not in (409, None) for op in lease.same):
            lease.outcome = "rejected"
            lease.answer = answered[0]["body"] if answered else None
        for op in others:  # once the lease is known, other requirements conflict
            known = lease.outcome == "allowed" or lease.sticky is not None
            if known and op["start_ns"] > lease.decided_end_ns and op.get("status") not in (
                    409, None):
                violations.add("idempotency", "lease %s: a reserve with other requirements "
                               "answered %s, want 409 lease_conflict"
                               % (lease.lease_id, op.get("status")), op)

    def may_be_released(self, op, lease):
        """A retry answered 409 already_finalized is right when the lease may
        have been released before it: by a release of its own, or by the
        server for a client that left mid-wait (docs/semantics.md)."""
        if not isinstance(op.get("body"), dict) or op["body"].get("error") != "already_finalized":
            return False
        if any(r["start_ns"] < op["end_ns"] and (op_succeeded(r) or op_unknown(r))
               for r in lease.releases):
            return True
        return any(left["start_ns"] < op["start_ns"] for left in lease.left_mid_wait())

    def may_have_admitted(self, op, lease):
        """A request without a definitive answer that may have admitted the
        lease, unseen: not one whose client left mid-wait and that a later
        answer (not allowed) shows to have left nothing (it had left the queue
        by then, and an admission would have been the answer)."""
        if not op_unknown(op):
            return False
        if "closed_ns" not in op:
            return True
        gone = self.open_until(op)
        return not any(op_succeeded(other) and other["start_ns"] > gone for other in lease.same)

    def decide_allowed(self, lease, allowed, denials, sticky):
        first = min(allowed, key=lambda op: op["end_ns"])
        lease.outcome, lease.answer = "allowed", first["body"]
        lease.decided_end_ns = first["end_ns"]
        for op in allowed:
            if op is not first:
                self.violations.checked["retries"] += 1
            if not same_answer(first["body"], op["body"]):
                self.violations.add("idempotency", "lease %s: admitted twice: %s and %s" % (
                    lease.lease_id, summary(first["body"]), summary(op["body"])), op)
        for op in denials:
            self.violations.checked["retries"] += 1
            if op in sticky:
                self.violations.add("idempotency", "lease %s: a recorded denial and an "
                                    "admission (%s)" % (lease.lease_id, summary(first["body"])),
                                    op)
            elif op["start_ns"] > lease.decided_end_ns:
                self.violations.add("idempotency", "lease %s: denied after it was admitted "
                                    "(%s)" % (lease.lease_id, summary(first["body"])), op)

    def check_reserve_answers(self, lease):
        if lease.outcome == "allowed":
            self.check_timestamps(lease, lease.answer)
        for op in lease.same:
            if is_denial(op):
                self.check_denial(lease, op)

    def check_denial(self, lease, op):
        body = op["body"]
        denied = body.get("denied_keys") or []
        if not denied:
            self.violations.add("denial", "lease %s: capacity denial without denied_keys"
                                % lease.lease_id, op)
        for key in denied:
            if key not in lease.requirements:
                self.violations.add("denial", "lease %s: denied key %s not in the request"
                                    % (lease.lease_id, key), op)
        if body.get("retry_after_ms", 0) < 0:
            self.violations.add("denial", "lease %s: negative retry_after_ms" % lease.lease_id,
                                op)
        header = op.get("retry_after_header")
        if header is not None:
            want = -(-body.get("retry_after_ms", 0) // 1000)
            if int(header) != want:
                self.violations.add("denial", "lease %s: Retry-After %s, want %d (ms %d)" % (
                    lease.lease_id, header, want, body.get("retry_after_ms", 0)), op)

    def check_timestamps(self, lease, body):
        reserved = self.mono_from_wall_ms(body["reserved_at_unix_ms"])
        if not (lease.first_start_ns - self.tolerance_ns <= reserved
                <= lease.decided_end_ns + self.tolerance_ns):
            self.violations.add("timestamps", "lease %s: reserved_at %d outside its request" % (
                lease.lease_id, body["reserved_at_unix_ms"]))
        durations = [self.limits[k].duration_ns for k in lease.requirements if k in self.limits]
        if durations:
            want = body["reserved_at_unix_ms"] + min(durations) // 1000000
            if body["expires_at_unix_ms"] != want:
                self.violations.add("timestamps", "lease %s: expires_at %d, want %d" % (
                    lease.lease_id, body["expires_at_unix_ms"], want))

    # -- waiting ----------------------------------------------------------------

    def check_waits(self, lease):
        for op in lease.same:
            if op_unknown(op):
                continue
            self.check_waited_ms(lease, op)
            if op.get("queue_full"):
                self.check_queue_full(lease, op)
            if wait_ms_of(op) <= 0:
                continue
            took = op["end_ns"] - op["start_ns"]
            self.violations.checked["deadline"] += 1
            tolerance = self.wait_tolerance(op["start_ns"], op["end_ns"])
            if took > wait_ms_of(op) * MS + tolerance:
                self.violations.add("deadline", "lease %s: wait_ms %d answered after %.1f ms "
                                    "(tolerance %.0f ms)" % (
                                        lease.lease_id, wait_ms_of(op), took / MS,
                                        tolerance / MS), op)
            if (is_denial(op) and not op.get("queue_full")
                    and took < wait_ms_of(op) * MS - self.tolerance_ns):
                self.check_early_denial(lease, op)

    def check_waited_ms(self, lease, op):
        if not op_succeeded(op):
            return
        waited = op["body"].get("waited_ms")
        if (waited is None) != (wait_ms_of(op) <= 0):
            self.violations.add("waited", "lease %s: wait_ms %d answered %s waited_ms" % (
                lease.lease_id, wait_ms_of(op), "without" if waited is None else "with"), op)
            return
        took = op["end_ns"] - op["start_ns"]
        if waited is not None and not 0 <= waited * MS <= took + self.tolerance_ns:
            self.violations.add("waited", "lease %s: waited_ms %d, the client waited %.1f ms" % (
                lease.lease_id, waited, took / MS), op)

    def check_queue_full(self, lease, op):
        """Full: a waiting reserve answered at once as a plain one, denied,
        while max_waiters others waited."""
        self.violations.checked["queue_full"] += 1
        if wait_ms_of(op) <= 0 or not is_denial(op):
            self.violations.add("queue_full", "lease %s: x-llmlimit-queue: full on %s (wait_ms "
                                "%d)" % (lease.lease_id, summary(op["body"]), wait_ms_of(op)), op)
            return
        if self.max_waiters is None:
            return
        most = self.waits.open.high(op["start_ns"], op["end_ns"])
        if most < self.max_waiters + 1:
            self.violations.add("queue_full", "lease %s: queue full with at most %d other "
                                "waiting requests open (max_waiters %d)" % (
                                    lease.lease_id, most - 1, self.max_waiters), op)

    def check_early_denial(self, lease, op):
        """Denied before its deadline: a replay of a denial already recorded,
        or a limit that only time can free, and not in time."""
        self.violations.checked["early_denial"] += 1
        # A replay: of a denial answered before it was sent, of a recorded
        # one (a plain reserve's, or one answered as the queue was full) made
        # while it was open, or of whatever a request without an answer was
        # told (not of a wait it joined: that answer must stand on its own).
        # A wait that reached its deadline ends with a plain reserve, recorded:
        # a retry that reached the server after that deadline (sent no earlier
        # than the tolerance before it) is told that denial.
        replay = any(other is not op and (
            (is_denial(other) and other["end_ns"] < op["start_ns"])
            or (is_denial(other) and (other.get("queue_full") or not wait_ms_of(other))
                and other["start_ns"] < op["end_ns"])
            or (is_denial(other) and wait_ms_of(other) and other["start_ns"] < op["end_ns"]
                and op["start_ns"] >= other["start_ns"] + wait_ms_of(other) * MS
                - self.tolerance_ns)
            or (op_unknown(other) and other["start_ns"] < op["end_ns"])) for other in lease.same)
        if replay:
            return
        a, b = lease.first_start_ns, op["end_ns"]
        amounts = requirement_map(op)
        for key in op["body"].get("denied_keys") or []:
            timeline = self.timelines.get(key)
            if timeline is None or timeline.steps["fixed"].high(a, b) + amounts[key] > 0:
                return  # what only time frees may have left no room on key
        self.violations.add("early_denial", "lease %s: wait_ms %d denied after %.1f ms on %s, "
                            "where nothing but live reservations stood in its way" % (
                                lease.lease_id, wait_ms_of(op),
                                (op["end_ns"] - op["start_ns"]) / MS,
                                op["body"].get("denied_keys")), op)

    def check_cancel(self, lease):
        """A client that left mid-wait: no admission for it after it left,
        unless a later request of the lease may have asked for it."""
        if lease.outcome != "allowed":
            return
        admitted = self.mono_from_wall_ms(lease.answer["reserved_at_unix_ms"])
        for op in lease.left_mid_wait():
            self.violations.checked["cancel"] += 1
            if admitted <= op["closed_ns"] + self.wait_tolerance_ns:
                continue
            asked = any(other is not op and other["start_ns"] - self.tolerance_ns <= admitted
                        and (admitted <= self.open_until(other) + self.tolerance_ns
                             or (other.get("status") is None and "closed_ns" not in other))
                        for other in lease.same)
            if not asked:
                self.violations.add("cancel", "lease %s: admitted %.1f ms after its client "
                                    "left mid-wait, before any retry asked for it" % (
                                        lease.lease_id, (admitted - op["closed_ns"]) / MS), op)

    def check_gauges(self):
        """llmlimit_wait_waiting never above the waiting requests open."""
        for op in self.gauges:
            if not op_succeeded(op) or op.get("waiting") is None:
                continue
            self.violations.checked["waiting"] += 1
            most = self.waits.open.high(op["start_ns"], op["end_ns"])
            if op["waiting"] > most:
                self.violations.add("waiting", "llmlimit_wait_waiting %d while at most %d "
                                    "waiting requests were open: a waiter left behind" % (
                                        op["waiting"], most), op)

    # -- complete and release ---------------------------------------------------

    def first_success(self, ops):
        done = [op for op in ops if op_succeeded(op)]
        return min(done, key=lambda op: op["end_ns"]) if done else None

    def check_finalize(self, lease):
        complete = self.first_success(lease.completes)
        release = self.first_success(lease.releases)
        if lease.outcome != "allowed":
            return
        if complete is not None and release is not None:
            self.violations.add("finalize", "lease %s both completed and released with 200"
                                % lease.lease_id, release)
        for op in lease.completes:
            if op_succeeded(op) and not op["body"].get("reconciled"):
                self.violations.add("finalize", "lease %s: complete of an allowed lease "
                                    "answered reconciled=false" % lease.lease_id, op)
        self.check_conflicts(lease, complete, release)
        if complete is not None:
            self.check_expiry_warning(lease, complete)

    def check_conflicts(self, lease, complete, release):
        """Finalizing a lease the other way after a definitive finish is 409,
        and 409 is only right when the other way may have come first."""
        pairs = ((complete, lease.completes, lease.releases),
                 (release, lease.releases, lease.completes))
        for first, own, others in pairs:
            for op in others:
                if first is not None and op["start_ns"] > first["end_ns"] and not (
                        op.get("status") == 409 or op_unknown(op)):
                    self.violations.add("finalize", "lease %s: %s after %s answered %s, want "
                                        "409 already_finalized" % (
                                            lease.lease_id, op["op"], first["op"],
                                            op.get("status")), op)
                tried = [o["start_ns"] for o in own if op_succeeded(o) or op_unknown(o)]
                if op.get("status") == 409 and not any(t < op["end_ns"] for t in tried):
                    if op["op"] == "complete" and lease.left_mid_wait():
                        self.violations.add("cancel", "lease %s: its client left mid-wait; a "
                                            "retry was answered allowed, but its complete "
                                            "answers 409: the server released it for the "
                                            "client that left, and told the retry it holds"
                                            % lease.lease_id, op)
                    else:
                        self.violations.add("finalize", "lease %s: %s answered 409 though it "
                                            "was not finalized the other way" % (
                                                lease.lease_id, op["op"]), op)

    def check_expiry_warning(self, lease, complete):
        warnings = complete["body"].get("warnings") or []
        reserved = self.mono_from_wall_ms(lease.answer["reserved_at_unix_ms"])
        for key in lease.requirements:
            limit = self.limits.get(key)
            if limit is None or limit.kind != "budget":
                continue
            expiry = reserved + limit.duration_ns
            warned = ("commit_after_expiry:" + key) in warnings
            first_try = min(op["start_ns"] for op in lease.completes)
            if first_try > self.expiry_latest(expiry) and not warned:
                self.violations.add("warning", "lease %s: commit after expiry of %s not warned"
                                    % (lease.lease_id, key), complete)
            if complete["end_ns"] < expiry - self.tolerance_ns and warned:
                self.violations.add("warning", "lease %s: commit_after_expiry:%s before expiry"
                                    % (lease.lease_id, key), complete)

    # -- the model: hold segments ---------------------------------------------------

    def build_segments(self, lease):
        if lease.outcome not in ("allowed", None):
            return
        might_free = [op for op in lease.completes + lease.releases
                      if op_succeeded(op) or op_unknown(op)]
        free_try = min((op["start_ns"] for op in might_free), default=INF)
        only_completes = all(op["op"] == "complete" for op in might_free)
        complete = self.first_success(lease.completes)
        release = self.first_success(lease.releases)
        unknown_completes = [op for op in lease.completes if op_unknown(op)]
        hold_hi = lease.first_start_ns
        if lease.outcome == "allowed":
            reserved = self.mono_from_wall_ms(lease.answer["reserved_at_unix_ms"])
            hold_lo = lease.decided_end_ns
            # Nothing is held before the reservation was made.
            hold_hi = max(hold_hi, min(reserved - self.tolerance_ns, hold_lo))
        else:  # no definitive answer: it may hold from the first try, for as long as it can
            reserved, hold_lo = None, INF
        for key, amount in lease.requirements.items():
            limit = self.limits.get(key)
            if limit is None:
                continue
            if reserved is None:
                exp_lo, exp_hi = -INF, INF
            else:
                exp_lo = reserved + limit.duration_ns - self.tolerance_ns
                exp_hi = self.expiry_latest(reserved + limit.duration_ns)
            span = Span(lease, key, amount, hold_lo, hold_hi, exp_lo, exp_hi, free_try,
                        only_completes, complete, release, unknown_completes)
            span.keep_end = self.keep_end(span)
            timeline = self.timelines[key]
            if limit.kind == "budget":
                timeline = PeriodClip(timeline, *self.period_bounds(limit, lease, reserved))
            {"rolling": rolling_segments, "concurrency": concurrency_segments,
             "budget": budget_segments}[limit.kind](timeline, span)

    def keep_end(self, span):
        """The latest a rolling complete's kept actual may count. Exactly the
        hold's expiry, unless the header says the backend books the keep when
        the complete lands, for what was left of the window when it was built,
        rounded up to keep_rounding_ms (tigerbeetle: whole seconds): then it
        may count until the complete landed, plus what was left of the window
        at its first try, the rounding and the tolerance (the expiry's lag). A
        complete first tried after the window ended keeps nothing."""
        if self.keep_rounding_ns is None or span.complete_try is None or span.exp_lo == -INF:
            return span.exp_hi
        landed = (span.complete["end_ns"] if span.complete is not None
                  else max(op["end_ns"] for op in span.unknown_completes))
        window_end = span.exp_lo + self.tolerance_ns
        if span.complete_try >= window_end + self.tolerance_ns:
            return span.exp_hi  # built after the window ended: it keeps nothing
        left = max(0, window_end - span.complete_try)  # at the earliest it was built
        return max(span.exp_hi, landed + left + self.keep_rounding_ns + self.tolerance_ns)

    # -- checks over the timelines ------------------------------------------------------

    def check_capacity(self):
        for key, timeline in self.timelines.items():
            if timeline.limit.kind == "budget":
                continue  # debt may take a budget past capacity; admission covers it
            self.violations.checked["capacity_sweeps"] += 1
            over, at = timeline.steps["lower"].peak()
            if over > 0:
                capacity = timeline.limit.capacity.most(at, at)
                self.violations.add("capacity", "%s: %d certainly held at once, capacity %d "
                                    "(leases %s)" % (key, over + capacity, capacity,
                                                     ", ".join(timeline.holders_at(at)[:8])))

    def admission_window(self, lease):
        """Where the admission happened: in its requests' interval, and
        within the tolerance of its reserved_at."""
        a, b = lease.first_start_ns, lease.decided_end_ns
        reserved = self.mono_from_wall_ms(lease.answer["reserved_at_unix_ms"])
        narrow = (max(a, reserved - self.tolerance_ns), min(b, reserved + self.tolerance_ns))
        return narrow if narrow[0] <= narrow[1] else (a, b)

    def check_admission(self):
        for lease in self.leases.values():
            if lease.outcome == "allowed":
                self.check_allowed(lease)
            recorded = False
            for op in sorted(lease.same, key=lambda op: op["end_ns"]):
                if not is_denial(op):
                    continue
                # Decided by itself, or a replay of one decided since the first
                # try; after a recorded denial, the rest are its replays.
                if not recorded:
                    self.check_denied(lease, op, lease.first_start_ns, op["end_ns"])
                recorded = recorded or not self.may_be_unrecorded(op, lease)

    def check_allowed(self, lease):
        a, b = self.admission_window(lease)
        b = min(b, lease.decided_end_ns - 1)  # its own certain hold starts at the answer
        for key, amount in lease.requirements.items():
            timeline = self.timelines.get(key)
            if timeline is None:
                continue
            self.violations.checked["admission"] += 1
            over = timeline.steps["lower"].low(a, max(a, b))
            if over + amount > 0:
                self.violations.add("admission", "lease %s allowed %d on %s while at least %d "
                                    "more than the capacity in force was certainly held" % (
                                        lease.lease_id, amount, key, over + amount))

    def check_denied(self, lease, op, a, b):
        denied = set(op["body"].get("denied_keys") or [])
        for key, amount in lease.requirements.items():
            timeline = self.timelines.get(key)
            if timeline is None or key not in denied:
                continue
            self.violations.checked["denial"] += 1
            if timeline.steps["upper"].high(a, b) + amount > 0:
                continue
            if self.waits.ahead(dict(op, start_ns=a), key):
                continue  # it yielded to a waiter ahead of it on that limit
            self.violations.add("spurious_denial", "lease %s denied %d on %s while it fitted "
                                "at every instant of [%d, %d]" % (
                                    lease.lease_id, amount, key, a, b), op)

    def check_errors(self):
        """Definitive errors of reserves, against the limits and their changes."""
        for lease in self.leases.values():
            for op in lease.same:
                if not op_succeeded(op) or op["body"].get("error") in ("", None):
                    continue
                self.violations.checked["error"] += 1
                problem = self.error_problem(op, op["body"]["error"])
                if problem:
                    self.violations.add("error", "lease %s: %s" % (lease.lease_id, problem), op)

    def error_problem(self, op, error):
        a, b = op["start_ns"] - self.tolerance_ns, op["end_ns"] + self.tolerance_ns
        for prefix in ("exceeds_capacity:", "limit_decreasing:", "unknown_limit_key: "):
            if not error.startswith(prefix):
                continue
            key = error[len(prefix):]
            limit = self.limits.get(key)
            amount = requirement_map(op).get(key)
            if amount is None:
                return "%s names a key the request does not have" % error
            if limit is None:
                return None
            if prefix == "exceeds_capacity:" and amount <= limit.capacity.least(a, b):
                return "%s, but every capacity in force then covered %d" % (error, amount)
            if prefix == "limit_decreasing:" and not limit.capacity.decreasing_during(a, b):
                return "%s while no decrease of it was pending" % error
            if prefix == "unknown_limit_key: ":
                return "%s, a limit the history never deleted" % error
            return None
        return "an error the model does not know: %r" % error

    def check_usage(self):
        for op in self.usages:
            if not op_succeeded(op):
                continue
            key, body = op["key"], op["body"]
            timeline = self.timelines.get(key)
            if timeline is None:
                continue
            limit = timeline.limit
            capacity = body.get("capacity", limit.capacity.initial)
            a, b = op["start_ns"], op["end_ns"]
            if not limit.capacity.least(a, b) <= capacity <= limit.capacity.most(a, b):
                self.violations.add("usage", "%s: capacity %d, the history has %d..%d then" % (
                    key, capacity, limit.capacity.least(a, b), limit.capacity.most(a, b)), op)
            seen = body["reserved"] + body["used"]
            if limit.kind == "budget":
                seen += body["debt"]
            want_available = capacity - seen
            if body["available"] != want_available:
                self.violations.add("usage", "%s: available %d, want %d from %s" % (
                    key, body["available"], want_available, body), op)
            if limit.kind != "budget" and seen > capacity:
                self.violations.add("capacity", "%s: usage shows %d held, capacity %d" % (
                    key, seen, capacity), op)
            if limit.kind == "concurrency" and body["used"] != 0:
                self.violations.add("usage", "%s: concurrency used %d, want 0" % (
                    key, body["used"]), op)
            self.violations.checked["usage"] += 1
            low = timeline.certain(a, b)
            high = timeline.possible(a, b)
            if not low <= seen <= high:
                self.violations.add("usage", "%s: usage shows %d, the history allows %d..%d" % (
                    key, seen, low, high), op)


class PeriodClip:
    """A budget hold counts only in the period its lease was reserved in (a
    commit after the period ended is charged there too): every segment of
    it ends at that period's end, at the latest. The lower bound ends a
    tolerance before it, the upper (and fixed) bound a tolerance after."""

    def __init__(self, timeline, lower_end, upper_end):
        self.timeline = timeline
        self.ends = {"lower": lower_end, "upper": upper_end, "fixed": upper_end}

    def add(self, which, lease_id, start, end, amount):
        self.timeline.add(which, lease_id, start, min(end, self.ends[which]), amount)


class Span:
    """One lease's hold on one limit, as the history bounds it."""

    def __init__(self, lease, key, amount, hold_lo, hold_hi, exp_lo, exp_hi, free_try,
                 only_completes, complete, release, unknown_completes):
        self.lease_id = lease.lease_id
        self.amount = amount
        self.hold_lo = hold_lo  # certainly held from here (INF: never certain)
        self.hold_hi = hold_hi  # possibly held from here
        self.exp_lo, self.exp_hi = exp_lo, exp_hi
        self.free_try = free_try  # first start of a complete/release that may have freed it
        self.only_completes = only_completes
        self.complete, self.release = complete, release
        self.unknown_completes = unknown_completes
        self.actual = lease.actual(key)
        tries = ([complete["start_ns"]] if complete is not None else []) + [
            op["start_ns"] for op in unknown_completes]
        self.complete_try = min(tries, default=None)  # settled (used) from here, at the earliest
        self.keep_end = exp_hi  # what a rolling complete keeps may count until here

    def certain_end(self):
        return min(self.free_try, self.exp_lo)


def rolling_segments(timeline, span):
    """Held until its window ends; complete shrinks it to the actual (lower
    bound min(actual, reserved): an overage is held only if it fits)."""
    lease, amount = span.lease_id, span.amount
    timeline.add("lower", lease, span.hold_lo, span.certain_end(), amount)
    if span.only_completes and span.free_try != INF:
        shrunk = min(amount, span.actual)
        timeline.add("lower", lease, max(span.hold_lo, span.free_try), span.exp_lo, shrunk)
    most = max(amount, span.actual)
    if span.complete is not None:
        timeline.add("upper", lease, span.hold_hi, min(span.complete["end_ns"], span.exp_hi), most)
        timeline.add("upper", lease, span.complete["end_ns"], span.keep_end, span.actual)
    elif span.release is not None:
        timeline.add("upper", lease, span.hold_hi, min(span.release["end_ns"], span.exp_hi), amount)
    else:
        timeline.add("upper", lease, span.hold_hi, span.exp_hi,
                     most if span.unknown_completes else amount)
        if span.unknown_completes:
            timeline.add("upper", lease, span.exp_hi, span.keep_end, most)
    if span.complete_try is not None:  # used: only its window's end frees it
        timeline.add("fixed", lease, span.complete_try, span.keep_end, most)


def concurrency_segments(timeline, span):
    lease = span.lease_id
    timeline.add("lower", lease, span.hold_lo, span.certain_end(), span.amount)
    done = [op["end_ns"] for op in (span.complete, span.release) if op is not None]
    timeline.add("upper", lease, span.hold_hi, min(done + [span.exp_hi]), span.amount)


def budget_segments(timeline, span):
    """A reservation until committed, released or expired; a complete charges
    the actual amount for the rest of the period, even after expiry."""
    lease, amount, actual = span.lease_id, span.amount, span.actual
    timeline.add("lower", lease, span.hold_lo, span.certain_end(), amount)
    if span.complete is not None:
        end = span.complete["end_ns"]
        timeline.add("lower", lease, end, INF, actual)
        timeline.add("upper", lease, span.hold_hi, min(end, span.exp_hi), amount)
        first_try = min([span.complete["start_ns"]] +
                        [op["start_ns"] for op in span.unknown_completes])
        timeline.add("upper", lease, first_try, end, actual)
        timeline.add("upper", lease, end, INF, actual)
    elif span.release is not None:
        timeline.add("upper", lease, span.hold_hi, min(span.release["end_ns"], span.exp_hi),
                     amount)
    elif span.unknown_completes:  # it may have been charged from the first try on
        first_try = min(op["start_ns"] for op in span.unknown_completes)
        timeline.add("upper", lease, span.hold_hi, min(first_try, span.exp_hi), amount)
        timeline.add("upper", lease, first_try, INF, max(amount, actual))
    else:
        timeline.add("upper", lease, span.hold_hi, span.exp_hi, amount)
    if span.complete_try is not None:  # committed spend: only the next period frees it
        timeline.add("fixed", lease, span.complete_try, INF, max(amount, actual))


def load(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    header = lines[0]
    assert header.get("type") == "header", "the first line of a history is its header"
    return header, [line for line in lines[1:] if line.get("type") == "op"]


def check(header, ops, tolerance_ms=None):
    """Returns the Violations of a history."""
    return History(header, ops, tolerance_ms).run()


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: check.py HISTORY.jsonl\n")
        return 2
    header, ops = load(argv[1])
    violations = check(header, ops)
    sys.stdout.write("%d operations, %d violation(s)\n" % (len(ops), violations.count()))
    violations.report(sys.stdout)
    return 1 if violations.count() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
