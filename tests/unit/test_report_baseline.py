"""The noise-aware baseline: a regression must be past the repeats' band AND beyond the percent limit."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hollowscale.report.baseline import (
    Band,
    build_baseline,
    compare_to_baseline,
    is_baseline,
    load_baseline,
    scenario_entry,
    write_baseline,
)
from hollowscale.run.cli import compare_cmd

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "compare"


def base_summary() -> dict[str, Any]:
    return json.loads((FIX / "base" / "summary.json").read_text())


def with_figures(run_id: str, p99: float, throughput: float, failed: float = 0) -> dict[str, Any]:
    s = base_summary()
    s["run_id"] = run_id
    m = s["measurements"]
    m["pod_startup_latency_ms"]["p99"] = p99
    m["scheduling_throughput_pods_per_s"]["avg"] = throughput
    m["jobs"]["failed"] = failed
    return s


REPEATS = [with_figures("b1", 100.0, 10.0), with_figures("b2", 130.0, 9.0), with_figures("b3", 110.0, 11.0)]


def entry() -> dict[str, Any]:
    return scenario_entry(copy.deepcopy(REPEATS))


def problems_for(new: list[dict[str, Any]], pct: float = 10.0) -> list[str]:
    return compare_to_baseline(entry(), new, pct)[1]


def test_band_is_min_max_with_median() -> None:
    fig = entry()["figures"]["pod_startup_latency_ms.p99"]
    assert fig["values"] == [100.0, 130.0, 110.0]
    assert (fig["min"], fig["median"], fig["max"], fig["n"]) == (100.0, 110.0, 130.0, 3)
    b = Band("lower", (100.0, 130.0, 110.0))
    assert b.past(131.0) and not b.past(130.0) and not b.past(50.0)
    assert Band("higher", (9.0, 11.0)).past(8.9) and not Band("higher", (9.0, 11.0)).past(20.0)


def test_inside_the_band_is_not_a_regression_even_far_beyond_the_percent() -> None:
    # 130 is +18 % vs the median 110 (past a 10 % limit) but one baseline repeat saw it: noise
    assert problems_for([with_figures("n1", 130.0, 10.0)], pct=10) == []


def test_past_the_band_but_within_the_percent_is_not_a_regression() -> None:
    # 135 > max 130, but only +22.7 % vs the median: within a 25 % limit
    assert problems_for([with_figures("n1", 135.0, 10.0)], pct=25) == []


def test_past_the_band_and_beyond_the_percent_regresses_and_names_band_and_value() -> None:
    found = problems_for([with_figures("n1", 200.0, 10.0)], pct=25)
    assert len(found) == 1
    msg = found[0]
    assert "pod_startup_latency_ms.p99" in msg and "new 200" in msg
    assert "[100, 130] (median 110, n=3)" in msg and "+81.8%" in msg and "limit 25%" in msg


def test_higher_is_better_regresses_below_the_band() -> None:
    found = problems_for([with_figures("n1", 110.0, 5.0)], pct=25)
    assert len(found) == 1 and "scheduling_throughput_pods_per_s.avg" in found[0] and "below the baseline band" in found[0]
    assert problems_for([with_figures("n1", 110.0, 50.0)], pct=25) == []  # better is never a regression


def test_new_side_uses_the_median_of_its_repeats() -> None:
    # one noisy new repeat (500) does not decide; two do
    assert problems_for([with_figures("n1", 500.0, 10.0), with_figures("n2", 105.0, 10.0),
                         with_figures("n3", 112.0, 10.0)], pct=25) == []
    found = problems_for([with_figures("n1", 500.0, 10.0), with_figures("n2", 400.0, 10.0),
                          with_figures("n3", 112.0, 10.0)], pct=25)
    assert len(found) == 1 and "median of 3 runs 400" in found[0]


def test_zero_median_that_grows_past_the_band_is_unbounded() -> None:
    e = scenario_entry([with_figures("b1", 100.0, 10.0, 0), with_figures("b2", 100.0, 10.0, 0)])
    found = compare_to_baseline(e, [with_figures("n1", 100.0, 10.0, 2)], 1000)[1]
    assert any("jobs.failed" in p and "+inf%" in p for p in found)
    e = scenario_entry([with_figures("b1", 100.0, 10.0, 0), with_figures("b2", 100.0, 10.0, 3)])
    assert compare_to_baseline(e, [with_figures("n1", 100.0, 10.0, 2)], 10)[1] == []  # within [0, 3]


def test_one_repeat_reduces_to_the_single_run_rule() -> None:
    e = scenario_entry([with_figures("b1", 100.0, 10.0)])
    assert compare_to_baseline(e, [with_figures("n1", 109.0, 10.0)], 10)[1] == []
    assert len(compare_to_baseline(e, [with_figures("n1", 111.0, 10.0)], 10)[1]) == 1


def test_slo_that_always_passed_and_now_fails_is_a_regression() -> None:
    new = with_figures("n1", 110.0, 10.0)
    new["slos"] = [dict(s, passed=False) for s in new["slos"]]
    found = problems_for([new], pct=1000)
    assert any("SLO" in p and "passed in all 3 baseline runs" in p for p in found)
    flaky = copy.deepcopy(REPEATS)
    flaky[1]["slos"] = [dict(s, passed=False) for s in flaky[1]["slos"]]
    assert not any("SLO" in p for p in compare_to_baseline(scenario_entry(flaky), [new], 1000)[1])


def test_incomplete_runs_cannot_be_a_baseline_and_fail_a_comparison() -> None:
    bad = dict(with_figures("b9", 1.0, 1.0), complete=False, incomplete_reason="SIGINT")
    with pytest.raises(ValueError, match="incomplete runs cannot be a baseline: b9"):
        scenario_entry([*REPEATS, bad])
    assert any("incomplete" in p for p in problems_for([bad]))
    with pytest.raises(ValueError, match="one scenario"):
        scenario_entry([REPEATS[0], dict(REPEATS[1], scenario="other")])


def test_baseline_folder_and_the_compare_cli(tmp_path: Path) -> None:
    groups = {"default": [(tmp_path / f"r{i}", s) for i, s in enumerate(copy.deepcopy(REPEATS))]}
    path = write_baseline(tmp_path / "bl", groups)
    assert is_baseline(tmp_path / "bl") and is_baseline(path) and not is_baseline(FIX / "base")
    doc = load_baseline(tmp_path / "bl")
    assert doc["scenarios"]["default"]["runs"] == ["b1", "b2", "b3"]
    assert (tmp_path / "bl" / "runs" / "default" / "03" / "summary.json").is_file()
    for i, s in enumerate([with_figures("ok", 128.0, 10.0), with_figures("bad", 300.0, 10.0)]):
        (tmp_path / f"n{i}").mkdir()
        (tmp_path / f"n{i}" / "summary.json").write_text(json.dumps(s))
    r = CliRunner().invoke(compare_cmd, [str(tmp_path / "bl"), str(tmp_path / "n0"), "--max-regression", "10"])
    assert r.exit_code == 0, r.output
    assert "no regression past the baseline band" in r.output
    r = CliRunner().invoke(compare_cmd, [str(tmp_path / "bl"), str(tmp_path / "n1"), "--max-regression", "10"])
    assert r.exit_code == 1 and "pod_startup_latency_ms.p99: new 300 is above the baseline band [100, 130]" in r.output
    other = dict(with_figures("x", 1.0, 1.0), scenario="smoke")
    (tmp_path / "n2").mkdir()
    (tmp_path / "n2" / "summary.json").write_text(json.dumps(other))
    r = CliRunner().invoke(compare_cmd, [str(tmp_path / "bl"), str(tmp_path / "n2")])
    assert r.exit_code != 0 and "has no scenario 'smoke'" in r.output


def test_build_baseline_keys_scenarios() -> None:
    doc = build_baseline({"whatever": copy.deepcopy(REPEATS)})
    assert doc["kind"] == "hollowscale-baseline" and set(doc["scenarios"]) == {"default"}  # the runs' own name


def test_a_run_that_left_jobs_unfinished_is_not_a_baseline_repeat_and_regresses() -> None:
    from hollowscale.report.baseline import unsettled

    behind = with_figures("slow", 100.0, 10.0)
    behind["measurements"]["jobs"]["unfinished"] = 339
    behind["measurements"]["jobs"]["submitted"] = 596
    assert unsettled(behind) == "339 of 596 submitted jobs unfinished"
    assert unsettled(REPEATS[0]) == ""
    found = problems_for([behind], pct=25)
    assert any(p.startswith("default: jobs.unfinished: new 339 is above the baseline band [0, 0]") for p in found)
