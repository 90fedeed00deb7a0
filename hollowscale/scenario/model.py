"""Typed scenario: what a run does, validated before anything starts.

Units are in the field names (``_s`` seconds, ``_ms`` milliseconds, ``rate`` = jobs per second).
The YAML keys are the field names; :mod:`hollowscale.scenario.validate` builds these objects and
:meth:`Scenario.to_load_spec` gives the plain-dict form the load generator (``loadgen``) consumes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

BACKENDS = ("local", "kind", "existing")
PROFILES = ("default", "scale")
WORKLOAD_KINDS = ("Job", "Pod", "Deployment")
CURVES = ("constant", "ramp", "steps", "poisson", "spike")
FAULT_TYPES = ("heartbeat-loss", "pod-failures")
DISTRIBUTIONS = ("fixed", "uniform", "exponential", "normal", "forever")
SLO_OPS = ("<=", ">=", "<", ">")


@dataclass(frozen=True)
class ClusterSpec:
    """Where the run happens.

    Attributes:
        backend: ``local`` (processes started by hollowscale), ``kind`` or ``existing`` (any kubeconfig).
        profile: ``default`` keeps upstream limits, ``scale`` lifts client QPS and in-flight limits.
        kubeconfig: required for ``existing``; ignored otherwise.
        dir: local cluster folder (default ``.hollowscale/cluster`` for the default profile,
            ``.hollowscale/cluster-scale`` for ``scale``).
        scheduler_name: ``spec.schedulerName`` of every submitted pod.
        namespace: namespace the load is submitted to (created by the run, deleted after).
    """

    backend: str = "local"
    profile: str = "default"
    kubeconfig: str | None = None
    dir: str | None = None
    scheduler_name: str = "default-scheduler"
    namespace: str = "hollowscale-load"


@dataclass(frozen=True)
class AgentSpec:
    """Hollow-node agents.

    Attributes:
        shards: agent processes; pools' nodes are split between them (``--shard i/n``).
        ready_timeout_s: the Ready barrier gives up after this long.
        delete_nodes_on_exit: remove the nodes when the agents stop (keeps a reused cluster clean).
        args: extra command-line flags passed to every agent.
    """

    shards: int = 1
    ready_timeout_s: float = 300.0
    delete_nodes_on_exit: bool = True
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class DurationDist:
    """A distribution of durations in seconds (``forever`` = never ends)."""

    dist: str = "fixed"
    value_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    mean_s: float | None = None
    stddev_s: float | None = None

    def mean(self) -> float | None:
        if self.dist == "forever":
            return None
        if self.dist == "fixed":
            return self.value_s
        if self.dist == "uniform":
            assert self.min_s is not None and self.max_s is not None
            return (self.min_s + self.max_s) / 2
        return self.mean_s


@dataclass(frozen=True)
class RoleSpec:
    """One pod template of a workload (a workload with several roles submits one object per role).

    Attributes:
        name: role name, used in object names and the ``hollowscale.io/role`` label.
        replicas: pods running at once (Job parallelism, Deployment replicas; 1 for a bare Pod).
        completions: Job completions (default = replicas).
        resources: requests (= limits for extended resources), e.g. ``{cpu: "4", nvidia.com/gpu: "8"}``.
        node_selector, tolerations: placed on the pod spec.
        run_duration, startup_delay: override the workload's.
    """

    name: str
    replicas: int = 1
    completions: int | None = None
    resources: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    run_duration: DurationDist | None = None
    startup_delay: DurationDist | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """A named template of the load mix.

    Attributes:
        name: template name (``hollowscale.io/workload`` label, Locust request name).
        kind: ``Job`` (parallelism/completions), ``Pod`` (bare, restartPolicy Never) or ``Deployment``.
        share: weight in the mix (normalised over all workloads).
        priority_class: ``spec.priorityClassName`` (must exist in the cluster), or None.
        run_duration: how long each pod runs (``hollowscale.io/run-duration``).
        startup_delay: delay before Running (``hollowscale.io/startup-delay``), or None.
        exit_codes: exit code -> weight (``hollowscale.io/exit-code``), e.g. ``{0: 0.95, 1: 0.05}``.
        backoff_limit: Job ``backoffLimit``.
        roles: pod templates submitted together (e.g. one 8-GPU student beside 1-GPU teachers).
    """

    name: str
    kind: str = "Job"
    share: float = 1.0
    priority_class: str | None = None
    run_duration: DurationDist = field(default_factory=lambda: DurationDist("fixed", value_s=10.0))
    startup_delay: DurationDist | None = None
    exit_codes: dict[int, float] = field(default_factory=lambda: {0: 1.0})
    backoff_limit: int = 0
    roles: tuple[RoleSpec, ...] = ()

    def pods_per_instance(self) -> int:
        return sum(r.replicas for r in self.roles)

    def gpus_per_instance(self) -> float:
        from kubecore.quantity import parse_quantity

        return float(
            sum(parse_quantity(r.resources.get("nvidia.com/gpu", "0")) * r.replicas for r in self.roles)
        )


@dataclass(frozen=True)
class Step:
    rate: float
    duration_s: float


@dataclass(frozen=True)
class ArrivalSpec:
    """Arrival curve of workload instances (one instance = one object per role), in instances/s.

    Curves: ``constant`` (``rate``), ``poisson`` (``rate``, exponential gaps), ``ramp`` (``start_rate`` ->
    ``end_rate`` over ``ramp_s``, then hold ``end_rate``), ``steps`` (list of ``{rate, duration_s}``),
    ``spike`` (``rate`` as base, ``spike_rate`` from ``spike_at_s`` for ``spike_duration_s``).

    Attributes:
        duration_s: total load duration; the curve ends there.
        per_user_rate: instances/s each Locust user submits; users = ceil(rate / per_user_rate).
        max_instances: stop submitting after this many (None = no cap).
        seed: seed of the mix choice, durations and exit codes.
    """

    curve: str
    duration_s: float
    rate: float | None = None
    start_rate: float | None = None
    end_rate: float | None = None
    ramp_s: float | None = None
    steps: tuple[Step, ...] = ()
    spike_rate: float | None = None
    spike_at_s: float | None = None
    spike_duration_s: float | None = None
    per_user_rate: float = 1.0
    max_instances: int | None = None
    seed: int = 1

    def rate_at(self, t: float) -> float:
        """Instances per second at ``t`` seconds after the start (0 after the end)."""
        if t < 0 or t >= self.duration_s:
            return 0.0
        if self.curve in ("constant", "poisson"):
            return float(self.rate or 0.0)
        if self.curve == "ramp":
            s, e, r = float(self.start_rate or 0.0), float(self.end_rate or 0.0), float(self.ramp_s or 0.0)
            return e if t >= r or r <= 0 else s + (e - s) * t / r
        if self.curve == "steps":
            acc = 0.0
            for step in self.steps:
                if t < acc + step.duration_s:
                    return step.rate
                acc += step.duration_s
            return 0.0
        if self.curve == "spike":
            at, d = float(self.spike_at_s or 0.0), float(self.spike_duration_s or 0.0)
            return float(self.spike_rate or 0.0) if at <= t < at + d else float(self.rate or 0.0)
        raise ValueError(f"unknown curve {self.curve!r}")

    def expected_instances(self, dt: float = 0.1) -> float:
        """Integral of the curve (instances submitted if the cluster keeps up), capped by max_instances."""
        n = int(self.duration_s / dt)
        total = sum(self.rate_at((i + 0.5) * dt) * dt for i in range(n))
        return min(total, self.max_instances) if self.max_instances is not None else total

    def peak_rate(self) -> float:
        return max([self.rate_at(i * 0.5) for i in range(int(self.duration_s * 2) + 1)] + [0.0])


@dataclass(frozen=True)
class FaultSpec:
    """A fault injected through the agents' fault endpoints ``at_s`` seconds after the load starts."""

    type: str
    at_s: float
    fraction: float
    duration_s: float
    seed: int = 1
    exit_code: int = 137


