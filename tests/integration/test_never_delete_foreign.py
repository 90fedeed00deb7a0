"""What the harness did not make survives it, against the real local control plane (issue 22, section 3).

One cluster of its own for the cluster-folder test (``up`` into a folder that existed, empty); every other
test shares the session cluster.  The pure parts are in ``tests/unit/test_never_delete_foreign.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hollowscale.cluster.clusterdir import MARKER, OWN_ENTRIES
from hollowscale.cluster.local import ClusterError, ClusterInfo, LocalCluster

pytestmark = pytest.mark.integration


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``hollowscale ARGS`` in a child process; stdout and stderr together (the CLI's console is stderr)."""
    return subprocess.run([sys.executable, "-c", "from hollowscale.cli import main; main()", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------------------------------ cluster dirs
def test_down_leaves_the_folder_it_was_given_and_what_someone_put_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "given"
    folder.mkdir()  # the user's folder, empty: up may use it, down must leave it
    local = LocalCluster(folder)
    info = local.up(timeout_s=180)
    try:
        made = {p.name for p in folder.iterdir()}
        assert made - {MARKER} <= OWN_ENTRIES, f"a running cluster wrote entries down does not know: {made}"
        (folder / "notes.md").write_text("written while the cluster ran")
        again = _cli("cluster", "up", "--dir", str(folder))  # reused: a cluster folder with a foreign file is ours
        assert again.returncode == 0, again.stdout
    finally:
        down = _cli("cluster", "down", "--dir", str(folder))
    assert down.returncode == 0, down.stdout
    assert "kube-apiserver" in down.stdout and f"{folder / 'notes.md'} (not made by hollowscale)" in down.stdout
    assert sorted(p.name for p in folder.iterdir()) == [MARKER, "notes.md"]
    assert (folder / "notes.md").read_text() == "written while the cluster ran"
    assert not [pid for pid in info.pids.values() if _alive(pid)]
    (folder / "notes.md").unlink()
    down = _cli("cluster", "down", "--dir", str(folder))  # the marker was kept: a second down finishes
    assert down.returncode == 0 and "emptied" in down.stdout, down.stdout
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_up_refuses_a_folder_with_files_and_down_exits_3_on_it(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('work')")
    up = _cli("cluster", "up", "--dir", str(tmp_path))
    assert up.returncode == 1 and len(up.stdout.strip().splitlines()) == 1, up.stdout
    assert f"{tmp_path} is not empty (src) and is not a hollowscale cluster folder" in up.stdout
    down = _cli("cluster", "down", "--dir", str(tmp_path))
    assert down.returncode == 3 and "nothing removed" in down.stdout, down.stdout
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["src", "src/main.py"]
    with pytest.raises(ClusterError, match="is not a hollowscale cluster folder"):
        LocalCluster(tmp_path).up()


def test_a_failed_start_in_a_given_empty_folder_leaves_the_folder(tmp_path: Path) -> None:
    from hollowscale.cluster.binaries import binaries

    real = binaries()
    fake_etcd = tmp_path / "etcd"
    fake_etcd.write_text("#!/bin/sh\necho 'etcd: refusing to start' >&2\nexit 1\n")
    fake_etcd.chmod(0o755)
    folder = tmp_path / "given"
    folder.mkdir()
    with pytest.raises(ClusterError, match="etcd exited at start"):
        LocalCluster(folder, bins=type(real)(**{**real.__dict__, "etcd": fake_etcd})).up(timeout_s=60)
    assert folder.is_dir() and list(folder.iterdir()) == []  # nothing of ours left, the folder itself kept


def test_the_session_cluster_folder_holds_only_what_down_knows(cluster: ClusterInfo) -> None:
    made = {p.name for p in Path(cluster.dir).iterdir()}
    assert MARKER in made and made - {MARKER} <= OWN_ENTRIES, made
