"""The DRA part of a scenario: claims checked against the devices the pools publish, and the GPU mode a
variant runs in.

:func:`claim_problems` refuses, at ``hollowscale validate`` and before anything starts, what the file
alone shows to be wrong (each problem with its field path): a device class the run does not create for
its pools, an attribute or capacity that no device of that class has, a memory share on a pool that does
not share memory or larger than any GPU's memory, more devices than a node has, and a claim that no
device of any pool its pods may use satisfies.  The last one evaluates the selector on the devices
(:func:`hollow.dra.pool_devices`) when it is written in the subset of CEL that :mod:`.cel` reads (equality
and ``compareTo`` on attributes and capacities, joined by ``&&``, ``||``, ``!``); anything else is left
to the apiserver, which compiles every selector in the server-side dry run before the load
(:mod:`hollowscale.dra.feature`).

Variants (``variants: [{name, gpus: counted|claims|extended, gpu_sharing}]``) run the same GPU jobs
another way (:func:`apply_gpu_mode`): ``counted`` (every GPU pool counted, every GPU request
``nvidia.com/gpu``), ``claims`` (every GPU pool a DRA pool, every GPU request a claim of the GPU class)
and ``extended`` (DRA pools, requests ``nvidia.com/gpu`` served through the class's
``extendedResourceName``); ``gpu_sharing: false`` turns memory shares into whole GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hollow.dra import (
    ATTRIBUTES,
    CAPACITIES,
    CLASS_TYPES,
    DRIVER,
    EXTENDED_RESOURCE,
    GPU_CLASS,
    Device,
    GpuSpec,
    classes_for,
    memory_bytes,
    pool_devices,
)
from hollow.nodebody import POOL_LABEL, ROLE_LABEL
from hollow.pools import PoolSpec
from hollowscale.scenario.cel import evaluate, references
from kubecore.quantity import format_quantity, parse_quantity
from kubecore.schema import path_of
from loadgen.spec import ClaimSpec, RoleSpec, WorkloadSpec

#: how a variant asks for GPUs (None: as the file says)
GPU_MODES = ("counted", "claims", "extended")
STANDARD_DOMAIN = "resource.kubernetes.io"

Problems = list[tuple[tuple[str | int, ...], str]]


def _pools_for(role: RoleSpec, pools: Sequence[PoolSpec]) -> list[PoolSpec]:
    """The pools whose labels the role's node selector allows."""
    out = []
    for p in pools:
        labels = {POOL_LABEL: p.name, **({ROLE_LABEL: p.role} if p.role else {}), **p.labels}
        if all(labels.get(k) == v for k, v in role.node_selector.items() if k in labels or k.startswith("nvidia.com/")):
            out.append(p)
    return out


def _devices(pool: PoolSpec) -> list[Device]:
    gpus = pool.dra
    return pool_devices(gpus, pool.gpu_count, pool.first_ordinal) if gpus is not None else []


def _reference_problems(claim: ClaimSpec, device_type: str) -> list[str]:
    """Attributes and capacities the selector names that no device of the type has."""
    out = []
    for kind, domain, name in references(claim.selector or ""):
        if domain not in (DRIVER, STANDARD_DOMAIN):
            out.append(f"device.{kind}[{domain!r}]: no device of the run is in domain {domain!r} (its devices' "
                       f"domains: {DRIVER}, {STANDARD_DOMAIN})")
            continue
        qualified = name if domain == DRIVER else f"{domain}/{name}"
        known = ATTRIBUTES[device_type] if kind == "attributes" else dict.fromkeys(CAPACITIES[device_type])
        if qualified not in known:
            names = ", ".join(k for k in known if "/" not in k) if domain == DRIVER else \
                ", ".join(k.split("/", 1)[1] for k in known if k.startswith(f"{domain}/"))
            out.append(f"device.{kind}[{domain!r}].{name}: no {device_type} device has this {kind[:-1] if kind.endswith('s') else kind}"
                       f" (it has: {names or 'none'})")
    return out


def _matches(claim: ClaimSpec, device: Device) -> bool | None:
    """Whether the selector selects the device (None: the selector is outside the subset read here)."""
    if not claim.selector:
        return True
    return evaluate(claim.selector, device, DRIVER)


def claim_problems(pools: Sequence[PoolSpec], workloads: Sequence[WorkloadSpec], backend: str) -> Problems:
    """What is wrong with the workloads' claims against the pools (see the module doc)."""
    out: Problems = []
    classes = classes_for([p.gpus for p in pools if p.gpus is not None])
    for wi, w in enumerate(workloads):
        for ri, role in enumerate(w.roles):
            if role.claim is not None:
                out += _role_problems(role, role.claim, ("workloads", wi, "roles", ri, "claim"), pools, classes,
                                      backend)
    return out


