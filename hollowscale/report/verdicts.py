"""The verdicts of ``summary.json``: each SLO's value looked up in the measurements, met or not; the
jobs the run left unfinished or deadlocked; and whether the run passed, in one line every report shows.

A run passes when it is complete, every SLO is met and no job was left unfinished or deadlocked at its
end, unless the scenario opts out with its reason (``measurements.allow_unfinished``), which the verdict
then names.  ``summary.verdict`` holds the state (:data:`STATES`) and the line; ``hollowscale run``
exits with the state's code (``EXIT_CODES``: 0 passed, 1 an SLO failed, 2 incomplete, 3 every SLO met
but jobs left unfinished or deadlocked; 130 interrupted is the runner's own).

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

from hollowscale.report.numbers import number
from hollowscale.report.precision import bucket_text, of_metric
from hollowscale.scenario.model import SloSpec

SCHEMA_VERSION = 1
REQUIRED = ("schema_version", "scenario", "started_at", "duration_s", "cluster", "measurements", "slos", "passed")

#: a run's verdict (``summary.verdict.state``), worst last, and the exit code of each
PASSED, UNFINISHED, SLO_FAILED, INCOMPLETE = "passed", "unfinished", "slo_failed", "incomplete"
STATES = (PASSED, UNFINISHED, SLO_FAILED, INCOMPLETE)
EXIT_CODES = {PASSED: 0, SLO_FAILED: 1, INCOMPLETE: 2, UNFINISHED: 3}


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
        entry: dict[str, Any] = {
            "name": s.name,
            "metric": s.metric,
            "op": s.op,
            "threshold": s.threshold,
            "value": v,
            "passed": passed,
            "description": s.description or f"{s.metric} {s.op} {s.threshold:g}",
            "note": note,
        }
        quantile = of_metric(measurements, s.metric)
        if quantile is not None:
            entry["precision"], bucket = quantile
            if bucket is not None:
                entry["bucket"] = list(bucket)
                if v is not None and bucket[0] < s.threshold < (math.inf if bucket[1] is None else bucket[1]):
                    entry["note"] = "; ".join(filter(None, [note, (
                        f"the threshold lies inside the bucket {bucket_text(bucket)}: the true value may "
                        "be on either side of it")]))
        out.append(entry)
    return out


def unfinished_jobs(measurements: dict[str, Any], allowed: str | None = None) -> dict[str, Any] | None:
    """``summary.unfinished``: the jobs left unfinished or deadlocked at the end (None when none were counted).

    With batch figures a job is an instance (its Jobs, bare Pods and their pods together) and a deadlocked
    one is still partially started at the end, holding ``gpus_held``; otherwise a job is a workload object
    of the timeline (a Job or a bare Pod).  ``stuck``: any left; ``allowed``: the scenario's reason to
    accept that (``measurements.allow_unfinished``), or None.
    """
    inst = (measurements.get("batch") or {}).get("instances")
    if isinstance(inst, dict) and inst.get("total") is not None:
        dead = measurements["batch"].get("deadlocked_jobs") or {}
        out: dict[str, Any] = {"counted": "batch jobs (one job = its Jobs, bare Pods and their pods)",
                               "jobs": inst["total"], "unfinished": inst.get("unfinished") or 0,
                               "deadlocked": dead.get("count") or 0, "gpus_held": dead.get("gpus_held")}
    else:
        jobs = measurements.get("jobs")
        if not isinstance(jobs, dict) or jobs.get("submitted") is None:
            return None
        out = {"counted": "workload objects (Jobs and bare Pods)", "jobs": jobs["submitted"],
               "unfinished": jobs.get("unfinished") or 0, "deadlocked": None, "gpus_held": None}
    out["stuck"] = bool(out["unfinished"] or out["deadlocked"])
    out["allowed"] = allowed
    return out


def _count(v: Any) -> str:
    return number(v, 1, trim=True)


def left_text(u: dict[str, Any] | None) -> str:
    """``41 of 60 jobs unfinished (21 deadlocked holding 160 GPUs)``; "" when nothing was left."""
    if not u or not u.get("stuck"):
        return ""
    text = f"{_count(u['unfinished'])} of {_count(u['jobs'])} jobs unfinished"
    if u.get("deadlocked"):
        held = f" holding {_count(u['gpus_held'])} GPUs" if u.get("gpus_held") else ""
        text += f" ({_count(u['deadlocked'])} deadlocked{held})"
    return text


def state_of(summary: dict[str, Any]) -> str:
    """The verdict's state (:data:`STATES`), also for a summary written before ``verdict`` existed."""
    if not summary.get("complete", True):
        return INCOMPLETE
    if not summary.get("slos_passed", all(s.get("passed") for s in summary.get("slos") or [])):
        return SLO_FAILED
    u = _unfinished_of(summary)
    return UNFINISHED if u and u.get("stuck") and not u.get("allowed") else PASSED


def _unfinished_of(summary: dict[str, Any]) -> dict[str, Any] | None:
    if "unfinished" in summary:
        return summary["unfinished"]
    return unfinished_jobs(summary.get("measurements") or {})


def verdict_line(summary: dict[str, Any]) -> str:
    """The run's verdict in one line, as ``summary.md``, ``report.html`` and the comparison head it.

    ``PASSED``; ``PASSED SLOs, but 41 of 60 jobs unfinished (21 deadlocked holding 160 GPUs)``;
    ``PASSED (3 of 60 jobs unfinished; allowed by the scenario: <reason>)``; ``FAILED: SLO x missed``
    (and what was left); ``FAILED (INCOMPLETE: <reason>)``.
    """
    left = left_text(_unfinished_of(summary))
    state = state_of(summary)
    if state == INCOMPLETE:
        return f"FAILED (INCOMPLETE: {summary.get('incomplete_reason') or 'interrupted'})" + (f"; {left}" if left else "")
    if state == SLO_FAILED:
        missed = [str(s.get("name")) for s in summary.get("slos") or [] if not s.get("passed")]
        named = ", ".join(missed[:3]) + (f" and {len(missed) - 3} more" if len(missed) > 3 else "")
        return f"FAILED: SLO{'s' if len(missed) != 1 else ''} {named} missed" + (f"; {left}" if left else "")
    if state == UNFINISHED:
        return f"PASSED SLOs, but {left}"
    if left:
        return f"PASSED ({left}; allowed by the scenario: {(_unfinished_of(summary) or {}).get('allowed')})"
    return "PASSED"


def finalize(summary: dict[str, Any], slos: tuple[SloSpec, ...] | list[SloSpec],
             allow_unfinished: str | None = None) -> dict[str, Any]:
    """``summary`` with its verdicts: one per SLO, ``slos_passed``, ``unfinished`` (:func:`unfinished_jobs`;
    ``allow_unfinished``: the scenario's reason to accept jobs left at the end), ``passed`` (complete,
    every SLO met, no job left unless allowed) and ``verdict`` {``state``, ``line``}."""
    summary["schema_version"] = SCHEMA_VERSION
    summary["slos"] = evaluate_slos(slos, summary.get("measurements") or {})
    summary["slos_passed"] = all(s["passed"] for s in summary["slos"])
    summary["unfinished"] = unfinished_jobs(summary.get("measurements") or {}, allow_unfinished)
    state = state_of(summary) if summary.get("complete", False) else INCOMPLETE
    summary["passed"] = state == PASSED
    summary["verdict"] = {"state": state, "line": verdict_line(summary)}
    return summary
