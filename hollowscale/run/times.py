"""The moments of a run that its figures are cut by (epoch seconds), set as the phases reach them.

``start`` when the runner is made; ``cluster_ready`` once the cluster is up (made, reused or reached) and
the features prepared; ``prom_start`` when Prometheus is up; ``window_start`` after the Ready barrier
(the measurement window); ``load_start``/``load_end`` around the arrival curve; ``end`` when the workload
settled.  A capacity plan watches ``load_start``/``load_end`` from its own thread
(:class:`hollowscale.plan.scrape.WindowWatch`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class RunTimes:
    start: float
    cluster_ready: float | None = None
    prom_start: float | None = None
    window_start: float | None = None
    load_start: float | None = None
    load_end: float | None = None
    end: float | None = None

    def run_deadline(self, timeout_s: float) -> float:
        """When the scenario's ``timeout_s`` runs out: counted from ``cluster_ready`` (``start`` before it).

        Making the cluster is not part of what a scenario measures, and its cost varies by minutes with the
        machine's caches: a first kind run on a fresh machine builds the node image and kind itself (218 s
        here against 40 s warm). Counted from the start, that build spent the smoke scenario's 240 s
        before its load had ended, the settle was skipped, and the jobs created in the load's last seconds
        were reported unfinished although each finished within 5 s (issue 34)."""
        return (self.cluster_ready if self.cluster_ready is not None else self.start) + timeout_s


@dataclass(frozen=True)
class SettleWindow:
    """How long the settle waits for the workload to finish: ``settle_s`` after the load ended, and never
    past the run's deadline (:meth:`RunTimes.run_deadline`). When jobs are left, :meth:`unfinished` says
    which of the two ran out, so that a settle the scenario's limit cut short is not read as jobs that
    did not finish in their window."""

    settle_s: float
    timeout_s: float
    opened: float  # time.monotonic() when the load ended
    run_deadline: float  # epoch seconds

    @classmethod
    def after_load(cls, times: RunTimes, settle_s: float, timeout_s: float) -> SettleWindow:
        """The window that opens now, as the load ends."""
        return cls(settle_s, timeout_s, time.monotonic(), times.run_deadline(timeout_s))

    def is_open(self) -> bool:
        """Whether the settle may still wait."""
        return time.monotonic() < self.opened + self.settle_s and time.time() < self.run_deadline

    def unfinished(self, left: int, jobs: int, waited_s: float) -> str:
        """The run's error line for ``left`` of ``jobs`` workload objects unfinished after ``waited_s``."""
        what = f"{left} of {jobs} workload objects unfinished"
        if waited_s >= self.settle_s:
            return f"settle timeout: {what} {self.settle_s:g} s after the load ended (measurements.settle_timeout_s)"
        return (f"settle cut short: {what} when the scenario's timeout_s ({self.timeout_s:g} s from the cluster's "
                f"readiness) ran out {waited_s:.0f} s into the settle")
