"""Placement figures (hollowscale/topology) from recorded pod, node and Workload objects, numbers by hand.

The cluster: one pool ``gpu`` of 8 nodes x 4 GPUs, levels block (fanout 2) > rack (fanout 2) > host, so
block0 = gpu-0..3 (rack0 = gpu-0,1; rack1 = gpu-2,3) and block1 = gpu-4..7 (rack2 = gpu-4,5; rack3 =
gpu-6,7); every node carries the pool's declared nvidia.com/gpu taint, and gpu-7 also the unhealthy taint
(no GPU of it is free).  Times: seconds after E (the load's start).

* gang A (workload ``train``, level rack): 2 x 4 GPUs on gpu-0, gpu-1, bound 5, running 6, done 46;
  Workload created 0, QuotaReserved/Admitted 4; conditions rack/1.13 and block/1.3 (a mismatch);
* gang B (``train``): 2 x 4 GPUs on gpu-2 (block0) and gpu-4 (block1): cluster; bound 15, running 16,
  done 76, the second pod deleted at 76 (gone from the LIST at the end); Workload created 2, admitted 14;
* gang C (``small``, no level: the cluster): 2 x 2 GPUs both on gpu-3, pods created 20, bound 25 and 26
  (server), running 25 to the end (100); conditions host/1;
* gang D (``train``): 2 x 4 GPUs, Workload created 30, pods 31, never bound;
* a pod of no gang holds 1 GPU of gpu-5 from 0 on.
"""

from __future__ import annotations

from typing import Any

import pytest

from hollow.pools import PoolSpec
from hollow.topology import SPREAD_CONDITION
from hollowscale.measure.timeline import Timeline
from hollowscale.timestamps import iso
from hollowscale.topology.figures import topology_measurements
from hollowscale.topology.fragmentation import fits
from hollowscale.topology.levels import PoolLevels, domain, inside
from hollowscale.topology.timeline import node_places, workload_admissions
from loadgen.workloads import ANN_RUN

E = 1_796_637_600.0  # 2026-12-07T10:00:00Z
MS = E * 1000.0
GANG, WORKLOAD, RUN = "hollowscale.io/gang", "hollowscale.io/workload", "hollowscale.io/run"

POOL = PoolSpec.model_validate({
    "name": "gpu", "count": 8, "resources": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"},
    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    "topology": {"levels": [{"name": "block", "label": "hollowscale.io/topology-block", "fanout": 2},
                            {"name": "rack", "label": "hollowscale.io/topology-rack", "fanout": 2},
                            {"name": "host", "label": "kubernetes.io/hostname"}]}})


