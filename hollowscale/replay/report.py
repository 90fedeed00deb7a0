"""A trace replay's report: one run's ``summary.md``, and the variants side by side with their seed bands.

``comparison.json`` holds, per variant, the GPU allocation curve over its seeds (mean, min, max per
whole percent of arrived demand), the paper's fragmentation likewise, unallocated GPUs when arrived
demand reaches 100%, the first failure, pods that never ran by kind and reason, the scheduler's pace,
the agent's and the control plane's CPU, and every run's checks; ``comparison.md`` the same as tables;
``comparison.png`` the curves (the band is the seeds' spread).  How the replay was modelled is written
out (:func:`modelled`), as the issue asks the report to say.

A timed replay (``mode: timed``) reports instead pending time per QoS class, pods never bound with the
scheduler's reasons, unschedulable pods and GPU allocation over time and the replay's own lag; its
comparison puts the variants' pending p99 per QoS class, peak unschedulable pods and GPU allocation (mean,
max) side by side, and ``comparison.png`` draws unschedulable pods and GPU allocation over the replay.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hollowscale.report.numbers import number

if TYPE_CHECKING:
    from hollowscale.scenario.trace import TraceScenario, TraceVariantSpec

KIND_TITLES = {"cpu": "CPU-only", "share": "GPU share", "one": "one whole GPU", "multi": "multi-GPU"}


def modelled(gpu_mode: str, variant: TraceVariantSpec, ts: TraceScenario) -> list[str]:
    """How this replay modelled the trace, one sentence each (the report lists them)."""
    spec = ts.spec
    timed = spec.mode == "timed"
    out = [
        "Nodes: every trace node a hollow node of its exact CPU, memory and GPU count (one pool per shape), "
        "its GPU model as the node label hollowscale.io/gpu-model; 1,000 pods allowed per node (the trace sets "
        "no pod limit).",
        timed_protocol(ts) if timed else
        f"Protocol: the paper's simulator's own sequence for the seed (Go math/rand: pods sorted by name and "
        f"shuffled, then tuned to {number(spec.demand, 2, trim=True)}x the GPU capacity by appending random trace pods), "
        "one pod at a time, each waiting for the scheduler's verdict; an unschedulable pod is recorded with "
        "the scheduler's message and deleted, never retried; no pod leaves.",
        "Pods: CPU and memory requests as the trace gives them; QoS classes as priority classes that never "
        "preempt (a pending pod waits, it evicts nobody: no preemption, as in the paper's simulator)."
        if timed else
        "Pods: CPU and memory requests as the trace gives them; QoS classes as priority classes that never "
        "preempt (the simulator has no preemption); memory is requested but, as in the paper, not part of "
        "the fragmentation measure.",
    ]
    if gpu_mode == "dra-shared":
        out.append("GPUs: DRA devices (driver gpu.nvidia.com) offering 1,000 milli-GPU 'shares' each as "
                   "consumable capacity (NVIDIA's --consumable-shares=1000 mode); a GPU share is a claim of its "
                   "milli-GPU of one device, a whole GPU all 1,000, N GPUs N devices; the trace's milli-GPU "
                   "exactly (memory would need a per-model size the trace does not give); a model constraint "
                   "is a CEL selector on productName, which carries the trace's model name.")
    elif gpu_mode == "dra-whole":
        out.append("GPUs: DRA devices asked for whole: a GPU share is rounded up to one device (all 1,000 "
                   "shares), so arrived demand counts a share as a whole GPU.")
    else:
        out.append("GPUs: counted nvidia.com/gpu; a GPU share is rounded up to one whole GPU, so arrived demand "
                   "counts it as 1,000 milli-GPU and the curves are not the paper's for sharing pods; a model "
                   "constraint is node affinity on hollowscale.io/gpu-model.")
    s = variant.scheduler
    if s.profile == "packing":
        out.append("Scheduler: kube-scheduler with NodeResourcesFit scoring MostAllocated (cpu, memory, "
                   "nvidia.com/gpu weight 1 each); with DRA devices no in-tree score sees device use "
                   "(DynamicResources scores prioritized lists only), so it packs by CPU and memory, and the "
                   "allocator gives each claim the first device that fits.")
    elif s.config:
        out.append(f"Scheduler: kube-scheduler with the configuration {s.config} (checked by kube-scheduler "
                   "before the run).")
    elif s.command:
        out.append(f"Scheduler: the user's own, {' '.join(s.command)} (pods name {s.scheduler_name}).")
    else:
        out.append("Scheduler: kube-scheduler v1.36.3 with its default profile.")
    if timed:
        out.append("GPU allocation over time: the harness's account, each bound pod holding its GPUs (its "
                   "shares, or whole GPUs as asked) from the watch's bound event to its deletion's answer; "
                   "checked against the API server's objects at the end.")
        return out
    out.append("Fragmentation: the paper's measure (simulator frag.go): typical task shapes covering 95% of the "
               "trace's pods (CPU-only included), per node the idle GPU milli a typical task cannot use, on the "
               "harness's account of where the scheduler put each pod (checked against the API server's objects "
               "at the end).")
    return out


def timed_protocol(ts: TraceScenario) -> str:
    """The timed replay's protocol, one sentence: compress factor, window, no tuning."""
    spec = ts.spec
    w = spec.window
    window = "the whole trace" if w is None or (w.start_s is None and w.end_s is None) else (
        f"the pods created from {number(w.start_s or 0, 0)} s" + (f" to {number(w.end_s, 0)} s" if w.end_s is not None
                                                                 else "")
        + " of the trace (pods still running at the window's end deleted then)")
    limit = f", the first {number(spec.limit_pods)} created" if spec.limit_pods else ""
    return (f"Protocol: time-faithful: {window}{limit}, the trace's own pods as they are (no tuning, no shuffle: "
            f"deterministic, one run per variant), each created at its creation_time and deleted at its "
            f"deletion_time divided by {number(spec.compress or 0, 2, trim=True)} (trace seconds per replay "
            f"second) from the replay's start, bound or still pending; never retried or re-created; the "
            f"scheduler keeps retrying pending pods as in a real cluster; creates and deletes from a bounded "
            f"pool of client threads, never waiting for a verdict, each call's lag behind its time reported.")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{number(v, 2)}%"


