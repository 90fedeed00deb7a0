"""Report files from a timeline built by applying watch events (no cluster): SLO pass/fail paths,
summary.md, junit.xml, summary.json fields, report.html in headless Chromium, reports/latest."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from browser import check_page

from hollowscale.measure.derive import percentile, throughput, timeline_measurements
from hollowscale.measure.timeline import Timeline
from hollowscale.report import finalize, update_latest, write_report
from hollowscale.report.verdicts import REQUIRED, evaluate_slos, lookup
from hollowscale.scenario import DEFAULT_SLOS, SloSpec

T0 = 1_700_000_000_000.0


def pod(uid: str, node: str | None = None, phase: str = "Pending", gpus: int = 0, owner: bool = True) -> dict:
    spec: dict = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    meta: dict = {"uid": uid, "name": f"p-{uid}", "labels": {"hollowscale.io/workload": "w", "hollowscale.io/role": "r"}}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "uid": f"job-{uid}", "controller": True}]
    status: dict = {"phase": phase}
    if phase in ("Succeeded", "Failed"):
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": 0 if phase == "Succeeded" else 3}}}]
    return {"metadata": meta, "spec": spec, "status": status}


def job(uid: str, cond: str | None = None) -> dict:
    st = {"conditions": [{"type": cond, "status": "True"}]} if cond else {}
    return {"metadata": {"uid": uid, "name": uid, "labels": {"hollowscale.io/workload": "w"}},
            "spec": {"parallelism": 1, "template": {"spec": {"containers": []}}}, "status": st}


def build_timeline(n: int = 40) -> Timeline:
    """n pods created 100 ms apart; pod i scheduled after 50+i ms, running after 500+10*i ms, done 2 s later."""
    tl = Timeline()
    for i in range(n):
        u, c = f"u{i}", T0 + i * 100
        tl.apply_job("ADDED", job(f"job-u{i}"), c - 5)
        tl.apply_pod("ADDED", pod(u, gpus=i % 2), c)
        tl.apply_pod("MODIFIED", pod(u, "n1", gpus=i % 2), c + 50 + i)
        tl.apply_pod("MODIFIED", pod(u, "n1", "Running", gpus=i % 2), c + 500 + 10 * i)
        phase = "Failed" if i == 3 else "Succeeded"
        tl.apply_pod("MODIFIED", pod(u, "n1", phase, gpus=i % 2), c + 2500 + 10 * i)
        tl.apply_job("MODIFIED", job(f"job-u{i}", "Failed" if i == 3 else "Complete"), c + 2600 + 10 * i)
    tl.apply_pod("ADDED", pod("bare", owner=False), T0)
    tl.apply_pod("MODIFIED", pod("bare", "n2", "Succeeded", owner=False), T0 + 900)
    return tl


def test_timeline_transitions_and_derived_figures() -> None:
    tl = build_timeline()
    pods, jobs = tl.snapshot()
    assert len(pods) == 41 and len(jobs) == 41  # 40 Jobs + the bare pod as its own workload object
    bare = next(p for p in pods if p.uid == "bare")
    assert bare.scheduled_ms == bare.running_ms == bare.finished_ms == T0 + 900  # seen late: all at once
    tm = timeline_measurements(pods, jobs, gpus_total=8, start_ms=T0, end_ms=T0 + 8000)
    m = tm["measurements"]
    startups = sorted([500 + 10 * i for i in range(40)] + [900])
    assert m["pod_startup_latency_ms"]["p50"] == percentile(startups, 50)
    assert m["pod_startup_latency_ms"]["p99"] == max(startups)
    assert m["jobs"] == {"submitted": 41, "completed": 40, "failed": 1, "unfinished": 0,
                         "by_workload": {"w": {"submitted": 41, "completed": 40, "failed": 1}}}
    assert m["gpu_queue_wait_s"]["count"] == 20
    assert max(tm["series"]["gpu_allocation_pct"]) > 0 and tm["series"]["gpu_allocation_pct"][-1] == 0
    assert sum(tm["series"]["scheduled_per_s"]) == 41
    assert tm["series"]["pending_pods"][-1] == 0


def test_throughput_buckets() -> None:
    tl = build_timeline(30)  # bindings between T0+50 and T0+2979 -> 3 buckets of 1 s
    pods, _ = tl.snapshot()
    th = throughput(pods)
    assert th["pods"] == 31 and th["max"] == 11.0
    assert th["avg"] == pytest.approx(31 / ((T0 + 2900 + 79 - (T0 + 50)) / 1000), rel=1e-3)


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile(list(range(1, 101)), 50) == 50


def test_slo_pass_fail_and_no_data() -> None:
    m = {"pod_startup_latency_ms": {"p99": 4200.0}, "api_latency_slo_ms": {"mutating": {"p99": 1500.0}}}
    res = {r["name"]: r for r in evaluate_slos(DEFAULT_SLOS, m)}
    assert res["pod_startup_p99"]["passed"] and res["pod_startup_p99"]["value"] == 4200.0
    assert not res["api_mutating_p99"]["passed"]
    assert not res["api_read_list_p99"]["passed"] and res["api_read_list_p99"]["note"]  # no data = fail
    ge = SloSpec(name="tp", metric="scheduling_throughput_pods_per_s.avg", op=">=", threshold=10)
    assert evaluate_slos([ge], {"scheduling_throughput_pods_per_s": {"avg": 12.5}})[0]["passed"]
    assert not evaluate_slos([ge], {"scheduling_throughput_pods_per_s": {"avg": 9.0}})[0]["passed"]
    assert lookup({"a": {"b": True}}, "a.b") is None


def _summary(tl: Timeline, slos: list[SloSpec], complete: bool = True) -> tuple[dict, dict]:
    pods, jobs = tl.snapshot()
    tm = timeline_measurements(pods, jobs, 8, T0, T0 + 8000)
    s = {"run_id": "unit-run", "scenario": "unit", "started_at": "2025-01-01T00:00:00Z", "duration_s": 8.0,
         "complete": complete, "incomplete_reason": None if complete else "interrupted by SIGINT",
         "cluster": {"backend": "local", "profile": "default", "kubernetes_version": "v1.36.3", "nodes_ready": 2,
                     "gpus_total": 8}, "measurements": tm["measurements"], "sources": {}}
    return finalize(s, slos), tm["series"]


def test_report_files_pass_and_fail(tmp_path: Path) -> None:
    tl = build_timeline()
    ok_slo = SloSpec(name="startup", metric="pod_startup_latency_ms.p99", op="<=", threshold=5000)
    bad_slo = SloSpec(name="failed_jobs", metric="jobs.failed", op="<=", threshold=0)
    summary, series = _summary(tl, [ok_slo, bad_slo])
    assert not summary["passed"] and [s["passed"] for s in summary["slos"]] == [True, False]
    paths = write_report(tmp_path / "run", summary, series, None)
    doc = json.loads(paths["summary.json"].read_text())
    assert all(k in doc for k in REQUIRED)
    assert {"p50", "p90", "p99"} <= set(doc["measurements"]["pod_startup_latency_ms"])
    md = paths["summary.md"].read_text()
    assert "**FAIL**" in md and "| startup |" in md and "FAILED" in md
    suite = ET.parse(paths["junit.xml"]).getroot().find("testsuite")
    # run_complete, jobs_finished (every job finished here) and one case per SLO
    assert suite is not None and suite.get("tests") == "4" and suite.get("failures") == "1"
    failing = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failing == ["failed_jobs"]
    summary2, _ = _summary(tl, [ok_slo])
    assert summary2["passed"]
    summary3, _ = _summary(tl, [ok_slo], complete=False)
    assert not summary3["passed"]  # an incomplete run never passes
    assert "INCOMPLETE" in write_report(tmp_path / "run3", summary3, series, None)["summary.md"].read_text()


def test_latest_points_to_newest(tmp_path: Path) -> None:
    for name in ("r1", "r2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(name)
        latest = update_latest(tmp_path, tmp_path / name)
    assert latest is not None and latest.is_symlink() and (latest / "summary.json").read_text() == "r2"


@pytest.mark.integration  # starts a process
def test_html_report_in_headless_chromium(tmp_path: Path) -> None:
    summary, series = _summary(build_timeline(), list(DEFAULT_SLOS))
    prom = {"query_api_p99": "q", "api_p99_ms": {"POST": [[0.0, 10.0], [1.0, 12.0]], "GET": [[0.0, 2.0], [1.0, 3.0]]},
            "query_binding_rate": "qb", "binding_rate": [[0.0, 1.0], [1.0, 5.0]]}
    summary["measurements"]["api_latency_ms"] = {"POST": {"p50": 5.0, "p99": 12.0}, "GET": {"p50": 1.0, "p99": 3.0}}
    paths = write_report(tmp_path / "run", summary, series, prom)
    html = paths["report.html"].read_text()
    assert "<script src" not in html and "<link" not in html  # self-contained
    check = check_page(paths["report.html"], tmp_path / "run" / "report.png")
    assert check.errors == []
    assert check.plots == 6 and check.svg_elements > 50
    assert any("hollowscale-report plots=6" in c["text"] for c in check.console)  # the console is really captured
    assert check.screenshot is not None and check.screenshot.stat().st_size > 20_000


@pytest.mark.integration  # starts a process
def test_browser_check_sees_console_errors(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><figure class='plot'><svg></svg></figure>"
                    "<script>console.error('boom'); undefinedFunction();</script></body></html>")
    check = check_page(page, tmp_path / "broken.png")
    assert any("boom" in e for e in check.errors)
    assert any("undefinedFunction" in e for e in check.errors)
    assert check.plots == 1
