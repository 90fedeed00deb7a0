"""``make nightly``: a fixed scenario set, run, reported, and gated against a noise-aware baseline.

The set is a file (``scenarios/nightly/set.yaml``; in a folder of its own, as the tests validate every
``scenarios/*.yaml`` as a scenario) so that what "nightly" means is reviewed like code::

    max_regression_pct: 25          # default percent limit (a figure must also be past its noise band)
    scenarios:
      - scenario: ../smoke.yaml     # relative to this file
        repeats: 3                  # repeat runs: the baseline's noise band, the new side's median
      - scenario: ../default.yaml
        repeats: 1
        max_regression_pct: 40      # optional, per scenario
      - scenario: ../trace-gpushare40.yaml   # a trace scenario: one variant, one seed
      - scenario: ../topology-gangs-640.yaml
        variant: kueue-tas-required # a scenario with variants: the one the nightly runs

A scenario with ``variants:`` is in the set only with ``variant:`` naming one of them: the nightly runs
that variant alone, as ``hollowscale run`` runs it among the others (the scenario copy it runs keeps only
that variant, so the variant's settings apply exactly; its run folder is one level down,
``<stamp>-<scenario>/<variant>/``).  Such an entry is keyed ``<scenario>/<variant>`` (baselines, reports,
``--from-runs``: a run is keyed by its summary's ``scenario`` and ``variant.name``), so several variants of
one scenario can each be an entry.  It needs what its variant needs: a Kueue variant runs only as root
with Kueue set up (``make setup KUEUE=1``), checked before the night starts.

Each repeat is one ``hollowscale run`` in a child process, on a fresh local cluster in a folder of the
nightly's own (``<out>/.cluster``: never the user's ``.hollowscale/cluster``), one after the other.  A trace
scenario (``workload: {trace: ...}``) is one ``hollowscale trace replay`` instead (its own fresh cluster in
a temporary folder), compared on its replay figures and checks
(:data:`hollowscale.report.baseline.TRACE_FIGURES`).  Reports
land in ``reports/nightly/<UTC date>/<scenario>/<run-id>/`` with every figure also as ClusterLoader2
PerfData (:mod:`hollowscale.report.perfdata`); ``reports/nightly/latest`` points at the night.

Then either

* ``--update-baseline`` (``NIGHTLY_UPDATE_BASELINE=1``): the night's repeats become the baseline
  (``NIGHTLY_BASELINE``, default ``reports/nightly/baseline``): per figure the repeats' values, median and
  min..max band (:mod:`hollowscale.report.baseline`); or
* compare (the default): each scenario's repeats against the baseline; a figure regresses only when the
  median of the night's repeats is past the baseline band in its bad direction *and* beyond the percent
  limit.  ``comparison.md`` (what CI writes into the job summary) and ``nightly.json`` say what was found.

Exit codes: 0 no regression (or baseline written), 1 a regression (each named: scenario, figure, band, new
value), 2 the nightly could not judge (a run left no summary, no baseline, a scenario missing from it, or
an entry that cannot run on this machine: one needing Kueue or root where they are not, found before any
run starts).
``--from-runs DIR`` judges run folders already under ``DIR`` instead of running anything (re-judging a
night, or the recorded real runs of the tests); its verdict is written to a new night folder under ``--out``.
With ``--update-baseline`` it pools the runs of several nights into one baseline
(``NIGHTLY_UPDATE_BASELINE=1 NIGHTLY_FROM_RUNS=reports/nightly make nightly``): more repeats, and the noise
of different days, which is what a scenario run once a night needs before its band means anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hollowscale.paths import REPO_ROOT
from hollowscale.report import baseline as bl
from hollowscale.report.baseline import run_key
from hollowscale.report.jsonfile import write_json
from hollowscale.report.latest import update_latest
from hollowscale.report.perfdata import SUBDIR as PERFDATA_SUBDIR
from hollowscale.report.perfdata import write_perfdata

if TYPE_CHECKING:
    from hollowscale.scenario import Scenario
    from hollowscale.setupneeds import Needs

DEFAULT_SET = REPO_ROOT / "scenarios" / "nightly" / "set.yaml"
DEFAULT_MAX_REGRESSION_PCT = 10.0
MAX_REPEATS = 20

OK, REGRESSION, CANNOT_JUDGE = 0, 1, 2


class NightlySetError(ValueError):
    """A problem with the nightly set file: the file, where in it, and what was expected."""


@dataclass(frozen=True)
class NightlyEntry:
    """One scenario of the set.

    Attributes:
        scenario: the scenario file (absolute).
        name: what baselines and reports are keyed by: the scenario's ``name``, or ``<name>/<variant>`` for
            one variant of a scenario with variants (:func:`run_key`).
        repeats: how many runs per night.
        max_regression_pct: this scenario's percent limit (``None``: the set's).
        timeout_s: the scenario's own ``timeout_s`` (a run is interrupted 15 minutes after it).
        trace: whether it is a trace scenario (replayed by ``hollowscale trace replay``).
        variant: the one variant run of a scenario with ``variants`` (``None``: a scenario without).
    """

    scenario: Path
    name: str
    repeats: int
    max_regression_pct: float | None = None
    timeout_s: float = 3600.0
    trace: bool = False
    variant: str | None = None


@dataclass(frozen=True)
class NightlySet:
    """The fixed scenario set of ``make nightly``."""

    path: Path
    entries: tuple[NightlyEntry, ...]
    max_regression_pct: float = DEFAULT_MAX_REGRESSION_PCT

    def limit(self, entry: NightlyEntry) -> float:
        return self.max_regression_pct if entry.max_regression_pct is None else entry.max_regression_pct


def _number(value: Any, where: str, source: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise NightlySetError(f"{source}: {where}: expected a number >= 0 (percent), got {value!r}")
    return float(value)


def load_set(path: str | Path) -> NightlySet:
    """Read and validate a nightly set file; every scenario in it is validated too."""
    from hollowscale.scenario import ScenarioError, load_scenario
    from hollowscale.scenario.trace import is_trace_scenario

    source = Path(path).resolve()
    try:
        doc = yaml.safe_load(source.read_text())
    except OSError as exc:
        raise NightlySetError(f"{source}: cannot read the nightly set ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise NightlySetError(f"{source}: not YAML ({exc})") from None
    if not isinstance(doc, dict):
        raise NightlySetError(f"{source}: expected a mapping with 'scenarios', got {type(doc).__name__}")
    unknown = sorted(set(doc) - {"scenarios", "max_regression_pct"})
    if unknown:
        raise NightlySetError(f"{source}: unknown key(s) {', '.join(map(str, unknown))} "
                              f"(expected: scenarios, max_regression_pct)")
    limit = _number(doc.get("max_regression_pct", DEFAULT_MAX_REGRESSION_PCT), "max_regression_pct", source)
    items = doc.get("scenarios")
    if not isinstance(items, list) or not items:
        raise NightlySetError(f"{source}: scenarios: expected a non-empty list of {{scenario, repeats}}, "
                              f"got {items!r}")
    entries: list[NightlyEntry] = []
    for i, item in enumerate(items):
        where = f"scenarios[{i}]"
        if not isinstance(item, dict):
            raise NightlySetError(f"{source}: {where}: expected a mapping {{scenario, repeats}}, got {item!r}")
        unknown = sorted(set(item) - {"scenario", "repeats", "max_regression_pct", "variant"})
        if unknown:
            raise NightlySetError(f"{source}: {where}: unknown key(s) {', '.join(map(str, unknown))} "
                                  f"(expected: scenario, repeats, max_regression_pct, variant)")
        file = item.get("scenario")
        if not isinstance(file, str) or not file:
            raise NightlySetError(f"{source}: {where}.scenario: expected a scenario file name, got {file!r}")
        repeats = item.get("repeats", 1)
        if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
            raise NightlySetError(f"{source}: {where}.repeats: expected an integer 1..{MAX_REPEATS}, got {repeats!r}")
        own = item.get("max_regression_pct")
        own_limit = None if own is None else _number(own, f"{where}.max_regression_pct", source)
        variant = item.get("variant")
        if variant is not None and (not isinstance(variant, str) or not variant):
            raise NightlySetError(f"{source}: {where}.variant: expected a variant name of the scenario, "
                                  f"got {variant!r}")
        scenario = (source.parent / file).resolve()
        if not scenario.is_file():
            raise NightlySetError(f"{source}: {where}.scenario: no such file {scenario}")
        try:
            is_trace = is_trace_scenario(yaml.safe_load(scenario.read_text()))
        except yaml.YAMLError:
            is_trace = False  # load_scenario says what is wrong with it
        if is_trace:
            if variant is not None:
                raise NightlySetError(f"{source}: {where}.variant: {file} is a trace scenario, replayed whole "
                                      f"(expected 'variant' only on a scenario with 'variants')")
            entry = _trace_entry(source, where, file, scenario, repeats, own_limit)
        else:
            try:
                sc = load_scenario(scenario)
            except ScenarioError as exc:
                raise NightlySetError(f"{source}: {where}.scenario: {file} is not a valid scenario:\n{exc}") from None
            names = [v.name for v in sc.variants]
            if names and variant is None:
                raise NightlySetError(f"{source}: {where}.scenario: {file} has variants ({', '.join(names)}); the "
                                      f"nightly compares single runs (expected 'variant: <one of them>' in the entry)")
            if variant is not None and variant not in names:
                has = f"has the variants {', '.join(names)}" if names else "has no variants"
                raise NightlySetError(f"{source}: {where}.variant: {file} {has}, not {variant!r} (expected "
                                      + ("one of them)" if names else "no 'variant' key)"))
            entry = NightlyEntry(scenario, f"{sc.name}/{variant}" if variant else sc.name, repeats, own_limit,
                                 float(sc.timeout_s or 3600.0), variant=variant)
        if any(e.name == entry.name for e in entries):
            raise NightlySetError(f"{source}: {where}.scenario: scenario name {entry.name!r} is already in the set "
                                  f"(baselines are keyed by name; expected each scenario once, with repeats)")
        entries.append(entry)
    return NightlySet(source, tuple(entries), limit)


#: a trace replay with no ``timeout_s`` of its own is interrupted this long (plus 15 minutes) after it starts
TRACE_TIMEOUT_S = 3600.0


def _trace_entry(source: Path, where: str, file: str, scenario: Path, repeats: int,
                 own_limit: float | None) -> NightlyEntry:
    """A trace scenario of the set, checked (file, trace, scheduler configurations): one variant and one seed,
    since a baseline compares repeats of one replay."""
    from hollowscale.scenario.trace import load_trace_scenario
    from kubecore.schema import SpecError

    try:
        ts = load_trace_scenario(scenario)
    except SpecError as exc:
        raise NightlySetError(f"{source}: {where}.scenario: {file} is not a valid trace scenario:\n{exc}") from None
    if len(ts.file.variants) != 1 or len(ts.spec.seeds) != 1:
        raise NightlySetError(f"{source}: {where}.scenario: {file} has {len(ts.file.variants)} variant(s) and "
                              f"{len(ts.spec.seeds)} seed(s); the nightly compares repeats of one replay (expected "
                              f"one variant and one seed)")
    return NightlyEntry(scenario, ts.name, repeats, own_limit, float(ts.file.timeout_s or TRACE_TIMEOUT_S), trace=True)


# ---------------------------------------------------------------------------------------------- running


def entry_scenario(entry: NightlyEntry) -> Scenario:
    """The scenario an entry runs: for one variant, with ``variants`` reduced to it (as :func:`scenario_copy`
    writes it), so what it needs is that variant's needs, not the other variants'."""
    from hollowscale.scenario import load_scenario

    sc = load_scenario(entry.scenario)
    if entry.variant is None:
        return sc
    return dataclasses.replace(sc, variants=tuple(v for v in sc.variants if v.name == entry.variant))


def entry_needs(entry: NightlyEntry) -> Needs | None:
    """What a run entry needs beyond the core (Kueue, root, real nodes...); None for a trace replay, whose
    command checks its own."""
    from hollowscale.setupneeds import scenario_needs

    return None if entry.trace else scenario_needs(entry_scenario(entry))


def unmet_needs(nset: NightlySet) -> list[str]:
    """Why entries of the set cannot run on this machine (root, Kueue, real nodes missing), one line each:
    checked before the first run, so a night of runs is not spent to find out that one entry refuses to
    start (its night could then neither be judged nor become a baseline)."""
    from hollowscale.setupneeds import refusal

    return [f"{e.name}: {why}" for e in nset.entries
            if not e.trace and (why := refusal(entry_scenario(e), str(e.scenario)))]


def scenario_copy(entry: NightlyEntry, folder: Path, cluster_dir: Path) -> Path:
    """The scenario with its local cluster in ``cluster_dir`` (relative pool ``stages`` made absolute) and, for
    an entry of one variant, ``variants`` reduced to that one: ``hollowscale run`` then runs it with exactly
    the settings it has among the others (same seed, same cluster features, same rendering)."""
    doc = yaml.safe_load(entry.scenario.read_text())
    if entry.variant is not None:
        doc["variants"] = [v for v in doc.get("variants") or []
                           if isinstance(v, dict) and v.get("name") == entry.variant]
    cluster = doc.setdefault("cluster", {})
    if cluster.get("backend", "local") == "local":
        cluster["dir"] = str(cluster_dir)
    for pool in doc.get("pools") or []:
        stages = pool.get("stages") if isinstance(pool, dict) else None
        if isinstance(stages, str) and not Path(stages).is_absolute():
            pool["stages"] = str((entry.scenario.parent / stages).resolve())
    path = folder / f"{entry.name}.yaml"  # <scenario>/<variant>.yaml for a variant
    path.parent.mkdir(parents=True, exist_ok=True)
    what = "cluster.dir set" + (f"; variants: {entry.variant} only" if entry.variant else "")
    path.write_text(f"# {entry.scenario} as the nightly runs it ({what})\n" + yaml.safe_dump(doc, sort_keys=False))
    return path


def foreign_baseline_folder(folder: Path) -> str | None:
    """Why ``--update-baseline`` must not write into ``folder`` (None when it may): it must be new, empty or a
    baseline already (its ``baseline.json`` and run copies are replaced); anything else is someone's.
    Checked before anything runs, so a night of runs is not spent to find it out."""
    if not folder.exists() or (bl.is_baseline(folder) and folder.is_dir()):
        return None
    if not folder.is_dir():
        return f"the baseline {folder} is not a folder: --update-baseline writes a folder (give NIGHTLY_BASELINE one)"
    entries = sorted(p.name for p in folder.iterdir())
    if not entries:
        return None
    return (f"the baseline folder {folder} is not empty ({', '.join(entries[:3])}{' ...' if len(entries) > 3 else ''}) "
            f"and holds no hollowscale baseline ({bl.FILE}): nothing in it is changed; give NIGHTLY_BASELINE a new "
            "or empty folder")


def night_folder(root: Path) -> Path:
    """``root/<UTC date>``, or ``<date>-2``, ``-3``... when a night already ran that day."""
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    folder, n = root / day, 1
    while folder.exists():
        n += 1
        folder = root / f"{day}-{n}"
    return folder


def run_command(scenario: Path, out: Path, trace: bool = False) -> list[str]:
    """The child process of one repeat: ``hollowscale run`` (quiet), or ``hollowscale trace replay``."""
    if trace:
        return [sys.executable, "-m", "hollowscale", "trace", "replay", str(scenario), "--out", str(out)]
    return [sys.executable, "-m", "hollowscale.run", str(scenario), "--out", str(out), "--quiet"]


def run_one(scenario: Path, out: Path, log: Path, timeout_s: float, trace: bool = False,
            variant: bool = False) -> tuple[int, Path | None]:
    """One ``hollowscale run`` (or trace replay); (exit code, the run folder it wrote or None).

    A run still going ``timeout_s`` later gets SIGINT (the run's own interruption path: it writes a partial
    report and brings its cluster down), then SIGKILL two minutes after that.  A trace replay writes its run
    folder one level down (``<stamp>-<scenario>/<variant>-seed<seed>/``), and so does a scenario of one
    variant (``<stamp>-<scenario>/<variant>/``); the newest folder holding a ``summary.json`` at its depth is
    the one.
    """
    before = {p.name for p in out.iterdir()} if out.is_dir() else set()
    with log.open("w") as fh:
        proc = subprocess.Popen(run_command(scenario, out, trace),
                                cwd=REPO_ROOT, stdout=fh, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    return code, new_run_dir(out, before, trace, variant)


def new_run_dir(out: Path, before: set[str], trace: bool = False, variant: bool = False) -> Path | None:
    """The run folder a repeat wrote under ``out`` (whose entries were ``before``): the newest new folder
    with a ``summary.json``; a trace replay's is one level down (``<stamp>-<scenario>/<variant>-seed<seed>/``),
    and so is a variant's (``<stamp>-<scenario>/<variant>/``, beside the one-variant comparison)."""
    new = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink() and p.name not in before] if out.is_dir() else []
    if trace or variant:
        new = [c for p in new for c in sorted(p.iterdir()) if c.is_dir() and not c.is_symlink()]
    new = [p for p in new if (p / "summary.json").is_file()]
    return sorted(new)[-1] if new else None


