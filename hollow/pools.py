"""Node pools: the YAML a user writes, checked completely before any node is created.

A pools file (or the ``pools:`` section of a scenario) describes groups of identical nodes::

    pools:
      - name: v100                     # node names are <name>-<index>
        count: 200
        resources: {cpu: "64", memory: 512Gi, pods: "110", ephemeral-storage: 1Ti, nvidia.com/gpu: "8"}
        allocatable: {cpu: 63500m}     # optional; each key overrides the matching capacity
        labels: {nvidia.com/gpu.product: Tesla-V100-SXM2-32GB}
        annotations: {}
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
        role: gpu                      # -> node-role.kubernetes.io/gpu="" and hollowscale.io/role=gpu
        pod_cidr: 10.64.0.0/12         # the pool's pod range; each node gets one /pod_cidr_mask_size
        pod_cidr_mask_size: 24
        topology: {region: local, zones: [zone-a, zone-b], racks_per_zone: 4}
                                       # or nested domains (not together with zones/racks_per_zone):
        # topology:
        #   levels:                    # coarse to fine; node i's domain at a level = i // nodes-per-domain
        #     - {name: block, label: hollowscale.io/topology-block, fanout: 8}    # 8 racks per block
        #     - {name: rack, label: hollowscale.io/topology-rack, fanout: 32}     # 32 hosts per rack
        #     - {name: host, label: kubernetes.io/hostname}                        # one node per domain
        #   shape: dgx-blocks          # or ready-made levels instead: kueue-perf | gb200-nvl72 | dgx-blocks
        #   nvlink_label: nvidia.com/gpu.clique    # one NVLink domain per rack (value: the rack's value)
        #   spread_factors: {rack: 1.13, block: 1.3, cluster: 1.3}   # gang run time x factor by spread
        #   unhealthy: {not_ready: 2, tainted: 1}  # nodes kept NotReady / tainted (seeded by the pool name)
        lifecycle:                     # defaults for pods without hollowscale.io/* annotations
          startup_delay: 1s            # a duration or a distribution (see kubecore.distributions)
          run_duration: {dist: uniform, min: 20s, max: 40s}   # or forever (the default)
          exit_code: 0
          failure_fraction: 0.0        # this share of pods exits with failure_exit_code instead
          failure_exit_code: 1
          gang_barrier: true           # gang members' run clocks wait for their gang (default: the
                                       # agent's --gang-barrier/--no-gang-barrier, on unless turned off)
        stages: my-stages.yaml         # optional: the pod lifecycle table (default hollow/stages.yaml),
                                       # relative to the pools file's folder, or the list itself
        gpus:                          # optional: how the nvidia.com/gpu of resources are exposed
          expose: dra                  # counted (default) | dra (a ResourceSlice per node) | both
          model: h100-80gb             # see hollow/dra.py GPU_MODELS
          sharing: memory              # none | memory (claims take a share of a GPU's memory)
          partitions: [1g.10gb]        # MIG profiles published as partitionable devices

``resources`` must name ``cpu`` and ``memory``; ``pods`` (110) and ``ephemeral-storage`` (100Gi) are
added when missing.  Durations are Go durations (``90s``, ``1m30s``) or numbers of seconds;
distributions are ``{dist: uniform, min, max}``, ``{dist: normal, mean, stddev}``,
``{dist: exponential, mean}``, ``{dist: lognormal, median, sigma}`` (``min``/``max`` clamp the draw).

The models follow :mod:`kubecore.schema`'s policy: frozen, strict (``"5"`` is not a count), unknown
keys refused, and every problem is reported at once, each with the file, the field path
(``pools[1].resources.nvidia.com/gpu``), what was given and what was expected.  A scenario embeds the
same validation by declaring a field ``pools: Pools``; a relative ``stages`` path is then resolved
against ``context={"base_dir": ...}`` given to ``model_validate`` (the current folder without it).
"""

from __future__ import annotations

import functools
import ipaddress
import random
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    model_validator,
)
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from hollow.dra import EXTENDED_RESOURCE, GpuSpec
from hollow.stages import LifecycleSpec, StagesFile, StageTable, stages_to_doc
from kubecore.distributions import FIXED_ZERO
from kubecore.quantity import parse_quantity
from kubecore.schema import (
    LABEL_NAME,
    RESOURCE_NAME,
    Annotations,
    DnsLabel,
    Labels,
    LabelValue,
    QualifiedName,
    Quantity,
    Spec,
    SpecError,
    check_label_value,
    field_errors,
    leaf,
    number,
    one_of,
    problem,
    raise_problems,
    show,
    validator_of,
)
from kubecore.yamlfile import load_yaml

