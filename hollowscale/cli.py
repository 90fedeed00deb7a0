"""The ``hollowscale`` command line.

Each engine owns its own command group (``hollow.cli``, ``distill.cli``) and the orchestrator's
commands live next to what they drive; this module only mounts them, so ``hollowscale --help`` is
the one map of the product.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from hollow.dra import GPU_MODELS, SHARING, GpuSpec
from hollowscale.cluster.binaries import (
    BuildError,
    Milestone,
    ensure_binaries,
    jobset_binary,
    kubelet_binary,
    kueue_binary,
)
from hollowscale.cluster.local import DEFAULT_DIR, ClusterError, LocalCluster
from hollowscale.cluster.profiles import PROFILES
from hollowscale.cluster.realnode import RealNodeSettings

console = Console(stderr=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="hollowscale")
def main() -> None:
    """hollowscale: scale tests for Kubernetes schedulers.

    A real control plane runs as local processes; hollow GPU nodes register in it; Locust submits
    jobs; Prometheus and watches measure; reports say whether the SLOs held.

    \b
    Start here:
      hollowscale setup               build the control plane (cached; seconds when done)
      hollowscale cluster up          start etcd, apiserver, controller-manager, scheduler
      hollowscale run scenarios/default.yaml
    """


@main.command()
@click.option("--kueue", is_flag=True, envvar="HOLLOWSCALE_SETUP_KUEUE",
              help="Also build Kueue (sigs.k8s.io/kueue/cmd/kueue, for `cluster up --kueue`).")
@click.option("--jobset", is_flag=True, envvar="HOLLOWSCALE_SETUP_JOBSET",
              help="Also build JobSet (sigs.k8s.io/jobset, for `cluster up --jobset`).")
@click.option("--kubelet", is_flag=True, help="Also build the kubelet (for `cluster up --real-nodes N`).")
@click.option("--for", "scenario", metavar="SCENARIO", type=click.Path(dir_okay=False),
              help="Also build what SCENARIO needs: the kubelet when it has real nodes, Kueue when it or a "
                   "variant runs Kueue.")
@click.option("--print-needs", is_flag=True,
              help="With --for: print what SCENARIO needs as `REAL_NODES=0|1 KUEUE=0|1 EXTRAS=... ROOT=0|1` "
                   "(what scripts/setup.sh reads) and build nothing.")
@click.option("--cluster", "backend", type=click.Choice(["local", "kind", "existing"]), default=None,
              envvar="HOLLOWSCALE_CLUSTER", help="With --for: as `hollowscale run --cluster` would run SCENARIO.")
def setup(kueue: bool, jobset: bool, kubelet: bool, scenario: str | None, print_needs: bool,
          backend: str | None) -> None:
    """Build (once) and cache the control-plane binaries from the Go module proxy.

    The first build is about 10 minutes of Go on 2 cores: one line per binary as its build starts and
    ends (with its time) shows where it is, also in a log without a terminal.
    """
    if print_needs and not scenario:
        raise click.UsageError("--print-needs reads a scenario: give --for SCENARIO")
    if scenario:
        from hollowscale.scenario import ScenarioError, load_scenario
        from hollowscale.setupneeds import scenario_needs

        try:
            needs = scenario_needs(load_scenario(scenario, backend or None))
        except ScenarioError as exc:
            raise click.ClickException(f"invalid scenario:\n{exc}") from None
        if print_needs:
            click.echo(f"  {scenario} needs {needs.describe()}", err=True)
            click.echo(needs.setup_vars())
            return
        kueue, kubelet, jobset = kueue or needs.kueue, kubelet or needs.real_nodes, jobset or needs.jobset
    started = time.monotonic()
    try:
        with console.status("checking the binary cache") as status:
            bins = ensure_binaries(_setup_progress(status.update), kueue=kueue, kubelet=kubelet, jobset=jobset)
    except BuildError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
    console.print(f"control plane binaries ready ({time.monotonic() - started:.1f}s):")
    for path in bins.__dict__.values():
        click.echo(path)
    if kueue:
        click.echo(kueue_binary())
    if jobset:
        click.echo(jobset_binary())
    if kubelet:
        click.echo(kubelet_binary())


def _setup_progress(update: Callable[[str], None], quiet_s: float = 60.0) -> Callable[[str], None]:
    """Progress of ``setup``'s Go builds: milestones (a binary started or built) as lines that stay;
    package updates in the transient status line on a terminal, else one line per ``quiet_s`` seconds
    at most, so a log (CI, ``make setup > log``) is never silent for minutes."""
    last = [time.monotonic()]

    def progress(msg: str) -> None:
        now = time.monotonic()
        if isinstance(msg, Milestone):
            console.print(f"  {msg}", markup=False, highlight=False, soft_wrap=True)
            last[0] = now
        elif console.is_terminal:
            update(msg)
        elif now - last[0] >= quiet_s:
            console.print(f"    ... {msg}", markup=False, highlight=False, soft_wrap=True)
            last[0] = now

    return progress


class _ClusterCommands(click.Group):
    """The cluster commands: a folder or state that is not a cluster of ours (``ClusterError``) is one line
    and exit 1 from any of them, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ClusterError as exc:
            console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            sys.exit(1)


