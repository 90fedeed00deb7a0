"""A baseline made of repeat runs, and the noise-aware comparison against it.

One run says nothing about noise: on a shared machine the same scenario's pod startup p99 moves by tens of
percent from one run to the next.  A baseline here holds, per scenario and per compared figure (the figures
of :mod:`hollowscale.report.regressions`), the values of N repeat runs and their **median and min..max band**.

Why min/max and not the MAD: nightly baselines hold 3-5 repeats.  With so few values the MAD is degenerate
(for 3 values it is the smaller of the two non-zero deviations from the median; two equal values make it 0),
and turning it into a sigma assumes a distribution nobody measured.  The observed range assumes nothing - it
is what this machine did do with this scenario - and it only widens as more repeats catch more noise.  Its
price is that one outlier repeat widens the band; that errs towards fewer false alarms, which is what a
nightly gate that people must trust needs, and the percent limit still applies on top.

A baseline repeat must be complete and settled (every submitted job finished, :func:`unsettled`): on a
machine shared with other work a run can fall so far behind that half its jobs never finish, and such a
run's figures would make a band that hides everything.

The rule (:func:`compare_to_baseline`): a figure regresses only when the new value is **past the band in its
bad direction** (above the max for latencies and failures, below the min for throughput and completions)
**and** worse than the baseline median by more than ``max_regression_pct`` percent (``inf`` when the median
is 0).  With one repeat the band is the value itself and the rule is exactly the single-run
``hollowscale compare``.  Where the new side is several repeats too (a nightly), the new value is their
median, so one noisy repeat on either side does not decide.  An SLO that passed in every baseline repeat and
fails in a new run is a regression whatever the percentages; an incomplete new run is one too.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hollowscale.report.jsonfile import load_summary, write_json
from hollowscale.report.numbers import number, percent
from hollowscale.report.regressions import FIGURES, HIGHER, LOWER, bucket_at, change, with_bucket
from hollowscale.report.verdicts import lookup

KIND = "hollowscale-baseline"
SCHEMA_VERSION = 1
FILE = "baseline.json"


#: compared here besides :data:`FIGURES`: a run whose submitted jobs did not all finish did not keep up
EXTRA_FIGURES: tuple[tuple[str, str], ...] = (("jobs.unfinished", LOWER),)

#: a trace replay's figures (``hollowscale trace replay``; its summary's ``replay`` section, the paper's
#: protocol): how much of the GPUs the scheduler handed out, when it first failed a pod, and how fast it gave
#: its verdicts.  With the seed fixed the sequence is the same each night, so a move here is the scheduler's.
TRACE_FIGURES: tuple[tuple[str, str], ...] = (
    ("at_100pct_arrived.allocated_pct", HIGHER),
    ("at_100pct_arrived.unallocated_gpus", LOWER),
    ("end.allocated_pct", HIGHER),
    ("end.unallocated_gpus", LOWER),
    ("first_failure.arrived_pct", HIGHER),
    ("pods.unschedulable", LOWER),
    ("pods.no_verdict", LOWER),
    ("scheduler.verdicts_per_s", HIGHER),
    ("scheduler.latency_ms.bound.p50", LOWER),
    ("scheduler.latency_ms.bound.p99", LOWER),
)


def is_trace_replay(summary: dict[str, Any]) -> bool:
    """Whether ``summary`` is a trace replay's (``hollowscale trace replay``) rather than a run's."""
    return "replay" in summary and "measurements" not in summary


def figure_values(summary: dict[str, Any]) -> dict[str, Any]:
    """The section the compared figures are read from: a run's ``measurements``, a replay's ``replay``."""
    return (summary.get("replay") if is_trace_replay(summary) else summary.get("measurements")) or {}


def verdicts_of(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A summary's pass/fail verdicts as ``{name, passed, detail}``: a run's SLOs, a replay's checks (the
    trace's arithmetic: allocated equals arrived before the first failure, pods per kind, the apiserver's
    allocation)."""
    if is_trace_replay(summary):
        checks = (summary.get("replay") or {}).get("checks") or {}
        return [{"name": f"check {name}", "passed": bool(c.get("passed")),
                 "detail": ", ".join(f"{k} {v}" for k, v in c.items() if k != "passed" and not isinstance(v, dict))}
                for name, c in checks.items() if isinstance(c, dict)]
    return [{"name": slo["name"], "passed": bool(slo["passed"]),
             "detail": f"{slo['value']} {slo['op']} {slo['threshold']} does not hold"}
            for slo in summary.get("slos") or []]


