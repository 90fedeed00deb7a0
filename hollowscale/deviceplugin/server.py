"""The plugin's gRPC server: the kubelet's plugin-watcher Registration service and the DevicePlugin service
on one unix socket in ``<kubelet-root>/plugins_registry/``.

Why one socket, in that folder (checked in the v1.36.3 kubelet source, ``pkg/kubelet``):

* ``pluginmanager/pluginwatcher``: the kubelet watches ``<root>/plugins_registry`` (fsnotify, and a walk
  at start, so a plugin that was there first is found too); every unix socket whose name does not start
  with ``.`` is a plugin candidate.
* ``pluginmanager/operationexecutor/operation_generator.go``: it dials the socket, calls
  ``pluginregistration.Registration/GetInfo``, and if ``PluginInfo.endpoint`` is empty uses the socket's
  own path as the endpoint; the ``DevicePlugin`` type's handler (``cm/devicemanager/plugin/v1beta1/
  handler.go``) validates the versions (``v1beta1``) and that the name is an extended resource name, then
  ``connectClient`` dials the endpoint *as a unix path* and calls ``GetDevicePluginOptions`` and a
  long-lived ``ListAndWatch``; finally ``NotifyRegistrationStatus`` reports the outcome to the plugin.
  We return the socket's absolute path as the endpoint (the same thing, said explicitly), so one socket
  serves both services.
* Removing the socket makes the watcher deregister the plugin; the end of the ListAndWatch stream makes the
  device manager mark every device unhealthy (``PluginDisconnected``), so ``allocatable`` drops to 0 at
  once while ``capacity`` keeps the count until the 5-minute grace period ends.
* The legacy path (dialing ``/var/lib/kubelet/device-plugins/kubelet.sock`` and calling
  ``v1beta1.Registration/Register``) is not used: that path is hard-coded in the kubelet
  (``devicemanager.NewManagerImpl``) and shared by every kubelet on this machine, and each kubelet wipes
  that folder at start.  The plugin-watcher path is per kubelet root.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from hollowscale.deviceplugin._generated import deviceplugin_v1beta1_pb2 as dp
from hollowscale.deviceplugin._generated import deviceplugin_v1beta1_pb2_grpc as dp_grpc
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2 as reg
from hollowscale.deviceplugin._generated import pluginregistration_v1_pb2_grpc as reg_grpc
from hollowscale.deviceplugin.allocation import AllocationError, DriverFiles, allocate, preferred
from hollowscale.deviceplugin.inventory import HEALTHY, UNHEALTHY, Inventory

log = logging.getLogger("hollowscale.deviceplugin")

API_VERSION = "v1beta1"
PLUGIN_TYPE = "DevicePlugin"  # pluginwatcher/api: the type the device manager's handler is registered for
REGISTRY_DIR = "plugins_registry"  # kubelet: config.DefaultKubeletPluginsRegistrationDirName
#: sun_path is 108 bytes with its terminating NUL; the kubelet's Go dialer has the same limit
MAX_SOCKET_PATH = 107


class PluginError(RuntimeError):
    """The plugin cannot start (bad kubelet root, socket path too long, socket served by another process)."""


@dataclass(frozen=True)
class PluginSettings:
    """Where the plugin serves.

    Attributes:
        kubelet_root: the kubelet's root dir as this process sees it (the socket goes in its registry).
        node: the node's name.
        resource: the extended resource advertised.
        kubelet_view: the same dir as the kubelet sees it, when the kubelet runs in another mount namespace
            (a kind node container, into which ``<kubelet_root>/plugins_registry`` is mounted); the endpoint
            handed to the kubelet is under it.  None: the kubelet sees what this process sees.
    """

    kubelet_root: Path
    node: str
    resource: str = "nvidia.com/gpu"
    kubelet_view: Path | None = None

    @property
    def endpoint(self) -> str:
        """The socket's path as the kubelet dials it."""
        if self.kubelet_view is None:
            return str(self.socket_path)
        return str(self.kubelet_view / REGISTRY_DIR / self.socket_path.name)

    @property
    def registry_dir(self) -> Path:
        return self.kubelet_root / REGISTRY_DIR

    @property
    def socket_path(self) -> Path:
        """``<root>/plugins_registry/nvidia.com_gpu.sock``: one plugin per resource per kubelet."""
        return self.registry_dir / (self.resource.replace("/", "_") + ".sock")


