"""The placement part of ``summary.md`` and ``report.html`` (``summary["measurements"]["topology"]`` and the
series ``summary["topology_series"]``): where the gangs landed, the share inside one domain of each level,
the GPU-hours lost to spread, fragmentation, how long gangs waited for Kueue and the scheduler, and beside
them the figures other parts already computed (jobs per hour, GPU allocation, the batch steps, the
scheduler's cycle, the binding limit), read from where they are.  A run without topology levels gets no
section.
"""

from __future__ import annotations

import html
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from hollowscale.report.html import svg
from hollowscale.report.numbers import number
from hollowscale.report.precision import quantile_text
from hollowscale.report.verdicts import lookup
from hollowscale.topology.throughput import REASONS

TITLE = "Topology: placement quality"

#: figures of other parts of the summary that the section shows beside these (path in ``measurements``;
#: ``measurements.topology.related`` says the same in the summary)
RELATED: dict[str, str] = {
    "jobs_completed_per_hour": "batch.jobs_completed_per_hour",
    "gpu_allocation_avg_pct": "gpu_allocation_pct.avg",
    "created_to_admitted_s_p50": "batch.job_steps_s.created_to_admitted.p50",
    "created_to_admitted_s_p99": "batch.job_steps_s.created_to_admitted.p99",
    "admitted_to_all_bound_s_p50": "batch.job_steps_s.admitted_to_all_bound.p50",
    "admitted_to_all_bound_s_p99": "batch.job_steps_s.admitted_to_all_bound.p99",
    "scheduler_attempt_ms_p50": "scheduler.attempt_duration_ms.p50",
    "scheduler_attempt_ms_p99": "scheduler.attempt_duration_ms.p99",
    "scheduler_unschedulable_attempts": "scheduler.attempts_by_result.unschedulable",
    "podgroup_attempt_ms_p50": "batch_prometheus.scheduler.podgroup_attempt_duration_ms.p50",
    "podgroup_attempt_ms_p99": "batch_prometheus.scheduler.podgroup_attempt_duration_ms.p99",
    "binding_limit": "attribution.binding",
}


def _f(v: Any, nd: int = 2) -> str:
    return number(v, nd, group_ints=False)


def _pq(d: dict[str, Any] | None, nd: int = 1) -> str:
    """``p50 / p99 (n=count)`` of an exact quantile figure."""
    d = d or {}
    return f"{_f(d.get('p50'), nd)} / {_f(d.get('p99'), nd)} (n={d.get('count', 0)})"


def _stats(d: dict[str, Any] | None) -> str:
    d = d or {}
    return f"{_f(d.get('avg'))} / {_f(d.get('min'), 0)} / {_f(d.get('max'), 0)}"


def rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) rows of the section; empty without topology figures."""
    m = summary.get("measurements") or {}
    t = m.get("topology")
    if not t:
        return []
    pl = t.get("placement") or {}
    sp = t.get("spread") or {}
    fr = t.get("fragmentation") or {}
    ad = t.get("admission") or {}
    names = t.get("levels") or []
    out = [
        ("levels (coarse to fine) / the variant's topology", f"{' > '.join(names) or 'none'} / "
                                                            f"{t.get('variant_topology') or 'as written'}"),
        ("gangs: seen / placed (every pod bound)", f"{pl.get('gangs')} / {pl.get('placed')}"),
        ("placed gangs by the level that holds them", ", ".join(f"{k} {v}" for k, v in
                                                               (pl.get("by_level") or {}).items()) or "none"),
    ]
    for name in names:
        d = (pl.get("domains_spanned") or {}).get(name) or {}
        out.append((f"gangs inside one {name} (%) / {name}s spanned p50, max",
                    f"{_f((pl.get('within_one_domain_pct') or {}).get(name), 1)} / {_f(d.get('p50'), 0)}, "
                    f"{_f(d.get('max'), 0)}"))
    if pl.get("sliced_gangs"):
        out.append(("gangs whose Kueue slices are whole, each in one slice-level domain (%) / of gangs with slices",
                    f"{_f(pl.get('slices_whole_pct'), 1)} / {pl.get('sliced_gangs')}"))
    if pl.get("placed_again"):
        out.append(("gangs placed again (evicted or preempted; judged by their latest placement)",
                    str(pl.get("placed_again"))))
    lost_by = ", ".join(f"{k} {_f(v, 3)}" for k, v in (sp.get("gpu_hours_lost_by_level") or {}).items())
    mis = sp.get("mismatches") or {}
    out += [
        ("GPU-hours lost to spread / of GPU-hours run (%)", f"{_f(sp.get('gpu_hours_lost'), 3)} / "
                                                           f"{_f(sp.get('lost_pct'))}" + (f" ({lost_by})" if lost_by else "")),
        ("spread factor from the pod condition / from the Node labels / none",
         f"{sp.get('factor_from_condition')} / {sp.get('factor_from_node_labels')} / {sp.get('no_factor')}"),
        ("condition's level differs from the Node labels': members / gangs",
         f"{mis.get('members')} / {mis.get('gangs')}" + (f" ({'; '.join(mis.get('examples') or [])})"
                                                        if mis.get("examples") else "")),
        ("free GPUs avg / min / max", _stats(fr.get("free_gpus"))),
        ("free GPUs the next waiting gang cannot use avg / min / max",
         _stats(fr.get("unusable_gpus")) + f" ({fr.get('samples_with_a_gang_waiting')} samples with a gang waiting)"),
    ]
    for name in names:
        out.append((f"whole free {name}s avg / min / max (of {(fr.get('domains') or {}).get(name)})",
                    _stats((fr.get("whole_free_domains") or {}).get(name))))
        out.append((f"largest free {name} (GPUs) avg / min / max",
                    _stats((fr.get("largest_free_domain_gpus") or {}).get(name))))
    if fr.get("unusable_node_count"):
        out.append(("nodes not Ready or tainted (their GPUs count as not free)",
                    f"{fr.get('unusable_node_count')}: {', '.join(fr.get('unusable_nodes') or [])}"))
    out += [
        ("Kueue Workloads: created -> QuotaReserved s p50 / p99", _pq(ad.get("quota_reserved_s"))),
        ("Kueue Workloads: created -> Admitted s p50 / p99 (not admitted at the end)",
         f"{_pq(ad.get('admitted_s'))} ({ad.get('not_admitted_at_end')})"),
        ("gang created -> last member PodScheduled s p50 / p99 (apiserver clock)",
         _pq(ad.get("created_to_all_bound_s")) + (f", {ad.get('gangs_with_pods_gone')} gangs with pods gone"
                                                   if ad.get("gangs_with_pods_gone") else "")),
    ]
    k = t.get("kueue_admission_attempt_ms")
    if k:
        out.append(("Kueue admission attempt p50 / p99", f"{quantile_text(k, 'p50', unit='ms')} / "
                                                          f"{quantile_text(k, 'p99', unit='ms')}"))
        for result, fig in sorted((k.get("by_result") or {}).items()):
            out.append((f"Kueue admission attempt, {result}: cycles / p99",
                        f"{_f((k.get('cycles') or {}).get(result), 0)} / {quantile_text(fig, 'p99', unit='ms')}"))

    tp = t.get("throughput")
    if tp:
        left = tp.get("not_completed") or {}
        out += [
            ("jobs completed / gangs created in the batch window (jobs per hour)",
             f"{tp.get('completed')} / {tp.get('gangs')} ({_f(tp.get('jobs_per_hour'))})"),
            ("not completed, for: spread / waits / waits and spread / too late for any variant / other / unknown",
             " / ".join(str(left.get(r, 0)) for r in REASONS)),
            ("completed gangs: wait (created -> all Running) / stretch by spread / run, avg s",
             f"{_f(tp.get('completed_wait_s_avg'))} / {_f(tp.get('completed_stretch_s_avg'))} / "
             f"{_f(tp.get('completed_run_s_avg'))}"),
        ]
        last = tp.get("last_completed")
        if last:
            out.append(("the last gang to complete (the settle, so the window, ends soon after): created / wait / run / stretch / "
                        "completed s",
                        f"{_f(last.get('created_s'), 1)} / {_f(last.get('wait_s'), 1)} / {_f(last.get('run_s'), 1)} / "
                        f"{_f(last.get('stretch_s'), 1)} / {_f(last.get('completed_s'), 1)}"))

    def rel(key: str, nd: int = 2) -> str:
        path = RELATED.get(key)
        if key == "binding_limit":
            a = m.get("attribution") or {}
            return str(a.get("binding") or ("none reached its threshold" if a else "n/a"))
        return _f(lookup(m, path), nd) if path else "n/a"

    out += [
        ("scheduler attempt ms p50 / p99, unschedulable attempts (measurements.scheduler)",
         f"{rel('scheduler_attempt_ms_p50')} / {rel('scheduler_attempt_ms_p99')}, "
         f"{rel('scheduler_unschedulable_attempts', 0)}"),
        ("scheduler pod-group attempt ms p50 / p99 (batch_prometheus.scheduler)",
         f"{rel('podgroup_attempt_ms_p50')} / {rel('podgroup_attempt_ms_p99')}"),
        ("batch steps s p50 / p99: created -> admitted (Job unsuspended); admitted -> all bound",
         f"{rel('created_to_admitted_s_p50')} / {rel('created_to_admitted_s_p99')}; "
         f"{rel('admitted_to_all_bound_s_p50')} / {rel('admitted_to_all_bound_s_p99')}"),
        ("jobs completed per hour / GPU allocation avg (%)",
         f"{rel('jobs_completed_per_hour')} / {rel('gpu_allocation_avg_pct')}"),
        ("the limit that binds (measurements.attribution)", rel("binding_limit")),
    ]
    return out


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    table = rows(summary)
    if not table:
        return []
    return ["", f"## {TITLE}", "", "| figure | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in table], ""]


def plot_svg(series: dict[str, Any], levels: list[str]) -> str | None:
    """Free GPUs, those the next waiting gang cannot use, and the largest free domain of the level above the
    last (the rack) over time, with its whole free domains; None without data."""
    t = series.get("t_s") or []
    if not t:
        return None
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.step(t, series.get("free_gpus") or [], where="post", color="tab:blue", lw=1.2, label="free GPUs")
    unusable = [v if v is not None else float("nan") for v in series.get("unusable_gpus") or []]
    # a marker per sample: a gang waits a few samples at a time, and a step line between gaps draws nothing
    ax.step(t, unusable, where="post", color="tab:red", lw=1, marker=".", ms=4,
            label="free, unusable by the next waiting gang")
    rack = levels[-2] if len(levels) >= 2 else (levels[0] if levels else None)
    if rack is not None:
        ax.step(t, (series.get("largest_free_gpus") or {}).get(rack) or [], where="post", color="tab:green",
                lw=1, ls="--", label=f"largest free {rack} (GPUs)")
    ax.set_xlabel("s since the load started")
    ax.set_ylabel("GPUs")
    ax.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0]
    if rack is not None:
        ax2 = ax.twinx()
        ax2.step(t, (series.get("whole_free") or {}).get(rack) or [], where="post", color="tab:gray", lw=1,
                 ls=":", label=f"whole free {rack}s")
        ax2.set_ylabel(f"{rack}s")
        ax2.set_ylim(bottom=0)
        handles += ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=4, fontsize=7, frameon=False)
    return svg(fig)


def html_parts(summary: dict[str, Any]) -> list[str]:
    table = rows(summary)
    if not table:
        return []
    parts = [f"<h2>{html.escape(TITLE)}</h2>", "<table><tr><th>figure</th><th>value</th></tr>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in table) + "</table>"]
    levels = ((summary.get("measurements") or {}).get("topology") or {}).get("levels") or []
    plot = plot_svg(summary.get("topology_series") or {}, levels)
    if plot:
        parts.append("<figure class='plot' id='plot-topology'><figcaption><b>Free GPUs, those the next waiting gang "
                     "cannot use, the largest free domain</b> - source: the pod timeline (spec.nodeName) and the "
                     f"Nodes' labels and allocatable GPUs</figcaption>{plot}</figure>")
    return parts


class TopologySection:
    """This section as the report takes it (:class:`hollowscale.report.sections.ReportSection`)."""

    def markdown(self, summary: dict[str, Any]) -> list[str]:
        return markdown_lines(summary)

    def html(self, summary: dict[str, Any]) -> list[str]:
        return html_parts(summary)
