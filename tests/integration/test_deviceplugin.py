"""The device plugin with a fake inventory against a real kubelet (a real node of the local cluster).

One plugin lifecycle on one real node, checked step by step through the API server and the kubelet's
own pod-resources socket:

1. the plugin registers through the kubelet's plugin watcher: the node's ``allocatable`` gets
   ``nvidia.com/gpu: N`` and the kubelet's GetAllocatableResources lists exactly the plugin's IDs;
2. a busybox pod asking for 2 GPUs runs; its log shows ``HOLLOWSCALE_GPU_IDS`` and
   ``NVIDIA_VISIBLE_DEVICES`` with 2 distinct IDs, exactly those the kubelet says it allocated to the
   container (pod-resources List);
3. a pod asking for N+1 stays Pending with the scheduler's ``Insufficient nvidia.com/gpu``;
4. a device written to the health file leaves ``allocatable`` (N-1), and comes back when removed;
5. a plugin killed with SIGKILL takes the devices away; restarted, it replaces its stale socket, the
   devices come back under the same IDs, and the kubelet still counts the first pod's two as taken: a new
   1-GPU pod gets the third;
6. the kubelet restarts: it finds the socket again, re-registers the plugin and restores both pods'
   allocations from its checkpoint;
7. after SIGTERM the plugin's socket is gone and ``allocatable`` drops to 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from waiting import wait_until

from hollowscale.cluster import supervisor
from hollowscale.cluster.realnode import pod_placement
from hollowscale.deviceplugin._generated import podresources_v1_pb2 as pr
from hollowscale.deviceplugin._generated import podresources_v1_pb2_grpc as pr_grpc
from hollowscale.images import BUSYBOX_IMAGE

pytestmark = [pytest.mark.integration, pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]
GPUS = 3
RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Node:
    name: str
    kubelet_root: Path
    cluster_dir: Path


class Kube:
    """kubectl against the test cluster, JSON in and out."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        out = subprocess.run([*self.argv, *args], input=stdin, capture_output=True, text=True, timeout=60)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
        return out.stdout

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.run("get", *args, "-o", "json"))

    def apply(self, obj: dict[str, Any]) -> None:
        self.run("apply", "-f", "-", stdin=json.dumps(obj))


def _gpus(kube: Kube, node: str, field: str = "allocatable") -> int:
    return int((kube.get("node", node)["status"].get(field) or {}).get(RESOURCE, "0"))


def _gpu_pod(name: str, namespace: str, node: str, gpus: int) -> dict[str, Any]:
    """busybox that prints the plugin's variables and stays up (so the kubelet keeps its devices listed)."""
    script = ('echo "HOLLOWSCALE_GPU_IDS=$HOLLOWSCALE_GPU_IDS"; echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"; '
              "trap 'exit 0' TERM; sleep 600 & wait")
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "spec": {
            **pod_placement(node),
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                "command": ["sh", "-c", script],
                "resources": {"limits": {RESOURCE: str(gpus)}},
            }],
        },
    }


def _pod_resources(node: Node) -> pr_grpc.PodResourcesListerStub:
    channel = grpc.insecure_channel(f"unix://{node.kubelet_root / 'pod-resources' / 'kubelet.sock'}")
    return pr_grpc.PodResourcesListerStub(channel)


def _allocated_by_kubelet(node: Node, namespace: str, pod: str) -> list[str]:
    """The device IDs the kubelet gave the pod's container, from its pod-resources List."""
    listing = _pod_resources(node).List(pr.ListPodResourcesRequest(), timeout=10)
    for item in listing.pod_resources:
        if (item.namespace, item.name) == (namespace, pod):
            return [i for c in item.containers for d in c.devices if d.resource_name == RESOURCE for i in d.device_ids]
    raise AssertionError(f"pod-resources List has no {namespace}/{pod}")


@pytest.fixture(scope="module")
def gpu_node(real_cluster: Any) -> Node:
    """A real node without a device plugin of its own (this test starts and stops one)."""
    plain = [n for n in real_cluster.real_nodes if not n.fake_gpus]
    if not plain:
        pytest.fail("the real_cluster fixture has no real node without fake GPUs: this test needs one to run "
                    "its own plugin on", pytrace=False)
    info = plain[0]
    return Node(name=info.name, kubelet_root=Path(info.root_dir), cluster_dir=Path(real_cluster.dir))


@pytest.fixture(scope="module")
def kube(real_cluster: Any) -> Kube:
    from hollowscale.cluster.binaries import binaries

    return Kube([str(binaries().kubectl), f"--kubeconfig={real_cluster.kubeconfig}"])


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"dp-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=true", "--timeout=90s", check=False)