def write_run_markdown(path: Path, s: dict[str, Any]) -> None:
    """One replay's ``summary.md``."""
    what = "timed" if s.get("mode") == "timed" else f"seed {s['seed']}"
    lines = [f"# {s['scenario']}: variant {s['variant']}, {what}", "",
             f"complete: {s.get('complete')}; checks passed: {s.get('passed')}; GPU mode: {s.get('gpu_mode')}; "
             f"{number(s.get('duration_s'), 1)} s", ""]
    r = s.get("replay")
    if r and r.get("protocol") == "timed":
        lines += timed_run_lines(r)
    elif r:
        pods = r["pods"]
        lines += [f"pods: {number(pods['total'])} ({number(pods['tuned'])} appended by the tuning): "
                  f"{number(pods['bound'])} bound, {number(pods['unschedulable'])} unschedulable, "
                  f"{number(pods['no_verdict'])} without a verdict", ""]
        at = r.get("at_100pct_arrived") or {}
        ff = r.get("first_failure")
        lines += ["| figure | value |", "|---|---|",
                  f"| unallocated GPUs at 100% arrived | {number(at.get('unallocated_gpus'), 3, trim=True)} "
                  f"(allocated {_pct(at.get('allocated_pct'))}) |",
                  f"| first failure at arrived | {_pct(ff['arrived_pct']) if ff else 'none'}"
                  + (f" ({ff['kind']}: {ff['reason']})" if ff else "") + " |",
                  f"| GPU allocation at the end | {_pct(r['end']['allocated_pct'])} of arrived "
                  f"{_pct(r['end']['arrived_pct'])} |",
                  f"| CPU / memory allocation at the end | {_pct(r['end']['cpu_allocated_pct'])} / "
                  f"{_pct(r['end']['memory_allocated_pct'])} |",
                  f"| verdicts per second | {number(r['scheduler']['verdicts_per_s'], 2)} |",
                  f"| create-to-verdict latency p50 / p99 (bound) | "
                  f"{number(r['scheduler']['latency_ms']['bound']['p50'], 1)} / "
                  f"{number(r['scheduler']['latency_ms']['bound']['p99'], 1)} ms |", ""]
        lines += ["never ran, by kind and the scheduler's reason:", ""]
        for kind, reasons in r["never_ran"].items():
            for reason, n in reasons.items():
                lines.append(f"- {KIND_TITLES.get(kind, kind)}: {number(n)} x {reason}")
    if r:
        lines += ["", "checks:", ""]
        for name, c in r["checks"].items():
            if c is not None:
                lines.append(f"- {name}: {'passed' if c['passed'] else 'FAILED'} "
                             f"({json.dumps({k: v for k, v in c.items() if k not in ('passed', 'apiserver')})})")
    if s.get("timings"):
        lines += ["", "phases (s): " + ", ".join(f"{k} {number(v, 1)}" for k, v in s["timings"].items())]
    if s.get("resources"):
        lines += ["", "CPU over the replay (cores): " + ", ".join(
            f"{k} {number(v, 3)}" for k, v in s["resources"]["cpu_cores"].items())]
    if s.get("errors"):
        lines += ["", "errors:", *[f"- {e}" for e in s["errors"]]]
    lines += ["", "how the replay was modelled:", "", *[f"- {m}" for m in s.get("modelled", [])]]
    path.write_text("\n".join(lines) + "\n")


