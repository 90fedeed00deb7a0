"""The moments of a run that its figures are cut by (epoch seconds), set as the phases reach them.

``start`` when the runner is made; ``prom_start`` when Prometheus is up; ``window_start`` after the
Ready barrier (the measurement window); ``load_start``/``load_end`` around the arrival curve; ``end``
when the workload settled.  A capacity plan watches ``load_start``/``load_end`` from its own thread
(:class:`hollowscale.plan.scrape.WindowWatch`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunTimes:
    start: float
    prom_start: float | None = None
    window_start: float | None = None
    load_start: float | None = None
    load_end: float | None = None
    end: float | None = None
