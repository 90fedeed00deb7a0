"""Side by side, in one run: CPU per submitted workload instance, this tree's load generator vs another's.

Locust's hot path per create is: draw the next instance from the mix, build its manifests, encode
them with orjson.  This times exactly that (``WorkloadMix.next_instance`` + ``orjson.dumps``) for
the scenario's mix, in fresh subprocesses alternating between the two source trees (``--before``, a
checkout of an older revision, e.g. ``git worktree add /tmp/before REV``), and reports the medians.
Alternating rounds in one run keeps a shared machine's noise out of the ratio.

Usage: ``python tests/bench/ab_manifests.py --before /tmp/before --rounds 7 --instances 20000``
writes ``reports/bench/ab-manifests.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from portable import portable  # noqa: E402

#: runs inside a subprocess whose sys.path starts with the tree under test
PROBE = r"""
import json, sys, time
import orjson
from loadgen.spec import load_spec
from loadgen.workloads import WorkloadMix
spec = load_spec(sys.argv[1])
mix = WorkloadMix(spec, run_id="ab", seed=1)
n = int(sys.argv[2])
for _ in range(200):  # warm up
    for sub in mix.next_instance():
        orjson.dumps(sub.body)
t0, c0 = time.perf_counter(), time.process_time()
objects = 0
for _ in range(n):
    for sub in mix.next_instance():
        orjson.dumps(sub.body)
        objects += 1
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "objects": objects}))
"""


def probe(tree: Path, scenario: Path, instances: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run([sys.executable, "-c", PROBE, str(scenario), str(instances)], cwd=tree, env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="source tree of the older revision")
    ap.add_argument("--scenario", default="scenarios/default.yaml", help="scenario whose mix is drawn")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--instances", type=int, default=20000)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": ROOT}
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            samples[name].append(probe(tree, tree / args.scenario, args.instances))
    result: dict[str, object] = {
        "benchmark": "ab-manifests", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]},
        "command": " ".join(["python", "tests/bench/ab_manifests.py", *sys.argv[1:]]),
        "rounds": args.rounds, "instances_per_round": args.instances, "scenario": args.scenario,
    }
    per: dict[str, dict[str, float]] = {}
    for name, runs in samples.items():
        cpu_us = [r["cpu_s"] / args.instances * 1e6 for r in runs]
        per[name] = {"cpu_us_per_instance_median": round(statistics.median(cpu_us), 2),
                     "cpu_us_per_instance_min": round(min(cpu_us), 2),
                     "objects_per_instance": round(runs[0]["objects"] / args.instances, 3)}
    per["ratio_after_before"] = {"cpu_median": round(per["after"]["cpu_us_per_instance_median"]
                                                     / per["before"]["cpu_us_per_instance_median"], 3)}
    result["figures"] = per
    result = portable(result)  # the trees' folders (--before) relative to the repo or the temp folder
    out = ROOT / "reports" / "bench" / "ab-manifests"
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    md = [f"# Load generator hot path, before vs after ({result['date']})", "",
          f"Command: `{result['command']}` ({args.rounds} alternating rounds of {args.instances} instances of "
          f"`{args.scenario}`'s mix; `WorkloadMix.next_instance` + `orjson.dumps`, CPU time of the process).", "",
          "| tree | CPU µs per instance, median | min | objects per instance |", "|---|---|---|---|"]
    for name in trees:
        f = per[name]
        md.append(f"| {name} | {f['cpu_us_per_instance_median']} | {f['cpu_us_per_instance_min']} | "
                  f"{f['objects_per_instance']} |")
    md += ["", f"after / before (median CPU): **{per['ratio_after_before']['cpu_median']}**; "
           f"load average {result['machine']['load_average_1_5_15']}."]  # type: ignore[index]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
