"""The replay's parts that need no cluster (issue 28, parts 3-5): a trace's nodes as pools, its pods as
API objects (counted and DRA-shared), the scheduler's verdicts read from pods and claims, and the
replay's figures from its records."""

from __future__ import annotations

from pathlib import Path

from hollow.dra import ATTR_PRODUCT, device_body, pool_devices
from hollow.pools import PoolsFile
from hollowscale.replay.driver import BOUND, UNSCHEDULABLE, Checkpoint, PodRecord, claim_devices, verdict_of
from hollowscale.replay.figures import reason_class, replay_figures
from hollowscale.replay.pods import claim_manifest, pod_manifest, priority_classes
from hollowscale.trace import TracePod, read_trace
from hollowscale.trace.nodes import MODEL_LABEL, REPLAY_NODE_KEY, node_map, trace_pools
from hollowscale.trace.paper import SequencedPod

ROOT = Path(__file__).resolve().parents[2]
EXCERPT = ROOT / "tests" / "fixtures" / "trace" / "excerpt"


def test_every_trace_node_is_a_hollow_node_of_its_shape() -> None:
    trace = read_trace(EXCERPT / "pods.csv", EXCERPT / "nodes.csv")
    pools = trace_pools(trace, prefix="t")
    assert [(p.name, len(p.members)) for p in pools] == [
        ("t-cpu-0", 1), ("t-g2-0", 5), ("t-t4-0", 3), ("t-cpu-1", 1), ("t-p100-0", 1), ("t-g3-0", 1)]
    g2 = pools[1].doc(isolate="run-1")
    assert g2["resources"] == {"cpu": "96", "memory": "393216Mi", "pods": "1000", "nvidia.com/gpu": "8"}
    assert g2["labels"] == {MODEL_LABEL: "G2", REPLAY_NODE_KEY: "run-1"}
    assert g2["taints"] == [{"key": REPLAY_NODE_KEY, "value": "run-1", "effect": "NoSchedule"}]
    dra = pools[1].doc(gpu_mode="dra-shared")
    assert dra["gpus"] == {"expose": "dra", "model": "h100-80gb", "sharing": "shares", "product": "G2"}
    assert pools[2].doc(gpu_mode="dra-shared")["gpus"]["model"] == "t4"
    assert "gpus" not in pools[0].doc(gpu_mode="dra-shared")
    assert "nvidia.com/gpu" not in pools[0].doc()["resources"] and pools[0].doc()["labels"] == {}
    parsed = PoolsFile.model_validate({"pools": [p.doc() for p in pools]})  # the hollow agent takes them
    assert sum(p.count for p in parsed.pools) == 12
    shared = PoolsFile.model_validate({"pools": [p.doc(gpu_mode="dra-shared") for p in pools]}).pools[1]
    assert shared.dra is not None and "nvidia.com/gpu" not in shared.node_allocatable
    devices = pool_devices(shared.dra, shared.gpu_count)
    assert len(devices) == 8 and devices[0].attributes[ATTR_PRODUCT] == "G2"
    body = device_body(devices[0])  # NVIDIA's --consumable-shares=1000, exactly
    assert body["allowMultipleAllocations"] is True
    assert body["capacity"]["shares"] == {"value": "1000", "requestPolicy": {
        "default": "1", "validRange": {"min": "1", "max": "1000", "step": "1"}}}
    assert body["capacity"]["memory"]["requestPolicy"]["default"] == "0"
    names = node_map(pools)
    assert names["t-g2-0-4"].name == "openb-node-1367" and len(names) == 12


def _sp(pod: TracePod, index: int = 7) -> SequencedPod:
    return SequencedPod(index, pod)


def test_a_counted_pod_rounds_a_share_up_and_keeps_its_model_constraint() -> None:
    share = TracePod("openb-pod-0646", 4000, 30517, 1, 230, ("T4",), "BE")
    body = pod_manifest(_sp(share), "run-1", "counted")
    assert body["metadata"]["name"] == "r00007-openb-pod-0646"
    c = body["spec"]["containers"][0]["resources"]
    assert c == {"requests": {"cpu": "4000m", "memory": "30517Mi", "nvidia.com/gpu": "1"},
                 "limits": {"nvidia.com/gpu": "1"}}
    terms = body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [{"key": MODEL_LABEL, "operator": "In",
                                                                 "values": ["T4"]}]}]
    assert body["spec"]["priorityClassName"] == "run-1-qos-be"
    assert body["spec"]["nodeSelector"] == {REPLAY_NODE_KEY: "run-1"}
    assert body["metadata"]["annotations"]["hollowscale.io/run-duration"] == "forever"
    assert "resourceClaims" not in body["spec"]


