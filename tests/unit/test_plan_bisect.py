"""The knee search: bisection on rate, bounds measured only when needed, every point recorded."""

from __future__ import annotations

import pytest

from hollowscale.plan.bisect import AT_LEAST_HI, BELOW_LO, BRACKETED, Knee, bisect_knee, within_one_step
from hollowscale.scenario.sweep import RateSearch


def search(lo: float = 1, hi: float = 17, res: float = 2) -> RateSearch:
    return RateSearch(lo=lo, hi=hi, resolution=res)


def test_bisection_brackets_the_threshold_and_records_the_order() -> None:
    calls: list[float] = []

    def passes(rate: float) -> bool:
        calls.append(rate)
        return rate <= 6.3

    k = bisect_knee(search(), passes, slo="s")
    assert [r for r, _ in k.tried] == calls == [9.0, 5.0, 7.0]
    assert k.verdict == BRACKETED and k.knee == 5.0 and k.failing == 7.0 and k.step == 2.0
    assert k.failing - k.knee <= 2.0


@pytest.mark.parametrize("threshold", [1.2, 2.9, 4.4, 7.7, 10.0, 12.5, 15.1, 16.9])
def test_knee_is_within_resolution_below_any_threshold(threshold: float) -> None:
    k = bisect_knee(search(), lambda r: r <= threshold)
    assert k.knee is not None and k.knee <= threshold
    assert k.failing is not None and k.failing > threshold
    assert k.failing - k.knee <= 2.0
    assert len(k.tried) <= search().steps() + 1


def test_lo_is_measured_only_when_no_midpoint_passes() -> None:
    k = bisect_knee(search(), lambda r: False)
    assert k.verdict == BELOW_LO and k.knee is None and [r for r, _ in k.tried] == [9.0, 5.0, 3.0, 1.0]
    k2 = bisect_knee(search(), lambda r: r <= 1.5)
    assert k2.verdict == BRACKETED and k2.knee == 1.0 and k2.failing == 3.0


def test_hi_is_measured_only_when_every_midpoint_passes() -> None:
    k = bisect_knee(search(), lambda r: True)
    assert k.verdict == AT_LEAST_HI and k.knee == 17.0 and k.failing is None
    assert [r for r, _ in k.tried] == [9.0, 13.0, 15.0, 17.0]
    k2 = bisect_knee(search(), lambda r: r < 16.5)
    assert k2.verdict == BRACKETED and k2.knee == 15.0 and k2.failing == 17.0


def test_a_measured_rate_is_asked_once_and_shared_through_the_callback() -> None:
    cache: dict[float, bool] = {}
    measured: list[float] = []

    def measure(rate: float) -> bool:
        if rate not in cache:
            measured.append(rate)
            cache[rate] = rate <= 6
        return cache[rate]

    bisect_knee(search(), measure, "a")
    bisect_knee(search(), measure, "b")  # same outcomes: no new point
    assert measured == [9.0, 5.0, 7.0]


def test_within_one_step() -> None:
    a = Knee("s", 5.0, 5.0, 7.0, BRACKETED, resolution=2)
    assert within_one_step(a, Knee("s", 7.0, 7.0, 9.0, BRACKETED, resolution=2))
    assert not within_one_step(a, Knee("s", 9.0, 9.0, 11.0, BRACKETED, resolution=2))
    assert not within_one_step(a, Knee("s", None, None, 1.0, BELOW_LO, resolution=2))
    assert within_one_step(Knee("s", None, None, 1.0, BELOW_LO), Knee("s", None, None, 1.0, BELOW_LO))


def test_steps_counts_the_midpoints() -> None:
    assert search().steps() == 3
    assert search(0.5, 8, 1).steps() == 3
    assert search(1, 17, 8).steps() == 1
