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
from hollowscale.batch.objects import BatchObjectError, BatchObjects
from hollowscale.cluster.clusterdir import MARKER, OWN_ENTRIES
from hollowscale.cluster.local import ClusterError, ClusterInfo, LocalCluster
from kubecore.config import load_endpoint
from kubecore.namespaces import RUN_LABEL, NamespaceError, claim_namespace, release_namespace
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
        assert agent.proc.returncode == 1
        log = (tmp_path / "agent.log").read_text()
        assert f"node {pool}-0 exists and no hollow agent registered it" in log
        assert "Traceback" not in log  # the user's situation in one line, not a crash
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


# ------------------------------------------------------------------------------------------ namespaces and objects
def _ns(api: Api, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return api.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels or {}}})


def _gone(api: Api, path: str) -> None:
    wait_until(f"{path} gone", lambda: api.get(path) is None, 60, every=0.2)


def test_a_namespace_the_run_made_again_by_someone_else_is_left(cluster: ClusterInfo) -> None:
    api = Api(cluster)
    name, run_id = f"hsns-{uuid.uuid4().hex[:6]}", f"run-{uuid.uuid4().hex[:6]}"
    claim = claim_namespace(api.http, api.server, name, run_id)
    assert claim.created and claim.uid
    api.delete(f"/api/v1/namespaces/{name}")
    _gone(api, f"/api/v1/namespaces/{name}")
    theirs = _ns(api, name, {RUN_LABEL: run_id})  # same name, even the same label: still not the one we made
    api.create(f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "their-data"}})
    try:
        release_namespace(api.http, api.server, claim)
        after = api.get(f"/api/v1/namespaces/{name}")
        assert after is not None and after["metadata"]["uid"] == theirs["metadata"]["uid"]
        assert "deletionTimestamp" not in after["metadata"]
        assert api.get(f"/api/v1/namespaces/{name}/configmaps/their-data") is not None
    finally:
        api.delete(f"/api/v1/namespaces/{name}")


def test_a_namespace_that_is_not_the_runs_keeps_everything_but_the_runs_objects(cluster: ClusterInfo) -> None:
    api = Api(cluster)
    name, run_id = f"hsns-{uuid.uuid4().hex[:6]}", f"run-{uuid.uuid4().hex[:6]}"
    _ns(api, name)
    pods = f"/api/v1/namespaces/{name}/pods"
    pod = {"spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}],
                    "nodeSelector": {"hollowscale.io/nowhere": "true"}}}
    try:
        api.create(pods, {"metadata": {"name": "theirs", "labels": {"app": "theirs"}}, **pod})
        claim = claim_namespace(api.http, api.server, name, run_id)
        assert not claim.created
        api.create(pods, {"metadata": {"name": "ours", "labels": {RUN_LABEL: run_id}}, **pod})
        release_namespace(api.http, api.server, claim)
        _gone(api, f"{pods}/ours")
        theirs = api.get(f"{pods}/theirs")
        assert theirs is not None and "deletionTimestamp" not in theirs["metadata"]
        assert "deletionTimestamp" not in (api.get(f"/api/v1/namespaces/{name}") or {})["metadata"]
        # an object that already carries the run's label (not made by this run) would go at the end:
        # such a namespace is refused before anything is created, and the object stays
        api.create(pods, {"metadata": {"name": "labelled-before", "labels": {RUN_LABEL: run_id}}, **pod})
        with pytest.raises(NamespaceError, match=f"namespace {name} already holds pods labelled-before labelled"):
            claim_namespace(api.http, api.server, name, run_id)
        assert api.get(f"{pods}/labelled-before") is not None
    finally:
        api.delete(f"/api/v1/namespaces/{name}")


def test_batch_objects_delete_only_the_objects_they_made(cluster: ClusterInfo) -> None:
    api = Api(cluster)
    run_id = f"run-{uuid.uuid4().hex[:6]}"
    name = f"hs-pc-{uuid.uuid4().hex[:6]}"
    path = f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}"
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 7,
          "metadata": {"name": name, "labels": {RUN_LABEL: run_id}}}
    objects = BatchObjects(api.http, api.server, run_id)
    objects.create([pc])
    api.delete(path)
    _gone(api, path)
    theirs = api.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                        {"metadata": {"name": name}, "value": 7, "description": "someone else's"})
    try:
        assert objects.delete_all() == []
        after = api.get(path)
        assert after is not None and after["metadata"]["uid"] == theirs["metadata"]["uid"]
        with pytest.raises(BatchObjectError, match="was not created by hollowscale"):  # never adopted either
            BatchObjects(api.http, api.server, run_id).create([pc])
        assert (api.get(path) or {})["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    finally:
        api.delete(path)


def test_an_in_cluster_ledger_and_distill_jobs_delete_only_what_they_made(cluster: ClusterInfo,
                                                                          tmp_path: Path) -> None:
    from hollowscale.distilljobs.jobs import DistillJobs
    from hollowscale.distilljobs.manifests import RenderSettings
    from hollowscale.placements.incluster.objects import ObjectLedger
    from hollowscale.scenario.distill import DistillJobSpec

    api = Api(cluster)
    ns, run_id = f"hsns-{uuid.uuid4().hex[:6]}", f"run-{uuid.uuid4().hex[:6]}"
    _ns(api, ns)
    accounts = f"/api/v1/namespaces/{ns}/serviceaccounts"
    try:
        ledger = ObjectLedger(api.http, api.server, tmp_path / "created.json")
        ledger.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "by-ledger", "namespace": ns}})
        jobs = DistillJobs(api.http, api.server, (DistillJobSpec(name="j"),),
                           RenderSettings(namespace=ns, run_id=run_id, image="x", model_dir=str(tmp_path)), log=print)
        jobs._create(jobs.jobs["j"], {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "by-distill"}})
        theirs = {}
        for name in ("by-ledger", "by-distill"):  # someone deletes each and makes their own of the name
            api.delete(f"{accounts}/{name}")
            _gone(api, f"{accounts}/{name}")
            theirs[name] = api.create(accounts, {"metadata": {"name": name}})["metadata"]["uid"]
        assert ledger.delete_all(log=lambda _m: None) == [] and ledger.remaining() == []
        assert jobs.delete_all() == []
        for name, uid in theirs.items():
            assert (api.get(f"{accounts}/{name}") or {})["metadata"]["uid"] == uid
    finally:
        api.delete(f"/api/v1/namespaces/{ns}")
