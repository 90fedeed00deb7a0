"""``python -m hollowscale.deviceplugin`` as the real-node pool starts it: arguments, errors, and a whole
run (socket appears, a gRPC client gets the plugin's info, SIGTERM removes the socket)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from hollowscale.deviceplugin._generated import deviceplugin_v1beta1_pb2 as dp
from hollowscale.deviceplugin._generated import deviceplugin_v1beta1_pb2_grpc as dp_grpc
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2 as reg
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2_grpc as reg_grpc
from hollowscale.paths import short_temp_dir

pytestmark = pytest.mark.integration  # each test runs the device plugin CLI as a process

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kubelet_root() -> Iterator[Path]:
    root = short_temp_dir("dp-")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _env_without_nvidia_smi(tmp: Path) -> dict[str, str]:
    """PATH with only the Python interpreter's folder: no nvidia-smi, whatever the machine has."""
    return {**os.environ, "PATH": str(Path(sys.executable).parent)}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hollowscale.deviceplugin", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_help_names_every_option() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for option in ("--kubelet-root", "--node", "--fake-gpus", "--gpu-model", "--real", "--health-file",
                   "--print-node-labels"):
        assert option in out.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--node", "n", "--fake-gpus", "2"], "the following arguments are required: --kubelet-root"),
    (["--kubelet-root", "/tmp", "--fake-gpus", "2"], "the following arguments are required: --node"),
    (["--kubelet-root", "/tmp", "--node", "n", "--fake-gpus", "0"], "expected at least 1 GPU, got 0"),
    (["--kubelet-root", "/tmp", "--node", "n", "--fake-gpus", "two"], "expected a whole number of GPUs, got 'two'"),
    (["--kubelet-root", "/tmp", "--node", "n", "--fake-gpus", "2", "--real"], "not allowed with argument"),
    (["--kubelet-root", "/tmp", "--node", "n", "--gpu-model", "X"], "--gpu-model applies to --fake-gpus only"),
    (["--kubelet-root", "/tmp", "--node", "n", "--fake-gpus", "1", "--health-interval", "0"], "more than 0 seconds"),
])
def test_argument_errors_exit_2_with_the_reason(args: list[str], message: str) -> None:
    out = run_cli(*args)
    assert out.returncode == 2
    assert message in out.stderr


def test_no_gpus_and_no_fake_inventory_is_a_clear_error(tmp_path: Path) -> None:
    out = run_cli("--kubelet-root", str(tmp_path), "--node", "n", env=_env_without_nvidia_smi(tmp_path))
    assert out.returncode == 1
    assert "no NVIDIA GPU found on this machine" in out.stderr
    assert "--fake-gpus N" in out.stderr
    real = run_cli("--kubelet-root", str(tmp_path), "--node", "n", "--real", env=_env_without_nvidia_smi(tmp_path))
    assert real.returncode == 1
    assert "nvidia-smi not found" in real.stderr


def test_missing_kubelet_root_exits_1(tmp_path: Path) -> None:
    out = run_cli("--kubelet-root", str(tmp_path / "absent"), "--node", "n", "--fake-gpus", "1")
    assert out.returncode == 1
    assert "does not exist" in out.stderr


def test_print_node_labels() -> None:
    out = run_cli("--kubelet-root", "/tmp", "--node", "n", "--fake-gpus", "4", "--gpu-model", "NVIDIA H200",
                  "--print-node-labels")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "nvidia.com/gpu.product=NVIDIA-H200,nvidia.com/gpu.count=4"


