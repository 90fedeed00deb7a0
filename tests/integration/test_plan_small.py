"""`hollowscale plan` on the real local control plane: a tiny sweep, interrupted and resumed.

One size (30 nodes), a bisection between 0.5 and 2.5 instances/s with resolution 1 (one midpoint and
one bound), short points.  The first run is interrupted (SIGINT) during its second point: it exits 130,
keeps the first point, stops the cluster it started and leaves no process.  The second run continues
from the kept point, finishes and writes the capacity report, which is looked at in headless Chromium.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from browser import check_page
from clirun import run_cli

from hollowscale.cluster.local import LocalCluster
from hollowscale.paths import record_temp

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.e2e]  # a long scenario: make test-e2e


def tiny_plan(tmp_path: Path, cluster_prefix: str) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "plan-small.yaml").read_text())
    doc["name"] = "plan-tiny"
    doc["cluster"]["namespace"] = "hs-plan-tiny"
    doc["pools"][0]["count"] = 30
    doc["agents"]["ready_timeout_s"] = "90s"
    doc["sweep"] = {"sizes": [{"gpu": 30}], "rate": {"lo": 0.5, "hi": 2.5, "resolution": 1},
                    "warmup_s": "5s", "measure_s": "12s", "settle_s": "15s", "slos": ["pod_startup_p99"],
                    "cluster_dir": cluster_prefix}
    path = tmp_path / "plan-tiny.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def points_in(out: Path) -> int:
    try:
        return len(json.loads((out / "plan.json").read_text())["points"])
    except (OSError, ValueError):
        return 0


def test_plan_interrupted_then_resumed_writes_the_capacity_report(tmp_path: Path) -> None:
    prefix = f"/tmp/hs-pit-{os.getpid()}"
    cluster_dir = Path(f"{prefix}-default")
    record_temp(cluster_dir)  # the plan makes it straight in /tmp: the session checks it is gone at its end
    scen = tiny_plan(tmp_path, prefix)
    out = tmp_path / "plan"
    cmd = [str(ROOT / ".venv" / "bin" / "hollowscale"), "plan", str(scen), "--out", str(out)]
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while points_in(out) < 1 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert points_in(out) == 1, "the first point was not recorded in time"
        time.sleep(8)  # inside the second point's run
        first.send_signal(signal.SIGINT)
        log, _ = first.communicate(timeout=150)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            LocalCluster(cluster_dir).down()
    assert first.returncode == 130, log[-3000:]
    assert "run the same command again to continue" in log
    assert points_in(out) == 1  # the interrupted point is not kept
    assert LocalCluster(cluster_dir).info() is None, "the plan left its cluster running"
    assert "ETA" in log or "point 2/" in log

    t0 = time.monotonic()
    second = run_cli(cmd, 300, cwd=ROOT)
    assert second.returncode == 0, (second.stdout[-3000:], second.stderr[-3000:])
    assert "resuming" in second.stderr and "measured before" in second.stderr
    assert LocalCluster(cluster_dir).info() is None
    cap = json.loads((out / "capacity.json").read_text())
    assert cap["points_reused"] == 1 and cap["points_measured_now"] >= 1
    knee = cap["cells"][0]["knees"]["pod_startup_p99"]
    assert knee["tried"][0]["rate"] == 1.5 and len(knee["tried"]) == 2
    assert knee["verdict"] in ("bracketed", "at-least-hi", "below-lo")
    for p in cap["cells"][0]["points"]:
        assert p["components"]["apiserver"]["cpu_cores_avg"] > 0 and p["mutating_requests_per_s"] > 0
        assert p["pods_per_s"] > 0 and Path(p["run_dir"], "summary.json").exists()
    assert cap["answers"] and "instances/s" in cap["answers"][0]
    check = check_page(out / "capacity.html", tmp_path / "capacity.png")
    # startup and knees vs rate/nodes, the limits' pressure vs rate (what bound at each knee), projections
    assert check.errors == [] and check.plots == 6, check.errors
    assert "id='plot-limits'" in (out / "capacity.html").read_text()
    print(f"resumed plan: {time.monotonic() - t0:.0f}s")