#: kept for callers that catch pool errors by this name
PoolsError = SpecError

EFFECTS: tuple[str, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
DEFAULT_RESOURCES: dict[str, str] = {"pods": "110", "ephemeral-storage": "100Gi"}
#: automatic pod networks: node ordinal k gets 10.(k // 256).(k % 256).0/24
AUTO_POD_NETWORK = ipaddress.IPv4Network("10.0.0.0/8")
#: automatic node InternalIPs: node ordinal k gets 100.64.0.0 + k + 1
AUTO_NODE_NETWORK = ipaddress.IPv4Network("100.64.0.0/10")
MAX_NODES = 2**16
#: longest pool name: node names add ``-<index>`` (up to 6 characters) and must stay DNS labels
MAX_POOL_NAME = 48
#: the validation context key holding the folder that relative ``stages`` paths start from
BASE_DIR = "base_dir"

Problems = list[tuple[tuple[str | int, ...], str]]

# ------------------------------------------------------------------------------------------------ leaves


def _nonempty_label_value(value: Any) -> str:
    if value == "":
        raise ValueError("expected a non-empty label value, got ''")
    return check_label_value(value)


def _role(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 63 or not LABEL_NAME.match(value):
        raise ValueError(f"expected a label name such as 'gpu' (alphanumeric, '-', '_' or '.'), got {show(value)}")
    return value


def _pool_name(value: str) -> str:
    if len(value) > MAX_POOL_NAME:
        raise problem(f"expected at most {MAX_POOL_NAME} characters (node names add -<index>), got {value!r}")
    return value


def _ipv4_network(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected an IPv4 network such as 10.64.0.0/12, got {show(value)}")
    try:
        return str(ipaddress.IPv4Network(value, strict=True))
    except ValueError:
        raise ValueError(f"expected an IPv4 network such as 10.64.0.0/12 (host bits zero), got {value!r}") from None


def _resource_problems(value: dict[str, str]) -> Problems:
    problems: Problems = []
    for key, q in value.items():
        if not RESOURCE_NAME.match(key):
            problems.append(((key,), f"expected a resource name such as cpu, memory or nvidia.com/gpu, got {key!r}"))
        elif "/" in key and key.split("/")[0] != "kubernetes.io" and parse_quantity(q).denominator != 1:
            problems.append(((key,), f"expected a whole number for an extended resource, got {q!r}"))
    return problems


def _capacity(value: dict[str, str]) -> dict[str, str]:
    """Names, whole extended resources, cpu and memory required; the defaults added."""
    problems = _resource_problems(value)
    for needed in ("cpu", "memory"):
        if needed not in value:
            problems.append(((needed,), "is required (expected a Kubernetes quantity; cpu and memory are required)"))
    raise_problems("resources", problems)
    return {**value, **{k: v for k, v in DEFAULT_RESOURCES.items() if k not in value}}


def _allocatable(value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
    """Overrides of capacity keys, each at most the capacity; returns the full allocatable map."""
    problems = _resource_problems(value)
    capacity: dict[str, str] | None = info.data.get("resources")
    if capacity is None:  # resources itself is wrong: that error is reported already
        raise_problems("allocatable", problems)
        return value
    full = dict(capacity)
    for key, q in value.items():
        if key not in capacity:
            problems.append(((key,), f"expected a resource that is also in resources ({', '.join(capacity)}), "
                                     f"got {key!r}"))
        elif parse_quantity(q) > parse_quantity(capacity[key]):
            problems.append(((key,), f"expected at most the capacity {capacity[key]}, got {q!r}"))
        else:
            full[key] = q
    raise_problems("allocatable", problems)
    return full


NonEmptyLabelValue = Annotated[str, leaf(_nonempty_label_value)]
PoolName = Annotated[str, validator_of(DnsLabel), AfterValidator(_pool_name)]
Count = Annotated[int, validator_of(number(0, MAX_NODES, integer=True))]
MaskSize = Annotated[int, validator_of(number(8, 30, integer=True))]
Racks = Annotated[int, validator_of(number(0, 100_000, integer=True))]
Effect = Annotated[str, validator_of(one_of(*EFFECTS))]
Capacity = Annotated[dict[str, Quantity], AfterValidator(_capacity)]
Allocatable = Annotated[dict[str, Quantity], AfterValidator(_allocatable)]

# ------------------------------------------------------------------------------------------------ models


class Taint(Spec):
    """One node taint."""

    key: QualifiedName
    value: LabelValue = ""
    effect: Effect


#: the label keys of the ready-made shapes
BLOCK_LABEL = "hollowscale.io/topology-block"
TOPOLOGY_RACK_LABEL = "hollowscale.io/topology-rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
NVLINK_LABEL = "nvidia.com/gpu.clique"
#: the key of :meth:`Topology.spread_factor` for a gang that no single top-level domain holds
CLUSTER = "cluster"
#: the taint of the nodes ``unhealthy.tainted`` picks (key, value, effect)
UNHEALTHY_TAINT: tuple[str, str, str] = ("hollowscale.io/unhealthy", "true", "NoSchedule")
#: spread factors when ``spread_factors`` does not name a level, each from the seed talk's measurement
#: (Volcano's task-topology scheduling: VGG16 training 13-30 % faster than under the default scheduler):
#: the last level, one node, 1.0 (the seed's packed case, the baseline every factor is relative to); the
#: level above it, a rack, 1.13 (the low end of 13-30 %: members on different hosts behind one switch);
#: every coarser level and ``cluster`` 1.3 (the high end: members across racks)
DEFAULT_FACTOR_LAST = 1.0
DEFAULT_FACTOR_ABOVE_LAST = 1.13
DEFAULT_FACTOR_COARSER = 1.3

Shape = Literal["kueue-perf", "gb200-nvl72", "dgx-blocks"]
SHAPES: tuple[str, ...] = get_args(Shape)
Fanout = Annotated[int, validator_of(number(1, MAX_NODES, integer=True))]
SpreadFactor = Annotated[float, validator_of(number())]  # >= 1: checked with the keys, all at once


class TopologyLevel(Spec):
    """One level of nested topology domains (a block, a rack, a host).

    Attributes:
        name: the level's name, what a workload's ``topology.level`` names (``block``, ``rack``, ``host``).
        label: the node label key that holds a node's domain at this level (``kubernetes.io/hostname``
            for the last level: its values are then the node names).
        fanout: domains of the next level inside one domain of this one; required on every level but
            the last, which has none (one node per domain).
        values: the names of this level's domains in the pool, in node order (one per domain); default
            ``<pool>-<name><k>`` (``k`` counted over the pool), the node name for ``kubernetes.io/hostname``.
            A value may repeat under different parents (a domain is the path of values from the top), not
            inside one parent.
    """

    name: DnsLabel
    label: QualifiedName
    fanout: Fanout | None = None
    values: tuple[NonEmptyLabelValue, ...] = ()


@functools.lru_cache(maxsize=8)
def _shape_levels(shape: str) -> tuple[TopologyLevel, ...]:
    """The ready-made levels of a shape (see :attr:`Topology.shape`)."""
    host = TopologyLevel(name="host", label=HOSTNAME_LABEL)
    if shape == "kueue-perf":
        return (TopologyLevel(name="block", label=BLOCK_LABEL, fanout=10),
                TopologyLevel(name="rack", label=TOPOLOGY_RACK_LABEL, fanout=64), host)
    if shape == "gb200-nvl72":
        return (TopologyLevel(name="rack", label=TOPOLOGY_RACK_LABEL, fanout=18), host)
    return (TopologyLevel(name="block", label=BLOCK_LABEL, fanout=8),
            TopologyLevel(name="rack", label=TOPOLOGY_RACK_LABEL, fanout=32), host)


class UnhealthySpec(Spec):
    """Nodes of the pool that exist but take no pods, sprinkled among the healthy ones.

    The nodes are picked once, deterministically: a ``random.Random`` seeded with the CRC-32 of the pool
    name samples ``not_ready + tainted`` distinct indices of the pool; the first ``not_ready`` are
    NotReady, the rest tainted (every agent and every restart picks the same nodes).

    Attributes:
        not_ready: nodes registered with condition Ready False (reason ``HollowscaleNotReady``); they keep
            renewing their Lease, so the node lifecycle controller taints them but nothing deletes them.
        tainted: nodes Ready but tainted ``hollowscale.io/unhealthy=true:NoSchedule``.
    """

    not_ready: Count = 0
    tainted: Count = 0


class Topology(Spec):
    """Where a pool's nodes sit: zones and racks (round-robin), or nested domains (``levels``/``shape``).

    Attributes:
        region: value of ``topology.kubernetes.io/region`` or None.
        zones: values of ``topology.kubernetes.io/zone``; node ``i`` is in ``zones[i % len(zones)]``.
        racks_per_zone: racks per zone; label ``hollowscale.io/rack`` = ``<zone>-rack-<k>``.
        levels: nested domains, coarse to fine (not with ``shape``, ``zones`` or ``racks_per_zone``):
            node ``i`` is in domain ``i // n`` of a level whose domains hold ``n`` nodes each (the product
            of the fanouts below it), so consecutive nodes share a rack; the pool's count must be a
            multiple of the product of all fanouts (one top-level domain per that many nodes).
        shape: ready-made levels instead of ``levels``: ``kueue-perf`` block (fanout 10) > rack (fanout 64)
            > host (Kueue's TAS performance test); ``gb200-nvl72`` rack (fanout 18) > host, with
            ``nvlink_label`` ``nvidia.com/gpu.clique`` (18 nodes of 4 GPUs per NVL72 rack); ``dgx-blocks``
            block (fanout 8) > rack (fanout 32) > host.  Labels: block ``hollowscale.io/topology-block``,
            rack ``hollowscale.io/topology-rack``, host ``kubernetes.io/hostname``.
        nvlink_label: a label key holding the node's NVLink domain: one per domain of the level above
            the last (the rack), its value the rack's value; None: no such label (``gb200-nvl72``:
            ``nvidia.com/gpu.clique``).
        spread_factors: level name or ``cluster`` -> factor >= 1 by which a gang member's run time
            stretches when the smallest domain holding all its gang's members is one domain of that
            level (``cluster``: no top-level domain holds them all).  Levels left out: the last 1.0,
            the one above it 1.13, coarser ones and ``cluster`` 1.3.
        unhealthy: nodes kept NotReady or tainted (``UnhealthySpec``).
    """

    region: NonEmptyLabelValue | None = None
    zones: tuple[NonEmptyLabelValue, ...] = ()
    racks_per_zone: Racks = 0
    levels: tuple[TopologyLevel, ...] = ()
    shape: Annotated[Shape, validator_of(one_of(*SHAPES))] | None = None
    nvlink_label: QualifiedName | None = None
    spread_factors: dict[str, SpreadFactor] = Field(default_factory=dict)
    unhealthy: UnhealthySpec = UnhealthySpec()

    @model_validator(mode="after")
    def _consistent(self) -> Topology:
        problems: Problems = []
        if self.racks_per_zone and not self.zones:
            problems.append((("zones",), "expected at least one zone when racks_per_zone is set, got none"))
        nested = "shape" if self.shape is not None else "levels" if self.levels else None
        if self.levels and self.shape is not None:
            problems.append((("shape",), f"expected shape or levels, not both (got shape {self.shape!r} and "
                                         f"{len(self.levels)} levels)"))
        if nested and (self.zones or self.racks_per_zone):
            problems.append(((nested,), "expected no zones or racks_per_zone with nested levels (levels or "
                                        "shape replace them), got both"))
        levels = self.resolved_levels()
        problems += _level_problems(self.levels)  # also beside a shape: every problem at once
        names = [lv.name for lv in levels]
        if self.nvlink_label is not None:
            if len(levels) < 2:
                problems.append((("nvlink_label",), "expected at least two levels (one NVLink domain per domain "
                                                    f"of the level above the last), got {len(levels)}"))
            elif self.nvlink_label in (lv.label for lv in levels):
                problems.append((("nvlink_label",), f"expected a label key no level uses, got "
                                                    f"{self.nvlink_label!r}"))
        for key, factor in self.spread_factors.items():
            if factor < 1.0:
                problems.append((("spread_factors", key), f"expected a number >= 1, got {factor:g}"))
            if key not in names and (key != CLUSTER or not names):
                known = ", ".join([*names, CLUSTER]) if names else f"none without levels or shape, not even {CLUSTER}"
                problems.append((("spread_factors", key), f"expected a level name or {CLUSTER} ({known}), "
                                                          f"got {key!r}"))
        raise_problems("Topology", problems)
        return self

    def resolved_levels(self) -> tuple[TopologyLevel, ...]:
        """The levels, coarse to fine, the shape expanded (empty without levels or shape)."""
        return _shape_levels(self.shape) if self.shape is not None else self.levels

    def nvlink(self) -> str | None:
        """The NVLink label key in force (``gb200-nvl72`` brings ``nvidia.com/gpu.clique``), or None."""
        if self.nvlink_label is None and self.shape == "gb200-nvl72":
            return NVLINK_LABEL
        return self.nvlink_label

    def level_labels(self) -> tuple[tuple[str, str], ...]:
        """``(name, label key)`` of each level, coarse to fine, after shape expansion."""
        return tuple((lv.name, lv.label) for lv in self.resolved_levels())

    def spread_factor(self, level: str) -> float:
        """How much a gang's run time stretches when one domain of ``level`` (or ``cluster``) is the
        smallest holding all its members: ``spread_factors`` or the defaults (see the attribute).

        Raises:
            ValueError: ``level`` is neither one of the levels nor ``cluster``.
        """
        given = self.spread_factors.get(level)
        if given is not None:
            return given
        names = [lv.name for lv in self.resolved_levels()]
        if level != CLUSTER and level not in names:
            raise ValueError(f"expected a level name or {CLUSTER} ({', '.join([*names, CLUSTER])}), got {level!r}")
        if names and level == names[-1]:
            return DEFAULT_FACTOR_LAST
        if len(names) >= 2 and level == names[-2]:
            return DEFAULT_FACTOR_ABOVE_LAST
        return DEFAULT_FACTOR_COARSER


def _level_problems(levels: tuple[TopologyLevel, ...]) -> Problems:
    """Checks of ``levels`` that need no count: names and labels unique, fanouts where needed, values
    not repeated inside one parent domain."""
    problems: Problems = []
    seen_name: dict[str, int] = {}
    seen_label: dict[str, int] = {}
    last = len(levels) - 1
    for i, lv in enumerate(levels):
        if lv.name in seen_name:
            problems.append((("levels", i, "name"), f"expected a name not used by levels[{seen_name[lv.name]}], "
                                                    f"got {lv.name!r}"))
        seen_name.setdefault(lv.name, i)
        if lv.label in seen_label:
            problems.append((("levels", i, "label"), f"expected a label key not used by "
                                                     f"levels[{seen_label[lv.label]}], got {lv.label!r}"))
        seen_label.setdefault(lv.label, i)
        if i < last and lv.fanout is None:
            problems.append((("levels", i, "fanout"), f"is required on every level but the last (how many "
                                                      f"{levels[i + 1].name} domains one {lv.name} holds)"))
        if i == last and lv.fanout is not None:
            problems.append((("levels", i, "fanout"), f"expected none on the last level (one node per "
                                                      f"{lv.name}), got {lv.fanout}"))
        if lv.values and lv.label == HOSTNAME_LABEL:
            problems.append((("levels", i, "values"), f"expected no values on the {HOSTNAME_LABEL} level (its "
                                                      "values are the node names)"))
        elif lv.values:
            per_parent = levels[i - 1].fanout if i > 0 else None
            first: dict[tuple[int, str], int] = {}
            for j, value in enumerate(lv.values):
                parent = j // per_parent if per_parent else 0
                k = first.setdefault((parent, value), j)
                if k != j:
                    where = f"one {levels[i - 1].name}" if i > 0 else "the pool"
                    problems.append((("levels", i, "values", j), f"expected a value not used by another "
                                                                 f"{lv.name} of {where} (values[{k}]), got {value!r}"))
    return problems


def _domain_sizes(levels: Sequence[TopologyLevel]) -> list[int]:
    """Nodes in one domain of each level: the product of the fanouts of the levels above the last below it."""
    sizes = [1] * len(levels)
    for i in range(len(levels) - 2, -1, -1):
        sizes[i] = sizes[i + 1] * (levels[i].fanout or 1)
    return sizes


@functools.lru_cache(maxsize=256)
def _pick_unhealthy(pool: str, count: int, not_ready: int, tainted: int) -> tuple[frozenset[int], frozenset[int]]:
    """The deterministic pick of :class:`UnhealthySpec` (cached: every node of the pool asks)."""
    if not not_ready and not tainted:
        return frozenset(), frozenset()
    picked = random.Random(zlib.crc32(pool.encode())).sample(range(count), min(count, not_ready + tainted))
    return frozenset(picked[:not_ready]), frozenset(picked[not_ready:])


def _stages(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """A path (read and validated now, relative to the context's base_dir) or the table inline."""
    if not isinstance(value, str):
        return handler(value)
    base = (info.context or {}).get(BASE_DIR) if isinstance(info.context, Mapping) else None
    path = Path(base) / value if base is not None else Path(value)
    try:
        return StagesFile.model_validate(load_yaml(path)).stages
    except SpecError as exc:
        source, errors = exc.source, exc.errors
    except ValidationError as exc:
        source, errors = str(path), field_errors(exc, StagesFile)
    # each problem of the stages file becomes one problem of this field, the file named first
    raise_problems("stages", [((), e.render(source)) for e in errors] or [((), f"{source}: invalid")])
    return None  # not reached: raise_problems raised


class PoolSpec(Spec):
    """One validated pool.

    Attributes:
        name: node name prefix (DNS label, at most 48 characters); nodes are ``<name>-<index>``.
        count: number of nodes in the pool (over all shards).
        resources: resource name -> quantity as written, plus the defaults (pods, ephemeral-storage);
            the same map as :attr:`capacity`.
        allocatable: every key of ``resources``; what the scheduler may use (the file's overrides applied).
        labels: extra node labels.
        annotations: extra node annotations.
        taints: node taints.
        role: optional role name (adds ``node-role.kubernetes.io/<role>``).
        pod_cidr: the pool's pod network or None for the automatic range (10.0.0.0/8 by node ordinal).
        pod_cidr_mask_size: prefix length of each node's pod CIDR.
        topology: zone/rack spread, or nested topology domains (``levels``/``shape``), spread factors
            and unhealthy nodes.
        lifecycle: pod lifecycle defaults.
        stages: the pod lifecycle table, or None for :func:`hollow.stages.default_stages`.
        gpus: how the pool's ``nvidia.com/gpu`` are exposed (counted, DRA devices, both; see
            :class:`hollow.dra.GpuSpec`), or None: counted, as always.
        first_ordinal: index of this pool's first node over all pools (set by :data:`Pools`).
    """

    name: PoolName
    count: Count
    resources: Capacity
    allocatable: Allocatable = Field(default_factory=dict, validate_default=True)
    labels: Labels = Field(default_factory=dict)
    annotations: Annotations = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    role: Annotated[str, leaf(_role)] | None = None
    pod_cidr: Annotated[str, leaf(_ipv4_network)] | None = None
    pod_cidr_mask_size: MaskSize = 24
    topology: Topology = Topology()
    lifecycle: LifecycleSpec = LifecycleSpec()
    stages: Annotated[StageTable, WrapValidator(_stages)] | None = None
    gpus: GpuSpec | None = None

    _first_ordinal: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _network(self) -> PoolSpec:
        problems: Problems = []
        if self.pod_cidr is not None:
            net = ipaddress.IPv4Network(self.pod_cidr)
            mask = self.pod_cidr_mask_size
            if net.prefixlen > mask:
                problems.append((("pod_cidr",), f"expected a network at least as large as /{mask} "
                                                f"(pod_cidr_mask_size), got {self.pod_cidr!r}"))
            elif self.count > 2 ** (mask - net.prefixlen):
                problems.append((("pod_cidr",), f"expected room for {self.count} /{mask} subnets "
                                                f"(it has {2 ** (mask - net.prefixlen)}), got {self.pod_cidr!r}"))
        elif self.pod_cidr_mask_size != 24:
            problems.append((("pod_cidr",), "is required when pod_cidr_mask_size is not 24 (automatic node "
                                            "ranges are /24)"))
        if self.gpus is not None and self.gpu_count == 0 and self.gpus.publishes_slices:
            problems.append((("gpus",), f"expected {EXTENDED_RESOURCE} in resources (the pool's GPU count per "
                                        "node) when its GPUs are DRA devices"))
        problems += self._topology_problems()
        raise_problems("PoolSpec", problems)
        return self

    def _topology_problems(self) -> Problems:
        """The topology checks that need the count and the pool's name and labels."""
        topo = self.topology
        problems: Problems = []
        levels = topo.resolved_levels()
        where = ("topology", "shape") if topo.shape is not None else ("topology", "levels")
        sizes = _domain_sizes(levels)
        if levels and sizes[0] and self.count % sizes[0]:
            fanouts = " x ".join(str(lv.fanout) for lv in levels if lv.fanout is not None)
            problems.append((where, f"expected levels whose fanouts divide the pool's count: each {levels[0].name} "
                                    f"holds {sizes[0]} nodes ({fanouts}), so count must be a multiple of "
                                    f"{sizes[0]}, got count {self.count}"))
        elif levels and sizes[0]:
            for i, (lv, size) in enumerate(zip(levels, sizes, strict=True)):
                domains = self.count // size
                if lv.values and len(lv.values) != domains:
                    problems.append((("topology", "levels", i, "values"),
                                     f"expected {domains} values (one per {lv.name} of the pool's {self.count} "
                                     f"nodes), got {len(lv.values)}"))
                if not lv.values and lv.label != HOSTNAME_LABEL and domains:
                    longest = f"{self.name}-{lv.name}{domains - 1}"
                    if len(longest) > 63:
                        problems.append(((*where, i, "name") if topo.shape is None else where,
                                         f"expected a shorter pool or level name: the default value {longest!r} "
                                         f"is {len(longest)} characters, over 63 (or give values)"))
        bad = sum((topo.unhealthy.not_ready, topo.unhealthy.tainted))
        if bad > self.count:
            problems.append((("topology", "unhealthy"), f"expected at most {self.count} unhealthy nodes "
                                                        f"(not_ready + tainted <= the pool's count), got {bad}"))
        keys = {label for _, label in topo.level_labels()} | ({topo.nvlink()} - {None})
        for key in self.labels:
            if key in keys and key != HOSTNAME_LABEL:
                problems.append((("labels", key), "expected no label that topology sets on every node, "
                                                  f"got {key!r}"))
        return problems

    def topology_labels(self, index: int) -> dict[str, str]:
        """Node ``index``'s labels of the topology levels and the NVLink domain (empty without levels).

        Its domain at a level holding ``n`` nodes each is ``index // n``; its value is the level's
        ``values`` entry, else ``<pool>-<level><k>``, or the node name for ``kubernetes.io/hostname``.
        """
        topo = self.topology
        levels = topo.resolved_levels()
        if not levels:
            return {}
        out: dict[str, str] = {}
        for lv, size in zip(levels, _domain_sizes(levels), strict=True):
            k = index // size
            if lv.label == HOSTNAME_LABEL:
                out[lv.label] = self.node_name(index)
            elif lv.values:
                out[lv.label] = lv.values[k]
            else:
                out[lv.label] = f"{self.name}-{lv.name}{k}"
        nvlink = topo.nvlink()
        if nvlink is not None and len(levels) >= 2:
            out[nvlink] = out[levels[-2].label]
        return out

    def unhealthy_nodes(self) -> tuple[frozenset[int], frozenset[int]]:
        """Indices of the nodes kept NotReady and of those tainted (see :class:`UnhealthySpec`)."""
        u = self.topology.unhealthy
        return _pick_unhealthy(self.name, self.count, u.not_ready, u.tainted)

    @property
    def gpu_count(self) -> int:
        """GPUs per node (``nvidia.com/gpu`` of resources; 0 without)."""
        q = self.resources.get(EXTENDED_RESOURCE)
        return int(parse_quantity(q)) if q is not None else 0

    @property
    def dra(self) -> GpuSpec | None:
        """The pool's GPU spec when its nodes publish ResourceSlices, else None."""
        return self.gpus if self.gpus is not None and self.gpus.publishes_slices and self.gpu_count else None

    def _node_view(self, resources: dict[str, str]) -> dict[str, str]:
        if self.gpus is not None and not self.gpus.counted:
            return {k: v for k, v in resources.items() if k != EXTENDED_RESOURCE}
        return dict(resources)

    @property
    def node_capacity(self) -> dict[str, str]:
        """What a node reports as capacity: :attr:`capacity` without ``nvidia.com/gpu`` when the GPUs are
        DRA devices only (they are in the node's ResourceSlices instead)."""
        return self._node_view(self.resources)

    @property
    def node_allocatable(self) -> dict[str, str]:
        """What a node reports as allocatable (see :attr:`node_capacity`)."""
        return self._node_view(self.allocatable)

    @property
    def capacity(self) -> dict[str, str]:
        """Resource name -> quantity (as written), with the defaults for pods and ephemeral-storage."""
        return self.resources

    @property
    def pod_cidr_mask(self) -> int:
        """Prefix length of each node's pod CIDR (``pod_cidr_mask_size``)."""
        return self.pod_cidr_mask_size

    @property
    def first_ordinal(self) -> int:
        """Index of this pool's first node over all pools (automatic IPs and CIDRs use it)."""
        return self._first_ordinal

    def node_name(self, index: int) -> str:
        """Name of node ``index`` of this pool."""
        return f"{self.name}-{index}"


def _number_pools(pools: tuple[PoolSpec, ...]) -> tuple[PoolSpec, ...]:
    """Cross-pool checks (unique names, at most MAX_NODES nodes), then first ordinals in file order."""
    problems: Problems = []
    first: dict[str, int] = {}
    for i, pool in enumerate(pools):
        # "<name>-<int>" never collides across distinct names ("gpu-1" vs "gpu-a-1"), only duplicates do
        if pool.name in first:
            problems.append(((i, "name"), f"expected a name not used by an earlier pool "
                                          f"(pools[{first[pool.name]}]), got {pool.name!r}"))
        first.setdefault(pool.name, i)
    total = sum(p.count for p in pools)
    if total > MAX_NODES:
        problems.append(((), f"expected at most {MAX_NODES} nodes in all pools, got {total}"))
    raise_problems("pools", problems)
    out = []
    ordinal = 0
    for pool in pools:
        if pool.first_ordinal != ordinal:
            pool = pool.model_copy()
            pool._first_ordinal = ordinal
        out.append(pool)
        ordinal += pool.count
    return tuple(out)


#: a list of pools with the cross-pool checks; embed as a field (``pools: Pools``) to validate the same way
Pools = Annotated[tuple[PoolSpec, ...], AfterValidator(_number_pools)]


class PoolsFile(Spec):
    """A pools file: ``{pools: [...]}``."""

    pools: Pools


def parse_pools(doc: object, source: str, base_dir: str | Path | None = None) -> list[PoolSpec]:
    """Validate a pools document (``{pools: [...]}`` or the list itself) into :class:`PoolSpec` s.

    Args:
        doc: the parsed YAML/JSON.
        source: names the document in error messages (a file name).
        base_dir: folder that relative ``stages`` paths start from (the current folder when None).

    Raises:
        kubecore.schema.SpecError: every problem, each naming ``source``, the field path and what was expected.
    """
    if isinstance(doc, list):
        doc = {"pools": doc}
    context = {BASE_DIR: str(base_dir)} if base_dir is not None else None
    try:
        return list(PoolsFile.model_validate(doc, context=context).pools)
    except ValidationError as exc:
        raise SpecError(source, field_errors(exc, PoolsFile)) from None


def load_pools(path: str | Path) -> list[PoolSpec]:
    """Read (strict YAML) and validate a pools file; ``stages`` paths are relative to its folder.

    Raises:
        kubecore.schema.SpecError: the file is missing, not YAML, or not a valid pools document.
    """
    return parse_pools(load_yaml(path), str(path), Path(path).parent)


def pool_to_doc(pool: PoolSpec) -> dict[str, Any]:
    """One pool in the file form :func:`parse_pools` reads back to an equal spec (stages inline)."""
    doc: dict[str, Any] = {"name": pool.name, "count": pool.count, "resources": dict(pool.resources)}
    over = {k: v for k, v in pool.allocatable.items() if pool.resources.get(k) != v}
    if over:
        doc["allocatable"] = over
    if pool.labels:
        doc["labels"] = dict(pool.labels)
    if pool.annotations:
        doc["annotations"] = dict(pool.annotations)
    if pool.taints:
        doc["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints]
    if pool.role is not None:
        doc["role"] = pool.role
    if pool.pod_cidr is not None:
        doc["pod_cidr"] = pool.pod_cidr
    doc["pod_cidr_mask_size"] = pool.pod_cidr_mask_size
    topo = pool.topology
    doc["topology"] = {"zones": list(topo.zones), "racks_per_zone": topo.racks_per_zone}
    if topo.region is not None:
        doc["topology"]["region"] = topo.region
    if topo.levels:
        doc["topology"]["levels"] = [
            {"name": lv.name, "label": lv.label, **({"fanout": lv.fanout} if lv.fanout is not None else {}),
             **({"values": list(lv.values)} if lv.values else {})} for lv in topo.levels]
    if topo.shape is not None:
        doc["topology"]["shape"] = topo.shape
    if topo.nvlink_label is not None:
        doc["topology"]["nvlink_label"] = topo.nvlink_label
    if topo.spread_factors:
        doc["topology"]["spread_factors"] = dict(topo.spread_factors)
    if topo.unhealthy != UnhealthySpec():
        doc["topology"]["unhealthy"] = {"not_ready": topo.unhealthy.not_ready, "tainted": topo.unhealthy.tainted}
    lc = pool.lifecycle
    doc["lifecycle"] = {"startup_delay": lc.startup_delay.to_doc(), "run_duration": lc.run_duration.to_doc(),
                        "exit_code": lc.exit_code, "failure_fraction": lc.failure_fraction,
                        "failure_exit_code": lc.failure_exit_code}
    if lc.gang_barrier is not None:
        doc["lifecycle"]["gang_barrier"] = lc.gang_barrier
    if lc.prepare_delay.to_doc() != FIXED_ZERO.to_doc():
        doc["lifecycle"]["prepare_delay"] = lc.prepare_delay.to_doc()
    if pool.stages is not None:
        doc["stages"] = stages_to_doc(pool.stages)
    if pool.gpus is not None:
        doc["gpus"] = pool.gpus.to_doc()
    return doc


def pools_to_doc(pools: Sequence[PoolSpec]) -> dict[str, Any]:
    """``{pools: [...]}`` that :func:`parse_pools` reads back to equal specs (for agent processes)."""
    return {"pools": [pool_to_doc(p) for p in pools]}