def load_compared(run_dir: Path) -> dict[str, Any]:
    """A run's ``summary.json`` (checked as :func:`load_summary` does) or a trace replay's (which has no
    ``measurements`` or ``slos``: its figures and checks are in ``replay``); ValueError when it is neither."""
    path = Path(run_dir) / "summary.json" if Path(run_dir).is_dir() else Path(run_dir)
    doc = json.loads(path.read_text())
    if isinstance(doc, dict) and is_trace_replay(doc) and "scenario" in doc and "run_id" in doc:
        return doc
    return load_summary(run_dir)


def figures_for(summaries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(metric, better) compared for these summaries: the fixed figures plus p99 per API verb seen (a run's),
    or :data:`TRACE_FIGURES` (a trace replay's)."""
    if summaries and all(is_trace_replay(s) for s in summaries):
        return list(TRACE_FIGURES)
    verbs: set[str] = set()
    for s in summaries:
        verbs |= set((s.get("measurements") or {}).get("api_latency_ms") or {})
    return [*FIGURES, *EXTRA_FIGURES] + [(f"api_latency_ms.{v}.p99", LOWER) for v in sorted(verbs)]


def unsettled(summary: dict[str, Any]) -> str:
    """Why a run cannot be a baseline repeat although complete ("" when it can).

    A run that left submitted jobs unfinished did not keep up with its own load (an overloaded machine):
    its completions, failures and completion times are cut short, so its figures describe the machine's
    overload, not the scheduler.  Such a run is left out of a baseline (and ``jobs.unfinished`` is compared).
    """
    left = lookup(summary.get("measurements") or {}, "jobs.unfinished")
    submitted = lookup(summary.get("measurements") or {}, "jobs.submitted")
    if left:
        return f"{left:g} of {submitted:g} submitted jobs unfinished" if submitted else f"{left:g} jobs unfinished"
    return ""


@dataclass(frozen=True)
class Band:
    """One figure's values over the baseline repeats."""

    better: str
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def lo(self) -> float:
        return min(self.values)

    @property
    def hi(self) -> float:
        return max(self.values)

    def past(self, new: float) -> bool:
        """Whether ``new`` lies outside the band on its bad side."""
        return new > self.hi if self.better == LOWER else new < self.lo

    def describe(self) -> str:
        return f"[{_f(self.lo)}, {_f(self.hi)}] (median {_f(self.median)}, n={len(self.values)})"


def scenario_entry(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The baseline entry of one scenario from its repeat runs' summaries."""
    if not summaries:
        raise ValueError("a baseline needs at least one run")
    names = {s.get("scenario") for s in summaries}
    if len(names) != 1:
        raise ValueError(f"a baseline entry holds repeats of one scenario, got {sorted(map(str, names))}")
    bad = [str(s.get("run_id")) for s in summaries if not s.get("complete", True)]
    if bad:
        raise ValueError(f"incomplete runs cannot be a baseline: {', '.join(bad)}")
    figures: dict[str, Any] = {}
    for metric, better in figures_for(summaries):
        values = [lookup(figure_values(s), metric) for s in summaries]
        present = [v for v in values if v is not None]
        if present:
            figures[metric] = {"better": better, "values": present, "median": float(statistics.median(present)),
                               "min": min(present), "max": max(present), "n": len(present)}
    slos: dict[str, list[bool]] = {}
    for s in summaries:
        for verdict in verdicts_of(s):
            slos.setdefault(verdict["name"], []).append(verdict["passed"])
    return {"scenario": names.pop(), "runs": [s.get("run_id") for s in summaries], "figures": figures,
            "slos": {name: {"passed": passed} for name, passed in slos.items()}}


def build_baseline(groups: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``baseline.json`` from the repeat runs of each scenario (scenario name -> summaries)."""
    return {"kind": KIND, "schema_version": SCHEMA_VERSION,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "band": "min..max of the repeats; median as the reference for the percent limit",
            # keyed by the runs' own scenario name: what a new run is looked up by
            "scenarios": {e["scenario"]: e for e in (scenario_entry(runs) for _, runs in sorted(groups.items()))}}


def write_baseline(folder: Path, groups: dict[str, list[tuple[Path, dict[str, Any]]]]) -> Path:
    """Write ``folder/baseline.json`` and a copy of each run's ``summary.json`` under ``folder/runs/``.

    The copies make a baseline self-contained: an artifact that outlives the run folders can be rebuilt
    or inspected from them.
    """
    folder.mkdir(parents=True, exist_ok=True)
    doc = build_baseline({name: [s for _, s in runs] for name, runs in groups.items()})
    for name, runs in groups.items():
        for i, (_, summary) in enumerate(runs):
            d = folder / "runs" / name / f"{i + 1:02d}"
            d.mkdir(parents=True, exist_ok=True)
            write_json(d / "summary.json", summary)
    write_json(folder / FILE, doc)
    return folder / FILE


def is_baseline(path: Path) -> bool:
    """Whether ``path`` is a baseline file or a folder holding ``baseline.json``."""
    p = path / FILE if path.is_dir() else path
    if not p.is_file():
        return False
    try:
        return json.loads(p.read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def load_baseline(path: Path) -> dict[str, Any]:
    p = path / FILE if path.is_dir() else path
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{p}: cannot read the baseline ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ValueError(f"{p}: not a hollowscale baseline (expected kind {KIND!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{p}: baseline schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    return doc


@dataclass
class BandRow:
    metric: str
    better: str
    band: Band | None
    new: float | None
    change_pct: float | None  # vs the baseline median, + = worse
    regressed: bool
    note: str = ""
    #: the bucket of a bucketed quantile, when every new run's value lies in the same one
    new_bucket: tuple[float, float | None] | None = None


def _bucket_of(summaries: list[dict[str, Any]], metric: str) -> tuple[float, float | None] | None:
    buckets = {bucket_at(figure_values(s), metric) for s in summaries}
    return buckets.pop() if len(buckets) == 1 else None


def _median_of(summaries: list[dict[str, Any]], metric: str) -> float | None:
    values = [v for v in (lookup(figure_values(s), metric) for s in summaries) if v is not None]
    return float(statistics.median(values)) if values else None


def compare_to_baseline(entry: dict[str, Any], new: list[dict[str, Any]],
                        max_regression_pct: float) -> tuple[list[BandRow], list[str]]:
    """Rows for every figure and the regression messages (empty = none) of ``new`` repeat runs of one
    scenario against its baseline ``entry`` (see the module docstring for the rule)."""
    if not new:
        raise ValueError("nothing to compare: no new run")
    scenario = entry.get("scenario")
    rows: list[BandRow] = []
    problems: list[str] = []
    known = entry.get("figures") or {}
    metrics = {m: b for m, b in figures_for(new)}
    metrics.update({m: f["better"] for m, f in known.items()})
    for metric, better in metrics.items():
        fig = known.get(metric)
        band = Band(better, tuple(float(v) for v in fig["values"])) if fig else None
        value = _median_of(new, metric)
        if band is None or value is None:
            note = "missing in " + ("both" if band is None and value is None else "baseline" if band is None else "new")
            rows.append(BandRow(metric, better, band, value, None, False, note, _bucket_of(new, metric)))
            continue
        pct, note = change(band.median, value, better)
        outside = band.past(value)
        regressed = outside and pct is not None and pct > max_regression_pct
        if not outside:
            note = "within the band" if band.lo <= value <= band.hi else "better than the band"
        elif not regressed:
            note = f"past the band, within {max_regression_pct:g}%"
        rows.append(BandRow(metric, better, band, value, pct, regressed, note, _bucket_of(new, metric)))
        if regressed:
            worse = "above" if better == LOWER else "below"
            pct_s = "+inf" if pct == float("inf") else f"{pct:+.1f}"
            of = f"median of {len(new)} runs " if len(new) > 1 else ""
            problems.append(f"{scenario}: {metric}: new {of}{_f(value)} is {worse} the baseline band {band.describe()}, "
                            f"{pct_s}% vs the median (limit {max_regression_pct:g}%)")
    for name, slo in (entry.get("slos") or {}).items():
        passed = slo.get("passed") or []
        if not passed or not all(passed):
            continue
        for s in new:
            for now in verdicts_of(s):
                if now["name"] == name and not now["passed"]:
                    what = name if name.startswith("check ") else f"SLO {name}"
                    problems.append(f"{scenario}: {what} passed in all {len(passed)} baseline runs and fails in "
                                    f"{s.get('run_id')} ({now['detail']})")
    for s in new:
        if not s.get("complete", True):
            problems.append(f"{scenario}: run {s.get('run_id')} is incomplete ({s.get('incomplete_reason')})")
    return rows, problems


def render_table(rows: list[BandRow], title: str) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in ("figure", "better", "baseline band", "median", "new", "change", "verdict"):
        t.add_column(col, justify="right" if col in ("median", "new", "change") else "left")
    for r in rows:
        verdict = "[red]REGRESSION[/red]" if r.regressed else ("[dim]" + r.note + "[/dim]" if r.note else "ok")
        t.add_row(r.metric, r.better, _band(r.band), "n/a" if r.band is None else _f(r.band.median),
                  with_bucket(r.new, r.new_bucket), percent(r.change_pct), verdict)
    return t


def render_markdown(rows: list[BandRow], title: str) -> str:
    lines = [f"### {title}", "", "| figure | better | baseline band | median | new | change | verdict |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        verdict = "**REGRESSION**" if r.regressed else (r.note or "ok")
        lines.append(f"| `{r.metric}` | {r.better} | {_band(r.band)} | "
                     f"{'n/a' if r.band is None else _f(r.band.median)} | {with_bucket(r.new, r.new_bucket)} | "
                     f"{percent(r.change_pct)} | {verdict} |")
    return "\n".join(lines) + "\n"


def render_baseline_markdown(entry: dict[str, Any], title: str) -> str:
    """One scenario of a baseline: each figure's repeat values, median and band."""
    lines = [f"### {title}", "", "| figure | better | values | median | band |", "|---|---|---|---:|---|"]
    for metric, f in (entry.get("figures") or {}).items():
        b = Band(f["better"], tuple(float(v) for v in f["values"]))
        lines.append(f"| `{metric}` | {b.better} | {', '.join(_f(v) for v in b.values)} | {_f(b.median)} | "
                     f"{_band(b)} |")
    return "\n".join(lines) + "\n"


def _band(b: Band | None) -> str:
    return "n/a" if b is None else f"{_f(b.lo)} .. {_f(b.hi)} (n={len(b.values)})"


def _f(v: float | None) -> str:
    return number(v, 3, trim=True)


def load_runs(paths: list[Path]) -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    """Run folders (or summary.json files) grouped by scenario name, in the order given."""
    groups: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for p in paths:
        s = load_summary(p)
        groups.setdefault(str(s.get("scenario")), []).append((p, s))
    return groups


__all__ = ["HIGHER", "LOWER", "Band", "BandRow", "build_baseline", "compare_cli", "compare_to_baseline", "is_baseline",
           "load_baseline", "load_runs", "render_baseline_markdown", "render_markdown", "render_table",
           "run_key", "scenario_entry", "write_baseline"]


def run_key(summary: dict[str, Any]) -> str:
    """What a run is judged and baselined under: its scenario's name, ``<name>/<variant>`` for a run of one
    variant of a scenario with variants (its summary's ``variant.name``), so that the variants of one scenario
    are never banded together.  A trace replay's ``variant`` (a plain string) is not part of its key: the
    nightly replays a trace scenario of one variant only."""
    variant = summary.get("variant")
    name = str(summary.get("scenario"))
    if isinstance(variant, dict) and isinstance(variant.get("name"), str) and variant["name"]:
        return f"{name}/{variant['name']}"
    return name


def compare_cli(base: Path, new: Path, max_regression_pct: float, console: Any) -> int:
    """``hollowscale compare BASELINE RUN``: print the band table and the regressions; the exit code."""
    doc = load_baseline(base)
    summary = load_summary(new)
    # a run of one variant of a scenario with variants is baselined under <scenario>/<variant> (make nightly)
    name = run_key(summary)
    entry = (doc.get("scenarios") or {}).get(name)
    if entry is None and name != summary.get("scenario"):
        name = str(summary.get("scenario"))
        entry = (doc.get("scenarios") or {}).get(name)
    if entry is None:
        raise ValueError(f"{base}: the baseline has no scenario {run_key(summary)!r} (it has: "
                         f"{', '.join(sorted(doc.get('scenarios') or {})) or 'none'})")
    rows, problems = compare_to_baseline(entry, [summary], max_regression_pct)
    console.print(render_table(rows, f"hollowscale compare: baseline of {len(entry.get('runs') or [])} run(s) -> "
                                     f"{summary.get('run_id', new)}"))
    if problems:
        console.print(f"[red]{len(problems)} regression(s) past the baseline band and beyond "
                      f"{max_regression_pct:g}%:[/red]")
        for p in problems:
            console.print(f"  - {p}", markup=False)
        return 1
    console.print(f"no regression past the baseline band beyond {max_regression_pct:g}%")
    return 0
