"""``make bench-trace``: Alibaba's GPU-sharing trace replayed through the real kube-scheduler, per scheduler
profile and GPU mode, over several seeds -> ``reports/bench/trace.{json,md}``.

The scenario is ``scenarios/trace-alibaba-2023.yaml`` (the default pod list on the 1,213 GPU nodes, the
paper's protocol tuned to 1.3x the 6,212 GPUs).  Each profile (``default``, ``packing``) runs with GPUs as
DRA devices with shares (``claims``, ``gpu_sharing: true``) and as counted ``nvidia.com/gpu`` (a share
rounded up to a whole GPU), once per seed, each replay on a fresh local cluster
(:func:`hollowscale.replay.run.run_scenario`)::

    .venv/bin/python tests/bench/bench_trace.py            # 3 seeds x 4 (hours)
    .venv/bin/python tests/bench/bench_trace.py --seeds 42 --gpus claims --profiles default   # one replay
    .venv/bin/python tests/bench/bench_trace.py --excerpt 50,300 --seeds 1 --out /tmp/bt      # a quick check

Per variant the file holds, over its seeds (median and min..max): the GPU allocation curve against
arrived demand at each 5% (the paper's figure), allocated % and unallocated GPUs at 100% arrived, the
arrived demand at the first failed pod, pods that never ran, the scheduler's verdicts/s and bound-pod
latency, the CPU of the agent and of each control-plane process over the replay, each phase's time, and
whether the trace's arithmetic checks held; with date, machine, load at the start and versions.  It is
written after every replay, so an interrupted bench keeps what it measured, and ``--resume`` goes on from
it (the replays run seed by seed, so every variant has as many seeds as the others, or one fewer).  ``--excerpt NODES,PODS``
replays a cut of the trace (``hollowscale trace excerpt``) instead: a check of the bench itself, never
a figure to commit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

SCENARIO = ROOT / "scenarios" / "trace-alibaba-2023.yaml"
#: arrived-demand points (percent of the GPU capacity) the curves are reported at
CURVE_AT = tuple(range(5, 131, 5))


def _in_repo(path: str | Path) -> str:
    """``path`` relative to the repository when it is inside it (a committed report names no machine's paths)."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def variant_doc(profile: str, gpus: str) -> dict[str, Any]:
    """A trace scenario variant: ``profile`` with GPUs as DRA shares (``claims``) or counted."""
    return {"name": f"{profile}-{'shared' if gpus == 'claims' else 'counted'}", "scheduler": {"profile": profile},
            "gpus": gpus, "gpu_sharing": gpus == "claims"}


def scenario_doc(base: Path, profiles: list[str], gpus: list[str], seeds: list[int],
                 trace: tuple[Path, Path] | None) -> dict[str, Any]:
    """The bench's scenario: ``base`` with every (profile, GPU mode) as a variant and the seeds given; trace
    paths absolute (the derived file lives in the work folder); ``trace`` (pods, nodes) replaces the trace."""
    doc = yaml.safe_load(base.read_text())
    spec = doc["workload"]["trace"]
    if trace is not None:
        spec["pods"], spec["nodes"] = str(trace[0]), str(trace[1])
    else:
        for key in ("pods", "nodes"):
            spec[key] = str((base.parent / spec[key]).resolve())
    spec["seeds"] = seeds
    doc["name"] = "bench-trace"
    doc["variants"] = [variant_doc(p, g) for p in profiles for g in gpus]
    return doc


def _stats(values: list[float]) -> dict[str, Any] | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": round(statistics.median(vals), 3), "min": round(min(vals), 3), "max": round(max(vals), 3),
            "n": len(vals)}


