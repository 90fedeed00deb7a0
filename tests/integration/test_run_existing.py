"""``backend: existing`` runs against the session's real cluster: ownership, back-to-back runs, credentials.

- A namespace that existed before the run is used and left as it was, with what is in it; only the
  run's own objects go.
- The same scenario twice in a row against one cluster completes both times with the same counts
  (the second run waits for the first one's namespace to finish terminating).
- A load whose every create is refused stops early as incomplete (exit 2) and names the cause.
- The kubeconfig comes from ``$KUBECONFIG`` (a list, merged as kubectl does) and its user is an
  ``exec`` credential plugin handing out a service-account token, as managed cloud clusters do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_cli

from hollowscale.cluster.local import ClusterInfo

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def tiny_scenario(tmp_path: Path, name: str, namespace: str, kubeconfig: str | None, **changes: Any) -> Path:
    """A few hollow nodes and a handful of short Jobs (max_instances makes the count exact)."""
    doc: dict[str, Any] = {
        "name": name,
        "cluster": {"backend": "existing", "namespace": namespace},
        "agents": {"ready_timeout_s": "90s"},
        "pools": [{"name": f"{name}-cpu", "count": 4, "resources": {"cpu": "16", "memory": "64Gi"},
                   "labels": {"hollowscale.io/pool": f"{name}-cpu"}}],
        "workloads": [{"name": "batch", "kind": "Job", "run_duration": "2s",
                       "roles": [{"name": "w", "replicas": 1, "resources": {"cpu": "1", "memory": "1Gi"},
                                  "node_selector": {"hollowscale.io/pool": f"{name}-cpu"}}]}],
        "arrival": {"curve": "constant", "rate": 2, "duration_s": "6s", "per_user_rate": 1, "max_instances": 8},
        "measurements": {"prometheus": False, "settle_timeout_s": "60s"},
        "slo_defaults": False,
        "slos": [{"name": "no_failures", "metric": "jobs.failed", "op": "<=", "threshold": 0}],
        "timeout_s": "5m",
    }
    if kubeconfig:
        doc["cluster"]["kubeconfig"] = kubeconfig
    doc.update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(scenario: Path, out: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scenario), "--out", str(out), "--quiet"], 400,
                cwd=ROOT, env={**os.environ, **(env or {})})
    summary = json.loads(((out / "latest").resolve() / "summary.json").read_text())
    return r.returncode, summary, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.fixture
def k(kubectl: list[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the session's kubectl (conftest's ``kubectl`` argv) and capture its output."""

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*kubectl, *args], capture_output=True, text=True, check=check, timeout=60)

    return run


def test_existing_namespace_is_left_as_it_was(cluster: ClusterInfo, k: Callable[..., Any], tmp_path: Path) -> None:
    ns = "team-preexisting"
    k("create", "namespace", ns)
    k("-n", ns, "create", "configmap", "keep-me", "--from-literal=a=1")
    manifest = tmp_path / "theirs.yaml"  # a suspended Job: it stays exactly as created
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "theirs", "namespace": ns},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "registry.local/none:1"}]}}}}))
    k("create", "-f", str(manifest))
    before = json.loads(k("get", "namespace", ns, "-o", "json").stdout)["metadata"]
    code, summary, log = run(tiny_scenario(tmp_path, "keepns", ns, str(cluster.kubeconfig)), tmp_path / "out")
    assert summary["complete"], (summary.get("incomplete_reason"), log)
    assert summary["measurements"]["jobs"]["submitted"] == 8 and summary["measurements"]["jobs"]["unfinished"] == 0
    assert {k: summary["cluster"]["namespace"][k] for k in ("name", "created_by_run")} == \
        {"name": ns, "created_by_run": False}
    assert code == 0, log
    after = json.loads(k("get", "namespace", ns, "-o", "json").stdout)
    assert after["metadata"]["uid"] == before["uid"] and after["status"]["phase"] == "Active"
    assert after["metadata"].get("labels") == before.get("labels")  # not relabelled either
    assert k("-n", ns, "get", "configmap", "keep-me").returncode == 0
    assert k("-n", ns, "get", "job", "theirs").returncode == 0
    deadline = time.monotonic() + 60  # the run's own Jobs go (background deletion)
    while time.monotonic() < deadline:
        left = k("-n", ns, "get", "jobs", "-l", "hollowscale.io/run", "-o", "name").stdout.split()
        if not left:
            break
        time.sleep(1)
    assert left == []
    k("delete", "namespace", ns, "--wait=false")


