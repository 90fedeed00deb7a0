"""Benchmark of ``hollowscale plan`` on the small sweep: the knees over both profiles, what bound at each,
and a plan that tests that explanation by moving the client limit it names.

Two plans of ``scenarios/plan-small.yaml`` (same pools, workload, SLOs, points), each under the shared
lock, then one file from both::

    .venv/bin/python tests/bench/bench_plan.py run profiles /tmp/hs-plan-bench/profiles
    .venv/bin/python tests/bench/bench_plan.py run limits /tmp/hs-plan-bench/limits
    .venv/bin/python tests/bench/bench_plan.py write /tmp/hs-plan-bench/profiles /tmp/hs-plan-bench/limits

``profiles``: both sizes (100 and 300 GPU nodes) on the ``default`` and the ``scale`` profile, the rate
searched over 0.5..12.5 instances/s (the scale profile's knee is expected above plan-small's 6.5).
``limits``: 100 nodes on the default profile with the controller-manager's client limit moved from
20/30 to 40/60 (``sweep.limits``), the explanation's test: a knee bound by that client should move
with it.  ``run`` writes the derived scenario beside the plan folder (``<folder>.yaml``).

``report DIR`` writes a plan folder's capacity report again from its measured points with the current code
(each point's limits are ranked again from the reads it kept), whatever the scenario model's fingerprint.

``write`` produces reports/bench/plan-small.json and .md: per plan the wall time and the load average at
its start, per cell the knee, its bracket and the limit that bound first with its figures
(:func:`hollowscale.measure.attribution.bound_first`), the explanation's verdict, and the projections.
Two folders of the same plan are also compared for reproducibility (knees within one bisection step).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))
sys.path.insert(0, str(REPO))

from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

from hollowscale.plan.bisect import Knee, within_one_step  # noqa: E402

SCENARIO = REPO / "scenarios" / "plan-small.yaml"
TARGET_S = 30 * 60
RATE = {"lo": 0.5, "hi": 12.5, "resolution": 1}
#: the controller-manager's client limit the ``limits`` plan moves to (upstream default 20/30)
MOVED = {"name": "cm-qps-40", "controller_manager": {"qps": 40, "burst": 60}}


def plan_doc(kind: str) -> dict[str, Any]:
    """plan-small with the ``profiles`` or the ``limits`` sweep (see the module docstring)."""
    doc = copy.deepcopy(yaml.safe_load(SCENARIO.read_text()))
    sweep = doc["sweep"]
    sweep["rate"] = dict(RATE)
    if kind == "profiles":
        doc["name"] = "plan-small-profiles"
        sweep["profiles"] = ["default", "scale"]
    elif kind == "limits":
        doc["name"] = "plan-small-limits"
        sweep["sizes"] = [{"gpu": 100}]
        sweep["profiles"] = ["default"]
        sweep["limits"] = [MOVED]
    else:
        raise SystemExit(f"unknown plan {kind!r}: profiles or limits")
    return doc


def run(kind: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    scen = out.parent / f"{out.name}.yaml"
    scen.write_text(yaml.safe_dump(plan_doc(kind), sort_keys=False))
    cmd = [str(REPO / ".venv" / "bin" / "hollowscale"), "plan", str(scen), "--out", str(out), "--fresh"]
    facts = machine_facts()
    t0 = time.monotonic()
    code = subprocess.run(cmd, cwd=REPO).returncode
    wall = round(time.monotonic() - t0, 1)
    (out / "bench-run.json").write_text(json.dumps({"plan": kind, "command": " ".join(cmd[1:]), "exit_code": code,
                                                    "wall_s": wall, "started": facts["date"],
                                                    "machine": facts["machine"], "scenario": str(scen)}, indent=2))
    print(f"plan {kind} finished with exit {code} in {wall:.0f}s")
    sys.exit(code)


def report(out: Path) -> None:
    """The capacity report of the finished plan in ``out`` again, from its points (no cluster, no point)."""
    from hollowscale.plan.planner import Planner
    from hollowscale.plan.report import write_capacity_report
    from hollowscale.plan.state import PlanState
    from hollowscale.scenario import parse_scenario

    meta = json.loads((out / "bench-run.json").read_text())
    doc = yaml.safe_load(Path(meta["scenario"]).read_text())
    sc = parse_scenario(doc, meta["scenario"], Path(meta["scenario"]).parent)
    stored = json.loads((out / "plan.json").read_text())["fingerprint"]
    planner = Planner(doc, sc, PlanState(out, stored), out, print)
    result = planner.run()  # every point is in the state: nothing is measured
    if result.measured:
        raise SystemExit(f"{out}: the plan is not finished")
    result.wall_s = float(json.loads((out / "capacity.json").read_text()).get("wall_s") or meta["wall_s"])
    print("\n".join(str(p) for p in write_capacity_report(out, sc, planner, result)))


def _knee(d: dict[str, Any]) -> Knee:
    return Knee(d["slo"], d["knee"], d["passing"], d["failing"], d["verdict"],
                [(t["rate"], t["passed"]) for t in d["tried"]], d["resolution"])


def _pr(x: dict[str, Any] | None) -> str:
    return "n/a" if not x or x.get("pressure") is None else f"{x['pressure']:.2f} @ {x['rate']:g}"


def knee_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(runs, 1):
        for c in r["capacity"]["cells"]:
            for slo, k in c["knees"].items():
                b = k.get("bound_first")
                out.append({"run": i, "plan": r["plan"], "cell": c["key"], "profile": c["profile"], "nodes": c["nodes"],
                            "client_limits": c.get("client_limits") or {}, "slo": slo, "knee": k["knee"],
                            "failing": k["failing"], "verdict": k["verdict"], "step": k["step"],
                            "tried": k["tried"], "bound_first": b})
    return out


def explanation(rows: list[dict[str, Any]]) -> list[str]:
    """Does a knee attributed to the controller-manager's client move when its limit moves?"""
    out = []
    for size in sorted({r["nodes"] for r in rows}):
        for slo in sorted({r["slo"] for r in rows}):
            same = [r for r in rows if r["nodes"] == size and r["slo"] == slo]
            base = next((r for r in same if r["profile"] == "default"), None)
            if base is None or not base["bound_first"]:
                continue
            b = base["bound_first"]
            line = (f"{size} nodes, {slo}: default profile knee {base['knee']}/s, bound first by {b['key']}"
                    + ("" if b["binding"] else " (nearest; none reached its threshold)"))
            knee_fig = (b.get("knee") or {}).get("figures") or {}
            if b["key"].startswith("client:") and knee_fig.get("requests_per_s") and base["knee"]:
                line += (f" (at the knee the component sent {knee_fig['requests_per_s']:g} requests/s in all, "
                         f"{knee_fig['requests_per_s'] / base['knee']:.1f} per instance, against a QPS of "
                         f"{knee_fig.get('qps'):g} per client; the metric does not say which controller sent them)")
            for r in same:
                if r is base:
                    continue
                rb = r["bound_first"]
                moved = (r["knee"] or 0) > (base["knee"] or 0)
                line += (f"; {r['profile']}: knee {r['knee']}/s ({'higher' if moved else 'NOT higher'}"
                         f", bound first by {rb['key'] if rb else 'n/a'})")
            if b["key"] == "client:controller-manager":
                higher = [r for r in same if r is not base and (r["knee"] or 0) > (base["knee"] or 0)]
                line += (". The explanation holds: the knee moved up when the controller-manager's client limit "
                         "was raised" if len(higher) == len(same) - 1 and higher else
                         ". The explanation does NOT hold everywhere: see the rows above")
            out.append(line)
    return out


