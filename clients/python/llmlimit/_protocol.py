"""Retry rules, result types and errors shared by the sync and asyncio clients.

The retry rules (docs/semantics.md, "Unknown outcomes and pessimism") are
written once, as generators that yield the steps to take (an HTTP attempt or
a sleep) and receive each attempt's outcome. Client runs them with blocking calls, AsyncClient with
awaits, so both follow exactly the same rules.
"""

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

DEFAULT_URL = "http://127.0.0.1:8470"

# Deadlines (seconds, relative to the call) when the caller gives none.
RESERVE_DEADLINE_S_DEFAULT = 10.0
ACQUIRE_DEADLINE_S_DEFAULT = 30.0
FINALIZE_DEADLINE_S_DEFAULT = 5.0  # complete, release, usage, admin

# One HTTP attempt never waits longer than this (or the time left).
ATTEMPT_TIMEOUT_S_DEFAULT = 5.0

# complete/release/usage/admin are retried at most this many times in all.
FINALIZE_ATTEMPTS_MAX = 5

# Exponential backoff after an unknown outcome: base * 2^attempt, capped.
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 2.0

# A capacity denial waits retry_after_ms plus up to this fraction more, so
# callers denied together do not all come back in the same millisecond.
RETRY_AFTER_JITTER_FRACTION = 0.2
RETRY_AFTER_WAIT_S_MIN = 0.01

AMOUNT_MAX = (1 << 63) - 1

# Waiting on the server (docs/semantics.md, "Waiting for capacity"): a
# reserve may be held up to WAIT_MS_MAX until it fits; priority 0 goes first.
WAIT_MS_MAX = 60000
PRIORITY_MAX = 9
PRIORITY_DEFAULT = 5

# Statuses whose outcome is unknown: retried with the same lease id. 503 is
# llmlimitd's backend_error; the others come from proxies in between.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

_random = random.SystemRandom()


class LlmlimitError(Exception):
    """Base of every error this package raises."""


class ApiError(LlmlimitError):
    """llmlimitd gave a definitive non-200 answer (400, 401, 404, 409, 413)."""

    def __init__(self, status: int, error: str, body: Any = None):
        super().__init__("HTTP %d: %s" % (status, error))
        self.status = status
        self.error = error
        self.body = body


class Unavailable(LlmlimitError):
    """No definitive answer before the deadline (or the attempt budget).

    For reserve the outcome is unknown: the lease may be held; if so it
    expires by itself. Do not make the LLM call."""

    def __init__(self, message: str, lease_id: Optional[str] = None, last_error: Any = None):
        if last_error is not None:
            message = "%s (last error: %s)" % (message, last_error)
        super().__init__(message)
        self.lease_id = lease_id
        self.last_error = last_error


class TransportError(LlmlimitError):
    """One HTTP attempt failed without an answer (refused, reset, timeout)."""


@dataclass(frozen=True)
class ReserveResult:
    """A definitive reserve answer: allowed, or denied (error "" = capacity)."""

    allowed: bool
    lease_id: str
    retry_after_ms: int = 0
    reserved_at_unix_ms: int = 0
    expires_at_unix_ms: int = 0
    error: str = ""
    denied_keys: List[str] = field(default_factory=list)
    # How long the server held this reserve before answering (0: at once).
    waited_ms: int = 0
    # The server's queue of waiters was full: denied at once, without waiting.
    queue_full: bool = False


class Denied(LlmlimitError):
    """acquire could not get an allowed reservation by its deadline, or the
    denial can never turn into an allowance (unknown_limit_key,
    exceeds_capacity). Nothing is held."""

    def __init__(self, result: ReserveResult):
        reason = result.error or "capacity"
        super().__init__("denied (%s): %s" % (reason, ", ".join(result.denied_keys)))
        self.result = result
        self.error = result.error
        self.denied_keys = list(result.denied_keys)
        self.retry_after_ms = result.retry_after_ms


@dataclass(frozen=True)
class CompleteResult:
    ok: bool
    reconciled: bool
    warnings: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Usage:
    key: str
    kind: str
    status: str
    capacity: int
    reserved: int
    used: int
    debt: int
    available: int
    period_start_unix_ms: int = 0
    period_end_unix_ms: int = 0


@dataclass(frozen=True)
class Call:
    """Step: make one HTTP attempt. admin selects the admin token."""

    method: str
    path: str
    body: Any
    timeout_s: float
    admin: bool = False


@dataclass(frozen=True)
class Sleep:
    """Step: wait this long before the next attempt."""

    seconds: float


