"""A batch scenario with two variants end to end on real local clusters: the default scheduler, and
in-tree gang scheduling with Kueue queues. Each variant gets a fresh cluster; the comparison report
holds both; the gang + queues variant admits every job through its team's queue, starts no job
half-way, and its Kueue and scheduler metrics agree with the watch timeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from waiting import alive

from hollowscale.report.verdicts import EXIT_CODES
from hollowscale.run.variants import _SEVERITY

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]  # a long scenario: make test-e2e



def test_default_vs_gang_queues(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "gang-contention.yaml").read_text())
    doc["name"] = "batch-e2e"
    doc["pools"] = [{"name": "be-v100", "count": 4,
                     "resources": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                     "labels": {"hollowscale.io/pool": "v100"}}]
    doc["workloads"] = [{"name": "distill", "kind": "Job", "run_duration": "8s", "same_duration": True,
                         "gang": {"min_members": "all"}, "queued": True,
                         "roles": [{"name": "student", "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}},
                                   {"name": "teacher", "replicas": 2,
                                    "resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}}]}]
    doc["tenants"] = [{"name": "ml", "quotas": {"be-v100": {"cpu": "256", "memory": "2Ti", "nvidia.com/gpu": 32}}}]
    doc["arrival"] = {"curve": "constant", "rate": 0.25, "duration_s": "40s", "per_user_rate": 0.25, "seed": 4}
    doc["variants"] = [{"name": "default"}, {"name": "gang-queues", "gang_scheduling": True, "kueue": True}]
    doc["measurements"] = {"settle_timeout_s": "90s"}
    doc["slos"] = [{"name": "all_finished", "metric": "jobs.unfinished", "op": "<=", "threshold": 0}]
    doc["timeout_s"] = "600s"
    scen = tmp_path / "batch-e2e.yaml"
    scen.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "reports"
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 780, cwd=ROOT)
    parent = (out / "latest").resolve()
    comparison = json.loads((parent / "comparison.json").read_text())
    assert [v["name"] for v in comparison["variants"]] == ["default", "gang-queues"], r.stdout[-2000:]
    assert all(v["complete"] for v in comparison["variants"]), (comparison, r.stdout[-3000:], r.stderr[-3000:])

    gq = json.loads((parent / "gang-queues" / "summary.json").read_text())
    features = gq["cluster"]["features"]
    assert features["gang_scheduling"] and features["kueue"]["version"]
    assert gq["variant"] == {"name": "gang-queues", "gang_scheduling": True, "kueue": True, "preemption": True}
    b = gq["measurements"]["batch"]
    assert b["instances"]["total"] >= 6 and b["instances"]["queued"] == b["instances"]["total"]
    assert b["instances"]["completed"] == b["instances"]["total"]
    assert b["partial_jobs"]["max"] == 0 and b["wasted_gpu_seconds"] == 0.0
    assert b["job_steps_s"]["created_to_admitted"]["count"] == b["instances"]["total"]
    kq = gq["measurements"]["batch_prometheus"]["kueue"]
    assert kq["available"] and kq["admitted_workloads"]["total"] >= b["instances"]["total"] * 2  # a Workload per Job
    sched = gq["measurements"]["batch_prometheus"]["scheduler"]
    assert sched["podgroups_available"] and sched["podgroup_attempts"]["by_result"].get("scheduled", 0) >= 1
    assert gq["prometheus"]["targets"].get("kueue") == "up", gq["prometheus"]["targets"]
    assert gq["measurements"]["integrity"]["verdict"].startswith("ok")

    default = json.loads((parent / "default" / "summary.json").read_text())
    assert not default["cluster"]["features"].get("gang_scheduling")
    assert default["measurements"]["batch"]["instances"]["queued"] == 0  # no Kueue: not suspended, not queued

    assert "gang-queues/report.html" in (parent / "comparison.html").read_text()
    # each variant's own report shows its batch figures and its verdict line (a stuck run says so)
    for v in comparison["variants"]:
        s = json.loads((parent / v["name"] / "summary.json").read_text())
        assert v["verdict"] == s["verdict"]["line"] and s["verdict"]["state"] == v["state"]
        md = (parent / v["name"] / "summary.md").read_text()
        assert md.splitlines()[0].endswith(f"**{s['verdict']['line']}**"), md.splitlines()[0]
        assert "## Batch scheduling" in md and "| jobs submitted / completed / failed / unfinished |" in md
        assert "### Queue wait (s, exact: timeline)" in md
        assert "<h2 id='batch'>Batch scheduling</h2>" in (parent / v["name"] / "report.html").read_text()
        left = s["unfinished"]
        assert (s["verdict"]["state"] == "unfinished") == (left["stuck"] and s["slos_passed"] and s["complete"])
    codes = [EXIT_CODES[v["state"]] for v in comparison["variants"]]
    assert r.returncode == max(codes, key=lambda c: _SEVERITY[c]), (codes, r.stdout[-2000:])
    for v in ("default", "gang-queues"):
        pids = json.loads((parent / v / "pids.json").read_text())
        assert not [c for c in pids["children"] if alive(c["pid"])]
        assert not (parent / v / "cluster").exists()