@dataclass(frozen=True)
class MeasurementSpec:
    """What is measured and how long the run waits.

    Attributes:
        prometheus: start Prometheus and query it (apiserver/scheduler metrics, component CPU/memory).
        scrape_interval_s: Prometheus scrape interval.
        crosscheck_tolerance_pct: watch-based throughput vs Prometheus binding rate must agree within this.
        settle_timeout_s: after the load ends, wait at most this long for submitted jobs to finish.
        sample_interval_s: bucket width of the time series in the report.
    """

    prometheus: bool = True
    scrape_interval_s: float = 1.0
    crosscheck_tolerance_pct: float = 5.0
    settle_timeout_s: float = 120.0
    sample_interval_s: float = 1.0


@dataclass(frozen=True)
class SloSpec:
    """A service level objective: ``value(metric) op threshold`` must hold.

    ``metric`` is a dotted path into ``summary.json``'s ``measurements`` (e.g. ``pod_startup_latency_ms.p99``).
    """

    name: str
    metric: str
    op: str
    threshold: float
    description: str = ""

    def check(self, value: float | None) -> bool:
        if value is None:
            return False
        return {
            "<=": value <= self.threshold,
            ">=": value >= self.threshold,
            "<": value < self.threshold,
            ">": value > self.threshold,
        }[self.op]


