"""``up``/``down`` edge cases on clusters of their own: reuse, crashes, bad ports, failing starts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.clusterdir import claim_cluster_dir
from hollowscale.cluster.local import ClusterError, LocalCluster
from kubecore.procs import port_in_use

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_up_reuses_then_a_killed_component_is_restarted_and_down_stops_all(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "c", profile="scale")
    info = local.up(timeout_s=180)
    pids: set[int] = set(info.pids.values())
    try:
        assert not info.reused and info.profile == "scale"
        assert "--enable-priority-and-fairness=false" in info.flags["kube-apiserver"]
        assert any(f.startswith("--audit-log-path=") for f in info.flags["kube-apiserver"])
        again = LocalCluster(tmp_path / "c").up()
        assert again.reused and again.pids == info.pids
        # A component dies: the supervisor restarts it after the kubelet's 10 s backoff and counts it;
        # meanwhile status says so, and up does not call a cluster in backoff degraded.
        os.kill(info.pids["kube-scheduler"], signal.SIGKILL)
        time.sleep(1.0)
        sched = {s.name: s for s in local.status()}["kube-scheduler"]
        assert (sched.alive, sched.state, sched.restarts) == (False, "backoff", 0)
        assert sched.last_reason.startswith("killed by SIGKILL")
        assert LocalCluster(tmp_path / "c").up().reused
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and {s.name: s for s in local.status()}["kube-scheduler"].restarts < 1:
            time.sleep(0.2)
        sched = {s.name: s for s in local.status()}["kube-scheduler"]
        assert sched.alive and sched.restarts == 1 and sched.pid != info.pids["kube-scheduler"]
        pids.add(sched.pid)
        events = [e for e in local.events() if e["component"] == "kube-scheduler"]
        exited = next(e for e in events if e["event"] == "exited")
        restarted = events[-1]
        assert restarted["event"] == "started" and restarted["t"] - exited["t"] >= 9.9
        assert exited["restart_in_s"] == 10.0 and exited["exit"] == "killed by SIGKILL"
    finally:
        stopped = local.down()
    assert "kube-scheduler" in stopped and "kube-apiserver" in stopped
    assert not any(_alive(pid) for pid in pids)
    assert not any(port_in_use(port) for port in info.ports.values())
    assert not (tmp_path / "c").exists()


def test_down_during_a_backoff_and_a_stall_leaves_no_process(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "c")
    info = local.up(timeout_s=180)
    try:
        os.kill(info.pids["kube-controller-manager"], signal.SIGKILL)  # 10 s backoff begins
        assert local.fault("stall", "kube-apiserver", 600)["event"] == "stalled"
        time.sleep(0.5)
        states = {s.name: s.state for s in local.status()}
        assert states["kube-controller-manager"] == "backoff" and states["kube-apiserver"] == "stalled"
    finally:
        t0 = time.monotonic()
        local.down()
    assert time.monotonic() - t0 < 30
    assert not any(_alive(pid) for pid in info.pids.values())
    assert not (tmp_path / "c").exists()


def test_apiserver_and_etcd_restart_keep_the_data(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "c")
    info = local.up(timeout_s=180)
    kubectl = [str(binaries().kubectl), "--kubeconfig", str(info.kubeconfig)]  # the one setup built, not PATH's
    try:
        subprocess.run([*kubectl, "create", "configmap", "survivor", "--from-literal=k=v"], check=True,
                       capture_output=True)
        for component in ("etcd", "kube-apiserver"):
            ack = local.fault("restart", component)
            assert ack["event"] == "restarting"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                c = local.components()[component]
                if c.restarts == 1 and c.state == "running":
                    got = subprocess.run([*kubectl, "get", "configmap", "survivor", "-o", "jsonpath={.data.k}"],
                                         capture_output=True, text=True)
                    if got.returncode == 0:
                        assert got.stdout == "v"
                        break
                time.sleep(0.5)
            else:
                raise AssertionError(f"{component} did not come back with the data: {local.components()[component]}")
        restarted = [e for e in local.events() if e["event"] == "started" and e["why"].startswith("restart requested")]
        assert [e["component"] for e in restarted] == ["etcd", "kube-apiserver"]
        # a requested restart is not a crash (the scheduler and controller-manager may have lost their
        # leases meanwhile and been restarted after a backoff: that is theirs)
        assert all(local.components()[c].consecutive_crashes == 0 for c in ("etcd", "kube-apiserver"))
    finally:
        local.down()


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
    claim_cluster_dir(cluster_dir)  # a cluster folder (up refuses anyone else's) ...
    (cluster_dir / "etcd").write_text("not a directory")  # ... whose etcd data dir real etcd refuses
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
