"""Arrival curves (instances per second over time) and the Locust shape that follows them.

A curve is a pure function ``rate(t)``.  :class:`ArrivalShape` turns it into a user count: each
user submits ``per_user_rate`` instances/s (``constant_throughput`` pacing, or exponential gaps for
``poisson`` so the superposed stream is a Poisson process), so ``users = round(rate / per_user_rate)``.
The shape runs on the master in distributed mode, so the curve holds over all workers together.
"""

from __future__ import annotations

import math
from typing import Any

CURVES = ("constant", "ramp", "steps", "poisson", "spike")


def rate_at(arrival: dict[str, Any], t: float) -> float:
    """Instances/s of the curve at ``t`` seconds after the start (0 outside [0, duration_s))."""
    duration = float(arrival["duration_s"])
    if t < 0 or t >= duration:
        return 0.0
    curve = arrival["curve"]
    if curve in ("constant", "poisson"):
        return float(arrival["rate"])
    if curve == "ramp":
        s, e = float(arrival.get("start_rate") or 0.0), float(arrival["end_rate"])
        r = float(arrival.get("ramp_s") or 0.0)
        return e if r <= 0 or t >= r else s + (e - s) * t / r
    if curve == "steps":
        acc = 0.0
        for step in arrival["steps"]:
            if t < acc + float(step["duration_s"]):
                return float(step["rate"])
            acc += float(step["duration_s"])
        return 0.0
    if curve == "spike":
        at, d = float(arrival["spike_at_s"]), float(arrival["spike_duration_s"])
        return float(arrival["spike_rate"]) if at <= t < at + d else float(arrival.get("rate") or 0.0)
    raise ValueError(f"unknown arrival curve {curve!r}; expected one of {', '.join(CURVES)}")


def users_at(arrival: dict[str, Any], t: float) -> int:
    """Users needed at ``t`` so that users x per_user_rate follows the curve (0 after the end)."""
    r = rate_at(arrival, t)
    if r <= 0:
        return 0
    return max(1, round(r / float(arrival.get("per_user_rate") or 1.0)))


def expected_instances(arrival: dict[str, Any], dt: float = 0.1) -> float:
    """Area under the curve (what a load generator that keeps up submits)."""
    n = math.ceil(float(arrival["duration_s"]) / dt)
    return sum(rate_at(arrival, (i + 0.5) * dt) * dt for i in range(n))


def make_shape_class(get_arrival: Any) -> type:
    """A LoadTestShape subclass reading the arrival curve lazily (after Locust parsed its options)."""
    from locust import LoadTestShape

    class ArrivalShape(LoadTestShape):
        """Follows the scenario's arrival curve; stops the test at ``duration_s``."""

        use_common_options = False

        def tick(self) -> tuple[int, float] | None:
            arrival = get_arrival()
            t = self.get_run_time()
            if t >= float(arrival["duration_s"]):
                return None
            users = users_at(arrival, t)
            # users that are not needed right now are kept at zero rate by stopping them
            return users, max(float(users), 50.0)

    return ArrivalShape
