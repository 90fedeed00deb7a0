"""How precise each quantile of the report is, and how it is written: exact or bucketed.

Two kinds of quantile reach a report.  **Exact** ones come from the watch timeline
(:mod:`hollowscale.measure.timeline`, :mod:`hollowscale.measure.derive`): a nearest-rank percentile over
every sample, each stamped with the client's receive time.  **Bucketed** ones are read from a Prometheus
histogram (:mod:`hollowscale.measure.prom`): ``histogram_quantile`` finds the bucket the rank falls in and
interpolates linearly inside it, so the true value lies anywhere in that bucket (every API verb at
"p50 25.02 ms, p99 49.55 ms" is the 25-50 ms bucket, not two measurements).  ``summary.json`` marks
each quantile figure ``source: exact|bucketed`` and carries ``p99_bucket: [lower, upper]`` beside a
bucketed ``p99`` (upper null: the ``+Inf`` bucket); summaries written before that are classified by
where their figures come from.
"""

from __future__ import annotations

import re
from typing import Any

from hollowscale.measure.prom import BUCKETED, EXACT
from hollowscale.report.numbers import number

#: the legend every report shows beside its quantiles
LEGEND = {
    EXACT: "nearest-rank percentile over every sample of the watch timeline (client receive times): the value "
           "is one that was observed",
    BUCKETED: "read from a Prometheus histogram: histogram_quantile interpolates inside the bucket the rank "
              "falls in, so the true value lies anywhere in the bucket shown",
}
#: figures of ``measurements`` that come from Prometheus histograms (for summaries without ``source``)
_FROM_HISTOGRAMS = ("api_latency_ms", "api_latency_slo_ms", "scheduler", "batch_prometheus")
_QUANTILE = re.compile(r"^p\d+$")


def is_quantile(metric: str) -> bool:
    """Whether the dotted ``metric`` names a quantile (its leaf is ``p50``, ``p99``, ...)."""
    return bool(_QUANTILE.match(metric.rsplit(".", 1)[-1]))


def precision_of(fig: dict[str, Any] | None, path: str = "") -> str:
    """``exact`` or ``bucketed`` for a figure holding quantiles (``path``: where it sits in
    ``measurements``, which decides for a summary written before figures carried ``source``)."""
    source = (fig or {}).get("source")
    if source in (EXACT, BUCKETED):
        return str(source)
    return BUCKETED if path.split(".", 1)[0] in _FROM_HISTOGRAMS else EXACT


def bucket_of(fig: dict[str, Any] | None, leaf: str) -> tuple[float, float | None] | None:
    """The bucket [lower, upper] (upper None: ``+Inf``) a bucketed ``leaf`` of ``fig`` was interpolated in."""
    b = (fig or {}).get(f"{leaf}_bucket")
    if isinstance(b, list | tuple) and len(b) == 2 and isinstance(b[0], int | float):
        return float(b[0]), None if b[1] is None else float(b[1])
    return None


def bucket_text(bucket: tuple[float, float | None] | None, unit: str = "") -> str:
    """``25–50 ms``, ``60,000–+Inf ms``; ``not recorded`` for a summary written before buckets were."""
    if bucket is None:
        return "not recorded"
    lo, hi = bucket
    tail = f" {unit}" if unit else ""
    return f"{number(lo, 3, trim=True)}–{'+Inf' if hi is None else number(hi, 3, trim=True)}{tail}"


def quantile_text(fig: dict[str, Any] | None, leaf: str, nd: int = 1, unit: str = "", path: str = "") -> str:
    """A quantile as a report writes it: ``49.55 ms (bucket 25–50 ms)`` when bucketed, ``59.4 ms (exact)``."""
    v = (fig or {}).get(leaf)
    if v is None:
        return number(None)
    value = number(v, nd) + (f" {unit}" if unit else "")
    if precision_of(fig, path) == BUCKETED:
        return f"{value} (bucket {bucket_text(bucket_of(fig, leaf), unit)})"
    return f"{value} (exact)"


def of_metric(measurements: dict[str, Any], metric: str) -> tuple[str, tuple[float, float | None] | None] | None:
    """(precision, bucket) of the quantile at dotted ``metric`` of ``measurements``; None when it is not one."""
    if not is_quantile(metric):
        return None
    parent, leaf = metric.rsplit(".", 1)
    node: Any = measurements
    for part in parent.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    fig = node if isinstance(node, dict) else None
    kind = precision_of(fig, parent)
    return kind, bucket_of(fig, leaf) if kind == BUCKETED else None


def slo_precision(slo: dict[str, Any], measurements: dict[str, Any]) -> tuple[str | None, tuple[float, float | None] | None]:
    """(precision, bucket) of an SLO verdict's value: as the verdict recorded it, else from ``measurements``
    (a summary written before verdicts carried it); (None, None) when the SLO does not name a quantile."""
    if slo.get("precision") in (EXACT, BUCKETED):
        b = slo.get("bucket")
        return str(slo["precision"]), (float(b[0]), None if b[1] is None else float(b[1])) if b else None
    found = of_metric(measurements, str(slo.get("metric", "")))
    return (None, None) if found is None else found


def slo_value_text(slo: dict[str, Any], measurements: dict[str, Any]) -> str:
    """An SLO verdict's value as a report writes it: ``158.7 (bucket 100–200)``, ``210.4 (exact)``, ``0.0``."""
    kind, bucket = slo_precision(slo, measurements)
    value = number(slo.get("value"))
    if kind is None or slo.get("value") is None:
        return value
    return f"{value} ({'bucket ' + bucket_text(bucket) if kind == BUCKETED else kind})"


def api_rows(measurements: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(name, figure, path) of the API latency rows every report shows: each verb, then each SLO group."""
    rows = [(verb, v, "api_latency_ms") for verb, v in sorted((measurements.get("api_latency_ms") or {}).items())
            if isinstance(v, dict)]
    return rows + [(f"SLO group {g}", v, "api_latency_slo_ms")
                   for g, v in (measurements.get("api_latency_slo_ms") or {}).items() if isinstance(v, dict)]
