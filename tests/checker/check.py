"""Checks a recorded llmlimitd history against the sequential model of
docs/semantics.md (see record.py for the history format). Python standard
library.

Each operation is known only by its client-side [start, end] interval, so the
checker reasons with bounds. For every lease and limit it builds a *lower*
function (capacity the lease certainly holds at time t: from the end of the
reserve that answered allowed to the start of the first complete/release that
may have freed it, or its expiry) and an *upper* function (capacity it may
hold: from the first reserve attempt's start to the end of the complete or
release that freed it, or its expiry). A violation is only reported when no
order of the operations inside their intervals could explain what was seen:

  capacity       rolling/concurrency: at some instant the certain holds exceed capacity
  admission      an allowed reserve could not have fitted at any instant of its interval
  spurious_denial a capacity denial when the request fitted at every instant
  usage          a usage answer outside [sum of lower, sum of upper] over its interval
                 (a double reserve or a lost reserve shows up here)

Budget holds count in the UTC period (day, week, month) their lease was
reserved in and end with it: a run across midnight sees the new period start
from zero. The server's clock may be ahead of the wall clock by
clock_offset_ms (a --test-clock run started just before midnight).
  idempotency    a retry with the same lease_id answered differently
  timestamps, finalize, status, warning: answers that contradict the model

A fault run's header may list "outages" ([start_ns, end_ns] on the
monotonic clock) in which the backend could not answer: a backend on its own
clock (a TigerBeetle cluster in a view change) expires nothing then, so a
hold due inside an outage may count until its end (plus the tolerance).

Usage: check.py HISTORY.jsonl  (exit 0 if no violation, 1 otherwise)
"""

import bisect
import datetime
import json
import sys
from collections import defaultdict

INF = float("inf")
TOLERANCE_MS_DEFAULT = 50
BUCKET_NS = 100 * 1000 * 1000  # index granularity of hold segments
HOUR_NS = 3600 * 1000 * 1000 * 1000
REPORT_PER_KIND_MAX = 10
BUDGET_TIMEOUT_SECONDS_DEFAULT = 60
BUDGET_TIMEOUT_SECONDS_MIN = 5
BUDGET_TIMEOUT_SECONDS_MAX = 300


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
        self.capacity = definition["capacity"]
        self.period = definition.get("period") or None
        if self.kind == "rolling":
            seconds = definition["window_seconds"]
        elif self.kind == "concurrency":
            seconds = definition["timeout_seconds"]
        else:
            seconds = definition.get("timeout_seconds") or BUDGET_TIMEOUT_SECONDS_DEFAULT
            seconds = min(max(seconds, BUDGET_TIMEOUT_SECONDS_MIN), BUDGET_TIMEOUT_SECONDS_MAX)
        self.duration_ns = seconds * 1000 * 1000 * 1000


def op_succeeded(op):
    return op.get("status") == 200


def op_unknown(op):
    """No answer came back, or a 503 (unknown outcome, docs/semantics.md): the
    operation may or may not have taken effect."""
    return op.get("status") is None or op["status"] >= 500