def test_same_scenario_back_to_back(cluster: ClusterInfo, k: Callable[..., Any], tmp_path: Path) -> None:
    scen = tiny_scenario(tmp_path, "twice", "back-to-back", str(cluster.kubeconfig))
    results = []
    for i in range(2):
        code, summary, log = run(scen, tmp_path / f"out{i}")
        assert summary["complete"], (i, summary.get("incomplete_reason"), log)
        assert {k: summary["cluster"]["namespace"][k] for k in ("name", "created_by_run")} == \
            {"name": "back-to-back", "created_by_run": True}
        results.append((code, summary["measurements"]["jobs"]))
    assert results[0] == results[1], results
    assert results[0][1]["submitted"] == results[0][1]["completed"] == 8


def test_load_refused_wholesale_stops_early_as_incomplete(cluster: ClusterInfo, k: Callable[..., Any], tmp_path: Path) -> None:
    scen = tiny_scenario(tmp_path, "refused", "all-refused", str(cluster.kubeconfig),
                         workloads=[{"name": "evals", "kind": "Pod", "run_duration": "2s",
                                     "priority_class": "no-such-priority-class",
                                     "roles": [{"name": "e", "resources": {"cpu": "1"}}]}],
                         arrival={"curve": "constant", "rate": 5, "duration_s": "60s", "per_user_rate": 1},
                         measurements={"prometheus": False, "abort_after_failed_creates": 10})
    t0 = time.monotonic()
    code, summary, log = run(scen, tmp_path / "out")
    assert code == 2, log
    assert summary["complete"] is False and summary["passed"] is False
    reason = summary["incomplete_reason"]
    assert reason.startswith("load failed wholesale") and "no-such-priority-class" in reason, reason
    assert time.monotonic() - t0 < 55 + 60  # well before the 60 s curve plus a settle would end


def test_kubeconfig_list_with_an_exec_plugin_user(cluster: ClusterInfo, k: Callable[..., Any], tmp_path: Path) -> None:
    """$KUBECONFIG names two files; the context's user runs an exec plugin that mints SA tokens."""
    k("create", "namespace", "exec-auth")
    k("-n", "exec-auth", "create", "serviceaccount", "runner")
    k("create", "clusterrolebinding", "exec-auth-runner", "--clusterrole=cluster-admin",
            "--serviceaccount=exec-auth:runner")
    try:
        calls = tmp_path / "plugin-calls"
        plugin = tmp_path / "token-plugin.py"
        plugin.write_text(f"""#!{sys.executable}
import json, pathlib, subprocess
calls = pathlib.Path({str(calls)!r}); calls.write_text(str(int(calls.read_text()) + 1 if calls.exists() else 1))
from hollowscale.cluster.binaries import binaries
token = subprocess.run([str(binaries().kubectl), "--kubeconfig={cluster.kubeconfig}", "-n", "exec-auth",
                        "create", "token", "runner", "--duration=10m"], capture_output=True, text=True,
                       check=True).stdout.strip()
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": token}}}}))
""")
        plugin.chmod(0o755)
        admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        server = admin["clusters"][0]["cluster"]
        ca = server.get("certificate-authority") or ""
        first = tmp_path / "contexts.yaml"  # names the context only
        first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "cloud"}))
        second = tmp_path / "cloud.yaml"
        second.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "cloud", "cluster": {**server, "certificate-authority": str(
                (Path(cluster.kubeconfig).parent / ca).resolve()) if ca else None}}],
            "users": [{"name": "cloud-user", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never",
                "env": [{"name": "PYTHONPATH", "value": str(ROOT)}]}}}],
            "contexts": [{"name": "cloud", "context": {"cluster": "cloud", "user": "cloud-user"}}],
        }))
        scen = tiny_scenario(tmp_path, "execauth", "exec-auth-load", None)
        code, summary, log = run(scen, tmp_path / "out", env={"KUBECONFIG": f"{first}{os.pathsep}{second}"})
        assert summary["complete"], (summary.get("incomplete_reason"), log)
        assert summary["measurements"]["jobs"]["completed"] == 8, log
        assert code == 0, log
        assert int(calls.read_text()) >= 3  # the orchestrator, the agent and Locust each ran the plugin
        flat = yaml.safe_load(((tmp_path / "out" / "latest").resolve() / "kubeconfig").read_text())
        assert "exec" in flat["users"][0]["user"] and "token" not in flat["users"][0]["user"]
    finally:
        k("delete", "clusterrolebinding", "exec-auth-runner", check=False)
        k("delete", "namespace", "exec-auth", "--wait=false", check=False)
