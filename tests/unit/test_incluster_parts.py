"""Pure parts of the in-cluster placement: API paths of the record, why a pod will not start, start times,
ports, the driver namespace."""

from __future__ import annotations

import socket
from typing import Any

from hollowscale.placements.incluster.deployment import consecutive_free_ports, driver_namespace
from hollowscale.placements.incluster.objects import Created, collection_path
from hollowscale.placements.incluster.pods import is_ready, start_times, why_not_starting
from hollowscale.scenario import parse_scenario


def test_collection_paths_of_every_kind_deploy_holds() -> None:
    assert collection_path("v1", "ServiceAccount", "ns") == "/api/v1/namespaces/ns/serviceaccounts"
    assert collection_path("apps/v1", "StatefulSet", "ns") == "/apis/apps/v1/namespaces/ns/statefulsets"
    assert collection_path("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "ignored") == \
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    assert Created("v1", "Secret", "s", "ns").path == "/api/v1/namespaces/ns/secrets/s"
    assert Created("rbac.authorization.k8s.io/v1", "ClusterRole", "r", None).text() == "ClusterRole r"


def pod(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "hollow-agent-0", "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"nodeName": "hs-real-0"}, "status": status}


def test_why_a_pod_will_not_start() -> None:
    assert why_not_starting(pod(phase="Pending")) is None
    never = pod(phase="Pending", containerStatuses=[{"name": "agent", "state": {"waiting": {
        "reason": "ErrImageNeverPull", "message": "image not present"}}}])
    assert "ErrImageNeverPull" in (why_not_starting(never) or "")
    crashed = pod(phase="Running", containerStatuses=[{"name": "agent", "ready": False, "restartCount": 1,
                                                       "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                                                       "state": {"running": {}}}])
    assert "exited with 1" in (why_not_starting(crashed) or "")
    assert "Failed" in (why_not_starting(pod(phase="Failed", reason="Evicted")) or "")


def test_start_times_from_the_pods_conditions() -> None:
    p = pod(phase="Running", conditions=[
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-01T10:00:01Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:09Z"}],
        containerStatuses=[{"name": "agent", "restartCount": 2}])
    assert is_ready(p)
    assert start_times([p]) == [{"name": "hollow-agent-0", "node": "hs-real-0", "created_at": "2026-12-01T10:00:00Z",
                                 "restarts": 2, "scheduled_s": 1.0, "ready_s": 9.0}]
    p["metadata"]["deletionTimestamp"] = "2026-12-01T10:01:00Z"
    assert not is_ready(p)


def test_consecutive_free_ports_are_bindable() -> None:
    base = consecutive_free_ports(4)
    socks = []
    try:
        for port in range(base, base + 4):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
    finally:
        for s in socks:
            s.close()


def test_driver_namespace_follows_the_load_namespace() -> None:
    sc = parse_scenario({"name": "x", "cluster": {"backend": "existing", "kubeconfig": "/nonexistent",
                                                     "namespace": "team-a"},
                            "agents": {"placement": "in-cluster"},
                            "pools": [{"name": "p", "count": 1, "resources": {"cpu": "1", "memory": "1Gi"}}],
                            "workloads": [{"name": "w", "kind": "Pod", "run_duration": "1s",
                                           "roles": [{"name": "r", "resources": {"cpu": "1"}}]}],
                            "arrival": {"curve": "constant", "rate": 1, "duration_s": "1s"}}, "test")
    assert driver_namespace(sc) == "team-a-driver"
