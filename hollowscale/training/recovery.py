"""How training jobs (gangs) recover from faults, computed from a run's pod timeline (pure functions).

A training job is one **instance** (label ``hollowscale.io/instance``, per namespace) whose pods carry
``gang_min`` (N, the members that must run together); its **members** are those pods.  The model is
the hollow agent's, which restarts a job from its last checkpoint:

* a member **runs** over ``[running_ms, end)``, ``end`` being the earliest of ``finished_ms``, ``deleting_ms``
  (its deletion began: the agent stops counting it at its ``deletionTimestamp``) and ``deleted_ms`` (None:
  still running at the end of the window); it **holds** its GPUs over ``[scheduled_ms, finished or deleted)``;
* the job is **whole** while at least N members run (a sweep over the run intervals; at equal times
  ends come before starts, so a member replaced at the very ms it ended never makes the count reach N
  early, and ends of members that Succeeded come before other ends: the work was done at that ms);
* an **attempt** is a maximal whole stretch ``[barrier, end)``.  It is *completed* when the member
  whose end made the count drop below N Succeeded (the last attempt: a completed gang never starts
  again), *open* when the window ended first, else *broken*;
* checkpoints are taken every C seconds of work from an attempt's start (``checkpoint_s`` per
  workload; None: never), so a broken attempt loses ``length mod C`` seconds (all of it without
  checkpoints); completed and open attempts lose nothing;
* **productive** GPU-seconds = sum over attempts of (length - lost) x N x GPUs per member (the most
  any member asks for); **held** = GPU-seconds its members held; **ETTR** (effective training time
  ratio) = productive / held.

A fault **hits** an instance when one of its members was running at the fault's ``t_ms`` (its end
included: the failure a fault causes may carry the same timestamp) on one of the fault's ``nodes`` or
is one of its ``pods`` (uids).  Per (fault, instance) row:

* the job was in an attempt at ``t_ms`` that broke: ``broke_after_s`` is that break - ``t_ms``,
  ``recovered_s`` the next attempt's barrier - ``t_ms``, ``lost_work_s`` the broken attempt's lost
  seconds, ``incomplete_gpu_s`` the GPU-seconds its members held from the break to the recovery (or the
  window's end), ``wasted_gpu_s`` = incomplete + lost x N x GPUs per member.  Two faults inside one
  attempt share its break: the earlier (by ``t_ms``, then index) carries its cost, the later reports
  the times with zero cost, so the summary's waste counts each break once;
* the job was whole and that attempt completed (or was still open at the window's end): the fault did
  not break it; ``broke_after_s``/``recovered_s`` None, ``recovered`` None, costs zero;
* the job was not whole at ``t_ms`` (already broken, or not started yet): ``broke_after_s`` None,
  ``recovered_s`` the next barrier - ``t_ms``, costs zero (an earlier break carries them; a job not
  started yet is partial-start waste, see :mod:`hollowscale.batch.figures`).

``reaction_s`` is the first member created after ``t_ms`` (the controller's replacement) - ``t_ms``.
Seconds are rounded to 3 places, hours and ratios to 4; percentiles are nearest-rank.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from hollow.gangs import lost_work
from hollowscale.measure.derive import percentile

__all__ = ["Attempt", "Ended", "Member", "Run", "attempts_of", "lost_work", "member_runs", "pod_end", "run_end",
           "training_recovery"]

Ended = Literal["completed", "broken", "open"]
#: (start_ms, end_ms or None = still running, Succeeded?) of one member's run
Run = tuple[float, float | None, bool]

_START, _END = 1, 0  # sort keys: at equal times ends come first


class Member(Protocol):
    """The fields of :class:`hollowscale.measure.timeline.PodRecord` read here."""

    uid: str
    name: str
    workload: str
    instance: str
    gpus: float
    node: str
    created_ms: float
    scheduled_ms: float | None
    running_ms: float | None
    finished_ms: float | None
    deleted_ms: float | None
    phase: str
    gang_min: int | None


@dataclass(frozen=True)
class Attempt:
    """One whole stretch of a job: from its barrier to the moment fewer than N members ran."""

    start_ms: float
    end_ms: float
    ended: Ended

    @property
    def length_s(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    def lost_s(self, checkpoint_s: float | None) -> float:
        """Work thrown away: only a break loses what came after the last checkpoint."""
        return lost_work(self.length_s, checkpoint_s) if self.ended == "broken" else 0.0


def pod_end(pod: Member) -> float | None:
    """When a pod stopped holding its GPUs: the earlier of finished and deleted; None if neither."""
    ends = [t for t in (pod.finished_ms, pod.deleted_ms) if t is not None]
    return min(ends) if ends else None


def run_end(pod: Member) -> float | None:
    """When a member stopped counting for its gang: finished, or its deletion began (``deleting_ms``, as the
    hollow agent counts it from the ``deletionTimestamp``), or deleted; None if none of these."""
    ends = [t for t in (pod.finished_ms, getattr(pod, "deleting_ms", None), pod.deleted_ms) if t is not None]
    return min(ends) if ends else None


def _succeeded(pod: Member) -> bool:
    """Its run ended because it Succeeded (not deleted first)."""
    return pod.phase == "Succeeded" and pod.finished_ms is not None and pod.finished_ms == run_end(pod)


def member_runs(pods: Iterable[Member]) -> list[Run]:
    """The run intervals of the pods that ran, as :func:`attempts_of` takes them."""
    return [(p.running_ms, run_end(p), _succeeded(p)) for p in pods if p.running_ms is not None]


def _events(runs: Iterable[Run], end_ms: float) -> list[tuple[float, int, bool]]:
    """Starts and ends inside the window, in sweep order: by time, ends first, successes first among ends."""
    events: list[tuple[float, int, bool]] = []
    for start, end, succeeded in runs:
        if start >= end_ms or (end is not None and end <= start):
            continue  # after the window, or never ran for any time (as hollow.gangs.barrier_time)
        events.append((start, _START, False))
        if end is not None and end <= end_ms:
            events.append((end, _END, succeeded))
    events.sort(key=lambda e: (e[0], e[1], not e[2]))
    return events


def attempts_of(runs: Iterable[Run], n: int, end_ms: float) -> list[Attempt]:
    """The whole stretches of a gang of ``n`` whose members ran over ``runs``, up to ``end_ms``.

    Shared with the integration tests, which recompute the figures from what the cluster recorded.
    """
    if n < 1:
        raise ValueError(f"a gang needs at least one member, not {n}")
    attempts: list[Attempt] = []
    running, barrier = 0, None
    for t, kind, succeeded in _events(runs, end_ms):
        running += 1 if kind == _START else -1
        if barrier is None and running >= n:
            barrier = t
        elif barrier is not None and running < n:
            attempts.append(Attempt(barrier, t, "completed" if succeeded else "broken"))
            barrier = None
            if succeeded:
                return attempts  # done: as the agent's, a completed gang never starts again
    if barrier is not None:
        attempts.append(Attempt(barrier, end_ms, "open"))
    return attempts


def _held_gpu_s(pods: Iterable[Member], since_ms: float, until_ms: float) -> float:
    """GPU-seconds the pods held inside ``[since_ms, until_ms)``."""
    total = 0.0
    for p in pods:
        if p.scheduled_ms is None:
            continue
        end = pod_end(p)
        stop = min(until_ms, end if end is not None else until_ms)
        total += p.gpus * max(0.0, stop - max(since_ms, p.scheduled_ms)) / 1000.0
    return total


@dataclass(frozen=True)
class _Job:
    """One training instance: its members and its attempts over the window."""

    namespace: str
    instance: str
    workload: str
    members: int  # N
    gpus_per_member: float
    checkpoint_s: float | None
    pods: tuple[Member, ...]
    attempts: tuple[Attempt, ...]

    @property
    def gang_gpus(self) -> float:
        return self.members * self.gpus_per_member

    def lost_s(self) -> float:
        return sum(a.lost_s(self.checkpoint_s) for a in self.attempts)

    def productive_gpu_s(self) -> float:
        return sum(a.length_s - a.lost_s(self.checkpoint_s) for a in self.attempts) * self.gang_gpus


def _namespace(pod: Member) -> str:
    return getattr(pod, "namespace", "")  # PodRecord has one; instance names are unique per namespace only


def _gangs(pods: Iterable[Member]) -> dict[tuple[str, str], list[Member]]:
    """Gang members by (namespace, instance); pods without gang_min or instance are no training members."""
    out: dict[tuple[str, str], list[Member]] = {}
    for p in pods:
        if p.gang_min is not None and p.instance:
            out.setdefault((_namespace(p), p.instance), []).append(p)
    return out


def _job(key: tuple[str, str], pods: list[Member], checkpoint_s: Mapping[str, float | None], end_ms: float) -> _Job:
    first = min(pods, key=lambda p: (p.created_ms, p.uid))
    n = max(p.gang_min for p in pods if p.gang_min is not None)
    return _Job(namespace=key[0], instance=key[1], workload=first.workload, members=n,
                gpus_per_member=max(p.gpus for p in pods), checkpoint_s=checkpoint_s.get(first.workload),
                pods=tuple(pods), attempts=tuple(attempts_of(member_runs(pods), n, end_ms)))


def _r(v: float | None, places: int = 3) -> float | None:
    return None if v is None else round(v, places)


def _job_row(job: _Job, end_ms: float) -> dict[str, Any]:
    held = _held_gpu_s(job.pods, -math.inf, end_ms)
    productive = job.productive_gpu_s()
    return {"instance": job.instance, "namespace": job.namespace, "workload": job.workload, "members": job.members,
            "gpus_per_member": job.gpus_per_member, "attempts": len(job.attempts),
            "ended": [a.ended for a in job.attempts], "restarts": max(0, len(job.attempts) - 1),
            "whole_s": _r(sum(a.length_s for a in job.attempts)), "lost_work_s": _r(job.lost_s()),
            "productive_gpu_s": _r(productive), "held_gpu_s": _r(held),
            "ettr": _r(productive / held, 4) if held > 0 else None}


def _running_at(pod: Member, t_ms: float) -> bool:
    end = run_end(pod)
    return pod.running_ms is not None and pod.running_ms <= t_ms and (end is None or t_ms <= end)


def _hits(fault: Mapping[str, Any], job: _Job) -> bool:
    nodes, uids = set(fault.get("nodes") or ()), set(fault.get("pods") or ())
    t = fault["t_ms"]
    return any(_running_at(p, t) and ((p.node and p.node in nodes) or p.uid in uids) for p in job.pods)


def _attempt_at(job: _Job, t_ms: float) -> int | None:
    """The attempt the job was in at ``t_ms``, its end included (the break a fault causes may share its ms)."""
    return next((i for i, a in enumerate(job.attempts) if a.start_ms <= t_ms <= a.end_ms), None)


def _reaction_ms(job: _Job, t_ms: float) -> float | None:
    created = [p.created_ms for p in job.pods if p.created_ms > t_ms]
    return min(created) - t_ms if created else None


def _recovery_ms(job: _Job, down_ms: float) -> float | None:
    return next((a.start_ms for a in job.attempts if a.start_ms >= down_ms), None)


def _fault_row(index: int, fault: Mapping[str, Any], job: _Job, end_ms: float,
               charged: set[tuple[str, str, int]]) -> dict[str, Any]:
    """One (fault, instance) row; ``charged`` holds the breaks whose cost an earlier row carries."""
    t = float(fault["t_ms"])
    reaction = _reaction_ms(job, t)
    row: dict[str, Any] = {"fault": index, "type": fault.get("type", ""), "instance": job.instance,
                           "namespace": job.namespace, "workload": job.workload, "t_ms": fault["t_ms"],
                           "broke_after_s": None, "reaction_s": _r(None if reaction is None else reaction / 1000),
                           "recovered_s": None, "recovered": None, "lost_work_s": 0.0, "incomplete_gpu_s": 0.0,
                           "wasted_gpu_s": 0.0}
    i = _attempt_at(job, t)
    if i is not None and job.attempts[i].ended != "broken":
        return row  # rode through: completed, or still whole when the window ended
    down = t if i is None else job.attempts[i].end_ms
    recovery = _recovery_ms(job, down)
    row["recovered"] = recovery is not None
    row["recovered_s"] = _r(None if recovery is None else (recovery - t) / 1000)
    if i is None:
        return row  # already down (or not started): an earlier break carries the cost
    row["broke_after_s"] = _r((down - t) / 1000)
    if (job.namespace, job.instance, i) in charged:
        return row
    charged.add((job.namespace, job.instance, i))
    lost = job.attempts[i].lost_s(job.checkpoint_s)
    incomplete = _held_gpu_s(job.pods, down, end_ms if recovery is None else recovery)
    row.update(lost_work_s=_r(lost), incomplete_gpu_s=_r(incomplete),
               wasted_gpu_s=_r(incomplete + lost * job.gang_gpus))
    return row


def _fault_rows(faults: Sequence[Mapping[str, Any]], jobs: Sequence[_Job], end_ms: float) -> list[dict[str, Any]]:
    """Rows in fault order then instance; breaks are charged in time order, to the first fault inside them."""
    charged: set[tuple[str, str, int]] = set()
    rows = [_fault_row(i, faults[i], job, end_ms, charged)
            for i in sorted(range(len(faults)), key=lambda i: (faults[i]["t_ms"], i))
            for job in jobs if _hits(faults[i], job)]
    return sorted(rows, key=lambda r: (r["fault"], r["instance"], r["namespace"]))


def _stats(values: Iterable[float | None]) -> dict[str, Any]:
    xs = sorted(v for v in values if v is not None)
    return {"p50": percentile(xs, 50), "p99": percentile(xs, 99), "max": xs[-1] if xs else None, "count": len(xs)}


def _hours(gpu_s: float) -> float:
    return round(gpu_s / 3600.0, 4)


def _summary(faults: Sequence[Mapping[str, Any]], rows: list[dict[str, Any]], jobs: Sequence[_Job],
             end_ms: float) -> dict[str, Any]:
    """Run totals; lost work counts every break of every job (whatever broke it), as productive and held do."""
    held = sum(_held_gpu_s(j.pods, -math.inf, end_ms) for j in jobs)
    productive = sum(j.productive_gpu_s() for j in jobs)
    return {"faults_fired": len(faults), "faults_hitting_jobs": len(rows),
            "reaction_s": _stats(r["reaction_s"] for r in rows), "recovered_s": _stats(r["recovered_s"] for r in rows),
            "unrecovered": sum(1 for r in rows if r["recovered"] is False),
            "restarts": sum(max(0, len(j.attempts) - 1) for j in jobs),
            "wasted_gpu_hours": _hours(sum(r["wasted_gpu_s"] for r in rows)),
            "lost_work_gpu_hours": _hours(sum(j.lost_s() * j.gang_gpus for j in jobs)),
            "ettr": round(productive / held, 4) if held > 0 else None,
            "productive_gpu_hours": _hours(productive), "held_gpu_hours": _hours(held)}


def training_recovery(pods: Iterable[Member], faults: Sequence[Mapping[str, Any]],
                      checkpoint_s: Mapping[str, float | None], end_ms: float) -> dict[str, Any]:
    """What the run's faults cost its training jobs: per (fault, instance) rows, per-job ETTR, totals.

    ``faults``: dicts with ``t_ms``, ``type`` and optional ``nodes`` (names) and ``pods`` (uids);
    ``checkpoint_s``: seconds between checkpoints per workload name (None or missing: never).
    """
    jobs = [_job(key, members, checkpoint_s, end_ms) for key, members in _gangs(pods).items()]
    jobs.sort(key=lambda j: (j.instance, j.namespace))
    rows = _fault_rows(faults, jobs, end_ms)
    return {"faults": rows, "jobs": [_job_row(j, end_ms) for j in jobs],
            "summary": _summary(faults, rows, jobs, end_ms)}
