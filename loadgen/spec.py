"""The load spec: workload templates and the arrival curve, typed and validated once.

A scenario's ``workloads:`` and ``arrival:`` sections are exactly :class:`WorkloadSpec` (a list) and
:class:`ArrivalSpec`; the orchestrator composes them into its scenario and builds a
:class:`LoadSpec` (adding the namespace and scheduler name of its cluster section).  Locust reads a
:class:`LoadSpec` with :func:`load_spec`, from the ``loadspec.json`` a run writes
(:meth:`LoadSpec.to_doc`) or straight from a scenario YAML when run alone.

Validation follows :mod:`kubecore.schema`: frozen, strict models, unknown keys refused, every problem
collected with its field path (``workloads[0].roles[1].resources.cpu``).  The arrival curve's maths
(:meth:`ArrivalSpec.rate_at` and friends) lives here and nowhere else.

YAML shape (units in the names: ``_s`` seconds as a Go duration or a number; rates in instances/s)::

    workloads:
      - name: distill               # DNS label, unique
        kind: Job                   # Job | Pod | Deployment
        share: 0.3                  # weight in the mix (> 0)
        priority_class: high        # optional
        run_duration: {dist: uniform, min: 30s, max: 90s}   # kubecore distribution; default 10s
        startup_delay: 2s           # optional, finite
        exit_codes: {0: 0.95, 1: 0.05}                       # Job/Pod only; default {0: 1}
        backoff_limit: 0
        roles:
          - name: student
            replicas: 1             # 1 for kind Pod
            completions: 1          # Job only; default replicas
            resources: {cpu: "16", memory: 96Gi, nvidia.com/gpu: "8"}
            node_selector: {nvidia.com/gpu.product: Tesla-V100-SXM2-32GB}
            tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
            run_duration: 60s       # optional, overrides the workload's
            claim:                  # optional: DRA devices each pod asks for (resource.k8s.io/v1)
              device_class: gpu.nvidia.com      # a DeviceClass (the run creates those of its pools)
              count: 1              # devices per claim
              selector: "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
              memory: 20Gi          # a share of each device's memory (consumable capacity), not all of it
              shared: pod           # pod: a claim per pod from a ResourceClaimTemplate; instance: one
                                    # ResourceClaim the role's pods of an instance share (time-slicing)
        # batch fields (all optional; without them the objects are exactly what they always were)
        gang: {min_members: all}    # all (sum of the replicas) | N (1 <= N <= that sum); Job and Pod only
        checkpoint_interval: 2m     # progress saved every 2m of run; a restarted gang resumes from the last one
        queued: true                # to the tenant's queue when the run has Kueue (or Volcano); Job only
        kueue_priority_class: batch-high   # Kueue WorkloadPriorityClass label; only with queued: true
        topology: {level: rack, mode: require}   # a level of the pools (rack | zone always); require | prefer
                                    # slice_level: host, slice_size: 4   (Kueue slices, both or neither)
    arrival:
      curve: ramp                   # constant | ramp | steps | poisson | spike
      start_rate: 0.2
      end_rate: 2.0
      ramp_s: 60s
      duration_s: 300s
      per_user_rate: 0.5            # instances/s per Locust user
      max_instances: 1000           # optional cap
      seed: 42

A load spec (``loadspec.json``, or YAML) also takes, beside ``name``, ``namespace``,
``scheduler_name``, ``workloads`` and ``arrival`` (all optional; the orchestrator sets the three
switches per run variant)::

    tenants:                        # none: every instance goes to `namespace`
      - {name: team-a, namespace: team-a, share: 3}             # queue defaults to <name>-queue
      - {name: team-b, namespace: team-b, share: 1, queue: b-queue}
    gang_scheduling: false          # the cluster has the in-tree gang gates (scheduling.k8s.io/v1alpha2)
    kueue: false                    # the cluster runs Kueue
    volcano: false                  # the cluster runs Volcano (not with kueue or gang_scheduling)
    topology: affinity              # how workload topology renders (TOPOLOGY_RENDERINGS), per run variant
    topology_keys: {block: hollowscale.io/topology-block}   # level name -> node label key (the pools')

What they render is in :mod:`loadgen.workloads`.  Rules beyond the field types: a gang's
``min_members`` is at most the instance's pods; a gang's roles run each pod once (completions unset
or equal to replicas); Deployments take neither ``gang`` nor ``queued``, bare Pods no ``queued`` (a
queue admits suspended Jobs; pods would need Kueue's pod webhook); a ``checkpoint_interval`` needs a
gang, is at most the longest run ``run_duration`` can draw and, with several pods per instance, needs
``same_duration: true``; tenant names are unique; with
``kueue``, a queued workload needs tenants (they name the LocalQueues); with ``volcano``, Job roles have
no completions of their own and names short enough for Volcano's pod names (``<job>-<role>-<index>``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from kubecore.distributions import DurationDist, seconds_doc
from kubecore.namespaces import RESERVED_NAMESPACES
from kubecore.quantity import parse_quantity
from kubecore.schema import (
    RESOURCE_NAME,
    Dist,
    DnsLabel,
    DnsSubdomain,
    FieldError,
    FiniteDist,
    Labels,
    LabelValue,
    QualifiedName,
    Quantity,
    Seconds,
    Spec,
    SpecError,
    field_errors,
    leaf,
    number,
    one_of,
    problem,
    raise_problems,
    show,
)
from kubecore.yamlfile import MAX_BYTES, load_yaml

WORKLOAD_KINDS = ("Job", "Pod", "Deployment", "JobSet")
#: JobSet v1alpha2's restart strategies a failure policy may name (InPlaceRestart needs the hollow kubelet to
#: restart containers in place and JobSet's InPlaceRestart gate: not offered)
RESTART_STRATEGIES = ("Recreate", "BlockingRecreate")
#: JobSet v1alpha2's failure-policy actions without a feature gate (RestartJob* need JobSet's RestartJob gate)
FAILURE_ACTIONS = ("FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts")
#: the Job failure reasons a JobSet rule may match (batch/v1 JobReasons*)
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy", "MaxFailedIndexesExceeded",
                       "FailedIndexes")
TOPOLOGY_LEVELS = ("rack", "zone")
TOPOLOGY_MODES = ("prefer", "require")
#: the node label of each built-in topology level, as hollow's pools write it (hollow.nodebody.RACK_LABEL for
#: racks); a load spec's ``topology_keys`` (the pools' level names, resolved by the scenario) adds and overrides
TOPOLOGY_KEYS: dict[str, str] = {"rack": "hollowscale.io/rack", "zone": "topology.kubernetes.io/zone"}
#: how a run variant renders workload topology (see :mod:`loadgen.workloads`): ``none`` ignores it,
#: ``affinity`` is pod affinity or the PodGroup's constraint (``require`` with a PodGroup), ``kueue-*`` are
#: Kueue's TAS pod-template annotations, ``intree`` the PodGroup's ``schedulingConstraints.topology``
TOPOLOGY_RENDERINGS = ("none", "affinity", "kueue-required", "kueue-preferred", "kueue-slice", "intree")
#: Volcano names a Job's pods ``<job>-<task>-<index>`` and refuses names over 63 characters; the job name
#: loadgen gives is at least this long (a 10-hex-digit hash)
VOLCANO_JOB_NAME_MIN = 10
CURVES = ("constant", "ramp", "steps", "poisson", "spike")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: the keys each curve takes besides duration_s, per_user_rate, max_instances and seed
CURVE_KEYS: dict[str, tuple[str, ...]] = {
    "constant": ("rate",),
    "poisson": ("rate",),
    "ramp": ("start_rate", "end_rate", "ramp_s"),
    "steps": ("steps",),
    "spike": ("rate", "spike_rate", "spike_at_s", "spike_duration_s"),
}
#: of those, the ones a curve cannot do without
CURVE_REQUIRED: dict[str, tuple[str, ...]] = {
    "constant": ("rate",),
    "poisson": ("rate",),
    "ramp": ("end_rate", "ramp_s"),
    "steps": ("steps",),
    "spike": ("rate", "spike_rate", "spike_at_s", "spike_duration_s"),
}
_CURVE_FIELDS = frozenset(k for keys in CURVE_KEYS.values() for k in keys)
GPU = "nvidia.com/gpu"
DEFAULT_NAMESPACE = "hollowscale-load"
DEFAULT_SCHEDULER = "default-scheduler"
#: sections of a scenario file that are not the load generator's (ignored by :func:`load_spec`)
SCENARIO_KEYS = ("description", "cluster", "agents", "pools", "faults", "measurements", "slos",
                 "slo_defaults", "timeout_s")


# ------------------------------------------------------------------------------------------------ leaf types


def _exit_codes(value: Any) -> dict[int, float]:
    """``{code: weight}``; codes as YAML integers or (from JSON) digit strings; every problem collected."""
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"expected a mapping exit code -> weight, e.g. {{0: 0.95, 1: 0.05}}, got {show(value)}")
    out: dict[int, float] = {}
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for key, weight in value.items():
        code: int | None = None
        if isinstance(key, int) and not isinstance(key, bool):
            code = key
        elif isinstance(key, str) and key.isascii() and key.isdigit():
            code = int(key)
        if code is None or not 0 <= code <= 255:
            problems.append(((str(key),), f"expected an exit code 0..255 as key, got {key!r}"))
            continue
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            problems.append(((str(key),), f"expected a weight >= 0, got {show(weight)}"))
            continue
        out[code] = float(weight)
    if not problems and sum(out.values()) <= 0:
        problems.append(((), "expected at least one weight > 0"))
    raise_problems("exit_codes", problems)
    return dict(sorted(out.items()))


def _own_namespace(value: str) -> str:
    if value in RESERVED_NAMESPACES:
        raise problem(f"expected a namespace of the run's own, got {value!r} (it holds the cluster's own "
                      f"objects: {', '.join(sorted(RESERVED_NAMESPACES))} are refused)")
    return value


#: the namespace a run submits to: a DNS label, not one of the cluster's own (kube-system, default, ...)
Namespace = Annotated[DnsLabel, AfterValidator(_own_namespace)]


def _positive_seconds(value: float) -> float:
    if value <= 0:
        raise problem(f"expected a duration > 0, got {value:g}s")
    return value


#: seconds > 0 (a Go duration or a number)
PositiveSeconds = Annotated[Seconds, AfterValidator(_positive_seconds)]


def _min_members(value: Any) -> int | str:
    if value == "all" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"expected 'all' or a whole number >= 1, got {show(value)}")


def _label_value_name(value: str) -> str:
    if len(value) > 63:
        raise problem(f"expected at most 63 characters (the name is written as a label value), got {len(value)}")
    return value


#: a Kueue name written as a label value (LocalQueue, WorkloadPriorityClass): a DNS subdomain of <= 63 characters
KueueName = Annotated[DnsSubdomain, AfterValidator(_label_value_name)]


if TYPE_CHECKING:
    WorkloadKind = Literal["Job", "Pod", "Deployment", "JobSet"]
    RestartStrategy = Literal["Recreate", "BlockingRecreate"]
    FailureAction = Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    JobFailureReason = str
    MaxRestarts = int
    FailExitCode = int
    Curve = Literal["constant", "ramp", "steps", "poisson", "spike"]
    Operator = Literal["Equal", "Exists"]
    Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    PositiveNumber = float
    NonNegativeNumber = float
    AnyNumber = float
    Replicas = int
    Completions = int
    BackoffLimit = int
    MaxInstances = int
    Seed = int
    TolerationSeconds = int
    ExitCodes = dict[int, float]
    MinMembers = int | Literal["all"]
    TopologyLevel = str
    TopologyMode = Literal["prefer", "require"]
    TopologyRendering = Literal["none", "affinity", "kueue-required", "kueue-preferred", "kueue-slice", "intree"]
    SliceSize = int
else:
    WorkloadKind = one_of(*WORKLOAD_KINDS)
    RestartStrategy = one_of(*RESTART_STRATEGIES)
    FailureAction = one_of(*FAILURE_ACTIONS)
    JobFailureReason = one_of(*JOB_FAILURE_REASONS)
    MaxRestarts = number(0, 1000, integer=True)
    FailExitCode = number(1, 255, integer=True)
    Curve = one_of(*CURVES)
    Operator = one_of(*TOLERATION_OPERATORS)
    Effect = one_of(*TAINT_EFFECTS)
    PositiveNumber = number(0, lo_open=True)
    NonNegativeNumber = number(0)
    AnyNumber = number()
    Replicas = number(1, 10000, integer=True)
    Completions = number(1, 100000, integer=True)
    BackoffLimit = number(0, 100, integer=True)
    MaxInstances = number(1, integer=True)
    Seed = number(integer=True)
    TolerationSeconds = number(0, integer=True)
    ExitCodes = Annotated[dict[int, float], leaf(_exit_codes)]
    MinMembers = Annotated[int | str, leaf(_min_members)]
    TopologyLevel = DnsLabel
    TopologyMode = one_of(*TOPOLOGY_MODES)
    TopologyRendering = one_of(*TOPOLOGY_RENDERINGS)
    SliceSize = number(1, 100000, integer=True)


def _g(seconds: float) -> str:
    return f"{seconds:g}s"


# ------------------------------------------------------------------------------------------------ workloads


class TolerationSpec(Spec):
    """A pod toleration (Kubernetes' rules: ``Exists`` takes no value, an empty key needs ``Exists``,
    ``toleration_seconds`` only with ``NoExecute``)."""

    key: QualifiedName | None = None
    operator: Operator = "Equal"
    value: LabelValue | None = None
    effect: Effect | None = None
    toleration_seconds: TolerationSeconds | None = None

    @model_validator(mode="after")
    def _rules(self) -> TolerationSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.operator == "Exists" and self.value:
            problems.append((("value",), "expected no value with operator Exists (it matches any value)"))
        if self.key is None and self.operator != "Exists":
            problems.append((("key",), "is required unless operator is Exists"))
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            problems.append((("toleration_seconds",), "only valid with effect NoExecute"))
        raise_problems("TolerationSpec", problems)
        return self

    def to_manifest(self) -> dict[str, Any]:
        """The pod spec's form (camelCase, unset fields left out)."""
        out: dict[str, Any] = {"operator": self.operator}
        if self.key is not None:
            out["key"] = self.key
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out

    def to_doc(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude_defaults=False)


