"""One scenario under several variants, side by side: ``comparison.{json,md,html}``.

Each variant ran on a fresh cluster with the same arrival seed (:mod:`hollowscale.run.variants`); this
module reads their ``summary.json`` and ``series.json`` and puts the figures that batch scheduling
changes next to each other: jobs completed per hour, partially started jobs and the GPU-seconds they
held while waiting (what gang scheduling removes), deadlocks, queue wait per priority, each team's GPU
share against its deserved share, preemptions, scheduling throughput at the same arrival rate, and the
client limits each engine ran with.  ``hollowscale compare`` reads a comparison folder too (variant by
variant).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from hollowscale.report.jsonfile import write_json
from hollowscale.report.numbers import number
from hollowscale.report.verdicts import PASSED, lookup, state_of, verdict_line

#: (label, path in measurements, better direction); per-priority queue waits are added per run
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("jobs completed per hour", "batch.jobs_completed_per_hour", "higher"),
    ("jobs completed", "batch.instances.completed", "higher"),
    ("jobs unfinished at the end", "batch.instances.unfinished", "lower"),
    ("partially started jobs (max at once)", "batch.partial_jobs.max", "lower"),
    ("partially started jobs (avg)", "batch.partial_jobs.avg", "lower"),
    ("GPU-seconds held by partial jobs", "batch.wasted_gpu_seconds", "lower"),
    ("deadlocked jobs at the end", "batch.deadlocked_jobs.count", "lower"),
    ("created -> all members running p50 (s)", "batch.job_steps_s.created_to_all_running.p50", "lower"),
    ("created -> all members running p99 (s)", "batch.job_steps_s.created_to_all_running.p99", "lower"),
    ("created -> finished p50 (s)", "batch.job_steps_s.created_to_finished.p50", "lower"),
    ("team GPU share: max deviation from deserved (%)", "batch.tenant_share.max_deviation_pct", "lower"),
    ("pods preempted by the scheduler (DisruptionTarget)", "batch.preemption.pods_disrupted.total", "lower"),
    ("jobs evicted by Kueue (suspended again)", "batch.preemption.jobs_evicted.evictions", "lower"),
    ("jobs preempted, all readmitted and finished", "batch.preemption.instances_preempted.total", "lower"),
    ("scheduling throughput avg (pods/s)", "scheduling_throughput_pods_per_s.avg", "higher"),
    ("pod startup p99 (ms)", "pod_startup_latency_ms.p99", "lower"),
    ("GPU allocation avg (%)", "gpu_allocation_pct.avg", "higher"),
    # DRA (hollowscale/dra): devices, memory, sharing, the claims' steps, the scheduler's plugin
    ("DRA GPUs allocated avg", "dra.gpus_allocated.avg", "higher"),
    ("DRA GPU memory allocated avg (GiB)", "dra.gpu_memory_allocated_gib.avg", "higher"),
    ("DRA pods per busy GPU, max", "dra.pods_per_gpu.max", "higher"),
    ("DRA fragmented GPUs avg", "dra.fragmented_gpus.avg", "lower"),
    ("DRA claim created -> pod running p99 (ms)", "dra.latency_ms.created_to_running.p99", "lower"),
    ("DynamicResources share of all plugins' time, Filter apart (%)", "dra_scheduler.share_of_all_plugins_pct",
     "lower"),
    # topology (hollowscale/topology): placement quality; per level rows are added per run
    ("topology: GPU-hours lost to spread", "topology.gpu_hours_lost_to_spread", "lower"),
    ("topology: gangs with every Kueue slice whole (%)", "topology.placement.slices_whole_pct", "higher"),
    ("topology: free GPUs unusable by the next waiting gang, avg", "topology.unusable_gpus_avg", "lower"),
    ("topology: Kueue created -> Admitted p50 (s)", "topology.admission.admitted_s.p50", "lower"),
    ("topology: Kueue created -> Admitted p99 (s)", "topology.admission.admitted_s.p99", "lower"),
    ("topology: gang created -> all bound p50 (s)", "topology.admission.created_to_all_bound_s.p50", "lower"),
    ("topology: gang created -> all bound p99 (s)", "topology.admission.created_to_all_bound_s.p99", "lower"),
    ("topology: Kueue admission attempt p99 (ms)", "topology.kueue_admission_attempt_ms.p99", "lower"),
    ("scheduler attempt p99 (ms)", "scheduler.attempt_duration_ms.p99", "lower"),
    ("scheduler pod-group attempt p99 (ms)", "batch_prometheus.scheduler.podgroup_attempt_duration_ms.p99", "lower"),
    ("scheduler attempts unschedulable", "scheduler.attempts_by_result.unschedulable", "lower"),
    ("topology: spread condition vs Node labels, members mismatched", "topology.spread_mismatches", "lower"),
    # topology: why jobs per hour differ (hollowscale/topology/throughput.py), per hour of the batch window
    ("topology: jobs/h completed (gangs created in the window)", "topology.throughput.jobs_per_hour", "higher"),
    ("topology: jobs/h not completed for spread", "topology.throughput.not_completed_per_hour.spread", "lower"),
    ("topology: jobs/h not completed for waits", "topology.throughput.not_completed_per_hour.waits", "lower"),
    ("topology: jobs/h not completed for waits and spread", "topology.throughput.not_completed_per_hour."
     "waits_and_spread", "lower"),
    ("topology: jobs/h created too late to complete in any variant", "topology.throughput.not_completed_per_hour."
     "too_late", "lower"),
    ("topology: completed gangs' wait avg (s)", "topology.throughput.completed_wait_s_avg", "lower"),
    ("topology: completed gangs' stretch by spread avg (s)", "topology.throughput.completed_stretch_s_avg", "lower"),
)


def _load(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    try:
        series = json.loads((run_dir / "series.json").read_text())
    except (OSError, ValueError):
        series = {}
    return summary, series


def figures_of(summary: dict[str, Any]) -> dict[str, float | None]:
    """The compared figures of one variant (label -> value), queue waits per priority included."""
    m = summary.get("measurements") or {}
    out: dict[str, float | None] = {label: lookup(m, path) for label, path, _ in FIGURES}
    load_s = summary.get("load_duration_s") or 0.0
    done = lookup(m, "batch.instances.completed")
    out["jobs completed per second of load"] = round(done / load_s, 4) if done is not None and load_s else None
    for pc, v in sorted(((m.get("batch") or {}).get("queue_wait_s") or {}).get("by_priority_class", {}).items()):
        out[f"queue wait p99, priority {pc} (s)"] = v.get("p99") if isinstance(v, dict) else None
    for role, r in sorted(((m.get("dra") or {}).get("roles") or {}).items()):  # DRA runs: per workload/role
        out[f"{role}: most running at once"] = r.get("running_max")
        out[f"{role}: wait p50 (s)"] = (r.get("wait_s") or {}).get("p50")
        out[f"{role}: wait p99 (s)"] = (r.get("wait_s") or {}).get("p99")
    topo = m.get("topology") or {}
    for level in topo.get("levels") or ():  # topology runs: per level of the pools
        out[f"topology: gangs inside one {level} (%)"] = lookup(m, f"topology.placement.within_one_domain_pct.{level}")
        out[f"topology: whole free {level}s avg"] = lookup(m, f"topology.fragmentation.whole_free_domains.{level}.avg")
    return out


def comparison_doc(scenario_name: str, variants: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """``comparison.json``: per variant its features, verdict, figures and client limits."""
    rows = []
    for name, s in variants:
        c = s.get("cluster") or {}
        rows.append({"name": name, "variant": s.get("variant") or {"name": name}, "run_id": s.get("run_id"),
                     "complete": s.get("complete"), "passed": s.get("passed"),
                     "state": state_of(s), "verdict": verdict_line(s),
                     "incomplete_reason": s.get("incomplete_reason"), "figures": figures_of(s),
                     "client_qps": c.get("client_qps"), "features": c.get("features"),
                     "jobs_submitted": lookup(s.get("measurements") or {}, "jobs.submitted"),
                     "binding_limit": binding_limit(s)})
    labels: list[str] = []
    for _name, s in variants:
        labels += [k for k in figures_of(s) if k not in labels]
    return {"kind": "hollowscale-comparison", "schema_version": 1, "scenario": scenario_name, "figures": labels,
            "better": {label: better for label, _, better in FIGURES}, "variants": rows}


def binding_limit(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The variant's binding limit over its load (``measurements.attribution``,
    :mod:`hollowscale.measure.attribution`): its key (None: no limit reached its threshold) and words."""
    a = (summary.get("measurements") or {}).get("attribution")
    return {"key": a.get("binding"), "words": a.get("words")} if a else None


