"""A hollow agent shard that dies during a run is started again after the backoff, on its port, and
takes its nodes back (real control plane; the run's own Agents room)."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from hollowscale.placements.children import Children
from hollowscale.placements.nodes import ReadyBarrier, ready_nodes
from hollowscale.placements.processes.agents import Agents
from hollowscale.scenario import parse_scenario
from kubecore.config import client_configuration, load_endpoint
from kubecore.watch import session_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_dead_agent_shard_is_restarted_on_its_port(cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLLOWSCALE_BACKOFF_INITIAL_S", "1")
    prefix = f"ar{uuid.uuid4().hex[:5]}"
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["pools"] = [{"name": f"{prefix}-cpu", "count": 5, "resources": {"cpu": "8", "memory": "32Gi"},
                     "taints": [{"key": "hollowscale.io/test", "value": prefix, "effect": "NoSchedule"}]}]
    doc["workloads"] = [{"name": "w", "roles": [{"name": "r", "resources": {"cpu": "1"}}]}]
    sc = parse_scenario(doc, "agent-restart.yaml")
    (tmp_path / "logs").mkdir()
    agents = Agents(sc, Path(cluster.kubeconfig), tmp_path, Children(tmp_path / "pids.json"))
    endpoint = load_endpoint(str(cluster.kubeconfig))
    session = session_for(endpoint, 1)
    logs: list[str] = []
    try:
        agents.start()
        ReadyBarrier(sc, tmp_path / "logs").wait(session, endpoint.server, time.sleep, lambda r, n: None)
        port, pid = agents.procs[0].port, agents.procs[0].proc.pid
        agents.procs[0].proc.send_signal(signal.SIGKILL)
        agents.procs[0].proc.wait(10)
        t_dead = time.time()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(e["event"] == "started" for e in agents.restarts):
            agents.supervise(logs.append)
            time.sleep(0.1)
        exited, started = agents.restarts[0], agents.restarts[-1]
        assert exited["event"] == "exited" and exited["exit"] == "killed by SIGKILL" and exited["restart_in_s"] == 1.0
        assert started["event"] == "started" and started["port"] == port and started["pid"] != pid
        assert started["t"] - t_dead >= 0.95
        assert agents.dead() is None and agents.addresses == [f"127.0.0.1:{port}"]
        assert agents.procs[0].metrics()["hollow_nodes_managed"] == 5  # its nodes, adopted again
        assert ready_nodes(session, endpoint.server, sc.node_names()) == 5
        assert any("restarting in 1s" in line for line in logs)
    finally:
        agents.stop(grace_s=60)
    core = client.CoreV1Api(client.ApiClient(client_configuration(str(cluster.kubeconfig))))
    assert not core.list_node(label_selector=f"hollowscale.io/pool={prefix}-cpu").items
