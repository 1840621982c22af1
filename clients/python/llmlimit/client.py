"""The blocking llmlimit client: reserve, acquire, complete, release, usage.

One Client is safe to share between threads; it keeps a small pool of
keep-alive connections. The retry rules live in _protocol and are the same
for AsyncClient.
"""

import logging
import os
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional

from . import _protocol as p
from ._protocol import CompleteResult, LlmlimitError, ReserveResult, Usage
from ._transport import Transport

log = logging.getLogger("llmlimit")


class _ClientBase:
    """Configuration shared by Client and AsyncClient."""

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, *,
                 admin_token: Optional[str] = None, caller: Optional[str] = None,
                 deadline_s: float = p.RESERVE_DEADLINE_S_DEFAULT,
                 acquire_deadline_s: float = p.ACQUIRE_DEADLINE_S_DEFAULT,
                 finalize_deadline_s: float = p.FINALIZE_DEADLINE_S_DEFAULT,
                 attempt_timeout_s: float = p.ATTEMPT_TIMEOUT_S_DEFAULT):
        """base_url defaults to $LLMLIMIT_URL, then http://127.0.0.1:8470;
        token to $LLMLIMIT_CLIENT_TOKEN; admin_token (admin routes only) to
        $LLMLIMIT_ADMIN_TOKEN, then token. caller is sent with every
        reserve for the audit log. Deadlines are seconds from each call."""
        base_url = base_url or os.environ.get("LLMLIMIT_URL") or p.DEFAULT_URL
        token = token if token is not None else os.environ.get("LLMLIMIT_CLIENT_TOKEN")
        if admin_token is None:
            admin_token = os.environ.get("LLMLIMIT_ADMIN_TOKEN")
        self._transport = Transport(base_url, token, admin_token)
        self.caller = caller
        self.deadline_s = deadline_s
        self.acquire_deadline_s = acquire_deadline_s
        self.finalize_deadline_s = finalize_deadline_s
        self.attempt_timeout_s = attempt_timeout_s

    def _deadline(self, deadline_s: Optional[float], default_s: float) -> float:
        return time.monotonic() + (default_s if deadline_s is None else deadline_s)

    def _reserve_steps(self, requirements, deadline_s, lease_id, caller, wait_s=0,
                       priority=p.PRIORITY_DEFAULT):
        p.check_wait(wait_s, priority)
        # Without a deadline of its own, a waiting reserve gets the wait and
        # then the usual deadline.
        deadline = self._deadline(deadline_s, self.deadline_s + wait_s)
        return p.reserve_steps(lease_id or p.new_lease_id(), requirements, deadline,
                               self.attempt_timeout_s, caller or self.caller, wait_s, priority)

    def _acquire_steps(self, requirements, deadline_s, caller, wait_s=0,
                       priority=p.PRIORITY_DEFAULT):
        p.check_wait(wait_s, priority)
        deadline = self._deadline(deadline_s, self.acquire_deadline_s)
        return p.acquire_steps(requirements, deadline, self.attempt_timeout_s,
                               caller or self.caller, wait_s, priority)

    def _complete_steps(self, lease_id, actuals, deadline_s):
        body = {"lease_id": lease_id, "actuals": p.actual_list(actuals)}
        deadline = self._deadline(deadline_s, self.finalize_deadline_s)
        return p.finalize_steps("/v1/complete", body, deadline, self.attempt_timeout_s)

    def _release_steps(self, lease_id, deadline_s):
        deadline = self._deadline(deadline_s, self.finalize_deadline_s)
        return p.finalize_steps("/v1/release", {"lease_id": lease_id}, deadline,
                                self.attempt_timeout_s)

    def _get_steps(self, path, deadline_s, admin=False, method="GET", body=None):
        deadline = self._deadline(deadline_s, self.finalize_deadline_s)
        call = p.Call(method, path, body, self.attempt_timeout_s, admin)
        return p.request_steps(call, deadline, p.FINALIZE_ATTEMPTS_MAX)

    @staticmethod
    def _usage_path(key: str, at_unix_ms: Optional[int]) -> str:
        path = "/v1/usage/" + urllib.parse.quote(key, safe="")
        if at_unix_ms is not None:
            path += "?at_unix_ms=%d" % at_unix_ms
        return path

    @staticmethod
    def _limit_path(key: str) -> str:
        return "/v1/admin/limits/" + urllib.parse.quote(key, safe="")


