"""Time, behind a small interface so that timing logic can be tested with a fake clock, not sleeps.

Two kinds of time: ``monotonic()`` for scheduling (never jumps) and ``wall()`` for what goes into
Kubernetes objects (``renewTime``, ``startTime``).  A :class:`FakeClock` keeps both in step.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """What the agent needs from time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (for timestamps written to the API)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (fake clocks advance instead)."""
        ...

    async def wait_wake(self, wake: asyncio.Future[None], timeout: float) -> None:
        """Wait until ``wake`` is resolved or ``timeout`` seconds pass, whichever is first."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def wait_wake(self, wake: asyncio.Future[None], timeout: float) -> None:
        # a timer handle on the future itself: no extra task per wait (asyncio.wait_for makes one)
        if wake.done():
            return
        handle = asyncio.get_running_loop().call_later(max(0.0, timeout), _resolve, wake)
        try:
            await wake
        finally:
            handle.cancel()


class FakeClock:
    """A clock that moves only when told to (or when someone sleeps on it).

    ``sleep`` advances the clock by the requested amount and yields once to the loop, so a coroutine
    that sleeps 10 s "takes" 10 s of fake time and no real time.
    """

    def __init__(self, start_wall: float = 1_700_000_000.0) -> None:
        self._mono = 1000.0
        self._offset = start_wall - self._mono

    def monotonic(self) -> float:
        return self._mono

    def wall(self) -> float:
        return self._mono + self._offset

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self._mono += max(0.0, seconds)

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)

    async def wait_wake(self, wake: asyncio.Future[None], timeout: float) -> None:
        # let tasks that are ready run first, at the current time, as they would on a real loop
        for _ in range(3):
            await asyncio.sleep(0)
        if not wake.done():
            self.advance(timeout)
        await asyncio.sleep(0)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def rfc3339(wall: float) -> str:
    """``2024-05-01T12:00:00Z`` (Kubernetes ``Time``: second precision)."""
    return datetime.fromtimestamp(int(wall), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_micro_cache: list[object] = [-1, ""]


def rfc3339_micro(wall: float) -> str:
    """``2024-05-01T12:00:00.123456Z`` (Kubernetes ``MicroTime``, used by Leases).

    A thousand renewals a second share the date part, so it is formatted once per second.
    """
    second = int(wall)
    if _micro_cache[0] != second:
        _micro_cache[0] = second
        _micro_cache[1] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_micro_cache[1]}.{int((wall - second) * 1e6):06d}Z"


def parse_rfc3339(text: str) -> float:
    """Seconds since the epoch of a Kubernetes ``Time``/``MicroTime`` string."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
