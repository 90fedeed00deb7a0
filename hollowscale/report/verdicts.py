"""The SLO verdicts of ``summary.json``: each SLO's value looked up in the measurements, met or not,
and whether the run passed.

``summary.json`` itself is assembled from what a run observed by :func:`hollowscale.run.summary.assemble`;
:func:`finalize` adds what this module decides (``slos``, ``passed``, ``schema_version``).  Fields every
summary has (``docs/architecture.md``, "Contracts"): ``schema_version``, ``scenario``, ``started_at``,
``duration_s``, ``cluster`` {``backend``, ``kubernetes_version``, ``nodes_ready``, ``gpus_total``},
``measurements`` {``pod_startup_latency_ms``, ``scheduling_throughput_pods_per_s``, ``api_latency_ms``,
``jobs``}, ``slos``, ``passed``.  Everything else is additive.
"""

from __future__ import annotations

import math
from typing import Any

from hollowscale.scenario.model import SloSpec

SCHEMA_VERSION = 1
REQUIRED = ("schema_version", "scenario", "started_at", "duration_s", "cluster", "measurements", "slos", "passed")


def lookup(measurements: dict[str, Any], metric: str) -> float | None:
    """Value at a dotted path of ``measurements`` (None when absent or not a number)."""
    node: Any = measurements
    for part in metric.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return None if isinstance(node, float) and math.isnan(node) else float(node)


def evaluate_slos(slos: tuple[SloSpec, ...] | list[SloSpec], measurements: dict[str, Any]) -> list[dict[str, Any]]:
    """One verdict per SLO; a missing value fails (no data is not a pass)."""
    out = []
    for s in slos:
        v = lookup(measurements, s.metric)
        passed = s.check(v)
        note = ""
        if v is None:
            # a latency percentile over zero requests: met vacuously, and said so; any other gap fails
            parent = s.metric.rsplit(".", 1)[0]
            samples = lookup(measurements, f"{parent}.count")
            if samples == 0 and s.op in ("<=", "<") and parent.startswith("api_latency"):
                passed, note = True, "not exercised: 0 requests of this kind in the window (vacuously met)"
            else:
                note = "no data for this metric in the run"
        out.append({
            "name": s.name,
            "metric": s.metric,
            "op": s.op,
            "threshold": s.threshold,
            "value": v,
            "passed": passed,
            "description": s.description or f"{s.metric} {s.op} {s.threshold:g}",
            "note": note,
        })
    return out


def finalize(summary: dict[str, Any], slos: tuple[SloSpec, ...] | list[SloSpec]) -> dict[str, Any]:
    """``summary`` with its verdicts: one per SLO, and ``passed`` (complete and every SLO met)."""
    summary["schema_version"] = SCHEMA_VERSION
    summary["slos"] = evaluate_slos(slos, summary.get("measurements") or {})
    summary["passed"] = bool(summary.get("complete", False)) and all(s["passed"] for s in summary["slos"])
    return summary
