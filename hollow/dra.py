"""GPUs as Dynamic Resource Allocation devices: the one definition of the driver, its attribute and
capacity names, the DeviceClasses, the GPU catalogue and the ResourceSlices a node publishes.

Everything that names a DRA device lives here, once: the hollow agent publishes its nodes' slices
with :func:`node_slices`; the orchestrator (:mod:`hollowscale.dra`, which re-exports this module as
:mod:`hollowscale.dra.devices`) creates the DeviceClasses of :func:`device_classes` and checks a
scenario's claims against :func:`pool_devices`; the real nodes' DRA kubelet plugin
(:mod:`hollowscale.draplugin`) publishes the same slices for a real node through the kubelet and
imports these names from here (its floor is below the orchestrator's rooms, so it imports
``hollow.dra``, not the re-export).  Pure functions of their arguments: no I/O.

What is copied from NVIDIA's DRA driver (``kubernetes-sigs/dra-driver-nvidia-gpu`` at 95932046,
``cmd/gpu-kubelet-plugin/deviceinfo.go``, ``partitions.go``, ``consumable_shares.go``, and its Helm
chart's DeviceClasses), so that claims written for a real cluster select hollow devices unchanged:

* driver ``gpu.nvidia.com``; the pool is the node's name; devices ``gpu-<i>``;
* attributes of a full GPU: ``type`` (``gpu``), ``uuid``, ``productName``, ``brand``,
  ``architecture``, ``cudaComputeCapability``, ``driverVersion`` and ``cudaDriverVersion`` (versions
  semver-normalised, as the driver does: ``575.57.08`` -> ``575.57.8``) and the standard
  ``resource.kubernetes.io/pciBusID``; no ``index`` or ``minor`` (the driver stopped publishing them in
  v0.4.0); capacity ``memory`` (the GPU's memory, as NVML reports it);
* memory sharing (the driver's ``--consumable-shares=memory``, behind its alpha gate
  ``ConsumableShares``; off by default there): ``allowMultipleAllocations: true`` and
  ``memory.requestPolicy {default: <all of it>, validRange {min: 1Mi, max: <all>, step: 1Mi}}``, so a
  claim without a capacity request still gets the whole GPU;
* milli-GPU shares (the driver's ``--consumable-shares=1000``, same gate): ``allowMultipleAllocations:
  true``, capacity ``shares {value: 1000, requestPolicy {default: 1, validRange {min: 1, max: 1000, step:
  1}}}`` and ``memory`` with ``requestPolicy {default: 0, validRange {min: 0, max: <all>, step: 1Mi}}``,
  so a claim takes what its ``capacity.requests.shares`` says (a whole GPU asks all 1000); the trace
  replay's GPU shares (:mod:`hollowscale.replay`);
* partitionable MIG devices (the driver's ``DynamicMIG``, KEP 4815, split slices): per GPU a counter set
  ``gpu-<i>-counter-set`` (``multiprocessors``, ``memory``, ``memory-slice-<k>``) in a slice of its own,
  the full GPU consuming all of it and each MIG placement ``gpu-<i>-mig-<profile>-<id>-<start>`` (type
  ``mig``, ``parentUUID``, ``profile``) its share and its memory slices;
* DeviceClasses ``gpu.nvidia.com`` (type ``gpu``, ``extendedResourceName: nvidia.com/gpu``, as the chart
  writes it for ``resource.k8s.io/v1``) and ``mig.nvidia.com`` (type ``mig``).

Left out: copy/decode/encode/JPEG/OFA engine counters of MIG profiles (only multiprocessors and memory
are counted), ``resource.kubernetes.io/pcieRoot`` and ``numaNode``, ``addressingMode``, VFIO devices.
A MIG slice's memory is the GPU's memory / 8 (NVML reports a little less per profile).

Slices are owned by their Node (``ownerReferences``, ``controller: true``), as a kubelet plugin's are,
so the garbage collector deletes them with the node.  Limits of ``resource.k8s.io/v1`` respected here:
128 devices per slice, 64 when devices consume counters, 8 counter sets per slice, 32 attributes and
capacities per device.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import model_validator

from kubecore.quantity import format_quantity, parse_quantity
from kubecore.schema import Spec, leaf, one_of, raise_problems, show, validator_of

API_VERSION = "resource.k8s.io/v1"
#: the driver of every hollow GPU (NVIDIA's DRA driver's name, so users' claims work unchanged)
DRIVER = "gpu.nvidia.com"
#: the DeviceClass of full GPUs, and of MIG partitions
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
#: the counted resource name the GPU class maps to (``extendedResourceName``; KEP-5004)
EXTENDED_RESOURCE = "nvidia.com/gpu"
#: every class also answers to this implicit extended resource name + the class name
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
GPU_TYPE = "gpu"
MIG_TYPE = "mig"

# attribute names (unqualified: in the driver's domain) and the standard ones
ATTR_TYPE = "type"
ATTR_UUID = "uuid"
ATTR_PRODUCT = "productName"
ATTR_BRAND = "brand"
ATTR_ARCHITECTURE = "architecture"
ATTR_COMPUTE_CAPABILITY = "cudaComputeCapability"
ATTR_DRIVER_VERSION = "driverVersion"
ATTR_CUDA_DRIVER_VERSION = "cudaDriverVersion"
ATTR_PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
ATTR_PARENT_UUID = "parentUUID"
ATTR_PROFILE = "profile"
# capacity names
CAP_MEMORY = "memory"
CAP_MULTIPROCESSORS = "multiprocessors"
CAP_SHARES = "shares"
#: the shares of one GPU in the ``shares`` sharing mode (NVIDIA's ``--consumable-shares=1000``)
SHARES_PER_GPU = 1000

#: attributes (name -> CEL type: string | version | int | bool) of each device type
ATTRIBUTES: dict[str, dict[str, str]] = {
    GPU_TYPE: {ATTR_TYPE: "string", ATTR_UUID: "string", ATTR_PRODUCT: "string", ATTR_BRAND: "string",
               ATTR_ARCHITECTURE: "string", ATTR_COMPUTE_CAPABILITY: "version", ATTR_DRIVER_VERSION: "version",
               ATTR_CUDA_DRIVER_VERSION: "version", ATTR_PCI_BUS_ID: "string"},
    MIG_TYPE: {ATTR_TYPE: "string", ATTR_UUID: "string", ATTR_PARENT_UUID: "string", ATTR_PROFILE: "string",
               ATTR_PRODUCT: "string", ATTR_BRAND: "string", ATTR_ARCHITECTURE: "string",
               ATTR_COMPUTE_CAPABILITY: "version", ATTR_DRIVER_VERSION: "version",
               ATTR_CUDA_DRIVER_VERSION: "version"},
}
#: capacities of each device type
CAPACITIES: dict[str, tuple[str, ...]] = {GPU_TYPE: (CAP_MEMORY, CAP_SHARES),
                                          MIG_TYPE: (CAP_MULTIPROCESSORS, CAP_MEMORY)}

#: resource.k8s.io/v1 limits (k8s pkg/apis/resource/validation)
MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_WITH_COUNTERS = 64
MAX_COUNTER_SETS_PER_SLICE = 8
#: memory slices of a MIG-capable GPU
MEMORY_SLICES = 8
DEFAULT_DRIVER_VERSION = "575.57.8"
DEFAULT_CUDA_DRIVER_VERSION = "12.9.0"
EXPOSE = ("counted", "dra", "both")
SHARING = ("none", "memory", "shares")


@dataclass(frozen=True)
class MigProfile:
    """A MIG profile: its name, nvidia-smi's GPU-instance profile id, memory slices, multiprocessors and
    the memory slices its placements may start at."""

    name: str
    profile_id: int
    slices: int
    multiprocessors: int
    starts: tuple[int, ...]


@dataclass(frozen=True)
class GpuModel:
    """A GPU as NVML describes it (product name, brand, architecture, compute capability, memory in MiB,
    multiprocessors) and the MIG profiles it offers."""

    product: str
    brand: str
    architecture: str
    compute_capability: str
    memory_mib: int
    multiprocessors: int
    mig: tuple[MigProfile, ...] = ()

    @property
    def memory(self) -> str:
        return f"{self.memory_mib}Mi"


def _mig(prefix_gb: int) -> tuple[MigProfile, ...]:
    """A100/H100-style profiles for a GPU whose memory slice holds ``prefix_gb`` GB."""
    g = prefix_gb
    return (MigProfile(f"1g.{g}gb", 19, 1, 16, (0, 1, 2, 3, 4, 5, 6)),
            MigProfile(f"2g.{2 * g}gb", 14, 2, 32, (0, 2, 4)),
            MigProfile(f"3g.{4 * g}gb", 9, 4, 48, (0, 4)),
            MigProfile(f"4g.{4 * g}gb", 5, 4, 64, (0,)),
            MigProfile(f"7g.{8 * g}gb", 0, 8, 112, (0,)))


#: the GPUs a pool may have (``gpus.model``); memory as NVML reports it
GPU_MODELS: dict[str, GpuModel] = {
    "h100-80gb": GpuModel("NVIDIA H100 80GB HBM3", "Nvidia", "Hopper", "9.0.0", 81559, 132, _mig(10)),
    "a100-80gb": GpuModel("NVIDIA A100-SXM4-80GB", "Nvidia", "Ampere", "8.0.0", 81920, 108, _mig(10)),
    "a100-40gb": GpuModel("NVIDIA A100-SXM4-40GB", "Nvidia", "Ampere", "8.0.0", 40960, 108, _mig(5)),
    "l4": GpuModel("NVIDIA L4", "Nvidia", "Ada Lovelace", "8.9.0", 23034, 58),
    "t4": GpuModel("Tesla T4", "Nvidia", "Turing", "7.5.0", 15360, 40),
    "v100-32gb": GpuModel("Tesla V100-SXM2-32GB", "Tesla", "Volta", "7.0.0", 32768, 80),
    "p4": GpuModel("Tesla P4", "Tesla", "Pascal", "6.1.0", 7680, 20),
}

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
#: PCI buses of the eight GPUs of an HGX board, then made up
_PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def _semver(value: Any) -> str:
    """A version attribute: ``major.minor.patch`` as the API's strict rule wants it (leading zeros of
    NVIDIA's ``575.57.08`` dropped, as the driver's semver parse does)."""
    if not isinstance(value, str):
        raise ValueError(f"expected a version such as 575.57.8, got {show(value)}")
    parts = value.split(".")
    if len(parts) == 2:
        parts.append("0")
    norm = ".".join(str(int(p)) if p.isdigit() else p for p in parts)
    if not _SEMVER.match(norm):
        raise ValueError(f"expected a version major.minor.patch such as 575.57.8, got {value!r}")
    return norm


def _partitions(value: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(value)) != len(value):
        raise ValueError(f"expected each MIG profile once, got {list(value)}")
    return value


class GpuSpec(Spec):
    """How a pool exposes its GPUs (``gpus:`` of a pool; the count is the pool's ``nvidia.com/gpu``).

    Attributes:
        expose: ``counted`` (``nvidia.com/gpu`` in the node's allocatable, as a device plugin does: the
            default), ``dra`` (a ResourceSlice per node, one device per GPU; no ``nvidia.com/gpu`` in
            allocatable, so a pod asking it is served through the GPU class's extended-resource mapping)
            or ``both`` (counted *and* slices: the scheduler serves ``nvidia.com/gpu`` from allocatable on
            these nodes and claims from the slices, and nothing stops both from handing out the same
            GPU: double booking; for migration tests only).
        model: the GPU (a key of :data:`GPU_MODELS`).
        sharing: ``none`` (a device is allocated whole), ``memory`` (consumable capacity: claims take
            a share of a GPU's memory; several claims on one GPU) or ``shares`` (claims take milli-GPU
            shares, 1000 per GPU).
        product: the ``productName`` attribute instead of the model's (a trace's own model names, such
            as Alibaba's ``G2``); the other attributes and the memory stay the model's.
        partitions: MIG profiles published as partitionable devices (every placement of each, beside
            the full GPU, all consuming one counter set per GPU); empty: full GPUs only.
        driver_version: the driver version attribute (``cudaDriverVersion`` stays 12.9.0).
    """

    expose: Annotated[str, validator_of(one_of(*EXPOSE))] = "counted"
    model: Annotated[str, validator_of(one_of(*GPU_MODELS))] = "h100-80gb"
    sharing: Annotated[str, validator_of(one_of(*SHARING))] = "none"
    partitions: Annotated[tuple[str, ...], leaf(lambda v: _partitions(tuple(v)) if isinstance(v, list | tuple)
                                                else _bad_list(v))] = ()
    driver_version: Annotated[str, leaf(_semver)] = DEFAULT_DRIVER_VERSION
    product: Annotated[str, leaf(_product)] | None = None

    @model_validator(mode="after")
    def _profiles(self) -> GpuSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        known = [p.name for p in GPU_MODELS[self.model].mig]
        for i, name in enumerate(self.partitions):
            if name not in known:
                offered = ", ".join(known) if known else "none: it has no MIG"
                problems.append((("partitions", i), f"expected a MIG profile of {self.model} ({offered}), got {name!r}"))
        if self.partitions and self.sharing != "none":
            problems.append((("sharing",), "expected none with partitions (a MIG device is not shared by memory)"))
        if self.partitions and self.expose == "counted":
            problems.append((("partitions",), "partitions are DRA devices: expected expose dra or both"))
        if self.sharing != "none" and self.expose == "counted":
            problems.append((("sharing",), f"{self.sharing} sharing is a DRA feature: expected expose dra or both"))
        raise_problems("GpuSpec", problems)
        return self

    @property
    def publishes_slices(self) -> bool:
        """The pool's nodes publish ResourceSlices."""
        return self.expose != "counted"

    @property
    def counted(self) -> bool:
        """``nvidia.com/gpu`` stays in the nodes' allocatable."""
        return self.expose != "dra"

    def gpu_model(self) -> GpuModel:
        return GPU_MODELS[self.model]

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"expose": self.expose, "model": self.model, "sharing": self.sharing}
        if self.partitions:
            doc["partitions"] = list(self.partitions)
        if self.driver_version != DEFAULT_DRIVER_VERSION:
            doc["driver_version"] = self.driver_version
        if self.product is not None:
            doc["product"] = self.product
        return doc


def _product(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        raise ValueError(f"expected a product name (a string attribute, at most 64 characters), got {show(value)}")
    return value


def _bad_list(value: Any) -> tuple[str, ...]:
    raise ValueError(f"expected a list of MIG profile names such as [1g.10gb, 3g.40gb], got {show(value)}")


# ------------------------------------------------------------------------------------------------ devices


@dataclass(frozen=True)
class Device:
    """One device a node publishes: what validation and the report read, and what :func:`device_body`
    renders (the real nodes' plugin builds these from its own inventory with :func:`gpu_attributes`).

    Attributes:
        name: device name in its pool (``gpu-3``, ``gpu-3-mig-1g10gb-19-2``).
        type: ``gpu`` or ``mig``.
        attributes: unqualified name (or ``resource.kubernetes.io/...``) -> value (types: :data:`ATTRIBUTES`).
        memory_bytes: its memory capacity.
        shareable: ``allowMultipleAllocations`` with a memory request policy (memory sharing).
        shares: the milli-GPU shares it offers (``allowMultipleAllocations``; 0: not shared by shares).
        parent: the full GPU a MIG device belongs to ('' for a full GPU).
        multiprocessors: the multiprocessors capacity of a MIG device (0: not published).
        counter_set: the counter set it consumes from ('' for none).
        consumes: counter name -> quantity it consumes from ``counter_set``.
    """

    name: str
    type: str
    attributes: dict[str, str]
    memory_bytes: int
    shareable: bool = False
    shares: int = 0
    parent: str = ""
    multiprocessors: int = 0
    counter_set: str = ""
    consumes: tuple[tuple[str, str], ...] = ()


def gpu_attributes(uuid: str, product: str, brand: str, architecture: str, compute_capability: str,
                   driver_version: str = DEFAULT_DRIVER_VERSION, cuda_driver_version: str = DEFAULT_CUDA_DRIVER_VERSION,
                   pci_bus_id: str | None = None) -> dict[str, str]:
    """The attributes of a full GPU as NVIDIA's driver publishes them (versions normalised to semver)."""
    out = {ATTR_TYPE: GPU_TYPE, ATTR_UUID: uuid, ATTR_PRODUCT: product, ATTR_BRAND: brand,
           ATTR_ARCHITECTURE: architecture, ATTR_COMPUTE_CAPABILITY: _semver(compute_capability),
           ATTR_DRIVER_VERSION: _semver(driver_version), ATTR_CUDA_DRIVER_VERSION: _semver(cuda_driver_version)}
    if pci_bus_id:
        out[ATTR_PCI_BUS_ID] = pci_bus_id
    return out


def gpu_uuid(node_ordinal: int, index: int) -> str:
    """A stable, unique NVML-style UUID of GPU ``index`` of the node with ``node_ordinal``."""
    h = hashlib.sha1(f"{node_ordinal}/{index}".encode()).hexdigest()
    return f"GPU-{node_ordinal:08x}-{index:04x}-4{h[:3]}-8{h[3:6]}-{h[6:18]}"


def _mig_uuid(parent: str, device: str) -> str:
    h = hashlib.sha1(f"{parent}/{device}".encode()).hexdigest()
    return f"MIG-{h[:8]}-{h[8:12]}-5{h[12:15]}-8{h[15:18]}-{h[18:30]}"


def _pci_bus_id(index: int) -> str:
    bus = _PCI_BUSES[index] if index < len(_PCI_BUSES) else 0x10 + index
    return f"0000:{bus:02x}:00.0"


def _memory_slice_bytes(model: GpuModel) -> int:
    return (model.memory_mib // MEMORY_SLICES) * 2**20


def pool_devices(gpus: GpuSpec, count: int, node_ordinal: int = 0) -> list[Device]:
    """The devices one node of a pool publishes (``count`` GPUs, then each GPU's MIG placements)."""
    model = gpus.gpu_model()
    out: list[Device] = []
    memory = model.memory_mib * 2**20
    slice_bytes = _memory_slice_bytes(model)
    for i in range(count):
        uuid = gpu_uuid(node_ordinal, i)
        attrs = gpu_attributes(uuid, gpus.product or model.product, model.brand, model.architecture,
                               model.compute_capability, gpus.driver_version, DEFAULT_CUDA_DRIVER_VERSION, _pci_bus_id(i))
        counter_set = f"gpu-{i}-counter-set" if gpus.partitions else ""
        consumes = tuple((k, v["value"]) for k, v in _counters(model).items()) if gpus.partitions else ()
        out.append(Device(f"gpu-{i}", GPU_TYPE, attrs, memory, shareable=gpus.sharing == "memory",
                          shares=SHARES_PER_GPU if gpus.sharing == "shares" else 0,
                          counter_set=counter_set, consumes=consumes))
        common = {k: v for k, v in attrs.items() if k not in (ATTR_TYPE, ATTR_UUID, ATTR_PCI_BUS_ID)}
        for profile in (p for p in model.mig if p.name in gpus.partitions):
            for start in profile.starts:
                name = f"gpu-{i}-mig-{profile.name.replace('.', '')}-{profile.profile_id}-{start}"
                mem = profile.slices * slice_bytes
                used = ((CAP_MULTIPROCESSORS, str(profile.multiprocessors)),
                        (CAP_MEMORY, format_quantity(mem, binary=True)),
                        *((f"memory-slice-{k}", "1") for k in range(start, start + profile.slices)))
                out.append(Device(name, MIG_TYPE, {ATTR_TYPE: MIG_TYPE, ATTR_UUID: _mig_uuid(uuid, name),
                                                   ATTR_PARENT_UUID: uuid, ATTR_PROFILE: profile.name, **common},
                                  mem, parent=f"gpu-{i}", multiprocessors=profile.multiprocessors,
                                  counter_set=counter_set, consumes=used))
    return out


def device_body(d: Device) -> dict[str, Any]:
    """A device of a ResourceSlice's ``spec.devices``."""
    kinds = ATTRIBUTES[d.type]
    body: dict[str, Any] = {"name": d.name, "attributes": {k: {kinds[k]: v} for k, v in d.attributes.items()}}
    mem = format_quantity(d.memory_bytes, binary=True)
    cap: dict[str, Any] = {"value": mem}
    if d.shareable:
        body["allowMultipleAllocations"] = True
        cap["requestPolicy"] = {"default": mem, "validRange": {"min": "1Mi", "max": mem, "step": "1Mi"}}
    elif d.shares:
        body["allowMultipleAllocations"] = True
        cap["requestPolicy"] = {"default": "0", "validRange": {"min": "0", "max": mem, "step": "1Mi"}}
    body["capacity"] = {CAP_MULTIPROCESSORS: {"value": str(d.multiprocessors)}, CAP_MEMORY: cap} \
        if d.multiprocessors else {CAP_MEMORY: cap}
    if d.shares:
        body["capacity"][CAP_SHARES] = {"value": str(d.shares), "requestPolicy": {
            "default": "1", "validRange": {"min": "1", "max": str(d.shares), "step": "1"}}}
    if d.counter_set:
        body["consumesCounters"] = [{"counterSet": d.counter_set,
                                     "counters": {k: {"value": v} for k, v in d.consumes}}]
    return body


def _counters(model: GpuModel) -> dict[str, dict[str, str]]:
    """All of one GPU's counters: its multiprocessors (those of its largest profile), memory, memory slices."""
    sms = max((p.multiprocessors for p in model.mig), default=model.multiprocessors)
    out = {CAP_MULTIPROCESSORS: {"value": str(sms)},
           CAP_MEMORY: {"value": format_quantity(MEMORY_SLICES * _memory_slice_bytes(model), binary=True)}}
    for k in range(MEMORY_SLICES):
        out[f"memory-slice-{k}"] = {"value": "1"}
    return out


def slice_name(node: str, k: int, total: int) -> str:
    """The name of slice ``k`` of ``total`` of a node (``<node>-gpu.nvidia.com``, then ``-<k>``)."""
    return f"{node}-{DRIVER}" if total == 1 else f"{node}-{DRIVER}-{k}"


def pool_slices(node: str, node_uid: str, devices: list[Device], counter_sets: list[dict[str, Any]] | None = None,
                labels: dict[str, str] | None = None, generation: int = 1) -> list[dict[str, Any]]:
    """The ResourceSlices of one node's pool (named after the node), owned by the Node.

    Counter sets go in slices of their own (8 per slice), then the devices, at most 128 per slice (64
    when they consume counters).  Every slice says how many the pool has (``resourceSliceCount``).
    """
    bodies = [device_body(d) for d in devices]
    sets = counter_sets or []
    chunks: list[dict[str, Any]] = [{"sharedCounters": sets[k:k + MAX_COUNTER_SETS_PER_SLICE]}
                                    for k in range(0, len(sets), MAX_COUNTER_SETS_PER_SLICE)]
    per = MAX_DEVICES_WITH_COUNTERS if any(d.counter_set for d in devices) else MAX_DEVICES_PER_SLICE
    chunks += [{"devices": bodies[k:k + per]} for k in range(0, len(bodies), per)] or [{"devices": []}]
    total = len(chunks)
    meta: dict[str, Any] = {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                                  "controller": True}]}
    if labels:
        meta["labels"] = dict(labels)
    out = []
    for k, chunk in enumerate(chunks):
        spec = {"driver": DRIVER, "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": total}, **chunk}
        out.append({"apiVersion": API_VERSION, "kind": "ResourceSlice",
                    "metadata": {"name": slice_name(node, k, total), **meta}, "spec": spec})
    return out