def _is_extended(resource: str) -> bool:
    """Extended resources (``vendor.com/thing``) are counted in whole units."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests."))


class ClaimSpec(Spec):
    """DRA devices each pod of a role asks for, as users write it (``resource.k8s.io/v1``).

    Attributes:
        device_class: the DeviceClass of the request (``exactly.deviceClassName``).
        count: devices per claim (``ExactCount``).
        selector: a CEL expression on the device (``device.attributes['<driver>'].<name>``,
            ``device.capacity['<driver>'].<name>``), or None.
        memory: a share of each device's memory (``capacity.requests.memory``: consumable capacity; the
            device must allow multiple allocations), or None for whole devices.
        shared: ``pod`` (each pod its own claim, from a ResourceClaimTemplate the run creates once per
            namespace) or ``instance`` (one ResourceClaim per instance that the role's pods all reference:
            several pods of a job on one device, time-slicing).
    """

    device_class: DnsSubdomain
    count: Annotated[int, leaf(lambda v: _claim_count(v))] = 1
    selector: Annotated[str, leaf(lambda v: _cel(v))] | None = None
    memory: Quantity | None = None
    shared: Annotated[str, leaf(lambda v: _claim_shared(v))] = "pod"

    def request(self) -> dict[str, Any]:
        """The claim's one request (named ``gpu``) in ``spec.devices.requests``."""
        exactly: dict[str, Any] = {"deviceClassName": self.device_class}
        if self.count != 1:
            exactly["count"] = self.count
        if self.selector:
            exactly["selectors"] = [{"cel": {"expression": self.selector}}]
        if self.memory is not None:
            exactly["capacity"] = {"requests": {"memory": self.memory}}
        return {"name": CLAIM_REQUEST, "exactly": exactly}

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"device_class": self.device_class, "count": self.count}
        if self.selector is not None:
            doc["selector"] = self.selector
        if self.memory is not None:
            doc["memory"] = self.memory
        doc["shared"] = self.shared
        return doc