def _limit_cell(r: dict[str, Any]) -> str:
    b = r.get("binding_limit")
    return "n/a" if not b else (b["key"] or "none reached its threshold")


def _fmt(v: Any) -> str:
    """A figure of the comparison: two decimals, whole numbers as they are."""
    return number(v, 2, group_ints=False)


def _verdict(row: dict[str, Any]) -> str:
    """A variant's verdict line (a comparison written before verdict lines: from its flags)."""
    if row.get("verdict"):
        return str(row["verdict"])
    return ("PASSED" if row["passed"] else "FAILED") if row["complete"] else f"INCOMPLETE ({row['incomplete_reason']})"


def render_markdown(doc: dict[str, Any]) -> str:
    names = [r["name"] for r in doc["variants"]]
    lines = [f"# hollowscale comparison: scenario `{doc['scenario']}`", "",
             "Each variant ran on a fresh local cluster with the same arrival seed.", "",
             "| figure | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label in doc["figures"]:
        lines.append(f"| {label} | " + " | ".join(_fmt(r["figures"].get(label)) for r in doc["variants"]) + " |")
    lines.append("| binding limit | " + " | ".join(_limit_cell(r) for r in doc["variants"]) + " |")
    lines.append("| verdict | " + " | ".join(_verdict(r) for r in doc["variants"]) + " |")
    lines += ["", "Client limits (QPS/burst) per variant: " + "; ".join(
        f"{r['name']}: {json.dumps(r['client_qps'])}" for r in doc["variants"]), ""]
    lines += [f"- {r['name']}: {r['binding_limit']['words']}" for r in doc["variants"] if r.get("binding_limit")]
    lines += [""] if any(r.get("binding_limit") for r in doc["variants"]) else []
    return "\n".join(lines)


def _plots(variants: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    from hollowscale.report.html import _pairs, plt
    from hollowscale.report.html import svg as _svg

    out = []
    for key, title, ylabel, source in (
        ("partial_jobs", "Partially started jobs", "jobs", "batch series: instances with >= 1 member bound and a gang "
                                                          "below its size"),
        ("partial_gpus", "GPUs held by partially started jobs", "GPUs", "batch series: GPUs of bound members of "
                                                                         "partial instances"),
        ("allocated_gpus", "GPUs allocated", "GPUs", "batch series: GPU requests of bound, unfinished pods"),
    ):
        fig, ax = plt.subplots(figsize=(7, 2.6))
        any_line = False
        for name, series in variants:
            b = (series.get("timeline") or {}).get("batch") or {}
            xs, ys = _pairs(b.get(key) or [], b.get("t_s") or [])
            if xs:
                ax.plot(xs, ys, label=name)
                any_line = True
        if any_line:
            ax.legend(loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("s since load start")
        ax.set_ylabel(ylabel)
        out.append((title, source, _svg(fig)))
    return out


def render_html(doc: dict[str, Any], variants: list[tuple[str, dict[str, Any]]]) -> str:
    from hollowscale.report.html import CSS

    names = [r["name"] for r in doc["variants"]]
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td>" + "".join(f"<td>{_fmt(r['figures'].get(label))}</td>"
                                                       for r in doc["variants"]) + "</tr>"
        for label in doc["figures"])
    verdicts = "".join(f"<td class='{'pass' if r.get('state', PASSED) == PASSED and r['passed'] else 'fail'}'>"
                       f"{html.escape(_verdict(r))}</td>" for r in doc["variants"])
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>hollowscale comparison "
             f"{html.escape(doc['scenario'])}</title><style>{CSS}</style></head><body>",
             f"<h1>Comparison: scenario <code>{html.escape(doc['scenario'])}</code></h1>",
             "<p>Each variant ran on a fresh local cluster with the same arrival seed; its own report is in its "
             "folder.</p>",
             "<table><tr><th>figure</th>" + "".join(
                 f"<th><a href='{html.escape(n)}/report.html'>{html.escape(n)}</a></th>" for n in names) + "</tr>",
             rows, "<tr><td>binding limit</td>" + "".join(
                 f"<td title='{html.escape((r.get('binding_limit') or {}).get('words') or '')}'>"
                 f"{html.escape(_limit_cell(r))}</td>" for r in doc["variants"]) + "</tr>",
             f"<tr><td>verdict</td>{verdicts}</tr></table>",
             "<h2>Variants</h2><table><tr><th>variant</th><th>features</th><th>client QPS/burst</th></tr>" + "".join(
                 f"<tr><td>{html.escape(r['name'])}</td><td><code>{html.escape(json.dumps(r['variant']))}</code></td>"
                 f"<td><code>{html.escape(json.dumps(r['client_qps']))}</code></td></tr>" for r in doc["variants"])
             + "</table>", "<h2>Over time</h2>"]
    for i, (title, source, svg) in enumerate(_plots(variants)):
        parts.append(f"<figure class='plot' id='cmp-plot-{i}'><figcaption><b>{html.escape(title)}</b> - source: "
                     f"{html.escape(source)}</figcaption>{svg}</figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_comparison(parent: Path, scenario_name: str, runs: list[tuple[str, Path]]) -> dict[str, Path]:
    """Write ``comparison.{json,md,html}`` into ``parent`` from the variants' run folders."""
    loaded = [(name, *_load(run_dir)) for name, run_dir in runs]
    doc = comparison_doc(scenario_name, [(n, s) for n, s, _ in loaded])
    paths = {"json": parent / "comparison.json", "md": parent / "comparison.md", "html": parent / "comparison.html"}
    write_json(paths["json"], doc)
    paths["md"].write_text(render_markdown(doc))
    paths["html"].write_text(render_html(doc, [(n, series) for n, _, series in loaded]))
    return paths