@main.group(cls=_ClusterCommands)
def cluster() -> None:
    """The embedded local control plane (etcd, kube-apiserver, controller-manager, scheduler)."""


_dir_option = click.option("--dir", "cluster_dir", type=click.Path(file_okay=False, path_type=Path),
                           default=DEFAULT_DIR, show_default=True, envvar="HOLLOWSCALE_CLUSTER_DIR",
                           help="Cluster directory: state, certificates, logs (env HOLLOWSCALE_CLUSTER_DIR).")


@cluster.command("up")
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="default", show_default=True,
              envvar="HOLLOWSCALE_PROFILE",
              help="default: upstream limits; scale: apiserver in-flight limits and APF off, "
                   "scheduler/controller-manager client QPS 5000/burst 10000.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="kube-apiserver port on 127.0.0.1 (0 picks a free one).")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds to wait for ready.")
@click.option("--gang-scheduling", is_flag=True,
              help="In-tree gang scheduling: alpha gates GenericWorkload, GangScheduling, WorkloadWithJob, "
                   "TopologyAwareWorkloadScheduling, WorkloadAwarePreemption and scheduling.k8s.io/v1alpha2.")
@click.option("--kueue", is_flag=True,
              help="Run Kueue too (CRDs, RBAC, webhooks for batch/v1 Jobs, fair sharing); needs root and "
                   "`hollowscale setup --kueue`.")
@click.option("--jobset", is_flag=True,
              help="Run JobSet too (its CRD, RBAC and webhooks, as its install has them); needs "
                   "`hollowscale setup --jobset`.")
@click.option("--real-nodes", type=click.IntRange(0, 250), default=0, show_default=True,
              help="Real nodes to start beside the control plane: a kubelet and its own containerd each, pods on "
                   "a private bridge (labelled hollowscale.io/node-kind=real, tainted "
                   "hollowscale.io/real-node=true:NoSchedule); needs root and `make setup-test`.")
@click.option("--fake-gpus", type=click.IntRange(0, 1024), default=0, show_default=True,
              help="With --real-nodes: each real node advertises this many fake GPUs through the device plugin.")
@click.option("--gpu-model", default="fake-gpu", show_default=True, help="The fake GPUs' model (with --fake-gpus).")
@click.option("--dra-gpus", type=click.IntRange(0, 128), default=0, show_default=True,
              help="With --real-nodes: each real node offers this many fake GPUs as DRA devices (driver and "
                   "DeviceClass gpu.nvidia.com) through the DRA kubelet plugin; pods ask by ResourceClaim.")
@click.option("--dra-model", type=click.Choice(sorted(GPU_MODELS)), default="h100-80gb", show_default=True,
              help="The DRA GPUs' model (the hollow pools' catalogue).")
@click.option("--dra-sharing", type=click.Choice(SHARING), default="none", show_default=True,
              help="memory: the DRA GPUs publish memory as consumable capacity (claims share a GPU by memory).")
