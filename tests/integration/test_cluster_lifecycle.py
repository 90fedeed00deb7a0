"""``up``/``down`` edge cases on clusters of their own: reuse, crashes, bad ports, failing starts."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.local import ClusterError, LocalCluster
from kubecore.procs import port_in_use

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_up_reuses_then_down_survives_a_crashed_component(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "c", profile="scale")
    info = local.up(timeout_s=180)
    try:
        assert not info.reused and info.profile == "scale"
        assert "--enable-priority-and-fairness=false" in info.flags["kube-apiserver"]
        again = LocalCluster(tmp_path / "c").up()
        assert again.reused and again.pids == info.pids
        # A component crashes: status notices, up refuses to pretend, down still stops the rest.
        os.kill(info.pids["kube-scheduler"], signal.SIGKILL)
        time.sleep(0.5)
        assert {s.name: s.alive for s in local.status()}["kube-scheduler"] is False
        with pytest.raises(ClusterError, match="degraded"):
            LocalCluster(tmp_path / "c").up()
    finally:
        stopped = local.down()
    assert "kube-scheduler" not in stopped and "kube-apiserver" in stopped
    assert not any(_alive(pid) for pid in info.pids.values())
    assert not any(port_in_use(port) for port in info.ports.values())
    assert not (tmp_path / "c").exists()


def test_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ClusterError, match=f"port {port} on 127.0.0.1 is already in use"):
            LocalCluster(tmp_path / "c", apiserver_port=port).up()
    assert not (tmp_path / "c").exists()


def test_component_that_exits_at_start_names_reason_and_log(tmp_path: Path) -> None:
    cluster_dir = tmp_path / "c"
    cluster_dir.mkdir()
    (cluster_dir / "etcd").write_text("not a directory")  # real etcd refuses this data dir
    local = LocalCluster(cluster_dir)
    with pytest.raises(ClusterError) as err:
        local.up(timeout_s=60)
    message = str(err.value)
    assert message.startswith("etcd exited at start")
    assert "log: " in message and message.count("\n") == 0
    assert not cluster_dir.exists()  # nothing half-done left behind


def test_missing_binary_says_how_to_build(tmp_path: Path) -> None:
    real = binaries()
    broken = type(real)(**{**real.__dict__, "kube_scheduler": tmp_path / "nope" / "kube-scheduler"})
    with pytest.raises(ClusterError, match="make setup"):
        LocalCluster(tmp_path / "c", bins=broken).up()
    assert not (tmp_path / "c").exists()
