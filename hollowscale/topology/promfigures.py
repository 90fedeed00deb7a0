"""What placing gangs by topology cost Kueue, from its own metrics in the run's Prometheus.

``kueue_admission_attempt_duration_seconds{result}`` (``sigs.k8s.io/kueue@v0.17.0/pkg/metrics/metrics.go``,
a histogram observed once per admission cycle: ``success`` when it admitted a workload, ``inadmissible``
when none fit; topology-aware scheduling runs inside that cycle, so its cost shows here), p50/p99 over
the window, overall and by result, each with the bucket it was interpolated in
(:func:`hollowscale.measure.prom.mark_bucketed`), and the cycles counted.  The scheduler's own cycle
(``scheduler_scheduling_attempt_duration_seconds``) is already in ``measurements.scheduler`` (from
:meth:`hollowscale.measure.prom.PromQueries.scheduler`): the summary refers to it, it is not queried again.
"""

from __future__ import annotations

import math
from typing import Any

from hollowscale.measure.prom import PromQueries, as_number, histogram_quantiles

KUEUE_ADMISSION_ATTEMPT = "kueue_admission_attempt_duration_seconds"


def admission_attempts(pq: PromQueries, start: float, end: float) -> dict[str, Any]:
    """``measurements.topology.kueue_admission_attempt_ms`` over [start, end] (epoch s)."""
    w = f"{max(1, math.ceil(end - start))}s"
    out = histogram_quantiles(pq, KUEUE_ADMISSION_ATTEMPT, start, end, "Kueue admission attempt", by="result",
                              scale=1000.0)
    out.setdefault("by_result", {})
    query = f"sum by (result) (increase({KUEUE_ADMISSION_ATTEMPT}_count[{w}]))"
    out["queries"]["cycles"] = query
    out["cycles"] = {s["metric"].get("result", ""): round(as_number(s["value"][1]) or 0.0, 1)
                     for s in pq.instant(query, end, "Kueue admission cycles by result")}
    return out