@_dir_option
def cluster_up(profile: str, port: int, timeout: float, gang_scheduling: bool, kueue: bool, jobset: bool,
               real_nodes: int,
               fake_gpus: int, gpu_model: str, dra_gpus: int, dra_model: str, dra_sharing: str,
               cluster_dir: Path) -> None:
    """Start the local cluster (or reuse a running one) and print the kubeconfig path."""
    try:
        nodes = RealNodeSettings(count=real_nodes, fake_gpus=fake_gpus, gpu_model=gpu_model, dra_gpus=dra_gpus,
                                 dra=GpuSpec(expose="dra", model=dra_model, sharing=dra_sharing))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    local = LocalCluster(cluster_dir, profile=profile, apiserver_port=port, gang_scheduling=gang_scheduling,
                         kueue=kueue, real_nodes=nodes, jobset=jobset)
    started = time.monotonic()
    try:
        with console.status("starting the local cluster") as status:
            info = local.up(progress=lambda msg: status.update(msg), timeout_s=timeout)
    except ClusterError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)  # one line, however long
        sys.exit(1)
    except KeyboardInterrupt:
        console.print("interrupted: stopped everything that had started")
        sys.exit(130)
    if info.reused:
        console.print(f"cluster already running (profile {info.profile}); reusing it")
        if info.profile != profile:
            console.print(f"[yellow]note:[/yellow] it runs profile {info.profile}, not {profile}; "
                          "`hollowscale cluster down` first to change it")
    else:
        console.print(f"cluster ready in {time.monotonic() - started:.1f}s at {info.server} "
                      f"(profile {info.profile}, Kubernetes {info.kubernetes_version})")
    if info.real_nodes:
        console.print(f"real nodes: {', '.join(n.name for n in info.real_nodes)} "
                      f"(pods on {info.pod_network['bridge'] if info.pod_network else '?'}, "
                      f"{info.pod_network['cidr'] if info.pod_network else '?'})")
    click.echo(info.kubeconfig)


@cluster.command("down")
@_dir_option
def cluster_down(cluster_dir: Path) -> None:
    """Stop exactly the processes `up` started (by pid) and remove what the cluster put in its directory.

    Real nodes: their pods' containers, shims, mounts, network namespaces and the pod bridge go too.
    Only a directory `up` marked is touched; anything else found in it is left and listed, and the
    directory itself stays when it existed (empty) before `up`.

    Exit code: 0 stopped or removed, 3 no cluster in DIR (nothing stopped, nothing removed).
    """
    from hollowscale.cluster import clusterdir

    local = LocalCluster(cluster_dir)
    if not local.is_cluster_dir():
        why = "no such folder" if not local.dir.exists() else "not a hollowscale cluster folder: left as it is"
        console.print(f"[red]error:[/red] no cluster in {local.dir} ({why}); nothing stopped, nothing removed",
                      highlight=False, soft_wrap=True)
        sys.exit(3)
    marked = clusterdir.is_cluster_dir(local.dir)
    stopped = local.down()
    if not marked and not stopped:  # an older hollowscale's cluster that no longer runs: its files stay
        console.print(f"[red]error:[/red] no running cluster in {local.dir}, and its folder has no "
                      f"{clusterdir.MARKER} (an older hollowscale's): nothing removed; remove it yourself",
                      highlight=False, soft_wrap=True)
        sys.exit(3)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running", highlight=False,
                  soft_wrap=True)
    for line in local.real_node_teardown:
        console.print(f"real nodes: {line}", highlight=False, soft_wrap=True)
    for what in local.left_in_place:
        console.print(f"[yellow]left in place:[/yellow] {what}", highlight=False, soft_wrap=True)
    if local.dir_removed:
        console.print(f"removed {local.dir}", highlight=False, soft_wrap=True)
    elif not local.left_in_place:
        console.print(f"emptied {local.dir} (it existed before `up`: the folder itself stays)", highlight=False,
                      soft_wrap=True)


