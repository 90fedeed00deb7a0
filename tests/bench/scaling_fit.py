"""The arithmetic of ``bench_scaling``: straight-line fits with their errors, projections, agent sizing.

Kept apart from the bench (no cluster, no processes) so that the unit tests check it on real numbers
and the report can be re-derived from a run's raw points (``bench_scaling.py --render``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Fit:
    """Least-squares line ``y = intercept + slope * x`` over ``n`` points.

    Attributes:
        slope, intercept: the line.
        slope_se, intercept_se: their standard errors (None with fewer than 3 points: no degrees of freedom).
        residual_sd: standard deviation of the residuals (n - 2 degrees of freedom; None below 3 points).
        r2: coefficient of determination (None when all y are equal).
        n: number of points.
        x_mean, sxx: mean of x and sum of squared deviations of x (what a projection's error needs).
    """

    slope: float
    intercept: float
    slope_se: float | None
    intercept_se: float | None
    residual_sd: float | None
    r2: float | None
    n: int
    x_mean: float
    sxx: float

    def predict(self, x: float) -> tuple[float, float | None]:
        """(value of the line at ``x``, standard error of that value); the error grows with the distance
        from the measured points, which is why projections far past them are wide."""
        y = self.intercept + self.slope * x
        if self.residual_sd is None:
            return y, None
        return y, self.residual_sd * math.sqrt(1 / self.n + (x - self.x_mean) ** 2 / self.sxx)

    def as_dict(self) -> dict[str, Any]:
        """The fit's fields, rounded for a report."""
        return {k: (None if v is None else round(v, 9) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Ordinary least squares of ``ys`` on ``xs``.

    Raises:
        ValueError: fewer than 2 points, lengths differ, or all x equal (no slope to find).
    """
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length: {len(xs)} vs {len(ys)}")
    n = len(xs)
    if n < 2:
        raise ValueError(f"a line needs at least 2 points, got {n}")
    xm, ym = sum(xs) / n, sum(ys) / n
    sxx = sum((x - xm) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("all x are equal: no slope to fit")
    sxy = sum((x - xm) * (y - ym) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = ym - slope * xm
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - ym) ** 2 for y in ys)
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else None
    if n < 3:
        return Fit(slope, intercept, None, None, None, r2, n, xm, sxx)
    s = math.sqrt(ss_res / (n - 2))
    return Fit(slope, intercept, s / math.sqrt(sxx), s * math.sqrt(1 / n + xm**2 / sxx), s, r2, n, xm, sxx)


@dataclass(frozen=True)
class AgentCost:
    """CPU of one agent process: ``base + per_node * own nodes + per_own_tps * own transitions/s +
    per_watched_tps * transitions/s of the whole cluster`` (cores).

    The last term is there because every agent watches every bound pod of the cluster
    (``hollow.agent``: pods with ``spec.nodeName!=``), so it decodes the other agents' pod events too.
    """

    base: float
    per_node: float
    per_own_tps: float
    per_watched_tps: float

    def cores(self, nodes: float, own_tps: float, cluster_tps: float) -> float:
        """Cores one agent needs for ``nodes`` nodes at ``own_tps`` of its own transitions/s while the
        cluster does ``cluster_tps`` transitions/s in all."""
        return self.base + self.per_node * nodes + self.per_own_tps * own_tps + self.per_watched_tps * cluster_tps


@dataclass(frozen=True)
class Sizing:
    """Agent pods for a target: the smallest count whose busiest pod stays within ``headroom`` of its CPU."""

    nodes: int
    pods_per_s: float
    transitions_per_s: float
    pod_cpu: float
    headroom: float
    agents: int | None
    cores_per_agent: float | None
    total_cores: float | None
    reason: str


def size_agents(cost: AgentCost, nodes: int, pods_per_s: float, transitions_per_pod: float, pod_cpu: float,
                headroom: float, max_agents: int = 1000) -> Sizing:
    """Agent pods (each given ``pod_cpu`` cores) needed so that each uses at most ``headroom * pod_cpu``.

    Nodes and churn split evenly over the agents; every agent still watches the whole cluster's churn,
    so adding agents stops helping once that watch cost alone fills the budget (then ``agents`` is None
    and ``reason`` says so).
    """
    tps = pods_per_s * transitions_per_pod
    budget = headroom * pod_cpu
    for k in range(1, max_agents + 1):
        per = cost.cores(nodes / k, tps / k, tps)
        if per <= budget:
            return Sizing(nodes, pods_per_s, tps, pod_cpu, headroom, k, round(per, 4), round(per * k, 3),
                          f"{k} agent(s) of {pod_cpu} core each at {per:.3f} cores (budget {budget:.3f})")
    floor = cost.base + cost.per_watched_tps * tps
    return Sizing(nodes, pods_per_s, tps, pod_cpu, headroom, None, None, None,
                  f"no count up to {max_agents} fits: the fixed cost plus watching the cluster's {tps:.0f} "
                  f"transitions/s alone is {floor:.3f} cores per agent (budget {budget:.3f})")


def nodes_until(total_cores: float, fits: Sequence[Fit], reserved: float = 0.0) -> float | None:
    """Node count at which the sum of the fitted lines (cores vs nodes) reaches ``total_cores - reserved``;
    None when the summed slope is not positive."""
    slope = sum(f.slope for f in fits)
    intercept = sum(f.intercept for f in fits)
    if slope <= 0:
        return None
    return (total_cores - reserved - intercept) / slope


def quantile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank quantile (``q`` in [0, 1]); None for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]
