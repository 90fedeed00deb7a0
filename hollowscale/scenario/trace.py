"""A trace scenario: a workload trace replayed through the real scheduler, under scheduler variants.

A scenario file whose workload is a trace (``workload: {trace: ...}``) names the trace and how it is
replayed; its nodes are the trace's (every trace node a hollow node of its shape), so it has no
``pools``, ``workloads`` or ``arrival``.  Each variant runs on a fresh local cluster, once per seed::

    name: trace-alibaba-2023
    cluster: {profile: scale}
    workload:
      trace:
        pods: ../traces/alibaba-gpu-2023/openb_pod_list_default.csv
        nodes: ../traces/alibaba-gpu-2023/openb_node_list_gpu_node.csv
        mode: paper          # the paper's protocol (the only mode so far)
        demand: 1.3          # tuned to this multiple of the GPU capacity (0: the trace as it is)
        seeds: [42]          # Go seeds of the simulator's shuffle and tuning
    variants:
      - {name: default, scheduler: {profile: default}}
      - {name: packing, scheduler: {profile: packing}}
      - {name: mine, scheduler: {config: my-scheduler.yaml}}       # a KubeSchedulerConfiguration
      - {name: counted, gpus: counted}                              # nvidia.com/gpu, shares rounded up

``gpus`` says how GPUs are asked for, in the DRA part's words (:mod:`hollowscale.scenario.dra`):
``claims`` (the default: DRA devices, a claim per GPU pod) with ``gpu_sharing: true`` (a share takes
its milli-GPU of one device's ``shares``) or ``false`` (a share rounded up to a whole device), or
``counted`` (``nvidia.com/gpu``, a share rounded up).  Everything is checked before anything starts:
the file, the trace (every problem with its file, line and column), a scheduler configuration file
(:func:`scheduler_config_problems`; the runner also has kube-scheduler itself read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import StrictBool, StrictStr, model_validator

from hollowscale.cluster.components.scheduler import USER_FIELDS
from hollowscale.trace import DumpOptions, Trace, TraceError, read_trace
from kubecore.schema import (
    DnsLabel,
    DnsSubdomain,
    FieldError,
    Seconds,
    Spec,
    SpecError,
    number,
    one_of,
    raise_problems,
    validate,
)
from kubecore.yamlfile import load_yaml

#: scheduler profiles a variant may name
PROFILES = ("default", "packing")
#: the packing profile: NodeResourcesFit scoring MostAllocated (fuller nodes first) on CPU, memory and
#: counted GPUs.  With DRA devices no in-tree score sees them (DynamicResources scores only prioritized
#: lists), so there it packs by CPU and memory; a device is the allocator's first that fits.
PACKING = {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{
    "name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]}}}]}]}
MODES = ("paper",)
GPU_ASKS = ("claims", "counted")
SCHEDULER_API = "kubescheduler.config.k8s.io/v1"


class TraceWorkloadSpec(Spec):
    """The trace and how it is replayed (``workload.trace``).

    Attributes:
        pods: the pod list (CSV) or a ``kubectl get nodes,pods -A -o json`` dump, relative to the scenario.
        nodes: the node list (CSV, or a dump); a CSV pod list needs it, a dump has its own.
        mode: ``paper``: the paper's protocol (shuffle and tune with the seed, one pod at a time, each
            waiting for its verdict, unschedulable ones deleted).
        demand: the multiple of the GPU capacity the pod list is tuned to (0: the trace as it is).
        seeds: Go seeds of the shuffle and the tuning (each seed one replay per variant).
        limit_pods: replay only the first N pods of each sequence (a shorter run; None: all).
        verdict_timeout_s: how long one pod may wait for the scheduler's verdict.
        gpu_resource, model_label, share_annotation, daemonsets: how a dump is read
            (``hollowscale trace inspect --help``).
    """

    pods: StrictStr
    nodes: StrictStr | None = None
    mode: one_of(*MODES) = "paper"  # type: ignore[valid-type]
    demand: number(0, 10) = 1.3  # type: ignore[valid-type]
    seeds: tuple[Annotated[int, number(-(2**62), 2**62, integer=True)], ...] = (42,)
    limit_pods: number(1, 10_000_000, integer=True) | None = None  # type: ignore[valid-type]
    verdict_timeout_s: Seconds = 120.0
    gpu_resource: StrictStr = "nvidia.com/gpu"
    model_label: StrictStr | None = None
    share_annotation: StrictStr = "alibabacloud.com/gpu-milli"
    daemonsets: StrictBool = False

    @model_validator(mode="after")
    def _seeds(self) -> TraceWorkloadSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if not self.seeds:
            problems.append((("seeds",), "expected at least one seed"))
        if len(set(self.seeds)) != len(self.seeds):
            problems.append((("seeds",), f"expected each seed once, got {list(self.seeds)}"))
        raise_problems("TraceWorkloadSpec", problems)
        return self

    def dump_options(self) -> DumpOptions:
        return DumpOptions(gpu_resource=self.gpu_resource, model_label=self.model_label,
                           share_annotation=self.share_annotation, daemonsets=self.daemonsets)


class WorkloadSection(Spec):
    """``workload``: what the scenario replays."""

    trace: TraceWorkloadSpec


class SchedulerSpec(Spec):
    """The scheduler a variant runs: exactly one of a profile, a configuration file or a command.

    Attributes:
        profile: ``default`` (kube-scheduler's defaults) or ``packing`` (:data:`PACKING`).
        config: a ``KubeSchedulerConfiguration`` file (relative to the scenario): its profiles and
            scheduling fields (:data:`hollowscale.cluster.components.scheduler.USER_FIELDS`) are used,
            the client connection and leader election stay the run's.
        command: the user's own scheduler, started beside the control plane (argv; ``{kubeconfig}`` is
            replaced by the scheduler's kubeconfig), stopped at the end; the replay's pods name
            ``scheduler_name``.
        scheduler_name: with ``command``: the ``schedulerName`` it serves.
    """

    profile: one_of(*PROFILES) | None = None  # type: ignore[valid-type]
    config: StrictStr | None = None
    command: tuple[StrictStr, ...] = ()
    scheduler_name: DnsSubdomain | None = None

    @model_validator(mode="after")
    def _one(self) -> SchedulerSpec:
        given = [k for k in ("profile", "config", "command") if getattr(self, k)]
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if len(given) != 1:
            problems.append(((), "expected exactly one of profile, config, command, got "
                                 f"{', '.join(given) or 'none'}"))
        if self.command and not self.scheduler_name:
            problems.append((("scheduler_name",), "is required with command: the schedulerName your scheduler "
                                                  "serves (the replay's pods name it)"))
        if self.scheduler_name and not self.command:
            problems.append((("scheduler_name",), "is for a command's scheduler only"))
        raise_problems("SchedulerSpec", problems)
        return self


class TraceVariantSpec(Spec):
    """One way to replay: a scheduler and how GPUs are asked for."""

    name: DnsLabel
    scheduler: SchedulerSpec = SchedulerSpec(profile="default")
    gpus: one_of(*GPU_ASKS) = "claims"  # type: ignore[valid-type]
    gpu_sharing: StrictBool = True

    @model_validator(mode="after")
    def _sharing(self) -> TraceVariantSpec:
        if self.gpus == "counted" and self.gpu_sharing:
            raise_problems("TraceVariantSpec", [(("gpu_sharing",), "counted GPUs cannot be shared: a share is "
                                                                   "rounded up (write gpu_sharing: false)")])
        return self

    @property
    def gpu_mode(self) -> str:
        """The replay's GPU mode (:data:`hollowscale.replay.pods.GPU_MODES`)."""
        return "counted" if self.gpus == "counted" else ("dra-shared" if self.gpu_sharing else "dra-whole")


class TraceClusterSpec(Spec):
    """Where each variant runs: a fresh local cluster of this profile."""

    backend: one_of("local") = "local"  # type: ignore[valid-type]
    profile: one_of("default", "scale") = "scale"  # type: ignore[valid-type]


class TraceScenarioFile(Spec):
    """The file as written (module docstring)."""

    name: DnsLabel
    description: StrictStr = ""
    cluster: TraceClusterSpec = TraceClusterSpec()
    workload: WorkloadSection
    variants: tuple[TraceVariantSpec, ...] = (TraceVariantSpec(name="default"),)
    timeout_s: Seconds | None = None

    @model_validator(mode="after")
    def _variants(self) -> TraceScenarioFile:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if not self.variants:
            problems.append((("variants",), "expected at least one variant"))
        names = [v.name for v in self.variants]
        for i, n in enumerate(names):
            if n in names[:i]:
                problems.append((("variants", i, "name"), f"duplicate variant name {n!r}"))
        raise_problems("TraceScenarioFile", problems)
        return self


@dataclass(frozen=True)
class TraceScenario:
    """A checked trace scenario: the file, its folder, the trace, each variant's scheduler configuration."""

    file: TraceScenarioFile
    source: str
    base_dir: Path
    trace: Trace
    scheduler_configs: dict[str, dict[str, Any]]

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def spec(self) -> TraceWorkloadSpec:
        return self.file.workload.trace


def is_trace_scenario(doc: Any) -> bool:
    """A parsed scenario document whose workload is a trace."""
    return isinstance(doc, dict) and isinstance(doc.get("workload"), dict) and "trace" in doc["workload"]


def scheduler_config_problems(doc: Any, where: str) -> list[str]:
    """What is wrong with a user's KubeSchedulerConfiguration as the run would use it (the file alone;
    kube-scheduler reads it too before anything starts)."""
    if not isinstance(doc, dict):
        return [f"{where}: expected a KubeSchedulerConfiguration mapping"]
    out = []
    if doc.get("apiVersion") != SCHEDULER_API or doc.get("kind") != "KubeSchedulerConfiguration":
        out.append(f"{where}: expected apiVersion {SCHEDULER_API} and kind KubeSchedulerConfiguration, got "
                   f"{doc.get('apiVersion')!r} {doc.get('kind')!r}")
    for key in doc:
        if key in ("apiVersion", "kind"):
            continue
        if key in ("clientConnection", "leaderElection"):
            out.append(f"{where}: {key}: is the run's own (client limits of the cluster profile, leader election "
                       "on); remove it")
        elif key not in USER_FIELDS:
            out.append(f"{where}: {key}: unknown field (a run may set {', '.join(USER_FIELDS)})")
    profiles = doc.get("profiles")
    if profiles is not None:
        if not isinstance(profiles, list) or not profiles:
            out.append(f"{where}: profiles: expected a non-empty list")
        else:
            names = [p.get("schedulerName", "default-scheduler") if isinstance(p, dict) else None for p in profiles]
            if "default-scheduler" not in names:
                out.append(f"{where}: profiles: expected a profile named default-scheduler (the replay's pods "
                           f"name it), got {names}")
    return out


def load_trace_scenario(path: str | Path) -> TraceScenario:
    """Read and check a trace scenario: the file, the trace, the scheduler configuration files.

    Raises:
        SpecError: every problem, with file and field (and the trace's file, line and column).
    """
    source = str(path)
    base = Path(path).parent
    sf = validate(TraceScenarioFile, load_yaml(path), source)
    problems: list[FieldError] = []
    spec = sf.workload.trace
    trace: Trace | None = None
    try:
        trace = read_trace(base / spec.pods, base / spec.nodes if spec.nodes else None, spec.dump_options())
    except TraceError as exc:
        problems += [FieldError("workload.trace", p.render(source)) for p in exc.problems]
    configs: dict[str, dict[str, Any]] = {}
    for i, v in enumerate(sf.variants):
        s = v.scheduler
        if s.profile == "packing":
            configs[v.name] = PACKING
        elif s.config:
            file = base / s.config
            where = f"variants[{i}].scheduler.config"
            try:
                doc = load_yaml(file)
            except (OSError, SpecError, ValueError) as exc:
                problems.append(FieldError(where, f"cannot read {file}: {exc}"))
                continue
            bad = scheduler_config_problems(doc, str(file))
            problems += [FieldError(where, b) for b in bad]
            if not bad:
                configs[v.name] = {k: doc[k] for k in doc if k in USER_FIELDS}
        else:
            configs[v.name] = {}
    if trace is not None and trace.gpus == 0 and any(v.gpus == "claims" for v in sf.variants):
        problems.append(FieldError("variants", "the trace's nodes have no GPUs: no claim can be allocated"))
    if problems or trace is None:
        raise SpecError(source, problems)
    return TraceScenario(sf, source, base, trace, configs)
