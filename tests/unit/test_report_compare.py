"""``hollowscale compare`` on fixture summaries: pass within the limit, fail on regressions."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hollowscale.report.regressions import change, compare
from hollowscale.run.cli import compare_cmd

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "compare"


def run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(compare_cmd, [*args])
    return r.exit_code, r.output


def test_same_run_has_no_regression() -> None:
    code, out = run(str(FIX / "base"), str(FIX / "base"), "--max-regression", "0")
    assert code == 0, out
    assert "no regression" in out


def test_small_noise_passes_at_10pct_and_fails_at_1pct() -> None:
    code, out = run(str(FIX / "base"), str(FIX / "within-10pct"), "--max-regression", "10")
    assert code == 0, out
    code, out = run(str(FIX / "base"), str(FIX / "within-10pct"), "--max-regression", "1")
    assert code == 1
    assert "pod_startup_latency_ms.p99" in out and "REGRESSION" in out


def test_regressions_fail_and_are_named() -> None:
    code, out = run(str(FIX / "base"), str(FIX / "regressed"), "--max-regression", "10")
    assert code == 1
    assert "pod_startup_latency_ms.p99" in out
    assert "scheduling_throughput_pods_per_s.avg" in out
    assert "SLO pod_startup_p99 passed in the baseline and fails now" in out
    assert "api_latency_ms.LIST.p99" not in out.split("regression(s)")[1]  # +7 % is within 10 %


def test_slo_flip_fails_even_with_a_huge_limit() -> None:
    code, out = run(str(FIX / "base"), str(FIX / "regressed"), "--max-regression", "1000")
    assert code == 1 and "SLO pod_startup_p99" in out


def test_improvement_is_not_a_regression() -> None:
    code, out = run(str(FIX / "regressed"), str(FIX / "base"), "--max-regression", "5")
    assert code == 0, out


def test_not_a_summary_is_an_error() -> None:
    code, out = run(str(FIX / "base"), str(FIX / "not-a-run"))
    assert code != 0 and "not a hollowscale summary" in out


def test_change_directions() -> None:
    assert change(100, 120, "lower") == (20.0, "")
    assert change(100, 120, "higher") == (-20.0, "")
    assert change(0, 3, "lower")[0] == float("inf")
    assert change(None, 3, "lower") == (None, "missing in base")


def test_incomplete_new_run_is_a_regression() -> None:
    base = json.loads((FIX / "base" / "summary.json").read_text())
    new = dict(base, complete=False, incomplete_reason="interrupted by SIGINT")
    _, problems = compare(base, new, 10)
    assert any("incomplete" in p for p in problems)


def _variants_folder(root: Path, wasted: dict[str, float]) -> Path:
    root.mkdir()
    variants = []
    for name, w in wasted.items():
        (root / name).mkdir()
        summary = {"schema_version": 1, "scenario": "gang-contention", "started_at": "2026-12-01T00:00:00Z",
                   "duration_s": 100.0, "cluster": {}, "slos": [], "passed": True, "complete": True,
                   "measurements": {"batch": {"wasted_gpu_seconds": w, "jobs_completed_per_hour": 600.0}}}
        (root / name / "summary.json").write_text(json.dumps(summary))
        variants.append({"name": name})
    (root / "comparison.json").write_text(json.dumps({"kind": "hollowscale-comparison", "variants": variants}))
    return root


def test_comparison_folders_are_compared_variant_by_variant(tmp_path: Path) -> None:
    base = _variants_folder(tmp_path / "base", {"default": 1000.0, "gang": 10.0})
    same = _variants_folder(tmp_path / "same", {"default": 1010.0, "gang": 10.0})
    worse = _variants_folder(tmp_path / "worse", {"default": 1000.0, "gang": 100.0})
    code, out = run(str(base), str(same))
    assert code == 0 and "in 2 variant(s)" in out
    code, out = run(str(base), str(worse))
    assert code == 1 and "gang: batch.wasted_gpu_seconds: 10.0 -> 100.0" in out
    fewer = _variants_folder(tmp_path / "fewer", {"default": 1000.0})
    code, out = run(str(base), str(fewer))
    assert code == 1 and "variant gang of the baseline did not run" in out
