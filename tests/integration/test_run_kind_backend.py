"""``cluster.backend: kind`` through ``hollowscale run``, for real: the smoke scenario against a kind cluster of
nodes built here (hollowscale.kindnode) in hollowscale's own podman, shaped by ``kind-config.yaml``
(a control plane and two workers), with a short real distillation job on the workers and the kind
control plane's own metrics scraped, and nothing of it left afterwards; and a Ctrl-C while kind is still
creating the cluster, after which nothing is left either."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from clirun import interrupt, run_cli
from kindstate import WORKERS, assert_nothing_left, network_state, no_cluster_yet

from hollowscale.kindnode import firewall

# builds the node image when it is not cached and runs a whole scenario on kind: make test-e2e
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_scenario_on_a_kind_cluster_built_here(tmp_path: Path) -> None:
    podman = no_cluster_yet()
    modules_before = Path("/lib/modules").exists()
    fw_before = firewall.snapshot()
    net_before = network_state()
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"] = {"backend": "kind", "namespace": "kind-smoke"}
    # a real job on the workers: a teacher behind its Service, a student that trains with its soft labels
    doc["distill_jobs"] = [{"name": "kind", "seed": 0, "teachers": 1, "epochs": 1, "labelled": 300,
                            "unlabelled": 3000, "test_images": 500, "start_at_s": "1s", "timeout_s": "600s"}]
    doc["measurements"]["settle_timeout_s"] = "600s"
    scen = tmp_path / "kind.yaml"
    scen.write_text(yaml.safe_dump(doc))
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(tmp_path / "out"), "--quiet"], 1800,
                cwd=ROOT)
    run_dir = (tmp_path / "out" / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert r.returncode == 0, (summary.get("incomplete_reason"), r.stdout[-2000:], r.stderr[-3000:])
    assert summary["complete"] is True
    # the kind control plane's own metrics: the apiserver through its published port, the scheduler and the
    # controller-manager at the control-plane container's address, and the scheduler's bindings counted
    targets = summary["prometheus"]["targets"]
    assert {job: targets.get(job) for job in ("apiserver", "scheduler", "controller-manager")} == dict.fromkeys(
        ("apiserver", "scheduler", "controller-manager"), "up"), targets
    assert summary["measurements"]["crosscheck"]["agree"] is True, summary["measurements"]["crosscheck"]
    config = yaml.safe_load((run_dir / "kind-config.yaml").read_text())
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker"]
    assert all(n["image"].startswith("localhost/hollowscale/kind-node:") for n in config["nodes"])
    assert all(n.get("extraMounts") for n in config["nodes"][1:])  # the teacher checkpoint, on the workers
    # the distillation job ran on kind's workers, its student fed by the teacher without losing a sample
    [job] = summary["distill_jobs"]
    assert job["student_phase"] == "Succeeded" and job["lost_samples"] == 0 and job["test_accuracy"] > 0.3, job
    assert job["student_node"] in WORKERS and {p["node"] for p in job["teacher_pods"]} <= set(WORKERS), job
    assert_nothing_left(podman, fw_before, modules_before, net_before)


def test_ctrl_c_while_kind_creates_the_cluster_leaves_nothing(tmp_path: Path) -> None:
    podman = no_cluster_yet()
    modules_before = Path("/lib/modules").exists()
    fw_before = firewall.snapshot()
    net_before = network_state()
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"] = {"backend": "kind", "namespace": "kind-interrupt"}
    scen = tmp_path / "kind.yaml"
    scen.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 900  # the node image may be built first
        while podman.run(["container", "exists", "hollowscale-control-plane"], check=False).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline, "kind never started creating the cluster"
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # kind is creating the nodes now
        output, _ = proc.communicate(timeout=300)
    finally:
        interrupt(proc)
    assert proc.returncode == 130, output[-3000:]
    summary = json.loads((next(out.glob("*/summary.json"))).read_text())
    assert summary["complete"] is False and "SIGINT" in summary["incomplete_reason"]
    assert_nothing_left(podman, fw_before, modules_before, net_before)


def test_the_gpu_config_gives_its_worker_the_passthrough_mount_and_fake_gpus_a_pod_gets(tmp_path: Path) -> None:
    """``kind-config-gpu.yaml`` as far as this machine goes: the worker is created with the NVIDIA
    toolkit's device-list mount, the fake device plugin beside it makes it advertise GPUs, and a pod asking
    for one is given its ID by the plugin's Allocate; what needs a real GPU is not run."""
    from hollowscale.backends.base import BackendSettings
    from hollowscale.backends.kind import KindBackend
    from hollowscale.images import BUSYBOX_IMAGE, build_images
    from hollowscale.scenario.validate import parse_scenario
    from kubecore.watch import session_for

    podman = no_cluster_yet()
    modules_before = Path("/lib/modules").exists()
    fw_before = firewall.snapshot()
    net_before = network_state()
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"] = {"backend": "kind", "namespace": "kind-gpu", "kind_config": "kind-config-gpu.yaml",
                      "real_node_gpus": {"count": 2}}
    backend = KindBackend(BackendSettings(parse_scenario(doc, "kind-gpu.yaml"), tmp_path / "run", keep_cluster=False,
                                          log=print))
    plugins_dir = None
    try:
        access = backend.up()
        assert backend.gpus is not None
        plugins_dir = backend.gpus.base
        s, server = session_for(access.endpoint), access.endpoint.server
        nodes = {n["metadata"]["name"]: n for n in s.get(f"{server}/api/v1/nodes", timeout=30).json()["items"]}
        assert set(nodes) == {"hollowscale-control-plane", "hollowscale-worker"}
        assert nodes["hollowscale-worker"]["status"]["allocatable"]["nvidia.com/gpu"] == "2"
        assert "nvidia.com/gpu" not in nodes["hollowscale-control-plane"]["status"]["allocatable"]
        mounts = json.loads(podman.run(["inspect", "hollowscale-worker", "--format", "{{json .Mounts}}"]).stdout)
        assert {"/dev/null": "/var/run/nvidia-container-devices/all"}.items() <= {
            m["Source"]: m["Destination"] for m in mounts}.items(), mounts
        access.real_nodes.load_images(build_images(["busybox"]), print)
        ns = "kind-gpu-pod"
        s.post(f"{server}/api/v1/namespaces", json={"metadata": {"name": ns}}, timeout=30).raise_for_status()
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "asks-a-gpu"}, "spec": {
            "restartPolicy": "Never", "nodeSelector": {"hollowscale.io/node-kind": "real"},
            "tolerations": [{"key": "hollowscale.io/real-node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        s.post(f"{server}/api/v1/namespaces/{ns}/pods", json=pod, timeout=30).raise_for_status()
        deadline = time.monotonic() + 180
        while (phase := s.get(f"{server}/api/v1/namespaces/{ns}/pods/asks-a-gpu", timeout=30).json()
               .get("status", {}).get("phase")) not in ("Succeeded", "Failed"):
            assert time.monotonic() < deadline, f"the pod is still {phase}"
            time.sleep(0.5)
        logs = s.get(f"{server}/api/v1/namespaces/{ns}/pods/asks-a-gpu/log", timeout=30).text
        assert phase == "Succeeded" and logs.strip().startswith("hollowscale-worker-gpu-"), (phase, logs)
    finally:
        backend.down()
    assert_nothing_left(podman, fw_before, modules_before, net_before)
    assert plugins_dir is not None and not plugins_dir.exists()
