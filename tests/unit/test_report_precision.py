"""Quantiles with honest precision: a quantile read from a Prometheus histogram carries the bucket it was
interpolated in and every report shows it; the timeline's quantiles are labelled exact; latency plots
spanning orders of magnitude get a log axis.

Recorded data: ``tests/fixtures/prometheus/gang-contention-default.json`` (:mod:`recorded`) holds the
queries :class:`PromQueries` sent to a real run's Prometheus (gang-contention, default variant) and the
answers; ``tests/fixtures/reports/gang-contention-default/`` that run's ``summary.json`` and ``series.json``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from recorded import RecordedProm, load

from hollowscale.measure.prom import BUCKETED, EXACT
from hollowscale.report import html, markdown, write_report
from hollowscale.report.html import auto_log, plots
from hollowscale.report.precision import quantile_text, slo_value_text
from hollowscale.report.regressions import compare
from hollowscale.report.verdicts import finalize
from hollowscale.run.summary import mark_exact
from hollowscale.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RECORDED = load("gang-contention-default")
RUN = FIXTURES / "reports" / "gang-contention-default"


def recorded_api() -> dict[str, Any]:
    start, end = RECORDED["api_window"]
    return RecordedProm(RECORDED["answers"]).api_latency(start, end)


def recorded_summary() -> dict[str, Any]:
    """The recorded run's summary with the figures PromQueries now makes from the recorded answers."""
    s = json.loads((RUN / "summary.json").read_text())
    api = recorded_api()
    m = s["measurements"]
    m["api_latency_ms"], m["api_latency_slo_ms"] = api["by_verb"], api["slo_groups"]
    start, end = RECORDED["window"]
    m["scheduler"] = RecordedProm(RECORDED["answers"]).scheduler(start, end)
    mark_exact({k: m[k] for k in ("pod_startup_latency_ms", "pod_scheduling_latency_ms", "job_completion_time_s",
                                  "gpu_queue_wait_s", "batch")})
    sc = load_scenario(ROOT / "scenarios" / "gang-contention.yaml")
    return finalize(s, sc.slos)