def _ms(v: float | None) -> str:
    return "n/a" if v is None else number(v, 1)


def timed_run_lines(r: dict[str, Any]) -> list[str]:
    """A timed replay's part of ``summary.md``: pods, pending per QoS class, never bound, over time, lag."""
    pods, sched, t = r["pods"], r.get("schedule") or {}, r["timing"]
    w = sched.get("window") or {}
    lines = [f"timed replay: compress {number(sched.get('compress'), 2, trim=True)} (trace seconds per replay "
             f"second), window {number(w.get('start_s'), 0)} s .. "
             f"{'the last deletion' if w.get('end_s') is None else number(w.get('end_s'), 0) + ' s'}; the trace's "
             f"own pods, no tuning; {number(t['planned_s'], 1)} s planned, {number(t['replay_s'], 1)} s taken", "",
             f"pods: {number(pods['total'])} ({number(pods['created'])} created): {number(pods['bound'])} bound, "
             f"{number(pods['never_bound'])} never bound ({number(pods['unschedulable_ever'])} marked "
             f"unschedulable at some time), {number(pods['deleted'])} deleted, "
             f"{number(pods['cut_at_window_end'])} cut at the window's end", "",
             "pending time (created to bound, ms, the client's clock), per QoS class:", "",
             "| QoS | pods | bound | p50 | p90 | p99 | max |", "|---|---|---|---|---|---|---|"]
    for q, d in r["pending_ms"].items():
        lines.append(f"| {q} | {number(pods['by_qos'].get(q, 0))} | {number(d['count'])} | {_ms(d['p50'])} "
                     f"| {_ms(d['p90'])} | {_ms(d['p99'])} | {_ms(d['max'])} |")
    lines += ["", "never bound, per QoS class and kind, with the most common reasons:", ""]
    if not r["never_bound"]:
        lines.append("- none")
    else:
        lines += ["| QoS | kind | pods | reasons |", "|---|---|---|---|"]
        for q, kinds in r["never_bound"].items():
            for kind, e in kinds.items():
                reasons = "; ".join(f"{number(n)} x {why}" for why, n in list(e["reasons"].items())[:3])
                lines.append(f"| {q} | {KIND_TITLES.get(kind, kind)} | {number(e['pods'])} | {reasons} |")
    u, g = r["unschedulable"], r["gpu_allocation"]
    lines += ["", "| figure | value |", "|---|---|",
              f"| unschedulable pods, peak | {number(u['peak'])}"
              + (f" (at {number(u['peak_at_s'], 2)} s)" if u.get("peak_at_s") is not None else "") + " |",
              f"| unschedulable pods, time mean | {number(u['mean'], 2)} |",
              f"| GPU allocation, mean / max | {_pct(g['mean_pct'])} / {_pct(g['max_pct'])} of "
              f"{number(r['capacity']['gpus'])} GPUs |", "",
              f"creation lag: {number(t['late_creates'])} of {number(pods['created'])} creates started more than "
              f"{number(t['late_threshold_ms'])} ms late (lag p50 {_ms(t['create_lag_ms']['p50'])}, p99 "
              f"{_ms(t['create_lag_ms']['p99'])}, max {_ms(t['create_lag_ms']['max'])} ms); deletes: "
              f"{number(t['late_deletes'])} late, max {_ms(t['delete_lag_ms']['max'])} ms"]
    return lines


