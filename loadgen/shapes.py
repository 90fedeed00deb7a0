"""The Locust shape that follows a spec's arrival curve.

The curve itself (``rate(t)``, users, expected instances) is :class:`loadgen.spec.ArrivalSpec`'s; this
module only turns it into Locust's user count.  Each user submits ``per_user_rate`` instances/s
(constant-throughput pacing, or exponential gaps for ``poisson`` so the superposed stream is a
Poisson process), so ``users = round(rate / per_user_rate)`` (:meth:`ArrivalSpec.users_at`).  The shape
runs on the master in distributed mode, so the curve holds over all workers together.
"""

from __future__ import annotations

from collections.abc import Callable

from loadgen.spec import ArrivalSpec

#: users started per second when the count goes up (high: the curve, not a ramp-up, sets the pace)
SPAWN_RATE_MIN = 50.0


def shape_tick(arrival: ArrivalSpec, t: float) -> tuple[int, float] | None:
    """Locust's ``tick()`` at ``t`` seconds: ``(users, spawn rate)``, or None to end the test."""
    if t >= arrival.duration_s:
        return None
    users = arrival.users_at(t)
    # users that are not needed right now are stopped, so they submit nothing
    return users, max(float(users), SPAWN_RATE_MIN)


def make_shape_class(get_arrival: Callable[[], ArrivalSpec]) -> type:
    """A LoadTestShape subclass reading the arrival curve lazily (after Locust parsed its options)."""
    from locust import LoadTestShape

    class ArrivalShape(LoadTestShape):
        """Follows the spec's arrival curve; stops the test at ``duration_s``."""

        use_common_options = False

        def tick(self) -> tuple[int, float] | None:
            return shape_tick(get_arrival(), self.get_run_time())

    return ArrivalShape
