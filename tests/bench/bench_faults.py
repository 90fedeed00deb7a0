"""``make bench-faults``: training gangs through faults at 1,000 and 5,000 GPU nodes, per controller and policy.

Every trial is a full ``hollowscale run`` of one variant on a fresh local control plane with the ``scale``
profile (clients' rate limits lifted, JobSet's too), so what is measured is what a user's run reports:
``measurements.training`` (:mod:`hollowscale.training`: per fault the time until the controller reacts and
until the job runs whole again, GPU-hours wasted, the effective training time ratio), the jobs failed for
good, the components' and the harness's CPU, and which limit binds (:mod:`hollowscale.measure.attribution`).

Points (``--points``; each variant repeated ``--repeats`` times, medians reported):

* ``faults-1000``: 1,000 8-GPU nodes, gangs of 64 and 128 whole-node pods;
* ``faults-5000``: 5,000 8-GPU nodes, gangs of 128 and 256 whole-node pods.

Each gang's work is ``--run-s`` seconds and it checkpoints every ``--checkpoint-s``; pods crash (exit 137) at
``--pod-rate`` per GPU-hour held and nodes are lost at ``--node-rate`` per GPU-hour held (deleted 30 s after,
repaired 2 min after), both fault processes over the whole load and settle, seeded: a few faults per job.
Variants (the same arrivals and fault seeds): ``job-podfailurepolicy`` (Indexed Jobs, one index replaced,
disruptions ignored), ``jobset-recreate`` and ``jobset-blockingrecreate`` (JobSets restarted whole),
``kueue-requeue`` (the Indexed Jobs admitted by Kueue, evicted and requeued by its ``waitForPodsReady`` when a
pod is not back within 30 s), ``kueue-requeue-5s`` (the same within 5 s: below the Job controller's 10 s
backoff, so Kueue evicts on every crash).

Writes ``reports/bench/faults.json`` and ``.md`` after every trial (``--merge`` adds to the file, ``--extend``
keeps a variant's committed trials): date, machine, load average at each trial's start, versions, the
command, per point the medians and every trial, beside the published anchors (:data:`ANCHORS`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fullrun  # noqa: E402
from bench_topology import binding_summary  # noqa: E402
from fullrun import add_trials, get, harness_cores, median, run_trial  # noqa: E402
from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

from hollowscale.scenario import parse_scenario  # noqa: E402
from hollowscale.versions import JOBSET_VERSION  # noqa: E402

#: the published figures on recovering training jobs, as issue 36 quotes them
ANCHORS = [
    {"source": "JobSet's in-place restart KEP (kubernetes-sigs/jobset), as quoted in issue 36",
     "figure": "recreating a JobSet's pods takes several minutes at 1,000+ nodes"},
    {"source": "a 5,000-node prototype of in-place restart, as quoted in issue 36",
     "figure": "2 min 10 s to recreate against about 10 s restarting in place"},
]
DIFFERENCES = [
    "hollow nodes: a pod starts when the agent writes it Running (no image pull, no container runtime, no "
    "NCCL rendezvous), so the recovery here is the control plane's part only: the controllers' reaction, "
    "the scheduler's binding and the API server's writes",
    "recovery is measured from the fault to the moment every pod of the job runs again (the next attempt's "
    "start), from the run's pod watch; the anchors' figures include the workload's own restart",
    "in-place restart is not measured: it needs JobSet's agent sidecar and the kubelet's RestartAllContainers, "
    "real processes a hollow node does not run",
]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
#: variant -> the kind of workload it submits
KINDS = {"job-podfailurepolicy": "job", "jobset-recreate": "jobset-r", "jobset-blockingrecreate": "jobset-b",
         "kueue-requeue": "job-q", "kueue-requeue-5s": "job-q"}
#: Kueue's waitForPodsReady per Kueue variant.  kueue-requeue: a Job whose pods are not all Ready 30 s after one
#: failed is evicted, requeued after 10 s or more; the Job controller replaces a failed index in about 10 s, so
#: Kueue hardly ever evicts (what a cautious user configures).  kueue-requeue-5s: the recovery timeout below that
#: 10 s (scenarios/training-faults.yaml's 5 s), so every crash ends in an eviction and a requeue.
PODS_READY = {"kueue-requeue": {"timeout": "5m", "recovery_timeout": "30s", "backoff_base_s": 10, "backoff_max_s": 120},
              "kueue-requeue-5s": {"timeout": "5m", "recovery_timeout": "5s", "backoff_base_s": 5, "backoff_max_s": 30}}
POINTS = {"faults-1000": (1000, (64, 128)), "faults-5000": (5000, (128, 256))}


def _workload(kind: str, pods: int, args: argparse.Namespace) -> dict[str, Any]:
    res = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}
    w: dict[str, Any] = {"name": f"{kind}-{pods}", "share": 1, "run_duration": f"{args.run_s}s",
                         "same_duration": True, "checkpoint_interval": f"{args.checkpoint_s}s",
                         "gang": {"min_members": "all"}}
    if kind in ("job", "job-q"):
        w.update(kind="Job", queued=kind == "job-q", backoff_limit_per_index=3, pod_failure_policy={"ignore_disruptions": True},
                 roles=[{"name": "worker", "replicas": pods, "resources": res, "tolerations": [TOLERATION]}])
    else:
        strategy = "Recreate" if kind == "jobset-r" else "BlockingRecreate"
        w.update(kind="JobSet", backoff_limit=0, failure_policy={"max_restarts": 20, "restart_strategy": strategy},
                 roles=[{"name": "leader", "replicas": 1, "resources": res, "tolerations": [TOLERATION]},
                        {"name": "workers", "replicas": pods - 1, "resources": res, "tolerations": [TOLERATION]}])
    return w


def scenario_doc(point: str, args: argparse.Namespace) -> dict[str, Any]:
    """The point's scenario: every kind's workloads, a variant per kind choosing its own."""
    nodes, sizes = POINTS[point]
    gangs = max(1, round(0.7 * nodes / (sum(sizes) / len(sizes))))
    rate = round(gangs / args.load_s, 4)
    span = f"{args.load_s + args.run_s * 2}s"
    return {
        "name": point, "description": f"bench-faults {point}",
        "cluster": {"backend": "local", "profile": "scale", "namespace": "bench-faults", "jobset": True},
        "agents": {"shards": max(1, nodes // 2500), "ready_timeout_s": 900},
        "pools": [{"name": "gpu", "count": nodes,
                   "resources": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
                   "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "taints": [GPU_TAINT]}],
        "workloads": [_workload(kind, n, args) for kind in dict.fromkeys(KINDS.values()) for n in sizes],
        # gangs for about 70% of the nodes arrive over the load and run together: rate x load x mean gang = 0.7 x nodes
        # (one Locust user paced at that rate; max_instances stops it at the count)
        "arrival": {"curve": "constant", "rate": rate, "per_user_rate": rate, "duration_s": args.load_s,
                    "max_instances": gangs, "seed": 36},
        "faults": [{"type": "pod-failures", "at_s": "10s", "rate_per_gpu_hour": args.pod_rate, "duration_s": span,
                    "exit_code": 137, "seed": 36},
                   {"type": "node-lost", "at_s": "10s", "rate_per_gpu_hour": args.node_rate, "duration_s": span,
                    "delete_after_s": "30s", "repair_after_s": "120s", "seed": 37}],
        "tenants": [{"name": "ml", "quotas": {"gpu": {"cpu": str(nodes * 128), "memory": f"{nodes}Ti",
                                                      "nvidia.com/gpu": nodes * 8}}}],
        "variants": [{"name": v, "workloads": [f"{k}-{n}" for n in sizes],
                      **({"kueue": True, "kueue_pods_ready": PODS_READY[v]} if v in PODS_READY else {})}
                     for v, k in KINDS.items()],
        "measurements": {"settle_timeout_s": args.settle_s, "scrape_interval_s": 5},
        "slo_defaults": False, "slos": [], "timeout_s": 7200,
    }


def figures_of(s: dict[str, Any]) -> dict[str, Any]:
    """The figures a trial contributes, from its summary.json."""
    m = s.get("measurements") or {}
    t = m.get("training") or {}
    ts = t.get("summary") or {}
    return {
        "complete": s.get("complete"), "incomplete_reason": s.get("incomplete_reason"),
        "summary": ts, "jobs": len(t.get("jobs") or []),
        "recovered_p50_s": get(ts, "recovered_s", "p50"), "recovered_p99_s": get(ts, "recovered_s", "p99"),
        "reaction_p50_s": get(ts, "reaction_s", "p50"), "reaction_p99_s": get(ts, "reaction_s", "p99"),
        "wasted_gpu_hours": ts.get("wasted_gpu_hours"), "ettr": ts.get("ettr"), "restarts": ts.get("restarts"),
        "faults_fired": ts.get("faults_fired"), "unrecovered": ts.get("unrecovered"),
        "jobs_failed_for_good": ts.get("jobs_failed_for_good"),
        "components_cpu": {k: v.get("cpu_cores_avg") for k, v in (get(m, "components", "by_job") or {}).items()},
        "harness_cpu_cores": harness_cores(s), "binding": get(m, "attribution", "words"),
        # Kueue's own counter (kueue_evicted_workloads_total over the run); None where Kueue did not run
        "kueue_evicted": get(m, "batch_prometheus", "kueue", "evicted_workloads", "total"),
    }


def trial(doc: dict[str, Any], variant: str, work: Path, tag: str) -> dict[str, Any]:
    from hollowscale.scenario.batch import VariantSpec

    sc = parse_scenario(doc, f"bench-faults:{doc['name']}")
    v = sc.with_variant(next(VariantSpec(**x) for x in doc["variants"] if x["name"] == variant))
    record, summary = run_trial(v, work, tag, f"bf-{tag}")
    return {"variant": variant, **record, **figures_of(summary)}


KEYS = ("recovered_p50_s", "recovered_p99_s", "reaction_p50_s", "reaction_p99_s", "wasted_gpu_hours", "ettr",
        "restarts", "faults_fired", "unrecovered", "jobs_failed_for_good", "kueue_evicted", "harness_cpu_cores")


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over a variant's repeats."""
    return {"n": len(rows), **{k: median(rows, k) for k in KEYS},
            "binding_summary": binding_summary([str(r.get("binding")) for r in rows])}


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(doc: dict[str, Any]) -> str:
    f = doc["facts"]
    out = [f"# bench-faults ({f['date']})", "",
           f"Machine: {f['machine']['cores']} cores, {f['machine']['memory_gib']} GiB, load average at the start "
           f"{f['machine']['load_average_1_5_15']}; Kubernetes {f['versions']['kubernetes']}, Kueue {f['versions'].get('kueue')}, JobSet "
           f"{doc.get('jobset_version')}. Command: `{doc['command']}`. Medians of n trials, each a fresh local "
           "cluster.", "",
           "| point | variant | n | whole again p50 / p99 s | reacted p50 / p99 s | GPU-h wasted | ETTR | restarts | "
           "faults | unrecovered | failed for good | Kueue evictions | harness cores | binds |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc.get("results", []):
        for name, v in r["variants"].items():
            m = v["medians"]
            out.append(f"| {r['point']} | {name} | {m['n']} | {m['recovered_p50_s']} / {m['recovered_p99_s']} | "
                       f"{m['reaction_p50_s']} / {m['reaction_p99_s']} | {m['wasted_gpu_hours']} | {m['ettr']} | "
                       f"{m['restarts']} | {m['faults_fired']} | {m['unrecovered']} | {m['jobs_failed_for_good']} | "
                       f"{_or_dash(m.get('kueue_evicted'))} | {m['harness_cpu_cores']} | {m['binding_summary']} |")
    out += ["", "## Trials", "", *fullrun.trial_lines(doc)]
    out += ["", "## Anchors", "", *[f"- {a['source']}: {a['figure']}" for a in ANCHORS],
            *[f"- differs: {d}" for d in DIFFERENCES], ""]
    out += [f"- not measured: {n}" for n in doc.get("not_measured", [])]
    out += [f"- note: {n}" for n in doc.get("notes", [])]
    return "\n".join(out) + "\n"


def save(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    fullrun.save(args.out, "faults", doc, markdown)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default=",".join(POINTS), help="comma-separated points: " + ", ".join(POINTS))
    ap.add_argument("--variants", default="", help="only these variants (default: all: " + ", ".join(KINDS) + ")")
    ap.add_argument("--repeats", type=int, default=3, help="trials per variant (medians reported)")
    ap.add_argument("--load-s", type=float, default=120.0, help="seconds over which the gangs arrive")
    ap.add_argument("--run-s", type=float, default=300.0, help="each gang's work, seconds")
    ap.add_argument("--checkpoint-s", type=float, default=60.0, help="seconds of work between checkpoints")
    ap.add_argument("--pod-rate", type=float, default=0.03, help="pod crashes per GPU-hour held")
    ap.add_argument("--node-rate", type=float, default=0.005, help="nodes lost per GPU-hour held")
    ap.add_argument("--settle-s", type=float, default=1200.0, help="settle seconds per trial")
    ap.add_argument("--merge", action="store_true", help="add to the existing faults.json")
    ap.add_argument("--extend", action="store_true", help="with --merge: keep a variant's trials, run what lacks")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-faults")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    old = args.out / "faults.json"
    doc: dict[str, Any] = json.loads(old.read_text()) if args.merge and old.is_file() else {"results": []}
    doc.update(facts=machine_facts(), command="python " + " ".join(sys.argv), jobset_version=JOBSET_VERSION,
               anchors=ANCHORS, differences=DIFFERENCES)
    only = {v for v in args.variants.split(",") if v}
    for point in (p for p in args.points.split(",") if p):
        res = next((r for r in doc["results"] if r.get("point") == point), {"point": point, "variants": {}})
        doc["results"] = [r for r in doc["results"] if r.get("point") != point] + [res]
        for name in (v for v in KINDS if not only or v in only):
            print(f"{point} / {name}", flush=True)

            def one(i: int, point: str = point, name: str = name) -> dict[str, Any]:
                r = trial(scenario_doc(point, args), name, args.work, f"{point}-{name}-{i}")
                print(f"  trial {i}: exit {r['exit']}, whole again p50 {r['recovered_p50_s']} s, ETTR {r['ettr']}, "
                      f"wall {r['wall_s']} s", flush=True)
                return r

            add_trials(res, name, args.repeats, args.extend, one, summarise, lambda: save(args, doc))
    print(markdown(portable(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
