"""The placement section of a run's report, the variants' comparison columns, and when the feature is on
(summaries built from the recorded objects of test_topology_figures; no process)."""

from __future__ import annotations

import copy
from typing import Any

from test_topology_figures import MS, POOL, node, recorded, workload

from hollowscale.batch.comparison import comparison_doc, render_markdown
from hollowscale.measure.prom import PromQueries
from hollowscale.paths import REPO_ROOT
from hollowscale.run.features import features_for
from hollowscale.scenario import load_scenario
from hollowscale.topology.feature import TopologyFeature, block
from hollowscale.topology.figures import topology_measurements
from hollowscale.topology.promfigures import admission_attempts
from hollowscale.topology.report import TITLE, html_parts, markdown_lines


def summary(variant_topology: str | None = "kueue-required") -> dict[str, Any]:
    tl, listed = recorded()
    m, series = topology_measurements(tl.snapshot()[0], listed, [node(i, tainted=i == 7) for i in range(8)],
                                      [workload("ga", 0, 4), workload("gb", 2, 14), workload("gd", 30, None)],
                                      [POOL], {"train": "rack"}, MS, MS + 100_000, 10.0)
    block(m, variant_topology)
    m["kueue_admission_attempt_ms"] = {"p50": 3.2, "p99": 48.5, "p50_bucket": [2.5, 5.0], "p99_bucket": [25.0, 50.0],
                                       "source": "bucketed", "cycles": {"success": 11.2, "inadmissible": 8.1},
                                       "by_result": {"inadmissible": {"p99": 23.8, "p99_bucket": [10.0, 25.0],
                                                                      "source": "bucketed"}}}
    return {"measurements": {"topology": m, "batch": {"jobs_completed_per_hour": 120.0, "job_steps_s": {
        "created_to_admitted": {"p50": 1.5, "p99": 9.0}, "admitted_to_all_bound": {"p50": 0.4, "p99": 2.0}}},
        "gpu_allocation_pct": {"avg": 41.25}, "scheduler": {"attempt_duration_ms": {"p50": 1.0, "p99": 7.5},
                                                                  "attempts_by_result": {"unschedulable": 235102.5}},
        "batch_prometheus": {"scheduler": {"podgroup_attempt_duration_ms": {"p50": 1.668, "p99": 7.917}}},
        "attribution": {"binding": "loop:kueue", "words": "Kueue's admission loop was busy"}},
        "topology_series": series}


def test_the_section_shows_the_figures_and_those_it_refers_to() -> None:
    md = "\n".join(markdown_lines(summary()))
    assert f"## {TITLE}" in md
    assert "| levels (coarse to fine) / the variant's topology | block > rack > host / kueue-required |" in md
    assert "| gangs: seen / placed (every pod bound) | 4 / 3 |" in md
    assert "| placed gangs by the level that holds them | cluster 1, host 1, rack 1 |" in md
    assert "| gangs inside one rack (%) / racks spanned p50, max | 66.7 / 1, 2 |" in md
    assert "| gangs inside one host (%) / hosts spanned p50, max | 33.3 / 2, 2 |" in md
    assert "| condition's level differs from the Node labels': members / gangs | 1 / 1 (team-a/ga a2: " in md
    assert "| free GPUs the next waiting gang cannot use avg / min / max | 9.27 / 0 / 15 (11 samples" in md
    assert "| whole free racks avg / min / max (of 4) | 0.82 / 0 / 2 |" in md
    assert "| Kueue Workloads: created -> Admitted s p50 / p99 (not admitted at the end) | 4.0 / 12.0 (n=2) (1) |" in md
    assert "| gang created -> last member PodScheduled s p50 / p99 (apiserver clock) | 5.0 / 6.0 (n=2), 1 gangs" in md
    assert "| Kueue admission attempt p50 / p99 | 3.2 ms (bucket 2.5–5 ms) / 48.5 ms (bucket 25–50 ms) |" in md
    assert "| Kueue admission attempt, inadmissible: cycles / p99 | 8 / 23.8 ms (bucket 10–25 ms) |" in md
    assert "| scheduler attempt ms p50 / p99, unschedulable attempts (measurements.scheduler) | 1.00 / 7.50, 235,102 |" in md
    assert "| scheduler pod-group attempt ms p50 / p99 (batch_prometheus.scheduler) | 1.67 / 7.92 |" in md
    assert "| jobs completed per hour / GPU allocation avg (%) | 120.00 / 41.25 |" in md
    assert "| the limit that binds (measurements.attribution) | loop:kueue |" in md
    parts = html_parts(summary())
    assert parts[0] == f"<h2>{TITLE}</h2>" and "id='plot-topology'" in parts[-1] and "<svg" in parts[-1]


