"""scenarios/distill-e2e.yaml in a short form: hollow nodes under Locust load plus a real distillation
job (student Job + teacher Deployment behind a Service) on a real node of a cluster the run starts;
the teachers are scaled and one is killed mid-training; the student loses no sample.

The full scenario (the bench's training settings, 2,000 hollow nodes) is `hollowscale run
scenarios/distill-e2e.yaml`; here the training is cut to one short epoch so the test takes minutes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from browser import check_page
from clirun import run_cli
from waiting import alive

from hollowscale.paths import short_temp_dir

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]  # a long scenario: make test-e2e


def short_scenario(tmp_path: Path, cluster_dir: Path) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "distill-e2e.yaml").read_text())
    doc["cluster"]["dir"] = str(cluster_dir)
    doc["cluster"]["namespace"] = "distill-e2e-test"
    for pool, count in zip(doc["pools"], (40, 30, 30), strict=True):
        pool["count"] = count
    doc["arrival"] = {"curve": "constant", "rate": 0.5, "duration_s": "90s", "per_user_rate": 0.5, "seed": 3}
    doc["distill_jobs"] = [{"name": "short", "seed": 0, "teachers": 1, "epochs": 1, "labelled": 500,
                            "unlabelled": 12000, "test_images": 1000, "start_at_s": "1s", "timeout_s": "400s"}]
    doc["faults"] = [{"type": "teacher-scale", "at_s": "15s", "job": "short", "replicas": 2},
                     {"type": "teacher-kill", "at_s": "30s", "job": "short"}]
    # no bench ran these settings: the accuracy SLO has nothing to compare with
    doc["slos"] = [s for s in doc["slos"] if s["metric"] != "distill.accuracy_gap_pts"]
    doc["measurements"]["settle_timeout_s"] = "400s"
    path = tmp_path / "distill-e2e-short.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_distill_e2e_short(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    # a short cluster dir: the real nodes' containerd sockets live under it (unix socket paths are short)
    cluster_dir = short_temp_dir("hs-e2e-") / "c"
    try:
        r = run_cli([sys.executable, "-m", "hollowscale.run", str(short_scenario(tmp_path, cluster_dir)),
                     "--out", str(out), "--quiet"], 780, cwd=ROOT)
    finally:
        leftover = cluster_dir.exists()
        shutil.rmtree(cluster_dir.parent, ignore_errors=True)
    run_dir = (out / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"], (summary.get("incomplete_reason"), summary.get("errors"), r.stdout[-3000:], r.stderr[-3000:])
    [job] = summary["distill_jobs"]
    assert job["student_phase"] == "Succeeded", job
    assert job["lost_samples"] == 0 and job["test_accuracy"] > 0.5, job
    assert job["student_node"].startswith("hs-real-")
    # the scale-up and the kill show in the teacher count the student followed
    ready = [n for _, n, _ in job["teacher_series"]]
    assert 1 in ready and 2 in ready, job["teacher_series"]
    kill = next(e for e in job["events"] if e["event"] == "teacher-kill")
    assert kill["status"] == 200 and kill["pod"]
    names = {p["name"] for p in job["teacher_pods"]}
    assert kill["pod"] in names and len(names) >= 3  # the killed one, the scaled-up one, the replacement
    assert job["samples_per_s_series"] and job["scheduling_delay_s"]["student_pod"] is not None
    # the hollow half of the run: jobs scheduled around the real one, none on the real node
    m = summary["measurements"]
    assert m["jobs"]["submitted"] >= 20 and m["jobs"]["unfinished"] == 0
    assert m["distill"] == {"jobs": 1, "failed_jobs": 0, "lost_samples": 0, "accuracy_gap_pts": None}
    assert r.returncode == (0 if summary["passed"] else 1)
    assert summary["passed"], [s for s in summary["slos"] if not s["passed"]]
    md = (run_dir / "summary.md").read_text()
    assert "## Real distillation jobs" in md and "teacher faults" in md
    check = check_page(run_dir / "report.html", run_dir / "report.png")
    assert check.errors == [] and check.plots == 7  # the six of every run + the job's
    # nothing of the run is left behind: its processes, and (the cluster it started being down) no cluster dir
    reg = json.loads((run_dir / "pids.json").read_text())
    assert not [c for c in reg["children"] if alive(c["pid"])]
    assert not leftover
