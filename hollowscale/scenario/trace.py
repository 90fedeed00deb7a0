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
        mode: paper          # the paper's protocol (or timed: below)
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
``counted`` (``nvidia.com/gpu``, a share rounded up).

``mode: timed`` is the time-faithful replay (:mod:`hollowscale.replay.timed`): the trace's own pods as
they are (no tuning, no shuffle: ``demand`` and ``seeds`` are refused; a timed replay is deterministic
and runs once per variant), each created at its ``creation_time`` and deleted at its ``deletion_time``,
both divided by ``compress`` (trace seconds per replay second, required, > 0), bound or still pending;
``window: {start_s, end_s}`` (trace seconds) keeps only the pods created inside it and ends the replay
at ``end_s``.  Every pod of the trace needs both times::

    workload:
      trace:
        pods: ../traces/alibaba-gpu-2023/openb_pod_list_default.csv
        nodes: ../traces/alibaba-gpu-2023/openb_node_list_gpu_node.csv
        mode: timed
        compress: 10000      # 149 days in ~21 minutes
        window: {start_s: 9500000, end_s: 10364000}   # optional

Everything is checked before anything starts:
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
MODES = ("paper", "timed")
GPU_ASKS = ("claims", "counted")
SCHEDULER_API = "kubescheduler.config.k8s.io/v1"


class TimeWindow(Spec):
    """The part of a trace a timed replay plays (``workload.trace.window``), in trace seconds.

    Attributes:
        start_s: the replay's start: pods created before it are left out (None: the earliest creation).
        end_s: the replay's end: pods created at or after it are left out, pods still running then are
            deleted then (None: the last deletion).
    """

    start_s: number(0, None) | None = None  # type: ignore[valid-type]
    end_s: number(0, None) | None = None  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _order(self) -> TimeWindow:
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise_problems("TimeWindow", [(("end_s",), f"expected a number > start_s ({self.start_s:g}), "
                                                       f"got {self.end_s:g}")])
        return self


#: fields only one mode reads: in the other a value is refused rather than ignored
PAPER_ONLY = ("demand", "seeds", "verdict_timeout_s")
TIMED_ONLY = ("compress", "window")


class TraceWorkloadSpec(Spec):
    """The trace and how it is replayed (``workload.trace``).

    Attributes:
        pods: the pod list (CSV) or a ``kubectl get nodes,pods -A -o json`` dump, relative to the scenario.
        nodes: the node list (CSV, or a dump); a CSV pod list needs it, a dump has its own.
        mode: ``paper``: the paper's protocol (shuffle and tune with the seed, one pod at a time, each
            waiting for its verdict, unschedulable ones deleted); ``timed``: the time-faithful replay
            (module docstring).
        demand: the multiple of the GPU capacity the pod list is tuned to (0: the trace as it is); paper only.
        seeds: Go seeds of the shuffle and the tuning (each seed one replay per variant); paper only.
        limit_pods: replay only the first N pods of each sequence (timed: the first N created; None: all).
        verdict_timeout_s: how long one pod may wait for the scheduler's verdict; paper only.
        compress: timed only (required there): trace seconds per replay second.
        window: timed only: the part of the trace replayed (:class:`TimeWindow`; None: all of it).
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
    compress: number(0, None, lo_open=True) | None = None  # type: ignore[valid-type]
    window: TimeWindow | None = None
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
        given = self.model_fields_set
        if self.mode == "timed":
            if self.compress is None:
                problems.append((("compress",), "is required with mode timed: trace seconds per replay second "
                                                "(e.g. 10000 plays 149 days in ~21 minutes)"))
            why = {"demand": "a timed replay plays the trace's own pods as they are (no tuning); remove it",
                   "seeds": "a timed replay is deterministic (no shuffle, no tuning) and runs once per variant; "
                            "remove it",
                   "verdict_timeout_s": "a timed replay waits for no verdict (pods end at their deletion time); "
                                        "remove it"}
            problems += [((k,), why[k]) for k in PAPER_ONLY if k in given]
        else:
            problems += [((k,), f"is for mode timed only (mode is {self.mode}); remove it")
                         for k in TIMED_ONLY if getattr(self, k) is not None]
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


def timed_problems(trace: Trace, spec: TraceWorkloadSpec) -> list[FieldError]:
    """Why ``trace`` cannot be replayed time-faithfully as ``spec`` asks: pods without a creation or a
    deletion time (the first few with file, line and column, then a count), a window no pod is created in."""
    untimed = [p for p in trace.pods if p.creation_s is None or p.deletion_s is None]
    if untimed:
        shown = [trace.problem(p, "creation_time" if p.creation_s is None else "deletion_time",
                               "a time-faithful replay needs a creation and a deletion time on every pod")
                 .render(trace.pods_source) for p in untimed[:5]]
        more = f" (and {len(untimed) - 5} more pods)" if len(untimed) > 5 else ""
        return [FieldError("workload.trace.mode", f"timed: {len(untimed)} of {len(trace.pods)} pods lack a "
                                                  f"creation or deletion time{more}: " + "; ".join(shown))]
    w = spec.window
    if w is not None:
        start = w.start_s if w.start_s is not None else float("-inf")
        end = w.end_s if w.end_s is not None else float("inf")
        if not any(start <= (p.creation_s or 0) < end for p in trace.pods):
            first = min(p.creation_s or 0 for p in trace.pods)
            last = max(p.creation_s or 0 for p in trace.pods)
            return [FieldError("workload.trace.window", f"no pod of the trace is created inside it (pods are "
                                                        f"created from {first} to {last} s)")]
    return []


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
    if trace is not None and spec.mode == "timed":
        problems += timed_problems(trace, spec)
    if trace is not None and trace.gpus == 0 and any(v.gpus == "claims" for v in sf.variants):
        problems.append(FieldError("variants", "the trace's nodes have no GPUs: no claim can be allocated"))
    if problems or trace is None:
        raise SpecError(source, problems)
    return TraceScenario(sf, source, base, trace, configs)
