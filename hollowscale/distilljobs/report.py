"""The report's section per real distillation job (``summary["distill_jobs"]``), Markdown and HTML.

One plot per job: the student's samples/s over the load's time axis, the teacher count (ready
endpoints) on a second axis, and a line at each teacher fault, so a reader sees a killed teacher's
dip and a scale-up's recovery where they happened.
"""

from __future__ import annotations

import html
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hollowscale.report.html import svg
from hollowscale.report.numbers import number


def _f(v: Any, nd: int = 2) -> str:
    """A figure of the section: two decimals unless told, whole numbers as they are."""
    return number(v, nd, group_ints=False)


def _rows(j: dict[str, Any]) -> list[tuple[str, str]]:
    d = j.get("scheduling_delay_s") or {}
    ref = j.get("bench") or {}
    kills = [e for e in j.get("events") or [] if e.get("event") == "teacher-kill"]
    scales = [e for e in j.get("events") or [] if e.get("event") == "teacher-scale"]
    bench = (f"{_f(ref.get('seed_accuracy'), 4)} (seed {j['settings']['seed']}; seeds' spread "
             f"{_f((ref.get('spread') or 0) * 100, 2)} points; {ref.get('file')}, {ref.get('date')})") if ref else \
        "no bench run with these settings"
    return [
        ("result", "passed" if j.get("passed") else "FAILED: " + "; ".join(j.get("problems") or [])),
        ("student pod / node / phase", f"{j.get('student_pod')} / {j.get('student_node')} / {j.get('student_phase')}"),
        ("scheduling delay, student (Job created -> pod scheduled; API timestamps, 1 s resolution) s",
         _f(d.get("student_from_job_create"))),
        ("student pod created -> running s", _f(d.get("student_pod_to_running"))),
        ("scheduling delay, teachers median / max s", f"{_f(d.get('teachers_median'))} / {_f(d.get('teachers_max'))}"),
        ("teacher pods seen (incl. replacements)", str(len(j.get("teacher_pods") or []))),
        ("training s / samples/s", f"{_f(j.get('training_s'), 1)} / {_f(j.get('samples_per_s'), 1)}"),
        ("test accuracy", _f(j.get("test_accuracy"), 4)),
        ("standalone bench, same settings", bench),
        ("gap to the bench (points)", _f(j.get("accuracy_gap_pts"))),
        ("lost / duplicate samples", f"{j.get('lost_samples')} / {j.get('duplicate_samples')}"),
        ("teacher faults", "; ".join([f"kill {e.get('pod')} at {_f(e.get('t'), 1)} s" for e in kills]
                                     + [f"scale to {e.get('replicas')} at {_f(e.get('t'), 1)} s" for e in scales]) or "none"),
    ]


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    jobs = summary.get("distill_jobs") or []
    if not jobs:
        return []
    lines = ["", "## Real distillation jobs (on real nodes)", ""]
    for j in jobs:
        lines += [f"### `{j['name']}`", "", "| figure | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in _rows(j)]
        lines.append("")
    return lines


def plot_svg(j: dict[str, Any]) -> str | None:
    """samples/s and teacher count over time, faults marked; None without data."""
    rate = j.get("samples_per_s_series") or []
    teachers = j.get("teacher_series") or []
    if not rate and not teachers:
        return None
    fig, ax = plt.subplots(figsize=(8, 3))
    if rate:
        ax.plot([t for t, _ in rate], [v for _, v in rate], color="tab:blue", lw=1.2, label="student samples/s")
    ax.set_xlabel("s since the load started")
    ax.set_ylabel("samples/s")
    ax2 = ax.twinx()
    if teachers:
        ax2.step([t for t, _, _ in teachers], [r for _, r, _ in teachers], where="post", color="tab:green", lw=1,
                 label="teachers ready (EndpointSlices)")
        ax2.step([t for t, _, _ in teachers], [p for _, _, p in teachers], where="post", color="tab:gray", lw=0.8,
                 ls=":", label="teacher pods")
    ax2.set_ylabel("teachers")
    ax2.set_ylim(bottom=0)
    for e in j.get("events") or []:
        if e.get("event") in ("teacher-kill", "teacher-scale"):
            ax.axvline(e["t"], color="red" if e["event"] == "teacher-kill" else "purple", lw=0.8, ls="--")
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="lower left", fontsize=7)
    return svg(fig)


def html_parts(summary: dict[str, Any]) -> list[str]:
    jobs = summary.get("distill_jobs") or []
    if not jobs:
        return []
    parts = ["<h2>Real distillation jobs (on real nodes)</h2>"]
    for j in jobs:
        parts.append(f"<h3>{html.escape(j['name'])}</h3>")
        parts.append("<table><tr><th>figure</th><th>value</th></tr>" + "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _rows(j)) + "</table>")
        svg = plot_svg(j)
        if svg:
            parts.append(f"<figure class='plot' id='plot-distill-{html.escape(j['name'])}'><figcaption><b>Student "
                         "throughput and teachers</b> - source: the student's progress lines (pods/log), the "
                         "teacher Service's EndpointSlices sampled each second; red: teacher killed, purple: "
                         f"teachers scaled</figcaption>{svg}</figure>")
    return parts


class DistillJobsSection:
    """This section as the report takes it (:class:`hollowscale.report.sections.ReportSection`): the
    report's floor renders what every run has and asks each feature of the run for its own part."""

    def markdown(self, summary: dict[str, Any]) -> list[str]:
        return markdown_lines(summary)

    def html(self, summary: dict[str, Any]) -> list[str]:
        return html_parts(summary)