class DeviceState:
    """The devices' health, shared by every ListAndWatch stream; each change bumps a version the streams
    wait on, so a health change reaches the kubelet at once."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._unhealthy: dict[str, frozenset[str]] = {}  # source (a file, a probe, a test) -> IDs
        self._version = 0
        self._stopping = False
        self._cond = threading.Condition()

    def set_unhealthy(self, source: str, ids: set[str] | frozenset[str]) -> None:
        """``source`` now reports ``ids`` unhealthy (replacing what it said before); IDs this node does not
        have are ignored with a warning."""
        known = set(self.inventory.ids)
        unknown = set(ids) - known
        if unknown:
            log.warning("%s names unknown device IDs %s (this plugin has %s)", source, sorted(unknown),
                        self.inventory.ids)
        new = frozenset(set(ids) & known)
        with self._cond:
            if self._unhealthy.get(source, frozenset()) == new:
                return
            self._unhealthy[source] = new
            self._version += 1
            self._cond.notify_all()
        log.info("health from %s: unhealthy %s", source, sorted(new) or "none")

    def unhealthy(self) -> set[str]:
        with self._cond:
            return set().union(*self._unhealthy.values()) if self._unhealthy else set()

    def devices(self) -> list[dp.Device]:
        bad = self.unhealthy()
        out = []
        for gpu in self.inventory.gpus:
            device = dp.Device(ID=gpu.id, health=UNHEALTHY if gpu.id in bad else HEALTHY)
            if gpu.numa_node is not None:
                device.topology.nodes.add(ID=gpu.numa_node)
            out.append(device)
        return out

    @property
    def version(self) -> int:
        with self._cond:
            return self._version

    @property
    def stopping(self) -> bool:
        with self._cond:
            return self._stopping

    def wait_change(self, seen: int, timeout_s: float) -> int:
        """Block until the version moves past ``seen``, the plugin stops, or ``timeout_s`` passes."""
        with self._cond:
            self._cond.wait_for(lambda: self._version != seen or self._stopping, timeout=timeout_s)
            return self._version

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()


class DevicePluginService(dp_grpc.DevicePluginServicer):
    """``v1beta1.DevicePlugin``: what the kubelet's device manager calls."""

    def __init__(self, state: DeviceState, driver: DriverFiles | None = None) -> None:
        self.state = state
        self.driver = driver

    def GetDevicePluginOptions(self, request: dp.Empty, context: grpc.ServicerContext) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(self, request: dp.Empty, context: grpc.ServicerContext) -> Iterator[dp.ListAndWatchResponse]:
        """The full device list now, then again after every health change, until the client goes away or
        the plugin stops (the stream's end tells the kubelet the devices are gone)."""
        context.add_callback(self.state.wake)
        seen = self.state.version
        yield dp.ListAndWatchResponse(devices=self.state.devices())
        while context.is_active() and not self.state.stopping:
            now = self.state.wait_change(seen, timeout_s=5.0)
            if now != seen and not self.state.stopping and context.is_active():
                seen = now
                yield dp.ListAndWatchResponse(devices=self.state.devices())

    def Allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        response = dp.AllocateResponse()
        for creq in request.container_requests:
            try:
                share = allocate(self.state.inventory, list(creq.devices_ids), self.driver)
            except AllocationError as exc:
                log.error("Allocate refused: %s", exc)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            cresp = response.container_responses.add()
            cresp.envs.update(share.envs)
            for d in share.devices:
                cresp.devices.add(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for m in share.mounts:
                cresp.mounts.add(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            log.info("Allocate %s", ",".join(creq.devices_ids))
        return response

    def GetPreferredAllocation(self, request: dp.PreferredAllocationRequest,
                               context: grpc.ServicerContext) -> dp.PreferredAllocationResponse:
        response = dp.PreferredAllocationResponse()
        for creq in request.container_requests:
            ids = preferred(self.state.inventory, list(creq.available_deviceIDs), list(creq.must_include_deviceIDs),
                            creq.allocation_size)
            response.container_responses.add(deviceIDs=ids)
        return response

    def PreStartContainer(self, request: dp.PreStartContainerRequest,
                          context: grpc.ServicerContext) -> dp.PreStartContainerResponse:
        return dp.PreStartContainerResponse()  # never asked for: pre_start_required is false


class RegistrationService(reg_grpc.RegistrationServicer):
    """``pluginregistration.Registration``: what the kubelet's plugin watcher calls first."""

    def __init__(self, settings: PluginSettings) -> None:
        self.settings = settings
        self.registered = threading.Event()
        self.last_error = ""

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return reg.PluginInfo(type=PLUGIN_TYPE, name=self.settings.resource,
                              endpoint=self.settings.endpoint, supported_versions=[API_VERSION])

    def NotifyRegistrationStatus(self, request: reg.RegistrationStatus,
                                 context: grpc.ServicerContext) -> reg.RegistrationStatusResponse:
        if request.plugin_registered:
            self.last_error = ""
            self.registered.set()
            log.info("registered with the kubelet of node %s as %s", self.settings.node, self.settings.resource)
        else:
            self.last_error = request.error
            self.registered.clear()
            log.error("the kubelet refused the registration: %s", request.error)
        return reg.RegistrationStatusResponse()


def remove_stale_socket(path: Path) -> None:
    """A socket left by a plugin that died is removed; one that still answers is refused."""
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_socket():
        raise PluginError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise PluginError(f"cannot tell whether {path} is served: {exc}") from exc
        path.unlink(missing_ok=True)
        log.info("removed stale socket %s", path)
        return
    finally:
        probe.close()
    raise PluginError(f"{path} is served by another process (another plugin for this node is running)")


class PluginServer:
    """Both services on ``settings.socket_path``; :meth:`start` puts the socket where the kubelet looks,
    :meth:`stop` removes it and ends every stream."""

    def __init__(self, settings: PluginSettings, inventory: Inventory, driver: DriverFiles | None = None) -> None:
        self.settings = settings
        self.state = DeviceState(inventory)
        self.device_plugin = DevicePluginService(self.state, driver)
        self.registration = RegistrationService(settings)
        self._server: grpc.Server | None = None

    def start(self) -> None:
        root = self.settings.kubelet_root
        if not root.is_dir():
            raise PluginError(f"kubelet root dir {root} does not exist (--kubelet-root must be the kubelet's --root-dir)")
        path = self.settings.socket_path
        if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
            raise PluginError(f"socket path {path} is {len(os.fsencode(str(path)))} bytes; unix sockets allow "
                              f"{MAX_SOCKET_PATH} (use a shorter kubelet root dir)")
        self.settings.registry_dir.mkdir(mode=0o750, exist_ok=True)
        remove_stale_socket(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="deviceplugin"))
        dp_grpc.add_DevicePluginServicer_to_server(self.device_plugin, server)
        reg_grpc.add_RegistrationServicer_to_server(self.registration, server)
        try:
            server.add_insecure_port(f"unix://{path}")
        except RuntimeError as exc:
            raise PluginError(f"cannot listen on {path}: {exc}") from exc
        server.start()
        self._server = server
        log.info("serving %s for node %s on %s: %d device(s) %s", self.settings.resource, self.settings.node, path,
                 len(self.state.inventory.gpus), self.state.inventory.ids)

    def stop(self, grace_s: float = 3.0) -> None:
        """Socket first (the watcher deregisters), then the streams end, then the server."""
        with contextlib.suppress(FileNotFoundError):
            self.settings.socket_path.unlink()
        self.state.stop()
        if self._server is not None:
            self._server.stop(grace_s).wait(grace_s + 2)
            self._server = None
        log.info("stopped; removed %s", self.settings.socket_path)

    def wait_registered(self, timeout_s: float) -> bool:
        return self.registration.registered.wait(timeout_s)