class Lease:
    """Everything the history says about one lease_id."""

    def __init__(self, lease_id):
        self.lease_id = lease_id
        self.reserves = []
        self.completes = []
        self.releases = []
        self.requirements = None  # key -> amount of the first reserve
        self.outcome = None  # "allowed", "denied", "rejected" or None (unknown)
        self.answer = None  # body of the first definitive reserve answer
        self.first_start_ns = None
        self.decided_end_ns = None

    def decide(self, violations):
        """Settles the reserve outcome and checks that retries agree."""
        self.reserves.sort(key=lambda op: op["start_ns"])
        self.first_start_ns = self.reserves[0]["start_ns"]
        self.requirements = {r["key"]: r["amount"] for r in self.reserves[0]["requirements"]}
        for op in self.reserves:
            same = {r["key"]: r["amount"] for r in op["requirements"]} == self.requirements
            if not same:
                if op.get("status") not in (409, None):
                    violations.add("idempotency", "lease %s: a reserve with other requirements "
                                   "answered %s, want 409 lease_conflict"
                                   % (self.lease_id, op.get("status")), op)
                continue
            if op_unknown(op):
                continue
            if op["status"] == 409:
                violations.add("idempotency", "lease %s: a retry with the same requirements "
                               "answered 409" % self.lease_id, op)
                continue
            if op["status"] != 200:
                if self.outcome is None:
                    self.outcome = "rejected"
                continue
            body = op["body"]
            if self.answer is None:
                self.answer = body
                self.outcome = "allowed" if body["allowed"] else "denied"
                if body.get("error") not in ("", None):
                    self.outcome = "rejected"
                continue
            violations.checked["retries"] += 1
            if not same_answer(self.answer, body):
                violations.add("idempotency", "lease %s: retry answered %s after %s"
                               % (self.lease_id, summary(body), summary(self.answer)), op)
        answered = [op["end_ns"] for op in self.reserves
                    if op_succeeded(op) and self.answer is not None
                    and same_answer(self.answer, op["body"])]
        self.decided_end_ns = min(answered) if answered else None

    def actual(self, key):
        """The settled amount of key: its actual, or the reserved amount if left out."""
        for op in self.completes:
            for item in op["actuals"]:
                if item["key"] == key:
                    return item["actual_amount"]
        return self.requirements[key]


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
    """The lower and upper hold functions of every lease on one limit, with an
    index so that a window query only looks at leases alive near it."""

    def __init__(self, limit):
        self.limit = limit
        self.lower = defaultdict(list)  # lease_id -> [(start, end, amount)]
        self.upper = defaultdict(list)
        self.buckets = {"lower": defaultdict(set), "upper": defaultdict(set)}
        self.forever = {"lower": {}, "upper": {}}  # lease_id -> (start, amount)
        self.forever_sorted = {}

    def add(self, which, lease_id, start, end, amount):
        if end <= start or amount < 0:
            return
        if end == INF:
            if lease_id in self.forever[which]:  # only the upper bound of odd histories
                assert which == "upper"
                old_start, old_amount = self.forever[which][lease_id]
                start, amount = min(start, old_start), max(amount, old_amount)
                getattr(self, which)[lease_id].remove((old_start, INF, old_amount))
            self.forever[which][lease_id] = (start, amount)
            self.buckets[which][int(start // BUCKET_NS)].add(lease_id)
        else:
            for bucket in range(int(start // BUCKET_NS), int(end // BUCKET_NS) + 1):
                self.buckets[which][bucket].add(lease_id)
        getattr(self, which)[lease_id].append((start, end, amount))

    def seal(self):
        for which in ("lower", "upper"):
            for segments in getattr(self, which).values():
                segments.sort()
            items = sorted((s, amount, lease) for lease, (s, amount) in self.forever[which].items())
            starts = [s for s, _, _ in items]
            prefix = [0]
            for _, amount, _ in items:
                prefix.append(prefix[-1] + amount)
            self.forever_sorted[which] = (starts, prefix)

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

    def peak_certain(self):
        """(largest sum of certain holds at one instant, that instant)."""
        events = []
        for segments in self.lower.values():
            for start, end, amount in segments:
                events.append((start, 1, amount))
                if end != INF:
                    events.append((end, 0, -amount))  # ends sort before starts
        events.sort()
        level, peak, peak_at = 0, 0, None
        for at, _, delta in events:
            level += delta
            if level > peak:
                peak, peak_at = level, at
        return peak, peak_at

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
        self.tolerance_ns = tolerance_ms * 1000 * 1000 + drift_ns
        self.ops = ops
        self.unavailable_ok = bool(header.get("unavailable_ok"))
        self.outages = [(start, end) for start, end in header.get("outages", [])]
        self.leases = {}
        self.usages = []
        self.timelines = {key: Timeline(limit) for key, limit in self.limits.items()}
        self.violations = Violations()

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
            target = self.lease(op["lease_id"])
            {"reserve": target.reserves, "complete": target.completes,
             "release": target.releases}[kind].append(op)
            if op.get("status") not in (200, 409, None) and not op.get("expect_error") \
                    and not self.unavailable_allowed(op):
                self.violations.add("status", "%s of lease %s answered %s: %s" % (
                    kind, op["lease_id"], op.get("status"), op.get("body")), op)

    def run(self):
        self.history_end_ns = max((op["end_ns"] for op in self.ops), default=0) + HOUR_NS
        self.sort_ops()
        for lease in self.leases.values():
            if lease.reserves:
                lease.decide(self.violations)
                self.check_reserve_answer(lease)
            self.check_finalize(lease)
            if lease.reserves and lease.requirements:
                self.build_segments(lease)
        for timeline in self.timelines.values():
            timeline.seal()
        self.check_capacity()
        self.check_admission()
        self.check_usage()
        return self.violations

    # -- reserve answers ------------------------------------------------------

    def check_reserve_answer(self, lease):
        body = lease.answer
        if body is None or lease.outcome == "rejected":
            return
        decided = [op for op in lease.reserves if op_succeeded(op)]
        if lease.outcome == "allowed":
            self.check_timestamps(lease, body)
            return
        denied = body.get("denied_keys") or []
        if not denied:
            self.violations.add("denial", "lease %s: capacity denial without denied_keys"
                                % lease.lease_id, decided[0])
        for key in denied:
            if key not in lease.requirements:
                self.violations.add("denial", "lease %s: denied key %s not in the request"
                                    % (lease.lease_id, key), decided[0])
        if body.get("retry_after_ms", 0) < 0:
            self.violations.add("denial", "lease %s: negative retry_after_ms" % lease.lease_id)
        header = decided[0].get("retry_after_header")
        if header is not None:
            want = -(-body.get("retry_after_ms", 0) // 1000)
            if int(header) != want:
                self.violations.add("denial", "lease %s: Retry-After %s, want %d (ms %d)" % (
                    lease.lease_id, header, want, body.get("retry_after_ms", 0)), decided[0])

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
                    self.violations.add("finalize", "lease %s: %s answered 409 though it was "
                                        "not finalized the other way" % (
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
        if lease.outcome == "allowed":
            reserved = self.mono_from_wall_ms(lease.answer["reserved_at_unix_ms"])
            hold_lo = lease.decided_end_ns
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
            span = Span(lease, key, amount, hold_lo, exp_lo, exp_hi, free_try, only_completes,
                        complete, release, unknown_completes)
            timeline = self.timelines[key]
            if limit.kind == "budget":
                timeline = PeriodClip(timeline, *self.period_bounds(limit, lease, reserved))
            {"rolling": rolling_segments, "concurrency": concurrency_segments,
             "budget": budget_segments}[limit.kind](timeline, span)

    # -- checks over the timelines ------------------------------------------------------

    def check_capacity(self):
        for key, timeline in self.timelines.items():
            if timeline.limit.kind == "budget":
                continue  # debt may take a budget past capacity; admission covers it
            self.violations.checked["capacity_sweeps"] += 1
            peak, at = timeline.peak_certain()
            if peak > timeline.limit.capacity:
                self.violations.add("capacity", "%s: %d certainly held at once, capacity %d "
                                    "(leases %s)" % (key, peak, timeline.limit.capacity,
                                                     ", ".join(timeline.holders_at(at)[:8])))

    def check_admission(self):
        for lease in self.leases.values():
            if lease.answer is None or lease.outcome not in ("allowed", "denied"):
                continue
            a, b = lease.first_start_ns, lease.decided_end_ns
            denied = set(lease.answer.get("denied_keys") or [])
            for key, amount in lease.requirements.items():
                timeline = self.timelines.get(key)
                if timeline is None:
                    continue
                capacity = timeline.limit.capacity
                self.violations.checked["admission" if lease.outcome == "allowed"
                                        else "denial"] += 1
                if lease.outcome == "allowed":
                    held = timeline.certain(a, b, exclude=lease.lease_id)
                    if held + amount > capacity:
                        self.violations.add("admission", "lease %s allowed %d on %s while %d "
                                            "was certainly held (capacity %d)" % (
                                                lease.lease_id, amount, key, held, capacity))
                elif key in denied:
                    most = timeline.possible(a, b, exclude=lease.lease_id)
                    if most + amount <= capacity:
                        self.violations.add("spurious_denial", "lease %s denied %d on %s while "
                                            "at most %d was held (capacity %d)" % (
                                                lease.lease_id, amount, key, most, capacity))

    def check_usage(self):
        for op in self.usages:
            if not op_succeeded(op):
                continue
            key, body = op["key"], op["body"]
            timeline = self.timelines.get(key)
            if timeline is None:
                continue
            limit = timeline.limit
            seen = body["reserved"] + body["used"]
            if limit.kind == "budget":
                seen += body["debt"]
            want_available = limit.capacity - seen
            if body["available"] != want_available:
                self.violations.add("usage", "%s: available %d, want %d from %s" % (
                    key, body["available"], want_available, body), op)
            if limit.kind != "budget" and seen > limit.capacity:
                self.violations.add("capacity", "%s: usage shows %d held, capacity %d" % (
                    key, seen, limit.capacity), op)
            if limit.kind == "concurrency" and body["used"] != 0:
                self.violations.add("usage", "%s: concurrency used %d, want 0" % (
                    key, body["used"]), op)
            self.violations.checked["usage"] += 1
            low = timeline.certain(op["start_ns"], op["end_ns"])
            high = timeline.possible(op["start_ns"], op["end_ns"])
            if not low <= seen <= high:
                self.violations.add("usage", "%s: usage shows %d, the history allows %d..%d" % (
                    key, seen, low, high), op)


class PeriodClip:
    """A budget hold counts only in the period its lease was reserved in (a
    commit after the period ended is charged there too): every segment of
    it ends at that period's end, at the latest. The lower bound ends a
    tolerance before it, the upper bound a tolerance after."""

    def __init__(self, timeline, lower_end, upper_end):
        self.timeline = timeline
        self.ends = {"lower": lower_end, "upper": upper_end}

    def add(self, which, lease_id, start, end, amount):
        self.timeline.add(which, lease_id, start, min(end, self.ends[which]), amount)


class Span:
    """One lease's hold on one limit, as the history bounds it."""

    def __init__(self, lease, key, amount, hold_lo, exp_lo, exp_hi, free_try, only_completes,
                 complete, release, unknown_completes):
        self.lease_id = lease.lease_id
        self.amount = amount
        self.hold_lo = hold_lo  # certainly held from here (INF: never certain)
        self.hold_hi = lease.first_start_ns  # possibly held from here
        self.exp_lo, self.exp_hi = exp_lo, exp_hi
        self.free_try = free_try  # first start of a complete/release that may have freed it
        self.only_completes = only_completes
        self.complete, self.release = complete, release
        self.unknown_completes = unknown_completes
        self.actual = lease.actual(key)

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
        timeline.add("upper", lease, span.complete["end_ns"], span.exp_hi, span.actual)
    elif span.release is not None:
        timeline.add("upper", lease, span.hold_hi, min(span.release["end_ns"], span.exp_hi), amount)
    else:
        timeline.add("upper", lease, span.hold_hi, span.exp_hi,
                     most if span.unknown_completes else amount)


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
