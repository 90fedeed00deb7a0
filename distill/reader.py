"""The distill reader: turns the student's batch stream into (batch, teacher logits).

Why it is shaped like this:

* **Bounded prefetch window.** Up to ``window`` batches are taken from the stream ahead of
  the student and sent to teachers; the student only blocks when the teachers, all
  together, are slower than it is. The bound keeps memory flat and makes a failure cost at
  most ``window`` batches of rework.
* **Work-stealing.** Batches wait in one shared queue (oldest first); each live teacher
  takes the next one whenever it has a free slot (``per_teacher_inflight``). A fast
  teacher takes more, a slow one less; nothing is assigned in advance.
* **Retry elsewhere.** A request that fails (connection refused/reset, 5xx, timeout) puts
  its batch back at the head of the queue and the teacher out of rotation until its
  ``/readyz`` answers again, so the retry lands on another teacher.
* **Exactly once, in order.** Results are delivered in stream order (the student sees the
  same sequence in every mode), each batch exactly once; duplicates would be dropped and
  counted, and ``lost_samples`` is checked at the end.
* **Elastic.** Teachers come and go through a :class:`~distill.discovery.TeacherSource`.
  With none live, the reader waits and says so every few seconds; it resumes as soon as
  one becomes ready.

The network side runs on an asyncio loop in a background thread; the student iterates
in its own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np

from distill import wire
from distill.data import Batch
from distill.discovery import TeacherSource

log = logging.getLogger("distill.reader")


class ReaderError(RuntimeError):
    """A failure that retrying cannot fix (e.g. the teacher rejects our input with 4xx)."""


@dataclass(frozen=True)
class ReaderSettings:
    """Knobs of the reader (times in seconds).

    Attributes:
        window: batches taken from the stream but not yet consumed by the student (prefetch
            bound; also the most rework after a teacher dies).
        per_teacher_inflight: concurrent requests per teacher.
        request_timeout_s: seconds for a whole request; then it is retried on another teacher.
        connect_timeout_s: seconds to open a connection.
        probe_interval_s: seconds between ``/readyz`` probes of teachers out of rotation.
        probe_timeout_s: seconds one probe may take.
        wait_log_interval_s: seconds between "no live teacher" log reminders.
        max_attempts: attempts per batch; 0 = retry forever (a batch is never dropped).
    """

    window: int = 16  # batches taken from the stream but not yet consumed by the student
    per_teacher_inflight: int = 2  # concurrent requests per teacher
    request_timeout_s: float = 10.0  # whole request; then retried on another teacher
    connect_timeout_s: float = 2.0
    probe_interval_s: float = 0.1  # /readyz polling of teachers out of rotation
    probe_timeout_s: float = 1.0
    wait_log_interval_s: float = 5.0  # "no live teacher" reminder period
    max_attempts: int = 0  # per batch; 0 = retry forever (a batch is never dropped)


@dataclass
class TeacherStats:
    url: str
    live: bool = False
    removed: bool = False
    inflight: int = 0
    requests_ok: int = 0
    samples_ok: int = 0
    failures: int = 0
    timeouts: int = 0
    became_live_at: list[float] = field(default_factory=list)
    went_down_at: list[float] = field(default_factory=list)


@dataclass
class ReaderStats:
    """Counters the student writes into its result; ``lost_samples`` must end at 0."""

    issued_batches: int = 0
    issued_samples: int = 0
    delivered_batches: int = 0
    delivered_samples: int = 0
    duplicate_results_dropped: int = 0
    retries: int = 0
    consumer_wait_s: float = 0.0  # time the student spent blocked on the reader
    no_teacher_s: float = 0.0  # time with work pending and no live teacher
    no_teacher_episodes: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)  # timestamped membership changes

    @property
    def lost_samples(self) -> int:
        return self.issued_samples - self.delivered_samples

    def to_json(self, teachers: dict[str, TeacherStats]) -> dict[str, Any]:
        return {
            "issued_batches": self.issued_batches,
            "issued_samples": self.issued_samples,
            "delivered_batches": self.delivered_batches,
            "delivered_samples": self.delivered_samples,
            "lost_samples": self.lost_samples,
            "duplicate_results_dropped": self.duplicate_results_dropped,
            "retries": self.retries,
            "consumer_wait_s": round(self.consumer_wait_s, 3),
            "no_teacher_s": round(self.no_teacher_s, 3),
            "no_teacher_episodes": self.no_teacher_episodes,
            "events": self.events,
            "teachers": {
                u: {
                    "requests_ok": t.requests_ok,
                    "samples_ok": t.samples_ok,
                    "failures": t.failures,
                    "timeouts": t.timeouts,
                    "became_live_at": t.became_live_at,
                    "went_down_at": t.went_down_at,
                }
                for u, t in teachers.items()
            },
        }


@dataclass(order=True)
class _Item:
    seq: int
    batch: Batch = field(compare=False)
    attempts: int = field(default=0, compare=False)


class DistillReader:
    """Iterate ``for batch, logits in reader`` (use as a context manager)."""

    def __init__(self, batches: Iterable[Batch], source: TeacherSource, settings: ReaderSettings | None = None) -> None:
        self.settings = settings or ReaderSettings()
        self.source = source
        self.stats = ReaderStats()
        self.teachers: dict[str, TeacherStats] = {}
        self._batches = iter(batches)
        self._exhausted = False
        self._next_seq = 0  # next seq to take from the stream
        self._consumed = 0  # seqs < this have been handed to the student
        self._pending: list[_Item] = []  # heap by seq: waiting for a teacher
        self._results: dict[int, tuple[Batch, np.ndarray]] = {}
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: aiohttp.ClientSession | None = None
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._no_teacher_since: float | None = None
        self._started = threading.Event()
        self._closed = False

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> DistillReader:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._thread_main, name="distill-reader", daemon=True)
        self._thread.start()
        self._started.wait()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.source.stop()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            with contextlib.suppress(Exception):
                fut.result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._setup())
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _setup(self) -> None:
        s = self.settings
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=s.per_teacher_inflight + 1, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(connector=connector)
        loop = asyncio.get_running_loop()

        def on_change(urls: frozenset[str]) -> None:
            loop.call_soon_threadsafe(self._set_teachers, urls)

        self.source.start(on_change)
        self._spawn(self._watchdog())
        self._fill()

    async def _shutdown(self) -> None:
        for t in list(self._tasks) + list(self._probes.values()):
            t.cancel()
        await asyncio.gather(*self._tasks, *self._probes.values(), return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _event(self, kind: str, url: str = "", **extra: Any) -> None:
        self.stats.events.append({"t": time.time(), "event": kind, "teacher": url, **extra})

    # ---------------------------------------------------------------- membership
    def _set_teachers(self, urls: frozenset[str]) -> None:
        for url in urls:
            t = self.teachers.get(url)
            if t is None or t.removed:
                if t is None:
                    t = self.teachers[url] = TeacherStats(url)
                t.removed = False
                log.info("teacher added: %s (probing /readyz)", url)
                self._event("added", url)
                self._start_probe(url)
        for url, t in self.teachers.items():
            if url not in urls and not t.removed:
                t.removed = True
                t.live = False
                log.info("teacher removed: %s", url)
                self._event("removed", url)
                probe = self._probes.pop(url, None)
                if probe is not None:
                    probe.cancel()
        self._dispatch()

    def _start_probe(self, url: str) -> None:
        if url not in self._probes or self._probes[url].done():
            self._probes[url] = asyncio.get_running_loop().create_task(self._probe(url))

    async def _probe(self, url: str) -> None:
        """Poll /readyz until the teacher answers 200, then put it in rotation."""
        s = self.settings
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=s.probe_timeout_s)
        while True:
            t = self.teachers.get(url)
            if t is None or t.removed:
                return
            try:
                async with self._session.get(url + "/readyz", timeout=timeout) as r:
                    if r.status == 200:
                        t.live = True
                        t.became_live_at.append(time.time())
                        log.info("teacher live: %s", url)
                        self._event("live", url)
                        self._probes.pop(url, None)
                        self._dispatch()
                        return
            except (aiohttp.ClientError, TimeoutError, OSError):
                pass
            await asyncio.sleep(s.probe_interval_s)

    def _mark_down(self, url: str, why: str) -> None:
        t = self.teachers[url]
        if t.live:
            t.live = False
            t.went_down_at.append(time.time())
            log.warning("teacher out of rotation: %s (%s); work moves to the others", url, why)
            self._event("down", url, reason=why)
        if not t.removed:
            self._start_probe(url)

    def live_teachers(self) -> list[str]:
        return [u for u, t in self.teachers.items() if t.live and not t.removed]

    # ---------------------------------------------------------------- work
    def _fill(self) -> None:
        """Take batches from the stream while the window has room."""
        while not self._exhausted and self._next_seq - self._consumed < self.settings.window:
            try:
                batch = next(self._batches)
            except StopIteration:
                self._exhausted = True
                break
            except BaseException as e:
                self._fail(e)
                return
            heapq.heappush(self._pending, _Item(self._next_seq, batch))
            self._next_seq += 1
            self.stats.issued_batches += 1
            self.stats.issued_samples += batch.size
        if self._exhausted:
            with self._cond:
                self._cond.notify_all()
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand queued batches to whichever live teachers have free slots (least busy first)."""
        if not self._pending:
            return
        cap = self.settings.per_teacher_inflight
        while self._pending:
            free = [t for t in self.teachers.values() if t.live and not t.removed and t.inflight < cap]
            if not free:
                break
            t = min(free, key=lambda t: t.inflight)
            item = heapq.heappop(self._pending)
            t.inflight += 1
            self._spawn(self._request(t, item))
        self._update_waiting()

    def _update_waiting(self) -> None:
        waiting = bool(self._pending) and not self.live_teachers()
        now = time.monotonic()
        if waiting and self._no_teacher_since is None:
            self._no_teacher_since = now
            self.stats.no_teacher_episodes += 1
            known = sorted(u for u, t in self.teachers.items() if not t.removed)
            log.warning(
                "no live teacher: waiting with %d batches queued (known: %s)", len(self._pending), known or "none"
            )
            self._event("no_teacher", pending=len(self._pending))
        elif not waiting and self._no_teacher_since is not None:
            waited = now - self._no_teacher_since
            self.stats.no_teacher_s += waited
            self._no_teacher_since = None
            log.info("teacher available again after %.1fs without one; resuming", waited)
            self._event("resumed", waited_s=round(waited, 3))

    async def _watchdog(self) -> None:
        """Repeat the 'no live teacher' message while it stays true."""
        while True:
            await asyncio.sleep(self.settings.wait_log_interval_s)
            if self._no_teacher_since is not None:
                log.warning(
                    "still no live teacher after %.0fs; %d batches queued, waiting",
                    time.monotonic() - self._no_teacher_since,
                    len(self._pending),
                )

    async def _request(self, t: TeacherStats, item: _Item) -> None:
        s = self.settings
        assert self._session is not None
        body, headers = wire.encode_request(item.batch.x)
        timeout = aiohttp.ClientTimeout(total=s.request_timeout_s, sock_connect=s.connect_timeout_s)
        failure: str | None = None
        released = False
        try:
            async with self._session.post(t.url + wire.PATH, data=body, headers=headers, timeout=timeout) as r:
                payload = await r.read()
                if r.status == 200:
                    logits = wire.decode_logits(payload, item.batch.size)
                    t.requests_ok += 1
                    t.samples_ok += item.batch.size
                    t.inflight -= 1  # free the slot first, so delivering can refill it at once
                    released = True
                    self._deliver(item, logits)
                    return
                if 400 <= r.status < 500 and r.status not in (408, 429):
                    self._fail(ReaderError(f"teacher {t.url} rejected a batch: {r.status} {payload[:300]!r}"))
                    return
                failure = f"HTTP {r.status}"
        except TimeoutError:
            t.timeouts += 1
            failure = f"timeout after {s.request_timeout_s}s"
        except (aiohttp.ClientError, OSError, ValueError) as e:
            failure = f"{type(e).__name__}: {e}"
        finally:
            if not released:
                t.inflight -= 1
        # Failed: requeue at its place (oldest first) and retry on another teacher.
        t.failures += 1
        item.attempts += 1
        self.stats.retries += 1
        if s.max_attempts and item.attempts >= s.max_attempts:
            self._fail(ReaderError(f"batch {item.seq} failed {item.attempts} times; last: {failure}"))
            return
        heapq.heappush(self._pending, item)
        self._mark_down(t.url, failure or "failed")
        self._dispatch()

    def _deliver(self, item: _Item, logits: np.ndarray) -> None:
        with self._cond:
            if item.seq < self._consumed or item.seq in self._results:
                self.stats.duplicate_results_dropped += 1
            else:
                self._results[item.seq] = (item.batch, logits)
                self._cond.notify_all()
        self._dispatch()

    def _fail(self, e: BaseException) -> None:
        log.error("reader failed: %s", e)
        with self._cond:
            self._error = e
            self._cond.notify_all()

    def _on_consumed(self) -> None:
        self._fill()

    # ---------------------------------------------------------------- student side
    def __iter__(self) -> Iterator[tuple[Batch, np.ndarray]]:
        loop = self._loop
        assert loop is not None, "use the reader as a context manager (or call start())"
        while True:
            t0 = time.perf_counter()
            with self._cond:
                while True:
                    if self._error is not None:
                        raise self._error
                    if self._consumed in self._results:
                        batch, logits = self._results.pop(self._consumed)
                        self._consumed += 1
                        break
                    if self._exhausted and self._consumed >= self._next_seq:
                        self.stats.consumer_wait_s += time.perf_counter() - t0
                        return
                    self._cond.wait(0.5)
            self.stats.consumer_wait_s += time.perf_counter() - t0
            self.stats.delivered_batches += 1
            self.stats.delivered_samples += batch.size
            loop.call_soon_threadsafe(self._on_consumed)
            yield batch, logits

    def result_json(self) -> dict[str, Any]:
        return self.stats.to_json(self.teachers)
