"""The moments of a run that its figures are cut by (epoch seconds), set as the phases reach them.

``start`` when the runner is made; ``cluster_ready`` once the cluster is up (made, reused or reached) and
the features prepared; ``prom_start`` when Prometheus is up; ``window_start`` after the Ready barrier
(the measurement window); ``load_start``/``load_end`` around the arrival curve; ``end`` when the workload
settled.  A capacity plan watches ``load_start``/``load_end`` from its own thread
(:class:`hollowscale.plan.scrape.WindowWatch`).
"""

from __future__ import annotations

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
