"""Assemble ``summary.json`` from what a run observed: timeline, Prometheus, Locust, resources.

The one place the summary's content is put together: the runner collects (:class:`RunFacts`); this
module only turns the collected facts into the report's figures, so the figures can be read (and tested)
apart from the processes that produced them.  The SLO verdicts are added afterwards by
:func:`hollowscale.report.verdicts.finalize`; the batch figures come from :mod:`hollowscale.batch.summary`,
a feature's own section from the feature (:mod:`hollowscale.run.features`).
"""

from __future__ import annotations

import csv
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hollowscale import __version__
from hollowscale.backends import ClusterFacts
from hollowscale.batch import summary as batch
from hollowscale.measure import attribution
from hollowscale.measure.derive import TIMELINE_SOURCES, timeline_measurements
from hollowscale.measure.integrity import integrity, read_audit
from hollowscale.measure.prom import EXACT, PromQueries
from hollowscale.measure.recovery import RecoverySettings, fault_recovery, recovery_figures
from hollowscale.measure.timeline import TimelineCollector
from hollowscale.run.resources import SOURCE as HARNESS_SOURCE
from hollowscale.scenario import Scenario
from hollowscale.timestamps import iso


def mark_exact(node: Any) -> Any:
    """Mark every percentile figure under ``node`` (a dict with ``p50``/``p90``/``p99``) ``source: exact``:
    the timeline's figures are nearest-rank percentiles over every sample, not interpolated."""
    if isinstance(node, dict):
        if any(k in node for k in ("p50", "p90", "p99")) and "source" not in node:
            node["source"] = EXACT
        for v in node.values():
            mark_exact(v)
    return node


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def locust_stats(run_dir: Path, t_load_start: float | None, t_load_end: float | None) -> dict[str, Any]:
    """Requests and failures per request type from Locust's CSV; create latencies by workload."""
    path = run_dir / "locust" / "locust_stats.csv"
    out: dict[str, Any] = {"csv": str(path.relative_to(run_dir)) if path.exists() else None, "by_type": {}}
    if not path.exists():
        return out
    with path.open() as fh:
        for row in csv.DictReader(fh):
            typ = row.get("Type") or ""
            if row.get("Name") == "Aggregated":
                continue
            agg = out["by_type"].setdefault(typ, {"requests": 0, "failures": 0})
            agg["requests"] += int(float(row.get("Request Count") or 0))
            agg["failures"] += int(float(row.get("Failure Count") or 0))
            if typ == "POST":
                agg.setdefault("p50_ms_by_name", {})[row["Name"]] = _num(row.get("50%"))
                agg.setdefault("p99_ms_by_name", {})[row["Name"]] = _num(row.get("99%"))
    post = out["by_type"].get("POST", {})
    if t_load_start and t_load_end:
        out["creates_per_s"] = round(post.get("requests", 0) / max(t_load_end - t_load_start, 1e-9), 3)
    return out


def crosscheck(watch_bound: int, b: dict[str, Any], tolerance_pct: float) -> dict[str, Any]:
    """Pods bound per the watch timeline vs the scheduler's binding counter in Prometheus."""
    prom = b["bound"]
    window = b["end"] - b["start"]
    out: dict[str, Any] = {"query": b["query"], "window_s": round(window, 3), "watch_bound": watch_bound,
                           "prometheus_bound": prom, "tolerance_pct": tolerance_pct,
                           "watch_rate_pods_per_s": round(watch_bound / window, 4) if window > 0 else None,
                           "prometheus_rate_pods_per_s": round(prom / window, 4) if prom is not None and window > 0
                           else None}
    if prom is None:
        out.update(diff_pct=None, agree=None, verdict="no Prometheus data for the binding counter")
    elif prom == 0 and watch_bound == 0:
        out.update(diff_pct=0.0, agree=True, verdict="no bindings in the window (nothing to compare)")
    else:
        diff = abs(watch_bound - prom) / max(prom, 1e-9) * 100.0
        ok = diff <= tolerance_pct
        out.update(diff_pct=round(diff, 3), agree=ok,
                   verdict=(f"{'agree' if ok else 'DISAGREE'}: watch {watch_bound} vs Prometheus {prom:g} pods bound "
                            f"({diff:.2f}% {'<=' if ok else '>'} {tolerance_pct:g}%)"))
    return out


@dataclass
class RunFacts:
    """What a run observed, handed to :func:`assemble` (times are epoch seconds)."""

    scenario: Scenario
    run_id: str
    run_dir: Path
    t_start: float
    t_end: float
    t_load_start: float | None
    t_load_end: float | None
    t_window_start: float | None
    t_prom_start: float | None
    incomplete_reason: str | None
    errors: list[str]
    cluster: ClusterFacts
    server: str | None
    nodes_ready: int
    agent_addresses: list[str]
    locust_processes: int
    faults: list[dict[str, Any]]
    timings: dict[str, float]
    namespace: dict[str, Any] | None = None
    collector: TimelineCollector | None = None
    prometheus_url: str | None = None
    prometheus_targets: dict[str, str] = field(default_factory=dict)
    harness: dict[str, Any] = field(default_factory=dict)
    agent_restarts: list[dict[str, Any]] = field(default_factory=list)
    leaders: dict[str, Any] | None = None
    component_events: list[dict[str, Any]] = field(default_factory=list)
    audit_log: Path | None = None
    #: where the agents ran, as the placement says it (top-level keys: ``incluster`` for pods)
    placement: dict[str, Any] = field(default_factory=dict)
    #: Locust workers beside a master (in-cluster), None for one headless Locust
    locust_workers: int | None = None


