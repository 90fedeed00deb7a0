"""A point's figures over its measured window, the warm-up left out.

Each point submits at a constant rate for ``warmup_s + measure_s``.  The measured window is
``[load start + warmup_s, load end]``; only pods and workload objects *created* in it count for the
latency figures (their startup is followed to the end of the point's settle time; a pod created in the
window that never ran counts as infinitely slow, so a point that leaves work behind cannot pass a
latency SLO).  Whole-window statistics (a percentile over every pod of the window, a slope over every
second of it), never one time bucket, keep a point's verdict steady on a noisy machine.

No growing backlog: the number of unfinished workload objects (created, not finished) is sampled every
second of the window; the least-squares slope of that count, over the arrival rate, must stay at or
below ``backlog.max_growth_fraction``, and at least ``backlog.min_completed_fraction`` of the window's
objects must have finished by the end of the point.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.measure.derive import percentile
from hollowscale.scenario.sweep import BacklogSpec


@dataclass(frozen=True)
class Row:
    created_ms: float
    started_ms: float | None  # pods: running_ms; objects: finished_ms
    outcome: str = ""


def parse_iso(s: str) -> float:
    """ISO 8601 UTC (``...Z``) -> epoch seconds."""
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _f(v: str | None) -> float | None:
    return float(v) if v not in (None, "") else None


def read_pods(run_dir: Path) -> list[Row]:
    with (run_dir / "timeline_pods.csv").open() as fh:
        return [Row(float(r["created_ms"]), _f(r["running_ms"]), r.get("phase") or "") for r in csv.DictReader(fh)]


def read_jobs(run_dir: Path) -> list[Row]:
    with (run_dir / "timeline_jobs.csv").open() as fh:
        return [Row(float(r["created_ms"]), _f(r["finished_ms"]), r.get("outcome") or "") for r in csv.DictReader(fh)]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys on xs (0 for fewer than two distinct xs)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def latency_pcts(rows: Sequence[Row]) -> dict[str, float | None]:
    """p50/p90/p99 (ms) of started - created; a row that never started counts as +inf (reported as None)."""
    vals = [(r.started_ms - r.created_ms) if r.started_ms is not None else math.inf for r in rows]
    out: dict[str, float | None] = {}
    for q in (50, 90, 99):
        v = percentile(vals, q)
        out[f"p{q}"] = None if v is None or math.isinf(v) else round(v, 3)
    out["count"] = len(vals)
    out["never_started"] = sum(1 for v in vals if math.isinf(v))
    return out


def unfinished_series(objects: Sequence[Row], start_ms: float, end_ms: float) -> tuple[list[float], list[int]]:
    """(seconds from the window start, unfinished objects) at every second of the window."""
    ts: list[float] = []
    counts: list[int] = []
    t = start_ms
    while t <= end_ms + 1e-6:
        counts.append(sum(1 for o in objects if o.created_ms <= t and (o.started_ms is None or o.started_ms > t)))
        ts.append((t - start_ms) / 1000.0)
        t += 1000.0
    return ts, counts


def window_figures(pods: Sequence[Row], objects: Sequence[Row], start_ms: float, end_ms: float, rate: float,
                   backlog: BacklogSpec) -> dict[str, Any]:
    """The point's timeline figures over ``[start_ms, end_ms]`` and its backlog verdict."""
    wp = [p for p in pods if start_ms <= p.created_ms <= end_ms]
    wo = [o for o in objects if start_ms <= o.created_ms <= end_ms]
    window_s = max((end_ms - start_ms) / 1000.0, 1e-9)
    ts, counts = unfinished_series(objects, start_ms, end_ms)
    growth = slope(ts, counts)
    done = sum(1 for o in wo if o.started_ms is not None)
    completed_fraction = done / len(wo) if wo else 0.0
    growth_fraction = growth / rate if rate > 0 else 0.0
    growing = growth_fraction > backlog.max_growth_fraction or completed_fraction < backlog.min_completed_fraction
    why = []
    if growth_fraction > backlog.max_growth_fraction:
        why.append(f"unfinished objects grew {growth:.3g}/s = {growth_fraction:.2f} x the arrival rate "
                   f"(> {backlog.max_growth_fraction:g})")
    if completed_fraction < backlog.min_completed_fraction:
        why.append(f"{completed_fraction:.0%} of the window's objects finished (< {backlog.min_completed_fraction:.0%})")
    return {
        "window_s": round(window_s, 3),
        "pod_startup_latency_ms": latency_pcts(wp),
        "objects_created": len(wo),
        "objects_per_s": round(len(wo) / window_s, 4),
        "pods_created": len(wp),
        "pods_per_s": round(len(wp) / window_s, 4),
        "objects_failed": sum(1 for o in wo if o.outcome == "Failed"),
        "backlog": {"unfinished_slope_per_s": round(growth, 4), "growth_fraction": round(growth_fraction, 4),
                    "completed_fraction": round(completed_fraction, 4), "unfinished_max": max(counts, default=0),
                    "growing": growing, "why": "; ".join(why)},
    }
