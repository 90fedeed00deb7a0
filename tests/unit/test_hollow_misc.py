"""Smaller pieces: fault choice, pod IPs, node bodies, self-monitor thresholds, control server, CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from hollow.api import backoff_delay
from hollow.faults import FaultState, PodFailureWindow, choose
from hollow.ipam import PodIPs
from hollow.metrics import Metrics
from hollow.monitor import Sample, assess, p99
from hollow.nodebody import NodeIdentity, heartbeat_patch, lease_body, node_body
from hollow.pools import parse_pools
from hollow.server import make_app
from hollow.settings import MonitorSettings
from hollow.sharding import Shard, assign


def test_fault_choice_is_deterministic_and_sized() -> None:
    names = [f"n-{i}" for i in range(100)]
    a = choose(names, 0.1, seed=1)
    assert a == choose(list(reversed(names)), 0.1, seed=1) and len(a) == 10
    assert a != choose(names, 0.1, seed=2)
    assert choose(names, 0.0, 1) == [] and len(choose(names, 1.0, 1)) == 100


def test_fault_windows() -> None:
    f = FaultState()
    f.stop_heartbeats(["a"], 10.0)
    f.stop_heartbeats(["a"], 5.0)  # never shortens
    assert f.stopped("a", 9.0) and not f.stopped("b", 9.0)
    assert f.recovered(9.0) == [] and f.recovered(10.0) == ["a"] and not f.stopped("a", 9.0)
    f.pod_window = PodFailureWindow(0.5, 137, until=100.0, seed=3)
    codes = [f.exit_override(f"u{i}", 50.0) for i in range(400)]
    assert 150 < codes.count(137) < 250 and set(codes) == {None, 137}
    assert f.exit_override("u1", 100.0) is None


def test_pod_ips_unique_reused_and_reclaimed() -> None:
    ips = PodIPs("10.0.3.0/29")  # .2 .. .6 usable
    got = [ips.allocate(f"u{i}") for i in range(5)]
    assert got == ["10.0.3.2", "10.0.3.3", "10.0.3.4", "10.0.3.5", "10.0.3.6"]
    assert ips.allocate("u9") is None and ips.allocate("u0") == "10.0.3.2"
    ips.release("u1")
    assert ips.allocate("u9") == "10.0.3.3"
    fresh = PodIPs("10.0.3.0/29")
    assert fresh.claim("old", "10.0.3.2") and fresh.allocate("new") == "10.0.3.3"


def test_node_body_has_full_status() -> None:
    pools = parse_pools({"pools": [{"name": "v100", "count": 1, "role": "gpu",
                                    "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                                    "labels": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"},
                                    "taints": [{"key": "gpu", "effect": "NoSchedule"}],
                                    "topology": {"zones": ["z1"], "racks_per_zone": 1}}]}, "t")
    slot = assign(pools, Shard())[0]
    body = node_body(slot, 1_700_000_000.0, NodeIdentity())
    st = body["status"]
    assert st["capacity"]["nvidia.com/gpu"] == "8" and st["allocatable"]["pods"] == "110"
    assert {c["type"]: c["status"] for c in st["conditions"]} == {
        "Ready": "True", "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False"}
    assert st["addresses"][0] == {"type": "InternalIP", "address": "100.64.0.1"}
    assert st["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10250
    labels = body["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-32GB" and labels["kubernetes.io/hostname"] == "v100-0"
    assert labels["topology.kubernetes.io/zone"] == "z1" and labels["hollowscale.io/rack"] == "z1-rack-0"
    assert labels["node-role.kubernetes.io/gpu"] == ""
    assert body["spec"]["podCIDR"] == "10.0.0.0/24" and body["spec"]["taints"] == [{"key": "gpu", "effect": "NoSchedule"}]
    hb = heartbeat_patch(1_700_000_100.0, 1_700_000_000.0)["status"]["conditions"]
    assert hb[3]["lastHeartbeatTime"] == "2023-11-14T22:15:00Z" and hb[3]["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert "lastTransitionTime" not in heartbeat_patch(1_700_000_100.0)["status"]["conditions"][3]
    lease = lease_body("v100-0", "uid-1", 40, 1_700_000_000.5)
    assert lease["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert lease["spec"]["renewTime"] == "2023-11-14T22:13:20.500000Z"


def test_monitor_thresholds() -> None:
    s = MonitorSettings()
    assert assess(Sample(0.01, 0.1, 10, 0.2), None, s) == []
    kinds = [k for k, _ in assess(Sample(0.5, 3.0, 5000, 0.95), Sample(0, 0, 4000, 0), s)]
    assert kinds == ["loop_lag", "renew_lag", "backlog", "cpu"]
    assert [k for k, _ in assess(Sample(0, 0, 5000, 0), Sample(0, 0, 6000, 0), s)] == []  # shrinking backlog
    assert p99([float(i) for i in range(1, 101)]) == 100.0 and p99([]) == 0.0


def test_backoff_is_capped() -> None:
    assert all(0 <= backoff_delay(a, 0.1, 10.0) <= min(10.0, 0.1 * 2**a) for a in range(20))


class FakeControls:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.ok = False

    def health(self) -> tuple[bool, dict[str, Any]]:
        return self.ok, {"nodes": 3}

    def heartbeat_loss(self, fraction: float, duration_s: float, seed: int) -> dict[str, Any]:
        self.calls.append(("hb", (fraction, duration_s, seed)))
        return {"nodes": ["a"], "count": 1}

    def pod_failures(self, fraction: float, exit_code: int, duration_s: float, seed: int) -> dict[str, Any]:
        self.calls.append(("pods", (fraction, exit_code, duration_s, seed)))
        return {"failed_now": [], "count": 0}

    def pods_fail(self, pods: list[str], exit_code: int) -> dict[str, Any]:
        self.calls.append(("named", (tuple(pods), exit_code)))
        return {"failed_now": pods, "count": len(pods)}

    def node_lost(self, nodes: list[str], delete_after_s: float, repair_after_s: float | None) -> dict[str, Any]:
        self.calls.append(("lost", (tuple(nodes), delete_after_s, repair_after_s)))
        return {"nodes": nodes, "count": len(nodes)}


async def test_control_server_endpoints() -> None:
    controls = FakeControls()
    metrics = Metrics()
    metrics.nodes_managed.set(3)
    async with TestClient(TestServer(make_app(metrics, controls))) as client:
        resp = await client.get("/healthz")
        assert resp.status == 503
        controls.ok = True
        resp = await client.get("/healthz")
        assert resp.status == 200 and (await resp.json())["nodes"] == 3
        text = await (await client.get("/metrics")).text()
        assert "hollow_nodes_managed 3.0" in text
        resp = await client.post("/faults/heartbeat-loss", data=orjson.dumps({"fraction": 0.1, "duration_s": 60,
                                                                                "seed": 1}))
        assert resp.status == 200 and (await resp.json())["count"] == 1
        resp = await client.post("/faults/pod-failures", data=orjson.dumps({"fraction": 0.05, "exit_code": 137,
                                                                              "duration_s": 30}))
        assert resp.status == 200
        resp = await client.post("/faults/pod-failures", data=orjson.dumps({"pods": ["ns/p-1"], "exit_code": 3}))
        assert resp.status == 200 and (await resp.json())["count"] == 1
        resp = await client.post("/faults/node-lost", data=orjson.dumps({"nodes": ["n-1", "n-2"],
                                                                          "repair_after_s": 300}))
        assert resp.status == 200 and (await resp.json())["count"] == 2
        resp = await client.post("/faults/node-lost", data=orjson.dumps({"nodes": ["n-3"], "delete_after_s": 5,
                                                                          "repair_after_s": None}))
        assert resp.status == 200
        assert controls.calls == [("hb", (0.1, 60.0, 1)), ("pods", (0.05, 137, 30.0, 0)), ("named", (("ns/p-1",), 3)),
                                  ("lost", (("n-1", "n-2"), 60.0, 300.0)), ("lost", (("n-3",), 5.0, None))]
        for path, body in (("/faults/heartbeat-loss", {"fraction": 2, "duration_s": 1}),
                           ("/faults/heartbeat-loss", {"fraction": 0.1}),
                           ("/faults/pod-failures", {"fraction": 0.1, "exit_code": 0}),
                           ("/faults/pod-failures", {"fraction": 0.1, "exit_code": 1, "bogus": 1}),
                           ("/faults/pod-failures", {"pods": ["a/b"], "exit_code": 1, "fraction": 0.1}),
                           ("/faults/pod-failures", {"pods": "a/b", "exit_code": 1}),
                           ("/faults/node-lost", {"nodes": [""]}),
                           ("/faults/node-lost", {"nodes": ["n"], "repair_after_s": -1})):
            resp = await client.post(path, data=orjson.dumps(body))
            assert resp.status == 400, body
        assert len(controls.calls) == 5


def test_cli_rejects_bad_pools_before_touching_the_cluster(tmp_path: Path) -> None:
    from hollow.cli import nodes_group

    pools = tmp_path / "pools.yaml"
    pools.write_text("pools:\n  - {name: g, count: 2, resources: {cpu: '8', memory: 8Gi, nvidia.com/gpu: lots}}\n")
    kubeconfig = tmp_path / "kubeconfig"  # does not even exist: the pools error must come first
    result = CliRunner().invoke(nodes_group, ["run", "--kubeconfig", str(kubeconfig), "--pools", str(pools)])
    assert result.exit_code != 0
    assert f"{pools}: pools[0].resources.nvidia.com/gpu: expected a Kubernetes quantity" in result.output
    bad_shard = CliRunner().invoke(nodes_group, ["run", "--kubeconfig", "k", "--pools", str(pools), "--shard", "2/2"])
    assert bad_shard.exit_code == 2 and "0 <= i < n" in bad_shard.output


@pytest.mark.integration  # starts a process
def test_python_m_hollow_implies_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "hollow", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "run" in out.stdout
    pools = tmp_path / "p.yaml"
    pools.write_text("pools: 3\n")
    out = subprocess.run([sys.executable, "-m", "hollow", "--kubeconfig", "x", "--pools", str(pools)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and f"{pools}: pools: expected a list, got int 3" in out.stderr