def run_set(nset: NightlySet, night: Path, say: Any = print) -> dict[str, list[dict[str, Any]]]:
    """Run every repeat of every scenario; entry name (``<scenario>`` or ``<scenario>/<variant>``) ->
    [{repeat, exit_code, run_dir, log}]."""
    runs: dict[str, list[dict[str, Any]]] = {}
    copies = night / "scenarios"
    for entry in nset.entries:
        # a trace scenario is replayed as written (its trace paths are relative to it; its cluster is its own)
        scen = entry.scenario if entry.trace else scenario_copy(entry, copies, night / ".cluster")
        for r in range(1, entry.repeats + 1):
            t0 = time.monotonic()
            say(f"[nightly] {entry.name} {r}/{entry.repeats} ...")
            log = night / "logs" / f"{entry.name}-{r:02d}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            code, run_dir = run_one(scen, night / entry.name, log, entry.timeout_s + 900, entry.trace,
                                    entry.variant is not None)
            say(f"[nightly] {entry.name} {r}/{entry.repeats}: exit {code}, {time.monotonic() - t0:.0f}s, "
                f"{run_dir or 'no report (see ' + str(log) + ')'}")
            runs.setdefault(entry.name, []).append({"repeat": r, "exit_code": code, "log": str(log),
                                                    "run_dir": None if run_dir is None else str(run_dir)})
    return runs


