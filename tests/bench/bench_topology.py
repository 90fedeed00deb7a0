"""``make bench-topology``: gangs placed by topology at scale, per variant, on fresh local clusters.

Every trial is a full ``hollowscale run`` of one variant of a point's scenario on a fresh local control
plane with the ``scale`` profile (the clients' rate limits lifted, Kueue's too: on the ``default`` profile
the first kueue-perf trial was bound by kube-controller-manager's QPS 20, creating the Jobs' pods, 533 of
601 jobs unfinished, which measures the Job controller and not topology), so what is measured is what a user's run reports:
``measurements.topology`` (placement quality, fragmentation, Kueue's admission, its admission cycle,
GPU-hours lost to spread: :mod:`hollowscale.topology`), the batch figures, the scheduler's throughput,
the components' and the harness's CPU, and which limit binds (:mod:`hollowscale.measure.attribution`).

Points (``--points``, all by default; each repeated ``--repeats`` times, medians reported):

* ``kueue-perf``: Kueue's own TAS performance shape (1 block x 10 racks x 64 nodes of 96 CPU / 256Gi, Kueue
  v0.17.0 test/performance/scheduler/configs/tas), its three workload classes (2-pod small, medium, large;
  rack required or preferred) queued to 30 ClusterQueues in 5 cohorts, variants kueue-tas-required and
  kueue-tas-preferred; beside Kueue's CI figures, with how the setups differ (:data:`KUEUE_TAS_ANCHOR`);
* ``scale-2560`` / ``scale-5120``: 8-GPU nodes in racks of 32 under blocks of 8 racks (``dgx-blocks``),
  training gangs of 8-64 whole-node pods, every variant: workloads admitted/s, admission cycle p50/p99,
  placement quality;
* ``preempt-2048``: a preemption-heavy mix at 2,048 nodes: low-priority 8-pod gangs fill the cluster, then
  high-priority gangs that need preemption (the regime of kubernetes-sigs/kueue#13148): Kueue's admission
  cycle p50/p99/max, whether v0.17.0 shows the long cycles;
* ``intree-5000``: in-tree TAS (KEP-5732, alpha in v1.36.3) at 5,000 nodes in 50 racks: the scheduler's
  pods/s beside upstream's 104-114 (:data:`INTREE_ANCHOR`);
* ``registration-5000``: 5,000 hollow nodes registered and Ready with and without topology labels (the
  same pools, :func:`hollow.topology.without_levels`): what the labels add.

Writes ``reports/bench/topology.json`` and ``.md`` after every trial (an interrupted bench keeps what it
measured; ``--merge`` adds points to an existing file): date, machine, load average at each trial's start,
versions, the command, and per point the medians and every trial.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fullrun  # noqa: E402
from fullrun import add_trials, harness_cores, run_trial  # noqa: E402
from fullrun import get as _get  # noqa: E402
from fullrun import median as _median  # noqa: E402
from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

from hollowscale.scenario import parse_scenario  # noqa: E402

#: Kueue's TAS performance test, read from sigs.k8s.io/kueue v0.17.0 test/performance/scheduler/configs/tas
#: (generator.yaml, rangespec.yaml) and its runner; the CI figure is the issue's reading of Kueue's CI
KUEUE_TAS_ANCHOR = {
    "source": "sigs.k8s.io/kueue v0.17.0 test/performance/scheduler/configs/tas/{generator,rangespec}.yaml; "
              "runner/ and minimalkueue/ (envtest: kube-apiserver and etcd, no kube-scheduler, no kubelet)",
    "shape": "1 block x 10 racks x 64 nodes = 640 nodes of 96 CPU / 256Gi; one TAS ResourceFlavor; Topology "
             "block/rack/hostname",
    "queues": "5 cohorts x 6 ClusterQueues = 30, nominal 20 CPU + borrowing limit 100 each",
    "workloads": "500 per ClusterQueue = 15,000: 2-pod small (500m per pod, 200 ms), medium and large classes, "
                 "each rack-required, rack-preferred or balanced; ~385/s offered at the start",
    "figure": "mean wall time about 401 s for the 15,000 workloads (Kueue's CI, as read in issue 35)",
}
DIFFERENCES = [
    "ours runs a real kube-scheduler and hollow kubelets: Kueue's TAS assigns the pods, the scheduler binds them "
    "and the agent runs them; Kueue's test has no scheduler and marks its workloads finished itself",
    "ours offers the load through Locust at a constant rate on 2 cores (--kueue-perf-rate jobs/s for "
    "--kueue-perf-load-s), not 15,000 workloads at ~385/s: the figure compared is workloads admitted per second "
    "and Kueue's own admission-attempt duration, not the wall time of the whole set",
    "ours has no ClusterQueue borrowing limit (the tenants' quotas are nominal, lent within the cohort) and no "
    "'balanced' class (not a variant here)",
]
#: KEP-5732's measurement of the topologyaware plugin, as the issue quotes it
INTREE_ANCHOR = {"source": "KEP-5732 (TopologyAwareWorkloadScheduling), as quoted in issue 35",
                 "figure": "104-114 pods/s at 5,000 nodes / 50 racks when every placement is scored"}

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ALL_VARIANTS = {
    "default": {"name": "default", "gang_scheduling": True, "topology": "none"},
    "kueue-tas-required": {"name": "kueue-tas-required", "kueue": True, "topology": "kueue-required"},
    "kueue-tas-preferred": {"name": "kueue-tas-preferred", "kueue": True, "topology": "kueue-preferred"},
    "kueue-tas-slice": {"name": "kueue-tas-slice", "kueue": True, "topology": "kueue-slice"},
    "intree-tas": {"name": "intree-tas", "gang_scheduling": True, "topology": "intree"},
}


def _base(name: str, nodes: int, pool: dict[str, Any], workloads: list[dict[str, Any]],
          tenants: list[dict[str, Any]], rate: float, load_s: float, settle_s: float) -> dict[str, Any]:
    return {
        "name": name, "description": f"bench-topology {name}",
        "cluster": {"backend": "local", "profile": "scale",
                    "namespace": "bench-topo"},
        "agents": {"shards": max(1, nodes // 2500), "ready_timeout_s": 900},
        "pools": [pool], "workloads": workloads, "tenants": tenants,
        "arrival": {"curve": "constant", "rate": rate, "duration_s": load_s, "seed": 35},  # per_user_rate: 1, or the rate when lower
        "measurements": {"settle_timeout_s": settle_s, "scrape_interval_s": 5},
        "slo_defaults": False, "slos": [], "timeout_s": 3600,
    }


def _gang(name: str, pods: int, share: float, resources: dict[str, Any], run: Any, level: str = "rack",
          priority: str | None = None, slice_size: int | None = None, slice_level: str = "rack") -> dict[str, Any]:
    topo: dict[str, Any] = {"level": level, "mode": "require"}
    if slice_size:
        topo.update(slice_level=slice_level, slice_size=slice_size)
    w: dict[str, Any] = {"name": name, "kind": "Job", "share": share, "run_duration": run, "same_duration": True,
                         "gang": {"min_members": "all"}, "queued": True, "topology": topo,
                         "roles": [{"name": "worker", "replicas": pods, "resources": resources,
                                    "tolerations": [TOLERATION]}]}
    if priority:
        w["priority_class"] = priority
    return w


def kueue_perf_doc(args: argparse.Namespace) -> dict[str, Any]:
    """Kueue's TAS perf shape and classes (pods per class and CPU as Kueue's generator.yaml)."""
    pool = {"name": "tas", "count": 640, "resources": {"cpu": "96", "memory": "256Gi", "pods": "110"},
            "labels": {"tas-node-group": "tas"}, "topology": {"shape": "kueue-perf"}}
    cpu = {"small": "500m", "medium": "2500m", "large": "10"}
    run = {"small": "200ms", "medium": "500ms", "large": "1s"}
    share = {"small": 350, "medium": 100, "large": 50}
    workloads = [_gang(f"{c}-rack", 2, share[c], {"cpu": cpu[c], "memory": "1Gi"}, run[c]) for c in cpu]
    for w in workloads:
        w["roles"][0].pop("tolerations")
    tenants = [{"name": f"cq-{i}", "share": 1, "cohort": f"cohort-{i % 5}",
                "quotas": {"tas": {"cpu": "20", "memory": "200Gi"}}} for i in range(30)]
    return _base("kueue-perf", 640, pool, workloads, tenants, args.kueue_perf_rate, args.kueue_perf_load_s,
                 args.settle_s)


def dgx_doc(nodes: int, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """8-GPU nodes, racks of 32 under blocks of 8 racks; whole-node gangs of 8, 16, 32 and 64 pods."""
    pool = {"name": "dgx", "count": nodes,
            "resources": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "taints": [GPU_TAINT],
            "topology": {"shape": "dgx-blocks"}}
    res = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}
    run = {"dist": "uniform", "min": "30s", "max": "90s"}
    # a rack holds 32 whole nodes: the 64-pod gangs ask for one block (8 racks), the others for one rack (in the
    # session run of 2026-12-07 the 64-pod gangs asked for a rack, could never fit one, and kept Kueue's and the
    # in-tree variants' 64-pod gangs waiting for the whole run)
    workloads = [_gang(f"train-{n}", n, s, res, run, level="rack" if n <= 32 else "block", slice_size=n // 2)
                 for n, s in ((8, 4), (16, 3), (32, 2), (64, 1))]
    tenants = [{"name": "ml", "quotas": {"dgx": {"cpu": str(nodes * 128), "memory": f"{nodes}Ti",
                                                 "nvidia.com/gpu": nodes * 8}}}]
    return _base(name, nodes, pool, workloads, tenants, args.scale_rate, args.load_s, args.settle_s)


def preempt_doc(args: argparse.Namespace) -> dict[str, Any]:
    """2,048 dgx nodes, the tenant's quota half of them; low-priority 8-pod gangs (5 min) arrive at 3x the rate
    of high-priority 16-pod gangs, which must preempt low ones once the quota is held."""
    doc = dgx_doc(2048, args, "preempt-2048")
    res = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}
    doc["workloads"] = [_gang("low", 8, 3, res, "5m", priority="low"),
                        _gang("high", 16, 1, res, {"dist": "uniform", "min": "30s", "max": "60s"}, priority="high")]
    doc["priority_classes"] = [{"name": "low", "value": 10}, {"name": "high", "value": 1000}]
    half = 2048 // 2  # quota for half the nodes: once the low gangs hold it, every high gang must preempt
    doc["tenants"] = [{"name": "ml", "quotas": {"dgx": {"cpu": str(half * 128), "memory": f"{half}Ti",
                                                        "nvidia.com/gpu": half * 8}}}]
    doc["arrival"]["rate"] = args.preempt_rate
    return doc


def preempt_many_doc(args: argparse.Namespace) -> dict[str, Any]:
    """kueue#13148's regime: 2,048 dgx nodes, the quota half of them held by low-priority one-node workloads (10 min,
    so they hold it for the whole window), under high-priority 128-pod gangs that need one block (256 nodes, 30-60 s):
    every high gang admitted must preempt up to 128 low workloads, so each of Kueue's preemption simulations weighs
    hundreds of candidates, the TAS evaluation the issue found hot (its fixes came in v0.17.8, after our v0.17.0)."""
    doc = dgx_doc(2048, args, "preempt-many-2048")
    res = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}
    doc["workloads"] = [_gang("low", 1, 20, res, "10m", priority="low"),
                        _gang("high", 128, 1, res, {"dist": "uniform", "min": "30s", "max": "60s"},
                              level="block", priority="high", slice_size=None)]
    doc["priority_classes"] = [{"name": "low", "value": 10}, {"name": "high", "value": 1000}]
    half = 2048 // 2
    doc["tenants"] = [{"name": "ml", "quotas": {"dgx": {"cpu": str(half * 128), "memory": f"{half}Ti",
                                                        "nvidia.com/gpu": half * 8}}}]
    doc["arrival"]["rate"] = args.preempt_many_rate
    return doc


def intree_doc(args: argparse.Namespace) -> dict[str, Any]:
    """5,000 8-GPU nodes in 50 racks of 100 (rack -> host levels), whole-node gangs of 8 and 16 in one rack."""
    pool = {"name": "r50", "count": 5000,
            "resources": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "taints": [GPU_TAINT],
            "topology": {"levels": [{"name": "rack", "label": "hollowscale.io/topology-rack", "fanout": 100},
                                    {"name": "host", "label": "kubernetes.io/hostname"}]}}
    res = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}
    workloads = [_gang(f"train-{n}", n, 1, res, "2m") for n in (8, 16)]
    for w in workloads:
        w["queued"] = False
    return _base("intree-5000", 5000, pool, workloads, [], args.intree_rate, args.intree_load_s, args.settle_s)


def figures_of(s: dict[str, Any]) -> dict[str, Any]:
    """The figures a trial contributes, from its summary.json."""
    m = s.get("measurements") or {}
    t = m.get("topology") or {}
    b = m.get("batch") or {}
    adm = t.get("admission") or {}
    wall = s.get("load_duration_s") or 0
    admitted = _get(adm, "admitted_s", "count")
    timings = s.get("timings") or {}
    return {
        "complete": s.get("complete"), "incomplete_reason": s.get("incomplete_reason"),
        "jobs_submitted": _get(m, "jobs", "submitted"),
        "workloads_admitted": admitted,
        "workloads_admitted_per_s": round(admitted / wall, 3) if admitted and wall else None,
        "kueue_admission_attempt_ms": t.get("kueue_admission_attempt_ms"),
        "scheduler": m.get("scheduler"),
        "admission_s": adm,
        # the placement's figures without its per-gang list (the run's own summary keeps that)
        "placement": {k: v for k, v in (t.get("placement") or {}).items() if k != "listed"}, "spread": t.get("spread"),
        "fragmentation": t.get("fragmentation"),
        "jobs_per_hour": b.get("jobs_completed_per_hour"),
        "throughput": t.get("throughput"),
        "gpu_allocation_pct": m.get("gpu_allocation_pct"),
        "scheduler_pods_per_s": m.get("scheduling_throughput_pods_per_s"),
        "registration_s": round((timings.get("agents") or 0) + (timings.get("ready-barrier") or 0), 2),
        "components_cpu": {k: v.get("cpu_cores_avg") for k, v in (_get(m, "components", "by_job") or {}).items()},
        "harness_cpu_cores": harness_cores(s),
        "binding": _get(m, "attribution", "words"),
        # Kueue's own counters: how many workloads its preemptions evicted, and the cycles that found no room
        # (a preempting workload's attempts end inadmissible until its victims are gone)
        "kueue_evicted_workloads": _get(m, "batch_prometheus", "kueue", "evicted_workloads", "total"),
        "kueue_cycle_inadmissible_ms": _get(t, "kueue_admission_attempt_ms", "by_result", "inadmissible"),
    }


def trial(doc: dict[str, Any], variant: dict[str, Any], work: Path, tag: str) -> dict[str, Any]:
    from hollowscale.scenario.batch import VariantSpec

    doc = dict(doc, variants=[variant]) if variant else doc  # validated with the scenario, as a user's file is
    sc = parse_scenario(doc, f"bench-topology:{doc['name']}")
    v = sc.with_variant(VariantSpec(**variant)) if variant else sc
    record, summary = run_trial(v, work, tag, f"bt-{tag}")
    return {"variant": variant.get("name", "-"), **record, **figures_of(summary)}


#: the jobs-per-hour decomposition's figures (hollowscale/topology/throughput.py) a bench row shows
THROUGHPUT_KEYS = ("window_s", "gangs", "completed", "not_completed.spread", "not_completed.waits",
                   "not_completed.waits_and_spread", "not_completed.too_late", "not_completed.other",
                   "completed_wait_s_avg", "completed_stretch_s_avg", "last_completed.wait_s",
                   "last_completed.stretch_s")


def _pct(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [v for r in rows for v in [_get(r, "placement", "within_one_domain_pct", key)] if isinstance(v, (int, float))]
    return round(statistics.median(vals), 1) if vals else None


def _cycle(rows: list[dict[str, Any]], name: str, q: str) -> float | None:
    vals = [v for r in rows for v in [_get(r, name, q)] if isinstance(v, (int, float))]
    return round(statistics.median(vals), 4) if vals else None


_LIMIT = re.compile(r"^(bound by|no limit reached its threshold; nearest) (\S+?)(?=: | at )")
_CORES = re.compile(r"used ([0-9.]+) cores")


def _limit_key(words: str) -> str:
    m = _LIMIT.match(words)
    return f"{'bound by' if m.group(1) == 'bound by' else 'nearest'} {m.group(2)}" if m else words[:60]


def binding_summary(words: list[str]) -> str:
    """The trials' attributions in a few words: each limit named, bound by or nearest, with the range of the cores
    it names and how many trials said so (``nearest cpu:apiserver 0.54-0.57 cores (3 of 3)``)."""
    said: dict[str, list[float]] = {}
    count: dict[str, int] = {}
    for w in words:
        key = _limit_key(w)
        said.setdefault(key, []).extend(float(c) for c in _CORES.findall(w)[:1])
        count[key] = count.get(key, 0) + 1
    out = []
    for key, cores in said.items():
        span = f" {min(cores):g}-{max(cores):g} cores" if len(set(cores)) > 1 else f" {cores[0]:g} cores" if cores else ""
        out.append(f"{key}{span} ({count[key]} of {len(words)})")
    return "; ".join(out)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over a variant's repeats."""
    return {"n": len(rows), "workloads_admitted_per_s": _median(rows, "workloads_admitted_per_s"),
            "scheduler_pods_per_s": _median([{"x": _get(r, "scheduler_pods_per_s", "avg")} for r in rows], "x"),
            "kueue_cycle_p50_ms": _cycle(rows, "kueue_admission_attempt_ms", "p50"),
            "kueue_cycle_p99_ms": _cycle(rows, "kueue_admission_attempt_ms", "p99"),
            "kueue_cycle_inadmissible_p99_ms": _cycle(rows, "kueue_cycle_inadmissible_ms", "p99"),
            "kueue_evicted_workloads": _median(rows, "kueue_evicted_workloads"),
            "inside_one_rack_pct": _pct(rows, "rack"), "inside_one_block_pct": _pct(rows, "block"),
            "scheduler_cycle_p99_ms": _cycle([{"x": _get(r, "scheduler", "attempt_duration_ms")} for r in rows], "x", "p99"),
            "jobs_per_hour": _median(rows, "jobs_per_hour"),
            "throughput": {key: _median([{"x": _get(r, "throughput", *key.split("."))} for r in rows], "x")
                           for key in THROUGHPUT_KEYS},
            "gpu_hours_lost_to_spread": _median([{"x": _get(r, "spread", "gpu_hours_lost")} for r in rows], "x"),
            "registration_s": _median(rows, "registration_s"),
            "harness_cpu_cores": _median(rows, "harness_cpu_cores"),
            "binding": sorted({str(r.get("binding")) for r in rows}),
            "binding_summary": binding_summary([str(r.get("binding")) for r in rows])}


