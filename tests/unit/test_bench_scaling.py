"""bench_scaling's arithmetic (tests/bench/scaling_fit.py): line fits and their errors, sizing of agent pods."""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

FIT = Path(__file__).resolve().parents[1] / "bench" / "scaling_fit.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scaling_fit_under_test", FIT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


sf = _load()


def test_fit_agrees_with_statistics_linear_regression() -> None:
    xs = [0.0, 1000.0, 2000.0, 4000.0, 8000.0]
    ys = [0.036, 0.21, 0.37, 0.74, 1.52]
    fit = sf.linear_fit(xs, ys)
    ref = statistics.linear_regression(xs, ys)
    assert fit.slope == pytest.approx(ref.slope)
    assert fit.intercept == pytest.approx(ref.intercept)
    assert fit.r2 == pytest.approx(statistics.correlation(xs, ys) ** 2)
    assert fit.n == 5


def test_fit_standard_errors_match_the_textbook_formulas() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    ys = [1.1, 1.9, 3.2, 3.8]
    fit = sf.linear_fit(xs, ys)
    # residuals of y = 0.15 + 0.94 x: 0.01, -0.13, 0.23, -0.11 -> SSR 0.082, s^2 = 0.041, Sxx = 5
    assert fit.slope == pytest.approx(0.94)
    assert fit.intercept == pytest.approx(0.15)
    assert fit.residual_sd == pytest.approx(math.sqrt(0.082 / 2))
    assert fit.slope_se == pytest.approx(math.sqrt(0.041 / 5))
    assert fit.intercept_se == pytest.approx(math.sqrt(0.041 * (1 / 4 + 2.5**2 / 5)))


def test_projection_error_grows_away_from_the_points() -> None:
    fit = sf.linear_fit([1000.0, 2000.0, 4000.0, 8000.0], [0.2, 0.45, 0.7, 1.6])
    _, near = fit.predict(3750.0)
    y15k, far = fit.predict(15000.0)
    assert y15k == pytest.approx(fit.intercept + fit.slope * 15000)
    assert near is not None and far is not None and far > near


def test_exact_line_has_zero_error_and_two_points_have_none() -> None:
    fit = sf.linear_fit([0.0, 1.0, 2.0], [1.0, 3.0, 5.0])
    assert (fit.slope, fit.intercept, fit.slope_se) == (pytest.approx(2.0), pytest.approx(1.0), pytest.approx(0.0))
    two = sf.linear_fit([0.0, 1.0], [1.0, 2.0])
    assert two.slope_se is None and two.predict(5.0) == (pytest.approx(6.0), None)


@pytest.mark.parametrize(("xs", "ys", "msg"), [([1.0], [1.0], "at least 2"), ([1.0, 1.0], [1.0, 2.0], "all x"),
                                               ([1.0, 2.0], [1.0], "differ in length")])
def test_fit_refuses_what_has_no_line(xs: list[float], ys: list[float], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        sf.linear_fit(xs, ys)


def test_sizing_takes_the_smallest_count_within_headroom() -> None:
    cost = sf.AgentCost(base=0.01, per_node=2e-5, per_own_tps=1.5e-3, per_watched_tps=0.0)
    s = sf.size_agents(cost, 15000, 75.0, 3, pod_cpu=1.0, headroom=0.5)
    # k agents: 0.01 + 0.3/k + 0.3375/k <= 0.5  ->  k >= 0.6375/0.49 = 1.3 -> 2
    assert s.agents == 2
    assert s.cores_per_agent == pytest.approx(0.01 + 0.6375 / 2, abs=1e-4)
    assert s.total_cores == pytest.approx(2 * s.cores_per_agent, abs=1e-3)
    assert s.transitions_per_s == 225.0


def test_sizing_says_when_watching_the_cluster_alone_fills_a_pod() -> None:
    cost = sf.AgentCost(base=0.01, per_node=2e-5, per_own_tps=1e-3, per_watched_tps=3e-3)
    s = sf.size_agents(cost, 15000, 75.0, 3, pod_cpu=0.5, headroom=0.5)
    # watching 225 transitions/s costs 0.675 cores per agent, above the 0.25 budget however many agents
    assert s.agents is None and "alone" in s.reason
    more = sf.size_agents(cost, 15000, 75.0, 3, pod_cpu=4.0, headroom=0.5)
    assert more.agents is not None and more.agents >= 1


def test_nodes_until_sums_the_lines() -> None:
    a = sf.linear_fit([0.0, 1000.0, 2000.0], [0.1, 0.3, 0.5])
    b = sf.linear_fit([0.0, 1000.0, 2000.0], [0.0, 0.02, 0.04])
    assert sf.nodes_until(2.0, [a, b]) == pytest.approx((2.0 - 0.1) / 0.00022)
    flat = sf.linear_fit([0.0, 1.0], [1.0, 1.0])
    assert sf.nodes_until(2.0, [flat]) is None


def test_quantile_nearest_rank() -> None:
    vals = [float(v) for v in range(1, 101)]
    assert sf.quantile(vals, 0.99) == 99.0
    assert sf.quantile(vals, 0.5) == 50.0
    assert sf.quantile([3.0], 0.99) == 3.0
    assert sf.quantile([], 0.5) is None
