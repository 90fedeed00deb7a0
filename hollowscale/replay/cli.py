"""``hollowscale trace``: what a trace holds, a smaller one cut from it, a trace scenario written from it,
trace scenarios checked and replayed (mounted by hollowscale.cli)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click

from hollowscale.replay.to_scenario import CLUSTER_PROFILES
from hollowscale.scenario.trace import GPU_ASKS, MODES, PROFILES
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
      hollowscale trace to-scenario cluster.json --out scenarios/my-cluster.yaml   # then: trace replay it
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


@trace_group.command("to-scenario")
@click.argument("pods", type=click.Path(dir_okay=False))
@_dump_options
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="The scenario file to write (.yaml; never overwritten: an existing file is refused).")
@click.option("--name", default=None, help="The scenario's name (default: the file's stem as a DNS label).")
@click.option("--description", default="", help="One line saying what the scenario is for.")
@click.option("--mode", type=click.Choice(MODES), default="paper", show_default=True,
              help="paper: the paper's protocol (shuffled, tuned, one pod at a time); timed: the time-faithful "
                   "replay (each pod created and deleted at its trace times; every pod needs both).")
@click.option("--demand", type=click.FloatRange(0, 10), default=None,
              help="paper: tune the pod list to this multiple of the GPU capacity (0: as it is)  [default: 1.3]")
@click.option("--seed", "seeds", multiple=True, type=int,
              help="paper: a Go seed of the shuffle and the tuning, one replay per variant each (repeat)  "
                   "[default: 42]")
@click.option("--compress", type=click.FloatRange(0, min_open=True), default=None,
              help="timed (required there): trace seconds per replay second (10000: 149 days in ~21 minutes).")
@click.option("--window-start", type=click.FloatRange(0), default=None,
              help="timed: replay only the pods created from this trace second on.")
@click.option("--window-end", type=click.FloatRange(0), default=None,
              help="timed: replay only the pods created before this trace second, and end there.")
@click.option("--profile", "cluster_profile", type=click.Choice(CLUSTER_PROFILES), default="scale",
              show_default=True, help="The local cluster's profile each variant runs on.")
@click.option("--variant", "variants", multiple=True, type=click.Choice(PROFILES),
              help="A variant with this scheduler profile, named after it (repeat; default: default and packing "
                   "when neither this nor --scheduler-config is given).")
@click.option("--scheduler-config", "configs", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A variant with your KubeSchedulerConfiguration, named after the file's stem (repeat).")
@click.option("--gpus", type=click.Choice(GPU_ASKS), default="claims", show_default=True,
              help="How every variant asks for GPUs: DRA claims, or counted nvidia.com/gpu (a share rounded up).")
@click.option("--gpu-sharing/--no-gpu-sharing", "gpu_sharing", default=None,
              help="With claims: a GPU share takes its milli-GPU of a device (default), or a whole device.")
def to_scenario_cmd(pods: str, nodes: str | None, gpu_resource: str, model_label: str | None,
                    share_annotation: str, daemonsets: bool, out: Path, name: str | None, description: str,
                    mode: str, demand: float | None, seeds: tuple[int, ...], compress: float | None,
                    window_start: float | None, window_end: float | None, cluster_profile: str,
                    variants: tuple[str, ...], configs: tuple[str, ...], gpus: str, gpu_sharing: bool | None) -> None:
    """Write a trace scenario file OUT that replays trace PODS: the trace is read and checked first (a bad
    one is refused with file, line and column before anything is written), its files are named relative
    to OUT's folder, and OUT is read back as `hollowscale trace replay` will before success is said.

    OUT is never overwritten; its folder is made when missing.  When the written file is refused (a
    scheduler configuration, a trace without GPUs for DRA claims, a timed replay of pods without times),
    it is removed again, with the folder made for it.  A comment at its top says what it replays, the
    command that wrote it and how to run it.

    \b
      hollowscale trace to-scenario traces/alibaba-gpu-2023/openb_pod_list_default.csv \\
          --nodes traces/alibaba-gpu-2023/openb_node_list_gpu_node.csv \\
          --out scenarios/mine.yaml --demand 1.1 --seed 1 --seed 2 \\
          --variant default --scheduler-config my-scheduler.yaml
      hollowscale trace to-scenario cluster.json --out scenarios/my-cluster.yaml --gpus counted
      hollowscale trace to-scenario PODS --nodes NODES --out timed.yaml --mode timed --compress 10000
      hollowscale trace replay scenarios/mine.yaml

    Exit code: 0 written and read back, 1 refused (the trace, OUT exists, the scenario; nothing is left
    behind), 2 a wrong option.
    """
    from hollowscale.replay import to_scenario as ts
    from hollowscale.report.numbers import number

    if out.suffix.lower() not in ts.SUFFIXES:
        raise click.BadParameter(f"{out}: expected a YAML file name ({', '.join(ts.SUFFIXES)})", param_hint="--out")
    if gpus == "counted" and gpu_sharing:
        raise click.BadParameter("counted GPUs cannot be shared (a share is rounded up): leave it out or write "
                                 "--no-gpu-sharing", param_hint="--gpu-sharing")
    if "\n" in description or "\r" in description:
        raise click.BadParameter("expected one line", param_hint="--description")
    sharing = gpus == "claims" if gpu_sharing is None else gpu_sharing
    timed_keys = {"--compress": compress, "--window-start": window_start, "--window-end": window_end}
    if mode == "paper":
        given = [k for k, v in timed_keys.items() if v is not None]
        if given:
            raise click.BadParameter("is for --mode timed only", param_hint=given[0])
        demand, seeds = 1.3 if demand is None else demand, seeds or (42,)
    else:
        given = [k for k, v in {"--demand": demand, "--seed": seeds or None}.items() if v is not None]
        if given:
            raise click.BadParameter(f"is for --mode paper only: a {mode} replay plays the trace's own pods as they "
                                     "are, once per variant", param_hint=given[0])
        if mode == "timed" and compress is None:
            raise click.BadParameter("is required with --mode timed: trace seconds per replay second",
                                     param_hint="--compress")
    trace = _read(pods, nodes, gpu_resource, model_label, share_annotation, daemonsets)
    if os.path.lexists(out):
        raise click.ClickException(f"{out} exists: not overwritten (choose another --out, or move it away yourself)")
    options = DumpOptions(gpu_resource=gpu_resource, model_label=model_label, share_annotation=share_annotation,
                          daemonsets=daemonsets)
    name = name if name is not None else ts.dns_label(out.stem)
    doc = ts.scenario_doc(name=name, description=description, pods=pods, nodes=nodes, base=out.parent,
                          options=options, mode=mode, demand=demand, seeds=seeds if mode == "paper" else None,
                          compress=compress, window=(window_start, window_end), cluster_profile=cluster_profile,
                          variants=ts.variant_choices(variants, configs), gpus=gpus, gpu_sharing=sharing)
    args = [pods, *(["--nodes", nodes] if nodes else [])]
    args += [f"--{k.replace('_', '-')}" + ("" if v is True else f"={v}")
             for k, v in ts.dump_keys(pods, nodes, options).items()]
    args += ["--out", str(out), "--name", name, *(["--description", description] if description else []),
             "--mode", mode, *(["--demand", _figure(demand)] if demand is not None else []),
             *(a for s in seeds for a in ("--seed", str(s))),
             *(a for k, v in timed_keys.items() if v is not None for a in (k, _figure(v))),
             "--profile", cluster_profile, *(a for v in variants for a in ("--variant", v)),
             *(a for c in configs for a in ("--scheduler-config", c)), "--gpus", gpus,
             "--gpu-sharing" if sharing else "--no-gpu-sharing"]
    try:
        written = ts.write_scenario(out, doc, ts.header(trace, doc, ts.command_line(args), out))
    except ts.WriteRefused as exc:
        raise click.ClickException(str(exc)) from None
    t = written.trace
    click.echo(f"{out}: trace scenario {written.name!r}: {number(len(t.nodes))} nodes ({number(t.gpus)} GPUs), "
               f"{number(len(t.pods))} pods; variants {', '.join(v.name for v in written.file.variants)}; replay: "
               f"hollowscale trace replay {shlex.quote(str(out))}")


def _figure(v: float) -> str:
    """A float option as typed back (``10000``, ``1.3``)."""
    return str(int(v)) if v.is_integer() else repr(v)


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
    if s.mode == "timed":
        w = s.window
        window = "the whole trace" if w is None else (
            f"trace seconds {'the first creation' if w.start_s is None else number(w.start_s, 1, trim=True)} to "
            f"{'the last deletion' if w.end_s is None else number(w.end_s, 1, trim=True)}")
        how = f"timed replay compressed {number(s.compress or 0, 2, trim=True)}x over {window}, once per variant"
    else:
        how = (f"{s.mode} protocol tuned to {number(s.demand, 2, trim=True)}x, seeds "
               f"{', '.join(map(str, s.seeds))}")
    click.echo(f"{path}: ok - trace scenario {ts.name!r}: {number(len(ts.trace.nodes))} nodes "
               f"({number(ts.trace.gpus)} GPUs), {number(len(ts.trace.pods))} pods, {how}; variants "
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
