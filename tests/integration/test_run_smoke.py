"""The smoke scenario end to end on the real local control plane: agents, Prometheus, Locust, report.

Also: the partial report on interruption (SIGINT mid-load) with no process left behind.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from browser import check_page
from clirun import interrupt, run_cli
from waiting import alive

from hollowscale.cluster.local import LocalCluster
from hollowscale.report.verdicts import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def scenario_on(cluster_dir: Path, tmp_path: Path, name: str, **changes) -> Path:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"]["dir"] = str(cluster_dir)
    doc["cluster"]["namespace"] = name
    for k, v in changes.items():
        doc[k] = v
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path



def test_smoke_end_to_end(tmp_path: Path) -> None:
    # A cluster of its own, started and stopped by the run: the Prometheus cross-check counts every
    # binding in the cluster, so pods left pending by other tests of the shared cluster would skew it.
    own = tmp_path / "cluster"
    scen = scenario_on(own, tmp_path, "smoke-e2e")
    out = tmp_path / "reports"
    t0 = time.monotonic()
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], 400, cwd=ROOT)
    run_dir = (out / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"], (summary.get("incomplete_reason"), r.stdout[-3000:], r.stderr[-3000:])
    m = summary["measurements"]
    sc_nodes = 30
    assert summary["cluster"]["nodes_ready"] == sc_nodes
    jobs = m["jobs"]
    # every submitted workload object finished, and it matches what Locust says it created
    assert jobs["submitted"] >= 10 and jobs["unfinished"] == 0 and jobs["failed"] == 0
    locust = summary["load"]["locust"]["by_type"]
    assert locust["POST"]["failures"] == 0
    assert locust["POST"]["requests"] == jobs["submitted"]
    assert m["pods"]["created"] == m["pods"]["scheduled"] == m["pods"]["started"] == m["pods"]["succeeded"]
    assert 0 < m["pod_startup_latency_ms"]["p50"] <= m["pod_startup_latency_ms"]["p99"]
    assert m["scheduling_throughput_pods_per_s"]["avg"] > 0
    assert m["gpu_allocation_pct"]["max"] > 0
    # Prometheus figures with their queries; the cross-check agrees
    assert {"POST", "GET"} <= set(m["api_latency_ms"]) and m["api_latency_ms"]["POST"]["p99"] > 0
    assert m["crosscheck"]["agree"] is True, m["crosscheck"]
    assert m["crosscheck"]["prometheus_bound"] == m["pods"]["scheduled"]
    assert any("apiserver_request_sli_duration_seconds" in q["query"] for q in summary["sources"]["promql"])
    assert all(v == "up" for v in summary["prometheus"]["targets"].values()), summary["prometheus"]["targets"]
    assert set(m["components"]["by_job"]) >= {"apiserver", "scheduler", "controller-manager", "etcd"}
    assert all(v["cpu_cores_avg"] > 0 for v in m["components"]["by_job"].values() if v["cpu_cores_avg"] is not None)
    assert m["harness_processes"]["agent-0"]["cpu_cores_avg"] > 0 and m["harness_processes"]["locust"]["cpu_cores_avg"] > 0
    # verdict and exit code agree
    assert r.returncode == EXIT_CODES[summary["verdict"]["state"]], (summary["verdict"], r.stdout[-2000:])
    # every quantile says its precision: API latency bucketed, with the bucket read from the histogram
    post = m["api_latency_ms"]["POST"]
    assert post["source"] == "bucketed" and post["p99_bucket"][0] <= post["p99"] <= (post["p99_bucket"][1] or 1e12)
    assert m["pod_startup_latency_ms"]["source"] == "exact"
    md = (run_dir / "summary.md").read_text()
    assert "| POST | " in md and " (bucket " in md.split("| POST | ", 1)[1].splitlines()[0], md
    assert "| pod startup latency (ms) |" in md and "exact (timeline) |" in md
    for f in ("summary.md", "report.html", "junit.xml", "timeline_pods.csv", "locust/locust_stats.csv", "locust/locust.html"):
        assert (run_dir / f).stat().st_size > 0, f
    check = check_page(run_dir / "report.html", run_dir / "report.png")
    assert check.errors == [] and check.plots == 6
    # nothing of the run is left behind, the cluster it started included
    reg = json.loads((run_dir / "pids.json").read_text())
    assert not [c for c in reg["children"] if alive(c["pid"])]
    assert summary["cluster"]["reused"] is False
    assert LocalCluster(own).status() == [] and not (own / "state.json").exists()
    assert time.monotonic() - t0 < 300


def test_interrupt_writes_partial_report(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    scen = scenario_on(cluster.dir, tmp_path, "smoke-interrupt",  # reuse the session's cluster
                       arrival={"curve": "constant", "rate": 1.0, "duration_s": "60s", "per_user_rate": 0.5})
    out = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        reg_path = None
        while time.monotonic() < deadline:  # wait until Locust is submitting
            regs = list(out.glob("*/pids.json"))
            if regs and any(c["name"] == "locust" for c in json.loads(regs[0].read_text())["children"]):
                reg_path = regs[0]
                break
            time.sleep(0.5)
        assert reg_path is not None, "the run never reached the load phase"
        time.sleep(8)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=240)
    finally:
        interrupt(proc)  # a test that failed or timed out above still tears the run down
    assert proc.returncode == 130, output[-3000:]
    summary = json.loads((reg_path.parent / "summary.json").read_text())
    assert summary["complete"] is False and "SIGINT" in summary["incomplete_reason"]
    assert summary["passed"] is False
    assert summary["measurements"]["jobs"]["submitted"] > 0  # the part that ran is measured
    assert (reg_path.parent / "report.html").exists()
    junit = (reg_path.parent / "junit.xml").read_text()
    assert "<error" in junit
    reg = json.loads(reg_path.read_text())
    assert {c["name"] for c in reg["children"]} >= {"agent-0", "locust"}
    leftovers = [c for c in reg["children"] if alive(c["pid"])] + [
        n for n, pid in reg["other"].items() if n == "prometheus" and alive(pid)]
    assert not leftovers
