"""The nightly gate on recorded real runs: it passes against its own baseline and fails, naming the figure,
against a copy of the baseline with one figure moved past its noise band.

``tests/fixtures/nightly/baseline/`` is a baseline written by ``make nightly`` itself
(``NIGHTLY_UPDATE_BASELINE=1 NIGHTLY_FROM_RUNS=reports/nightly make nightly``) from the real runs of the first
three ``make nightly`` on the local control plane (2026-12-01, this project's 2-core machine, shared with other
work), with a copy of each run's ``summary.json``: smoke x9 and default x2 (the first night's default run left
339 of 596 jobs unfinished and was left out).  ``night/`` holds the runs of the fourth ``make nightly``,
which compared against that baseline and passed (exit 0).  The test runs the nightly itself (``python -m hollowscale.nightly
--from-runs``), so the set file, run discovery, the baseline loader, the band rule and the exit code are all
the real ones; only the runs are replayed instead of repeated (they take ~15 minutes).  The set is the one
those runs were made with (``set.yaml`` here: smoke and default; the shipped set has since added trace replays).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "nightly"
pytestmark = pytest.mark.integration


def nightly(tmp_path: Path, runs: Path, baseline: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hollowscale.nightly", "--set", str(FIX / "set.yaml"),
                           "--from-runs", str(runs), "--baseline", str(baseline), "--out", str(tmp_path / "reports")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_recorded_runs_are_real_nightly_runs() -> None:
    doc = json.loads((FIX / "baseline" / "baseline.json").read_text())
    assert doc["kind"] == "hollowscale-baseline" and set(doc["scenarios"]) == {"smoke", "default"}
    assert len(doc["scenarios"]["smoke"]["runs"]) == 9 and len(doc["scenarios"]["default"]["runs"]) == 2
    for path in [*FIX.glob("baseline/runs/*/*/summary.json"), *FIX.glob("night/*/*/summary.json")]:
        s = json.loads(path.read_text())
        assert s["complete"] and s["cluster"]["backend"] == "local" and s["cluster"]["nodes_ready"] >= 30, path
        assert s["measurements"]["pods"]["started"] > 0 and s["collector"], path


def test_baseline_runs_pass_against_their_own_baseline(tmp_path: Path) -> None:
    r = nightly(tmp_path, FIX / "baseline" / "runs", FIX / "baseline")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "**No regression**" in r.stdout
    md = (tmp_path / "reports" / "latest" / "comparison.md").read_text()
    assert "smoke: 9 new run(s) vs a baseline of 9" in md and "default: 2 new run(s) vs a baseline of 2" in md


def test_the_next_night_passes(tmp_path: Path) -> None:
    r = nightly(tmp_path, FIX / "night", FIX / "baseline")
    assert r.returncode == 0, r.stdout + r.stderr
    verdict = json.loads((tmp_path / "reports" / "latest" / "nightly.json").read_text())
    assert verdict["exit_code"] == 0 and verdict["problems"] == []
    md = (tmp_path / "reports" / "latest" / "comparison.md").read_text()
    assert "smoke: 3 new run(s) vs a baseline of 9" in md and "default: 1 new run(s) vs a baseline of 2" in md


def test_a_figure_moved_past_its_band_fails_and_is_named(tmp_path: Path) -> None:
    moved = tmp_path / "baseline"
    shutil.copytree(FIX / "baseline", moved)
    doc = json.loads((moved / "baseline.json").read_text())
    metric = "pod_startup_latency_ms.p99"
    # the runs' value (median of the smoke repeats) and a baseline band moved to a third of it: the runs are
    # now past the band by +200 % of its median, far beyond the 25 % limit; every other figure is untouched
    runs = [json.loads(p.read_text())["measurements"]["pod_startup_latency_ms"]["p99"]
            for p in sorted(FIX.glob("baseline/runs/smoke/*/summary.json"))]
    new_value = statistics.median(runs)
    fig = doc["scenarios"]["smoke"]["figures"][metric]
    fig["values"] = [round(new_value / 3 * f, 3) for f in (0.95, 1.0, 1.05)]
    fig.update(median=statistics.median(fig["values"]), min=min(fig["values"]), max=max(fig["values"]))
    (moved / "baseline.json").write_text(json.dumps(doc))

    r = nightly(tmp_path, FIX / "baseline" / "runs", moved)
    assert r.returncode == 1, r.stdout + r.stderr
    problems = json.loads((tmp_path / "reports" / "latest" / "nightly.json").read_text())["problems"]
    assert len(problems) == 1, problems  # only the moved figure
    p = problems[0]
    assert p.startswith(f"smoke: {metric}: new median of 9 runs {new_value:,.3f}".rstrip("0").rstrip("."))
    assert "above the baseline band [" in p and "+200.0% vs the median" in p
    assert "limit 25%" in p
    assert f"`{metric}`" in r.stdout and "**REGRESSION**" in r.stdout
