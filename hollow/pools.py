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
        podCIDR: 10.64.0.0/12          # the pool's pod range; each node gets one /podCIDRMaskSize
        podCIDRMaskSize: 24
        topology: {region: local, zones: [zone-a, zone-b], racksPerZone: 4}
        lifecycle:                     # defaults for pods without hollowscale.io/* annotations
          startupDelay: 1s             # Go duration, or {mean, jitter, distribution, min, max}
          runDuration: {mean: 30s, jitter: 10s}   # or "forever"
          exitCode: 0
          failureFraction: 0.0         # this share of pods exits with failureExitCode instead
          failureExitCode: 1

:func:`parse_pools` is a pure function of the document so the scenario validator can reuse it; every
error is a :class:`PoolsError` naming the source, the field path (``pools[1].resources.nvidia.com/gpu``)
and what was expected.  Unknown keys are errors: a typo must not silently give a default.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hollow.durations import DurationDist, parse_go_duration
from kubecore.quantity import parse_quantity


class PoolsError(ValueError):
    """A pools document that cannot be used; the message names file, field path and expectation."""


@dataclass(frozen=True)
class Taint:
    """One node taint (``effect`` is NoSchedule, PreferNoSchedule or NoExecute)."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Topology:
    """How a pool's nodes spread over failure domains (round-robin over zones, then racks).

    Attributes:
        region: value of ``topology.kubernetes.io/region`` or None.
        zones: values of ``topology.kubernetes.io/zone``; node ``i`` is in ``zones[i % len(zones)]``.
        racks_per_zone: racks per zone; label ``hollowscale.io/rack`` = ``<zone>-rack-<k>``.
    """

    region: str | None = None
    zones: tuple[str, ...] = ()
    racks_per_zone: int = 0


@dataclass(frozen=True)
class LifecycleSpec:
    """Pod lifecycle defaults for one pool (pod annotations override them).

    Attributes:
        startup_delay: time from binding to Running, seconds (distribution).
        run_duration: time from container start to exit, seconds (distribution; ``forever`` = never).
        exit_code: container exit code at the end of the run (0 = Succeeded).
        failure_fraction: share (0..1) of pods that exit with ``failure_exit_code`` instead.
        failure_exit_code: exit code used for that share (non-zero).
    """

    startup_delay: DurationDist = field(default_factory=DurationDist)
    run_duration: DurationDist = field(default_factory=lambda: DurationDist("fixed", math.inf))
    exit_code: int = 0
    failure_fraction: float = 0.0
    failure_exit_code: int = 1


@dataclass(frozen=True)
class PoolSpec:
    """One validated pool.

    Attributes:
        name: node name prefix (DNS label); nodes are ``<name>-<index>``.
        count: number of nodes in the pool (over all shards).
        capacity: resource name -> canonical quantity string (cpu, memory, pods, ephemeral-storage, ...).
        allocatable: same keys as ``capacity``; what the scheduler may use.
        labels: extra node labels.
        annotations: extra node annotations.
        taints: node taints.
        role: optional role name (adds ``node-role.kubernetes.io/<role>``).
        pod_cidr: the pool's pod network or None for the automatic range (10.0.0.0/8 by node ordinal).
        pod_cidr_mask: prefix length of each node's pod CIDR.
        topology: zone/rack spread.
        lifecycle: pod lifecycle defaults.
        first_ordinal: index of this pool's first node over all pools (for automatic IPs/CIDRs).
    """

    name: str
    count: int
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    role: str | None = None
    pod_cidr: str | None = None
    pod_cidr_mask: int = 24
    topology: Topology = field(default_factory=Topology)
    lifecycle: LifecycleSpec = field(default_factory=LifecycleSpec)
    first_ordinal: int = 0

    def node_name(self, index: int) -> str:
        """Name of node ``index`` of this pool."""
        return f"{self.name}-{index}"


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_RESOURCE_NAME = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_DEFAULT_RESOURCES = {"pods": "110", "ephemeral-storage": "100Gi"}
_BYTES = {"memory", "ephemeral-storage", "hugepages-1Gi", "hugepages-2Mi"}
#: automatic pod networks: node ordinal k gets 10.(k // 256).(k % 256).0/24
AUTO_POD_NETWORK = ipaddress.IPv4Network("10.0.0.0/8")
#: automatic node InternalIPs: node ordinal k gets 100.64.0.0 + k + 1
AUTO_NODE_NETWORK = ipaddress.IPv4Network("100.64.0.0/10")
MAX_NODES = 2**16


class _Ctx:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, expected: str, got: Any = ...) -> PoolsError:
        tail = "" if got is ... else f", got {got!r}"
        return PoolsError(f"{self.source}: {path}: expected {expected}{tail}")

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, "a mapping", value)
        for key in value:
            if not isinstance(key, str):
                raise self.fail(f"{path}.{key}", "string keys", key)
        return value

    def only(self, body: dict[str, Any], path: str, allowed: set[str]) -> None:
        for key in body:
            if key not in allowed:
                raise self.fail(f"{path}.{key}", "one of the known keys " + ", ".join(sorted(allowed)), "unknown key")

    def string(self, value: Any, path: str, pattern: re.Pattern[str] | None = None, what: str = "a string") -> str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(path, what, value)
        text = str(value)
        if pattern is not None and not pattern.match(text):
            raise self.fail(path, what, value)
        return text

    def integer(self, value: Any, path: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.fail(path, f"an integer from {lo} to {hi}", value)
        return value

    def fraction(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
            raise self.fail(path, "a number from 0 to 1", value)
        return float(value)

    def duration(self, value: Any, path: str, allow_forever: bool) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(path, "a Go duration such as '30s' or '1m30s'", value)
        if isinstance(value, int | float):
            seconds = float(value)
            if seconds < 0:
                raise self.fail(path, "a non-negative duration", value)
        else:
            try:
                seconds = parse_go_duration(value)
            except ValueError:
                raise self.fail(path, "a Go duration such as '30s' or '1m30s'"
                                + (" or 'forever'" if allow_forever else ""), value) from None
        if math.isinf(seconds) and not allow_forever:
            raise self.fail(path, "a finite Go duration", value)
        return seconds


def _dist(ctx: _Ctx, value: Any, path: str, allow_forever: bool) -> DurationDist:
    """A fixed duration (scalar) or a distribution (mapping)."""
    if not isinstance(value, dict):
        return DurationDist("fixed", ctx.duration(value, path, allow_forever))
    body = ctx.mapping(value, path)
    ctx.only(body, path, {"distribution", "mean", "jitter", "min", "max"})
    if "mean" not in body:
        raise ctx.fail(f"{path}.mean", "a Go duration (the mean, or the median for lognormal)")
    kind = body.get("distribution", "uniform" if "jitter" in body else "fixed")
    if kind not in ("fixed", "uniform", "normal", "exponential", "lognormal"):
        raise ctx.fail(f"{path}.distribution", "one of fixed, uniform, normal, exponential, lognormal", kind)
    mean = ctx.duration(body["mean"], f"{path}.mean", allow_forever and kind == "fixed")
    jitter = 0.0
    if "jitter" in body:
        if kind == "lognormal":
            j = body["jitter"]
            if isinstance(j, bool) or not isinstance(j, int | float) or j < 0:
                raise ctx.fail(f"{path}.jitter", "a non-negative number (sigma) for lognormal", j)
            jitter = float(j)
        else:
            jitter = ctx.duration(body["jitter"], f"{path}.jitter", False)
    elif kind in ("uniform", "normal", "lognormal"):
        raise ctx.fail(f"{path}.jitter", f"a spread for the {kind} distribution")
    lo = ctx.duration(body["min"], f"{path}.min", False) if "min" in body else 0.0
    hi = ctx.duration(body["max"], f"{path}.max", True) if "max" in body else math.inf
    if lo > hi:
        raise ctx.fail(f"{path}.min", "min <= max", body.get("min"))
    return DurationDist(kind, mean, jitter, lo, hi)


def _resources(ctx: _Ctx, value: Any, path: str, required: bool) -> dict[str, str]:
    body = ctx.mapping(value, path)
    out: dict[str, str] = {}
    for key, raw in body.items():
        kpath = f"{path}.{key}"
        if not _RESOURCE_NAME.match(key):
            raise ctx.fail(kpath, "a resource name such as cpu, memory or nvidia.com/gpu", key)
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ctx.fail(kpath, "a Kubernetes quantity such as '64', '500m' or '512Gi'", raw)
        try:
            q = parse_quantity(raw)
        except ValueError:
            raise ctx.fail(kpath, "a Kubernetes quantity such as '64', '500m' or '512Gi'", raw) from None
        if q < 0:
            raise ctx.fail(kpath, "a non-negative quantity", raw)
        if "/" in key and key.split("/")[0] != "kubernetes.io" and q.denominator != 1:
            raise ctx.fail(kpath, "a whole number for an extended resource", raw)
        out[key] = str(raw)
    if required:
        for needed in ("cpu", "memory"):
            if needed not in out:
                raise ctx.fail(f"{path}.{needed}", "a Kubernetes quantity (cpu and memory are required)")
        for key, default in _DEFAULT_RESOURCES.items():
            out.setdefault(key, default)
    return out


def _labels(ctx: _Ctx, value: Any, path: str, check_values: bool) -> dict[str, str]:
    body = ctx.mapping(value, path)
    out: dict[str, str] = {}
    for key, raw in body.items():
        kpath = f"{path}.{key}"
        prefix, _, name = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or len(name) > 63 \
                or not _LABEL_NAME.match(name):
            raise ctx.fail(kpath, "a qualified name such as example.com/name (name <= 63 characters)", key)
        if raw is None:
            raw = ""
        text = ctx.string(raw, kpath, what="a string value")
        if check_values and (len(text) > 63 or not _LABEL_VALUE.match(text)):
            raise ctx.fail(kpath, "a label value (<= 63 characters, alphanumeric, '-', '_' or '.')", raw)
        out[key] = text
    return out


def _taints(ctx: _Ctx, value: Any, path: str) -> tuple[Taint, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ctx.fail(path, "a list of {key, value, effect}", value)
    out = []
    for i, item in enumerate(value):
        ipath = f"{path}[{i}]"
        body = ctx.mapping(item, ipath)
        ctx.only(body, ipath, {"key", "value", "effect"})
        if "key" not in body:
            raise ctx.fail(f"{ipath}.key", "a taint key")
        key = ctx.string(body["key"], f"{ipath}.key")
        _labels(ctx, {key: ""}, ipath, False)
        val = ctx.string(body.get("value", ""), f"{ipath}.value", _LABEL_VALUE, "a label-style value")
        effect = body.get("effect")
        if effect not in _EFFECTS:
            raise ctx.fail(f"{ipath}.effect", "one of " + ", ".join(_EFFECTS), effect)
        out.append(Taint(key, val, effect))
    return tuple(out)


def _topology(ctx: _Ctx, value: Any, path: str) -> Topology:
    body = ctx.mapping(value, path)
    ctx.only(body, path, {"region", "zones", "racksPerZone"})
    region = ctx.string(body["region"], f"{path}.region", _LABEL_VALUE, "a label value") if "region" in body else None
    zones_raw = body.get("zones", [])
    if not isinstance(zones_raw, list):
        raise ctx.fail(f"{path}.zones", "a list of zone names", zones_raw)
    zones = tuple(ctx.string(z, f"{path}.zones[{i}]", _LABEL_VALUE, "a label value")
                  for i, z in enumerate(zones_raw))
    racks = ctx.integer(body.get("racksPerZone", 0), f"{path}.racksPerZone", 0, 100_000)
    if racks and not zones:
        raise ctx.fail(f"{path}.zones", "at least one zone when racksPerZone is set")
    return Topology(region, zones, racks)


def _lifecycle(ctx: _Ctx, value: Any, path: str) -> LifecycleSpec:
    body = ctx.mapping(value, path)
    ctx.only(body, path, {"startupDelay", "runDuration", "exitCode", "failureFraction", "failureExitCode"})
    spec = LifecycleSpec()
    return LifecycleSpec(
        startup_delay=_dist(ctx, body["startupDelay"], f"{path}.startupDelay", False)
        if "startupDelay" in body else spec.startup_delay,
        run_duration=_dist(ctx, body["runDuration"], f"{path}.runDuration", True)
        if "runDuration" in body else spec.run_duration,
        exit_code=ctx.integer(body.get("exitCode", 0), f"{path}.exitCode", 0, 255),
        failure_fraction=ctx.fraction(body.get("failureFraction", 0.0), f"{path}.failureFraction"),
        failure_exit_code=ctx.integer(body.get("failureExitCode", 1), f"{path}.failureExitCode", 1, 255),
    )


_POOL_KEYS = {"name", "count", "resources", "allocatable", "labels", "annotations", "taints", "role",
              "podCIDR", "podCIDRMaskSize", "topology", "lifecycle"}


def _pool(ctx: _Ctx, value: Any, path: str, first_ordinal: int) -> PoolSpec:
    body = ctx.mapping(value, path)
    ctx.only(body, path, _POOL_KEYS)
    for needed in ("name", "count", "resources"):
        if needed not in body:
            raise ctx.fail(f"{path}.{needed}", {"name": "a pool name (DNS label)",
                                                "count": "a node count",
                                                "resources": "a mapping of resources (cpu, memory, ...)"}[needed])
    name = ctx.string(body["name"], f"{path}.name", _DNS_LABEL, "a lower-case DNS label such as 'v100'")
    if len(name) > 48:
        raise ctx.fail(f"{path}.name", "at most 48 characters (node names add -<index>)", name)
    count = ctx.integer(body["count"], f"{path}.count", 0, MAX_NODES)
    capacity = _resources(ctx, body["resources"], f"{path}.resources", True)
    allocatable = dict(capacity)
    if "allocatable" in body:
        over = _resources(ctx, body["allocatable"], f"{path}.allocatable", False)
        for key, q in over.items():
            if key not in capacity:
                raise ctx.fail(f"{path}.allocatable.{key}", "a resource that is also in resources", key)
            if parse_quantity(q) > parse_quantity(capacity[key]):
                raise ctx.fail(f"{path}.allocatable.{key}", f"at most the capacity {capacity[key]}", q)
        allocatable.update(over)
    labels = _labels(ctx, body.get("labels") or {}, f"{path}.labels", True)
    annotations = _labels(ctx, body.get("annotations") or {}, f"{path}.annotations", False)
    taints = _taints(ctx, body.get("taints"), f"{path}.taints")
    role = None
    if body.get("role") is not None:
        role = ctx.string(body["role"], f"{path}.role", _LABEL_NAME, "a label name such as 'gpu'")
    mask = ctx.integer(body.get("podCIDRMaskSize", 24), f"{path}.podCIDRMaskSize", 8, 30)
    pod_cidr = None
    if body.get("podCIDR") is not None:
        raw = ctx.string(body["podCIDR"], f"{path}.podCIDR", what="an IPv4 network such as 10.64.0.0/12")
        try:
            net = ipaddress.IPv4Network(raw, strict=True)
        except ValueError:
            raise ctx.fail(f"{path}.podCIDR", "an IPv4 network such as 10.64.0.0/12", raw) from None
        if net.prefixlen > mask:
            raise ctx.fail(f"{path}.podCIDR", f"a network at least as large as /{mask}", raw)
        if count > 2 ** (mask - net.prefixlen):
            raise ctx.fail(f"{path}.podCIDR", f"room for {count} /{mask} subnets", raw)
        pod_cidr = str(net)
    elif mask != 24:
        raise ctx.fail(f"{path}.podCIDR", "a network when podCIDRMaskSize is not 24")
    topology = _topology(ctx, body["topology"], f"{path}.topology") if body.get("topology") else Topology()
    lifecycle = _lifecycle(ctx, body["lifecycle"], f"{path}.lifecycle") if body.get("lifecycle") else LifecycleSpec()
    return PoolSpec(name=name, count=count, capacity=capacity, allocatable=allocatable, labels=labels,
                    annotations=annotations, taints=taints, role=role, pod_cidr=pod_cidr, pod_cidr_mask=mask,
                    topology=topology, lifecycle=lifecycle, first_ordinal=first_ordinal)


def parse_pools(doc: object, source: str) -> list[PoolSpec]:
    """Validate a pools document (``{pools: [...]}`` or the list itself) into :class:`PoolSpec` s.

    Pure: reads nothing but ``doc``; ``source`` only labels error messages.

    Raises:
        PoolsError: at the first problem, naming ``source``, the field path and what was expected.
    """
    ctx = _Ctx(source)
    items: Any = doc
    if isinstance(doc, dict):
        ctx.only(ctx.mapping(doc, "document"), "document", {"pools"})
        if "pools" not in doc:
            raise ctx.fail("pools", "a list of pools")
        items = doc["pools"]
    if not isinstance(items, list):
        raise ctx.fail("pools", "a list of pools", items)
    pools: list[PoolSpec] = []
    seen: set[str] = set()
    ordinal = 0
    for i, item in enumerate(items):
        pool = _pool(ctx, item, f"pools[{i}]", ordinal)
        # "<name>-<int>" never collides across distinct names ("gpu-1" vs "gpu-a-1"), only duplicates do
        if pool.name in seen:
            raise ctx.fail(f"pools[{i}].name", "a name not used by an earlier pool", pool.name)
        seen.add(pool.name)
        ordinal += pool.count
        pools.append(pool)
    if ordinal > MAX_NODES:
        raise ctx.fail("pools", f"at most {MAX_NODES} nodes in all pools", ordinal)
    return pools


def load_pools(path: str | Path) -> list[PoolSpec]:
    """Read and validate a pools YAML file.

    Raises:
        PoolsError: the file is missing, not YAML, or not a valid pools document.
    """
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PoolsError(f"{source}: cannot read pools file ({exc.strerror})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PoolsError(f"{source}: not valid YAML ({exc})") from None
    return parse_pools(doc, source)
