"""``agents.placement: in-cluster`` end to end on the session cluster's real node.

``scenarios/incluster-small.yaml`` as shipped (3 agent shards as a StatefulSet, Locust's master and 2
workers, Prometheus, all pods on the real node through ``deploy/hollowscale/overlays/local-real-nodes``;
2,000 hollow nodes registered by those pods in the same cluster; ~30 s of load), pointed at the
session cluster.  Then nothing of the run may be left: no object with its label anywhere (pods,
StatefulSet, Deployments, Secrets, ConfigMaps, ServiceAccounts, RBAC on both sides), no namespace it
created, no hollow node or node Lease of its pool, no container on the real node's containerd and no
process of its pods on this machine.  The agent and Prometheus images stay imported in the node's
containerd (as pause, busybox and distill do: a cache, removed with the node).

An interrupted run (SIGINT while the pods start) ends with exit 130 and leaves nothing either.

Cold cost: the first build of the two images takes ~25 s and their import ~17 s; later runs find both.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import interrupt, run_cli
from incluster_checks import assert_nodes_load_and_scrapes

from hollowscale.cluster.local import ClusterInfo
from hollowscale.cluster.realnode.images import ctr_binary
from kubecore.namespaces import RUN_LABEL

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]  # a long scenario: make test-e2e


def kubectl_json(kubectl: list[str], *args: str) -> dict[str, Any]:
    out = subprocess.run([*kubectl, *args, "-o", "json"], capture_output=True, text=True, check=True, timeout=60)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def names(kubectl: list[str], *args: str) -> list[str]:
    return [f"{i['kind']} {i['metadata'].get('namespace', '')}/{i['metadata']['name']}"
            for i in kubectl_json(kubectl, *args).get("items", [])]


def processes_matching(needles: list[str]) -> list[str]:
    """Command lines on this machine that contain one of ``needles``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(n in cmd for n in needles):
            found.append(f"{proc.name}: {cmd[:200]}")
    return found


