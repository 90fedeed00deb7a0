"""``make bench-batch``: the highest sustainable job rate of each scheduling variant (default scheduler,
in-tree gang scheduling, Kueue queues, gang + queues) on the ``scale`` profile, side by side in one run.

Workload: distillation-shaped gang jobs (one 8-GPU student + two 1-GPU teachers running 5 s, ``same_duration``,
queued to one team's LocalQueue) on hollow GPU nodes with room to spare, so the schedulers' and
Kueue's throughput is what limits the rate, not the GPUs.  Each trial is a full ``hollowscale run`` of
that scenario as the variant, at one arrival rate, on a fresh local cluster; a rate is **sustainable**
when every job finished by the end of a short settle and the p99 of created -> all members running
stays under ``--p99-s`` (a backlog that grows pushes it up).  The rate is searched per variant by
doubling from ``--start-rate`` until a trial fails, then by bisection (``--steps``), so the answer is
a bracket [highest sustained, lowest failed] with the trials behind it.

Writes ``reports/bench/batch.json`` and ``.md`` (date, machine, versions, each engine's client QPS).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_facts  # noqa: E402

from hollowscale.run.orchestrator import EXIT_INTERRUPTED, Runner  # noqa: E402
from hollowscale.scenario import parse_scenario  # noqa: E402

VARIANTS = [{"name": "default"}, {"name": "gang", "gang_scheduling": True}, {"name": "queues", "kueue": True},
            {"name": "gang-queues", "gang_scheduling": True, "kueue": True}]


def scenario_doc(rate: float, load_s: float, nodes: int, settle_s: float) -> dict[str, Any]:
    gpus = nodes * 8
    return {
        "name": "bench-batch",
        "description": "distillation-shaped gang jobs at a fixed rate, scale profile, capacity to spare",
        "cluster": {"backend": "local", "profile": "scale", "namespace": "bench-batch"},
        "agents": {"shards": 1, "ready_timeout_s": 300},
        "pools": [{"name": "bb-v100", "count": nodes,
                   "resources": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
                   "labels": {"hollowscale.io/pool": "v100"}}],
        "workloads": [{"name": "distill", "kind": "Job", "run_duration": "5s", "same_duration": True,
                       "gang": {"min_members": "all"}, "queued": True,
                       "roles": [{"name": "student", "replicas": 1,
                                  "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}},
                                 {"name": "teacher", "replicas": 2,
                                  "resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}}]}],
        "tenants": [{"name": "bench", "quotas": {"bb-v100": {"cpu": str(nodes * 128), "memory": f"{nodes}Ti",
                                                             "nvidia.com/gpu": gpus}}}],
        "arrival": {"curve": "constant", "rate": rate, "duration_s": load_s, "per_user_rate": 1.0, "seed": 21},
        "measurements": {"settle_timeout_s": settle_s, "scrape_interval_s": 2},
        "slo_defaults": False,
        "slos": [{"name": "all_finished", "metric": "jobs.unfinished", "op": "<=", "threshold": 0}],
    }


def trial(variant: dict[str, Any], rate: float, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sc = parse_scenario(scenario_doc(rate, args.load_s, args.nodes, args.settle_s), "bench-batch")
    from hollowscale.scenario.batch import VariantSpec

    v = sc.with_variant(VariantSpec(**variant))
    name = f"{variant['name']}-{rate:g}".replace(".", "p")
    t0 = time.monotonic()
    runner = Runner(v, work, quiet=True, run_id=f"bb-{name}", run_dir=work / name, point_latest=False)
    code = runner.run()
    if code == EXIT_INTERRUPTED:  # Ctrl-C / SIGTERM: the trial tore itself down; stop the search too
        raise SystemExit(EXIT_INTERRUPTED)
    s = runner.summary
    m = s.get("measurements") or {}
    b = m.get("batch") or {}
    p99 = ((b.get("job_steps_s") or {}).get("created_to_all_running") or {}).get("p99")
    unfinished = (b.get("instances") or {}).get("unfinished")
    ok = bool(s.get("complete")) and unfinished == 0 and p99 is not None and p99 <= args.p99_s
    return {"rate": rate, "sustained": ok, "exit": code, "complete": s.get("complete"),
            "incomplete_reason": s.get("incomplete_reason"), "jobs": (m.get("jobs") or {}).get("submitted"),
            "unfinished": unfinished, "created_to_all_running_p99_s": p99,
            "scheduling_throughput_pods_per_s": (m.get("scheduling_throughput_pods_per_s") or {}).get("avg"),
            "partial_jobs_max": (b.get("partial_jobs") or {}).get("max"),
            "components_cpu": {k: v.get("cpu_cores_avg") for k, v in ((m.get("components") or {}).get("by_job") or {}).items()},
            "client_qps": (s.get("cluster") or {}).get("client_qps"), "wall_s": round(time.monotonic() - t0, 1),
            "run_dir": str(runner.run_dir)}


def search(variant: dict[str, Any], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    trials: list[dict[str, Any]] = []
    lo, hi = 0.0, None
    rate = args.start_rate
    while hi is None and rate <= args.max_rate:
        t = trial(variant, rate, args, work)
        trials.append(t)
        print(f"  {variant['name']} @ {rate:g} jobs/s: {'ok' if t['sustained'] else 'NOT sustained'} "
              f"(p99 {t['created_to_all_running_p99_s']}, unfinished {t['unfinished']})", flush=True)
        if t["sustained"]:
            lo, rate = rate, rate * 2
        else:
            hi = rate
    for _ in range(args.steps if hi is not None else 0):
        mid = round((lo + hi) / 2, 3)
        t = trial(variant, mid, args, work)
        trials.append(t)
        print(f"  {variant['name']} @ {mid:g} jobs/s: {'ok' if t['sustained'] else 'NOT sustained'}", flush=True)
        lo, hi = (mid, hi) if t["sustained"] else (lo, mid)
    return {"variant": variant, "highest_sustained_jobs_per_s": lo, "lowest_failed_jobs_per_s": hi,
            "pods_per_job": 3, "trials": trials}


def markdown(doc: dict[str, Any]) -> str:
    f = doc["facts"]
    lines = [f"# Batch scheduling: highest sustainable job rate per variant ({f['date']})", "",
             f"Command: `{doc['command']}`  ", f"Machine: {f['machine']['cpu_model']}, {f['machine']['cores']} cores, "
             f"load {f['machine']['load_average_1_5_15']}  ", f"Versions: {json.dumps(f.get('versions', {}))}  ",
             f"Rule: {doc['rule']}", "",
             "| variant | highest sustained (jobs/s) | lowest failed (jobs/s) | pods/s at the highest | trials |",
             "|---|---|---|---|---|"]
    for r in doc["results"]:
        best = next((t for t in r["trials"] if t["sustained"] and t["rate"] == r["highest_sustained_jobs_per_s"]), None)
        lines.append(f"| {r['variant']['name']} | {r['highest_sustained_jobs_per_s']:g} | {r['lowest_failed_jobs_per_s']} | "
                     f"{best['scheduling_throughput_pods_per_s'] if best else 'n/a'} | {len(r['trials'])} |")
    lines += ["", "Client limits (QPS/burst) each variant ran with:", ""]
    for r in doc["results"]:
        qps = next((t["client_qps"] for t in r["trials"] if t.get("client_qps")), {})
        lines.append(f"- {r['variant']['name']}: " + ", ".join(f"{k} {v['qps']:g}/{v['burst']}" for k, v in qps.items()))
    lines += ["", "Trials (rate jobs/s: sustained, created -> all running p99 s, unfinished, wall s):", ""]
    for r in doc["results"]:
        lines.append(f"- {r['variant']['name']}: " + "; ".join(
            f"{t['rate']:g}: {'ok' if t['sustained'] else 'no'}, {t['created_to_all_running_p99_s']}, "
            f"{t['unfinished']}, {t['wall_s']}" for t in r["trials"]))
    lines.append("")
    return "\n".join(lines)


def rerender(path: Path) -> None:
    """Write ``batch.md`` again from ``batch.json`` (after a change of this layout)."""
    doc = json.loads(path.read_text())
    path.with_suffix(".md").write_text(markdown(doc))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200, help="hollow 8-GPU nodes (capacity to spare)")
    ap.add_argument("--load-s", type=float, default=60.0, help="load seconds per trial")
    ap.add_argument("--settle-s", type=float, default=45.0, help="settle seconds per trial")
    ap.add_argument("--start-rate", type=float, default=1.0, help="first rate tried (jobs/s)")
    ap.add_argument("--max-rate", type=float, default=64.0, help="stop doubling here")
    ap.add_argument("--steps", type=int, default=2, help="bisection steps after the doubling")
    ap.add_argument("--p99-s", type=float, default=15.0, help="created -> all members running p99 limit (s)")
    ap.add_argument("--variants", default=",".join(v["name"] for v in VARIANTS), help="comma-separated subset")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-batch")
    args = ap.parse_args()
    wanted = args.variants.split(",")
    results: list[dict[str, Any]] = []
    doc = {"facts": machine_facts(), "command": "python " + " ".join(sys.argv),
           "rule": f"sustained = every job finished within {args.settle_s:g}s of settle and created -> all members "
                   f"running p99 <= {args.p99_s:g}s; {args.load_s:g}s of load per trial, fresh cluster per trial, "
                   f"{args.nodes} x 8-GPU hollow nodes, scale profile",
           "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    for v in VARIANTS:
        if v["name"] in wanted:
            print(f"variant {v['name']}", flush=True)
            results.append(search(v, args, args.work))
            # written after each variant: an interrupted bench keeps what it measured
            (args.out / "batch.json").write_text(json.dumps(doc, indent=2))
            (args.out / "batch.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