def load_keyed(run_dir: Path) -> dict[str, Any]:
    """A run's summary as the baseline sees it: ``scenario`` is its :func:`run_key` (the baseline keys its
    entries by the summaries' ``scenario``; the run's own file is not changed)."""
    summary = bl.load_compared(run_dir)
    key = run_key(summary)
    return summary if key == summary.get("scenario") else {**summary, "scenario": key}


def find_runs(folder: Path) -> dict[str, list[Path]]:
    """Run folders (holding ``summary.json``) under ``folder``, by :func:`run_key`; links not followed."""
    out: dict[str, list[Path]] = {}
    seen: set[Path] = set()
    for path in sorted(folder.rglob("summary.json")):
        run_dir = path.parent
        between = [run_dir, *[p for p in run_dir.parents if p == folder or folder in p.parents]]
        if any(p.is_symlink() for p in between) or run_dir.resolve() in seen:
            continue
        if any((p / bl.FILE).is_file() for p in between):  # a baseline's copies are not tonight's runs
            continue
        seen.add(run_dir.resolve())
        try:
            s = bl.load_compared(run_dir)
        except (OSError, ValueError):
            continue
        out.setdefault(run_key(s), []).append(run_dir)
    return out


# ---------------------------------------------------------------------------------------------- judging


@dataclass
class Verdict:
    code: int
    problems: list[str]
    markdown: str


