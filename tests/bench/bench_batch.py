"""``make bench-batch``: Kueue's highest sustainable job rate with 1, 4 and 16 ClusterQueues (teams), and
what binds at each, on the ``scale`` profile, beside Kueue's own performance test (``--teams``); or the
highest sustainable rate of each scheduling variant (default scheduler, in-tree gang scheduling, Kueue
queues, gang + queues) side by side (``--variants``, one team).

Workload: distillation-shaped gang jobs (one 8-GPU student + two 1-GPU teachers running 5 s, ``same_duration``,
queued to one team's LocalQueue) on hollow GPU nodes with room to spare, so the schedulers' and
Kueue's throughput is what limits the rate, not the GPUs.  Each trial is a full ``hollowscale run`` of
that scenario as the variant, at one arrival rate, on a fresh local cluster; a rate is **sustainable**
when every job finished by the end of a short settle and the p99 of created -> all members running
stays under ``--p99-s`` (a backlog that grows pushes it up).  The rate is searched per variant by
doubling from ``--start-rate`` until a trial fails, then by bisection (``--steps``), so the answer is
a bracket [highest sustained, lowest failed] with the trials behind it.

Teams: ``--teams 1,4,16`` runs the ``queues`` variant with that many teams, each a namespace, a
LocalQueue and a ClusterQueue (``--cohorts`` cohorts, the teams spread over them round-robin), an equal
share of the arrivals and an equal nominal quota of the GPUs (enough for its share: no borrowing needed,
so the count of queues, not quota, is what changes).  Each trial's limits are ranked from the
components' own ``/metrics`` (Kueue's included) read 10 s after the load starts and when it ends, and the
machine's CPU (:mod:`hollowscale.measure.attribution`); the binding limit at each count is the one that
bound first going up in rate (:func:`hollowscale.measure.attribution.bound_first`).

Writes ``reports/bench/batch.json`` and ``.md`` (``batch-variants.*`` with ``--variants``) (date, machine, load average, versions, each engine's
client QPS, Kueue's own figures beside ours and how the two setups differ).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

from hollowscale.measure.attribution import bound_first  # noqa: E402
from hollowscale.plan.points import point_attribution  # noqa: E402
from hollowscale.plan.scrape import LocalClusterScraper, WindowWatch  # noqa: E402
from hollowscale.run.orchestrator import EXIT_INTERRUPTED, Runner  # noqa: E402
from hollowscale.scenario import parse_scenario  # noqa: E402

#: seconds after the load starts before the measured window (the first admissions, queues filling)
WARMUP_S = 10.0
#: Kueue's own scheduler performance test (kueue v0.17.0 test/performance/scheduler, configs/baseline,
#: read from the source named in ``source``): what it runs and what it measured
KUEUE_ANCHOR = {
    "source": "sigs.k8s.io/kueue v0.17.0 test/performance/scheduler/configs/baseline/{generator,rangespec}.yaml; "
              "runner/generator/generator.go; minimalkueue/main.go",
    "shape": "5 cohorts x 6 ClusterQueues = 30 CQs, one LocalQueue each, one ResourceFlavor, cpu quota 20 nominal + "
             "100 borrowing per CQ",
    "workloads": "per CQ 500: 350 small (1 cpu, 200 ms, every 100 ms), 100 medium (5 cpu, 500 ms, every 500 ms), "
                 "50 large (20 cpu, 1 s, every 1.2 s); 15,000 in all, offered ~385/s at the start",
    "how": "minimalkueue (Kueue's core controllers and scheduler only, client QPS 50 / burst 100) against envtest "
           "(kube-apiserver + etcd; no kube-scheduler, no kubelet, no Jobs, no Pods): the runner creates Workload "
           "objects directly and marks them Finished after their runtime",
    "wall_ms_avg": 351_116.4,
    "workloads_total": 15_000,
    "workloads_per_s_derived": round(15_000 / 351.1164, 1),
    "thresholds": {"maxWallMs": 425_000, "cq min usage %": 55,
                   "avg time to admission ms": {"large": 11_000, "medium": 90_000, "small": 260_000}},
    "note": "42.7 workloads/s is derived (15,000 / 351.1 s average wall time of 5 trial runs), not a figure Kueue "
            "reports; the run drains a backlog most of the time (creation ends after ~60 s per queue), so it is a "
            "drain rate under a deep queue, not a sustained rate with latency held",
}
#: how our setup differs from the anchor, and what follows for the comparison
DIFFERENCES = [
    "objects: ours submits batch/v1 Jobs (Kueue's job integration makes each a Workload, unsuspends it on "
    "admission; the Job controller creates 3 pods, kube-scheduler binds them, hollow kubelets run them 5 s and "
    "the Job completes); Kueue's test creates Workload objects and finishes them itself: no Job controller, no "
    "scheduler, no pods",
    "components: ours runs the full Kueue manager (every controller, webhooks, visibility) beside a full control "
    "plane on the same 2 cores; theirs runs minimalkueue against envtest on a CI machine",
    "client limits: ours at the scale profile (Kueue 5000/10000, kube-scheduler and kube-controller-manager "
    "5000/10000, APF off); theirs 50/100 for minimalkueue",
    "rate: ours is the highest constant arrival rate held with every job finished and created -> all members "
    "running p99 <= 15 s; theirs is 15,000 workloads / average wall time, a drain rate of a deep backlog with "
    "admission waits of 7-215 s on average",
    "queues: ours 1, 4 or 16 ClusterQueues with one workload class and quota to spare; theirs 30 CQs in 5 cohorts "
    "with three classes, preemption and borrowing, quota-bound by design (min CQ usage 55%)",
]
COMPARABLE = ("not like for like: the anchor measures Kueue's admission alone (Workloads without pods, a deep backlog, "
              "client 50/100), ours measures a Job's whole path (Kueue, Job controller, scheduler, pods) at a held "
              "latency on 2 shared cores; the anchor is the order of magnitude Kueue's admission reaches when "
              "nothing else binds, and the binding limit named at each of our counts says whether Kueue's own "
              "loop or something around it stops us first")

VARIANTS = [{"name": "default"}, {"name": "gang", "gang_scheduling": True}, {"name": "queues", "kueue": True},
            {"name": "gang-queues", "gang_scheduling": True, "kueue": True}]


def teams_of(n: int, nodes: int, cohorts: int = 1) -> list[dict[str, Any]]:
    """``n`` teams with an equal share and an equal nominal quota of the pool; cohorts round-robin."""
    per = max(1, nodes // n)
    return [{"name": "bench" if n == 1 else f"team-{i}", "share": 1, "cohort": f"bench-{i % cohorts}",
             "quotas": {"bb-v100": {"cpu": str(per * 128), "memory": f"{per}Ti", "nvidia.com/gpu": per * 8}}}
            for i in range(n)]


def scenario_doc(rate: float, load_s: float, nodes: int, settle_s: float, teams: int = 1,
                 cohorts: int = 1) -> dict[str, Any]:
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
        "tenants": teams_of(teams, nodes, cohorts),
        "arrival": {"curve": "constant", "rate": rate, "duration_s": load_s, "per_user_rate": 1.0, "seed": 21},
        "measurements": {"settle_timeout_s": settle_s, "scrape_interval_s": 2},
        "slo_defaults": False,
        "slos": [{"name": "all_finished", "metric": "jobs.unfinished", "op": "<=", "threshold": 0}],
    }


def trial(variant: dict[str, Any], rate: float, args: argparse.Namespace, work: Path, teams: int = 1,
          cohorts: int = 1) -> dict[str, Any]:
    sc = parse_scenario(scenario_doc(rate, args.load_s, args.nodes, args.settle_s, teams, cohorts), "bench-batch")
    from hollowscale.scenario.batch import VariantSpec

    v = sc.with_variant(VariantSpec(**variant))
    name = (f"{variant['name']}-{teams}cq-{rate:g}" if teams > 1 else f"{variant['name']}-{rate:g}").replace(".", "p")
    t0 = time.monotonic()
    load_avg = [round(x, 2) for x in os.getloadavg()]
    runner = Runner(v, work, quiet=True, run_id=f"bb-{name}", run_dir=work / name, point_latest=False)
    scraper = LocalClusterScraper(work / name / "cluster")  # the trial's own cluster, in its run folder
    watch = WindowWatch(scraper, runner.times, WARMUP_S)
    watch.start()
    try:
        code = runner.run()
    finally:
        watch.stop()
    if code == EXIT_INTERRUPTED:  # Ctrl-C / SIGTERM: the trial tore itself down; stop the search too
        raise SystemExit(EXIT_INTERRUPTED)
    s = runner.summary
    m = s.get("measurements") or {}
    b = m.get("batch") or {}
    p99 = ((b.get("job_steps_s") or {}).get("created_to_all_running") or {}).get("p99")
    unfinished = (b.get("instances") or {}).get("unfinished")
    ok = bool(s.get("complete")) and unfinished == 0 and p99 is not None and p99 <= args.p99_s
    attribution = point_attribution(runner.run_dir, watch.first, watch.last, scraper.info)
    return {"rate": rate, "teams": teams, "cohorts": cohorts, "sustained": ok, "attribution": attribution,
            "binding": (attribution or {}).get("binding"), "exit": code, "complete": s.get("complete"),
            "incomplete_reason": s.get("incomplete_reason"), "jobs": (m.get("jobs") or {}).get("submitted"),
            "unfinished": unfinished, "created_to_all_running_p99_s": p99,
            "scheduling_throughput_pods_per_s": (m.get("scheduling_throughput_pods_per_s") or {}).get("avg"),
            "partial_jobs_max": (b.get("partial_jobs") or {}).get("max"),
            "components_cpu": {k: v.get("cpu_cores_avg") for k, v in ((m.get("components") or {}).get("by_job") or {}).items()},
            "client_qps": (s.get("cluster") or {}).get("client_qps"), "wall_s": round(time.monotonic() - t0, 1),
            "load_average": load_avg,
            "run_dir": str(runner.run_dir)}


def search(variant: dict[str, Any], args: argparse.Namespace, work: Path, teams: int = 1,
           cohorts: int = 1) -> dict[str, Any]:
    trials: list[dict[str, Any]] = []
    lo, hi = 0.0, None
    rate = args.start_rate

    def one(r: float) -> dict[str, Any]:
        t = trial(variant, r, args, work, teams, cohorts)
        trials.append(t)
        print(f"  {variant['name']} x{teams} CQ @ {r:g} jobs/s: {'ok' if t['sustained'] else 'NOT sustained'} "
              f"(p99 {t['created_to_all_running_p99_s']}, unfinished {t['unfinished']}; "
              f"{(t['attribution'] or {}).get('words', 'no attribution')})", flush=True)
        return t

    while hi is None and rate <= args.max_rate:
        if one(rate)["sustained"]:
            lo, rate = rate, rate * 2
        else:
            hi = rate
    for _ in range(args.steps if hi is not None else 0):
        mid = round((lo + hi) / 2, 3)
        lo, hi = (mid, hi) if one(mid)["sustained"] else (lo, mid)
    bound = bound_first([{"rate": t["rate"], "passed": t["sustained"], "attribution": t["attribution"]}
                         for t in trials])
    return {"variant": variant, "teams": teams, "cohorts": cohorts, "highest_sustained_jobs_per_s": lo,
            "lowest_failed_jobs_per_s": hi, "pods_per_job": 3, "bound_first": bound, "trials": trials}


def _limit(b: dict[str, Any] | None) -> str:
    if not b:
        return "n/a"
    return b["key"] if b["binding"] else f"none reached its threshold (nearest {b['key']})"


def _pressures(b: dict[str, Any] | None) -> str:
    def pr(x: dict[str, Any] | None) -> str:
        return "n/a" if not x or x.get("pressure") is None else f"{x['pressure']:.2f} at {x['rate']:g}/s"
    return "n/a" if not b else f"{pr(b.get('knee'))} -> {pr(b.get('failing'))}"


def _next(b: dict[str, Any] | None) -> str:
    return ", ".join(f"{x['key']} {x['pressure']:.2f}" for x in (b or {}).get("next") or []) or "-"


def _variants_markdown(doc: dict[str, Any]) -> list[str]:
    lines = ["| variant | highest sustained (jobs/s) | lowest failed (jobs/s) | pods/s at the highest | binding limit | "
             "trials |", "|---|---|---|---|---|---|"]
    for r in doc["results"]:
        best = next((t for t in r["trials"] if t["sustained"] and t["rate"] == r["highest_sustained_jobs_per_s"]), None)
        lines.append(f"| {r['variant']['name']} | {r['highest_sustained_jobs_per_s']:g} | {r['lowest_failed_jobs_per_s']} | "
                     f"{best['scheduling_throughput_pods_per_s'] if best else 'n/a'} | {_limit(r.get('bound_first'))} | "
                     f"{len(r['trials'])} |")
    return lines


def _teams_markdown(doc: dict[str, Any]) -> list[str]:
    a = doc["kueue_anchor"]
    lines = ["| ClusterQueues (teams) | cohorts | highest sustained (jobs/s = workloads/s) | lowest failed | pods/s at "
             "the highest | Kueue admitted/s at the highest | binding limit (bound first) | its pressure, knee -> "
             "first failing | next at the first failing rate | trials |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        best = next((t for t in r["trials"] if t["sustained"] and t["rate"] == r["highest_sustained_jobs_per_s"]), None)
        admitted = None
        if best and best.get("attribution"):
            lim = next((x for x in best["attribution"]["limits"] if x["key"] == "loop:kueue"), None)
            admitted = (lim or {}).get("figures", {}).get("admitted_per_s")
        lines.append(f"| {r['teams']} | {r['cohorts']} | {r['highest_sustained_jobs_per_s']:g} | "
                     f"{r['lowest_failed_jobs_per_s']} | {best['scheduling_throughput_pods_per_s'] if best else 'n/a'} | "
                     f"{admitted if admitted is not None else 'n/a'} | {_limit(r.get('bound_first'))} | "
                     f"{_pressures(r.get('bound_first'))} | {_next(r.get('bound_first'))} | {len(r['trials'])} |")
    lines += [f"| Kueue's baseline (anchor) | 5 | {a['workloads_per_s_derived']} workloads/s (derived: "
              f"{a['workloads_total']:,} / {a['wall_ms_avg'] / 1000:.1f} s) | - | no pods | - | not measured there | - | - | "
              "5 trial runs |", "",
              "What bound first, in words (at the first failing rate, or the nearest limit where none bound):", ""]
    for r in doc["results"]:
        b = r.get("bound_first")
        words = ((b.get("failing") or {}).get("words") or b["words"]) if b else "no attribution"
        lines.append(f"- {r['teams']} CQ(s): {_limit(b)}: {words}")
    lines += ["", "## Kueue's own performance test (the anchor)", "",
              f"- source: {a['source']}", f"- shape: {a['shape']}", f"- workloads: {a['workloads']}",
              f"- how it is run: {a['how']}",
              f"- result: average wall time {a['wall_ms_avg']:,} ms for {a['workloads_total']:,} workloads -> "
              f"{a['workloads_per_s_derived']} workloads/s; thresholds {json.dumps(a['thresholds'])}",
              f"- note: {a['note']}", "", "## How our setup differs", ""]
    lines += [f"- {d}" for d in doc["differences"]]
    lines += ["", f"Like for like? {doc['comparable']}", ""]
    return lines


def markdown(doc: dict[str, Any]) -> str:
    f = doc["facts"]
    teams = doc.get("mode") == "teams"
    title = ("Kueue: highest sustainable job rate with 1, 4 and 16 ClusterQueues, and what binds" if teams
             else "Batch scheduling: highest sustainable job rate per variant")
    lines = [f"# {title} ({f['date']})", "",
             f"Command: `{doc['command']}`  ", f"Machine: {f['machine']['cpu_model']}, {f['machine']['cores']} cores, "
             f"{f['machine'].get('memory_gib')} GiB; load average at start {f['machine']['load_average_1_5_15']} "
             "(a shared machine: others' work runs beside)  ", f"Versions: {json.dumps(f.get('versions', {}))}  ",
             f"Rule: {doc['rule']}", ""]
    lines += _teams_markdown(doc) if teams else _variants_markdown(doc)
    lines += ["", "Client limits (QPS/burst) each ran with:", ""]
    for r in doc["results"]:
        qps = next((t["client_qps"] for t in r["trials"] if t.get("client_qps")), {})
        lines.append(f"- {r['variant']['name']} x{r.get('teams', 1)}: "
                     + ", ".join(f"{k} {v['qps']:g}/{v['burst']}" for k, v in qps.items()))
    lines += ["", "Trials (rate jobs/s: sustained, created -> all running p99 s, unfinished, binding limit, load "
              "average at start, wall s):", ""]
    for r in doc["results"]:
        lines.append(f"- {r['variant']['name']} x{r.get('teams', 1)}: " + "; ".join(
            f"{t['rate']:g}: {'ok' if t['sustained'] else 'no'}, {t['created_to_all_running_p99_s']}, "
            f"{t['unfinished']}, {t.get('binding') or 'none'}, {t.get('load_average')}, {t['wall_s']}"
            for t in r["trials"]))
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
    ap.add_argument("--variants", default="", help="comma-separated variants to compare (one team each), e.g. "
                    + ",".join(v["name"] for v in VARIANTS) + "; default: the ClusterQueue sweep (--teams)")
    ap.add_argument("--teams", default="1,4,16", help="ClusterQueue counts for the queues variant")
    ap.add_argument("--cohorts", type=int, default=1, help="cohorts the teams are spread over")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-batch")
    args = ap.parse_args()
    wanted = [w for w in args.variants.split(",") if w]
    results: list[dict[str, Any]] = []
    doc: dict[str, Any] = {
        "facts": machine_facts(), "command": "python " + " ".join(sys.argv), "mode": "variants" if wanted else "teams",
        "rule": f"sustained = every job finished within {args.settle_s:g}s of settle and created -> all members "
                f"running p99 <= {args.p99_s:g}s; {args.load_s:g}s of load per trial, fresh cluster per trial, "
                f"{args.nodes} x 8-GPU hollow nodes, scale profile; limits ranked over [load start + {WARMUP_S:g} s, "
                "load end] from the components' own /metrics and /proc/stat (hollowscale/measure/attribution.py)",
        "results": results}
    if not wanted:
        doc.update(kueue_anchor=KUEUE_ANCHOR, differences=DIFFERENCES, comparable=COMPARABLE)
    args.out.mkdir(parents=True, exist_ok=True)

    stem = "batch-variants" if wanted else "batch"  # the two modes' files side by side, neither overwrites the other

    def save() -> None:  # after each search: an interrupted bench keeps what it measured
        shown = portable(doc)  # run folders relative to the repo: no machine path in a committed file
        (args.out / f"{stem}.json").write_text(json.dumps(shown, indent=2) + "\n")
        (args.out / f"{stem}.md").write_text(markdown(shown))

    for v in VARIANTS:
        if v["name"] in wanted:
            print(f"variant {v['name']}", flush=True)
            results.append(search(v, args, args.work))
            save()
    if not wanted:
        queues = next(v for v in VARIANTS if v["name"] == "queues")
        for n in (int(x) for x in args.teams.split(",")):
            print(f"queues with {n} ClusterQueue(s) in {min(n, args.cohorts)} cohort(s)", flush=True)
            results.append(search(queues, args, args.work, n, min(n, args.cohorts)))
            save()
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