@cluster.command("status")
@_dir_option
def cluster_status(cluster_dir: Path) -> None:
    """Show the components with their pids, state, restarts and last exit reason.

    Components run under a supervisor that restarts one that exits (10 s backoff, doubling to 5 min,
    as the kubelet does for static pods).

    Exit code: 0 all running, 1 degraded (a component exited or waits in backoff), 3 no cluster.
    """
    local = LocalCluster(cluster_dir)
    statuses = local.status()
    if not statuses:
        click.echo(f"no cluster in {local.dir}")
        sys.exit(3)
    info = local.info()
    if info:
        click.echo(f"profile:    {info.profile}")
        click.echo(f"server:     {info.server}")
        click.echo(f"kubeconfig: {info.kubeconfig}")
        kq = info.features.get("kueue")
        click.echo(f"versions:   Kubernetes {info.kubernetes_version}, etcd {info.etcd_version}"
                   + (f", Kueue {kq['version']}" if kq else ""))
        gates = info.features.get("feature_gates") or {}
        if info.features.get("gang_scheduling"):
            shown = sorted({g.split("=")[0] for got in gates.values() for g in got})
            click.echo(f"gang:       on ({', '.join(shown)}; {info.features.get('runtime_config')})")
            for comp, dropped in (info.features.get("feature_gates_dropped") or {}).items():
                click.echo(f"{'':<12}{comp} does not know: {', '.join(dropped)}")
        else:
            click.echo("gang:       off")
        if kq:
            click.echo(f"kueue:      {', '.join(kq['frameworks'])}; fair sharing "
                       f"{'on' if kq.get('fair_sharing') else 'off'}; waitForPodsReady "
                       f"{kq['wait_for_pods_ready']['timeout'] if kq.get('wait_for_pods_ready') else 'off'}; "
                       f"webhooks {len(kq.get('webhooks') or [])}; metrics {info.metrics.get('kueue')} "
                       f"(token {info.metrics_tokens.get('kueue')})")
        else:
            click.echo("kueue:      off")
        js = info.features.get("jobset")
        click.echo(f"jobset:     {js['version']}; webhooks {len(js.get('webhooks') or [])}; metrics "
                   f"{info.metrics.get('jobset')} (token {info.metrics_tokens.get('jobset')})" if js else "jobset:     off")
        if info.real_nodes and info.pod_network:
            net = info.pod_network
            click.echo(f"real nodes: {len(info.real_nodes)} on bridge {net['bridge']} ({net['cidr']}, node IP "
                       f"{net['gateway']})")
            for n in info.real_nodes:
                gpus = f", {n.fake_gpus} x {n.gpu_model}" if n.fake_gpus else ""
                gpus += f", {n.dra_gpus} DRA GPUs" if n.dra_gpus else ""
                click.echo(f"{'':<12}{n.name}: kubelet :{n.kubelet_port} (healthz 127.0.0.1:{n.healthz_port}), "
                           f"pods {n.pod_range}, containerd {n.containerd_socket}{gpus}")
        else:
            click.echo("real nodes: none")
        click.echo(f"up for:     {time.time() - info.started_at:.0f}s")
    for s in statuses:
        state = s.state.upper() if s.state not in ("running", "stalled") else s.state
        click.echo(f"{s.name:<26} pid {s.pid:<8} {state:<8} restarts {s.restarts:<3} log {s.log}")
        if s.last_reason:
            click.echo(f"{'':<26} last exit: {s.last_reason}")
    sys.exit(0 if info and all(s.alive and s.state in ("running", "stalled") for s in statuses) else 1)


@cluster.command("fault")
@click.argument("action", type=click.Choice(["stall", "kill", "restart"]))
@click.argument("component")
@click.option("--for", "duration", default="30s", show_default=True,
              help="How long a stall lasts (Go duration or seconds): SIGSTOP, then SIGCONT.")
@_dir_option
def cluster_fault(action: str, component: str, duration: str, cluster_dir: Path) -> None:
    """Inject a control-plane fault into a running local cluster.

    \b
      stall COMPONENT --for 30s   freeze it (SIGSTOP), continue it after the duration
      kill COMPONENT              SIGKILL; the supervisor restarts it after its crash-loop backoff
      restart COMPONENT           SIGTERM and start again at once (same flags, same data dir)

    COMPONENT is etcd, kube-apiserver, kube-controller-manager, kube-scheduler (or kueue, jobset when they
    run).
    """
    from kubecore.durations import to_seconds

    try:
        seconds = to_seconds(float(duration) if duration.replace(".", "", 1).isdigit() else duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--for") from None
    local = LocalCluster(cluster_dir)
    if local.info() is None:
        console.print(f"[red]error:[/red] no running cluster in {local.dir}")
        sys.exit(3)
    try:
        ack = local.fault(action, component, seconds)
    except (ValueError, TimeoutError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(1)
    if ack.get("event") == "request-refused":
        console.print(f"[red]refused:[/red] {ack.get('why')}")
        sys.exit(1)
    console.print(f"{ack['event']} {component} (pid {ack.get('pid')})")


# --- engine and orchestrator command groups, mounted here -------------------------------------
# (each import is its owner's contract; see docs/architecture.md "Contracts")
from distill.cli import distill_group  # noqa: E402  (hollowscale distill bench|train-teacher)
from hollow.cli import nodes_group  # noqa: E402  (hollowscale nodes run ...)
from hollowscale.images.cli import images_group  # noqa: E402  (hollowscale images build)
from hollowscale.kindnode.cli import kind_group  # noqa: E402  (hollowscale kind node-image)
from hollowscale.plan.cli import plan_cmd  # noqa: E402
from hollowscale.replay.cli import trace_group  # noqa: E402  (hollowscale trace inspect|excerpt)
from hollowscale.run.cli import compare_cmd, run_cmd, validate_cmd  # noqa: E402

main.add_command(nodes_group)
main.add_command(distill_group)
main.add_command(run_cmd)
main.add_command(validate_cmd)
main.add_command(compare_cmd)
main.add_command(plan_cmd)
main.add_command(images_group)
main.add_command(trace_group)
main.add_command(kind_group)