def test_fake_gpus_through_a_real_kubelet(gpu_node: Node, kube: Kube, namespace: str, tmp_path: Path) -> None:
    node = gpu_node.name
    socket_path = gpu_node.kubelet_root / "plugins_registry" / "nvidia.com_gpu.sock"
    health_file = tmp_path / "unhealthy"
    log_file = tmp_path / "deviceplugin.log"
    ids = [f"{node}-gpu-{i}" for i in range(GPUS)]
    assert _gpus(kube, node) == 0, "the node already advertises GPUs before the plugin started"

    def start_plugin() -> subprocess.Popen[bytes]:
        with log_file.open("a") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "hollowscale.deviceplugin", "--kubelet-root", str(gpu_node.kubelet_root),
                 "--node", node, "--fake-gpus", str(GPUS), "--gpu-model", "NVIDIA-H200",
                 "--health-file", str(health_file), "--health-interval", "0.5"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    plugin = start_plugin()
    try:
        # 1. registration through the plugin watcher
        wait_until(f"{RESOURCE} allocatable {GPUS} on {node}", lambda: _gpus(kube, node) == GPUS, timeout=90)
        assert "registered with the kubelet" in log_file.read_text()
        allocatable = _pod_resources(gpu_node).GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=10)
        assert sorted(i for d in allocatable.devices if d.resource_name == RESOURCE for i in d.device_ids) == ids

        # 2. a pod asking for 2 GPUs sees exactly the 2 the kubelet allocated
        kube.apply(_gpu_pod("two", namespace, node, 2))
        wait_until("pod two Running", lambda: kube.get("pod", "two", "-n", namespace)["status"].get("phase") == "Running",
                   timeout=120)
        log = wait_until("pod two's log", lambda: (lambda t: t if "NVIDIA_VISIBLE_DEVICES=" in t else "")(
            kube.run("logs", "two", "-n", namespace, check=False)), timeout=30)
        env = dict(re.findall(r"^(HOLLOWSCALE_GPU_IDS|NVIDIA_VISIBLE_DEVICES)=(.*)$", log, re.MULTILINE))
        in_env = env["HOLLOWSCALE_GPU_IDS"].split(",")
        assert len(in_env) == 2 and len(set(in_env)) == 2 and set(in_env) <= set(ids), log
        assert env["NVIDIA_VISIBLE_DEVICES"] == env["HOLLOWSCALE_GPU_IDS"]
        assert sorted(in_env) == sorted(_allocated_by_kubelet(gpu_node, namespace, "two"))

        # 3. N+1 GPUs: Pending, and the scheduler says why
        kube.apply(_gpu_pod("too-many", namespace, node, GPUS + 1))

        def unschedulable() -> dict[str, Any] | None:
            conds = kube.get("pod", "too-many", "-n", namespace)["status"].get("conditions") or []
            return next((c for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), None)

        cond = wait_until("pod too-many marked unschedulable", unschedulable, timeout=60)
        assert cond["reason"] == "Unschedulable"
        assert f"Insufficient {RESOURCE}" in cond["message"]
        time.sleep(3)
        pending = kube.get("pod", "too-many", "-n", namespace)
        assert pending["status"]["phase"] == "Pending" and not pending["spec"].get("nodeName")
        kube.run("delete", "pod", "too-many", "-n", namespace, "--wait=false")

        # 4. an unhealthy device leaves allocatable; capacity keeps counting it
        health_file.write_text(f"{ids[-1]}\n")
        wait_until(f"allocatable {GPUS - 1} with {ids[-1]} unhealthy", lambda: _gpus(kube, node) == GPUS - 1, timeout=60)
        assert _gpus(kube, node, "capacity") == GPUS
        health_file.unlink()
        wait_until(f"allocatable back to {GPUS}", lambda: _gpus(kube, node) == GPUS, timeout=60)

        # 5. the plugin is killed (its socket stays behind): the devices go; a restarted plugin (stale socket
        #    replaced, same IDs) brings them back, and the kubelet still knows pod two holds its two
        plugin.kill()
        plugin.wait()
        wait_until("allocatable 0 after the plugin was killed", lambda: _gpus(kube, node) == 0, timeout=60)
        plugin = start_plugin()
        wait_until(f"allocatable {GPUS} after the restart", lambda: _gpus(kube, node) == GPUS, timeout=90)
        kube.apply(_gpu_pod("one", namespace, node, 1))
        wait_until("pod one Running", lambda: kube.get("pod", "one", "-n", namespace)["status"].get("phase") == "Running",
                   timeout=120)
        assert _allocated_by_kubelet(gpu_node, namespace, "one") == sorted(set(ids) - set(in_env))
        assert "removed stale socket" in log_file.read_text()

        # 6. the kubelet restarts (the plugin keeps running): its plugin watcher finds the socket again and
        #    re-registers it; the allocations come back from the kubelet's checkpoint
        supervisor.request(gpu_node.cluster_dir, "restart", f"{node}-kubelet")
        wait_until("the restarted kubelet re-registers the plugin",
                   lambda: log_file.read_text().count("registered with the kubelet") == 3, timeout=120)
        wait_until(f"allocatable {GPUS} after the kubelet restart", lambda: _gpus(kube, node) == GPUS, timeout=90)

        def restored() -> bool:
            try:
                return (sorted(_allocated_by_kubelet(gpu_node, namespace, "two")) == sorted(in_env)
                        and _allocated_by_kubelet(gpu_node, namespace, "one") == sorted(set(ids) - set(in_env)))
            except (AssertionError, grpc.RpcError):  # pod-resources not serving yet, or the pods not synced yet
                return False

        wait_until("both pods' devices in the restarted kubelet's pod-resources", restored, timeout=60)

        kube.run("delete", "pod", "two", "one", "-n", namespace, "--wait=true", "--timeout=60s")

        # 7. the plugin stops: socket gone, no GPU allocatable any more
        plugin.send_signal(signal.SIGTERM)
        assert plugin.wait(timeout=20) == 0, log_file.read_text()
        assert not socket_path.exists()
        wait_until(f"{RESOURCE} allocatable 0 on {node} after the plugin stopped", lambda: _gpus(kube, node) == 0,
                   timeout=90)
    finally:
        if plugin.poll() is None:
            plugin.kill()
            plugin.wait()
        print(log_file.read_text())