def node(i: int, tainted: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": f"gpu-{i}", "labels": POOL.topology_labels(i)},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
                     + ([{"key": "hollowscale.io/unhealthy", "value": "true", "effect": "NoSchedule"}] if tainted else [])},
            "status": {"allocatable": {"nvidia.com/gpu": "4", "cpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(uid: str, gang: str, workload: str, gpus: int, created_s: float, node_name: str = "", phase: str = "Pending",
        conditions: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    labels = {RUN: "r1", WORKLOAD: workload} | ({GANG: gang} if gang else {})
    annotations = {ANN_RUN: RUNS[gang]} if gang in RUNS else {}
    return {"metadata": {"uid": uid, "name": uid, "namespace": "team-a", "labels": labels, "annotations": annotations,
                         "creationTimestamp": iso(E + created_s).replace(".000", ""),
                         "ownerReferences": [{"kind": "Job", "uid": f"job-{gang or uid}", "controller": True,
                                              "apiVersion": "batch/v1"}]},
            "spec": {"nodeName": node_name or None,
                     "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase, "conditions": list(conditions)}}


def scheduled(at_s: float) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(E + at_s).replace(".000", "")}


def spread(level: str, factor: float) -> dict[str, Any]:
    return {"type": SPREAD_CONDITION, "status": "True", "reason": level, "message": f"factor={factor:g}",
            "lastTransitionTime": iso(E + 6).replace(".000", "")}


def workload(gang: str, created_s: float, admitted_s: float | None) -> dict[str, Any]:
    conds = [] if admitted_s is None else [
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(E + admitted_s).replace(".000", "")},
        {"type": "Admitted", "status": "True", "lastTransitionTime": iso(E + admitted_s).replace(".000", "")}]
    return {"metadata": {"name": f"job-{gang}-abcde", "namespace": "team-a",
                         "creationTimestamp": iso(E + created_s).replace(".000", "")},
            "spec": {"podSets": [{"name": "main", "count": 2, "template": {
                "metadata": {"labels": {GANG: gang, WORKLOAD: "train"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}}]},
            "status": {"conditions": conds}}


#: each gang's run-duration annotation: the run before any stretch by spread
RUNS = {"ga": "35s", "gb": "46s", "gc": "90s", "gd": "60s"}

#: (uid, gang, workload, GPUs, created, node, bound, running, ended, deleted, end conditions)
PODS: list[tuple[Any, ...]] = [
    ("x", "", "svc", 1, 0, "gpu-5", 0, 0, None, False, ()),
    ("a1", "ga", "train", 4, 4, "gpu-0", 5, 6, 46, False, (scheduled(5), spread("rack", 1.13))),
    ("a2", "ga", "train", 4, 4, "gpu-1", 5, 6, 46, False, (scheduled(5), spread("block", 1.3))),
    ("b1", "gb", "train", 4, 14, "gpu-2", 15, 16, 76, False, (scheduled(15), spread("cluster", 1.3))),
    ("b2", "gb", "train", 4, 14, "gpu-4", 15, 16, 76, True, (scheduled(15), spread("cluster", 1.3))),
    ("c1", "gc", "small", 2, 20, "gpu-3", 25, 25, None, False, (scheduled(25), spread("host", 1.0))),
    ("c2", "gc", "small", 2, 20, "gpu-3", 25, 25, None, False, (scheduled(26), spread("host", 1.0))),
    ("d1", "gd", "train", 4, 31, "", None, None, None, False, ()),
    ("d2", "gd", "train", 4, 31, "", None, None, None, False, ()),
]


def recorded() -> tuple[Timeline, list[dict[str, Any]]]:
    """The run's pod timeline fed the watch events, and the pods a LIST shows at the end."""
    tl = Timeline()
    listed = []
    for uid, gang, wl, gpus, created, where, bound, running, ended, deleted, conds in PODS:
        tl.apply_pod("ADDED", pod(uid, gang, wl, gpus, created), MS + created * 1000)
        if bound is not None:
            tl.apply_pod("MODIFIED", pod(uid, gang, wl, gpus, created, where), MS + bound * 1000)
            tl.apply_pod("MODIFIED", pod(uid, gang, wl, gpus, created, where, "Running", conds), MS + running * 1000)
        final = pod(uid, gang, wl, gpus, created, where, "Succeeded" if ended is not None else
                    "Running" if running is not None else "Pending", conds)
        if ended is not None:
            tl.apply_pod("MODIFIED", final, MS + ended * 1000)
        if deleted:
            tl.apply_pod("DELETED", final, MS + ended * 1000)
        else:
            listed.append(final)
    return tl, listed


@pytest.fixture(scope="module")
def figures() -> tuple[dict[str, Any], dict[str, Any]]:
    tl, listed = recorded()
    nodes = [node(i, tainted=i == 7) for i in range(8)]
    workloads = [workload("ga", 0, 4), workload("gb", 2, 14), workload("gd", 30, None)]
    return topology_measurements(tl.snapshot()[0], listed, nodes, workloads, [POOL], {"train": "rack"},
                                 MS, MS + 100_000, 10.0)


def test_levels_domains_are_paths_from_the_top_and_a_gang_in_a_rack_is_in_its_block() -> None:
    levels = PoolLevels([POOL])
    lv = levels.levels("gpu-6")
    assert [n for n, _ in lv] == ["block", "rack", "host"] and levels.levels("cpu-0") == ()
    assert domain(lv, POOL.topology_labels(6), "rack") == ("gpu-block1", "gpu-rack3")
    assert domain(lv, {"hollowscale.io/topology-block": "b"}, "rack") is None
    assert inside(lv, "rack") == ["block", "rack"] and inside(lv, "cluster") == []
    assert levels.factor("gpu-1", "rack") == 1.13 and levels.factor("gpu-1", "cluster") == 1.3
    assert levels.factor("other-1", "rack") is None


def test_nodes_and_workloads_read_from_their_objects() -> None:
    nodes = node_places([node(0), node(7, tainted=True)], {"nvidia.com/gpu"})
    assert nodes["gpu-0"].gpus == 4 and nodes["gpu-0"].usable and not nodes["gpu-7"].usable
    assert not node_places([node(0)])["gpu-0"].usable  # a taint its pool does not declare: nothing fits there
    (a,) = workload_admissions([workload("ga", 0, 4), {"metadata": {"name": "no-gang"}, "spec": {"podSets": [
        {"count": 1, "template": {"metadata": {"labels": {}}}}]}}])
    assert (a.gang, a.created_at, a.quota_reserved_at, a.admitted_at, a.member_gpus) == ("ga", E, E + 4, E + 4,
                                                                                         (4.0, 4.0))


def test_each_gang_its_domains_per_level_and_the_level_that_holds_it(figures: tuple[dict[str, Any], Any]) -> None:
    pl = figures[0]["placement"]
    assert figures[0]["levels"] == ["block", "rack", "host"]
    assert (pl["gangs"], pl["placed"]) == (4, 3)  # D never bound
    assert pl["by_level"] == {"cluster": 1, "host": 1, "rack": 1}
    rows = {r["gang"]: r for r in pl["listed"]}
    assert rows["team-a/ga"]["domains"] == {"block": 1, "rack": 1, "host": 2} and rows["team-a/ga"]["level"] == "rack"
    assert rows["team-a/gb"]["domains"] == {"block": 2, "rack": 2, "host": 2} and rows["team-a/gb"]["level"] == "cluster"
    assert rows["team-a/gc"]["domains"] == {"block": 1, "rack": 1, "host": 1} and rows["team-a/gc"]["level"] == "host"
    # inside one block: A (rack) and C (host); one rack: the same; one host: C only
    assert pl["within_one_domain_pct"] == {"block": round(200 / 3, 3), "rack": round(200 / 3, 3),
                                           "host": round(100 / 3, 3)}
    # racks spanned [1, 2, 1]: nearest rank p50 = 1, p99 = 2; hosts [2, 2, 1]: p50 = 2
    assert (pl["domains_spanned"]["rack"]["p50"], pl["domains_spanned"]["rack"]["p99"],
            pl["domains_spanned"]["rack"]["max"]) == (1, 2, 2)
    assert pl["domains_spanned"]["host"]["p50"] == 2


def test_gpu_hours_lost_to_spread_from_the_condition_and_the_mismatch(figures: tuple[dict[str, Any], Any]) -> None:
    sp = figures[0]["spread"]
    a1 = 4 * 40 / 3600 * (1 - 1 / 1.13)  # condition rack 1.13, Running 6 -> done 46
    a2 = 4 * 40 / 3600 * (1 - 1 / 1.3)  # its condition says block 1.3: the factor the agent applied
    b = 4 * 60 / 3600 * (1 - 1 / 1.3)  # b1 by its condition, b2 (gone) by the pool's cluster factor
    run = 2 * 4 * 40 / 3600 + 2 * 4 * 60 / 3600 + 2 * 2 * 75 / 3600  # C runs 25 -> the end, 100
    assert sp["gpu_hours_lost"] == round(a1 + a2 + 2 * b, 4)
    assert sp["gpu_hours_run"] == round(run, 4)
    assert sp["lost_pct"] == round(100 * (a1 + a2 + 2 * b) / run, 3)
    assert sp["gpu_hours_lost_by_level"] == {"block": round(a2, 4), "cluster": round(2 * b, 4), "host": 0.0,
                                             "rack": round(a1, 4)}
    assert (sp["members_ran"], sp["factor_from_condition"], sp["factor_from_node_labels"], sp["no_factor"]) == (
        6, 5, 1, 0)
    assert sp["mismatches"]["members"] == 1 and sp["mismatches"]["gangs"] == 1
    assert sp["mismatches"]["examples"] == ["team-a/ga a2: condition block, node labels rack"]


def test_admission_and_created_to_all_bound_on_the_apiservers_clock(figures: tuple[dict[str, Any], Any]) -> None:
    ad = figures[0]["admission"]
    assert ad["workloads"] == 3 and ad["not_admitted_at_end"] == 1
    assert (ad["admitted_s"]["p50"], ad["admitted_s"]["p99"], ad["admitted_s"]["count"]) == (4, 12, 2)
    assert (ad["quota_reserved_s"]["p50"], ad["quota_reserved_s"]["p99"]) == (4, 12)
    # A: Workload 0 -> last PodScheduled 5; C: first pod 20 -> 26; B has a pod gone; D never bound
    assert (ad["created_to_all_bound_s"]["p50"], ad["created_to_all_bound_s"]["p99"],
            ad["created_to_all_bound_s"]["count"]) == (5, 6, 2)
    assert ad["gangs_with_pods_gone"] == 1
    assert figures[0]["members"] == {"total": 8, "gone_before_the_end": 1}


def test_fragmentation_over_time(figures: tuple[dict[str, Any], dict[str, Any]]) -> None:
    fr, series = figures[0]["fragmentation"], figures[1]
    assert series["t_s"] == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert series["free_gpus"] == [27, 19, 11, 7, 7, 15, 15, 15, 23, 23, 23]  # gpu-7 tainted: never free
    assert series["whole_free"]["block"] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert series["whole_free"]["rack"] == [2, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert series["whole_free"]["host"] == [6, 4, 2, 1, 1, 3, 3, 3, 5, 5, 5]
    assert series["largest_free_gpus"]["block"] == [16, 11, 7, 7, 7, 8, 8, 8, 12, 12, 12]
    assert series["largest_free_gpus"]["rack"] == [8, 8, 4, 4, 4, 8, 8, 8, 8, 8, 8]
    # next waiting gang: A at 0, B at 10 (rack: 2 x 4 fit rack0/1, not rack2 (4+3) nor rack3 (4+0));
    # C at 20 (the cluster: fits); D from 30 on (rack)
    assert series["unusable_gpus"] == [11, 11, 0, 7, 7, 7, 7, 7, 15, 15, 15]
    assert series["waiting_gangs"] == [1] * 11
    assert fr["unusable_gpus"] == {"avg": round(102 / 11, 3), "min": 0, "max": 15, "samples": 11}
    assert fr["free_gpus"]["avg"] == round(185 / 11, 3)
    assert fr["whole_free_domains"]["rack"] == {"avg": round(9 / 11, 3), "min": 0, "max": 2, "samples": 11}
    assert fr["largest_free_domain_gpus"]["block"]["avg"] == round(108 / 11, 3)
    assert fr["domains"] == {"block": 2, "rack": 4, "host": 8}
    assert fr["unusable_nodes"] == ["gpu-7"]


def test_jobs_per_hour_and_why_the_others_did_not_complete(figures: tuple[dict[str, Any], Any]) -> None:
    """Window [0, 100] s: A and B completed (46, 76); C runs from 25 for 90 s, past the end even unstretched
    from its creation at 20 (too late); D, created at 31 and never placed, would have ended at 91 (waits).
    A waited 4 -> 6 and B 14 -> 16; A's stretch is 35 s x 0.13 (its first member's condition), B's 46 x 0.3."""
    t = figures[0]["throughput"]
    assert (t["window_s"], t["gangs"], t["completed"], t["jobs_per_hour"]) == (100.0, 4, 2, 72.0)
    assert t["not_completed"] == {"spread": 0, "waits": 1, "waits_and_spread": 0, "too_late": 1, "other": 0,
                                  "unknown": 0}
    assert t["not_completed_per_hour"]["waits"] == 36.0
    assert t["completed_wait_s_avg"] == 2.0 and t["completed_run_s_avg"] == 40.5
    assert t["completed_stretch_s_avg"] == pytest.approx((35 * 0.13 + 46 * 0.3) / 2, abs=1e-3)
    # B completed last (76): created 14, all Running 16, its 46 s run stretched by 1.3
    assert t["last_completed"] == {"gang": "team-a/gb", "created_s": 14.0, "completed_s": 76.0, "wait_s": 2.0,
                                   "run_s": 46.0, "stretch_s": 13.8}


def test_fits_is_best_fit_largest_member_first() -> None:
    assert fits([4, 4], [4, 4]) and not fits([4, 3], [4, 4]) and fits([], [])
    assert fits([3, 5], [3, 2, 3])  # 3 -> the 3, then 3 and 2 into the 5
    assert not fits([2, 2, 2], [3])
