"""``cluster.backend: kind`` without kind or Docker: clear errors, nothing built, nothing deleted.

The machine this suite runs on has no Docker daemon and no kind, which is the case these tests pin
down; on a machine that has both, the environment test checks that the tools are accepted instead.
"""

from __future__ import annotations

import shutil
import subprocess
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


def _no_build(names: Sequence[str]) -> list[BuiltImage]:
    raise AssertionError(f"images {list(names)} were built although the kind backend cannot run")


def _docker_running(docker: str) -> bool:
    try:
        return subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_missing_kind_and_docker_are_both_named(tmp_path: Path) -> None:
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig", kind="hs-no-such-kind", docker="hs-no-such-docker")
    with pytest.raises(KindError) as e:
        ensure_kind_cluster(s, build=_no_build)
    msg = str(e.value)
    assert "`hs-no-such-kind` not found on PATH" in msg and "go install sigs.k8s.io/kind@v0.33.0" in msg
    assert "`hs-no-such-docker` not found on PATH" in msg and "install Docker" in msg
    assert not (tmp_path / "kubeconfig").exists()


def test_docker_client_without_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A docker client whose daemon does not answer is refused with docker's own reason."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.fail("this test needs the docker client on PATH (the daemon is not needed)", pytrace=False)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig", kind="hs-no-such-kind")
    with pytest.raises(KindError) as e:
        check_tools(s)
    assert "Docker is not running: `docker info` failed" in str(e.value)
    assert "no-daemon.sock" in str(e.value)  # docker's own message names the socket it tried


def test_this_machine(tmp_path: Path) -> None:
    """On this machine as it is: every missing tool is named, or (kind and Docker both there) accepted."""
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig")
    kind, docker = shutil.which("kind"), shutil.which("docker")
    running = docker is not None and _docker_running(docker)
    if kind and running:
        assert check_tools(s) == kind
        return
    with pytest.raises(KindError) as e:
        ensure_kind_cluster(s, build=_no_build)
    msg = str(e.value)
    assert msg.startswith("cluster.backend kind cannot run here: ")
    assert ("`kind` not found on PATH" in msg) == (kind is None)
    if docker is None:
        assert "`docker` not found on PATH" in msg
    else:
        assert ("Docker is not running" in msg) == (not running)


def test_invalid_name_is_refused_before_anything_runs(tmp_path: Path) -> None:
    s = KindSettings(kubeconfig=tmp_path / "kubeconfig", name="Hollow_Scale")
    with pytest.raises(KindError, match=r"'Hollow_Scale' is invalid: kind needs"):
        ensure_kind_cluster(s, build=_no_build)


def test_only_a_created_cluster_is_deleted(tmp_path: Path) -> None:
    reused = KindCluster("users-own", tmp_path / "kubeconfig", created=False, kind="hs-no-such-kind")
    assert delete_kind_cluster(reused) is False  # kind is not even called
    ours = KindCluster("hollowscale", tmp_path / "kubeconfig", created=True, kind=str(tmp_path / "no-kind"))
    with pytest.raises(KindError, match=r"deleting kind cluster hollowscale: cannot run"):
        delete_kind_cluster(ours)


def test_default_config_is_the_repo_file() -> None:
    assert DEFAULT_CONFIG.name == "kind-config.yaml" and DEFAULT_CONFIG.is_file()
