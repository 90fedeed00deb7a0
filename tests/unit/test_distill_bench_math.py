"""The bench's derived figures: throughput windows, the cost model and elasticity."""

from __future__ import annotations

import pytest

from distill.bench import RunRecord, _elasticity, _limits, _rate_windows


def test_rate_windows_measure_the_slope_and_skip_evaluation() -> None:
    tl = [[t / 10, 100 * t] for t in range(0, 101)]  # 1000 samples/s for 10 s
    w = _rate_windows(tl, 0.0, 10.0, 1.0, [])
    assert w and all(v == pytest.approx(1000, rel=1e-6) for _, v in w)
    skipped = _rate_windows(tl, 0.0, 10.0, 1.0, [[4.0, 5.0]])
    assert all(not (a < 5.0 and a + 1.0 > 4.0) for a, _ in skipped)


def test_cost_model_bounds_one_teacher_core_to_2x() -> None:
    rows = [
        {"row": "pure", "samples_per_student_cpu_s": 2000.0},
        {"row": "same-net", "samples_per_student_cpu_s": 1000.0},  # teacher costs as much as the student
    ]
    lim = _limits(rows)
    assert lim["teacher_to_student_cost"] == pytest.approx(1.0)
    assert lim["predicted_same_net_ratio_to_pure"] == pytest.approx(0.5)
    assert lim["max_service_over_same_net_1_teacher_core"] == pytest.approx(2.0)
    assert lim["teacher_cores_for_90pct_of_pure"] == pytest.approx(1 / 0.9)


def test_elasticity_detects_dip_and_recovery() -> None:
    # 1000/s, then 200/s for 3 s after a kill at t=5, teacher ready at t=8, full speed from t=9
    tl, n, t = [], 0.0, 0.0
    while t <= 15:
        tl.append([round(t, 1), n])
        rate = 200 if 5 <= t < 9 else 1000
        n += rate * 0.1
        t += 0.1
    rec = RunRecord(
        "service-2-kill",
        0,
        {"timeline": tl, "lost_samples": 0, "duplicate_samples": 0, "reader": {"retries": 3, "teachers": {}}},
        {"killed_at": 5.0, "ready_at": 8.0, "restart_launched_at": 7.0, "killed_at_samples": 5000},
    )
    el = _elasticity([rec])
    r = el["runs"][0]
    assert r["baseline_samples_per_s"] == pytest.approx(1000, rel=0.02)
    assert r["during_outage_samples_per_s"] < 500
    assert r["recovered_within_s"] == pytest.approx(1.0, abs=0.15)
    assert el["lost_samples_total"] == 0
