"""What the harness did not make survives it, against the real local control plane (issue 22, section 3).

One cluster of its own for the cluster-folder test (``up`` into a folder that existed, empty); every other
test shares the session cluster.  The pure parts are in ``tests/unit/test_never_delete_foreign.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from waiting import wait_until

from hollow.process import start_agent
from hollowscale.cluster.clusterdir import MARKER, OWN_ENTRIES
from hollowscale.cluster.local import ClusterError, ClusterInfo, LocalCluster
from kubecore.config import load_endpoint
from kubecore.watch import session_for

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


# ------------------------------------------------------------------------------------------ hollow nodes
def _pools(tmp_path: Path, pool: str, count: int) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump({"pools": [{
        "name": pool, "count": count,
        "resources": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"},
        "taints": [{"key": "hollowscale.io/test", "value": pool, "effect": "NoSchedule"}],
    }]}))
    return path


class Api:
    """Plain JSON requests as the cluster's admin (what the harness itself speaks to the apiserver)."""

    def __init__(self, cluster: ClusterInfo) -> None:
        endpoint = load_endpoint(cluster.kubeconfig)
        self.server = endpoint.server
        self.http = session_for(endpoint, 1)

    def get(self, path: str) -> dict[str, Any] | None:
        r = self.http.get(self.server + path, timeout=30)
        if r.status_code == 404:
            return None
        r.raise_for_status()
        doc: dict[str, Any] = r.json()
        return doc

    def create(self, collection: str, doc: dict[str, Any]) -> dict[str, Any]:
        r = self.http.post(self.server + collection, json=doc, timeout=30)
        assert r.status_code == 201, r.text
        out: dict[str, Any] = r.json()
        return out

    def delete(self, path: str) -> None:
        r = self.http.delete(self.server + path, timeout=30)
        assert r.status_code in (200, 202, 404), r.text


def _foreign_node(api: Api, name: str) -> dict[str, Any]:
    return api.create("/api/v1/nodes", {"metadata": {"name": name, "labels": {"owner": "someone-else"}},
                                        "spec": {"taints": [{"key": "hollowscale.io/test", "effect": "NoSchedule"}]}})


def _untouched(node: dict[str, Any], labels: dict[str, str]) -> bool:
    """Nobody but its maker (these requests) and the controller-manager (the TTL annotation) wrote to it:
    its labels as made, no status (a hollow agent's adoption writes its conditions)."""
    managers = {m["manager"] for m in node["metadata"].get("managedFields") or []}
    return (managers <= {"python-requests", "kube-controller-manager"} and node["metadata"]["labels"] == labels
            and "conditions" not in (node.get("status") or {}))


def test_an_agent_never_adopts_or_deletes_a_node_it_did_not_register(cluster: ClusterInfo, tmp_path: Path) -> None:
    api = Api(cluster)
    pool = f"hsfor{uuid.uuid4().hex[:5]}"
    node = f"/api/v1/nodes/{pool}-0"
    before = _foreign_node(api, f"{pool}-0")
    try:
        agent = start_agent(cluster.kubeconfig, _pools(tmp_path, pool, 1), tmp_path / "agent.log",
                            "--delete-nodes-on-exit")
        try:
            agent.proc.wait(60)  # it stops: its only node's name is taken
        finally:
            agent.stop()
        assert agent.proc.returncode != 0
        assert f"node {pool}-0 exists and no hollow agent registered it" in (tmp_path / "agent.log").read_text()
        after = api.get(node)
        assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
        assert _untouched(after, before["metadata"]["labels"])
    finally:
        api.delete(node)


def test_an_agent_leaves_a_node_someone_made_again_under_its_name(cluster: ClusterInfo, tmp_path: Path) -> None:
    api = Api(cluster)
    pool = f"hsfor{uuid.uuid4().hex[:5]}"
    name = f"{pool}-0"
    agent = start_agent(cluster.kubeconfig, _pools(tmp_path, pool, 1), tmp_path / "agent.log",
                        "--delete-nodes-on-exit")
    try:
        agent.wait_healthy(60)
        wait_until(f"{name} registered", lambda: api.get(f"/api/v1/nodes/{name}") is not None, 30)
        os.kill(agent.pid, signal.SIGSTOP)  # no re-registration can slip between the delete and the create
        try:
            api.delete(f"/api/v1/nodes/{name}")
            wait_until(f"{name} gone", lambda: api.get(f"/api/v1/nodes/{name}") is None, 30)
            theirs = _foreign_node(api, name)
        finally:
            os.kill(agent.pid, signal.SIGCONT)
        assert agent.stop() == 0  # deletes the node it registered, by uid: not this one
        after = api.get(f"/api/v1/nodes/{name}")
        assert after is not None and after["metadata"]["uid"] == theirs["metadata"]["uid"]
        assert _untouched(after, theirs["metadata"]["labels"])
    finally:
        agent.stop()
        api.delete(f"/api/v1/nodes/{name}")