@dataclass(frozen=True)
class Response:
    status: int
    body: Any
    error: str
    queue_full: bool = False  # it carried "x-llmlimit-queue: full"



def new_lease_id() -> str:
    """A new UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits.

    Time-ordered ids keep server-side indexes and logs in call order."""
    unix_ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = rand >> 68  # 12 bits
    rand_b = rand & ((1 << 62) - 1)
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    text = "%032x" % value
    return "%s-%s-%s-%s-%s" % (text[:8], text[8:12], text[12:16], text[16:20], text[20:])


def backoff_s(attempt: int) -> float:
    """Wait after the attempt-th unknown outcome: equal jitter over an
    exponential bound, so retries spread out but never stop backing off."""
    bound = min(BACKOFF_MAX_S, BACKOFF_BASE_S * (2 ** min(attempt, 30)))
    return bound / 2 + _random.uniform(0, bound / 2)


def retry_after_wait_s(retry_after_ms: int) -> float:
    """Wait after a capacity denial: never earlier than the server said."""
    base_s = max(retry_after_ms, 0) / 1000.0
    wait_s = base_s * (1 + _random.uniform(0, RETRY_AFTER_JITTER_FRACTION))
    return max(wait_s, RETRY_AFTER_WAIT_S_MIN)


def requirement_list(requirements: Mapping[str, int]) -> List[Dict[str, Any]]:
    if not requirements:
        raise ValueError("requirements: at least one key is needed")
    return [{"key": key, "amount": amount} for key, amount in requirements.items()]


def check_actual(key: str, amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError("actual amount for %r must be an int" % key)
    if amount < 0 or amount > AMOUNT_MAX:
        raise ValueError("actual amount for %r must be 0..%d" % (key, AMOUNT_MAX))


def check_wait(wait_s: float, priority: int) -> None:
    """The wait options of reserve and acquire, checked before sending."""
    if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)):
        raise TypeError("wait_s: must be a number of seconds 0..60")
    if not 0 <= wait_s <= WAIT_MS_MAX / 1000:
        raise ValueError("wait_s: must be 0..60 seconds (wait_ms 0..60000)")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError("priority: must be an integer 0..9")
    if not 0 <= priority <= PRIORITY_MAX:
        raise ValueError("priority: must be an integer 0..9")


def wait_ms_for_attempt(left_s: float, deadline: float, attempt_timeout_s: float,
                        now: float) -> int:
    """What a waiting reserve asks the server for on this attempt: left_s,
    what is left of its wait, cut so that the answer still has one attempt
    timeout before the deadline. 0 when it does not wait."""
    seconds = min(left_s, deadline - now - attempt_timeout_s)
    return max(0, min(WAIT_MS_MAX, int(round(seconds * 1000, 6))))


def reserve_result(lease_id: str, body: Any, queue_full: bool = False) -> ReserveResult:
    return ReserveResult(
        allowed=body.get("allowed") is True,
        lease_id=lease_id,
        retry_after_ms=int(body.get("retry_after_ms") or 0),
        reserved_at_unix_ms=int(body.get("reserved_at_unix_ms") or 0),
        expires_at_unix_ms=int(body.get("expires_at_unix_ms") or 0),
        error=str(body.get("error") or ""),
        denied_keys=[str(k) for k in body.get("denied_keys") or []],
        waited_ms=int(body.get("waited_ms") or 0),
        queue_full=queue_full,
    )


def complete_result(body: Any) -> CompleteResult:
    return CompleteResult(
        ok=body.get("ok") is True,
        reconciled=body.get("reconciled") is True,
        warnings=[str(w) for w in body.get("warnings") or []],
    )


def usage_result(body: Any) -> Usage:
    names = Usage.__dataclass_fields__
    return Usage(**{name: body[name] for name in names if name in body})


def denial_is_temporary(result: ReserveResult) -> bool:
    """True when waiting retry_after_ms can turn the denial into an
    allowance: a capacity denial, or a limit that is shrinking."""
    return result.error == "" or result.error.startswith("limit_decreasing:")


def request_steps(call: Call, deadline: float, attempts_max: Optional[int],
                  lease_id: Optional[str] = None):
    """Attempts call until a definitive answer, the deadline or attempts_max
    attempts (None: no count, only the deadline). Returns the 200 body;
    raises ApiError for a definitive error, Unavailable otherwise. The body
    is sent unchanged each time: a reserve keeps its lease id."""
    response = yield from response_steps(call, deadline, attempts_max, lease_id)
    return response.body


