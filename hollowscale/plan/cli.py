"""``hollowscale plan SCENARIO``: the capacity plan of a scenario with a ``sweep:`` section."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console


@click.command("plan")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--out", "out", default=None, type=click.Path(file_okay=False),
              help="Plan folder (default reports/plan/<scenario name>): plan.json (the measured points, "
                   "for resuming), points/<run>/ (each point's run report), capacity.json/.md/.html.")
@click.option("--resume/--fresh", default=True, show_default=True,
              help="--resume skips the points plan.json already holds (an interrupted plan continues); "
                   "--fresh measures everything again.")
@click.option("--quiet", is_flag=True, help="No progress lines (the report paths are still printed).")
def plan_cmd(scenario: str, out: str | None, resume: bool, quiet: bool) -> None:
    """Find, per cluster size, mix and profile, the highest arrival rate each SLO holds at (the knee).

    \b
    The scenario's `sweep:` section gives the sizes (nodes per pool), mixes, profiles, the rate range
    and resolution of the bisection, the warm-up and measured seconds of each point.  Each point is a
    short run at a constant rate on a local cluster reused across the points of a profile; its figures
    come from objects created after the warm-up; it passes an SLO when the SLO is met AND the backlog
    of unfinished objects is not growing.  Progress lines show each point and an ETA; Ctrl-C stops
    cleanly (the cluster the plan started is stopped) and a second `hollowscale plan` continues.
    Exit 0 when the report is written, 130 when interrupted, 1 on bad input (file, field, expected).
    """
    from hollowscale.cluster.local import ClusterError, LocalCluster
    from hollowscale.plan.grid import check_points
    from hollowscale.plan.planner import Planner
    from hollowscale.plan.points import PointInterrupted
    from hollowscale.plan.report import write_capacity_report
    from hollowscale.plan.state import PlanState, PlanStateError, fingerprint
    from hollowscale.scenario import ScenarioError, parse_scenario
    from kubecore.yamlfile import load_yaml

    console = Console(stderr=True)
    try:
        doc = load_yaml(scenario)
        sc = parse_scenario(doc, scenario, Path(scenario).parent)
    except ScenarioError as exc:
        raise click.ClickException(f"invalid scenario:\n{exc}") from None
    except OSError as exc:
        raise click.ClickException(f"cannot read {scenario}: {exc}") from None
    if sc.sweep is None:
        raise click.ClickException(f"{scenario}: no `sweep:` section (sizes, rate: {{lo, hi, resolution}}, warmup_s, "
                                   "measure_s): a plan needs one; see scenarios/plan-small.yaml")
    try:
        check_points(doc, scenario, sc.sweep, str(Path(scenario).parent))
    except ScenarioError as exc:
        raise click.ClickException(f"invalid scenario (a point of the plan):\n{exc}") from None
    folder = Path(out) if out else Path("reports") / "plan" / sc.name
    try:
        # what decides the points, not where the file was read from
        state = PlanState(folder, fingerprint({k: v for k, v in sc.to_dict().items() if k != "source"}),
                          fresh=not resume)
    except PlanStateError as exc:
        raise click.ClickException(str(exc)) from None

    def log(msg: str) -> None:
        if not quiet:
            console.print(msg, highlight=False, markup=False)

    def up(profile: str, d: str, limits: dict[str, tuple[float, int]]) -> tuple[Any, Any]:
        local = LocalCluster(Path(d), profile=profile, client_limits=limits)
        t = time.monotonic()
        running_before = local.info() is not None
        try:
            info = local.up(progress=lambda m: log(f"  cluster: {m}"), timeout_s=240)
        except BaseException:
            if not running_before:  # Ctrl-C or a failure while starting: leave nothing behind
                local.down()
            raise
        if info.profile != profile:
            raise click.ClickException(f"the cluster running in {d} has profile {info.profile!r}, the plan needs "
                                       f"{profile!r}: stop it (hollowscale cluster down --dir {d})")
        wrong = {c: v for c, v in limits.items() if tuple(info.client_qps.get(f"kube-{c}", info.client_qps.get(c, ()))) != v}
        if wrong:
            raise click.ClickException(f"the cluster running in {d} has other client limits than the plan's {wrong}: "
                                       f"stop it (hollowscale cluster down --dir {d})")
        log(f"cluster {d} ({profile}): {'reused, left running after' if info.reused else 'started'} "
            f"in {time.monotonic() - t:.0f}s")

        def stop() -> None:
            if not info.reused:
                log(f"stopping the cluster the plan started ({d})")
                local.down()

        return info, stop

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    if state.resumed:
        log(f"resuming {folder}: {state.resumed} point(s) measured before")
    planner = Planner(doc, sc, state, folder, log)
    log(f"plan {sc.name}: {len(planner.cells)} cell(s) x bisection on rate {sc.sweep.rate.lo:g}..{sc.sweep.rate.hi:g}/s "
        f"(resolution {sc.sweep.rate.resolution:g}), about {planner.expected_points()} points of "
        f"{sc.sweep.warmup_s + sc.sweep.measure_s:g}s load; SLOs: {', '.join(s.name for s in planner.slos)}")
    try:
        result = planner.run(up)
    except (KeyboardInterrupt, PointInterrupted):
        click.echo(f"interrupted: {len(state.points)} point(s) kept in {state.path}; run the same command again to "
                   "continue", err=True)
        sys.exit(130)
    except ClusterError as exc:  # a cluster folder that is not ours, a port in use, a missing binary
        raise click.ClickException(f"{exc} ({len(state.points)} point(s) kept in {state.path})") from None
    except ScenarioError as exc:  # check_points saw every point's shape: a safety net, one line per problem
        raise click.ClickException(f"invalid scenario (a point of the plan):\n{exc}") from None
    finally:
        signal.signal(signal.SIGTERM, old)
    paths = write_capacity_report(folder, sc, planner, result)
    click.echo(f"capacity report: {', '.join(str(p) for p in paths)} ({result.measured} point(s) measured, "
               f"{result.reused} reused, {result.wall_s:.0f}s)")