#: the name of the one request of a claim loadgen renders, and of the claim in the pod
CLAIM_REQUEST = "gpu"
CLAIM_SHARING = ("pod", "instance")


def _claim_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 32:
        raise ValueError(f"expected a whole number of devices 1..32 (a claim's ExactCount), got {show(value)}")
    return value


def _claim_shared(value: Any) -> str:
    if value not in CLAIM_SHARING:
        raise ValueError(f"expected one of {', '.join(CLAIM_SHARING)}, got {show(value)}")
    return str(value)


def _cel(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a CEL expression such as \"device.attributes['gpu.nvidia.com'].productName == "
                         f"'NVIDIA H100 80GB HBM3'\", got {show(value)}")
    if len(value) > 10 * 1024:
        raise ValueError(f"expected at most 10 KiB (the API's limit for a CEL selector), got {len(value)} characters")
    return value


class RoleSpec(Spec):
    """One pod template of a workload (a workload with several roles submits one object per role).

    Attributes:
        name: role name (``hollowscale.io/role`` label, object names).
        replicas: pods at once (Job parallelism, Deployment replicas; 1 for a bare Pod).
        completions: Job completions (default: replicas).
        resources: requests, e.g. ``{cpu: "4", nvidia.com/gpu: "8"}``; extended resources are also limits.
        node_selector, tolerations: placed on the pod spec.
        run_duration, startup_delay: override the workload's.
        claim: DRA devices each pod asks for (:class:`ClaimSpec`), or None.
    """

    name: DnsLabel
    replicas: Replicas = 1
    completions: Completions | None = None
    resources: dict[str, Quantity] = Field(default_factory=dict)
    node_selector: Labels = Field(default_factory=dict)
    tolerations: tuple[TolerationSpec, ...] = ()
    run_duration: Dist | None = None
    startup_delay: FiniteDist | None = None
    claim: ClaimSpec | None = None

    @model_validator(mode="after")
    def _resources(self) -> RoleSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for key, q in self.resources.items():
            if not RESOURCE_NAME.match(key):
                problems.append((("resources", key), "expected a resource name such as cpu, memory or nvidia.com/gpu"))
            elif _is_extended(key) and parse_quantity(q).denominator != 1:
                what = "GPUs" if key == GPU else f"{key} (extended resources count whole units)"
                problems.append((("resources", key), f"expected a whole number of {what}, got {q}"))
        raise_problems("RoleSpec", problems)
        return self

    def gpus(self) -> int:
        """``nvidia.com/gpu`` requested by each pod."""
        return int(parse_quantity(self.resources.get(GPU, "0")))

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "replicas": self.replicas}
        if self.completions is not None:
            doc["completions"] = self.completions
        doc["resources"] = dict(self.resources)
        doc["node_selector"] = dict(self.node_selector)
        doc["tolerations"] = [t.to_doc() for t in self.tolerations]
        if self.run_duration is not None:
            doc["run_duration"] = self.run_duration.to_doc()
        if self.startup_delay is not None:
            doc["startup_delay"] = self.startup_delay.to_doc()
        if self.claim is not None:
            doc["claim"] = self.claim.to_doc()
        return doc


class GangSpec(Spec):
    """All-or-nothing start of an instance's pods (every role together).

    Attributes:
        min_members: ``all`` (every pod of every role: the sum of the replicas) or N (at least N of them
            start together, 1 <= N <= that sum).
    """

    min_members: MinMembers = "all"

    def to_doc(self) -> dict[str, Any]:
        return {"min_members": self.min_members}


class FailureRuleSpec(Spec):
    """One rule of a JobSet's failure policy: what to do when a Job of the targeted roles fails.

    Attributes:
        action: ``FailJobSet``, ``RestartJobSet`` (counts against ``max_restarts``) or
            ``RestartJobSetAndIgnoreMaxRestarts``.
        on_job_failure_reasons: the Job failure reasons it matches (``BackoffLimitExceeded``,
            ``PodFailurePolicy``, ...); empty: any.
        target_roles: the roles (replicated Jobs) it applies to; empty: all.
    """

    action: FailureAction
    on_job_failure_reasons: tuple[JobFailureReason, ...] = ()
    target_roles: tuple[DnsLabel, ...] = ()

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"action": self.action}
        if self.on_job_failure_reasons:
            doc["on_job_failure_reasons"] = list(self.on_job_failure_reasons)
        if self.target_roles:
            doc["target_roles"] = list(self.target_roles)
        return doc


