"""Typed scenario: what a run does, validated before anything starts.

A scenario file composes the engines' own specs — ``pools`` is the hollow agent's
(:class:`hollow.pools.PoolSpec`), ``workloads`` and ``arrival`` are the load generator's
(:class:`loadgen.spec.WorkloadSpec`, :class:`loadgen.spec.ArrivalSpec`) — and adds what only the
orchestrator knows: where the cluster is, how many agents, faults, measurements, SLOs.  Validation
is pydantic through :mod:`kubecore.schema` (one policy: every error collected, each with file, field
path, what was given and what was expected; unknown keys refused; snake_case keys throughout).

Units are in the field names (``_s`` seconds, ``_pct`` percent); durations may be written as Go
durations (``90s``, ``5m``) or numbers of seconds.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, StrictBool, StrictInt, StrictStr, TypeAdapter, ValidationError, model_validator

from hollow.pools import Pools, PoolSpec, pools_to_doc
from hollowscale.paths import REPO_ROOT
from hollowscale.scenario.batch import (
    CohortSpec,
    PodsReadySpec,
    PriorityClassSpec,
    TenantSpec,
    VariantSpec,
    check_quotas,
    check_tenants,
    check_topology,
    check_variants,
    topology_keys,
)
from hollowscale.scenario.distill import DISTILL_FAULTS, DistillJobSpec
from hollowscale.scenario.dra import apply_gpu_mode, claim_problems, variant_claim_problems
from hollowscale.scenario.realgpus import RealNodeGpus, distill_gpu_problems, real_node_gpu_problems
from hollowscale.scenario.sweep import SweepSpec, sweep_problems
from kubecore.quantity import parse_quantity
from kubecore.schema import (
    DnsLabel,
    DnsSubdomain,
    Seconds,
    Spec,
    field_errors,
    leaf,
    number,
    one_of,
    raise_problems,
    show,
)
from loadgen.spec import ArrivalSpec, LoadSpec, Namespace, TenantLoad, Workloads, WorkloadSpec

BACKENDS = ("local", "kind", "existing")
PROFILES = ("default", "scale")
PLACEMENTS = ("process", "in-cluster")
AGENT_FAULTS = ("heartbeat-loss", "pod-failures")
#: faults that take hollow nodes away: lost (NotReady, then deleted) or drained (cordoned, pods evicted)
NODE_FAULTS = ("node-lost", "node-drain")
COMPONENT_FAULTS = ("component-stall", "component-kill", "component-restart")
FAULT_TYPES = AGENT_FAULTS + NODE_FAULTS + COMPONENT_FAULTS + DISTILL_FAULTS
#: the faults a ``rate_per_gpu_hour`` may make a process of
PROCESS_FAULTS = ("node-lost", "node-drain", "pod-failures")
#: how long a lost node stays NotReady before its Node object is deleted, when ``delete_after_s`` is not given
NODE_LOST_DELETE_AFTER_S = 60.0
#: what a control-plane fault may target (the local cluster's supervised components)
FAULT_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue")
SLO_OPS = ("<=", ">=", "<", ">")

#: Leaves of ``measurements`` an SLO may name: prefix -> allowed leaves.
SLO_METRICS: dict[str, tuple[str, ...]] = {
    "pod_startup_latency_ms": ("p50", "p90", "p99"),
    "pod_scheduling_latency_ms": ("p50", "p90", "p99"),
    "job_completion_time_s": ("p50", "p90", "p99"),
    "gpu_queue_wait_s": ("p50", "p90", "p99"),
    "scheduling_throughput_pods_per_s": ("avg", "p50", "max"),
    "gpu_allocation_pct": ("avg", "max"),
    "pending_pods": ("avg", "max"),
    "jobs": ("submitted", "completed", "failed", "unfinished"),
    "crosscheck": ("diff_pct",),
    "api_latency_ms": ("p50", "p99"),  # api_latency_ms.<VERB>.p99
    "api_latency_slo_ms": ("p50", "p99"),  # api_latency_slo_ms.<mutating|read_object|read_list>.p99
    "distill": ("jobs", "failed_jobs", "lost_samples", "accuracy_gap_pts"),  # the real distillation jobs
    "fault_recovery_s": ("max", "p50", "unrecovered"),
    "integrity": ("jobs_lost", "pods_lost", "bindings_lost", "double_counted"),
    # DRA claims and devices (hollowscale/dra/figures.py)
    "dra": ("claims_left_allocated", "claims_never_allocated", "gpus_allocated_avg", "gpus_allocated_max",
            "pods_per_gpu_max", "fragmented_gpus_max", "claim_to_running_ms_p99"),
}
_API_GROUPS = ("mutating", "read_object", "read_list")


def slo_metric_problem(metric: str) -> str | None:
    """Why ``metric`` is not a measurement an SLO can name, or None when it is."""
    parts = metric.split(".")
    head = parts[0]
    if head not in SLO_METRICS:
        return f"expected a metric path starting with one of {', '.join(sorted(SLO_METRICS))}, got {metric!r}"
    leaves = SLO_METRICS[head]
    if head in ("api_latency_ms", "api_latency_slo_ms"):
        what = "VERB" if head == "api_latency_ms" else "|".join(_API_GROUPS)
        if len(parts) != 3 or parts[2] not in leaves or (head == "api_latency_slo_ms" and parts[1] not in _API_GROUPS):
            return f"expected {head}.<{what}>.<p50|p99>, got {metric!r}"
        return None
    if len(parts) != 2 or parts[1] not in leaves:
        return f"expected {head}.<{'|'.join(leaves)}>, got {metric!r}"
    return None


def _slo_metric(value: str) -> str:
    msg = slo_metric_problem(value)
    if msg:
        from kubecore.schema import problem

        raise problem(msg)
    return value


SloMetric = Annotated[StrictStr, AfterValidator(_slo_metric)]


class ClusterSpec(Spec):
    """Where the run happens.

    Attributes:
        backend: ``local`` (processes started by hollowscale), ``kind`` (a kind cluster named
            ``hollowscale`` shaped by ``kind_config``, of nodes built here and run by hollowscale's own
            podman (:mod:`hollowscale.kindnode`), created when absent and deleted after only then; its
            workers run the distill jobs) or ``existing`` (any kubeconfig).
        profile: ``default`` keeps upstream limits, ``scale`` lifts client QPS and in-flight limits.
        kubeconfig: for ``kind``/``existing``; when absent, ``$KUBECONFIG`` then ``~/.kube/config``.
        dir: local cluster folder (default ``.hollowscale/cluster`` for the default profile,
            ``.hollowscale/cluster-scale`` for ``scale``).
        scheduler_name: ``spec.schedulerName`` of every submitted pod.
        namespace: namespace the load is submitted to; created (and deleted after) when absent, else
            used as it is and only the run's own objects are deleted after.  With ``tenants``, the
            default prefix of their namespaces.
        gang_scheduling: the local cluster runs kube-scheduler's in-tree gang scheduling (alpha
            gates, ``scheduling.k8s.io/v1alpha2`` Workload/PodGroup); gang workloads get a PodGroup.
        kueue: the local cluster runs Kueue; queued workloads go to their tenant's LocalQueue.
        jobset: the local cluster runs JobSet (:mod:`hollowscale.cluster.jobset`): its CRD, webhooks and
            controller, as its install has them.
        kueue_pods_ready: Kueue's ``waitForPodsReady`` (:class:`~hollowscale.scenario.batch.PodsReadySpec`:
            timeout, recovery timeout, requeuing backoff); unset: Kueue's as the local cluster configures it
            (timeout 5 min, the recovery timeout the same, Kueue's own backoff).  A variant may set its own.
        volcano: the cluster (``existing`` or ``kind``) runs Volcano: Job workloads are submitted as
            Volcano Jobs (``schedulerName: volcano``, ``minAvailable``, the tenant's Volcano Queue).
            Not run by hollowscale's own tests: no Volcano is available here.
        real_nodes: real kubelets (each with its own containerd) the local cluster starts beside the
            hollow nodes, labelled ``hollowscale.io/node-kind=real`` and tainted so hollow workloads
            never land there; ``distill_jobs`` run on them.  Needs root.  On ``kind`` the real nodes are
            the workers of ``kind-config.yaml`` (labelled and tainted the same way) and this is not read.
        real_node_gpus: fake GPUs on each real node, counted or as DRA devices
            (:class:`~hollowscale.scenario.realgpus.RealNodeGpus`); None: none.  On ``kind``, counted
            GPUs of every worker, advertised by the fake device plugin run beside the cluster.
        kind_config: for ``kind``: the kind config that shapes the cluster (default ``kind-config.yaml``
            at the repository root; ``kind-config-gpu.yaml`` passes the host's GPUs into its worker).  A
            relative path is looked up from the current folder, then from the repository root.
    """

    backend: one_of(*BACKENDS) = "local"  # type: ignore[valid-type]
    profile: one_of(*PROFILES) = "default"  # type: ignore[valid-type]
    kubeconfig: StrictStr | None = None
    dir: StrictStr | None = None
    scheduler_name: DnsSubdomain = "default-scheduler"
    namespace: Namespace = "hollowscale-load"
    gang_scheduling: StrictBool = False
    kueue: StrictBool = False
    jobset: StrictBool = False
    kueue_pods_ready: PodsReadySpec | None = None
    volcano: StrictBool = False
    real_nodes: number(0, 16, integer=True) = 0  # type: ignore[valid-type]
    real_node_gpus: RealNodeGpus | None = None
    kind_config: StrictStr | None = None

    def kind_config_path(self) -> Path:
        """The kind config of a ``kind`` run (see ``kind_config``); it may not exist (validation says so)."""
        if not self.kind_config:
            return REPO_ROOT / "kind-config.yaml"
        path = Path(self.kind_config).expanduser()
        if path.is_absolute() or path.exists():
            return path.resolve()
        return REPO_ROOT / path

    def real_node_count(self) -> int:
        """The real nodes the run's real pods may use: ``real_nodes`` on ``local``, the workers of the kind
        config on ``kind`` (0 when it cannot be read: validation says why), none on ``existing``."""
        if self.backend == "local":
            return int(self.real_nodes)
        if self.backend != "kind":
            return 0
        try:
            doc = yaml.safe_load(self.kind_config_path().read_text())
        except (OSError, yaml.YAMLError):
            return 0
        nodes = doc.get("nodes") if isinstance(doc, dict) else None
        return sum(1 for n in nodes or () if isinstance(n, dict) and n.get("role") == "worker")

    def kubeconfig_path(self) -> str | None:
        """The kubeconfig a ``kind``/``existing`` run uses: the file's, else ``$KUBECONFIG``, else
        ``~/.kube/config`` when it exists (None when there is none)."""
        if self.kubeconfig:
            return str(Path(self.kubeconfig).expanduser())
        env = os.environ.get("KUBECONFIG")
        if env:
            return env
        default = Path.home() / ".kube" / "config"
        return str(default) if default.exists() else None

    @model_validator(mode="after")
    def _kubeconfig_available(self) -> ClusterSpec:
        # kind writes its own kubeconfig (into the run folder); an existing cluster needs one
        if self.backend == "existing" and self.kubeconfig_path() is None:
            raise_problems("cluster", [(("kubeconfig",), f"is required when backend is '{self.backend}' and neither "
                                                         "$KUBECONFIG nor ~/.kube/config is there")])
        if self.kind_config is not None and self.backend != "kind":
            raise_problems("cluster", [(("kind_config",), f"applies to backend 'kind', not '{self.backend}'")])
        if self.backend == "kind" and not self.kind_config_path().is_file():
            raise_problems("cluster", [(("kind_config",), f"no such file: {self.kind_config_path()} (expected a "
                                                          "kind Cluster config, e.g. kind-config.yaml)")])
        return self


class AgentSpec(Spec):
    """Hollow-node agents.

    Attributes:
        shards: agent processes; pools' nodes are split between them (``--shard i/n``).
        ready_timeout_s: the Ready barrier gives up after this long.
        delete_nodes_on_exit: remove the nodes when the agents stop (keeps a reused cluster clean).
        args: extra command-line flags passed to every agent.
        placement: ``process`` (agents and Locust run as processes beside the harness) or
            ``in-cluster`` (they run as pods of ``deploy/hollowscale``: the agent StatefulSet with
            ``shards`` replicas, each taking shard ``ordinal/replicas``, Locust's master and
            ``locust_workers`` workers, Prometheus scraping them, on the cluster's real nodes; needs
            ``cluster.backend: kind``, its workers, or ``existing``, a local cluster with real nodes).
        locust_workers: Locust worker pods of an ``in-cluster`` run.
    """

    shards: number(1, 64, integer=True) = 1  # type: ignore[valid-type]
    ready_timeout_s: Annotated[Seconds, AfterValidator(lambda v: _at_least(v, 1.0))] = 300.0
    delete_nodes_on_exit: StrictBool = True
    args: tuple[StrictStr, ...] = ()
    placement: one_of(*PLACEMENTS) = "process"  # type: ignore[valid-type]
    locust_workers: number(1, 64, integer=True) = 2  # type: ignore[valid-type]


def _at_least(value: float, lo: float) -> float:
    if value < lo:
        from kubecore.schema import problem

        raise problem(f"expected a duration >= {lo:g}s, got {value:g}s")
    return value


def _reason(value: Any) -> str:
    """A reason written out: text with at least one word (``true`` is not a reason)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected the reason this scenario may end with jobs unfinished or deadlocked (text; "
                         f"the verdict names it), got {show(value)}")
    return value.strip()


PositiveSeconds = Annotated[Seconds, AfterValidator(lambda v: _at_least(v, 0.001))]


def _fault_rate(value: Any) -> float:
    """Faults per GPU-hour: a finite number >= 0 (0: a baseline with no faults)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        got = f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else show(value)
        raise ValueError(f"expected a rate >= 0 faults per GPU-hour, got {got}")
    return float(value)


FaultRate = Annotated[float, leaf(_fault_rate)]


class FaultSpec(Spec):
    """A fault injected ``at_s`` seconds after the load starts, or a fault process from then on.

    Agent faults go through the hollow agents' fault endpoints: ``heartbeat-loss`` (a ``fraction`` of
    the nodes stop renewing leases for ``duration_s``) and ``pod-failures`` (a ``fraction`` of running
    pods fail with ``exit_code``).  Node faults take hollow nodes away, ``count`` of them (default 1) or a
    ``fraction``, those running ``workload``'s pods when it is given: ``node-lost`` (the nodes stop
    heartbeating and go NotReady; after ``delete_after_s`` their Node objects are deleted, so their pods
    go; they register again after ``repair_after_s`` when it is given) and ``node-drain`` (the nodes are
    cordoned and their pods evicted through the Eviction API, condition ``DisruptionTarget``; uncordoned
    after ``repair_after_s`` when it is given).  Like agent faults they need hollow nodes.
    With ``rate_per_gpu_hour``, ``node-lost``, ``node-drain`` and ``pod-failures`` are a fault *process*:
    from ``at_s`` for ``duration_s``, firings are drawn as a Poisson process (seeded by ``seed``) at this
    many faults per GPU-hour held by the targeted pods, each hitting ``count`` nodes or pods.
    Control-plane faults go through the local cluster's supervisor and
    name a ``component``: ``component-stall`` (SIGSTOP for ``duration_s``, then SIGCONT: an overloaded
    or paused process as its clients see it), ``component-kill`` (SIGKILL; restarted after the
    crash-loop backoff) and ``component-restart`` (SIGTERM, started again at once, same data dir).
    Distillation faults name a ``job`` of ``distill_jobs``: ``teacher-kill`` (one Ready teacher pod
    deleted with no grace, as a lost machine; its ReplicaSet replaces it) and ``teacher-scale`` (the
    teacher Deployment set to ``replicas``, as ``kubectl scale`` does).

    Attributes:
        type: what breaks (see above).
        at_s: when it fires (a process: when it starts), counted from the start of the load.
        fraction: the share of nodes or pods one firing hits, in (0, 1]; ``heartbeat-loss`` and a single
            ``pod-failures`` need it; node faults take it or ``count``.
        duration_s: how long it lasts (``heartbeat-loss``, ``pod-failures``, ``component-stall``), or the
            span of a fault process.
        component: the control-plane component a ``component-*`` fault hits.
        seed: seeds which nodes or pods are hit (and a process's firing times).
        exit_code: the exit code of the pods a ``pod-failures`` fault fails.
        job: the ``distill_jobs`` job a ``teacher-*`` fault hits.
        replicas: the teacher count ``teacher-scale`` sets.
        count: how many nodes (node faults; default 1 when ``fraction`` is not given either) or pods (a
            ``pod-failures`` process; default 1) one firing hits; not with ``fraction``.
        workload: aim at the nodes or pods running this workload's pods (a name of ``workloads``); None:
            any.
        repair_after_s: node faults: the nodes come back (registered again, or uncordoned) this long after
            they were hit; None: never during the run.
        delete_after_s: ``node-lost``: the lost nodes' Node objects are deleted this long after they stop
            heartbeating; None: 60 s.
        rate_per_gpu_hour: makes ``node-lost``, ``node-drain`` or ``pod-failures`` a fault process: this
            many firings per GPU-hour held by the targeted pods (0: a baseline with no faults); needs
            ``duration_s``.
    """

    type: one_of(*FAULT_TYPES)  # type: ignore[valid-type]
    at_s: Seconds
    fraction: number(0, 1, lo_open=True) | None = None  # type: ignore[valid-type]
    duration_s: PositiveSeconds | None = None
    component: one_of(*FAULT_COMPONENTS) | None = None  # type: ignore[valid-type]
    seed: StrictInt = 1
    exit_code: number(0, 255, integer=True) = 137  # type: ignore[valid-type]
    job: DnsLabel | None = None
    replicas: number(0, 8, integer=True) | None = None  # type: ignore[valid-type]
    count: number(1, integer=True) | None = None  # type: ignore[valid-type]
    workload: DnsLabel | None = None
    repair_after_s: PositiveSeconds | None = None
    delete_after_s: PositiveSeconds | None = None
    rate_per_gpu_hour: FaultRate | None = None

    @property
    def on_control_plane(self) -> bool:
        return self.type in COMPONENT_FAULTS

    @property
    def on_distill_job(self) -> bool:
        return self.type in DISTILL_FAULTS

    @property
    def on_nodes(self) -> bool:
        """A node fault (``node-lost``, ``node-drain``): hollow nodes taken away."""
        return self.type in NODE_FAULTS

    @property
    def is_process(self) -> bool:
        """A fault process (``rate_per_gpu_hour`` given), not one firing."""
        return self.rate_per_gpu_hour is not None

    @property
    def aimed_at_jobs(self) -> bool:
        """It picks its targets among the jobs' running pods or their nodes (:mod:`hollowscale.run.jobfaults`):
        a node fault, a process, or a fault that names a ``workload`` or a ``count``."""
        return self.on_nodes or self.is_process or self.workload is not None or self.count is not None

    @model_validator(mode="after")
    def _fields_of_type(self) -> FaultSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []

        def need(name: str, what: str) -> None:
            if getattr(self, name) is None:
                problems.append(((name,), f"is required for a {self.type} fault ({what})"))

        def refuse(name: str) -> None:
            if getattr(self, name) is not None:
                problems.append(((name,), f"does not apply to a {self.type} fault; remove it"))

        def not_both() -> None:
            if self.count is not None and self.fraction is not None:
                problems.append((("count",), f"expected count or fraction, not both (a {self.type} fault hits "
                                             "count nodes or pods, or a fraction of them)"))

        # the fields of node faults and fault processes (hollow nodes and pods, aimed at a workload)
        targeting = ("count", "workload", "repair_after_s", "delete_after_s", "rate_per_gpu_hour")
        if self.on_distill_job:
            need("job", "the name of one of distill_jobs")
            for name in ("fraction", "duration_s", "component", *targeting):
                refuse(name)
            if self.type == "teacher-scale":
                need("replicas", "the teacher count to scale to")
            else:
                refuse("replicas")
            raise_problems("fault", problems)
            return self
        refuse("job")
        refuse("replicas")
        if self.on_control_plane:
            need("component", f"one of {', '.join(FAULT_COMPONENTS)}")
            refuse("fraction")
            if self.type == "component-stall":
                need("duration_s", "how long the component stays stopped")
            else:
                refuse("duration_s")
            for name in targeting:
                refuse(name)
        elif self.on_nodes:
            refuse("component")
            if self.type != "node-lost":
                refuse("delete_after_s")
            not_both()
            if self.is_process:
                need("duration_s", "the span of the fault process")
            elif self.duration_s is not None:
                problems.append((("duration_s",), f"does not apply to a single {self.type} fault (its nodes stay "
                                                  "out until repair_after_s; with rate_per_gpu_hour it is the "
                                                  "span of the fault process); remove it"))
        else:  # heartbeat-loss, pod-failures
            for name in ("component", "repair_after_s", "delete_after_s"):
                refuse(name)
            if self.type == "pod-failures" and self.is_process:
                need("duration_s", "the span of the fault process")
                if self.fraction is not None:
                    problems.append((("fraction",), "does not apply to a pod-failures process (rate_per_gpu_hour): "
                                                    "each firing fails count pods (default 1); remove it"))
            elif self.type == "pod-failures" and (self.count is not None or self.workload is not None):
                # aimed at a job, once: count (default 1) or a fraction of its running pods crash now
                not_both()
                if self.duration_s is not None:
                    problems.append((("duration_s",), "does not apply to a pod-failures fault aimed at a workload or "
                                                      "a count (its pods crash at once; with rate_per_gpu_hour it is "
                                                      "the span of the fault process); remove it"))
            else:
                need("fraction", "the share of nodes or pods it hits, in (0, 1]")
                need("duration_s", "how long it lasts")
                if self.type == "heartbeat-loss":
                    for name in ("count", "workload", "rate_per_gpu_hour"):
                        refuse(name)
        raise_problems("fault", problems)
        return self


class MeasurementSpec(Spec):
    """What is measured and how long the run waits.

    Attributes:
        prometheus: start Prometheus and query it (apiserver/scheduler metrics, component CPU/memory).
        scrape_interval_s: Prometheus scrape interval.
        crosscheck_tolerance_pct: watch-based throughput vs Prometheus binding rate must agree within this.
        settle_timeout_s: after the load ends, wait at most this long for submitted jobs to finish.
        sample_interval_s: bucket width of the time series in the report.
        abort_after_failed_creates: stop the run as incomplete when this many creates in a row were
            all refused (a load that fails wholesale measures nothing about the scheduler).
        allow_unfinished: the opt-out, written as its reason: a run that leaves jobs unfinished or
            deadlocked then still passes (exit 0), and its verdict names this reason; without it such a
            run fails with exit 3 (:mod:`hollowscale.report.verdicts`).
    """

    prometheus: StrictBool = True
    scrape_interval_s: Annotated[Seconds, AfterValidator(lambda v: _at_least(v, 0.2))] = 1.0
    crosscheck_tolerance_pct: number(0, 100) = 5.0  # type: ignore[valid-type]
    settle_timeout_s: Seconds = 120.0
    sample_interval_s: Annotated[Seconds, AfterValidator(lambda v: _at_least(v, 0.1))] = 1.0
    abort_after_failed_creates: number(1, 1_000_000, integer=True) = 20  # type: ignore[valid-type]
    allow_unfinished: Annotated[str, leaf(_reason)] | None = None


class SloSpec(Spec):
    """A service level objective: ``value(metric) op threshold`` must hold.

    ``metric`` is a dotted path into ``summary.json``'s ``measurements`` (e.g. ``pod_startup_latency_ms.p99``).
    """

    name: StrictStr
    metric: SloMetric
    op: one_of(*SLO_OPS) = "<="  # type: ignore[valid-type]
    threshold: number()  # type: ignore[valid-type]
    description: StrictStr = ""

    def check(self, value: float | None) -> bool:
        """True when ``value`` meets the objective (a missing value never does)."""
        if value is None:
            return False
        return {
            "<=": value <= self.threshold,
            ">=": value >= self.threshold,
            "<": value < self.threshold,
            ">": value > self.threshold,
        }[self.op]


#: The Kubernetes SLOs (docs/architecture.md, "Reference numbers"): what a scenario gets unless it says ``slo_defaults: false``.
DEFAULT_SLOS: tuple[SloSpec, ...] = (
    SloSpec(name="api_mutating_p99", metric="api_latency_slo_ms.mutating.p99", op="<=", threshold=1000.0,
            description="Mutating API calls (POST/PUT/PATCH/DELETE) p99 <= 1 s"),
    SloSpec(name="api_read_object_p99", metric="api_latency_slo_ms.read_object.p99", op="<=", threshold=1000.0,
            description="Read-only API calls on single objects (GET) p99 <= 1 s"),
    SloSpec(name="api_read_list_p99", metric="api_latency_slo_ms.read_list.p99", op="<=", threshold=30000.0,
            description="Read-only LIST calls p99 <= 30 s"),
    SloSpec(name="pod_startup_p99", metric="pod_startup_latency_ms.p99", op="<=", threshold=5000.0,
            description="Pod startup latency (created -> Running, client-side watch) p99 <= 5 s"),
)


class ScenarioFile(Spec):
    """The scenario YAML as written (see ``scenarios/*.yaml``); :class:`Scenario` is what a run uses.

    Attributes:
        name: the scenario's name: the end of each run's id (``<date>-<time>-<name>``, its report folder).
        description: one line for people, copied into ``summary.json``.
        slo_defaults: add the Kubernetes SLOs (:data:`DEFAULT_SLOS`: API latency p99 per kind of call, pod
            startup p99 <= 5 s); an SLO of ``slos`` with the same name replaces its default.
        timeout_s: the run's limit, counted from the moment its cluster is up (making the cluster, and a
            first kind run's node-image build, are not counted: they take minutes on a fresh machine and
            measure nothing); settling stops there; default: load duration +
            ``measurements.settle_timeout_s`` + ``agents.ready_timeout_s`` + 2 minutes.
    """

    name: DnsLabel
    description: StrictStr = ""
    cluster: ClusterSpec = ClusterSpec()
    agents: AgentSpec = AgentSpec()
    pools: Pools
    workloads: Workloads
    arrival: ArrivalSpec
    faults: tuple[FaultSpec, ...] = ()
    measurements: MeasurementSpec = MeasurementSpec()
    slos: tuple[SloSpec, ...] = ()
    slo_defaults: StrictBool = True
    timeout_s: Annotated[Seconds, AfterValidator(lambda v: _at_least(v, 1.0))] | None = None
    tenants: tuple[TenantSpec, ...] = ()
    cohorts: tuple[CohortSpec, ...] = ()
    priority_classes: tuple[PriorityClassSpec, ...] = ()
    variants: tuple[VariantSpec, ...] = ()
    distill_jobs: tuple[DistillJobSpec, ...] = ()
    sweep: SweepSpec | None = None  # what ``hollowscale plan`` varies (ignored by ``hollowscale run``)

    @model_validator(mode="after")
    def _consistent(self) -> ScenarioFile:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        duration = self.arrival.duration_s
        for i, f in enumerate(self.faults):
            if f.at_s >= duration:
                problems.append((("faults", i, "at_s"), f"expected a time within the load (< {duration:g}s), "
                                                        f"got {f.at_s:g}s"))
            if f.on_control_plane and self.cluster.backend != "local":
                problems.append((("faults", i, "type"), f"{f.type} needs the local cluster (cluster.backend: "
                                                        f"local), not {self.cluster.backend!r}: hollowscale "
                                                        "supervises only the components it started"))
            if f.workload is not None and f.workload not in {w.name for w in self.workloads}:
                problems.append((("faults", i, "workload"), "expected one of workloads "
                                 f"({', '.join(w.name for w in self.workloads)}), got {f.workload!r}"))
        problems += self._distill_problems()
        if self.sweep is not None:
            slo_names = {s.name for s in self.slos} | ({s.name for s in DEFAULT_SLOS} if self.slo_defaults else set())
            problems += sweep_problems(self.sweep, pools={p.name: p.count for p in self.pools},
                                       workloads=tuple(w.name for w in self.workloads), slos=tuple(sorted(slo_names)),
                                       profiles=PROFILES, backend=self.cluster.backend)
        if self.timeout_s is not None and self.timeout_s < duration:
            problems.append((("timeout_s",), f"expected at least the load duration ({duration:g}s), "
                                             f"got {self.timeout_s:g}s"))
        seen: set[str] = set()
        for i, s in enumerate(self.slos):
            if s.name in seen:
                problems.append((("slos", i, "name"), f"duplicate SLO name {s.name!r}"))
            seen.add(s.name)
        problems += _fit_problems(self.pools, self.workloads)
        problems += claim_problems(self.pools, self.workloads, self.cluster.backend)  # DRA claims vs the devices
        problems += variant_claim_problems(self.variants, self.pools, self.workloads, self.cluster.backend)
        problems += check_tenants(self.tenants, {p.name: dict(p.allocatable) for p in self.pools})
        for i, t in enumerate(self.tenants):
            problems += _tenant_load_problems(i, t, self.cluster.namespace)
        problems += check_variants(self.variants, self.workloads)
        if self.cluster.kueue_pods_ready is not None and not (self.cluster.kueue or any(v.kueue for v in self.variants)):
            problems.append((("cluster", "kueue_pods_ready"), "configures Kueue, which this scenario does not run: "
                                                              "set cluster.kueue or a variant's kueue"))
        for i, v in enumerate(self.variants):
            if v.kueue_pods_ready is not None and not v.kueue:
                problems.append((("variants", i, "kueue_pods_ready"), "configures Kueue, which this variant does "
                                                                      "not run: set its kueue: true"))
        problems += check_topology(self.pools, self.workloads, self.variants)
        allocatable = {p.name: dict(p.allocatable) for p in self.pools}
        for i, c in enumerate(self.cohorts):
            problems += check_quotas(("cohorts", i, "quotas"), c.quotas, allocatable)
        declared = {pc.name for pc in self.priority_classes}
        for i, w in enumerate(self.workloads):
            # a local cluster has only the system classes; another cluster may have its own
            if (w.priority_class and self.cluster.backend == "local" and w.priority_class not in declared
                    and not w.priority_class.startswith("system-")):
                problems.append((("workloads", i, "priority_class"), f"{w.priority_class!r} is not declared under "
                                 "priority_classes (the run creates the classes a local cluster needs)"))
            kueue_somewhere = self.cluster.kueue or any(v.kueue for v in self.variants)
            if w.queued and kueue_somewhere and not self.tenants:
                problems.append((("workloads", i, "queued"), "queued workloads need tenants (each has a queue)"))
        if self.agents.placement == "in-cluster" and self.cluster.backend not in ("existing", "kind"):
            problems.append((("agents", "placement"), "in-cluster agents run as pods on a cluster's real nodes: "
                             "expected cluster.backend: kind (its workers) or existing (a local cluster with real "
                             f"nodes, by its kubeconfig), got {self.cluster.backend!r}"))
        if self.cluster.volcano and self.cluster.backend == "local":
            problems.append((("cluster", "volcano"), "Volcano is not started by hollowscale: use it with backend "
                             "existing or kind, on a cluster that runs Volcano"))
        if self.cluster.volcano and (self.cluster.kueue or self.cluster.gang_scheduling or self.variants):
            problems.append((("cluster", "volcano"), "expected volcano alone (no kueue, gang_scheduling or variants: "
                             "Volcano schedules and queues its Jobs itself)"))
        if (self.cluster.gang_scheduling or self.cluster.kueue or self.cluster.jobset
                or any(v.gang_scheduling or v.kueue or v.jobset for v in self.variants)) \
                and self.cluster.backend != "local":
            problems.append((("cluster", "backend"), "gang_scheduling, kueue and jobset are started by hollowscale on "
                             f"the local cluster; backend {self.cluster.backend!r} runs what its cluster has"))
        raise_problems("scenario", problems)
        return self

    def _distill_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        names = [j.name for j in self.distill_jobs]
        for i, name in enumerate(names):
            if name in names[:i]:
                problems.append((("distill_jobs", i, "name"), f"duplicate job name {name!r}"))
            if self.distill_jobs[i].start_at_s >= self.arrival.duration_s:
                problems.append((("distill_jobs", i, "start_at_s"), "expected a time within the load "
                                 f"(< {self.arrival.duration_s:g}s), got {self.distill_jobs[i].start_at_s:g}s"))
        real_nodes = self.cluster.real_node_count()  # on kind: read from the kind config, once
        if self.distill_jobs and self.cluster.backend not in ("local", "kind"):
            problems.append((("distill_jobs",), "real distillation jobs run on real nodes hollowscale made: the local "
                             "cluster's (cluster.backend: local) or kind's workers (cluster.backend: kind), not "
                             f"{self.cluster.backend!r}'s; on another cluster apply deploy/distill yourself"))
        elif self.distill_jobs and real_nodes < 1:
            problems.append((("cluster", "real_nodes"), "distill_jobs need at least one real node (cluster.real_nodes: 1)")
                            if self.cluster.backend == "local" else
                            (("cluster", "kind_config"), f"distill_jobs need a worker node, and "
                             f"{self.cluster.kind_config_path()} has none"))
        problems += real_node_gpu_problems(self.cluster.real_node_gpus, real_nodes, self.cluster.backend)
        problems += distill_gpu_problems(self.distill_jobs, self.cluster.real_node_gpus, real_nodes)
        if self.distill_jobs and self.variants:
            problems.append((("distill_jobs",), "expected no variants with distill_jobs (one cluster, one set of jobs)"))
        if self.distill_jobs:  # the run claims <cluster.namespace>-distill (hollowscale.distilljobs.prepare)
            derived = f"{self.cluster.namespace}-distill"[:63]
            try:
                _NAMESPACE.validate_python(derived)
            except ValidationError as exc:
                why = "; ".join(e.message for e in field_errors(exc, TenantLoad))
                problems.append((("cluster", "namespace"), f"the distill jobs' namespace <cluster.namespace>-distill "
                                 f"does not work: {why}; give a shorter cluster.namespace"))
        for i, f in enumerate(self.faults):
            if f.on_distill_job and f.job not in names:
                problems.append((("faults", i, "job"), f"expected one of distill_jobs ({', '.join(names) or 'none'}), "
                                 f"got {f.job!r}"))
        return problems


def default_tenant_namespace(base: str, tenant: str) -> str:
    """A tenant's namespace when the file gives none: ``<cluster.namespace>-<tenant>``, cut to 63 characters."""
    return f"{base}-{tenant}"[:63]


_NAMESPACE: TypeAdapter[str] = TypeAdapter(Namespace)


def _tenant_load_problems(i: int, t: TenantSpec, base: str) -> list[tuple[tuple[str | int, ...], str]]:
    """What the load generator would refuse of tenant ``i`` once its defaults are filled in.

    Checked here, in the first pass, so that it is reported like every other problem (file, field,
    expected, got) instead of escaping as a traceback when the resolved scenario is built.
    """
    out: list[tuple[tuple[str | int, ...], str]] = []
    if t.namespace is None:
        derived = default_tenant_namespace(base, t.name)
        try:
            _NAMESPACE.validate_python(derived)
        except ValidationError as exc:
            why = "; ".join(e.message for e in field_errors(exc, TenantLoad))
            out.append((("tenants", i, "name"), f"its default namespace <cluster.namespace>-<name> does not work: "
                        f"{why}; give the tenant a namespace"))
    queue = TenantLoad.model_construct(name=t.name, namespace="", queue=None).queue_name
    if len(queue) > 63:
        out.append((("tenants", i, "name"), f"expected at most {63 - len(queue) + len(t.name)} characters (its queue "
                    f"{queue!r} must fit 63), got {len(t.name)}"))
    return out


def _fit_problems(pools: tuple[PoolSpec, ...], workloads: tuple[WorkloadSpec, ...]) \
        -> list[tuple[tuple[str | int, ...], str]]:
    """Every role must fit the allocatable resources of at least one pool whose labels its selector matches."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    for wi, w in enumerate(workloads):
        for ri, role in enumerate(w.roles):
            fits = False
            for p in pools:
                labels = dict(p.labels)
                if any(labels.get(k) != v for k, v in role.node_selector.items()
                       if k in labels or k.startswith("nvidia.com/")):
                    continue
                alloc = dict(p.allocatable)
                if all(parse_quantity(q) <= parse_quantity(alloc.get(k, "0")) for k, q in role.resources.items()
                       if k in alloc or k == "nvidia.com/gpu"):
                    fits = True
                    break
            if not fits and pools:
                out.append((("workloads", wi, "roles", ri),
                            f"requests {dict(role.resources)} with node_selector {dict(role.node_selector)} "
                            "fit no node of any pool"))
    return out


@dataclass(frozen=True)
class Scenario:
    """A validated scenario, defaults resolved (SLOs merged with the defaults, timeout computed).

    Attributes:
        source: the file it came from (for messages and the report).
        load: the load generator's spec (workloads, arrival, namespace, scheduler name).
    """

    name: str
    source: str
    description: str
    cluster: ClusterSpec
    agents: AgentSpec
    pools: tuple[PoolSpec, ...]
    load: LoadSpec
    faults: tuple[FaultSpec, ...]
    measurements: MeasurementSpec
    slos: tuple[SloSpec, ...]
    timeout_s: float
    tenants: tuple[TenantSpec, ...] = ()
    priority_classes: tuple[PriorityClassSpec, ...] = ()
    variants: tuple[VariantSpec, ...] = ()
    variant: str = ""
    cohorts: tuple[CohortSpec, ...] = ()
    preemption: bool = True
    distill_jobs: tuple[DistillJobSpec, ...] = ()
    sweep: SweepSpec | None = None

    @classmethod
    def from_file(cls, f: ScenarioFile, source: str) -> Scenario:
        """Resolve a validated file: SLOs named like a default replace it, the timeout defaults to
        load + settle + Ready barrier + 2 minutes."""
        slos: dict[str, SloSpec] = {s.name: s for s in DEFAULT_SLOS} if f.slo_defaults else {}
        slos.update({s.name: s for s in f.slos})
        timeout = f.timeout_s if f.timeout_s is not None else (
            f.arrival.duration_s + f.measurements.settle_timeout_s + f.agents.ready_timeout_s + 120)
        tenants = tuple(t if t.namespace else t.model_copy(update={"namespace": default_tenant_namespace(
            f.cluster.namespace, t.name)}) for t in f.tenants)
        scheduler = "volcano" if f.cluster.volcano and f.cluster.scheduler_name == "default-scheduler" \
            else f.cluster.scheduler_name
        load = LoadSpec(name=f.name, namespace=f.cluster.namespace, scheduler_name=scheduler,
                        workloads=f.workloads, arrival=f.arrival,
                        tenants=tuple(TenantLoad(name=t.name, namespace=str(t.namespace), share=t.share) for t in tenants),
                        gang_scheduling=f.cluster.gang_scheduling, kueue=f.cluster.kueue, volcano=f.cluster.volcano,
                        topology_keys=topology_keys(f.pools))
        return cls(name=f.name, source=source, description=f.description, cluster=f.cluster, agents=f.agents,
                   pools=f.pools, load=load, faults=f.faults, measurements=f.measurements,
                   slos=tuple(slos.values()), timeout_s=float(timeout), tenants=tenants,
                   priority_classes=f.priority_classes, variants=f.variants, cohorts=f.cohorts,
                   distill_jobs=f.distill_jobs, sweep=f.sweep)

    def with_variant(self, v: VariantSpec) -> Scenario:
        """This scenario as variant ``v`` runs it: the cluster's features and the load's rendering."""
        cluster = self.cluster.model_copy(update={"gang_scheduling": v.gang_scheduling, "kueue": v.kueue,
                                                  "jobset": v.jobset or self.cluster.jobset,
                                                  "kueue_pods_ready": v.kueue_pods_ready or self.cluster.kueue_pods_ready})
        chosen = self.workloads if v.workloads is None else tuple(w for w in self.workloads if w.name in v.workloads)
        pools, workloads = apply_gpu_mode(self.pools, chosen, v.gpus, v.gpu_sharing)  # counted|claims|extended
        load = self.load.model_copy(update={"gang_scheduling": v.gang_scheduling, "kueue": v.kueue,
                                            "workloads": workloads, "topology": v.topology})
        return dataclasses.replace(self, cluster=cluster, load=load, pools=pools, variant=v.name,
                                   preemption=v.preemption)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace the load is submitted to."""
        return self.load.namespaces()

    def deserved_shares(self) -> dict[str, float]:
        """Each tenant namespace's deserved share of the GPUs under saturation: weight / sum of weights."""
        total = sum(t.weight for t in self.tenants)
        return {str(t.namespace): t.weight / total for t in self.tenants} if total else {}

    def gpus_by_pool(self) -> dict[str, float]:
        """GPUs per pool (the batch figures' flavors)."""
        return {p.name: float(parse_quantity(dict(p.capacity).get("nvidia.com/gpu", "0")) * p.count) for p in self.pools}

    @property
    def workloads(self) -> tuple[WorkloadSpec, ...]:
        return self.load.workloads

    @property
    def arrival(self) -> ArrivalSpec:
        return self.load.arrival

    @property
    def nodes_total(self) -> int:
        return sum(p.count for p in self.pools)

    @property
    def gpus_total(self) -> float:
        return float(sum(parse_quantity(dict(p.capacity).get("nvidia.com/gpu", "0")) * p.count for p in self.pools))

    def node_names(self) -> set[str]:
        """Every node the scenario's agents register."""
        return {p.node_name(i) for p in self.pools for i in range(p.count)}

    def pools_doc(self) -> dict[str, Any]:
        """The agents' pools file."""
        return pools_to_doc(self.pools)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for ``scenario.json`` in the run folder."""
        return _finite({
            "name": self.name, "source": self.source, "description": self.description,
            "cluster": self.cluster.model_dump(mode="json"), "agents": self.agents.model_dump(mode="json"),
            "pools": self.pools_doc()["pools"], "load": self.load.to_doc(),
            "faults": [f.model_dump(mode="json") for f in self.faults],
            "measurements": self.measurements.model_dump(mode="json"),
            "slos": [s.model_dump(mode="json") for s in self.slos], "timeout_s": self.timeout_s,
            "tenants": [t.model_dump(mode="json") for t in self.tenants],
            "priority_classes": [p.model_dump(mode="json") for p in self.priority_classes],
            "cohorts": [c.model_dump(mode="json") for c in self.cohorts],
            "variants": [v.model_dump(mode="json") for v in self.variants], "variant": self.variant,
            "preemption": self.preemption,
            "distill_jobs": [j.model_dump(mode="json") for j in self.distill_jobs],
            # only a scenario with a sweep says so (scenario.json of other runs is unchanged)
            **({"sweep": self.sweep.model_dump(mode="json")} if self.sweep is not None else {}),
        })


def _finite(doc: Any) -> Any:
    """inf -> None for JSON."""
    if isinstance(doc, float) and math.isinf(doc):
        return None
    if isinstance(doc, dict):
        return {k: _finite(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_finite(v) for v in doc]
    return doc