def test_a_dra_pod_asks_its_shares_through_its_own_claim() -> None:
    share = TracePod("p", 4000, 1024, 1, 230, ("T4", "V100M16"), "LS")
    body = pod_manifest(_sp(share, 3), "run-1", "dra-shared")
    assert body["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "r00003-p"}]
    assert body["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "4000m", "memory": "1024Mi"},
                                                          "claims": [{"name": "gpu"}]}
    claim = claim_manifest("r00003-p", share, "run-1")
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["count"] == 1 and exactly["capacity"] == {"requests": {"shares": "230"}}
    assert exactly["selectors"] == [{"cel": {"expression":
                                             "device.attributes['gpu.nvidia.com'].productName in ['T4', 'V100M16']"}}]
    multi = claim_manifest("m", TracePod("m", 1, 1, 8, 1000), "run-1")["spec"]["devices"]["requests"][0]["exactly"]
    assert multi["count"] == 8 and multi["capacity"]["requests"]["shares"] == "1000" and "selectors" not in multi
    cpu = pod_manifest(_sp(TracePod("c", 1000, 10, 0, 0)), "run-1", "dra-shared")
    assert "resourceClaims" not in cpu["spec"] and "priorityClassName" not in cpu["spec"]


def test_priority_classes_never_preempt_in_the_papers_protocol() -> None:
    classes = {c["metadata"]["name"]: c for c in priority_classes(["LS", "BE", "", "LS", "Odd"], "r")}
    assert sorted(classes) == ["r-qos-be", "r-qos-ls", "r-qos-odd"]
    assert classes["r-qos-ls"]["value"] > classes["r-qos-be"]["value"] > classes["r-qos-odd"]["value"]
    assert {c["preemptionPolicy"] for c in classes.values()} == {"Never"}
    assert priority_classes(["LS"], "r", preempt=True)[0]["preemptionPolicy"] == "PreemptLowerPriority"


def test_verdicts_and_claims_are_read_as_the_scheduler_wrote_them() -> None:
    assert verdict_of({"spec": {"nodeName": "n-1"}}, 5.0) is not None
    assert verdict_of({"spec": {"nodeName": "n-1"}}, 5.0).kind == BOUND  # type: ignore[union-attr]
    msg = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: not eligible"
    refused = verdict_of({"spec": {}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]}}, 6.0)
    assert refused is not None and (refused.kind, refused.message) == (UNSCHEDULABLE, msg)
    assert verdict_of({"spec": {}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}, 1.0) is None
    claim = {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n-1", "device": "gpu-3",
         "consumedCapacity": {"shares": "230"}},
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n-1", "device": "gpu-5"},
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n-1", "device": "gpu-6",
         "consumedCapacity": {"shares": "1k"}}]}}}}
    assert claim_devices(claim) == [(3, 230), (5, 1000), (6, 1000)]
    assert claim_devices({"status": {}}) == []
    assert reason_class(msg) == "Insufficient nvidia.com/gpu"


def _rec(i: int, kind: str, asked: int, verdict: str, arrived: int, allocated: int, reason: str = "",
         tuned: bool = False) -> PodRecord:
    return PodRecord(i, f"r{i}", f"p{i}", kind, tuned, asked, verdict, "n-0" if verdict == BOUND else "",
                     ((0, asked),) if verdict == BOUND else (), reason, 1000.0 * i, 1000.0 * i + 20, arrived,
                     allocated, 100 * i, 10 * i)


def test_replay_figures_from_records() -> None:
    msg = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    records = [_rec(0, "one", 1000, BOUND, 1000, 1000), _rec(1, "share", 500, BOUND, 1500, 1500),
               _rec(2, "one", 1000, UNSCHEDULABLE, 2500, 1500, msg), _rec(3, "cpu", 0, BOUND, 2500, 1500),
               _rec(4, "share", 500, BOUND, 3000, 2000, tuned=True)]
    checkpoints = [Checkpoint(0, 0, 0, 0, 0, 10.0, 0.1)]
    f = replay_figures(records, checkpoints, 2000, 10_000, 1000, {"cpu": 1, "share": 1, "one": 2, "multi": 0},
                       {"claim_shares_milli": 2000, "counted_gpu_milli": 0}, "dra-shared", 0.0, 5000.0)
    assert f["pods"]["bound"] == 4 and f["pods"]["unschedulable"] == 1 and f["pods"]["tuned"] == 1
    assert f["first_failure"] == {"index": 2, "pod": "p2", "kind": "one", "arrived_pct": 125.0,
                                  "reason": "Insufficient nvidia.com/gpu"}
    assert f["never_ran"] == {"one": {"Insufficient nvidia.com/gpu": 1}}
    assert f["at_100pct_arrived"]["unallocated_gpus"] == 0.5 and f["end"]["unallocated_gpus"] == 0.0
    checks = f["checks"]
    assert checks["allocated_equals_arrived_before_first_failure"]["passed"]
    assert checks["allocated_equals_arrived_before_first_failure"]["pods"] == 2
    assert checks["pods_per_kind_equal_trace"]["passed"]
    assert checks["allocation_equals_apiserver"]["passed"]
    assert f["scheduler"]["verdicts_per_s"] == 1.0 and f["scheduler"]["latency_ms"]["bound"]["p50"] == 20.0
    assert f["fragmentation"]["0"] == {"frag_gpus": 0.01, "frag_ratio_pct": 10.0}