class PodFailurePolicySpec(Spec):
    """A Job's ``podFailurePolicy`` (batch/v1): which pod failures fail the Job at once and which do not count.

    Attributes:
        fail_job_on_exit_codes: a pod exiting with one of these (1-255) fails its Job at once, whatever its
            backoff limit (rule ``FailJob``, ``onExitCodes`` ``In``).
        ignore_disruptions: a pod failed by a disruption (condition ``DisruptionTarget``: preemption,
            eviction, a node's taint) does not count against the backoff limit (rule ``Ignore``).
    """

    fail_job_on_exit_codes: tuple[FailExitCode, ...] = ()
    ignore_disruptions: bool = True

    def to_doc(self) -> dict[str, Any]:
        return {"fail_job_on_exit_codes": list(self.fail_job_on_exit_codes),
                "ignore_disruptions": self.ignore_disruptions}

    def rules(self) -> list[dict[str, Any]]:
        """The policy's rules as batch/v1 writes them (the disruption rule first: a preempted pod's exit code
        never fails the Job)."""
        out: list[dict[str, Any]] = []
        if self.ignore_disruptions:
            out.append({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
        if self.fail_job_on_exit_codes:
            out.append({"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                             "values": sorted(self.fail_job_on_exit_codes)}})
        return out


class FailurePolicySpec(Spec):
    """A JobSet's ``failurePolicy`` (JobSet v1alpha2): how often and how the whole JobSet restarts when one of
    its Jobs fails.

    Attributes:
        max_restarts: restarts of the whole JobSet before it fails for good.
        restart_strategy: ``Recreate`` (each Job recreated as soon as its old pods are gone) or
            ``BlockingRecreate`` (all old Jobs and pods gone before any is created again).
        rules: evaluated in order, the first match acts (:class:`FailureRuleSpec`); none: every failure
            restarts until ``max_restarts``.
    """

    max_restarts: MaxRestarts = 0
    restart_strategy: RestartStrategy = "Recreate"
    rules: tuple[FailureRuleSpec, ...] = ()

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"max_restarts": self.max_restarts, "restart_strategy": self.restart_strategy}
        if self.rules:
            doc["rules"] = [r.to_doc() for r in self.rules]
        return doc


class TopologySpec(Spec):
    """The instance's pods in one topology domain of a level of the pools (and, for Kueue, in slices).

    Attributes:
        level: a level name of the pools the workload lands on (``block``, ``rack``, ...; the scenario
            resolves it to a node label key, see :attr:`LoadSpec.topology_keys`); ``rack``
            (``hollowscale.io/rack``) and ``zone`` (``topology.kubernetes.io/zone``) always resolve.
        mode: ``require`` (all in one domain or not scheduled) or ``prefer`` (a scoring preference).
        slice_level: with ``slice_size``, Kueue's slices: every ``slice_size`` pods in one domain of this
            level (variant ``kueue-slice``); None without slices.
        slice_size: pods per slice (must divide the gang; checked by the scenario), or None.
    """

    level: TopologyLevel
    mode: TopologyMode = "require"
    slice_level: TopologyLevel | None = None
    slice_size: SliceSize | None = None

    @model_validator(mode="after")
    def _slice_pair(self) -> TopologySpec:
        if (self.slice_level is None) != (self.slice_size is None):
            given, missing = ("slice_level", "slice_size") if self.slice_size is None else ("slice_size", "slice_level")
            raise_problems("TopologySpec", [((missing,), f"expected {missing} together with {given} (Kueue needs "
                                            "both), got none")])
        return self

    @property
    def key(self) -> str:
        """The node label of a built-in level (``rack``, ``zone``); other levels: :meth:`key_in`."""
        return TOPOLOGY_KEYS[self.level]

    def key_in(self, keys: Mapping[str, str], level: str | None = None) -> str:
        """The node label whose value names a domain of ``level`` (default :attr:`level`): the spec's
        ``topology_keys`` first, then :data:`TOPOLOGY_KEYS`."""
        name = self.level if level is None else level
        return keys.get(name) or TOPOLOGY_KEYS[name]

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"level": self.level, "mode": self.mode}
        if self.slice_level is not None:
            doc["slice_level"] = self.slice_level
            doc["slice_size"] = self.slice_size
        return doc


class WorkloadSpec(Spec):
    """A named template of the load mix; one *instance* submits one object per role.

    Attributes:
        name: template name (``hollowscale.io/workload`` label, Locust request names).
        kind: ``Job`` (parallelism/completions), ``Pod`` (bare, restartPolicy Never) or ``Deployment``.
        share: weight in the mix (normalised over all workloads).
        priority_class: ``spec.priorityClassName`` (must exist in the cluster), or None.
        run_duration: how long each pod runs (``hollowscale.io/run-duration``); Deployments run forever.
        startup_delay: delay before Running (``hollowscale.io/startup-delay``), or None.
        exit_codes: exit code -> weight (``hollowscale.io/exit-code``), Job and Pod only.
        backoff_limit: Job ``backoffLimit``.
        roles: pod templates submitted together (e.g. one 8-GPU student beside 1-GPU teachers).
        gang: the instance's pods start together or not at all (:class:`GangSpec`), or None; Job and Pod only.
        queued: submitted to the tenant's queue (Kueue LocalQueue, Volcano queue) when the run has one; Job only.
        kueue_priority_class: Kueue WorkloadPriorityClass (label ``kueue.x-k8s.io/priority-class``) of a
            queued Job, or None; ``priority_class`` stays the pods' PriorityClass.
        topology: keep the instance's pods in one domain of a topology level (:class:`TopologySpec`), or None.
        same_duration: every pod of an instance runs for one duration, drawn once per instance from
            ``run_duration`` (a distillation student and its teachers finish together); roles may then
            not override ``run_duration``.
        failure_policy: a ``JobSet``'s failure policy (:class:`FailurePolicySpec`); JobSet only.
        pod_failure_policy: the Jobs' pod failure policy (:class:`PodFailurePolicySpec`); Job and JobSet.
        backoff_limit_per_index: retries per index of an Indexed Job (the Job becomes Indexed; ``backoff_limit``
            then bounds nothing per pod); Job and JobSet; None: one backoff limit for the whole Job.
        checkpoint_interval: a training job saves its progress every this much run time; after a restart (its
            gang broke: a member failed or was deleted) it resumes from its last checkpoint, so the work since
            then is lost; the hollow agent runs the restarted members for the remaining work only
            (``hollowscale.io/checkpoint-interval``, seconds).  Needs ``gang``, at most the longest run
            ``run_duration`` can draw, and ``same_duration: true`` when an instance has several pods; None: no
            checkpoints.
    """

    name: DnsLabel
    kind: WorkloadKind = "Job"
    share: PositiveNumber = 1.0
    priority_class: DnsSubdomain | None = None
    run_duration: Dist = DurationDist.fixed(10.0)
    startup_delay: FiniteDist | None = None
    exit_codes: ExitCodes = Field(default_factory=lambda: {0: 1.0})
    backoff_limit: BackoffLimit = 0
    roles: tuple[RoleSpec, ...]
    gang: GangSpec | None = None
    queued: bool = False
    kueue_priority_class: KueueName | None = None
    topology: TopologySpec | None = None
    same_duration: bool = False
    failure_policy: FailurePolicySpec | None = None
    pod_failure_policy: PodFailurePolicySpec | None = None
    backoff_limit_per_index: BackoffLimit | None = None
    checkpoint_interval: PositiveSeconds | None = None

    @model_validator(mode="after")
    def _cross(self) -> WorkloadSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        kind = self.kind
        finite = kind in ("Job", "Pod", "JobSet")
        if not self.roles:
            problems.append((("roles",), "expected at least 1 item(s), got 0"))
        if finite and self.run_duration.forever:
            problems.append((("run_duration",), f"kind {kind} needs a finite run duration ('forever' never completes)"))
        if kind == "Deployment" and set(self.exit_codes) != {0}:
            problems.append((("exit_codes",), "Deployment pods run forever; exit codes apply to Job and Pod only"))
        names: set[str] = set()
        for i, role in enumerate(self.roles):
            if role.name in names:
                problems.append((("roles", i, "name"), f"duplicate role name {role.name!r}"))
            names.add(role.name)
            if kind == "Pod" and role.replicas != 1:
                problems.append((("roles", i, "replicas"), f"expected 1 for kind Pod (a bare pod), got {role.replicas}"))
            if role.completions is not None and kind not in ("Job", "JobSet"):
                problems.append((("roles", i, "completions"), f"only valid for kinds Job and JobSet, workload kind is "
                                 f"{kind}"))
            if self.same_duration and role.run_duration is not None:
                problems.append((("roles", i, "run_duration"), "same_duration: true draws one duration per instance "
                                 "from the workload's run_duration; remove the role's"))
            if finite and role.run_duration is not None and role.run_duration.forever:
                problems.append((("roles", i, "run_duration"), f"kind {kind} needs a finite run duration"))
            if self.gang is not None and role.completions is not None and role.completions != role.replicas:
                problems.append((("roles", i, "completions"), f"a gang runs each pod once: expected completions "
                                 f"unset or equal to replicas ({role.replicas}), got {role.completions}"))
        if self.gang is not None:
            total = self.pods_per_instance()
            n = self.gang.min_members
            if kind == "Deployment":
                problems.append((("gang",), "only kinds Job and Pod can be gang-scheduled (a Deployment replaces "
                                 "its pods one by one)"))
            elif isinstance(n, int) and self.roles and n > total:
                problems.append((("gang", "min_members"), f"expected at most {total} (the instance's pods: the sum "
                                 f"of the roles' replicas), got {n}"))
        if self.queued and kind != "Job":
            problems.append((("queued",), f"only kind Job can be queued (a queue admits suspended Jobs; a {kind} "
                             "would need Kueue's pod webhook)"))
        if self.failure_policy is not None and kind != "JobSet":
            problems.append((("failure_policy",), f"a failure policy (max_restarts, restart_strategy, rules) is "
                             f"JobSet's: expected kind JobSet, workload kind is {kind}"))
        for name, value in (("pod_failure_policy", self.pod_failure_policy),
                            ("backoff_limit_per_index", self.backoff_limit_per_index)):
            if value is not None and kind not in ("Job", "JobSet"):
                problems.append(((name,), f"a Job's field: expected kind Job or JobSet, workload kind is {kind}"))
        if self.failure_policy is not None:
            roles = {r.name for r in self.roles}
            for ri, rule in enumerate(self.failure_policy.rules):
                for ti, target in enumerate(rule.target_roles):
                    if target not in roles:
                        problems.append((("failure_policy", "rules", ri, "target_roles", ti),
                                         f"expected a role of the workload ({', '.join(sorted(roles))}), got {target!r}"))
        if self.kueue_priority_class is not None and not self.queued:
            problems.append((("kueue_priority_class",), "only valid with queued: true (Kueue reads it from the "
                             "Jobs it queues)"))
        if self.checkpoint_interval is not None:
            problems += self._checkpoint_problems(self.checkpoint_interval)
        raise_problems("WorkloadSpec", problems)
        return self

    def _checkpoint_problems(self, interval: float) -> list[tuple[tuple[str | int, ...], str]]:
        """Why ``checkpoint_interval`` does not fit this workload (a training job restarted as a gang)."""
        if self.kind == "Deployment":
            return [(("checkpoint_interval",), "Deployment pods run forever; a checkpoint interval applies to "
                     "kinds with a run (Job, Pod, JobSet)")]
        out: list[tuple[tuple[str | int, ...], str]] = []
        if self.gang is None:
            out.append((("checkpoint_interval",), "the restart model is a gang's: set gang (a member that fails "
                        "or is deleted restarts the whole gang from its last checkpoint)"))
        longest = max((self.run_duration_of(r).upper_bound() for r in self.roles), default=math.inf)
        if math.isfinite(longest) and interval > longest:
            out.append((("checkpoint_interval",), f"expected at most the longest run the workload's "
                        f"run_duration can draw ({_g(longest)}), got {_g(interval)}"))
        pods = self.pods_per_instance()
        if pods > 1 and not self.same_duration:
            out.append((("same_duration",), f"expected true with checkpoint_interval and {pods} pods per instance "
                        "(all members do the same work and restart from one checkpoint), got false"))
        return out

    def gang_min(self) -> int | None:
        """The gang's minimum member count (``all`` = every pod of the instance), or None without a gang."""
        if self.gang is None:
            return None
        n = self.gang.min_members
        return self.pods_per_instance() if n == "all" else int(n)

    def pods_per_instance(self) -> int:
        """Pods one instance runs at once (sum of the roles' replicas)."""
        return sum(r.replicas for r in self.roles)

    def gpus_per_instance(self) -> float:
        """``nvidia.com/gpu`` one instance requests (all roles, all replicas)."""
        return float(sum(Fraction(r.gpus()) * r.replicas for r in self.roles))

    def run_duration_of(self, role: RoleSpec) -> DurationDist:
        """The run duration a role's pods draw from (the role's own, else the workload's)."""
        return role.run_duration if role.run_duration is not None else self.run_duration

    def startup_delay_of(self, role: RoleSpec) -> DurationDist | None:
        return role.startup_delay if role.startup_delay is not None else self.startup_delay

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "kind": self.kind, "share": self.share}
        if self.priority_class is not None:
            doc["priority_class"] = self.priority_class
        doc["run_duration"] = self.run_duration.to_doc()
        if self.startup_delay is not None:
            doc["startup_delay"] = self.startup_delay.to_doc()
        doc["exit_codes"] = {str(k): v for k, v in self.exit_codes.items()}
        doc["backoff_limit"] = self.backoff_limit
        doc["roles"] = [r.to_doc() for r in self.roles]
        # batch fields only when given: a spec without them writes exactly what it wrote before they existed
        if self.gang is not None:
            doc["gang"] = self.gang.to_doc()
        if self.queued:
            doc["queued"] = True
        if self.kueue_priority_class is not None:
            doc["kueue_priority_class"] = self.kueue_priority_class
        if self.topology is not None:
            doc["topology"] = self.topology.to_doc()
        if self.same_duration:
            doc["same_duration"] = True
        if self.failure_policy is not None:
            doc["failure_policy"] = self.failure_policy.to_doc()
        if self.pod_failure_policy is not None:
            doc["pod_failure_policy"] = self.pod_failure_policy.to_doc()
        if self.backoff_limit_per_index is not None:
            doc["backoff_limit_per_index"] = self.backoff_limit_per_index
        if self.checkpoint_interval is not None:
            doc["checkpoint_interval"] = seconds_doc(self.checkpoint_interval)
        return doc


def _check_workloads(workloads: tuple[WorkloadSpec, ...]) -> tuple[WorkloadSpec, ...]:
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if not workloads:
        problems.append(((), "expected at least 1 item(s), got 0"))
    names: set[str] = set()
    for i, w in enumerate(workloads):
        if w.name in names:
            problems.append(((i, "name"), f"duplicate workload name {w.name!r}"))
        names.add(w.name)
    raise_problems("workloads", problems)
    return workloads


#: a scenario's ``workloads:`` section: a non-empty list of :class:`WorkloadSpec` with unique names
Workloads = Annotated[tuple[WorkloadSpec, ...], AfterValidator(_check_workloads)]


# ------------------------------------------------------------------------------------------------ arrival


class StepSpec(Spec):
    """One step of a ``steps`` curve: ``rate`` instances/s for ``duration_s``."""

    rate: NonNegativeNumber
    duration_s: Seconds

    @model_validator(mode="after")
    def _positive(self) -> StepSpec:
        if self.duration_s <= 0:
            raise_problems("StepSpec", [(("duration_s",), f"expected a duration > 0, got {_g(self.duration_s)}")])
        return self


class ArrivalSpec(Spec):
    """Arrival curve of workload instances (one instance = one object per role), in instances/s.

    Curves: ``constant`` and ``poisson`` (``rate``; poisson paces with exponential gaps), ``ramp``
    (``start_rate`` -> ``end_rate`` over ``ramp_s``, then ``end_rate``), ``steps`` (``{rate, duration_s}``
    one after the other), ``spike`` (``rate`` as base, ``spike_rate`` from ``spike_at_s`` for
    ``spike_duration_s``).  A key that belongs to another curve is an error, not a silent default.

    Attributes:
        duration_s: load duration; the curve is 0 from there on.
        per_user_rate: instances/s each Locust user submits (users = rate / per_user_rate, at least 1); at
            most the curve's peak rate, and left out 1 or the peak rate when that is lower.
        max_instances: stop submitting after this many (None = no cap).
        seed: seed of the mix choice, durations, exit codes and pacing.
    """

    curve: Curve
    duration_s: Seconds
    rate: AnyNumber | None = None
    start_rate: AnyNumber | None = None
    end_rate: AnyNumber | None = None
    ramp_s: Seconds | None = None
    steps: tuple[StepSpec, ...] = ()
    spike_rate: AnyNumber | None = None
    spike_at_s: Seconds | None = None
    spike_duration_s: Seconds | None = None
    per_user_rate: PositiveNumber = 1.0
    max_instances: MaxInstances | None = None
    seed: Seed = 1

    @model_validator(mode="after")
    def _curve(self) -> ArrivalSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []

        def err(key: str, message: str) -> None:
            problems.append(((key,), message))

        curve, d = self.curve, self.duration_s
        if d <= 0:
            err("duration_s", f"expected a duration > 0, got {_g(d)}")
        takes = CURVE_KEYS[curve]
        given = self.model_fields_set
        for key in sorted(_CURVE_FIELDS & given):
            if key not in takes:
                err(key, f"not used by curve {curve!r} (it takes: {', '.join(sorted(takes))})")
        for key in CURVE_REQUIRED[curve]:
            if key not in given or getattr(self, key) is None:
                err(key, "is required")

        def bound(key: str, lo_open: bool) -> None:
            v = getattr(self, key)
            if v is not None and (v <= 0 if lo_open else v < 0):
                err(key, f"expected a number {'>' if lo_open else '>='} 0, got {v:g}")

        if curve in ("constant", "poisson"):
            bound("rate", True)
        elif curve == "ramp":
            bound("start_rate", False)
            bound("end_rate", True)
            if self.ramp_s is not None and self.ramp_s > d:
                err("ramp_s", f"expected ramp_s <= duration_s ({_g(d)}), got {_g(self.ramp_s)}")
        elif curve == "steps":
            if "steps" in given and not self.steps:
                err("steps", "expected at least 1 item(s), got 0")
            total = sum(s.duration_s for s in self.steps)
            if self.steps and total > d + 1e-9:
                err("steps", f"steps last {total:g}s in all, longer than duration_s ({_g(d)})")
        else:  # spike
            bound("rate", False)
            bound("spike_rate", True)
            if self.spike_at_s is not None and self.spike_at_s >= d:
                err("spike_at_s", f"expected a time before duration_s ({_g(d)}), got {_g(self.spike_at_s)}")
            if self.spike_duration_s is not None and self.spike_duration_s <= 0:
                err("spike_duration_s", f"expected a duration > 0, got {_g(self.spike_duration_s)}")
        # users = round(rate / per_user_rate) but never fewer than 1: a user paced faster than the curve's highest
        # rate would submit at per_user_rate, not at the curve's rate.  Left out, per_user_rate is 1 or the peak
        # rate when that is lower; given, it may not exceed the peak.
        peak = self.peak_rate() if not problems else 0.0
        if "per_user_rate" not in given and 0 < peak < self.per_user_rate:
            object.__setattr__(self, "per_user_rate", peak)
        elif peak > 0 and self.per_user_rate > peak * (1 + 1e-9):
            err("per_user_rate", f"expected at most the curve's peak rate ({peak:g}/s): each Locust user submits "
                f"{self.per_user_rate:g} instances/s, so this curve would run at {self.per_user_rate:g}/s")
        raise_problems("ArrivalSpec", problems)
        return self

    # -------------------------------------------------------------------------------- the curve maths

    def rate_at(self, t: float) -> float:
        """Instances/s at ``t`` seconds after the start (0 outside [0, duration_s))."""
        if t < 0 or t >= self.duration_s:
            return 0.0
        curve = self.curve
        if curve in ("constant", "poisson"):
            return float(self.rate or 0.0)
        if curve == "ramp":
            s, e, r = float(self.start_rate or 0.0), float(self.end_rate or 0.0), float(self.ramp_s or 0.0)
            return e if r <= 0 or t >= r else s + (e - s) * t / r
        if curve == "steps":
            acc = 0.0
            for step in self.steps:
                acc += step.duration_s
                if t < acc:
                    return float(step.rate)
            return 0.0
        at, dur = float(self.spike_at_s or 0.0), float(self.spike_duration_s or 0.0)
        return float(self.spike_rate or 0.0) if at <= t < at + dur else float(self.rate or 0.0)

    def users_at(self, t: float) -> int:
        """Locust users needed at ``t`` so that users x per_user_rate follows the curve (0 when the rate is)."""
        r = self.rate_at(t)
        if r <= 0:
            return 0
        return max(1, round(r / self.per_user_rate))

    def corners(self) -> list[float]:
        """Times in [0, duration_s] where the curve changes slope or jumps (start and end included)."""
        d = self.duration_s
        points = {0.0, d}
        if self.curve == "ramp" and self.ramp_s is not None:
            points.add(self.ramp_s)
        elif self.curve == "steps":
            acc = 0.0
            for step in self.steps:
                acc += step.duration_s
                points.add(acc)
        elif self.curve == "spike" and self.spike_at_s is not None:
            points.update((self.spike_at_s, self.spike_at_s + (self.spike_duration_s or 0.0)))
        return sorted(p for p in points if 0.0 <= p <= d)

    def expected_instances(self, dt: float = 0.1) -> float:
        """Area under the curve (what a load generator that keeps up submits), capped by max_instances.

        Midpoint rule on slots of at most ``dt`` seconds, cut at the curve's :meth:`corners`; the curve
        is linear inside each slot, so the sum is the exact integral (up to rounding).
        """
        if dt <= 0:
            raise ValueError(f"dt must be > 0, got {dt!r}")
        total = 0.0
        corners = self.corners()
        for lo, hi in itertools.pairwise(corners):
            n = max(1, math.ceil((hi - lo) / dt - 1e-9))
            width = (hi - lo) / n
            total += sum(self.rate_at(lo + (i + 0.5) * width) for i in range(n)) * width
        return min(total, float(self.max_instances)) if self.max_instances is not None else total

    def peak_rate(self) -> float:
        """Highest rate the curve reaches in [0, duration_s)."""
        curve = self.curve
        if curve in ("constant", "poisson"):
            return float(self.rate or 0.0)
        if curve == "ramp":
            return max(float(self.start_rate or 0.0), float(self.end_rate or 0.0))
        if curve == "steps":
            return max([float(s.rate) for s in self.steps] + [0.0])
        return max(float(self.rate or 0.0), float(self.spike_rate or 0.0))

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"curve": self.curve, "duration_s": self.duration_s}
        for key in CURVE_KEYS[self.curve]:
            value = getattr(self, key)
            if key == "steps":
                doc["steps"] = [{"rate": s.rate, "duration_s": s.duration_s} for s in self.steps]
            elif value is not None:
                doc[key] = value
        doc["per_user_rate"] = self.per_user_rate
        if self.max_instances is not None:
            doc["max_instances"] = self.max_instances
        doc["seed"] = self.seed
        return doc


