"""The time-faithful replay: the trace's own pods created and deleted at their times, compressed.

The schedule (:func:`timed_schedule`): every pod created inside the window, in order of creation, is
created ``(creation_time - start) / compress`` seconds after the replay's start and deleted
``(deletion_time - start) / compress`` seconds after it (at the window's end when it runs past it); no
tuning, no shuffle, so a timed replay is deterministic.  A pod whose deletion equals its creation is
created, then deleted at once.

The driver (:class:`TimedReplay`) keeps that schedule on a monotonic clock: one loop hands each create
and delete, when due, to a thread pool of bounded size (``workers``), so creation never waits for a
verdict; a pod is deleted at its time whether bound or still pending (its claim with it), never retried
or re-created, while the scheduler keeps retrying pending pods as in a real cluster.  A call that starts
late because the client fell behind is not hidden: each pod's lag is recorded (the figures count the late
ones and give the lag's p99 and max).  One watch of the run's pods (:func:`kubecore.watch.list_then_watch`)
records, per pod: when it was bound and where, each ``PodScheduled`` False/``Unschedulable`` update with
the scheduler's message, when it was gone.  At the end the replay waits (bounded) until the API server
holds none of the run's pods and claims, so what it still holds can be compared with the harness's
account (:func:`hollowscale.replay.driver.apiserver_allocation`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from hollowscale.replay.api import ReplayApi
from hollowscale.replay.pods import pod_name
from hollowscale.trace import TracePod
from hollowscale.trace.model import GPU_MILLI
from hollowscale.trace.paper import SequencedPod
from kubecore.namespaces import RUN_LABEL
from kubecore.watch import list_then_watch, now_ms

CREATE, DELETE = "create", "delete"
#: a call that starts this long after it was due counts as late (the report counts them)
LATE_S = 0.1
#: how long the end of a replay waits for the API server to let go of the run's pods and claims
DRAIN_S = 60.0


@dataclass(frozen=True)
class TimedPod:
    """One pod of a timed schedule.

    Attributes:
        index: its place in order of creation (0-based; names the pod ``r<index>-<trace name>``).
        pod: the trace's pod, as it is.
        create_s, delete_s: replay seconds after the start at which it is created and deleted.
        cut: its deletion was moved to the window's end (it ran past it).
    """

    index: int
    pod: TracePod
    create_s: float
    delete_s: float
    cut: bool = False


@dataclass(frozen=True)
class Schedule:
    """The creates and deletes of a timed replay (:func:`timed_schedule`).

    Attributes:
        pods: the pods replayed, in order of creation.
        compress: trace seconds per replay second.
        start_s: the trace second at the replay's start; end_s: the window's end (None: none).
        trace_pods: pods in the trace (those outside the window or the limit are left out).
    """

    pods: tuple[TimedPod, ...]
    compress: float
    start_s: float
    end_s: float | None
    trace_pods: int

    @property
    def duration_s(self) -> float:
        """Replay seconds from the start to the last deletion."""
        return max((p.delete_s for p in self.pods), default=0.0)

    def events(self) -> list[tuple[float, str, TimedPod]]:
        """(replay second, ``create`` or ``delete``, pod) in the order they are made: by time; at one time
        deletions first (a pod ending frees what one starting then may need), then creations, then the
        deletions of pods that end as they start (a pod is always created before it is deleted)."""
        keyed = []
        for p in self.pods:
            keyed.append(((p.create_s, 1, p.index), CREATE, p))
            keyed.append(((p.delete_s, 2 if p.delete_s <= p.create_s else 0, p.index), DELETE, p))
        keyed.sort(key=lambda k: k[0])
        return [(k[0], what, p) for k, what, p in keyed]

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` says of the schedule."""
        return {"pods": len(self.pods), "trace_pods": self.trace_pods, "compress": self.compress,
                "window": {"start_s": self.start_s, "end_s": self.end_s},
                "cut_at_window_end": sum(p.cut for p in self.pods), "duration_s": round(self.duration_s, 3)}


def timed_schedule(pods: Sequence[TracePod], compress: float, start_s: float | None = None,
                   end_s: float | None = None, limit: int | None = None) -> Schedule:
    """The pods created in ``[start_s, end_s)`` (trace seconds; ``start_s`` None: the earliest creation,
    ``end_s`` None: no end), in order of creation (the file's order among equal times), at most ``limit``,
    their times divided by ``compress`` from ``start_s``; a deletion past ``end_s`` moved to ``end_s``.

    Raises:
        ValueError: ``compress`` not > 0, or a pod without a creation or deletion time.
    """
    if not compress > 0 or not math.isfinite(compress):
        raise ValueError(f"compress: expected a number > 0, got {compress!r}")
    untimed = [p.name for p in pods if p.creation_s is None or p.deletion_s is None]
    if untimed:
        raise ValueError(f"{len(untimed)} pods lack a creation or deletion time (first: {untimed[0]})")
    created = [int(p.creation_s or 0) for p in pods]
    start = float(start_s) if start_s is not None else float(min(created, default=0))
    end = float(end_s) if end_s is not None else math.inf
    inside = sorted((i for i, c in enumerate(created) if start <= c < end), key=lambda i: (created[i], i))
    if limit is not None:
        inside = inside[:limit]
    out = []
    for n, i in enumerate(inside):
        p = pods[i]
        deletion = float(p.deletion_s or 0)
        cut = deletion > end
        out.append(TimedPod(n, p, (created[i] - start) / compress, (min(deletion, end) - start) / compress, cut))
    return Schedule(tuple(out), float(compress), start, None if end_s is None else float(end_s), len(pods))


