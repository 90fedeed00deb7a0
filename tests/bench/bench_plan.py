"""Benchmark of ``hollowscale plan`` on the small sweep: wall time and knee reproducibility.

Two measured runs of ``hollowscale plan scenarios/plan-small.yaml --fresh``, each under the shared lock,
then one file comparing them::

    flock /work/shared/notes/i11/heavy.lock .venv/bin/python tests/bench/bench_plan.py run /tmp/hs-plan-bench/run1
    flock /work/shared/notes/i11/heavy.lock .venv/bin/python tests/bench/bench_plan.py run /tmp/hs-plan-bench/run2
    .venv/bin/python tests/bench/bench_plan.py write /tmp/hs-plan-bench/run1 /tmp/hs-plan-bench/run2

``write`` produces reports/bench/plan-small.json and .md: per run the wall time (target < 30 min), the
knee per size per SLO with the points tried, whether the second run's knee is within one bisection step
of the first's, and the projections with their error; date, machine and versions inside.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))
sys.path.insert(0, str(REPO))

from machine import machine_facts  # noqa: E402

from hollowscale.plan.bisect import Knee, within_one_step  # noqa: E402

SCENARIO = "scenarios/plan-small.yaml"
TARGET_S = 30 * 60


def run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [str(REPO / ".venv" / "bin" / "hollowscale"), "plan", SCENARIO, "--out", str(out), "--fresh"]
    facts = machine_facts()
    t0 = time.monotonic()
    code = subprocess.run(cmd, cwd=REPO).returncode
    wall = round(time.monotonic() - t0, 1)
    (out / "bench-run.json").write_text(json.dumps({"command": " ".join(cmd[1:]), "exit_code": code, "wall_s": wall,
                                                    "started": facts["date"], "machine": facts["machine"]}, indent=2))
    print(f"plan finished with exit {code} in {wall:.0f}s")
    sys.exit(code)


def _knee(d: dict[str, Any]) -> Knee:
    return Knee(d["slo"], d["knee"], d["passing"], d["failing"], d["verdict"],
                [(t["rate"], t["passed"]) for t in d["tried"]], d["resolution"])


def write(dirs: list[Path]) -> None:
    runs = []
    for d in dirs:
        meta = json.loads((d / "bench-run.json").read_text())
        cap = json.loads((d / "capacity.json").read_text())
        runs.append({"dir": str(d), **meta, "capacity": cap})
    first, second = runs[0]["capacity"], runs[1]["capacity"]
    knees = []
    for c1, c2 in zip(first["cells"], second["cells"], strict=True):
        for slo, k1 in c1["knees"].items():
            k2 = c2["knees"][slo]
            knees.append({"cell": c1["key"], "nodes": c1["nodes"], "slo": slo,
                          "run1": {"knee": k1["knee"], "verdict": k1["verdict"], "step": k1["step"], "tried": k1["tried"]},
                          "run2": {"knee": k2["knee"], "verdict": k2["verdict"], "step": k2["step"], "tried": k2["tried"]},
                          "within_one_step": within_one_step(_knee(k1), _knee(k2))})
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
        "commands": [f"flock /work/shared/notes/i11/heavy.lock .venv/bin/python tests/bench/bench_plan.py run {d}"
                     for d in dirs] + [f".venv/bin/python tests/bench/bench_plan.py write {' '.join(map(str, dirs))}"],
        "target_wall_s": TARGET_S,
        "runs": [{"dir": r["dir"], "command": r["command"], "started": r["started"], "exit_code": r["exit_code"],
                  "wall_s": r["wall_s"], "under_target": r["wall_s"] < TARGET_S, "load_average_at_start":
                  r["machine"].get("load_average_1_5_15"),
                  "points": sum(len(c["points"]) for c in r["capacity"]["cells"]),
                  "answers": r["capacity"]["answers"]} for r in runs],
        "knees": knees,
        "reproducible": all(k["within_one_step"] for k in knees),
        "projections": projections,
    }
    out = REPO / "reports" / "bench"
    (out / "plan-small.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["# Benchmark: hollowscale plan on the small sweep (2 sizes x bisection on rate)", "",
             f"Date {doc['date']}; {doc['machine']['cpu_model']}, {doc['machine']['cores']} cores, "
             f"{doc['machine']['memory_gib']} GiB; Kubernetes {doc['versions']['kubernetes']}, etcd "
             f"{doc['versions']['etcd']}.", "", "Commands:", ""] + [f"    {c}" for c in doc["commands"]] + [
             "", "| run | wall time | under 30 min | points | load average at start |", "|---|---|---|---|---|"]
    for i, r in enumerate(doc["runs"], 1):
        lines.append(f"| {i} | {r['wall_s']:.0f} s ({r['wall_s'] / 60:.1f} min) | {'yes' if r['under_target'] else 'NO'} | "
                     f"{r['points']} | {r['load_average_at_start']} |")
    lines += ["", "| size | SLO | knee run 1 | knee run 2 | step | within one step | points tried run 1 | run 2 |",
              "|---|---|---|---|---|---|---|---|"]
    for k in knees:
        t1 = ", ".join(f"{t['rate']:g}{'+' if t['passed'] else '-'}" for t in k["run1"]["tried"])
        t2 = ", ".join(f"{t['rate']:g}{'+' if t['passed'] else '-'}" for t in k["run2"]["tried"])
        lines.append(f"| {k['nodes']} | {k['slo']} | {k['run1']['knee']} ({k['run1']['verdict']}) | {k['run2']['knee']} "
                     f"({k['run2']['verdict']}) | {max(k['run1']['step'], k['run2']['step']):g} | "
                     f"{'yes' if k['within_one_step'] else 'NO'} | {t1} | {t2} |")
    lines += ["", f"Reproducible (every knee within one bisection step): **{'yes' if doc['reproducible'] else 'NO'}**",
              "", "Projections (apiserver CPU cores; every one extrapolated, with its 95% prediction error):", ""]
    for p in projections:
        if p["component"] == "apiserver" and p["resource"] == "cpu_cores_avg":
            err = f"+/- {p['error_95']:.2f}" if p["error_95"] is not None else "(no error: " + p["fit_note"] + ")"
            val = "n/a" if p["value"] is None else f"{p['value']:.2f}"
            lines.append(f"- run {p['run']}: {p['nodes']:,} nodes at {p['pods_per_s']:g} pods/s: {val} {err} cores; "
                         f"{p['label']}")
    api = [p for p in projections if p["component"] == "apiserver" and p["resource"] == "cpu_cores_avg"
           and p["interval_95"]]
    for n in sorted({p["nodes"] for p in api}):
        ivs = [p["interval_95"] for p in api if p["nodes"] == n]
        if len(ivs) == 2:
            overlap = ivs[0][0] <= ivs[1][1] and ivs[1][0] <= ivs[0][1]
            lines.append(f"- at {n:,} nodes the two runs' 95% intervals {'overlap' if overlap else 'DO NOT overlap'}")
    lines += ["", "Answers of run 2:", ""] + [f"- {a}" for a in doc["runs"][-1]["answers"]]
    (out / "plan-small.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'plan-small.json'} and .md; reproducible: {doc['reproducible']}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        run(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "write":
        write([Path(sys.argv[2]), Path(sys.argv[3])])
    else:
        sys.exit(__doc__)
