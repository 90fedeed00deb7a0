"""The agent's protobuf Leases against the real apiserver: created, renewed at a version, refused when stale.

The apiserver must store exactly what the JSON form would have said (holder, duration, renewTime to
the microsecond, the Node as owner), and the agent must read the resourceVersion and the Status
message out of protobuf answers.
"""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest

from hollow import protobuf
from hollow.api import ApiClient, ApiSettings
from hollow.clock import rfc3339_micro
from hollow.metrics import Metrics
from hollowscale.cluster.local import ClusterInfo
from kubecore.config import load_endpoint

pytestmark = pytest.mark.integration

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


async def _round_trip(cluster: ClusterInfo) -> None:
    api = ApiClient(load_endpoint(cluster.kubeconfig), ApiSettings(max_attempts=2), Metrics())
    await api.start()
    name = f"hs-proto-{uuid.uuid4().hex[:8]}"
    try:
        node = await api.request("create_node", "POST", "/api/v1/nodes", body={
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"hollowscale.io/test": "proto"}}})
        assert node.status == 201, node.message()
        node_uid = node.json()["metadata"]["uid"]

        t1 = 1_800_000_000.654321
        created = await api.request("create_lease", "POST", LEASES, body=protobuf.lease(
            name, "kube-node-lease", node_uid, 40, t1), content_type=protobuf.PROTOBUF, accept=protobuf.PROTOBUF)
        assert created.status == 201, created.message()
        assert created.body.startswith(protobuf.MAGIC)
        rv1 = created.resource_version()
        assert rv1.isdigit()

        stored = (await api.request("get_lease", "GET", f"{LEASES}/{name}")).json()
        assert stored["metadata"]["resourceVersion"] == rv1
        assert stored["spec"] == {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": rfc3339_micro(t1)}
        owner = stored["metadata"]["ownerReferences"]
        assert owner == [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]

        t2 = t1 + 10.000001
        updated = await api.request("update_lease", "PUT", f"{LEASES}/{name}", body=protobuf.lease(
            name, "kube-node-lease", node_uid, 40, t2, rv1), content_type=protobuf.PROTOBUF, accept=protobuf.PROTOBUF)
        assert updated.status == 200, updated.message()
        rv2 = updated.resource_version()
        assert rv2.isdigit() and int(rv2) > int(rv1)
        again = (await api.request("get_lease", "GET", f"{LEASES}/{name}")).json()
        assert again["spec"]["renewTime"] == rfc3339_micro(t2)
        assert again["metadata"]["ownerReferences"] == owner  # an update replaces the object: the owner is kept

        stale = await api.request("update_lease", "PUT", f"{LEASES}/{name}", body=protobuf.lease(
            name, "kube-node-lease", node_uid, 40, t2 + 10, rv1), content_type=protobuf.PROTOBUF,
            accept=protobuf.PROTOBUF, retry=False)
        assert stale.status == 409
        assert stale.body.startswith(protobuf.MAGIC)  # the Status comes in protobuf too
        assert "modified" in stale.message()
    finally:
        await api.request("delete_lease", "DELETE", f"{LEASES}/{name}", retry=False)
        await api.request("delete_node", "DELETE", f"/api/v1/nodes/{name}", retry=False,
                          body=orjson.dumps({"gracePeriodSeconds": 0}))
        await api.close()


def test_protobuf_lease_round_trip(cluster: ClusterInfo) -> None:
    asyncio.run(_round_trip(cluster))