class Client(_ClientBase):
    """Blocking client. Thread-safe; share one per process."""

    def _run(self, steps) -> Any:
        """Drives a retry-rule generator with blocking I/O and sleeps."""
        outcome = None
        try:
            while True:
                step = steps.send(outcome)
                if isinstance(step, p.Sleep):
                    time.sleep(step.seconds)
                    outcome = None
                else:
                    outcome = self._transport.attempt(step)
        except StopIteration as done:
            return done.value

    def close(self) -> None:
        """Closes idle connections. The client stays usable."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def reserve(self, requirements: Mapping[str, int], deadline_s: Optional[float] = None, *,
                lease_id: Optional[str] = None, caller: Optional[str] = None,
                wait_s: float = 0, priority: int = p.PRIORITY_DEFAULT) -> ReserveResult:
        """One reservation across every key in requirements (key -> amount),
        all or nothing. Retries with the same lease id on transport errors,
        timeouts and 503 until a definitive answer or deadline_s.

        wait_s (0..60): when denied for capacity, the server may hold the
        reserve up to that long and answer as soon as it fits (r.waited_ms
        says how long it waited; r.queue_full that the server had too many
        waiters and answered at once). priority 0..9, 0 first (default 5),
        orders the waiters of a limit. Without deadline_s the deadline is
        wait_s plus the client's; with one, the wait is cut to leave one
        attempt timeout before it. ValueError/TypeError for bad values.

        Returns the answer, allowed or denied (r.error "" is a capacity
        denial; "unknown_limit_key: K" etc. are permanent). Raises ApiError
        for a definitive HTTP error (400, 401, 409 lease_conflict), and
        Unavailable when there was no definitive answer by the deadline."""
        steps = self._reserve_steps(requirements, deadline_s, lease_id, caller, wait_s, priority)
        return self._run(steps)

    def acquire(self, requirements: Mapping[str, int], deadline_s: Optional[float] = None, *,
                caller: Optional[str] = None, wait_s: float = 0,
                priority: int = p.PRIORITY_DEFAULT) -> "Lease":
        """Reserves until allowed, waiting retry_after_ms after each capacity
        denial and using a new lease id each time. Returns a Lease, best used
        as a context manager: leaving the block completes with the actuals
        recorded by lease.actual(); an exception releases.

        With wait_s > 0 each attempt waits on the server instead (up to
        wait_s and what the deadline leaves, less one attempt timeout), and
        is admitted the moment capacity frees, by priority then arrival.

        Raises Denied if not allowed by the deadline (or never can be),
        Unavailable if llmlimitd gave no definitive answer, ApiError for a
        definitive HTTP error."""
        steps = self._acquire_steps(requirements, deadline_s, caller, wait_s, priority)
        return Lease(self, self._run(steps), requirements)

    def complete(self, lease_id: str, actuals: Optional[Mapping[str, int]] = None,
                 deadline_s: Optional[float] = None) -> CompleteResult:
        """Reconciles a lease with what was really used (key -> actual
        amount; keys left out settle at their reserved amount). Bounded
        retries. Raises ApiError (409 already_finalized, 400
        actual_key_not_in_lease:K) or Unavailable."""
        body = self._run(self._complete_steps(lease_id, actuals, deadline_s))
        return p.complete_result(body)

    def release(self, lease_id: str, deadline_s: Optional[float] = None) -> None:
        """Frees every hold of a lease whose call was never made. Bounded
        retries. Raises ApiError (409 already_finalized) or Unavailable."""
        self._run(self._release_steps(lease_id, deadline_s))

    def usage(self, key: str, at_unix_ms: Optional[int] = None,
              deadline_s: Optional[float] = None) -> Usage:
        """Current usage of one limit (a budget: of the period containing
        at_unix_ms). Raises ApiError 404 for an unknown key."""
        body = self._run(self._get_steps(self._usage_path(key, at_unix_ms), deadline_s))
        return p.usage_result(body)

    def put_limit(self, definition: Mapping[str, Any],
                  deadline_s: Optional[float] = None) -> str:
        """Creates or changes a limit (docs/api.md). Returns its status,
        "active" or "decreasing". Needs the admin token."""
        steps = self._get_steps("/v1/admin/limits", deadline_s, True, "PUT", dict(definition))
        return str(self._run(steps).get("status", ""))

    def get_limit(self, key: str, deadline_s: Optional[float] = None) -> Dict[str, Any]:
        """The LimitState of one limit. Raises ApiError 404 if unknown."""
        return self._run(self._get_steps(self._limit_path(key), deadline_s, True))["limit"]

    def limits(self, deadline_s: Optional[float] = None) -> List[Dict[str, Any]]:
        """Every LimitState, sorted by key."""
        return self._run(self._get_steps("/v1/admin/limits", deadline_s, True))["limits"]

    def delete_limit(self, key: str, deadline_s: Optional[float] = None) -> None:
        self._run(self._get_steps(self._limit_path(key), deadline_s, True, "DELETE"))


class _LeaseBase:
    """State of one allowed lease: its requirements and recorded actuals."""

    def __init__(self, client: Any, result: ReserveResult, requirements: Mapping[str, int]):
        self._client = client
        self.result = result
        self.lease_id = result.lease_id
        self.requirements: Dict[str, int] = dict(requirements)
        self.actuals: Dict[str, int] = {}
        self.completion: Optional[CompleteResult] = None
        self.state = "held"  # then "completed" or "released"
        self._lock = threading.Lock()

    @property
    def expires_at_unix_ms(self) -> int:
        return self.result.expires_at_unix_ms

    def actual(self, key: str, amount: int) -> None:
        """Records what the call really used for key (replaces an earlier
        value). Raises KeyError for a key the lease does not hold."""
        if key not in self.requirements:
            raise KeyError("%r is not a key of lease %s" % (key, self.lease_id))
        p.check_actual(key, amount)
        with self._lock:
            self.actuals[key] = amount

    def _finish(self, state: str) -> bool:
        """Marks the lease finished; False if it already was."""
        with self._lock:
            if self.state != "held":
                return False
            self.state = state
            return True

    def _merged_actuals(self, actuals: Optional[Mapping[str, int]]) -> Dict[str, int]:
        for key, amount in (actuals or {}).items():
            self.actual(key, amount)
        with self._lock:
            return dict(self.actuals)


def _log_lost(what: str, lease_id: str, error: LlmlimitError) -> None:
    log.warning("llmlimit: %s of lease %s failed (%s); its holds expire by themselves",
                what, lease_id, error)


class Lease(_LeaseBase):
    """An allowed reservation from Client.acquire."""

    def complete(self, actuals: Optional[Mapping[str, int]] = None,
                 deadline_s: Optional[float] = None) -> Optional[CompleteResult]:
        """Completes now with the recorded actuals (plus actuals given here).
        Returns None if the lease was already completed or released."""
        merged = self._merged_actuals(actuals)
        if not self._finish("completed"):
            return None
        self.completion = self._client.complete(self.lease_id, merged, deadline_s)
        return self.completion

    def release(self, deadline_s: Optional[float] = None) -> None:
        """Releases now (the call was not made). No-op if already finished."""
        if self._finish("released"):
            self._client.release(self.lease_id, deadline_s)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        # Best effort, never raising: the LLM call already happened (or the
        # caller's own exception is on its way out).
        try:
            if exc_type is None:
                self.complete()
            else:
                self.release()
        except LlmlimitError as error:
            _log_lost("complete" if exc_type is None else "release", self.lease_id, error)
        return False