def test_no_section_without_topology_figures() -> None:
    assert markdown_lines({"measurements": {}}) == [] and html_parts({"measurements": {}}) == []


def test_the_comparison_puts_the_variants_side_by_side() -> None:
    a, b = summary("none"), summary("kueue-required")
    other = copy.deepcopy(b)
    other["measurements"]["topology"]["placement"]["within_one_domain_pct"]["rack"] = 100.0
    doc = comparison_doc("topology-gangs", [("default", a), ("kueue-tas-required", other)])
    row = {r["name"]: r["figures"] for r in doc["variants"]}
    assert row["default"]["topology: gangs inside one rack (%)"] == round(200 / 3, 3)
    assert row["kueue-tas-required"]["topology: gangs inside one rack (%)"] == 100.0
    assert row["default"]["topology: whole free racks avg"] == round(9 / 11, 3)
    assert row["default"]["topology: free GPUs unusable by the next waiting gang, avg"] == round(102 / 11, 3)
    assert row["default"]["topology: Kueue created -> Admitted p99 (s)"] == 12
    assert row["default"]["jobs completed per hour"] == 120.0  # beside them, from the batch figures
    md = render_markdown(doc)
    assert "| topology: gangs inside one rack (%) | 66.67 | 100.00 |" in md
    assert "| binding limit | loop:kueue | loop:kueue |" in md


def test_the_feature_runs_only_when_the_pools_have_levels() -> None:
    topo = load_scenario(REPO_ROOT / "scenarios" / "topology-gangs.yaml")
    assert any(isinstance(f, TopologyFeature) for f in features_for(topo, "r", print, [], lambda _s: None,
                                                                     lambda _p: None))
    plain = load_scenario(REPO_ROOT / "scenarios" / "smoke.yaml")
    assert not any(isinstance(f, TopologyFeature) for f in features_for(plain, "r", print, [], lambda _s: None,
                                                                          lambda _p: None))


class RecordedProm:
    """Kueue's admission histogram as the run's Prometheus answered it (topology-gangs, kueue-tas-required)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def instant(self, query: str, at: float, purpose: str) -> list[dict[str, Any]]:
        self.asked.append(query)
        if query.startswith("histogram_quantile(0.99, sum by (le, result)"):
            return [{"metric": {"result": "inadmissible"}, "value": [at, "0.0238"]},
                    {"metric": {"result": "success"}, "value": [at, "0.00495"]}]
        if query.startswith("histogram_quantile(0.5, sum by (le, result)"):
            return [{"metric": {"result": "inadmissible"}, "value": [at, "0.002857"]}]
        if query.startswith("histogram_quantile(0.99"):
            return [{"metric": {}, "value": [at, "0.02215"]}]
        if query.startswith("histogram_quantile(0.5"):
            return [{"metric": {}, "value": [at, "0.002639"]}]
        if query.startswith("sum by (result) (increase(kueue_admission_attempt_duration_seconds_count"):
            return [{"metric": {"result": "success"}, "value": [at, "11.2"]},
                    {"metric": {"result": "inadmissible"}, "value": [at, "8.1"]}]
        if query.startswith("sum by (le)"):  # cumulative counts: 10 of 19 cycles under 5 ms, 19 under 25 ms
            return [{"metric": {"le": le}, "value": [at, n]} for le, n in
                    (("0.005", "10"), ("0.01", "15"), ("0.025", "19"), ("+Inf", "19"))]
        return []

    def scalar(self, query: str, at: float, purpose: str) -> float | None:
        res = self.instant(query, at, purpose)
        return float(res[0]["value"][1]) if res else None

    def buckets(self, metric: str, selector: str, window: str, by: tuple[str, ...], at: float,
                purpose: str) -> tuple[str, dict[tuple[str, ...], dict[float, float]]]:
        return PromQueries.buckets(self, metric, selector, window, by, at, purpose)  # type: ignore[arg-type]


def test_kueue_admission_cycle_from_its_histogram_in_ms_with_its_buckets() -> None:
    pq = RecordedProm()
    k = admission_attempts(pq, 1000.0, 1092.2)  # type: ignore[arg-type]
    assert (k["p50"], k["p99"]) == (2.639, 22.15)
    assert k["p50_bucket"] == [0.0, 5.0] and k["p99_bucket"] == [10.0, 25.0] and k["source"] == "bucketed"
    assert k["by_result"]["inadmissible"]["p99"] == 23.8 and k["by_result"]["success"]["p99"] == 4.95
    assert k["cycles"] == {"success": 11.2, "inadmissible": 8.1}
    assert all("[93s]" in q for q in pq.asked)  # the window, rounded up to whole seconds