def node_slices(node: str, node_uid: str, node_ordinal: int, gpus: GpuSpec, count: int,
                labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The ResourceSlices of one hollow node of a pool with ``count`` GPUs (:func:`pool_slices`)."""
    sets = [{"name": f"gpu-{i}-counter-set", "counters": _counters(gpus.gpu_model())} for i in range(count)] \
        if gpus.partitions else None
    return pool_slices(node, node_uid, pool_devices(gpus, count, node_ordinal), sets, labels)


# ------------------------------------------------------------------------------------------------ classes


def _type_selector(device_type: str) -> str:
    return f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].{ATTR_TYPE} == '{device_type}'"


def device_class(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The DeviceClass ``name`` (:data:`GPU_CLASS` or :data:`MIG_CLASS`) as NVIDIA's chart writes it."""
    device_type = {GPU_CLASS: GPU_TYPE, MIG_CLASS: MIG_TYPE}[name]
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": _type_selector(device_type)}}]}
    if name == GPU_CLASS:
        spec["extendedResourceName"] = EXTENDED_RESOURCE
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": meta, "spec": spec}


#: each class and the device type it selects
CLASS_TYPES: dict[str, str] = {GPU_CLASS: GPU_TYPE, MIG_CLASS: MIG_TYPE}


def classes_for(specs: list[GpuSpec]) -> list[str]:
    """The DeviceClasses a set of pools needs: the GPU class when any pool publishes slices, the MIG class
    when any publishes partitions."""
    out = []
    if any(g.publishes_slices for g in specs):
        out.append(GPU_CLASS)
    if any(g.partitions for g in specs):
        out.append(MIG_CLASS)
    return out


def device_classes(specs: list[GpuSpec], labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The DeviceClass objects a set of pools needs (:func:`classes_for`)."""
    return [device_class(name, labels) for name in classes_for(specs)]


def memory_bytes(quantity: str) -> int:
    """A memory quantity in bytes (rounded up)."""
    q = parse_quantity(quantity)
    return int(-(-q.numerator // q.denominator))


__all__ = [
    "API_VERSION", "ATTRIBUTES", "ATTR_ARCHITECTURE", "ATTR_BRAND", "ATTR_COMPUTE_CAPABILITY",
    "ATTR_CUDA_DRIVER_VERSION", "ATTR_DRIVER_VERSION", "ATTR_PARENT_UUID", "ATTR_PCI_BUS_ID", "ATTR_PRODUCT",
    "ATTR_PROFILE", "ATTR_TYPE", "ATTR_UUID", "CAPACITIES", "CAP_MEMORY", "CAP_MULTIPROCESSORS", "CAP_SHARES",
    "CLASS_TYPES", "DRIVER", "EXPOSE", "EXTENDED_RESOURCE", "GPU_CLASS", "GPU_MODELS", "GPU_TYPE",
    "IMPLICIT_EXTENDED_PREFIX", "MIG_CLASS", "MIG_TYPE", "SHARES_PER_GPU", "SHARING", "Device", "GpuModel", "GpuSpec", "MigProfile", "classes_for",
    "device_body", "device_class", "device_classes", "gpu_attributes", "gpu_uuid", "memory_bytes", "node_slices",
    "pool_devices", "pool_slices", "slice_name",
]
