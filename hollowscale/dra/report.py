"""The DRA part of ``summary.md`` and ``report.html`` (``summary["measurements"]["dra"]``, ``dra_scheduler``
and the series ``summary["dra_series"]``): the claims' latency steps, GPUs and GPU memory allocated, pods per
shared GPU, fragmentation, unschedulable reasons, what the DynamicResources plugin cost the scheduler, and
per role the most pods that ran at once and their wait."""

from __future__ import annotations

import html
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hollowscale.report.html import svg
from hollowscale.report.numbers import number


def _f(v: Any, nd: int = 2) -> str:
    return number(v, nd, group_ints=False)


def _q(d: dict[str, Any] | None) -> str:
    d = d or {}
    return f"{_f(d.get('p50'), 0)} / {_f(d.get('p90'), 0)} / {_f(d.get('p99'), 0)} (n={d.get('count', 0)})"


def rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) rows of the section; empty without DRA figures."""
    m = summary.get("measurements") or {}
    d = m.get("dra")
    if not d:
        return []
    c = d.get("claims") or {}
    lat = d.get("latency_ms") or {}
    integ = d.get("integrity") or {}
    mode = d.get("mode") or {}
    out = [
        ("GPU mode (variant) / pools expose", f"{mode.get('gpus')} (sharing {mode.get('gpu_sharing')}) / "
                                              f"{', '.join(mode.get('pools_expose') or []) or 'no GPUs'}"),
        ("claims: total / allocated / never allocated", f"{c.get('total')} / {c.get('allocated')} / "
                                                         f"{c.get('never_allocated')}"),
        ("claims by source", ", ".join(f"{k} {v}" for k, v in (c.get("by_source") or {}).items()) or "none"),
        ("claim created -> allocated ms p50/p90/p99", _q(lat.get("created_to_allocated"))),
        ("allocated -> reserved ms p50/p90/p99", _q(lat.get("allocated_to_reserved"))),
        ("reserved -> pod running ms p50/p90/p99", _q(lat.get("reserved_to_running"))),
        ("claim created -> pod running ms p50/p90/p99", _q(lat.get("created_to_running"))),
        ("GPUs allocated avg / max", f"{_f((d.get('gpus_allocated') or {}).get('avg'))} / "
                                     f"{_f((d.get('gpus_allocated') or {}).get('max'), 0)}"),
        ("GPU memory allocated GiB avg / max", f"{_f((d.get('gpu_memory_allocated_gib') or {}).get('avg'))} / "
                                               f"{_f((d.get('gpu_memory_allocated_gib') or {}).get('max'))}"),
        ("pods per busy GPU avg / max", f"{_f((d.get('pods_per_gpu') or {}).get('avg'))} / "
                                        f"{_f((d.get('pods_per_gpu') or {}).get('max'), 0)}"),
        ("fragmented GPUs (free memory no pending request fits) avg / max",
         f"{_f((d.get('fragmented_gpus') or {}).get('avg'))} / {_f((d.get('fragmented_gpus') or {}).get('max'), 0)}"),
        ("integrity: allocated in the apiserver at the end / not in the timeline / left allocated after its pods",
         f"{integ.get('allocated_in_apiserver')} / {integ.get('not_in_timeline')} / "
         f"{integ.get('left_allocated_after_pods_ended')}"),
        ("wait for the resourceclaim controller to release claims of ended pods (s)", _f(d.get("release_wait_s"))),
    ]
    s = m.get("dra_scheduler") or {}
    if s:
        out += [
            ("scheduler: pods scheduled / throughput (pods/s)", f"{_f(s.get('pods_scheduled'), 0)} / "
                                                               f"{_f(s.get('throughput_pods_per_s'))}"),
            ("DynamicResources share of all plugins' time, Filter apart / of Filter (%, sampled cycles)",
             f"{_f(s.get('share_of_all_plugins_pct'))} / {_f(s.get('filter_share_of_all_plugins_filter_pct'))}"),
            (f"DynamicResources time / scheduling-attempt wall time, Filter apart (%, estimated x"
             f"{_f(s.get('sampling_scale'))})", _f(s.get("plugin_share_of_attempt_time_pct"))),
            ("DynamicResources Filter CPU / algorithm wall time (%, estimated; Filter runs in parallel)",
             _f(s.get("filter_cpu_per_algorithm_wall_pct"))),
            ("DynamicResources PreBind ms per scheduled pod (estimated; the claim's status write)",
             _f(1000 * ((s.get("plugin_by_extension_point") or {}).get("PreBind") or {}).get("seconds_estimated", 0)
                / s["pods_scheduled"] if s.get("pods_scheduled") else None, 1)),
            ("DynamicResources ms per scheduled pod (estimated)", _f(s.get("plugin_ms_per_scheduled_pod_estimated"), 3)),
            ("pods unschedulable for DynamicResources, max", _f(s.get("unschedulable_pods_max"), 0)),
        ]
    for reason, n in (d.get("unschedulable_reasons") or {}).items():
        out.append((f"pending at the end ({n} pods)", reason))
    for role, r in (d.get("roles") or {}).items():
        w = r.get("wait_s") or {}
        out.append((f"{role}: most running at once / wait s p50, p99", f"{r.get('running_max')} / {_f(w.get('p50'))}, "
                                                                      f"{_f(w.get('p99'))} (never ran {r.get('never_ran')})"))
    return out


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    table = rows(summary)
    if not table:
        return []
    return ["", "## GPUs as DRA devices", "", "| figure | value |", "|---|---|",
            *[f"| {k} | {v} |" for k, v in table], ""]


def plot_svg(series: dict[str, Any]) -> str | None:
    """GPUs allocated and GPU memory over time, fragmented GPUs; None without data."""
    t = series.get("t_s") or []
    if not t:
        return None
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.step(t, series.get("gpus_allocated") or [], where="post", color="tab:blue", lw=1.2, label="GPUs allocated")
    ax.step(t, series.get("fragmented_gpus") or [], where="post", color="tab:red", lw=1, label="fragmented GPUs")
    ax.set_xlabel("s since the load started")
    ax.set_ylabel("GPUs")
    ax2 = ax.twinx()
    ax2.plot(t, series.get("memory_allocated_gib") or [], color="tab:green", lw=1, ls="--", label="GPU memory GiB")
    ax2.set_ylabel("GiB")
    ax2.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper left", fontsize=7)
    return svg(fig)


def html_parts(summary: dict[str, Any]) -> list[str]:
    table = rows(summary)
    if not table:
        return []
    parts = ["<h2>GPUs as DRA devices</h2>", "<table><tr><th>figure</th><th>value</th></tr>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in table) + "</table>"]
    plot = plot_svg(summary.get("dra_series") or {})
    if plot:
        parts.append("<figure class='plot' id='plot-dra'><figcaption><b>GPUs and GPU memory allocated, fragmented "
                     "GPUs</b> - source: the claim timeline (allocation intervals, consumedCapacity) and the pools' "
                     f"devices</figcaption>{plot}</figure>")
    return parts


class DraSection:
    """This section as the report takes it (:class:`hollowscale.report.sections.ReportSection`)."""

    def markdown(self, summary: dict[str, Any]) -> list[str]:
        return markdown_lines(summary)

    def html(self, summary: dict[str, Any]) -> list[str]:
        return html_parts(summary)