def _dig(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def _curve_at(curve: dict[str, float], at: int) -> float | None:
    """The allocation (percent) at ``at`` percent arrived: the curve's last point at or before it."""
    points = sorted((int(k), v) for k, v in curve.items())
    before = [v for k, v in points if k <= at]
    return before[-1] if before and points[-1][0] >= at else None


def summarize(replays: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant over its seeds (each ``replays`` item: seed, exit code, run folder, summary)."""
    summaries = [r["summary"] for r in replays]
    figures = {
        "allocated_pct_at_100_arrived": "replay.at_100pct_arrived.allocated_pct",
        "unallocated_gpus_at_100_arrived": "replay.at_100pct_arrived.unallocated_gpus",
        "first_failure_arrived_pct": "replay.first_failure.arrived_pct",
        "allocated_pct_at_end": "replay.end.allocated_pct",
        "unschedulable_pods": "replay.pods.unschedulable",
        "no_verdict_pods": "replay.pods.no_verdict",
        "verdicts_per_s": "replay.scheduler.verdicts_per_s",
        "bound_latency_p50_ms": "replay.scheduler.latency_ms.bound.p50",
        "bound_latency_p99_ms": "replay.scheduler.latency_ms.bound.p99",
        "replay_s": "replay.scheduler.replay_s",
        "duration_s": "duration_s",
    }
    out: dict[str, Any] = {name: _stats([_dig(s, path) for s in summaries]) for name, path in figures.items()}
    curves = [_dig(s, "replay.curves.gpu") or {} for s in summaries]
    out["gpu_allocation_curve"] = {str(at): _stats([_curve_at(c, at) for c in curves if c]) for at in CURVE_AT}
    cpu_names = sorted({k for s in summaries for k in (_dig(s, "resources.cpu_cores") or {})})
    out["cpu_cores"] = {k: _stats([(_dig(s, "resources.cpu_cores") or {}).get(k) for s in summaries])
                        for k in cpu_names}
    phases = sorted({k for s in summaries for k in (s.get("timings") or {})})
    out["phase_s"] = {k: _stats([(s.get("timings") or {}).get(k) for s in summaries]) for k in phases}
    never: dict[str, dict[str, int]] = {}
    for s in summaries:
        for kind, reasons in (_dig(s, "replay.never_ran") or {}).items():
            for reason, n in reasons.items():
                never.setdefault(kind, {}).setdefault(reason, 0)
                never[kind][reason] += n
    out["never_ran_total_over_seeds"] = never
    out["checks_passed"] = {name: [bool((c or {}).get("passed")) for c in
                                   [(_dig(s, "replay.checks") or {}).get(name) for s in summaries] if c is not None]
                            for name in sorted({k for s in summaries for k in (_dig(s, "replay.checks") or {})})}
    out["seeds"] = [{"seed": r["seed"], "exit_code": r["code"], "run_dir": r["run_dir"],
                     "complete": r["summary"].get("complete"), "errors": r["summary"].get("errors") or []}
                    for r in replays]
    out["modelled"] = summaries[0].get("modelled") if summaries else None
    return out


def _f(v: Any, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"


def _band(st: dict[str, Any] | None, digits: int = 1) -> str:
    if not st:
        return "-"
    if st["n"] == 1 or st["min"] == st["max"]:
        return _f(float(st["median"]), digits)
    return f"{_f(float(st['median']), digits)} ({_f(float(st['min']), digits)}-{_f(float(st['max']), digits)})"


def markdown(doc: dict[str, Any]) -> str:
    """``trace.md`` from ``trace.json``."""
    facts = doc["facts"]
    m = facts["machine"]
    lines = [
        "# bench-trace: Alibaba's GPU trace through the real kube-scheduler", "",
        f"- date: {facts['date']}; machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB; load average "
        f"at the start {m['load_average_1_5_15']}; Kubernetes {facts['versions']['kubernetes']}",
        f"- command: `{doc['command']}`",
        f"- trace: {doc['trace']}; {doc['protocol']}",
        f"- seeds: {', '.join(map(str, doc['seeds']))}; each replay on a fresh local cluster, one after another; "
        "figures are the median over the seeds with min-max in brackets",
        f"- wall time: {_f(doc.get('wall_s'), 0)} s", "",
    ]
    if doc.get("resumed"):
        lines[-1:-1] = ["- resumed (`--resume`, the replays above kept): " + "; ".join(
            f"{e['date']} (load {e['load_average_1_5_15']})" for e in doc["resumed"])]
    if doc.get("notes"):
        lines += ["**How it was measured, beyond the above:**", "", *(f"- {n}" for n in doc["notes"]), ""]
    if doc.get("excerpt"):
        lines += [f"**An excerpt ({doc['excerpt']}), a check of the bench: not figures of the trace.**", ""]
    lines += ["| variant | allocated % at 100% arrived | unallocated GPUs at 100% | first failure at arrived % | "
              "allocated % at end | unschedulable pods | verdicts/s | bound p99 ms | replay s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, v in doc["variants"].items():
        lines.append(f"| {name} | {_band(v['allocated_pct_at_100_arrived'], 2)} | "
                     f"{_band(v['unallocated_gpus_at_100_arrived'], 1)} | {_band(v['first_failure_arrived_pct'], 2)} | "
                     f"{_band(v['allocated_pct_at_end'], 2)} | {_band(v['unschedulable_pods'], 0)} | "
                     f"{_band(v['verdicts_per_s'], 1)} | {_band(v['bound_latency_p99_ms'], 1)} | "
                     f"{_band(v['replay_s'], 0)} |")
    lines += ["", "## GPU allocation (%) against arrived GPU demand (% of capacity)", ""]
    names = list(doc["variants"])
    lines += ["| arrived % | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for at in CURVE_AT:
        lines.append(f"| {at} | " + " | ".join(_band(doc["variants"][n]["gpu_allocation_curve"].get(str(at)), 2)
                                             for n in names) + " |")
    lines += ["", "## CPU over the replay (cores) and phase times (s)", ""]
    for name, v in doc["variants"].items():
        cpu = ", ".join(f"{k} {_band(st, 3)}" for k, st in v["cpu_cores"].items())
        ph = ", ".join(f"{k} {_band(st, 0)}" for k, st in v["phase_s"].items())
        lines.append(f"- **{name}**: CPU {cpu or '-'}; phases {ph or '-'}")
    lines += ["", "## Pods that never ran (all seeds together) and the checks", ""]
    for name, v in doc["variants"].items():
        never = "; ".join(f"{kind}: " + ", ".join(f"{r} {n:,}" for r, n in reasons.items())
                          for kind, reasons in v["never_ran_total_over_seeds"].items())
        checks = ", ".join(f"{k} {sum(p)}/{len(p)}" for k, p in v["checks_passed"].items())
        lines.append(f"- **{name}**: never ran: {never or 'none'}; checks held: {checks or '-'}")
        bad = [s for s in v["seeds"] if s["exit_code"] != 0]
        if bad:
            lines.append("  - replays that did not pass: " + ", ".join(
                f"seed {s['seed']} exit {s['exit_code']}{' (' + '; '.join(s['errors'][:2]) + ')' if s['errors'] else ''}"
                for s in bad))
    first = next(iter(doc["variants"].values()), None)
    if first and first.get("modelled"):
        lines += ["", "## How the replay was modelled (the first variant's words)", ""]
        lines += [f"- {x}" for x in first["modelled"]] if isinstance(first["modelled"], list) else [str(first["modelled"])]
    return "\n".join(lines) + "\n"


def earlier_replays(out_json: Path, variants: set[str], seeds: list[int]) -> list[dict[str, Any]]:
    """The replays an earlier (interrupted) bench wrote to ``out_json`` that ``--resume`` keeps: a variant
    and seed still asked for, an exit code other than an interruption (130), and a run folder that still
    holds its ``summary.json``; each with that summary, as :func:`summarize` takes it."""
    if not out_json.is_file():
        return []
    kept: list[dict[str, Any]] = []
    for r in json.loads(out_json.read_text()).get("replays", []):
        summary_file = ROOT / r["run_dir"] / "summary.json"  # run_dir: relative to the repo (or absolute, older files)
        if r["variant"] not in variants or r["seed"] not in seeds or r["exit_code"] == 130 \
                or not summary_file.is_file():
            continue
        if any(k["variant"] == r["variant"] and k["seed"] == r["seed"] for k in kept):
            continue
        kept.append({"variant": r["variant"], "seed": r["seed"], "exit_code": r["exit_code"], "code": r["exit_code"],
                     "run_dir": r["run_dir"], "summary": json.loads(summary_file.read_text())})
    return kept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=SCENARIO, help="the trace scenario the variants are built on")
    ap.add_argument("--seeds", default="42,1,2", help="comma-separated seeds (each a replay per variant)")
    ap.add_argument("--profiles", default="default,packing", help="scheduler profiles (default, packing)")
    ap.add_argument("--gpus", default="claims,counted", help="GPU modes: claims (DRA shares), counted")
    ap.add_argument("--excerpt", default="", help="NODES,PODS: replay a cut of the trace (a check of the bench)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench", help="where trace.{json,md} go")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-trace",
                    help="the derived scenario and the replays' run folders")
    ap.add_argument("--note", action="append", default=[],
                    help="a line for the file about how it was measured (e.g. other work that overlapped a replay); "
                         "repeatable, kept across --resume")
    ap.add_argument("--resume", action="store_true",
                    help="keep the replays the existing output file lists whose run folders still hold a "
                         "summary.json (same variants and seeds), and run only the others")
    args = ap.parse_args()
    from hollowscale.replay.run import run_scenario
    from hollowscale.scenario.trace import load_trace_scenario
    from hollowscale.trace import excerpt, read_trace, write_trace

    seeds = [int(s) for s in args.seeds.split(",") if s]
    profiles = [p for p in args.profiles.split(",") if p]
    gpus = [g for g in args.gpus.split(",") if g]
    args.work.mkdir(parents=True, exist_ok=True)
    base = load_trace_scenario(args.scenario)
    cut: tuple[Path, Path] | None = None
    if args.excerpt:
        n_nodes, n_pods = (int(x) for x in args.excerpt.split(","))
        small = excerpt(base.trace, n_nodes, n_pods, 0)
        cut = (args.work / "pods.csv", args.work / "nodes.csv")
        write_trace(small, *cut)
        read_trace(cut[0], cut[1])  # checked as a scenario would read it
    derived = args.work / "bench-trace.yaml"
    derived.write_text(f"# {args.scenario} as bench_trace.py replays it\n"
                       + yaml.safe_dump(scenario_doc(args.scenario, profiles, gpus, seeds, cut), sort_keys=False))
    ts = load_trace_scenario(derived)
    facts = machine_facts()
    spec = ts.spec
    doc: dict[str, Any] = {
        "facts": facts, "command": "python " + " ".join(sys.argv),
        "trace": f"{_in_repo(spec.pods)} on {_in_repo(spec.nodes)} ({len(ts.trace.nodes):,} nodes, {ts.trace.gpus:,} GPUs, "
                 f"{len(ts.trace.pods):,} pods)",
        "protocol": f"the paper's protocol (seeded shuffle, tuned to {spec.demand:g}x the GPU capacity, one pod at a "
                    "time, each waiting for its verdict; an unschedulable pod recorded and deleted, never retried)",
        "excerpt": args.excerpt or None, "seeds": seeds, "variants": {}, "replays": [], "notes": list(args.note)}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "trace" if not args.excerpt else "trace-excerpt"
    t0 = time.time()

    def save() -> None:
        doc["wall_s"] = round(prior_wall + time.time() - t0, 1)
        shown = portable(json.loads(json.dumps(doc, default=str)))  # run folders relative to the repo
        (args.out / f"{stem}.json").write_text(json.dumps(shown, indent=2) + "\n")
        (args.out / f"{stem}.md").write_text(markdown(shown))

    done: dict[str, list[dict[str, Any]]] = {v.name: [] for v in ts.file.variants}
    prior_wall = 0.0
    if args.resume and (args.out / f"{stem}.json").is_file():
        old = json.loads((args.out / f"{stem}.json").read_text())
        # the bench's own start stays its date and load; each resumption is listed after it
        doc["facts"], doc["command"] = old["facts"], old["command"]
        doc["resumed"] = [*old.get("resumed", []),
                          {"date": facts["date"], "load_average_1_5_15": facts["machine"]["load_average_1_5_15"],
                           "command": "python " + " ".join(sys.argv)}]
        prior_wall = float(old.get("wall_s") or 0)
        doc["notes"] = [*old.get("notes", []), *(n for n in args.note if n not in old.get("notes", []))]
        for r in earlier_replays(args.out / f"{stem}.json", {v.name for v in ts.file.variants}, seeds):
            done[r["variant"]].append(r)
            doc["replays"].append({k: r[k] for k in ("variant", "seed", "exit_code", "run_dir")})
            print(f"[bench-trace] {r['variant']}, seed {r['seed']}: kept from {r['run_dir']}", flush=True)
        for name, runs in done.items():
            if runs:
                doc["variants"][name] = summarize(runs)
        save()
    worst = max((r["exit_code"] for r in doc["replays"]), default=0)
    # seed-major: an interrupted bench has every variant at the same number of seeds
    for seed in seeds:
        for v in ts.file.variants:
            if any(r["seed"] == seed for r in done[v.name]):
                continue
            print(f"[bench-trace] {v.name}, seed {seed} ...", flush=True)
            code, _parent, results = run_scenario(ts, args.work / "runs", [v.name], [seed],
                                                 log=lambda m: print(f"  {m}", flush=True))
            for res in results:
                done[v.name].append({"seed": res.seed, "code": res.code, "run_dir": str(res.run_dir),
                                     "summary": res.summary})
                doc["replays"].append({"variant": v.name, "seed": res.seed, "exit_code": res.code,
                                       "run_dir": str(res.run_dir)})
            worst = max(worst, code)
            doc["variants"][v.name] = summarize(done[v.name])
            save()
            if code == 130:
                print("[bench-trace] interrupted; what was measured is written (--resume goes on from here)",
                      flush=True)
                return code
    print(markdown(doc))
    return 0 if worst == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