def response_steps(call: Call, deadline: float, attempts_max: Optional[int],
                   lease_id: Optional[str] = None, wait_s: float = 0):
    """request_steps, returning the whole 200 Response. With wait_s, each
    attempt asks the server to hold it (wait_ms: the whole wait first, then
    what is left of it, see wait_ms_for_attempt) and is given that much
    more time."""
    attempt = 0
    last: Any = None
    wait_end = time.monotonic() + wait_s
    while attempts_max is None or attempt < attempts_max:
        now = time.monotonic()
        remaining_s = deadline - now
        if remaining_s <= 0:
            break
        body = call.body
        left_s = wait_s if attempt == 0 else wait_end - now
        wait_ms = wait_ms_for_attempt(left_s, deadline, call.timeout_s, now)
        if wait_ms > 0:
            body = dict(call.body, wait_ms=wait_ms)
        # The server answers a waiting reserve only after its wait: an
        # attempt cut before that would be retried for nothing.
        timeout_s = min(call.timeout_s + wait_ms / 1000, remaining_s)
        outcome = yield Call(call.method, call.path, body, timeout_s, call.admin)
        if isinstance(outcome, Response):
            if outcome.status == 200 and isinstance(outcome.body, dict):
                return outcome
            if outcome.status not in RETRYABLE_STATUSES and outcome.status != 200:
                raise ApiError(outcome.status, outcome.error, outcome.body)
            last = "HTTP %d %s" % (outcome.status, outcome.error)
        else:
            last = outcome
        attempt += 1
        if attempts_max is None or attempt < attempts_max:
            yield Sleep(max(0.0, min(backoff_s(attempt - 1), deadline - time.monotonic())))
    what = "%s %s: no definitive answer" % (call.method, call.path)
    raise Unavailable(what, lease_id, last)


def reserve_steps(lease_id: str, requirements: Mapping[str, int], deadline: float,
                  attempt_timeout_s: float, caller: Optional[str],
                  wait_s: float = 0, priority: int = PRIORITY_DEFAULT):
    """Reserve with the retry rules: the same lease id until a definitive
    answer or the deadline. With wait_s, the server may hold it that long
    (a retry asks only for what is left). Returns a ReserveResult."""
    body: Dict[str, Any] = {"lease_id": lease_id, "requirements": requirement_list(requirements)}
    if caller:
        body["caller"] = caller
    if priority != PRIORITY_DEFAULT:
        body["priority"] = priority
    call = Call("POST", "/v1/reserve", body, attempt_timeout_s)
    response = yield from response_steps(call, deadline, None, lease_id, wait_s)
    if "allowed" not in response.body:
        raise Unavailable("reserve: answer without \"allowed\"", lease_id, response.body)
    return reserve_result(lease_id, response.body, response.queue_full)


def acquire_steps(requirements: Mapping[str, int], deadline: float,
                  attempt_timeout_s: float, caller: Optional[str],
                  wait_s: float = 0, priority: int = PRIORITY_DEFAULT):
    """Reserve until allowed: after a capacity denial wait retry_after_ms
    (with jitter) and try again with a NEW lease id, since a denied lease
    stays denied. With wait_s > 0 each lease first waits on the server, up
    to wait_s and what the deadline leaves. Returns the allowed
    ReserveResult; raises Denied when the deadline would pass first or the
    denial is permanent."""
    while True:
        result = yield from reserve_steps(new_lease_id(), requirements, deadline,
                                          attempt_timeout_s, caller, wait_s, priority)
        if result.allowed:
            return result
        if not denial_is_temporary(result):
            raise Denied(result)
        sleep_s = retry_after_wait_s(result.retry_after_ms)
        # The server says nothing can be admitted sooner: failing now beats
        # failing at the deadline after a pointless wait.
        if time.monotonic() + sleep_s >= deadline:
            raise Denied(result)
        yield Sleep(sleep_s)


def finalize_steps(path: str, body: Dict[str, Any], deadline: float,
                   attempt_timeout_s: float):
    """complete/release: bounded retries, best effort. Nothing is ever freed
    locally: if every attempt fails, the holds expire on the server."""
    call = Call("POST", path, body, attempt_timeout_s)
    answer = yield from request_steps(call, deadline, FINALIZE_ATTEMPTS_MAX, body["lease_id"])
    return answer


def actual_list(actuals: Optional[Mapping[str, int]]) -> List[Dict[str, Any]]:
    items = []
    for key, amount in (actuals or {}).items():
        check_actual(key, amount)
        items.append({"key": key, "actual_amount": amount})
    return items
