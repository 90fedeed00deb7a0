"""The knee search: per SLO, a bisection on arrival rate (pure: the measurement is a callback).

The knee of an SLO is the highest rate tried that met it (with no growing backlog).  The bisection
assumes the SLO holds at ``lo`` and fails at ``hi`` but measures those bounds only when the answer
depends on them: ``lo`` when no midpoint passed (is the knee below the searched range?), ``hi`` when
every midpoint passed (is the knee at or above it?).  Measured rates are shared through the callback's
cache, so the SLOs of one cluster size reuse each other's points.  Every rate tried is recorded in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hollowscale.scenario.sweep import RateSearch

#: how a knee stands relative to the searched range
BRACKETED, BELOW_LO, AT_LEAST_HI = "bracketed", "below-lo", "at-least-hi"


def rate_key(rate: float) -> float:
    """Rates are compared and stored rounded to a thousandth of an instance/s."""
    return round(rate, 3)


@dataclass
class Knee:
    """One SLO's knee on one sweep cell.

    Attributes:
        knee: the highest rate tried that passed (None when even ``lo`` failed).
        passing: the bracket's passing end (None when nothing passed).
        failing: the bracket's failing end (None when ``hi`` passed).
        verdict: ``bracketed``, ``below-lo`` or ``at-least-hi``.
        tried: every (rate, passed) in the order the bisection asked for them.
    """

    slo: str
    knee: float | None
    passing: float | None
    failing: float | None
    verdict: str
    tried: list[tuple[float, bool]] = field(default_factory=list)
    resolution: float = 0.0

    @property
    def step(self) -> float:
        """The width of the final bracket (the knee's precision), or the resolution when unbracketed."""
        if self.passing is not None and self.failing is not None:
            return self.failing - self.passing
        return self.resolution

    def to_dict(self) -> dict[str, Any]:
        return {"slo": self.slo, "knee": self.knee, "passing": self.passing, "failing": self.failing,
                "verdict": self.verdict, "step": round(self.step, 6), "resolution": self.resolution,
                "tried": [{"rate": r, "passed": p} for r, p in self.tried]}


def bisect_knee(search: RateSearch, passes: Callable[[float], bool], slo: str = "") -> Knee:
    """Bisect ``[search.lo, search.hi]`` until the bracket is no wider than ``search.resolution``.

    ``passes(rate)`` measures (or recalls) a point; it is called once per distinct rate here.
    """
    tried: list[tuple[float, bool]] = []
    seen: dict[float, bool] = {}

    def ask(rate: float) -> bool:
        r = rate_key(rate)
        if r not in seen:
            seen[r] = bool(passes(r))
            tried.append((r, seen[r]))
        return seen[r]

    lo, hi = rate_key(search.lo), rate_key(search.hi)
    good: float | None = None
    bad: float | None = None
    a, b = lo, hi
    while b - a > search.resolution + 1e-9:
        mid = rate_key((a + b) / 2)
        if mid in (a, b):  # the thousandth rounding leaves nothing in between
            break
        if ask(mid):
            a, good = mid, mid
        else:
            b, bad = mid, mid
    if good is None:  # no midpoint passed: does lo?
        if ask(lo):
            good = lo
        else:
            return Knee(slo, None, None, lo, BELOW_LO, tried, search.resolution)
    if bad is None:  # every midpoint passed: does hi?
        if ask(hi):
            return Knee(slo, hi, hi, None, AT_LEAST_HI, tried, search.resolution)
        bad = hi
    return Knee(slo, good, good, bad, BRACKETED, tried, search.resolution)


def within_one_step(first: Knee, second: Knee) -> bool:
    """Whether two plans' knees agree within one bisection step (the wider of their final brackets)."""
    if first.verdict != second.verdict and BELOW_LO in (first.verdict, second.verdict):
        return False
    if first.knee is None or second.knee is None:
        return first.knee is None and second.knee is None
    return abs(first.knee - second.knee) <= max(first.step, second.step) + 1e-9