def test_summary_md_shows_each_bucketed_quantile_with_its_bucket_and_labels_exact_ones(tmp_path: Path) -> None:
    s = recorded_summary()
    assert s["measurements"]["pod_startup_latency_ms"]["source"] == EXACT
    assert s["measurements"]["batch"]["job_steps_s"]["created_to_finished"]["source"] == EXACT
    md = markdown.render(s)
    assert "| POST | 1,230 | 25.10 (bucket 0–50) | 49.70 (bucket 0–50) |" in md
    assert "| PATCH | 558 | 25.93 (bucket 0–50) | 86.08 (bucket 50–100) |" in md
    assert "| SLO group mutating | 3,646 | 25.21 (bucket 0–50) | 49.91 (bucket 0–50) |" in md
    assert "| scheduling attempt duration (ms) | 0.56 (bucket 0–1) | n/a | 31.43 (bucket 16–32) | bucketed" in md
    assert "| api_mutating_p99 | `api_latency_slo_ms.mutating.p99` | <= 1,000.0 | 49.9 (bucket 0–50) | pass |" in md
    assert re.search(r"\| pod startup latency \(ms\) \| [\d.,]+ \| [\d.,]+ \| [\d.,]+ \| exact \(timeline\) \|", md)
    assert "**exact**: nearest-rank" in md and "**bucketed**: read from a Prometheus histogram" in md
    # every quantile row of the Measurements and API tables says which it is
    table = md[md.index("| figure | p50"):md.index("- scheduling throughput")]
    rows = [r for r in table.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert rows and all("exact" in r or "bucket" in r for r in rows)
    api_rows = [r for r in md[md.index("## API latency"):].splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert api_rows and all(r.count("(bucket ") == 2 or r.count("n/a") == 2 for r in api_rows)


def test_report_html_shows_buckets_and_the_legend(tmp_path: Path) -> None:
    s = recorded_summary()
    series = json.loads((RUN / "series.json").read_text())
    page = html.render(s, series["timeline"], series["prometheus"])
    assert "49.703 (bucket 0–50)" in page and "86.078 (bucket 50–100)" in page
    assert "<b>exact</b>: nearest-rank" in page and "<b>bucketed</b>: read from a Prometheus histogram" in page
    assert "49.9 (bucket 0–50)" in page and "(exact)" in page  # the SLO table
    assert "<th>precision</th>" in page and "<td>exact</td>" in page  # the timeline's measurements
    assert "API request latency by verb (whole run, bucketed)" in page


def test_a_summary_without_buckets_still_says_bucketed() -> None:
    """A summary written before buckets were recorded: Prometheus figures read bucketed, not exact."""
    s = json.loads((FIXTURES / "nightly" / "night" / "smoke" / "01" / "summary.json").read_text())
    md = markdown.render(s)
    assert "| POST | 195 | 25.83 (bucket not recorded) | 91.44 (bucket not recorded) |" in md
    slos = {x["name"]: x for x in s["slos"]}
    assert slo_value_text(slos["api_mutating_p99"], s["measurements"]) == "158.7 (bucket not recorded)"
    assert slo_value_text(slos["pod_startup_p99"], s["measurements"]) == "210.4 (exact)"
    assert slo_value_text(slos["jobs_failed"], s["measurements"]) == "0.0"  # not a quantile
    assert quantile_text({"p99": 2.5, "p99_bucket": [2.5, None], "source": BUCKETED}, "p99", 1, "s") == \
        "2.5 s (bucket 2.5–+Inf s)"


def test_an_slo_whose_threshold_lies_inside_the_bucket_says_so() -> None:
    s = recorded_summary()
    from hollowscale.scenario.model import SloSpec

    finalize(s, [SloSpec(name="tight", metric="api_latency_ms.PATCH.p99", op="<=", threshold=60.0)])
    [tight] = s["slos"]
    assert not tight["passed"] and tight["precision"] == BUCKETED and tight["bucket"] == [50.0, 100.0]
    assert "threshold lies inside the bucket 50–100" in tight["note"]


def test_compare_shows_the_buckets_of_bucketed_figures() -> None:
    base = recorded_summary()
    new = copy.deepcopy(base)
    new["measurements"]["api_latency_ms"]["POST"]["p99"] = 49.9
    rows, problems = compare(base, new, 0.1)
    post = next(r for r in rows if r.metric == "api_latency_ms.POST.p99")
    assert post.base_bucket == post.new_bucket == (0.0, 50.0) and post.regressed
    assert "(bucket 0–50) -> 49.9 (bucket 0–50)" in next(p for p in problems if "POST" in p)
    startup = next(r for r in rows if r.metric == "pod_startup_latency_ms.p99")
    assert startup.base_bucket is None  # exact


# ------------------------------------------------------------------------------------------ log axis
def test_log_axis_for_a_45_s_spike_beside_30_ms() -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    assert auto_log(ax, [30.0, 31.0, 45_000.0, 29.0, None, 0.0]) and ax.get_yscale() == "log"
    plt.close(fig)
    fig, ax = plt.subplots()
    assert not auto_log(ax, [30.0, 45.0, 2_900.0]) and ax.get_yscale() == "linear"  # < 100x: linear
    plt.close(fig)

    t = [float(i) for i in range(60)]
    p99 = [30.0 + i % 3 for i in range(60)]
    p99[20:25] = [45_000.0] * 5  # a fault: five windows of 45 s startups
    rest = {k: [0.0] * 60 for k in ("scheduled_per_s", "pending_pods", "running_pods", "gpu_allocation_pct")}
    series = {"t_s": t, "startup_p50_ms": [28.0] * 60, "startup_p99_ms": p99, **rest}
    prom = {"api_p99_ms": {"POST": [[x, 49.6] for x in t], "GET": [[x, 49.5 if x != 30 else 12_000.0] for x in t]},
            "api_bucket_edges_ms": [50.0, 100.0, 12_000.0, 15_000.0]}
    by_id = {pid: (source, svg) for pid, _title, source, svg in plots(series, prom, {})}
    source, svg = by_id["plot-startup"]
    assert "log-scale y axis" in source and "exact" in source
    for decade in ("100", "1,000", "10,000"):  # ticks at the decades, labelled
        assert f">{decade}<" in svg, decade
    assert "log-scale y axis" in by_id["plot-api-time"][0] and "bucket edges" in by_id["plot-api-time"][0]
    flat = {"t_s": t, "startup_p50_ms": [28.0] * 60, "startup_p99_ms": [30.0 + i % 3 for i in range(60)], **rest}
    assert "log-scale" not in {pid: s for pid, _t, s, _v in plots(flat, None, {})}["plot-startup"]


def test_the_recorded_deadlocked_run_plots_startup_on_a_log_axis(tmp_path: Path) -> None:
    """The default scheduler's gang-contention run: 100 s startups of the members that waited beside
    the quick ones."""
    s = recorded_summary()
    series = json.loads((RUN / "series.json").read_text())
    paths = write_report(tmp_path / "run", s, series["timeline"], series["prometheus"])
    page = paths["report.html"].read_text()
    assert re.search(r"Pod startup latency over time.*log-scale y axis", page)
