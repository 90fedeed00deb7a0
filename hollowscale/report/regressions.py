"""``hollowscale compare BASE NEW --max-regression PCT``: side-by-side figures, fail on regressions.

A figure regresses when it moves in its bad direction by more than ``max_regression_pct`` percent of
the baseline (latencies and failures up, throughput and completions down).  A baseline of 0 that
becomes non-zero in the bad direction is an unbounded regression.  An SLO that passed in the baseline
and fails in the new run is a regression whatever the percentages say.  A bucketed quantile (read from a
Prometheus histogram, :mod:`hollowscale.report.precision`) is shown with the bucket it was interpolated in,
so a change inside one bucket reads as what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hollowscale.report.numbers import number, percent
from hollowscale.report.precision import bucket_text, of_metric
from hollowscale.report.verdicts import lookup

LOWER = "lower"
HIGHER = "higher"

#: (metric path, better direction) compared for every run; per-verb API latency is added dynamically
FIGURES: tuple[tuple[str, str], ...] = (
    ("pod_startup_latency_ms.p50", LOWER),
    ("pod_startup_latency_ms.p90", LOWER),
    ("pod_startup_latency_ms.p99", LOWER),
    ("pod_scheduling_latency_ms.p99", LOWER),
    ("scheduling_throughput_pods_per_s.avg", HIGHER),
    ("scheduling_throughput_pods_per_s.max", HIGHER),
    ("job_completion_time_s.p50", LOWER),
    ("job_completion_time_s.p99", LOWER),
    ("gpu_queue_wait_s.p99", LOWER),
    ("api_latency_slo_ms.mutating.p99", LOWER),
    ("api_latency_slo_ms.read_object.p99", LOWER),
    ("api_latency_slo_ms.read_list.p99", LOWER),
    ("jobs.completed", HIGHER),
    ("jobs.failed", LOWER),
    # batch scheduling (absent in runs without batch figures: "missing in both", never a regression)
    ("batch.jobs_completed_per_hour", HIGHER),
    ("batch.wasted_gpu_seconds", LOWER),
    ("batch.deadlocked_jobs.count", LOWER),
    ("batch.job_steps_s.created_to_all_running.p99", LOWER),
    ("batch.tenant_share.max_deviation_pct", LOWER),
)


@dataclass
class Row:
    metric: str
    better: str
    base: float | None
    new: float | None
    change_pct: float | None  # signed change, + = worse
    regressed: bool
    note: str = ""
    base_bucket: tuple[float, float | None] | None = None
    new_bucket: tuple[float, float | None] | None = None


def bucket_at(measurements: dict[str, Any], metric: str) -> tuple[float, float | None] | None:
    """The bucket a bucketed quantile at ``metric`` was interpolated in (None: exact, not one, not recorded)."""
    found = of_metric(measurements, metric)
    return None if found is None else found[1]


def with_bucket(v: float | None, bucket: tuple[float, float | None] | None) -> str:
    """A compared figure, with its bucket when it is a bucketed quantile: ``49.55 [25–50]``."""
    return number(v, 3, trim=True) + (f" [{bucket_text(bucket)}]" if bucket is not None and v is not None else "")


def _in(bucket: tuple[float, float | None] | None) -> str:
    return "" if bucket is None else f" (bucket {bucket_text(bucket)})"


def change(base: float | None, new: float | None, better: str) -> tuple[float | None, str]:
    """Signed change in percent where positive means worse; (None, why) when not comparable."""
    if base is None or new is None:
        return None, "missing in " + ("both" if base is None and new is None else "base" if base is None else "new")
    worse = new - base if better == LOWER else base - new
    if base == 0:
        if worse > 0:
            return float("inf"), "base is 0"
        return 0.0 if worse == 0 else -100.0, ""
    return 100.0 * worse / abs(base), ""


def compare(base: dict[str, Any], new: dict[str, Any], max_regression_pct: float) -> tuple[list[Row], list[str]]:
    """Rows for every figure, and the list of regression messages (empty = no regression)."""
    mb, mn = base.get("measurements") or {}, new.get("measurements") or {}
    figures = list(FIGURES)
    verbs = sorted(set(mb.get("api_latency_ms") or {}) | set(mn.get("api_latency_ms") or {}))
    figures += [(f"api_latency_ms.{v}.p99", LOWER) for v in verbs]
    rows: list[Row] = []
    problems: list[str] = []
    for metric, better in figures:
        b, n = lookup(mb, metric), lookup(mn, metric)
        pct, note = change(b, n, better)
        regressed = pct is not None and pct > max_regression_pct
        bb, nb = bucket_at(mb, metric), bucket_at(mn, metric)
        if bb is not None and bb == nb and not note:
            note = f"both in bucket {bucket_text(bb)}"
        rows.append(Row(metric, better, b, n, pct, regressed, note, bb, nb))
        if regressed:
            problems.append(f"{metric}: {b}{_in(bb)} -> {n}{_in(nb)} ({'+inf' if pct == float('inf') else f'{pct:+.1f}'}% worse, "
                            f"limit {max_regression_pct:g}%)")
    base_slos = {s["name"]: s for s in base.get("slos") or []}
    for s in new.get("slos") or []:
        prev = base_slos.get(s["name"])
        if prev and prev["passed"] and not s["passed"]:
            problems.append(f"SLO {s['name']} passed in the baseline and fails now ({s['value']} {s['op']} {s['threshold']} does not hold)")
    if not new.get("complete", True):
        problems.append(f"the new run is incomplete ({new.get('incomplete_reason')})")
    return rows, problems


def render_table(rows: list[Row], base_name: str, new_name: str) -> Any:
    from rich.table import Table

    t = Table(title=f"hollowscale compare: {base_name} -> {new_name}")
    for col in ("figure", "better", "base", "new", "change", "verdict"):
        t.add_column(col, justify="right" if col in ("base", "new", "change") else "left")
    for r in rows:
        verdict = "[red]REGRESSION[/red]" if r.regressed else ("[dim]" + r.note + "[/dim]" if r.note else "ok")
        t.add_row(r.metric, r.better, with_bucket(r.base, r.base_bucket), with_bucket(r.new, r.new_bucket),
                  percent(r.change_pct), verdict)
    return t

