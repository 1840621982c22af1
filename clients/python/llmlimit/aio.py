"""The asyncio llmlimit client: the same operations and retry rules as Client.

Waits are asyncio sleeps; each HTTP attempt runs in the default executor
on the shared keep-alive pool, bounded by the attempt timeout, so the event
loop never blocks. An attempt the server holds (a waiting reserve) runs on
the client's own threads instead, so that waiters never keep the complete
or release that would end their wait out of the default executor.
Cancelling a call stops its retries at the next step.
"""

import asyncio
import concurrent.futures
import threading
from typing import Any, Dict, Generator, List, Mapping, Optional

from . import _protocol as p
from ._protocol import CompleteResult, LlmlimitError, ReserveResult, Usage
from ._transport import Cancel
from .client import _ClientBase, _LeaseBase, _log_lost


# Threads for attempts the server holds; a waiting reserve past this many at
# once queues for a thread (never behind or in front of other calls).
WAITING_ATTEMPTS_MAX = 256


class AsyncClient(_ClientBase):
    """asyncio client. Safe to share between tasks (and threads)."""

    def __init__(self, *args: Any, **kwargs: Any):
        """See Client (the same arguments)."""
        super().__init__(*args, **kwargs)
        self._waiting: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._waiting_lock = threading.Lock()

    def _executor_for(self, step: p.Call) -> Optional[concurrent.futures.Executor]:
        if not isinstance(step.body, dict) or "wait_ms" not in step.body:
            return None  # the default executor
        with self._waiting_lock:
            if self._waiting is None:
                self._waiting = concurrent.futures.ThreadPoolExecutor(
                    WAITING_ATTEMPTS_MAX, thread_name_prefix="llmlimit-wait")
            return self._waiting

    async def _run(self, steps) -> Any:
        loop = asyncio.get_running_loop()
        outcome = None
        try:
            while True:
                step = steps.send(outcome)
                if isinstance(step, p.Sleep):
                    await asyncio.sleep(step.seconds)
                    outcome = None
                else:
                    outcome = await self._attempt(loop, step)
        except StopIteration as done:
            return done.value

    async def _attempt(self, loop: asyncio.AbstractEventLoop, step: p.Call) -> Any:
        """One attempt on an executor. Cancelling a held one (a waiting
        reserve) closes its connection, so the server takes the reserve out
        of its queue and holds nothing for it, instead of admitting a lease
        nobody would release."""
        executor = self._executor_for(step)
        if executor is None:
            return await loop.run_in_executor(None, self._transport.attempt, step)
        cancel = Cancel()
        future = loop.run_in_executor(executor, self._transport.attempt, step, cancel)
        try:
            return await future
        except asyncio.CancelledError:
            cancel.cancel()
            raise

    async def close(self) -> None:
        self._transport.close()
        with self._waiting_lock:
            waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def reserve(self, requirements: Mapping[str, int],
                      deadline_s: Optional[float] = None, *, lease_id: Optional[str] = None,
                      caller: Optional[str] = None, wait_s: float = 0,
                      priority: int = p.PRIORITY_DEFAULT) -> ReserveResult:
        """See Client.reserve."""
        steps = self._reserve_steps(requirements, deadline_s, lease_id, caller, wait_s, priority)
        return await self._run(steps)

    def acquire(self, requirements: Mapping[str, int], deadline_s: Optional[float] = None, *,
                caller: Optional[str] = None, wait_s: float = 0,
                priority: int = p.PRIORITY_DEFAULT) -> "_Acquire":
        """See Client.acquire. Use `async with client.acquire(...) as lease`
        or `lease = await client.acquire(...)`."""
        p.check_wait(wait_s, priority)
        return _Acquire(self, requirements, deadline_s, caller, wait_s, priority)

    async def complete(self, lease_id: str, actuals: Optional[Mapping[str, int]] = None,
                       deadline_s: Optional[float] = None) -> CompleteResult:
        """See Client.complete."""
        body = await self._run(self._complete_steps(lease_id, actuals, deadline_s))
        return p.complete_result(body)

    async def release(self, lease_id: str, deadline_s: Optional[float] = None) -> None:
        """See Client.release."""
        await self._run(self._release_steps(lease_id, deadline_s))

    async def usage(self, key: str, at_unix_ms: Optional[int] = None,
                    deadline_s: Optional[float] = None) -> Usage:
        """See Client.usage."""
        steps = self._get_steps(self._usage_path(key, at_unix_ms), deadline_s)
        return p.usage_result(await self._run(steps))

    async def put_limit(self, definition: Mapping[str, Any],
                        deadline_s: Optional[float] = None) -> str:
        steps = self._get_steps("/v1/admin/limits", deadline_s, True, "PUT", dict(definition))
        return str((await self._run(steps)).get("status", ""))

    async def limits(self, deadline_s: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self._run(self._get_steps("/v1/admin/limits", deadline_s, True)))["limits"]

    async def delete_limit(self, key: str, deadline_s: Optional[float] = None) -> None:
        await self._run(self._get_steps(self._limit_path(key), deadline_s, True, "DELETE"))


class _Acquire:
    """What AsyncClient.acquire returns: awaitable and an async context."""

    def __init__(self, client: AsyncClient, requirements, deadline_s, caller, wait_s, priority):
        self._client = client
        self._args = (requirements, deadline_s, caller, wait_s, priority)
        self._lease: Optional[AsyncLease] = None

    async def _acquire(self) -> "AsyncLease":
        requirements, deadline_s, caller, wait_s, priority = self._args
        steps = self._client._acquire_steps(requirements, deadline_s, caller, wait_s, priority)
        result = await self._client._run(steps)
        self._lease = AsyncLease(self._client, result, requirements)
        return self._lease

    def __await__(self) -> Generator[Any, None, "AsyncLease"]:
        return self._acquire().__await__()

    async def __aenter__(self) -> "AsyncLease":
        return await self._acquire()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        assert self._lease is not None
        return await self._lease.__aexit__(exc_type, exc, tb)


class AsyncLease(_LeaseBase):
    """An allowed reservation from AsyncClient.acquire."""

    async def complete(self, actuals: Optional[Mapping[str, int]] = None,
                       deadline_s: Optional[float] = None) -> Optional[CompleteResult]:
        """See Lease.complete."""
        merged = self._merged_actuals(actuals)
        if not self._finish("completed"):
            return None
        self.completion = await self._client.complete(self.lease_id, merged, deadline_s)
        return self.completion

    async def release(self, deadline_s: Optional[float] = None) -> None:
        """See Lease.release."""
        if self._finish("released"):
            await self._client.release(self.lease_id, deadline_s)

    async def __aenter__(self) -> "AsyncLease":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            if exc_type is None:
                await self.complete()
            else:
                await self.release()
        except LlmlimitError as error:
            _log_lost("complete" if exc_type is None else "release", self.lease_id, error)
        return False
