"""``hollowscale trace``: what a trace holds, a smaller one cut from it, trace scenarios checked and replayed
(mounted by hollowscale.cli)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hollowscale.trace import DumpOptions, Trace, TraceError, excerpt, inspect_trace, read_trace, write_trace
from hollowscale.trace.kubedump import GPU_RESOURCE, MODEL_LABELS, SHARE_ANNOTATION


def _dump_options(f: click.decorators.FC) -> click.decorators.FC:
    """The options that say how a cluster dump is read."""
    for opt in reversed([
        click.option("--nodes", "nodes", type=click.Path(dir_okay=False),
                     help="The node list (CSV, or a dump's nodes); a CSV pod list needs it, a dump has its own."),
        click.option("--gpu-resource", default=GPU_RESOURCE, show_default=True,
                     help="A dump: the extended resource that counts GPUs."),
        click.option("--model-label", default=None,
                     help=f"A dump: the node label naming the GPU model (default: the first of "
                          f"{', '.join(MODEL_LABELS)} the GPU nodes carry)."),
        click.option("--share-annotation", default=SHARE_ANNOTATION, show_default=True,
                     help="A dump: the pod annotation with a one-GPU pod's share in milli-GPU."),
        click.option("--daemonsets", is_flag=True, help="A dump: keep DaemonSet pods (left out by default)."),
    ]):
        f = opt(f)
    return f


def _read(pods: str, nodes: str | None, gpu_resource: str, model_label: str | None, share_annotation: str,
          daemonsets: bool) -> Trace:
    try:
        return read_trace(pods, nodes, DumpOptions(gpu_resource=gpu_resource, model_label=model_label,
                                                   share_annotation=share_annotation, daemonsets=daemonsets))
    except TraceError as exc:
        raise click.ClickException(f"invalid trace ({len(exc.problems)} problem(s)):\n{exc}") from None


@click.group("trace")
def trace_group() -> None:
    """Workload traces: Alibaba's GPU-sharing trace (traces/alibaba-gpu-2023/) or your own cluster's.

    A trace is a pod list and a node list in the CSV columns of traces/alibaba-gpu-2023/README.md, or a
    `kubectl get nodes,pods -A -o json` dump (docs/trace-format.md).  Every problem of a trace is
    reported with file, line and column (or field) before anything starts.

    \b
      hollowscale trace inspect traces/alibaba-gpu-2023/openb_pod_list_default.csv \\
          --nodes traces/alibaba-gpu-2023/openb_node_list_gpu_node.csv
      hollowscale trace inspect cluster.json
    """


@trace_group.command("inspect")
@click.argument("pods", type=click.Path(dir_okay=False))
@_dump_options
@click.option("--json", "as_json", is_flag=True, help="The figures as JSON.")
def inspect_cmd(pods: str, nodes: str | None, gpu_resource: str, model_label: str | None, share_annotation: str,
                daemonsets: bool, as_json: bool) -> None:
    """What trace PODS holds: nodes by GPU model, pods by kind (CPU-only, GPU share, one whole GPU,
    multi-GPU), demand against capacity, model constraints, QoS, phases, times.

    Exit code: 0 read and printed, 1 the trace is refused (every problem printed).
    """
    from hollowscale.replay.inspection import inspect_text

    figures = inspect_trace(_read(pods, nodes, gpu_resource, model_label, share_annotation, daemonsets))
    click.echo(json.dumps(figures, indent=2) if as_json else inspect_text(figures), nl=as_json)


@trace_group.command("excerpt")
@click.argument("pods", type=click.Path(dir_okay=False))
@_dump_options
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for nodes.csv and pods.csv (made when absent).")
@click.option("--node-count", type=click.IntRange(1), default=None, help="Nodes to keep (default: all).")
@click.option("--pod-count", type=click.IntRange(1), default=None, help="Pods to keep (default: all that fit).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draw.")
def excerpt_cmd(pods: str, nodes: str | None, gpu_resource: str, model_label: str | None, share_annotation: str,
                daemonsets: bool, out: Path, node_count: int | None, pod_count: int | None, seed: int) -> None:
    """Write trace PODS, or a smaller trace cut from it, as OUT/nodes.csv and OUT/pods.csv.

    Node shapes stay in proportion; pods are drawn among those that fit a kept node.  Without counts the
    whole trace is written: a cluster dump becomes the CSV format.
    """
    trace = _read(pods, nodes, gpu_resource, model_label, share_annotation, daemonsets)
    if node_count is not None or pod_count is not None:
        trace = excerpt(trace, node_count or len(trace.nodes), pod_count or len(trace.pods), seed)
    write_trace(trace, out / "pods.csv", out / "nodes.csv")
    click.echo(f"{out / 'nodes.csv'}: {len(trace.nodes)} nodes; {out / 'pods.csv'}: {len(trace.pods)} pods")


def validate_trace_file(path: str) -> bool:
    """Check one trace scenario file; print it ok or every problem; whether it is ok."""
    from hollowscale.report.numbers import number
    from hollowscale.scenario.trace import load_trace_scenario
    from kubecore.schema import SpecError

    try:
        ts = load_trace_scenario(path)
    except SpecError as exc:
        click.echo(str(exc), err=True)
        return False
    s = ts.spec
    click.echo(f"{path}: ok - trace scenario {ts.name!r}: {number(len(ts.trace.nodes))} nodes "
               f"({number(ts.trace.gpus)} GPUs), {number(len(ts.trace.pods))} pods, {s.mode} protocol tuned to "
               f"{number(s.demand, 2, trim=True)}x, seeds {', '.join(map(str, s.seeds))}; variants "
               f"{', '.join(v.name for v in ts.file.variants)}")
    return True


@trace_group.command("validate")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate_cmd(scenarios: tuple[str, ...]) -> None:
    """Check trace scenario files (the file, the trace, the variants' scheduler configurations) and print
    every problem with its file and field (and the trace's file, line and column)."""
    bad = sum(not validate_trace_file(path) for path in scenarios)
    if bad:
        sys.exit(1)


@trace_group.command("replay")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--out", "out", default="reports", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Reports folder: the run writes OUT/<stamp>-<scenario>/ (a folder per variant and seed, and the "
                   "comparison).")
@click.option("--variant", "variants", multiple=True, help="Only this variant (repeat for more).")
@click.option("--seed", "seeds", multiple=True, type=int, help="These seeds instead of the scenario's (repeat).")
def replay_cmd(scenario: str, out: Path, variants: tuple[str, ...], seeds: tuple[int, ...]) -> None:
    """Replay a trace scenario: each variant on a fresh local cluster, once per seed, then the comparison.

    Exit code: 0 every replay complete and every check passed, 1 a check failed, 2 a replay incomplete
    (or the scenario refused), 130 interrupted.
    """
    from hollowscale.replay.run import run_scenario
    from hollowscale.scenario.trace import load_trace_scenario
    from kubecore.schema import SpecError

    try:
        ts = load_trace_scenario(scenario)
    except SpecError as exc:
        click.echo(f"invalid trace scenario:\n{exc}", err=True)
        sys.exit(2)
    unknown = [v for v in variants if v not in {x.name for x in ts.file.variants}]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: not a variant of {scenario}", param_hint="--variant")
    code, parent, results = run_scenario(ts, out, list(variants) or None, list(seeds) or None,
                                         log=lambda m: click.echo(m, err=True))
    click.echo((parent / "comparison.md").read_text())
    click.echo(f"report: {parent} ({', '.join(f'{r.variant}/seed {r.seed}: exit {r.code}' for r in results)}; "
               f"exit {code})")
    sys.exit(code)
