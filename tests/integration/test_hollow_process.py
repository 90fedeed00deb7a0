"""The agent as a child process: the port it announces, its metrics, a graceful stop, failures named.

No cluster is needed: the agent serves ``/metrics`` and ``/healthz`` before it reaches the API server,
so a kubeconfig pointing at a closed port is enough to exercise start, scrape and stop for real.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from hollow.process import start_agent
from kubecore.procs import free_ports

pytestmark = pytest.mark.integration  # each test starts the agent as a process


def _kubeconfig(tmp_path: Path) -> Path:
    port = free_ports(1)[0]  # nothing listens there: every API call fails and is retried
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def test_agent_announces_its_port_serves_metrics_and_stops_gracefully(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "child").mkdir()
    (tmp_path / "work" / "pools.yaml").write_text(
        "pools:\n  - {name: proc, count: 3, resources: {cpu: '8', memory: 8Gi}}\n")
    _kubeconfig(tmp_path)
    taken = free_ports(1)[0]
    monkeypatch.chdir(tmp_path)
    # relative file names resolve against our folder, not the child's cwd; an inherited
    # HOLLOW_METRICS_PORT cannot make two agents race for one port
    agent = start_agent("kubeconfig", "work/pools.yaml", tmp_path / "logs" / "agent.log", "--log-level", "DEBUG",
                        env={"HOLLOW_METRICS_PORT": str(taken)}, cwd=tmp_path / "child", timeout_s=60)
    try:
        assert agent.port not in (0, taken) and agent.host == "127.0.0.1"
        assert agent.pid == agent.proc.pid and agent.record is not None and agent.record.alive()
        deadline = time.monotonic() + 30
        metrics = agent.metrics()
        # the first (failing) API call may come a moment after the nodes are managed on a loaded machine
        while (metrics.get("hollow_nodes_managed") != 3 or not any(k.startswith("hollow_api_requests_total{")
                                                                   for k in metrics)) and time.monotonic() < deadline:
            time.sleep(0.2)
            metrics = agent.metrics()
        assert metrics["hollow_nodes_managed"] == 3 and metrics["hollow_nodes_registered"] == 0
        assert any(k.startswith("hollow_api_requests_total{") for k in metrics)  # parsed by prometheus_client
        status, body = agent.get("/healthz")
        assert status == 503 and b'"registered":0' in body.replace(b" ", b"")
    finally:
        code = agent.stop(timeout_s=30)
    assert code == 0  # SIGTERM handled: a graceful exit, not a kill
    assert not agent.record.alive()
    assert agent.metrics(timeout_s=1) == {}  # gone: nothing answers
    assert "hollow: metrics on" not in (tmp_path / "logs" / "agent.log").read_text()  # stdout is not the log


def test_agent_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text("pools:\n  - {name: Bad, count: 1, resources: {cpu: '8'}}\n")
    log = tmp_path / "agent.log"
    with pytest.raises(RuntimeError, match=r"hollow agent exited with 1 before it was ready; log: .*agent\.log"):
        start_agent(_kubeconfig(tmp_path), pools, log, timeout_s=60)
    text = log.read_text()
    assert "pools[0].name: expected a lowercase DNS label" in text and "pools[0].resources.memory: is required" in text


def test_kill_is_immediate(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text("pools:\n  - {name: k, count: 1, resources: {cpu: '8', memory: 8Gi}}\n")
    agent = start_agent(_kubeconfig(tmp_path), pools, tmp_path / "agent.log", timeout_s=60)
    agent.kill()
    assert agent.proc.returncode == -9 and agent.record is not None and not agent.record.alive()