def judge(nset: NightlySet, runs: dict[str, list[Path]], baseline_dir: Path, update: bool,
          limit_override: float | None) -> Verdict:
    """Write the baseline (``update``) or compare against it; the exit code, problems and Markdown."""
    problems: list[str] = []
    cannot: list[str] = []
    summaries: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for entry in nset.entries:
        dirs = runs.get(entry.name) or []
        if not dirs:
            cannot.append(f"{entry.name}: no run left a summary")
            continue
        if len(dirs) < entry.repeats:  # more is fine: runs of several nights pooled into one baseline
            cannot.append(f"{entry.name}: {len(dirs)} run(s) with a summary, the set asks for {entry.repeats}")
        summaries[entry.name] = [(d, load_keyed(d)) for d in dirs]
    md = ["# hollowscale nightly", ""]
    if update:
        left_out: list[str] = []
        for name, group in list(summaries.items()):
            keep = []
            for d, s in group:
                unfit = (f"incomplete ({s.get('incomplete_reason')})" if not s.get("complete", True)
                         else bl.unsettled(s))
                if unfit:
                    left_out.append(f"{name}: run {s.get('run_id')} left out of the baseline: {unfit}")
                else:
                    keep.append((d, s))
            summaries[name] = keep
            if not keep:
                cannot.append(f"{name}: no run fit for a baseline (complete, every job finished)")
        if cannot or not summaries:
            why = cannot + left_out or ["no run"]
            md += ["**Baseline NOT written**:", ""] + [f"- {w}" for w in why] + [""]
            return Verdict(CANNOT_JUDGE, why, "\n".join(md))
        path = bl.write_baseline(baseline_dir, summaries)
        doc = bl.load_baseline(path)
        md += [f"Baseline written to `{path}`.", ""] + [f"- {w}" for w in left_out] + ([""] if left_out else [])
        for name, entry_doc in doc["scenarios"].items():
            md.append(bl.render_baseline_markdown(entry_doc, f"{name}: {len(entry_doc['runs'])} run(s)"))
        return Verdict(OK, [], "\n".join(md))
    try:
        doc = bl.load_baseline(baseline_dir)
    except ValueError as exc:
        msg = f"no usable baseline: {exc} (build one: NIGHTLY_UPDATE_BASELINE=1 make nightly)"
        return Verdict(CANNOT_JUDGE, [msg], "\n".join([*md, f"**Cannot judge**: {msg}", ""]))
    tables: list[str] = []
    for entry in nset.entries:
        new_runs = summaries.get(entry.name)
        if not new_runs:
            continue
        base = (doc.get("scenarios") or {}).get(entry.name)
        if base is None:
            cannot.append(f"{entry.name}: not in the baseline {baseline_dir} (rebuild it: NIGHTLY_UPDATE_BASELINE=1)")
            continue
        limit = limit_override if limit_override is not None else nset.limit(entry)
        rows, found = bl.compare_to_baseline(base, [s for _, s in new_runs], limit)
        problems += found
        tables.append(bl.render_markdown(rows, f"{entry.name}: {len(new_runs)} new run(s) vs a baseline of "
                                               f"{len(base.get('runs') or [])} (limit {limit:g}%)"))
    if problems:
        md += [f"**{len(problems)} regression(s)** (past the baseline's noise band and beyond the limit):", ""]
        md += [f"- {p}" for p in problems] + [""]
    if cannot:
        md += ["**Cannot judge**:", ""] + [f"- {c}" for c in cannot] + [""]
    if not problems and not cannot:
        md += ["**No regression**: every figure is within its baseline band or within the limit.", ""]
    md += tables
    code = REGRESSION if problems else CANNOT_JUDGE if cannot else OK
    return Verdict(code, problems + cannot, "\n".join(md))


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hollowscale.nightly", description=__doc__.split("\n")[0])
    ap.add_argument("--set", default=os.environ.get("NIGHTLY_SET") or str(DEFAULT_SET),
                    help="the nightly set file (NIGHTLY_SET; default scenarios/nightly/set.yaml)")
    ap.add_argument("--out", default=os.environ.get("NIGHTLY_OUT") or "reports/nightly",
                    help="reports root; the night writes OUT/<UTC date>/ (NIGHTLY_OUT)")
    ap.add_argument("--baseline", default=os.environ.get("NIGHTLY_BASELINE") or "",
                    help="baseline folder (NIGHTLY_BASELINE; default OUT/baseline)")
    ap.add_argument("--update-baseline", action="store_true", default=_env_flag("NIGHTLY_UPDATE_BASELINE"),
                    help="make this night's runs the baseline instead of comparing (NIGHTLY_UPDATE_BASELINE=1)")
    ap.add_argument("--max-regression", type=float,
                    default=float(os.environ["NIGHTLY_MAX_REGRESSION"]) if os.environ.get("NIGHTLY_MAX_REGRESSION")
                    else None, help="percent limit for every scenario, overriding the set (NIGHTLY_MAX_REGRESSION)")
    ap.add_argument("--from-runs", default=os.environ.get("NIGHTLY_FROM_RUNS") or "",
                    help="judge the run folders under this folder instead of running (NIGHTLY_FROM_RUNS)")
    args = ap.parse_args(argv)
    try:
        nset = load_set(args.set)
    except NightlySetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return CANNOT_JUDGE
    root = Path(args.out)
    baseline_dir = Path(args.baseline) if args.baseline else root / "baseline"
    if args.update_baseline and (problem := foreign_baseline_folder(baseline_dir)):
        print(f"error: {problem}", file=sys.stderr)
        return CANNOT_JUDGE
    if args.from_runs:
        night = Path(args.from_runs)
        if not night.is_dir():
            print(f"error: --from-runs {night}: no such folder", file=sys.stderr)
            return CANNOT_JUDGE
        runs = find_runs(night)
        record: dict[str, Any] = {"from_runs": str(night)}
    else:
        if not args.update_baseline and not bl.is_baseline(baseline_dir):
            print(f"error: no baseline at {baseline_dir} (build one first: NIGHTLY_UPDATE_BASELINE=1 make nightly, "
                  f"or point NIGHTLY_BASELINE at one)", file=sys.stderr)
            return CANNOT_JUDGE
        unmet = unmet_needs(nset)
        if unmet:
            print("error: the set cannot run here (nothing was run):\n" + "\n".join(f"  {u}" for u in unmet),
                  file=sys.stderr)
            return CANNOT_JUDGE
        night = night_folder(root)
        night.mkdir(parents=True)
        print(f"[nightly] set {nset.path}: " + ", ".join(f"{e.name} x{e.repeats}" for e in nset.entries)
              + f" -> {night}", flush=True)
        ran = run_set(nset, night, say=lambda s: print(s, flush=True))
        runs = {name: [Path(r["run_dir"]) for r in rs if r["run_dir"]] for name, rs in ran.items()}
        record = {"runs": ran}
        for dirs in runs.values():
            for d in dirs:
                summary = bl.load_compared(d)
                if not (d / PERFDATA_SUBDIR).is_dir() and not bl.is_trace_replay(summary):  # PerfData: a run's figures
                    write_perfdata(d, summary)
        update_latest(root, night)
    verdict = judge(nset, runs, baseline_dir, args.update_baseline, args.max_regression)
    if args.from_runs:  # the verdict goes beside the reports, never into the judged folder
        night = night_folder(root)
        night.mkdir(parents=True)
        update_latest(root, night)
    md_path = night / "comparison.md"
    md_path.write_text(verdict.markdown)
    write_json(night / "nightly.json", {
        "kind": "hollowscale-nightly", "set": str(nset.path), "baseline": str(baseline_dir),
        "mode": "update-baseline" if args.update_baseline else "compare", "exit_code": verdict.code,
        "problems": verdict.problems, **record,
        "scenarios": {e.name: {"repeats": e.repeats, "max_regression_pct": nset.limit(e)} for e in nset.entries}})
    print(verdict.markdown)
    print(f"[nightly] {'baseline written' if args.update_baseline and verdict.code == OK else 'exit ' + str(verdict.code)}"
          f"; comparison: {md_path}")
    return verdict.code


if __name__ == "__main__":
    sys.exit(main())
