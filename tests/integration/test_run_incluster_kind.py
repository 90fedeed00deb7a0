"""``agents.placement: in-cluster`` on a kind cluster's workers, end to end (issue 37, its first part).

``scenarios/incluster-kind.yaml`` as shipped, with one agent fault added: the run makes the kind cluster
(a control plane and two workers, nodes built here, in hollowscale's own podman), loads the agent and
Prometheus images into the workers, and runs 2 agent shards, Locust's master and 2 workers and Prometheus as
pods on kind's pod network (``deploy/hollowscale/overlays/kind-workers``).  The agents register 1,000 hollow
nodes in the same cluster through the ``kubernetes`` Service with least-privilege tokens; the harness drives
the load through the Locust master's NodePort and posts the fault to each agent through its shard's
NodePort, at a worker's address on kind's network.  Checked from the report:

* the two shards ran on different workers (the overlay's anti-affinity), and every pod on a worker;
* the 1,000 nodes were Ready, the load ran through Locust's worker pods and every job finished;
* Prometheus (a pod) scraped both agents and the apiserver (its token not refused);
* both agents took the fault (HTTP 200 at their NodePorts);

and afterwards nothing is left on the machine: no container, volume or network of the cluster, the firewall,
network namespaces and links as before (the kind backend's own checks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from incluster_checks import assert_nodes_load_and_scrapes
from kindstate import WORKERS, assert_nothing_left, network_state, no_cluster_yet

from hollowscale.kindnode import firewall

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]  # a kind cluster and a scenario


def test_incluster_run_on_kinds_workers_registers_the_nodes_and_leaves_nothing(tmp_path: Path) -> None:
    podman = no_cluster_yet()
    modules_before = Path("/lib/modules").exists()
    fw_before = firewall.snapshot()
    net_before = network_state()
    doc = yaml.safe_load((ROOT / "scenarios" / "incluster-kind.yaml").read_text())
    doc["slo_defaults"] = False  # API latency SLOs of a kind control plane on 2 shared cores are not the point
    doc["faults"] = [{"type": "heartbeat-loss", "at_s": "5s", "fraction": 0.01, "duration_s": "10s", "seed": 1}]
    scen = tmp_path / "incluster-kind.yaml"
    scen.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(tmp_path / "out"), "--quiet"], 2400,
                cwd=ROOT)
    run_dir = (tmp_path / "out" / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    log = r.stdout[-3000:] + r.stderr[-3000:]
    assert summary["complete"], (summary.get("incomplete_reason"), summary.get("errors"), log)
    assert r.returncode == 0, log

    inc = summary["incluster"]
    assert inc["driver"].startswith("kind workers")
    assert sorted(inc["agent_nodes"]) == ["hollow-agent-0", "hollow-agent-1"]
    assert sorted(inc["agent_nodes"].values()) == sorted(WORKERS), inc["agent_nodes"]  # one shard per worker
    assert len(inc["pods"]) == 6 and all(p["node"] in WORKERS and p.get("ready_s") is not None for p in inc["pods"])
    addresses = inc["addresses"]["agents"]
    assert summary["cluster"]["agents"]["addresses"] == addresses and len(set(addresses)) == 2
    assert_nodes_load_and_scrapes(summary, 1000, 2)
    (fault,) = summary["faults"]
    assert sorted(a["agent"] for a in fault["responses"]) == sorted(addresses)
    assert {a.get("status") for a in fault["responses"]} == {200}, fault["responses"]
    assert {f"{p['name']}.log" for p in inc["pods"]} <= {p.name for p in (run_dir / "logs").iterdir()}
    assert_nothing_left(podman, fw_before, modules_before, net_before)
