"""Real nodes on the real local control plane: a kubelet and its own containerd run real pods.

Jobs complete, Deployments roll, a Service's EndpointSlice (kept by the real controller-manager) lists
a real pod whose address answers over the cluster's bridge, ``kubectl logs`` reads a pod's output, a
missing image fails with the kubelet's own reason, and ``down`` leaves nothing behind.  The first tests
share the session's real node (``real_cluster``); the last starts and stops a cluster of its own.
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.local import ClusterError, ClusterInfo, LocalCluster
from hollowscale.cluster.realnode import RealNodeSettings, host, leftovers, pod_placement
from hollowscale.cluster.realnode.teardown import known_tasks, mounts_under, shims_of
from hollowscale.images import BUSYBOX_IMAGE

pytestmark = [pytest.mark.integration, pytest.mark.root]


def run(kubectl: list[str], *args: str, stdin: str | None = None, check: bool = True) -> str:
    out = subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def apply(kubectl: list[str], ns: str, *docs: dict[str, Any]) -> None:
    run(kubectl, "-n", ns, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))


def get(kubectl: list[str], ns: str, *what: str) -> Any:
    return json.loads(run(kubectl, "-n", ns, "get", *what, "-o", "json"))


def container(name: str, command: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never", "command": ["/bin/sh", "-c", command],
            **extra}


def job(name: str, command: str, node: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                **pod_placement(node), "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [container("main", command)], **spec}}}}


def job_done(kubectl: list[str], ns: str, name: str) -> str | None:
    conds = get(kubectl, ns, "job", name).get("status", {}).get("conditions") or []
    for c in conds:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return str(c["type"])
    return None


def web_deployment(name: str, node: str, marker: str) -> dict[str, Any]:
    serve = f"mkdir -p /tmp/www && echo {marker} > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"
    probe = {"httpGet": {"path": "/index.html", "port": 8080}, "periodSeconds": 1}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         **pod_placement(node), "terminationGracePeriodSeconds": 1,
                         "containers": [container("web", serve, ports=[{"containerPort": 8080}],
                                                  readinessProbe=probe)]}}}}


@pytest.fixture(scope="module")
def node(real_cluster: ClusterInfo) -> str:
    return real_cluster.real_nodes[0].name


@pytest.fixture(scope="module")
def ns(real_cluster: ClusterInfo, kubectl: list[str]) -> Iterator[str]:
    name = f"hs-real-{uuid.uuid4().hex[:6]}"
    run(kubectl, "create", "namespace", name)
    wait_until("the default ServiceAccount", lambda: run(kubectl, "-n", name, "get", "sa", "default",
                                                          check=False), timeout=30)
    yield name
    run(kubectl, "delete", "namespace", name, "--wait=false", check=False)


def test_real_node_is_ready_labelled_tainted_and_recorded(real_cluster: ClusterInfo, kubectl: list[str],
                                                          node: str) -> None:
    doc = json.loads(run(kubectl, "get", "node", node, "-o", "json"))
    assert doc["metadata"]["labels"]["hollowscale.io/node-kind"] == "real"
    assert {"key": "hollowscale.io/real-node", "value": "true", "effect": "NoSchedule"} in doc["spec"]["taints"]
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in doc["status"]["conditions"])
    net = real_cluster.pod_network
    assert net is not None
    assert {"type": "InternalIP", "address": net["gateway"]} in doc["status"]["addresses"]
    info = real_cluster.real_nodes[0]
    assert doc["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == info.kubelet_port
    assert Path(info.containerd_socket).is_socket()


def test_jobs_complete_and_logs_are_readable(kubectl: list[str], ns: str, node: str) -> None:
    apply(kubectl, ns, job("hostnet", "echo hostnet-says-hi", node, hostNetwork=True),
          job("podnet", "echo podnet-says-hi; ip -4 route", node))
    for name in ("hostnet", "podnet"):
        assert wait_until(f"job {name} to finish", functools.partial(job_done, kubectl, ns, name),
                          timeout=90) == "Complete"
    pods = get(kubectl, ns, "pods", "-l", "job-name=podnet")["items"]
    assert [p["spec"]["nodeName"] for p in pods] == [node]
    assert "hostnet-says-hi" in run(kubectl, "-n", ns, "logs", "job/hostnet")
    logs = run(kubectl, "-n", ns, "logs", "job/podnet")
    assert "podnet-says-hi" in logs
    assert "default" not in logs  # no default route in a pod: nothing leaves the machine


def test_deployment_rolls_to_a_new_replicaset(kubectl: list[str], ns: str, node: str) -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "roll"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "roll"}},
                       "template": {"metadata": {"labels": {"app": "roll"}}, "spec": {
                           **pod_placement(node), "terminationGracePeriodSeconds": 1,
                           "containers": [container("c", "exec sleep 3600", env=[{"name": "V", "value": "1"}])]}}}}
    apply(kubectl, ns, deploy)
    run(kubectl, "-n", ns, "rollout", "status", "deploy/roll", "--timeout=90s")
    old = {p["metadata"]["name"] for p in get(kubectl, ns, "pods", "-l", "app=roll")["items"]}
    run(kubectl, "-n", ns, "set", "env", "deploy/roll", "V=2")
    run(kubectl, "-n", ns, "rollout", "status", "deploy/roll", "--timeout=120s")

    def rolled() -> list[dict[str, Any]] | None:
        pods = get(kubectl, ns, "pods", "-l", "app=roll")["items"]
        ok = len(pods) == 2 and all(p["status"].get("phase") == "Running" and p["metadata"]["name"] not in old
                                    and p["spec"]["containers"][0]["env"] == [{"name": "V", "value": "2"}]
                                    for p in pods)
        return pods if ok else None

    wait_until("only the new ReplicaSet's pods, Running", rolled, timeout=60)
    sets = get(kubectl, ns, "rs", "-l", "app=roll")["items"]
    assert sorted(rs["status"].get("replicas", 0) for rs in sets) == [0, 2]


def test_service_endpointslice_lists_a_real_pod_that_answers(real_cluster: ClusterInfo, kubectl: list[str],
                                                             ns: str, node: str) -> None:
    marker = f"teacher-{uuid.uuid4().hex[:8]}"
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    apply(kubectl, ns, web_deployment("web", node, marker), service)

    def ready_ips() -> list[str]:
        slices = get(kubectl, ns, "endpointslices", "-l", "kubernetes.io/service-name=web")["items"]
        return [a for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")
                for a in e["addresses"]]

    ips = wait_until("the EndpointSlice to list a ready real pod", ready_ips, timeout=90)
    (pod,) = get(kubectl, ns, "pods", "-l", "app=web")["items"]
    assert ips == [pod["status"]["podIP"]]
    net = real_cluster.pod_network
    assert net is not None and pod["status"]["podIP"] != net["gateway"]
    # from the host, over the bridge
    with urllib.request.urlopen(f"http://{ips[0]}:8080/index.html", timeout=5) as resp:
        assert resp.read().decode().strip() == marker
    # from another pod, over the bridge
    apply(kubectl, ns, job("client", f"wget -q -O - http://{ips[0]}:8080/index.html", node))
    assert wait_until("the client job", lambda: job_done(kubectl, ns, "client"), timeout=90) == "Complete"
    assert marker in run(kubectl, "-n", ns, "logs", "job/client")
    # exec goes apiserver -> kubelet (client certificate, webhook authz) -> containerd's stream server
    assert run(kubectl, "-n", ns, "exec", pod["metadata"]["name"], "--", "cat", "/tmp/www/index.html").strip() == marker


def test_missing_image_fails_with_the_kubelets_reason_and_nothing_else(kubectl: list[str], ns: str,
                                                                       node: str) -> None:
    apply(kubectl, ns, web_deployment("steady", node, "steady"))
    run(kubectl, "-n", ns, "rollout", "status", "deploy/steady", "--timeout=90s")
    (steady,) = get(kubectl, ns, "pods", "-l", "app=steady")["items"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "noimage"},
           "spec": {**pod_placement(node), "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "hollowscale.local/not-there:0", "imagePullPolicy": "Never"}]}}
    apply(kubectl, ns, pod)

    def reason() -> str | None:
        statuses = get(kubectl, ns, "pod", "noimage").get("status", {}).get("containerStatuses") or []
        waiting = (statuses[0].get("state") or {}).get("waiting") or {} if statuses else {}
        found = waiting.get("reason")
        return None if found in (None, "ContainerCreating") else str(found)

    assert wait_until("the kubelet's reason", reason, timeout=60) == "ErrImageNeverPull"
    time.sleep(2)
    after = get(kubectl, ns, "pod", steady["metadata"]["name"])
    assert after["status"]["phase"] == "Running"
    assert after["metadata"]["uid"] == steady["metadata"]["uid"]
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0
    node_doc = json.loads(run(kubectl, "get", "node", node, "-o", "json"))
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in node_doc["status"]["conditions"])
    run(kubectl, "-n", ns, "delete", "pod", "noimage", "--wait=false")


def _start(pid: int) -> str | None:
    """The running process's start time (field 22 of its stat: tells it from a later process with its pid);
    None when it is gone or a zombie (exited, waiting for init to reap it)."""
    try:
        fields = (stat := Path(f"/proc/{pid}/stat").read_text())[stat.rindex(")") + 2:].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _iptables() -> str:
    out = subprocess.run(["iptables-save"], capture_output=True, text=True, timeout=30)
    return "\n".join(sorted(line.split(" [")[0] for line in out.stdout.splitlines() if not line.startswith("#")))


def test_two_nodes_with_fake_gpus_share_the_bridge_and_down_leaves_nothing(short_tmp_path: Path) -> None:
    """Its own cluster with two real nodes (fake GPUs through the device-plugin hook): a pod on one node
    reaches a pod on the other over the bridge; then ``down`` leaves no process, shim, mount, network
    namespace, bridge, veth, iptables rule or host claim of ours."""
    cluster_dir = short_tmp_path / "c"
    before = _iptables()
    local = LocalCluster(cluster_dir, real_nodes=RealNodeSettings(count=2, fake_gpus=2, gpu_model="fake-h100"))
    info = local.up(timeout_s=180)
    try:
        kubectl = [str(binaries().kubectl), f"--kubeconfig={info.kubeconfig}"]
        assert [n.name for n in info.real_nodes] == ["hs-real-0", "hs-real-1"]
        assert len({n.kubelet_port for n in info.real_nodes}) == 2
        assert all(f"{n.name}-deviceplugin" in n.components for n in info.real_nodes)

        def two_gpus(node: str) -> bool:
            doc = json.loads(run(kubectl, "get", "node", node, "-o", "json"))
            return str(doc["status"].get("allocatable", {}).get("nvidia.com/gpu", "0")) == "2"

        for n in info.real_nodes:
            wait_until(f"{n.name} to advertise 2 fake GPUs", functools.partial(two_gpus, n.name), timeout=60)
        ns = "leftovers"
        run(kubectl, "create", "namespace", ns)
        wait_until("the default ServiceAccount", lambda: run(kubectl, "-n", ns, "get", "sa", "default",
                                                              check=False), timeout=30)
        marker = f"across-{uuid.uuid4().hex[:6]}"
        hostnet = web_deployment("hostnet", "hs-real-1", "x")
        hostnet["spec"]["template"]["spec"]["hostNetwork"] = True
        hostnet["spec"]["template"]["spec"]["containers"][0]["command"][2] = "exec sleep 3600"
        del hostnet["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        apply(kubectl, ns, web_deployment("web", "hs-real-0", marker), hostnet)
        for name in ("web", "hostnet"):
            run(kubectl, "-n", ns, "rollout", "status", f"deploy/{name}", "--timeout=90s")
        (web,) = get(kubectl, ns, "pods", "-l", "app=web")["items"]
        apply(kubectl, ns, job("across", f"wget -q -O - http://{web['status']['podIP']}:8080/index.html", "hs-real-1"))
        assert wait_until("the cross-node client", lambda: job_done(kubectl, ns, "across"), timeout=90) == "Complete"
        assert marker in run(kubectl, "-n", ns, "logs", "job/across")
        shims = [(pid, _start(pid)) for n in info.real_nodes for pid in shims_of(Path(n.containerd_socket))]
        assert shims, "the pods run under shims of the nodes' containerds"
        assert mounts_under(cluster_dir), "the pods' rootfs and network namespaces are mounted under the dir"
        assert info.pod_network is not None and host.bridge_ports(info.pod_network["bridge"])
        tasks = known_tasks(cluster_dir)
        assert len(tasks) >= 4  # 3 pods: sandboxes and containers
    finally:
        local.down()
    assert leftovers(cluster_dir, tasks) == []
    assert not [pid for pid, started in shims if _start(pid) == started], "a shim still runs"
    assert not cluster_dir.exists()
    assert _iptables() == before, "iptables changed"
    if not host.claimants():  # the last real-node cluster of the machine restores the shared state
        assert not host.CLAIM_FILE.exists()


def test_a_failed_up_names_the_node_and_leaves_nothing(short_tmp_path: Path) -> None:
    """A kubelet that exits at start fails ``up`` with its name, reason and log; everything started is gone."""
    work = short_tmp_path
    broken = work / "kubelet"
    broken.write_text("#!/bin/sh\necho 'E0101 failed to run Kubelet: refused by this test' >&2\nexit 3\n")
    broken.chmod(0o755)
    cluster_dir = work / "c"
    with pytest.raises(ClusterError, match=r"hs-real-0-kubelet exited at start \(code 3\).*refused by this test"):
        LocalCluster(cluster_dir, real_nodes=1, kubelet_bin=broken).up(timeout_s=180)
    assert leftovers(cluster_dir) == []
    assert not cluster_dir.exists()