@pytest.fixture(scope="module")
def scenario(real_cluster: ClusterInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "incluster-small.yaml").read_text())
    doc["cluster"]["kubeconfig"] = str(real_cluster.kubeconfig)
    doc["slo_defaults"] = False  # API latency SLOs on 2 shared cores are not what this test is about
    path = tmp_path_factory.mktemp("incluster") / "incluster-small.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_incluster_run_registers_the_nodes_reports_and_leaves_nothing(
        real_cluster: ClusterInfo, kubectl: list[str], scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    started = time.monotonic()
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scenario), "--out", str(out), "--quiet"], 780,
                cwd=ROOT)
    took = time.monotonic() - started
    run_dir = (out / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    log = r.stdout[-3000:] + r.stderr[-3000:]
    assert summary["complete"], (summary.get("incomplete_reason"), summary.get("errors"), log)
    assert r.returncode == 0, log
    assert summary["errors"] == [] or all("transient" in e for e in summary["errors"]), summary["errors"]

    # the pods ran on the real node: 3 agent shards, Locust's master and 2 workers, Prometheus
    inc = summary["incluster"]
    real = {n.name for n in real_cluster.real_nodes}
    pods = {p["name"].rsplit("-", 2)[0] if not p["name"].startswith("hollow-agent") else p["name"]: p
            for p in inc["pods"]}
    assert sorted(pods) == ["hollow-agent-0", "hollow-agent-1", "hollow-agent-2", "locust-master", "locust-worker",
                            "prometheus"], inc["pods"]
    assert len(inc["pods"]) == 7 and all(p["node"] in real and p.get("ready_s") is not None for p in inc["pods"])
    assert summary["cluster"]["agents"]["placement"] == "in-cluster"
    assert summary["cluster"]["agents"]["addresses"] == [f"127.0.0.1:{p}" for p in inc["ports"]["agents"]]
    assert inc["addresses"]["agents"] == summary["cluster"]["agents"]["addresses"]
    assert sorted(inc["agent_nodes"]) == ["hollow-agent-0", "hollow-agent-1", "hollow-agent-2"]
    # the scenario's node count, registered by those pods; the load through the worker pods; Prometheus' scrapes
    assert_nodes_load_and_scrapes(summary, 2000, 3)
    locust = summary["load"]["locust"]  # its stats came from the master pod
    assert locust["csv"] == "locust/locust_stats.csv" and (run_dir / "locust" / "locust_stats_history.csv").exists()
    assert summary["measurements"]["api_latency_ms"]["POST"]["count"] > 0
    for name in ("summary.md", "report.html", "junit.xml"):
        assert (run_dir / name).exists(), name
    assert {f"{p['name']}.log" for p in inc["pods"]} <= {p.name for p in (run_dir / "logs").iterdir()}

    # nothing of the run is left, in the driver or the target (the same cluster here)
    run_id = summary["run_id"]
    assert_nothing_left(kubectl, real_cluster, run_id, "incluster-cpu")
    for node in real_cluster.real_nodes:  # the kubelet's container GC (every minute) removes the exited ones
        deadline = time.monotonic() + 90
        while True:
            containers = subprocess.run([ctr_binary(), "--address", str(node.containerd_socket), "-n", "k8s.io",
                                         "containers", "ls"], capture_output=True, text=True, check=True).stdout
            ours = [line for line in containers.splitlines()
                    if "hollowscale.local/agent" in line or "hollowscale.local/prometheus" in line]
            if not ours or time.monotonic() > deadline:
                break
            time.sleep(3)
        assert ours == [], containers
    assert processes_matching([f"--run-id {run_id}", *(f"--metrics-port {p}" for p in inc["ports"]["agents"]),
                               f"127.0.0.1:{inc['ports']['prometheus']}"]) == []
    print(f"in-cluster run: {took:.0f}s; timings {summary['timings']}; in-cluster {inc['timings']}; "
          f"teardown {inc['teardown']}")


def assert_nothing_left(kubectl: list[str], real_cluster: ClusterInfo, run_id: str, pool: str) -> None:
    selector = f"{RUN_LABEL}={run_id}"
    deadline = time.monotonic() + 120  # namespaces finish terminating (their pods were on hollow nodes)
    while (left := names(kubectl, "get", "namespaces", "-l", selector)) and time.monotonic() < deadline:
        time.sleep(2)
    assert left == []
    assert names(kubectl, "get", "pods,statefulsets,deployments,services,secrets,configmaps,serviceaccounts,"
                              "roles,rolebindings", "-A", "-l", selector) == []
    assert names(kubectl, "get", "clusterroles,clusterrolebindings", "-l", selector) == []
    assert names(kubectl, "get", "nodes", "-l", f"hollowscale.io/pool={pool}") == []
    assert [n for n in names(kubectl, "get", "leases", "-n", "kube-node-lease") if f"/{pool}-" in n] == []


def test_interrupted_incluster_run_leaves_nothing(real_cluster: ClusterInfo, kubectl: list[str], scenario: Path,
                                                  tmp_path: Path) -> None:
    doc = yaml.safe_load(scenario.read_text())
    doc["pools"][0].update(name="incluster-int", count=60, labels={"hollowscale.io/pool": "incluster-int"})
    doc["workloads"][0]["roles"][0]["node_selector"] = {"hollowscale.io/pool": "incluster-int"}
    small = tmp_path / "interrupted.yaml"
    small.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "hollowscale.run", str(small), "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # interrupt once its agent pods exist
            pods = kubectl_json(kubectl, "get", "pods", "-A", "-l", "app.kubernetes.io/name=hollow-agent")["items"]
            if len(pods) == 3:
                break
            time.sleep(1)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        proc.send_signal(signal.SIGINT)
        log = proc.communicate(timeout=300)[0]
    finally:
        interrupt(proc)  # a test that failed or timed out above still tears the run down
    assert proc.returncode == 130, log[-3000:]
    summary = json.loads(((out / "latest").resolve() / "summary.json").read_text())
    assert summary["complete"] is False and summary["incomplete_reason"] == "interrupted by SIGINT"
    assert summary["incluster"]["teardown"]["objects_deleted"] == len(summary["incluster"]["objects_created"]) > 20
    assert summary["errors"] == [], summary["errors"]
    assert_nothing_left(kubectl, real_cluster, summary["run_id"], "incluster-int")
