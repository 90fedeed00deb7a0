"""The credentials the in-cluster pods get for the target, checked against the API server itself (issue 37).

``deploy/hollowscale/target`` is rendered and created for a run on the session cluster, as the in-cluster
placement does; a token of each ServiceAccount is minted (TokenRequest) and used as the pods use it:

* the agents' may register a Node and renew its Lease (server-side dry runs: accepted, nothing kept), and may
  write pods' status, events and ResourceSlices (SelfSubjectAccessReview); they cannot list Secrets anywhere
  nor create a pod, answered 403 by the API server to the real requests;
* the load's may create Jobs and pods in its namespace only, and cannot read Secrets there;
* the metrics token may GET ``/metrics`` and nothing else.

Everything created goes again, checked by the run label.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from waiting import wait_until

from hollowscale.cluster.local import ClusterInfo
from hollowscale.placements.incluster.objects import ObjectLedger
from hollowscale.placements.incluster.render import (
    RunManifestSettings,
    kustomize,
    place_target_objects,
    service_account,
    write_target_kustomization,
)
from kubecore.config import load_endpoint
from kubecore.namespaces import RUN_LABEL, claim_namespace, release_namespace
from kubecore.watch import session_for

pytestmark = pytest.mark.integration

RUN_ID = "20261207-230000-credentials"
DRIVER_NS, LOAD_NS = "hs-cred-driver", "hs-cred-load"
DRY_RUN = {"dryRun": "All"}


@pytest.fixture(scope="module")
def tokens(cluster: ClusterInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """role -> a session that authenticates with that ServiceAccount's token, as the pods' kubeconfigs do."""
    endpoint = load_endpoint(str(cluster.kubeconfig))
    admin = session_for(endpoint, 2)
    server = endpoint.server
    s = RunManifestSettings(namespace=DRIVER_NS, run_id=RUN_ID, shards=1, locust_workers=1, agent_image="a:1",
                            prometheus_image="p:1", ports=None, target_server="unused:443",
                            load_namespaces=(LOAD_NS,))
    folder = tmp_path_factory.mktemp("credentials")
    claims = [claim_namespace(admin, server, ns, RUN_ID) for ns in (DRIVER_NS, LOAD_NS)]
    ledger = ObjectLedger(admin, server, folder / "created.json")
    try:
        docs = place_target_objects(kustomize(write_target_kustomization(folder / "target", s)), s)
        ledger.create_all(docs)
        # a pod is admitted only once its namespace's default ServiceAccount exists (its controller makes it)
        wait_until(f"the default ServiceAccount of {LOAD_NS}", lambda: admin.get(
            f"{server}/api/v1/namespaces/{LOAD_NS}/serviceaccounts/default", timeout=30).ok, 60)
        sessions: dict[str, Any] = {"server": server, "admin": admin}
        for role in ("agent", "load", "metrics"):
            ns, name = service_account(docs, role)
            r = admin.post(f"{server}/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", timeout=30,
                           json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": 600}})
            assert r.status_code in (200, 201), r.text
            token = requests.Session()
            token.verify = endpoint.ca_file or False
            token.headers["Authorization"] = f"Bearer {r.json()['status']['token']}"
            token.trust_env = False
            sessions[role] = token
        yield sessions
    finally:
        errors = ledger.delete_all(lambda line: None)
        left = ledger.wait_gone(60.0)
        for claim in reversed(claims):
            release_namespace(admin, server, claim)
        assert errors == [] and left == [], (errors, left)
        for kind in ("clusterroles", "clusterrolebindings"):
            r = admin.get(f"{server}/apis/rbac.authorization.k8s.io/v1/{kind}",
                          params={"labelSelector": f"{RUN_LABEL}={RUN_ID}"}, timeout=30)
            assert r.ok and r.json()["items"] == [], r.text


def _allowed(session: requests.Session, server: str, **attrs: str) -> bool:
    """What the API server says this token may do (SelfSubjectAccessReview: any authenticated user may ask)."""
    r = session.post(f"{server}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", timeout=30, json={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs} if "verb" in attrs and "path" not in attrs
        else {"nonResourceAttributes": attrs}})
    assert r.status_code == 201, r.text
    return bool(r.json()["status"].get("allowed"))


def _pod(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cred-check", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_the_agents_token_registers_nodes_but_reads_no_secret_and_creates_no_pod(tokens: dict[str, Any]) -> None:
    agent, server = tokens["agent"], tokens["server"]
    # what the API server answers the real requests
    assert agent.get(f"{server}/api/v1/secrets", timeout=30).status_code == 403
    assert agent.get(f"{server}/api/v1/namespaces/{LOAD_NS}/secrets", timeout=30).status_code == 403
    assert agent.post(f"{server}/api/v1/namespaces/{LOAD_NS}/pods", params=DRY_RUN, json=_pod(LOAD_NS),
                      timeout=30).status_code == 403
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cred-check-node"}}
    assert agent.post(f"{server}/api/v1/nodes", params=DRY_RUN, json=node, timeout=30).status_code == 201
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "cred-check-node", "namespace": "kube-node-lease"}}
    assert agent.post(f"{server}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", params=DRY_RUN,
                      json=lease, timeout=30).status_code == 201
    # what it may and may not do beyond those, as the API server decides it
    may = {("update", "", "pods", "status"), ("create", "", "events", ""), ("create", "resource.k8s.io",
                                                                             "resourceslices", "")}
    for verb, group, resource, sub in may:
        assert _allowed(agent, server, verb=verb, group=group, resource=resource, subresource=sub,
                        namespace=LOAD_NS if resource != "resourceslices" else ""), (verb, resource, sub)
    for verb, resource, ns in (("create", "pods", LOAD_NS), ("list", "secrets", ""), ("get", "secrets", LOAD_NS),
                               ("create", "jobs", LOAD_NS), ("create", "leases", "default")):
        group = "batch" if resource == "jobs" else "coordination.k8s.io" if resource == "leases" else ""
        assert not _allowed(agent, server, verb=verb, group=group, resource=resource, namespace=ns), (verb, resource)


def test_the_loads_token_creates_in_its_namespace_only_and_the_metrics_token_reads_metrics_only(
        tokens: dict[str, Any]) -> None:
    load, metrics, server = tokens["load"], tokens["metrics"], tokens["server"]
    assert load.post(f"{server}/api/v1/namespaces/{LOAD_NS}/pods", params=DRY_RUN, json=_pod(LOAD_NS),
                     timeout=30).status_code == 201
    assert load.post(f"{server}/api/v1/namespaces/default/pods", params=DRY_RUN, json=_pod("default"),
                     timeout=30).status_code == 403
    assert load.get(f"{server}/api/v1/namespaces/{LOAD_NS}/secrets", timeout=30).status_code == 403
    assert _allowed(load, server, verb="create", group="batch", resource="jobs", namespace=LOAD_NS)
    assert metrics.get(f"{server}/metrics", timeout=60).status_code == 200
    assert metrics.get(f"{server}/api/v1/nodes", timeout=30).status_code == 403
    assert not _allowed(metrics, server, verb="list", group="", resource="pods", namespace=LOAD_NS)
    assert _allowed(metrics, server, verb="get", path="/metrics")

