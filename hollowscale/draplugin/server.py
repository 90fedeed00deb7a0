"""The plugin's gRPC services: registration with the kubelet's plugin watcher, and the DRA service the
kubelet calls to prepare and unprepare claims.

Where and what (checked in the v1.36.3 kubelet, ``pkg/kubelet/pluginmanager`` and ``cm/dra/plugin``, and in
``k8s.io/dynamic-resource-allocation/kubeletplugin``, whose defaults these are):

* ``<kubelet-root>/plugins_registry/<driver>-reg.sock`` serves ``pluginregistration.Registration``:
  ``GetInfo`` answers type ``DRAPlugin``, name = the driver, endpoint = the DRA socket's absolute path,
  versions ``v1.DRAPlugin`` and ``v1beta1.DRAPlugin`` (the kubelet takes the first it supports; it
  refuses a plugin with none of them); ``NotifyRegistrationStatus`` tells whether the kubelet took it.
* ``<kubelet-root>/plugins/<driver>/dra.sock`` serves ``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`` and
  the same service of ``v1beta1`` (the same messages, less a device's ``share_id``): ``NodePrepareResources`` and
  ``NodeUnprepareResources``, each for a batch of claims (namespace, UID, name), answered per claim UID;
  an answer that leaves a claim out makes the kubelet call again.  Calls are served one at a time (as
  the Go helper's ``Serialize(true)`` default does).
* Removing the registration socket deregisters the plugin: the kubelet then deletes the driver's slices
  of the node after its wiping delay, unless the plugin comes back first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from hollow.dra import DRIVER
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2 as reg
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2_grpc as reg_grpc
from hollowscale.deviceplugin.allocation import DriverFiles
from hollowscale.deviceplugin.server import MAX_SOCKET_PATH, PluginError, remove_stale_socket
from hollowscale.draplugin import cdi
from hollowscale.draplugin._generated import dra_v1_pb2 as v1
from hollowscale.draplugin._generated import dra_v1_pb2_grpc as v1_grpc
from hollowscale.draplugin._generated import dra_v1beta1_pb2 as v1beta1
from hollowscale.draplugin._generated import dra_v1beta1_pb2_grpc as v1beta1_grpc
from hollowscale.draplugin.api import ApiError
from hollowscale.draplugin.checkpoint import Checkpoint
from hollowscale.draplugin.inventory import DraInventory
from hollowscale.draplugin.prepare import PreparedClaim, PrepareError, cdi_kind, prepare_claim

log = logging.getLogger("hollowscale.draplugin")

PLUGIN_TYPE = "DRAPlugin"  # pluginregistration/v1 constants.go: DRAPlugin
#: the services the plugin serves, newest first (the kubelet picks the first it supports)
SUPPORTED_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
REGISTRY_DIR = "plugins_registry"
PLUGINS_DIR = "plugins"

__all__ = ["DraPluginServer", "Driver", "PluginError", "PluginSettings"]

#: (namespace, uid, name) of one claim the kubelet sends
ClaimRef = tuple[str, str, str]
GetClaim = Callable[[str, str], "dict[str, Any] | None"]


@dataclass(frozen=True)
class PluginSettings:
    """Where the plugin's sockets and files go.

    Attributes:
        kubelet_root: the kubelet's ``--root-dir``.
        node: the node's name (its pool).
        driver: the driver name (the slices', the claims' results', the registration's).
        cdi_dir: where CDI spec files are written (``/var/run/cdi`` is the runtimes' default).
    """

    kubelet_root: Path
    node: str
    driver: str = DRIVER
    cdi_dir: Path = field(default=Path("/var/run/cdi"))

    @property
    def registry_dir(self) -> Path:
        return self.kubelet_root / REGISTRY_DIR

    @property
    def registration_socket(self) -> Path:
        return self.registry_dir / f"{self.driver}-reg.sock"

    @property
    def plugin_dir(self) -> Path:
        """The plugin's own dir: its DRA socket and its checkpoint."""
        return self.kubelet_root / PLUGINS_DIR / self.driver

    @property
    def plugin_socket(self) -> Path:
        return self.plugin_dir / "dra.sock"

    @property
    def checkpoint(self) -> Path:
        return self.plugin_dir / "checkpoint.json"


class Driver:
    """What NodePrepareResources and NodeUnprepareResources do, independent of the protobuf types."""

    def __init__(self, settings: PluginSettings, inventory: DraInventory, get_claim: GetClaim,
                 driver_files: DriverFiles | None = None) -> None:
        self.settings = settings
        self.inventory = inventory
        self.get_claim = get_claim
        self.driver_files = driver_files
        self.checkpoint = Checkpoint(settings.checkpoint)
        self.kind = cdi_kind(settings.driver)
        self._lock = threading.Lock()

    def restore(self) -> int:
        """Write again every checkpointed claim's CDI spec that is missing; how many were written."""
        written = 0
        for claim in self.checkpoint.all():
            if claim.cdi_spec and not cdi.spec_path(self.settings.cdi_dir, self.kind, claim.uid).exists():
                cdi.write_spec(self.settings.cdi_dir, claim.uid, claim.cdi_spec)
                written += 1
        return written

    def _prepare_one(self, namespace: str, uid: str, name: str) -> PreparedClaim:
        known = self.checkpoint.get(uid)
        if known is not None:  # a retry: the same answer, the CDI spec still there
            if known.cdi_spec and not cdi.spec_path(self.settings.cdi_dir, self.kind, uid).exists():
                cdi.write_spec(self.settings.cdi_dir, uid, known.cdi_spec)
            return known
        try:
            claim = self.get_claim(namespace, name)
        except ApiError as exc:
            raise PrepareError(f"cannot read ResourceClaim {namespace}/{name}: {exc}") from None
        if claim is None:
            raise PrepareError(f"ResourceClaim {namespace}/{name} not found")
        prepared = prepare_claim(claim, uid, node=self.settings.node, inventory=self.inventory,
                                 driver_files=self.driver_files, driver=self.settings.driver)
        if prepared.cdi_spec is not None:
            cdi.write_spec(self.settings.cdi_dir, uid, prepared.cdi_spec)
        self.checkpoint.put(prepared)
        return prepared

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PreparedClaim | str]:
        """Each claim's prepared devices, or the error that stopped it (by UID)."""
        out: dict[str, PreparedClaim | str] = {}
        with self._lock:
            for namespace, uid, name in claims:
                try:
                    out[uid] = prepared = self._prepare_one(namespace, uid, name)
                    log.info("prepared %s/%s (%s): %s", namespace, name, uid,
                             ", ".join(f"{d.device}{' share ' + d.share_id if d.share_id else ''}"
                                       for d in prepared.devices) or "no device of this driver")
                except (PrepareError, OSError) as exc:
                    out[uid] = str(exc)
                    log.error("prepare %s/%s (%s) failed: %s", namespace, name, uid, exc)
        return out

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, str]:
        """Each claim's error ('' when done; a claim never prepared, or already unprepared, is done)."""
        out: dict[str, str] = {}
        with self._lock:
            for namespace, uid, name in claims:
                try:
                    cdi.remove_spec(self.settings.cdi_dir, self.kind, uid)
                    gone = self.checkpoint.remove(uid)
                    out[uid] = ""
                    log.info("unprepared %s/%s (%s)%s", namespace, name, uid, "" if gone else ": was not prepared")
                except OSError as exc:
                    out[uid] = f"unprepare {namespace}/{name}: {exc}"
                    log.error("%s", out[uid])
        return out


