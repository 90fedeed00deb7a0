"""One plan point: a short run of the point's scenario via the orchestrator, judged on its window.

The orchestrator (:class:`hollowscale.run.orchestrator.Runner`) does everything a run does on the
plan's running cluster (it reuses it and leaves it up): agents register the point's nodes, the Ready
barrier, the constant-rate load, settle, teardown (agents delete their nodes, the point's namespace
is deleted).  Beside it :class:`~hollowscale.plan.scrape.WindowWatch` reads the control plane at the
window's ends.  The verdict per SLO comes from :mod:`.window` (warm-up excluded) and the scrape; the
point's ranked limits (:mod:`hollowscale.measure.attribution`) from the same two reads, which are kept in
the run folder (``attribution/{start,end}/<component>.prom`` and ``window.json``) so that the ranking
can be computed again from what was read.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.measure.attribution import Context, attribute
from hollowscale.plan.scrape import ComponentScraper, Sample, WindowWatch, window_diff
from hollowscale.plan.window import parse_iso, read_jobs, read_pods, window_figures
from hollowscale.scenario import Scenario, SloSpec
from hollowscale.scenario.sweep import SweepSpec

#: what an SLO metric is read from in a point (anything else: the run's own summary, whole run)
WINDOW_METRICS = ("pod_startup_latency_ms.p50", "pod_startup_latency_ms.p90", "pod_startup_latency_ms.p99")


class PointInterrupted(Exception):
    """Ctrl-C or SIGTERM during a point: the run tore down, the point is not recorded."""


@dataclass
class PointSettings:
    sweep: SweepSpec
    slos: tuple[SloSpec, ...]
    out_root: Path


def slo_value(slo: SloSpec, figures: dict[str, Any], cp: dict[str, Any] | None, summary: dict[str, Any]) \
        -> tuple[float | None, str]:
    """The value an SLO is judged on in a point, and where it came from."""
    parts = slo.metric.split(".")
    if slo.metric in WINDOW_METRICS:
        return figures["pod_startup_latency_ms"].get(parts[1]), "window (objects created after the warm-up)"
    if parts[0] == "api_latency_slo_ms" and cp is not None:
        return cp["api_latency_slo_ms"].get(parts[1], {}).get(parts[2]), "window (apiserver metrics diff)"
    node: Any = summary.get("measurements") or {}
    for p in parts:
        node = node.get(p) if isinstance(node, dict) else None
    return (float(node) if isinstance(node, int | float) else None), "whole run (summary.json)"


def judge(slos: tuple[SloSpec, ...], figures: dict[str, Any], cp: dict[str, Any] | None, summary: dict[str, Any],
          complete: bool) -> dict[str, dict[str, Any]]:
    """Per SLO: value, source, met, and passed = met and no growing backlog and the run complete."""
    out = {}
    for slo in slos:
        value, source = slo_value(slo, figures, cp, summary)
        met = slo.check(value)
        passed = met and complete and not figures["backlog"]["growing"]
        out[slo.name] = {"metric": slo.metric, "op": slo.op, "threshold": slo.threshold, "value": value,
                         "source": source, "met": met, "passed": passed}
    return out


def keep_reads(run_dir: Path, first: Sample, last: Sample, ctx: Context) -> None:
    """The two reads as attribution snapshot files (``attribution/start|end/<component>.prom``) and
    ``attribution/window.json`` (their times and the context)."""
    root = run_dir / "attribution"
    for edge, sample in (("start", first), ("end", last)):
        (root / edge).mkdir(parents=True, exist_ok=True)
        for comp, text in sample.texts.items():
            (root / edge / f"{comp}.prom").write_text(text)
    meta: dict[str, Any] = {"t_start": first.t, "t_end": last.t, "cores": ctx.cores, "client_qps": ctx.client_qps}
    if ctx.cpu_limits:
        meta["cpu_limits"] = ctx.cpu_limits
    (root / "window.json").write_text(json.dumps(meta, indent=2) + "\n")


def point_attribution(run_dir: Path, first: Sample | None, last: Sample | None, info: Any,
                      cpu_limits: dict[str, float] | None = None) -> dict[str, Any] | None:
    """The point's ranked limits from the window's two reads (kept in the run folder), or None.
    ``cpu_limits``: component -> cores, for a component held to a CPU limit of its own."""
    if first is None or last is None:
        return None
    ctx = Context(cores=os.cpu_count() or 1, client_qps=dict(getattr(info, "client_qps", None) or {}),
                  cpu_limits=dict(cpu_limits or {}))
    keep_reads(run_dir, first, last, ctx)
    return attribute(first.snapshot(), last.snapshot(), ctx).to_dict()


def run_point(sc: Scenario, settings: PointSettings, info: Any, rate: float, run_id: str) -> dict[str, Any]:
    """Run one point and return its record (figures, control plane, verdicts, wall time, run folder)."""
    from hollowscale.run.orchestrator import EXIT_INTERRUPTED, Runner

    t0 = time.time()
    runner = Runner(sc, settings.out_root, quiet=True, run_id=run_id, point_latest=False)
    watch = WindowWatch(ComponentScraper(info), runner.times, settings.sweep.warmup_s)
    watch.start()
    try:
        code = runner.run()
    finally:
        watch.stop()
    if code == EXIT_INTERRUPTED:
        raise PointInterrupted(run_id)
    summary = runner.summary
    run_dir = runner.run_dir
    complete = bool(summary.get("complete"))
    figures: dict[str, Any] = {}
    load_start = summary.get("load_started_at")
    if load_start and (run_dir / "timeline_pods.csv").exists():
        ls = parse_iso(load_start)
        start_ms = (ls + settings.sweep.warmup_s) * 1000.0
        end_ms = (ls + float(summary.get("load_duration_s") or 0.0)) * 1000.0
        figures = window_figures(read_pods(run_dir), read_jobs(run_dir), start_ms, end_ms, rate, settings.sweep.backlog)
    else:
        complete = False
    cp = window_diff(watch.first, watch.last) if watch.first and watch.last else None
    if not figures:
        figures = {"pod_startup_latency_ms": {}, "backlog": {"growing": True, "why": "no load window"}}
    verdicts = judge(settings.slos, figures, cp, summary, complete)
    record = {
        "rate": rate, "run_id": run_id, "run_dir": str(run_dir), "exit_code": code, "complete": complete,
        "incomplete_reason": summary.get("incomplete_reason"), "errors": (summary.get("errors") or [])[:10],
        "wall_s": round(time.time() - t0, 1), "timings": summary.get("timings") or {},
        "nodes_ready": (summary.get("cluster") or {}).get("nodes_ready"),
        "figures": figures, "control_plane": cp, "slos": verdicts,
        "passed_all": all(v["passed"] for v in verdicts.values()),
        "attribution": point_attribution(run_dir, watch.first, watch.last, info),
    }
    (run_dir / "plan-point.json").write_text(json.dumps(record, indent=2, default=str))
    return record