RECOVERY_SOURCE = ("timeline: per fault, the binding rate over the 30 s before it (the level); the first 5 s "
                   "window at or after the fault below 90% of the level (the dip, looked for up to 60 s after "
                   "the fault ends); recovery_s = start of the first 5 s window after the dip back at >= 90% "
                   "(windows slide by 0.5 s; 0 when the rate never dipped)")


def control_plane_section(f: RunFacts, t0: float) -> dict[str, Any]:
    """``summary.control_plane``: component starts/exits/restarts/stalls, leader changes, agent restarts."""
    window = [e for e in f.component_events if f.t_start - 1 <= e.get("t", 0) <= f.t_end + 1]
    restarts: dict[str, int] = {}
    for e in window:
        if e.get("event") == "started" and e.get("why") != "cluster up":
            restarts[e["component"]] = restarts.get(e["component"], 0) + 1
    events = [dict({k: v for k, v in e.items() if k != "log_tail"}, at_s=round(e["t"] - t0, 3)) for e in window]
    last_reason = {e["component"]: e.get("reason") or e.get("exit") for e in window if e.get("event") == "exited"}
    return {"supervised": f.cluster.supervised, "restarts": restarts, "last_exit": last_reason,
            "events": events, "agent_restarts": [dict(e, at_s=round(e["t"] - t0, 3)) for e in f.agent_restarts],
            **(f.leaders or {})}


def fault_recoveries(f: RunFacts, bound_ms: list[float], t0: float) -> list[dict[str, Any]]:
    """Each fault of the run with its recovery figures (see :mod:`hollowscale.measure.recovery`)."""
    out = []
    for entry in f.faults:
        t = entry.get("t")
        if t is None:
            continue
        end = t + (entry.get("duration_s") or 0.0)
        rec = fault_recovery(bound_ms, t * 1000.0, end * 1000.0, t0 * 1000.0, f.t_end * 1000.0, RecoverySettings(),
                             load_end_ms=f.t_load_end * 1000.0 if f.t_load_end else None)
        entry["recovery"] = rec
        out.append(dict(rec, type=entry.get("type"), component=entry.get("component"), at_s=round(t - t0, 3)))
    return out


