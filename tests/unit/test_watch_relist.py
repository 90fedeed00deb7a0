"""Pure logic around relists: the Timeline and the hollow node manager fed what a relist yields."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from hollow.api import ApiClient, ApiSettings
from hollow.clock import SystemClock
from hollow.faults import FaultState
from hollow.metrics import Metrics
from hollow.nodes import NodeManager
from hollow.pools import load_pools
from hollow.settings import AgentSettings
from hollow.sharding import assign
from hollowscale.measure.timeline import Timeline
from kubecore.config import KubeEndpoint
from kubecore.watch import SYNC, deleted_stub


def _pod(uid: str, phase: str = "Pending", node: str = "", owners: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"uid": uid, "name": f"p-{uid}", "namespace": "ns",
                               "labels": {"hollowscale.io/workload": "w", "hollowscale.io/role": "r"}}
    if owners:
        meta["ownerReferences"] = [{"kind": "Job", "uid": "job-1", "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def test_deleted_stub_is_metadata_only() -> None:
    assert deleted_stub("u", "ns", "n") == {"metadata": {"uid": "u", "name": "n", "namespace": "ns"}}
    assert deleted_stub("u", "", "n") == {"metadata": {"uid": "u", "name": "n"}}


def test_timeline_relist_sync_does_not_double_count_and_stub_deletes() -> None:
    tl = Timeline()
    tl.apply_pod("ADDED", _pod("a"), 1000.0)
    tl.apply_pod("MODIFIED", _pod("a", "Running", "n1"), 2000.0)
    # a relist brings the same pod again (now finished), then a synthetic DELETED of another one
    tl.apply_pod("ADDED", _pod("b", owners=True), 1500.0)
    tl.apply_pod(SYNC, _pod("a", "Succeeded", "n1"), 5000.0)
    tl.apply_pod(SYNC, _pod("a", "Succeeded", "n1"), 5001.0)
    tl.apply_pod("DELETED", deleted_stub("b", "ns", "p-b"), 5002.0)
    assert set(tl.pods) == {"a", "b"} and set(tl.jobs) == {"a"}  # bare pod a is its own workload, once
    a, b = tl.pods["a"], tl.pods["b"]
    assert (a.created_ms, a.scheduled_ms, a.running_ms, a.finished_ms) == (1000.0, 2000.0, 2000.0, 5000.0)
    assert tl.jobs["a"].finished_ms == 5000.0 and tl.jobs["a"].outcome == "Complete"
    assert b.deleted_ms == 5002.0 and b.phase == "Pending" and b.owner_kind == "Job"  # the stub changes nothing else
    assert tl.counts()["pods"] == 2 and tl.counts()["jobs"] == 1


def test_timeline_ignores_a_deletion_of_something_never_seen() -> None:
    tl = Timeline()
    tl.apply_pod("DELETED", deleted_stub("x", "ns", "x"), 1.0)
    tl.apply_job("DELETED", deleted_stub("j", "ns", "j"), 1.0)
    assert not tl.pods and not tl.jobs


def test_timeline_job_stub_delete_keeps_the_record() -> None:
    tl = Timeline()
    job = {"metadata": {"uid": "j", "name": "j", "labels": {}}, "spec": {"parallelism": 2, "template": {"spec": {}}},
           "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    tl.apply_job(SYNC, job, 10.0)
    tl.apply_job(SYNC, job, 20.0)
    tl.apply_job("DELETED", deleted_stub("j", "ns", "j"), 30.0)
    assert list(tl.jobs) == ["j"] and tl.jobs["j"].finished_ms == 10.0 and tl.jobs["j"].replicas == 2


def test_node_manager_relist_ignores_nodes_registered_during_the_list(tmp_path: Path) -> None:
    """A node registered while the node watch's LIST was in flight is not 'deleted by someone else'."""
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text(yaml.safe_dump({"pools": [{"name": "rl", "count": 3,
                                                     "resources": {"cpu": "8", "memory": "8Gi", "pods": "110"}}]}))

    async def main() -> list[str]:
        settings = AgentSettings()
        metrics = Metrics()
        api = ApiClient(KubeEndpoint("https://127.0.0.1:1"), ApiSettings(), metrics)
        nm = NodeManager(api, SystemClock(), settings, metrics, FaultState(),
                         assign(load_pools(pools_file), settings.shard))
        again: list[str] = []
        nm.reregister = again.append  # type: ignore[method-assign]
        nm.nodes["rl-0"].uid = "u0"  # registered before the LIST
        nm.nodes["rl-1"].uid = "u1"
        nm.on_list_start()
        nm.nodes["rl-2"].uid = "u2"  # registered while the LIST was in flight
        nm.on_relisted({"u0"})  # u1 is gone; u2 is only newer than the LIST
        return again

    assert asyncio.run(main()) == ["rl-1"]