def gpu_milli_held(pod: TracePod, gpu_mode: str) -> int:
    """The milli-GPU a bound pod holds as the replay asks it: its shares (``dra-shared``), a share rounded up
    to a whole GPU otherwise."""
    return pod.num_gpu * (pod.gpu_milli if gpu_mode == "dra-shared" else GPU_MILLI)


@dataclass
class TimedRecord:
    """One pod of a timed replay as the client and the watch saw it (epoch milliseconds, client's clock).

    Attributes:
        index, name, trace_name, kind, qos: which pod.
        gpu_milli: what it holds while bound (:func:`gpu_milli_held`).
        due_create_ms, due_delete_ms: when its create and delete were due; cut: deleted at the window's end.
        created_ms: just before its POST (None: never created); create_lag_s: how late the POST started;
            create_error: why the create failed ("" when it did not).
        bound_ms, node: the first watch event that showed it bound (None: never bound).
        unschedulable_ms: the first event showing ``PodScheduled`` False/``Unschedulable`` (None: never);
            unschedulable_events: how many such updates (a new message is a new one); reason: the last message.
        deleted_ms: when its DELETE was answered (None: never deleted); delete_lag_s: how late it started.
        gone_ms: the watch's DELETED event (None: not seen).
    """

    index: int
    name: str
    trace_name: str
    kind: str
    qos: str
    gpu_milli: int
    due_create_ms: float
    due_delete_ms: float
    cut: bool = False
    created_ms: float | None = None
    create_lag_s: float | None = None
    create_error: str = ""
    bound_ms: float | None = None
    node: str = ""
    unschedulable_ms: float | None = None
    unschedulable_events: int = 0
    reason: str = ""
    deleted_ms: float | None = None
    delete_lag_s: float | None = None
    gone_ms: float | None = None

    @property
    def pending_end_ms(self) -> float | None:
        """When it stopped pending: bound or deleted, whichever came first (None: neither)."""
        ends = [t for t in (self.bound_ms, self.deleted_ms) if t is not None]
        return min(ends) if ends else None


