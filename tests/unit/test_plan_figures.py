"""A point's figures: warm-up excluded, backlog growth, API histogram differences, cost fit, state."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hollowscale.plan.fit import fit_cost, t975
from hollowscale.plan.scrape import Sample, histogram_quantile, parse_metrics, window_diff
from hollowscale.plan.state import PlanState, PlanStateError, point_key
from hollowscale.plan.window import Row, slope, window_figures
from hollowscale.scenario.sweep import BacklogSpec


def steady(rate: float, seconds: int, latency_ms: float, run_ms: float, t0: float = 0.0) -> tuple[list[Row], list[Row]]:
    pods, objs = [], []
    n = int(rate * seconds)
    for i in range(n):
        c = t0 + i * 1000.0 / rate
        pods.append(Row(c, c + latency_ms))
        objs.append(Row(c, c + latency_ms + run_ms, "Complete"))
    return pods, objs


def test_warm_up_objects_are_left_out() -> None:
    pods, objs = steady(2, 40, 100.0, 3000.0)
    slow = [Row(p.created_ms, p.created_ms + 9000.0) for p in pods if p.created_ms < 10_000]  # a slow warm-up
    pods = slow + [p for p in pods if p.created_ms >= 10_000]
    f = window_figures(pods, objs, 10_000.0, 40_000.0, 2.0, BacklogSpec())
    assert f["pod_startup_latency_ms"]["p99"] == 100.0
    assert f["pods_created"] == 60 and f["objects_per_s"] == pytest.approx(2.0, rel=0.05)
    assert not f["backlog"]["growing"]


def test_a_growing_backlog_fails_the_point() -> None:
    # arrivals at 4/s, completions only at 2/s: unfinished objects grow by about 2/s
    objs = [Row(i * 250.0, (i * 500.0 + 1000.0) if i % 2 == 0 else None) for i in range(160)]
    f = window_figures([Row(o.created_ms, o.created_ms + 50) for o in objs], objs, 10_000.0, 40_000.0, 4.0,
                       BacklogSpec())
    b = f["backlog"]
    assert b["growing"] and b["growth_fraction"] > 0.1 and "grew" in b["why"]


def test_a_pod_that_never_ran_counts_as_infinitely_slow() -> None:
    pods = [Row(float(i * 100), float(i * 100 + 10)) for i in range(98)] + [Row(5000.0, None), Row(6000.0, None)]
    f = window_figures(pods, [], 0.0, 10_000.0, 1.0, BacklogSpec())
    assert f["pod_startup_latency_ms"]["p99"] is None and f["pod_startup_latency_ms"]["never_started"] == 2


def test_slope() -> None:
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert slope([1], [5]) == 0.0


METRICS = """# HELP x
process_cpu_seconds_total 10.5
process_resident_memory_bytes 1.048576e+08
apiserver_request_total{code="201",verb="POST",resource="pods"} 100
apiserver_request_total{code="200",verb="GET",resource="pods"} 50
apiserver_request_sli_duration_seconds_bucket{verb="POST",resource="pods",le="0.05"} 90
apiserver_request_sli_duration_seconds_bucket{verb="POST",resource="pods",le="0.1"} 100
apiserver_request_sli_duration_seconds_bucket{verb="POST",resource="pods",le="+Inf"} 100
"""


def test_component_metrics_are_differenced_over_the_window() -> None:
    a, b = Sample(t=100.0), Sample(t=110.0)
    parse_metrics(METRICS, "apiserver", a)
    later = (METRICS.replace("10.5", "15.5").replace("} 100\n", "} 300\n").replace("} 90\n", "} 190\n"))
    parse_metrics(later, "apiserver", b)
    d = window_diff(a, b)
    assert d["components"]["apiserver"] == {"cpu_cores_avg": 0.5, "rss_mib_max": 100.0}
    assert d["mutating_requests_per_s"] == 20.0
    # 200 new POSTs: 100 under 50 ms, 100 in 50..100 ms -> p99 interpolated near 99 ms
    assert d["api_latency_slo_ms"]["mutating"]["p99"] == pytest.approx(99.0)
    assert d["api_latency_slo_ms"]["mutating"]["count"] == 200
    assert d["api_latency_slo_ms"]["read_object"]["p99"] is None


def test_histogram_quantile_like_prometheus() -> None:
    assert histogram_quantile(0.5, {0.1: 50, 0.2: 100, math.inf: 100}) == pytest.approx(0.1)
    assert histogram_quantile(0.99, {0.1: 0, 0.2: 0, math.inf: 10}) == 0.2
    assert histogram_quantile(0.5, {}) is None


def test_fit_recovers_a_known_cost_with_errors() -> None:
    nodes = [100, 100, 100, 300, 300, 300, 500]
    rates = [2, 4, 8, 2, 4, 8, 4]
    cost = [0.1 + 0.001 * n + 0.05 * r + (0.01 if i % 2 else -0.01) for i, (n, r) in enumerate(zip(nodes, rates, strict=True))]
    f = fit_cost(nodes, rates, cost)
    assert f is not None and f.dof == 4
    assert f.coef[1] == pytest.approx(0.001, abs=1e-4) and f.coef[2] == pytest.approx(0.05, abs=5e-3)
    assert all(se is not None and se > 0 for se in f.stderr)
    p = f.predict(5000, 4)
    assert p["projection"] == "projection (extrapolated from 100..500 nodes)"
    assert p["interval_95"][0] < p["value"] < p["interval_95"][1] and p["error_95"] > 0
    assert "projection" not in f.predict(300, 4)


def test_fit_says_when_no_error_can_be_given() -> None:
    f = fit_cost([100, 300], [2, 4], [1.0, 2.0])
    assert f is not None and f.stderr == [None, None, None] and "rank" in f.note
    assert f.predict(5000, 2)["interval_95"] is None
    assert t975(1) == 12.706 and t975(100) == pytest.approx(1.984)


def test_state_is_resumable_and_refuses_another_plan(tmp_path: Path) -> None:
    s = PlanState(tmp_path, "abc")
    s.record(point_key("default/as-written/gpu=100", 4.5), {"rate": 4.5, "passed_all": True})
    assert json.loads((tmp_path / "plan.json").read_text())["points"]["default/as-written/gpu=100@4.5"]["rate"] == 4.5
    again = PlanState(tmp_path, "abc")
    assert again.resumed == 1 and again.get("default/as-written/gpu=100@4.5") is not None
    with pytest.raises(PlanStateError, match="--fresh"):
        PlanState(tmp_path, "other")
    assert PlanState(tmp_path, "other", fresh=True).points == {}
    assert not list(tmp_path.glob(".plan.json.*"))  # no temp file left behind
