"""bench-faults' pure parts: each point's scenario validates with a variant per controller that submits its own
workloads, a trial's figures come from its summary, and the report renders medians and trials."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_faults as bench

from hollowscale.scenario import parse_scenario
from hollowscale.scenario.batch import VariantSpec

ARGS = argparse.Namespace(run_s=300.0, checkpoint_s=60.0, load_s=120.0, pod_rate=0.03, node_rate=0.005,
                          settle_s=1200.0)


def test_each_point_validates_and_each_variant_runs_its_own_controller() -> None:
    for point, (nodes, sizes) in bench.POINTS.items():
        doc = bench.scenario_doc(point, ARGS)
        sc = parse_scenario(doc, point)
        assert sc.nodes_total == nodes and {f.type for f in sc.faults} == {"pod-failures", "node-lost"}
        # gangs for ~70% of the nodes (to the nearest gang) arrive over the load, from one user paced at the rate
        mean = sum(sizes) / len(sizes)
        a = sc.load.arrival
        assert abs(a.max_instances * mean - 0.7 * nodes) <= mean / 2
        assert a.users_at(0) == 1 and abs(a.expected_instances() - a.max_instances) < 0.01 * a.max_instances
        kinds = {}
        for v in doc["variants"]:
            chosen = sc.with_variant(VariantSpec(**v)).workloads
            kinds[v["name"]] = {(w.kind, w.failure_policy.restart_strategy if w.failure_policy else None)
                                for w in chosen}
            assert sorted(int(w.name.rsplit("-", 1)[1]) for w in chosen) == sorted(sizes)
        assert kinds == {"job-podfailurepolicy": {("Job", None)}, "jobset-recreate": {("JobSet", "Recreate")},
                         "jobset-blockingrecreate": {("JobSet", "BlockingRecreate")}, "kueue-requeue": {("Job", None)},
                         "kueue-requeue-5s": {("Job", None)}}
        variants = {v["name"]: VariantSpec(**v) for v in doc["variants"]}
        # both Kueue variants submit the same queued Jobs, once each in the scenario; only the recovery timeout differs
        assert len({w.name for w in sc.workloads}) == len(sc.workloads)
        for name, timeout in (("kueue-requeue", "30s"), ("kueue-requeue-5s", "5s")):
            requeue = sc.with_variant(variants[name])
            assert requeue.cluster.kueue and requeue.cluster.kueue_pods_ready.to_kueue()["recoveryTimeout"] == timeout
            assert all(w.queued for w in requeue.workloads)
        assert not sc.with_variant(variants["jobset-recreate"]).cluster.kueue


def test_figures_medians_and_the_report() -> None:
    summary = {"complete": True, "duration_s": 100.0, "collector": {"busy_s": 5.0}, "measurements": {
        "training": {"summary": {"recovered_s": {"p50": 12.0, "p99": 40.0}, "reaction_s": {"p50": 2.0, "p99": 9.0},
                                 "wasted_gpu_hours": 3.5, "ettr": 0.91, "restarts": 4, "faults_fired": 6,
                                 "unrecovered": 0, "jobs_failed_for_good": 0}, "jobs": [{}, {}]},
        "harness_processes": {"agents": {"cpu_cores_avg": 0.1}}, "attribution": {"words": "bound by cpu:apiserver"},
        "batch_prometheus": {"kueue": {"evicted_workloads": {"total": 7.0, "by_reason": {"PodsReadyTimeout": 7.0}}}}}}
    f = bench.figures_of(summary)
    assert (f["recovered_p50_s"], f["ettr"], f["jobs"], f["harness_cpu_cores"]) == (12.0, 0.91, 2, 0.15)
    assert f["kueue_evicted"] == 7.0
    rows = [dict(f, recovered_p50_s=v) for v in (10.0, 12.0, 30.0)]
    m = bench.summarise(rows)
    assert (m["n"], m["recovered_p50_s"], m["ettr"]) == (3, 12.0, 0.91)
    doc = {"facts": {"date": "d", "machine": {"cores": 2, "memory_gib": 24, "load_average_1_5_15": [1, 1, 1]},
                     "versions": {"kubernetes": "v1.36.3"}}, "command": "python x", "jobset_version": "v0.12.0",
           "results": [{"point": "faults-1000", "variants": {"jobset-recreate": {
               "medians": m, "trials": [dict(r, started="s", commit="c", load_average_at_start=[1.0], exit=0,
                                             wall_s=1.0) for r in rows]}}}]}
    md = bench.markdown(dict(doc, notes=["read this"]))
    assert "| faults-1000 | jobset-recreate | 3 | 12.0 / 40.0 |" in md and "## Anchors" in md
    assert "| 0 | 0 | 7.0 | 0.15 | bound by cpu:apiserver (3 of 3) |" in md  # ... unrecovered, failed for good, Kueue evictions
    assert "- note: read this" in md