def _refs(request: Any) -> list[ClaimRef]:
    return [(c.namespace, c.uid, c.name) for c in request.claims]


def _prepare_response(pb: Any, driver: Driver, request: Any) -> Any:
    response = pb.NodePrepareResourcesResponse()
    for uid, result in driver.prepare(_refs(request)).items():
        entry = response.claims[uid]
        if isinstance(result, str):
            entry.error = result
            continue
        for d in result.devices:
            device = entry.devices.add(request_names=list(d.requests), pool_name=d.pool, device_name=d.device,
                                       cdi_device_ids=list(d.cdi_ids))
            if d.share_id and "share_id" in device.DESCRIPTOR.fields_by_name:  # v1 only: v1beta1 has no shares
                device.share_id = d.share_id
    return response


def _unprepare_response(pb: Any, driver: Driver, request: Any) -> Any:
    response = pb.NodeUnprepareResourcesResponse()
    for uid, error in driver.unprepare(_refs(request)).items():
        response.claims[uid].error = error
    return response


class DraV1Service(v1_grpc.DRAPluginServicer):
    """``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        return _prepare_response(v1, self.driver, request)

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        return _unprepare_response(v1, self.driver, request)


class DraV1beta1Service(v1beta1_grpc.DRAPluginServicer):
    """``k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin`` (same messages, older package)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        return _prepare_response(v1beta1, self.driver, request)

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        return _unprepare_response(v1beta1, self.driver, request)


