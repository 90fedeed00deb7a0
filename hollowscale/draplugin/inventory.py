"""Which GPUs the DRA plugin offers: a fake inventory, or the machine's GPUs through ``nvidia-smi``.

A device is what :mod:`hollow.dra` (the one definition of a DRA GPU) says it is; this module only decides
which devices a real node has.  A fake inventory is exactly a hollow pool's node (:func:`hollow.dra.
pool_devices` of a :class:`hollow.dra.GpuSpec`: model, memory sharing, MIG partitions), with UUIDs of a node
ordinal derived from the node's name (:func:`node_ordinal`), so they stay the same when the plugin restarts
(containers were told them) and differ from hollow nodes' (whose ordinals are small).  Real GPUs become
full-GPU devices with the attributes NVML reports (:func:`hollow.dra.gpu_attributes`).

Each device is paired with a :class:`hollowscale.deviceplugin.inventory.Gpu` (its ID is the device's UUID;
a real one has its minor number), so what a prepared device puts into a container is the device plugin's own
answer (:func:`hollowscale.deviceplugin.allocation.allocate`), for fake and real GPUs alike.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollow.dra import (
    ATTR_PRODUCT,
    ATTR_UUID,
    GPU_TYPE,
    Device,
    GpuSpec,
    gpu_attributes,
    node_slices,
    pool_devices,
    pool_slices,
)
from hollowscale.deviceplugin import inventory as dp_inventory

_QUERY = "uuid,name,pci.bus_id,memory.total,compute_cap,driver_version"
#: compute capability (major.minor) -> architecture, as NVML names them
_ARCHITECTURES = {"6.0": "Pascal", "6.1": "Pascal", "7.0": "Volta", "7.2": "Volta", "7.5": "Turing", "8.0": "Ampere",
                  "8.6": "Ampere", "8.7": "Ampere", "8.9": "Ada Lovelace", "9.0": "Hopper", "10.0": "Blackwell",
                  "10.3": "Blackwell", "12.0": "Blackwell"}
#: fake real-node GPUs' node ordinals start here (hollow nodes' ordinals are their slots: small numbers)
ORDINAL_BASE = 0xF0000000


class InventoryError(RuntimeError):
    """The inventory asked for cannot be built (no GPUs, nvidia-smi failing, bad fake settings)."""


@dataclass(frozen=True)
class DraInventory:
    """The node's devices, the device plugin's view of the same GPUs, and how its slices are made.

    Attributes:
        devices: what the node publishes (full GPUs, then MIG placements of a fake inventory).
        gpus: one device-plugin GPU per device (ID = the device's UUID).
        spec: the fake inventory's pool spec (its slices are a hollow node's); None for real GPUs.
        ordinal: the node ordinal the fake UUIDs derive from.
    """

    devices: tuple[Device, ...]
    gpus: dp_inventory.Inventory
    spec: GpuSpec | None = None
    ordinal: int = 0

    def by_name(self) -> dict[str, tuple[Device, dp_inventory.Gpu]]:
        """Device name -> (the published device, the container's GPU)."""
        ids = self.gpus.by_id()
        return {d.name: (d, ids[d.attributes[ATTR_UUID]]) for d in self.devices}

    @property
    def real(self) -> bool:
        return self.gpus.real

    def slices(self, node: str, node_uid: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """The node's ResourceSlices (one, or counter-set and device slices when there are partitions)."""
        if self.spec is not None:
            return node_slices(node, node_uid, self.ordinal, self.spec, _full_gpus(self.devices), labels)
        return pool_slices(node, node_uid, list(self.devices), labels=labels)


def _full_gpus(devices: tuple[Device, ...]) -> int:
    return sum(1 for d in devices if d.type == GPU_TYPE)


def node_ordinal(node: str) -> int:
    """A node ordinal for ``node``'s fake GPU UUIDs: stable, above every hollow node's."""
    return ORDINAL_BASE | (zlib.crc32(node.encode()) & 0x0FFFFFFF)


def _paired(devices: list[Device], real: bool, dev_root: Path = Path("/dev"),
            minors: dict[str, int] | None = None) -> dp_inventory.Inventory:
    gpus = tuple(dp_inventory.Gpu(id=d.attributes[ATTR_UUID], model=dp_inventory.product_label(d.attributes[ATTR_PRODUCT]),
                                  minor=(minors or {}).get(d.attributes[ATTR_UUID])) for d in devices)
    return dp_inventory.Inventory(gpus=gpus, real=real, dev_root=dev_root)


def fake_inventory(node: str, count: int, spec: GpuSpec) -> DraInventory:
    """``count`` fake GPUs of ``spec`` (model, sharing, partitions), as a hollow node of that pool has them."""
    if count < 1:
        raise InventoryError(f"expected at least 1 fake GPU, got {count}")
    if not node:
        raise InventoryError("the node's name is needed (fake UUIDs are derived from it)")
    ordinal = node_ordinal(node)
    devices = pool_devices(spec, count, ordinal)
    return DraInventory(devices=tuple(devices), gpus=_paired(devices, real=False), spec=spec, ordinal=ordinal)


def _semver(text: str) -> str:
    """``550.163.01`` -> ``550.163.1``, ``9.0`` -> ``9.0.0``: the API's strict major.minor.patch."""
    parts = [str(int(p)) for p in text.strip().split(".") if p.strip().isdigit()][:3]
    return ".".join(parts + ["0"] * (3 - len(parts))) if parts else "0.0.0"


def parse_details(csv: str) -> dict[str, dict[str, str]]:
    """``nvidia-smi --query-gpu=uuid,name,pci.bus_id,memory.total,compute_cap,driver_version
    --format=csv,noheader,nounits`` -> uuid -> {product, bus, memory (MiB), cc, architecture, driver}."""
    out: dict[str, dict[str, str]] = {}
    for line in csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6:
            continue
        uuid, name, bus, mib, cc, driver = parts
        try:
            memory = str(int(float(mib)))
        except ValueError:
            memory = "0"
        out[uuid] = {"product": name, "bus": dp_inventory.proc_bus_id(bus), "memory": memory, "cc": _semver(cc),
                     "architecture": _ARCHITECTURES.get(cc.strip(), "Unknown"), "driver": _semver(driver)}
    return out


def real_from(gpus: dp_inventory.Inventory, details: dict[str, dict[str, str]], memory_shares: bool = False) -> DraInventory:
    """The DRA view of the device plugin's real inventory: full GPUs ``gpu-<minor>`` (NVIDIA's names)."""
    devices = []
    for i, g in enumerate(gpus.gpus):
        facts = details.get(g.id, {})
        minor = g.minor if g.minor is not None else i
        attrs = gpu_attributes(g.id, facts.get("product", g.model), "Nvidia", facts.get("architecture", "Unknown"),
                               facts.get("cc", "0.0.0"), facts.get("driver", "0.0.0"), pci_bus_id=facts.get("bus"))
        devices.append(Device(f"gpu-{minor}", GPU_TYPE, attrs, int(facts.get("memory", "0")) * 2**20,
                              shareable=memory_shares))
    return DraInventory(devices=tuple(devices), gpus=gpus)


def real_inventory(memory_shares: bool = False, dev_root: Path = Path("/dev")) -> DraInventory:
    """The machine's GPUs through ``nvidia-smi`` (the device plugin's inventory, plus memory and versions)."""
    try:
        gpus = dp_inventory.real_inventory(dev_root)
        details = parse_details(dp_inventory.query_nvidia_smi(fields=_QUERY))
    except dp_inventory.InventoryError as exc:
        raise InventoryError(str(exc)) from None
    return real_from(gpus, details, memory_shares)