# ------------------------------------------------------------------------------------------------ load spec


class TenantLoad(Spec):
    """One tenant of a multi-tenant load: its namespace, its part of the arrivals, its queue.

    Attributes:
        name: tenant name (a DNS label, unique).
        namespace: where its instances are created (claimed by the run like the single namespace).
        share: weight of the arrivals it gets (> 0; each instance goes to a tenant drawn by share).
        queue: its Kueue LocalQueue (in ``namespace``) or Volcano queue; default ``<name>-queue``.
    """

    name: DnsLabel
    namespace: Namespace
    share: PositiveNumber = 1.0
    queue: KueueName | None = None

    @property
    def queue_name(self) -> str:
        """The queue its queued Jobs are submitted to."""
        return self.queue if self.queue is not None else f"{self.name}-queue"

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "namespace": self.namespace, "share": self.share}
        if self.queue is not None:
            doc["queue"] = self.queue
        return doc


class LoadSpec(Spec):
    """What Locust needs: where to submit, what, and at which rate.

    Attributes:
        name: the scenario's name.
        namespace: namespace the load is submitted to (claimed by the run).
        scheduler_name: ``spec.schedulerName`` of every pod.
        workloads: the mix (non-empty, unique names).
        arrival: the arrival curve.
        tenants: where instances go, each to a tenant drawn by share (:class:`TenantLoad`); none = all to
            ``namespace``.
        gang_scheduling: the cluster runs the in-tree gang gates (``scheduling.k8s.io/v1alpha2``): gang
            workloads get a Workload and a PodGroup per instance.
        kueue: the cluster runs Kueue: queued Jobs are created suspended with the tenant's LocalQueue label.
        volcano: the cluster runs Volcano: Job workloads become Volcano Jobs (one per instance, a task per
            role), gang Pods get a Volcano PodGroup, every pod is scheduled by Volcano.
        topology: how workload topology renders in this run variant (:data:`TOPOLOGY_RENDERINGS`).
        topology_keys: level name -> node label key of the pools' topology levels (the scenario resolves
            them; :data:`TOPOLOGY_KEYS` fills in ``rack`` and ``zone``).
    """

    name: DnsLabel
    namespace: Namespace = DEFAULT_NAMESPACE
    scheduler_name: DnsSubdomain = DEFAULT_SCHEDULER
    workloads: Workloads
    arrival: ArrivalSpec
    tenants: tuple[TenantLoad, ...] = ()
    gang_scheduling: bool = False
    kueue: bool = False
    volcano: bool = False
    topology: TopologyRendering = "affinity"
    topology_keys: dict[DnsLabel, QualifiedName] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _batch(self) -> LoadSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        names: set[str] = set()
        for i, t in enumerate(self.tenants):
            if t.name in names:
                problems.append((("tenants", i, "name"), f"duplicate tenant name {t.name!r}"))
            names.add(t.name)
            if t.queue is None and len(t.queue_name) > 63:
                problems.append((("tenants", i, "queue"), f"the default queue name {t.queue_name!r} is longer than "
                                 "63 characters: give a queue"))
        if self.volcano and self.kueue:
            problems.append((("volcano",), "expected only one of volcano and kueue (Volcano queues its own Jobs)"))
        if self.volcano and self.gang_scheduling:
            problems.append((("volcano",), "expected only one of volcano and gang_scheduling (Volcano schedules "
                             "its pods itself, kube-scheduler's gang gates never see them)"))
        problems += self._topology_problems()
        for i, w in enumerate(self.workloads):
            if self.kueue and w.queued and not self.tenants:
                problems.append((("workloads", i, "queued"), "kueue needs a LocalQueue to submit to: give tenants "
                                 "(each names its queue)"))
            if not (self.volcano and w.kind == "Job"):
                continue
            for j, role in enumerate(w.roles):
                if role.completions is not None and role.completions != role.replicas:
                    problems.append((("workloads", i, "roles", j, "completions"), "a Volcano task runs its replicas "
                                     f"once: expected completions unset or equal to replicas ({role.replicas}) with "
                                     f"volcano: true, got {role.completions}"))
                room = 63 - VOLCANO_JOB_NAME_MIN - 2 - len(str(role.replicas - 1))
                if len(role.name) > room:
                    problems.append((("workloads", i, "roles", j, "name"), "Volcano names pods <job>-<role>-<index> "
                                     f"(at most 63 characters): expected a role name of at most {room} characters "
                                     f"with volcano: true, got {len(role.name)}"))
        raise_problems("LoadSpec", problems)
        return self

    def _topology_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Levels resolve to a label key; a variant's rendering gets what it needs (Kueue, a gang)."""
        problems: list[tuple[tuple[str | int, ...], str]] = []
        known = sorted({*TOPOLOGY_KEYS, *self.topology_keys})
        kueue_tas = self.topology.startswith("kueue-")
        if kueue_tas and not self.kueue:
            problems.append((("topology",), f"topology {self.topology} renders Kueue's TAS annotations: expected "
                             "kueue: true"))
        if self.topology == "intree" and not self.gang_scheduling:
            problems.append((("topology",), "topology intree is the PodGroup's schedulingConstraints: expected "
                             "gang_scheduling: true"))
        for i, w in enumerate(self.workloads):
            t = w.topology
            if t is None:
                continue
            for field_name in ("level", "slice_level"):
                level = getattr(t, field_name)
                if level is not None and level not in self.topology_keys and level not in TOPOLOGY_KEYS:
                    problems.append((("workloads", i, "topology", field_name), f"expected a level of the pools "
                                     f"({', '.join(known)}), got {level!r}"))
            if kueue_tas and not w.queued:
                problems.append((("workloads", i, "queued"), f"topology {self.topology} places queued Jobs (Kueue "
                                 "admits them): expected queued: true"))
            if self.topology == "intree" and w.gang is None:
                problems.append((("workloads", i, "gang"), "topology intree constrains the instance's PodGroup: "
                                 "expected a gang"))
        return problems

    def namespaces(self) -> tuple[str, ...]:
        """The namespaces instances are created in (the tenants', in order, else ``namespace``)."""
        if not self.tenants:
            return (self.namespace,)
        return tuple(dict.fromkeys(t.namespace for t in self.tenants))

    def tenant_fractions(self) -> dict[str, float]:
        """Each tenant's expected part of the arrivals (shares normalised); empty without tenants."""
        total = sum(t.share for t in self.tenants)
        return {t.name: t.share / total for t in self.tenants}

    def to_doc(self) -> dict[str, Any]:
        """A JSON-able dict that :func:`load_spec` (and :func:`parse_load_spec`) read back to an equal spec.

        The batch fields are written only when set, so a spec without them writes what it always did.
        """
        doc: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "scheduler_name": self.scheduler_name,
            "workloads": [w.to_doc() for w in self.workloads],
            "arrival": self.arrival.to_doc(),
        }
        if self.tenants:
            doc["tenants"] = [t.to_doc() for t in self.tenants]
        for key in ("gang_scheduling", "kueue", "volcano"):
            if getattr(self, key):
                doc[key] = True
        if self.topology != "affinity":
            doc["topology"] = self.topology
        if self.topology_keys:
            doc["topology_keys"] = dict(self.topology_keys)
        return doc

    def with_namespace(self, namespace: str) -> LoadSpec:
        """The same spec submitting to ``namespace`` (validated; :class:`SpecError` when not a DNS label, or
        when the spec has tenants: each names its own namespace)."""
        if self.tenants:
            raise SpecError("--namespace", [FieldError("", "the load spec has tenants, each with its own namespace; "
                                                           "set their namespaces in the spec instead")])
        doc = self.to_doc()
        doc["namespace"] = namespace
        return parse_load_spec(doc, "--namespace")

    def workload(self, name: str) -> WorkloadSpec:
        """The workload called ``name`` (KeyError when there is none)."""
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(name)


