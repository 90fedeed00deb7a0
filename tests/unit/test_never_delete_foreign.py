"""What the harness did not make survives it: files, folders and links found in the places it writes.

Each test puts a foreign thing where the harness removes or replaces its own, runs the code, and checks
the foreign thing is still there, unchanged (issue 22, section 3).  The API objects' side of the rule is
in ``tests/integration/test_never_delete_foreign.py`` (against the real local control plane).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hollowscale.cluster import binaries


def _fake_go(outputs: list[str]) -> Callable[[list[str], Path, object, str], None]:
    """A ``_run_go`` stand-in that 'builds' ``outputs`` into the work dir's ``out/`` (Go is not run)."""

    def run_go(args: list[str], cwd: Path, progress: object, what: str) -> None:
        for name in outputs:
            (cwd / "out" / name).write_text(f"built {name}")

    return run_go


def test_a_rebuild_replaces_only_the_files_it_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "bin" / "v1"
    final.mkdir(parents=True)
    (final / "kubelet").write_text("the kubelet, built on its own")
    (final / "notes.txt").write_text("a user's notes")
    (final / "kube-apiserver").write_text("old apiserver")
    monkeypatch.setattr(binaries, "_run_go", _fake_go(["kube-apiserver"]))
    monkeypatch.setattr(binaries, "go_binary", lambda: "true")
    binaries._build_into(final, "module x", ["k8s.io/kubernetes/cmd/kube-apiserver"], "", "building", None)
    assert (final / "kube-apiserver").read_text() == "built kube-apiserver"
    assert (final / "kubelet").read_text() == "the kubelet, built on its own"
    assert (final / "notes.txt").read_text() == "a user's notes"
    assert sorted(p.name for p in final.parent.iterdir()) == ["v1"]  # the temp work dir is gone


def test_a_kubelet_build_leaves_a_same_named_staging_folder_alone(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "bin" / "v1" / "kubelet"
    final.parent.mkdir(parents=True)
    (final.parent / "kube-apiserver").write_text("apiserver")
    foreign = tmp_path / "bin" / ".v1-kubelet"  # the fixed staging name the build used to rmtree
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours")
    monkeypatch.setattr(binaries, "_run_go", _fake_go(["kubelet"]))
    monkeypatch.setattr(binaries, "go_binary", lambda: "true")
    binaries._build_file_into(final, "module x", "k8s.io/kubernetes/cmd/kubelet", "", "building", None)
    assert final.read_text() == "built kubelet"
    assert (final.parent / "kube-apiserver").read_text() == "apiserver"
    assert (foreign / "keep.txt").read_text() == "not ours"
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [".v1-kubelet", "v1"]