def test_runs_until_sigterm_then_removes_its_socket(kubelet_root: Path) -> None:
    socket_path = kubelet_root / "plugins_registry" / "nvidia.com_gpu.sock"
    proc = subprocess.Popen([sys.executable, "-m", "hollowscale.deviceplugin", "--kubelet-root", str(kubelet_root),
                             "--node", "real-1", "--fake-gpus", "3", "--gpu-model", "NVIDIA-H200"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not socket_path.is_socket():
            assert proc.poll() is None, f"plugin exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "plugin socket did not appear within 30 s"
            time.sleep(0.1)
        with grpc.insecure_channel(f"unix://{socket_path}") as ch:
            info = reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=10)
            assert (info.type, info.name, info.endpoint) == ("DevicePlugin", "nvidia.com/gpu", str(socket_path))
            stream = dp_grpc.DevicePluginStub(ch).ListAndWatch(dp.Empty(), timeout=10)
            assert [d.ID for d in next(stream).devices] == ["real-1-gpu-0", "real-1-gpu-1", "real-1-gpu-2"]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
            with pytest.raises((StopIteration, grpc.RpcError)):
                next(stream)
        assert not socket_path.exists()
        stderr = proc.stderr.read() if proc.stderr else ""
        assert "got SIGTERM, stopping" in stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _fake_nvidia_smi(bin_dir: Path, csv_file: Path) -> None:
    """An ``nvidia-smi`` that answers ``--query-gpu`` from ``csv_file`` (this machine has no driver): the
    plugin's real-GPU wiring (discovery, IDs, model label, health probe) without a GPU."""
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) exec cat {csv_file};; esac\nexit 9\n')
    script.chmod(0o755)


def test_real_mode_serves_the_uuids_nvidia_smi_lists(kubelet_root: Path, tmp_path: Path) -> None:
    csv = tmp_path / "gpus.csv"
    csv.write_text("0, GPU-0a, NVIDIA H200, 00000000:18:00.0\n1, GPU-1b, NVIDIA H200, 00000000:2A:00.0\n")
    _fake_nvidia_smi(tmp_path / "bin", csv)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    labels = run_cli("--kubelet-root", str(kubelet_root), "--node", "n", "--print-node-labels", env=env)
    assert labels.returncode == 0, labels.stderr
    assert labels.stdout.strip() == "nvidia.com/gpu.product=NVIDIA-H200,nvidia.com/gpu.count=2"
    socket_path = kubelet_root / "plugins_registry" / "nvidia.com_gpu.sock"
    proc = subprocess.Popen([sys.executable, "-m", "hollowscale.deviceplugin", "--kubelet-root", str(kubelet_root),
                             "--node", "n", "--real"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not socket_path.is_socket():
            assert proc.poll() is None, f"plugin exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "plugin socket did not appear within 30 s"
            time.sleep(0.1)
        with grpc.insecure_channel(f"unix://{socket_path}") as ch:
            stream = dp_grpc.DevicePluginStub(ch).ListAndWatch(dp.Empty(), timeout=10)
            assert [(d.ID, d.health) for d in next(stream).devices] == [("GPU-0a", "Healthy"), ("GPU-1b", "Healthy")]
            req = dp.AllocateRequest()
            req.container_requests.add(devices_ids=["GPU-1b"])
            share = dp_grpc.DevicePluginStub(ch).Allocate(req, timeout=10).container_responses[0]
            assert share.envs["NVIDIA_VISIBLE_DEVICES"] == "GPU-1b"
            # no /proc/driver/nvidia here: the minor falls back to nvidia-smi's index
            assert [d.container_path for d in share.devices][:1] == ["/dev/nvidia1"]
            stream.cancel()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_real_health_probe_marks_a_vanished_gpu_unhealthy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hollowscale.deviceplugin.health import HealthWatcher, probe_real
    from hollowscale.deviceplugin.inventory import real_inventory
    from hollowscale.deviceplugin.server import DeviceState

    csv = tmp_path / "gpus.csv"
    csv.write_text("0, GPU-0a, NVIDIA H200, 00000000:18:00.0\n1, GPU-1b, NVIDIA H200, 00000000:2A:00.0\n")
    _fake_nvidia_smi(tmp_path / "bin", csv)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    state = DeviceState(real_inventory())
    watcher = HealthWatcher(state, interval_s=0.05, probe=probe_real, probe_interval_s=0.05)
    watcher.poll_once()
    assert state.unhealthy() == set()
    csv.write_text("0, GPU-0a, NVIDIA H200, 00000000:18:00.0\n")  # GPU-1b fell off the bus
    time.sleep(0.06)
    watcher.poll_once()
    assert state.unhealthy() == {"GPU-1b"}
    csv.write_text("garbage\n")  # nvidia-smi answering nonsense: nothing is known healthy
    time.sleep(0.06)
    watcher.poll_once()
    assert state.unhealthy() == {"GPU-0a", "GPU-1b"}
