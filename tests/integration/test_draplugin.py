"""A real node's pods get their GPUs through the DRA kubelet plugin (a cluster of its own: the plugin and the
CDI runtime wrapper start with the node).

One real node with 2 fake H100s published as DRA devices with memory sharing
(``RealNodeSettings(dra_gpus=2, dra=GpuSpec(expose="dra", sharing="memory"))``), checked through the API and
each container's own environment:

1. the plugin registers with the kubelet and publishes the node's ResourceSlice (owned by the Node); the
   DeviceClass ``gpu.nvidia.com`` exists;
2. a pod with a claim from a template (a CEL selector on memory) runs: the real scheduler allocated a device
   of this node's pool and reserved the claim for the pod, and the container sees exactly that device's
   UUID in ``NVIDIA_VISIBLE_DEVICES`` (the plugin's CDI spec, applied by the node's runc wrapper);
3. two pods on one shared ResourceClaim run on the other GPU and both see it (one claim, reserved for both);
4. two pods asking 20Gi memory shares stay Pending with the scheduler's "cannot allocate all claims" (both
   GPUs taken whole); the plugin is restarted meanwhile (its checkpoint keeps the prepared claims);
5. the first pod goes: its generated claim is deleted and unprepared (its CDI spec removed), and both share
   pods run on the freed GPU, each seeing it with its 20Gi and its own share of the device;
6. every pod goes: no claim is left allocated, the plugin's checkpoint and CDI dir are empty; ``down``
   leaves nothing of the node behind.

Without the plugin there is no slice and every claim stays unallocated (step 2 fails); without the runc
wrapper the containers see no device (the env assertions fail): both were checked by hand.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from hollow.dra import DRIVER, GPU_CLASS, GpuSpec
from hollowscale.cluster import supervisor
from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.local import LocalCluster
from hollowscale.cluster.realnode import RealNodeSettings, leftovers, pod_placement
from hollowscale.images import BUSYBOX_IMAGE

pytestmark = [pytest.mark.integration, pytest.mark.root]

NODE = "hs-real-0"
API = "resource.k8s.io/v1"
ENV = ("NVIDIA_VISIBLE_DEVICES", "HOLLOWSCALE_DRA_CLAIM", "HOLLOWSCALE_GPU_MEMORY")


class Kube:
    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.argv = [str(binaries().kubectl), f"--kubeconfig={kubeconfig}"]
        self.ns = namespace

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        out = subprocess.run([*self.argv, *args], input=stdin, capture_output=True, text=True, timeout=60)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
        return out.stdout

    def get(self, *what: str) -> Any:
        return json.loads(self.run("-n", self.ns, "get", *what, "-o", "json"))

    def apply(self, *docs: dict[str, Any]) -> None:
        self.run("-n", self.ns, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))

    def phase(self, pod: str) -> str:
        return str(self.get("pod", pod)["status"].get("phase", ""))

    def env(self, pod: str) -> dict[str, str]:
        """The variables the container printed (the pod's log), once it printed them."""
        log = wait_until(f"{pod}'s log", lambda: (lambda t: t if "END" in t else "")(
            self.run("-n", self.ns, "logs", pod, check=False)), timeout=30)
        return dict(line.split("=", 1) for line in log.splitlines() if line.split("=", 1)[0] in ENV)

    def claim_of(self, pod: str) -> dict[str, Any]:
        """The claim the pod's ``gpu`` entry names (generated from a template or named directly)."""
        doc = self.get("pod", pod)
        statuses = {s["name"]: s.get("resourceClaimName") for s in doc["status"].get("resourceClaimStatuses") or []}
        name = statuses.get("gpu") or doc["spec"]["resourceClaims"][0].get("resourceClaimName")
        return dict(self.get("resourceclaim", name))


def _pod(name: str, claim: dict[str, str]) -> dict[str, Any]:
    script = "env | grep -E '^(NVIDIA|HOLLOWSCALE)_' ; echo END; trap 'exit 0' TERM; sleep 600 & wait"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {**pod_placement(NODE), "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "resourceClaims": [{"name": "gpu", **claim}],
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script], "resources": {"claims": [{"name": "gpu"}]}}]}}


