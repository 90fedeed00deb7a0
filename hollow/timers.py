"""One timer heap for thousands of periodic and one-shot actions.

Ten thousand nodes each renewing a lease every 10 s would be ten thousand sleeping tasks; one heap and
one loop that wakes at the next deadline is cheaper and lets the agent *measure* how late it is (the
difference between a deadline and the moment the action starts is the lag the agent reports about
itself).  Keys are rescheduled or cancelled in O(log n) by generation counting (stale heap entries are
skipped when popped).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

from hollow.clock import Clock

K = TypeVar("K", bound=Hashable)
#: deadlines this close to the next one wait for it (one wake-up for both)
DEFAULT_COALESCE_S = 0.005


class TimerQueue(Generic[K]):
    """Deadlines by key; at most one live deadline per key."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._live: dict[K, tuple[float, int]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def due_of(self, key: K) -> float | None:
        """The live deadline of ``key`` or None."""
        entry = self._live.get(key)
        return entry[0] if entry else None

    def schedule(self, key: K, due: float) -> None:
        """Set (or move) the deadline of ``key`` to ``due`` (monotonic seconds)."""
        self._seq += 1
        self._live[key] = (due, self._seq)
        heapq.heappush(self._heap, (due, self._seq, key))

    def cancel(self, key: K) -> None:
        """Forget ``key``'s deadline, if any."""
        self._live.pop(key, None)

    def next_due(self) -> float | None:
        """The earliest live deadline, or None when empty."""
        heap = self._heap
        while heap:
            due, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return due
            heapq.heappop(heap)
        return None

    def pop_due(self, now: float, limit: int = 1_000_000) -> list[tuple[K, float]]:
        """Remove and return up to ``limit`` (key, deadline) pairs with deadline <= ``now``, earliest first."""
        out: list[tuple[K, float]] = []
        heap = self._heap
        while heap and len(out) < limit:
            due, seq, key = heap[0]
            if due > now:
                break
            heapq.heappop(heap)
            live = self._live.get(key)
            if live is None or live[1] != seq:
                continue
            del self._live[key]
            out.append((key, due))
        return out


class TimerLoop(Generic[K]):
    """Runs a :class:`TimerQueue`: calls ``fire(key, due)`` for every deadline that passes.

    ``fire`` must be quick (start a task, do not await the API); the loop wakes early when a key is
    scheduled before the current sleep ends.

    Attributes:
        max_sleep: longest single sleep in seconds, so a wrong wakeup never stalls the loop for long.
        batch: at most this many deadlines fired per wakeup before yielding to the event loop.
    """

    def __init__(self, clock: Clock, fire: Callable[[K, float], None], max_sleep: float = 1.0,
                 batch: int = 2000, coalesce: float = DEFAULT_COALESCE_S) -> None:
        self.queue: TimerQueue[K] = TimerQueue()
        self._clock = clock
        self._fire = fire
        self._wake: asyncio.Future[None] | None = None
        self.max_sleep = max_sleep
        self.batch = batch
        self.coalesce = coalesce

    def schedule(self, key: K, due: float) -> None:
        """Set the deadline of ``key`` and wake the loop if it is earlier than the current one."""
        nxt = self.queue.next_due()
        self.queue.schedule(key, due)
        if (nxt is None or due < nxt) and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def cancel(self, key: K) -> None:
        """Forget ``key``."""
        self.queue.cancel(key)

    def run_due(self) -> int:
        """Fire what is due now (one batch); returns how many fired."""
        fired = self.queue.pop_due(self._clock.monotonic(), self.batch)
        for key, due in fired:
            self._fire(key, due)
        return len(fired)

    async def run(self) -> None:
        """Fire deadlines until cancelled."""
        while True:
            if self.run_due() >= self.batch:
                await asyncio.sleep(0)
                continue
            nxt = self.queue.next_due()
            delay = self.max_sleep if nxt is None else min(self.max_sleep, nxt - self._clock.monotonic())
            if delay <= 0:
                await asyncio.sleep(0)
                continue
            self._wake = asyncio.get_running_loop().create_future()
            await self._clock.wait_wake(self._wake, max(delay, self.coalesce))


class TimedTasks(Generic[K]):
    """What the lease, pod and node-status managers share: a :class:`TimerLoop` whose deadlines call
    the subclass's :meth:`_fire`, and the tasks it started that still run.

    ``_fire(key, due)`` must be quick: it decides what to do and starts the work with :meth:`_spawn`
    (never awaiting the API itself). :meth:`run` fires deadlines until cancelled; :meth:`stop` cancels
    the work still in flight and waits for it to end; :meth:`backlog` counts that work.
    """

    def __init__(self, clock: Clock, coalesce: float = DEFAULT_COALESCE_S) -> None:
        self._timers: TimerLoop[K] = TimerLoop(clock, self._fire, coalesce=coalesce)
        self._tasks: set[asyncio.Task[None]] = set()

    def _fire(self, key: K, due: float) -> None:
        """A deadline of ``key`` passed (``due``, monotonic seconds): start what it stands for."""
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task, kept until it ends (so :meth:`stop` can cancel it)."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def backlog(self) -> int:
        """Work in flight (a growing number means the apiserver or the agent falls behind)."""
        return len(self._tasks)

    async def run(self) -> None:
        """Fire deadlines until cancelled."""
        await self._timers.run()

    async def stop(self) -> None:
        """Cancel the work in flight and wait for it to end."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