# ------------------------------------------------------------------------------------------------ reading

_LOAD_KEYS = frozenset(LoadSpec.model_fields)


def is_scenario(doc: Mapping[str, Any]) -> bool:
    """True for a whole scenario (a ``cluster:`` section, or keys a load spec does not have)."""
    if "namespace" in doc or "scheduler_name" in doc:
        return False
    return not set(doc) <= _LOAD_KEYS


def parse_load_spec(doc: Any, source: str) -> LoadSpec:
    """A :class:`LoadSpec` from a parsed load-spec document or a whole scenario document.

    A scenario gives its ``name``, ``cluster.namespace``, ``cluster.scheduler_name``, ``workloads`` and
    ``arrival``; its other sections are the orchestrator's and are not looked at here.

    Raises:
        SpecError: every problem, with ``source`` and field paths (scenario paths for a scenario).
    """
    if not isinstance(doc, Mapping):
        raise SpecError(source, [FieldError("", f"expected a mapping with workloads and arrival, got {show(doc)}")])
    if not is_scenario(doc):
        try:
            return LoadSpec.model_validate(doc)
        except ValidationError as exc:
            raise SpecError(source, field_errors(exc, LoadSpec)) from None
    cluster = doc.get("cluster")
    if cluster is None:
        cluster = {}
    if not isinstance(cluster, Mapping):
        raise SpecError(source, [FieldError("cluster", f"expected a mapping, got {show(cluster)}")])
    picked: dict[str, Any] = {k: doc[k] for k in ("name", "workloads", "arrival") if k in doc}
    for key in ("namespace", "scheduler_name"):
        if key in cluster:
            picked[key] = cluster[key]
    try:
        return LoadSpec.model_validate(picked)
    except ValidationError as exc:
        errors = field_errors(exc, LoadSpec)
        moved = {"namespace": "cluster.namespace", "scheduler_name": "cluster.scheduler_name"}
        raise SpecError(source, [FieldError(moved.get(e.path, e.path), e.message) for e in errors]) from None


