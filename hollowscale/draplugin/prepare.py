"""NodePrepareResources for one claim: its allocation -> the devices the kubelet gets back, and the CDI spec
that says what each one puts into a container (pure).

The claim is the API's object (the kubelet sends only namespace, name and UID; the plugin reads the rest).
Only allocation results of this driver count (a claim may hold devices of several drivers); each must be
on this node's pool and name a device this node has.  Every result becomes one prepared device with one
CDI device ``k8s.<driver>/claim=<claim uid>-<device>[-<share id>]``, whose container edits are the device
plugin's answer for that GPU (:func:`hollowscale.deviceplugin.allocation.allocate`: ``NVIDIA_VISIBLE_DEVICES``
and ``HOLLOWSCALE_GPU_IDS`` = the GPU's UUID, ``HOLLOWSCALE_GPU_MODEL``; for a real GPU also its
``/dev/nvidia<minor>``, the control devices and the driver's libraries), plus ``HOLLOWSCALE_DRA_CLAIM``
(``<namespace>/<name>``) and, for a share of a GPU's memory, ``HOLLOWSCALE_GPU_MEMORY`` (the consumed
memory).  A container given several GPUs sees each GPU's variables from its own CDI device, so the last
one's ``NVIDIA_VISIBLE_DEVICES`` wins there (CDI replaces a variable that two devices set); one GPU per
claim request is what the workloads here ask for.

Sharing needs nothing special: two pods on one shared claim are one prepared claim (the kubelet prepares
a claim once, whatever the number of pods); two memory shares of one GPU are two claims naming the same
device with different share IDs, each prepared on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hollow.dra import DRIVER
from hollowscale.deviceplugin.allocation import AllocationError, DriverFiles, allocate
from hollowscale.draplugin.inventory import DraInventory

CDI_VERSION = "0.5.0"
_CDI_NAME = re.compile(r"[^A-Za-z0-9_.:-]")


class PrepareError(ValueError):
    """The claim cannot be prepared on this node; the message goes back to the kubelet (and the pod's events)."""


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as NodePrepareResources returns it."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    share_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"requests": list(self.requests), "pool": self.pool, "device": self.device,
                "cdi_ids": list(self.cdi_ids), "share_id": self.share_id}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PreparedDevice:
        return cls(requests=tuple(d["requests"]), pool=d["pool"], device=d["device"], cdi_ids=tuple(d["cdi_ids"]),
                   share_id=d.get("share_id"))


@dataclass(frozen=True)
class PreparedClaim:
    """A prepared claim: what the kubelet gets back and the CDI spec written for it (None: no device here)."""

    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    cdi_spec: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"uid": self.uid, "namespace": self.namespace, "name": self.name,
                "devices": [d.to_dict() for d in self.devices], "cdi_spec": self.cdi_spec}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PreparedClaim:
        return cls(uid=d["uid"], namespace=d["namespace"], name=d["name"],
                   devices=tuple(PreparedDevice.from_dict(x) for x in d["devices"]), cdi_spec=d.get("cdi_spec"))


def cdi_kind(driver: str = DRIVER) -> str:
    """The CDI kind (``vendor/class``) of the driver's devices: ``k8s.gpu.nvidia.com/claim``."""
    return f"k8s.{driver}/claim"


def cdi_device_name(claim_uid: str, device: str, share_id: str | None = None) -> str:
    name = f"{claim_uid}-{device}" + (f"-{share_id}" if share_id else "")
    return _CDI_NAME.sub("_", name)


def _request_names(request: str) -> tuple[str, ...]:
    """A result's request, and for a subrequest (``gpu/big``) also its main request: a container that names
    the main request gets the device whichever alternative was chosen."""
    main = request.split("/", 1)[0]
    return (request, main) if main != request else (request,)


def _edits(envs: dict[str, str], devices: list[dict[str, str]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    edits: dict[str, Any] = {"env": [f"{k}={v}" for k, v in sorted(envs.items())]}
    if devices:
        edits["deviceNodes"] = devices
    if mounts:
        edits["mounts"] = mounts
    return edits


def prepare_claim(claim: dict[str, Any], uid: str, *, node: str, inventory: DraInventory,
                  driver_files: DriverFiles | None = None, driver: str = DRIVER) -> PreparedClaim:
    """The prepared devices and CDI spec of ``claim`` (the API object) on ``node``; :class:`PrepareError`
    says why it cannot be prepared here."""
    meta = claim.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    if meta.get("uid") != uid:
        raise PrepareError(f"ResourceClaim {namespace}/{name} has UID {meta.get('uid')}, the kubelet asked for {uid} "
                           "(deleted and made again?)")
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise PrepareError(f"ResourceClaim {namespace}/{name} is not allocated")
    results = [r for r in ((allocation.get("devices") or {}).get("results") or []) if r.get("driver") == driver]
    devices = inventory.by_name()
    kind = cdi_kind(driver)
    prepared: list[PreparedDevice] = []
    cdi_devices: list[dict[str, Any]] = []
    for result in results:
        pool, dev, share = result.get("pool", ""), result.get("device", ""), result.get("shareID")
        if pool != node:
            raise PrepareError(f"ResourceClaim {namespace}/{name}: device {dev} is allocated from pool {pool!r}, "
                               f"this is node {node!r}")
        if dev not in devices:
            raise PrepareError(f"ResourceClaim {namespace}/{name}: device {dev} is not on node {node} "
                               f"(it has {', '.join(sorted(devices)) or 'none'})")
        gpu = devices[dev][1]
        try:
            share_of = allocate(inventory.gpus, [gpu.id], driver_files)
        except AllocationError as exc:
            raise PrepareError(f"ResourceClaim {namespace}/{name}: device {dev}: {exc}") from None
        envs = dict(share_of.envs)
        envs["HOLLOWSCALE_DRA_CLAIM"] = f"{namespace}/{name}"
        memory = (result.get("consumedCapacity") or {}).get("memory")
        if memory is not None:
            envs["HOLLOWSCALE_GPU_MEMORY"] = str(memory)
        cdi_name = cdi_device_name(uid, dev, share)
        cdi_devices.append({"name": cdi_name, "containerEdits": _edits(
            envs,
            [{"path": d.container_path, "hostPath": d.host_path, "permissions": d.permissions}
             for d in share_of.devices],
            [{"hostPath": m.host_path, "containerPath": m.container_path,
              "options": ["ro" if m.read_only else "rw", "nosuid", "nodev", "bind"]} for m in share_of.mounts])})
        prepared.append(PreparedDevice(requests=_request_names(result.get("request", "")), pool=pool, device=dev,
                                       cdi_ids=(f"{kind}={cdi_name}",), share_id=share))
    spec = {"cdiVersion": CDI_VERSION, "kind": kind, "devices": cdi_devices} if cdi_devices else None
    return PreparedClaim(uid=uid, namespace=namespace, name=name, devices=tuple(prepared), cdi_spec=spec)
