"""``scenarios/topology-gangs.yaml`` end to end, short form: every variant on a fresh local cluster (in-tree
gangs without topology, Kueue TAS required / preferred / slices, the in-tree PodGroup topology), and what
the report says of each, read from the run's own files.

The placement figures come from the pods' ``spec.nodeName`` and the Nodes' labels read back from the API
server (:mod:`hollowscale.topology`); the spread factor each member ran under comes from the hollow agent's
``TopologySpread`` condition, cross-checked against those labels.  What is asserted follows from the code,
not from a timing: a required rack keeps every gang in one rack; a gang in one rack ran under the rack's
factor or the host's, never the cluster's; GPU-hours lost to spread are 1 - 1/factor of the GPU-hours run,
so they lie between the smallest and the largest factor's share.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from waiting import alive

from hollow.pools import parse_pools

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]  # a long scenario: make test-e2e

VARIANTS = ["default", "kueue-tas-required", "kueue-tas-preferred", "kueue-tas-slice", "intree-tas"]


def test_topology_gangs_short_form(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "topology-gangs.yaml").read_text())
    doc["name"] = "topology-e2e"
    doc["arrival"]["duration_s"] = "30s"  # the short form: 6 gangs per variant at the file's rate
    doc["timeout_s"] = "600s"
    assert [v["name"] for v in doc["variants"]] == VARIANTS
    scen = tmp_path / "topology-e2e.yaml"
    scen.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "reports"
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 1200, cwd=ROOT)
    parent = (out / "latest").resolve()
    comparison = json.loads((parent / "comparison.json").read_text())
    assert [v["name"] for v in comparison["variants"]] == VARIANTS, r.stdout[-2000:]
    assert all(v["complete"] for v in comparison["variants"]), (comparison, r.stdout[-3000:], r.stderr[-3000:])

    pool = parse_pools(doc["pools"], "topology-gangs.yaml")[0]
    factors = sorted({pool.topology.spread_factor(name) for name, _ in pool.topology.level_labels()}
                     | {pool.topology.spread_factor("cluster")})
    topo: dict[str, dict] = {}
    for name in VARIANTS:
        s = json.loads((parent / name / "summary.json").read_text())
        t = s["measurements"]["topology"]
        topo[name] = t
        placement, spread = t["placement"], t["spread"]
        assert placement["placed"] == placement["gangs"] >= 4, (name, placement)
        assert spread["mismatches"]["members"] == 0, (name, spread["mismatches"])  # agent and Node labels agree
        assert spread["factor_from_condition"] == spread["members_ran"] > 0, (name, spread)
        lost, run = spread["gpu_hours_lost"], spread["gpu_hours_run"]
        assert run * (1 - 1 / factors[0]) - 1e-3 <= lost <= run * (1 - 1 / factors[-1]) + 1e-3, (name, spread)
        assert s["measurements"]["batch"]["instances"]["unfinished"] == 0, name
        # jobs per hour explained: every gang of the window completed or has a reason, and the count is the
        # batch figures' own (one gang per job here)
        tp = t["throughput"]
        assert tp["completed"] + sum(tp["not_completed"].values()) == tp["gangs"] > 0, (name, tp)
        assert tp["jobs_per_hour"] == pytest.approx(s["measurements"]["batch"]["jobs_completed_per_hour"], abs=0.01)
        md = (parent / name / "summary.md").read_text()
        assert "## Topology" in md, md[:2000]
        pids = json.loads((parent / name / "pids.json").read_text())
        assert not [c for c in pids["children"] if alive(c["pid"])]
        assert not (parent / name / "cluster").exists()

    # a required rack (Kueue TAS) and the in-tree rack constraint keep every gang in one rack
    for name in ("kueue-tas-required", "kueue-tas-slice", "intree-tas"):
        assert topo[name]["placement"]["within_one_domain_pct"]["rack"] == 100.0, (name, topo[name]["placement"])
    # Kueue's slices: every rack a slice gang uses holds a multiple of its slice size (from the Node labels)
    sliced = topo["kueue-tas-slice"]["placement"]
    assert sliced["sliced_gangs"] == sliced["placed"] and sliced["slices_whole_pct"] == 100.0, sliced
    req = topo["kueue-tas-required"]
    assert req["admission"]["workloads"] == req["placement"]["gangs"] and req["admission"]["not_admitted_at_end"] == 0
    assert set(req["spread"]["gpu_hours_lost_by_level"]) <= {"rack", "host"}, req["spread"]
    # the default's spread is measured (whatever the scheduler chose), in the same terms
    default = topo["default"]["placement"]
    assert sum(default["by_level"].values()) == default["placed"], default
    assert "topology: GPU-hours lost to spread" in comparison["variants"][0]["figures"]