def _unschedulable_message(pod: dict[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return str(c.get("message") or "")
    return None


@dataclass
class TimedReplay:
    """One time-faithful replay of a schedule against a cluster whose nodes are the trace's.

    Attributes:
        api: where the pods and claims go (the run's namespace, label, GPU mode and scheduler).
        schedule: what is created and deleted when (:func:`timed_schedule`).
        workers: the create and delete calls in flight at most (a thread pool of this size; with the watch
            they fit the runner's session of 8 connections).
        drain_s: how long the end waits for the API server to let go of the run's pods and claims.
        progress: called with (pods created, pods in all) now and then.
    """

    api: ReplayApi
    schedule: Schedule
    workers: int = 6
    drain_s: float = DRAIN_S
    progress: Callable[[int, int], None] | None = None
    records: list[TimedRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started_ms: float = 0.0
    ended_ms: float = 0.0
    stopped: bool = False
    watch_restarts: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    # ------------------------------------------------------------------------------------------ the watch

    def _watch(self, by_name: dict[str, TimedRecord], done: threading.Event) -> None:
        api = self.api
        for typ, obj, t in list_then_watch(api.session, api.server, api.pods_path, done.is_set,
                                           label_selector=f"{RUN_LABEL}={api.run_id}",
                                           on_restart=self.watch_restarts.append):
            rec = by_name.get((obj.get("metadata") or {}).get("name", ""))
            if rec is None:
                continue
            with self._lock:
                if typ == "DELETED":
                    rec.gone_ms = rec.gone_ms or t
                    continue
                node = (obj.get("spec") or {}).get("nodeName")
                if node:
                    if rec.bound_ms is None:
                        rec.bound_ms, rec.node = t, str(node)
                    continue
                message = _unschedulable_message(obj)
                if message is not None and (rec.unschedulable_ms is None or message != rec.reason):
                    rec.unschedulable_ms = rec.unschedulable_ms or t
                    rec.unschedulable_events += 1
                    rec.reason = message

    # ------------------------------------------------------------------------------------------ the calls

    def _create(self, tp: TimedPod, rec: TimedRecord, due: float, width: int) -> None:
        lag = max(0.0, time.monotonic() - due)
        api = self.api
        body = api.pod_body(SequencedPod(tp.index, tp.pod), width)
        try:
            if api.claimed(tp.pod):
                api.post(api.claims_path, api.claim_body(rec.name, tp.pod))
            created = now_ms()
            api.post(api.pods_path, body)
            with self._lock:
                rec.created_ms, rec.create_lag_s = created, lag
        except (requests.RequestException, RuntimeError) as exc:
            with self._lock:
                rec.create_error = str(exc)[:300]
                rec.create_lag_s = lag
                self.errors.append(f"create {rec.name}: {rec.create_error}")

    def _delete_call(self, path: str) -> bool:
        error = self.api.delete(path)
        if error:
            self._error(error)
        return error is None

    def _delete(self, tp: TimedPod, rec: TimedRecord, due: float, created: Future[None] | None) -> None:
        if created is not None:
            created.result()  # a pod is deleted after its create was answered (its own calls never raise)
        lag = max(0.0, time.monotonic() - due)
        ok = self._delete_call(f"{self.api.pods_path}/{rec.name}")
        answered = now_ms()
        if self.api.claimed(tp.pod):
            self._delete_call(f"{self.api.claims_path}/{rec.name}")
        with self._lock:
            rec.delete_lag_s = lag
            if ok:
                rec.deleted_ms = answered

    # ------------------------------------------------------------------------------------------ the replay

    def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Replay the schedule (module docstring); ``stop()`` ends it early: what was created is then
        deleted at once, and :attr:`stopped` is set."""
        pods = self.schedule.pods
        width = max(5, len(str(len(pods))))
        events = self.schedule.events()
        names = [pod_name(SequencedPod(tp.index, tp.pod), width) for tp in pods]
        self.started_ms = now_ms()
        t0 = time.monotonic()
        self.records = [TimedRecord(
            tp.index, name, tp.pod.name, tp.pod.kind, tp.pod.qos, gpu_milli_held(tp.pod, self.api.gpu_mode),
            self.started_ms + 1000 * tp.create_s, self.started_ms + 1000 * tp.delete_s, tp.cut)
            for tp, name in zip(pods, names, strict=True)]
        by_name = {r.name: r for r in self.records}
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(by_name, done), name="timed-replay-watch", daemon=True)
        watcher.start()
        made: dict[int, Future[None]] = {}
        deleted: set[int] = set()
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="timed-replay") as pool:
                for at, what, tp in events:
                    due = t0 + at
                    while (left := due - time.monotonic()) > 0 and not stop():
                        time.sleep(min(left, 0.2))
                    if stop():
                        self.stopped = True
                        self._error(f"stopped at {at:.1f} s of {self.schedule.duration_s:.1f} s: "
                                    f"{len(made)} of {len(pods)} pods created")
                        break
                    rec = self.records[tp.index]
                    if what == CREATE:
                        made[tp.index] = pool.submit(self._create, tp, rec, due, width)
                        if self.progress is not None and (len(made) % 1000 == 0 or len(made) == len(pods)):
                            self.progress(len(made), len(pods))
                    else:
                        deleted.add(tp.index)
                        pool.submit(self._delete, tp, rec, due, made.get(tp.index))
                if self.stopped:  # leave nothing behind: what was created and not deleted goes now
                    now = time.monotonic()
                    for i, fut in made.items():
                        if i not in deleted:
                            pool.submit(self._delete, pods[i], self.records[i], now, fut)
            self._drain(stop)
        finally:
            self.ended_ms = now_ms()
            done.set()
            watcher.join(timeout=30)
            self.errors += [f"pod watch: {r}" for r in self.watch_restarts if "error" in r]

    def _drain(self, stop: Callable[[], bool]) -> None:
        """Wait (at most :attr:`drain_s`) until the watch saw every created pod gone and the API server holds
        none of the run's claims (a claim goes once the controller deallocated it)."""
        deadline = time.monotonic() + self.drain_s
        api = self.api
        sel: dict[str, str | int] = {"labelSelector": f"{RUN_LABEL}={api.run_id}", "limit": 1}
        claims = api.gpu_mode != "counted"
        while time.monotonic() < deadline and not stop():
            with self._lock:
                pods_left = sum(1 for r in self.records if r.created_ms is not None and r.gone_ms is None)
            if not pods_left:
                if not claims:
                    return
                try:
                    r = api.session.get(api.server + api.claims_path, params=sel, timeout=30)
                    if r.status_code == 404 or (r.ok and not r.json().get("items")):
                        return
                except requests.RequestException:
                    pass
            time.sleep(0.5)
        with self._lock:
            left = [r.name for r in self.records if r.created_ms is not None and r.gone_ms is None]
        if left and not stop():
            self._error(f"{len(left)} pods not seen gone {self.drain_s:g} s after the end (first: {left[0]})")