#: The Kubernetes SLOs (DESIGN.md): what a scenario gets unless it says ``slo_defaults: false``.
DEFAULT_SLOS: tuple[SloSpec, ...] = (
    SloSpec(
        "api_mutating_p99",
        "api_latency_slo_ms.mutating.p99",
        "<=",
        1000.0,
        "Mutating API calls (POST/PUT/PATCH/DELETE) p99 <= 1 s",
    ),
    SloSpec(
        "api_read_object_p99",
        "api_latency_slo_ms.read_object.p99",
        "<=",
        1000.0,
        "Read-only API calls on single objects (GET) p99 <= 1 s",
    ),
    SloSpec(
        "api_read_list_p99",
        "api_latency_slo_ms.read_list.p99",
        "<=",
        30000.0,
        "Read-only LIST calls p99 <= 30 s",
    ),
    SloSpec(
        "pod_startup_p99",
        "pod_startup_latency_ms.p99",
        "<=",
        5000.0,
        "Pod startup latency (created -> Running, client-side watch) p99 <= 5 s",
    ),
)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario file."""

    name: str
    source: str
    description: str
    cluster: ClusterSpec
    agents: AgentSpec
    pools: tuple[dict[str, Any], ...]
    workloads: tuple[WorkloadSpec, ...]
    arrival: ArrivalSpec
    faults: tuple[FaultSpec, ...]
    measurements: MeasurementSpec
    slos: tuple[SloSpec, ...]
    timeout_s: float

    @property
    def nodes_total(self) -> int:
        return sum(int(p.get("count", 0)) for p in self.pools)

    @property
    def gpus_total(self) -> float:
        from kubecore.quantity import parse_quantity

        return float(
            sum(
                parse_quantity((p.get("resources") or {}).get("nvidia.com/gpu", "0")) * int(p.get("count", 0))
                for p in self.pools
            )
        )

    def pools_doc(self) -> dict[str, Any]:
        """The agent's pools file (``pools:`` section as written in the scenario)."""
        return {"pools": [dict(p) for p in self.pools]}

    def to_load_spec(self) -> dict[str, Any]:
        """Plain-dict form consumed by ``loadgen`` (same keys as the YAML, defaults resolved)."""
        return {
            "name": self.name,
            "namespace": self.cluster.namespace,
            "scheduler_name": self.cluster.scheduler_name,
            "workloads": [asdict(w) for w in self.workloads],
            "arrival": asdict(self.arrival),
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
