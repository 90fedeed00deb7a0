"""``hollowscale run``, ``hollowscale validate`` and ``hollowscale compare`` (mounted by hollowscale.cli)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console


@click.command("run")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--out", "out", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="Reports folder: the run writes OUT/<run-id>/ and points OUT/latest at it.")
@click.option("--keep-cluster", is_flag=True, help="Leave a local cluster this run started running afterwards.")
@click.option("--locust-processes", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Locust processes (locust --processes N) submitting the load.")
@click.option("--quiet", is_flag=True, help="No progress output (the report path is still printed).")
@click.option("--cluster", "backend", type=click.Choice(["local", "kind", "existing"]), default=None,
              help="Run on this cluster backend instead of the scenario's cluster.backend (kind: a kind cluster "
                   "of nodes built here, see docs/kind.md).")
def run_cmd(scenario: str, out: str, keep_cluster: bool, locust_processes: int, quiet: bool,
            backend: str | None) -> None:
    """Run SCENARIO end to end and write its report; exit 1 when an SLO fails, 2 when incomplete, 3 when
    every SLO is met but jobs were left unfinished or deadlocked (unless measurements.allow_unfinished).

    A scenario with `variants:` runs each variant on a fresh cluster (same arrival seed) and writes a
    comparison report beside the variants' own (exit code: the worst of them). A scenario whose
    needs (real nodes, Kueue, PyTorch, root) are not met here exits 2 before anything starts.
    A trace scenario (`workload: {trace: ...}`) is replayed as `hollowscale trace replay` does.
    """
    if _is_trace_scenario(scenario):
        from hollowscale.replay.cli import replay_cmd

        click.get_current_context().invoke(replay_cmd, scenario=scenario, out=Path(out), variants=(), seeds=())
    from hollowscale.report.verdicts import verdict_line
    from hollowscale.run.orchestrator import Runner
    from hollowscale.scenario import ScenarioError, load_scenario

    try:
        sc = load_scenario(scenario, backend)
    except ScenarioError as exc:
        raise click.ClickException(f"invalid scenario:\n{exc}") from None
    from hollowscale.setupneeds import refusal

    why_not = refusal(sc, scenario)  # before anything starts: real nodes, Kueue, PyTorch set up? root?
    if why_not:
        click.echo(f"error: {why_not}", err=True)
        sys.exit(2)
    console = Console()
    if sc.variants:
        from hollowscale.run.variants import run_variants

        code, parent, results = run_variants(sc, Path(out), keep_cluster=keep_cluster, quiet=quiet,
                                             locust_processes=locust_processes)
        console.print((parent / "comparison.md").read_text(), markup=False, highlight=False)
        click.echo(f"comparison: {parent} ({', '.join(f'{r.name}: exit {r.code}' for r in results)}; exit {code})")
        sys.exit(code)
    runner = Runner(sc, Path(out), keep_cluster=keep_cluster, quiet=quiet, locust_processes=locust_processes)
    code = runner.run()
    s = runner.summary
    console.print((runner.run_dir / "summary.md").read_text(), markup=False, highlight=False)
    click.echo(f"report: {runner.run_dir} ({verdict_line(s)}; exit {code})")
    sys.exit(code)


def _is_trace_scenario(path: str) -> bool:
    """``path`` is a trace scenario (its workload a trace); False for anything else, even unreadable."""
    from hollowscale.scenario.trace import is_trace_scenario
    from kubecore.yamlfile import load_yaml

    try:
        return is_trace_scenario(load_yaml(path))
    except Exception:  # the scenario's own loader reports what is wrong with it
        return False


@click.command("validate")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate_cmd(scenarios: tuple[str, ...]) -> None:
    """Validate scenario files; print every problem (file, field path, what was expected)."""
    from hollowscale.scenario import ScenarioError, load_scenario

    bad = 0
    for path in scenarios:
        if _is_trace_scenario(path):
            from hollowscale.replay.cli import validate_trace_file

            bad += not validate_trace_file(path)
            continue
        try:
            sc = load_scenario(path)
        except ScenarioError as exc:
            bad += 1
            click.echo(str(exc), err=True)
            continue
        click.echo(f"{path}: ok - scenario {sc.name!r}: {sc.nodes_total} nodes ({sc.gpus_total:g} GPUs) in "
                   f"{len(sc.pools)} pools, {len(sc.workloads)} workloads, {sc.arrival.curve} arrival over "
                   f"{sc.arrival.duration_s:g}s (~{sc.arrival.expected_instances():.0f} instances), "
                   f"{len(sc.faults)} faults, {len(sc.slos)} SLOs")
    if bad:
        sys.exit(1)


@click.command("compare")
@click.argument("base", type=click.Path(exists=True))
@click.argument("new", type=click.Path(exists=True))
@click.option("--max-regression", "max_regression", default=10.0, show_default=True, type=float,
              help="Fail when a figure gets worse by more than this many percent of the baseline.")
def compare_cmd(base: str, new: str, max_regression: float) -> None:
    """Compare two run folders (or summary.json files) side by side; exit 1 on a regression.

    BASE may also be a baseline of repeat runs (a folder with baseline.json, as `make nightly` writes):
    then a figure regresses only when NEW is past the band of the repeats AND beyond --max-regression.
    """
    from hollowscale.report.baseline import compare_cli, is_baseline
    from hollowscale.report.jsonfile import load_summary
    from hollowscale.report.regressions import compare, render_table

    console = Console(width=140)
    if is_baseline(Path(base)):
        try:
            code = compare_cli(Path(base), Path(new), max_regression, console)
        except (OSError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        sys.exit(code)
    if (Path(base) / "comparison.json").exists() and (Path(new) / "comparison.json").exists():
        _compare_variants(Path(base), Path(new), max_regression, console)
        return
    try:
        b, n = load_summary(Path(base)), load_summary(Path(new))
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    rows, problems = compare(b, n, max_regression)
    if b.get("scenario") != n.get("scenario"):
        console.print(f"[yellow]note: comparing different scenarios ({b.get('scenario')} vs {n.get('scenario')})[/yellow]")
    console.print(render_table(rows, str(b.get("run_id", base)), str(n.get("run_id", new))))
    if problems:
        console.print(f"[red]{len(problems)} regression(s) beyond {max_regression:g}%:[/red]")
        for p in problems:
            console.print(f"  - {p}", markup=False)
        sys.exit(1)
    console.print(f"no regression beyond {max_regression:g}%")


def _compare_variants(base: Path, new: Path, max_regression: float, console: Console) -> None:
    """Two comparison folders (``run`` of a scenario with variants): variant by variant, then the
    comparison figures side by side; exit 1 on a regression in any variant."""
    import json

    from hollowscale.report.jsonfile import load_summary
    from hollowscale.report.regressions import compare, render_table

    b_doc = json.loads((base / "comparison.json").read_text())
    n_doc = json.loads((new / "comparison.json").read_text())
    b_names = [v["name"] for v in b_doc["variants"]]
    n_names = [v["name"] for v in n_doc["variants"]]
    problems: list[str] = []
    for name in n_names:
        if name not in b_names:
            console.print(f"[yellow]variant {name} is not in the baseline; not compared[/yellow]")
            continue
        try:
            b, n = load_summary(base / name), load_summary(new / name)
        except (OSError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
            continue
        rows, found = compare(b, n, max_regression)
        console.print(render_table(rows, f"{base.name}/{name}", f"{new.name}/{name}"))
        problems += [f"{name}: {p}" for p in found]
    for name in b_names:
        if name not in n_names:
            problems.append(f"variant {name} of the baseline did not run")
    if problems:
        console.print(f"[red]{len(problems)} regression(s) beyond {max_regression:g}%:[/red]")
        for p in problems:
            console.print(f"  - {p}", markup=False)
        sys.exit(1)
    console.print(f"no regression beyond {max_regression:g}% in {len(n_names)} variant(s)")
