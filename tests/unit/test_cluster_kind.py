"""``cluster.backend: kind`` without kind or Docker: clear errors, nothing built, nothing deleted.

Every test here runs with ``PATH`` pointed at a folder of its own (empty, or holding small fake ``kind``
and ``docker`` scripts), so both branches of the tool check (tool absent, tool present) run on every
machine, whatever kind or Docker it happens to have. The fakes stand in for the CLIs only; no
Kubernetes API is involved.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from hollowscale.cluster.kind import (
    DEFAULT_CONFIG,
    KindCluster,
    KindError,
    KindSettings,
    check_tools,
    delete_kind_cluster,
    ensure_kind_cluster,
)
from hollowscale.images import BuiltImage

#: what docker's CLI prints when no daemon answers at DOCKER_HOST (docker 27's wording)
NO_DAEMON = 'echo "Cannot connect to the Docker daemon at $DOCKER_HOST. Is the docker daemon running?" >&2; exit 1'
#: a docker whose daemon answers `docker info --format {{.ServerVersion}}`
DAEMON_UP = 'echo "27.3.1"'


def _no_build(names: Sequence[str]) -> list[BuiltImage]:
    raise AssertionError(f"images {list(names)} were built although the kind backend cannot run")


def _path_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **tools: str) -> Path:
    """PATH = one fresh folder holding a ``/bin/sh`` script per tool (name -> script body), nothing else.

    Each fake appends its arguments to ``<name>.calls`` beside it, so a test can see how it was run.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in tools.items():
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "$*" >> "{bin_dir / name}.calls"\n{body}\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def test_kind_and_docker_both_absent_are_both_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(tmp_path, monkeypatch)  # an empty PATH folder: neither tool exists
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig")
    with pytest.raises(KindError) as e:
        ensure_kind_cluster(s, build=_no_build)
    msg = str(e.value)
    assert msg.startswith("cluster.backend kind cannot run here: ")
    assert "`kind` not found on PATH" in msg and "go install sigs.k8s.io/kind@v0.33.0" in msg
    assert "`docker` not found on PATH" in msg and "install Docker" in msg
    assert "\n" not in msg
    assert not (tmp_path / "kubeconfig").exists()


def test_other_tool_names_are_looked_up_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(tmp_path, monkeypatch, kind="exit 0", docker=DAEMON_UP)  # the default names exist, these do not
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig", kind="hs-no-such-kind", docker="hs-no-such-docker")
    with pytest.raises(KindError) as e:
        check_tools(s)
    assert "`hs-no-such-kind` not found on PATH" in str(e.value)
    assert "`hs-no-such-docker` not found on PATH" in str(e.value)


@pytest.mark.integration  # starts a process
def test_kind_absent_docker_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _path_with(tmp_path, monkeypatch, docker=DAEMON_UP)
    with pytest.raises(KindError) as e:
        ensure_kind_cluster(KindSettings(kubeconfig=tmp_path / "kubeconfig"), build=_no_build)
    msg = str(e.value)
    assert "`kind` not found on PATH" in msg
    assert "docker" not in msg.lower()  # only kind is named as the problem
    assert (bin_dir / "docker.calls").read_text().split() == ["info", "--format", "{{.ServerVersion}}"]


@pytest.mark.integration  # starts a process
def test_docker_client_without_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A docker client whose daemon does not answer is refused with docker's own reason."""
    _path_with(tmp_path, monkeypatch, kind="exit 0", docker=NO_DAEMON)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(KindError) as e:
        check_tools(KindSettings(kubeconfig=tmp_path / "kubeconfig"))
    msg = str(e.value)
    assert "Docker is not running: `docker info` failed" in msg
    assert "no-daemon.sock" in msg  # docker's own message names the socket it tried
    assert "`kind` not found" not in msg


@pytest.mark.integration  # starts a process
def test_kind_and_running_docker_present_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _path_with(tmp_path, monkeypatch, kind="exit 0", docker=DAEMON_UP)
    assert check_tools(KindSettings(kubeconfig=tmp_path / "kubeconfig")) == str(bin_dir / "kind")


def test_invalid_name_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _path_with(tmp_path, monkeypatch, kind="exit 0", docker=DAEMON_UP)
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig", name="Hollow_Scale")
    with pytest.raises(KindError, match=r"'Hollow_Scale' is invalid: kind needs"):
        ensure_kind_cluster(s, build=_no_build)
    assert not list(bin_dir.glob("*.calls"))  # neither tool was run


@pytest.mark.integration  # starts a process
def test_only_a_created_cluster_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _path_with(tmp_path, monkeypatch, kind="exit 0")
    reused = KindCluster("users-own", tmp_path / "kubeconfig", created=False, kind=str(bin_dir / "kind"))
    assert delete_kind_cluster(reused) is False
    assert not (bin_dir / "kind.calls").exists()  # kind is not even called
    ours = KindCluster("hollowscale", tmp_path / "kubeconfig", created=True, kind=str(tmp_path / "no-kind"))
    with pytest.raises(KindError, match=r"deleting kind cluster hollowscale: cannot run"):
        delete_kind_cluster(ours)


def test_default_config_is_the_repo_file() -> None:
    assert DEFAULT_CONFIG.name == "kind-config.yaml" and DEFAULT_CONFIG.is_file()