def _role_problems(role: RoleSpec, claim: ClaimSpec, where: tuple[str | int, ...], pools: Sequence[PoolSpec],
                   classes: list[str], backend: str) -> Problems:
    if claim.device_class not in classes:
        if backend == "local" or claim.device_class in CLASS_TYPES:
            return [((*where, "device_class"), f"expected a DeviceClass the run creates for its pools "
                     f"({', '.join(classes) or 'none: no pool has gpus.expose dra or both'}), got {claim.device_class!r}")]
        return []  # a class of another cluster: the apiserver's dry run and the scheduler judge it
    device_type = CLASS_TYPES[claim.device_class]
    refs = [((*where, "selector"), p) for p in _reference_problems(claim, device_type)]
    if refs:
        return refs
    candidates = [p for p in _pools_for(role, pools) if p.dra is not None]
    typed = {p.name: [d for d in _devices(p) if d.type == device_type] for p in candidates}
    candidates = [p for p in candidates if typed[p.name]]
    if not candidates:
        return [(where, f"no pool its pods may use (node_selector {dict(role.node_selector)}) publishes "
                        f"{device_type} devices (class {claim.device_class})")]
    want = memory_bytes(claim.memory) if claim.memory is not None else 0
    if claim.memory is not None:
        sharing = [p for p in candidates if p.dra is not None and p.dra.sharing == "memory"]
        if not sharing:
            return [((*where, "memory"), "a memory share needs devices that allow multiple allocations: expected a "
                     f"pool with gpus.sharing: memory among {', '.join(p.name for p in candidates)}")]
        biggest = max(sharing, key=lambda p: typed[p.name][0].memory_bytes)
        most = typed[biggest.name][0].memory_bytes
        if want > most:
            return [((*where, "memory"), f"expected at most a GPU's memory ({format_quantity(most, binary=True)} in "
                     f"pool {biggest.name}), got {claim.memory}")]
        candidates = sharing
    per_node = max(len(typed[p.name]) for p in candidates)
    if per_node < claim.count:
        return [((*where, "count"), f"expected at most the {device_type} devices of one node ({per_node}: a claim's "
                 f"devices are all on one node), got {claim.count}")]
    unknown = False
    for p in candidates:
        picked = [_matches(claim, d) for d in typed[p.name] if want <= d.memory_bytes]
        if any(x is None for x in picked):
            unknown = True
        elif sum(1 for x in picked if x) >= claim.count:
            return []
    if unknown:
        return []  # a selector outside the subset read here: the scheduler is the judge
    seen = "; ".join(f"{p.name}: {typed[p.name][0].attributes.get('productName', '?')}" for p in candidates)
    return [(where, f"no node of any pool has {claim.count} {device_type} device(s) that the selector selects ({seen})")]


# ------------------------------------------------------------------------------------------------ variants


def _whole_gpus(claim: ClaimSpec) -> int:
    return claim.count


def to_counted(role: RoleSpec) -> RoleSpec:
    """A role that asked for GPU claims asks ``nvidia.com/gpu`` instead (whole GPUs; a memory share is one)."""
    if role.claim is None or role.claim.device_class != GPU_CLASS:
        return role
    resources = dict(role.resources)
    resources[EXTENDED_RESOURCE] = str(_whole_gpus(role.claim) + int(parse_quantity(resources.get(EXTENDED_RESOURCE, "0"))))
    return role.model_copy(update={"claim": None, "resources": resources})


def to_claims(role: RoleSpec) -> RoleSpec:
    """A role that asked ``nvidia.com/gpu`` asks a claim of that many GPUs of the GPU class instead."""
    n = role.gpus()
    if n == 0 or role.claim is not None:
        return role
    resources = {k: v for k, v in role.resources.items() if k != EXTENDED_RESOURCE}
    return role.model_copy(update={"resources": resources,
                                   "claim": ClaimSpec(device_class=GPU_CLASS, count=n)})


def without_sharing(role: RoleSpec) -> RoleSpec:
    """A memory share becomes a whole GPU (the claim keeps its class, count and selector)."""
    if role.claim is None or role.claim.memory is None:
        return role
    return role.model_copy(update={"claim": role.claim.model_copy(update={"memory": None})})


def apply_gpu_mode(pools: tuple[PoolSpec, ...], workloads: tuple[WorkloadSpec, ...], mode: str | None,
                   sharing: bool | None) -> tuple[tuple[PoolSpec, ...], tuple[WorkloadSpec, ...]]:
    """The pools and workloads as a variant with ``gpus: mode`` and ``gpu_sharing`` runs them."""
    if mode is None and sharing is not False:
        return pools, workloads
    new_pools = pools
    if mode is not None:
        expose = "counted" if mode == "counted" else "dra"
        new_pools = tuple(p.model_copy(update={"gpus": (p.gpus or GpuSpec()).model_copy(update={"expose": expose})})
                          if p.gpu_count else p for p in pools)
        if expose == "counted":  # counted GPUs share nothing and have no partitions
            new_pools = tuple(p.model_copy(update={"gpus": p.gpus.model_copy(update={"sharing": "none", "partitions": ()})})
                              if p.gpus is not None else p for p in new_pools)
    convert = {"counted": to_counted, "extended": to_counted, "claims": to_claims}.get(mode or "", lambda r: r)

    def role_of(r: RoleSpec) -> RoleSpec:
        r = without_sharing(r) if sharing is False else r
        return convert(r)

    new_workloads = tuple(w.model_copy(update={"roles": tuple(role_of(r) for r in w.roles)}) for w in workloads)
    return new_pools, new_workloads


def variant_claim_problems(variants: Sequence[Any], pools: tuple[PoolSpec, ...], workloads: tuple[WorkloadSpec, ...],
                           backend: str) -> Problems:
    """:func:`claim_problems` of each variant that asks for GPUs another way, as that variant runs."""
    out: Problems = []
    for i, v in enumerate(variants):
        if v.gpus is None and v.gpu_sharing is not False:
            continue
        vp, vw = apply_gpu_mode(pools, workloads, v.gpus, v.gpu_sharing)
        out += [(("variants", i, "gpus"), f"as this variant runs: {path_of(where)}: {why}")
                for where, why in claim_problems(vp, vw, backend)]
    return out


def gpu_mode_doc(mode: str | None, sharing: bool | None) -> dict[str, Any]:
    """What a variant's GPU mode says, for ``summary.json``."""
    return {"gpus": mode or "as written", "gpu_sharing": "as written" if sharing is None else sharing}