def write(dirs: list[Path]) -> None:
    runs = []
    for d in dirs:
        meta = json.loads((d / "bench-run.json").read_text())
        cap = json.loads((d / "capacity.json").read_text())
        runs.append({"dir": str(d), **meta, "capacity": cap})
    rows = knee_rows(runs)
    repro = []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if a["plan"] != b["plan"]:
                continue
            for ra in (r for r in rows if r["run"] == runs.index(a) + 1):
                rb = next((r for r in rows if r["run"] == runs.index(b) + 1 and r["cell"] == ra["cell"]
                           and r["slo"] == ra["slo"]), None)
                if rb:
                    ka = next(k for c in a["capacity"]["cells"] if c["key"] == ra["cell"] for n, k in c["knees"].items()
                              if n == ra["slo"])
                    kb = next(k for c in b["capacity"]["cells"] if c["key"] == rb["cell"] for n, k in c["knees"].items()
                              if n == rb["slo"])
                    repro.append({"cell": ra["cell"], "slo": ra["slo"], "within_one_step": within_one_step(_knee(ka),
                                                                                                            _knee(kb))})
    projections = []
    for r_i, r in enumerate(runs, 1):
        for prof, f in r["capacity"]["fits"].items():
            for comp, by in f["components"].items():
                for res, v in by.items():
                    for p in v["projections"]:
                        projections.append({"run": r_i, "profile": prof, "component": comp, "resource": res,
                                            "nodes": p["nodes"], "pods_per_s": p["pods_per_s"], "value": p["value"],
                                            "error_95": p["error_95"], "interval_95": p["interval_95"],
                                            "label": p.get("projection"), "fit_note": v["fit"]["note"]})
    doc = {
        "benchmark": "plan-small", **machine_facts(),
        "commands": [f".venv/bin/python tests/bench/bench_plan.py run {r['plan']} {r['dir']}"
                     for r in runs] + [f".venv/bin/python tests/bench/bench_plan.py write {' '.join(map(str, dirs))}"],
        "target_wall_s": TARGET_S,
        "runs": [{"dir": r["dir"], "plan": r["plan"], "command": r["command"], "started": r["started"],
                  "exit_code": r["exit_code"], "wall_s": r["wall_s"], "under_target": r["wall_s"] < TARGET_S,
                  "load_average_at_start": r["machine"].get("load_average_1_5_15"),
                  "points": sum(len(c["points"]) for c in r["capacity"]["cells"]),
                  "sweep": r["capacity"]["sweep"], "answers": r["capacity"]["answers"]} for r in runs],
        "knees": rows,
        "explanation": explanation(rows),
        "reproducibility": repro,
        "projections": projections,
    }
    out = REPO / "reports" / "bench"
    doc = portable(doc)  # the plans' and clusters' folders relative to the repo or the temp folder
    (out / "plan-small.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "plan-small.md").write_text(markdown(doc))
    print(f"wrote {out / 'plan-small.json'} and .md")


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = ["# Benchmark: hollowscale plan on the small sweep, both profiles, and what binds at each knee", "",
             f"Written {doc['date']}; {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB (shared with other "
             f"work: load averages below); Kubernetes {doc['versions']['kubernetes']}, etcd {doc['versions']['etcd']}.",
             "", "Commands:", ""] + [f"    {c}" for c in doc["commands"]] + [
             "", "| plan | started | wall time | under 30 min | points | load average at start (1, 5, 15 min) |",
             "|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        lines.append(f"| {r['plan']} | {r['started']} | {r['wall_s']:.0f} s ({r['wall_s'] / 60:.1f} min) | "
                     f"{'yes' if r['under_target'] else 'NO'} | {r['points']} | {r['load_average_at_start']} |")
    lines += ["", "Each point: 15 s warm-up + 30 s measured at a constant rate of 2-worker training Jobs (1 GPU each); a "
              "point passes an SLO when it is met and the backlog does not grow.  The limits of each point are ranked "
              "from the components' own /metrics read at the measured window's edges and the machine's /proc/stat "
              "(`hollowscale/measure/attribution.py`: pressure = figure / threshold, 1 = at the limit); at each knee the "
              "points are walked in rising rate up to the first failing one and the first binding limit met bound first.",
              "", "| plan | cell (profile/mix/size) | client limits moved | SLO | knee (instances/s) | first failing | "
              "points tried | bound first | its pressure, knee -> first failing | next at the first failing rate |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for k in doc["knees"]:
        b = k["bound_first"]
        tried = ", ".join(f"{t['rate']:g}{'+' if t['passed'] else '-'}" for t in k["tried"])
        lim = "n/a" if not b else (b["key"] if b["binding"] else f"none binding (nearest {b['key']})")
        moved = ", ".join(f"{c} {v['qps']:g}/{v['burst']}" for c, v in k["client_limits"].items()) or "-"
        lines.append(f"| {k['plan']} | {k['cell']} | {moved} | {k['slo']} | {k['knee']} ({k['verdict']}) | "
                     f"{k['failing']} | {tried} | {lim} | "
                     f"{_pr(b.get('knee')) if b else 'n/a'} -> {_pr(b.get('failing')) if b else 'n/a'} | "
                     + (", ".join(f"{x['key']} {x['pressure']:.2f}" for x in (b or {}).get("next") or []) or "-") + " |")
    lines += ["", "What bound, in words (the figures at the first failing rate):", ""]
    seen = set()
    for k in doc["knees"]:
        b = k["bound_first"]
        if not b or (k["cell"], b["key"]) in seen:
            continue
        seen.add((k["cell"], b["key"]))
        words = (b.get("failing") or {}).get("words") or b["words"]
        lines.append(f"- {k['cell']}: {b['key']}{'' if b['binding'] else ' (nearest, not binding)'}: {words}")
    lines += ["", "## Does the explanation hold?", ""] + [f"- {e}" for e in doc["explanation"]]
    if doc["reproducibility"]:
        ok = all(r["within_one_step"] for r in doc["reproducibility"])
        lines += ["", f"Reproducible (two runs of one plan, every knee within one bisection step): "
                      f"**{'yes' if ok else 'NO'}**"]
    lines += ["", "Projections (apiserver CPU cores; every one extrapolated, with its 95% prediction error):", ""]
    for p in doc["projections"]:
        if p["component"] == "apiserver" and p["resource"] == "cpu_cores_avg":
            err = f"+/- {p['error_95']:.2f}" if p["error_95"] is not None else "(no error: " + p["fit_note"] + ")"
            val = "n/a" if p["value"] is None else f"{p['value']:.2f}"
            lines.append(f"- run {p['run']} ({p['profile']}): {p['nodes']:,} nodes at {p['pods_per_s']:g} pods/s: "
                         f"{val} {err} cores; {p['label']}")
    for r in doc["runs"]:
        lines += ["", f"Answers of the {r['plan']} plan:", ""] + [f"- {a}" for a in r["answers"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], Path(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "report":
        report(Path(sys.argv[2]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "write":
        write([Path(a) for a in sys.argv[2:]])
    else:
        sys.exit(__doc__)
