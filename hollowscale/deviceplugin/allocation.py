"""What a container gets for the GPUs the kubelet allocated to it (the plugin's answer to Allocate).

Every container gets ``NVIDIA_VISIBLE_DEVICES`` (the IDs, comma-separated: what NVIDIA's plugin sets for
its container toolkit) and ``HOLLOWSCALE_GPU_IDS`` (the same IDs, for our own workloads and tests: a
runtime hook may rewrite NVIDIA's variable, nothing touches ours), plus ``HOLLOWSCALE_GPU_MODEL``.

A real GPU also needs its device files and the driver's user-space libraries inside the container.  This
project's real nodes run plain runc (no NVIDIA container runtime), so the plugin passes them itself, the
way NVIDIA's plugin does without the toolkit and GKE's does: ``/dev/nvidia<minor>`` of each allocated
GPU plus the shared ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools`` (those that exist)
as DeviceSpecs (the runtime creates the nodes and opens them in the device cgroup), and the driver's
compute libraries (``libcuda.so.1``, ``libnvidia-ml.so.1``, ...) and ``nvidia-smi`` bind-mounted read-only
under ``/usr/local/nvidia`` (the CUDA images' convention), with ``LD_LIBRARY_PATH`` pointing there and
``TRITON_LIBCUDA_PATH`` for Triton's compiler.  A pod that sets ``LD_LIBRARY_PATH`` itself wins (the
kubelet puts the plugin's variables before the container's own); it must then include
``/usr/local/nvidia/lib64``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hollowscale.deviceplugin.inventory import Inventory

CONTAINER_LIB_DIR = "/usr/local/nvidia/lib64"
CONTAINER_BIN_DIR = "/usr/local/nvidia/bin"
#: device files every real GPU container needs besides its own /dev/nvidia<minor>
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
#: the driver's compute libraries (the sonames NVIDIA's container toolkit mounts for the "compute"
#: capability; those this machine lacks are skipped)
DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
                    "libnvidia-nvvm.so.4", "libcudadebugger.so.1", "libnvidia-gpucomp.so")


class AllocationError(ValueError):
    """The kubelet asked for devices this plugin does not have (the pod then fails admission with it)."""


@dataclass(frozen=True)
class DeviceFile:
    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = True


@dataclass(frozen=True)
class ContainerAllocation:
    """One container's share of an AllocateResponse, independent of the protobuf types."""

    envs: dict[str, str]
    devices: tuple[DeviceFile, ...] = ()
    mounts: tuple[Mount, ...] = ()


@dataclass(frozen=True)
class DriverFiles:
    """The host's shared NVIDIA files, found once when a real plugin starts."""

    control_devices: tuple[str, ...] = ()  #: host paths of nvidiactl, nvidia-uvm(-tools) that exist
    libraries: dict[str, str] = field(default_factory=dict)  #: soname -> host path
    nvidia_smi: str | None = None


def parse_ldconfig(output: str) -> dict[str, str]:
    """``ldconfig -p`` -> soname -> host path, 64-bit entries only (x86-64, AArch64; the first one wins,
    as for the loader: 32-bit copies of libcuda would not load in a 64-bit process)."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        match = re.match(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
        if match and any(tag in match.group(2) for tag in ("x86-64", "AArch64", "64bit")):
            found.setdefault(match.group(1), match.group(3))
    return found


def find_driver_files(dev_root: Path = Path("/dev"), ldconfig_output: str | None = None,
                      libraries: Iterable[str] = DRIVER_LIBRARIES) -> DriverFiles:
    """The control device files under ``dev_root`` and the driver libraries the loader knows."""
    if ldconfig_output is None:
        ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
        try:
            ldconfig_output = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=20,
                                             check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            ldconfig_output = ""
    known = parse_ldconfig(ldconfig_output)
    return DriverFiles(
        control_devices=tuple(str(dev_root / d) for d in CONTROL_DEVICES if (dev_root / d).exists()),
        libraries={name: known[name] for name in libraries if name in known},
        nvidia_smi=shutil.which("nvidia-smi"),
    )


def allocate(inventory: Inventory, device_ids: Sequence[str], driver: DriverFiles | None = None) -> ContainerAllocation:
    """The container's envs, device files and mounts for ``device_ids``; :class:`AllocationError` names
    any ID this node does not have."""
    gpus = inventory.by_id()
    unknown = [d for d in device_ids if d not in gpus]
    if unknown:
        raise AllocationError(f"unknown device ID(s) {unknown}; this plugin has {inventory.ids}")
    if not device_ids:
        raise AllocationError("Allocate asked for no device")
    ids = ",".join(device_ids)
    envs = {"NVIDIA_VISIBLE_DEVICES": ids, "HOLLOWSCALE_GPU_IDS": ids,
            "HOLLOWSCALE_GPU_MODEL": gpus[device_ids[0]].model}
    if not inventory.real:
        return ContainerAllocation(envs=envs)
    driver = driver or DriverFiles()
    devices: list[DeviceFile] = []
    for device_id in device_ids:
        minor = gpus[device_id].minor
        if minor is not None:
            path = inventory.dev_root / f"nvidia{minor}"
            devices.append(DeviceFile(container_path=f"/dev/nvidia{minor}", host_path=str(path)))
    for host in driver.control_devices:
        devices.append(DeviceFile(container_path=f"/dev/{Path(host).name}", host_path=host))
    mounts = [Mount(container_path=f"{CONTAINER_LIB_DIR}/{name}", host_path=host)
              for name, host in sorted(driver.libraries.items())]
    if driver.nvidia_smi:
        mounts.append(Mount(container_path=f"{CONTAINER_BIN_DIR}/nvidia-smi", host_path=driver.nvidia_smi))
    if mounts:
        envs["LD_LIBRARY_PATH"] = CONTAINER_LIB_DIR
        envs["TRITON_LIBCUDA_PATH"] = CONTAINER_LIB_DIR
    return ContainerAllocation(envs=envs, devices=tuple(devices), mounts=tuple(mounts))


def preferred(inventory: Inventory, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """GetPreferredAllocation: the devices that must be included, then the lowest-numbered available
    ones (fills GPUs in order, so small pods pack onto the first GPUs and leave the rest contiguous)."""
    order = {d: i for i, d in enumerate(inventory.ids)}
    chosen = list(dict.fromkeys(must_include))
    rest = sorted((d for d in available if d not in chosen), key=lambda d: order.get(d, len(order)))
    chosen.extend(rest[: max(0, size - len(chosen))])
    return chosen