def _template(name: str, exactly: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": GPU_CLASS, **exactly}}]}}}}


def _result(claim: dict[str, Any]) -> dict[str, Any]:
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    return dict(result)


def test_a_real_nodes_pods_get_their_gpus_through_the_dra_plugin(short_tmp_path: Path) -> None:
    spec = GpuSpec(expose="dra", sharing="memory")
    local = LocalCluster(short_tmp_path / "c", real_nodes=RealNodeSettings(count=1, dra_gpus=2, dra=spec))
    info = local.up(timeout_s=180)
    layout_base = short_tmp_path / "c" / "real" / NODE
    try:
        (node,) = info.real_nodes
        assert node.dra_gpus == 2 and f"{NODE}-draplugin" in node.components
        kube = Kube(str(info.kubeconfig), f"dra-{uuid.uuid4().hex[:6]}")
        kube.run("create", "namespace", kube.ns)

        # 1. registered, slice published by the plugin, owned by the Node
        def published() -> list[dict[str, Any]]:
            items = json.loads(kube.run("get", "resourceslices", "-o", "json"))["items"]
            return [s for s in items if s["spec"]["nodeName"] == NODE and s["spec"]["driver"] == DRIVER]

        (slice_,) = wait_until("the node's ResourceSlice", published, timeout=60)
        node_uid = json.loads(kube.run("get", "node", NODE, "-o", "json"))["metadata"]["uid"]
        assert slice_["metadata"]["ownerReferences"][0]["uid"] == node_uid
        uuids = {d["name"]: d["attributes"]["uuid"]["string"] for d in slice_["spec"]["devices"]}
        assert sorted(uuids) == ["gpu-0", "gpu-1"]
        assert all(d.get("allowMultipleAllocations") for d in slice_["spec"]["devices"])
        kube.run("get", "deviceclass", GPU_CLASS)
        plugin_log = short_tmp_path / "c" / "logs" / f"{NODE}-draplugin.log"
        assert "registered with the kubelet" in plugin_log.read_text()

        # 2. a claim from a template, with a CEL selector: allocated by the scheduler, the device in the container
        kube.apply(_template("whole", {"selectors": [{"cel": {"expression":
                   f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"}}]}),
                   _template("share", {"capacity": {"requests": {"memory": "20Gi"}}}),
                   {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": "shared"},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}},
                   _pod("whole", {"resourceClaimTemplateName": "whole"}))
        wait_until("pod whole Running", lambda: kube.phase("whole") == "Running", timeout=90)
        claim = kube.claim_of("whole")
        whole = _result(claim)
        assert (whole["driver"], whole["pool"]) == (DRIVER, NODE)
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [kube.get("pod", "whole")["metadata"]["uid"]]
        env = kube.env("whole")
        assert env["NVIDIA_VISIBLE_DEVICES"] == uuids[whole["device"]]
        assert env["HOLLOWSCALE_DRA_CLAIM"] == f"{kube.ns}/{claim['metadata']['name']}"
        whole_cdi = layout_base / "cdi" / f"k8s.gpu.nvidia.com-claim_{claim['metadata']['uid']}.json"
        assert whole_cdi.exists()

        # 3. one claim shared by two pods: the other GPU, seen by both
        kube.apply(_pod("shared-a", {"resourceClaimName": "shared"}), _pod("shared-b", {"resourceClaimName": "shared"}))
        for pod in ("shared-a", "shared-b"):
            wait_until(f"pod {pod} Running", lambda p=pod: kube.phase(p) == "Running", timeout=90)
        shared = kube.get("resourceclaim", "shared")
        other = _result(shared)["device"]
        assert other != whole["device"] and len(shared["status"]["reservedFor"]) == 2
        assert kube.env("shared-a")["NVIDIA_VISIBLE_DEVICES"] == kube.env("shared-b")["NVIDIA_VISIBLE_DEVICES"] \
            == uuids[other]

        # 4. memory shares while both GPUs are taken whole: Pending, and why; the plugin restarts meanwhile
        kube.apply(_pod("share-1", {"resourceClaimTemplateName": "share"}),
                   _pod("share-2", {"resourceClaimTemplateName": "share"}))

        def unschedulable() -> str:
            conds = kube.get("pod", "share-1")["status"].get("conditions") or []
            return next((c["message"] for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), "")

        assert "cannot allocate all claims" in wait_until("share-1 unschedulable", unschedulable, timeout=60)
        supervisor.request(short_tmp_path / "c", "restart", f"{NODE}-draplugin")
        wait_until("the restarted plugin registered again",
                   lambda: plugin_log.read_text().count("registered with the kubelet") >= 2, timeout=60)
        assert "2 prepared claim(s)" in plugin_log.read_text()

        # 5. the first pod goes: its claim is freed and unprepared, both shares run on its GPU
        kube.run("-n", kube.ns, "delete", "pod", "whole", "--wait=true", "--timeout=60s")
        wait_until("the generated claim deleted", lambda: kube.run(
            "-n", kube.ns, "get", "resourceclaim", claim["metadata"]["name"], check=False) == "", timeout=60)
        wait_until("its CDI spec removed", lambda: not whole_cdi.exists(), timeout=30)
        shares = []
        for pod in ("share-1", "share-2"):
            wait_until(f"pod {pod} Running", lambda p=pod: kube.phase(p) == "Running", timeout=90)
            result = _result(kube.claim_of(pod))
            assert result["device"] == whole["device"] and result["consumedCapacity"]["memory"] == "20Gi"
            shares.append(result["shareID"])
            env = kube.env(pod)
            assert env["NVIDIA_VISIBLE_DEVICES"] == uuids[whole["device"]] and env["HOLLOWSCALE_GPU_MEMORY"] == "20Gi"
        assert len(set(shares)) == 2

        # 6. everything goes: nothing allocated, nothing prepared
        kube.run("-n", kube.ns, "delete", "pod", "--all", "--wait=true", "--timeout=60s")

        def all_freed() -> bool:
            items = kube.get("resourceclaims")["items"]
            return [c["metadata"]["name"] for c in items] == ["shared"] and not items[0]["status"].get("allocation")

        wait_until("every claim freed", all_freed, timeout=60)
        checkpoint = layout_base / "kubelet" / "plugins" / DRIVER / "checkpoint.json"
        wait_until("nothing prepared", lambda: json.loads(checkpoint.read_text())["claims"] == {}
                   and not list((layout_base / "cdi").glob("*.json")), timeout=30)
    finally:
        local.down()
    assert leftovers(short_tmp_path / "c") == []  # the plugin, its sockets, the wrapped runc's containers: gone
    assert not (short_tmp_path / "c").exists()