def test_with_podman_kind_needs_podman_on_its_own_path_and_no_docker(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _path_with(tmp_path, monkeypatch, kind="exit 0")  # no docker anywhere
    engine = tmp_path / "engine"
    engine.mkdir()
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig", engine="podman", env={"PATH": str(engine)})
    with pytest.raises(KindError, match="`podman` not found on the PATH kind is given") as e:
        check_tools(s)
    assert "docker" not in str(e.value).lower()
    (engine / "podman").write_text("#!/bin/sh\n")
    (engine / "podman").chmod(0o755)
    assert check_tools(s) == str(bin_dir / "kind")


class _Interrupt(Exception):
    """What the run's SIGINT handler raises (``hollowscale.run.orchestrator.Interrupted``), stood in for."""


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.integration  # starts processes and sends itself a signal
def test_an_interrupted_create_stops_kinds_group_and_deletes_what_it_made(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import signal
    import threading
    import time

    # a fake kind whose `create` starts an engine command (a sleep) and waits on it, as kind waits on podman
    bin_dir = _path_with(tmp_path, monkeypatch, kind=(
        f'case "$1" in create) /bin/sleep 300 & echo $! > "{tmp_path}/engine.pid"; wait;; esac; exit 0'))
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "podman").write_text("#!/bin/sh\n")
    (engine / "podman").chmod(0o755)

    def interrupt(_signum: int, _frame: object) -> None:
        raise _Interrupt("SIGUSR1")

    def send_when_the_engine_runs() -> None:
        while not (tmp_path / "engine.pid").exists() or not (tmp_path / "engine.pid").read_text().strip():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)

    old = signal.signal(signal.SIGUSR1, interrupt)
    sender = threading.Thread(target=send_when_the_engine_runs, daemon=True)
    try:
        sender.start()
        with pytest.raises(_Interrupt):
            ensure_kind_cluster(KindSettings(kubeconfig=tmp_path / "kubeconfig", engine="podman",
                                             env={"PATH": f"{engine}:/bin:/usr/bin"}, images=()), build=_no_build)
    finally:
        signal.signal(signal.SIGUSR1, old)
        sender.join(5)
    calls = (bin_dir / "kind.calls").read_text().splitlines()
    assert calls[0] == "get clusters" and calls[1].startswith("create cluster --name hollowscale")
    assert calls[2] == f"delete cluster --name hollowscale --kubeconfig {tmp_path / 'kubeconfig'}"
    assert _gone(int((tmp_path / "engine.pid").read_text()))  # kind's own child went with its group


def test_kind_workers_see_only_the_folders_mounted_at_creation(tmp_path: Path) -> None:
    from hollowscale.cluster.kind import KindRealNodes
    from hollowscale.cluster.realnode.access import RealNodeError

    models = tmp_path / "models"
    models.mkdir()
    nodes = KindRealNodes(KindCluster("hollowscale", tmp_path / "kubeconfig", created=True),
                          ("hollowscale-worker", "hollowscale-worker2"),
                          {str(models.resolve()): "/var/lib/hollowscale/models"})
    assert nodes.count == 2 and nodes.pod_apiserver is None  # kind routes the kubernetes Service
    assert nodes.host_dir(models) == "/var/lib/hollowscale/models"
    with pytest.raises(RealNodeError, match=r"not mounted into the kind cluster hollowscale's nodes"):
        nodes.host_dir(tmp_path)


def test_a_failed_join_is_explained_by_kubeadms_error_lines_not_its_stack_trace() -> None:
    from hollowscale.cluster.kind import kind_failure

    stack = [f"\tk8s.io/kubernetes@v1.36.3/cmd/kubeadm/app/cmd/phases/join/kubelet.go:{n}" for n in range(20)]
    output = "\n".join([
        " ✓ Preparing nodes 📦 📦", " ✗ Joining worker nodes 🚜",
        "ERROR: failed to create cluster: failed to join node with kubeadm: command \"podman exec --privileged "
        "hollowscale-worker kubeadm join --config /kind/kubeadm.conf\" failed with error: exit status 1",
        "Command Output: I1206 03:40:01 join.go:420] [preflight] found NodeName empty",
        "[kubelet-check] The kubelet is not healthy after 4m0s",
        "error execution phase kubelet-start: timed out waiting for the condition",
        *stack])
    got = kind_failure(output).splitlines()
    assert got[0].startswith("ERROR: failed to create cluster: failed to join node with kubeadm")
    assert "error execution phase kubelet-start: timed out waiting for the condition" in got
    assert got[-1] == stack[-1] and len(got) == 2 + 1 + 15
    assert kind_failure("a\nb") == "a\nb"  # nothing recognised: the last lines, as before


@pytest.mark.integration  # runs a fake kind
def test_a_delete_that_finds_a_nodes_mounts_busy_is_tried_again(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import hollowscale.cluster.kind as kind_mod
    from hollowscale.cluster.kind import delete_kind_cluster

    # the first delete meets an interrupted node's busy shm mount, as podman reports it; the second works
    bin_dir = _path_with(tmp_path, monkeypatch, kind=(
        f'if [ ! -e "{tmp_path}/once" ]; then : > "{tmp_path}/once"; echo "ERROR: failed to delete nodes: '
        'unlinkat .../userdata/shm: device or resource busy" >&2; exit 1; fi; exit 0'))
    monkeypatch.setattr(kind_mod, "DELETE_RETRY_S", 0.0)
    cluster = KindCluster("hollowscale", tmp_path / "kubeconfig", created=True, kind=str(bin_dir / "kind"))
    assert delete_kind_cluster(cluster) is True
    assert (bin_dir / "kind.calls").read_text().count("delete cluster") == 2
    # any other failure is not retried
    (bin_dir / "kind").write_text(f'#!/bin/sh\necho "$*" >> "{bin_dir}/kind.calls"\necho "ERROR: no" >&2\nexit 1\n')
    with pytest.raises(KindError, match="ERROR: no"):
        delete_kind_cluster(cluster)
    assert (bin_dir / "kind.calls").read_text().count("delete cluster") == 3