def _band(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def _curve_band(curves: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = sorted({k for c in curves for k in c}, key=int)
    return {k: _band([c[k] for c in curves if k in c]) for k in keys}


def comparison(ts: TraceScenario, results: list[tuple[str, int, dict[str, Any]]]) -> dict[str, Any]:
    """The variants side by side (module docstring)."""
    out: dict[str, Any] = {"scenario": ts.name, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                           "machine": {"host": platform.node(), "cpus": os.cpu_count(),
                                       "load_1m": round(os.getloadavg()[0], 2)},
                           "trace": {"pods": ts.spec.pods, "nodes": ts.spec.nodes, "demand": ts.spec.demand},
                           "variants": {}}
    for name in dict.fromkeys(v for v, _, _ in results):
        runs = [(seed, s) for v, seed, s in results if v == name]
        done = [(seed, s) for seed, s in runs if s.get("replay")]
        entry: dict[str, Any] = {"seeds": [seed for seed, _ in runs], "complete": all(s.get("complete") for _, s in runs),
                                 "passed": all(s.get("passed") for _, s in runs)}
        if done and done[0][1]["replay"].get("protocol") == "timed":
            entry.update(timed_entry([s for _, s in done]))
        elif done:
            figs = [s["replay"] for _, s in done]
            entry["gpu_curve"] = _curve_band([f["curves"]["gpu"] for f in figs])
            entry["cpu_curve"] = _curve_band([f["curves"]["cpu"] for f in figs])
            entry["memory_curve"] = _curve_band([f["curves"]["memory"] for f in figs])
            entry["frag_ratio_pct"] = _curve_band([{k: v["frag_ratio_pct"] for k, v in f["fragmentation"].items()
                                                    if v["frag_ratio_pct"] is not None} for f in figs])
            entry["unallocated_gpus_at_100pct"] = _band([f["at_100pct_arrived"]["unallocated_gpus"] for f in figs])
            ff = [f["first_failure"]["arrived_pct"] for f in figs if f["first_failure"]]
            entry["first_failure_arrived_pct"] = _band(ff) if ff else None
            entry["end_allocated_pct"] = _band([f["end"]["allocated_pct"] for f in figs])
            entry["verdicts_per_s"] = _band([f["scheduler"]["verdicts_per_s"] for f in figs])
            entry["latency_ms_p99_bound"] = _band([f["scheduler"]["latency_ms"]["bound"]["p99"] or 0.0 for f in figs])
            cpu = [s.get("resources", {}).get("cpu_cores", {}) for _, s in done]
            entry["cpu_cores"] = {k: _band([c[k] for c in cpu if k in c]) for k in sorted({k for c in cpu for k in c})}
            entry["never_ran"] = [f["never_ran"] for f in figs]
            entry["timings_s"] = [s.get("timings") for _, s in done]
            entry["checks"] = [{k: (c or {}).get("passed") for k, c in f["checks"].items()} for f in figs]
        out["variants"][name] = entry
    if ts.spec.mode == "timed":
        w = ts.spec.window
        out["trace"] = {"pods": ts.spec.pods, "nodes": ts.spec.nodes, "mode": "timed", "compress": ts.spec.compress,
                        "window": None if w is None else {"start_s": w.start_s, "end_s": w.end_s}}
    return out


def timed_entry(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """A variant's timed runs in the comparison: pending p99 per QoS class, peak unschedulable pods, GPU
    allocation mean and max, creation lag, never bound; the first run's series (for the plot)."""
    figs = [s["replay"] for s in summaries]
    qos = sorted({q for f in figs for q in f["pending_ms"]})
    cpu = [s.get("resources", {}).get("cpu_cores", {}) for s in summaries]
    return {
        "pending_ms_p99": {q: _band([f["pending_ms"][q]["p99"] for f in figs
                                     if q in f["pending_ms"] and f["pending_ms"][q]["p99"] is not None] or [0.0])
                           for q in qos},
        "bound": _band([f["pods"]["bound"] for f in figs]),
        "never_bound": _band([f["pods"]["never_bound"] for f in figs]),
        "unschedulable_peak": _band([f["unschedulable"]["peak"] for f in figs]),
        "gpu_allocation_mean_pct": _band([f["gpu_allocation"]["mean_pct"] for f in figs]),
        "gpu_allocation_max_pct": _band([f["gpu_allocation"]["max_pct"] for f in figs]),
        "create_lag_ms_max": _band([f["timing"]["create_lag_ms"]["max"] or 0.0 for f in figs]),
        "late_creates": _band([f["timing"]["late_creates"] for f in figs]),
        "series": figs[0]["series"],
        "cpu_cores": {k: _band([c[k] for c in cpu if k in c]) for k in sorted({k for c in cpu for k in c})},
        "timings_s": [s.get("timings") for s in summaries],
        "checks": [{k: (c or {}).get("passed") for k, c in f["checks"].items()} for f in figs],
    }


def write_comparison(parent: Path, ts: TraceScenario, results: list[tuple[str, int, dict[str, Any]]]) -> dict[str, Any]:
    """``comparison.json``, ``comparison.md`` and ``comparison.png`` in ``parent``."""
    c = comparison(ts, results)
    (parent / "comparison.json").write_text(json.dumps(c, indent=2))
    (parent / "comparison.md").write_text(comparison_markdown(c))
    try:
        plot(c, parent / "comparison.png")
    except Exception as exc:  # a plot is a convenience: its failure is said, not fatal
        (parent / "comparison-plot-error.txt").write_text(f"{exc.__class__.__name__}: {exc}\n")
    return c


def comparison_markdown(c: dict[str, Any]) -> str:
    def band(b: dict[str, float] | None, nd: int = 2) -> str:
        if not b:
            return "n/a"
        return number(b["mean"], nd) if b["min"] == b["max"] else \
            f"{number(b['mean'], nd)} ({number(b['min'], nd)}..{number(b['max'], nd)})"

    if c["trace"].get("mode") == "timed":
        return _timed_comparison_markdown(c, band)
    lines = [f"# {c['scenario']}: variants side by side", "",
             f"{c['date']}; {c['machine']['host']}, {c['machine']['cpus']} CPUs, load {c['machine']['load_1m']}; "
             f"trace {c['trace']['pods']} tuned to {c['trace']['demand']}x", "",
             "| variant | seeds | unallocated GPUs at 100% arrived | first failure (% arrived) | GPU allocated at end (%) "
             "| verdicts/s | p99 latency (ms) | checks |", "|---|---|---|---|---|---|---|---|"]
    for name, v in c["variants"].items():
        lines.append(f"| {name} | {', '.join(map(str, v['seeds']))} | {band(v.get('unallocated_gpus_at_100pct'), 1)} "
                     f"| {band(v.get('first_failure_arrived_pct'))} | {band(v.get('end_allocated_pct'))} "
                     f"| {band(v.get('verdicts_per_s'))} | {band(v.get('latency_ms_p99_bound'), 1)} "
                     f"| {'passed' if v['passed'] else 'FAILED'}{'' if v['complete'] else ', incomplete'} |")
    lines += ["", "GPU allocation (%) at arrived demand (%), mean over seeds (min..max):", "",
              "| arrived | " + " | ".join(c["variants"]) + " |", "|---" * (len(c["variants"]) + 1) + "|"]
    for pct in range(0, 131, 10):
        k = str(pct)
        lines.append(f"| {pct} | " + " | ".join(band((v.get("gpu_curve") or {}).get(k)) for v in c["variants"].values())
                     + " |")
    lines += ["", "fragmentation ratio (% of idle GPU milli), the paper's measure:", "",
              "| arrived | " + " | ".join(c["variants"]) + " |", "|---" * (len(c["variants"]) + 1) + "|"]
    for pct in range(0, 131, 10):
        k = str(pct)
        lines.append(f"| {pct} | " + " | ".join(band((v.get("frag_ratio_pct") or {}).get(k))
                                               for v in c["variants"].values()) + " |")
    lines.append("")
    lines += _cost_lines(c, band)
    return "\n".join(lines) + "\n"


def _cost_lines(c: dict[str, Any], band: Callable[..., str]) -> list[str]:
    """Each variant's CPU over the replay and its phases' times (both modes' comparisons end with them)."""
    lines = []
    for name, v in c["variants"].items():
        if v.get("cpu_cores"):
            lines.append(f"- {name}: CPU cores over the replay: " + ", ".join(
                f"{k} {band(b, 3)}" for k, b in v["cpu_cores"].items()))
        for t in v.get("timings_s") or []:
            lines.append(f"- {name}: phases (s): " + ", ".join(f"{k} {number(x, 1)}" for k, x in (t or {}).items()))
    return lines


def _timed_comparison_markdown(c: dict[str, Any], band: Callable[..., str]) -> str:
    t = c["trace"]
    w = t.get("window") or {}
    lines = [f"# {c['scenario']}: variants side by side (time-faithful replay)", "",
             f"{c['date']}; {c['machine']['host']}, {c['machine']['cpus']} CPUs, load {c['machine']['load_1m']}; "
             f"trace {t['pods']} replayed at its own times compressed {number(t['compress'], 2, trim=True)}x"
             + (f", window {w.get('start_s')} .. {w.get('end_s')} s" if w else "") + "; no tuning, one run per variant",
             ""]
    qos = sorted({q for v in c["variants"].values() for q in v.get("pending_ms_p99") or {}})
    lines += ["| variant | " + " | ".join(f"pending p99 {q} (ms)" for q in qos) + " | bound | never bound "
              "| unschedulable peak | GPU allocation mean / max (%) | late creates | checks |",
              "|---" * (len(qos) + 7) + "|"]
    for name, v in c["variants"].items():
        p99 = v.get("pending_ms_p99") or {}
        lines.append(f"| {name} | " + " | ".join(band(p99.get(q), 1) for q in qos)
                     + f" | {band(v.get('bound'), 0)} | {band(v.get('never_bound'), 0)} "
                     f"| {band(v.get('unschedulable_peak'), 0)} | {band(v.get('gpu_allocation_mean_pct'))} / "
                     f"{band(v.get('gpu_allocation_max_pct'))} | {band(v.get('late_creates'), 0)} "
                     f"| {'passed' if v['passed'] else 'FAILED'}{'' if v['complete'] else ', incomplete'} |")
    lines.append("")
    lines += _cost_lines(c, band)
    return "\n".join(lines) + "\n"


def plot(c: dict[str, Any], path: Path) -> None:
    """The GPU allocation curves (seed band shaded) and the fragmentation ratio, per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    if c["trace"].get("mode") == "timed":
        for name, v in c["variants"].items():
            series = v.get("series") or {}
            if series.get("t_s"):
                ax.plot(series["t_s"], series["unschedulable"], label=name)
                bx.plot(series["t_s"], series["gpu_allocated_pct"], label=name)
        ax.set(xlabel="replay time (s)", ylabel="pods pending as unschedulable",
               title=f"{c['scenario']}: unschedulable pods over time")
        bx.set(xlabel="replay time (s)", ylabel="GPU allocation (% of capacity)", title="GPU allocation over time")
        ax.legend()
        bx.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return
    ax.plot([0, 100], [0, 100], color="grey", linewidth=0.8, linestyle=":", label="allocated = arrived")
    for name, v in c["variants"].items():
        for axis, key in ((ax, "gpu_curve"), (bx, "frag_ratio_pct")):
            curve = v.get(key) or {}
            xs = [int(k) for k in curve]
            if not xs:
                continue
            line, = axis.plot(xs, [curve[k]["mean"] for k in curve], label=name)
            axis.fill_between(xs, [curve[k]["min"] for k in curve], [curve[k]["max"] for k in curve],
                              color=line.get_color(), alpha=0.2)
    ax.set(xlabel="arrived GPU demand (% of capacity)", ylabel="GPU allocation (% of capacity)",
           title=f"{c['scenario']}: GPU allocation")
    bx.set(xlabel="arrived GPU demand (% of capacity)", ylabel="fragmentation (% of idle GPU)",
           title="fragmentation (the paper's measure)")
    ax.legend()
    bx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
