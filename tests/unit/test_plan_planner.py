"""The plan loop with a stand-in measurement: knees per cell and SLO, shared points, resume, report."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hollowscale.plan.grid import Cell
from hollowscale.plan.planner import Planner
from hollowscale.plan.report import build_capacity, markdown, render_html, write_capacity_report
from hollowscale.plan.state import PlanState
from hollowscale.scenario import parse_scenario
from kubecore.yamlfile import load_yaml

REPO = Path(__file__).resolve().parents[2]


def plan_doc() -> dict[str, Any]:
    d = copy.deepcopy(load_yaml(REPO / "scenarios" / "plan-small.yaml"))
    d["sweep"]["rate"] = {"lo": 1, "hi": 17, "resolution": 2}
    return d


def fake_measure(calls: list[tuple[str, float]], knee_per_100_nodes: float = 6.0) -> Any:
    """Startup holds up to a rate that falls with size; the API SLO holds up to 10/s everywhere."""

    def measure(cell: Cell, rate: float, index: int) -> dict[str, Any]:
        calls.append((cell.key, rate))
        limit = knee_per_100_nodes * 100 / cell.nodes + 2
        pods = 2 * rate
        cpu = {"apiserver": 0.1 + 0.001 * cell.nodes + 0.02 * pods + 0.003 * (index % 3),
               "etcd": 0.05 + 0.0002 * cell.nodes + 0.01 * pods - 0.002 * (index % 2)}
        return {
            "wall_s": 60.0, "complete": True,
            "figures": {"pods_per_s": pods, "objects_per_s": rate, "window_s": 30.0, "pods_created": int(60 * rate),
                        "pod_startup_latency_ms": {"p99": 1000.0 if rate <= limit else 9000.0},
                        "backlog": {"growing": rate > limit + 3, "growth_fraction": 0.0}},
            "control_plane": {"components": {k: {"cpu_cores_avg": v, "rss_mib_max": 100 + v * 100} for k, v in cpu.items()},
                              "mutating_requests_per_s": 10 * rate,
                              "api_latency_slo_ms": {"mutating": {"p99": 200.0 if rate <= 10 else 1500.0}}},
            "slos": {"pod_startup_p99": {"value": 1.0, "met": rate <= limit, "passed": rate <= limit},
                     "api_mutating_p99": {"value": 1.0, "met": rate <= 10, "passed": rate <= 10 and rate <= limit + 3}},
            "passed_all": rate <= limit,
        }

    return measure


def make(tmp_path: Path, calls: list[tuple[str, float]], **kw: Any) -> Planner:
    d = plan_doc()
    sc = parse_scenario(d, str(REPO / "scenarios" / "plan-small.yaml"), REPO / "scenarios")
    state = PlanState(tmp_path, "fp", **kw)
    return Planner(d, sc, state, tmp_path, lambda m: None, measure=fake_measure(calls))


def test_knees_per_size_and_slo_with_shared_points(tmp_path: Path) -> None:
    calls: list[tuple[str, float]] = []
    result = make(tmp_path, calls).run()
    small, large = "default/as-written/gpu=100", "default/as-written/gpu=300"
    assert result.knees[small]["pod_startup_p99"].knee == 7.0  # limit 8: 9 fails, 5 and 7 pass
    assert result.knees[large]["pod_startup_p99"].knee == 3.0  # limit 4
    assert result.knees[small]["api_mutating_p99"].knee == 9.0  # limit min(10, 11)
    # every (cell, rate) measured once although two SLOs bisect over it
    assert len(calls) == len(set(calls))
    # api_mutating_p99 first (the scenario's SLO order): 9, 13, 11; then startup reuses 9 and adds 5, 7
    assert [r for k, r in calls if k == small] == [9.0, 13.0, 11.0, 5.0, 7.0]
    assert result.measured == len(calls) and result.reused == 0


def test_an_interrupted_plan_continues_from_its_points(tmp_path: Path) -> None:
    calls: list[tuple[str, float]] = []
    planner = make(tmp_path, calls)
    real = planner.measure

    def stop_after_three(cell: Cell, rate: float, index: int) -> dict[str, Any]:
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(cell, rate, index)

    planner.measure = stop_after_three
    with pytest.raises(KeyboardInterrupt):
        planner.run()
    assert len(json.loads((tmp_path / "plan.json").read_text())["points"]) == 3
    calls2: list[tuple[str, float]] = []
    second = make(tmp_path, calls2)
    result = second.run()
    assert result.reused == 3 and not set(calls2) & set(calls[:3])
    calls3: list[tuple[str, float]] = []
    full = make(tmp_path / "again", calls3).run()
    assert {k: {s: v.knee for s, v in ks.items()} for k, ks in full.knees.items()} == \
        {k: {s: v.knee for s, v in ks.items()} for k, ks in result.knees.items()}
    # a finished plan started again measures nothing and needs no cluster
    ups: list[str] = []
    calls4: list[tuple[str, float]] = []

    def up(profile: str, d: str, limits: dict[str, tuple[float, int]]) -> tuple[Any, Any]:
        ups.append(d)
        return None, lambda: None

    make(tmp_path, calls4).run(up=up)
    assert calls4 == [] and ups == []


def test_a_cluster_is_started_per_profile_and_stopped_even_on_interrupt(tmp_path: Path) -> None:
    calls: list[tuple[str, float]] = []
    planner = make(tmp_path, calls)
    events: list[str] = []

    def boom(cell: Cell, rate: float, index: int) -> dict[str, Any]:
        raise KeyboardInterrupt

    def up(profile: str, d: str, limits: dict[str, tuple[float, int]]) -> tuple[Any, Any]:
        events.append(f"up {d}")
        return None, lambda: events.append("down")

    planner.measure = boom
    with pytest.raises(KeyboardInterrupt):
        planner.run(up=up)
    assert events == ["up /tmp/hs-plan-small-default", "down"]


def test_capacity_report_answers_in_words_with_labelled_projections(tmp_path: Path) -> None:
    calls: list[tuple[str, float]] = []
    planner = make(tmp_path, calls)
    result = planner.run()
    sc = planner.sc
    doc = build_capacity(sc, planner, result)
    assert doc["answers"][0] == "rates are workload instances/s: train (share 1): one Job per role, worker x2 pod(s)"
    text = " ".join(doc["answers"])
    assert "at 7 instances/s of mix as-written, 100 nodes (gpu 100, profile default) hold pod_startup_latency_ms.p99" in text
    assert "the highest mutating rate served with API mutating p99 <= 1000 ms was 90 requests/s" in text
    assert "saturates by 110 mutating requests/s" in text
    assert "at 5/s they do not (pod_startup_p99 missed: 1.0; knee within 2/s)" in text
    api = doc["fits"]["default"]["components"]["apiserver"]["cpu_cores_avg"]
    assert api["fit"]["coef"]["per_node"] == pytest.approx(0.001, abs=2e-4)
    for p in api["projections"]:
        assert p["projection"] == "projection (extrapolated from 100..300 nodes)" and p["error_95"] > 0
    assert "projection (extrapolated from 100..300 nodes): apiserver CPU at 15,000 nodes" in text
    assert "| default/as-written/gpu=300 | pod_startup_p99 | 3.0 | bracketed |" in markdown(doc)
    page = render_html(doc)
    assert page.count("<figure class='plot'") == 5 and "PROJECTION" in page
    paths = write_capacity_report(tmp_path, sc, planner, result)
    assert [p.name for p in paths] == ["capacity.json", "capacity.md", "capacity.html"]
    assert json.loads(paths[0].read_text())["cells"][0]["knees"]["pod_startup_p99"]["tried"][0] == {"rate": 9.0,
                                                                                                    "passed": False}


def test_capacity_html_renders_the_tables_as_escaped_html_and_every_knee_verdict(tmp_path: Path) -> None:
    planner = make(tmp_path, [])
    result = planner.run()
    doc = build_capacity(planner.sc, planner, result)
    doc["plan"] = "<b>x</b>&"
    first = doc["cells"][0]["knees"]
    first["pod_startup_p99"] = {**first["pod_startup_p99"], "knee": None, "passing": None, "failing": 1.0,
                                "verdict": "below-lo"}
    first["api_mutating_p99"] = {**first["api_mutating_p99"], "knee": 17.0, "passing": 17.0, "failing": None,
                                 "verdict": "at-least-hi"}
    page = render_html(doc)
    md = markdown(doc)
    assert md.startswith("# Capacity plan: <b>x</b>&\n")  # Markdown as before: raw text
    assert f"| {doc['cells'][0]['key']} | pod_startup_p99 | n/a | below-lo |" in md
    assert "<pre>" not in page and "<b>x</b>&" not in page and "<h1>Capacity plan: &lt;b&gt;x&lt;/b&gt;&amp;</h1>" in page
    assert "<link" not in page and " src=" not in page  # self-contained
    assert page.count("<table>") == 2 + len(doc["fits"])
    assert "<tr><th>cell</th><th>SLO</th><th>knee (instances/s)</th><th>verdict</th>" in page
    assert ("<td>default/as-written/gpu=300</td><td>pod_startup_p99</td><td>3.0</td><td>bracketed</td>" in page)
    assert f"<td>{doc['cells'][0]['key']}</td><td>pod_startup_p99</td><td>n/a</td><td>below-lo</td>" in page
    assert "<li><b>warmup</b>: each point loads" in page and "<h2>Control-plane cost fit" in page
    assert "<p>Scenario <code>" in page
    knee_fig = page[page.index("id='plot-knee-vs-nodes'"):page.index("id='plot-cpu_cores_avg'")]
    assert "api_mutating_p99" in knee_fig and "pod_startup_p99" in knee_fig and "top of searched range (17/s)" in knee_fig


def test_the_report_names_what_bound_first_at_each_knee_in_words_a_table_and_a_plot(tmp_path: Path) -> None:
    """Points carry their ranked limits: a client limit binds from 8/s on at 100 nodes, nothing binds at 300."""
    inner = fake_measure([])

    def measure(cell: Cell, rate: float, index: int) -> dict[str, Any]:
        rec = inner(cell, rate, index)
        client = rate / 8.0 if cell.nodes == 100 else 0.1
        limits = [{"key": "client:controller-manager", "tier": "resource", "pressure": client, "binding": client >= 1,
                   "figures": {"mean_wait_ms": 50 * client}, "words": f"waited {50 * client:g} ms"},
                  {"key": "cpu:host", "tier": "resource", "pressure": 0.5, "binding": False, "figures": {},
                   "words": "host half busy"}]
        limits.sort(key=lambda x: (not x["binding"], -x["pressure"]))
        rec["attribution"] = {"window_s": 30.0, "binding": "client:controller-manager" if client >= 1 else None,
                              "words": "w", "limits": limits}
        return rec

    planner = make(tmp_path, [])
    planner.measure = measure
    doc = build_capacity(planner.sc, planner, planner.run())
    small = doc["cells"][0]["knees"]["pod_startup_p99"]["bound_first"]
    assert small["key"] == "client:controller-manager" and small["binding"] and small["at_rate"] == 9.0
    assert small["knee"]["rate"] == 7.0 and small["failing"]["pressure"] == pytest.approx(9 / 8)
    large = doc["cells"][1]["knees"]["pod_startup_p99"]["bound_first"]
    assert large["key"] == "cpu:host" and not large["binding"]
    text = " ".join(doc["answers"])
    assert ("100 nodes (gpu 100, profile default), pod_startup_p99: bound first by client:controller-manager (binding "
            "from 9/s) (pressure 0.88 at 7/s -> 1.12 at 9/s; 1 = its threshold): waited 56.25 ms") in text
    assert "pod_startup_p99: no limit reached its threshold up to the first failing rate; nearest cpu:host" in text
    md = markdown(doc)
    assert "## What bound at each knee" in md and "| client:controller-manager |" in md
    assert "| default/as-written/gpu=100 | pod_startup_p99 | client:controller-manager | yes | 0.88 (7/s) | 1.12 (9/s) |" in md
    page = render_html(doc)
    fig = page[page.index("id='plot-limits'"):]
    assert "bound first: client:controller-manager" in fig and "nearest: cpu:host" in fig
