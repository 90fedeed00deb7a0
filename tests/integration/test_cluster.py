"""The local control plane is real: kubectl, controllers, scheduler and RBAC all answer."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from waiting import wait_until

from hollowscale.cluster.local import ClusterInfo
from kubecore.config import client_configuration

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(cluster: ClusterInfo) -> client.ApiClient:
    return client.ApiClient(client_configuration(str(cluster.kubeconfig)))


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = f"hs-cluster-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)



def test_kubectl_lists_namespaces(kubectl: list[str]) -> None:
    out = subprocess.run([*kubectl, "get", "namespaces", "-o", "json"], capture_output=True, text=True,
                         timeout=60, check=True)
    names = {item["metadata"]["name"] for item in json.loads(out.stdout)["items"]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_kubectl_reports_pinned_server_version(kubectl: list[str], cluster: ClusterInfo) -> None:
    out = subprocess.run([*kubectl, "version", "-o", "json"], capture_output=True, text=True, timeout=60,
                         check=True)
    assert json.loads(out.stdout)["serverVersion"]["gitVersion"] == cluster.kubernetes_version


def test_deployment_creates_replicaset_and_pods(api: client.ApiClient, namespace: str) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    labels = {"app": "web"}
    apps.create_namespaced_deployment(namespace, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=3,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="registry.k8s.io/pause:3.10")]),
            ),
        ),
    ))
    rs = wait_until("a ReplicaSet owned by the Deployment",
                    lambda: apps.list_namespaced_replica_set(namespace).items)
    assert rs[0].metadata.owner_references[0].kind == "Deployment"
    pods = wait_until("3 pods from the ReplicaSet",
                      lambda: (lambda p: p if len(p) == 3 else None)(core.list_namespaced_pod(namespace).items))
    assert all(p.metadata.owner_references[0].kind == "ReplicaSet" for p in pods)


def test_unschedulable_pod_gets_failed_scheduling_event(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    # The selector matches no node, so the pod stays Pending whatever nodes other tests registered.
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="lonely"),
        spec=client.V1PodSpec(node_selector={"hollowscale.io/no-such-node": "true"},
                              containers=[client.V1Container(name="c", image="registry.k8s.io/pause:3.10")]),
    ))
    events = wait_until("a FailedScheduling event", lambda: [
        e for e in core.list_namespaced_event(namespace).items
        if e.reason == "FailedScheduling" and e.involved_object.name == "lonely"])
    assert "default-scheduler" in (events[0].source.component or events[0].reporting_component or "")
    # The scheduler sends the event and patches the pod's status in two separate calls, so the
    # event can be visible before the condition: wait for the condition too.
    scheduled = wait_until("the pod's PodScheduled condition", lambda: [
        c for c in core.read_namespaced_pod("lonely", namespace).status.conditions or []
        if c.type == "PodScheduled"])
    assert scheduled[0].status == "False" and scheduled[0].reason == "Unschedulable"
    pod = core.read_namespaced_pod("lonely", namespace)
    assert pod.status.phase == "Pending" and not pod.spec.node_name


def test_rbac_denies_unprivileged_service_account(api: client.ApiClient, cluster: ClusterInfo,
                                                  namespace: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="nobody")))
    token = core.create_namespaced_service_account_token("nobody", namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    conf = client.Configuration()
    conf.host = cluster.server
    conf.ssl_ca_cert = str(cluster.ca_file)
    conf.api_key = {"authorization": f"Bearer {token}"}
    as_nobody = client.CoreV1Api(client.ApiClient(conf))
    with pytest.raises(client.ApiException) as denied:
        as_nobody.list_namespaced_secret("kube-system")
    assert denied.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in denied.value.body
    # The token itself is valid: authentication works, authorisation says no.
    review = client.AuthenticationV1Api(api).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
    assert review.status.authenticated