POINTS: dict[str, tuple[Callable[[argparse.Namespace], dict[str, Any]], list[str]]] = {
    "kueue-perf": (kueue_perf_doc, ["kueue-tas-required", "kueue-tas-preferred"]),
    "scale-2560": (lambda a: dgx_doc(2560, a, "scale-2560"), list(ALL_VARIANTS)),
    "scale-5120": (lambda a: dgx_doc(5120, a, "scale-5120"), list(ALL_VARIANTS)),
    "preempt-2048": (preempt_doc, ["kueue-tas-required"]),
    "preempt-many-2048": (preempt_many_doc, ["kueue-tas-required"]),
    "intree-5000": (intree_doc, ["intree-tas", "default"]),
}


def registration_point(args: argparse.Namespace, work: Path, doc: dict[str, Any]) -> None:
    """5,000 nodes (blocks of 5 racks of 20, NVLink label: 11 labels a node) registered by one agent on one local
    control plane, with and without the topology labels (:func:`hollow.topology.without_levels`), alternating
    which goes first; timed from the agent's start until it reports every node registered (``wait_healthy``),
    the nodes deleted and gone before the next round."""
    import yaml
    from kubernetes import client

    from hollow.pools import parse_pools, pools_to_doc
    from hollow.process import start_agent
    from hollow.topology import without_levels
    from hollowscale.cluster.local import LocalCluster
    from kubecore.config import client_configuration

    folder = work / "registration"
    folder.mkdir(parents=True, exist_ok=True)
    pools = parse_pools({"pools": [{"name": "reg", "count": args.registration_nodes,
                                    "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                                    "topology": {"levels": [
                                        {"name": "block", "label": "hollowscale.io/topology-block", "fanout": 5},
                                        {"name": "rack", "label": "hollowscale.io/topology-rack", "fanout": 20},
                                        {"name": "host", "label": "kubernetes.io/hostname"}],
                                        "nvlink_label": "nvidia.com/gpu.clique"}}]}, "bench-topology:registration")
    files = {}
    for name, ps in (("with-labels", pools), ("without-labels", without_levels(pools))):
        files[name] = folder / f"pools-{name}.yaml"
        files[name].write_text(yaml.safe_dump(pools_to_doc(ps)))
    res: dict[str, Any] = {"point": "registration-5000", "nodes": args.registration_nodes, "variants": {},
                           "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "trials": []}
    doc["results"] = [r for r in doc["results"] if r.get("point") != res["point"]] + [res]
    local = LocalCluster(folder / "cluster", profile="default")
    info = local.up(timeout_s=180)
    core = client.CoreV1Api(client.ApiClient(client_configuration(str(info.kubeconfig))))
    try:
        for r in range(args.registration_rounds):
            for name in (("with-labels", "without-labels") if r % 2 == 0 else ("without-labels", "with-labels")):
                t0 = time.monotonic()
                agent = start_agent(info.kubeconfig, files[name], folder / f"agent-{name}-{r}.log",
                                    "--delete-nodes-on-exit")
                agent.wait_healthy(900)
                seconds = round(time.monotonic() - t0, 2)
                meta = core.read_node("reg-7").metadata
                labels = len((meta.labels if meta is not None else None) or {})
                res["trials"].append({"labels": name, "round": r, "registration_s": seconds, "node_labels": labels})
                print(f"  registration {name} round {r}: {seconds} s ({labels} labels a node)", flush=True)
                agent.stop(300)
                deadline = time.monotonic() + 300
                while core.list_node(label_selector="hollowscale.io/pool=reg", limit=1).items \
                        and time.monotonic() < deadline:
                    time.sleep(2)
    finally:
        local.down()
    for name in files:
        rows = [t for t in res["trials"] if t["labels"] == name]
        res["variants"][name] = {"medians": {**summarise([]), "n": len(rows),
                                             "registration_s": _median(rows, "registration_s")}}
    a = res["variants"]["with-labels"]["medians"]["registration_s"]
    b = res["variants"]["without-labels"]["medians"]["registration_s"]
    res["labels_add_pct"] = round(100 * (a - b) / b, 1) if a and b else None
    save(args, doc)


def markdown(doc: dict[str, Any]) -> str:
    f = doc["facts"]
    out = [f"# bench-topology ({f['date']})", "",
           f"Machine: {f['machine']['cores']} cores, {f['machine']['memory_gib']} GiB, load average at the start "
           f"{f['machine']['load_average_1_5_15']}; Kubernetes {f['versions']['kubernetes']}, Kueue "
           f"{f['versions']['kueue']}. Command: `{doc['command']}`. Medians of n trials, each a fresh local cluster.",
           "", "| point | variant | n | admitted/s | Kueue cycle p50 / p99 ms | scheduler pods/s | in one rack % | "
               "in one block % | GPU-h lost to spread | registration s | harness cores | binds |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc.get("results", []):
        for name, v in r["variants"].items():
            m = v["medians"]
            out.append(f"| {r['point']} | {name} | {m['n']} | {m['workloads_admitted_per_s']} | "
                       f"{m['kueue_cycle_p50_ms']} / {m['kueue_cycle_p99_ms']} | {m['scheduler_pods_per_s']} | "
                       f"{m['inside_one_rack_pct']} | {m['inside_one_block_pct']} | {m['gpu_hours_lost_to_spread']} | "
                       f"{m['registration_s']} | {m['harness_cpu_cores']} | "
                       f"{m.get('binding_summary') or binding_summary(m['binding'])} |")
        if r.get("labels_add_pct") is not None:
            out.append(f"| {r['point']} | labels add | | | | | | | | {r['labels_add_pct']} % | | |")
    out += ["", "## Preemption (the points with priorities)", "",
            "Kueue's own counters: workloads its preemptions evicted, and its admission attempts that ended "
            "inadmissible (a preempting workload's attempts do until its victims are gone): p99 from the "
            "histogram's buckets, so bounded by them.", "",
            "| point | variant | workloads evicted | inadmissible attempt p99 ms | all attempts p99 ms |", "|---|---|---|---|---|"]
    for r in doc.get("results", []):
        if not str(r.get("point", "")).startswith("preempt"):
            continue
        for name, v in r["variants"].items():
            m = v["medians"]
            out.append(f"| {r['point']} | {name} | {m.get('kueue_evicted_workloads')} | "
                       f"{m.get('kueue_cycle_inadmissible_p99_ms')} | {m['kueue_cycle_p99_ms']} |")
    out += ["", "## Jobs per hour, and why the others did not complete", "",
            "Gangs created in the batch window: completed, or put down to the first of spread, waits, both, "
            "created too late for any variant, other (hollowscale/topology/throughput.py; medians of the trials "
            "that have it).", "",
            "| point | variant | jobs/h | window s | gangs | completed | spread | waits | waits and spread | too late "
            "| other | completed: wait s avg | stretch s avg | last gang: wait s | stretch s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc.get("results", []):
        for name, v in r["variants"].items():
            tp = v["medians"].get("throughput") or {}
            if tp.get("gangs") is not None:
                out.append(f"| {r['point']} | {name} | {v['medians']['jobs_per_hour']} | "
                           + " | ".join(str(tp.get(k)) for k in THROUGHPUT_KEYS) + " |")
    out += ["", "## Trials", "", "Each trial's start (UTC), the commit it ran on and the load average at its start; "
            "trials with no start recorded are the first run, committed with its results in a7ced31.", ""]
    out += fullrun.trial_lines(doc)
    out += ["", "## Anchors", "", f"- Kueue TAS: {json.dumps(KUEUE_TAS_ANCHOR)}",
            *[f"- differs: {d}" for d in DIFFERENCES], f"- in-tree TAS: {json.dumps(INTREE_ANCHOR)}", ""]
    for note in doc.get("not_measured", []):
        out.append(f"- not measured: {note}")
    for note in doc.get("notes", []):
        out.append(f"- note: {note}")
    return "\n".join(out) + "\n"


def save(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    fullrun.save(args.out, "topology", doc, markdown)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default=",".join([*POINTS, "registration-5000"]),
                    help="comma-separated points: " + ", ".join([*POINTS, "registration-5000"]))
    ap.add_argument("--variants", default="", help="only these variants of each point (default: the point's own)")
    ap.add_argument("--repeats", type=int, default=3, help="trials per variant (medians reported)")
    ap.add_argument("--load-s", type=float, default=120.0, help="load seconds of the scale points")
    ap.add_argument("--settle-s", type=float, default=180.0, help="settle seconds per trial")
    ap.add_argument("--kueue-perf-rate", type=float, default=10.0, help="jobs/s offered at the kueue-perf point")
    ap.add_argument("--kueue-perf-load-s", type=float, default=60.0, help="load seconds at the kueue-perf point")
    # 1: the rate the committed scale points ran at (they asked 0.5 with a user paced at 1/s, which ran at 1/s)
    ap.add_argument("--scale-rate", type=float, default=1.0, help="gangs/s offered at the scale points")
    ap.add_argument("--preempt-rate", type=float, default=2.0, help="gangs/s offered at the preemption point")
    ap.add_argument("--preempt-many-rate", type=float, default=6.0, help="workloads/s offered at the "
                    "preempt-many point (20 low one-node workloads to each high 128-pod gang)")
    ap.add_argument("--intree-rate", type=float, default=6.0, help="gangs/s offered at the in-tree point (~72 pods/s)")
    ap.add_argument("--intree-load-s", type=float, default=60.0, help="load seconds at the in-tree point")
    ap.add_argument("--registration-nodes", type=int, default=5000, help="nodes of the registration point")
    ap.add_argument("--registration-rounds", type=int, default=8, help="rounds of the registration point (each "
                    "registers with and without labels)")
    ap.add_argument("--merge", action="store_true", help="add to the existing topology.json")
    ap.add_argument("--extend", action="store_true", help="with --merge: a variant keeps its earlier trials and "
                    "runs only as many more as --repeats still lacks (each trial records its start and commit)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-topology")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    old = args.out / "topology.json"
    doc: dict[str, Any] = json.loads(old.read_text()) if args.merge and old.is_file() else {"results": []}
    doc.update(facts=machine_facts(), command="python " + " ".join(sys.argv), kueue_tas_anchor=KUEUE_TAS_ANCHOR,
               differences=DIFFERENCES, intree_anchor=INTREE_ANCHOR)
    only = {v for v in args.variants.split(",") if v}
    for point in (p for p in args.points.split(",") if p):
        if point == "registration-5000":
            registration_point(args, args.work, doc)
            continue
        make, variants = POINTS[point]
        # with --merge a point keeps the variants this invocation does not run again
        res = next((r for r in doc["results"] if r.get("point") == point), {"point": point, "variants": {}})
        doc["results"] = [r for r in doc["results"] if r.get("point") != point] + [res]
        for name in (v for v in variants if not only or v in only):
            print(f"{point} / {name}", flush=True)

            def one(i: int, point: str = point, name: str = name,
                    make: Callable[[argparse.Namespace], dict[str, Any]] = make) -> dict[str, Any]:
                r = trial(make(args), ALL_VARIANTS[name], args.work, f"{point}-{name}-{i}")
                print(f"  trial {i}: exit {r['exit']}, admitted/s {r['workloads_admitted_per_s']}, "
                      f"pods/s {_get(r, 'scheduler_pods_per_s', 'avg')}, wall {r['wall_s']} s", flush=True)
                return r

            add_trials(res, name, args.repeats, args.extend, one, summarise, lambda: save(args, doc))
    print(markdown(portable(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