class RegistrationService(reg_grpc.RegistrationServicer):
    """``pluginregistration.Registration``: what the kubelet's plugin watcher calls first."""

    def __init__(self, settings: PluginSettings, on_registered: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.on_registered = on_registered
        self.registered = threading.Event()
        self.last_error = ""
        self.registrations = 0

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return reg.PluginInfo(type=PLUGIN_TYPE, name=self.settings.driver, endpoint=str(self.settings.plugin_socket),
                              supported_versions=list(SUPPORTED_VERSIONS))

    def NotifyRegistrationStatus(self, request: reg.RegistrationStatus,
                                 context: grpc.ServicerContext) -> reg.RegistrationStatusResponse:
        if request.plugin_registered:
            self.last_error = ""
            self.registrations += 1
            self.registered.set()
            log.info("registered with the kubelet of node %s as DRA driver %s", self.settings.node,
                     self.settings.driver)
            if self.on_registered is not None:
                self.on_registered()
        else:
            self.last_error = request.error
            self.registered.clear()
            log.error("the kubelet refused the registration: %s", request.error)
        return reg.RegistrationStatusResponse()


def _check_socket(path: Path) -> None:
    size = len(os.fsencode(str(path)))
    if size > MAX_SOCKET_PATH:
        raise PluginError(f"socket path {path} is {size} bytes; unix sockets allow {MAX_SOCKET_PATH} "
                          "(use a shorter kubelet root dir)")


class DraPluginServer:
    """The DRA service on the plugin socket, then the registration service in the plugin watcher's dir.
    :meth:`stop` removes the registration socket first (the kubelet deregisters), then the rest."""

    def __init__(self, settings: PluginSettings, driver: Driver,
                 on_registered: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.driver = driver
        self.registration = RegistrationService(settings, on_registered)
        self._servers: list[grpc.Server] = []

    def _serve(self, path: Path, add: Callable[[grpc.Server], None], name: str) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix=name))
        add(server)
        try:
            server.add_insecure_port(f"unix://{path}")
        except RuntimeError as exc:
            raise PluginError(f"cannot listen on {path}: {exc}") from exc
        server.start()
        self._servers.append(server)

    def start(self) -> None:
        s = self.settings
        if not s.kubelet_root.is_dir():
            raise PluginError(f"kubelet root dir {s.kubelet_root} does not exist "
                              "(--kubelet-root must be the kubelet's --root-dir)")
        for path in (s.plugin_socket, s.registration_socket):
            _check_socket(path)
        s.plugin_dir.mkdir(parents=True, mode=0o750, exist_ok=True)
        s.registry_dir.mkdir(mode=0o750, exist_ok=True)
        for path in (s.plugin_socket, s.registration_socket):
            remove_stale_socket(path)
        restored = self.driver.restore()
        if restored:
            log.info("wrote %d CDI spec(s) of checkpointed claims again", restored)

        def add_dra(server: grpc.Server) -> None:
            v1_grpc.add_DRAPluginServicer_to_server(DraV1Service(self.driver), server)
            v1beta1_grpc.add_DRAPluginServicer_to_server(DraV1beta1Service(self.driver), server)

        self._serve(s.plugin_socket, add_dra, "dra")
        self._serve(s.registration_socket,
                    lambda server: reg_grpc.add_RegistrationServicer_to_server(self.registration, server),
                    "dra-registration")
        log.info("serving DRA driver %s for node %s: %s (registration %s); %d device(s): %s; %d prepared claim(s)",
                 s.driver, s.node, s.plugin_socket, s.registration_socket, len(self.driver.inventory.devices),
                 ", ".join(d.name for d in self.driver.inventory.devices), len(self.driver.checkpoint.all()))

    def stop(self, grace_s: float = 3.0) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.settings.registration_socket.unlink()
        for server in reversed(self._servers):
            server.stop(grace_s).wait(grace_s + 2)
        self._servers.clear()
        with contextlib.suppress(FileNotFoundError):
            self.settings.plugin_socket.unlink()
        log.info("stopped; removed %s and %s", self.settings.registration_socket, self.settings.plugin_socket)

    def wait_registered(self, timeout_s: float) -> bool:
        return self.registration.registered.wait(timeout_s)