def load_spec(path: str | Path) -> LoadSpec:
    """Read a load spec: ``loadspec.json`` as :meth:`LoadSpec.to_doc` writes it, a load spec in YAML, or a
    whole scenario YAML (see :func:`parse_load_spec`).

    Raises:
        SpecError: naming the file and every problem (missing file, bad JSON/YAML, bad fields).
    """
    source = str(path)
    if source.endswith(".json"):
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            raise SpecError(source, [FieldError("", "file not found")]) from None
        except OSError as exc:
            raise SpecError(source, [FieldError("", f"cannot read: {exc.strerror or exc}")]) from None
        if len(raw) > MAX_BYTES:
            raise SpecError(source, [FieldError("", f"file too large ({len(raw)} bytes, at most {MAX_BYTES})")])
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise SpecError(source, [FieldError("", f"not valid JSON ({exc})")]) from None
    else:
        doc = load_yaml(path)
    return parse_load_spec(doc, source)


__all__ = [
    "CLAIM_REQUEST",
    "CURVES",
    "CURVE_KEYS",
    "FAILURE_ACTIONS",
    "JOB_FAILURE_REASONS",
    "RESTART_STRATEGIES",
    "TOPOLOGY_KEYS",
    "TOPOLOGY_RENDERINGS",
    "WORKLOAD_KINDS",
    "ArrivalSpec",
    "ClaimSpec",
    "FailurePolicySpec",
    "FailureRuleSpec",
    "GangSpec",
    "LoadSpec",
    "Namespace",
    "PodFailurePolicySpec",
    "RoleSpec",
    "StepSpec",
    "TenantLoad",
    "TolerationSpec",
    "TopologySpec",
    "WorkloadSpec",
    "Workloads",
    "is_scenario",
    "load_spec",
    "parse_load_spec",
]