def assemble(f: RunFacts) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """(summary, timeline series, Prometheus series) for the report; Prometheus failures become errors."""
    sc = f.scenario
    t0 = f.t_load_start or f.t_window_start or f.t_start
    summary: dict[str, Any] = {
        "schema_version": 1,
        "run_id": f.run_id,
        "scenario": sc.name,
        "scenario_file": sc.source,
        "description": sc.description,
        "started_at": iso(f.t_start),
        "load_started_at": iso(f.t_load_start) if f.t_load_start else None,
        "duration_s": round(f.t_end - f.t_start, 3),
        "load_duration_s": round((f.t_load_end or f.t_end) - f.t_load_start, 3) if f.t_load_start else 0.0,
        "complete": f.incomplete_reason is None,
        "incomplete_reason": f.incomplete_reason,
        "errors": f.errors,
        "versions": {"hollowscale": __version__, "python": sys.version.split()[0]},
    }
    ci = f.cluster
    summary["cluster"] = {
        "backend": sc.cluster.backend,
        "profile": ci.profile,
        "kubernetes_version": ci.kubernetes_version,
        "etcd_version": ci.etcd_version,
        "server": f.server,
        "nodes_ready": f.nodes_ready,
        "nodes_expected": sc.nodes_total,
        "gpus_total": sc.gpus_total,
        "client_qps": {k: {"qps": v[0], "burst": v[1]} for k, v in ci.client_qps.items()},
        "flags": ci.flags,
        # gang gates, runtime config, Kueue version and configuration (local cluster)
        "features": ci.features,
        "reused": ci.reused,
        "agents": {"shards": sc.agents.shards, "addresses": f.agent_addresses, "placement": sc.agents.placement,
                   # gang members wait for each other before their run time counts (hollow agent default)
                   "gang_barrier": "--no-gang-barrier" not in sc.agents.args},
        "namespace": f.namespace,
        # real kubelets beside the hollow nodes (name, kubelet port, pod range, containerd socket)
        "real_nodes": ci.real_nodes,
    }
    arrival = sc.arrival
    summary["load"] = {"curve": arrival.curve, "duration_s": arrival.duration_s,
                       "expected_instances": round(arrival.expected_instances(), 1),
                       "peak_rate": arrival.peak_rate(), "per_user_rate": arrival.per_user_rate,
                       "locust_processes": f.locust_processes,
                       "locust_workers": f.locust_workers,
                       "locust": locust_stats(f.run_dir, f.t_load_start, f.t_load_end)}
    summary["faults"] = f.faults
    summary.update(f.placement)
    summary["control_plane"] = control_plane_section(f, t0)
    if sc.variant:
        summary["variant"] = {"name": sc.variant, "gang_scheduling": sc.cluster.gang_scheduling, "kueue": sc.cluster.kueue,
                              "preemption": sc.preemption}
    summary["timings"] = f.timings
    sources: dict[str, Any] = dict(TIMELINE_SOURCES)
    series: dict[str, Any] = {}
    measurements: dict[str, Any] = {}
    if f.collector is not None:
        pods, jobs = f.collector.timeline.snapshot()
        f.collector.timeline.write_csv(f.run_dir)
        tm = timeline_measurements(pods, jobs, sc.gpus_total, t0 * 1000, f.t_end * 1000,
                                   sc.measurements.sample_interval_s)
        measurements.update(mark_exact(tm["measurements"]))
        series = tm["series"]
        bound_ms = [p.scheduled_ms for p in pods if p.scheduled_ms is not None]
        if f.faults:
            per_fault = fault_recoveries(f, bound_ms, t0)
            measurements["fault_recovery_s"] = dict(recovery_figures(per_fault), by_fault=per_fault)
            sources["fault_recovery_s"] = RECOVERY_SOURCE
        if f.audit_log is not None and f.namespace is not None:
            names = [n["name"] for n in f.namespace.get("all") or []] or [f.namespace["name"]]
            audit = read_audit(f.audit_log, names, f.t_start, f.t_end + 5)
            creates = summary["load"]["locust"]["by_type"].get("POST", {})
            ok = creates.get("requests", 0) - creates.get("failures", 0) if creates else None
            measurements["integrity"] = integrity(audit, pods, jobs, ok)
            sources["integrity"] = ("the apiserver's audit log (creates of Jobs, pods and pods/binding answered 201 in "
                                    "the run's namespace, every apiserver process of the run) against the watch "
                                    "timeline's records")
        if batch.applies(sc):
            bm = batch.timeline_figures(sc, pods, jobs, t0 * 1000.0, f.t_end * 1000.0)
            measurements["batch"] = mark_exact(bm["measurements"])
            series["batch"] = bm["series"]
            sources["batch"] = bm["sources"]
        st = f.collector.timeline.stats
        summary["collector"] = {"events": st.events, "restarts": st.restarts[:20], "restart_count": len(st.restarts),
                                "max_apply_lag_ms": round(st.max_apply_lag_ms, 3),
                                "mean_apply_lag_ms": round(st.apply_lag_sum_ms / st.events, 3) if st.events else None,
                                "busy_s": round(st.busy_s, 3)}
    prom_series = None
    if f.prometheus_url is not None:
        try:
            pq = PromQueries(f.prometheus_url)
            ws = f.t_window_start or t0
            interval = sc.measurements.scrape_interval_s
            # API latency covers the run from Prometheus' first scrape (node registration included)
            aws = (f.t_prom_start + 2 * interval) if f.t_prom_start else ws
            api = pq.api_latency(min(aws, ws), f.t_end)
            measurements["api_latency_ms"] = api["by_verb"]
            measurements["api_latency_slo_ms"] = api["slo_groups"]
            measurements["scheduler"] = pq.scheduler(ws, f.t_end)
            measurements["components"] = pq.components(ws, f.t_end)
            ctx = attribution.Context(cores=os.cpu_count() or 1, client_qps=dict(ci.client_qps))
            measurements["attribution"] = attribution.attribution_from_prometheus(
                pq.instant, f.t_load_start or ws, f.t_load_end or f.t_end, ctx)
            sources["attribution"] = attribution.PROMETHEUS_SOURCE
            b = pq.bindings(ws, f.t_end)
            watch_bound = 0
            if f.collector is not None:
                pods, _ = f.collector.timeline.snapshot()
                lo, hi = b["start"] * 1000, b["end"] * 1000
                watch_bound = sum(1 for p in pods if p.scheduled_ms is not None and lo <= p.scheduled_ms <= hi)
            measurements["crosscheck"] = crosscheck(watch_bound, b, sc.measurements.crosscheck_tolerance_pct)
            prom_series = pq.api_series(t0, f.t_end, max(interval, 1.0))
            if batch.applies(sc):
                figures, prom_series["batch"] = batch.prometheus_figures(
                    sc, pq, ws, f.t_end, t0, f.collector.timeline if f.collector is not None else None)
                measurements.update(figures)
            summary["prometheus"] = {"url": f.prometheus_url, "window": [ws, f.t_end],
                                     "targets": f.prometheus_targets, "api_by_verb_resource": api["by_verb_resource"]}
            sources["api_latency_ms"] = api["queries"]
            sources["promql"] = pq.log
        except Exception as exc:  # a partial report must still be written
            f.errors.append(f"Prometheus queries failed: {exc.__class__.__name__}: {exc}")
    measurements["harness_processes"] = f.harness
    sources["harness_processes"] = HARNESS_SOURCE
    summary["measurements"] = measurements
    summary["sources"] = sources
    return summary, series, prom_series
