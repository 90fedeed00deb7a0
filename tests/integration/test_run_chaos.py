"""control-plane-chaos in a short form on a cluster of its own: a scheduler kill and an apiserver
restart under job load; the supervisor brings both back, the run completes, recovery is reported
per fault, and the apiserver's audit log agrees with the timeline (nothing lost, nothing twice)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from waiting import alive

from hollowscale.report.verdicts import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.e2e]  # a long scenario: make test-e2e



def test_chaos_short_recovers_and_loses_nothing(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "control-plane-chaos.yaml").read_text())
    doc["name"] = "chaos-short"
    doc["cluster"]["dir"] = str(tmp_path / "cluster")
    doc["pools"][0]["count"], doc["pools"][1]["count"] = 30, 10
    # an apiserver restart under load takes the kubelet's full 30 s grace (v1.36.3 does not finish its
    # graceful shutdown sooner with watches open) and the scheduler and controller-manager lose their
    # leases meanwhile: the load must outlast their backoffs for the recovery to be seen
    doc["arrival"]["duration_s"] = "160s"
    doc["faults"] = [{"type": "component-kill", "component": "kube-scheduler", "at_s": "20s"},
                     {"type": "component-restart", "component": "kube-apiserver", "at_s": "50s"}]
    doc["measurements"]["settle_timeout_s"] = "180s"
    doc["timeout_s"] = "800s"
    scen = tmp_path / "chaos-short.yaml"
    scen.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "reports"
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 780, cwd=ROOT)
    run_dir = (out / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"], (summary.get("incomplete_reason"), r.stdout[-3000:], r.stderr[-3000:])
    m = summary["measurements"]
    assert m["jobs"]["submitted"] >= 40 and m["jobs"]["unfinished"] == 0, m["jobs"]

    # nothing lost or counted twice, against the apiserver's own record across its restart
    integ = m["integrity"]
    assert (integ["jobs_lost"], integ["pods_lost"], integ["bindings_lost"], integ["double_counted"]) == (0, 0, 0, 0), integ
    assert integ["jobs"]["apiserver_created"] == integ["jobs"]["timeline"] > 0
    assert integ["pods"]["apiserver_created"] == integ["pods"]["timeline"] == m["pods"]["created"]
    assert integ["bindings"]["apiserver_bound"] == integ["bindings"]["timeline_scheduled"] == m["pods"]["scheduled"]

    # each fault has its recovery; the scheduler came back after the 10 s backoff and a lease handover
    by_fault = m["fault_recovery_s"]["by_fault"]
    assert [f["type"] for f in by_fault] == ["component-kill", "component-restart"]
    kill = by_fault[0]
    assert kill["level_before_pods_per_s"] > 0 and kill["recovered"] is True and kill["recovery_s"] >= 9.5, kill
    assert m["fault_recovery_s"]["unrecovered"] == 0, by_fault
    cp = summary["control_plane"]
    assert cp["restarts"].get("kube-scheduler", 0) >= 1 and cp["restarts"].get("kube-apiserver", 0) >= 1, cp["restarts"]
    killed = [e for e in cp["events"] if e["component"] == "kube-scheduler" and e["event"] == "exited"]
    assert killed and killed[0]["exit"] == "killed by SIGKILL" and killed[0]["restart_in_s"] == 10.0
    restarted = [e for e in cp["events"] if e["component"] == "kube-apiserver" and e["event"] == "exited"]
    assert restarted and restarted[0]["requested"] is True
    assert cp["handovers"].get("kube-scheduler", 0) >= 1
    assert any(o["duration_s"] and o["duration_s"] > 0 for o in cp["apiserver_outages"])

    # the report shows it, and the exit code is the verdict
    html = (run_dir / "report.html").read_text()
    assert "Faults and recovery" in html and "plot-control-plane" in html and "Integrity" in html
    assert "## Faults and recovery" in (run_dir / "summary.md").read_text()
    assert r.returncode == EXIT_CODES[summary["verdict"]["state"]], summary["verdict"]

    # nothing left running: the run's children, the cluster's components (restarted ones included)
    pids = json.loads((run_dir / "pids.json").read_text())
    assert not [c for c in pids["children"] if alive(c["pid"])]
    starts = [e.get("pid") for e in cp["events"] if e["event"] == "started"]
    assert starts and not [p for p in starts if p and alive(p)]
    assert not (tmp_path / "cluster").exists()
