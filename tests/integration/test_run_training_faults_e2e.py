"""scenarios/training-faults.yaml end to end, in a short form (make test-e2e): its four variants on fresh local
clusters with JobSet (and Kueue for kueue-requeue), the same arrivals and fault seeds, shortened (60 s of work, 20 s checkpoints, a minute of
arrivals).  Every variant completes with its training section; every job finished, none failed for good; the
faults hit jobs and each one recovered; the JobSets restarted; Kueue evicted and readmitted the queued Job; the
comparison holds the four."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.e2e]  # a long scenario: make test-e2e


def test_training_faults_short_form(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "training-faults.yaml").read_text())
    doc["name"] = "training-faults-e2e"
    for w in doc["workloads"]:
        w.update(run_duration="60s", checkpoint_interval="20s")
    doc["arrival"].update(duration_s="60s", rate=0.05, per_user_rate=0.05)
    doc["faults"] = [
        {"type": "pod-failures", "at_s": "20s", "rate_per_gpu_hour": 4, "duration_s": "80s", "exit_code": 137,
         "seed": 36},
        {"type": "node-lost", "at_s": "40s", "count": 1, "delete_after_s": "15s", "repair_after_s": "60s", "seed": 36}]
    doc["measurements"] = {"settle_timeout_s": "240s"}
    scen = tmp_path / "training-faults-e2e.yaml"
    scen.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "reports"
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 1500, cwd=ROOT)
    parent = (out / "latest").resolve()
    comparison = json.loads((parent / "comparison.json").read_text())
    names = ["job-podfailurepolicy", "jobset-recreate", "jobset-blockingrecreate", "kueue-requeue"]
    assert [v["name"] for v in comparison["variants"]] == names, (r.stdout[-2000:], r.stderr[-2000:])
    for name in names:
        s = json.loads((parent / name / "summary.json").read_text())
        assert s["complete"], (name, s.get("incomplete_reason"), s.get("errors"))
        inst = s["measurements"]["batch"]["instances"]
        assert inst["total"] >= 2 and inst["completed"] == inst["total"], (name, inst)
        t = s["measurements"]["training"]
        ts = t["summary"]
        assert ts["faults_hitting_jobs"] >= 1 and ts["unrecovered"] == 0 and ts["jobs_failed_for_good"] == 0, (name, ts)
        assert ts["restarts"] >= 1 and 0 < ts["ettr"] < 1, (name, ts)
        assert all(row["recovered"] in (True, None) for row in t["faults"]), (name, t["faults"])
        assert "## Training jobs through failures" in (parent / name / "summary.md").read_text()
        if name == "kueue-requeue":  # Kueue's recovery timeout evicted the Job whose pod failed; it came back
            assert s["cluster"]["features"]["kueue"]["wait_for_pods_ready"]["recoveryTimeout"] == "5s"
            pre = s["measurements"]["batch"]["preemption"]["jobs_evicted"]
            assert pre["evictions"] >= 1 and pre["readmitted_jobs"] >= 1, pre
