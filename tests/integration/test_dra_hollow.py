"""GPUs as DRA devices on hollow nodes, against the real local control plane: the real scheduler allocates,
the real controller-manager makes and frees claims, the hollow kubelet prepares them (no fake API server).

One agent (three tainted nodes: two of one H100 each sharing memory, one of two L4s) is shared by the
tests of this module: its slices are published and owned by their nodes; a claim from a template with a
CEL selector is allocated on the right hollow node, the pod runs only once it is reserved, and the claim
is freed and deleted after; two memory shares land on one GPU and a third waits as unschedulable; a pod
asking ``nvidia.com/gpu`` gets a DRA device through the class's extended-resource mapping; a selector
that does not compile is refused by the dry run.  Seconds each.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from waiting import wait_until

from hollow.dra import device_classes
from hollow.pools import parse_pools
from hollow.process import AgentProcess, start_agent
from hollowscale.dra.objects import DeviceClasses, claim_objects, create_templates, dry_run
from kubecore.config import load_endpoint
from kubecore.watch import session_for
from loadgen.spec import parse_load_spec
from loadgen.workloads import WorkloadMix

pytestmark = pytest.mark.integration

TAINT = "hollowscale.io/test"
ARTIFACTS = Path(__file__).parent.parent / ".artifacts"
RESOURCE = "/apis/resource.k8s.io/v1"


class Env:
    def __init__(self, kubeconfig: str, prefix: str, pools: dict[str, Any]) -> None:
        self.prefix = prefix
        self.namespace = f"{prefix}-ns"
        self.endpoint = load_endpoint(kubeconfig)
        self.s = session_for(self.endpoint, 4)
        self.server = self.endpoint.server
        self.pools = pools
        self.agent: AgentProcess | None = None
        self.run_id = f"{prefix}-run"

    def get(self, path: str, **params: Any) -> Any:
        r = self.s.get(self.server + path, params=params, timeout=30)
        r.raise_for_status()
        return r.json()

    def post(self, path: str, body: dict[str, Any]) -> requests.Response:
        return self.s.post(self.server + path, json=body, timeout=30)

    def load(self, roles: list[dict[str, Any]], kind: str = "Pod") -> Any:
        return parse_load_spec({"name": "dra", "namespace": self.namespace, "workloads": [
            {"name": "w", "kind": kind, "run_duration": "forever" if kind == "Deployment" else "3s", "roles": roles}],
            "arrival": {"curve": "constant", "rate": 1, "duration_s": 10}}, "test")

    def role(self, name: str, pool: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "resources": {"cpu": "1"}, "node_selector": {"hollowscale.io/pool": f"{self.prefix}-{pool}"},
                "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}], **extra}

    def submit(self, spec: Any) -> list[dict[str, Any]]:
        create_templates(self.s, self.server, spec, self.run_id)
        out = []
        for sub in WorkloadMix(spec, run_id=self.run_id, stream=uuid.uuid4().hex[:6]).next_instance():
            r = self.post(sub.path, sub.body)
            assert r.status_code == 201, r.text
            out.append(r.json())
        return out

    def pod(self, name: str) -> dict[str, Any]:
        return self.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def claim(self, name: str) -> dict[str, Any] | None:
        r = self.s.get(f"{self.server}{RESOURCE}/namespaces/{self.namespace}/resourceclaims/{name}", timeout=30)
        return None if r.status_code == 404 else r.json()

    def claim_of(self, pod: dict[str, Any]) -> str:
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
            return str(s.get("resourceClaimName") or "")
        for c in pod["spec"].get("resourceClaims") or ():
            return str(c.get("resourceClaimName") or "")
        return str(((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName") or "")


def _running(env: Env, name: str) -> dict[str, Any] | None:
    pod = env.pod(name)
    return pod if pod["status"].get("phase") == "Running" else None


@pytest.fixture(scope="module")
def env(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    prefix = f"hsd{uuid.uuid4().hex[:5]}"
    taint = [{"key": TAINT, "value": prefix, "effect": "NoSchedule"}]
    pools = {"pools": [
        {"name": f"{prefix}-h100", "count": 2, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "1"},
         "taints": [dict(taint[0])], "gpus": {"expose": "dra", "model": "h100-80gb", "sharing": "memory"},
         "lifecycle": {"prepare_delay": "200ms"}},
        {"name": f"{prefix}-l4", "count": 1, "resources": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2"},
         "taints": [dict(taint[0])], "gpus": {"expose": "dra", "model": "l4"}}]}
    work = tmp_path_factory.mktemp("dra")
    (work / "pools.yaml").write_text(yaml.safe_dump(pools))
    e = Env(str(cluster.kubeconfig), prefix, pools)
    classes = DeviceClasses(e.s, e.server)
    classes.create(device_classes([p.gpus for p in parse_pools(pools, "p") if p.gpus is not None]))
    assert e.post("/api/v1/namespaces", {"metadata": {"name": e.namespace}}).status_code == 201
    wait_until("the default service account", lambda: e.get(f"/api/v1/namespaces/{e.namespace}/serviceaccounts",
                                                              fieldSelector="metadata.name=default")["items"], 60)
    e.agent = start_agent(cluster.kubeconfig, work / "pools.yaml", ARTIFACTS / f"dra-{prefix}" / "agent.log",
                          "--delete-nodes-on-exit", "--log-level", "INFO")
    e.agent.wait_healthy(120)
    try:
        yield e
    finally:
        e.agent.stop()
        e.s.delete(f"{e.server}/api/v1/namespaces/{e.namespace}", timeout=30)
        assert classes.delete_all() == []


def test_nodes_publish_owned_slices_and_no_counted_gpus(env: Env) -> None:
    def slices() -> list[dict[str, Any]] | None:
        items = [s for s in env.get(f"{RESOURCE}/resourceslices")["items"]
                 if s["spec"].get("nodeName", "").startswith(env.prefix)]
        return items if len(items) == 3 else None

    found = wait_until("a slice per node", slices, 60)
    for s in found:
        node = env.get(f"/api/v1/nodes/{s['spec']['nodeName']}")
        assert s["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        assert "nvidia.com/gpu" not in node["status"]["allocatable"]
        assert s["spec"]["driver"] == "gpu.nvidia.com" and s["spec"]["pool"]["name"] == node["metadata"]["name"]
    assert env.agent is not None and env.agent.metrics()["hollow_dra_nodes_published"] == 3


def test_claim_with_selector_bound_on_a_hollow_node_and_freed_after(env: Env) -> None:
    selector = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"
    (pod,) = env.submit(env.load([env.role("sel", "l4", claim={"device_class": "gpu.nvidia.com", "selector": selector})]))
    name = pod["metadata"]["name"]
    running = wait_until("the pod Running", lambda: _running(env, name), 60)
    assert running["spec"]["nodeName"] == f"{env.prefix}-l4-0"
    claim = env.claim(env.claim_of(running))
    assert claim is not None
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == f"{env.prefix}-l4-0" and result["device"] in ("gpu-0", "gpu-1")
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [running["metadata"]["uid"]]
    # the pod ran only once its claim was allocated and reserved (the hollow kubelet prepared it)
    assert env.agent is not None and env.agent.metrics().get('hollow_dra_prepares_total{result="prepared"}', 0) >= 1
    wait_until("the pod Succeeded", lambda: env.pod(name)["status"].get("phase") == "Succeeded", 60)
    # nothing freed by the agent: the resourceclaim controller deletes the generated claim once the pod ended
    wait_until("the generated claim gone", lambda: env.claim(claim["metadata"]["name"]) is None, 90)


def test_shared_memory_pair_on_one_gpu_and_a_third_waits(env: Env) -> None:
    role = env.role("share", "h100", node_selector={"hollowscale.io/pool": f"{env.prefix}-h100",
                                                    "kubernetes.io/hostname": f"{env.prefix}-h100-0"},
                    claim={"device_class": "gpu.nvidia.com", "memory": "30Gi"})
    spec = env.load([role], kind="Deployment")
    spec = spec.model_copy(update={"workloads": (spec.workloads[0].model_copy(update={"roles": (
        spec.workloads[0].roles[0].model_copy(update={"replicas": 3}),)}),)})
    env.submit(spec)

    def pods() -> list[dict[str, Any]]:
        return [p for p in env.get(f"/api/v1/namespaces/{env.namespace}/pods")["items"]
                if p["metadata"]["labels"].get("hollowscale.io/role") == "share"]

    wait_until("two Running", lambda: sum(p["status"].get("phase") == "Running" for p in pods()) == 2, 90)
    run = [p for p in pods() if p["status"].get("phase") == "Running"]
    results = [env.claim(env.claim_of(p))["status"]["allocation"]["devices"]["results"][0] for p in run]  # type: ignore[index]
    assert {(r["pool"], r["device"]) for r in results} == {(f"{env.prefix}-h100-0", "gpu-0")}
    assert [r["consumedCapacity"]["memory"] for r in results] == ["30Gi", "30Gi"]
    assert len({r["shareID"] for r in results}) == 2

    def third() -> str | None:
        waiting = [p for p in pods() if p["status"].get("phase") == "Pending"]
        for p in waiting:
            for c in p["status"].get("conditions") or ():
                if c["type"] == "PodScheduled" and c["status"] == "False" and "claims" in c.get("message", ""):
                    return str(c["message"])
        return None

    message = wait_until("the third share unschedulable (21Gi free, 30Gi asked)", third, 60)
    assert "cannot allocate all claims" in message


def test_extended_resource_gets_a_dra_device(env: Env) -> None:
    role = env.role("counted", "h100", resources={"cpu": "1", "nvidia.com/gpu": "1"},
                    node_selector={"hollowscale.io/pool": f"{env.prefix}-h100",
                                   "kubernetes.io/hostname": f"{env.prefix}-h100-1"})
    (pod,) = env.submit(env.load([role]))
    running = wait_until("the pod Running", lambda: _running(env, pod["metadata"]["name"]), 90)
    ext = running["status"]["extendedResourceClaimStatus"]
    assert ext["requestMappings"][0]["resourceName"] == "nvidia.com/gpu"
    claim = env.claim(ext["resourceClaimName"])
    assert claim is not None
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == (f"{env.prefix}-h100-1", "gpu-0")


def test_a_selector_that_does_not_compile_is_refused_by_the_dry_run(env: Env) -> None:
    bad = env.load([env.role("bad", "l4", claim={"device_class": "gpu.nvidia.com",
                                                 "selector": "device.attributes['gpu.nvidia.com'].productName =="})])
    problems = dry_run(env.s, env.server, claim_objects(bad, env.run_id))
    assert len(problems) == 1 and problems[0].startswith("workloads[0].roles[0].claim: the apiserver refuses it")
    assert "compilation failed" in problems[0]
