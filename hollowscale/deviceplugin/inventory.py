"""What GPUs a node has: a fake inventory with stable IDs, or the machine's real GPUs from ``nvidia-smi``.

The kubelet only ever sees device IDs and their health; everything else here (model, minor number,
NUMA node) is what :mod:`hollowscale.deviceplugin.allocation` needs to tell the container runtime which
device files to pass, and what the node's labels should say.

Fake IDs are ``<node>-gpu-<i>``: stable across plugin restarts (the kubelet's checkpoint keeps a pod's
devices by ID, so a restarted plugin must offer the same IDs) and unique per node (every kubelet on this
machine shares the one hard-coded checkpoint file ``/var/lib/kubelet/device-plugins/
kubelet_internal_checkpoint``; node-unique IDs keep one node's allocations from ever naming another's
devices).  Real IDs are the GPU UUIDs, as NVIDIA's own device plugin uses them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HEALTHY = "Healthy"  # the kubelet's constants (deviceplugin/v1beta1/constants.go)
UNHEALTHY = "Unhealthy"
#: the kubelet rejects longer device IDs (api.proto: "Max length of this field is 63 characters")
MAX_ID_LEN = 63
_QUERY = "index,uuid,name,pci.bus_id"


class InventoryError(RuntimeError):
    """The inventory asked for cannot be built (no GPUs, nvidia-smi failing, bad fake settings)."""


@dataclass(frozen=True)
class Gpu:
    """One device as the plugin advertises it."""

    id: str  #: the ID the kubelet allocates by
    model: str  #: product name, label form (``NVIDIA-H200``: spaces become dashes, as GPU feature discovery does)
    minor: int | None = None  #: ``/dev/nvidia<minor>``; None for a fake GPU (no device file)
    numa_node: int | None = None  #: NUMA node for the kubelet's topology manager; None when unknown


@dataclass(frozen=True)
class Inventory:
    """The node's GPUs, in the order GetPreferredAllocation prefers them."""

    gpus: tuple[Gpu, ...]
    real: bool
    #: where device files and driver libraries live (real GPUs only; tests point it at a fake tree)
    dev_root: Path = field(default=Path("/dev"))

    @property
    def ids(self) -> list[str]:
        return [g.id for g in self.gpus]

    def by_id(self) -> dict[str, Gpu]:
        return {g.id: g for g in self.gpus}

    def node_labels(self) -> dict[str, str]:
        """The labels GPU feature discovery would put on this node.  A device plugin cannot set labels
        (its only channel is the kubelet's device API); whoever starts the kubelet passes these in
        ``--node-labels`` so pools and scenarios can select real GPU nodes by model like hollow ones."""
        if not self.gpus:
            return {}
        return {"nvidia.com/gpu.product": self.gpus[0].model, "nvidia.com/gpu.count": str(len(self.gpus))}


def product_label(name: str) -> str:
    """``NVIDIA H200`` -> ``NVIDIA-H200``: the form of GPU feature discovery's ``nvidia.com/gpu.product``
    (a label value: no spaces, at most 63 characters)."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip()).strip("-._")
    return value[:63] or "unknown"


def fake_inventory(node: str, count: int, model: str) -> Inventory:
    """``count`` GPUs named ``<node>-gpu-<i>``, all healthy, none backed by a device file."""
    if count < 1:
        raise InventoryError(f"--fake-gpus must be at least 1, got {count}")
    if not node:
        raise InventoryError("--node must name the node (fake device IDs are <node>-gpu-<i>)")
    longest = f"{node}-gpu-{count - 1}"
    if len(longest) > MAX_ID_LEN:
        raise InventoryError(f"fake device ID {longest!r} is {len(longest)} characters; the kubelet allows "
                             f"{MAX_ID_LEN} (use a shorter --node)")
    label = product_label(model)
    return Inventory(gpus=tuple(Gpu(id=f"{node}-gpu-{i}", model=label) for i in range(count)), real=False)


def nvidia_smi_path() -> str | None:
    return shutil.which("nvidia-smi")


def query_nvidia_smi(timeout_s: float = 20.0, fields: str = _QUERY) -> str:
    """``nvidia-smi``'s CSV of the GPUs' ``fields`` (default index, UUID, name, PCI bus ID), or
    :class:`InventoryError`."""
    smi = nvidia_smi_path()
    if smi is None:
        raise InventoryError("nvidia-smi not found on PATH: no NVIDIA driver on this machine")
    try:
        out = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InventoryError(f"{smi} --query-gpu failed: {exc}") from exc
    if out.returncode != 0:
        raise InventoryError(f"{smi} --query-gpu exited {out.returncode}: {(out.stderr or out.stdout).strip()}")
    return out.stdout


def proc_bus_id(bus_id: str) -> str:
    """nvidia-smi's ``00000000:18:00.0`` -> sysfs/procfs's ``0000:18:00.0`` (4-digit domain, lower case)."""
    domain, _, rest = bus_id.strip().partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}"


def _minor_number(proc_root: Path, bus_id: str) -> int | None:
    """``Device Minor:`` from ``/proc/driver/nvidia/gpus/<bus>/information`` (the N of /dev/nvidiaN,
    which is not always nvidia-smi's index)."""
    info = proc_root / "driver" / "nvidia" / "gpus" / proc_bus_id(bus_id) / "information"
    try:
        text = info.read_text()
    except OSError:
        return None
    match = re.search(r"^Device Minor:\s*(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _numa_node(sys_root: Path, bus_id: str) -> int | None:
    try:
        value = int((sys_root / "bus" / "pci" / "devices" / proc_bus_id(bus_id) / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def parse_gpus(csv: str, proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")) -> tuple[Gpu, ...]:
    """The GPUs in ``nvidia-smi --query-gpu=index,uuid,name,pci.bus_id --format=csv,noheader`` output."""
    gpus = []
    for lineno, line in enumerate(csv.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            raise InventoryError(f"nvidia-smi output line {lineno} is {line!r}; expected "
                                 f"'<index>, <uuid>, <name>, <pci bus id>'")
        index, uuid, name, bus_id = int(parts[0]), parts[1], parts[2], parts[3]
        minor = _minor_number(proc_root, bus_id)
        gpus.append(Gpu(id=uuid, model=product_label(name), minor=index if minor is None else minor,
                        numa_node=_numa_node(sys_root, bus_id)))
    return tuple(gpus)


def real_inventory(dev_root: Path = Path("/dev")) -> Inventory:
    """The machine's GPUs (every one: one plugin per machine is the normal case; with several real nodes
    on one machine each node's plugin would offer the same GPUs, which only makes sense with one node)."""
    gpus = parse_gpus(query_nvidia_smi())
    if not gpus:
        raise InventoryError("nvidia-smi lists no GPU")
    return Inventory(gpus=gpus, real=True, dev_root=dev_root)


def detect_real() -> Inventory | None:
    """The real inventory when this machine has NVIDIA GPUs, else None (the CLI's automatic mode)."""
    if nvidia_smi_path() is None:
        return None
    try:
        return real_inventory()
    except InventoryError:
        return None
