"""The training-faults part of ``summary.md`` and ``report.html`` (``summary["measurements"]["training"]``):
how long the jobs took to recover from each fault, what the faults wasted, and the effective training time
ratio; beside them the figures other parts computed that say what bound the recovery.  A run without the
feature gets no section.
"""

from __future__ import annotations

import html
from typing import Any

from hollowscale.report.html import table
from hollowscale.report.numbers import number

TITLE = "Training jobs through failures"
#: how many fault rows the report lists (summary.json keeps them all)
LISTED = 20

#: figures of other parts of the summary that the section shows beside these (path in ``measurements``)
RELATED: dict[str, str] = {
    "binding_limit": "attribution.binding",
    "jobs_completed_per_hour": "batch.jobs_completed_per_hour",
    "scheduler_attempt_ms_p99": "scheduler.attempt_duration_ms.p99",
}


def _f(v: Any, nd: int = 2) -> str:
    return number(v, nd, group_ints=False)


def _pq(d: dict[str, Any] | None) -> str:
    d = d or {}
    return f"{_f(d.get('p50'), 1)} / {_f(d.get('p99'), 1)} / {_f(d.get('max'), 1)} (n={d.get('count', 0)})"


def _dotted(d: Any, path: str) -> Any:
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) rows of the section; empty without ``measurements.training``."""
    measurements = summary.get("measurements") or {}
    m = measurements.get("training")
    if not m:
        return []
    s = m.get("summary") or {}
    out = [("faults fired / rows hitting a job", f"{s.get('faults_fired')} / {s.get('faults_hitting_jobs')}"),
           ("until the controller reacts, s: p50 / p99 / max", _pq(s.get("reaction_s"))),
           ("until the job runs whole again, s: p50 / p99 / max", _pq(s.get("recovered_s"))),
           ("faults the job never recovered from", _f(s.get("unrecovered"), 0)),
           ("restarts (attempts after the first) / jobs failed for good",
            f"{_f(s.get('restarts'), 0)} / {_f(s.get('jobs_failed_for_good'), 0)}"),
           ("GPU-hours wasted by the faults (held while incomplete + work lost)", _f(s.get("wasted_gpu_hours"), 3)),
           ("GPU-hours of work lost since the last checkpoint", _f(s.get("lost_work_gpu_hours"), 3)),
           ("effective training time ratio (productive / held GPU-time)", _f(s.get("ettr"), 3)),
           ("productive / held GPU-hours", f"{_f(s.get('productive_gpu_hours'), 3)} / "
                                           f"{_f(s.get('held_gpu_hours'), 3)}"),
           ("checkpoint interval per workload, s", ", ".join(f"{k} {_f(v, 0)}" for k, v in
                                                               (m.get("checkpoint_s") or {}).items()) or "none")]
    for name, path in (m.get("related") or {}).items():
        value = _dotted(measurements, path)
        if value is not None:
            out.append((name.replace("_", " "), str(value) if isinstance(value, str) else _f(value)))
    return out


def fault_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The first :data:`LISTED` (fault, job) rows: when, what, which job, and its figures."""
    m = (summary.get("measurements") or {}).get("training") or {}
    out = []
    for r in (m.get("faults") or [])[:LISTED]:
        out.append([_f(r.get("at_s"), 1), str(r.get("type")), str(r.get("instance")), _f(r.get("reaction_s"), 1),
                    _f(r.get("recovered_s"), 1), _f(r.get("lost_work_s"), 1), _f(r.get("wasted_gpu_s"), 0)])
    return out


HEADERS = ["at s", "fault", "job", "reacted s", "whole again s", "work lost s", "GPU-s wasted"]


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    table = rows(summary)
    if not table:
        return []
    out = ["", f"## {TITLE}", "", "| figure | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in table]]
    listed = fault_rows(summary)
    if listed:
        out += ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS),
                *["| " + " | ".join(r) + " |" for r in listed]]
    return out


def html_parts(summary: dict[str, Any]) -> list[str]:
    rows_ = rows(summary)
    if not rows_:
        return []
    parts = [f"<h2>{html.escape(TITLE)}</h2>", table(["figure", "value"], [[html.escape(c) for c in r] for r in rows_])]
    listed = fault_rows(summary)
    if listed:
        parts.append(table(HEADERS, [[html.escape(c) for c in r] for r in listed]))
    return parts


class TrainingSection:
    """This section as the report takes it (:class:`hollowscale.report.sections.ReportSection`)."""

    def markdown(self, summary: dict[str, Any]) -> list[str]:
        return markdown_lines(summary)

    def html(self, summary: dict[str, Any]) -> list[str]:
        return html_parts(summary)
