"""Kueue's topology-aware scheduling on a real local control plane: variant ``kueue-tas-required`` puts
every gang inside one rack (issue 35's judge).

A local cluster with Kueue v0.17.0, one hollow agent with 64 nodes in 2 racks of 32 (pool levels
rack > host), the run's own Kueue objects (:func:`hollowscale.batch.objects.kueue_objects`: a Topology,
a TAS flavor, a ClusterQueue and LocalQueue) and the load's own Jobs (:class:`loadgen.workloads.WorkloadMix`,
whose pod templates ask for the rack).  Five gangs of 12 whole-node pods arrive; quota admits all five,
topology only four (a rack holds two; the fifth would have to span racks).  Checked from what the API
server says: each admitted gang's pods' nodes (``spec.nodeName`` -> the Node's rack label) are one rack,
Kueue pinned each pod to its host (the ungater's ``nodeSelector``), and the fifth Workload is pending on
topology, not quota.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from waiting import wait_until

from hollow.process import start_agent
from hollowscale.batch.objects import BatchObjects, kueue_objects, priority_objects
from hollowscale.cluster.binaries import kueue_binary
from hollowscale.cluster.local import LocalCluster
from hollowscale.scenario import parse_scenario
from kubecore.config import load_endpoint
from kubecore.namespaces import claim_namespace
from kubecore.watch import session_for
from loadgen.workloads import ANN_KUEUE_REQUIRED, LABEL_INSTANCE, LABEL_RUN, WorkloadMix

pytestmark = [pytest.mark.integration, pytest.mark.root]

ARTIFACTS = Path(__file__).parent.parent / ".artifacts"
RACK = "hollowscale.io/topology-rack"
HOST = "kubernetes.io/hostname"
GANGS, MEMBERS, NODES, RACK_NODES = 5, 12, 64, 32


def _scenario(prefix: str) -> dict[str, Any]:
    return {
        "name": "topo-tas", "cluster": {"backend": "local", "namespace": f"{prefix}-topo"},
        "pools": [{"name": f"{prefix}-nvl", "count": NODES,
                   "resources": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "4"},
                   "labels": {"hollowscale.io/pool": f"{prefix}-nvl"},
                   "topology": {"levels": [{"name": "rack", "label": RACK, "fanout": RACK_NODES},
                                           {"name": "host", "label": HOST}]}}],
        "workloads": [{"name": "train", "run_duration": "10m", "gang": {"min_members": "all"}, "queued": True,
                       "topology": {"level": "rack"},
                       "roles": [{"name": "worker", "replicas": MEMBERS,
                                  "resources": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"},
                                  "node_selector": {"hollowscale.io/pool": f"{prefix}-nvl"}}]}],
        # quota for every gang (60 of 64 nodes' GPUs): only topology can hold one back
        "tenants": [{"name": "ml", "quotas": {f"{prefix}-nvl": {"cpu": "4096", "memory": "32Ti",
                                                                 "nvidia.com/gpu": 256}}}],
        "arrival": {"curve": "constant", "rate": 1, "duration_s": "10s", "seed": 35},
        "variants": [{"name": "kueue-tas-required", "kueue": True, "topology": "kueue-required"}],
    }


def test_kueue_tas_required_keeps_every_gang_in_one_rack(tmp_path: Path) -> None:
    if not os.access(kueue_binary(), os.X_OK):
        pytest.fail(f"Kueue binary missing: {kueue_binary()} -- run `make setup-test` (or "
                    "`hollowscale setup --kueue`) first", pytrace=False)
    prefix = f"tt{uuid.uuid4().hex[:5]}"
    base = parse_scenario(_scenario(prefix), str(tmp_path / "topo-tas.yaml"))
    sc = base.with_variant(base.variants[0])
    run_id = f"{prefix}-run"
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(sc.pools_doc()))
    local = LocalCluster(tmp_path / "c", kueue=True)
    started = time.monotonic()
    info = local.up(timeout_s=180)
    print(f"cluster with Kueue ready in {time.monotonic() - started:.1f}s")
    agent = None
    objects = None
    try:
        agent = start_agent(info.kubeconfig, pools, ARTIFACTS / f"hollow-{prefix}.log", "--delete-nodes-on-exit")
        agent.wait_healthy(60)
        endpoint = load_endpoint(info.kubeconfig, keys_dir=tmp_path)
        session = session_for(endpoint, 2)
        server = endpoint.server

        def get(path: str) -> Any:
            r = session.get(server + path, timeout=30)
            r.raise_for_status()
            return r.json()

        def nodes() -> dict[str, dict[str, str]]:
            return {n["metadata"]["name"]: n["metadata"].get("labels", {})
                    for n in get(f"/api/v1/nodes?labelSelector=hollowscale.io/pool%3D{prefix}-nvl")["items"]
                    if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])}

        labels = wait_until(f"{NODES} hollow nodes Ready", lambda: (lambda n: n if len(n) == NODES else None)(nodes()),
                            90)
        assert sorted({lb[RACK] for lb in labels.values()}) == [f"{prefix}-nvl-rack0", f"{prefix}-nvl-rack1"]
        ns = sc.namespaces[0]
        claim_namespace(session, server, ns, run_id)
        objects = BatchObjects(session, server, run_id)
        objects.create(priority_objects(sc, run_id) + kueue_objects(sc, run_id))
        assert [o["kind"] for o in objects.created][:2] == ["Topology", "ResourceFlavor"]
        mix = WorkloadMix(sc.load, run_id)
        submitted = time.monotonic()
        for _ in range(GANGS):
            for sub in mix.next_instance():
                assert sub.kind == "Job"
                assert sub.body["spec"]["template"]["metadata"]["annotations"][ANN_KUEUE_REQUIRED] == RACK
                r = session.post(server + sub.path, json=sub.body, timeout=30)
                assert r.ok, r.text[:300]

        def workloads() -> list[dict[str, Any]]:
            return list(get(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"])

        def pending_on_topology(w: dict[str, Any]) -> bool:
            return any(c["type"] == "QuotaReserved" and c["status"] == "False" and "topology" in c.get("message", "")
                       for c in w.get("status", {}).get("conditions", []))

        def bound() -> list[dict[str, Any]]:
            return [p for p in get(f"/api/v1/namespaces/{ns}/pods?labelSelector={LABEL_RUN}%3D{run_id}")["items"]
                    if p["spec"].get("nodeName")]

        def settled() -> bool:
            ws = workloads()
            admitted = [w for w in ws if w.get("status", {}).get("admission")]
            return (len(ws) == GANGS and len(admitted) == GANGS - 1 and sum(map(pending_on_topology, ws)) == 1
                    and len(bound()) == (GANGS - 1) * MEMBERS)

        wait_until("4 gangs admitted and bound, the 5th pending on topology", settled, 90)
        print(f"4 gangs admitted and bound {time.monotonic() - submitted:.1f}s after submission")
        ws = workloads()
        for w in ws:
            if w["status"].get("admission"):
                ta = w["status"]["admission"]["podSetAssignments"][0].get("topologyAssignment")
                # v1beta2 names the lowest level's domains only (one host per pod here)
                assert ta and ta["levels"] == [HOST], w["status"]["admission"]
        pending = [w for w in ws if not w["status"].get("admission")]
        print("pending:", [c["message"] for c in pending[0]["status"]["conditions"] if c["type"] == "QuotaReserved"])
        # read back from the API server: every gang's pods on the nodes of one rack, each pinned by Kueue
        node_labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get("/api/v1/nodes")["items"]}
        racks: dict[str, set[str]] = defaultdict(set)
        for p in bound():
            racks[p["metadata"]["labels"][LABEL_INSTANCE]].add(node_labels[p["spec"]["nodeName"]][RACK])
            assert p["spec"]["nodeSelector"][HOST] == p["spec"]["nodeName"], p["spec"].get("nodeSelector")
            assert not p["spec"].get("schedulingGates")
        assert len(racks) == GANGS - 1
        in_one_rack = sum(1 for r in racks.values() if len(r) == 1)
        print(f"gangs inside one rack: {in_one_rack} of {len(racks)} ({100 * in_one_rack / len(racks):.0f} %): "
              f"{dict(racks)}")
        assert in_one_rack == len(racks)
    finally:
        if objects is not None:
            objects.delete_all()
        if agent is not None:
            agent.stop()
        local.down()
