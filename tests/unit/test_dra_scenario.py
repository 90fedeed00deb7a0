"""The DRA part of a scenario (variants' GPU modes, the CEL subset validation reads) and the DRA figures
from hand-made claim and pod timelines (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from hollow.dra import GpuSpec, pool_devices
from hollowscale.dra.figures import dra_measurements, role_figures
from hollowscale.dra.report import markdown_lines
from hollowscale.dra.timeline import ClaimTimeline
from hollowscale.measure.timeline import PodRecord
from hollowscale.scenario import parse_scenario
from hollowscale.scenario.batch import VariantSpec
from hollowscale.scenario.cel import evaluate, references

GIB = 2**30


def _doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "t",
        "pools": [{"name": "h", "count": 2, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                   "gpus": {"expose": "dra", "model": "h100-80gb", "sharing": "memory"}}],
        "workloads": [{"name": "w", "roles": [
            {"name": "a", "resources": {"cpu": "1", "nvidia.com/gpu": "2"}},
            {"name": "b", "resources": {"cpu": "1"}, "claim": {"device_class": "gpu.nvidia.com", "memory": "20Gi"}}]}],
        "arrival": {"curve": "constant", "rate": 1, "duration_s": 10},
    }
    doc.update(over)
    return doc


def test_variants_ask_for_gpus_three_ways() -> None:
    sc = parse_scenario(_doc(), "t.yaml")
    counted = sc.with_variant(VariantSpec(name="c", gpus="counted"))
    assert counted.pools[0].gpus is not None and counted.pools[0].gpus.expose == "counted"
    assert counted.pools[0].gpus.sharing == "none" and counted.pools[0].node_allocatable["nvidia.com/gpu"] == "8"
    a, b = counted.workloads[0].roles
    assert a.resources["nvidia.com/gpu"] == "2" and a.claim is None
    assert b.resources["nvidia.com/gpu"] == "1" and b.claim is None  # a memory share becomes one whole GPU
    claims = sc.with_variant(VariantSpec(name="d", gpus="claims"))
    a, b = claims.workloads[0].roles
    assert "nvidia.com/gpu" not in a.resources and a.claim is not None and a.claim.count == 2
    assert b.claim is not None and b.claim.memory == "20Gi"
    assert "nvidia.com/gpu" not in claims.pools[0].node_allocatable
    extended = sc.with_variant(VariantSpec(name="e", gpus="extended"))
    assert extended.pools[0].gpus is not None and extended.pools[0].gpus.expose == "dra"
    assert extended.workloads[0].roles[1].resources["nvidia.com/gpu"] == "1"
    whole = sc.with_variant(VariantSpec(name="f", gpu_sharing=False))
    assert whole.workloads[0].roles[1].claim is not None and whole.workloads[0].roles[1].claim.memory is None
    assert sc.workloads[0].roles[1].claim.memory == "20Gi"  # type: ignore[union-attr]  # the scenario itself unchanged


def test_a_variant_whose_claims_cannot_work_is_refused_at_validate() -> None:
    doc = _doc(pools=[{"name": "h", "count": 1, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                       "gpus": {"model": "h100-80gb"}}],
               workloads=[{"name": "w", "roles": [{"name": "a", "resources": {"cpu": "1", "nvidia.com/gpu": "9"}}]}],
               variants=[{"name": "d", "gpus": "claims"}])
    with pytest.raises(Exception) as exc:
        parse_scenario(doc, "t.yaml")
    assert "variants[0].gpus: as this variant runs: workloads[0].roles[0].claim.count" in str(exc.value)


def test_cel_subset_on_the_devices() -> None:
    gpu, mig = pool_devices(GpuSpec(expose="dra", model="a100-40gb", partitions=("7g.40gb",)), 1)
    assert evaluate("device.attributes['gpu.nvidia.com'].architecture == 'Ampere'", gpu, "gpu.nvidia.com") is True
    assert evaluate("device.attributes['gpu.nvidia.com'].profile == '7g.40gb'", gpu, "gpu.nvidia.com") is False
    assert evaluate("device.attributes['gpu.nvidia.com'].profile == '7g.40gb'", mig, "gpu.nvidia.com") is True
    assert evaluate("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 || "
                    "device.attributes['gpu.nvidia.com'].brand == 'x'", gpu, "gpu.nvidia.com") is True
    assert evaluate("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) < 0",
                    gpu, "gpu.nvidia.com") is True
    assert evaluate("size(device.attributes) > 0", gpu, "gpu.nvidia.com") is None  # outside the subset
    assert references("device.capacity['x.io'].y") == [("capacity", "x.io", "y")]


def _claim(uid: str, pool: str, device: str, t0: float, t_alloc: float, t_free: float | None, pod: str,
           memory: str | None = None) -> list[tuple[str, dict[str, Any], float]]:
    meta = {"uid": uid, "name": uid, "namespace": "ns", "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"kind": "Pod", "uid": pod}]}
    req: dict[str, Any] = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    result: dict[str, Any] = {"request": "gpu", "pool": pool, "device": device}
    if memory:
        req["exactly"]["capacity"] = {"requests": {"memory": memory}}
        result["consumedCapacity"] = {"memory": memory}
    spec = {"devices": {"requests": [req]}}
    alloc = {"allocation": {"devices": {"results": [result]}}, "reservedFor": [{"uid": pod}]}
    events = [("ADDED", {"metadata": meta, "spec": spec}, t0), ("MODIFIED", {"metadata": meta, "spec": spec,
                                                                            "status": alloc}, t_alloc)]
    if t_free is not None:
        events.append(("MODIFIED", {"metadata": meta, "spec": spec, "status": {}}, t_free))
    return events


def _pod(uid: str, created: float, running: float | None, finished: float | None, role: str = "teacher") -> PodRecord:
    return PodRecord(uid=uid, name=uid, workload="distill", role=role, instance="i", owner_kind="Job", owner_uid="j",
                     gpus=0, created_ms=created, running_ms=running, finished_ms=finished)


def test_figures_from_the_timelines() -> None:
    tl = ClaimTimeline()
    events = (_claim("c1", "h-0", "gpu-0", 0, 100, 5000, "p1", "20Gi") + _claim("c2", "h-0", "gpu-0", 50, 200, 6000, "p2",
                                                                                "20Gi")
              + _claim("c3", "h-1", "gpu-3", 100, 300, None, "p3")
              + _claim("c4", "h-1", "gpu-4", 4000, 9000, None, "p4", "70Gi")[:1])  # c4 never allocated
    for typ, obj, t in sorted(events, key=lambda e: e[2]):
        tl.apply(typ, obj, t)
    pods = [_pod("p1", 0, 150, 5000), _pod("p2", 50, 260, 6000), _pod("p3", 100, 400, None, "student"),
            _pod("p4", 4000, None, None)]
    sc = parse_scenario(_doc(), "t.yaml")
    out = dra_measurements(tl.snapshot(), pods, sc.pools, 20 * GIB, 0.0, 8000.0, 1.0)
    m, series = out["measurements"], out["series"]
    assert m["claims"]["total"] == 4 and m["claims"]["allocated"] == 3 and m["claims"]["never_allocated"] == 1
    assert m["claims"]["allocated_at_end"] == 1 and m["claims"]["released"] == 2
    assert m["latency_ms"]["created_to_allocated"]["p50"] == 150.0
    assert m["latency_ms"]["reserved_to_running"]["max"] == 100.0
    assert m["gpus_allocated"]["max"] == 2  # gpu-0 of h-0 (two shares) and gpu-3 of h-1
    assert series["pods_per_gpu_max"][1] == 2  # at 1 s: both shares' pods run on h-0/gpu-0
    assert series["memory_allocated_gib"][1] == pytest.approx(40 + 81559 / 1024, abs=0.01)
    # from 4 s c4 (70Gi) waits: gpu-0 (39.6Gi free) fits it no more: fragmented; gpu-3 is full
    assert series["fragmented_gpus"][4] == 1 and series["fragmented_gpus"][1] == 0
    assert m["roles"]["distill/teacher"]["running_max"] == 2 and m["roles"]["distill/teacher"]["never_ran"] == 1
    assert role_figures(pods, 8000.0)["distill/student"]["wait_s"]["p50"] == 0.3
    lines = markdown_lines({"measurements": {"dra": m}})
    assert lines[1] == "## GPUs as DRA devices" and any("fragmented GPUs" in line for line in lines)


def test_a_relist_stub_of_an_unknown_claim_is_ignored_and_deletion_ends_an_allocation() -> None:
    tl = ClaimTimeline()
    tl.apply("DELETED", {"metadata": {"uid": "x", "name": "x"}}, 1.0)
    assert not tl.claims
    for typ, obj, t in _claim("c", "h-0", "gpu-0", 0, 10, None, "p"):
        tl.apply(typ, obj, t)
    tl.apply("DELETED", {"metadata": {"uid": "c", "name": "c"}}, 20.0)
    (rec,) = tl.snapshot()
    assert rec.deleted_ms == 20.0 and not rec.allocated_now and rec.intervals == [[10, 20.0]]
