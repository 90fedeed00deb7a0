"""Why a variant completed the jobs per hour it did: every gang created in the window, either completed in it
or put down to what kept it from completing (no I/O here).

Two variants on the same seeded load see nearly the same gangs: each Locust stream draws the same gangs with
the same run times, in the same order; which stream's gang comes first can differ.  What differs is how
long a gang waits (Kueue's admission, the scheduler's placement) and how far its pods spread (the hollow agent
stretches its run by the spread factor of the widest level it spans, :mod:`hollow.topology`).  So a gang that
did not complete inside the window is put down to the first of these that explains it, from its own times:

* ``spread``: it ran, and its run unstretched (``run_s``) would have ended inside the window;
* ``waits``: had it started when it was created, its run at its own spread factor (1.0 when never placed)
  would have ended inside the window;
* ``waits_and_spread``: only with neither the wait nor the stretch would it have ended inside the window;
* ``too_late``: created so late that even its unstretched run from creation ends after the window: the load's
  doing, the same for every variant;
* ``other``: it ran its stretched time inside the window and was still not reported finished (the agent's or
  the watch's lag);
* ``unknown``: its run time is not known (its pods are gone and it never finished).

Every gang created in the window is counted once, so the difference in completed jobs between two variants is
the difference of these counts with the sign turned; ``too_late`` nearly cancels out between variants of one
load.

When every gang completes (a load the cluster keeps up with), the counts are equal and jobs per hour differ by
the window alone, whose end is the last completion: ``last_completed`` says what that gang's time was made of
(created, wait, run, stretch by spread).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hollowscale.topology.levels import PoolLevels
from hollowscale.topology.timeline import Member, latest_placement

#: the reasons a gang did not complete in the window, in the order they are tried
REASONS = ("spread", "waits", "waits_and_spread", "too_late", "other", "unknown")

SOURCE = ("gangs created in the batch window [start, end] (measurements.batch.crosscheck_counts.window_ms; else "
          "the load's start to the summary): completed = every member Succeeded by the end; otherwise put down to "
          "the first of spread (all members Running + the run-duration annotation <= end), waits (created + run x "
          "the gang's spread factor <= end), waits_and_spread (created + run <= end), too_late, other (ran its "
          "stretched run and not reported finished), unknown (no run-duration annotation listed); the factor is "
          "the members' TopologySpread condition, else the pool's factor of the widest level its nodes span, else "
          "1.0 when never placed; waits = created (apiserver, whole seconds) -> last member Running (the harness)")


@dataclass(frozen=True)
class GangRun:
    """One gang's times (epoch ms) as the decomposition reads them."""

    key: str
    created_ms: float | None
    all_running_ms: float | None  # the last member Running; None while any member never ran
    completed_ms: float | None  # the last member Succeeded; None while any member did not
    run_s: float | None  # the job's run before any stretch (the run-duration annotation)
    factor: float | None  # the spread factor its placement gave (None: never placed)


def gang_runs(groups: Mapping[tuple[str, str], Sequence[Member]], levels: PoolLevels,
              level_of_gang: Mapping[str, str | None]) -> list[GangRun]:
    """A :class:`GangRun` per gang (``groups``: :func:`hollowscale.topology.figures.gangs_of`;
    ``level_of_gang``: ``namespace/gang`` -> the widest level its nodes span, from the placement rows)."""
    out: list[GangRun] = []
    for (ns, gang), every in groups.items():
        key = f"{ns}/{gang}"
        created = [m.created_at * 1000.0 for m in every if m.created_at is not None]  # its first creation
        group = latest_placement(every)  # a gang placed again runs and completes with its latest pods
        running = [m.running_ms for m in group]
        done = [m.succeeded_ms for m in group]
        runs = [m.run_s for m in group if m.run_s is not None]
        said = [m.spread_factor for m in group if m.spread_factor is not None]
        factor: float | None = said[0] if said else None
        level = level_of_gang.get(key)
        if factor is None and level is not None and group[0].node:
            factor = levels.factor(group[0].node, level)
        out.append(GangRun(key=key, created_ms=min(created) if created else None,
                           all_running_ms=max(t for t in running if t is not None) if None not in running else None,
                           completed_ms=max(t for t in done if t is not None) if None not in done else None,
                           run_s=max(runs) if runs else None, factor=factor))
    return out


def reason_not_completed(g: GangRun, end_ms: float) -> str:
    """Why ``g`` did not complete by ``end_ms`` (one of :data:`REASONS`; see the module doc)."""
    if g.run_s is None or g.created_ms is None:
        return "unknown"
    run_ms = 1000.0 * g.run_s
    factor = g.factor if g.factor is not None and g.factor > 0 else 1.0
    if g.all_running_ms is not None and g.all_running_ms + run_ms <= end_ms:
        return "spread" if g.all_running_ms + run_ms * factor > end_ms else "other"
    if g.created_ms + run_ms * factor <= end_ms:
        return "waits"
    if g.created_ms + run_ms <= end_ms:
        return "waits_and_spread"
    return "too_late"


def _avg(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def throughput_decomposition(runs: Sequence[GangRun], start_ms: float, end_ms: float) -> dict[str, Any]:
    """Completed gangs per hour and what kept the others from completing, in counts and per hour, with the
    completed gangs' mean wait (created -> all Running) and mean stretch (their run x (factor - 1))."""
    window_h = max(end_ms - start_ms, 1.0) / 3_600_000.0
    mine = [g for g in runs if g.created_ms is not None and start_ms <= g.created_ms <= end_ms]
    completed = [g for g in mine if g.completed_ms is not None and g.completed_ms <= end_ms]
    left = {r: 0 for r in REASONS}
    for g in mine:
        if not (g.completed_ms is not None and g.completed_ms <= end_ms):
            left[reason_not_completed(g, end_ms)] += 1
    waits = [(g.all_running_ms - g.created_ms) / 1000.0 for g in completed
             if g.all_running_ms is not None and g.created_ms is not None]
    stretch = [g.run_s * ((g.factor or 1.0) - 1.0) for g in completed if g.run_s is not None]
    last = max(completed, key=lambda g: g.completed_ms or 0.0, default=None)
    last_completed = None
    if last is not None and last.created_ms is not None and last.completed_ms is not None:
        last_completed = {
            "gang": last.key, "created_s": round((last.created_ms - start_ms) / 1000.0, 1),
            "completed_s": round((last.completed_ms - start_ms) / 1000.0, 1),
            "wait_s": round(max((last.all_running_ms or last.created_ms) - last.created_ms, 0.0) / 1000.0, 1),
            "run_s": last.run_s,
            "stretch_s": round(last.run_s * ((last.factor or 1.0) - 1.0), 1) if last.run_s is not None else None}
    return {"window_s": round((end_ms - start_ms) / 1000.0, 1), "gangs": len(mine), "completed": len(completed),
            "jobs_per_hour": round(len(completed) / window_h, 3),
            "not_completed": left, "not_completed_per_hour": {r: round(n / window_h, 3) for r, n in left.items()},
            "completed_wait_s_avg": _avg([max(w, 0.0) for w in waits]),
            "completed_stretch_s_avg": _avg(stretch),
            "completed_run_s_avg": _avg([g.run_s for g in completed if g.run_s is not None]),
            "last_completed": last_completed}
